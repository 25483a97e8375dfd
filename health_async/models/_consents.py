"""Consents: requests, artefacts (purpose, hi types, period, expiry, status), the PIN and auto-approval."""

from __future__ import annotations

__all__: list[str] = []
