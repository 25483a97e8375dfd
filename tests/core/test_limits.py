"""The client's limits: the in-flight bound (``Limits.enter`` / ``wait_slot`` / ``leave``: at most
``max_connections`` requests on the wire, first come first served, a cancelled waiter never keeps or loses a slot),
and the rate, the pause and every deadline holding at the moment a request is sent."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import socket
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver

import health_async as ha
from health_async._limits import Limits, Overdue
from health_async.ingest import RateLimiter
from health_async.testing import FakeHealthServer, Fault

from ..conftest import Serve

DOC = {"document_id": "d", "document_type": "lr"}


async def test_slots_are_bounded_and_given_back() -> None:
    limits = Limits(2)
    assert limits.enter() and limits.enter()
    assert not limits.enter()
    assert limits.in_flight == 2
    limits.leave()
    assert limits.in_flight == 1
    assert limits.enter()
    limits.leave()
    limits.leave()
    assert limits.in_flight == 0


async def test_waiters_get_slots_in_arrival_order_and_newcomers_do_not_overtake() -> None:
    limits = Limits(1)
    assert limits.enter()
    order: list[int] = []

    async def one(n: int) -> None:
        await limits.wait_slot()
        order.append(n)
        await asyncio.sleep(0)
        limits.leave()

    tasks = [asyncio.create_task(one(n)) for n in range(5)]
    await asyncio.sleep(0)  # all five are waiting now
    limits.leave()  # handed straight to the first waiter...
    assert not limits.enter()  # ...so a newcomer finds none free
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert limits.in_flight == 0


async def test_a_waiter_cancelled_while_waiting_holds_nothing() -> None:
    limits = Limits(1)
    assert limits.enter()
    waiting = asyncio.create_task(limits.wait_slot())
    behind = asyncio.create_task(limits.wait_slot())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    limits.leave()  # goes to the waiter behind, not to the cancelled one
    await behind
    assert limits.in_flight == 1
    limits.leave()
    assert limits.in_flight == 0


async def test_a_waiter_cancelled_after_the_hand_over_passes_the_slot_on() -> None:
    limits = Limits(1)
    assert limits.enter()
    first = asyncio.create_task(limits.wait_slot())
    second = asyncio.create_task(limits.wait_slot())
    await asyncio.sleep(0)
    limits.leave()  # the slot is first's now...
    first.cancel()  # ...but it is cancelled before it runs again
    with pytest.raises(asyncio.CancelledError):
        await first
    await second  # the slot went on to the next waiter, not lost
    assert limits.in_flight == 1
    limits.leave()
    assert limits.in_flight == 0


async def test_a_cancelled_waiter_already_skipped_by_leave_is_not_removed_twice() -> None:
    limits = Limits(1)
    assert limits.enter()
    waiting = asyncio.create_task(limits.wait_slot())
    await asyncio.sleep(0)
    waiting.cancel()  # cancels the waiter's future at once; the task itself resumes later...
    limits.leave()  # ...after leave() has skipped and dropped that future
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert limits.in_flight == 0


@pytest.mark.parametrize("owned", [True, False], ids=["own-session", "caller-session"])
async def test_in_flight_requests_never_exceed_max_connections(serve: Serve, owned: bool) -> None:
    # A caller's session here allows 100 connections: only the client's own slots hold the requests to 3.
    active = peak = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    async with contextlib.AsyncExitStack() as stack:
        http = (
            None
            if owned
            else await stack.enter_async_context(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100)))
        )
        client = await stack.enter_async_context(
            ha.HealthClient(base_url=url, token="t", user_id="u", max_connections=3, session=http)
        )
        await asyncio.gather(*(client.documents.describe(f"d{i}") for i in range(20)))
        assert client._session.limits.in_flight == 0
    assert peak == 3


# ------------------------------------------------------------------------------ limits at the moment of sending


class _SlowResolver(AbstractResolver):
    """Resolves ``localhost`` to 127.0.0.1, the first connections slowly: a cold connect (DNS, TCP, TLS) that
    takes its time, as on a real network."""

    def __init__(self, delays: list[float]) -> None:
        self.delays = delays

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        if self.delays:
            await asyncio.sleep(self.delays.pop(0))
        return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": socket.AF_INET, "proto": 0, "flags": 0}]

    async def close(self) -> None:
        return None


def _most_in_a_window(times: list[float], width: float) -> int:
    return max(sum(1 for t in times if start <= t < start + width) for start in times)


@pytest.mark.parametrize("how", ["own-session", "caller-session", "shared-limiter"])
async def test_the_rate_holds_as_the_service_counts_arrivals_with_cold_connects(
    serve: Serve, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four connects that take 0.6 s must not bunch their requests with the next four (sent on warm connections
    once the rate allows): a request is charged when it goes out, not when it was admitted. The same for the
    ingest's RateLimiter (a SharedLimiter): the client reports each request it acquired sent or unsent."""
    arrivals: list[float] = []

    async def handler(request: web.Request) -> web.Response:
        arrivals.append(time.monotonic())
        return web.json_response(DOC)

    url = (await serve({("GET", "/mr/api/v1/docs/{id}"): handler})).replace("127.0.0.1", "localhost")
    resolver = _SlowResolver([0.6] * 4)
    connector = functools.partial(aiohttp.TCPConnector, resolver=resolver, use_dns_cache=False)
    limiter = RateLimiter(4) if how == "shared-limiter" else None
    rates: dict[str, Any] = {"limiter": limiter} if limiter is not None else {"rate_limit": 4}
    async with contextlib.AsyncExitStack() as stack:
        http = None
        if how == "caller-session":
            http = await stack.enter_async_context(aiohttp.ClientSession(connector=connector(limit=100)))
        else:
            monkeypatch.setattr(aiohttp, "TCPConnector", connector)
        client = await stack.enter_async_context(
            ha.HealthClient(base_url=url, token="t", user_id="u", max_connections=8, session=http, **rates)
        )
        await asyncio.gather(*(client.documents.describe(f"d{i}") for i in range(12)))
        with pytest.raises(ha.RequestTimeout):  # a request that never leaves gives its charge back
            await client.documents.describe("late", timeout=0.05)
    assert len(arrivals) == 12
    assert _most_in_a_window(arrivals, 0.9) <= 4  # 0.1 s of slack for the loop's own scheduling
    if limiter is not None:
        assert limiter._limits._pending == 0  # nothing stays charged


async def test_a_pause_holds_back_requests_already_waiting_for_a_connection(serve: Serve) -> None:
    """Requests that waited for a slot while the service asked for a pause are not sent until it ends."""
    arrivals: list[float] = []
    paused_at: list[float] = []

    async def handler(request: web.Request) -> web.Response:
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            await asyncio.sleep(0.2)
            paused_at.append(time.monotonic())
            return web.json_response({}, status=503, headers={"Retry-After": "1"})
        if len(arrivals) == 2:
            await asyncio.sleep(0.5)  # holds the other slot past the start of the pause
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    retry = ha.RetryPolicy(attempts=2, base_delay=0, jitter=0)
    async with ha.HealthClient(base_url=url, token="t", user_id="u", max_connections=2, retry=retry) as client:
        await asyncio.gather(*(client.documents.describe(f"d{i}") for i in range(6)))
    assert len(arrivals) == 7 and paused_at  # six calls, one of them twice
    later = arrivals[2:]
    assert min(later) >= paused_at[0] + 0.95, [round(t - paused_at[0], 2) for t in later]


async def test_a_storage_host_pause_never_holds_back_the_api() -> None:
    async with FakeHealthServer(users=1, documents_per_user=1) as server:
        user = server.data.user_ids[0]
        doc_id = server.data.document_ids(user)[0]
        server.inject("storage_form", Fault(status=503, retry_after=30, times=1))
        async with ha.HealthClient(
            base_url=server.url, token=server.token, user_id=user, retry=ha.RetryPolicy.never()
        ) as client:
            with pytest.raises(ha.UploadFailed, match="HTTP 503"):
                await client.documents.create(b"%PDF-1.4 " + b"x" * 2000)
            doc = await asyncio.wait_for(client.documents.describe(doc_id), 5)  # at once, not in 30 s
            assert doc.document_id == doc_id
            limits = client._session.limits
            assert limits.paused_for() == 0  # the API is not paused...
            assert any(limits.paused_for(origin) > 25 for origin in limits._origin_pauses)  # ...the storage host is


class _NeverAdmits:
    """A shared limiter that never admits: it answers False when given a deadline, else waits for ever."""

    def __init__(self) -> None:
        self.deadlines: list[float | None] = []

    async def acquire(self, deadline: float | None = None) -> bool:
        self.deadlines.append(deadline)
        if deadline is not None:
            return False
        await asyncio.Event().wait()
        return True

    def pause(self, seconds: float) -> None:
        return None


class _LegacyLimiter:
    """A limiter written before acquire() took the deadline: it waits for ever."""

    async def acquire(self) -> None:
        await asyncio.Event().wait()

    def pause(self, seconds: float) -> None:
        return None


@pytest.mark.parametrize("limiter", [_NeverAdmits(), _LegacyLimiter()], ids=["takes-deadline", "legacy"])
async def test_the_shared_limiter_wait_is_bounded_by_the_call_deadline(serve: Serve, limiter: Any) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    async with ha.HealthClient(base_url=url, token="t", user_id="u", limiter=limiter) as client:
        started = time.monotonic()
        with pytest.raises(ha.RequestTimeout) as info:
            await client.documents.describe("d1", timeout=0.3)
        assert time.monotonic() - started < 0.6 and info.value.sent is False  # nothing was sent
        assert type(info.value) is ha.RequestTimeout  # not the session's private marker class
    if isinstance(limiter, _NeverAdmits):
        (deadline,) = limiter.deadlines
        assert deadline is not None and abs(deadline - (started + 0.3)) < 0.1  # the call's own deadline


