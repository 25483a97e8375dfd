"""The fake ABHA profile after registration: profile (read, update, delete), card, QR, search, pincode."""

from __future__ import annotations

from typing import Final

from ._domain import Domain

__all__ = ["ROUTES", "FakeAbhaProfile"]

ROUTES: Final[tuple[str, ...]] = ()


class FakeAbhaProfile(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES
