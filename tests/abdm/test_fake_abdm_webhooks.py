"""The fake server's ABDM webhooks (``server.abdm.webhooks``): signed ``abha.link_care_context`` events after a
link, a data request sent as ``abha.hip_data_fetch`` and answered end to end, redelivery, the delivery record,
``flush``/``close``/``reset``, and the linked list found by OID."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from aiohttp import web

import health_async as ha
from health_async import webhooks
from health_async.models import CareContext, ConsentUpdate, HealthDataRequest, HiType, LinkStatus
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hiu import example_document
from health_async.testing.abdm._hospital import DELIVERY_ATTEMPTS, LINK_ERROR

from ..conftest import Serve

SECRET = "fake-abdm-webhook-secret"
LINK = "abha.link_care_context"
FETCH = "abha.hip_data_fetch"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


def visits(*ids: str) -> list[CareContext]:
    return [CareContext(cid, f"OP visit {cid}", HiType.OP_CONSULTATION) for cid in ids]


async def receiver(serve: Serve, events: list[webhooks.WebhookEvent]) -> str:
    """A loopback receiver that verifies every webhook with SECRET and keeps the events; its URL."""

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event)

    return f"{await serve({('POST', '/abdm'): webhooks.aiohttp_handler(SECRET, on_event)})}/abdm"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_each_link_is_reported_by_a_signed_webhook_linked_or_errored(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    events: list[webhooks.WebhookEvent] = []
    server.abdm.webhooks(await receiver(serve, events), SECRET)
    server.abdm.fail_links({"visit-1"})
    await client.abdm.link_care_contexts(visits("visit-0", "visit-1", "visit-2"), abha_address="shyam@sbx")
    await server.abdm.flush()
    assert [e.event for e in events] == [LINK] * 3
    results = [e.link_result() for e in events]  # verified by the receiver, then typed
    assert [(r.care_context_id, r.status) for r in results] == [
        ("visit-0", LinkStatus.LINKED),
        ("visit-1", LinkStatus.ERRORED),
        ("visit-2", LinkStatus.LINKED),
    ]
    assert [r.error for r in results] == [None, LINK_ERROR, None]
    for event, result in zip(events, results, strict=True):
        assert event.service == "abdm" and event.client_id == server.client_id and event.business_id
        assert event.event_time is not None and event.timestamp is not None and event.signed_at is not None
        assert result.retry_count == 0 and result.hip_id == "HIP-1" and result.abha_address == "shyam@sbx"
        assert result.oid is None  # no oid in the body, and the client's user_id is not sent beside a named patient
        assert set(event.data) == {
            "abha_address", "hip_id", "care_context_id", "status", "error", "retry_count", "oid",
            "partner_patient_id",
        }  # fmt: skip
    assert len({e.transaction_id for e in events}) == 3  # one transaction per webhook: none de-duplicated away
    assert server.abdm.deliveries == [(LINK, 200)] * 3
    assert list(server.abdm.links["shyam@sbx"]) == ["visit-0", "visit-2"]  # an ERRORED link is not held

    # linked again: the service sends one webhook per link call; the fake keeps counting relinks
    await client.abdm.link_care_contexts(visits("visit-0"), abha_address="shyam@sbx")
    await server.abdm.flush()
    again = events[-1].link_result()
    assert len(events) == 4 and again.care_context_id == "visit-0" and again.status is LinkStatus.LINKED
    assert server.abdm.relinked == 1 and len(server.abdm.deliveries) == 4


async def test_the_link_webhook_names_the_callers_hip_oid_and_partner_patient(
    serve: Serve, server: FakeHealthServer
) -> None:
    events: list[webhooks.WebhookEvent] = []
    server.abdm.webhooks(await receiver(serve, events), SECRET)
    async with ha.HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, partner_hip_id="HIP-9", retry=NO_WAIT
    ) as hospital:
        await hospital.abdm.link_care_contexts(visits("cc-1"), oid="oid-7", partner_user_id="p-7")
    await server.abdm.flush()
    (result,) = [e.link_result() for e in events]
    assert (result.hip_id, result.oid, result.partner_patient_id) == ("HIP-9", "oid-7", "p-7")
    assert result.abha_address is None and result.status is LinkStatus.LINKED


async def test_a_receiver_answering_500_once_gets_the_event_again_re_signed(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    got: list[tuple[int, webhooks.WebhookEvent]] = []

    async def flaky(request: web.Request) -> web.Response:
        event = webhooks.verify(await request.read(), request.headers.get(webhooks.SIGNATURE_HEADER), SECRET)
        status = 500 if not got else 200
        got.append((status, event))
        return web.Response(status=status)

    server.abdm.webhooks(f"{await serve({('POST', '/hook'): flaky})}/hook", SECRET)
    await client.abdm.link_care_contexts(visits("cc-1"), abha_address="shyam@sbx")
    await server.abdm.flush()
    assert [status for status, _ in got] == [500, 200]
    first, again = (event for _, event in got)
    assert again.link_result().care_context_id == first.link_result().care_context_id == "cc-1"
    assert again.transaction_id == first.transaction_id  # the same event, delivered again (and verified again)
    assert server.abdm.deliveries == [(LINK, 500), (LINK, 200)]


async def test_redelivery_is_bounded_and_a_receiver_that_never_answers_is_recorded(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    calls = 0

    async def broken(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.Response(status=503)

    server.abdm.webhooks(f"{await serve({('POST', '/hook'): broken})}/hook", SECRET)
    await client.abdm.link_care_contexts(visits("cc-1"), abha_address="shyam@sbx")
    await server.abdm.flush()
    assert DELIVERY_ATTEMPTS == 3 and calls == DELIVERY_ATTEMPTS
    assert server.abdm.deliveries == [(LINK, 503)] * DELIVERY_ATTEMPTS

    server.abdm.deliveries.clear()
    server.abdm.webhooks(f"http://127.0.0.1:{closed_port()}/hook", SECRET)  # nobody listens
    await client.abdm.link_care_contexts(visits("cc-2"), abha_address="shyam@sbx")
    await server.abdm.flush()
    assert len(server.abdm.deliveries) == DELIVERY_ATTEMPTS
    assert all(name == LINK and isinstance(outcome, str) for name, outcome in server.abdm.deliveries)
    assert server.abdm.deliveries[0][1] == "ClientConnectorError"


async def test_an_unregistered_fake_sends_nothing(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    events: list[webhooks.WebhookEvent] = []
    url = await receiver(serve, events)
    await client.abdm.link_care_contexts(visits("cc-1"), abha_address="shyam@sbx")
    server.abdm.webhooks(url, SECRET)
    server.abdm.webhooks(None)  # unregistered again
    await client.abdm.link_care_contexts(visits("cc-2"), abha_address="shyam@sbx")
    await server.abdm.flush()
    assert events == [] and server.abdm.deliveries == []
    assert list(server.abdm.links["shyam@sbx"]) == ["cc-1", "cc-2"]  # the links themselves were made
    with pytest.raises(RuntimeError, match="no webhook URL registered"):
        await server.abdm.send_data_request(["cc-1"])


async def test_a_data_request_sent_by_the_fake_is_answered_end_to_end(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    asked: list[HealthDataRequest] = []
    seen: list[webhooks.WebhookEvent] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        seen.append(event)

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, dict[str, Any]]:
        asked.append(request)
        return {cid: {**example_document("OPConsultation"), "id": cid} for cid in request.care_contexts}

    handler = webhooks.abdm_handler(SECRET, client=client, on_event=on_event, on_data_fetch=on_data_fetch)
    server.abdm.webhooks(f"{await serve({('POST', '/abdm'): handler.handle})}/abdm", SECRET)
    sent = await server.abdm.send_data_request(["visit-0", "visit-1"], oid="oid-1", hip_id="HIP-2")
    assert sent.status == 200
    await handler.join()
    (request,) = asked
    assert request.transaction_id == sent.transaction_id and request.care_contexts == ("visit-0", "visit-1")
    assert request.hip_id == "HIP-2" and request.oid == "oid-1"
    (event,) = seen
    assert event.event == FETCH and event.transaction_id == sent.transaction_id and event.signed_at is not None
    # hip-data-fetch.mdx: the envelope has the webhook's transaction id, ``data.transaction_id`` is "": the client
    # falls back to the envelope's id, and its push names that id, which the fake takes
    assert event.raw["service"] == "abdm" and event.raw["data"]["transaction_id"] == ""
    pages = server.abdm.pages(sent.transaction_id)
    assert pages and {page["transaction_id"] for page in pages} == {sent.transaction_id}
    assert [r.status for r in server.requests if r.route == "hip_data_push"] == [202] * len(pages)
    received = server.abdm.received(sent.transaction_id)  # decrypted with the HIU key, checksums checked
    assert set(received) == {"visit-0", "visit-1"}
    assert json.loads(received["visit-1"]) == {**example_document("OPConsultation"), "id": "visit-1"}
    assert server.abdm.deliveries == [(FETCH, 200)]
    await handler.aclose()


async def test_a_consent_update_has_the_vendors_shape(serve: Serve, server: FakeHealthServer) -> None:
    """consent-update.mdx: envelope ``service`` ``abha``, ``notification.consentArtefacts`` one object."""
    events: list[webhooks.WebhookEvent] = []
    server.abdm.webhooks(await receiver(serve, events), SECRET)
    await server.abdm_hiu.consent_changed({"consent_id": "c-1", "status": "REVOKED", "artefact_ids": ["a-1"]})
    await server.abdm_hiu.consent_changed({"consent_id": "c-2", "status": "REVOKED", "artefact_ids": ["a-2", "a-3"]})
    await server.abdm.flush()
    one, two = sorted(events, key=lambda e: e.raw["data"]["notification"]["consentRequestId"])
    assert one.raw["service"] == "abha" and one.event == "abha.consent_update"
    assert one.raw["data"]["notification"] == {
        "consentRequestId": "c-1",
        "status": "REVOKED",
        "consentArtefacts": {"id": "a-1"},
    }
    assert two.raw["data"]["notification"]["consentArtefacts"] == [{"id": "a-2"}, {"id": "a-3"}]  # judgement call
    update = one.payload()
    assert isinstance(update, ConsentUpdate) and update.notification is not None
    assert [a.id for a in update.notification.consent_artefacts] == ["a-1"]


async def test_the_linked_list_finds_a_link_by_its_oid(server: FakeHealthServer, client: ha.HealthClient) -> None:
    await client.abdm.link_care_contexts(visits("cc-1", "cc-2"), abha_address="shyam@sbx", oid="oid-7")
    assert list(server.abdm.links) == ["shyam@sbx"]  # still held under the ABHA address
    linked = await client.abdm.linked_care_contexts("HIP-1", oid="oid-7")
    assert [c.care_context_id for c in linked] == ["cc-1", "cc-2"]
    assert await client.abdm.linked_care_contexts("HIP-1") == ()  # X-Pt-Id oid-1: not this patient's links
    # a link for another patient, named by ABHA address only, is not filed under the client's user (oid-1)
    await client.abdm.link_care_contexts(visits("cc-3"), abha_address="ram@sbx")
    assert await client.abdm.linked_care_contexts("HIP-1") == ()
    assert [c.care_context_id for c in await client.abdm.linked_care_contexts("HIP-1", oid="oid-7")] == [
        "cc-1",
        "cc-2",
    ]


def _fake_abdm_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if "FakeAbdm" in getattr(t.get_coro(), "__qualname__", "")]


async def test_closing_the_server_with_a_delivery_pending_leaves_no_task_running(serve: Serve) -> None:
    arrived = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        arrived.set()
        await asyncio.Event().wait()
        return web.Response()

    url = f"{await serve({('POST', '/hook'): hang})}/hook"
    server = FakeHealthServer(users=1, documents_per_user=1)
    await server.start()
    try:
        server.abdm.webhooks(url, SECRET)
        async with ha.HealthClient(
            base_url=server.url, token=server.token, client_id=server.client_id, retry=NO_WAIT
        ) as hospital:
            # the 202 does not wait for the webhook: the receiver has not answered, the link call has returned
            await asyncio.wait_for(hospital.abdm.link_care_contexts(visits("cc-1"), abha_address="shyam@sbx"), 5)
        await asyncio.wait_for(arrived.wait(), 5)
        assert len(_fake_abdm_tasks()) == 1
    finally:
        await server.close()
    assert _fake_abdm_tasks() == []
    assert server.abdm.deliveries == []  # the cancelled attempt got no answer to record
    await asyncio.wait_for(server.abdm.flush(), 1)  # nothing left to wait for


async def test_reset_forgets_the_url_the_failures_and_the_deliveries(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    events: list[webhooks.WebhookEvent] = []
    server.abdm.webhooks(await receiver(serve, events), SECRET)
    server.abdm.fail_links(["cc-1"], error="ABDM gateway down")
    await client.abdm.link_care_contexts(visits("cc-1"), abha_address="shyam@sbx")
    await server.abdm.flush()
    assert events[0].link_result().error == "ABDM gateway down" and server.abdm.deliveries == [(LINK, 200)]
    assert "shyam@sbx" not in server.abdm.links
    server.reset()
    assert server.abdm.deliveries == []
    await client.abdm.link_care_contexts(visits("cc-1"), abha_address="shyam@sbx")
    await server.abdm.flush()
    assert len(events) == 1 and server.abdm.deliveries == []  # unregistered by reset: nothing sent
    assert list(server.abdm.links["shyam@sbx"]) == ["cc-1"]  # no longer failing: linked


async def test_webhooks_go_only_to_loopback_with_a_secret(server: FakeHealthServer) -> None:
    for url in ("https://example.com/hook", "ftp://127.0.0.1/hook", "not a url"):
        with pytest.raises(ValueError, match="loopback"):
            server.abdm.webhooks(url, SECRET)
    for secret in ("", None, 42):
        with pytest.raises(ValueError, match="secret"):
            server.abdm.webhooks("http://127.0.0.1:1/hook", secret)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not one str"):
        server.abdm.fail_links("cc-1")
    server.abdm.webhooks("http://localhost:1/hook", b"bytes secret")  # accepted: nothing is sent until a link
    assert server.abdm.deliveries == []
