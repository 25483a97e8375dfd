"""The records events' receiver: :func:`aiohttp_handler`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web

from .._telemetry import webhook_delivery
from ..errors import InvalidRequest
from ._receiving import (
    DEFAULT_CLAIM_LEASE,
    DEFAULT_MAX_BODY_SIZE,
    WebhookCallback,
    _accept,
    _Answer,
    _check_bound,
    _delivered,
    _from_aiohttp,
    _run,
    _to_aiohttp,
)
from ._seen import InMemorySeenStore, SeenStore, _leasing, _seen_store
from ._signature import DEFAULT_TOLERANCE, WebhookSecret, _check_tolerance, _secrets

__all__ = ["aiohttp_handler"]


def aiohttp_handler(
    secret: WebhookSecret | Sequence[WebhookSecret],
    callback: WebhookCallback,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    seen_store: SeenStore | None = None,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """An ``aiohttp.web`` handler that verifies each webhook and passes it to ``await callback(event)``.

    ``app.router.add_post("/webhooks/eka", webhooks.aiohttp_handler(secret, on_event))``

    Answers:

    * 413 for a body over ``max_body_size`` bytes: refused from ``Content-Length`` before reading, and a chunked
      body is read at most ``max_body_size + 1`` bytes; the connection is then closed.
    * 400 for a webhook that does not verify (:func:`verify`); the reason is logged at WARNING, the answer
      itself says only that the webhook was refused.
    * 405 for a method other than POST.
    * 200 without calling the callback for a replay: a webhook that verifies but was already processed (logged at
      WARNING). Judgement call: a replay is byte for byte a request this handler took (its callback ran), so a
      4xx would only tell a sender that retried after losing our answer that a processed event failed, and make
      it retry again; an attacker replaying it gains nothing from the 200, as nothing runs.
    * 503 with ``Retry-After: 5`` without calling the callback for a replay that comes while the first delivery's
      callback is still running (logged at WARNING): the first may yet fail and release its key, and a 200 would
      then have lost the webhook; the retry gets the 200 "duplicate" once the first succeeded, or runs once it
      failed. (The vendor does not document which answers it retries; this library answers every failure that
      should be delivered again with a 5XX.)
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
    secret in all of them. The key is released when the callback fails or is cancelled, so a redelivery runs, and
    marked done when it succeeds. Each delivery claims the key with a random token, and releases it only if that
    token still holds it: a replay cancelled with its check in flight (the sender went away, Redis slow) never
    forgets the key of the delivery that was processed. A store of the old protocol (``add`` and ``discard``
    only) is still taken, with a ``DeprecationWarning`` and the old guarantees (see :class:`SeenStore`).

    A worker that dies mid-callback (``kill -9``, out of memory) cannot release its key: with a
    :class:`LeasingSeenStore` (the default store and ``RedisSeenStore`` are ones) the key is held "in progress"
    only ``claim_lease`` seconds (default :data:`DEFAULT_CLAIM_LEASE`, 30), renewed every third of that while the
    callback runs, so a callback may take as long as it needs and is never run twice meanwhile, and a redelivery
    after a crash runs once the lease has lapsed. With a store without ``renew`` the key stays in progress until
    it expires, as before.

    ``secret``, ``tolerance``, ``max_body_size``, ``seen_store`` and ``claim_lease`` are checked here, when the
    handler is built (:class:`~health_async.errors.InvalidRequest`). Cancellation (the client went away, the server
    shuts down) propagates. The callback should be quick (the service waits for the answer): hand long work to a queue.
    """
    keys = _secrets(secret)
    _check_tolerance(tolerance)
    if isinstance(max_body_size, bool) or not isinstance(max_body_size, int) or max_body_size < 1:
        raise InvalidRequest("max_body_size must be a positive number of bytes")
    if not callable(callback):
        raise InvalidRequest("callback must be an async function taking the WebhookEvent")
    store: SeenStore = InMemorySeenStore() if seen_store is None else _seen_store(seen_store, stacklevel=3)
    lease_bound = _check_bound(claim_lease, "claim_lease")
    lease = lease_bound if _leasing(store) else None  # a store without leases is called as before

    async def respond(request: web.Request, delivery: webhook_delivery) -> _Answer:
        accepted = await _accept(_from_aiohttp(request), keys, tolerance, max_body_size, store, delivery, lease)
        if isinstance(accepted, _Answer):
            return accepted
        event, key, token = accepted

        async def run() -> str:
            await callback(event)
            return "ok"

        return await _run(store, key, token, event, run, lease)

    async def handle(request: web.Request) -> web.Response:
        return _to_aiohttp(await _delivered("records", lambda delivery: respond(request, delivery)))

    return handle
