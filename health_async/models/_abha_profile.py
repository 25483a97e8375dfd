"""The ABHA profile after registration: the profile, its update, the card and QR, search by mobile, pincode details."""

from __future__ import annotations

__all__: list[str] = []
