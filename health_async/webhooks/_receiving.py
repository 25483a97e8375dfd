"""What every receiver shares, framework-neutral: a request read (capped), verified, checked against the seen
store and run once; the answer given."""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, TypeAlias, TypeVar

import attrs
from aiohttp import web

from .._logging import logger
from .._telemetry import webhook_delivery
from ..errors import InvalidRequest, WebhookSignatureError
from ..models.webhooks._events import EventKind, WebhookEvent
from ._seen import Claim, LeasingSeenStore, SeenStore
from ._signature import SIGNATURE_HEADER, _verify

__all__ = ["DEFAULT_CALLBACK_TIMEOUT", "DEFAULT_CLAIM_LEASE", "DEFAULT_EVENT_TIMEOUT", "DEFAULT_MAX_BODY_SIZE"]

#: Largest body :func:`aiohttp_handler` reads by default (1 MiB); a larger one is answered 413.
DEFAULT_MAX_BODY_SIZE: Final = 1024 * 1024


#: Seconds the ABDM receivers give a callback run in the background (``on_data_fetch``, ``on_profile_share``,
#: ``on_discover``, ``on_link_otp``, ``on_linked``) before cancelling it: a database query or an SMS gateway that
#: hangs must not hold a task forever, and a data request must be answered within ABDM's 20-minute window anyway.
DEFAULT_CALLBACK_TIMEOUT: Final = 60.0


#: Seconds the ABDM receivers give ``on_event``, which runs before the webhook is answered, before cancelling it
#: (answered 500: the service redelivers). The service does not document its patience; common webhook senders give
#: 10 to 30 seconds, so 5 s leaves the answer well inside the shortest of them.
DEFAULT_EVENT_TIMEOUT: Final = 5.0


#: Seconds a receiver's claim of a webhook (or of an ABDM data request, profile share or linking step) is held "in
#: progress" without renewal, with a :class:`~health_async.webhooks.LeasingSeenStore` (the receivers' default and
#: ``RedisSeenStore`` are ones): the work is renewed every third of it while it runs (a heartbeat), so it may take
#: any time, and a worker that dies mid-delivery (``kill -9``, out of memory) holds the key at most this long, after
#: which a redelivery runs. Judgement call: none of the work has a bound the receiver knows to be short (the records
#: callback has none; an ABDM data request is the guard, ``on_data_fetch`` up to ``callback_timeout`` (60 s) and a
#: push bounded only by the client's timeouts and ABDM's 20-minute window, which a lease that long would use up),
#: so the lease is short and the heartbeat carries the work: 30 s is six ``Retry-After: 5`` rounds of 503 after a
#: crash, against one store call per delivery running every 10 s.
DEFAULT_CLAIM_LEASE: Final = 30.0


T = TypeVar("T")


_READ_CHUNK: Final = 64 * 1024


WebhookCallback: TypeAlias = Callable[[WebhookEvent], Awaitable[object]]


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
    #: For telemetry: ``accepted``, ``duplicate``, ``in_progress``, ``refused`` or ``failed`` (a 500: redelivered),
    #: and a refusal's or failure's reason (a name chosen here, never a value).
    outcome: str = "accepted"
    reason: str | None = None


_METHOD_NOT_ALLOWED: Final = _Answer(
    405, "method not allowed", (("Allow", "POST"),), outcome="refused", reason="method_not_allowed"
)


# close: do not drain the rest of a huge body
_TOO_LARGE: Final = _Answer(413, "webhook body too large", close=True, outcome="refused", reason="too_large")


_CLOSED: Final = _Answer(503, "webhook receiver closed", outcome="refused", reason="closed")


#: Seconds a sender is asked to wait (``Retry-After``) before delivering again a webhook still being processed.
_RETRY_IN_PROGRESS: Final = 5


#: The answer to a delivery of a webhook whose first delivery is still being processed: retryable, as the first may
#: yet fail and release its key (a 200 "duplicate" would then have lost it).
_IN_PROGRESS: Final = _Answer(
    503,
    "webhook already being processed, retry later",
    (("Retry-After", str(_RETRY_IN_PROGRESS)),),
    outcome="in_progress",
)


