"""The fake patient's-app side of ABDM: providers, discover, link init (an OTP to the patient) and confirm."""

from __future__ import annotations

from typing import Final

from ._domain import Domain

__all__ = ["ROUTES", "FakeDiscover"]

ROUTES: Final[tuple[str, ...]] = ()


class FakeDiscover(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES
