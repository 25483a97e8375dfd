"""``client.webhook_subscriptions``: register, list and delete the URLs the service sends its webhooks to
(``connect-webhooks/webhooks.yml``: ``/notification/v1/connect/webhook/subscriptions``)."""

from __future__ import annotations

from ._base import Resource

__all__ = ["WebhookSubscriptions"]


class WebhookSubscriptions(Resource):
    """Webhook subscriptions (see the module)."""
