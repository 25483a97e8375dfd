"""Verify and parse the service's signed webhooks (``rec.uploaded``, ``rec.srp``, ``rec.pii``, ``rec.classification``).

Every webhook carries a header ``Eka-Webhook-Signature: t=<unix seconds>,v1=<hex>`` where the hex is
``HMAC-SHA256(secret, "<t>.<raw body>")``. :func:`verify` checks it and returns a typed :class:`WebhookEvent`::

    from health_async import webhooks

    event = webhooks.verify(raw_body, request.headers.get("Eka-Webhook-Signature"), secret)

:func:`aiohttp_handler` wraps it in a ready-made ``aiohttp.web`` handler. Anything that does not verify raises
:class:`~health_async.errors.WebhookSignatureError` (answer it with 400); its message names what failed, never
the secret or the body.

Judgement calls:

* The signature is checked before the timestamp, so a forged request reads "no v1 signature matches" and only a
  genuine one can read "timestamp outside the tolerance" (which then points at a clock problem, not an attack).
* Several ``v1=`` values (the service rotating its key) and several secrets (you rotating yours) are accepted:
  the webhook verifies when any ``v1`` matches any secret. Other schemes (``v0=``, ``v2=``) are ignored, as a
  later scheme must not break this version. The header is refused when it has no ``t=``, more than one ``t=``,
  no ``v1=``, a ``v1=`` that is not 64 hex digits, an item without ``=`` or more than 16 ``v1=`` values.
* The timestamp must be within ``tolerance`` seconds of now, both ways (the vendor's guide uses 180 s).
  Replays inside that window still verify: de-duplicate on (:attr:`WebhookEvent.event`,
  :attr:`WebhookEvent.transaction_id`, :attr:`WebhookEvent.status`) if a repeat would hurt, as the service may
  also deliver an event more than once.
* Once the signature has proved the body genuine, only the event name is required; every other field is read
  when it has the documented type and is ``None`` otherwise (the whole body stays on :attr:`WebhookEvent.raw`),
  so a change in the service's payload never loses an event.
* The vendor's ``rec.srp`` example is not valid JSON (a trailing comma); the service sends JSON, so the body is
  parsed strictly.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import hashlib
import hmac
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs
from aiohttp import web

from . import _json
from ._logging import logger
from .errors import InvalidRequest, WebhookSignatureError

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_TOLERANCE",
    "SIGNATURE_HEADER",
    "EventKind",
    "ParsingStatus",
    "WebhookEvent",
    "WebhookSecret",
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

#: A signing secret, as text (encoded UTF-8) or bytes.
WebhookSecret: TypeAlias = str | bytes

_MAX_SIGNATURES: Final = 16
_MAX_HEADER_LENGTH: Final = 4096
_MAX_TIMESTAMP_DIGITS: Final = 12
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_READ_CHUNK: Final = 64 * 1024


class EventKind(enum.Enum):
    """The documented webhook events. ``UNKNOWN`` stands for any event name this version does not know."""

    #: A record was uploaded (``rec.uploaded``).
    UPLOADED = "rec.uploaded"
    #: Smart-report parsing progressed (``rec.srp``).
    SMART_REPORT = "rec.srp"
    #: PII extraction progressed (``rec.pii``).
    PII = "rec.pii"
    #: Document classification progressed (``rec.classification``).
    CLASSIFICATION = "rec.classification"
    UNKNOWN = "unknown"

    @classmethod
    def from_wire(cls, value: str | None) -> EventKind:
        """The member for an event name; ``UNKNOWN`` for a name this version does not know (never an error)."""
        return _EVENT_KINDS.get(value, cls.UNKNOWN) if isinstance(value, str) else cls.UNKNOWN


_EVENT_KINDS: Final[dict[object, EventKind]] = {m.value: m for m in EventKind if m is not EventKind.UNKNOWN}


class ParsingStatus(enum.Enum):
    """State of a parsing event (``data.status`` of ``rec.srp``, ``rec.pii``, ``rec.classification``).

    ``UNKNOWN`` stands for a status this version does not know (never an error)."""

    INITIATED = "parsing_initiated"
    COMPLETE = "parsing_complete"
    ERROR = "parsing_error"
    UNKNOWN = "unknown"

    @classmethod
    def from_wire(cls, value: str) -> ParsingStatus:
        """The member for a wire value; ``UNKNOWN`` for a value this version does not know."""
        return _STATUSES.get(value, cls.UNKNOWN)


_STATUSES: Final[dict[str, ParsingStatus]] = {m.value: m for m in ParsingStatus if m is not ParsingStatus.UNKNOWN}


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


# ----------------------------------------------------------------------------------------------- verification


def compute_signature(body: bytes | bytearray | str, secret: WebhookSecret, timestamp: int | str) -> str:
    """The hex ``v1`` signature of ``body`` signed at ``timestamp``: ``HMAC-SHA256(secret, "<t>.<body>")``."""
    key = _secrets(secret)[0]
    return _hex_hmac(key, str(timestamp).encode("ascii"), _body_bytes(body))


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
    return _event(payload, signed_at=_datetime(int(t_text)))


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
            key = item.encode("utf-8")
        elif isinstance(item, bytes | bytearray):
            key = bytes(item)
        else:
            raise InvalidRequest("webhook secret must be a str or bytes, or a sequence of them")
        if not key:
            raise InvalidRequest("webhook secret must not be empty")
        keys.append(key)
    return tuple(keys)


def _check_tolerance(tolerance: object) -> None:
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float)
        or not math.isfinite(tolerance)
        or tolerance < 0
    ):
        raise InvalidRequest("tolerance must be a non-negative finite number of seconds")


def _body_bytes(body: object) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
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
    if epoch > 100_000_000_000:  # milliseconds
        epoch //= 1000
    try:
        return dt.datetime.fromtimestamp(epoch, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------- aiohttp


WebhookCallback: TypeAlias = Callable[[WebhookEvent], Awaitable[object]]


def aiohttp_handler(
    secret: WebhookSecret | Sequence[WebhookSecret],
    callback: WebhookCallback,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """An ``aiohttp.web`` handler that verifies each webhook and passes it to ``await callback(event)``.

    ``app.router.add_post("/webhooks/eka", webhooks.aiohttp_handler(secret, on_event))``

    Answers:

    * 413 for a body over ``max_body_size`` bytes: refused from ``Content-Length`` before reading, and a chunked
      body is read at most ``max_body_size + 1`` bytes; the connection is then closed.
    * 400 for a webhook that does not verify (:func:`verify`); the reason is logged at WARNING, the answer
      itself says only that the webhook was refused.
    * 405 for a method other than POST.
    * 500 when the callback raises, so that the service delivers again; logged at ERROR with the event name and
      the exception's type only (its message, like the event, may hold personal data).
    * 200 once the callback has returned.

    ``secret``, ``tolerance`` and ``max_body_size`` are checked here, when the handler is built
    (:class:`~health_async.errors.InvalidRequest`). Cancellation (the client went away, the server shuts down)
    propagates. The callback should be quick (the service waits for the answer): hand long work to a queue.
    """
    keys = _secrets(secret)
    _check_tolerance(tolerance)
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
        raise InvalidRequest("max_body_size must be a positive number of bytes")
    if not callable(callback):
        raise InvalidRequest("callback must be an async function taking the WebhookEvent")

    async def handle(request: web.Request) -> web.Response:
        if request.method != "POST":
            return web.Response(status=405, text="method not allowed", headers={"Allow": "POST"})
        declared = request.content_length
        if declared is not None and declared > max_body_size:
            logger.warning("webhook refused: body of %d bytes is over the %d byte limit", declared, max_body_size)
            return _too_large()
        body = await _read_capped(request, max_body_size)
        if body is None:
            logger.warning("webhook refused: body is over the %d byte limit", max_body_size)
            return _too_large()
        try:
            event = verify(body, request.headers.get(SIGNATURE_HEADER), keys, tolerance=tolerance)
        except WebhookSignatureError as exc:
            logger.warning("%s", exc)
            return web.Response(status=400, text="webhook refused")
        try:
            await callback(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.error("webhook callback for %s failed: %s", _safe_event_name(event), type(exc).__name__)
            return web.Response(status=500, text="webhook callback failed")
        return web.Response(status=200, text="ok")

    return handle


async def _read_capped(request: web.Request, limit: int) -> bytes | None:
    """The body, or None once more than ``limit`` bytes arrived (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = await request.content.read(_READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def _too_large() -> web.Response:
    response = web.Response(status=413, text="webhook body too large")
    response.force_close()  # do not drain the rest of a huge body
    return response


def _safe_event_name(event: WebhookEvent) -> str:
    """The event name for a log line: a documented name, else ``"an unknown event"`` (a name is text the sender
    chose; keep logs free of it)."""
    kind = event.kind
    return kind.value if kind is not EventKind.UNKNOWN else "an unknown event"