class _Refused(Exception):
    """Raised by a ``work`` given to :func:`_run` to answer with :attr:`answer` instead (its key forgotten)."""

    def __init__(self, answer: _Answer) -> None:
        super().__init__(answer.text)
        self.answer = answer


async def _accept(
    incoming: _Incoming,
    keys: tuple[bytes, ...],
    tolerance: float,
    max_body_size: int,
    store: SeenStore,
    delivery: webhook_delivery | None = None,
    lease: float | None = None,
) -> tuple[WebhookEvent, str, str] | _Answer:
    """The verified, first-seen event of the request, its replay key and the token of its claim, or the answer
    that refuses it (405, 413, 400, a 500 when the seen store fails, a 200 for a replay of a webhook processed, a
    503 for one still being processed): the checks every handler here makes."""
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
        return _Answer(400, "webhook refused", outcome="refused", reason="signature")
    if delivery is not None:
        delivery.kind = _safe_kind(event)
    token = _new_token()
    try:
        claim = await _claim_key(store, key, signed + tolerance, token, lease)
    except Exception as exc:
        logger.error("webhook replay check for %s failed: %s", _safe_event_name(event), type(exc).__name__)
        return _Answer(500, "webhook replay check failed", outcome="failed", reason="seen_store")
    if claim is Claim.IN_PROGRESS:
        logger.warning("webhook replay of %s answered 503: its first delivery still runs", _safe_event_name(event))
        return _IN_PROGRESS
    if claim is not Claim.NEW:
        logger.warning("webhook replay of %s ignored: already accepted", _safe_event_name(event))
        return _Answer(200, "duplicate webhook ignored", outcome="duplicate")
    return event, key, token


def _new_token() -> str:
    """A claim's token: random, so no other claim of the same key ever holds the same one."""
    return secrets.token_hex(16)


async def _claim_key(store: SeenStore, key: str, expires_at: float, token: str, lease: float | None = None) -> Claim:
    """``store.claim(key, expires_at, token=token)``, held in progress for ``lease`` seconds from now
    (``lease=``) when the store is a :class:`LeasingSeenStore` and ``lease`` is given (a store without ``renew`` is
    called as before, without the keyword); cancelled while it is in flight (a store that does I/O: it may have
    been taken), released first, then the cancellation propagates. The release is compare-and-delete, so when
    another delivery holds the key (this one was a replay) it is left alone; when this one took it, it is freed
    for the service's redelivery."""
    try:
        if lease is not None and isinstance(store, LeasingSeenStore):
            return await store.claim(key, expires_at, token=token, lease=time.time() + lease)
        return await store.claim(key, expires_at, token=token)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.shield(store.release(key, token=token))
        raise


@contextlib.asynccontextmanager
async def _heartbeat(store: SeenStore, key: str, token: str, lease: float | None) -> AsyncIterator[None]:
    """While the body runs, renew the lease of ``token``'s claim of ``key`` every third of ``lease`` seconds (a
    task of its own), when the store is a :class:`LeasingSeenStore` and ``lease`` is given (else nothing runs).
    The task is cancelled and waited for when the body ends, however it ends, before the caller finishes or
    releases the key: never leaked; a cancellation of the caller propagates (never swallowed here)."""
    if lease is None or not isinstance(store, LeasingSeenStore):
        yield
        return
    task = asyncio.get_running_loop().create_task(_renew_while_running(store, key, token, lease))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.wait([task])  # a cancellation of the caller here propagates; the task ends by itself
        if not task.cancelled():
            task.exception()  # retrieved (it catches its errors: none is expected)


async def _renew_while_running(store: LeasingSeenStore, key: str, token: str, lease: float) -> None:
    """Renew ``token``'s lease of ``key`` every third of ``lease`` until cancelled. A store error is logged (its type
    only) and the next beat tries again (the lease may lapse meanwhile); a renewal refused (the lease lapsed: the
    key may already be claimed by a redelivery, which then runs the work too) is logged and ends the heartbeat.
    Judgement call: the work is not cancelled then, as cutting a push half-way would be worse than a second one."""
    while True:
        await asyncio.sleep(lease / 3)
        try:
            held = await store.renew(key, token=token, until=time.time() + lease)
        except Exception as exc:
            logger.warning("webhook seen store could not renew the lease of a claim: %s", type(exc).__name__)
            continue
        if not held:
            logger.warning(
                "webhook claim lost: its lease lapsed while its work still ran (a redelivery may run it too)"
            )
            return


