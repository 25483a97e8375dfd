"""The fake webhook subscriptions (``connect-webhooks/webhooks.yml``)."""

from __future__ import annotations

from typing import Final

from ._domain import Domain

__all__ = ["ROUTES", "FakeWebhookSubscriptions"]

ROUTES: Final[tuple[str, ...]] = ()


class FakeWebhookSubscriptions(Domain):
    """State and routes (see the module docstring)."""

    ROUTES = ROUTES
