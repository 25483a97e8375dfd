"""The fake Scan & Share: a facility counter issuing tokens, the patient's share and its status, the answer."""

from __future__ import annotations

from typing import Final

from ._domain import Domain

__all__ = ["ROUTES", "FakeScanShare"]

ROUTES: Final[tuple[str, ...]] = ()


class FakeScanShare(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES
