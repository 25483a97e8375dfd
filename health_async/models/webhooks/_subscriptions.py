"""Webhook subscriptions (``connect-webhooks/webhooks.yml``): where the service sends its webhooks, and for which
events.

Wire names (``RegisterWebhookResponse``, ``WebhookResponse``, ``WebhookResponseList``) are declared beside the
readable fields: ``endpoint`` is :attr:`WebhookSubscription.url`, ``event_names`` is
:attr:`WebhookSubscription.events`. The signing key (``signing_key``) is a secret: it is left out of every
``repr`` (and of equality), never logged and never part of an error.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

import attrs

from ..._wire import empty_is_none, instant, local, non_empty, wire

__all__ = ["WebhookSubscription", "WebhookSubscriptionCreated", "WebhookSubscriptionList"]


@attrs.frozen
class WebhookSubscription:
    """One registered webhook (an item of ``GET /notification/v1/connect/webhook/subscriptions``).

    Only :attr:`id` is required; the service's audit fields that do not fit are read as not sent (a listing is
    never lost to one of them). :attr:`signing_key` is what the service holds for signing this webhook's
    deliveries (the vendor's listing returns it): hidden from ``repr``.
    """

    __wire_lenient__: ClassVar[bool] = True  # see health_async._wire: an optional field that does not fit is None

    #: The subscription's id: pass it to ``webhook_subscriptions.delete``.
    id: str = wire(parse=non_empty, strict=True)
    #: The URL the service POSTs the events to (wire ``endpoint``).
    url: str | None = wire("endpoint", default=None)
    #: The event names that trigger it (wire ``event_names``), e.g. ``("abha.link_care_context",)``.
    events: tuple[str, ...] = wire("event_names", default=())
    #: ``"https"``, ``"http"``, ... as the service records it.
    protocol: str | None = None
    #: The client id the subscription belongs to.
    client_id: str | None = None
    created_at: dt.datetime | None = wire(parse=instant, default=None)
    updated_at: dt.datetime | None = wire(parse=instant, default=None)
    #: Who created it: a user or a service (hidden from ``repr``: it can be a person's id).
    created_by: str | None = wire(pii=True, default=None)
    #: Who last changed it (hidden from ``repr``, as :attr:`created_by`).
    updated_by: str | None = wire(pii=True, default=None)
    #: The key the service signs deliveries with, or ``None`` (unsigned deliveries). A secret: not in ``repr``.
    signing_key: str | None = wire(parse=empty_is_none, default=None, repr=False, eq=False)

    @property
    def signed(self) -> bool:
        """Whether the service holds a signing key for it (its deliveries carry a signature)."""
        return self.signing_key is not None


@attrs.frozen
class WebhookSubscriptionList:
    """The answer of the listing (``{"data": [...], "msg": "success"}``); ``data`` missing or ``null`` is none."""

    subscriptions: tuple[WebhookSubscription, ...] = wire("data", default=())


@attrs.frozen
class WebhookSubscriptionCreated:
    """The answer of ``webhook_subscriptions.create`` (HTTP 201 ``{"id", "status"}``), with what was registered.

    :attr:`signing_key` is the key the deliveries will be signed with: the service's, if its answer carries one,
    else the key the client sent. It is given here once: keep it where your receiver reads its secret (it is hidden
    from ``repr``; the service's listing also returns it). :attr:`url` and :attr:`events` are what was sent.
    """

    #: The new subscription's id (for ``delete``).
    id: str = wire(parse=non_empty)
    #: The service's status text (``"success"``).
    status: str | None = None
    #: The URL registered (as sent).
    url: str = local(default="")
    #: The event names registered (as sent, duplicates removed).
    events: tuple[str, ...] = local(default=())
    #: The signing key of the deliveries. A secret: not in ``repr``.
    signing_key: str | None = wire(parse=empty_is_none, default=None, repr=False, eq=False)
