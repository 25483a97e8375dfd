"""The fake KYC upgrade and user-session flows."""

from __future__ import annotations

from typing import Final

from ._domain import Domain

__all__ = ["ROUTES", "FakeAbhaKyc"]

ROUTES: Final[tuple[str, ...]] = ()


class FakeAbhaKyc(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES
