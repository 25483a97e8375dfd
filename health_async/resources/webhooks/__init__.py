"""``client`` namespaces of webhooks: subscriptions.

The public names of this domain's resource modules; the resources themselves are also in
:mod:`health_async.resources`."""

from .subscriptions import (
    CONNECT_EVENTS,
    DOCUMENTED_EVENTS,
    MAX_URL_LENGTH,
    WebhookSubscriptions,
    check_events,
    check_signing_key,
    check_webhook_url,
)

__all__ = [
    "CONNECT_EVENTS",
    "DOCUMENTED_EVENTS",
    "MAX_URL_LENGTH",
    "WebhookSubscriptions",
    "check_events",
    "check_signing_key",
    "check_webhook_url",
]
