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
have already accepted, through a :class:`SeenStore` (default: a bounded :class:`InMemorySeenStore` per handler).
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

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import heapq
import hmac
import re
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, runtime_checkable

import attrs
from aiohttp import web

from . import _json
from ._config import finite
from ._logging import logger
from ._tasks import keep, settle
from ._wire import WireEnum, epoch_datetime, structure
from .errors import HealthError, InvalidRequest, OutcomeUnknown, WebhookSignatureError
from .models._abdm import HealthDataRequest, LinkResult
from .models._abdm_events import EVENT_PAYLOADS, AbdmPayload, ProfileShare

if TYPE_CHECKING:
    from ._client import HealthClient

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_REQUESTS",
    "DEFAULT_MAX_SEEN",
    "DEFAULT_TOLERANCE",
    "IST",
    "SIGNATURE_HEADER",
    "AbdmAsgiApp",
    "AbdmHandler",
    "Bundles",
    "DataFetchCallback",
    "EventKind",
    "InMemorySeenStore",
    "ParsingStatus",
    "ProfileShareCallback",
    "SeenStore",
    "TokenCounter",
    "WebhookEvent",
    "WebhookSecret",
    "abdm_asgi",
    "abdm_handler",
    "aiohttp_handler",
    "compute_signature",
    "parse_event",
    "verify",
]

#: Name of the header that carries the timestamp and signature(s).
SIGNATURE_HEADER: Final = "Eka-Webhook-Signature"
#: Seconds a webhook's timestamp may differ from now (either way) and still verify; the vendor's guide uses 180.
DEFAULT_TOLERANCE: Final = 180
#: Largest body :func:`aiohttp_handler` reads by default (1 MiB); a larger one is answered 413.
DEFAULT_MAX_BODY_SIZE: Final = 1024 * 1024
#: Most entries an :class:`InMemorySeenStore` holds by default (a few tens of MB at most).
DEFAULT_MAX_SEEN: Final = 100_000

#: A signing secret, as text (encoded UTF-8) or bytes.
WebhookSecret: TypeAlias = str | bytes

#: India Standard Time (UTC+05:30): the day of a :class:`TokenCounter` by default.
IST: Final = dt.timezone(dt.timedelta(hours=5, minutes=30), "IST")
_TOKEN_TEXT: Final = re.compile(r"[^\x00-\x1f\x7f]+")  # no control characters

_MAX_SIGNATURES: Final = 16
_MAX_HEADER_LENGTH: Final = 4096
_MAX_TIMESTAMP_DIGITS: Final = 12
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_READ_CHUNK: Final = 64 * 1024


class EventKind(WireEnum):
    """The documented webhook events. ``UNKNOWN`` stands for any event name this version does not know."""

    #: A record was uploaded (``rec.uploaded``).
    UPLOADED = "rec.uploaded"
    #: Smart-report parsing progressed (``rec.srp``).
    SMART_REPORT = "rec.srp"
    #: PII extraction progressed (``rec.pii``).
    PII = "rec.pii"
    #: Document classification progressed (``rec.classification``).
    CLASSIFICATION = "rec.classification"
    #: ABDM: the outcome of a care-context link (``abha.link_care_context``; :meth:`WebhookEvent.link_result`).
    LINK_CARE_CONTEXT = "abha.link_care_context"
    #: ABDM: an HIU asks for a patient's records (``abha.hip_data_fetch``; :meth:`WebhookEvent.data_request`).
    HIP_DATA_FETCH = "abha.hip_data_fetch"
    #: ABDM: health data pushed to you as an HIU (``abha.hiu_data_push``).
    HIU_DATA_PUSH = "abha.hiu_data_push"
    #: ABDM: a consent changed (``abha.consent_update``).
    CONSENT_UPDATE = "abha.consent_update"
    #: ABDM: a patient shared their profile at your counter (``abha.hip_profile_share``, Scan & Share).
    HIP_PROFILE_SHARE = "abha.hip_profile_share"
    #: ABDM: an ABHA was created (``abha.created``).
    ABHA_CREATED = "abha.created"
    #: ABDM: a health locker was created (``abha.locker_created``).
    LOCKER_CREATED = "abha.locker_created"
    #: ABDM: a PHR app looks for a patient's care contexts (``abha.care_context_discover``).
    CARE_CONTEXT_DISCOVER = "abha.care_context_discover"
    #: ABDM: a discovered care context's link begins (``abha.care_context_discover_link_init``).
    DISCOVER_LINK_INIT = "abha.care_context_discover_link_init"
    #: ABDM: a discovered care context's link is confirmed (``abha.context_discover_link_confirm``, as spelled).
    DISCOVER_LINK_CONFIRM = "abha.context_discover_link_confirm"
    #: ABDM: a subscription changed (``abha.subscription_modified``).
    SUBSCRIPTION_MODIFIED = "abha.subscription_modified"
    #: ABDM: a subscription's notification (``abha.subscription_notify``).
    SUBSCRIPTION_NOTIFY = "abha.subscription_notify"
    UNKNOWN = "unknown"


class ParsingStatus(WireEnum):
    """State of a parsing event (``data.status`` of ``rec.srp``, ``rec.pii``, ``rec.classification``).

    ``UNKNOWN`` stands for a status this version does not know (never an error)."""

    INITIATED = "parsing_initiated"
    COMPLETE = "parsing_complete"
    ERROR = "parsing_error"
    UNKNOWN = "unknown"


