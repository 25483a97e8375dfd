"""Send signed webhooks to your own handler in tests: :func:`sign` and :func:`send_webhook`.

::

    from health_async.testing.webhooks._send import send_webhook

    status = await send_webhook(f"{base}/webhooks/eka", {"event": "rec.uploaded", "data": {...}}, secret)
    assert status == 200
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import ipaddress
import time
from collections.abc import Callable
from typing import Any, Final, TypeAlias

import aiohttp
from yarl import URL

from ... import _json
from ...errors import InvalidRequest
from .. import _routes as R

__all__ = ["send_webhook", "sign"]

#: A signing secret, as text (encoded UTF-8) or bytes.
WebhookSecret: TypeAlias = str | bytes


def sign(body: bytes | str, secret: WebhookSecret, *, timestamp: int | None = None) -> str:
    """The ``Eka-Webhook-Signature`` header value for ``body``: ``t=<timestamp>,v1=<hex>``, as the service signs.

    Written from the vendor's webhook-signature.mdx: ``v1`` is the hex HMAC-SHA256, keyed with the secret, of
    ``"<timestamp>.<raw body>"``. ``timestamp`` defaults to now (unix seconds); pass an old or future one to test
    the tolerance. :class:`~health_async.errors.InvalidRequest` for an empty or mistyped secret or body.
    """
    if isinstance(secret, str):
        key = secret.encode("utf-8")
    elif isinstance(secret, bytes | bytearray):
        key = bytes(secret)
    else:
        raise InvalidRequest("webhook secret must be a str or bytes")
    if not key:
        raise InvalidRequest("webhook secret must not be empty")
    raw: object = body
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    elif isinstance(raw, bytearray | memoryview):
        raw = bytes(raw)
    if not isinstance(raw, bytes):
        raise InvalidRequest("webhook body must be the raw bytes (or str) to send")
    t = int(time.time()) if timestamp is None else int(timestamp)
    signature = hmac.new(key, f"{t}.".encode("ascii") + raw, hashlib.sha256).hexdigest()
    return f"t={t},v1={signature}"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def send_webhook(
    url: str,
    event: dict[str, object],
    secret: WebhookSecret,
    *,
    session: aiohttp.ClientSession | None = None,
    timestamp: int | None = None,
) -> int:
    """POST ``event`` as signed JSON to ``url`` the way the service does, and return the answer's status.

    Only loopback URLs (``127.0.0.0/8``, ``::1``, ``localhost``) are accepted: a test webhook, possibly with
    sample personal data, must not leave the machine (:class:`~health_async.errors.InvalidRequest` otherwise).
    Uses ``session`` when given, else a short-lived one (10 s total timeout).
    """
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        raise InvalidRequest("send_webhook needs an http(s) URL on loopback") from None
    if parsed.scheme not in ("http", "https") or not parsed.host or not _is_loopback(parsed.host):
        raise InvalidRequest("send_webhook only posts to an http(s) URL on loopback (127.0.0.1, ::1, localhost)")
    body = _json.dumps(event)
    headers = {"Content-Type": "application/json", R.WEBHOOK_SIGNATURE: sign(body, secret, timestamp=timestamp)}
    # A file-like body, not bytes: aiohttp warns (ResourceWarning) for bytes over 1 MiB, an error under -W error
    if session is not None:
        async with session.post(parsed, data=io.BytesIO(body), headers=headers) as response:
            await response.read()
            return response.status
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as own,
        own.post(parsed, data=io.BytesIO(body), headers=headers) as response,
    ):
        await response.read()
        return response.status


# ------------------------------------------------------------- the fake's own webhook sender (its ABDM domains)

#: How many times a webhook the receiver did not take (not 2xx, or no answer) is sent again.
REDELIVERIES: Final = 2
#: Seconds between two attempts at one webhook (short: tests wait for them).
REDELIVERY_DELAY: Final = 0.05

#: What one attempt at a webhook got: the HTTP status, or the type name of the exception raised instead.
Outcome: TypeAlias = int | str
#: Where a fake domain sends its webhooks: the URL and the signing secret.
Target: TypeAlias = tuple[str, WebhookSecret]


def loopback_target(url: str | None, secret: WebhookSecret | None) -> Target | None:
    """The checked target of a fake domain's ``webhooks(url, secret)`` (``None``: unregistered). ``ValueError``
    (at once, not in a background task) for a URL off loopback, or a secret that is not a non-empty str or bytes."""
    if url is None:
        return None
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        raise ValueError("webhooks needs an http(s) URL on loopback") from None
    if parsed.scheme not in ("http", "https") or not parsed.host or not _is_loopback(parsed.host):
        raise ValueError("webhooks only go to an http(s) URL on loopback (127.0.0.1, ::1, localhost)")
    if not isinstance(secret, str | bytes) or not secret:
        raise ValueError("webhooks needs the signing secret: a non-empty str or bytes")
    return (url, secret)


async def deliver(target: Target, event: dict[str, Any], record: Callable[[Outcome], None]) -> Outcome:
    """Send ``event`` as the service does: until the receiver takes it (2xx) or after :data:`REDELIVERIES` more
    attempts, :data:`REDELIVERY_DELAY` s apart, each signed afresh with a new ``timestamp``; every attempt's outcome
    goes to ``record``. Returns the last one."""
    url, secret = target
    outcome: Outcome = "not sent"
    for attempt in range(1 + REDELIVERIES):
        if attempt:
            await asyncio.sleep(REDELIVERY_DELAY)
        try:
            outcome = await send_webhook(url, {**event, "timestamp": int(time.time())}, secret)
        except Exception as exc:  # refused, reset, timed out: the service would try again
            outcome = type(exc).__name__
        record(outcome)
        if taken(outcome):
            break
    return outcome


def taken(outcome: Outcome) -> bool:
    """Whether the receiver took the webhook (answered 2xx)."""
    return isinstance(outcome, int) and 200 <= outcome < 300
