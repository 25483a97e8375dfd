"""The requester's (HIU's) side: consent and subscription requests, the health data received."""

from __future__ import annotations

__all__: list[str] = []
