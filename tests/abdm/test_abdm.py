"""``client.abdm`` (ABDM milestone 2, hospital side) and ABDM's webhooks against the fake server, the pushes checked
with the vendor's own ``abdm-ecdh``."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
import time
from typing import Any

import abdm_ecdh
import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import CareContext, CareContextStatus, HealthDataRequest, HiType, LinkStatus
from health_async.testing import FakeHealthServer, Fault, send_webhook
from health_async.testing.abdm._hiu import example_document

from ..conftest import Serve

BUNDLE = example_document("OPConsultation")  # the guide's own example: a valid document (pushes are validated)
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


def bundle(i: int) -> dict[str, Any]:
    return {**BUNDLE, "id": str(i)}


def visits(n: int, *, data: bool = False) -> list[CareContext]:
    return [
        CareContext(
            f"visit-{i}", f"OP visit {i}", HiType.OP_CONSULTATION, data={**BUNDLE, "id": str(i)} if data else None
        )
        for i in range(n)
    ]


async def test_link_then_list(server: FakeHealthServer, client: ha.HealthClient) -> None:
    await client.abdm.link_care_contexts([*visits(2), *visits(3, data=True)[2:]], abha_address="shyam@sbx")
    held = server.abdm.links["shyam@sbx"]
    assert list(held) == ["visit-0", "visit-1", "visit-2"]
    assert held["visit-2"]["data"] == {**BUNDLE, "id": "2"} and held["visit-0"]["data"] is None
    assert held["visit-0"]["hi_type"] == "OPConsultation"
    sent = next(r for r in server.requests if r.route == "care_contexts_link")
    assert "X-Pt-Id" not in sent.headers  # the body names the patient: the client's user_id is not sent
    await client.abdm.link_care_contexts(visits(1), oid="oid-7")
    linked = await client.abdm.linked_care_contexts("HIP-1", oid="oid-7")
    assert [c.care_context_id for c in linked] == ["visit-0"]
    assert linked[0].status is CareContextStatus.UNKNOWN and "OP visit" not in repr(linked[0])


@pytest.mark.parametrize(
    ("care_contexts", "options", "rule"),
    [
        ([], {"abha_address": "shyam@sbx"}, "at least one"),
        ([CareContext("", "x", "OPConsultation")], {"abha_address": "shyam@sbx"}, "care_context_id"),
        ([CareContext("a", "x", "LabReport")], {"abha_address": "shyam@sbx"}, "hi_type must be one of"),
        ([CareContext("a", "x", "Prescription", data=b"not json")], {"abha_address": "shyam@sbx"}, "not JSON"),
        ([CareContext("a", "x", "Prescription", data="[1, 2]")], {"abha_address": "shyam@sbx"}, "JSON object"),
        ([CareContext("a", "x", "Prescription", data={"t": object()})], {"abha_address": "shyam@sbx"}, "as JSON"),
        ([CareContext("a", "x", "Prescription", data={"t": "\ud800"})], {"abha_address": "shyam@sbx"}, "as JSON"),
        ([CareContext("a", "x", "Prescription", data='{"t": "\ud800"}')], {"abha_address": "shyam@sbx"}, "as JSON"),
        ([*visits(1), *visits(1)], {"abha_address": "shyam@sbx"}, "repeat"),
        (visits(1), {}, "needs the patient"),
        (["visit-0"], {"abha_address": "shyam@sbx"}, "must be a CareContext"),
        (visits(1), {"abha_address": "not an address"}, "abha_address"),
    ],
)
async def test_bad_links_are_refused_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, care_contexts: list[Any], options: dict[str, Any], rule: str
) -> None:
    with pytest.raises(ha.InvalidRequest, match=rule) as info:
        await client.abdm.link_care_contexts(care_contexts, **options)
    assert server.calls("care_contexts_link") == 0
    assert "Composition" not in str(info.value)


async def test_a_link_is_sent_once_and_an_unknown_outcome_says_so(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.inject("care_contexts_link", Fault(status=503, times=1))
    with pytest.raises(ha.OutcomeUnknown):
        await client.abdm.link_care_contexts(visits(1), abha_address="shyam@sbx")
    assert server.calls("care_contexts_link") == 1


async def test_notify_unlinked_sends_ten_digits(server: FakeHealthServer, client: ha.HealthClient) -> None:
    await client.abdm.notify_unlinked("+91 98765 43210")
    assert server.abdm.notified == ["9876543210"]
    with pytest.raises(ha.InvalidMobileNumber):
        await client.abdm.notify_unlinked("12345")
    assert server.calls("care_contexts_notify") == 1


def test_the_care_context_repr_hides_the_bundle_and_what_the_visit_was() -> None:
    shown = repr(CareContext("cc-1", "HIV follow-up, 3 March", HiType.PRESCRIPTION, data=BUNDLE))
    assert "Composition" not in shown and "HIV" not in shown  # the display text is health data too
    assert "cc-1" in shown


async def test_a_data_request_is_answered_page_by_page_and_opens_with_the_vendors_package(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    data = server.abdm.data_request(["visit-0", "visit-1", "visit-2"], oid="oid-1")
    request = HealthDataRequest.from_event(data)
    assert "shyam" not in repr(request)
    raw = json.dumps({**BUNDLE, "id": "2"}).encode()
    bundles: dict[str, dict[str, Any] | bytes] = {"visit-0": bundle(0), "visit-2": raw}
    result = await client.abdm.push_health_data(request, bundles)
    assert result.pushed == ("visit-0", "visit-2") and result.missing == ("visit-1",)
    received = server.abdm.received(request.transaction_id)  # decrypted with the HIU key, checksums checked
    assert json.loads(received["visit-0"]) == {**BUNDLE, "id": "0"}
    assert received["visit-2"] == raw
    pages = server.abdm.pages(request.transaction_id)
    assert [(p["page_number"], p["page_count"]) for p in pages] == [(1, 2), (2, 2)]
    assert len({p["key_information"]["nonce"] for p in pages}) == 2  # a fresh key material per page: no IV reuse
    assert len({p["key_information"]["dh_public_key"]["key_value"] for p in pages}) == 2  # nor a key reused
    hiu = server.abdm.hiu_key(request.transaction_id)
    for page in pages:  # the other side's own implementation opens every entry
        key = page["key_information"]
        for entry in page["entries"]:
            plain = abdm_ecdh.decrypt(
                entry["content"], key["nonce"], hiu.nonce, hiu.private_key, key["dh_public_key"]["key_value"]
            ).decrypted_data
            assert hashlib.md5(plain.encode()).hexdigest() == entry["checksum"]


async def test_an_expired_key_or_an_unasked_bundle_pushes_nothing(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    request = HealthDataRequest.from_event(server.abdm.data_request(["visit-0"], expires_in=60))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)
    with pytest.raises(ha.InvalidRequest, match="expired"):
        await client.abdm.push_health_data(request, {"visit-0": BUNDLE}, now=later)
    with pytest.raises(ha.InvalidRequest, match="did not ask for"):
        await client.abdm.push_health_data(request, {"visit-0": BUNDLE, "visit-9": BUNDLE})
    with pytest.raises(ha.InvalidRequest, match="not JSON"):
        await client.abdm.push_health_data(request, {"visit-0": b"<xml/>"})
    assert server.calls("hip_data_push") == 0


async def test_a_naive_now_pushes_nothing(server: FakeHealthServer, client: ha.HealthClient) -> None:
    naive = dt.datetime(2030, 1, 1, 12, 0)
    with_expiry = HealthDataRequest.from_event(server.abdm.data_request(["visit-0"]))
    data = server.abdm.data_request(["visit-0"])
    del data["key_information"]["dh_public_key"]["expiry"]  # no expiry: nothing to compare `now` with
    without_expiry = HealthDataRequest.from_event(data)
    for request in (with_expiry, without_expiry):
        with pytest.raises(ha.InvalidRequest, match="now must be timezone-aware"):
            await client.abdm.push_health_data(request, {"visit-0": BUNDLE}, now=naive)
    assert server.calls("hip_data_push") == 0


async def test_an_unhashable_hi_type_is_a_typed_refusal(server: FakeHealthServer, client: ha.HealthClient) -> None:
    for hi_type in ([HiType.PRESCRIPTION], {"Prescription": 1}):
        care_context = CareContext("visit-0", "OP visit", hi_type)  # type: ignore[arg-type]
        with pytest.raises(ha.InvalidArgumentType, match=r"care_contexts\[0\]\.hi_type must be") as info:
            await client.abdm.link_care_contexts([care_context], abha_address="shyam@sbx")
        assert "OP visit" not in str(info.value)
    assert server.calls("care_contexts_link") == 0


def test_the_vendors_webhook_example_is_a_request() -> None:
    # webhooks/hip-data-fetch.mdx's body (its data.transaction_id is empty: the event's stands in)
    data = {
        "abha_address": "shyam@abdm", "oid": "<eka user id>", "partner_patient_id": "<partner patient id>",
        "hip_id": "<partner hip id>", "transaction_id": "", "care_contexts": ["care_context_1", "care_context_2"],
        "key_information": {"crypto_alg": "ECDH", "curve": "Curve25519", "dh_public_key": {
            "expiry": "2026-03-01T12:00:00.000Z", "parameters": "Curve25519/32byte random key",
            "key_value": "base64-encoded public key"}, "nonce": "base64-encoded 32-byte nonce"},
        "hi_types": ["OPConsultation", "Prescription"],
    }  # fmt: skip
    request = HealthDataRequest.from_event(data, transaction_id="txn-1")
    assert request.transaction_id == "txn-1" and request.care_contexts == ("care_context_1", "care_context_2")
    assert request.key.expires_at == dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    assert request.hi_types == ("OPConsultation", "Prescription")


# ------------------------------------------------------------------ webhooks: typed abha.* events, abdm_handler

SECRET = "abdm-webhook-secret"


def envelope(event: str, data: dict[str, Any], transaction_id: str = "wh-txn-1") -> dict[str, object]:
    now = int(time.time())
    return {"service": "abdm", "event": event, "event_time": now, "transaction_id": transaction_id,
            "timestamp": now, "business_id": "b-1", "client_id": "c-1", "data": data}  # fmt: skip


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
        return {cid: {**BUNDLE, "id": cid} for cid in request.care_contexts}

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    handler = webhooks.abdm_handler(SECRET, client=client, on_event=on_event, on_data_fetch=on_data_fetch)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    data = server.abdm.data_request(["visit-1", "visit-2"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        assert await asyncio.wait_for(send_webhook(url, body, SECRET), 5) == 200
        assert handler.pending == 1 and events == ["abha.hip_data_fetch"]
        # the service delivers the same request again, re-signed a second later: not a replay, and not run while
        # the first is answered: 503, retry later (issue 42: the first may yet fail)
        assert await send_webhook(url, body, SECRET, timestamp=int(time.time()) + 1) == 503
        release.set()
        await handler.join()
        # once answered, a redelivery is a plain duplicate
        assert await send_webhook(url, body, SECRET, timestamp=int(time.time()) + 2) == 200
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
        return {cid: json.dumps(BUNDLE).encode() for cid in request.care_contexts}

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
