"""The signature: ``Eka-Webhook-Signature`` computed and verified (:func:`verify`), in constant time."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence
from typing import Final, TypeAlias

from .. import _json
from .._config import finite
from ..errors import InvalidRequest, WebhookSignatureError
from ..models.webhooks._events import WebhookEvent, _datetime, _event

__all__ = ["DEFAULT_TOLERANCE", "SIGNATURE_HEADER", "WebhookSecret", "compute_signature", "verify"]

#: Name of the header that carries the timestamp and signature(s).
SIGNATURE_HEADER: Final = "Eka-Webhook-Signature"


#: Seconds a webhook's timestamp may differ from now (either way) and still verify; the vendor's guide uses 180.
DEFAULT_TOLERANCE: Final = 180


#: A signing secret, as text (encoded UTF-8) or bytes.
WebhookSecret: TypeAlias = str | bytes


_MAX_SIGNATURES: Final = 16


_MAX_HEADER_LENGTH: Final = 4096


_MAX_TIMESTAMP_DIGITS: Final = 12


_HEX: Final = frozenset("0123456789abcdefABCDEF")


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
