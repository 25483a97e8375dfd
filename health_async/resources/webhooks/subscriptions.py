"""``client.webhook_subscriptions``: register, list and delete the URLs the service sends its webhooks to
(``connect-webhooks/webhooks.yml``: ``/notification/v1/connect/webhook/subscriptions``)::

    created = await client.webhook_subscriptions.create(
        "https://hospital.example/webhooks/eka", ["abha.link_care_context", "abha.hip_data_fetch"]
    )
    store_secret(created.signing_key)              # what webhooks.aiohttp_handler(secret, ...) verifies with
    for sub in await client.webhook_subscriptions.list():
        print(sub.id, sub.url, sub.events)
    await client.webhook_subscriptions.delete(created.id)

**Checked before sending** (an :class:`~health_async.errors.InvalidRequest` naming the rule; nothing is sent):

* the URL (:func:`check_webhook_url`): an absolute ``https://`` URL with a host, at most 2,048 characters, with
  no user name or password (the service would store them and show them in every listing), no fragment, no
  whitespace or control characters. Plain ``http://`` only to a loopback host (``localhost``, ``127.0.0.1``,
  ``::1``), for development against the fake service, as the client's own ``base_url`` and ``webhooks serve
  --forward`` allow it: the deliveries carry health data and the signature does not hide it.
* the events (:func:`check_events`): at least one; each a documented event name (:data:`DOCUMENTED_EVENTS`: the
  library's :class:`~health_async.webhooks.EventKind` values and the connect-webhooks names, ``appointment.*``,
  ``prescription.*``, ``receipt.*``, ``user.delete``, ``v2rx.completed``); an :class:`EventKind` member is taken
  as its name. Duplicates are sent once.
* the signing key, when you give one (:func:`check_signing_key`): 16 to 256 printable ASCII characters, no spaces.

Judgement calls:

* **An unknown event name is refused** unless ``allow_unknown_events=True``: a typo (``abha.link_carecontext``)
  would otherwise register a subscription that never fires, and nothing would say so. The flag exists because
  the service adds events faster than this list; with it a name still has to look like one (dotted words).
* **Every subscription is signed.** The service signs deliveries only when a key was given at registration
  (``getting-started.mdx``); the library's receivers (:func:`~health_async.webhooks.aiohttp_handler`, ``webhooks
  serve``) refuse unsigned webhooks. So ``create`` sends your ``signing_key``, or generates one
  (:func:`secrets.token_urlsafe`, 32 bytes), and returns it once on
  :attr:`~health_async.models.WebhookSubscriptionCreated.signing_key` (hidden from ``repr``, never logged, never
  in an error). The service's listing also returns it (the vendor documents it there).
* ``protocol`` is sent as the URL's scheme (``"https"``, or ``"http"`` to a loopback host).

**Not idempotent**: ``create`` (a repeat registers the URL twice, or is refused as "already registered") and
``delete`` (as the task of removing one subscription: a repeat after a lost answer reads "not found") are sent
once: retried only when they cannot have reached the service, whatever the retry policy says. When one may have
taken effect (a timeout or reset after sending, a 5XX without the service's word) it raises
:class:`~health_async.errors.OutcomeUnknown`: :meth:`WebhookSubscriptions.list` tells whether it did. ``list`` is a
read, retried as any read.

**Errors.** A subscription that does not exist is a :class:`~health_async.errors.NotFoundError` from ``delete``:
the documented 404, and the documented 400 "requested webhook is not registered" too. Other refusals are
:class:`~health_async.errors.ApiError` (400 ``{"error": {"message", "code"}}``, e.g. "requested endpoint is
already registered"), :class:`~health_async.errors.AuthenticationError` for 401.
"""

from __future__ import annotations

import builtins
import re
import secrets
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, _is_loopback, path_segment
from ..._retry import RetryPolicy
from ..._routes import PATH_WEBHOOK_SUBSCRIPTION, PATH_WEBHOOK_SUBSCRIPTIONS
from ..._wire import structure
from ...errors import ApiError, InvalidArgumentType, InvalidRequest, NotFoundError
from ...models import WebhookSubscription, WebhookSubscriptionCreated, WebhookSubscriptionList
from ...models.webhooks._events import EventKind
from .._base import Resource

__all__ = [
    "CONNECT_EVENTS",
    "DOCUMENTED_EVENTS",
    "MAX_URL_LENGTH",
    "WebhookSubscriptions",
    "check_events",
    "check_signing_key",
    "check_webhook_url",
]

