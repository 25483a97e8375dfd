"""``client.abdm`` (ABDM milestone 2, hospital side) against the fake server, the pushes checked with the vendor's
own ``abdm-ecdh``."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

import abdm_ecdh
import pytest

import health_async as ha
from health_async.models import CareContext, CareContextStatus, HealthDataRequest, HiType
from health_async.testing import FakeHealthServer, Fault

BUNDLE = {"resourceType": "Bundle", "type": "document", "entry": [{"resource": {"resourceType": "Composition"}}]}
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
    assert sent.headers["X-Pt-Id"] == "oid-1"
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


def test_the_care_context_repr_hides_the_bundle() -> None:
    assert "Composition" not in repr(CareContext("a", "b", HiType.PRESCRIPTION, data=BUNDLE))


async def test_a_data_request_is_answered_page_by_page_and_opens_with_the_vendors_package(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    data = server.abdm.data_request(["visit-0", "visit-1", "visit-2"], oid="oid-1")
    request = HealthDataRequest.from_event(data)
    assert "shyam" not in repr(request)
    raw = b'{"resourceType": "Bundle", "id": "2"}'
    bundles: dict[str, dict[str, Any] | bytes] = {"visit-0": bundle(0), "visit-2": raw}
    result = await client.abdm.push_health_data(request, bundles)
    assert result.pushed == ("visit-0", "visit-2") and result.missing == ("visit-1",)
    received = server.abdm.received(request.transaction_id)  # decrypted with the HIU key, checksums checked
    assert json.loads(received["visit-0"]) == {**BUNDLE, "id": "0"}
    assert received["visit-2"] == raw
    pages = server.abdm.pages(request.transaction_id)
    assert [(p["page_number"], p["page_count"]) for p in pages] == [(1, 2), (2, 2)]
    assert len({p["key_information"]["nonce"] for p in pages}) == 2  # a fresh key material per page: no IV reuse
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
