"""The guided ABHA flows (client.abha.register_with_aadhaar / register_with_mobile / login / resume) against the fake
server: every branch of the vendor's charts, never a duplicate account, OTP or block, nothing sent out of step, a
lost create checked before any second one, state kept server-side and resumed elsewhere, secrets out of reprs;
and the interactive ``health-async abha`` command with a fake prompt."""

from __future__ import annotations

import array
import asyncio
import datetime as dt
import io
import json
import math
import os
import signal
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
import pybase64
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import health_async as ha
from health_async import _seal, cli
from health_async import errors as E
from health_async._cli.abha import register as abha_cli
from health_async._demo import run_demo
from health_async.errors import AccountLikelyCreated, FlowStateExpired, FlowStateInvalid, InvalidRequest
from health_async.models import AbhaAccount, FlowStep, LoginMethod, NewAbhaProfile
from health_async.resources.abha._flows import (
    DEFAULT_MAX_RESENDS,
    DEFAULT_RESEND_INTERVAL,
    AadhaarRegistration,
    AbhaLogin,
    MobileRegistration,
)
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abha._registration import SEEDED_MOBILE

from ..conftest import ServerThread

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
OTHER_MOBILE = "8123456789"
PROFILE = NewAbhaProfile(first_name="Meera", gender="F", date_of_birth=dt.date(1992, 3, 4), pincode="560001")
RATE_LIMITED = {"code": 500, "error": "Too many", "source_error": {"code": "ABDM-1100", "message": "try in 30 min"}}
BLOCKED = {"code": 500, "error": "You are blocked", "source_error": {"code": "ABDM-1027", "message": "24 hours"}}


class Clock:
    """A clock the test moves by hand (epoch seconds)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {"token": server.token, "client_id": server.client_id, "user_id": "oid-1"}
    options.update(retry=NO_WAIT, **kwargs)
    return ha.HealthClient(base_url=server.url, **options)


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server) as c:
        yield c


@pytest.fixture
def clock() -> Clock:
    return Clock()


def otp_of(server: FakeHealthServer, flow: Any) -> str:
    """The OTP the fake "sent" for the flow's transaction (what the person would type)."""
    return server.abha.last_otp(flow.to_state()["txn_id"])


def at(flow: Any) -> FlowStep:
    """The flow's next step (read through a function: a property narrowed once stays narrowed for mypy)."""
    step: FlowStep = flow.next_step
    return step


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


def routes(server: FakeHealthServer) -> list[str]:
    return [r.route for r in server.requests]


# ----------------------------------------------------------------------------------- registration with Aadhaar


async def test_aadhaar_registration_with_the_linked_mobile(server: FakeHealthServer, client: ha.HealthClient) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    reg = await client.abha.register_with_aadhaar(aadhaar)
    assert isinstance(reg, AadhaarRegistration) and at(reg) is FlowStep.VERIFY_OTP
    assert reg.hint and reg.hint.endswith(server.abha.linked_mobile(aadhaar)[-4:])
    step = await reg.verify_otp(otp_of(server, reg), mobile=server.abha.linked_mobile(aadhaar))
    assert step is FlowStep.CREATE_ADDRESS is reg.next_step and reg.accounts == ()
    free = await reg.suggest_addresses()
    assert free
    account = await reg.create(free[0] + "@sbx")
    assert isinstance(account, AbhaAccount) and at(reg) is FlowStep.DONE and reg.account is account
    assert account.created and account.kyc_verified is True and account.token and account.refresh_token
    assert account.abha_address == free[0] + "@sbx" and account.oid == server.abha.accounts[free[0]].oid
    assert account.masked_abha_number and account.masked_abha_number.startswith("xx-xxxx-xxxx-")
    assert routes(server) == ["aadhaar_init", "aadhaar_verify", "suggest_addresses", "aadhaar_create"]