#: The event names of ``connect-webhooks`` (``webhooks.yml``'s examples and ``webhook-samples.mdx``).
CONNECT_EVENTS: Final[frozenset[str]] = frozenset(
    {
        "appointment.created",
        "appointment.updated",
        "prescription.created",
        "prescription.updated",
        "receipt.created",
        "receipt.updated",
        "user.delete",
        "v2rx.completed",
    }
)
#: Every event name ``create`` accepts without ``allow_unknown_events``: :class:`EventKind`'s and the above.
DOCUMENTED_EVENTS: Final[frozenset[str]] = CONNECT_EVENTS | {k.value for k in EventKind if k is not EventKind.UNKNOWN}
#: Longest URL accepted.
MAX_URL_LENGTH: Final = 2048

_EVENT_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}(?:\.[A-Za-z0-9_-]{1,64}){1,4}")
_UNSAFE_URL: Final = re.compile(r"[\x00-\x20\x7f]")
_SIGNING_KEY: Final = re.compile(r"[\x21-\x7e]{16,256}")
_MAX_EVENTS: Final = 100


def check_webhook_url(url: str) -> str:
    """``url`` if the service may be told to POST webhooks to it (see the module), else :class:`InvalidRequest`
    naming the rule."""
    if not isinstance(url, str):
        raise InvalidArgumentType(f"url must be a str, not {type(url).__name__}")
    if not url:
        raise InvalidRequest("url must not be empty")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(f"url must be at most {MAX_URL_LENGTH} characters")
    if _UNSAFE_URL.search(url):
        raise InvalidRequest("url must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise InvalidRequest("url must be an absolute https:// URL, like https://example.com/webhooks") from None
    if parts.scheme not in ("https", "http") or not host:
        raise InvalidRequest("url must be an absolute https:// URL with a host, like https://example.com/webhooks")
    if parts.username is not None or parts.password is not None:
        raise InvalidRequest("url must not carry a user name or password (the service would store and list them)")
    if parts.fragment or url.endswith("#"):
        raise InvalidRequest("url must not have a #fragment")
    if parts.scheme == "http" and not _is_loopback(host):
        raise InvalidRequest(
            "url uses plain http:// to a non-loopback host: use https:// (webhooks carry health data); plain http "
            "is accepted only to localhost, 127.0.0.1 or ::1, for development"
        )
    return url


def check_events(events: Iterable[str | EventKind], *, allow_unknown: bool = False) -> tuple[str, ...]:
    """The event names to send, in order, each once; :class:`InvalidRequest` for none, a name that is not
    documented (unless ``allow_unknown``) or does not look like one (dotted words)."""
    if isinstance(events, str | bytes | EventKind) or not isinstance(events, Iterable):
        raise InvalidArgumentType("events must be an iterable of event names (a list), not a single value")
    names: dict[str, None] = {}
    for index, event in enumerate(events):
        if index >= _MAX_EVENTS:
            raise InvalidRequest(f"events must name at most {_MAX_EVENTS} events")
        if isinstance(event, EventKind):
            if event is EventKind.UNKNOWN:
                raise InvalidRequest(f"events[{index}] is EventKind.UNKNOWN, which names no event")
            name = event.value
        elif isinstance(event, str):
            name = event
        else:
            raise InvalidArgumentType(f"events[{index}] must be a str or an EventKind, not {type(event).__name__}")
        if name not in DOCUMENTED_EVENTS:
            if not allow_unknown:
                raise InvalidRequest(
                    f"events[{index}] is not a documented event name (see DOCUMENTED_EVENTS); "
                    "pass allow_unknown_events=True to subscribe to a newer one"
                )
            if not _EVENT_NAME.fullmatch(name):
                raise InvalidRequest(f"events[{index}] must be a dotted event name, like abha.link_care_context")
        names[name] = None
    if not names:
        raise InvalidRequest("events must name at least one event")
    return tuple(names)


def check_signing_key(signing_key: str) -> str:
    """``signing_key`` if it is 16 to 256 printable ASCII characters without spaces; :class:`InvalidRequest`
    (never showing it) otherwise."""
    if not isinstance(signing_key, str):
        raise InvalidArgumentType(f"signing_key must be a str, not {type(signing_key).__name__}")
    if not _SIGNING_KEY.fullmatch(signing_key):
        raise InvalidRequest("signing_key must be 16 to 256 printable ASCII characters without spaces")
    return signing_key


def _is_not_registered(exc: ApiError) -> bool:
    """The documented 400 of a delete of an unknown id: ``{"error": {"message": "requested webhook is not
    registered"}}``."""
    body = exc.body
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return exc.status == 400 and isinstance(message, str) and "not registered" in message.lower()


class WebhookSubscriptions(Resource):
    """Webhook subscriptions (``/notification/v1/connect/webhook/subscriptions``): create, list, delete.

    Every method takes ``retry`` (this call's :class:`~health_async.RetryPolicy`; ``create`` and ``delete`` are
    never repeated once they may have reached the service, whatever it says) and ``timeout`` (seconds for the
    whole call, ``None`` for no limit). See the module for the rules and judgement calls.
    """

    @checked
    async def create(
        self,
        url: str,
        events: Iterable[str | EventKind],
        *,
        signing_key: str | None = None,
        allow_unknown_events: bool = False,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> WebhookSubscriptionCreated:
        """``POST /notification/v1/connect/webhook/subscriptions``: have the service POST ``events`` to ``url``.

        ``signing_key`` is the secret the deliveries are signed with (give your receiver's); ``None`` generates a
        new one. Either way it is returned once on the result's ``signing_key`` (hidden from ``repr``).
        ``allow_unknown_events`` lets through event names this version does not document.

        Checked before sending (nothing sent): the URL (https, or plain http only to a loopback host), the events
        (at least one, documented), the signing key. **Not idempotent**: sent once, never repeated once it may
        have reached the service.

        Raises:
            InvalidRequest: a rule above is broken (the message names it).
            OutcomeUnknown: the subscription may or may not have been made: check with :meth:`list`.
            ApiError: the service refused (400, e.g. "requested endpoint is already registered"): a definite no.
            AuthenticationError: 401.
            ResponseValidationError: the service answered 2XX without an id (the subscription exists: :meth:`list`
                finds it).
        """
        checked_url = check_webhook_url(url)
        names = check_events(events, allow_unknown=allow_unknown_events)
        key = secrets.token_urlsafe(32) if signing_key is None else check_signing_key(signing_key)
        body: dict[str, Any] = {
            "endpoint": checked_url,
            "event_names": builtins.list(names),
            "signing_key": key,
            "protocol": urlsplit(checked_url).scheme,
        }
        data = await self._send_once(
            "POST",
            PATH_WEBHOOK_SUBSCRIPTIONS,
            operation="webhook_subscription_create",
            route=PATH_WEBHOOK_SUBSCRIPTIONS,
            json=body,
            retry=retry,
            timeout=timeout,
        )
        created = structure(data, WebhookSubscriptionCreated, url=checked_url, events=names)
        if created.signing_key is None:  # the documented answer: {"id", "status"}; the key is the one sent
            created = attrs.evolve(created, signing_key=key)
        return created

    @checked
    async def list(
        self,
        *,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[WebhookSubscription, ...]:
        """``GET /notification/v1/connect/webhook/subscriptions``: every registered subscription (the answer's
        ``data``), in the service's order. A read: retried on transient failures.

        Raises:
            ResponseValidationError: the answer is not the documented ``{"data": [...]}`` (or an item has no id).
            AuthenticationError: 401.
        """
        data = await self._session.request(
            "GET",
            PATH_WEBHOOK_SUBSCRIPTIONS,
            operation="webhook_subscription_list",
            route=PATH_WEBHOOK_SUBSCRIPTIONS,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, WebhookSubscriptionList).subscriptions

    @checked
    async def delete(
        self,
        id: str,
        *,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``DELETE /notification/v1/connect/webhook/subscriptions/{id}``: stop the deliveries of one
        subscription.

        ``id`` must be one path segment (no ``/``, ``?``, ``#``, spaces; checked before sending). **Not
        idempotent**: sent once, never repeated once it may have reached the service.

        Raises:
            NotFoundError: no subscription with that id (the service's 404, or its 400 "requested webhook is not
                registered").
            OutcomeUnknown: it may or may not have been deleted: check with :meth:`list`.
            ApiError: any other refusal; AuthenticationError: 401.
        """
        segment = path_segment("id", id)
        operation = "webhook_subscription_delete"
        try:
            await self._send_once(
                "DELETE",
                PATH_WEBHOOK_SUBSCRIPTION.format(id=segment),
                operation=operation,
                route=PATH_WEBHOOK_SUBSCRIPTION,
                retry=retry,
                timeout=timeout,
            )
        except ApiError as exc:
            if isinstance(exc, NotFoundError) or not _is_not_registered(exc):
                raise
            raise NotFoundError(
                f"{operation}: no webhook subscription with that id (HTTP {exc.status})",
                status=exc.status,
                body=exc.body,
                headers=exc.headers,
                operation=operation,
            ) from exc
