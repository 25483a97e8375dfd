"""pytest fixtures for code that uses ``health_async``, registered through the ``pytest11`` entry point.

Installed with the package, so every pytest run sees it: it must never break a test session. It defines its
fixtures only when pytest-asyncio is installed, imports nothing heavy until a fixture is used, and its fixtures
only ever bind to 127.0.0.1.

Fixtures:

``fake_health_server``
    A running :class:`~health_async.testing.FakeHealthServer` with its seeded data; set faults on it, assert on
    ``server.requests``.
``health_client``
    A :class:`~health_async.HealthClient` connected to that server with its token, client id and first user,
    and a retry policy that does not sleep, so fault tests run fast.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import HealthClient
    from ._server import FakeHealthServer

if importlib.util.find_spec("pytest_asyncio") is not None:
    import pytest_asyncio

    @pytest_asyncio.fixture
    async def fake_health_server() -> AsyncIterator[FakeHealthServer]:
        """A FakeHealthServer on 127.0.0.1 for the duration of one test."""
        from ._server import FakeHealthServer

        async with FakeHealthServer() as server:
            yield server

    @pytest_asyncio.fixture
    async def health_client(fake_health_server: FakeHealthServer) -> AsyncIterator[HealthClient]:
        """A HealthClient talking to ``fake_health_server``; retries do not sleep."""
        from .. import HealthClient, RetryPolicy

        server = fake_health_server
        async with HealthClient(
            base_url=server.url,
            token=server.token,
            client_id=server.client_id,
            user_id=server.data.user_ids[0],
            encryption_key=server.encryption_key,
            key_id=server.key_id,
            retry=RetryPolicy(base_delay=0, max_delay=0, jitter=0, retry_after_cap=0),
        ) as client:
            yield client