@attrs.frozen
class WebhookEvent:
    """One verified webhook. Personal data (ids of people, the transaction id, ``data`` and ``raw``, which can
    hold PII such as names) is left out of ``repr``.

    Ids sent as JSON numbers are given as strings. Times are timezone-aware UTC datetimes (epoch seconds on the
    wire; a value in milliseconds is recognised).
    """

    #: Event name as sent (``rec.uploaded``, ``rec.srp``, ``rec.pii``, ``rec.classification``, or another).
    event: str
    #: Parsing state (``data.status``); ``None`` when the event carries none (``rec.uploaded``).
    status: ParsingStatus | None = None
    #: The document concerned (``data.document_id``).
    document_id: str | None = None
    #: The service that sent the event (``service``, e.g. ``rec``).
    service: str | None = None
    #: When the event happened (``event_time``).
    event_time: dt.datetime | None = None
    #: When the webhook was sent (``timestamp``; only some events carry it).
    timestamp: dt.datetime | None = None
    #: When the webhook was signed (the header's ``t=``); ``None`` for :func:`parse_event` without it.
    signed_at: dt.datetime | None = None
    #: Business the event belongs to (``business_id``).
    business_id: str | None = None
    #: API client the event belongs to (``client_id``).
    client_id: str | None = None
    #: Category of the document for ``rec.classification`` (``data.document_classification``: ``lab_report``,
    #: ``prescription``, ``discharge_summary``, ...).
    document_classification: str | None = None
    #: The patient's id in the service (``data.patient_id``). Hidden from ``repr``.
    patient_id: str | None = attrs.field(default=None, repr=False)
    #: The doctor's id (``data.doctor_id``). Hidden from ``repr``.
    doctor_id: str | None = attrs.field(default=None, repr=False)
    #: Care-context id of the document (``data.identifier``, smart report). Hidden from ``repr``.
    identifier: str | None = attrs.field(default=None, repr=False)
    #: Identifier of this transaction (``transaction_id``). Hidden from ``repr``.
    transaction_id: str | None = attrs.field(default=None, repr=False)
    #: The body's ``data`` object as received (``{}`` when absent): PII entries, FHIR data, anything else.
    #: Hidden from ``repr``; do not log it.
    data: dict[str, Any] = attrs.field(factory=dict, repr=False, hash=False)
    #: The whole decoded body as received. Hidden from ``repr``; do not log it.
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, hash=False)

    @property
    def kind(self) -> EventKind:
        """The documented event this is, or ``EventKind.UNKNOWN``."""
        return EventKind.from_wire(self.event)

    @property
    def is_abdm(self) -> bool:
        """An ABDM event (``service`` ``abdm``, or an ``abha.`` event name)."""
        return self.service == "abdm" or self.event.startswith("abha.")

    def link_result(self) -> LinkResult:
        """The typed ``data`` of an ``abha.link_care_context`` event (:class:`InvalidRequest` for another event;
        :class:`~health_async.errors.ResponseValidationError` when the data does not fit)."""
        self._expect(EventKind.LINK_CARE_CONTEXT)
        return structure(self.data, LinkResult)

    def payload(self) -> AbdmPayload | None:
        """The typed ``data`` of an ABDM event: the model :data:`~health_async.models.EVENT_PAYLOADS` names for
        it (:class:`~health_async.models.LinkResult`, :class:`~health_async.models.HealthDataRequest`,
        :class:`~health_async.models.ConsentUpdate`, ...; a field that does not fit is ``None``, never an error);
        ``None`` for an event without a model (the ``rec.*`` events, whose fields are on the event itself, and an
        event this version does not know: its ``data`` stays on :attr:`data`).

        Judgement call: the typed data is asked for, not parsed with every event: a webhook handler that only
        routes events pays nothing for models it does not use."""
        model = EVENT_PAYLOADS.get(self.event)
        if model is None:
            return None
        if model is HealthDataRequest:
            return self.data_request()
        return structure(self.data, model)

    def data_request(self) -> HealthDataRequest:
        """The typed ``data`` of an ``abha.hip_data_fetch`` event: answer it with
        ``client.abdm.push_health_data(request, bundles)`` (the event's ``transaction_id`` stands in when the
        data's is empty)."""
        self._expect(EventKind.HIP_DATA_FETCH)
        return HealthDataRequest.from_event(self.data, transaction_id=self.transaction_id)

    def _expect(self, kind: EventKind) -> None:
        if self.kind is not kind:
            raise InvalidRequest(f"this is not an {kind.value} event")


# ----------------------------------------------------------------------------------------------- verification


def compute_signature(body: bytes | bytearray | str, secret: WebhookSecret, timestamp: int | str) -> str:
    """The hex ``v1`` signature of ``body`` signed at ``timestamp``: ``HMAC-SHA256(secret, "<t>.<body>")``."""
    key = _secrets(secret)[0]
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | str):
        raise InvalidRequest("timestamp must be the unix time as an int or its decimal str")
    text = str(timestamp)
    if not (text.isascii() and text.lstrip("-").isdigit()):
        raise InvalidRequest("timestamp must be the unix time in ASCII digits")
    body_bytes = _body_bytes(body)
    if body_bytes is None:
        raise InvalidRequest("webhook body must be valid Unicode text when given as str")
    return _hex_hmac(key, text.encode("ascii"), body_bytes)


def verify(
    raw_body: bytes | bytearray | str,
    signature_header: str | None,
    secret: WebhookSecret | Sequence[WebhookSecret],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> WebhookEvent:
    """Check a webhook's signature and timestamp, then parse its body.

    Args:
        raw_body: the request body exactly as received (bytes; ``str`` is encoded UTF-8). Never a re-serialised
            JSON object: any change of whitespace or key order breaks the signature.
        signature_header: the value of the ``Eka-Webhook-Signature`` header, or ``None`` when absent.
        secret: the signing secret (``str`` or ``bytes``), or a sequence of them while rotating keys.
        tolerance: largest difference in seconds, either way, between the header's ``t=`` and now.
        now: the current unix time (for tests); default :func:`time.time`.

    Returns:
        The parsed :class:`WebhookEvent`.

    Raises:
        WebhookSignatureError: the header is missing or malformed, no ``v1`` matches any secret, the timestamp is
            outside the tolerance, or the body is not a JSON object with an ``event`` name.
        InvalidRequest: ``secret`` is empty or not str/bytes, or ``tolerance`` is not a non-negative number
            (a programming error, raised whatever the request).
    """
    keys = _secrets(secret)
    _check_tolerance(tolerance)
    body = _body_bytes(raw_body)
    if body is None:  # not the bytes any sender signed: refused like any other body that does not match
        raise WebhookSignatureError("webhook refused: the body (a str) is not the text of any bytes received")
    return _verify(body, signature_header, keys, tolerance, now)[0]


def _verify(
    body: bytes, signature_header: str | None, keys: tuple[bytes, ...], tolerance: float, now: float | None
) -> tuple[WebhookEvent, str, int]:
    """:func:`verify` on checked arguments: ``(event, replay key, signed unix time)``.

    The replay key is the ``v1`` signature of this ``t`` and body under the FIRST secret, computed here rather
    than taken from the header, so dropping, reordering or adding ``v1=`` values cannot make a replay look new.
    """
    t_text, signatures = _parse_header(signature_header)

    signed = t_text.encode("ascii")
    expected = [_hex_hmac(key, signed, body) for key in keys]
    if not any(hmac.compare_digest(e, s) for e in expected for s in signatures):
        raise WebhookSignatureError("webhook refused: no v1 signature matches the signing secret(s)")

    current = time.time() if now is None else now
    age = current - int(t_text)
    if age > tolerance:
        raise WebhookSignatureError(
            f"webhook refused: timestamp is {age:.0f} s old, outside the tolerance of {tolerance:g} s"
        )
    if -age > tolerance:
        raise WebhookSignatureError(
            f"webhook refused: timestamp is {-age:.0f} s in the future, outside the tolerance of {tolerance:g} s"
        )

    try:
        payload = _json.loads(body)
    except _json.JSONDecodeError:
        raise WebhookSignatureError("webhook refused: the body is not valid JSON") from None
    if type(payload) is not dict:
        raise WebhookSignatureError("webhook refused: the body is not a JSON object")
    return _event(payload, signed_at=_datetime(int(t_text))), expected[0], int(t_text)


def parse_event(payload: Mapping[str, Any]) -> WebhookEvent:
    """Build a :class:`WebhookEvent` from an already decoded body, WITHOUT checking any signature.

    Only for bodies you have verified yourself or that come from a trusted place (a queue your verified handler
    fed, a test). :attr:`WebhookEvent.signed_at` is ``None``.

    Raises:
        WebhookSignatureError: the payload is not a mapping with a non-empty ``event`` string.
    """
    if not isinstance(payload, Mapping):
        raise WebhookSignatureError("webhook refused: the body is not a JSON object")
    return _event(dict(payload), signed_at=None)


def _parse_header(header: str | None) -> tuple[str, list[str]]:
    """``(t as sent, [v1 hex lowercased, ...])``, or WebhookSignatureError naming the defect."""
    if header is None or (isinstance(header, str) and not header.strip()):
        raise WebhookSignatureError(f"webhook refused: missing {SIGNATURE_HEADER} header")
    if not isinstance(header, str):
        raise WebhookSignatureError(f"webhook refused: {SIGNATURE_HEADER} header is not text")
    if len(header) > _MAX_HEADER_LENGTH:
        raise WebhookSignatureError(f"webhook refused: {SIGNATURE_HEADER} header is too long")
    timestamps: list[str] = []
    signatures: list[str] = []
    for item in header.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise WebhookSignatureError(f"webhook refused: malformed {SIGNATURE_HEADER} header (an item has no '=')")
        key, value = key.strip(), value.strip()
        if key == "t":
            timestamps.append(value)
        elif key == "v1":
            signatures.append(value)
    if not timestamps:
        raise WebhookSignatureError(f"webhook refused: malformed {SIGNATURE_HEADER} header (no t= timestamp)")
    if len(timestamps) > 1:
        raise WebhookSignatureError(f"webhook refused: malformed {SIGNATURE_HEADER} header (more than one t=)")
    t_text = timestamps[0]
    if not (t_text.isascii() and t_text.isdigit() and len(t_text) <= _MAX_TIMESTAMP_DIGITS):
        raise WebhookSignatureError(
            f"webhook refused: malformed {SIGNATURE_HEADER} header (t= is not a unix time in seconds)"
        )
    if not signatures:
        raise WebhookSignatureError(f"webhook refused: malformed {SIGNATURE_HEADER} header (no v1= signature)")
    if len(signatures) > _MAX_SIGNATURES:
        raise WebhookSignatureError(f"webhook refused: malformed {SIGNATURE_HEADER} header (too many v1= values)")
    for s in signatures:
        if len(s) != 64 or not _HEX.issuperset(s):
            raise WebhookSignatureError(
                f"webhook refused: malformed {SIGNATURE_HEADER} header (a v1= value is not 64 hex digits)"
            )
    return t_text, [s.lower() for s in signatures]


def _hex_hmac(key: bytes, timestamp: bytes, body: bytes) -> str:
    mac = hmac.new(key, timestamp, hashlib.sha256)
    mac.update(b".")
    mac.update(body)
    return mac.hexdigest()


def _secrets(secret: object) -> tuple[bytes, ...]:
    """The secrets as bytes; InvalidRequest (never showing a secret) for an empty or mistyped one."""
    items: Sequence[object]
    if isinstance(secret, str | bytes | bytearray):
        items = (secret,)
    elif isinstance(secret, Sequence):
        items = secret
    else:
        raise InvalidRequest("webhook secret must be a str or bytes, or a sequence of them")
    if not items:
        raise InvalidRequest("webhook secret must not be an empty sequence")
    keys = []
    for item in items:
        if isinstance(item, str):
            try:
                key = item.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidRequest("webhook secret must be valid Unicode text (or bytes)") from None
        elif isinstance(item, bytes | bytearray):
            key = bytes(item)
        else:
            raise InvalidRequest("webhook secret must be a str or bytes, or a sequence of them")
        if not key:
            raise InvalidRequest("webhook secret must not be empty")
        keys.append(key)
    return tuple(keys)


def _check_tolerance(tolerance: object) -> None:
    seconds = finite(tolerance)
    if seconds is None or seconds < 0:
        raise InvalidRequest("tolerance must be a non-negative finite number of seconds")


def _body_bytes(body: object) -> bytes | None:
    """The body's bytes; ``None`` for a ``str`` that is the text of no bytes (a lone surrogate). A ``str`` decoded
    with ``surrogateescape`` (as some frameworks do for bytes that are not UTF-8) gives back the bytes received."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        try:
            return body.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return None
    raise InvalidRequest("webhook body must be the raw bytes (or str) as received")


# ----------------------------------------------------------------------------------------------- parsing


def _event(payload: dict[str, Any], *, signed_at: dt.datetime | None) -> WebhookEvent:
    name = payload.get("event")
    if type(name) is not str or not name:
        raise WebhookSignatureError("webhook refused: the body has no 'event' name")
    data = payload.get("data")
    if type(data) is not dict:
        data = {}
    status = data.get("status")
    return WebhookEvent(
        event=name,
        status=ParsingStatus.from_wire(status) if type(status) is str else None,
        document_id=_id(data.get("document_id")),
        service=_id(payload.get("service")),
        event_time=_time(payload.get("event_time")),
        timestamp=_time(payload.get("timestamp")),
        signed_at=signed_at,
        business_id=_id(payload.get("business_id")),
        client_id=_id(payload.get("client_id")),
        document_classification=_id(data.get("document_classification")),
        patient_id=_id(data.get("patient_id")),
        doctor_id=_id(data.get("doctor_id")),
        identifier=_id(data.get("identifier")),
        transaction_id=_id(payload.get("transaction_id")),
        data=data,
        raw=payload,
    )


def _id(value: Any) -> str | None:
    if type(value) is str:
        return value
    if type(value) is int:  # ids sent as numbers
        return str(value)
    return None


def _time(value: Any) -> dt.datetime | None:
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or value < 0:
        return None
    return _datetime(value)


def _datetime(epoch: int) -> dt.datetime | None:
    return epoch_datetime(epoch)  # the library's one rule: seconds, or milliseconds; None when out of range


# ----------------------------------------------------------------------------------------------- replays


@runtime_checkable
class SeenStore(Protocol):
    """Where :func:`aiohttp_handler` remembers the webhooks it has accepted, to refuse a replay.

    The methods are ``async`` on purpose: a store shared by several processes (Redis ``SET key 1 NX PXAT``, a
    database row with a unique key) does I/O and must not block the event loop. An in-memory store just never
    awaits, which also makes its check-and-insert atomic under asyncio.

    The handler calls :meth:`add` only for a webhook whose signature and timestamp have verified (unsigned junk
    never reaches the store), and :meth:`discard` when the callback then failed or was cancelled, so that the
    service's next delivery of that webhook is processed. Keys are 64 lowercase hex digits (an HMAC under your
    secret, so they disclose nothing); namespace them yourself in a shared store.
    """

    async def add(self, key: str, expires_at: float) -> bool:
        """Record ``key`` until the unix time ``expires_at``, atomically: True when it was not there (the first
        delivery), False when it already was (a replay)."""
        ...

    async def discard(self, key: str) -> None:
        """Forget ``key`` (nothing happens when it is not there)."""
        ...


class InMemorySeenStore:
    """The default :class:`SeenStore`: a dict of key -> expiry plus a heap of expiries, in this process only.

    Bounded in time and size. An entry expires at the ``expires_at`` it was added with (the handler passes the
    signed time plus the tolerance: after that the timestamp check refuses the webhook anyway); expired entries
    are evicted from the heap's top on every :meth:`add`, O(log n) each. Under a flood it never holds more than
    ``max_entries``: the entry closest to expiry is evicted first. That can only weaken replay protection for
    someone who gets more than ``max_entries`` genuine signed webhooks within the tolerance window, whereas
    refusing new webhooks when full would drop the service's real events.

    Args:
        max_entries: most keys held (default :data:`DEFAULT_MAX_SEEN`).
        clock: the current unix time, for tests; default :func:`time.time`.
    """

    def __init__(self, *, max_entries: int = DEFAULT_MAX_SEEN, clock: Callable[[], float] = time.time) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise InvalidRequest("max_entries must be a positive number of entries")
        if not callable(clock):
            raise InvalidRequest("clock must be a function returning the unix time")
        self._max = max_entries
        self._clock = clock
        self._expiry: dict[str, float] = {}
        # (expires_at, key); entries whose key was discarded or re-added are stale and skipped when popped
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        """Keys held, expired ones not yet evicted included."""
        return len(self._expiry)

    async def add(self, key: str, expires_at: float) -> bool:
        """True and remember ``key`` until ``expires_at`` when it is new (or had expired), else False."""
        self._evict(self._clock())
        if key in self._expiry:
            return False
        while len(self._expiry) >= self._max:
            self._pop()
        self._expiry[key] = expires_at
        heapq.heappush(self._heap, (expires_at, key))
        if len(self._heap) > 2 * self._max:  # too many stale entries (discards): rebuild from the live ones
            self._heap = [(e, k) for k, e in self._expiry.items()]
            heapq.heapify(self._heap)
        return True

    async def discard(self, key: str) -> None:
        """Forget ``key``; its heap entry goes stale."""
        self._expiry.pop(key, None)

    def _evict(self, now: float) -> None:
        # an entry is live up to and including expires_at, as verify accepts an age equal to the tolerance
        while self._heap and self._heap[0][0] < now:
            self._pop()

    def _pop(self) -> None:
        """Drop the entry closest to expiry (skipping stale heap entries)."""
        while self._heap:
            expires_at, key = heapq.heappop(self._heap)
            if self._expiry.get(key) == expires_at:
                del self._expiry[key]
                return


# ----------------------------------------------------------------------------------------------- aiohttp


WebhookCallback: TypeAlias = Callable[[WebhookEvent], Awaitable[object]]


def aiohttp_handler(
    secret: WebhookSecret | Sequence[WebhookSecret],
    callback: WebhookCallback,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    seen_store: SeenStore | None = None,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """An ``aiohttp.web`` handler that verifies each webhook and passes it to ``await callback(event)``.

    ``app.router.add_post("/webhooks/eka", webhooks.aiohttp_handler(secret, on_event))``

    Answers:

    * 413 for a body over ``max_body_size`` bytes: refused from ``Content-Length`` before reading, and a chunked
      body is read at most ``max_body_size + 1`` bytes; the connection is then closed.
    * 400 for a webhook that does not verify (:func:`verify`); the reason is logged at WARNING, the answer
      itself says only that the webhook was refused.
    * 405 for a method other than POST.
    * 200 without calling the callback for a replay: a webhook that verifies but was already accepted (logged at
      WARNING). Judgement call: a replay is byte for byte a request this handler took (its callback ran or is
      running), so a 4xx would only tell a sender that retried after losing our answer that a processed event
      failed, and make it retry again; an attacker replaying it gains nothing from the 200, as nothing runs.
    * 500 when the callback raises, so that the service delivers again; logged at ERROR with the event name and
      the exception's type only (its message, like the event, may hold personal data). Also 500 when the seen
      store raises (a Redis outage is a server error; the webhook is not processed unchecked).
    * 200 once the callback has returned.

    Replays: ``seen_store`` (a :class:`SeenStore`; default a new :class:`InMemorySeenStore` for this handler)
    is asked only once the signature and timestamp have verified, and keeps each key until the signed time plus
    ``tolerance``, after which the timestamp check refuses the webhook anyway. The key is the webhook's
    signature (HMAC of ``t`` and the body under the first secret), not an id from the body: the documented
    events carry no id of their own, and ``transaction_id`` is shared by the several events about one document
    (``parsing_initiated`` then ``parsing_complete``; ``rec.srp``, ``rec.pii`` and ``rec.classification``), so
    keying on it would drop real events. A different event, or the same one re-signed at another second, is
    new. Share one store between processes (e.g. Redis) to refuse replays across them, and keep the same first
    secret in all of them. The key is forgotten when the callback fails or is cancelled, so a redelivery runs.

    ``secret``, ``tolerance``, ``max_body_size`` and ``seen_store`` are checked here, when the handler is built
    (:class:`~health_async.errors.InvalidRequest`). Cancellation (the client went away, the server shuts down)
    propagates. The callback should be quick (the service waits for the answer): hand long work to a queue.
    """
    keys = _secrets(secret)
    _check_tolerance(tolerance)
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
        raise InvalidRequest("max_body_size must be a positive number of bytes")
    if not callable(callback):
        raise InvalidRequest("callback must be an async function taking the WebhookEvent")
    store: SeenStore = InMemorySeenStore() if seen_store is None else seen_store
    if not isinstance(store, SeenStore):
        raise InvalidRequest("seen_store must have async add(key, expires_at) and discard(key) methods")

    async def handle(request: web.Request) -> web.Response:
        accepted = await _accept(_from_aiohttp(request), keys, tolerance, max_body_size, store)
        if isinstance(accepted, _Answer):
            return _to_aiohttp(accepted)
        event, key = accepted

        async def run() -> str:
            await callback(event)
            return "ok"

        return _to_aiohttp(await _run(store, key, event, run))

    return handle


#: What ``on_data_fetch`` returns: the FHIR bundle of each care context asked for (a dict, or its JSON).
Bundles: TypeAlias = Mapping[str, "dict[str, Any] | bytes | str"]
DataFetchCallback: TypeAlias = Callable[[HealthDataRequest], Awaitable[Bundles]]
#: What ``on_profile_share`` is: the token number of a Scan & Share (``None``: give none, answer nothing), e.g. a
#: :class:`TokenCounter`.
ProfileShareCallback: TypeAlias = Callable[[ProfileShare], Awaitable["str | int | None"]]
#: Data requests (transaction ids) an ABDM handler remembers, to ignore a redelivery (and as many profile shares).
DEFAULT_MAX_REQUESTS: Final = 10_000


class _AbdmReceiver:
    """What :class:`AbdmHandler` (aiohttp) and :class:`AbdmAsgiApp` (ASGI) share: the checks, ``on_event``, the
    data requests and profile shares answered in the background (a redelivery ignored), and :attr:`pending`,
    :meth:`join` and :meth:`aclose`. Each subclass only turns its framework's request into an :class:`_Incoming`
    and the :class:`_Answer` into its framework's response.

    Closing: :meth:`aclose` sets ``_closed`` first; from then :meth:`_spawn` starts no task and refuses the
    webhook with 503 instead (a request already past ``on_event`` is too; one that arrives later is refused
    before ``on_event``), so the tasks :meth:`aclose` cancels and awaits are all there will ever be. A webhook
    that needs no background work (on_event only) is still answered as before: it runs in the request, which
    the server owns."""

    def __init__(
        self,
        keys: tuple[bytes, ...],
        client: HealthClient,
        on_event: WebhookCallback | None,
        on_data_fetch: DataFetchCallback | None,
        on_profile_share: ProfileShareCallback | None,
        tolerance: float,
        max_body_size: int,
        store: SeenStore,
    ) -> None:
        self._keys, self._client, self._store = keys, client, store
        self._on_event, self._on_data_fetch, self._on_profile_share = on_event, on_data_fetch, on_profile_share
        self._tolerance, self._max_body_size = tolerance, max_body_size
        self._requests: dict[str, None] = {}  # transaction ids of data requests taken, oldest first
        self._shares: dict[str, None] = {}  # request ids of profile shares taken, oldest first
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False  # set when aclose() starts: no background work is started after it

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pending={len(self._tasks)})"

    @property
    def pending(self) -> int:
        """Data requests and profile shares being answered in the background."""
        return len(self._tasks)

    async def _respond(self, incoming: _Incoming) -> _Answer:
        """Answer one webhook request (see :func:`abdm_handler`)."""
        accepted = await _accept(incoming, self._keys, self._tolerance, self._max_body_size, self._store)
        if isinstance(accepted, _Answer):
            return accepted
        event, key = accepted

        async def run() -> str:
            if self._closed and self._needs_background(event):
                self._refuse(event)  # before on_event: the redelivery the 503 asks for runs it once
            if self._on_event is not None:
                await self._on_event(event)
            if event.kind is EventKind.HIP_PROFILE_SHARE:
                return self._take_share(event)
            return self._take(event) if event.kind is EventKind.HIP_DATA_FETCH else "ok"

        return await _run(self._store, key, event, run)

    def _needs_background(self, event: WebhookEvent) -> bool:
        """Whether answering ``event`` would start background work (a data request, a profile share)."""
        if event.kind is EventKind.HIP_DATA_FETCH:
            return self._on_data_fetch is not None
        return event.kind is EventKind.HIP_PROFILE_SHARE and self._on_profile_share is not None

    def _refuse(self, event: WebhookEvent) -> None:
        """Refuse ``event`` with a 503 (raises :class:`_Refused`): the receiver is closed and starts no work."""
        logger.warning("webhook %s refused with 503: the ABDM receiver is closed", _safe_event_name(event))
        raise _Refused(_CLOSED)

    def _take(self, event: WebhookEvent) -> str:
        """Start answering a data request in the background; the service gets its 200 at once."""
        if self._on_data_fetch is None:
            return "ok"
        try:
            request = event.data_request()
        except HealthError:
            logger.error("ABDM data request refused: its data does not fit a HealthDataRequest")
            return "data request not understood"
        if request.transaction_id in self._requests:
            logger.warning("ABDM data request redelivered: already being answered, ignored")
            return "duplicate data request ignored"
        self._spawn(event, self._answer(request))  # first: refused once closed, the id is not kept
        self._requests[request.transaction_id] = None
        while len(self._requests) > DEFAULT_MAX_REQUESTS:
            del self._requests[next(iter(self._requests))]
        return "accepted"

    def _spawn(self, event: WebhookEvent, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (answering ``event``) in the background, or refuse ``event`` with a 503 once closed."""
        if self._closed:
            work.close()  # never started: no "coroutine was never awaited" warning
            self._refuse(event)
        keep(self._tasks, work)

    def _take_share(self, event: WebhookEvent) -> str:
        """Start answering a profile share (Scan & Share) in the background; the service gets its 200 at once."""
        if self._on_profile_share is None:
            return "ok"
        try:
            share = event.payload()
        except HealthError:
            share = None
        if not isinstance(share, ProfileShare) or not share.request_id:
            logger.error("ABDM profile share refused: it carries no request id")
            return "profile share not understood"
        if share.request_id in self._shares:
            logger.warning("ABDM profile share redelivered: already being answered, ignored")
            return "duplicate profile share ignored"
        self._spawn(event, self._answer_share(event, share, share.request_id))  # first: as in _take
        self._shares[share.request_id] = None
        while len(self._shares) > DEFAULT_MAX_REQUESTS:
            del self._shares[next(iter(self._shares))]
        return "accepted"

    async def _answer_share(self, event: WebhookEvent, share: ProfileShare, request_id: str) -> None:
        assert self._on_profile_share is not None
        try:
            token = await self._on_profile_share(share)
            if token is None:
                logger.info("ABDM profile share not answered: on_profile_share gave no token")
                return
            await self._client.abha.answer_profile_share(event, token_number=token)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(exc, OutcomeUnknown):  # nothing reached the service: a redelivery may try again
                self._shares.pop(request_id, None)
            logger.error("ABDM profile share not answered: %s", type(exc).__name__)
            return
        logger.info("ABDM profile share answered with a token")

    async def _answer(self, request: HealthDataRequest) -> None:
        assert self._on_data_fetch is not None
        sent = False
        try:
            bundles = await self._on_data_fetch(request)
            sent = True  # from here a failure may leave pages pushed: a redelivery must not push twice
            result = await self._client.abdm.push_health_data(request, bundles)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not sent or isinstance(exc, InvalidRequest):
                self._requests.pop(request.transaction_id, None)  # nothing pushed: a redelivery may try again
            logger.error("ABDM data request not answered: %s", type(exc).__name__)
            return
        logger.info(
            "ABDM data request answered: %d care context(s) pushed, %d not found",
            len(result.pushed),
            len(result.missing),
        )

    async def join(self) -> None:
        """Wait until the answers under way have finished (a graceful shutdown; tests)."""
        await settle(self._tasks)

    async def aclose(self) -> None:
        """Close the receiver: from now on it starts no background work, and the answers under way are cancelled
        and waited for (nothing is left running when this returns; calling it again is harmless).

        A webhook that would start background work (a data request, a profile share) and arrives after this
        began, or was still in ``on_event`` when it began, is answered 503 (logged at WARNING with the event
        name only) and its replay key forgotten, so the service's redelivery runs, e.g. in the next process.
        If this is cancelled, what is left is cancelled too (not waited for) and the cancellation propagates.
        """
        self._closed = True
        try:
            await settle(self._tasks, cancel=True)
        except asyncio.CancelledError:
            for task in self._tasks:
                task.cancel()
            raise


