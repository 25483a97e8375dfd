"""Every limit a request takes is given back on every way out (issue 36, "Hardening, round 4").

A request holds up to three things while it is under way: a connection slot (``max_connections``), a charge to the
client's ``rate_limit``, and an admission of the shared limiter (``limiter=``), which wants exactly one ``sent(at)``
or ``unsent()`` for each ``acquire``. A request cancelled while its large body was being encrypted, or whose body
preparation raised, used to keep its rate charge for good: a client with ``rate_limit=1`` then stalled on every later
call. Here every await and every step of a request's way (the token, the body's preparation, the slot, the rate,
the shared limiter, the send, the wire, the reading of the answer) is made to raise, or is cancelled while it
waits, and the client's limits must be back at rest afterwards, with a following call going through at once.

Also here: the body's preparation counts in the call's time budget (a 0.3 s budget is not 0.3 s after a 0.6 s
encryption).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any
from unittest import mock

import aiohttp
import pytest
from aiohttp import web

import health_async as ha
from health_async import _session, jwe
from health_async._session import Session
from health_async.testing import FakeHealthServer, Fault

from ..conftest import Serve

KEY = "0123456789abcdef"
NEVER = ha.RetryPolicy.never()
BODY = {"note": "a request body"}


class RecordingLimiter:
    """A :class:`~health_async.SharedLimiter` that reports sent/unsent (so the client must report each admission
    exactly once) and records what it was told. ``mode``: ``"admit"``, ``"block"`` (waits until cancelled) or
    ``"refuse"`` (says no, holding nothing)."""

    def __init__(self) -> None:
        self.mode = "admit"
        self.acquired = 0
        self.reports = 0
        self.outstanding = 0  # admitted and not yet reported
        self.stray = 0  # reports of no admission
        self.reached = asyncio.Event()

    async def acquire(self, deadline: float | None = None) -> bool:
        if self.mode == "block":
            self.reached.set()
            await asyncio.Event().wait()
        if self.mode == "refuse":
            return False
        self.acquired += 1
        self.outstanding += 1
        return True

    def pause(self, seconds: float) -> None:
        pass

    def sent(self, at: float) -> None:
        self._report()

    def unsent(self) -> None:
        self._report()

    def _report(self) -> None:
        self.reports += 1
        if self.outstanding == 0:
            self.stray += 1
        else:
            self.outstanding -= 1


class Wire:
    """The loopback service: answers ``POST /x`` and ``GET /y`` at once, or holds its answer (``hold``) until the
    client goes away, or answers a body over the client's size cap (``huge``)."""

    def __init__(self) -> None:
        self.mode = "answer"
        self.received = 0
        self.reached = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.received += 1
        if self.mode == "hold":
            self.reached.set()
            await asyncio.Event().wait()
        if self.mode == "huge":
            return web.json_response({"blob": "x" * 4096})
        return web.json_response({"ok": True})


@pytest.fixture
async def wire(serve: Serve) -> tuple[Wire, str]:
    service = Wire()
    url = await serve({("POST", "/x"): service.handle, ("GET", "/y"): service.handle})
    return service, url


