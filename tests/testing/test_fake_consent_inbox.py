"""The fake joins the HIU's consents to the patient's request inbox: a consent an HIU creates for a patient (by
their OID, or by an ABHA address the fake knows) is in that patient's ``client.abdm.requests()``, in the shape
registration.yml documents (``ListsRequestDetail``, ``DetailsResponse``), and follows the patient's answer."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

import health_async as ha
from health_async.models import ConsentArtefact, RequestKind, RequestStatus
from health_async.testing import FakeHealthServer

NO_WAIT = ha.RetryPolicy(attempts=1, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
PIN = "8146"
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
START, END, EXPIRY = NOW - dt.timedelta(days=90), NOW - dt.timedelta(days=1), NOW + dt.timedelta(days=7)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def connect(server: FakeHealthServer, user: str | None = None) -> ha.HealthClient:
    return ha.HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id=user, retry=NO_WAIT
    )


async def ask(hiu: ha.HealthClient, address: str, patient_oid: str | None = None) -> str:
    created = await hiu.abdm.consents.create(
        address,
        purpose="Self Requested",
        hi_types=["OPConsultation", "Prescription"],
        start=START,
        end=END,
        expiry=EXPIRY,
        hip_id="HIP-7",
        clinic_id="clinic-9",
        requester_name="Dr Rao",
        patient_oid=patient_oid,
    )
    assert created.consent_init_id is not None
    return created.consent_init_id


def stamp(when: dt.datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


async def test_a_consent_an_hiu_creates_by_abha_address_reaches_that_patients_inbox(server: FakeHealthServer) -> None:
    asha = server.abha.accounts["asha.verma"]
    async with connect(server) as hiu, connect(server, asha.oid) as patient:
        consent_id = await ask(hiu, "Asha.Verma@abdm")  # the fake compares ABHA addresses without case or suffix
        inbox = await patient.abdm.requests()
        assert [r.id for r in inbox.consents] == [consent_id] and len(inbox) == 1
        item = inbox.consents[0]
        assert item.kind is RequestKind.CONSENT
        assert (item.period and item.period.start, item.period and item.period.end) == (stamp(START), stamp(END))
        assert item.hiu is not None and item.hiu.id == "clinic-9"
        assert item.purpose is not None and (item.purpose.code, item.purpose.text) == ("PATRQT", "Self Requested")
        assert item.requester_name == "Dr Rao" and item.created_at
        details = await patient.abdm.request(consent_id, kind="consent")
        assert details.status is RequestStatus.REQUESTED and details.erase_at == stamp(EXPIRY)
        assert [t.id for t in details.hi_types] == ["OPConsultation", "Prescription"]
        assert [(p.hip and p.hip.id, p.artefact_id) for p in details.providers] == [("HIP-7", None)]


async def test_the_inbox_follows_the_patients_answer(server: FakeHealthServer) -> None:
    asha = server.abha.accounts["asha.verma"]
    async with connect(server) as hiu, connect(server, asha.oid) as patient:
        consent_id = await ask(hiu, asha.abha_address)
        await patient.abdm.consents.set_pin(PIN)
        await patient.abdm.consents.approve(consent_id, pin=PIN, artefacts=[ConsentArtefact("HIP-7", ("visit-1",))])
        assert len(await patient.abdm.requests()) == 0  # no longer waiting for an answer
        granted = await patient.abdm.requests("granted", "consent")
        assert [r.id for r in granted.consents] == [consent_id]
        details = await patient.abdm.request(consent_id)
        assert details.status is RequestStatus.GRANTED
        (provider,) = details.providers
        assert [c.id for c in provider.care_contexts] == ["visit-1"] and provider.artefact_id


async def test_the_oid_sent_names_the_patient_and_no_one_else_sees_it(server: FakeHealthServer) -> None:
    asha, ravi = server.abha.accounts["asha.verma"], server.abha.accounts["ravi_kumar"]
    async with connect(server) as hiu, connect(server, asha.oid) as a, connect(server, ravi.oid) as r:
        by_oid = await ask(hiu, "someone.new@sbx", patient_oid=ravi.oid)  # an address the fake does not know
        by_address = await ask(hiu, asha.abha_address)
        assert [x.id for x in (await r.abdm.requests()).consents] == [by_oid]
        assert [x.id for x in (await a.abdm.requests()).consents] == [by_address]


async def test_a_consent_for_an_abha_address_the_fake_does_not_know_is_in_no_inbox(server: FakeHealthServer) -> None:
    async with connect(server) as hiu:
        consent_id = await ask(hiu, "nobody.here@sbx")
    assert server.abdm_consents.consents[consent_id]["patient"] is None
    assert all(item["id"] != consent_id for item in server.abdm_requests._all().values())
