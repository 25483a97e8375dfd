"""A 502, 503 or 504 on a call that is not idempotent is an unknown outcome (issue 36, "Hardening, round 4").

A gateway or an upstream answering for the service may do so with a JSON body of its own, even one shaped like the
service's ABHA error body; the service behind it may have acted. Such an answer to a call sent once (an ABHA
creation, an OTP step, a link) is an :class:`~health_async.errors.OutcomeUnknown`, never repeated, unless its body
carries a code the vendor documents as a refusal (``abha-errors.mdx``). An ABHA creation answered so is checked
with ``address_exists`` before any second one.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async._retry import DOCUMENTED_REFUSAL_CODES, UNSETTLING_ABDM_CODES, settled
from health_async.models import CareContext, FlowStep
from health_async.resources.abha._flows import AadhaarRegistration
from health_async.testing import FakeHealthServer, Fault

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
#: A policy that would repeat anything it is allowed to: the calls sent once must still go once.
EAGER = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0, retry_non_idempotent=True)
#: A copy of the vendor's error table (shared/spec/vendor/abha-errors.mdx, the same as abdm-connect/errors.mdx), kept
#: in the repository as the vendor's other files are (tests/test_vendor_examples.py), so CI checks it on a clean clone.
VENDOR_ERRORS = Path(__file__).resolve().parent.parent / "data" / "vendor" / "abha-errors.mdx"
OID = "oid-1"
HIP = "IN2910000101"


def abha_body(code: str, status: int = 503, error: str = "Service Unavailable") -> dict[str, Any]:
    """The service's error body shape ``{code, error, source_error}``, as a gateway may imitate it."""
    return {"code": status, "error": error, "source_error": {"code": code, "message": error}}


#: A gateway's JSON, shaped like the service's error body, with a code of its own (not the vendor's).
GATEWAY_LOOKALIKE = abha_body("GW-503", error="upstream unavailable")


# ----------------------------------------------------------------------------------- the rule itself (pure)


@pytest.mark.parametrize(
    ("status", "body", "definite"),
    [
        (502, {"message": "Bad Gateway"}, False),  # a gateway's own JSON
        (503, GATEWAY_LOOKALIKE, False),  # shaped like the service's, a code the vendor does not document
        (504, abha_body("ABDM-1048", 504), False),  # documented, but a timeout: says nothing
        (502, abha_body("ABDM-9999", 502), False),  # documented, but "unknown exception"
        (503, abha_body("ABDM-1101"), True),  # documented refusal: the address exists
        (502, abha_body("ABDM-1027", 502), True),  # documented refusal: blocked
        (504, abha_body("MIS-1026", 504), True),  # documented refusal: transaction not found
        (500, abha_body("ABDM-1022", 500), True),  # ABDM's rate limit at its usual 500
        (500, abha_body("ABDM-1048", 500), False),  # "Timeout" at a 500 says nothing either
        (500, abha_body("ABDM-1024", 500), False),  # "Dependent service unavailable", as ABDM-1019
        (500, {"message": "Internal Server Error"}, False),
        (400, abha_body("EKA-1002", 400), True),
        (404, {"message": "no such transaction"}, True),
    ],
)
def test_what_settles_a_call_sent_once(status: int, body: Any, definite: bool) -> None:
    error = E.error_from_response(status, {}, body, operation="aadhaar_create")
    assert settled(error) is definite


def test_the_documented_refusal_codes_are_the_vendors_table() -> None:
    """Every code of the vendor's error table but those that do not say whether a call took effect: no more (a
    code invented here would turn a gateway's answer into a refusal), no less."""
    table = set(re.findall(r"\|\s*([A-Z]{2,5}-\d+)\s*\|", VENDOR_ERRORS.read_text()))
    assert UNSETTLING_ABDM_CODES <= table
    assert table - UNSETTLING_ABDM_CODES == DOCUMENTED_REFUSAL_CODES


# ----------------------------------------------------------------------------------- against the fake server


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {"token": server.token, "client_id": server.client_id, "user_id": OID, "retry": EAGER}
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


Call = Callable[[FakeHealthServer, ha.HealthClient], Awaitable[Any]]


async def _otp_send(server: FakeHealthServer, client: ha.HealthClient) -> Any:
    return await client.abha.aadhaar_init(server.data.valid_aadhaar[0])


async def _mobile_otp_send(server: FakeHealthServer, client: ha.HealthClient) -> Any:
    return await client.abha.mobile_init("9876543210")


async def _care_context_link(server: FakeHealthServer, client: ha.HealthClient) -> Any:
    return await client.abdm.link_care_contexts(
        [CareContext("CC-1", "OP visit", "OPConsultation")], abha_address="meera.iyer@sbx"
    )


async def _discover_link(server: FakeHealthServer, client: ha.HealthClient) -> Any:
    server.abdm_discover.add_records(HIP, OID, [("CC-A", "OP visit")], patient_id="P-1")
    server.abdm_discover.add_records(HIP, OID, [("CC-B", "OP visit")], patient_id="P-2")
    flow = await client.abdm.discover_and_link(HIP)
    return await flow.link("CC-A")


