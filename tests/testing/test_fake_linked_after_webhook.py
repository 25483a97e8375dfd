"""The fake's linked list (``GET /abdm/v1/care-contexts/linked``) shows a care context as linked once its
``abha.link_care_context`` webhook has been sent, not before; without a registered webhook URL, at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

import health_async as ha
from health_async.models import CareContext, CareContextStatus
from health_async.testing import FakeHealthServer

NO_WAIT = ha.RetryPolicy(attempts=1, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
OID = "oid-linked-1"
SECRET = "whsec-linked"


class HeldReceiver:
    """A webhook receiver that answers nothing until :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.arrived = asyncio.Event()
        self.bodies: list[bytes] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.read())
        self.arrived.set()
        await self.release.wait()
        return web.Response(status=204)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id=OID, retry=NO_WAIT
    ) as c:
        yield c


async def linked_ids(client: ha.HealthClient) -> list[str | None]:
    return [c.care_context_id for c in await client.abdm.linked_care_contexts("HIP-1")]


async def test_listed_once_its_link_webhook_was_sent_not_before(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    receiver = HeldReceiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        server.abdm.webhooks(f"http://127.0.0.1:{runner.addresses[0][1]}/hook", SECRET)
        await client.abdm.link_care_contexts([CareContext("visit-1", "OP visit", "OPConsultation")], oid=OID)
        await asyncio.wait_for(receiver.arrived.wait(), 5)
        assert await linked_ids(client) == []  # linked at the service, but its webhook not sent yet: not listed
        receiver.release.set()
        await server.abdm.flush()
        (item,) = await client.abdm.linked_care_contexts("HIP-1")
        assert item.care_context_id == "visit-1"
        assert item.status is CareContextStatus.UNKNOWN  # RecordsCareContext has no "linked" status: null
        assert [d for d in server.abdm.deliveries if d[0] == "abha.link_care_context"] == [
            ("abha.link_care_context", 204)
        ]
    finally:
        await runner.cleanup()


async def test_listed_at_once_when_no_webhook_url_is_registered(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    await client.abdm.link_care_contexts([CareContext("visit-2", "OP visit", "OPConsultation")], oid=OID)
    (item,) = await client.abdm.linked_care_contexts("HIP-1")
    assert item.care_context_id == "visit-2" and item.status is CareContextStatus.UNKNOWN


async def test_a_link_that_failed_is_never_listed(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm.fail_links(["visit-3"])
    await client.abdm.link_care_contexts(
        [CareContext("visit-3", "OP visit", "OPConsultation"), CareContext("visit-4", "Lab", "DiagnosticReport")],
        oid=OID,
    )
    assert await linked_ids(client) == ["visit-4"]
