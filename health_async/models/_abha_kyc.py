"""The KYC upgrade and user-session flows of an ABHA: their steps and answers."""

from __future__ import annotations

__all__: list[str] = []