class AbdmHandler(_AbdmReceiver):
    """An ``aiohttp.web`` handler for ABDM's webhooks; make one with :func:`abdm_handler`.

    Register it, and close it with the app (it may have pushes under way)::

        handler = webhooks.abdm_handler(secret, client=client, on_data_fetch=load_bundles)
        app.router.add_post("/webhooks/abdm", handler.handle)
        app.on_cleanup.append(handler.on_cleanup)

    (aiohttp takes a coroutine function as a handler, hence the bound method :meth:`handle`.) Also has
    :attr:`pending`, :meth:`join` and :meth:`aclose`, as :class:`AbdmAsgiApp`. Once :meth:`aclose` has begun
    (``on_cleanup`` runs after aiohttp's handlers finished; a direct call may not), a data request or profile
    share still in flight or arriving later is answered 503 and starts nothing; see :meth:`aclose`.
    """

    async def handle(self, request: web.Request) -> web.Response:
        """Answer one webhook request (see :func:`abdm_handler`)."""
        return _to_aiohttp(await self._respond(_from_aiohttp(request)))

    async def on_cleanup(self, app: web.Application) -> None:  # noqa: ARG002 - aiohttp's signature
        """:meth:`aclose`, in the form ``app.on_cleanup`` takes."""
        await self.aclose()


