"""Verify and parse the service's signed webhooks: the records events (``rec.uploaded``, ``rec.srp``, ``rec.pii``,
``rec.classification``) and ABDM's (``abha.*``: :meth:`WebhookEvent.payload` gives each its typed ``data``; an
event this version does not know is still a :class:`WebhookEvent`, of kind ``UNKNOWN``, never an error).

Every webhook carries a header ``Eka-Webhook-Signature: t=<unix seconds>,v1=<hex>`` where the hex is
``HMAC-SHA256(secret, "<t>.<raw body>")``. :func:`verify` checks it and returns a typed :class:`WebhookEvent`::

    from health_async import webhooks

    event = webhooks.verify(raw_body, request.headers.get("Eka-Webhook-Signature"), secret)

:func:`aiohttp_handler` wraps it in a ready-made ``aiohttp.web`` handler; for ABDM's ``abha.*`` events,
:func:`abdm_handler` (aiohttp) and :func:`abdm_asgi` (ASGI: FastAPI, Starlette) also answer data requests.
Anything that does not verify raises :class:`~health_async.errors.WebhookSignatureError` (answer it with 400);
its message names what failed, never the secret or the body. The handlers also refuse a replay of a webhook they
have already processed, through a :class:`SeenStore` (default: a bounded :class:`InMemorySeenStore` per handler),
and answer one that comes while the first is still processed 503 with ``Retry-After`` (it may yet fail).
The ABDM receivers answer data requests and profile shares in the background until closed (``aclose()``);
from the moment closing begins they start no background work: a webhook that would need it, arriving during or
after the close, is answered 503 (its replay key forgotten, so the service's redelivery runs elsewhere or later).

Judgement calls:

* The signature is checked before the timestamp, so a forged request reads "no v1 signature matches" and only a
  genuine one can read "timestamp outside the tolerance" (which then points at a clock problem, not an attack).
* Several ``v1=`` values (the service rotating its key) and several secrets (you rotating yours) are accepted:
  the webhook verifies when any ``v1`` matches any secret. Other schemes (``v0=``, ``v2=``) are ignored, as a
  later scheme must not break this version. The header is refused when it has no ``t=``, more than one ``t=``,
  no ``v1=``, a ``v1=`` that is not 64 hex digits, an item without ``=`` or more than 16 ``v1=`` values.
* The timestamp must be within ``tolerance`` seconds of now, both ways (the vendor's guide uses 180 s).
  :func:`verify` stays stateless, so a replay inside that window still verifies there; :func:`aiohttp_handler`
  refuses it with its :class:`SeenStore` (see there for the replay key and the answer). A replay is the same
  signed request again; the service may also deliver one event more than once, re-signed: de-duplicate on
  (:attr:`WebhookEvent.event`, :attr:`WebhookEvent.transaction_id`, :attr:`WebhookEvent.status`) if that
  would hurt.
* Once the signature has proved the body genuine, only the event name is required; every other field is read
  when it has the documented type and is ``None`` otherwise (the whole body stays on :attr:`WebhookEvent.raw`),
  so a change in the service's payload never loses an event.
* The vendor's ``rec.srp`` example is not valid JSON (a trailing comma); the service sends JSON, so the body is
  parsed strictly.
"""

from ..models.webhooks._events import EventKind, ParsingStatus, WebhookEvent, parse_event
from ._abdm import DEFAULT_MAX_REQUESTS, AbdmHandler, Bundles, DataFetchCallback, ProfileShareCallback, abdm_handler
from ._asgi import AbdmAsgiApp, abdm_asgi
from ._link_otp import (
    DEFAULT_MAX_LINKS,
    OTP_DIGITS,
    InMemoryLinkOtpStore,
    LinkOtpStore,
    OtpCheck,
    OtpOutcome,
    PendingLink,
    new_otp,
)
from ._pages import DEFAULT_PAGE_TIMEOUT, IncompletePush, PushPages
from ._receiving import DEFAULT_CALLBACK_TIMEOUT, DEFAULT_CLAIM_LEASE, DEFAULT_EVENT_TIMEOUT, DEFAULT_MAX_BODY_SIZE
from ._records import aiohttp_handler
from ._seen import DEFAULT_MAX_SEEN, Claim, InMemorySeenStore, LeasingSeenStore, SeenStore
from ._signature import DEFAULT_TOLERANCE, SIGNATURE_HEADER, WebhookSecret, compute_signature, verify
from ._tokens import IST, TokenCounter
from ._user_linking import (
    DEFAULT_MAX_OTP_TRIES,
    DEFAULT_OFFER_TTL,
    DEFAULT_OTP_TTL,
    DiscoverCallback,
    LinkedCallback,
    LinkOtpSender,
)

__all__ = [
    "DEFAULT_CALLBACK_TIMEOUT",
    "DEFAULT_CLAIM_LEASE",
    "DEFAULT_EVENT_TIMEOUT",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_LINKS",
    "DEFAULT_MAX_OTP_TRIES",
    "DEFAULT_MAX_REQUESTS",
    "DEFAULT_MAX_SEEN",
    "DEFAULT_PAGE_TIMEOUT",
    "DEFAULT_OFFER_TTL",
    "DEFAULT_OTP_TTL",
    "DEFAULT_TOLERANCE",
    "IST",
    "OTP_DIGITS",
    "SIGNATURE_HEADER",
    "AbdmAsgiApp",
    "AbdmHandler",
    "Bundles",
    "Claim",
    "DataFetchCallback",
    "DiscoverCallback",
    "EventKind",
    "IncompletePush",
    "InMemoryLinkOtpStore",
    "InMemorySeenStore",
    "LeasingSeenStore",
    "LinkOtpSender",
    "LinkOtpStore",
    "LinkedCallback",
    "OtpCheck",
    "OtpOutcome",
    "ParsingStatus",
    "PendingLink",
    "ProfileShareCallback",
    "PushPages",
    "SeenStore",
    "TokenCounter",
    "WebhookEvent",
    "WebhookSecret",
    "abdm_asgi",
    "abdm_handler",
    "aiohttp_handler",
    "compute_signature",
    "new_otp",
    "parse_event",
    "verify",
]
