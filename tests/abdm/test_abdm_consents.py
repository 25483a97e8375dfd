"""``client.abdm.consents`` (ABDM consents, the consent PIN, auto-approval) against the fake server."""

from __future__ import annotations

import datetime as dt
import inspect
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async._checks import plan_of
from health_async.models import (
    AutoApprovalStatus,
    CareContextStatus,
    ConsentArtefact,
    ConsentHiType,
    ConsentPurpose,
    ConsentStatus,
    HiType,
    PinResetStep,
    PinScope,
)
from health_async.resources import Consents
from health_async.resources.abdm._consent_pin import ConsentPinReset
from health_async.testing import FakeHealthServer, Fault

NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
OID = "oid-1"
PIN = "8146"
OTHER_PIN = "3957"
ADDRESS = "nisha.sharma@sbx"
SEAL_KEY = bytes(range(32))
UTC = dt.UTC
EARLIER, LATER = dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 2, 1, tzinfo=UTC)


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


def bodies(server: FakeHealthServer, route: str) -> list[Any]:
    return [r.json for r in server.requests if r.route == route]


def has_pin(text: str, pin: str = PIN) -> bool:
    return re.search(rf"(?<!\d){pin}(?!\d)", text) is not None


def seeded(server: FakeHealthServer, hips: tuple[str, ...] = ("HIP-1", "HIP-2")) -> str:
    server.abdm_consents.pins[OID] = PIN
    return server.abdm_consents.add_request(OID, hips, ("OPConsultation", "Prescription"), abha_address=ADDRESS)


def at(flow: ConsentPinReset) -> PinResetStep:
    """The flow's step (a function, so that type checkers do not narrow it across awaits)."""
    return flow.next_step


def pin_calls(server: FakeHealthServer) -> int:
    return sum(server.calls(r) for r in server.abdm_consents.ROUTES if r.startswith("consent_pin_"))


# ------------------------------------------------------------------------------------------ the HIU's side


async def test_create_then_list_and_details_typed(server: FakeHealthServer, client: ha.HealthClient) -> None:
    now = dt.datetime.now(UTC).replace(microsecond=0)
    created = await client.abdm.consents.create(
        ADDRESS,
        purpose=ConsentPurpose.CARE_MANAGEMENT,
        hi_types=[HiType.PRESCRIPTION, ConsentHiType.INVOICE, "DiagnosticReport"],
        start=now - dt.timedelta(days=365),
        end=now,
        expiry=now + dt.timedelta(days=7),
        hip_id="HIP-1",
        patient_oid=OID,
        clinic_id="clinic-9",
        requester_name="Dr Rao",
    )
    assert created.consent_init_id in server.abdm_consents.consents
    sent = bodies(server, "consents_create")[0]
    assert sent["patient"] == {"health_id": ADDRESS, "oid": OID} and sent["purpose"] == "Care management"
    assert sent["record_types"] == ["Prescription", "Invoice", "DiagnosticReport"]
    assert sent["period"]["to"] == now.isoformat().replace("+00:00", "Z") and sent["period"]["expiry"].endswith("Z")
    assert sent["hip_identifier"] == {"id": "HIP-1"} and sent["hiu"]["requester"] == {"name": "Dr Rao"}

    listed = await client.abdm.consents.list(abha_address=ADDRESS, clinic_id="clinic-9")
    assert [c.consent_init_id for c in listed] == [created.consent_init_id]
    consent = listed[0]
    assert consent.status is ConsentStatus.REQUESTED
    assert consent.hi_types == (ConsentHiType.PRESCRIPTION, ConsentHiType.INVOICE, ConsentHiType.DIAGNOSTIC_REPORT)
    assert consent.period is not None and consent.period.end_at == now
    assert consent.period.expires_at == now + dt.timedelta(days=7) and consent.created_at is not None
    assert await client.abdm.consents.list(abha_address="someone.else@sbx") == ()
    assert await client.abdm.consents.list(clinic_id="clinic-other") == ()

    details = await client.abdm.consents.details(created.consent_init_id or "")
    assert [h.hip_id for h in details.hips] == ["HIP-1"] and details.care_context_ids == ()


