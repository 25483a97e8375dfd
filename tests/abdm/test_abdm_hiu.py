"""ABDM's requester side (HIU) and the patient's request inbox against the fake server: the inbox (kinds and
statuses typed), the HIU's key set (the public part only), a full data push (the fake HIP encrypts to the
registered key, the signed webhook reaches ``abdm_handler``, the client decrypts the same bundles; checked with the
vendor's ``abdm-ecdh`` too), tampered or foreign data refused naming the care context, the parsing status sent once,
and bad input refused before anything is sent."""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import abdm_ecdh
import pytest

import health_async as ha
from health_async import webhooks
from health_async.abdm_crypto import KeyMaterial
from health_async.errors import (
    HealthDataChecksumMismatch,
    HealthDataUnreadable,
    InvalidRequest,
    NotFoundError,
    OutcomeUnknown,
)
from health_async.models import (
    HealthDataStatus,
    HiuDataPush,
    PatientRequests,
    RequestKind,
    RequestStatus,
)
from health_async.testing import FakeHealthServer, Fault

from ..conftest import Serve

SECRET = "hiu-webhook-secret"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
CONSENT: dict[str, Any] = {
    "consent_id": "consent-1",
    "patient": "shyam@sbx",
    "hip_ids": ["HIP-7"],
    "care_contexts": ["cc-1", "cc-2"],
    "hi_types": ["OPConsultation"],
    "artefact_ids": ["artefact-1"],
}


# ------------------------------------------------------------------------------------------ the patient's inbox


async def test_requests_gives_every_kind_typed_for_the_patient_and_status(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    inbox = server.abdm_requests
    consent = inbox.add("oid-1", "consent", requester="Dr Kamala Rao")
    subscription = inbox.add("oid-1", "subscription")
    authorization = inbox.add("oid-1", "authorization")
    inbox.add("oid-1", "consent", status="granted")  # another status
    inbox.add("oid-2", "consent")  # another patient

    found = await client.abdm.requests()
    assert isinstance(found, PatientRequests) and len(found) == 3
    assert [(r.id, r.kind) for r in found.all] == [
        (consent, RequestKind.CONSENT),
        (subscription, RequestKind.SUBSCRIPTION),
        (authorization, RequestKind.AUTHORIZATION),
    ]
    first = found.consents[0]
    assert first.hiu is not None and first.hiu.id == "HIU-1" and first.requester_name == "Dr Kamala Rao"
    assert first.purpose is not None and first.purpose.code == "CAREMGT"
    assert first.period is not None and first.period.starts_at is not None
    assert "Kamala" not in repr(found)  # the requester is a person: not in a repr
    sent = next(r for r in server.requests if r.route == "abdm_requests")
    assert sorted(sent.query) == [("status", "requested"), ("type", "all")] and sent.headers["X-Pt-Id"] == "oid-1"

    granted = await client.abdm.requests(RequestStatus.GRANTED, "consent", oid="oid-1")
    assert len(granted.consents) == 1 and granted.subscriptions == () and granted.authorizations == ()
    assert ("oid", "oid-1") in server.requests[-1].query
    assert len(await client.abdm.requests(kind=RequestKind.SUBSCRIPTION, oid="oid-2")) == 0


async def test_request_gives_one_request_in_full(server: FakeHealthServer, client: ha.HealthClient) -> None:
    rid = server.abdm_requests.add(
        "oid-1", "consent", status="granted", providers={"HIP-7": ["cc-1", "cc-2"]}, hi_types=["Prescription"]
    )
    details = await client.abdm.request(rid, kind="consent")
    assert details.id == rid and details.status is RequestStatus.GRANTED and details.access_mode == "view"
    assert [t.id for t in details.hi_types] == ["Prescription"]
    (provider,) = details.providers
    assert provider.hip is not None and provider.hip.id == "HIP-7" and provider.artefact_id
    assert [c.id for c in provider.care_contexts] == ["cc-1", "cc-2"]
    assert "visit cc-1" not in repr(details) and "Dr Fake" not in repr(details)
    assert details.period is not None and details.period.ends_at is not None

    with pytest.raises(NotFoundError):
        await client.abdm.request(rid, kind="subscription")  # it is a consent
    with pytest.raises(NotFoundError):
        await client.abdm.request(rid, oid="oid-2")  # another patient's
    assert server.calls("abdm_request") == 3  # a 404 is an answer: not retried


@pytest.mark.parametrize(
    ("call", "kwargs", "rule"),
    [
        ("requests", {"status": "pending"}, "status must be one of"),
        ("requests", {"status": RequestStatus.UNKNOWN}, "status must be one of"),
        ("requests", {"kind": "everything"}, "kind must be one of"),
        ("requests", {"oid": ""}, "oid must not be empty"),
        ("request", {"request_id": ""}, "request_id must not be empty"),
        ("request", {"request_id": "a b"}, "no whitespace"),
        ("request", {"request_id": "x" * 300}, "at most"),
        ("request", {"request_id": "r-1", "kind": "authorization"}, "kind must be one of consent, subscription"),
        ("request", {"request_id": "r-1", "status": "done"}, "status must be one of"),
    ],
)
async def test_bad_inbox_input_is_refused_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, call: str, kwargs: dict[str, Any], rule: str
) -> None:
    with pytest.raises(InvalidRequest, match=rule):
        await getattr(client.abdm, call)(**kwargs)
    assert server.calls("abdm_requests") == server.calls("abdm_request") == 0


