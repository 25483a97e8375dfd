"""client.hpr.register: a professional's guided HPR registration against the fake server, resumed from a sealed
state in a new client between every step (as a web backend runs one step per request); the existing professional
ending at check/exist; a lost create never repeated; nothing secret in the state or the logs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async.models import HprAccount, HprRegistrationStep
from health_async.resources import HprRegistration
from health_async.testing import FakeHealthServer, Fault

Step = HprRegistrationStep
NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
KEY = bytes(range(32))
OTHER_MOBILE = "8123456789"
PASSWORD = "S3cret!Pass#46"
EMAIL = "asha@example.org"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def client_for(server: FakeHealthServer) -> ha.HealthClient:
    return ha.HealthClient(
        base_url=server.url,
        token=server.token,
        client_id=server.client_id,
        partner_hip_id="hip-9",
        retry=NO_WAIT,
    )


class Backend:
    """A web backend: every step in a new client, the flow resumed from the sealed state of the step before."""

    def __init__(self, server: FakeHealthServer) -> None:
        self.server = server
        self.sealed: list[str] = []
        self.plain: list[dict[str, Any]] = []

    async def step(self, sealed: str, action: Any) -> tuple[str, Any, HprRegistration]:
        async with client_for(self.server) as client:
            flow = client.hpr.resume(sealed, seal=KEY)
            result = await action(flow)
            return self.keep(flow), result, flow

    def keep(self, flow: HprRegistration) -> str:
        sealed = flow.to_state(seal=KEY)
        self.sealed.append(sealed)
        self.plain.append(flow.to_state())
        return sealed


def txn_of(server: FakeHealthServer, sealed: str) -> str:
    """The flow's transaction, read from its state opened with the key (nothing sent)."""
    client = client_for(server)
    return str(client.hpr.resume(sealed, seal=KEY).to_state()["txn_id"])


async def start(server: FakeHealthServer, backend: Backend, aadhaar: str) -> str:
    async with client_for(server) as client:
        flow = await client.hpr.register(aadhaar)
        assert flow.next_step is Step.VERIFY_OTP
        return backend.keep(flow)


async def to_check_exist(server: FakeHealthServer, backend: Backend, aadhaar: str, mobile: str) -> str:
    """Through the Aadhaar OTP and the mobile (its own OTP when it is another number), each step its own client."""
    sealed = await start(server, backend, aadhaar)
    otp = server.hpr.last_otp(txn_of(server, sealed))
    sealed, step, _ = await backend.step(sealed, lambda f: f.verify_otp(otp))
    assert step is Step.VERIFY_MOBILE
    sealed, step, _ = await backend.step(sealed, lambda f: f.verify_mobile(mobile))
    if mobile != server.hpr.linked_mobile(aadhaar):
        assert step is Step.VERIFY_MOBILE_OTP
        otp = server.hpr.last_otp(txn_of(server, sealed))
        sealed, step, _ = await backend.step(sealed, lambda f: f.verify_mobile_otp(otp))
    assert step is Step.CHECK_EXIST
    return sealed


def create(flow: HprRegistration, hpr_id: str) -> Any:
    return flow.create(
        hpr_id,
        password=PASSWORD,
        email=EMAIL,
        hp_category_code=1,
        hp_sub_category_code=2,
        first_name="Asha",
        last_name="Verma",
        pincode="560001",
    )


def assert_nothing_secret(blobs: list[str], *secrets: str) -> None:
    for blob in blobs:
        for secret in secrets:
            assert secret not in blob