async def _run(
    store: SeenStore,
    key: str,
    token: str,
    event: WebhookEvent,
    work: Callable[[], Awaitable[str]],
    lease: float | None = None,
) -> _Answer:
    """200 with ``work``'s text once it returns (``key`` marked done first); 500 when it raises (logged with the
    event name and the error's type only), or the answer of a :class:`_Refused` it raises (logged by whoever
    raised it), after releasing ``key`` so a redelivery runs (also when cancelled, which propagates). While
    ``work`` runs, the claim's ``lease`` is renewed (:func:`_heartbeat`)."""
    done = False
    try:
        async with _heartbeat(store, key, token, lease):
            text = await work()
        done = True
    except asyncio.CancelledError:
        raise
    except _Refused as refused:
        return refused.answer
    except Exception as exc:
        logger.error("webhook callback for %s failed: %s", _safe_event_name(event), type(exc).__name__)
        return _Answer(500, "webhook callback failed", outcome="failed", reason="callback")
    finally:
        if not done:
            await _forget(store, key, token)
    # shielded: the work ran, so its key must not stay "in progress" (a replay would get 503s until it expires)
    await asyncio.shield(_finish(store, key, token))
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


async def _forget(store: SeenStore, key: str, token: str) -> None:
    """Release ``key`` after a failed callback; a store error is logged (type only), not raised over the 500."""
    try:
        await store.release(key, token=token)
    except Exception as exc:
        logger.error("webhook seen store could not forget a failed webhook: %s", type(exc).__name__)


async def _finish(store: SeenStore, key: str, token: str) -> None:
    """Mark ``key`` done after its callback succeeded; a store error is logged (type only), not raised over the 200
    (the key then stays in progress until it expires: a replay is answered 503 meanwhile, never run again)."""
    try:
        await store.finish(key, token=token)
    except Exception as exc:
        logger.error("webhook seen store could not mark a webhook done: %s", type(exc).__name__)


def _check_bound(value: object, name: str) -> float:
    """``value`` as a bound in seconds: a positive finite number (``InvalidRequest`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InvalidRequest(f"{name} must be a positive number of seconds")
    return float(value)


async def _bounded(call: Awaitable[T], bound: float, name: str, event: WebhookEvent) -> T:
    """``await call`` (the callback ``name`` answering ``event``), cancelled once ``bound`` seconds have passed: it
    then raises :class:`TimeoutError`, logged with the event name, the callback's name and the bound (never data).
    A ``TimeoutError`` the callback raises itself passes through unlogged here; a cancellation of the caller
    propagates."""
    scope = asyncio.timeout(bound)
    try:
        async with scope:
            return await call
    except TimeoutError:
        if scope.expired():
            logger.error(
                "ABDM %s: %s did not finish within its bound of %g s and was cancelled",
                _safe_event_name(event),
                name,
                bound,
            )
        raise


async def _delivered(receiver: str, respond: Callable[[webhook_delivery], Awaitable[_Answer]]) -> _Answer:
    """``respond(delivery)``'s answer, the delivery recorded (telemetry: a SERVER span and the deliveries counter,
    with the event kind once verified, the outcome and the reason; nothing of the body). A cancellation is recorded
    as ``failed`` with the reason ``cancelled``, and propagates."""
    delivery = webhook_delivery(receiver)
    try:
        answer = await respond(delivery)
    except BaseException as exc:
        delivery.end(None, "failed", "cancelled" if isinstance(exc, asyncio.CancelledError) else "error")
        raise
    delivery.end(answer.status, answer.outcome, answer.reason)
    return answer


def _safe_kind(event: WebhookEvent) -> str:
    """The event kind for telemetry: a documented kind's name, else ``unknown`` (never the sender's text)."""
    kind = event.kind
    return kind.value if kind is not EventKind.UNKNOWN else "unknown"


def _safe_event_name(event: WebhookEvent) -> str:
    """The event name for a log line: a documented name, else ``"an unknown event"`` (a name is text the sender
    chose; keep logs free of it)."""
    kind = event.kind
    return kind.value if kind is not EventKind.UNKNOWN else "an unknown event"