def _abdm_receiver_args(
    secret: WebhookSecret | Sequence[WebhookSecret],
    client: HealthClient,
    on_event: WebhookCallback | None,
    on_data_fetch: DataFetchCallback | None,
    on_profile_share: ProfileShareCallback | None,
    tolerance: float,
    max_body_size: int,
    seen_store: SeenStore | None,
) -> tuple[
    tuple[bytes, ...],
    HealthClient,
    WebhookCallback | None,
    DataFetchCallback | None,
    ProfileShareCallback | None,
    float,
    int,
    SeenStore,
]:
    """The checked arguments of :func:`abdm_handler` and :func:`abdm_asgi`, in :class:`_AbdmReceiver`'s order."""
    keys = _secrets(secret)
    _check_tolerance(tolerance)
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
        raise InvalidRequest("max_body_size must be a positive number of bytes")
    for name, callback in (
        ("on_event", on_event),
        ("on_data_fetch", on_data_fetch),
        ("on_profile_share", on_profile_share),
    ):
        if callback is not None and not callable(callback):
            raise InvalidRequest(f"{name} must be an async function")
    if client is None or not hasattr(client, "abdm"):
        raise InvalidRequest("client must be the HealthClient that pushes the data")
    store: SeenStore = InMemorySeenStore() if seen_store is None else seen_store
    if not isinstance(store, SeenStore):
        raise InvalidRequest("seen_store must have async add(key, expires_at) and discard(key) methods")
    return keys, client, on_event, on_data_fetch, on_profile_share, tolerance, max_body_size, store