async def test_requests_is_read_again_after_a_server_error(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm_requests.add("oid-1", "consent")
    server.inject("abdm_requests", Fault(status=503, times=1))
    assert len(await client.abdm.requests()) == 1
    assert server.calls("abdm_requests") == 2


# ------------------------------------------------------------------------------------------ the HIU's key set


async def test_set_hiu_keys_sends_the_public_key_and_nonce_only(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    material = KeyMaterial.generate()
    await client.abdm.set_hiu_keys(material)
    sent = next(r for r in server.requests if r.route == "hiu_keyset")
    assert sent.method == "PATCH" and sent.json == {"public_key": material.x509_public_key, "nonce": material.nonce}
    assert server.abdm_hiu.keysets == {server.client_id: sent.json}
    assert material.private_key not in json.dumps([r.json for r in server.requests])
    assert material.private_key not in repr(material)

    other = KeyMaterial.generate()
    server.inject("hiu_keyset", Fault(status=503, times=1))  # the same key set again: safe to repeat
    await client.abdm.set_hiu_keys(other, partner_hip_id="HIU-9")
    assert server.calls("hiu_keyset") == 3
    assert server.abdm_hiu.keysets["HIU-9"]["public_key"] == other.x509_public_key


async def test_set_hiu_keys_refuses_anything_but_key_material(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    material = KeyMaterial.generate()
    for wrong in ({"public_key": material.public_key, "nonce": material.nonce}, material.private_key):
        with pytest.raises(InvalidRequest, match="key_material must be"):
            await client.abdm.set_hiu_keys(wrong)  # type: ignore[arg-type]
    assert server.calls("hiu_keyset") == 0


# ------------------------------------------------------------------------------------------ a push, end to end


async def _receiver(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> tuple[list[webhooks.WebhookEvent], Callable[[], Awaitable[None]]]:
    """abdm_handler served on 127.0.0.1, registered with the fake; the events it received, and its closer."""
    events: list[webhooks.WebhookEvent] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event)

    handler = webhooks.abdm_handler(SECRET, client=client, on_event=on_event)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    server.abdm.webhooks(url, SECRET)
    return events, handler.aclose


async def _pushed(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient, **options: Any
) -> tuple[webhooks.WebhookEvent, KeyMaterial, dict[str, dict[str, Any]]]:
    events, close = await _receiver(serve, server, client)
    material = KeyMaterial.generate()
    await client.abdm.set_hiu_keys(material)
    sent = await asyncio.wait_for(server.abdm_hiu.push_for_consent(CONSENT, **options), 5)
    await close()
    assert sent.status == 200 and len(events) == 1
    return events[0], material, sent.bundles


async def test_a_push_reaches_the_handler_and_decrypts_to_the_bundles_the_hip_sent(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    bundles = {"cc-1": {"resourceType": "Bundle", "id": "b-1", "entry": [{"resource": {"note": "fever 39C"}}]}}
    event, material, sent = await _pushed(serve, server, client, bundles=bundles)
    assert event.kind is webhooks.EventKind.HIU_DATA_PUSH and event.signed_at is not None
    assert set(sent) == {"cc-1", "cc-2"} and sent["cc-1"] == bundles["cc-1"]

    received = client.abdm.decrypt_health_data(event, material)
    assert [(b.care_context_id, b.bundle, b.media) for b in received] == [
        ("cc-1", sent["cc-1"], "application/fhir+json"),
        ("cc-2", sent["cc-2"], "application/fhir+json"),
    ]
    assert "fever" not in repr(received)
    payload = event.payload()
    assert isinstance(payload, HiuDataPush) and payload.consent_id == "consent-1"
    assert client.abdm.decrypt_health_data(payload, material) == received  # the payload opens the same

    data = event.data  # what the fake HIP sent opens with the vendor's own package too
    key = data["key_information"]
    opened = abdm_ecdh.decrypt(
        data["entries"][0]["content"], key["nonce"], material.nonce, material.private_key,
        key["dh_public_key"]["key_value"],
    )  # fmt: skip
    assert json.loads(opened.decrypted_data) == bundles["cc-1"]

    statuses = [HealthDataStatus(b.care_context_id, True) for b in received]
    await client.abdm.acknowledge_health_data(payload.consent_id or "", payload.transaction_id or "", statuses)
    assert server.abdm_hiu.acknowledgements == [
        {
            "consent_id": "consent-1",
            "transaction_id": payload.transaction_id,
            "status_response": [
                {"care_context_id": "cc-1", "success": True},
                {"care_context_id": "cc-2", "success": True},
            ],
        }
    ]


async def test_a_wrong_checksum_is_an_error_naming_the_care_context(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    event, material, _ = await _pushed(serve, server, client, bad_checksum=["cc-2"])
    with pytest.raises(HealthDataChecksumMismatch) as info:
        client.abdm.decrypt_health_data(event, material)
    assert info.value.care_context_id == "cc-2" and "cc-2" in str(info.value)
    assert isinstance(info.value, HealthDataUnreadable) and "Bundle" not in str(info.value)


async def test_data_for_another_key_is_an_error_naming_the_care_context(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    event, _, _ = await _pushed(serve, server, client)
    with pytest.raises(HealthDataUnreadable) as info:
        client.abdm.decrypt_health_data(event, KeyMaterial.generate())
    assert type(info.value) is HealthDataUnreadable and info.value.care_context_id == "cc-1"
    assert "cc-1" in str(info.value)


def _changed(event: webhooks.WebhookEvent, change: Callable[[dict[str, Any]], None]) -> webhooks.WebhookEvent:
    raw = copy.deepcopy(event.raw)
    change(raw["data"])
    return webhooks.parse_event(raw)


async def test_changed_or_incomplete_entries_are_refused_and_base64_checksums_accepted(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    event, material, sent = await _pushed(serve, server, client)

    def flip(data: dict[str, Any]) -> None:
        raw = bytearray(base64.b64decode(data["entries"][1]["content"]))
        raw[3] ^= 1
        data["entries"][1]["content"] = base64.b64encode(raw).decode()

    with pytest.raises(HealthDataUnreadable) as info:
        client.abdm.decrypt_health_data(_changed(event, flip), material)
    assert info.value.care_context_id == "cc-2"

    def no_checksum(data: dict[str, Any]) -> None:
        del data["entries"][0]["checksum"]

    unchecked = _changed(event, no_checksum)
    with pytest.raises(HealthDataChecksumMismatch, match="no checksum"):
        client.abdm.decrypt_health_data(unchecked, material)
    assert len(client.abdm.decrypt_health_data(unchecked, material, require_checksum=False)) == 2

    def base64_checksum(data: dict[str, Any]) -> None:
        plain = json.dumps(sent["cc-1"], separators=(",", ":")).encode()
        data["entries"][0]["checksum"] = base64.b64encode(hashlib.md5(plain).digest()).decode()

    assert client.abdm.decrypt_health_data(_changed(event, base64_checksum), material)[0].bundle == sent["cc-1"]

    def no_key(data: dict[str, Any]) -> None:
        del data["key_information"]

    with pytest.raises(HealthDataUnreadable, match="no sender key"):
        client.abdm.decrypt_health_data(_changed(event, no_key), material)
    other = webhooks.parse_event({**event.raw, "event": "abha.consent_update"})
    with pytest.raises(InvalidRequest, match=r"abha\.hiu_data_push"):
        client.abdm.decrypt_health_data(other, material)


async def test_the_fake_hip_needs_a_key_set_and_a_webhook_url(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    with pytest.raises(RuntimeError, match="webhooks"):
        await server.abdm_hiu.push_for_consent(CONSENT)
    _, close = await _receiver(serve, server, client)
    with pytest.raises(RuntimeError, match="set_hiu_keys"):
        await server.abdm_hiu.push_for_consent(CONSENT)
    await close()
    assert server.abdm_hiu.pushes == []


# ------------------------------------------------------------------------------------------ the parsing status


async def test_acknowledge_is_sent_once_and_an_unknown_outcome_says_so(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.inject("hiu_data_on_push", Fault(status=503, times=1))
    statuses = [HealthDataStatus("cc-1", False, "not a FHIR bundle")]
    with pytest.raises(OutcomeUnknown):
        await client.abdm.acknowledge_health_data("consent-1", "txn-1", statuses)
    assert server.calls("hiu_data_on_push") == 1 and server.abdm_hiu.acknowledgements == []
    await client.abdm.acknowledge_health_data("consent-1", "txn-1", statuses, oid="oid-3")
    (body,) = server.abdm_hiu.acknowledgements
    assert body["status_response"] == [
        {"care_context_id": "cc-1", "success": False, "description": "not a FHIR bundle"}
    ]
    assert server.requests[-1].headers["X-Pt-Id"] == "oid-3"
    assert "FHIR" not in repr(statuses[0])


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        (("consent-1", "txn-1", []), "at least one"),
        (("consent-1", "txn-1", [HealthDataStatus("cc-1", True), HealthDataStatus("cc-1", False)]), "twice"),
        (("consent-1", "txn-1", [("cc-1", True)]), r"statuses\[0\] must be a HealthDataStatus"),
        (("consent-1", "txn-1", [HealthDataStatus("cc-1", "yes")]), r"statuses\[0\]\.success must be a bool"),  # type: ignore[arg-type]
        (("consent-1", "txn-1", [HealthDataStatus(" ", True)]), "care_context_id must not be empty"),
        (("", "txn-1", [HealthDataStatus("cc-1", True)]), "consent_id must not be empty"),
        (("consent-1", "txn\n1", [HealthDataStatus("cc-1", True)]), "transaction_id must be at most"),
        (("consent-1", "txn-1", [HealthDataStatus("cc-1", False, "secret " * 200)]), "description must be"),
    ],
)
async def test_bad_acknowledgements_are_refused_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, args: tuple[Any, ...], rule: str
) -> None:
    with pytest.raises(InvalidRequest, match=rule) as info:
        await client.abdm.acknowledge_health_data(*args)
    assert "secret" not in str(info.value)
    assert server.calls("hiu_data_on_push") == 0
