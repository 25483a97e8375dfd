"""Sealed flow states: ``to_state(seal=key)`` travels in a cookie, ``resume(state, seal=key)`` opens it, and a changed,
foreign or expired one is a typed error that shows neither the state nor the key."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pybase64
import pytest

import health_async as ha
from health_async.errors import FlowStateExpired, FlowStateInvalid, InvalidRequest
from health_async.models import FlowStep
from health_async.testing import FakeHealthServer

from .test_abha_flow import PROFILE, Clock, client_for

KEY = bytes(range(32))
MOBILE = "+91 81234 56789"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server) as c:
        yield c


async def test_a_sealed_state_resumes_on_another_client_and_the_flow_ends(server: FakeHealthServer) -> None:
    async with client_for(server) as first:
        reg = await first.abha.register_with_mobile(MOBILE)
        txn_id = reg.to_state()["txn_id"]
        cookie = reg.to_state(seal=KEY)
    assert isinstance(cookie, str) and cookie.isascii()
    assert all(c.isalnum() or c in "-_" for c in cookie)  # cookie-safe: URL-safe base64, no padding
    async with client_for(server) as second:  # another worker: nothing shared but the cookie and the key
        flow = second.abha.resume(cookie, seal=KEY)
        assert flow.next_step is FlowStep.VERIFY_OTP
        assert await flow.verify_otp(server.abha.last_otp(txn_id)) is FlowStep.CREATE_ADDRESS
        again = second.abha.resume(flow.to_state(seal=KEY), seal=KEY)
        account = await again.create("meera_k92@sbx", profile=PROFILE)
    assert account.created and account.abha_address == "meera_k92@sbx"


async def test_the_sealed_state_hides_what_it_holds(client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(MOBILE)
    state = reg.to_state()
    cookie = reg.to_state(seal=KEY)
    raw = pybase64.b64decode(cookie + "=" * (-len(cookie) % 4), altchars=b"-_")
    for secret in (state["txn_id"], state["hint"], "mobile_registration", "txn_id"):
        assert secret.encode() not in raw and secret not in cookie
    assert reg.to_state(seal=KEY) != cookie  # a fresh nonce each time


async def test_any_changed_byte_or_another_key_is_refused(client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(MOBILE)
    cookie = reg.to_state(seal=KEY)
    raw = bytearray(pybase64.b64decode(cookie + "=" * (-len(cookie) % 4), altchars=b"-_"))
    for index in range(0, len(raw), 7):
        changed = bytearray(raw)
        changed[index] ^= 0x01
        token = pybase64.urlsafe_b64encode(bytes(changed)).rstrip(b"=").decode()
        with pytest.raises(FlowStateInvalid) as info:
            client.abha.resume(token, seal=KEY)
        assert token not in str(info.value)
    for bad in (cookie[:-4], cookie[:10], "", "not*base64", cookie + "AAAA"):
        with pytest.raises(FlowStateInvalid):
            client.abha.resume(bad, seal=KEY)
    with pytest.raises(FlowStateInvalid) as info:
        client.abha.resume(cookie, seal=os.urandom(32))
    assert KEY.hex() not in str(info.value) and cookie not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no cryptography exception shows


async def test_a_sealed_state_expires(server: FakeHealthServer) -> None:
    clock = Clock()
    async with client_for(server) as client:
        reg = await client.abha.register_with_mobile(MOBILE, clock=clock)
        cookie = reg.to_state(seal=KEY, max_age=60)
        clock.advance(59)
        assert client.abha.resume(cookie, seal=KEY, clock=clock).next_step is FlowStep.VERIFY_OTP
        clock.advance(1)
        with pytest.raises(FlowStateExpired):
            client.abha.resume(cookie, seal=KEY, clock=clock)
        default = reg.to_state(seal=KEY)  # 30 minutes by default
        clock.advance(1799)
        client.abha.resume(default, seal=KEY, clock=clock)
        clock.advance(1)
        with pytest.raises(FlowStateExpired):
            client.abha.resume(default, seal=KEY, clock=clock)
    assert issubclass(FlowStateExpired, FlowStateInvalid) and issubclass(FlowStateInvalid, InvalidRequest)


async def test_the_key_and_the_forms_are_checked_before_anything(client: ha.HealthClient) -> None:
    reg = await client.abha.register_with_mobile(MOBILE)
    for key in (b"short", b"x" * 33, "a" * 32):
        with pytest.raises(InvalidRequest, match="seal must be"):
            reg.to_state(seal=key)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="max_age"):
        reg.to_state(seal=KEY, max_age=0)
    cookie = reg.to_state(seal=KEY)
    with pytest.raises(InvalidRequest, match="needs seal=key"):
        client.abha.resume(cookie)
    with pytest.raises(InvalidRequest, match="with seal=, state must be the str"):
        client.abha.resume(reg.to_state(), seal=KEY)
    with pytest.raises(InvalidRequest, match="seal must be"):
        client.abha.resume(cookie, seal=b"short")