async def test_create_checks_its_input_before_sending(server: FakeHealthServer, client: ha.HealthClient) -> None:
    now = dt.datetime.now(UTC)
    good: dict[str, Any] = {
        "purpose": "Self Requested",
        "hi_types": ["OPConsultation"],
        "start": now - dt.timedelta(days=1),
        "end": now,
        "expiry": now + dt.timedelta(days=1),
    }
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("not an address!", {}, "abha_address"),
        (ADDRESS, {"purpose": "Curiosity"}, "purpose"),
        (ADDRESS, {"hi_types": []}, "hi_types"),
        (ADDRESS, {"hi_types": ["OPConsultation", "OPConsultation"]}, "repeat"),
        (ADDRESS, {"hi_types": ["Xray"]}, "hi_types[0]"),
        (ADDRESS, {"start": now.replace(tzinfo=None)}, "timezone-aware"),
        (ADDRESS, {"start": now + dt.timedelta(days=2)}, "start must be before end"),
        (ADDRESS, {"expiry": now - dt.timedelta(seconds=1)}, "expiry must be in the future"),
    ]
    for address, change, rule in bad:
        with pytest.raises(E.InvalidRequest, match=re.escape(rule)):
            await client.abdm.consents.create(address, **{**good, **change})
    assert server.calls("consents_create") == 0


