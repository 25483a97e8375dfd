"""The fake consents: requests and artefacts per patient, approve / deny / revoke, the consent PIN."""

from __future__ import annotations

from typing import Final

from ._domain import Domain

__all__ = ["ROUTES", "FakeConsents"]

ROUTES: Final[tuple[str, ...]] = ()


class FakeConsents(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES
