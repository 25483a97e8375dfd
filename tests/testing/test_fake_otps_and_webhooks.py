"""The fake server's OTPs (every one it "sends" kept in ``server.otps``, answered by ``GET /_fake/otps``, printed
to stderr only with ``show_otps=True``) and ``server.webhooks(url, secret)`` (one target for every domain that sends
webhooks)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from health_async.testing import FakeHealthServer
from health_async.testing import _routes as R
from health_async.testing.abha._registration import SEEDED_MOBILE
from health_async.testing.webhooks._domain import WebhookDomain

OID = "oid-otp-1"
HIP = "IN2910000101"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


async def post(server: FakeHealthServer, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {server.token}", "X-Pt-Id": OID}
    async with (
        aiohttp.ClientSession() as http,
        http.post(server.url + path, json=body, headers=headers) as response,
    ):
        assert response.status < 300, (path, response.status, await response.text())
        answer = await response.json()
    assert isinstance(answer, dict)
    return answer


def last(server: FakeHealthServer) -> dict[str, str | None]:
    return server.otps[-1]


async def test_every_otp_the_fake_sends_is_kept_with_what_it_is_for(server: FakeHealthServer) -> None:
    abha, asha = server.abha, server.abha.accounts["asha.verma"]
    number = server.data.valid_aadhaar[0]
    started = await post(server, R.AADHAAR_INIT, {"aadhaar_number": number})
    masked = re.search(r"\*{6}[0-9]{4}", started["hint"])
    assert masked is not None
    assert last(server) == {"purpose": "ABHA registration", "to": f"mobile {masked.group(0)}", "otp": abha.last_otp()}
    await post(server, R.ABHA["aadhaar_resend"][1], {"txn_id": started["txn_id"]})
    assert last(server)["otp"] == abha.last_otp() and len(server.otps) == 2

    await post(server, R.ABHA["mobile_init"][1], {"mobile_number": SEEDED_MOBILE})
    assert last(server) == {
        "purpose": "ABHA registration",
        "to": f"mobile ******{SEEDED_MOBILE[-4:]}",
        "otp": abha.last_otp(),
    }
    await post(server, R.ABHA["login_init"][1], {"method": "phr_address", "identifier": asha.abha_address})
    assert last(server) == {"purpose": "ABHA login", "to": f"mobile ******{asha.mobile[-4:]}", "otp": abha.last_otp()}

    await post(server, R.SESSION_INIT, {"abha_address": asha.abha_address})
    assert last(server) == {
        "purpose": "ABHA user session",
        "to": f"mobile ******{asha.mobile[-4:]}",
        "otp": server.abha_kyc.last_otp(),
    }

    await post(server, R.PIN_FORGOT_INIT)
    assert last(server) == {
        "purpose": "consent PIN reset",
        "to": "mobile ******3210",
        "otp": server.abdm_consents.last_otp(),
    }

    server.abdm_discover.add_records(HIP, OID, ["CC-1"], patient_id="P-1")
    found = await post(server, R.DISCOVER, {"hip_id": HIP})
    await post(server, R.DISCOVER_LINK_INIT, {"txn_id": found["txn_id"], "patient_ref_id": "P-1", "cc_ref_id": "CC-1"})
    assert last(server) == {
        "purpose": f"a care context link at {HIP}",
        "to": None,
        "otp": server.abdm_discover.last_otp(),
    }
    assert len(server.otps) == 7

    async with aiohttp.ClientSession() as http, http.get(server.url + "/_fake/otps") as response:  # no token
        assert response.status == 200
        assert (await response.json()) == {"otps": server.otps}
    assert "otps" not in server._counts  # the fake's own debug route: not a route of the service

    server.reset()
    assert server.otps == []


async def test_nothing_is_printed_unless_show_otps(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert server.show_otps is False  # the class default: tests' output stays clean
    await post(server, R.AADHAAR_INIT, {"aadhaar_number": server.data.valid_aadhaar[0]})
    assert server.otps and capsys.readouterr().err == ""
    server.show_otps = True
    await post(server, R.AADHAAR_INIT, {"aadhaar_number": server.data.valid_aadhaar[1]})
    sent = last(server)
    assert capsys.readouterr().err == f"fake OTP for {sent['purpose']}, {sent['to']}: {sent['otp']}\n"


def test_webhooks_registers_one_target_for_every_domain_that_sends_them() -> None:
    server = FakeHealthServer()
    senders = [d for d in vars(server).values() if isinstance(d, WebhookDomain)]
    assert {type(d).__name__ for d in senders} == {"FakeAbdm", "FakeScanShare"}
    server.webhooks("http://127.0.0.1:9/hook", "whsec")
    assert all(d._target == ("http://127.0.0.1:9/hook", "whsec") for d in senders)
    assert server.abdm.webhooks_registered
    server.webhooks(None)
    assert all(d._target is None for d in senders)
    with pytest.raises(ValueError, match="loopback"):
        server.webhooks("http://example.com/hook", "whsec")
    with pytest.raises(ValueError, match="secret"):
        server.webhooks("http://127.0.0.1:9/hook")