async def test_list_is_one_unpaged_answer_and_tolerates_unknown_statuses(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    ids = [server.abdm_consents.add_request(OID, ["HIP-1"]) for _ in range(3 * server.page_size)]
    server.abdm_consents.consents[ids[0]]["status"] = "granted"  # the requests API's lower case
    server.abdm_consents.consents[ids[1]]["status"] = "ON_HOLD"  # a status this version does not know
    server.abdm_consents.consents[ids[2]]["hi_types"] = ["GenomicsReport"]
    listed = await client.abdm.consents.list(patient_oid=OID)
    assert [c.consent_id for c in listed] == ids and server.calls("consents_list") == 1
    assert listed[0].status is ConsentStatus.GRANTED and listed[1].status is ConsentStatus.UNKNOWN
    assert listed[2].hi_types == (ConsentHiType.UNKNOWN,)


async def test_a_read_is_retried_but_not_on_abdm_500(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    server.inject("consents_details", Fault(status=503, times=1))
    assert (await client.abdm.consents.details(cid)).consent_id == cid
    assert server.calls("consents_details") == 2
    limited = {"code": 500, "error": "Too many requests", "source_error": {"code": "ABDM-1022", "message": "x"}}
    server.inject("consents_list", Fault(status=500, times=1, body=limited))
    with pytest.raises(E.AbhaRateLimited):
        await client.abdm.consents.list()
    assert server.calls("consents_list") == 1


# ------------------------------------------------------------------------------------------ approve, deny, revoke


async def test_approve_checks_the_pin_then_approves_per_hip(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    approved: list[dict[str, Any]] = []

    async def hook(consent: dict[str, Any]) -> None:
        approved.append(consent)

    server.abdm_consents.on_approved = hook
    await client.abdm.consents.approve(
        cid,
        pin=PIN,
        artefacts=[
            ConsentArtefact("HIP-1", ("visit-1", ("visit-2", "OP visit, 2 March"))),
            ConsentArtefact("HIP-2", ("lab-7",), hi_types=(ConsentHiType.DIAGNOSTIC_REPORT,)),
        ],
        hi_types=["OPConsultation"],
        start=dt.datetime(2024, 1, 1, tzinfo=UTC),
        end=dt.datetime(2024, 12, 31, 18, 30, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
    )
    assert bodies(server, "consent_pin_verify") == [{"pin": PIN, "scope": "consentrequest.approve"}]
    sent = bodies(server, "consents_approve")[0]
    assert sent["id"] == cid and sent["access_mode"] == "view" and sent["hi_types"] == ["OPConsultation"]
    assert sent["duration"] == {"from": "2024-01-01T00:00:00Z", "to": "2024-12-31T13:00:00Z"}
    first, second = sent["consent_artefacts"]
    assert first["care_contexts"] == [{"id": "visit-1"}, {"id": "visit-2", "display": "OP visit, 2 March"}]
    assert second == {
        "hip_id": "HIP-2",
        "access_mode": "view",
        "care_contexts": [{"id": "lab-7"}],
        "hi_types": ["DiagnosticReport"],
    }
    [r] = [r for r in server.requests if r.route == "consents_approve"]
    assert ("oid", OID) not in r.query and r.headers.get("X-Pt-Id") == OID

    held = server.abdm_consents.consents[cid]
    assert held["status"] == "GRANTED" and len(server.abdm_consents.artefact_ids(cid)) == 2
    assert (await client.abdm.consents.list())[0].status is ConsentStatus.GRANTED
    details = await client.abdm.consents.details(cid)
    assert details.care_context_ids == ("visit-1", "visit-2", "lab-7")
    assert details.hips[0].care_contexts[0].status is CareContextStatus.CONSENT_GRANTED

    [hooked] = approved
    assert hooked == {
        "consent_id": cid,
        "patient": OID,
        "abha_address": ADDRESS,
        "hip_ids": ["HIP-1", "HIP-2"],
        "care_contexts": [
            {"hip_id": "HIP-1", "care_context_id": "visit-1"},
            {"hip_id": "HIP-1", "care_context_id": "visit-2"},
            {"hip_id": "HIP-2", "care_context_id": "lab-7"},
        ],
        "hi_types": ["OPConsultation", "DiagnosticReport"],
        "artefact_ids": server.abdm_consents.artefact_ids(cid),
        "artefacts": [
            {
                "artefact_id": server.abdm_consents.artefact_ids(cid)[0],
                "hip_id": "HIP-1",
                "care_context_ids": ["visit-1", "visit-2"],
                "hi_types": ["OPConsultation"],
            },
            {
                "artefact_id": server.abdm_consents.artefact_ids(cid)[1],
                "hip_id": "HIP-2",
                "care_context_ids": ["lab-7"],
                "hi_types": ["DiagnosticReport"],
            },
        ],
    }


async def test_a_wrong_pin_approves_nothing(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    with pytest.raises(E.ConsentPinMismatch) as info:
        await client.abdm.consents.approve(cid, pin=OTHER_PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))])
    assert isinstance(info.value, E.AbhaError) and info.value.status == 400
    assert not has_pin(str(info.value), OTHER_PIN) and not has_pin(repr(info.value), OTHER_PIN)
    assert server.calls("consent_pin_verify") == 1 and server.calls("consents_approve") == 0
    assert server.abdm_consents.consents[cid]["status"] == "REQUESTED"
    for _ in range(server.abdm_consents.max_pin_attempts - 1):
        with pytest.raises(E.ConsentPinMismatch):
            await client.abdm.consents.verify_pin(OTHER_PIN)
    with pytest.raises(E.AbhaRateLimited):  # ABDM's block after too many wrong PINs, never retried
        await client.abdm.consents.verify_pin(PIN)
    assert server.calls("consent_pin_verify") == server.abdm_consents.max_pin_attempts + 1


async def test_the_pin_is_checked_before_anything_is_sent(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    one = [ConsentArtefact("HIP-1", ("v",))]
    for pin in ("", "123", "12345", "12a4", "١٢٣٤"):  # the last: Arabic-Indic digits
        with pytest.raises(E.InvalidConsentPin) as info:
            await client.abdm.consents.approve(cid, pin=pin, artefacts=one)
        assert pin == "" or pin not in str(info.value)
        with pytest.raises(E.InvalidConsentPin):
            await client.abdm.consents.revoke(cid, pin=pin, artefact_ids="a-1")
        with pytest.raises(E.InvalidConsentPin):
            await client.abdm.consents.set_pin(pin)
        with pytest.raises(E.InvalidConsentPin):
            await client.abdm.consents.change_pin(PIN, pin)
    with pytest.raises(E.InvalidArgumentType, match="pin must be a str"):
        await client.abdm.consents.verify_pin(1234)  # type: ignore[arg-type]
    with pytest.raises(E.InvalidRequest, match="differ"):
        await client.abdm.consents.change_pin(PIN, f" {PIN} ")
    with pytest.raises(E.InvalidRequest, match="scope"):
        await client.abdm.consents.verify_pin(PIN, scope="everything")
    assert pin_calls(server) == 0 and server.calls("consents_approve") == 0


async def test_the_artefacts_are_checked_before_anything_is_sent(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    cid = seeded(server)
    art = ConsentArtefact
    bad: list[tuple[list[Any], str]] = [
        ([], "at least one ConsentArtefact"),
        ([("HIP-1", ("v",))], "artefacts[0] must be a ConsentArtefact"),
        ([art("HIP-1", ())], "artefacts[0].care_contexts must hold at least one"),
        ([art("HIP-1", ("v", "v"))], "must not repeat a care context"),
        ([art("HIP 1", ("v",))], "artefacts[0].hip_id"),
        ([art("HIP-1", ("v",)), art("HIP-1", ("w",))], "hip_id twice"),
        ([art("HIP-1", ("v",), hi_types=("Xray",))], "artefacts[0].hi_types[0]"),
        ([art("HIP-1", (("v", "line\none"),))], "care_contexts[0].display"),
        ([art("HIP-1", ("v",), start=LATER, end=EARLIER)], "before"),
        ([art("HIP-1", ("v",), erase_at=dt.datetime(2030, 1, 1))], "timezone-aware"),
    ]
    for artefacts, rule in bad:
        with pytest.raises(E.InvalidRequest, match=re.escape(rule)):
            await client.abdm.consents.approve(cid, pin=PIN, artefacts=artefacts)
    assert pin_calls(server) == 0 and server.calls("consents_approve") == 0


async def test_typed_artefacts_keep_health_data_out_of_repr() -> None:
    artefact = ConsentArtefact("HIP-1", (("visit-9", "HIV test, 3 March"),), hi_types=(ConsentHiType.PRESCRIPTION,))
    assert "HIV" not in repr(artefact) and "visit-9" not in repr(artefact) and "HIP-1" in repr(artefact)
    assert ConsentPurpose.from_wire("Public Health") is ConsentPurpose.PUBLIC_HEALTH
    assert (
        ConsentStatus.from_wire("REVOKED") is ConsentStatus.REVOKED
        and ConsentStatus.from_wire(7) is ConsentStatus.UNKNOWN
    )


async def test_approve_sent_once_and_an_unknown_outcome_says_to_check_details(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    cid = seeded(server)
    server.inject("consents_approve", Fault(status=502, times=1))
    with pytest.raises(E.ConsentOutcomeUnknown) as info:
        await client.abdm.consents.approve(cid, pin=PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))])
    assert server.calls("consents_approve") == 1 and info.value.consent_id == cid
    assert "details(exc.consent_id)" in str(info.value) and cid not in str(info.value)
    assert isinstance(info.value.__cause__, E.ServerError)

    # a timeout after sending: not repeated either; details says whether anything was shared before trying again
    server.inject("consents_approve", Fault(latency=0.5, times=1))
    with pytest.raises(E.ConsentOutcomeUnknown):
        await client.abdm.consents.approve(cid, pin=PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))], timeout=0.1)
    assert server.calls("consents_approve") == 2
    assert (await client.abdm.consents.details(cid)).care_context_ids == ()
    await client.abdm.consents.approve(cid, pin=PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))])
    assert (await client.abdm.consents.details(cid)).care_context_ids == ("v",)