def abdm_handler(
    secret: WebhookSecret | Sequence[WebhookSecret],
    *,
    client: HealthClient,
    on_event: WebhookCallback | None = None,
    on_data_fetch: DataFetchCallback | None = None,
    on_profile_share: ProfileShareCallback | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    seen_store: SeenStore | None = None,
) -> AbdmHandler:
    """An ``aiohttp.web`` handler for ABDM's webhooks (``abha.*``), with everything :func:`aiohttp_handler` checks
    (signature, timestamp, size, replays: the same answers), and a data request answered by one callback:

    * every verified event goes to ``await on_event(event)`` first, when given (500 if it raises, as there);
    * an ``abha.hip_data_fetch`` event is answered 200 at once (the service's webhook timeout is short), and in
      the background ``await on_data_fetch(request)`` gives the bundles, which
      ``client.abdm.push_health_data`` encrypts to the HIU's key and pushes (one page per bundle; an expired
      HIU key pushes nothing). A redelivered data request (the same transaction id, re-signed, so not a
      replay) is ignored while the first is answered or once it was; it is forgotten, so a redelivery runs
      again, only when nothing was pushed (``on_data_fetch`` failed, or the push was refused before sending).
      Outcomes are logged (counts and error types only: no health data, no ABHA address).
    * an ``abha.hip_profile_share`` event (Scan & Share: a patient scanned your counter's QR code) is answered 200
      at once, and in the background ``await on_profile_share(share)`` (the event's
      :class:`~health_async.models.ProfileShare`) gives the token number, which
      ``client.abha.answer_profile_share`` sends (``None``: no token, nothing sent). A redelivered share (the
      same request id) is ignored while the first is answered or once it was; it is forgotten, so a redelivery
      runs again, only when nothing reached the service (the callback failed, or the answer was refused or
      failed before or without reaching it; an answer of unknown outcome is not sent twice). A share without a
      request id cannot be answered (logged, 200). Outcomes are logged without the share's personal data or the
      token. :class:`TokenCounter` is a ready callback (one token per person
      per counter per day).

    Register :meth:`AbdmHandler.handle` (``app.router.add_post(path, handler.handle)``) and close it with the app
    (``app.on_cleanup.append(handler.on_cleanup)``) or ``await handler.aclose()``: the background answers under
    way are cancelled, and a data request or profile share arriving during or after the close (or still in
    ``on_event`` when it began) is answered 503, logged at WARNING with the event name only, its replay key
    forgotten so the service's redelivery runs; nothing is started after the close. For FastAPI, Starlette or
    another ASGI framework, :func:`abdm_asgi` is the same receiver as an ASGI application.
    """
    return AbdmHandler(
        *_abdm_receiver_args(
            secret, client, on_event, on_data_fetch, on_profile_share, tolerance, max_body_size, seen_store
        )
    )


# ----------------------------------------------------------------------------------------------- ASGI

# The ASGI 3 types, spelled as Starlette's (``starlette.types``), so that mypy takes the app where they are asked.
_Scope: TypeAlias = MutableMapping[str, Any]
_Message: TypeAlias = MutableMapping[str, Any]
_Receive: TypeAlias = Callable[[], Awaitable[_Message]]
_Send: TypeAlias = Callable[[_Message], Awaitable[None]]

_SIGNATURE_HEADER_KEY: Final = SIGNATURE_HEADER.lower().encode("ascii")
_MAX_CONTENT_LENGTH_DIGITS: Final = 18


class _ClientGone(Exception):
    """The ASGI server said ``http.disconnect`` before the whole body arrived."""


