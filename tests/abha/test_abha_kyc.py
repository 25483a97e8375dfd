"""The KYC upgrade (client.abha.kyc) and the user session (client.abha.session) against the fake server: on the ABHA
flow machinery (next_step, nothing sent out of step, resend limits, BLOCKED, state sealed and resumed elsewhere),
the same typed errors as every ABHA call, OTP steps never repeated, and the session token kept secret."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async.models import AbhaSessionToken, FlowStep, KycMethod, KycResult, KycStatus, SessionStatus
from health_async.resources import AbhaSession, KycUpgrade
from health_async.testing import FakeHealthServer, Fault

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
#: A retry policy that would repeat anything it is allowed to (the OTP steps must still go once).
EAGER = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0, retry_non_idempotent=True)
SEAL_KEY = bytes(range(32))
#: A mobile-only (not KYC-verified) ABHA address of the fake's seeded accounts.
ADDRESS = "ravi_kumar@sbx"
RATE_LIMITED = {"code": 500, "error": "Too many", "source_error": {"code": "ABDM-1022", "message": "Too many requests"}}


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


def oid_of(server: FakeHealthServer) -> str:
    return server.abha.accounts["ravi_kumar"].oid


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {
        "token": server.token,
        "client_id": server.client_id,
        "user_id": oid_of(server),
        "retry": NO_WAIT,
    }
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server) as c:
        yield c


@pytest.fixture
def clock() -> Clock:
    return Clock()


def at(flow: Any) -> FlowStep:
    """The flow's next step (read through a function: a property narrowed once stays narrowed for mypy)."""
    step: FlowStep = flow.next_step
    return step


def result_of(kyc: KycUpgrade) -> KycResult | None:
    """The KYC's result (read through a function, as :func:`at`)."""
    return kyc.result


def token_of(flow: Any) -> AbhaSessionToken | None:
    """A session's token (read through a function, as :func:`at`)."""
    token: AbhaSessionToken | None = flow.token
    return token


def otp_of(server: FakeHealthServer, flow: Any) -> str:
    return server.abha_kyc.last_otp(flow.to_state()["txn_id"])


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


def routes(server: FakeHealthServer) -> list[str]:
    return [r.route for r in server.requests]


def body_of(server: FakeHealthServer, route: str) -> Any:
    return [r for r in server.requests if r.route == route][-1].json


async def open_session(server: FakeHealthServer, client: ha.HealthClient) -> AbhaSessionToken:
    session = await client.abha.session(ADDRESS)
    await session.verify_otp(otp_of(server, session))
    assert session.token is not None
    return session.token


# ----------------------------------------------------------------------------------- the KYC upgrade


async def test_a_full_kyc_a_wrong_otp_then_the_right_one(server: FakeHealthServer, client: ha.HealthClient) -> None:
    before = await client.abha.session_status()
    assert before.kyc_status is KycStatus.NOT_VERIFIED and before.logged_in is False
    aadhaar = server.data.valid_aadhaar[0]
    kyc = await client.abha.kyc("aadhaar", aadhaar[:4] + " " + aadhaar[4:8] + " " + aadhaar[8:])
    assert isinstance(kyc, KycUpgrade) and at(kyc) is FlowStep.VERIFY_OTP and kyc.kyc_method is KycMethod.AADHAAR
    assert body_of(server, "kyc_init") == {"method": "aadhaar", "identifier": aadhaar}  # digits, no token
    otp = otp_of(server, kyc)
    with pytest.raises(E.OtpMismatch) as info:
        await kyc.verify_otp(wrong(otp))
    assert info.value.source_code == "MIS-1013" and info.value.operation == "kyc_verify"
    assert at(kyc) is FlowStep.VERIFY_OTP and result_of(kyc) is None
    assert await kyc.verify_otp(otp) is FlowStep.DONE is kyc.next_step
    result = result_of(kyc)
    assert isinstance(result, KycResult) and result.status is KycStatus.VERIFIED and result.kyc_verified
    assert repr(result) == "KycResult(status=<KycStatus.VERIFIED: 'verified'>)"
    account = server.abha.accounts["ravi_kumar"]
    assert account.kyc_verified and account.aadhaar == aadhaar and account.abha_number
    after = await client.abha.session_status()
    assert isinstance(after, SessionStatus) and after.kyc_status is KycStatus.VERIFIED and after.kyc_verified is True
    assert routes(server) == ["session_status", "kyc_init", "kyc_verify", "kyc_verify", "session_status"]


