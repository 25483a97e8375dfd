"""The fake requester's side: requests, the HIU's key set, an HIP pushing encrypted data to the HIU."""

from __future__ import annotations

from typing import Final

from ._domain import Domain

__all__ = ["ROUTES", "FakeHiu"]

ROUTES: Final[tuple[str, ...]] = ()


class FakeHiu(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES
