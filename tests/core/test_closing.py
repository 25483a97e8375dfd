"""Closing the client while calls run, and calls' arguments the chokepoint refuses before anything is sent.

A client closed under a call ends that call with :class:`ClientClosedError` (never a ``CancelledError`` nobody
asked for), starts no task once closed, and always closes its aiohttp session, even when ``aclose`` is itself
interrupted.
"""

from __future__ import annotations

import asyncio
import math
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import health_async as ha
from health_async.testing import FakeHealthServer


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=3) as srv:
        yield srv


def stalled_provider() -> tuple[asyncio.Event, Callable[[], Awaitable[str]]]:
    """A token provider that never answers, and the event it sets once asked."""
    fetching = asyncio.Event()

    async def provider() -> str:
        fetching.set()
        await asyncio.sleep(30)
        return "never"

    return fetching, provider


def library_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if not t.done() and "health_async" in repr(t.get_coro())]


async def test_a_call_waiting_for_its_token_when_the_client_closes_gets_client_closed(server: FakeHealthServer) -> None:
    fetching, provider = stalled_provider()

    client = ha.HealthClient(base_url=server.url, token_provider=provider, user_id="u")
    call = asyncio.create_task(client.documents.describe("doc-1"))
    await fetching.wait()
    await client.aclose()
    with pytest.raises(ha.ClientClosedError):
        await call
    assert not call.cancelled() and library_tasks() == []
    assert server.calls("describe") == 0


async def test_in_a_task_group_the_closed_client_is_an_error_not_a_silent_cancel(server: FakeHealthServer) -> None:
    fetching, provider = stalled_provider()

    client = ha.HealthClient(base_url=server.url, token_provider=provider, user_id="u")

    async def close_when_fetching() -> None:
        await fetching.wait()
        await client.aclose()

    closer = asyncio.create_task(close_when_fetching())
    with pytest.raises(ExceptionGroup) as info:
        async with asyncio.TaskGroup() as group:
            group.create_task(client.documents.describe("doc-1"))
    assert info.group_contains(ha.ClientClosedError)
    await closer


async def test_a_caller_cancelled_while_its_token_is_fetched_is_still_cancelled(server: FakeHealthServer) -> None:
    fetching, provider = stalled_provider()

    async with ha.HealthClient(base_url=server.url, token_provider=provider, user_id="u") as client:
        call = asyncio.create_task(client.documents.describe("doc-1"))
        await fetching.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert call.cancelled() and library_tasks() == []


async def test_a_401_after_close_fetches_no_token_and_leaves_no_task() -> None:
    async def expired(request: web.Request) -> web.Response:
        await asyncio.sleep(0.2)  # the client is closed meanwhile
        return web.json_response({"message": "expired"}, status=401)

    app = web.Application()
    app.router.add_get("/mr/api/v1/docs/{id}", expired)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fetched = 0

    async def provider() -> str:
        nonlocal fetched
        fetched += 1
        return "tok"

    try:
        async with aiohttp.ClientSession() as http:  # the caller's own session stays open after aclose()
            url = f"http://127.0.0.1:{runner.addresses[0][1]}"
            client = ha.HealthClient(base_url=url, token_provider=provider, user_id="u", session=http)
            call = asyncio.create_task(client.documents.describe("doc-1"))
            await asyncio.sleep(0.05)
            await client.aclose()
            with pytest.raises(ha.ClientClosedError):
                await call
            assert fetched == 1  # the first token only: no refresh on a closed client
            assert library_tasks() == []
    finally:
        await runner.cleanup()


async def test_a_bulk_stream_iterated_after_close_raises_client_closed(server: FakeHealthServer) -> None:
    client = ha.HealthClient(base_url=server.url, token=server.token, user_id=server.data.user_ids[0])
    stream = client.documents.describe_many([f"doc-{i}" for i in range(5)], concurrency=2)
    await client.aclose()
    with pytest.raises(ha.ClientClosedError):
        await anext(stream)  # the first result is where a bulk stream starts its work: none starts on a closed client
    assert library_tasks() == [] and server.calls("describe") == 0


