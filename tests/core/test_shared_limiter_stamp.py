"""A shared limiter that takes reports hears ``sent(at)`` when the request's headers leave, not when its answer
comes back, also when the client has no ``rate_limit`` of its own (issue 38: a slow answer must not hold the
account-wide rate's place for its whole duration)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

import health_async as ha


class Reporting:
    """A SharedLimiter that admits at once and records the reports."""

    def __init__(self) -> None:
        self.sent_at: list[float] = []
        self.unsent_count = 0

    async def acquire(self, deadline: float | None = None) -> bool:
        return True

    def pause(self, seconds: float) -> None:
        pass

    def sent(self, at: float) -> None:
        self.sent_at.append(at)

    def unsent(self) -> None:
        self.unsent_count += 1


@pytest.fixture
async def slow_server() -> AsyncIterator[TestServer]:
    async def describe(request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        return web.json_response({"document_id": request.match_info["id"]})

    app = web.Application()
    app.router.add_get("/mr/api/v1/docs/{id}", describe)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


async def test_a_shared_limiter_alone_is_told_when_the_headers_left(slow_server: TestServer) -> None:
    limiter = Reporting()
    async with ha.HealthClient(
        base_url=str(slow_server.make_url("/")), token="t", client_id="c", user_id="u", limiter=limiter
    ) as client:
        started = time.monotonic()
        await client.documents.describe("doc-1")
        answered = time.monotonic()
    [at] = limiter.sent_at
    assert limiter.unsent_count == 0
    assert at - started < 0.2 < answered - at  # stamped as it left, not 0.3 s later when the answer came