# ----------------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("other_mobile", [False, True], ids=["same-mobile", "other-mobile"])
async def test_a_professional_registers_resumed_between_every_step(
    server: FakeHealthServer, caplog: pytest.LogCaptureFixture, other_mobile: bool
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    aadhaar = server.data.valid_aadhaar[0]
    mobile = OTHER_MOBILE if other_mobile else server.hpr.linked_mobile(aadhaar)
    backend = Backend(server)
    sealed = await to_check_exist(server, backend, aadhaar, mobile)
    sealed, step, _ = await backend.step(sealed, lambda f: f.check_exist())
    assert step is Step.CREATE
    sealed, free, _ = await backend.step(sealed, lambda f: f.suggest())
    assert free and all(isinstance(i, str) for i in free)
    sealed, available, _ = await backend.step(sealed, lambda f: f.check_available(free[0]))
    assert available is True
    sealed, account, flow = await backend.step(sealed, lambda f: create(f, free[0]))
    assert isinstance(account, HprAccount) and account.hpr_id == free[0]
    assert flow.next_step is Step.DONE and flow.hpr_id == free[0] and not flow.existed
    # what the registry received: the vendor's fields, the password once
    [created] = [r for r in server.requests if r.route == "hpr_create"]
    body = created.json
    assert body["password"] == PASSWORD and body["hprId"] == free[0] and body["hp_sub_category_code"] == 2
    assert body["first_name"] == "Asha" and body["pincode"] == "560001"
    assert all(r.headers.get("X-Hip-Id") == "hip-9" for r in server.requests if r.route.startswith("hpr_"))
    # a flow resumed at DONE from the sealed state knows the HPR ID; from the plain one it does not (not kept there)
    async with client_for(server) as client:
        assert client.hpr.resume(sealed, seal=KEY).hpr_id == free[0]
        assert client.hpr.resume(backend.plain[-1]).hpr_id is None
        with pytest.raises(E.InvalidFlowStep, match="DONE"):
            await client.hpr.resume(sealed, seal=KEY).check_exist()
    # nothing secret in any state (sealed bytes searched as they are; plain states as JSON text) or log line
    otps = [str(o["otp"]) for o in server.otps]
    plain_text = [repr(p) for p in backend.plain]
    assert_nothing_secret(backend.sealed + plain_text, aadhaar, mobile, PASSWORD, *otps)
    assert_nothing_secret(plain_text, free[0])
    assert_nothing_secret([caplog.text], aadhaar, mobile, PASSWORD, *otps, free[0])
    assert server.calls("hpr_mobile_init") == (1 if other_mobile else 0)


async def test_an_existing_professional_ends_at_check_exist(server: FakeHealthServer) -> None:
    aadhaar = server.data.valid_aadhaar[-1]  # the fake's seeded holder of asha.verma@hpr.abdm
    backend = Backend(server)
    sealed = await to_check_exist(server, backend, aadhaar, server.hpr.linked_mobile(aadhaar))
    sealed, step, flow = await backend.step(sealed, lambda f: f.check_exist())
    assert step is Step.DONE and flow.existed and flow.hpr_id == "asha.verma@hpr.abdm"
    assert flow.profile is not None and flow.profile.exists
    assert server.calls("hpr_suggest") == 0 and server.calls("hpr_create") == 0
    async with client_for(server) as client:
        again = client.hpr.resume(sealed, seal=KEY)
        assert again.existed and again.hpr_id == "asha.verma@hpr.abdm"
        with pytest.raises(E.InvalidFlowStep, match="nothing sent"):
            await create(again, "someone.else")
    assert server.calls("hpr_create") == 0


# ----------------------------------------------------------------------------------- the lost create


async def test_a_lost_create_is_outcome_unknown_and_never_repeated(server: FakeHealthServer) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    backend = Backend(server)
    sealed = await to_check_exist(server, backend, aadhaar, server.hpr.linked_mobile(aadhaar))
    sealed, _, _ = await backend.step(sealed, lambda f: f.check_exist())
    server.inject("hpr_create", Fault(status=502, times=1))
    async with client_for(server) as client:
        flow = client.hpr.resume(sealed, seal=KEY)
        with pytest.raises(E.OutcomeUnknown):
            await create(flow, "asha.new1")
        assert server.calls("hpr_create") == 1  # not retried, though NO_WAIT allows 4 attempts
        assert flow.create_outcome_unknown and flow.next_step is Step.CREATE
        sealed = backend.keep(flow)
    # next request: the flow asks check/exist first; nothing was created (the 502 came first): the create is sent
    sealed, account, flow = await backend.step(sealed, lambda f: create(f, "asha.new1"))
    assert account.hpr_id == "asha.new1@hpr.abdm" and flow.next_step is Step.DONE
    assert server.calls("hpr_create") == 2 and not flow.create_outcome_unknown
    checks = [r.route for r in server.requests if r.route in ("hpr_check_exist", "hpr_create")]
    assert checks[-3:] == ["hpr_create", "hpr_check_exist", "hpr_create"]


async def test_a_lost_create_that_took_effect_ends_the_flow_without_a_second_create(server: FakeHealthServer) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    backend = Backend(server)
    sealed = await to_check_exist(server, backend, aadhaar, server.hpr.linked_mobile(aadhaar))
    sealed, _, _ = await backend.step(sealed, lambda f: f.check_exist())
    server.inject("hpr_create", Fault(drop=True, times=1))
    async with client_for(server) as client:
        flow = client.hpr.resume(sealed, seal=KEY)
        with pytest.raises(E.OutcomeUnknown):
            await create(flow, "asha.new1")
        sealed = backend.keep(flow)
    server.hpr.add_account("asha.new1", aadhaar=aadhaar)  # the registry did create it: only the answer was lost
    sealed, account, flow = await backend.step(sealed, lambda f: create(f, "another.name"))
    assert server.calls("hpr_create") == 1
    assert flow.next_step is Step.DONE and flow.hpr_id == "asha.new1@hpr.abdm" and not flow.existed
    assert account.hpr_id == "asha.new1@hpr.abdm" and account.new is None


async def test_a_cancelled_create_counts_as_unknown(server: FakeHealthServer) -> None:
    import asyncio

    aadhaar = server.data.valid_aadhaar[0]
    backend = Backend(server)
    sealed = await to_check_exist(server, backend, aadhaar, server.hpr.linked_mobile(aadhaar))
    sealed, _, _ = await backend.step(sealed, lambda f: f.check_exist())
    server.inject("hpr_create", Fault(latency=5, times=1))
    async with client_for(server) as client:
        flow = client.hpr.resume(sealed, seal=KEY)
        task = asyncio.ensure_future(create(flow, "asha.new1"))
        while server.calls("hpr_create") == 0:  # noqa: ASYNC110 - the fake's record, polled
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert flow.create_outcome_unknown
        assert flow.to_state()["create_outcome_unknown"] is True


# ----------------------------------------------------------------------------------- the rules


async def test_out_of_step_bad_input_and_wrong_otp_send_nothing_or_keep_the_step(server: FakeHealthServer) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    async with client_for(server) as client:
        with pytest.raises(E.InvalidAadhaarNumber):
            await client.hpr.register("1234")
        assert server.calls("hpr_aadhaar_init") == 0
        flow = await client.hpr.register(aadhaar)
        before = len(server.requests)
        with pytest.raises(E.InvalidFlowStep, match="VERIFY_OTP"):
            await flow.verify_mobile(OTHER_MOBILE)
        with pytest.raises(E.InvalidFlowStep):
            await create(flow, "asha.new1")
        with pytest.raises(E.InvalidOtp):
            await flow.verify_otp("12")
        assert len(server.requests) == before
        otp = server.hpr.last_otp(flow.to_state()["txn_id"])
        with pytest.raises(E.OtpMismatch):
            await flow.verify_otp(f"{(int(otp) + 1) % 1_000_000:06d}")
        assert flow.next_step is Step.VERIFY_OTP
        assert await flow.verify_otp(otp) is Step.VERIFY_MOBILE
        with pytest.raises(E.InvalidMobileNumber):
            await flow.verify_mobile("12345")
        assert flow.next_step.name == "VERIFY_MOBILE"
        assert "Step" not in repr(flow) and repr(flow) == "HprRegistration(next_step=VERIFY_MOBILE)"


async def test_a_taken_hpr_id_keeps_the_flow_at_create(server: FakeHealthServer) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    backend = Backend(server)
    sealed = await to_check_exist(server, backend, aadhaar, server.hpr.linked_mobile(aadhaar))
    sealed, _, _ = await backend.step(sealed, lambda f: f.check_exist())
    async with client_for(server) as client:
        flow = client.hpr.resume(sealed, seal=KEY)
        with pytest.raises(E.AbhaError) as caught:
            await create(flow, "ravi.kumar")  # seeded: taken
        assert caught.value.source_code == "HPR-1101"
        assert flow.next_step is Step.CREATE and not flow.create_outcome_unknown
        assert await flow.check_available("ravi.kumar") is False


async def test_a_rate_limit_blocks_the_flow(server: FakeHealthServer) -> None:
    async with client_for(server) as client:
        flow = await client.hpr.register(server.data.valid_aadhaar[0])
        otp = server.hpr.last_otp(flow.to_state()["txn_id"])
        wrong = f"{(int(otp) + 1) % 1_000_000:06d}"
        for _ in range(server.hpr.max_otp_attempts):
            with pytest.raises(E.OtpMismatch):
                await flow.verify_otp(wrong)
        with pytest.raises(E.AbhaRateLimited):
            await flow.verify_otp(wrong)
        assert flow.next_step is Step.BLOCKED and flow.blocked_until is not None


async def test_states_that_are_not_one_are_refused(server: FakeHealthServer) -> None:
    async with client_for(server) as client:
        flow = await client.hpr.register(server.data.valid_aadhaar[0])
        state = flow.to_state()
        with pytest.raises(E.InvalidRequest, match=r"state\.kind"):
            client.hpr.resume({**state, "kind": "login"})
        with pytest.raises(E.InvalidRequest, match=r"state\.step"):
            client.hpr.resume({**state, "step": "nowhere"})
        with pytest.raises(E.InvalidRequest, match=r"state\.secrets"):
            client.hpr.resume({**state, "secrets": {"hpr_id": "x"}})
        with pytest.raises(E.InvalidRequest, match=r"state\.headers"):
            client.hpr.resume({**state, "headers": {"Authorization": "x"}})
        # a sealed ABHA flow never opens as an HPR registration (each family seals under its own purpose)
        abha = await client.abha.register_with_aadhaar(server.data.valid_aadhaar[0])
        with pytest.raises(E.FlowStateInvalid):
            client.hpr.resume(abha.to_state(seal=KEY), seal=KEY)
        assert client.hpr.resume(flow.to_state(seal=KEY), seal=KEY).next_step is Step.VERIFY_OTP
