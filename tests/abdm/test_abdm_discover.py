"""A patient's app finding a facility and linking its records (client.abdm.providers / provider /
discover_and_link / resume) against the fake server: the guided flow keeps the ABHA flows' conventions (next_step,
nothing sent out of step or twice at once, OTP steps never repeated, OtpMismatch and lock-outs, state plain or sealed
and resumed in another client), and personal data stays out of reprs, messages and the plain state."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async.models import (
    DiscoveredCareContext,
    DiscoveredPatient,
    Discovery,
    LinkConfirmed,
    LinkStep,
    Provider,
)
from health_async.resources.abdm._discover_flow import DiscoverAndLink
from health_async.testing import FakeHealthServer, Fault

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
#: A retry policy that would repeat anything it is allowed to (the OTP steps must still go once).
EAGER = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0, retry_non_idempotent=True)
SEAL_KEY = bytes(range(32))
OID = "oid-discover-1"
HIP = "IN2910000101"  # Apollo Clinic Koramangala, one of the fake's providers
#: Personal and health data the fake's records hold: never in a repr, a message, a log line or a plain state.
NAME = "Kavya Iyer"
VISIT = "Diabetes clinic, 3 March"
LAB = "HbA1c report"
RATE_LIMITED = {"code": 500, "error": "Too many", "source_error": {"code": "ABDM-1022", "message": "Too many requests"}}


class Clock:
    """A clock the test moves by hand (epoch seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {"token": server.token, "client_id": server.client_id, "user_id": OID, "retry": NO_WAIT}
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server) as c:
        yield c


def at(flow: DiscoverAndLink) -> LinkStep:
    """The flow's next step (read through a function: a property narrowed once stays narrowed for mypy)."""
    return flow.next_step


def linked_of(flow: DiscoverAndLink) -> LinkConfirmed | None:
    """The flow's link (read through a function, as :func:`at`)."""
    return flow.linked


def unknown_send(flow: DiscoverAndLink) -> bool:
    """Whether the flow's last link has an unknown outcome (read through a function, as :func:`at`)."""
    return flow.send_outcome_unknown


def routes(server: FakeHealthServer) -> list[str]:
    return [r.route for r in server.requests]


def last(server: FakeHealthServer, route: str) -> Any:
    return [r for r in server.requests if r.route == route][-1]


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


def seed_two_patients(server: FakeHealthServer) -> None:
    """Two patients of the facility match the user: one with a visit, one with a visit and a lab report."""
    server.abdm_discover.add_records(HIP, OID, [("CC-A", VISIT)], patient_id="P-1", display=NAME)
    server.abdm_discover.add_records(HIP, OID, [("CC-B", VISIT), ("CC-C", LAB)], patient_id="P-2", display=NAME)


# ----------------------------------------------------------------------------------- providers