async def test_a_request_never_sent_is_not_charged_to_the_rate() -> None:
    limits = Limits(10, rate=2)
    assert await limits.admit() and await limits.admit()
    limits.unsent()  # refused connection: it never left
    limits.sent()
    started = time.monotonic()
    assert await limits.admit()  # the second slot of this window is free again: no wait
    assert time.monotonic() - started < 0.1
    limits.sent()
    with pytest.raises(Overdue):  # now two sent in the window: the next waits about a second
        await limits.admit(deadline=time.monotonic() + 0.2)


# ------------------------------------------------------------------- every wait is bounded by the call's deadline


async def _ends_not_sent_within(call: Any, budget: float) -> ha.RequestTimeout:
    started = time.monotonic()
    with pytest.raises(ha.RequestTimeout) as info:
        await call
    assert time.monotonic() - started < budget + 0.4, "the call outlived its time budget"
    assert info.value.sent is False
    # the public class itself, not a private subclass whose name would show in the caller's traceback and logs
    assert type(info.value) is ha.RequestTimeout
    return info.value


async def test_the_wait_for_a_connection_slot_is_bounded_by_the_call_deadline(serve: Serve) -> None:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.match_info["id"])
        if request.match_info["id"] == "slow":
            await asyncio.sleep(2)
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    async with ha.HealthClient(base_url=url, token="t", user_id="u", max_connections=1) as client:
        slow = asyncio.create_task(client.documents.describe("slow"))
        await asyncio.sleep(0.1)  # it holds the only slot
        error = await _ends_not_sent_within(client.documents.describe("late", timeout=0.3), 0.3)
        assert "connection slot" in str(error)
        await slow
        await client.documents.describe("after")  # the slot the late call waited for was never lost
    assert seen == ["slow", "after"]


async def test_the_wait_behind_other_rate_limited_requests_is_bounded_by_the_call_deadline(serve: Serve) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    async with ha.HealthClient(base_url=url, token="t", user_id="u", rate_limit=1) as client:
        queued = [asyncio.create_task(client.documents.describe(f"q{i}")) for i in range(4)]
        await asyncio.sleep(0.05)  # one sent, three waiting in line for the next seconds
        await _ends_not_sent_within(client.documents.describe("late", timeout=0.3), 0.3)
        for task in queued:
            task.cancel()
        await asyncio.gather(*queued, return_exceptions=True)


@pytest.mark.parametrize("when", ["first-token", "refresh-after-401"])
async def test_fetching_the_token_is_bounded_by_the_call_deadline(serve: Serve, when: str) -> None:
    answers: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        answers.append(401 if when == "refresh-after-401" and not answers else 200)
        return web.json_response(DOC, status=answers[-1])

    fetched: list[float] = []

    async def provider() -> str:
        fetched.append(time.monotonic())
        if when == "first-token" or len(fetched) > 1:
            await asyncio.sleep(2)  # a slow identity provider
        return f"token-{len(fetched)}"

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    async with ha.HealthClient(base_url=url, token_provider=provider, user_id="u") as client:
        if when == "refresh-after-401":
            await client._session.auth.token(client._session)  # the first token is at hand
        error = await _ends_not_sent_within(client.documents.describe("d", timeout=0.3), 0.3)
        assert "access token" in str(error)
    assert answers == ([] if when == "first-token" else [401])  # nothing sent once the budget ran out


async def test_a_caller_session_with_fewer_connections_cannot_slip_requests_past_a_pause(serve: Serve) -> None:
    """Requests admitted beyond the caller's connector limit would queue inside aiohttp and leave during a pause
    that began meanwhile: max_connections is capped by that limit."""
    arrivals: list[float] = []
    paused_at: list[float] = []

    async def handler(request: web.Request) -> web.Response:
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            paused_at.append(time.monotonic())
            return web.json_response({}, status=429, headers={"Retry-After": "1"})
        await asyncio.sleep(0.1)
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    retry = ha.RetryPolicy(attempts=2, base_delay=0, jitter=0)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=2)) as http:
        client = ha.HealthClient(base_url=url, token="t", user_id="u", session=http, max_connections=10, retry=retry)
        async with client:
            await asyncio.gather(*(client.documents.describe(f"d{i}") for i in range(8)))
            assert client._session.limits.max_in_flight == 2
    # sent after the pause began and before it ended (the one already on the wire with the first does not count)
    during = [round(t - paused_at[0], 2) for t in arrivals if paused_at[0] + 0.05 < t < paused_at[0] + 0.95]
    assert len(arrivals) == 9 and during == [], during


@pytest.mark.parametrize("rate", [0, -1, math.inf, math.nan, True])
def test_a_rate_limiter_needs_a_finite_positive_rate(rate: Any) -> None:
    with pytest.raises(ha.InvalidRequest, match="rate_limit"):
        RateLimiter(rate)
