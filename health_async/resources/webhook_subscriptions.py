"""The old import path of :mod:`health_async.resources.webhooks.subscriptions`, kept so that code written for it still
works."""

from .webhooks.subscriptions import (
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