async def test_a_lost_pin_check_sends_no_approval(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    server.inject("consent_pin_verify", Fault(drop=True, times=1))
    with pytest.raises(E.OutcomeUnknown) as info:
        await client.abdm.consents.approve(cid, pin=PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))])
    assert not isinstance(info.value, E.ConsentOutcomeUnknown) and "NOT sent" in str(info.value)
    assert server.calls("consent_pin_verify") == 1 and server.calls("consents_approve") == 0
    await client.abdm.consents.approve(cid, pin=PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))])
    assert server.abdm_consents.consents[cid]["status"] == "GRANTED"


async def test_deny_with_a_reason_sent_once(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid, other = seeded(server), server.abdm_consents.add_request(OID, ["HIP-1"])
    await client.abdm.consents.deny(cid, reason="I do not know this clinic.\nPlease stop.")
    held = server.abdm_consents.consents[cid]
    assert held["status"] == "DENIED" and held["reason"].startswith("I do not know")
    assert pin_calls(server) == 0  # no PIN to deny
    with pytest.raises(E.AbhaError) as refused:  # no longer REQUESTED: the service's definite word
        await client.abdm.consents.deny(cid)
    assert not isinstance(refused.value, E.OutcomeUnknown) and refused.value.source_code == "ABDM-1031"
    server.inject("consents_deny", Fault(drop=True, times=1))
    with pytest.raises(E.ConsentOutcomeUnknown) as info:
        await client.abdm.consents.deny(other)
    assert info.value.consent_id == other and server.calls("consents_deny") == 3
    with pytest.raises(E.InvalidRequest, match="reason"):
        await client.abdm.consents.deny(other, reason="   ")


async def test_revoke_by_artefact_ids_then_by_consent_id(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    artefacts = [ConsentArtefact("HIP-1", ("v",)), ConsentArtefact("HIP-2", ("w",))]
    await client.abdm.consents.approve(cid, pin=PIN, artefacts=artefacts)
    first, second = server.abdm_consents.artefact_ids(cid)

    with pytest.raises(E.ConsentPinMismatch):
        await client.abdm.consents.revoke(pin=OTHER_PIN, artefact_ids=first)
    assert server.calls("consents_revoke") == 0
    assert await client.abdm.consents.revoke(pin=PIN, artefact_ids=first) == (first,)
    assert bodies(server, "consent_pin_verify")[-1] == {"pin": PIN, "scope": "consent.revoke"}
    assert bodies(server, "consents_revoke") == [{"consent_artefacts": [first]}]
    assert server.abdm_consents.consents[cid]["status"] == "GRANTED"  # one HIP cut off, not the other

    # by consent id: its artefacts read from the patient's request (GET /abdm/v1/request)
    rid = server.abdm_requests.add(OID, "consent", status="granted", request_id=cid, providers={"HIP-2": ["w"]})
    server.abdm_requests.items[rid]["providers"][0]["consent_artefact_id"] = second
    assert await client.abdm.consents.revoke(cid, pin=PIN) == (second,)
    assert server.abdm_consents.consents[cid]["status"] == "REVOKED"
    assert (await client.abdm.consents.list())[0].status is ConsentStatus.REVOKED

    with pytest.raises(E.InvalidRequest, match="consent_id or artefact_ids"):
        await client.abdm.consents.revoke(pin=PIN)
    with pytest.raises(E.InvalidRequest, match="repeat"):
        await client.abdm.consents.revoke(pin=PIN, artefact_ids=[first, first])
    requested = server.abdm_requests.add(OID, "consent")
    with pytest.raises(E.InvalidRequest, match="no consent artefact"):
        await client.abdm.consents.revoke(requested, pin=PIN)
    assert server.calls("consents_revoke") == 2


async def test_revoke_by_consent_id_checks_the_caller_before_reading_the_consent(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    cid = seeded(server)
    rid = server.abdm_requests.add(OID, "consent", status="granted", request_id=cid, providers={"HIP-1": ["v"]})
    server.abdm_requests.items[rid]["providers"][0]["consent_artefact_id"] = "art-1"
    for bad in ("", "x\r\nX-Evil: 1"):
        with pytest.raises(E.InvalidRequest, match="X-Partner-Pt-Id"):
            await client.abdm.consents.revoke(cid, pin=PIN, partner_user_id=bad)
    assert server.calls("abdm_request") == 0  # the consent's artefacts were not read
    assert pin_calls(server) == 0 and server.calls("consents_revoke") == 0


async def test_revoke_sent_once_names_the_artefacts(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    await client.abdm.consents.approve(cid, pin=PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))])
    [artefact] = server.abdm_consents.artefact_ids(cid)
    server.inject("consents_revoke", Fault(status=503, times=1))
    with pytest.raises(E.ConsentOutcomeUnknown) as info:
        await client.abdm.consents.revoke(pin=PIN, artefact_ids=[artefact])
    assert info.value.consent_id is None and info.value.artefact_ids == (artefact,)
    assert "check the consent's status" in str(info.value) and server.calls("consents_revoke") == 1


# ------------------------------------------------------------------------------------------ the PIN


async def test_set_verify_and_change_the_pin(server: FakeHealthServer, client: ha.HealthClient) -> None:
    consents = client.abdm.consents
    assert await consents.pin_exists() is False
    await consents.set_pin(f" {PIN} ")
    assert server.abdm_consents.pins == {OID: PIN} and await consents.pin_exists() is True
    with pytest.raises(E.AbhaError) as again:
        await consents.set_pin(OTHER_PIN)
    assert again.value.source_code == "ABDM-1053" and not isinstance(again.value, E.OutcomeUnknown)
    # ABDM's own words, not only "Something went wrong", and what to do
    assert "Data already exists" in str(again.value) and "change_pin" in str(again.value)
    await consents.verify_pin(PIN, scope=PinScope.CHANGE_PIN)
    assert bodies(server, "consent_pin_verify") == [{"pin": PIN, "scope": "profile.changepin"}]
    with pytest.raises(E.ConsentPinMismatch):
        await consents.change_pin(OTHER_PIN, "0000")
    assert server.abdm_consents.pins[OID] == PIN
    await consents.change_pin(PIN, OTHER_PIN)
    assert server.abdm_consents.pins[OID] == OTHER_PIN
    assert bodies(server, "consent_pin_change")[-1] == {"old": PIN, "new": OTHER_PIN}
    with pytest.raises(E.AbhaError) as unset:
        await consents.verify_pin(PIN, oid="oid-without-pin")
    assert unset.value.status == 404 and not isinstance(unset.value, E.ConsentPinMismatch)
    server.inject("consent_pin_set", Fault(status=503, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await consents.set_pin(PIN, oid="oid-2")
    assert server.calls("consent_pin_set") == 3  # never repeated


async def test_pins_stay_out_of_logs_reprs_and_errors(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    cid = seeded(server)
    consents = client.abdm.consents
    with pytest.raises(E.ConsentPinMismatch) as wrong:
        await consents.verify_pin(OTHER_PIN)
    await consents.approve(cid, pin=PIN, artefacts=[ConsentArtefact("HIP-1", ("v",))])
    reset = await consents.reset_pin()
    otp = server.abdm_consents.last_otp()
    await reset.verify_otp(otp)
    await reset.set_pin("5521")
    shown = " ".join([caplog.text, str(wrong.value), repr(wrong.value), repr(reset), json.dumps(reset.to_state())])
    for secret in (PIN, OTHER_PIN, "5521", otp):
        assert not has_pin(shown, secret)
    assert caplog.records  # the calls were logged, without their secrets


async def test_pin_reset_in_order(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm_consents.pins[OID] = PIN
    reset = await client.abdm.consents.reset_pin()
    assert at(reset) is PinResetStep.VERIFY_OTP and repr(reset) == "ConsentPinReset(next_step=VERIFY_OTP)"
    sent = reset.otp_sent
    assert sent is not None and sent.medium == "mobile" and sent.expiry_in_minutes == 10
    assert "3210" not in repr(sent) and sent.txn_id is not None and sent.txn_id not in repr(sent)
    otp = server.abdm_consents.last_otp()
    wrong = f"{(int(otp) + 1) % 1_000_000:06d}"
    with pytest.raises(E.OtpMismatch):
        await reset.verify_otp(wrong)
    assert at(reset) is PinResetStep.VERIFY_OTP
    assert await reset.verify_otp(otp) is PinResetStep.SET_PIN
    assert await reset.set_pin(OTHER_PIN) is PinResetStep.DONE
    assert server.abdm_consents.pins[OID] == OTHER_PIN
    assert [b["otp"] for b in bodies(server, "consent_pin_forgot_verify")] == [wrong, otp]
    assert bodies(server, "consent_pin_reset") == [{"pin": OTHER_PIN}]
    await client.abdm.consents.verify_pin(OTHER_PIN)


async def test_pin_reset_out_of_order_sends_nothing(server: FakeHealthServer, client: ha.HealthClient) -> None:
    reset = await client.abdm.consents.reset_pin()
    with pytest.raises(E.InvalidFlowStep, match="expects verify_otp"):
        await reset.set_pin(PIN)
    with pytest.raises(E.InvalidOtp):
        await reset.verify_otp("12")
    assert server.calls("consent_pin_reset") == 0 and server.calls("consent_pin_forgot_verify") == 0
    await reset.verify_otp(server.abdm_consents.last_otp())
    with pytest.raises(E.InvalidFlowStep, match="expects set_pin"):
        await reset.verify_otp(server.abdm_consents.last_otp())
    with pytest.raises(E.InvalidConsentPin):
        await reset.set_pin("12345")
    await reset.set_pin(PIN)
    with pytest.raises(E.InvalidFlowStep, match="DONE"):
        await reset.set_pin(OTHER_PIN)
    assert server.calls("consent_pin_forgot_verify") == 1 and server.calls("consent_pin_reset") == 1


async def test_pin_reset_otp_never_retried_and_blocked_after_too_many(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    reset = await client.abdm.consents.reset_pin(clock=lambda: 1000.0)
    server.inject("consent_pin_forgot_verify", Fault(status=503, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await reset.verify_otp(server.abdm_consents.last_otp())
    assert server.calls("consent_pin_forgot_verify") == 1 and at(reset) is PinResetStep.VERIFY_OTP
    otp = server.abdm_consents.last_otp()
    wrong = f"{(int(otp) + 1) % 1_000_000:06d}"
    for _ in range(server.abdm_consents.max_otp_attempts):
        with pytest.raises(E.OtpMismatch):
            await reset.verify_otp(wrong)
    with pytest.raises(E.AbhaRateLimited):
        await reset.verify_otp(otp)
    assert at(reset) is PinResetStep.BLOCKED and reset.blocked_until == 1000.0 + 30 * 60
    with pytest.raises(E.InvalidFlowStep):
        await reset.verify_otp(otp)


async def test_pin_reset_state_resumes_without_secrets(server: FakeHealthServer, client: ha.HealthClient) -> None:
    reset = await client.abdm.consents.reset_pin(oid="oid-2")
    otp = server.abdm_consents.last_otp()
    await reset.verify_otp(otp)
    state = reset.to_state()
    assert state["kind"] == "consent_pin_reset" and state["step"] == "set_pin"
    assert state["headers"] == {"oid": "oid-2", "partner_user_id": None}
    assert otp not in json.dumps(state)
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id) as other:
        again = other.abdm.consents.resume_pin_reset(json.loads(json.dumps(state)))
        assert at(again) is PinResetStep.SET_PIN
        sealed = reset.to_state(seal=SEAL_KEY)
        assert isinstance(sealed, str) and "set_pin" not in sealed
        assert other.abdm.consents.resume_pin_reset(sealed, seal=SEAL_KEY).next_step is PinResetStep.SET_PIN
        await again.set_pin(PIN)
    assert server.abdm_consents.pins == {"oid-2": PIN}
    with pytest.raises(E.InvalidRequest, match=r"state\.kind"):
        client.abdm.consents.resume_pin_reset({**state, "kind": "login"})
    with pytest.raises(E.InvalidRequest, match=r"state\.headers"):
        client.abdm.consents.resume_pin_reset({**state, "headers": {"token": "x"}})
    with pytest.raises(E.InvalidRequest, match=r"state\.blocked_until must be a finite number"):
        client.abdm.consents.resume_pin_reset({**state, "blocked_until": 10**400})  # valid JSON, too large a float
    with pytest.raises(E.FlowStateInvalid):
        client.abdm.consents.resume_pin_reset(sealed[:-4] + "AAAA", seal=SEAL_KEY)


# ------------------------------------------------------------------------------------------ auto-approval


async def test_auto_approval_read_and_update(server: FakeHealthServer, client: ha.HealthClient) -> None:
    consents = client.abdm.consents
    policy = await consents.auto_approval()
    assert policy.status is AutoApprovalStatus.DISABLED and policy.enabled is False
    updated = await consents.set_auto_approval(oid="oid-7")
    assert updated.enabled is True and server.abdm_consents.auto_approval == {"oid-7": True}
    [patch] = [r for r in server.requests if r.route == "consents_set_auto_approval"]
    assert ("oid", "oid-7") in patch.query and patch.headers.get("Content-Type") == "application/x-www-form-urlencoded"
    assert (await consents.auto_approval(oid="oid-7")).enabled and not (await consents.auto_approval()).enabled
    server.inject("consents_set_auto_approval", Fault(status=502, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await consents.set_auto_approval()
    assert server.calls("consents_set_auto_approval") == 2
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id) as nobody:
        with pytest.raises(E.InvalidRequest, match="needs the patient"):
            await nobody.abdm.consents.set_auto_approval()
    assert server.calls("consents_set_auto_approval") == 2


# ------------------------------------------------------------------------------------------ argument types


def test_every_public_method_checks_its_argument_types() -> None:
    # (tests/core/test_argument_types.py walks the client's own namespaces; client.abdm.consents is one level down)
    methods = dict(m for m in inspect.getmembers(Consents, inspect.isfunction) if not m[0].startswith("_"))
    assert set(methods) == {
        "create",
        "list",
        "details",
        "approve",
        "deny",
        "revoke",
        "pin_exists",
        "set_pin",
        "verify_pin",
        "change_pin",
        "reset_pin",
        "resume_pin_reset",
        "auto_approval",
        "set_auto_approval",
    }
    assert [name for name, f in methods.items() if not getattr(f, "__health_checked__", False)] == []
    for func in methods.values():
        plan_of(func)


async def test_a_wrong_type_sends_nothing(server: FakeHealthServer, client: ha.HealthClient) -> None:
    cid = seeded(server)
    with pytest.raises(E.InvalidArgumentType, match="consent_id must be a str"):
        await client.abdm.consents.approve(1, pin=PIN, artefacts=[])  # type: ignore[arg-type]
    with pytest.raises(E.InvalidArgumentType, match="start must be a datetime"):
        await client.abdm.consents.approve(cid, pin=PIN, artefacts=[], start="2024-01-01")  # type: ignore[arg-type]
    assert pin_calls(server) == 0 and server.calls("consents_approve") == 0
