"""The fake server notes when each request arrived, so a test (or a person trying several workers) can watch the
rate the service would see: ``RecordedRequest.arrived_at`` and ``FakeHealthServer.busiest_window``."""

from __future__ import annotations

import time

import pytest

import health_async as ha
from health_async.testing import FakeHealthServer


async def test_each_request_notes_its_arrival_and_the_busiest_window_counts_what_a_rate_limit_would() -> None:
    async with FakeHealthServer(users=1, documents_per_user=3) as server:
        user = server.data.user_ids[0]
        async with ha.HealthClient(
            base_url=server.url, token=server.token, client_id=server.client_id, user_id=user, rate_limit=4
        ) as client:
            before = time.monotonic()
            ids = [server.data.document_ids(user)[0]] * 6
            for doc_id in ids:
                await client.documents.describe(doc_id)
        described = [r for r in server.requests if r.route == "describe"]
        assert len(described) == 6
        assert all(before <= r.arrived_at <= time.monotonic() for r in described)
        assert [r.arrived_at for r in described] == sorted(r.arrived_at for r in described)
        # the client's own limit holds as the service counts: never more than 4 in any second
        assert 1 <= server.busiest_window(1.0, route="describe") <= 4
        assert server.busiest_window(10.0, route="describe") == 6
        assert server.busiest_window(1.0, route="no-such-route") == 0
        with pytest.raises(ValueError, match="positive"):
            server.busiest_window(0)