async def test_a_kyc_by_abha_number(server: FakeHealthServer, client: ha.HealthClient) -> None:
    number = server.abha.accounts["asha.verma"].abha_number
    assert number is not None
    hyphenated = f"{number[:2]}-{number[2:6]}-{number[6:10]}-{number[10:]}"
    kyc = await client.abha.kyc(KycMethod.ABHA_NUMBER, hyphenated)
    assert body_of(server, "kyc_init") == {"method": "abha-number", "identifier": number}
    with pytest.raises(E.OtpMismatch) as info:  # an ABDM OTP, not UIDAI's
        await kyc.verify_otp(wrong(otp_of(server, kyc)))
    assert info.value.source_code == "ABDM-1035"
    await kyc.verify_otp(otp_of(server, kyc))
    assert server.abha.accounts["ravi_kumar"].abha_number == number and kyc.result is not None


async def test_resends_respect_the_interval_and_the_limit(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    kyc = await client.abha.kyc("aadhaar", server.data.valid_aadhaar[0], clock=clock)
    first = otp_of(server, kyc)
    assert kyc.resends_left == 2 and kyc.resend_available_in() == 60.0
    with pytest.raises(E.ResendTooSoon) as info:
        await kyc.resend_otp()
    assert info.value.retry_after == 60.0 and server.calls("kyc_resend") == 0
    clock.advance(60)
    await kyc.resend_otp()
    second = otp_of(server, kyc)
    assert second != first and kyc.resends_left == 1 and server.calls("kyc_resend") == 1
    clock.advance(59)
    with pytest.raises(E.ResendTooSoon):
        await kyc.resend_otp()
    clock.advance(1)
    await kyc.resend_otp()
    assert kyc.resends_left == 0 and kyc.resend_available_in() is None
    clock.advance(3600)
    with pytest.raises(E.ResendTooSoon) as info:
        await kyc.resend_otp()
    assert info.value.retry_after is None and server.calls("kyc_resend") == 2
    assert kyc.to_state()["resends"] == 2
    assert await kyc.verify_otp(otp_of(server, kyc)) is FlowStep.DONE


async def test_the_services_otp_limit_blocks_the_flow(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    kyc = await client.abha.kyc("aadhaar", server.data.valid_aadhaar[0], clock=clock, max_resends=9, resend_interval=0)
    for _ in range(server.abha_kyc.max_otp_sends - 1):
        await kyc.resend_otp()
    with pytest.raises(E.AbhaRateLimited) as info:  # ABDM-1100 with HTTP 500: a definite answer, not "unknown"
        await kyc.resend_otp()
    assert info.value.source_code == "ABDM-1100" and server.calls("kyc_resend") == server.abha_kyc.max_otp_sends
    assert at(kyc) is FlowStep.BLOCKED and kyc.blocked_until == clock.now + 30 * 60
    with pytest.raises(E.InvalidFlowStep, match="BLOCKED"):
        await kyc.verify_otp(otp_of(server, kyc))
    assert server.calls("kyc_verify") == 0


async def test_a_blocked_aadhaar_and_a_rate_limit_are_typed(
    server: FakeHealthServer, client: ha.HealthClient, clock: Clock
) -> None:
    server.abha.block(server.data.valid_aadhaar[0])
    with pytest.raises(E.AbhaBlocked) as blocked:
        await client.abha.kyc("aadhaar", server.data.valid_aadhaar[0])
    assert blocked.value.try_again_after == 24 * 3600 and server.calls("kyc_init") == 1
    session = await client.abha.session(ADDRESS, clock=clock)
    server.inject("session_verify", Fault(status=500, body=RATE_LIMITED, times=1))
    with pytest.raises(E.AbhaRateLimited) as limited:
        await session.verify_otp(otp_of(server, session))
    assert limited.value.operation == "session_verify" and server.calls("session_verify") == 1
    assert at(session) is FlowStep.BLOCKED and session.blocked_until == clock.now + 30 * 60


async def test_calls_out_of_step_and_bad_input_send_nothing(server: FakeHealthServer, client: ha.HealthClient) -> None:
    for method, identifier, error in (
        ("passport", "X1234567", E.InvalidRequest),
        ("aadhaar", "1234 5678 9012", E.InvalidAadhaarNumber),
        ("abha-number", "12-3456-7890", E.InvalidRequest),
    ):
        with pytest.raises(error) as info:
            await client.abha.kyc(method, identifier)
        assert identifier not in str(info.value)
    with pytest.raises(E.InvalidRequest, match="user_token"):
        await client.abha.kyc("aadhaar", server.data.valid_aadhaar[0], user_token="has space")
    with pytest.raises(E.InvalidAbhaAddress):
        await client.abha.session("not an address")
    assert server.calls("kyc_init") == server.calls("session_init") == 0

    kyc = await client.abha.kyc("aadhaar", server.data.valid_aadhaar[0])
    with pytest.raises(E.InvalidOtp):
        await kyc.verify_otp("12ab56")
    for call in (kyc.verify_mobile_otp("123456"), kyc.create("ravi.kumar90@sbx"), kyc.choose(ADDRESS)):
        with pytest.raises(E.InvalidFlowStep, match="VERIFY_OTP"):
            await call
    with pytest.raises(E.InvalidRequest, match="mobile="):
        await kyc.verify_otp(otp_of(server, kyc), mobile="9876543210")
    assert server.calls("kyc_verify") == 0
    await kyc.verify_otp(otp_of(server, kyc))
    for again in (kyc.verify_otp(otp_of(server, kyc)), kyc.resend_otp()):
        with pytest.raises(E.InvalidFlowStep, match="DONE and expects nothing more: the KYC is done"):
            await again
    assert server.calls("kyc_verify") == 1 and server.calls("kyc_resend") == 0

    session = await client.abha.session(ADDRESS)
    with pytest.raises(E.InvalidFlowStep, match="a user session has no OTP resend"):
        await session.resend_otp()
    await session.verify_otp(otp_of(server, session))
    with pytest.raises(E.InvalidFlowStep, match="the session is open"):
        await session.verify_otp(otp_of(server, session))
    assert server.calls("session_verify") == 1

    async with client_for(server, user_id=None) as anonymous:
        with pytest.raises(E.InvalidRequest, match="X-Pt-Id"):
            await anonymous.abha.session_status()
    assert server.calls("session_status") == 0


async def test_a_sealed_kyc_resumes_in_a_new_process_and_completes(server: FakeHealthServer) -> None:
    async with client_for(server) as first:
        token = (await open_session(server, first)).token
        kyc = await first.abha.kyc("aadhaar", server.data.valid_aadhaar[1], user_token=token)
        otp = otp_of(server, kyc)
        cookie = kyc.to_state(seal=SEAL_KEY)
        plain = kyc.to_state()
    assert token not in cookie and token not in json.dumps(plain) and plain["user_token_given"] is True
    assert body_of(server, "kyc_init")["user_x_token"] == token
    async with client_for(server) as second:  # another worker: nothing shared but the cookie and the key
        flow = second.abha.resume(cookie, seal=SEAL_KEY)
        assert isinstance(flow, KycUpgrade) and at(flow) is FlowStep.VERIFY_OTP
        assert await flow.verify_otp(otp) is FlowStep.DONE
    assert body_of(server, "kyc_verify")["user_x_token"] == token  # the token travelled, sealed
    assert server.abha.accounts["ravi_kumar"].kyc_verified


async def test_a_plain_state_never_holds_the_token_and_asks_for_it(server: FakeHealthServer) -> None:
    async with client_for(server) as first:
        token = (await open_session(server, first)).token
        kyc = await first.abha.kyc("aadhaar", server.data.valid_aadhaar[1], user_token=token)
        state = json.loads(json.dumps(kyc.to_state()))
    async with client_for(server) as second:
        flow = second.abha.resume(state)
        assert isinstance(flow, KycUpgrade)
        with pytest.raises(E.InvalidRequest, match="needs user_token="):
            await flow.verify_otp(otp_of(server, flow))
        assert server.calls("kyc_verify") == 0
        with pytest.raises(E.InvalidRequest, match="only ever in a sealed state"):
            second.abha.resume({**state, "secrets": {"user_token": token}})
        assert await flow.verify_otp(otp_of(server, flow), user_token=token) is FlowStep.DONE


async def test_a_verify_refused_while_another_is_in_flight_changes_nothing(server: FakeHealthServer) -> None:
    async with client_for(server) as client:
        token = (await open_session(server, client)).token
        kyc = await client.abha.kyc("aadhaar", server.data.valid_aadhaar[1], user_token=token)
        server.inject("kyc_verify", Fault(latency=0.2, times=1))
        first = asyncio.create_task(kyc.verify_otp(otp_of(server, kyc)))
        await asyncio.sleep(0.05)  # in flight
        with pytest.raises(E.InvalidFlowStep, match="in flight"):
            await kyc.verify_otp(otp_of(server, kyc), user_token="another-token")
        assert await first is FlowStep.DONE
    assert body_of(server, "kyc_verify")["user_x_token"] == token
    assert kyc._user_token == token  # the refused call did not replace the token the flow keeps (and seals)


# ----------------------------------------------------------------------------------- the user session


async def test_a_session_gives_a_token_that_stays_secret(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    session = await client.abha.session(ADDRESS)
    assert isinstance(session, AbhaSession) and at(session) is FlowStep.VERIFY_OTP and token_of(session) is None
    assert body_of(server, "session_init") == {"abha_address": ADDRESS}
    assert (await session.status()).logged_in is False
    with pytest.raises(E.OtpMismatch) as info:
        await session.verify_otp(wrong(otp_of(server, session)))
    assert info.value.source_code == "ABDM-1035" and at(session) is FlowStep.VERIFY_OTP
    assert await session.verify_otp(otp_of(server, session)) is FlowStep.DONE
    token = token_of(session)
    assert token is not None and token.refresh_token
    assert server.abha_kyc.sessions == {token.token: oid_of(server)}
    status = await session.status()
    assert status.logged_in is True and status.kyc_status is KycStatus.NOT_VERIFIED

    plain = session.to_state()
    shown = " ".join([repr(session), repr(token), repr(status), caplog.text])
    for secret in (token.token, token.refresh_token):
        assert secret not in shown and secret not in json.dumps(plain)
    assert plain["txn_id"] not in shown
    assert repr(token) == "AbhaSessionToken()" and repr(session) == "AbhaSession(next_step=DONE)"
    assert "secrets" not in plain
    async with client_for(server) as other:
        assert token_of(other.abha.resume(plain)) is None
        sealed = other.abha.resume(session.to_state(seal=SEAL_KEY), seal=SEAL_KEY)
        assert isinstance(sealed, AbhaSession) and sealed.token == token and at(sealed) is FlowStep.DONE

    server.abha_kyc.expire_sessions()
    assert (await client.abha.session_status()).logged_in is False


async def test_status_is_a_read_but_never_retried_on_abdms_500(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    server.inject("session_status", Fault(status=503, times=1))
    assert (await client.abha.session_status()).logged_in is False
    assert server.calls("session_status") == 2  # a read: retried
    server.inject("session_status", Fault(status=500, body=RATE_LIMITED, times=1))
    with pytest.raises(E.AbhaRateLimited) as info:
        await client.abha.session_status()
    assert info.value.operation == "session_status" and server.calls("session_status") == 3


# ----------------------------------------------------------------------------------- never repeated


@pytest.mark.parametrize("route", ["kyc_init", "kyc_resend", "kyc_verify", "session_init", "session_verify"])
async def test_an_otp_step_is_not_retried_on_a_5xx_whatever_the_policy(
    server: FakeHealthServer, clock: Clock, route: str
) -> None:
    async with client_for(server, retry=EAGER) as client:
        kyc = await client.abha.kyc("aadhaar", server.data.valid_aadhaar[0], clock=clock, resend_interval=0)
        session = await client.abha.session(ADDRESS, clock=clock)
        before = server.calls(route)
        server.inject(route, Fault(status=500, times=1))
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "kyc_init": lambda: client.abha.kyc("aadhaar", server.data.valid_aadhaar[0]),
            "kyc_resend": kyc.resend_otp,
            "kyc_verify": lambda: kyc.verify_otp(otp_of(server, kyc)),
            "session_init": lambda: client.abha.session(ADDRESS),
            "session_verify": lambda: session.verify_otp(otp_of(server, session)),
        }
        with pytest.raises(E.OutcomeUnknown) as info:
            await calls[route]()
        assert server.calls(route) == before + 1 and info.value.operation == route
        if route == "kyc_resend":  # counted as sent; the person is asked
            assert kyc.send_outcome_unknown and kyc.resends_left == 1
        if route == "kyc_verify":  # the flow stays; checking again is safe
            assert at(kyc) is FlowStep.VERIFY_OTP
            assert await kyc.verify_otp(otp_of(server, kyc)) is FlowStep.DONE
        if route == "session_verify":
            assert at(session) is FlowStep.VERIFY_OTP
            assert await session.verify_otp(otp_of(server, session)) is FlowStep.DONE and token_of(session)
