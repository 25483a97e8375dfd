"""A client belongs to the event loop it first ran on: used from another, it says so, and sends nothing.

The mistake this guards against is common: a client made at import time or in one ``asyncio.run`` and used in the
next (a script calling ``asyncio.run`` per step, a sync framework's ``async_to_sync`` making a loop per call, a
test suite with a loop per test). aiohttp's connections and the client's limits belong to the first loop; before,
the second call failed with aiohttp's bare ``RuntimeError('Event loop is closed')``, or, with the first loop still
running in another thread, waited on that loop's futures. These tests drive their loops by hand; the fake server
runs on a loop of its own, in a thread, and counts what reaches it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

import health_async as ha
from health_async.testing import FakeHealthServer

T = TypeVar("T")


class ServerThread:
    """A FakeHealthServer on its own loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = self.run(self._start())

    async def _start(self) -> FakeHealthServer:
        server = FakeHealthServer(users=1, documents_per_user=3)
        await server.start()
        return server

    def run(self, coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.run(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def calls(self, operation: str) -> int:
        return self.server.calls(operation)


@pytest.fixture
def served() -> Iterator[ServerThread]:
    server = ServerThread()
    try:
        yield server
    finally:
        server.stop()


def _client(served: ServerThread) -> ha.HealthClient:
    return ha.HealthClient(base_url=served.server.url, token="fake-token", user_id=served.server.data.user_ids[0])


def _first_id(served: ServerThread) -> str:
    return next(iter(served.server.data.documents[served.server.data.user_ids[0]]))


def _operations() -> dict[str, Callable[[ha.HealthClient, str], Awaitable[Any]]]:
    async def describe(client: ha.HealthClient, doc: str) -> Any:
        return await client.documents.describe(doc)

    async def describe_many(client: ha.HealthClient, doc: str) -> Any:
        return [r async for r in client.documents.describe_many([doc, doc])]

    async def listing(client: ha.HealthClient, _doc: str) -> Any:
        return [d async for d in client.documents.list()]

    return {"describe": describe, "describe_many": describe_many, "list": listing}


@pytest.mark.parametrize("operation", list(_operations()))
def test_a_client_used_in_a_second_asyncio_run_raises_client_loop_error_and_sends_nothing(
    served: ServerThread, operation: str
) -> None:
    client = _client(served)
    doc = _first_id(served)
    call = _operations()[operation]

    async def first(client: ha.HealthClient) -> None:
        await client.documents.describe(doc)

    asyncio.run(first(client))  # the client's loop: ends here, with the client left open
    before = served.calls("describe") + served.calls("list")

    async def second(client: ha.HealthClient) -> None:
        with pytest.raises(ha.ClientLoopError, match="another event loop") as caught:
            await call(client, doc)
        assert isinstance(caught.value, ha.ClientClosedError)  # a batch stops on it, as on a closed client
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # the first loop's connection, left open on purpose
        asyncio.run(second(client))
        assert served.calls("describe") + served.calls("list") == before
        del client
        gc.collect()


def test_a_client_whose_loop_runs_in_another_thread_is_refused_here_and_closed_there(served: ServerThread) -> None:
    owner = asyncio.new_event_loop()
    thread = threading.Thread(target=owner.run_forever, daemon=True)
    thread.start()
    try:
        client = _client(served)
        doc = _first_id(served)
        asyncio.run_coroutine_threadsafe(client.documents.describe(doc), owner).result(10)
        before = served.calls("describe")

        async def elsewhere() -> None:
            with pytest.raises(ha.ClientLoopError):
                await asyncio.wait_for(client.documents.describe(doc), 5)  # used to wait on the owner's futures
            await client.aclose()  # done on the client's own loop, and waited for

        asyncio.run(elsewhere())
        assert served.calls("describe") == before
        http = client._session._http
        assert client.closed and http is None

        async def after() -> None:
            with pytest.raises(ha.ClientClosedError):
                await client.documents.describe(doc)

        asyncio.run_coroutine_threadsafe(after(), owner).result(10)
    finally:
        owner.call_soon_threadsafe(owner.stop)
        thread.join(10)
        owner.close()


def test_closing_a_client_whose_loop_has_ended_warns_and_marks_it_closed(
    served: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client(served)
    doc = _first_id(served)

    async def first(client: ha.HealthClient) -> None:
        await client.documents.describe(doc)

    asyncio.run(first(client))

    async def close(client: ha.HealthClient) -> None:
        await client.aclose()
        with pytest.raises(ha.ClientClosedError):
            await client.documents.describe(doc)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # the ended loop's socket: nothing can close it now
        with caplog.at_level(logging.WARNING, logger="health_async"):
            asyncio.run(close(client))
        del client
        gc.collect()
    assert any("another event loop" in r.getMessage() for r in caplog.records)


def test_a_client_made_outside_any_loop_binds_to_the_first_loop_that_uses_it(served: ServerThread) -> None:
    client = _client(served)  # made at import time, say
    doc = _first_id(served)

    async def use() -> str | None:
        async with client:
            return (await client.documents.describe(doc)).document_id

    assert asyncio.run(use()) == doc
    assert client.closed
