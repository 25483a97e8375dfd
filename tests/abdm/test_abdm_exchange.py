"""ABDM's whole exchange against the fake server (issue 22's "done when"): a patient's app discovers and links a
hospital's records, sees a consent request a doctor's system (HIU) made, approves it with the consent PIN; the fake
plays the hospital pushing the records, and the HIU receives them at its webhook receiver and decrypts them.

Each side is its own client (its own OID), as in life; the webhook receiver is ``webhooks.abdm_handler`` served on
127.0.0.1 and registered with the fake.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async.abdm_crypto import KeyMaterial
from health_async.models import ConsentArtefact, ConsentStatus, ConsentUpdate, HealthDataStatus, LinkStep, RequestStatus
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hiu import example_document

from ..conftest import Serve

SECRET = "exchange-webhook-secret"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
HIP = "IN2910000101"  # one of the fake's providers
PATIENT_OID, HIU_OID = "oid-patient-1", "oid-doctor-1"
ABHA = "kavya.iyer@sbx"
PIN = "4821"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def client_for(server: FakeHealthServer, oid: str) -> ha.HealthClient:
    return ha.HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id=oid, retry=NO_WAIT
    )


async def test_records_are_linked_a_consent_approved_and_the_requester_decrypts_them(
    serve: Serve, server: FakeHealthServer
) -> None:
    server.abdm_discover.add_records(HIP, PATIENT_OID, [("CC-VISIT", "OP visit, 3 March")], patient_id="MRN-7")
    events: list[webhooks.WebhookEvent] = []
    updates: list[ConsentUpdate] = []
    arrived = asyncio.Event()

    async def on_event(event: webhooks.WebhookEvent) -> None:
        if event.kind is webhooks.EventKind.HIU_DATA_PUSH:
            events.append(event)
            arrived.set()
        elif isinstance(payload := event.payload(), ConsentUpdate):
            updates.append(payload)

    async with client_for(server, PATIENT_OID) as patient, client_for(server, HIU_OID) as hiu:
        # the patient's app: find the hospital, discover the record, link it with the OTP the patient received
        assert HIP in [p.hip_id for p in await patient.abdm.providers("apollo")]
        flow = await patient.abdm.discover_and_link(HIP)
        assert flow.care_context_id == "CC-VISIT" and flow.next_step is LinkStep.VERIFY_OTP
        linked = await flow.confirm(server.abdm_discover.last_otp())
        assert linked.care_context_id == "CC-VISIT" and flow.linked == linked

        # the requester: its key set and its webhook receiver, then a consent request for the patient's records
        material = KeyMaterial.generate()
        await hiu.abdm.set_hiu_keys(material)
        handler = webhooks.abdm_handler(SECRET, client=hiu, on_event=on_event)
        server.abdm.webhooks(f"{await serve({('POST', '/abdm'): handler.handle})}/abdm", SECRET)
        now = dt.datetime.now(dt.UTC)
        created = await hiu.abdm.consents.create(
            ABHA,
            purpose="Care management",
            hi_types=["OPConsultation"],
            start=now - dt.timedelta(days=365),
            end=now,
            expiry=now + dt.timedelta(days=30),
            hip_id=HIP,
            patient_oid=PATIENT_OID,
        )
        assert created.consent_init_id

        # the patient sees the request (in the inbox and the consents), sets the PIN and approves the record with it
        inbox = await patient.abdm.requests()
        assert [r.id for r in inbox.consents] == [created.consent_init_id]
        waiting = [c for c in await patient.abdm.consents.list(patient_oid=PATIENT_OID)]
        assert [c.status for c in waiting] == [ConsentStatus.REQUESTED]
        consent_id = waiting[0].consent_id
        assert consent_id is not None
        assert not await patient.abdm.consents.pin_exists()
        await patient.abdm.consents.set_pin(PIN)
        await patient.abdm.consents.approve(consent_id, pin=PIN, artefacts=[ConsentArtefact(HIP, ("CC-VISIT",))])
        assert [c.status for c in await patient.abdm.consents.list(patient_oid=PATIENT_OID)] == [ConsentStatus.GRANTED]

        # the hospital (the fake) pushes the approved record; the requester's receiver gets it and decrypts it
        await asyncio.wait_for(arrived.wait(), 10)
        await server.abdm.flush()
        assert len(events) == 1
        received = hiu.abdm.decrypt_health_data(events[0], material)
        assert [b.care_context_id for b in received] == ["CC-VISIT"]
        assert received[0].bundle == example_document("OPConsultation")  # what the fake HIP encrypted
        assert received[0].report.ok  # the guide's own example validates
        pushed = server.abdm_hiu.pushes[0]
        assert pushed["consent_id"] == consent_id and pushed["hip_id"] == HIP
        statuses = [HealthDataStatus.from_bundle(b) for b in received]
        await hiu.abdm.acknowledge_health_data(consent_id, pushed["transaction_id"], statuses)
        assert server.abdm_hiu.acknowledgements[0]["status_response"] == [
            {"care_context_id": "CC-VISIT", "success": True}
        ]

        # later the patient cuts the requester off: the consent's artefacts, read from the inbox, are revoked
        assert [r.id for r in (await patient.abdm.requests(RequestStatus.GRANTED)).consents] == [consent_id]
        revoked = await patient.abdm.consents.revoke(consent_id, pin=PIN)
        assert list(revoked) == server.abdm_consents.artefact_ids(consent_id)
        assert server.abdm_consents.consents[consent_id]["artefacts"][0]["status"] == "REVOKED"

        # the requester was told of each change by the signed abha.consent_update webhook, typed
        await server.abdm.flush()
        await handler.aclose()
        assert [(u.status, u.notification and u.notification.consent_request_id) for u in updates] == [
            ("GRANTED", consent_id),
            ("REVOKED", consent_id),
        ]
        assert updates[1].notification is not None
        assert [a.id for a in updates[1].notification.consent_artefacts] == list(revoked)


async def test_an_approval_without_a_requester_listening_pushes_nothing(server: FakeHealthServer) -> None:
    """No webhook URL and no key set: the approval stands, and the fake HIP has nobody to push to."""
    consent_id = server.abdm_consents.add_request(PATIENT_OID, [HIP], abha_address=ABHA)
    async with client_for(server, PATIENT_OID) as patient:
        await patient.abdm.consents.set_pin(PIN)
        await patient.abdm.consents.approve(consent_id, pin=PIN, artefacts=[ConsentArtefact(HIP, ("CC-1",))])
        await server.abdm.flush()
        details: Any = await patient.abdm.consents.details(consent_id)
        assert [h.hip_id for h in details.hips] == [HIP]
    assert server.abdm_hiu.pushes == []