async def test_an_interrupted_aclose_still_closes_the_aiohttp_session(server: FakeHealthServer) -> None:
    fetching = asyncio.Event()

    async def provider() -> str:
        fetching.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(30)  # a provider slow to stop keeps aclose() waiting
            raise
        return "never"

    client = ha.HealthClient(base_url=server.url, token_provider=provider, user_id="u")
    call = asyncio.create_task(client.documents.describe("doc-1"))
    await fetching.wait()
    http = client._session._http
    assert http is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await client.aclose()
    assert client.closed and http.closed
    await client.aclose()  # idempotent
    for task in library_tasks():
        task.cancel()
    await asyncio.gather(call, return_exceptions=True)


@pytest.mark.parametrize("timeout", [0, -5, math.nan, math.inf])
async def test_a_per_call_timeout_that_is_not_a_finite_positive_number_is_refused_before_sending(
    server: FakeHealthServer, timeout: float
) -> None:
    async with ha.HealthClient(base_url=server.url, token=server.token, user_id=server.data.user_ids[0]) as client:
        with pytest.raises(ha.InvalidRequest, match="timeout must be a finite number of seconds"):
            await client.documents.describe("doc-1", timeout=timeout)
        with pytest.raises(ha.InvalidArgumentType):
            await client.documents.describe("doc-1", timeout="5")  # type: ignore[arg-type]
    assert server.calls("describe") == 0


@pytest.mark.parametrize(
    "options",
    [{"timeout": math.nan}, {"timeout": math.inf}, {"connect_timeout": math.nan}, {"rate_limit": math.nan}],
    ids=["timeout-nan", "timeout-inf", "connect-nan", "rate-nan"],
)
def test_the_client_refuses_a_limit_that_is_not_finite(options: dict[str, float]) -> None:
    with pytest.raises(ha.InvalidRequest):
        ha.HealthClient(base_url="https://api.example.com", token="t", **options)  # type: ignore[arg-type]


async def test_a_json_body_that_cannot_be_json_is_refused_before_sending(server: FakeHealthServer) -> None:
    oid = server.data.user_ids[0]
    async with ha.HealthClient(base_url=server.url, token=server.token, user_id=oid) as client:
        with pytest.raises(ha.InvalidRequest, match="cannot be sent as JSON") as info:
            await client.abdm.consents.deny("c-1", reason="no \ud800 thanks", oid=oid)  # a lone surrogate
        assert "thanks" not in str(info.value)
        with pytest.raises(ha.InvalidRequest, match="cannot be sent as JSON"):
            await client._session.request("POST", "/x", operation="x", json={"when": object()}, idempotent=False)
    assert server.requests == []


async def test_a_401_of_an_old_token_waits_for_the_refresh_in_flight() -> None:
    """A late 401 of token 1, while the refresh that replaces token 2 (itself just refused) is in flight, waits for
    that refresh: handed token 2 it would be refused again, and a second 401 is final."""
    gate = asyncio.Event()
    fetched = 0

    async def provider() -> str:
        nonlocal fetched
        fetched += 1
        if fetched == 3:
            await gate.wait()  # the slow refresh of token 2
        return f"t{fetched}"

    async with ha.HealthClient(base_url="https://api.example.com", token_provider=provider) as client:
        session = client._session
        auth = session.auth
        assert await auth.token(session) == "t1"
        assert await auth.refresh(session, auth.generation) == "t2"  # a 401 of t1: t2
        third = asyncio.create_task(auth.refresh(session, auth.generation))  # a 401 of t2: the slow fetch of t3
        await asyncio.sleep(0)
        late = asyncio.create_task(auth.refresh(session, 1))  # the late 401 of t1
        await asyncio.sleep(0)
        assert not late.done()  # not handed t2, the token just refused
        gate.set()
        assert await late == "t3" and await third == "t3" and fetched == 3