async def test_aadhaar_registration_with_another_mobile_confirms_it(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    reg = await client.abha.register_with_aadhaar(server.data.valid_aadhaar[1], clock=clock)
    assert await reg.verify_otp(otp_of(server, reg), mobile=OTHER_MOBILE) is FlowStep.VERIFY_MOBILE_OTP
    assert reg.hint and reg.hint.endswith(OTHER_MOBILE[-4:])  # now the OTP went to the new mobile
    before = len(server.requests)
    with pytest.raises(E.InvalidFlowStep, match="VERIFY_MOBILE_OTP"):
        await reg.verify_otp(otp_of(server, reg), mobile=OTHER_MOBILE)
    with pytest.raises(E.InvalidFlowStep, match="VERIFY_MOBILE_OTP"):
        await reg.create("kavya.reddy@sbx")
    assert len(server.requests) == before
    clock.advance(DEFAULT_RESEND_INTERVAL)  # a new OTP step starts its own resend count and interval
    await reg.resend_otp()
    assert routes(server)[-1] == "aadhaar_mobile_resend"
    with pytest.raises(E.OtpMismatch):
        await reg.verify_mobile_otp(wrong(otp_of(server, reg)))
    assert at(reg) is FlowStep.VERIFY_MOBILE_OTP
    assert await reg.verify_mobile_otp(otp_of(server, reg)) is FlowStep.CREATE_ADDRESS
    account = await reg.create("kavya.reddy@sbx")
    assert account.created and account.profile is not None and account.profile.mobile == OTHER_MOBILE


@pytest.mark.parametrize("held", [1, 2])
async def test_aadhaar_that_holds_abhas_logs_into_one_never_a_duplicate(
    server: FakeHealthServer, client: ha.HealthClient, held: int
) -> None:
    aadhaar = server.data.valid_aadhaar[-1]  # seeded with asha.verma@sbx
    if held == 2:
        server.abha.add_account("asha.second", aadhaar=aadhaar)
    reg = await client.abha.register_with_aadhaar(aadhaar)
    step = await reg.verify_otp(otp_of(server, reg), mobile=server.abha.linked_mobile(aadhaar))
    assert step is FlowStep.SELECT_ACCOUNT and len(reg.accounts) == held  # abha_create WITH profiles
    with pytest.raises(E.InvalidFlowStep, match="SELECT_ACCOUNT"):
        await reg.create("asha.verma2@sbx")
    with pytest.raises(E.InvalidFlowStep):
        await reg.suggest_addresses()
    with pytest.raises(E.InvalidRequest, match="one of the flow's accounts"):
        await reg.choose("someone.else@sbx")
    if held == 2:
        with pytest.raises(E.InvalidRequest, match="2 accounts"):
            await reg.choose()
        account = await reg.choose("ASHA.SECOND")  # matched without case or suffix; the offered address is sent
    else:
        account = await reg.choose()  # the only one
    assert server.calls("aadhaar_create") == 0 and server.calls("auto_login") == 1
    sent = next(r for r in server.requests if r.route == "auto_login").json["abha_address"]
    assert sent == ("asha.second@sbx" if held == 2 else "asha.verma@sbx")
    assert not account.created and account.token and at(reg) is FlowStep.DONE


# ----------------------------------------------------------------------------------- registration with a mobile


async def test_mobile_registration(server: FakeHealthServer, client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile("+91 81234 56789")
    assert isinstance(reg, MobileRegistration)
    with pytest.raises(E.InvalidRequest, match="only for an Aadhaar registration"):
        await reg.verify_otp(otp_of(server, reg), mobile=OTHER_MOBILE)
    assert await reg.verify_otp(otp_of(server, reg)) is FlowStep.CREATE_ADDRESS
    before = len(server.requests)
    with pytest.raises(E.InvalidRequest, match="profile"):
        await reg.create("meera_k92@sbx")  # no KYC: the person's details are needed
    with pytest.raises(E.InvalidAbhaAddress):
        await reg.create("me@sbx", profile=PROFILE)
    assert len(server.requests) == before
    free = await reg.suggest_addresses(first_name="Meera", last_name="Iyer", date_of_birth=PROFILE.date_of_birth)
    assert free
    account = await reg.create("meera_k92@sbx", profile=PROFILE)
    assert account.created and account.abha_address == "meera_k92@sbx" and account.abha_number is None
    assert server.abha.accounts["meera_k92"].mobile == OTHER_MOBILE


async def test_mobile_registration_on_a_shared_mobile_may_create_or_log_in(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    # A mobile number is often a family's: its ABHAs are offered, and a new one may still be created.
    reg = await client.abha.register_with_mobile(SEEDED_MOBILE)
    assert await reg.verify_otp(otp_of(server, reg)) is FlowStep.CREATE_ADDRESS
    assert sorted(a.abha_address or "" for a in reg.accounts) == ["ravi.k1990@sbx", "ravi_kumar@sbx"]
    state = reg.to_state()
    account = await reg.create("meera_k92@sbx", profile=PROFILE)
    assert account.created
    async with client_for(server) as other:
        again = await other.abha.register_with_mobile(SEEDED_MOBILE)
        await again.verify_otp(otp_of(server, again))
        chosen = await again.choose("ravi_kumar@sbx")
    assert not chosen.created and server.calls("auto_login") == 1
    assert state["choose_via"] == "auto_login"


# ----------------------------------------------------------------------------------- login


async def test_login_by_abha_address_ends_at_verify(server: FakeHealthServer, client: ha.HealthClient) -> None:
    login = await client.abha.login(LoginMethod.PHR_ADDRESS, "asha.verma@sbx")
    assert isinstance(login, AbhaLogin) and login.login_method is LoginMethod.PHR_ADDRESS
    assert await login.verify_otp(otp_of(server, login)) is FlowStep.DONE
    assert login.account is not None and not login.account.created and login.account.abha_address == "asha.verma@sbx"
    with pytest.raises(E.InvalidFlowStep, match="DONE"):
        await login.verify_otp("123456")


@pytest.mark.parametrize("held", [1, 2])
async def test_login_by_mobile_selects_one(server: FakeHealthServer, client: ha.HealthClient, held: int) -> None:
    mobile = SEEDED_MOBILE
    if held == 1:
        mobile = "7012345678"
        server.abha.add_account("lone.user1", mobile=mobile)
    login = await client.abha.login("mobile", mobile)
    assert await login.verify_otp(otp_of(server, login)) is FlowStep.SELECT_ACCOUNT
    assert len(login.accounts) == held
    account = await login.choose(login.accounts[-1].abha_address)
    assert routes(server)[-1] == "login_phr" and account.token and at(login) is FlowStep.DONE


@pytest.mark.parametrize("held", [1, 2])
async def test_login_by_aadhaar_auto_logs_in(server: FakeHealthServer, client: ha.HealthClient, held: int) -> None:
    aadhaar = server.data.valid_aadhaar[-1]
    if held == 2:
        server.abha.add_account("asha.second", aadhaar=aadhaar)
    login = await client.abha.login("aadhaar_number", aadhaar)
    assert await login.verify_otp(otp_of(server, login)) is FlowStep.SELECT_ACCOUNT  # abha_create with profiles
    account = await login.choose(login.accounts[0].abha_address)
    assert routes(server)[-1] == "auto_login" and account.kyc_verified is True
    assert server.calls("aadhaar_create") == 0


async def test_login_by_aadhaar_without_an_abha_creates_one(server: FakeHealthServer, client: ha.HealthClient) -> None:
    login = await client.abha.login("aadhaar_number", server.data.valid_aadhaar[0])
    assert await login.verify_otp(otp_of(server, login)) is FlowStep.CREATE_ADDRESS and login.accounts == ()
    with pytest.raises(E.InvalidFlowStep, match="CREATE_ADDRESS"):
        await login.choose("asha.verma@sbx")
    account = await login.create("rohan.das77@sbx")
    assert account.created and account.kyc_verified is True


async def test_login_by_abha_number(server: FakeHealthServer, client: ha.HealthClient) -> None:
    number = server.abha.accounts["asha.verma"].abha_number or ""
    login = await client.abha.login("abha_number", number, otp_system="aadhaar")
    assert await login.verify_otp(otp_of(server, login)) is FlowStep.SELECT_ACCOUNT
    assert (await login.choose()).abha_address == "asha.verma@sbx"


async def test_login_has_no_resend_and_no_search(server: FakeHealthServer, client: ha.HealthClient) -> None:
    login = await client.abha.login("phr_address", "asha.verma@sbx")
    with pytest.raises(E.InvalidFlowStep, match="no OTP resend"):
        await login.resend_otp()
    with pytest.raises(E.InvalidRequest, match="search"):
        await client.abha.login("search", "1")
    with pytest.raises(E.InvalidRequest, match="method must be one of"):
        await client.abha.login("email", "x")
    assert routes(server) == ["login_init"]


# ----------------------------------------------------------------------------------- never a duplicate OTP or a block


async def test_a_wrong_otp_stays_then_too_many_block_the_flow(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    reg = await client.abha.register_with_mobile(OTHER_MOBILE, clock=clock)
    otp = otp_of(server, reg)
    for _ in range(server.abha.max_otp_attempts):
        with pytest.raises(E.OtpMismatch):
            await reg.verify_otp(wrong(otp))
        assert at(reg) is FlowStep.VERIFY_OTP
    with pytest.raises(E.AbhaRateLimited) as info:
        await reg.verify_otp(otp)  # ABDM locked the transaction
    assert info.value.try_again_after == 30 * 60
    assert at(reg) is FlowStep.BLOCKED and reg.blocked_until == clock.now + 30 * 60
    assert reg.to_state()["blocked_until"] == clock.now + 30 * 60
    before = len(server.requests)
    for call in (reg.verify_otp(otp), reg.resend_otp(), reg.create("meera_k92@sbx", profile=PROFILE)):
        with pytest.raises(E.InvalidFlowStep, match="BLOCKED"):
            await call
    assert len(server.requests) == before


async def test_a_block_ends_the_flow_with_its_wait(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    reg = await client.abha.register_with_aadhaar(server.data.valid_aadhaar[0], clock=clock)
    server.inject("aadhaar_verify", Fault(status=500, body=BLOCKED, times=1))
    with pytest.raises(E.AbhaBlocked) as info:
        await reg.verify_otp(otp_of(server, reg), mobile=OTHER_MOBILE)
    assert info.value.try_again_after == 24 * 3600 and server.calls("aadhaar_verify") == 1
    assert at(reg) is FlowStep.BLOCKED and reg.blocked_until == clock.now + 24 * 3600


async def test_resends_are_refused_locally_when_too_soon_or_too_many(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    assert (DEFAULT_RESEND_INTERVAL, DEFAULT_MAX_RESENDS) == (60.0, 2)
    reg = await client.abha.register_with_aadhaar(server.data.valid_aadhaar[0], clock=clock)
    assert reg.resends_left == 2 and reg.resend_available_in() == 60
    with pytest.raises(E.ResendTooSoon) as soon:
        await reg.resend_otp()
    assert soon.value.retry_after == 60 and server.calls("aadhaar_resend") == 0
    clock.advance(60)
    await reg.resend_otp()
    assert server.calls("aadhaar_resend") == 1 and reg.hint and reg.resends_left == 1
    clock.advance(45)
    with pytest.raises(E.ResendTooSoon) as soon:
        await reg.resend_otp()
    assert soon.value.retry_after == 15
    clock.advance(15)
    await reg.resend_otp()
    clock.advance(3600)
    with pytest.raises(E.ResendTooSoon, match="no more resends") as spent:
        await reg.resend_otp()
    assert spent.value.retry_after is None and reg.resend_available_in() is None
    assert server.calls("aadhaar_resend") == 2 and server.abha.step_of(reg.to_state()["txn_id"]) == "otp"
    # the newest OTP works: never locked out
    step = await reg.verify_otp(otp_of(server, reg), mobile=server.abha.linked_mobile(server.data.valid_aadhaar[0]))
    assert step is FlowStep.CREATE_ADDRESS


async def test_resend_limits_are_settable(server: FakeHealthServer, client: ha.HealthClient, clock: Clock) -> None:
    reg = await client.abha.register_with_mobile(OTHER_MOBILE, resend_interval=0, max_resends=1, clock=clock)
    await reg.resend_otp()
    with pytest.raises(E.ResendTooSoon):
        await reg.resend_otp()
    assert server.calls("mobile_resend") == 1
    with pytest.raises(E.InvalidRequest, match="max_resends"):
        await client.abha.register_with_mobile(OTHER_MOBILE, max_resends=-1)
    for interval in (float("nan"), 10**400):  # 10**400: too large for a float, a typed error all the same
        with pytest.raises(E.InvalidRequest, match="resend_interval"):
            await client.abha.register_with_mobile(OTHER_MOBILE, resend_interval=interval)
    assert server.calls("mobile_init") == 1


async def test_a_resend_with_an_unknown_outcome_counts_and_asks_the_caller(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    reg = await client.abha.register_with_mobile(OTHER_MOBILE, clock=clock)
    clock.advance(60)
    server.inject("mobile_resend", Fault(status=503, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await reg.resend_otp()
    assert server.calls("mobile_resend") == 1  # never repeated
    assert at(reg) is FlowStep.VERIFY_OTP and reg.send_outcome_unknown and reg.resends_left == 1
    with pytest.raises(E.ResendTooSoon):
        await reg.resend_otp()  # counted as a send: the interval starts again
    assert reg.to_state()["send_outcome_unknown"] is True
    await reg.verify_otp(otp_of(server, reg))  # the OTP that did arrive
    assert at(reg) is FlowStep.CREATE_ADDRESS


async def test_an_otp_send_with_an_unknown_outcome_leaves_no_flow(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.inject("mobile_init", Fault(drop=True, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await client.abha.register_with_mobile(OTHER_MOBILE)
    assert server.calls("mobile_init") == 1


async def test_calls_out_of_step_send_nothing_and_name_the_step(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    reg = await client.abha.register_with_aadhaar(server.data.valid_aadhaar[0])
    before = len(server.requests)
    calls: list[Callable[[], Any]] = [
        lambda: reg.create("meera.iyer@sbx"),
        lambda: reg.choose("asha.verma@sbx"),
        lambda: reg.verify_mobile_otp("123456"),
        lambda: reg.suggest_addresses(),
    ]
    for call in calls:
        with pytest.raises(E.InvalidFlowStep) as info:
            await call()
        assert "VERIFY_OTP" in str(info.value) and "verify_otp" in str(info.value)
        assert isinstance(info.value, E.InvalidRequest)
    with pytest.raises(E.InvalidRequest, match="mobile"):
        await reg.verify_otp(otp_of(server, reg))  # an Aadhaar registration needs the mobile to link
    with pytest.raises(E.InvalidOtp):
        await reg.verify_otp("12345", mobile=OTHER_MOBILE)
    assert len(server.requests) == before and at(reg) is FlowStep.VERIFY_OTP


async def test_one_call_at_a_time(server: FakeHealthServer, client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(OTHER_MOBILE)
    server.inject("mobile_verify", Fault(latency=0.05, times=1))
    otp = otp_of(server, reg)
    results = await asyncio.gather(reg.verify_otp(otp), reg.verify_otp(otp), return_exceptions=True)
    assert results[0] is FlowStep.CREATE_ADDRESS
    assert isinstance(results[1], E.InvalidFlowStep) and "in flight" in str(results[1])
    assert server.calls("mobile_verify") == 1


# ----------------------------------------------------------------------------------- a create whose answer was lost


async def _at_create(server: FakeHealthServer, client: ha.HealthClient) -> AadhaarRegistration:
    aadhaar = server.data.valid_aadhaar[0]
    reg = await client.abha.register_with_aadhaar(aadhaar)
    await reg.verify_otp(otp_of(server, reg), mobile=server.abha.linked_mobile(aadhaar))
    return reg


async def test_a_lost_create_that_took_effect_is_never_sent_again(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    reg = await _at_create(server, client)
    server.inject("aadhaar_create", Fault(status=503, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await reg.create("meera.iyer@sbx")
    assert at(reg) is FlowStep.CREATE_ADDRESS and reg.create_outcome_unknown
    server.abha.add_account("meera.iyer")  # as if the service had created it before the answer was lost
    with pytest.raises(AccountLikelyCreated) as info:
        await reg.create("another.name@sbx")  # whatever address: the lost one is checked first
    assert isinstance(info.value, E.OutcomeUnknown) and info.value.abha_address == "meera.iyer@sbx"
    assert "meera" not in str(info.value) and "log in" in str(info.value).lower()
    assert at(reg) is FlowStep.LOG_IN
    assert server.calls("aadhaar_create") == 1 and server.calls("address_exists") == 1
    with pytest.raises(E.InvalidFlowStep, match="LOG_IN"):
        await reg.create("meera.iyer@sbx")
    assert server.calls("aadhaar_create") == 1


async def test_a_lost_create_that_did_not_take_effect_is_checked_then_sent(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    reg = await _at_create(server, client)
    server.inject("aadhaar_create", Fault(status=503, times=1))
    with pytest.raises(E.OutcomeUnknown):
        await reg.create("meera.iyer@sbx")
    state = reg.to_state()
    assert state["pending_create"] == "meera.iyer@sbx"
    async with client_for(server) as other:  # even on another worker
        again = other.abha.resume(state)
        account = await again.create("meera.iyer@sbx")
    assert account.created and at(again) is FlowStep.DONE and not again.create_outcome_unknown
    assert routes(server)[-2:] == ["address_exists", "aadhaar_create"]
    assert server.calls("aadhaar_create") == 2


async def test_a_taken_address_keeps_the_step(server: FakeHealthServer, client: ha.HealthClient) -> None:
    reg = await _at_create(server, client)
    with pytest.raises(E.AbhaError) as info:
        await reg.create("asha.verma@sbx")
    assert info.value.source_code == "ABDM-1101" and at(reg) is FlowStep.CREATE_ADDRESS
    assert (await reg.create("meera.iyer@sbx")).created


# ----------------------------------------------------------------------------------- state, resume, secrets


async def test_state_resumes_across_clients_and_holds_no_otp(server: FakeHealthServer, clock: Clock) -> None:
    aadhaar = server.data.valid_aadhaar[1]
    async with client_for(server, user_id="oid-1") as first:
        reg = await first.abha.register_with_aadhaar(aadhaar, clock=clock, user_id=None, partner_hip_id="hip-3")
        otp = otp_of(server, reg)
        state = json.loads(json.dumps(reg.to_state()))  # plain JSON, as a session store keeps it
    assert state["step"] == "verify_otp" and state["otp_sent_at"] == clock.now and state["resends"] == 0
    async with client_for(server) as second:
        reg2 = second.abha.resume(state, clock=clock)
        assert isinstance(reg2, AadhaarRegistration) and at(reg2) is FlowStep.VERIFY_OTP
        await reg2.verify_otp(otp, mobile=OTHER_MOBILE)
        mobile_otp = otp_of(server, reg2)
        state2 = json.loads(json.dumps(reg2.to_state()))
    async with client_for(server) as third:
        reg3 = third.abha.resume(state2, clock=clock)
        assert at(reg3) is FlowStep.VERIFY_MOBILE_OTP
        clock.advance(30)
        with pytest.raises(E.ResendTooSoon):  # the send time travelled with the state
            await reg3.resend_otp()
        await reg3.verify_mobile_otp(mobile_otp)
        account = await reg3.create("kavya.reddy@sbx")
        final = reg3.to_state()
    assert account.created
    for rec in server.requests:  # the flow's header options travelled too
        assert "X-Pt-Id" not in rec.headers and rec.headers.get("X-Hip-Id") == "hip-3"
    for saved in (state, state2, final):
        text = json.dumps(saved)
        assert "otp" not in {k.lower() for k in saved}
        for secret in (otp, mobile_otp, aadhaar, OTHER_MOBILE, account.token or "-", account.refresh_token or "-"):
            assert secret not in text
    assert final["step"] == "done" and final["revision"] > state2["revision"] > state["revision"]


FlowStart = Callable[[ha.HealthClient, FakeHealthServer], Any]

# An option a flow does not take (a misspelled header, or a per-call option the flow cannot keep in its state).
NOT_FLOW_OPTIONS: list[tuple[str, str, str, FlowStart]] = [
    (
        "register_with_aadhaar",
        "aadhaar_init",
        "userid",
        lambda c, s: c.abha.register_with_aadhaar(s.data.valid_aadhaar[0], userid="oid-2"),  # type: ignore[call-arg]
    ),
    (
        "register_with_mobile",
        "mobile_init",
        "retry",
        lambda c, s: c.abha.register_with_mobile(OTHER_MOBILE, retry=NO_WAIT),  # type: ignore[call-arg]
    ),
    (
        "login",
        "login_init",
        "timeout",
        lambda c, s: c.abha.login("mobile", SEEDED_MOBILE, timeout=5.0),  # type: ignore[call-arg]
    ),
    (
        "kyc",
        "kyc_init",
        "partner_hip",
        lambda c, s: c.abha.kyc("aadhaar", s.data.valid_aadhaar[0], partner_hip="hip-3"),  # type: ignore[call-arg]
    ),
    (
        "session",
        "session_init",
        "retry",
        lambda c, s: c.abha.session("asha.verma@sbx", retry=NO_WAIT),  # type: ignore[call-arg]
    ),
]


@pytest.mark.parametrize(
    ("method", "operation", "key", "start"), NOT_FLOW_OPTIONS, ids=[m for m, *_ in NOT_FLOW_OPTIONS]
)
async def test_a_flow_refuses_an_unknown_option_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, method: str, operation: str, key: str, start: FlowStart
) -> None:
    with pytest.raises(TypeError, match=rf"\.{method}\(\) got an unexpected keyword argument '{key}'$") as info:
        await start(client, server)
    assert not isinstance(info.value, E.HealthError)
    assert server.requests == [] and server.calls(operation) == 0


async def test_a_flow_started_with_its_options_round_trips_through_its_state(server: FakeHealthServer) -> None:
    async with client_for(server, user_id="oid-1") as first:
        reg = await first.abha.register_with_mobile(
            OTHER_MOBILE, user_id=None, partner_user_id="partner-2", partner_hip_id="hip-3", encrypt=False
        )
        state = json.loads(json.dumps(reg.to_state()))
    assert state["headers"] == {"user_id": None, "partner_user_id": "partner-2", "partner_hip_id": "hip-3"}
    assert state["encrypt"] is False
    async with client_for(server) as second:
        again = second.abha.resume(state)
        assert again.to_state() == state
        sealed = second.abha.resume(again.to_state(seal=SEAL_KEY), seal=SEAL_KEY)
        assert sealed.to_state() == state
        assert await sealed.verify_otp(otp_of(server, sealed)) is FlowStep.CREATE_ADDRESS
    assert routes(server) == ["mobile_init", "mobile_verify"]
    for rec in server.requests:  # the options kept in the state apply after the resume
        assert "X-Pt-Id" not in rec.headers and "X-Encryption" not in rec.headers
        assert (rec.headers["X-Partner-Pt-Id"], rec.headers["X-Hip-Id"]) == ("partner-2", "hip-3")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"version": 99}, "state.version"),
        ({"kind": "face_auth"}, "state.kind"),
        ({"step": "nowhere"}, "state.step"),
        ({"txn_id": "has space"}, "txn_id"),
        ({"txn_id": None}, "state.txn_id"),
        ({"resends": -1}, "state.resends"),
        ({"resends": True}, "state.resends"),
        ({"otp_sent_at": "yesterday"}, "state.otp_sent_at"),
        ({"accounts": [{"name": "x"}]}, "state.accounts"),
        ({"choose_via": "magic"}, "state.choose_via"),
        ({"headers": {"authorization": "secret-value"}}, "state.headers"),
        ({"max_resends": -5}, "max_resends"),
    ],
)
async def test_a_bad_state_is_refused_naming_the_field(
    server: FakeHealthServer, client: ha.HealthClient, change: dict[str, Any], field: str
) -> None:
    reg = await client.abha.register_with_mobile(OTHER_MOBILE)
    state = {**reg.to_state(), **change}
    with pytest.raises(E.InvalidRequest) as info:
        client.abha.resume(state)
    assert field in str(info.value)
    for value in change.values():
        if isinstance(value, str) and len(value) > 4:
            assert value not in str(info.value)
    with pytest.raises(E.InvalidRequest, match=r"^state must be"):
        client.abha.resume([])  # type: ignore[arg-type]


async def test_reprs_and_messages_hide_secrets(server: FakeHealthServer, client: ha.HealthClient) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    reg = await client.abha.register_with_aadhaar(aadhaar)
    txn_id = reg.to_state()["txn_id"]
    assert repr(reg) == "AadhaarRegistration(next_step=VERIFY_OTP)"
    with pytest.raises(E.InvalidFlowStep) as info:
        await reg.create("meera.iyer@sbx")
    await reg.verify_otp(otp_of(server, reg), mobile=server.abha.linked_mobile(aadhaar))
    account = await reg.create("meera.iyer@sbx")
    text = " ".join([repr(reg), repr(account), str(reg), str(info.value), repr(info.value)])
    assert repr(reg) == "AadhaarRegistration(next_step=DONE)"
    for secret in (txn_id, "meera", account.token or "-", account.refresh_token or "-", aadhaar, aadhaar[-4:]):
        assert secret not in text, secret
    assert (account.abha_number or "")[-4:] not in repr(account)
    assert repr(account).startswith("AbhaAccount(created=True")


# ----------------------------------------------------------------------------------- the CLI


class FakePrompt:
    """Answers questions by their text; records each question and whether it was asked without echo."""

    def __init__(self, server: FakeHealthServer, answers: list[tuple[str, str | Callable[[], str]]]) -> None:
        self.server = server
        self.answers = list(answers)
        self.asked: list[tuple[str, bool]] = []

    def __call__(self, question: str, *, secret: bool = False) -> str:
        self.asked.append((question, secret))
        assert self.answers, f"unexpected question: {question}"
        expected, answer = self.answers.pop(0)
        assert expected in question, (expected, question)
        return answer() if callable(answer) else answer

    def otp(self, *, wrong_one: bool = False) -> Callable[[], str]:
        def read() -> str:
            # the fake has no public "latest transaction": the newest one is the flow's
            otp = self.server.abha.last_otp()
            return wrong(otp) if wrong_one else otp

        return read


def _args(argv: list[str]) -> Any:
    return cli.build_parser().parse_args(argv)


async def test_cli_register_with_aadhaar(
    server: FakeHealthServer, client: ha.HealthClient, capsys: pytest.CaptureFixture[str]
) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    prompt = FakePrompt(server, [])
    prompt.answers = [
        ("Aadhaar number", aadhaar[:-1] + str((int(aadhaar[-1]) + 1) % 10)),  # a typo: the rule is named
        ("Aadhaar number", aadhaar),
        ("Mobile number", server.abha.linked_mobile(aadhaar)),
        ("OTP", prompt.otp(wrong_one=True)),
        ("OTP", prompt.otp()),
        ("New ABHA address", "asha.verma"),  # taken
        ("New ABHA address", ""),  # Enter: the first free suggestion
    ]
    err = io.StringIO()
    code = await abha_cli.run_register(client, _args(["abha", "register", "--aadhaar"]), prompt=prompt, err=err)
    out = capsys.readouterr().out
    assert code == 0, err.getvalue()
    result = orjson.loads(out)
    assert result["created"] is True and result["kyc_verified"] is True and result["oid"]
    assert result["abha_number"].startswith("xx-xxxx-xxxx-") and "token" not in out
    messages = err.getvalue()
    assert "Verhoeff" in messages and "******" in messages  # the rule, and the masked hint
    assert "not right" in messages and "taken" in messages and "Done: ABHA address" in messages
    assert aadhaar not in messages + out
    secret = {q.split(" (")[0]: s for q, s in prompt.asked}
    assert secret["Aadhaar number"] and secret["Mobile number to link to the ABHA"] and secret["OTP"]
    assert not secret["New ABHA address, e.g. name.surname@abdm"]


async def test_cli_register_with_another_mobile_and_a_resend(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    async with client_for(server) as client:
        prompt = FakePrompt(server, [])
        prompt.answers = [
            ("Aadhaar number", server.data.valid_aadhaar[1]),
            ("Mobile number", OTHER_MOBILE),
            ("OTP", prompt.otp()),
            ("new mobile number", ""),  # Enter: resend, refused locally (too soon)
            ("new mobile number", prompt.otp()),
            ("New ABHA address", "kavya.reddy@sbx"),
        ]
        err = io.StringIO()
        code = await abha_cli.run_register(client, _args(["abha", "register", "--aadhaar"]), prompt=prompt, err=err)
    assert code == 0, err.getvalue()
    assert "not the one linked to the Aadhaar" in err.getvalue() and "Too soon" in err.getvalue()
    assert server.calls("aadhaar_mobile_resend") == 0
    assert orjson.loads(capsys.readouterr().out)["abha_address"] == "kavya.reddy@sbx"


async def test_cli_register_with_a_mobile(
    server: FakeHealthServer, client: ha.HealthClient, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt = FakePrompt(server, [])
    prompt.answers = [
        ("Mobile number", "+91 81234 56789"),
        ("OTP", prompt.otp()),
        ("First name", "Meera"),
        ("Last name", ""),
        ("Gender", "f"),
        ("Date of birth", "04/03/1992"),  # wrong format: asked again
        ("Date of birth", "1992-03-04"),
        ("PIN code", "060001"),  # breaks the profile's rule: the details are asked again
        ("First name", "Meera"),
        ("Last name", "Iyer"),
        ("Gender", "F"),
        ("Date of birth", "1992-03-04"),
        ("PIN code", "560001"),
        ("New ABHA address", "meera_k92@sbx"),
    ]
    err = io.StringIO()
    code = await abha_cli.run_register(client, _args(["abha", "register", "--mobile"]), prompt=prompt, err=err)
    assert code == 0, err.getvalue()
    assert "YYYY-MM-DD" in err.getvalue() and "PIN code" in err.getvalue()
    result = orjson.loads(capsys.readouterr().out)
    assert result == {"abha_address": "meera_k92@sbx", "abha_number": None, "created": True, "kyc_verified": False,
                      "oid": server.abha.accounts["meera_k92"].oid}  # fmt: skip
    assert server.abha.accounts["meera_k92"].last_name == "Iyer"


async def test_cli_login_by_mobile_chooses_one(
    server: FakeHealthServer, client: ha.HealthClient, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt = FakePrompt(server, [])
    prompt.answers = [("Mobile number", SEEDED_MOBILE), ("OTP", prompt.otp()), ("Which one", "3"), ("Which one", "2")]
    err = io.StringIO()
    code = await abha_cli.run_login(client, _args(["abha", "login", "--method", "mobile"]), prompt=prompt, err=err)
    assert code == 0, err.getvalue()
    result = orjson.loads(capsys.readouterr().out)
    assert result["created"] is False and result["abha_address"].startswith("ravi")
    assert "from 1 to 2" in err.getvalue() and prompt.asked[0][1] is True  # the mobile typed without echo


async def test_cli_errors_are_one_line(
    server: FakeHealthServer, client: ha.HealthClient, capsys: pytest.CaptureFixture[str]
) -> None:
    server.abha.block(OTHER_MOBILE)
    prompt = FakePrompt(server, [("Mobile number", OTHER_MOBILE)])
    err = io.StringIO()
    code = await abha_cli.run_register(client, _args(["abha", "register", "--mobile"]), prompt=prompt, err=err)
    assert code == 1 and capsys.readouterr().out == ""
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("abha register: AbhaBlocked:") and "24 hours" in lines[0]
    assert OTHER_MOBILE not in err.getvalue()


async def test_cli_ctrl_c_at_a_prompt_is_a_clean_130(
    server: FakeHealthServer, client: ha.HealthClient, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(question: str, *, secret: bool = False) -> str:
        if "OTP" in question:
            raise KeyboardInterrupt
        return "asha.verma@sbx"

    err = io.StringIO()
    code = await abha_cli.run_login(client, _args(["abha", "login"]), prompt=interrupted, err=err)
    assert code == 130 and "cancelled" in err.getvalue() and capsys.readouterr().out == ""
    assert server.calls("login_verify") == 0


def test_cli_main_register_and_ctrl_c(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread(documents_per_user=1) as srv:
        for name, value in (
            ("BASE_URL", srv.url),
            ("TOKEN", srv.token),
            ("CLIENT_ID", srv.client_id),
        ):
            monkeypatch.setenv(f"HEALTH_ASYNC_{name}", value)
        prompt = FakePrompt(srv, [])
        prompt.answers = [("ABHA address", "asha.verma@sbx"), ("OTP", prompt.otp())]
        monkeypatch.setattr(abha_cli, "PROMPT", prompt)
        assert cli.main(["abha", "login"]) == 0
        out, err = capsys.readouterr()
        assert orjson.loads(out)["abha_address"] == "asha.verma@sbx" and "logged in" in err

        def ctrl_c(question: str, *, secret: bool = False) -> str:
            raise KeyboardInterrupt

        monkeypatch.setattr(abha_cli, "PROMPT", ctrl_c)
        assert cli.main(["abha", "register", "--aadhaar"]) == 130
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err and "cancelled" in err


def test_cli_a_real_ctrl_c_at_the_otp_prompt_sends_no_verify(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under ``asyncio.run`` a first Ctrl-C does not interrupt a blocking prompt (the prompt goes on and returns
    what was typed); the command must still stop before it sends that OTP."""
    with ServerThread(documents_per_user=1) as srv:
        for name, value in (("BASE_URL", srv.url), ("TOKEN", srv.token), ("CLIENT_ID", srv.client_id)):
            monkeypatch.setenv(f"HEALTH_ASYNC_{name}", value)
        prompt = FakePrompt(srv, [])
        otp = prompt.otp()

        def at_the_otp_sigint(question: str, *, secret: bool = False) -> str:
            if "OTP" in question:
                signal.raise_signal(signal.SIGINT)
                return otp() if callable(otp) else otp
            return "asha.verma@sbx"

        monkeypatch.setattr(abha_cli, "PROMPT", at_the_otp_sigint)
        assert cli.main(["abha", "login"]) == 130
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err and "cancelled" in err
        assert srv.calls("login_init") == 1 and srv.calls("login_verify") == 0


def test_cli_help() -> None:
    for argv in (["abha", "--help"], ["abha", "register", "--help"], ["abha", "login", "--help"]):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 0
    with pytest.raises(SystemExit) as info:
        cli.main(["abha", "register"])  # --aadhaar or --mobile
    assert info.value.code == 2


# ----------------------------------------------------------------------------------- the demo


async def test_demo_registers_and_logs_in_with_the_flows() -> None:
    out = io.StringIO()
    summary = await run_demo(documents=20, concurrency=4, out=out, progress=False)
    steps = {name: ok for name, ok, _, _ in summary.steps}
    assert steps["abha register (Aadhaar OTP) + login"] is True, out.getvalue()
    assert "then login -> DONE" in out.getvalue()


# ------------------------------------------------------------------------------ sealed states (for a cookie)
# to_state(seal=key) travels in a cookie, resume(state, seal=key) opens it, and a changed, foreign or expired one is
# a typed error that shows neither the state nor the key.

SEAL_KEY = bytes(range(32))
SEAL_MOBILE = "+91 81234 56789"


async def test_a_sealed_state_resumes_on_another_client_and_the_flow_ends(server: FakeHealthServer) -> None:
    async with client_for(server) as first:
        reg = await first.abha.register_with_mobile(SEAL_MOBILE)
        txn_id = reg.to_state()["txn_id"]
        cookie = reg.to_state(seal=SEAL_KEY)
    assert isinstance(cookie, str) and cookie.isascii()
    assert all(c.isalnum() or c in "-_" for c in cookie)  # cookie-safe: URL-safe base64, no padding
    async with client_for(server) as second:  # another worker: nothing shared but the cookie and the key
        flow = second.abha.resume(cookie, seal=SEAL_KEY)
        assert flow.next_step is FlowStep.VERIFY_OTP
        assert await flow.verify_otp(server.abha.last_otp(txn_id)) is FlowStep.CREATE_ADDRESS
        again = second.abha.resume(flow.to_state(seal=SEAL_KEY), seal=SEAL_KEY)
        account = await again.create("meera_k92@sbx", profile=PROFILE)
    assert account.created and account.abha_address == "meera_k92@sbx"


async def test_the_sealed_state_hides_what_it_holds(client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(SEAL_MOBILE)
    state = reg.to_state()
    cookie = reg.to_state(seal=SEAL_KEY)
    raw = pybase64.b64decode(cookie + "=" * (-len(cookie) % 4), altchars=b"-_")
    for secret in (state["txn_id"], state["hint"], "mobile_registration", "txn_id"):
        assert secret.encode() not in raw and secret not in cookie
    assert reg.to_state(seal=SEAL_KEY) != cookie  # a fresh nonce each time


async def test_any_changed_byte_or_another_key_is_refused(client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(SEAL_MOBILE)
    cookie = reg.to_state(seal=SEAL_KEY)
    raw = bytearray(pybase64.b64decode(cookie + "=" * (-len(cookie) % 4), altchars=b"-_"))
    for index in range(0, len(raw), 7):
        changed = bytearray(raw)
        changed[index] ^= 0x01
        token = pybase64.urlsafe_b64encode(bytes(changed)).rstrip(b"=").decode()
        with pytest.raises(FlowStateInvalid) as info:
            client.abha.resume(token, seal=SEAL_KEY)
        assert token not in str(info.value)
    for bad in (cookie[:-4], cookie[:10], "", "not*base64", cookie + "AAAA"):
        with pytest.raises(FlowStateInvalid):
            client.abha.resume(bad, seal=SEAL_KEY)
    with pytest.raises(FlowStateInvalid) as info:
        client.abha.resume(cookie, seal=os.urandom(32))
    assert SEAL_KEY.hex() not in str(info.value) and cookie not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no cryptography exception shows


async def test_a_sealed_state_expires(server: FakeHealthServer) -> None:
    clock = Clock()
    async with client_for(server) as client:
        reg = await client.abha.register_with_mobile(SEAL_MOBILE, clock=clock)
        cookie = reg.to_state(seal=SEAL_KEY, max_age=60)
        clock.advance(59)
        assert client.abha.resume(cookie, seal=SEAL_KEY, clock=clock).next_step is FlowStep.VERIFY_OTP
        clock.advance(1)
        with pytest.raises(FlowStateExpired):
            client.abha.resume(cookie, seal=SEAL_KEY, clock=clock)
        default = reg.to_state(seal=SEAL_KEY)  # 30 minutes by default
        clock.advance(1799)
        client.abha.resume(default, seal=SEAL_KEY, clock=clock)
        clock.advance(1)
        with pytest.raises(FlowStateExpired):
            client.abha.resume(default, seal=SEAL_KEY, clock=clock)
    assert issubclass(FlowStateExpired, FlowStateInvalid) and issubclass(FlowStateInvalid, InvalidRequest)


async def test_the_key_and_the_forms_are_checked_before_anything(client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(SEAL_MOBILE)
    for key in (b"short", b"x" * 33, "a" * 32):
        with pytest.raises(InvalidRequest, match="seal must be"):
            reg.to_state(seal=key)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="max_age"):
        reg.to_state(seal=SEAL_KEY, max_age=0)
    cookie = reg.to_state(seal=SEAL_KEY)
    with pytest.raises(InvalidRequest, match="needs seal=key"):
        client.abha.resume(cookie)
    with pytest.raises(InvalidRequest, match="with seal=, state must be the str"):
        client.abha.resume(reg.to_state(), seal=SEAL_KEY)
    with pytest.raises(InvalidRequest, match="seal must be"):
        client.abha.resume(cookie, seal=b"short")


@pytest.mark.parametrize("reading", [math.nan, math.inf, -math.inf])
async def test_a_clock_giving_no_finite_time_never_opens_nor_seals_a_state(
    client: ha.HealthClient, reading: float
) -> None:
    reg = await client.abha.register_with_mobile(SEAL_MOBILE)
    cookie = reg.to_state(seal=SEAL_KEY)
    odd = Clock()
    odd.now = reading
    with pytest.raises(FlowStateExpired, match="no finite time"):  # -inf is before every expiry: still refused
        client.abha.resume(cookie, seal=SEAL_KEY, clock=odd)
    clock = Clock()
    flow = client.abha.resume(cookie, seal=SEAL_KEY, clock=clock)
    clock.now = reading
    with pytest.raises(InvalidRequest, match="finite"):
        flow.to_state(seal=SEAL_KEY)


async def test_a_fractional_max_age_is_exact_to_the_sub_second(server: FakeHealthServer) -> None:
    clock = Clock()
    async with client_for(server) as client:
        reg = await client.abha.register_with_mobile(SEAL_MOBILE, clock=clock)
        sealed_at = clock.now
        cookie = reg.to_state(seal=SEAL_KEY, max_age=1.5)
        clock.now = sealed_at + 1.4
        assert client.abha.resume(cookie, seal=SEAL_KEY, clock=clock).next_step is FlowStep.VERIFY_OTP
        clock.now = sealed_at + 1.6
        with pytest.raises(FlowStateExpired, match="has expired"):
            client.abha.resume(cookie, seal=SEAL_KEY, clock=clock)
        clock.now = sealed_at + 0.5  # and not stretched either: a state sealed at x.5 s with max_age=1
        half = reg.to_state(seal=SEAL_KEY, max_age=1)
        clock.now = sealed_at + 1.45
        client.abha.resume(half, seal=SEAL_KEY, clock=clock)
        clock.now = sealed_at + 1.55
        with pytest.raises(FlowStateExpired):
            client.abha.resume(half, seal=SEAL_KEY, clock=clock)


def test_a_state_sealed_by_the_previous_format_still_opens_until_its_whole_second_expiry() -> None:
    # version 1 (the release before): whole seconds, rounded down; a cookie made then keeps working after an upgrade
    head, nonce = b"\x01", os.urandom(12)
    body = AESGCM(SEAL_KEY).encrypt(nonce, struct.pack(">qq", 1000, 1001) + b"payload", head + b"purpose")
    token = pybase64.urlsafe_b64encode(head + nonce + body).rstrip(b"=").decode()
    assert _seal.open_sealed(token, SEAL_KEY, purpose=b"purpose", now=1000.9) == b"payload"
    with pytest.raises(FlowStateExpired):
        _seal.open_sealed(token, SEAL_KEY, purpose=b"purpose", now=1001.0)
    for other in (b"\x00", b"\x03"):  # an unknown version never opens, even with the right key
        body = AESGCM(SEAL_KEY).encrypt(nonce, struct.pack(">dd", 1000, 2000) + b"payload", other + b"purpose")
        token = pybase64.urlsafe_b64encode(other + nonce + body).rstrip(b"=").decode()
        with pytest.raises(FlowStateInvalid, match="unknown version"):
            _seal.open_sealed(token, SEAL_KEY, purpose=b"purpose", now=1000.0)


async def _cancelled_in_flight(server: FakeHealthServer, route: str, call: Awaitable[Any]) -> None:
    """``call`` cancelled once its request reached the server (held there by a latency fault)."""
    server.inject(route, Fault(latency=0.5, times=1))
    task = asyncio.ensure_future(call)
    while server.calls(route) == 0:  # noqa: ASYNC110 - the fake server counts calls, it has no event for them
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_create_cancelled_in_flight_is_of_unknown_outcome_and_checked_before_it_is_sent_again(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    reg = await _at_create(server, client)
    await _cancelled_in_flight(server, "aadhaar_create", reg.create("meera.iyer@sbx"))
    assert reg.create_outcome_unknown and reg.to_state()["pending_create"] == "meera.iyer@sbx"
    account = await reg.create("meera.iyer@sbx")  # the lost one is looked for first, then sent
    assert account.created and routes(server)[-2:] == ["address_exists", "aadhaar_create"]


async def test_a_resend_cancelled_in_flight_counts_as_sent(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    reg = await client.abha.register_with_aadhaar(server.data.valid_aadhaar[0], clock=clock)
    clock.advance(60)
    await _cancelled_in_flight(server, "aadhaar_resend", reg.resend_otp())
    assert reg.resends_left == 1  # the OTP may have gone out: counted
    with pytest.raises(E.ResendTooSoon):  # and the interval runs from it
        await reg.resend_otp()
    assert server.calls("aadhaar_resend") == 1


async def test_a_sealed_state_has_one_spelling_and_a_key_is_counted_in_bytes(client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(SEAL_MOBILE)
    cookie = reg.to_state(seal=SEAL_KEY)
    assert isinstance(cookie, str) and client.abha.resume(cookie, seal=SEAL_KEY).next_step is reg.next_step
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    respelt = [cookie + "=", *(cookie[:-1] + c for c in alphabet if c != cookie[-1])]
    opened = []
    for token in respelt:  # the same bytes another way (unused low bits, padding) or other bytes: never opens
        try:
            client.abha.resume(token, seal=SEAL_KEY)
            opened.append(token)
        except (FlowStateInvalid, FlowStateExpired):
            pass
    assert opened == []
    wide = memoryview(array.array("I", range(4)))  # 4 items, 16 bytes: a 16-byte key
    assert len(wide) == 4 and isinstance(reg.to_state(seal=wide), str)  # type: ignore[call-overload]
    with pytest.raises(InvalidRequest, match="16, 24 or 32-byte"):
        reg.to_state(seal=memoryview(array.array("I", range(24))))  # type: ignore[call-overload]  # 96 bytes