def make_client(url: str, limiter: RecordingLimiter | None = None, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {
        "token": "tok",
        "encryption_key": KEY,
        "key_id": "k1",
        "retry": NEVER,
        "timeout": 5,
        "max_connections": 1,
        "max_response_size": 1024,
    }
    if limiter is not None:
        options.update(rate_limit=2, limiter=limiter)
    options.update(kwargs)
    return ha.HealthClient(base_url=url, **options)


def post(session: Session, **kwargs: Any) -> Coroutine[Any, Any, Any]:
    """An encrypted, not idempotent call with a JSON body, straight through the chokepoint."""
    return session.request("POST", "/x", operation="x", json=BODY, encrypt=True, idempotent=False, **kwargs)


def at_rest(session: Session, limiter: RecordingLimiter | None = None) -> None:
    limits = session.limits
    assert limits.in_flight == 0, "a connection slot was kept"
    assert limits.pending == 0, "a rate charge was never reported sent or unsent"
    if limiter is not None:
        assert limiter.outstanding == 0, "a shared admission was never reported"
        assert limiter.stray == 0, "a shared admission was reported twice"
        assert limiter.reports == limiter.acquired


async def forever(reached: asyncio.Event) -> Any:
    reached.set()
    await asyncio.Event().wait()


class _Stuck:
    """What ``Session._exchange`` returns when the send step is made to fail or to hang."""

    def __init__(self, how: str, reached: asyncio.Event) -> None:
        self.how, self.reached = how, reached

    async def __aenter__(self) -> Any:
        if self.how == "raise":
            raise aiohttp.ClientConnectionError("connection reset by peer")
        return await forever(self.reached)

    async def __aexit__(self, *exc: object) -> None:
        return None


async def _until(condition: Callable[[], bool]) -> None:
    """Let the loop run until ``condition`` holds (a few turns; never a timed sleep)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the call never reached the step")


@contextlib.asynccontextmanager
async def at_step(
    step: str, how: str, session: Session, wire: Wire, limiter: RecordingLimiter
) -> AsyncIterator[tuple[dict[str, Any], Callable[[], Awaitable[object]]]]:
    """Make ``step`` raise (``how="raise"``) or hang (``"cancel"``); yields the call's extra arguments and a wait
    for the call to be hanging there. Everything is undone on exit."""
    reached = asyncio.Event()
    limits = session.limits
    extra: dict[str, Any] = {}
    arrived: Callable[[], Awaitable[object]] = reached.wait

    async def fail(*_: Any) -> Any:
        if how == "raise":
            raise ha.TransportError("the step failed", sent=False)
        return await forever(reached)

    with contextlib.ExitStack() as undo:
        if step == "token":
            undo.enter_context(mock.patch.object(session.auth, "current", return_value=None))
            undo.enter_context(mock.patch.object(session.auth, "token", fail))
        elif step == "prepare":

            async def encrypt(_: bytes) -> bytes:
                if how == "raise":
                    raise ha.EncryptionError("the body could not be encrypted")
                return await forever(reached)  # type: ignore[no-any-return]

            undo.enter_context(mock.patch.object(session, "_encrypt", encrypt))
        elif step == "slot":
            assert limits.enter()  # the only slot, held by someone else
            undo.callback(limits.leave)
            extra["timeout"] = 0.05  # raise: the wait outlasts the budget
            arrived = _waiting(lambda: bool(limits._slot_waiters))
        elif step == "rate":
            for _ in range(2):  # the whole window charged to requests on their way
                assert await limits.admit()
            undo.callback(limits.unsent)
            undo.callback(limits.unsent)
            extra["timeout"] = 0.05
            arrived = _waiting(lambda: limits._rate_moved is not None)
        elif step == "shared":
            limiter.mode = "block" if how == "cancel" else "refuse"
            undo.callback(setattr, limiter, "mode", "admit")
            arrived = limiter.reached.wait
        elif step == "send":
            undo.enter_context(mock.patch.object(session, "_exchange", return_value=_Stuck(how, reached)))
        elif step == "wire":
            wire.mode = "hold" if how == "cancel" else "huge"
            undo.callback(setattr, wire, "mode", "answer")
            arrived = wire.reached.wait
        elif step == "read":

            def read(*_: Any) -> Awaitable[bytes]:
                if how == "raise":
                    raise aiohttp.ClientPayloadError("the body was cut off")
                return forever(reached)

            undo.enter_context(mock.patch.object(_session, "_read_capped", read))
        else:  # pragma: no cover
            raise AssertionError(step)
        yield extra, arrived


def _waiting(condition: Callable[[], bool]) -> Callable[[], Awaitable[None]]:
    return lambda: _until(condition)


STEPS = ["token", "prepare", "slot", "rate", "shared", "send", "wire", "read"]


@pytest.mark.parametrize("how", ["cancel", "raise"])
@pytest.mark.parametrize("step", STEPS)
async def test_every_exit_gives_back_the_slot_the_rate_charge_and_the_shared_admission(
    wire: tuple[Wire, str], step: str, how: str
) -> None:
    """Whatever step of an encrypted call fails or is cancelled, the slot, the rate charge and the shared
    limiter's admission are all given back, each admission reported exactly once, and the next call goes at once."""
    service, url = wire
    limiter = RecordingLimiter()
    async with make_client(url, limiter) as client:
        session = client._session
        await session.open()
        async with at_step(step, how, session, service, limiter) as (extra, arrived):
            call = asyncio.create_task(post(session, **extra))
            if how == "cancel":
                await asyncio.wait_for(arrived(), 5)
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
            else:
                with pytest.raises(ha.HealthError):
                    await call
        at_rest(session, limiter)
        started = time.monotonic()
        assert await asyncio.wait_for(post(session), 2) == {"ok": True}
        assert time.monotonic() - started < 0.5  # at once: nothing left charged to the rate
        at_rest(session, limiter)
        assert limiter.acquired >= 1


@pytest.mark.parametrize("how", ["cancel", "raise"])
@pytest.mark.parametrize("step", ["wire", "read"])
async def test_the_plain_way_gives_back_its_slot(wire: tuple[Wire, str], step: str, how: str) -> None:
    """A GET on the plain way (no rate, no shared limiter): its slot comes back whatever happens to it."""
    service, url = wire
    async with make_client(url) as client:
        session = client._session
        await session.open()
        with mock.patch.object(session, "_attempt", side_effect=AssertionError("not the plain way")):
            async with at_step(step, how, session, service, RecordingLimiter()) as (_, arrived):
                call = asyncio.create_task(session.request("GET", "/y", operation="y", idempotent=True))
                if how == "cancel":
                    await asyncio.wait_for(arrived(), 5)
                    call.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await call
                else:
                    with pytest.raises(ha.HealthError):
                        await call
            at_rest(session)
            assert await asyncio.wait_for(session.request("GET", "/y", operation="y", idempotent=True), 2) == {
                "ok": True
            }
        at_rest(session)


@pytest.mark.parametrize("how", ["cancel", "raise"])
@pytest.mark.parametrize("step", ["shared", "send", "wire", "read"])
async def test_the_plain_way_reports_its_shared_admission(wire: tuple[Wire, str], step: str, how: str) -> None:
    """A GET with a shared limiter and no rate limit takes the plain way too (issue 44: a shared limiter that admits
    at once costs the client little), asking the limiter itself: whatever happens to the call, its slot comes back
    and its admission is reported exactly once, sent or unsent; a limiter that waits is cancelled with the call."""
    service, url = wire
    limiter = RecordingLimiter()
    async with make_client(url, limiter, rate_limit=None) as client:
        session = client._session
        await session.open()
        with mock.patch.object(session, "_attempt", side_effect=AssertionError("not the plain way")):
            async with at_step(step, how, session, service, limiter) as (_, arrived):
                call = asyncio.create_task(session.request("GET", "/y", operation="y", idempotent=True))
                if how == "cancel":
                    await asyncio.wait_for(arrived(), 5)
                    call.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await call
                else:
                    with pytest.raises(ha.HealthError):
                        await call
            at_rest(session, limiter)
            assert await asyncio.wait_for(session.request("GET", "/y", operation="y", idempotent=True), 2) == {
                "ok": True
            }
        at_rest(session, limiter)
        assert limiter.acquired >= 1


class SlowLimiter(RecordingLimiter):
    """Admits after a few turns of the loop (``turns``), or never (``None``: until cancelled, which it records)."""

    def __init__(self, turns: int | None) -> None:
        super().__init__()
        self.turns = turns
        self.cancelled = 0

    async def acquire(self, deadline: float | None = None) -> bool:
        try:
            if self.turns is None:
                await asyncio.Event().wait()
            for _ in range(self.turns or 0):
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await super().acquire(deadline)


@pytest.mark.parametrize("way", ["plain", "general"])
async def test_a_shared_limiter_that_waits_is_waited_for_within_the_budget(wire: tuple[Wire, str], way: str) -> None:
    """A limiter that waits before it admits is waited for, once (its wait goes on where it began); one that never
    admits is cancelled at the call's deadline, though it ignores the deadline itself: the call fails unsent."""
    _, url = wire
    limiter = SlowLimiter(3)
    options: dict[str, Any] = {"rate_limit": None} if way == "plain" else {"rate_limit": 100}
    async with make_client(url, limiter, timeout=0.2, **options) as client:
        session = client._session
        await session.open()
        with contextlib.ExitStack() as plain:
            if way == "plain":
                plain.enter_context(mock.patch.object(session, "_attempt", side_effect=AssertionError("not plain")))
            assert await session.request("GET", "/y", operation="y", idempotent=True) == {"ok": True}
            assert limiter.acquired == 1
            at_rest(session, limiter)
            limiter.turns = None
            with pytest.raises(ha.RequestTimeout) as caught:
                await session.request("GET", "/y", operation="y", idempotent=True)
        assert caught.value.sent is False
        assert "shared limiter" in str(caught.value)
        assert limiter.cancelled == 1
        at_rest(session, limiter)


# --------------------------------------------------------------------------------- the issue's own case


@contextlib.contextmanager
def gated_encryption() -> Iterator[tuple[threading.Event, threading.Event]]:
    """The real JWE encryption, held in its worker thread until ``go`` is set (``running``: it has begun)."""
    running, go = threading.Event(), threading.Event()
    real = jwe.encrypt

    def encrypt(*args: Any, **kwargs: Any) -> dict[str, str]:
        running.set()
        go.wait(10)
        return real(*args, **kwargs)

    with mock.patch.object(jwe, "encrypt", encrypt):
        try:
            yield running, go
        finally:
            go.set()


async def test_a_call_cancelled_while_its_large_body_is_encrypted_does_not_stall_the_client(
    wire: tuple[Wire, str],
) -> None:
    """The issue's case: ``rate_limit=1``, a large JSON body encrypted in a worker thread, the call cancelled
    meanwhile. Its rate charge used to stay pending for good, and every later call waited out its budget."""
    service, url = wire
    large = {"blob": "x" * (2 * jwe.THREAD_THRESHOLD)}
    async with make_client(url, rate_limit=1, max_connections=4) as client:
        session = client._session
        with gated_encryption() as (running, go):
            call = asyncio.create_task(_post_json(session, large))
            await asyncio.to_thread(running.wait, 5)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            go.set()
        at_rest(session)
        started = time.monotonic()
        assert await asyncio.wait_for(_post_json(session, large), 3) == {"ok": True}
        assert time.monotonic() - started < 0.5
        assert service.received == 1  # the cancelled call sent nothing
        at_rest(session)


def _post_json(session: Session, body: Any) -> Coroutine[Any, Any, Any]:
    return session.request("POST", "/x", operation="x", json=body, encrypt=True, idempotent=False)


async def test_a_body_whose_preparation_raises_holds_nothing(wire: tuple[Wire, str]) -> None:
    """A streamed body whose making raises (its file gone, say): the call fails with that error, and with
    ``rate_limit=1`` the next call still goes at once."""
    service, url = wire
    async with make_client(url, rate_limit=1) as client:
        session = client._session

        def gone() -> Any:
            raise ha.InvalidRequest("the file to send is gone")

        with pytest.raises(ha.InvalidRequest, match="gone"):
            await session.request("POST", "/x", operation="x", body=gone, idempotent=False)
        at_rest(session)
        started = time.monotonic()
        assert await asyncio.wait_for(post(session), 2) == {"ok": True}
        assert time.monotonic() - started < 0.5
        assert service.received == 1


# --------------------------------------------------------------------------------- the time budget


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def abha_client(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    return ha.HealthClient(
        base_url=server.url,
        token=server.token,
        client_id=server.client_id,
        user_id="oid-1",
        encryption_key=server.encryption_key,
        key_id=server.key_id,
        retry=NEVER,
        **kwargs,
    )


def slow_encryption(session: Session, seconds: float) -> Any:
    real = session._encrypt

    async def encrypt(plaintext: bytes) -> bytes:
        await asyncio.sleep(seconds)
        return await real(plaintext)

    return mock.patch.object(session, "_encrypt", encrypt)


@pytest.mark.parametrize("budget", ["client", "call"])
async def test_an_encryption_past_the_budget_fails_the_call_unsent(server: FakeHealthServer, budget: str) -> None:
    """0.3 s budget, 0.6 s encryption: :class:`RequestTimeout` at the budget, ``sent=False``, nothing reached the
    service, nothing held; it used to be sent after the encryption and succeed at 0.6 s."""
    limiter = RecordingLimiter()
    options: dict[str, Any] = {"timeout": 0.3} if budget == "client" else {}
    per_call: dict[str, Any] = {} if budget == "client" else {"timeout": 0.3}
    async with abha_client(server, rate_limit=1, limiter=limiter, **options) as client:
        session = client._session
        started = time.monotonic()
        with slow_encryption(session, 0.6), pytest.raises(ha.RequestTimeout) as info:
            await client.abha.aadhaar_init(server.data.valid_aadhaar[0], encrypt=True, **per_call)
        assert time.monotonic() - started < 0.55
        assert info.value.sent is False and not isinstance(info.value, ha.OutcomeUnknown)
        assert "budget" in str(info.value) and type(info.value) is ha.RequestTimeout  # no private class leaks
        assert server.calls("aadhaar_init") == 0
        at_rest(session, limiter)
        init = await client.abha.aadhaar_init(server.data.valid_aadhaar[0], encrypt=True, timeout=5)
        assert init.txn_id


async def test_the_encryption_time_counts_in_the_budget_of_the_send(server: FakeHealthServer) -> None:
    """0.3 s budget, 0.2 s encryption, a service answering in 0.25 s: the send has only what is left (0.1 s), so
    the call fails at its budget instead of succeeding at 0.45 s."""
    server.inject("aadhaar_init", Fault(latency=0.25))
    async with abha_client(server, timeout=0.3) as client:
        session = client._session
        started = time.monotonic()
        with slow_encryption(session, 0.2), pytest.raises(ha.HealthError) as info:
            await client.abha.aadhaar_init(server.data.valid_aadhaar[0], encrypt=True)
        elapsed = time.monotonic() - started
    # sent, so an OTP send that timed out is an unknown outcome (the OTP may have gone out)
    assert isinstance(info.value, ha.OutcomeUnknown) and isinstance(info.value.__cause__, ha.RequestTimeout)
    assert elapsed < 0.42
