"""ABDM's receiver for aiohttp: :func:`abdm_handler` (on ``abha.*`` events; data requests and profile shares
answered in the background), and what the ASGI receiver shares with it."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs
from aiohttp import web

from .._logging import logger
from .._tasks import keep, settle
from .._telemetry import webhook_delivery
from ..errors import HealthError, InvalidArgumentType, InvalidRequest, OutcomeUnknown
from ..models.abdm._events import ProfileShare
from ..models.abdm._hospital import HealthDataRequest
from ..resources.abdm._guard import ConsentStore, request_refusal

if TYPE_CHECKING:
    from .._client import HealthClient
from .. import fhir
from ..models.webhooks._events import EventKind, WebhookEvent
from ._link_otp import InMemoryLinkOtpStore, LinkOtpStore
from ._receiving import (
    _CLOSED,
    _IN_PROGRESS,
    DEFAULT_CALLBACK_TIMEOUT,
    DEFAULT_CLAIM_LEASE,
    DEFAULT_EVENT_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE,
    WebhookCallback,
    _accept,
    _Answer,
    _bounded,
    _check_bound,
    _claim_key,
    _delivered,
    _from_aiohttp,
    _heartbeat,
    _Incoming,
    _new_token,
    _Refused,
    _run,
    _safe_event_name,
    _to_aiohttp,
)
from ._seen import Claim, InMemorySeenStore, SeenStore, _leasing, _seen_store
from ._signature import DEFAULT_TOLERANCE, WebhookSecret, _check_tolerance, _secrets
from ._user_linking import (
    DEFAULT_MAX_OTP_TRIES,
    DEFAULT_OTP_TTL,
    LINKING_EVENTS,
    DiscoverCallback,
    LinkedCallback,
    LinkOtpSender,
    _UserLinking,
    request_id_of,
)

__all__ = [
    "DEFAULT_MAX_REQUESTS",
    "AbdmHandler",
    "Bundles",
    "DataFetchCallback",
    "ProfileShareCallback",
    "abdm_handler",
]

#: What ``on_data_fetch`` returns: the FHIR bundle of each care context asked for (a dict, or its JSON), or its
#: builder inputs (a :class:`~health_async.fhir.Record`, built by the push with the care context's id).
Bundles: TypeAlias = Mapping[str, "dict[str, Any] | bytes | str | fhir.Record"]


DataFetchCallback: TypeAlias = Callable[[HealthDataRequest], Awaitable[Bundles]]


#: What ``on_profile_share`` is: the token number of a Scan & Share (``None``: give none, answer nothing), e.g. a
#: :class:`TokenCounter`.
ProfileShareCallback: TypeAlias = Callable[[ProfileShare], Awaitable["str | int | None"]]


#: Data requests (transaction ids) an ABDM handler remembered in this process, to ignore a redelivery (and as many
#: profile shares). No longer used: the receivers keep them in their seen store (see :func:`abdm_handler`); kept so
#: that its import keeps working.
DEFAULT_MAX_REQUESTS: Final = 10_000


#: Seconds a data request, profile share or linking step taken stays in the seen store, so that a redelivery of it
#: is ignored: a day. ABDM's window to answer a data request is 20 minutes, and nothing redelivers a day later.
_TAKEN_FOR: Final = 24 * 3600.0


def _taken_key(kind: str, identifier: str) -> str:
    """The seen-store key of a data request, profile share or linking step (``kind``) taken: 64 hex digits, the
    shape of the replay keys, so no raw id is stored and a store that expects that shape takes it. The kind is
    hashed in, so it never meets a replay key (an HMAC) nor a key of another kind."""
    return hashlib.sha256(f"health-async/abdm-{kind}\x1f{identifier}".encode()).hexdigest()


class _AbdmReceiver:
    """What :class:`AbdmHandler` (aiohttp) and :class:`AbdmAsgiApp` (ASGI) share: the checks, ``on_event`` (bounded),
    the data requests and profile shares answered in the background (bounded; a redelivery ignored, through the
    seen store), and :attr:`pending`, :meth:`join` and :meth:`aclose`. Each subclass only turns its framework's
    request into an :class:`_Incoming` and the :class:`_Answer` into its framework's response.

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
        linking: _UserLinking | None = None,
        callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
        event_timeout: float = DEFAULT_EVENT_TIMEOUT,
        consents: ConsentStore | None = None,
        lease: float | None = DEFAULT_CLAIM_LEASE,
    ) -> None:
        self._keys, self._client, self._store, self._lease = keys, client, store, lease
        self._linking = linking
        self._on_event, self._on_data_fetch, self._on_profile_share = on_event, on_data_fetch, on_profile_share
        self._tolerance, self._max_body_size = tolerance, max_body_size
        self._callback_timeout, self._event_timeout, self._consents = callback_timeout, event_timeout, consents
        # data requests, profile shares and linking steps taken are kept in the seen store (_taken_key), so that a
        # store shared by several workers answers each once across all of them
        self._tasks: set[asyncio.Task[None]] = set()
        self._claims: dict[str, str] = {}  # key -> the token of this receiver's claim, while its answer runs
        self._closed = False  # set when aclose() starts: no background work is started after it

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pending={len(self._tasks)})"

    @property
    def pending(self) -> int:
        """Data requests and profile shares being answered in the background."""
        return len(self._tasks)

    async def _respond(self, incoming: _Incoming) -> _Answer:
        """Answer one webhook request (see :func:`abdm_handler`), recorded (telemetry: ``_delivered``)."""
        return await _delivered("abdm", lambda delivery: self._answer_delivery(incoming, delivery))

    async def _answer_delivery(self, incoming: _Incoming, delivery: webhook_delivery) -> _Answer:
        accepted = await _accept(
            incoming, self._keys, self._tolerance, self._max_body_size, self._store, delivery, self._lease
        )
        if isinstance(accepted, _Answer):
            return accepted
        event, key, token = accepted

        async def run() -> str:
            if self._closed and self._needs_background(event):
                self._refuse(event)  # before on_event: the redelivery the 503 asks for runs it once
            if self._consents is not None and event.kind is EventKind.CONSENT_UPDATE:
                await self._consents.take(event)  # before on_event: a revocation holds even if on_event fails
            if self._on_event is not None:
                await _bounded(self._on_event(event), self._event_timeout, "on_event", event)
            if event.kind is EventKind.HIP_PROFILE_SHARE:
                return await self._take_share(event)
            if event.kind in LINKING_EVENTS:
                return await self._take_linking(event)
            return await self._take(event) if event.kind is EventKind.HIP_DATA_FETCH else "ok"

        return await _run(self._store, key, token, event, run, self._lease)

    def _needs_background(self, event: WebhookEvent) -> bool:
        """Whether answering ``event`` would start background work (a data request, a profile share)."""
        if event.kind is EventKind.HIP_DATA_FETCH:
            return self._on_data_fetch is not None
        if event.kind in LINKING_EVENTS:
            return self._linking is not None
        return event.kind is EventKind.HIP_PROFILE_SHARE and self._on_profile_share is not None

    def _refuse(self, event: WebhookEvent) -> None:
        """Refuse ``event`` with a 503 (raises :class:`_Refused`): the receiver is closed and starts no work."""
        logger.warning("webhook %s refused with 503: the ABDM receiver is closed", _safe_event_name(event))
        raise _Refused(_CLOSED)

    async def _take(self, event: WebhookEvent) -> str:
        """Start answering a data request in the background; the service gets its 200 at once."""
        if self._on_data_fetch is None:
            return "ok"
        try:
            request = event.data_request()
        except HealthError:
            logger.error("ABDM data request refused: its data does not fit a HealthDataRequest")
            return "data request not understood"
        key = _taken_key("request", request.transaction_id)
        if not await self._claim(event, key):
            logger.warning("ABDM data request redelivered: already being answered, ignored")
            return "duplicate data request ignored"
        await self._start(event, key, self._answer(event, request, key))
        return "accepted"

    async def _claim(self, event: WebhookEvent, key: str) -> bool:
        """Claim ``key`` (something taken) in the seen store with a new token, kept in ``_claims`` until the answer
        finishes or releases it: True when it was free, False when an answer of it finished (a duplicate, 200).
        Refuses ``event`` with a 503 (``Retry-After``) when another answer of it is still running, as that one may
        yet fail and release it; and with a 503 first once closed (no store call). A store error propagates (500:
        the redelivery runs it); cancelled in flight, the claim is released (compare-and-delete: another
        answer's claim is left alone) and the cancellation propagates."""
        if self._closed:
            self._refuse(event)
        token = _new_token()
        try:
            claim = await _claim_key(self._store, key, time.time() + _TAKEN_FOR, token, self._lease)
        except Exception as exc:
            logger.error("ABDM %s: the seen store failed: %s", _safe_event_name(event), type(exc).__name__)
            raise
        if claim is Claim.IN_PROGRESS:
            logger.warning(
                "ABDM %s redelivered while the first is still being answered: 503, retry later",
                _safe_event_name(event),
            )
            raise _Refused(_IN_PROGRESS)
        if claim is not Claim.NEW:
            return False
        self._claims[key] = token
        return True

    async def _release(self, key: str) -> None:
        """Release ``key`` if this receiver's claim holds it, so the next delivery of what it stands for runs (a
        store error is logged, not raised)."""
        token = self._claims.pop(key, None)
        if token is None:
            return
        try:
            await self._store.release(key, token=token)
        except Exception as exc:
            logger.error("ABDM seen store could not forget a failed answer: %s", type(exc).__name__)

    async def _finishing(self, key: str, work: Coroutine[Any, Any, None]) -> None:
        """``await work``, then mark ``key`` done unless the work released it: answered, or perhaps answered (an
        outcome unknown, a push cut after it began), so a redelivery is a duplicate from now on (200), not one to
        retry (503). Shielded: a cancelled answer still leaves its key done or released, never in progress. While
        ``work`` runs, the claim's lease is renewed (``_heartbeat``), so a worker that dies mid-answer holds the key
        only until its lease lapses."""
        token = self._claims.get(key)
        try:
            if token is None:  # released already (closed meanwhile): nothing to renew
                await work
            else:
                async with _heartbeat(self._store, key, token, self._lease):
                    await work
        finally:
            token = self._claims.pop(key, None)
            if token is not None:
                await asyncio.shield(self._finish(key, token))

    async def _finish(self, key: str, token: str) -> None:
        try:
            await self._store.finish(key, token=token)
        except Exception as exc:
            logger.error("ABDM seen store could not mark an answer done: %s", type(exc).__name__)

    async def _start(self, event: WebhookEvent, key: str, work: Coroutine[Any, Any, None]) -> None:
        """:meth:`_spawn` ``work``, its ``key`` claimed (marked done when it ends, unless released); refused (503,
        closed meanwhile), the key is released."""
        try:
            self._spawn(event, self._finishing(key, work))
        except _Refused:
            work.close()  # never started: no "coroutine was never awaited" warning
            await self._release(key)
            raise

    def _spawn(self, event: WebhookEvent, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (answering ``event``) in the background, or refuse ``event`` with a 503 once closed."""
        if self._closed:
            work.close()  # never started: no "coroutine was never awaited" warning
            self._refuse(event)
        keep(self._tasks, work)

    async def _take_share(self, event: WebhookEvent) -> str:
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
        key = _taken_key("share", share.request_id)
        if not await self._claim(event, key):
            logger.warning("ABDM profile share redelivered: already being answered, ignored")
            return "duplicate profile share ignored"
        await self._start(event, key, self._answer_share(event, share, key))
        return "accepted"

    async def _take_linking(self, event: WebhookEvent) -> str:
        """Start answering a step of a patient's own search in the background; the service gets its 200 at once."""
        if self._linking is None:
            return "ok"
        request_id = request_id_of(event)
        if request_id is None:
            logger.error("ABDM %s refused: it carries no request id", _safe_event_name(event))
            return "linking step not understood"
        key = _taken_key(f"linking\x1f{event.kind.value}", request_id)
        if not await self._claim(event, key):
            logger.warning("ABDM %s redelivered: already being answered, ignored", _safe_event_name(event))
            return "duplicate linking step ignored"
        await self._start(event, key, self._answer_linking(self._linking, event, key))
        return "accepted"

    async def _answer_linking(self, linking: _UserLinking, event: WebhookEvent, key: str) -> None:
        try:
            await linking.answer(event)  # logs its outcome, or its failure by type
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(exc, OutcomeUnknown):  # nothing reached the service: a redelivery runs it again
                await self._release(key)

    async def _answer_share(self, event: WebhookEvent, share: ProfileShare, key: str) -> None:
        assert self._on_profile_share is not None
        answering = False
        try:
            token = await _bounded(self._on_profile_share(share), self._callback_timeout, "on_profile_share", event)
            if token is None:
                logger.info("ABDM profile share not answered: on_profile_share gave no token")
                return
            answering = True
            await self._client.abha.answer_profile_share(event, token_number=token)
        except asyncio.CancelledError:
            if not answering:  # cancelled in on_profile_share (aclose): nothing sent, a redelivery may try again
                await self._release(key)
            raise
        except Exception as exc:
            if not isinstance(exc, OutcomeUnknown):  # nothing reached the service: a redelivery may try again
                await self._release(key)
            logger.error("ABDM profile share not answered: %s", type(exc).__name__)
            return
        logger.info("ABDM profile share answered with a token")

    async def _answer(self, event: WebhookEvent, request: HealthDataRequest, key: str) -> None:
        assert self._on_data_fetch is not None
        received = request.requested_at
        if received is None:  # the window then counts from now, just after the webhook was taken: never skipped
            received = dt.datetime.now(dt.UTC)
            request = attrs.evolve(request, requested_at=received)
        sent = False
        try:
            # the guard first: no records are loaded for a request that would be refused anyway
            refusal = await request_refusal(request, self._consents, dt.datetime.now(dt.UTC), received)
            if refusal is not None:
                await self._release(key)  # nothing pushed: a redelivery is checked again (a grant may come first)
                logger.warning("ABDM data request refused before loading its records: %s", refusal.rule)
                return
            bundles = await _bounded(self._on_data_fetch(request), self._callback_timeout, "on_data_fetch", event)
            sent = True  # from here a failure may leave pages pushed: a redelivery must not push twice
            result = await self._client.abdm.push_health_data(request, bundles, consents=self._consents)
        except asyncio.CancelledError:
            if not sent:  # cancelled in on_data_fetch (aclose): nothing pushed, a redelivery may try again
                await self._release(key)
            raise
        except Exception as exc:
            if not sent or isinstance(exc, InvalidRequest):
                await self._release(key)  # nothing pushed: a redelivery may try again
            logger.error("ABDM data request not answered: %s", type(exc).__name__)
            return
        rules: dict[str, int] = {}
        for refused in result.refused:  # the rules, never the care contexts' ids
            rules[refused.rule or "unnamed"] = rules.get(refused.rule or "unnamed", 0) + 1
        logger.info(
            "ABDM data request answered: %d care context(s) pushed, %d not found, %d refused%s",
            len(result.pushed),
            len(result.missing),
            len(result.refused),
            "".join(f"; {rule}: {count}" for rule, count in rules.items()),
        )

    async def join(self, timeout: float | None = None) -> bool:
        """Wait until the answers under way have finished (a graceful shutdown; tests), or ``timeout`` seconds at
        most when given: True when none is left, False when some still run at the timeout (they are left running,
        :attr:`pending` counts them and :meth:`aclose` cancels them).

        Without ``timeout`` it still ends: each answer is bounded (its callback by ``callback_timeout``, its calls
        to the service by the client's timeouts), unless a callback refuses its cancellation. If this is cancelled,
        the answers it waits for are cancelled too and the cancellation propagates.

        Raises:
            InvalidRequest: ``timeout`` is not a positive number of seconds.
        """
        if timeout is None:
            await settle(self._tasks)
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _check_bound(timeout, "timeout")
        try:
            while self._tasks:
                left = deadline - loop.time()
                if left <= 0:
                    return False
                done, _ = await asyncio.wait(list(self._tasks), timeout=left)
                self._tasks.difference_update(done)  # not left to the done callbacks: see settle
        except asyncio.CancelledError:
            for task in self._tasks:
                task.cancel()
            raise
        return True

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
    linking: _LinkingArgs | None = None,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    event_timeout: float = DEFAULT_EVENT_TIMEOUT,
    consents: ConsentStore | None = None,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
) -> tuple[
    tuple[bytes, ...],
    HealthClient,
    WebhookCallback | None,
    DataFetchCallback | None,
    ProfileShareCallback | None,
    float,
    int,
    SeenStore,
    _UserLinking | None,
    float,
    float,
    ConsentStore | None,
    float | None,
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
    store: SeenStore = InMemorySeenStore() if seen_store is None else _seen_store(seen_store, stacklevel=4)
    callback_bound = _check_bound(callback_timeout, "callback_timeout")
    event_bound = _check_bound(event_timeout, "event_timeout")
    lease_bound = _check_bound(claim_lease, "claim_lease")
    lease = lease_bound if _leasing(store) else None  # a store without leases is called as before
    if consents is not None and not isinstance(consents, ConsentStore):
        raise InvalidArgumentType("consents must be a ConsentBook or another ConsentStore (async lookup and take)")
    return (
        keys,
        client,
        on_event,
        on_data_fetch,
        on_profile_share,
        tolerance,
        max_body_size,
        store,
        (None if linking is None else linking.build(client, callback_bound)),
        callback_bound,
        event_bound,
        consents,
        lease,
    )


@attrs.frozen
class _LinkingArgs:
    """The arguments of a patient's own search, as :func:`abdm_handler` and :func:`abdm_asgi` take them."""

    on_discover: DiscoverCallback | None
    on_link_otp: LinkOtpSender | None
    on_linked: LinkedCallback | None
    link_store: LinkOtpStore | None
    otp_ttl: float
    max_otp_tries: int

    def build(self, client: HealthClient, callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT) -> _UserLinking | None:
        """The checked :class:`_UserLinking`, or ``None`` when neither ``on_discover`` nor ``on_link_otp`` is given."""
        for name, callback in (
            ("on_discover", self.on_discover),
            ("on_link_otp", self.on_link_otp),
            ("on_linked", self.on_linked),
        ):
            if callback is not None and not callable(callback):
                raise InvalidRequest(f"{name} must be an async function")
        if self.on_discover is None and self.on_link_otp is None:
            if self.on_linked is not None or self.link_store is not None:
                raise InvalidRequest("on_linked and link_store need on_discover and on_link_otp")
            return None
        if self.on_discover is None or self.on_link_otp is None:
            raise InvalidRequest("a patient's own search needs both on_discover and on_link_otp")
        ttl = self.otp_ttl
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl) or ttl <= 0:
            raise InvalidRequest("otp_ttl must be a positive number of seconds")
        tries = self.max_otp_tries
        if isinstance(tries, bool) or not isinstance(tries, int) or tries < 1:
            raise InvalidRequest("max_otp_tries must be a positive number of tries")
        store: LinkOtpStore = InMemoryLinkOtpStore() if self.link_store is None else self.link_store
        if not isinstance(store, LinkOtpStore):
            raise InvalidRequest("link_store must have async put, get, consume and discard methods")
        return _UserLinking(
            client,
            self.on_discover,
            self.on_link_otp,
            self.on_linked,
            store,
            float(ttl),
            tries,
            callback_timeout=callback_timeout,
        )


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
    on_discover: DiscoverCallback | None = None,
    on_link_otp: LinkOtpSender | None = None,
    on_linked: LinkedCallback | None = None,
    link_store: LinkOtpStore | None = None,
    otp_ttl: float = DEFAULT_OTP_TTL,
    max_otp_tries: int = DEFAULT_MAX_OTP_TRIES,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    event_timeout: float = DEFAULT_EVENT_TIMEOUT,
    consents: ConsentStore | None = None,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
) -> AbdmHandler:
    """An ``aiohttp.web`` handler for ABDM's webhooks (``abha.*``), with everything :func:`aiohttp_handler` checks
    (signature, timestamp, size, replays: the same answers), and a data request answered by one callback:

    * every verified event goes to ``await on_event(event)`` first, when given (500 if it raises, as there). It
      runs before the answer, so it is cut at ``event_timeout`` seconds (default 5: the service does not document
      its patience, and common webhook senders wait 10 to 30 seconds): cancelled, logged with the event name and
      the bound, answered 500, and the service's redelivery runs it again;
    * an ``abha.consent_update`` event is taken into ``consents`` (a
      :class:`~health_async.resources.ConsentStore`: a :class:`~health_async.resources.ConsentBook`, or a store
      shared by several workers), when given, before ``on_event`` runs (``await consents.take(event)``; revoked,
      expired and denied are final: a late grant does not bring a consent back); every data request is then
      pushed with ``consents=`` that store, so a consent revoked, denied or expired by a webhook already
      received, even while the push is under way, is never pushed for (see ``client.abdm.push_health_data``);
    * an ``abha.hip_data_fetch`` event is answered 200 at once (the service's webhook timeout is short), and in
      the background the push's guard runs first: a request it refuses as a whole (ABDM's 20-minute window
      passed; with ``consents``, its consent unknown, not granted, ended, past its expiry, or not covering the
      requested types or dates) is logged with the rule's name and ``on_data_fetch`` is not called (no records
      are loaded for nothing). Otherwise ``await on_data_fetch(request)`` gives the bundles, which
      ``client.abdm.push_health_data`` encrypts to the HIU's key and pushes (one page per bundle, each guarded;
      an expired HIU key pushes nothing; the request is the event's :meth:`~WebhookEvent.data_request`, whose
      ``requested_at`` is the webhook's time, or the moment the receiver took the webhook when the event gives
      none, so ABDM's 20-minute window is always checked). A redelivered data request (the same transaction id,
      re-signed, so not a replay) is answered 503 with ``Retry-After: 5`` while the first is being answered (it
      may yet fail: the retry then runs), and ignored (200) once it was; it is forgotten, so a redelivery runs
      again, only when nothing was pushed (refused by the guard before loading, ``on_data_fetch`` failed, took
      longer than ``callback_timeout`` or was cancelled by :meth:`~AbdmHandler.aclose`, or the push was refused
      before sending). Outcomes are logged (counts, the rules of the care contexts refused, and error types only:
      no health data, no ids, no ABHA address).
    * an ``abha.hip_profile_share`` event (Scan & Share: a patient scanned your counter's QR code) is answered 200
      at once, and in the background ``await on_profile_share(share)`` (the event's
      :class:`~health_async.models.ProfileShare`) gives the token number, which
      ``client.abha.answer_profile_share`` sends (``None``: no token, nothing sent). A redelivered share (the
      same request id) is answered 503 (``Retry-After``) while the first is answered, ignored once it was; it
      is forgotten, so a redelivery
      runs again, only when nothing reached the service (the callback failed, or the answer was refused or
      failed before or without reaching it; an answer of unknown outcome is not sent twice). A share without a
      request id cannot be answered (logged, 200). Outcomes are logged without the share's personal data or the
      token. :class:`TokenCounter` is a ready callback (one token per person
      per counter per day).
    * a patient's own search (a PHR app looking for their records at your facility: the
      ``abha.care_context_discover``, ``abha.care_context_discover_link_init`` and
      ``abha.context_discover_link_confirm`` events), given ``on_discover`` and ``on_link_otp`` (both or
      neither): each step is answered 200 at once and, in the background, ``await on_discover(request)``
      gives the one matching patient (a :class:`~health_async.models.MatchedPatient`, or ``None``: ABDM asks
      to answer no match when several match) and ``client.abdm.answer_discover`` sends it; at the link request
      the library makes a 6-digit OTP (:mod:`secrets`), keeps only its HMAC in ``link_store`` (default a bounded
      :class:`InMemoryLinkOtpStore`; the :class:`LinkOtpStore` protocol lets several workers share one) for
      ``otp_ttl`` seconds, calls ``await on_link_otp(mobile, otp, request)`` (your SMS gateway) and answers
      ``on-init`` with a fresh link reference of its own (the link is bound to the discovery's requester); at the
      confirmation it checks the token (constant time, expiry, ``max_otp_tries`` wrong tries per discovery, one
      use), answers ``on-confirm`` with the care contexts or the :class:`~health_async.models.LinkingError`,
      and gives the link to ``await on_linked(link)`` (record the verified ABHA address against your patient).
      A redelivered step (same event and request id) is answered 503 (``Retry-After``) while the first is
      answered, ignored once it was, and forgotten when nothing reached the service. The OTP, mobile number,
      ABHA address and ids are never logged.

    **Bounds.** Each callback run in the background (``on_data_fetch``, ``on_profile_share``, ``on_discover``,
    ``on_link_otp``, ``on_linked``) is cut at ``callback_timeout`` seconds (default 60): cancelled, logged with the
    event name, the callback's name and the bound (never data), and counted as a failure, as above. The calls to
    the service are bounded by the client's own timeouts, so every answer ends and :meth:`~AbdmHandler.join`
    returns; ``join(timeout=...)`` waits at most that long. (A callback that catches its cancellation and goes on
    cannot be cut; don't.)

    **De-duplication across workers.** The data requests, profile shares and linking steps taken are recorded in
    ``seen_store``, beside the replay keys, for a day (ABDM's window to answer a data request is 20 minutes; no
    redelivery comes a day later), under a SHA-256 of their kind and id (64 hex digits: no raw id is stored). With
    one store shared by several workers (a Redis :class:`SeenStore`), each is answered once across all of them,
    and one released after a failure is answered by the next delivery, whichever worker gets it. Each is claimed
    with a random token and released only by its own claim (compare-and-delete): a redelivery cancelled while its
    claim is in flight never frees the first's, so it is never pushed twice. A store that
    fails at that check answers 500 (the redelivery runs). Without ``seen_store`` each handler has its own
    :class:`InMemorySeenStore`.

    **A worker that dies.** The day above is how long an answer *done* is remembered. While it runs, a claim (of
    the webhook, and of the data request, profile share or linking step it starts) is held only by a lease of
    ``claim_lease`` seconds (default :data:`DEFAULT_CLAIM_LEASE`, 30), renewed every third of that by a heartbeat
    while the work runs (``on_event``, then the background answer: the guard, ``on_data_fetch`` and the push), with a
    :class:`LeasingSeenStore` (the default store and ``RedisSeenStore`` are ones). So a worker killed mid-answer
    (``kill -9``, out of memory) holds it ``claim_lease`` seconds at most: its redeliveries get 503 until then and
    the next one runs (well inside ABDM's 20-minute window), whereas a live worker's answer, however long, is never
    run twice. (A store without ``renew`` keeps a claim in progress until it expires, a day, as before.)

    Register :meth:`AbdmHandler.handle` (``app.router.add_post(path, handler.handle)``) and close it with the app
    (``app.on_cleanup.append(handler.on_cleanup)``) or ``await handler.aclose()``: the background answers under
    way are cancelled, and a data request or profile share arriving during or after the close (or still in
    ``on_event`` when it began) is answered 503, logged at WARNING with the event name only, its replay key
    forgotten so the service's redelivery runs; nothing is started after the close. For FastAPI, Starlette or
    another ASGI framework, :func:`abdm_asgi` is the same receiver as an ASGI application.
    """
    linking = _LinkingArgs(on_discover, on_link_otp, on_linked, link_store, otp_ttl, max_otp_tries)
    return AbdmHandler(
        *_abdm_receiver_args(
            secret,
            client,
            on_event,
            on_data_fetch,
            on_profile_share,
            tolerance,
            max_body_size,
            seen_store,
            linking,
            callback_timeout,
            event_timeout,
            consents,
            claim_lease,
        )
    )
