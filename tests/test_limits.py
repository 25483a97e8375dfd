"""The client's in-flight bound (``Limits.enter`` / ``wait_slot`` / ``leave``): at most ``max_connections`` requests
on the wire, first come first served, and a cancelled waiter never keeps or loses a slot."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import pytest
from aiohttp import web

import health_async as ha
from health_async._limits import Limits

from .conftest import Serve

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
