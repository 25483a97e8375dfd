"""client.hpr against the fake server: every operation with the vendor's method, path and body field names, a
professional's whole sequence, refusals, input refused before sending, the no-repeat rule, secrets kept out."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async.models import HprAccount, HprMobileCheck, HprOtpSent, HprProfile, HprStep, HprSuggestions
from health_async.testing import FakeHealthServer, Fault

from .._send_once import SEND_ONCE_FAULTS, OnceCall, assert_sent_once

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
OTHER_MOBILE = "8123456789"
TXN = "5d060cad-a93b-4edf-83ef-bd412f69c400"
PASSWORD = "S3cret!Pass#46"
NHPR = "/abdm/nhpr/v1/hpr/aadhaar"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {
        "token": server.token,
        "client_id": server.client_id,
        "user_id": "oid-1",
        "partner_user_id": "partner-7",
        "partner_hip_id": "hip-9",
        "retry": NO_WAIT,
    }
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server) as c:
        yield c


def sent(server: FakeHealthServer, route: str) -> tuple[str, str, Any]:
    """The method, path and JSON body of the last request of ``route``, as the fake received them."""
    rec = [r for r in server.requests if r.route == route][-1]
    return rec.method, rec.path, rec.plaintext if rec.plaintext is not None else rec.json


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


async def verified(client: ha.HealthClient, server: FakeHealthServer, aadhaar: str) -> str:
    """A transaction through the Aadhaar OTP and the linked mobile: ready for check/exist, suggest, create."""
    init = await client.hpr.aadhaar_init(aadhaar)
    step = await client.hpr.aadhaar_verify(init.txn_id, server.hpr.last_otp(init.txn_id))
    check = await client.hpr.demo_verify(step.txn_id, server.hpr.linked_mobile(aadhaar))
    assert check.verified is True
    return step.txn_id


# ----------------------------------------------------------------------------------- the whole sequence


async def test_a_professional_registers_through_every_step(server: FakeHealthServer, client: ha.HealthClient) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    init = await client.hpr.aadhaar_init(aadhaar[:4] + " " + aadhaar[4:8] + "-" + aadhaar[8:])
    assert isinstance(init, HprOtpSent) and init.txn_id
    assert sent(server, "hpr_aadhaar_init") == ("POST", f"{NHPR}/init", {"aadhaar": aadhaar})
    assert server.otps[-1]["otp"] == server.hpr.last_otp(init.txn_id)  # recorded as every fake OTP is

    otp = server.hpr.last_otp(init.txn_id)
    step = await client.hpr.aadhaar_verify(init.txn_id, otp)
    assert isinstance(step, HprStep) and step.txn_id == init.txn_id
    assert sent(server, "hpr_aadhaar_verify") == ("POST", f"{NHPR}/verify", {"otp": otp, "txn_id": init.txn_id})

    # the mobile given is not the Aadhaar-linked one: confirmed with its own OTP
    check = await client.hpr.demo_verify(step.txn_id, "+91 " + OTHER_MOBILE)
    assert isinstance(check, HprMobileCheck) and check.verified is False and check.reason
    assert sent(server, "hpr_demo_verify") == (
        "POST",
        f"{NHPR}/demo/verify",
        {"mobile_num": OTHER_MOBILE, "txn_id": step.txn_id},
    )
    mobile = await client.hpr.mobile_init(step.txn_id, OTHER_MOBILE)  # answered bare, as the vendor's schema says
    assert mobile.txn_id == step.txn_id and mobile.mobile_num == "******6789"
    assert sent(server, "hpr_mobile_init") == (
        "POST",
        f"{NHPR}/mobile/init",
        {"mobile_num": OTHER_MOBILE, "txn_id": step.txn_id},
    )
    mobile_otp = server.hpr.last_otp(step.txn_id)
    step = await client.hpr.mobile_verify(mobile.txn_id, mobile_otp)
    assert sent(server, "hpr_mobile_verify") == (
        "POST",
        f"{NHPR}/mobile/verify",
        {"otp": mobile_otp, "txnId": mobile.txn_id},  # the vendor spells this one txnId
    )

    info = await client.hpr.check_exist(step.txn_id)
    assert isinstance(info, HprProfile) and not info.exists and info.new is True
    assert info.first_name and info.date_of_birth is not None and info.txn_id == step.txn_id
    assert sent(server, "hpr_check_exist") == ("POST", f"{NHPR}/check/exist", {"txn_id": step.txn_id})

    ids = await client.hpr.suggest(step.txn_id, mobile=OTHER_MOBILE)
    assert isinstance(ids, HprSuggestions) and len(ids) >= 2 and all("@" in i for i in ids)
    assert sent(server, "hpr_suggest") == (
        "POST",
        f"{NHPR}/suggest",
        {"txn_id": step.txn_id, "mobile_num": OTHER_MOBILE},
    )
    chosen = ids.hpr_ids[0]
    assert await client.hpr.check_available(chosen)
    assert sent(server, "hpr_check_available") == ("POST", f"{NHPR}/check/available", {"hprId": chosen})

    account = await client.hpr.create(
        step.txn_id,
        chosen,
        password=PASSWORD,
        email="doctor@example.org",
        hp_category_code=1,
        hp_sub_category_code=2,
        first_name="Meera",
        pincode="560001",
        notify_user=True,
    )
    assert isinstance(account, HprAccount) and account.hpr_id == chosen and account.hpr_id_number
    assert account.new is True and account.auth_methods and account.email == "doctor@example.org"
    assert sent(server, "hpr_create") == (
        "POST",
        f"{NHPR}/create",
        {
            "txnId": step.txn_id,
            "hprId": chosen,
            "password": PASSWORD,
            "email": "doctor@example.org",
            "hp_category_code": 1,
            "hp_sub_category_code": 2,
            "first_name": "Meera",
            "pincode": "560001",
            "notify_user": True,
        },
    )
    assert not await client.hpr.check_available(chosen)
    assert (await client.hpr.check_exist(step.txn_id)).exists
    for rec in server.requests:
        assert (rec.headers["X-Pt-Id"], rec.headers["X-Partner-Pt-Id"], rec.headers["X-Hip-Id"]) == (
            "oid-1",
            "partner-7",
            "hip-9",
        )


async def test_a_professional_who_holds_an_hpr_id_skips_creation(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    aadhaar = server.data.valid_aadhaar[-1]  # seeded with asha.verma@hpr.abdm
    txn = await verified(client, server, aadhaar)
    info = await client.hpr.check_exist(txn)
    assert info.exists and info.new is False and info.hpr_id == "asha.verma@hpr.abdm"
    with pytest.raises(E.AbhaError) as refused:
        await client.hpr.create(
            txn, "someone.new", password=PASSWORD, email="a@b.org", hp_category_code=1, hp_sub_category_code=1
        )
    assert refused.value.source_code == "HPR-1101"


async def test_the_encrypted_form_carries_the_same_fields(server: FakeHealthServer) -> None:
    async with client_for(server, encryption_key=server.encryption_key, key_id=server.key_id, encrypt=True) as c:
        aadhaar = server.data.valid_aadhaar[0]
        init = await c.hpr.aadhaar_init(aadhaar)
    rec = [r for r in server.requests if r.route == "hpr_aadhaar_init"][-1]
    assert rec.headers["X-Encryption"] == "JWE" and rec.plaintext == {"aadhaar": aadhaar} and init.txn_id


# ----------------------------------------------------------------------------------- refusals


async def test_a_wrong_otp_is_an_otp_mismatch_and_the_step_is_unchanged(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    init = await client.hpr.aadhaar_init(server.data.valid_aadhaar[0])
    otp = server.hpr.last_otp(init.txn_id)
    with pytest.raises(E.OtpMismatch) as info:
        await client.hpr.aadhaar_verify(init.txn_id, wrong(otp))
    assert info.value.source_code == "MIS-1013" and otp not in str(info.value)
    assert server.hpr.step_of(init.txn_id) == "otp" and server.calls("hpr_aadhaar_verify") == 1
    await client.hpr.aadhaar_verify(init.txn_id, otp)
    await client.hpr.mobile_init(init.txn_id, OTHER_MOBILE)
    with pytest.raises(E.OtpMismatch) as mobile:
        await client.hpr.mobile_verify(init.txn_id, wrong(server.hpr.last_otp(init.txn_id)))
    assert mobile.value.source_code == "ABDM-1035"


async def test_an_unknown_transaction_and_a_wrong_step_are_refused(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    with pytest.raises(E.AbhaError) as unknown:
        await client.hpr.aadhaar_verify(TXN, "123456")
    assert unknown.value.source_code == "MIS-1026"
    assert server.calls("hpr_aadhaar_verify") == 1  # a 500 with the registry's word: definite, not retried
    init = await client.hpr.aadhaar_init(server.data.valid_aadhaar[0])
    with pytest.raises(E.AbhaError) as early:
        await client.hpr.suggest(init.txn_id)  # before the Aadhaar OTP
    assert early.value.source_code == "ABDM-1031"


async def test_a_taken_hpr_id_is_refused(server: FakeHealthServer, client: ha.HealthClient) -> None:
    txn = await verified(client, server, server.data.valid_aadhaar[0])
    assert not await client.hpr.check_available("ravi.kumar@hpr.abdm")
    with pytest.raises(E.AbhaError) as taken:
        await client.hpr.create(
            txn, "ravi.kumar@hpr.abdm", password=PASSWORD, email="a@b.org", hp_category_code=1, hp_sub_category_code=1
        )
    assert taken.value.source_code == "HPR-1101" and server.calls("hpr_create") == 1
    assert server.hpr.step_of(txn) == "ready"  # another id may still be tried


# ----------------------------------------------------------------------------------- the no-repeat rule


ONCE: list[tuple[str, OnceCall]] = [
    ("hpr_aadhaar_init", lambda c, s: c.hpr.aadhaar_init(s.data.valid_aadhaar[0])),
    ("hpr_aadhaar_verify", lambda c, s: c.hpr.aadhaar_verify(TXN, "123456")),
    ("hpr_demo_verify", lambda c, s: c.hpr.demo_verify(TXN, OTHER_MOBILE)),
    ("hpr_mobile_init", lambda c, s: c.hpr.mobile_init(TXN, OTHER_MOBILE)),
    ("hpr_mobile_verify", lambda c, s: c.hpr.mobile_verify(TXN, "123456")),
    (
        "hpr_create",
        lambda c, s: c.hpr.create(
            TXN, "meera.iyer", password=PASSWORD, email="a@b.org", hp_category_code=1, hp_sub_category_code=1
        ),
    ),
]


@pytest.mark.parametrize(("route", "call"), ONCE, ids=[r for r, _ in ONCE])
@SEND_ONCE_FAULTS
async def test_otp_verify_and_create_calls_reach_the_server_once(
    server: FakeHealthServer, route: str, call: OnceCall, fault: Fault
) -> None:
    async with client_for(server) as client:
        await assert_sent_once(server, client, route, call, fault)


async def test_a_lost_create_answer_is_outcome_unknown_and_the_id_is_then_taken(server: FakeHealthServer) -> None:
    async with client_for(server) as client:
        txn = await verified(client, server, server.data.valid_aadhaar[0])
        server.inject("hpr_create", Fault(drop=True, times=1))
        with pytest.raises(E.OutcomeUnknown):
            await client.hpr.create(
                txn, "meera.iyer", password=PASSWORD, email="a@b.org", hp_category_code=1, hp_sub_category_code=1
            )
        assert server.calls("hpr_create") == 1
        # the fault dropped the answer before the registry acted: the id is still free, as check_available says
        assert await client.hpr.check_available("meera.iyer")


async def test_an_otp_call_is_not_retried_on_a_5xx_even_when_opted_in(server: FakeHealthServer) -> None:
    opt_in = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_non_idempotent=True)
    server.inject("hpr_aadhaar_init", Fault(status=502, times=3))
    server.inject("hpr_mobile_init", Fault(status=500, times=3))
    async with client_for(server, retry=opt_in) as client:
        with pytest.raises(E.OutcomeUnknown):
            await client.hpr.aadhaar_init(server.data.valid_aadhaar[0])
        with pytest.raises(E.OutcomeUnknown):
            await client.hpr.mobile_init(TXN, OTHER_MOBILE)
    assert server.calls("hpr_aadhaar_init") == 1 and server.calls("hpr_mobile_init") == 1


READS: list[tuple[str, OnceCall]] = [
    ("hpr_check_exist", lambda c, s: c.hpr.check_exist(TXN)),
    ("hpr_check_available", lambda c, s: c.hpr.check_available("ravi.kumar")),
    ("hpr_suggest", lambda c, s: c.hpr.suggest(TXN)),
]


@pytest.mark.parametrize(("route", "call"), READS, ids=[r for r, _ in READS])
async def test_reads_are_retried_after_a_5xx(server: FakeHealthServer, route: str, call: OnceCall) -> None:
    server.inject(route, Fault(status=503, times=1))
    async with client_for(server) as client:
        try:
            await call(client, server)
        except E.AbhaError:  # the unknown transaction, answered by the registry on the second attempt
            pass
    assert server.calls(route) == 2


# ----------------------------------------------------------------------------------- input refused before sending


BAD_INPUT: list[tuple[type[Exception], OnceCall]] = [
    (E.InvalidAadhaarNumber, lambda c, s: c.hpr.aadhaar_init("2345 6789 0125")),  # Verhoeff digit wrong
    (E.InvalidAadhaarNumber, lambda c, s: c.hpr.aadhaar_init("1234 5678 9012")),
    (E.InvalidAadhaarNumber, lambda c, s: c.hpr.aadhaar_init("2345 6789")),
    (E.InvalidOtp, lambda c, s: c.hpr.aadhaar_verify(TXN, "12345")),
    (E.InvalidOtp, lambda c, s: c.hpr.mobile_verify(TXN, "abcdef")),
    (E.InvalidMobileNumber, lambda c, s: c.hpr.demo_verify(TXN, "12345")),
    (E.InvalidMobileNumber, lambda c, s: c.hpr.mobile_init(TXN, "5123456789")),
    (E.InvalidRequest, lambda c, s: c.hpr.check_exist("")),
    (E.InvalidRequest, lambda c, s: c.hpr.check_available("has space")),
    (E.InvalidArgumentType, lambda c, s: c.hpr.check_available(42)),  # type: ignore[arg-type]
    (
        E.InvalidRequest,
        lambda c, s: c.hpr.create(TXN, "x", password="", email="a@b.org", hp_category_code=1, hp_sub_category_code=1),
    ),
    (
        E.InvalidRequest,
        lambda c, s: c.hpr.create(
            TXN, "x", password=PASSWORD, email="nope", hp_category_code=1, hp_sub_category_code=1
        ),
    ),
    (
        E.InvalidRequest,
        lambda c, s: c.hpr.create(
            TXN, "x", password=PASSWORD, email="a@b.org", hp_category_code=-1, hp_sub_category_code=1
        ),
    ),
]


@pytest.mark.parametrize(("error", "call"), BAD_INPUT)
async def test_bad_input_is_refused_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, error: type[Exception], call: OnceCall
) -> None:
    with pytest.raises(error):
        await call(client, server)
    assert server.requests == []


async def test_a_bad_aadhaar_number_is_not_echoed(server: FakeHealthServer, client: ha.HealthClient) -> None:
    with pytest.raises(E.InvalidAadhaarNumber) as info:
        await client.hpr.aadhaar_init("2345 6789 0125")
    assert "0125" not in str(info.value) and "2345" not in str(info.value)
    assert server.calls("hpr_aadhaar_init") == 0


# ----------------------------------------------------------------------------------- secrets kept out


async def test_no_password_aadhaar_otp_or_mobile_in_reprs_logs_or_errors(
    server: FakeHealthServer, caplog: pytest.LogCaptureFixture
) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    caplog.set_level(logging.DEBUG, logger="health_async")
    texts: list[str] = []
    async with client_for(server) as client:
        init = await client.hpr.aadhaar_init(aadhaar)
        otp = server.hpr.last_otp(init.txn_id)
        step = await client.hpr.aadhaar_verify(init.txn_id, otp)
        check = await client.hpr.demo_verify(step.txn_id, server.hpr.linked_mobile(aadhaar))
        info = await client.hpr.check_exist(step.txn_id)
        ids = await client.hpr.suggest(step.txn_id)
        server.inject("hpr_create", Fault(status=500, times=1))
        with pytest.raises(E.OutcomeUnknown) as lost:
            await client.hpr.create(
                step.txn_id, ids.hpr_ids[0], password=PASSWORD, email="d@example.org", hp_category_code=1,
                hp_sub_category_code=1,
            )  # fmt: skip
        with pytest.raises(E.InvalidRequest) as bad:
            await client.hpr.create(
                step.txn_id, ids.hpr_ids[0], password=PASSWORD + "\n", email="d@example.org", hp_category_code=1,
                hp_sub_category_code=1,
            )  # fmt: skip
        account = await client.hpr.create(
            step.txn_id, ids.hpr_ids[0], password=PASSWORD, email="d@example.org", hp_category_code=1,
            hp_sub_category_code=1,
        )  # fmt: skip
        texts += [repr(x) for x in (init, step, check, info, ids, account, client.hpr)]
        texts += [str(lost.value), repr(lost.value), str(lost.value.__cause__), str(bad.value)]
    texts += [record.getMessage() for record in caplog.records]
    texts += [str(record.__dict__) for record in caplog.records]
    blob = "\n".join(texts)
    assert caplog.records  # the client did log: the check below is not vacuous
    for secret in (PASSWORD, aadhaar, otp, init.txn_id, server.hpr.linked_mobile(aadhaar), ids.hpr_ids[0]):
        assert secret not in blob
    assert "d@example.org" not in blob and (account.hpr_id_number or "x") not in blob
