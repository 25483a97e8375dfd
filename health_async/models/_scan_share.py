"""Scan & Share at the registration counter: the share, its token, the profile a hospital receives."""

from __future__ import annotations

__all__: list[str] = []
