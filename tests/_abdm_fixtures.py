"""The fixtures the ABDM tests share (tests/abdm, tests/webhooks): a fake server with one user and one document,
and a client of it that retries at once (``NO_WAIT``) as the user ``oid-1``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import health_async as ha
from health_async.testing import FakeHealthServer

NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id="oid-1", retry=NO_WAIT
    ) as c:
        yield c
