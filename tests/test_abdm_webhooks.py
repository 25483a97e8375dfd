"""ABDM's webhooks: typed ``abha.*`` events and ``webhooks.abdm_handler`` answering a data request end to end."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import abdm_ecdh
import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import LinkStatus
from health_async.testing import FakeHealthServer, send_webhook

from .conftest import Serve

SECRET = "abdm-webhook-secret"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


def envelope(event: str, data: dict[str, Any], transaction_id: str = "wh-txn-1") -> dict[str, object]:
    now = int(time.time())
    return {"service": "abdm", "event": event, "event_time": now, "transaction_id": transaction_id,
            "timestamp": now, "business_id": "b-1", "client_id": "c-1", "data": data}  # fmt: skip


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(base_url=server.url, token=server.token, user_id="oid-1", retry=NO_WAIT) as c:
        yield c


def test_every_abha_event_of_the_vendors_pages_is_typed() -> None:
    names = [
        "abha.link_care_context", "abha.hip_data_fetch", "abha.hiu_data_push", "abha.consent_update",
        "abha.hip_profile_share", "abha.created", "abha.locker_created", "abha.care_context_discover",
        "abha.care_context_discover_link_init", "abha.context_discover_link_confirm",
        "abha.subscription_modified", "abha.subscription_notify",
    ]  # fmt: skip
    for name in names:
        event = webhooks.parse_event(envelope(name, {}))
        assert event.kind is not webhooks.EventKind.UNKNOWN and event.is_abdm
    new = webhooks.parse_event(envelope("abha.something_new", {"x": 1}))
    assert new.kind is webhooks.EventKind.UNKNOWN and new.is_abdm and new.data == {"x": 1}


def test_a_link_status_event_reads_as_a_link_result() -> None:
    data = {"abha_address": "shyam@abdm", "hip_id": "HIP-1", "care_context_id": "c61f74f9", "status": "LINKED",
            "error": None, "retry_count": 0, "oid": "oid-1", "partner_patient_id": "p-1"}  # fmt: skip
    result = webhooks.parse_event(envelope("abha.link_care_context", data)).link_result()
    assert result.status is LinkStatus.LINKED and result.care_context_id == "c61f74f9" and result.retry_count == 0
    assert "shyam" not in repr(result)
    odd = webhooks.parse_event(envelope("abha.link_care_context", {**data, "status": "PENDING"})).link_result()
    assert odd.status is LinkStatus.UNKNOWN
    with pytest.raises(ha.InvalidRequest, match=r"not an abha\.link_care_context"):
        webhooks.parse_event(envelope("abha.hip_data_fetch", data)).link_result()


async def test_a_data_request_is_answered_at_once_then_pushed_in_the_background(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[tuple[str, ...]] = []
    events: list[str] = []
    release = asyncio.Event()

    async def on_data_fetch(request: Any) -> dict[str, dict[str, Any]]:
        asked.append(request.care_contexts)
        await release.wait()  # the webhook's answer must not wait for this
        return {cid: {"resourceType": "Bundle", "id": cid} for cid in request.care_contexts}

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    handler = webhooks.abdm_handler(SECRET, client=client, on_event=on_event, on_data_fetch=on_data_fetch)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    data = server.abdm.data_request(["visit-1", "visit-2"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        assert await asyncio.wait_for(send_webhook(url, body, SECRET), 5) == 200
        assert handler.pending == 1 and events == ["abha.hip_data_fetch"]
        # the service delivers the same request again, re-signed a second later: not a replay, still ignored
        assert await send_webhook(url, body, SECRET, timestamp=int(time.time()) + 1) == 200
        release.set()
        await handler.join()
    assert asked == [("visit-1", "visit-2")]
    received = server.abdm.received(data["transaction_id"])
    assert {cid: json.loads(raw)["id"] for cid, raw in received.items()} == {"visit-1": "visit-1", "visit-2": "visit-2"}
    hiu = server.abdm.hiu_key(data["transaction_id"])
    for page in server.abdm.pages(data["transaction_id"]):  # the vendor's package opens what was pushed
        key = page["key_information"]
        for entry in page["entries"]:
            opened = abdm_ecdh.decrypt(
                entry["content"], key["nonce"], hiu.nonce, hiu.private_key, key["dh_public_key"]["key_value"]
            )
            assert json.loads(opened.decrypted_data)["resourceType"] == "Bundle"
    assert "2 care context(s) pushed" in caplog.text and "redelivered" in caplog.text
    assert "shyam" not in caplog.text and "Bundle" not in caplog.text
    await handler.aclose()


async def test_a_failed_fetch_pushes_nothing_and_a_redelivery_tries_again(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    calls = 0

    async def flaky(request: Any) -> dict[str, bytes]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the records database is down")
        return {cid: b'{"resourceType": "Bundle"}' for cid in request.care_contexts}

    handler = webhooks.abdm_handler(SECRET, client=client, on_data_fetch=flaky)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    data = server.abdm.data_request(["visit-1"])
    body = envelope("abha.hip_data_fetch", data)
    assert await send_webhook(url, body, SECRET) == 200
    await handler.join()
    assert server.calls("hip_data_push") == 0
    assert await send_webhook(url, body, SECRET, timestamp=int(time.time()) + 1) == 200
    await handler.join()
    assert list(server.abdm.received(data["transaction_id"])) == ["visit-1"] and calls == 2
    await handler.aclose()


async def test_closing_the_handler_cancels_what_is_under_way(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    async def never(request: Any) -> dict[str, bytes]:
        await asyncio.Event().wait()
        return {}

    handler = webhooks.abdm_handler(SECRET, client=client, on_data_fetch=never)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    assert await send_webhook(url, envelope("abha.hip_data_fetch", server.abdm.data_request(["v"])), SECRET) == 200
    assert handler.pending == 1
    await handler.aclose()
    assert handler.pending == 0 and server.calls("hip_data_push") == 0


async def test_a_forged_or_bad_webhook_is_refused_like_the_others(serve: Serve, client: ha.HealthClient) -> None:
    handler = webhooks.abdm_handler(SECRET, client=client)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    assert await send_webhook(url, envelope("abha.created", {}), "another secret") == 400
    assert await send_webhook(url, envelope("abha.created", {}), SECRET) == 200
    with pytest.raises(ha.InvalidRequest, match="on_data_fetch"):
        webhooks.abdm_handler(SECRET, client=client, on_data_fetch="not a function")  # type: ignore[arg-type]
