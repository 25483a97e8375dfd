"""Which patient an ABDM call names: a call that names its patient in the body (a link, an SMS notification, a
consent request) never sends the client's default ``user_id`` / ``partner_user_id`` as ``X-Pt-Id`` /
``X-Partner-Pt-Id`` (the service would file it under the default patient); a per-call ``oid=`` /
``partner_user_id=`` is still sent, and so is the client's ``partner_hip_id`` (the facility, not a patient).
``linked_care_contexts`` without any patient is refused before anything is sent."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import health_async as ha
from health_async.models import CareContext, ConsentPurpose, HiType
from health_async.testing import FakeHealthServer
from health_async.testing._common import RecordedRequest

NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
VISIT = CareContext("visit-1", "OP visit", HiType.OP_CONSULTATION)
NOW = dt.datetime.now(dt.UTC)

Call = Callable[[ha.HealthClient], Awaitable[Any]]


@pytest.fixture
async def defaults_client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    """A client with a default patient (``user_id``, ``partner_user_id``) and a default facility."""
    async with ha.HealthClient(
        base_url=server.url,
        token=server.token,
        client_id=server.client_id,
        retry=NO_WAIT,
        user_id="oid-default",
        partner_user_id="partner-default",
        partner_hip_id="HIP-9",
    ) as c:
        yield c


def _create(**options: Any) -> Call:
    def call(client: ha.HealthClient) -> Awaitable[Any]:
        return client.abdm.consents.create(
            "b.patient@sbx",
            purpose=ConsentPurpose.CARE_MANAGEMENT,
            hi_types=[HiType.PRESCRIPTION],
            start=NOW - dt.timedelta(days=30),
            end=NOW,
            expiry=NOW + dt.timedelta(days=7),
            **options,
        )

    return call


#: (route, the call naming another patient in its body) for every such ABDM call.
NAMING_ANOTHER: list[tuple[str, Call]] = [
    ("care_contexts_link", lambda c: c.abdm.link_care_contexts([VISIT], abha_address="b.patient@sbx")),
    ("care_contexts_notify", lambda c: c.abdm.notify_unlinked("9876543210")),
    ("consents_create", _create()),
    ("consents_list", lambda c: c.abdm.consents.list(abha_address="b.patient@sbx")),
    ("consents_list", lambda c: c.abdm.consents.list(patient_oid="oid-b")),
    ("consents_details", lambda c: c.abdm.consents.details("consent-1", abha_address="b.patient@sbx")),
]


def _last(server: FakeHealthServer, route: str) -> RecordedRequest:
    return [r for r in server.requests if r.route == route][-1]


@pytest.mark.parametrize(("route", "call"), NAMING_ANOTHER, ids=[f"{r}-{i}" for i, (r, _) in enumerate(NAMING_ANOTHER)])
async def test_a_call_naming_another_patient_sends_no_default_patient(
    server: FakeHealthServer, defaults_client: ha.HealthClient, route: str, call: Call
) -> None:
    try:
        await call(defaults_client)
    except ha.ApiError:  # consents.details of an unknown consent: refused, but the headers were sent
        pass
    sent = _last(server, route)
    assert "X-Pt-Id" not in sent.headers
    assert "X-Partner-Pt-Id" not in sent.headers
    assert sent.headers["X-Hip-Id"] == "HIP-9"  # the facility, not a patient: the default still goes


#: The same calls, each given the patient's ids explicitly: those are sent.
EXPLICIT: list[tuple[str, Call]] = [
    (
        "care_contexts_link",
        lambda c: c.abdm.link_care_contexts([VISIT], abha_address="b@sbx", oid="oid-b", partner_user_id="partner-b"),
    ),
    ("consents_create", _create(oid="oid-b", partner_user_id="partner-b")),
    ("consents_list", lambda c: c.abdm.consents.list(patient_oid="oid-b", oid="oid-b", partner_user_id="partner-b")),
]


@pytest.mark.parametrize(("route", "call"), EXPLICIT, ids=[r for r, _ in EXPLICIT])
async def test_an_explicit_oid_is_still_sent(
    server: FakeHealthServer, defaults_client: ha.HealthClient, route: str, call: Call
) -> None:
    await call(defaults_client)
    sent = _last(server, route)
    assert sent.headers["X-Pt-Id"] == "oid-b"
    assert sent.headers["X-Partner-Pt-Id"] == "partner-b"


async def test_a_link_for_another_patient_is_not_listed_under_the_default_one(
    server: FakeHealthServer, defaults_client: ha.HealthClient
) -> None:
    await defaults_client.abdm.link_care_contexts([VISIT], abha_address="b.patient@sbx")
    assert list(server.abdm.links) == ["b.patient@sbx"]
    assert server.abdm.links["b.patient@sbx"]["visit-1"]["oid"] is None  # not the default patient's OID
    assert await defaults_client.abdm.linked_care_contexts("HIP-9") == ()


async def test_calls_that_name_no_patient_still_send_the_default(
    server: FakeHealthServer, defaults_client: ha.HealthClient
) -> None:
    await defaults_client.abdm.consents.list()  # the caller's own consents: its user
    assert _last(server, "consents_list").headers["X-Pt-Id"] == "oid-default"
    await defaults_client.abdm.linked_care_contexts("HIP-9")
    assert _last(server, "care_contexts_linked").headers["X-Pt-Id"] == "oid-default"


async def test_linked_care_contexts_without_a_patient_is_refused_before_sending(server: FakeHealthServer) -> None:
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id) as anonymous:
        with pytest.raises(ha.InvalidRequest, match=r"needs the patient: pass oid= .* user_id="):
            await anonymous.abdm.linked_care_contexts("HIP-1")
        assert server.calls("care_contexts_linked") == 0
        assert await anonymous.abdm.linked_care_contexts("HIP-1", oid="oid-b") == ()  # a patient named: sent
        assert server.calls("care_contexts_linked") == 1
