"""client.abha against the fake server: every endpoint and branch of milestone 1, error mapping, input rules (nothing
sent), the no-repeat rule for OTP, verify and create calls, and secrets kept out of reprs and messages."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async._wire import structure
from health_async.models import (
    AbhaProfile,
    AbhaStep,
    EkaIds,
    LoginMethod,
    LoginMethods,
    NewAbhaProfile,
    OtpSent,
    SkipState,
)
from health_async.models.abha import _registration as abha_models
from health_async.models.abha._registration import today_in_india
from health_async.resources.abha.abha import normalize_abha_address, normalize_otp
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abha._registration import SEEDED_MOBILE

from .._send_once import SEND_ONCE_FAULTS, OnceCall, assert_sent_once

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
OTHER_MOBILE = "8123456789"
PROFILE = NewAbhaProfile(first_name="Meera", gender="F", date_of_birth=dt.date(1992, 3, 4), pincode="560001")
TXN = "5d060cad-a93b-4edf-83ef-bd412f69c400"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server) as c:
        yield c


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {
        "token": server.token,
        "client_id": server.client_id,
        "user_id": "oid-1",
        "partner_user_id": "partner-7",
        "partner_hip_id": "hip-9",
        "encryption_key": server.encryption_key,
        "key_id": server.key_id,
        "retry": NO_WAIT,
    }
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


def last_json(server: FakeHealthServer, route: str) -> Any:
    rec = [r for r in server.requests if r.route == route][-1]
    return rec.plaintext if rec.plaintext is not None else rec.json


# ----------------------------------------------------------------------------------- registration with Aadhaar


async def test_aadhaar_linked_mobile_creates_an_address(server: FakeHealthServer, client: ha.HealthClient) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    init = await client.abha.aadhaar_init(aadhaar)
    step = await client.abha.aadhaar_verify(
        init.txn_id, server.abha.last_otp(init.txn_id), mobile="+91 " + server.abha.linked_mobile(aadhaar)
    )
    assert step.skip_state is SkipState.ABHA_CREATE and step.abha_profiles == () and not step.done
    assert step.txn_id == init.txn_id and step.profile is not None and step.profile.kyc_verified is True
    assert last_json(server, "aadhaar_verify") == {
        "txn_id": init.txn_id,
        "otp": server.abha.last_otp(init.txn_id),
        "mobile": server.abha.linked_mobile(aadhaar),  # 10 digits, the +91 stripped
    }
    assert not await client.abha.address_exists("meera.iyer@sbx")
    done = await client.abha.aadhaar_create(step.txn_id or "", "meera.iyer@sbx")
    assert done.done and done.skip_state is SkipState.ABHA_END
    assert done.token and done.refresh_token and done.eka is not None and done.oid == done.eka.oid
    assert done.profile is not None and done.profile.abha_address == "meera.iyer@sbx"
    assert done.profile.date_of_birth is not None and done.profile.abha_number
    assert await client.abha.address_exists("MEERA.IYER@sbx")
    for rec in server.requests:
        assert rec.headers["X-Pt-Id"] == "oid-1"
        assert (rec.headers["X-Partner-Pt-Id"], rec.headers["X-Hip-Id"]) == ("partner-7", "hip-9")


async def test_aadhaar_other_mobile_is_confirmed_by_its_own_otp(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    init = await client.abha.aadhaar_init(server.data.valid_aadhaar[1])
    step = await client.abha.aadhaar_verify(init.txn_id, server.abha.last_otp(init.txn_id), mobile=OTHER_MOBILE)
    assert step.skip_state is SkipState.CONFIRM_MOBILE_OTP and step.hint and step.hint.endswith("6789")
    txn = step.txn_id or ""
    first = server.abha.last_otp(txn)
    resent = await client.abha.aadhaar_mobile_resend(txn)
    assert isinstance(resent, OtpSent) and resent.txn_id == txn
    if server.abha.last_otp(txn) != first:
        with pytest.raises(E.OtpMismatch) as info:
            await client.abha.aadhaar_mobile_verify(txn, first)  # the resend replaced the OTP
        assert info.value.source_code == "ABDM-1035"
    with pytest.raises(E.AbhaError) as early:
        await client.abha.aadhaar_create(txn, "kavya.reddy@sbx")  # not before the mobile is verified
    assert early.value.source_code == "ABDM-1102"
    step = await client.abha.aadhaar_mobile_verify(txn, server.abha.last_otp(txn))
    assert step.skip_state is SkipState.ABHA_CREATE
    done = await client.abha.aadhaar_create(txn, "kavya.reddy@sbx")
    assert done.done and done.profile is not None and done.profile.mobile == OTHER_MOBILE


async def test_aadhaar_with_existing_abha_offers_auto_login(server: FakeHealthServer, client: ha.HealthClient) -> None:
    aadhaar = server.data.valid_aadhaar[-1]  # seeded with asha.verma@sbx
    init = await client.abha.aadhaar_init(aadhaar)
    step = await client.abha.aadhaar_verify(
        init.txn_id, server.abha.last_otp(init.txn_id), mobile=server.abha.linked_mobile(aadhaar)
    )
    assert step.skip_state is SkipState.ABHA_CREATE
    assert [p.abha_address for p in step.abha_profiles] == ["asha.verma@sbx"]
    assert step.abha_profiles[0].kyc_verified is True  # wire "true"
    with pytest.raises(E.AbhaError) as info:
        await client.abha.auto_login(init.txn_id, "someone.else@sbx")
    assert info.value.source_code == "ABDM-1012" and server.abha.step_of(init.txn_id) == "create"
    done = await client.abha.auto_login(init.txn_id, "asha.verma@sbx")
    assert done.done and done.token and done.oid == server.abha.accounts["asha.verma"].oid


async def test_aadhaar_resend_replaces_the_otp(server: FakeHealthServer, client: ha.HealthClient) -> None:
    init = await client.abha.aadhaar_init(server.data.valid_aadhaar[0])
    first = server.abha.last_otp(init.txn_id)
    sent = await client.abha.aadhaar_resend(init.txn_id)
    assert sent.txn_id == init.txn_id and sent.hint
    assert last_json(server, "aadhaar_resend") == {"txn_id": init.txn_id}
    mobile = server.abha.linked_mobile(server.data.valid_aadhaar[0])
    if server.abha.last_otp(init.txn_id) != first:
        with pytest.raises(E.OtpMismatch):
            await client.abha.aadhaar_verify(init.txn_id, first, mobile=mobile)
    step = await client.abha.aadhaar_verify(init.txn_id, server.abha.last_otp(init.txn_id), mobile=mobile)
    assert step.skip_state is SkipState.ABHA_CREATE


async def test_a_wrong_otp_keeps_the_step_then_locks_the_transaction(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    mobile = server.abha.linked_mobile(aadhaar)
    init = await client.abha.aadhaar_init(aadhaar)
    otp = server.abha.last_otp(init.txn_id)
    with pytest.raises(E.OtpMismatch) as info:
        await client.abha.aadhaar_verify(init.txn_id, wrong(otp), mobile=mobile)
    assert info.value.source_code == "MIS-1013" and info.value.status == 400
    assert otp not in str(info.value) and wrong(otp) not in str(info.value)
    assert server.abha.step_of(init.txn_id) == "otp"
    for _ in range(server.abha.max_otp_attempts - 1):
        with pytest.raises(E.OtpMismatch):
            await client.abha.aadhaar_verify(init.txn_id, wrong(otp), mobile=mobile)
    before = server.calls("aadhaar_verify")
    with pytest.raises(E.AbhaRateLimited) as locked:
        await client.abha.aadhaar_verify(init.txn_id, otp, mobile=mobile)  # even the right OTP: too late
    assert locked.value.source_code == "ABDM-1100" and locked.value.status == 500
    assert locked.value.try_again_after == 30 * 60 and not isinstance(locked.value, E.AbhaBlocked)
    assert server.calls("aadhaar_verify") == before + 1  # a 500, never retried
    with pytest.raises(E.AbhaRateLimited):
        await client.abha.aadhaar_resend(init.txn_id)


async def test_too_many_otps_lock_the_transaction(server: FakeHealthServer, client: ha.HealthClient) -> None:
    sent = await client.abha.mobile_init(OTHER_MOBILE)
    for _ in range(server.abha.max_otp_sends - 1):
        await client.abha.mobile_resend(sent.txn_id)
    with pytest.raises(E.AbhaRateLimited) as info:
        await client.abha.mobile_resend(sent.txn_id)
    assert info.value.is_rate_limited and "30 minutes" in str(info.value)
    assert server.calls("mobile_resend") == server.abha.max_otp_sends
    with pytest.raises(E.AbhaRateLimited):
        await client.abha.mobile_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))


async def test_unknown_transaction_and_wrong_step(server: FakeHealthServer, client: ha.HealthClient) -> None:
    with pytest.raises(E.AbhaError) as unknown:
        await client.abha.aadhaar_resend(TXN)
    assert unknown.value.source_code == "MIS-1026" and type(unknown.value) is E.AbhaError
    assert server.calls("aadhaar_resend") == 1  # an ABHA error body is a definite answer: raised as it is
    init = await client.abha.aadhaar_init(server.data.valid_aadhaar[0])
    with pytest.raises(E.AbhaError) as early:
        await client.abha.aadhaar_create(init.txn_id, "rohan.das1@sbx")
    assert early.value.source_code == "ABDM-1031"
    with pytest.raises(E.AbhaError):
        await client.abha.mobile_verify(init.txn_id, server.abha.last_otp(init.txn_id))  # another kind's verify


# ----------------------------------------------------------------------------------- registration with a mobile


async def test_mobile_registration(server: FakeHealthServer, client: ha.HealthClient) -> None:
    sent = await client.abha.mobile_init("+91-81234-56789")
    assert last_json(server, "mobile_init") == {"mobile_number": OTHER_MOBILE}
    assert sent.hint and sent.hint.endswith("6789")
    step = await client.abha.mobile_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))
    assert step.skip_state is SkipState.ABHA_CREATE and step.abha_profiles == ()
    done = await client.abha.mobile_create(step.txn_id or "", "meera_k92@sbx", PROFILE)
    assert done.done and done.success is True and done.txn_id is None and done.token
    assert last_json(server, "mobile_create")["profile"] == {
        "first_name": "Meera",
        "middle_name": None,
        "last_name": None,
        "gender": "F",
        "day_of_birth": 4,
        "month_of_birth": 3,
        "year_of_birth": 1992,
        "pincode": "560001",
        "address": None,
    }
    assert server.abha.accounts["meera_k92"].mobile == OTHER_MOBILE


async def test_mobile_verify_lists_the_abhas_already_on_the_mobile(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    sent = await client.abha.mobile_init(SEEDED_MOBILE)
    with pytest.raises(E.OtpMismatch) as info:
        await client.abha.mobile_verify(sent.txn_id, wrong(server.abha.last_otp(sent.txn_id)))
    assert info.value.source_code == "ABDM-1035"
    step = await client.abha.mobile_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))
    assert sorted(p.abha_address or "" for p in step.abha_profiles) == ["ravi.k1990@sbx", "ravi_kumar@sbx"]
    assert all(p.kyc_verified is False for p in step.abha_profiles)
    done = await client.abha.auto_login(sent.txn_id, "ravi_kumar@sbx")
    assert done.done


async def test_a_taken_address_is_refused_by_the_service(server: FakeHealthServer, client: ha.HealthClient) -> None:
    sent = await client.abha.mobile_init(OTHER_MOBILE)
    await client.abha.mobile_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))
    with pytest.raises(E.AbhaError) as info:
        await client.abha.mobile_create(sent.txn_id, "asha.verma@abdm", PROFILE)
    assert info.value.source_code == "ABDM-1101" and info.value.status == 500
    assert server.calls("mobile_create") == 1


async def test_suggestions_are_free_addresses(server: FakeHealthServer, client: ha.HealthClient) -> None:
    sent = await client.abha.mobile_init(OTHER_MOBILE)
    server.abha.add_account("asha.verma1990")
    got = await client.abha.suggest_addresses(
        sent.txn_id, first_name="Asha", last_name="Verma", date_of_birth=dt.date(1990, 5, 15)
    )
    assert got and "asha.verma" not in got and "asha.verma1990" not in got and "asha_verma" in got
    assert all(normalize_abha_address(a, new=True) for a in got)
    rec = [r for r in server.requests if r.route == "suggest_addresses"][-1]
    assert rec.method == "GET"
    assert dict(rec.query) == {"transactionId": sent.txn_id, "fn": "Asha", "ln": "Verma", "dob": "1990-05-15"}


# ----------------------------------------------------------------------------------- login


async def test_login_methods(server: FakeHealthServer, client: ha.HealthClient) -> None:
    methods = await client.abha.login_methods("asha.verma@sbx")
    assert isinstance(methods, LoginMethods)
    assert methods.auth_methods == ("MOBILE_OTP", "AADHAAR_OTP") and methods.status == "ACTIVE"
    assert methods.full_name == "Asha Verma" and methods.mobile and methods.mobile.startswith("******")
    with pytest.raises(E.AbhaError) as info:
        await client.abha.login_methods("nobody.here@sbx")
    assert info.value.source_code == "ABDM-1012"


async def test_login_by_abha_address_ends_at_verify(server: FakeHealthServer, client: ha.HealthClient) -> None:
    sent = await client.abha.login_init(LoginMethod.PHR_ADDRESS, "asha.verma@sbx")
    assert last_json(server, "login_init") == {
        "method": "phr_address",
        "identifier": "asha.verma@sbx",
        "otp_system": "abdm",
    }
    with pytest.raises(E.OtpMismatch):
        await client.abha.login_verify(sent.txn_id, wrong(server.abha.last_otp(sent.txn_id)))
    done = await client.abha.login_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))
    assert done.done and done.token and done.profile is not None and done.profile.abha_address == "asha.verma@sbx"


@pytest.mark.parametrize("held", [1, 2])
async def test_login_by_mobile_selects_one_of_its_abhas(
    server: FakeHealthServer, client: ha.HealthClient, held: int
) -> None:
    mobile = SEEDED_MOBILE
    if held == 1:
        mobile = "7012345678"
        server.abha.add_account("lone.user1", mobile=mobile)
    sent = await client.abha.login_init("mobile", f"0{mobile}")
    assert last_json(server, "login_init")["identifier"] == mobile
    step = await client.abha.login_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))
    assert step.skip_state is SkipState.ABHA_SELECT and len(step.abha_profiles) == held
    with pytest.raises(E.AbhaError):
        await client.abha.login_phr(sent.txn_id, "asha.verma@sbx")  # not one of this mobile's
    done = await client.abha.login_phr(sent.txn_id, step.abha_profiles[-1].abha_address or "")
    assert done.done and done.refresh_token
    assert last_json(server, "login_phr") == {"txn_id": sent.txn_id, "phr_address": step.abha_profiles[-1].abha_address}


async def test_login_by_aadhaar_goes_through_auto_login(server: FakeHealthServer, client: ha.HealthClient) -> None:
    aadhaar = server.data.valid_aadhaar[-1]
    server.abha.add_account("asha.second", aadhaar=aadhaar)  # two ABHA addresses on one Aadhaar
    sent = await client.abha.login_init(LoginMethod.AADHAAR_NUMBER, aadhaar[:4] + " " + aadhaar[4:])
    assert last_json(server, "login_init")["otp_system"] == "aadhaar"
    with pytest.raises(E.OtpMismatch) as info:
        await client.abha.login_verify(sent.txn_id, wrong(server.abha.last_otp(sent.txn_id)))
    assert info.value.source_code == "MIS-1013"
    step = await client.abha.login_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))
    assert step.skip_state is SkipState.ABHA_CREATE and len(step.abha_profiles) == 2
    done = await client.abha.auto_login(sent.txn_id, "asha.second@sbx")
    assert done.done


async def test_login_by_abha_number(server: FakeHealthServer, client: ha.HealthClient) -> None:
    number = server.abha.accounts["asha.verma"].abha_number or ""
    dashed = f"{number[:2]}-{number[2:6]}-{number[6:10]}-{number[10:]}"
    sent = await client.abha.login_init("abha_number", dashed, otp_system="aadhaar")
    assert last_json(server, "login_init") == {"method": "abha_number", "identifier": number, "otp_system": "aadhaar"}
    step = await client.abha.login_verify(sent.txn_id, server.abha.last_otp(sent.txn_id))
    assert step.skip_state is SkipState.ABHA_SELECT


async def test_blocked_identifier(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.abha.block(OTHER_MOBILE)
    with pytest.raises(E.AbhaBlocked) as info:
        await client.abha.mobile_init(OTHER_MOBILE)
    assert info.value.try_again_after == 24 * 3600 and "24 hours" in str(info.value)
    assert server.calls("mobile_init") == 1


async def test_encrypted_calls_round_trip(server: FakeHealthServer) -> None:
    async with client_for(server, encrypt=True) as client:
        sent = await client.abha.mobile_init(OTHER_MOBILE)
        otp = server.abha.last_otp(sent.txn_id)
        step = await client.abha.mobile_verify(sent.txn_id, otp)
    assert step.skip_state is SkipState.ABHA_CREATE
    rec = [r for r in server.requests if r.route == "mobile_verify"][-1]
    assert rec.headers["X-Encryption"] == "JWE" and otp not in str(rec.json)
    assert rec.plaintext == {"txn_id": sent.txn_id, "otp": otp}


async def test_per_call_headers_override_the_client(server: FakeHealthServer, client: ha.HealthClient) -> None:
    await client.abha.address_exists("asha.verma", user_id=None, partner_hip_id="hip-2")
    rec = server.requests[-1]
    assert "X-Pt-Id" not in rec.headers and rec.headers["X-Hip-Id"] == "hip-2"
    assert rec.headers["X-Partner-Pt-Id"] == "partner-7"


# ----------------------------------------------------------------------------------- never repeated


ONCE: list[tuple[str, OnceCall]] = [
    ("aadhaar_init", lambda c, s: c.abha.aadhaar_init(s.data.valid_aadhaar[0])),
    ("aadhaar_resend", lambda c, s: c.abha.aadhaar_resend(TXN)),
    ("aadhaar_verify", lambda c, s: c.abha.aadhaar_verify(TXN, "123456", mobile=OTHER_MOBILE)),
    ("aadhaar_mobile_verify", lambda c, s: c.abha.aadhaar_mobile_verify(TXN, "123456")),
    ("aadhaar_mobile_resend", lambda c, s: c.abha.aadhaar_mobile_resend(TXN)),
    ("aadhaar_create", lambda c, s: c.abha.aadhaar_create(TXN, "meera.iyer@sbx")),
    ("auto_login", lambda c, s: c.abha.auto_login(TXN, "asha.verma@sbx")),
    ("mobile_init", lambda c, s: c.abha.mobile_init(OTHER_MOBILE)),
    ("mobile_resend", lambda c, s: c.abha.mobile_resend(TXN)),
    ("mobile_verify", lambda c, s: c.abha.mobile_verify(TXN, "123456")),
    ("mobile_create", lambda c, s: c.abha.mobile_create(TXN, "meera.iyer@sbx", PROFILE)),
    ("login_init", lambda c, s: c.abha.login_init("mobile", SEEDED_MOBILE)),
    ("login_verify", lambda c, s: c.abha.login_verify(TXN, "123456")),
    ("login_phr", lambda c, s: c.abha.login_phr(TXN, "asha.verma@sbx")),
]


@pytest.mark.parametrize(("route", "call"), ONCE, ids=[r for r, _ in ONCE])
@SEND_ONCE_FAULTS
async def test_otp_verify_and_create_calls_reach_the_server_once(
    server: FakeHealthServer, route: str, call: OnceCall, fault: Fault
) -> None:
    async with client_for(server) as client:
        await assert_sent_once(server, client, route, call, fault)


async def test_rate_limits_are_never_retried_even_when_opted_in(server: FakeHealthServer) -> None:
    body = {"code": 500, "error": "Too many requests", "source_error": {"code": "ABDM-1022", "message": "x"}}
    opt_in = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_non_idempotent=True)
    server.inject("mobile_init", Fault(status=500, body=body))
    server.inject("address_exists", Fault(status=500, body=body))
    async with client_for(server, retry=opt_in) as client:
        with pytest.raises(E.AbhaRateLimited):
            await client.abha.mobile_init(OTHER_MOBILE)
        with pytest.raises(E.AbhaRateLimited):
            await client.abha.address_exists("asha.verma@sbx")  # a read, but a lock-out is not transient
    assert server.calls("mobile_init") == 1 and server.calls("address_exists") == 1


async def test_a_wrong_otp_is_not_retried_even_when_opted_in(server: FakeHealthServer) -> None:
    opt_in = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_non_idempotent=True)
    async with client_for(server, retry=opt_in) as client:
        sent = await client.abha.mobile_init(OTHER_MOBILE)
        with pytest.raises(E.OtpMismatch):
            await client.abha.mobile_verify(sent.txn_id, wrong(server.abha.last_otp(sent.txn_id)))
    assert server.calls("mobile_verify") == 1


@pytest.mark.parametrize(
    ("route", "call"),
    [
        ("address_exists", lambda c, txn: c.abha.address_exists("asha.verma@sbx")),
        ("login_methods", lambda c, txn: c.abha.login_methods("asha.verma@sbx")),
        ("suggest_addresses", lambda c, txn: c.abha.suggest_addresses(txn, first_name="Meera", last_name="Iyer")),
    ],
)
async def test_reads_are_retried(
    server: FakeHealthServer, route: str, call: Callable[[ha.HealthClient, str], Awaitable[Any]]
) -> None:
    async with client_for(server) as client:
        txn = (await client.abha.mobile_init(OTHER_MOBILE)).txn_id
        server.inject(route, Fault(status=503, times=1))
        assert await call(client, txn)
    assert server.calls(route) == 2


# ----------------------------------------------------------------------------------- options

# A misspelled option would land in **options and be dropped: the OTP sent with the client's default user id.
MISSPELLED: list[tuple[str, str, str, OnceCall]] = [
    (
        "aadhaar_init",
        "aadhaar_init",
        "userid",
        lambda c, s: c.abha.aadhaar_init(s.data.valid_aadhaar[0], userid="oid-2"),  # type: ignore[call-arg]
    ),
    (
        "mobile_init",
        "mobile_init",
        "retries",
        lambda c, s: c.abha.mobile_init(OTHER_MOBILE, retries=NO_WAIT),  # type: ignore[call-arg]
    ),
    (
        "pincode",
        "abha_pincode",
        "partner_hip",
        lambda c, s: c.abha.pincode("560001", partner_hip="HIP-9"),  # type: ignore[call-arg]
    ),
    (  # search sends no partner header: its options do not take one
        "search",
        "abha_search",
        "user_id",
        lambda c, s: c.abha.search(SEEDED_MOBILE, user_id="oid-2"),  # type: ignore[call-arg]
    ),
]


@pytest.mark.parametrize(("method", "route", "key", "call"), MISSPELLED, ids=[m for m, *_ in MISSPELLED])
async def test_an_unknown_option_is_a_type_error_and_nothing_is_sent(
    server: FakeHealthServer, client: ha.HealthClient, method: str, route: str, key: str, call: OnceCall
) -> None:
    with pytest.raises(TypeError, match=rf"\.{method}\(\) got an unexpected keyword argument '{key}'$") as info:
        await call(client, server)
    assert not isinstance(info.value, E.HealthError)  # a programming error, as for any function
    assert server.requests == [] and server.calls(route) == 0


async def test_every_declared_option_is_still_accepted(server: FakeHealthServer, client: ha.HealthClient) -> None:
    sent = await client.abha.mobile_init(
        OTHER_MOBILE,
        user_id="oid-2",
        partner_user_id=None,
        partner_hip_id="hip-2",
        encrypt=False,
        retry=NO_WAIT,
        timeout=30,
    )
    assert sent.txn_id and server.calls("mobile_init") == 1
    rec = server.requests[-1]
    assert rec.headers["X-Pt-Id"] == "oid-2" and rec.headers["X-Hip-Id"] == "hip-2"
    assert "X-Partner-Pt-Id" not in rec.headers
    await client.abha.search(SEEDED_MOBILE, encrypt=False, retry=NO_WAIT, timeout=None)
    assert server.calls("abha_search") == 1


# ----------------------------------------------------------------------------------- input rules: nothing sent

BAD_OTPS = ["", "12345", "1234567", "12345a", "١٢٣٤٥٦", "12 3456"]


@pytest.mark.parametrize("otp", BAD_OTPS)
async def test_bad_otps_are_refused_before_sending(server: FakeHealthServer, client: ha.HealthClient, otp: str) -> None:
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: client.abha.aadhaar_verify(TXN, otp, mobile=OTHER_MOBILE),
        lambda: client.abha.aadhaar_mobile_verify(TXN, otp),
        lambda: client.abha.mobile_verify(TXN, otp),
        lambda: client.abha.login_verify(TXN, otp),
    ]
    for call in calls:
        with pytest.raises(E.InvalidOtp) as info:
            await call()
        assert isinstance(info.value, ValueError)
        assert not otp or otp not in str(info.value)
    assert server.requests == []


@pytest.mark.parametrize(
    ("otp", "rule"),
    [("", "empty"), ("12345", "6 digits"), ("12345x", "only digits"), ("١٢٣٤٥٦", "only digits"), (123456, "str")],
)
def test_otp_rules_are_named(otp: Any, rule: str) -> None:
    with pytest.raises(E.InvalidOtp, match=rule):
        normalize_otp(otp)
    assert normalize_otp(" 012345\n") == "012345"


@pytest.mark.parametrize(
    ("address", "new", "rule"),
    [
        ("", False, "empty"),
        ("  ", False, "empty"),
        ("asha.verma@gmail.com", False, "@abdm or @sbx"),
        ("@abdm", False, "name before"),
        ("asha-verma@abdm", False, "only letters, digits"),
        ("asha verma", False, "only letters, digits"),
        ("ásha.verma", False, "only letters, digits"),
        (".ashaverma", False, "start or end"),
        ("ashaverma_@sbx", False, "start or end"),
        ("a" * 65, False, "at most 64"),
        ("asha.v", True, "8 to 18"),
        ("a" * 19 + "@abdm", True, "8 to 18"),
        ("asha.ver.ma", True, "at most one"),
        ("as_ha_verma", True, "at most one"),
        (12345678, False, "str"),
    ],
)
def test_abha_address_rules_are_named_and_the_address_never_shown(address: Any, new: bool, rule: str) -> None:
    with pytest.raises(E.InvalidAbhaAddress, match=rule) as info:
        normalize_abha_address(address, new=new)
    if isinstance(address, str) and len(address.strip()) > 3:
        assert address.strip() not in str(info.value)


@pytest.mark.parametrize(
    ("address", "new"),
    [
        ("asha.verma@abdm", True),
        ("asha_verma1@SBX", True),
        ("sudo@abdm", False),
        ("shyam.eka", False),
        ("a_b.c", False),
    ],
)
def test_valid_abha_addresses(address: str, new: bool) -> None:
    assert normalize_abha_address(f" {address} ", new=new) == address


async def test_every_input_rule_refuses_before_sending(server: FakeHealthServer, client: ha.HealthClient) -> None:
    abha = client.abha
    cases: list[tuple[type[Exception], Callable[[], Awaitable[Any]]]] = [
        (E.InvalidAadhaarNumber, lambda: abha.aadhaar_init("2345 6789 0125")),
        (E.InvalidMobileNumber, lambda: abha.aadhaar_verify(TXN, "123456", mobile="12345")),
        (E.InvalidMobileNumber, lambda: abha.mobile_init("5123456789")),
        (E.InvalidMobileNumber, lambda: abha.login_init("mobile", "+1 415 555 0100")),
        (E.InvalidAadhaarNumber, lambda: abha.login_init("aadhaar_number", "1234")),
        (E.InvalidAbhaAddress, lambda: abha.login_init(LoginMethod.PHR_ADDRESS, "x@y.com")),
        (E.InvalidRequest, lambda: abha.login_init("abha_number", "12-3456-7890")),
        (E.InvalidRequest, lambda: abha.login_init("password", "asha.verma")),
        (E.InvalidRequest, lambda: abha.login_init("search", "1")),  # needs the search answer's txn_id
        (E.InvalidRequest, lambda: abha.login_init("mobile", SEEDED_MOBILE, otp_system="sms")),
        (E.InvalidAbhaAddress, lambda: abha.aadhaar_create(TXN, "short@abdm")),
        (E.InvalidAbhaAddress, lambda: abha.mobile_create(TXN, "a.b.cdefghij", PROFILE)),
        (E.InvalidAbhaAddress, lambda: abha.auto_login(TXN, "-bad-")),
        (E.InvalidAbhaAddress, lambda: abha.login_phr(TXN, "bad@@abdm")),
        (E.InvalidAbhaAddress, lambda: abha.address_exists("")),
        (E.InvalidAbhaAddress, lambda: abha.login_methods("a b")),
        (E.InvalidRequest, lambda: abha.mobile_create(TXN, "meera.iyer", {"first_name": "x"})),  # type: ignore[arg-type]
        (E.InvalidRequest, lambda: abha.suggest_addresses(TXN, first_name=" ")),
        (E.InvalidRequest, lambda: abha.suggest_addresses(TXN, date_of_birth="1990-01-01")),  # type: ignore[arg-type]
        (E.InvalidRequest, lambda: abha.aadhaar_resend("")),
        (E.InvalidRequest, lambda: abha.mobile_resend("txn\r\nX-Evil: 1")),
        (E.InvalidRequest, lambda: abha.mobile_verify("t" * 257, "123456")),
        (E.InvalidRequest, lambda: abha.login_verify(None, "123456")),  # type: ignore[arg-type]
        (E.InvalidRequest, lambda: abha.suggest_addresses("a b")),
    ]
    for expected, call in cases:
        with pytest.raises(expected):
            await call()
    assert server.requests == []


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"first_name": " "}, "first_name must not be empty"),
        ({"first_name": 5}, "first_name must be a str"),
        ({"last_name": "x" * 101}, "last_name must be at most 100"),
        ({"gender": "Male"}, "gender"),
        ({"date_of_birth": today_in_india() + dt.timedelta(days=1)}, "not in the future"),
        ({"date_of_birth": dt.datetime(1990, 1, 1)}, "datetime.date"),
        ({"pincode": "060001"}, "PIN code"),
        ({"pincode": "56001"}, "PIN code"),
        ({"address": "line\x00"}, "address"),
    ],
)
def test_new_profile_rules(kwargs: dict[str, Any], rule: str) -> None:
    fields: dict[str, Any] = {
        "first_name": "Meera",
        "gender": "F",
        "date_of_birth": dt.date(1992, 3, 4),
        "pincode": "560001",
    }
    fields.update(kwargs)
    with pytest.raises(E.InvalidRequest, match=rule):
        NewAbhaProfile(**fields)


@pytest.mark.parametrize(
    ("instant", "born"),
    [
        # 00:30 IST on 2031-06-15 is 19:00 UTC on the 14th: a child born that night in India is born "today"
        (dt.datetime(2031, 6, 14, 19, 0, tzinfo=dt.UTC), dt.date(2031, 6, 15)),
        # 23:59 IST on the 15th is 18:29 UTC: still the 15th in India
        (dt.datetime(2031, 6, 15, 18, 29, tzinfo=dt.UTC), dt.date(2031, 6, 15)),
    ],
)
def test_a_date_of_birth_is_judged_by_indias_calendar_not_the_machines(
    monkeypatch: pytest.MonkeyPatch, instant: dt.datetime, born: dt.date
) -> None:
    """A server on UTC refused a child born in India today, from midnight IST until 05:30."""
    monkeypatch.setattr(abha_models, "_now", instant.timestamp)
    fields: dict[str, Any] = {"first_name": "Meera", "gender": "F", "pincode": "560001"}
    assert NewAbhaProfile(date_of_birth=born, **fields).date_of_birth == born
    with pytest.raises(E.InvalidRequest, match="not in the future"):
        NewAbhaProfile(date_of_birth=born + dt.timedelta(days=1), **fields)


# ----------------------------------------------------------------------------------- error mapping


def abha_body(code: str, status: int = 500, error: str = "Something went wrong") -> dict[str, Any]:
    return {"code": status, "error": error, "source_error": {"code": code, "message": "m"}}


@pytest.mark.parametrize(
    ("status", "operation", "code", "expected"),
    [
        (500, "aadhaar_init", "ABDM-1022", E.AbhaRateLimited),
        (500, "mobile_resend", "ABDM-1100", E.AbhaRateLimited),
        (500, "login_verify", "ABDM-1100: ", E.AbhaRateLimited),  # ABDM pads its codes
        (500, "login_init", "ABDM-1027", E.AbhaBlocked),
        (500, "address_exists", "ABDM-1022", E.AbhaRateLimited),
        (400, "aadhaar_verify", "MIS-1013", E.OtpMismatch),
        (400, "aadhaar_mobile_verify", "ABDM-1035", E.OtpMismatch),
        (400, "mobile_verify", "ABDM-1035", E.OtpMismatch),
        (400, "login_verify", "MIS-1013", E.OtpMismatch),
        (500, "login_phr", "ABDM-1035", E.AbhaError),  # ABDM-1035 is "Invalid HIP ID" outside an OTP check
        (400, "aadhaar_init", "MIS-1013", E.AbhaError),
        (400, "aadhaar_create", "ABDM-1010", E.AbhaError),
        (500, "suggest_addresses", "MIS-1026", E.AbhaError),
    ],
)
def test_abha_error_mapping(status: int, operation: str, code: str, expected: type[E.AbhaError]) -> None:
    error = E.error_from_response(status, {}, abha_body(code, status), operation=operation)
    assert type(error) is expected
    assert error.source_code == code.strip(": ")
    assert operation in str(error) and str(status) in str(error)
    assert error.is_rate_limited == issubclass(expected, E.AbhaRateLimited)


def test_abha_bodies_of_other_operations_are_not_abha_errors() -> None:
    error = E.error_from_response(500, {}, abha_body("ABDM-1022"), operation="describe")
    assert type(error) is E.ServerError


def test_abha_errors_are_api_errors_not_server_errors() -> None:
    # so that _send_once raises them as they are (a definite answer), never as OutcomeUnknown
    for cls in (E.AbhaError, E.OtpMismatch, E.AbhaRateLimited, E.AbhaBlocked):
        assert issubclass(cls, E.ApiError) and not issubclass(cls, E.ServerError)
    policy = ha.RetryPolicy(retry_non_idempotent=True)
    blocked = E.error_from_response(500, {}, abha_body("ABDM-1027"), operation="mobile_init")
    assert not policy.should_retry(blocked, idempotent=True)


def test_personal_data_in_the_error_text_is_redacted() -> None:
    body = abha_body(
        "EKA-1001", 400, "This account has already been claimed by the mobile number: 9876543210 (asha.verma@abdm)"
    )
    error = E.error_from_response(400, {}, body, operation="mobile_create")
    assert "9876543210" not in str(error) and "asha.verma" not in str(error) and "EKA-1001" in str(error)
    assert isinstance(error, E.AbhaError) and error.error == body["error"]  # kept on the exception for the caller


# ----------------------------------------------------------------------------------- parsing and reprs


def test_step_parsing_tolerates_the_live_variants() -> None:
    step = structure(
        {
            "skip_state": "something_new",
            "txn_id": "t-1",
            "abha_profiles": None,
            "profile": {"abha_address": "a@abdm", "kyc_verified": None, "day_of_birth": "3", "extra": 1},
            "eka": {"oid": "123", "uuid": None, "min_token": "m"},
        },
        AbhaStep,
    )
    assert step.skip_state is SkipState.UNKNOWN and step.abha_profiles == ()
    assert step.profile is not None and step.profile.day_of_birth == 3 and step.profile.date_of_birth is None
    assert step.oid == "123" and step.eka == EkaIds(oid="123", min_token="m")
    assert structure({}, AbhaStep).skip_state is SkipState.UNKNOWN
    vendor = structure({"abha_profiles": [{"abha_address": "x@abdm", "kyc_verified": "true", "name": "X"}]}, AbhaStep)
    assert vendor.abha_profiles[0].kyc_verified is True


@pytest.mark.parametrize(
    ("data", "cls", "field"),
    [
        ({"skip_state": "abha_end", "token": 5.5}, AbhaStep, "token"),
        ({"txn_id": ["t"]}, AbhaStep, "txn_id"),
        ({"hint": "sent"}, OtpSent, "txn_id"),
        ({"auth_methods": "MOBILE_OTP"}, LoginMethods, "auth_methods"),
    ],
)
def test_misfit_answers_name_the_field(data: dict[str, Any], cls: type, field: str) -> None:
    with pytest.raises(E.ResponseValidationError, match=field):
        structure(data, cls)


async def test_misfit_check_and_suggest_answers(server: FakeHealthServer, client: ha.HealthClient) -> None:
    server.inject("address_exists", Fault(status=200, body={"exists": "yes"}, times=1))
    with pytest.raises(E.ResponseValidationError, match="exists"):
        await client.abha.address_exists("asha.verma")
    server.inject("address_exists", Fault(status=200, body={"exist": True}, times=1))
    assert await client.abha.address_exists("asha.verma") is True  # the schema's other spelling
    server.inject("suggest_addresses", Fault(status=200, body={"suggestions": None}, times=1))
    assert await client.abha.suggest_addresses(TXN) == ()


def test_reprs_hide_secrets_and_personal_data() -> None:
    step = AbhaStep(
        skip_state=SkipState.ABHA_END,
        txn_id="txn-secret",
        hint="sent to ******3210",
        profile=AbhaProfile(
            abha_address="asha.verma@abdm",
            first_name="Asha",
            year_of_birth=1990,
            mobile="9876543210",
            kyc_verified=True,
        ),
        eka=EkaIds(oid="oid-7", min_token="min-secret"),
        token="tok-secret",
        refresh_token="refresh-secret",
    )
    sent = OtpSent(txn_id="txn-secret", hint="sent to ******3210")
    methods = LoginMethods(full_name="Asha Verma", mobile="******3210", abha_address="asha.verma@abdm")
    text = " ".join(map(repr, (step, sent, methods, PROFILE, step.profile)))
    for secret in (
        "txn-secret",
        "3210",
        "asha",
        "Asha",
        "1990",
        "9876543210",
        "min-secret",
        "tok-secret",
        "refresh",
        "Meera",
        "1992",
        "560001",
    ):
        assert secret not in text, secret
    assert "ABHA_END" in repr(step) and "oid-7" not in repr(step)  # the OID is a person's id


async def test_seeded_refusals_of_aadhaar_init(server: FakeHealthServer, client: ha.HealthClient) -> None:
    got = {}
    for number in server.data.failing_aadhaar:
        with pytest.raises(E.AbhaError) as info:
            await client.abha.aadhaar_init(number)
        got[info.value.source_code] = type(info.value)
        assert number not in str(info.value) and number[-4:] not in repr(info.value)
    assert got == {"ABDM-1022": E.AbhaRateLimited, "ABDM-1100": E.AbhaRateLimited, "ABDM-1006": E.AbhaError}
    assert server.calls("aadhaar_init") == len(server.data.failing_aadhaar)