class AbdmAsgiApp(_AbdmReceiver):
    """An ASGI 3 application for ABDM's webhooks; make one with :func:`abdm_asgi`.

    The same receiver as :class:`AbdmHandler` (the same checks, answers, ``on_event``, background pushes and
    redelivery rule; the code is shared), called as ``await app(scope, receive, send)``, with :attr:`pending`,
    :meth:`join` and :meth:`aclose`. An ASGI server may run the lifespan shutdown (:meth:`aclose`) while
    requests are still in flight: a data request or profile share among them, or arriving after it, is answered
    503 and starts nothing, so no push outlives the shutdown; see :meth:`aclose`.
    """

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Serve one ASGI connection: an ``http`` request, or the ``lifespan`` (shutdown runs :meth:`aclose`).

        Raises:
            ValueError: any other scope type (``websocket``...), as the ASGI specification asks.
        """
        kind = scope.get("type")
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            raise ValueError("the ABDM webhook app serves only http requests (and the lifespan)")
        try:
            answer = await self._respond(_from_asgi(scope, receive))
        except _ClientGone:
            logger.debug("webhook request ended: the sender went away before its body arrived")
            return
        await _send_asgi(send, answer)

    async def _lifespan(self, receive: _Receive, send: _Send) -> None:
        while True:
            message = await receive()
            kind = message.get("type")
            if kind == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif kind == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _from_asgi(scope: _Scope, receive: _Receive) -> _Incoming:
    """The neutral request of an ASGI ``http`` scope; its body read from ``http.request`` messages."""
    declared: int | None = None
    signature: str | None = None
    seen_length = seen_signature = False
    for raw_name, value in scope.get("headers") or ():
        name = bytes(raw_name).lower()  # lowercase already, as ASGI asks; cheap to be sure
        if name == b"content-length" and not seen_length:
            seen_length = True
            declared = _content_length(bytes(value))
        elif name == _SIGNATURE_HEADER_KEY and not seen_signature:
            seen_signature = True
            signature = bytes(value).decode("latin-1")  # HTTP's header charset; a valid value is ASCII
    ended = False

    async def next_chunk() -> bytes | None:
        nonlocal ended
        while not ended:
            message = await receive()
            kind = message.get("type")
            if kind == "http.disconnect":
                raise _ClientGone
            if kind == "http.request":
                ended = not message.get("more_body", False)
                return bytes(message.get("body", b""))
        return None

    async def read(limit: int) -> bytes | None:
        return await _read_capped(next_chunk, limit)

    return _Incoming(str(scope.get("method", "")), declared, read, signature)


def _content_length(value: bytes) -> int | None:
    """The declared length; None when it is not a number (the streamed cap still holds)."""
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text) if len(text) <= _MAX_CONTENT_LENGTH_DIGITS else sys.maxsize


async def _send_asgi(send: _Send, answer: _Answer) -> None:
    body = answer.text.encode("utf-8")
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode("ascii"))]
    headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers]
    if answer.close:
        headers.append((b"connection", b"close"))  # the ASGI way to ask the server not to keep the connection
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def abdm_asgi(
    secret: WebhookSecret | Sequence[WebhookSecret],
    *,
    client: HealthClient,
    on_event: WebhookCallback | None = None,
    on_data_fetch: DataFetchCallback | None = None,
    on_profile_share: ProfileShareCallback | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    seen_store: SeenStore | None = None,
) -> AbdmAsgiApp:
    """:func:`abdm_handler` as a plain ASGI 3 application (FastAPI, Starlette, Litestar, Quart, any ASGI server),
    with no dependency on any of them: the same arguments, checks, answers and background pushes.

    FastAPI (Starlette alike)::

        from contextlib import asynccontextmanager
        from fastapi import FastAPI
        from health_async import webhooks

        abdm = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=load_bundles, on_event=log_event)

        @asynccontextmanager
        async def lifespan(app):
            yield
            await abdm.aclose()        # a mounted app gets no lifespan of its own: close it with yours

        app = FastAPI(lifespan=lifespan)
        app.mount("/webhooks/abdm", abdm)

    (For Starlette: ``Starlette(routes=[Mount("/webhooks/abdm", app=abdm)], lifespan=lifespan)``.) A mount
    serves ``/webhooks/abdm/`` and below: give the service the URL with the trailing slash, as Starlette
    answers ``/webhooks/abdm`` with a 307 redirect to it. For the exact path, add it as a route instead,
    ``app.add_route("/webhooks/abdm", abdm)`` (``Route("/webhooks/abdm", abdm)``): Starlette calls an object
    that is not a function as an ASGI app.

    It answers ``http`` requests as :meth:`AbdmHandler.handle` does (405 with ``Allow: POST`` for another
    method; 413 from ``Content-Length`` before reading, or once the ``http.request`` chunks pass
    ``max_body_size``, with ``Connection: close``; 400, 500, 200 as there). A sender that disconnects while its
    body is read gets nothing, and nothing runs. Served at the top (``uvicorn module:abdm``) it also takes the
    ``lifespan``: startup completes at once, shutdown runs :meth:`~AbdmAsgiApp.aclose` (pushes under way are
    cancelled; a data request or profile share during or after it is answered 503 and starts nothing) and then
    completes. Any other scope type raises ``ValueError``. Cancellation propagates.

    Design: the returned :class:`AbdmAsgiApp` is a class of its own rather than :class:`AbdmHandler` made
    callable, so each keeps only its framework's surface; both are built on one shared receiver (the checks and
    the ABDM logic exist once), and both have :attr:`~AbdmAsgiApp.pending`, :meth:`~AbdmAsgiApp.join` and
    :meth:`~AbdmAsgiApp.aclose`.
    """
    return AbdmAsgiApp(
        *_abdm_receiver_args(
            secret, client, on_event, on_data_fetch, on_profile_share, tolerance, max_body_size, seen_store
        )
    )


@attrs.frozen
class _Incoming:
    """What the checks need of one request, whatever the framework: the method, the declared ``Content-Length``
    (``None`` when absent), ``read(limit)`` giving the body or ``None`` once over ``limit`` bytes (the rest never
    read), and the signature header's value (``None`` when absent)."""

    method: str
    declared: int | None
    read: Callable[[int], Awaitable[bytes | None]]
    signature: str | None


@attrs.frozen
class _Answer:
    """A framework-neutral HTTP answer (plain text); ``close`` asks the server to close the connection."""

    status: int
    text: str
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False


_METHOD_NOT_ALLOWED: Final = _Answer(405, "method not allowed", (("Allow", "POST"),))
_TOO_LARGE: Final = _Answer(413, "webhook body too large", close=True)  # do not drain the rest of a huge body
_CLOSED: Final = _Answer(503, "webhook receiver closed")


class _Refused(Exception):
    """Raised by a ``work`` given to :func:`_run` to answer with :attr:`answer` instead (its key forgotten)."""

    def __init__(self, answer: _Answer) -> None:
        super().__init__(answer.text)
        self.answer = answer


async def _accept(
    incoming: _Incoming, keys: tuple[bytes, ...], tolerance: float, max_body_size: int, store: SeenStore
) -> tuple[WebhookEvent, str] | _Answer:
    """The verified, first-seen event of the request and its replay key, or the answer that refuses it (405, 413,
    400, a 500 when the seen store fails, a 200 for a replay): the checks every handler here makes."""
    if incoming.method != "POST":
        return _METHOD_NOT_ALLOWED
    declared = incoming.declared
    if declared is not None and declared > max_body_size:
        logger.warning("webhook refused: body of %d bytes is over the %d byte limit", declared, max_body_size)
        return _TOO_LARGE
    body = await incoming.read(max_body_size)
    if body is None:
        logger.warning("webhook refused: body is over the %d byte limit", max_body_size)
        return _TOO_LARGE
    try:
        event, key, signed = _verify(body, incoming.signature, keys, tolerance, None)
    except WebhookSignatureError as exc:
        logger.warning("%s", exc)
        return _Answer(400, "webhook refused")
    try:
        first = await store.add(key, signed + tolerance)
    except asyncio.CancelledError:
        # cancelled while a store that does I/O was adding the key: it may have been set, and this request will
        # not be processed: forget the key, so the service's redelivery is (judgement call: a delivery of the same
        # webhook arriving in that very moment could then be processed twice; otherwise it would be lost)
        with contextlib.suppress(Exception):
            await asyncio.shield(store.discard(key))
        raise
    except Exception as exc:
        logger.error("webhook replay check for %s failed: %s", _safe_event_name(event), type(exc).__name__)
        return _Answer(500, "webhook replay check failed")
    if not first:
        logger.warning("webhook replay of %s ignored: already accepted", _safe_event_name(event))
        return _Answer(200, "duplicate webhook ignored")
    return event, key