async def test_providers_are_searched_by_name_and_read_one_by_one(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    found = await client.abdm.providers("  apollo ")
    assert [p.hip_id for p in found] == ["IN2910000101", "IN2910000102"]
    assert found[0] == Provider(hip_id=HIP, name="Apollo Clinic Koramangala", city="Bengaluru", state="Karnataka")
    assert last(server, "providers").query == [("name", "apollo")]  # stripped, as a query parameter
    assert last(server, "providers").headers["X-Pt-Id"] == OID
    assert await client.abdm.providers("no such place") == ()  # the service answers null: none found
    one = await client.abdm.provider("IN2710000201")
    assert (one.hip_id, one.name, one.city) == ("IN2710000201", "Sunrise Hospital", "Pune")
    with pytest.raises(ha.NotFoundError):
        await client.abdm.provider("IN9999999999")


async def test_provider_input_is_refused_before_sending(server: FakeHealthServer, client: ha.HealthClient) -> None:
    for name, says in [("ab", "at least 3"), ("  ab  ", "at least 3"), ("apo\nllo", "control"), ("x" * 201, "200")]:
        with pytest.raises(ha.InvalidRequest, match=says):
            await client.abdm.providers(name)
    for hip_id in ("", "IN29/../x", "IN 29", "a?b"):
        with pytest.raises(ha.InvalidRequest, match="hip_id"):
            await client.abdm.provider(hip_id)
    assert server.calls("providers") == server.calls("provider") == 0


async def test_reads_are_retried_but_not_on_abdms_500(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.inject("providers", Fault(status=503, times=1))
    assert len(await client.abdm.providers("apollo")) == 2
    assert server.calls("providers") == 2
    server.inject("provider", Fault(status=500, times=1, body=RATE_LIMITED))
    with pytest.raises(E.AbhaRateLimited) as info:
        await client.abdm.provider(HIP)
    assert info.value.source_code == "ABDM-1022" and info.value.operation == "provider"
    assert server.calls("provider") == 1  # a retry would extend ABDM's rate limit


# ----------------------------------------------------------------------------------- the flow


async def test_one_record_is_picked_linked_and_confirmed(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm_discover.add_records(HIP, OID, [("CC-1", VISIT)], patient_id="MRN-7", display=NAME)
    flow = await client.abdm.discover_and_link(HIP)
    assert isinstance(flow, DiscoverAndLink) and at(flow) is LinkStep.VERIFY_OTP and flow.hip_id == HIP
    assert flow.care_context_id == "CC-1" and linked_of(flow) is None
    discover, init = last(server, "discover"), last(server, "discover_link_init")
    assert discover.json == {"hip_id": HIP} and discover.headers["X-Pt-Id"] == OID
    assert set(init.json) == {"txn_id", "patient_ref_id", "cc_ref_id"}
    assert init.json["patient_ref_id"] == "MRN-7" and init.json["cc_ref_id"] == "CC-1"
    linked = await flow.confirm(server.abdm_discover.last_otp())
    assert linked.care_context_id == "CC-1" and isinstance(linked, LinkConfirmed)
    assert at(flow) is LinkStep.DONE and linked_of(flow) == linked
    confirm = last(server, "discover_link_confirm")
    assert confirm.json["txn_id"] != init.json["txn_id"]  # the link's own transaction, from link/init's answer
    assert server.abdm_discover.linked == {OID: [{"hip_id": HIP, "patient_id": "MRN-7", "care_context_id": "CC-1"}]}
    assert routes(server) == ["discover", "discover_link_init", "discover_link_confirm"]
    again = await client.abdm.discover_and_link(HIP)  # the linked record is no longer offered
    assert at(again) is LinkStep.NOTHING_FOUND and again.choices == ()
    assert server.calls("discover_link_init") == 1


async def test_several_matches_wait_for_a_choice(server: FakeHealthServer, client: ha.HealthClient) -> None:
    seed_two_patients(server)
    flow = await client.abdm.discover_and_link(HIP)
    assert at(flow) is LinkStep.SELECT_CARE_CONTEXT and server.calls("discover_link_init") == 0  # no OTP yet
    assert [(p.patient_id, p.display) for p in flow.choices] == [("P-1", NAME), ("P-2", NAME)]
    assert [c.care_context_id for c in flow.choices[1].care_contexts] == ["CC-B", "CC-C"]
    assert flow.choices[1].care_contexts[1].display == LAB
    assert await flow.link("CC-C") is LinkStep.VERIFY_OTP is flow.next_step
    assert last(server, "discover_link_init").json["patient_ref_id"] == "P-2"  # the patient found from the record
    assert (await flow.confirm(server.abdm_discover.last_otp())).care_context_id == "CC-C"
    rest = await client.abdm.discover_and_link(HIP)
    assert [[c.care_context_id for c in p.care_contexts] for p in rest.choices] == [["CC-A"], ["CC-B"]]


async def test_a_record_id_two_patients_hold_needs_the_patient(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.abdm_discover.add_records(HIP, OID, ["CC-1"], patient_id="P-1")
    server.abdm_discover.add_records(HIP, OID, ["CC-1"], patient_id="P-2")
    flow = await client.abdm.discover_and_link(HIP)
    with pytest.raises(ha.InvalidRequest, match="2 of the flow's patients: give patient_id"):
        await flow.link("CC-1")
    with pytest.raises(ha.InvalidRequest, match="one of the flow's choices"):
        await flow.link("CC-1", patient_id="P-3")
    assert server.calls("discover_link_init") == 0 and at(flow) is LinkStep.SELECT_CARE_CONTEXT
    await flow.link("CC-1", patient_id="P-2")
    assert last(server, "discover_link_init").json["patient_ref_id"] == "P-2"


async def test_auto_link_off_and_ref_id(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm_discover.add_records(HIP, OID, ["CC-1"], patient_id="P-1", ref_ids=["9876543210"])
    server.abdm_discover.add_records(HIP, OID, ["CC-2"], patient_id="P-2")
    flow = await client.abdm.discover_and_link(HIP, ref_id=" 9876543210 ", auto_link=False)
    assert last(server, "discover").json == {"hip_id": HIP, "ref_id": "9876543210"}
    assert at(flow) is LinkStep.SELECT_CARE_CONTEXT and [p.patient_id for p in flow.choices] == ["P-1"]
    assert server.calls("discover_link_init") == 0  # one record, but the caller asked to choose
    await flow.link("CC-1")
    assert at(flow) is LinkStep.VERIFY_OTP


async def test_a_partner_user_id_alone_names_the_user(server: FakeHealthServer) -> None:
    server.abdm_discover.add_records(HIP, "partner-7", ["CC-1"])
    async with client_for(server, user_id=None) as anonymous:
        with pytest.raises(ha.InvalidRequest, match="needs the user"):
            await anonymous.abdm.discover_and_link(HIP)
        assert server.calls("discover") == 0
        flow = await anonymous.abdm.discover_and_link(HIP, partner_user_id="partner-7")
        await flow.confirm(server.abdm_discover.last_otp())
    sent = last(server, "discover_link_confirm").headers
    assert sent["X-Partner-Pt-Id"] == "partner-7" and "X-Pt-Id" not in sent
    assert [link["care_context_id"] for link in server.abdm_discover.linked["partner-7"]] == ["CC-1"]


async def test_a_wrong_otp_then_the_right_one(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm_discover.add_records(HIP, OID, ["CC-1"])
    flow = await client.abdm.discover_and_link(HIP)
    otp = server.abdm_discover.last_otp()
    with pytest.raises(E.OtpMismatch) as info:
        await flow.confirm(wrong(otp))
    assert info.value.source_code == "ABDM-1035" and info.value.operation == "discover_link_confirm"
    assert wrong(otp) not in str(info.value)
    assert at(flow) is LinkStep.VERIFY_OTP and linked_of(flow) is None and OID not in server.abdm_discover.linked
    await flow.confirm(otp)
    assert at(flow) is LinkStep.DONE and server.calls("discover_link_confirm") == 2


async def test_too_many_wrong_otps_block_the_flow(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm_discover.add_records(HIP, OID, ["CC-1"])
    clock = Clock()
    flow = await client.abdm.discover_and_link(HIP, clock=clock)
    bad = wrong(server.abdm_discover.last_otp())
    for _ in range(server.abdm_discover.max_otp_attempts):
        with pytest.raises(E.OtpMismatch):
            await flow.confirm(bad)
    with pytest.raises(E.AbhaRateLimited) as info:  # ABDM-1100, answered with HTTP 500: not an unknown outcome
        await flow.confirm(bad)
    assert info.value.source_code == "ABDM-1100"
    assert at(flow) is LinkStep.BLOCKED and flow.blocked_until == clock.now + 30 * 60
    sent = server.calls("discover_link_confirm")
    with pytest.raises(E.InvalidFlowStep, match="BLOCKED"):
        await flow.confirm(server.abdm_discover.last_otp())
    assert server.calls("discover_link_confirm") == sent == server.abdm_discover.max_otp_attempts + 1


async def test_a_blocked_user_blocks_the_flow(server: FakeHealthServer, client: ha.HealthClient) -> None:
    seed_two_patients(server)
    clock = Clock()
    flow = await client.abdm.discover_and_link(HIP, clock=clock)
    server.abdm_discover.block(OID)
    with pytest.raises(E.AbhaBlocked):
        await flow.link("CC-A")
    assert at(flow) is LinkStep.BLOCKED and flow.blocked_until == clock.now + 24 * 3600
    assert server.calls("discover_link_init") == 1  # a 500 with ABDM-1027 is a definite refusal: sent once


async def test_calls_out_of_step_send_nothing(server: FakeHealthServer, client: ha.HealthClient) -> None:
    seed_two_patients(server)
    flow = await client.abdm.discover_and_link(HIP)
    with pytest.raises(E.InvalidFlowStep, match="at SELECT_CARE_CONTEXT and expects link"):
        await flow.confirm("123456")
    await flow.link("CC-A")
    with pytest.raises(E.InvalidFlowStep, match="at VERIFY_OTP and expects confirm"):
        await flow.link("CC-B")
    await flow.confirm(server.abdm_discover.last_otp())
    with pytest.raises(E.InvalidFlowStep, match="at DONE"):
        await flow.confirm(server.abdm_discover.last_otp())
    nothing = await client.abdm.discover_and_link("IN2710000201")  # no record of the user there
    assert at(nothing) is LinkStep.NOTHING_FOUND
    with pytest.raises(E.InvalidFlowStep, match="at NOTHING_FOUND"):
        await nothing.link("CC-A")
    assert server.calls("discover_link_init") == 1 and server.calls("discover_link_confirm") == 1


async def test_a_second_call_in_flight_is_refused(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abdm_discover.add_records(HIP, OID, ["CC-1"])
    flow = await client.abdm.discover_and_link(HIP)
    otp = server.abdm_discover.last_otp()
    server.inject("discover_link_confirm", Fault(latency=0.3, times=1))
    first = asyncio.create_task(flow.confirm(otp))
    await asyncio.sleep(0.05)
    with pytest.raises(E.InvalidFlowStep, match="still in flight"):
        await flow.confirm(otp)
    assert (await first).care_context_id == "CC-1"
    assert server.calls("discover_link_confirm") == 1


async def test_otp_steps_are_never_repeated(server: FakeHealthServer) -> None:
    seed_two_patients(server)
    async with client_for(server, retry=EAGER) as eager:
        flow = await eager.abdm.discover_and_link(HIP)
        server.inject("discover_link_init", Fault(status=503, times=1))
        with pytest.raises(E.OutcomeUnknown) as unknown:
            await flow.link("CC-A")
        assert unknown.value.operation == "discover_link_init" and server.calls("discover_link_init") == 1
        assert at(flow) is LinkStep.SELECT_CARE_CONTEXT and unknown_send(flow)
        await flow.link("CC-A")  # the caller's choice to send another OTP
        assert at(flow) is LinkStep.VERIFY_OTP and not unknown_send(flow)
        server.inject("discover_link_confirm", Fault(status=502, times=1))
        with pytest.raises(E.OutcomeUnknown):
            await flow.confirm(server.abdm_discover.last_otp())
        assert server.calls("discover_link_confirm") == 1 and at(flow) is LinkStep.VERIFY_OTP
        assert (await flow.confirm(server.abdm_discover.last_otp())).care_context_id == "CC-A"
        # the automatic link of a single record: an unknown outcome leaves no flow behind
        server.abdm_discover.add_records("IN2710000201", OID, ["CC-9"])
        server.inject("discover_link_init", Fault(drop=True, times=1))
        with pytest.raises(E.OutcomeUnknown):
            await eager.abdm.discover_and_link("IN2710000201")
        assert server.calls("discover_link_init") == 3


async def test_a_link_cancelled_in_flight_may_have_sent_its_otp(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    seed_two_patients(server)
    flow = await client.abdm.discover_and_link(HIP)
    server.inject("discover_link_init", Fault(latency=5, times=1))
    task = asyncio.create_task(flow.link("CC-A"))
    await asyncio.sleep(0.2)
    assert server.calls("discover_link_init") == 1  # the request reached the service, its answer is late
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert at(flow) is LinkStep.SELECT_CARE_CONTEXT and unknown_send(flow)  # the request had left
    await flow.link("CC-A")  # not busy any more
    assert at(flow) is LinkStep.VERIFY_OTP and server.calls("discover_link_init") == 2


async def test_the_discovery_is_a_read_retried_but_not_on_500(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.abdm_discover.add_records(HIP, OID, ["CC-1"])
    server.inject("discover", Fault(status=503, times=1))
    assert at(await client.abdm.discover_and_link(HIP, auto_link=False)) is LinkStep.SELECT_CARE_CONTEXT
    assert server.calls("discover") == 2
    with pytest.raises(E.AbhaError) as info:  # the service's word for an unknown facility, at HTTP 500
        await client.abdm.discover_and_link("IN9999999999")
    assert info.value.source_code == "ABDM-1035" and not isinstance(info.value, E.OtpMismatch)
    assert server.calls("discover") == 3


async def test_bad_input_is_refused_before_sending(server: FakeHealthServer, client: ha.HealthClient) -> None:
    for hip_id in ("", "IN/29", "IN 29", "x" * 300):
        with pytest.raises(ha.InvalidRequest, match="hip_id"):
            await client.abdm.discover_and_link(hip_id)
    for ref_id, says in [("  ", "must not be empty"), ("98765\n43210", "control"), ("9" * 300, "at most 256")]:
        with pytest.raises(ha.InvalidRequest, match=says) as info:
            await client.abdm.discover_and_link(HIP, ref_id=ref_id)
        assert "98765" not in str(info.value) and "999" not in str(info.value)
    assert server.calls("discover") == 0
    seed_two_patients(server)
    flow = await client.abdm.discover_and_link(HIP)
    for choice in ("", "CC-Z"):
        with pytest.raises(ha.InvalidRequest):
            await flow.link(choice)
    await flow.link("CC-A")
    for otp in ("12345", "12a456", "1234567", ""):
        with pytest.raises(E.InvalidOtp):
            await flow.confirm(otp)
    with pytest.raises(ha.InvalidRequest, match="otp must be a str"):
        await flow.confirm(123456)  # type: ignore[arg-type]
    assert server.calls("discover_link_init") == 1 and server.calls("discover_link_confirm") == 0
    assert at(flow) is LinkStep.VERIFY_OTP


# ----------------------------------------------------------------------------------- state


async def test_resume_from_a_plain_state_in_a_new_client(server: FakeHealthServer, client: ha.HealthClient) -> None:
    seed_two_patients(server)
    flow = await client.abdm.discover_and_link(HIP)
    state = json.loads(json.dumps(flow.to_state()))  # JSON-able, through a session store
    text = json.dumps(state)
    assert NAME not in text and VISIT not in text and LAB not in text  # no names, not what the records are
    assert state["kind"] == "discover_and_link" and state["step"] == "select_care_context" and state["oid"] == OID
    async with client_for(server, user_id=None) as worker:  # another worker, without the user's default
        resumed = worker.abdm.resume(state)
        assert at(resumed) is LinkStep.SELECT_CARE_CONTEXT and resumed.choices[0].display is None
        assert [c.care_context_id for c in resumed.choices[1].care_contexts] == ["CC-B", "CC-C"]
        assert server.calls("discover") == 1  # resuming sends nothing
        await resumed.link("CC-B")
        otp = server.abdm_discover.last_otp()
        waiting = json.loads(json.dumps(resumed.to_state()))
        assert otp not in json.dumps(waiting) and waiting["care_context_id"] == "CC-B"
        assert waiting["revision"] > state["revision"]
    async with client_for(server, user_id="someone-else") as other:
        done = await other.abdm.resume(waiting).confirm(otp)
    assert done.care_context_id == "CC-B"
    assert last(server, "discover_link_confirm").headers["X-Pt-Id"] == OID  # the flow's user, not the client's
    assert [link["care_context_id"] for link in server.abdm_discover.linked[OID]] == ["CC-B"]


async def test_resume_from_a_sealed_state(server: FakeHealthServer, client: ha.HealthClient) -> None:
    seed_two_patients(server)
    clock = Clock()
    flow = await client.abdm.discover_and_link(HIP, clock=clock)
    sealed = flow.to_state(seal=SEAL_KEY, max_age=600)
    assert isinstance(sealed, str) and NAME not in sealed
    resumed = client.abdm.resume(sealed, seal=SEAL_KEY, clock=clock)
    assert resumed.choices == flow.choices  # the names and what the records are came through, encrypted
    assert resumed.choices[1].care_contexts[1].display == LAB
    await resumed.link("CC-C")
    assert (await resumed.confirm(server.abdm_discover.last_otp())).care_context_id == "CC-C"
    with pytest.raises(E.FlowStateInvalid):
        client.abdm.resume(sealed, seal=bytes(32))
    with pytest.raises(E.FlowStateInvalid):
        client.abdm.resume(sealed[:-4] + "AAAA", seal=SEAL_KEY)
    clock.now += 601
    with pytest.raises(E.FlowStateExpired):
        client.abdm.resume(sealed, seal=SEAL_KEY, clock=clock)
    with pytest.raises(ha.InvalidRequest, match="needs seal=key"):
        client.abdm.resume(sealed)


async def test_a_state_that_is_not_one_is_refused(server: FakeHealthServer, client: ha.HealthClient) -> None:
    seed_two_patients(server)
    flow = await client.abdm.discover_and_link(HIP)
    state = flow.to_state()
    opened = json.loads(json.dumps(state))
    opened["choices"][0]["display"] = NAME  # personal data put in a plain state
    with pytest.raises(ha.InvalidRequest, match="only ever in a sealed state") as info:
        client.abdm.resume(opened)
    assert NAME not in str(info.value)
    for key, value, says in [
        ("kind", "login", "state.kind must be discover_and_link"),
        ("step", "nope", "state.step"),
        ("version", 2, "state.version"),
        ("txn_id", "a b", "txn_id"),
        ("hip_id", "a/b", "state.hip_id"),
        ("oid", None, "name the user"),
        ("choices", [], "state.choices"),
        ("blocked_until", float("inf"), r"state\.blocked_until must be a finite number"),
        ("blocked_until", 10**400, r"state\.blocked_until must be a finite number"),  # valid JSON, no float
    ]:
        with pytest.raises(ha.InvalidRequest, match=says):
            client.abdm.resume({**state, key: value})
    aadhaar = server.data.valid_aadhaar[0]
    abha_flow = await client.abha.register_with_aadhaar(aadhaar)
    with pytest.raises(ha.InvalidRequest, match=r"client\.abha\.resume"):
        client.abdm.resume(abha_flow.to_state())
    with pytest.raises(E.FlowStateInvalid):  # sealed for another purpose: never opens here
        client.abdm.resume(abha_flow.to_state(seal=SEAL_KEY), seal=SEAL_KEY)
    with pytest.raises(ha.InvalidRequest):
        client.abha.resume(state)


# ----------------------------------------------------------------------------------- personal data


async def test_personal_data_stays_out_of_reprs_messages_and_logs(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    server.abdm_discover.add_records(HIP, OID, [("CC-1", VISIT), ("CC-2", LAB)], patient_id="MRN-7", display=NAME)
    flow = await client.abdm.discover_and_link(HIP, ref_id="MRN-7")
    await flow.link("CC-2")
    otp = server.abdm_discover.last_otp()
    with pytest.raises(E.OtpMismatch) as info:
        await flow.confirm(wrong(otp))
    linked = await flow.confirm(otp)
    txn_id = last(server, "discover_link_confirm").json["txn_id"]
    patient = flow.choices[0]
    discovery = Discovery(txn_id=txn_id, patients=(patient,))
    shown = " ".join(
        [repr(flow), repr(patient), repr(patient.care_contexts), repr(linked), repr(discovery), str(info.value)]
        + [r.getMessage() for r in caplog.records]
    )
    assert repr(flow) == "DiscoverAndLink(next_step=DONE)"
    assert repr(patient.care_contexts[0]) == "DiscoveredCareContext(care_context_id='CC-1')"
    assert repr(linked) == "LinkConfirmed(care_context_id='CC-2')"
    assert "abdm flow discover_and_link: VERIFY_OTP -> DONE" in shown  # the step changes are logged
    for secret in (NAME, VISIT, LAB, "MRN-7", otp, wrong(otp), txn_id):
        assert secret not in shown
    assert isinstance(patient, DiscoveredPatient) and isinstance(patient.care_contexts[0], DiscoveredCareContext)