#: (route, call): calls sent once, of every kind the issue names (the ABHA creation has its own tests below).
CALLS: list[tuple[str, Call]] = [
    ("aadhaar_init", _otp_send),
    ("mobile_init", _mobile_otp_send),
    ("care_contexts_link", _care_context_link),
    ("discover_link_init", _discover_link),
]


@pytest.mark.parametrize("status", [502, 503, 504])
@pytest.mark.parametrize(("route", "call"), CALLS, ids=[route for route, _ in CALLS])
async def test_a_gateway_answer_with_a_json_body_is_an_unknown_outcome_never_repeated(
    server: FakeHealthServer, route: str, call: Call, status: int
) -> None:
    async with client_for(server) as client:
        server.inject(route, Fault(status=status, body=GATEWAY_LOOKALIKE, times=1))
        with pytest.raises(E.OutcomeUnknown) as info:
            await call(server, client)
    assert info.value.operation == route
    assert isinstance(info.value.__cause__, E.ApiError) and info.value.__cause__.status == status
    assert server.calls(route) == 1  # never repeated, though the policy would repeat anything it may
    assert "not repeated" in str(info.value)


#: The calls that read the service's ABHA error body (the hospital's care-context link does not: any 5XX of it is
#: an unknown outcome, its error body unread).
TYPED = [(route, call) for route, call in CALLS if route != "care_contexts_link"]


@pytest.mark.parametrize(("route", "call"), TYPED, ids=[route for route, _ in TYPED])
async def test_a_documented_refusal_at_a_gateway_status_is_raised_as_the_refusal(
    server: FakeHealthServer, route: str, call: Call
) -> None:
    """ABDM's own rate limit (``ABDM-1022``), answered with a 503: definite, raised as such, never repeated."""
    async with client_for(server) as client:
        server.inject(route, Fault(status=503, body=abha_body("ABDM-1022", error="Too many requests"), times=1))
        with pytest.raises(E.AbhaRateLimited):
            await call(server, client)
    assert server.calls(route) == 1


# ----------------------------------------------------------------------------------- the ABHA creation


async def _at_create(server: FakeHealthServer, client: ha.HealthClient) -> AadhaarRegistration:
    aadhaar = server.data.valid_aadhaar[0]
    reg = await client.abha.register_with_aadhaar(aadhaar)
    txn_id = reg.to_state()["txn_id"]
    await reg.verify_otp(server.abha.last_otp(txn_id), mobile=server.abha.linked_mobile(aadhaar))
    return reg


def step_of(flow: AadhaarRegistration) -> FlowStep:
    return flow.next_step


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_a_create_answered_by_a_gateway_is_checked_before_any_second_one(
    server: FakeHealthServer, status: int
) -> None:
    """The create took effect behind the gateway: the next create asks ``address_exists`` and sends nothing."""
    async with client_for(server) as client:
        reg = await _at_create(server, client)
        server.inject("aadhaar_create", Fault(status=status, body=GATEWAY_LOOKALIKE, times=1))
        with pytest.raises(E.OutcomeUnknown):
            await reg.create("meera.iyer@sbx")
        assert reg.create_outcome_unknown and step_of(reg) is FlowStep.CREATE_ADDRESS
        server.abha.add_account("meera.iyer")  # as if the service had created it behind the gateway
        with pytest.raises(E.AccountLikelyCreated) as info:
            await reg.create("meera.iyer@sbx")
    assert info.value.abha_address == "meera.iyer@sbx" and step_of(reg) is FlowStep.LOG_IN
    assert server.calls("aadhaar_create") == 1 and server.calls("address_exists") == 1


async def test_a_create_answered_by_a_gateway_that_did_not_take_effect_is_sent_after_the_check(
    server: FakeHealthServer,
) -> None:
    async with client_for(server) as client:
        reg = await _at_create(server, client)
        server.inject("aadhaar_create", Fault(status=503, body=GATEWAY_LOOKALIKE, times=1))
        with pytest.raises(E.OutcomeUnknown):
            await reg.create("meera.iyer@sbx")
        account = await reg.create("meera.iyer@sbx")
    assert account.created and step_of(reg) is FlowStep.DONE
    assert [r.route for r in server.requests][-2:] == ["address_exists", "aadhaar_create"]
    assert server.calls("aadhaar_create") == 2


async def test_a_taken_address_answered_at_a_gateway_status_keeps_the_step(server: FakeHealthServer) -> None:
    """``ABDM-1101`` (documented: the address exists) at a 503 is the service's refusal: no unknown outcome, the
    flow stays at ``CREATE_ADDRESS`` and the next create is sent without a check."""
    async with client_for(server) as client:
        reg = await _at_create(server, client)
        taken = abha_body("ABDM-1101", error="This ABHA Address already exists")
        server.inject("aadhaar_create", Fault(status=503, body=taken, times=1))
        with pytest.raises(E.AbhaError) as info:
            await reg.create("meera.iyer@sbx")
        assert not isinstance(info.value, E.OutcomeUnknown) and info.value.source_code == "ABDM-1101"
        assert not reg.create_outcome_unknown and step_of(reg) is FlowStep.CREATE_ADDRESS
        assert (await reg.create("meera.iyer@sbx")).created
    assert server.calls("address_exists") == 0