async def _run(store: SeenStore, key: str, event: WebhookEvent, work: Callable[[], Awaitable[str]]) -> _Answer:
    """200 with ``work``'s text once it returns; 500 when it raises (logged with the event name and the error's
    type only), or the answer of a :class:`_Refused` it raises (logged by whoever raised it), after forgetting
    ``key`` so a redelivery runs (also when cancelled, which propagates)."""
    done = False
    try:
        text = await work()
        done = True
    except asyncio.CancelledError:
        raise
    except _Refused as refused:
        return refused.answer
    except Exception as exc:
        logger.error("webhook callback for %s failed: %s", _safe_event_name(event), type(exc).__name__)
        return _Answer(500, "webhook callback failed")
    finally:
        if not done:
            await _forget(store, key)
    return _Answer(200, text)


async def _read_capped(next_chunk: Callable[[], Awaitable[bytes | None]], limit: int) -> bytes | None:
    """The body from ``next_chunk()`` (``None`` at its end), or None once more than ``limit`` bytes arrived (the
    rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while (chunk := await next_chunk()) is not None:
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


# aiohttp side of the neutral checks


def _from_aiohttp(request: web.Request) -> _Incoming:
    async def next_chunk() -> bytes | None:
        return await request.content.read(_READ_CHUNK) or None

    async def read(limit: int) -> bytes | None:
        return await _read_capped(next_chunk, limit)

    return _Incoming(request.method, request.content_length, read, request.headers.get(SIGNATURE_HEADER))


def _to_aiohttp(answer: _Answer) -> web.Response:
    response = web.Response(status=answer.status, text=answer.text, headers=dict(answer.headers) or None)
    if answer.close:
        response.force_close()
    return response


async def _forget(store: SeenStore, key: str) -> None:
    """Discard ``key`` after a failed callback; a store error is logged (type only), not raised over the 500."""
    try:
        await store.discard(key)
    except Exception as exc:
        logger.error("webhook seen store could not forget a failed webhook: %s", type(exc).__name__)


def _safe_event_name(event: WebhookEvent) -> str:
    """The event name for a log line: a documented name, else ``"an unknown event"`` (a name is text the sender
    chose; keep logs free of it)."""
    kind = event.kind
    return kind.value if kind is not EventKind.UNKNOWN else "an unknown event"


# ------------------------------------------------------------------------------------ Scan & Share tokens


_Identity = tuple[str, str]


class TokenCounter:
    """Hands out a counter's tokens in arrival order, one per person per counter per day: an in-memory
    ``on_profile_share`` callback for :func:`health_async.webhooks.abdm_handler`::

        counter = TokenCounter(prefix="A-")
        handler = webhooks.abdm_handler(secret, client=client, on_profile_share=counter)

    ``await counter(share)`` (or :meth:`token_for`) gives the :class:`~health_async.models.ProfileShare` its token:
    ``f"{prefix}{n}"``, ``n`` counting from ``first`` at each counter (the share's ``hip_id`` and ``hip_code``)
    each day.

    **A repeated scan** is recognised, and gets the token it got before, when the same person scans the same
    counter again the same day. The same person is the same ABHA address (compared without case or surrounding
    space) or the same ABHA number (digits only): a person with two ABHA addresses and one ABHA number is one
    person. The same share delivered again (the same request id) gets its token again too, even without either.
    Judgement calls: the Eka user id (``oid``) is not a person (a family may share one app account), so it is not
    compared; a share carrying neither an ABHA address, an ABHA number nor a request id seen before gets a new
    token; another counter, or the next day, gives a new token.

    **The day** is the calendar day in ``tz`` (default :data:`IST`); at its change every counter starts again from
    ``first`` and the day's memory is dropped (so it holds one day of shares at most). ``clock`` gives the current
    time (an aware datetime; default now), for tests.

    In this process only, and lost on restart: a hospital running several processes, or wanting tokens to survive
    a restart, keeps the count in its database instead (this class is the rule written small). Safe under asyncio
    (nothing is awaited between reading and writing the count). Holds no personal data in its ``repr``.

    Raises :class:`~health_async.errors.InvalidRequest` for a ``prefix`` that is not a str of at most 16
    characters without control characters, a ``first`` that is not a non-negative int, or a ``tz`` that is not a
    ``datetime.tzinfo``.
    """

    def __init__(
        self,
        *,
        prefix: str = "",
        first: int = 1,
        tz: dt.tzinfo = IST,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        if not isinstance(prefix, str) or len(prefix) > 16 or (prefix and not _TOKEN_TEXT.fullmatch(prefix)):
            raise InvalidRequest("prefix must be a str of at most 16 characters without control characters")
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise InvalidRequest("first must be a non-negative int")
        if not isinstance(tz, dt.tzinfo):
            raise InvalidRequest("tz must be a datetime.tzinfo")
        if clock is not None and not callable(clock):
            raise InvalidRequest("clock must be a function returning an aware datetime")
        self._prefix, self._first, self._tz = prefix, first, tz
        self._clock: Callable[[], dt.datetime] = clock or (lambda: dt.datetime.now(dt.UTC))
        self._day: dt.date | None = None
        self._next: dict[tuple[str, str], int] = {}  # (hip_id, counter id) -> the next number
        self._given: dict[tuple[str, str, _Identity], str] = {}  # (hip_id, counter id, who) -> their token

    def __repr__(self) -> str:
        return f"TokenCounter(day={self._day}, counters={len(self._next)})"

    async def __call__(self, share: ProfileShare) -> str:
        """The share's token (see the class): usable as ``on_profile_share``."""
        return self.token_for(share)

    def token_for(self, share: ProfileShare) -> str:
        """The token of ``share``: the one its person got at its counter today, else the counter's next one."""
        if not isinstance(share, ProfileShare):
            raise InvalidRequest("share must be a ProfileShare (the payload of an abha.hip_profile_share event)")
        self._roll()
        place = (share.hip_id or "", share.hip_code or "")
        who = _identities(share)
        for identity in who:
            token = self._given.get((*place, identity))
            if token is not None:
                break
        else:
            number = self._next.get(place, self._first)
            self._next[place] = number + 1
            token = f"{self._prefix}{number}"
        for identity in who:
            self._given.setdefault((*place, identity), token)
        return token

    def issued(self, counter_id: str | None = None, *, hip_id: str | None = None) -> int:
        """Tokens handed out today at one counter (``hip_code``; ``None``: shares without one) of ``hip_id``
        (``None``: shares without one)."""
        self._roll()
        return self._next.get((hip_id or "", counter_id or ""), self._first) - self._first

    def _roll(self) -> None:
        now = self._clock()
        if now.tzinfo is None:
            raise InvalidRequest("clock must return a timezone-aware datetime")
        day = now.astimezone(self._tz).date()
        if day != self._day:
            self._day = day
            self._next.clear()
            self._given.clear()


def _identities(share: ProfileShare) -> list[_Identity]:
    """What recognises the person (and the delivery) of a share: its ABHA address, its ABHA number, its request."""
    found: list[_Identity] = []
    if share.abha_address and share.abha_address.strip():
        found.append(("address", share.abha_address.strip().casefold()))
    digits = "".join(c for c in share.abha_number or "" if c.isdigit())
    if digits:
        found.append(("number", digits))
    if share.request_id:
        found.append(("request", share.request_id))
    return found
