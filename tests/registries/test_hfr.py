"""client.hfr against the fake server: search, onboard and link with the vendor's method, path and body field names;
``register`` in the documented order (search; link when it exists, else onboard then link); refusals; input refused
before sending; onboard and link sent once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import errors as E
from health_async.models import Facility, HfrLinked, HfrOnboarded, HfrRegistration
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.registries._hfr import SEEDED_FACILITY

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
HFR = "/abdm/nhpr/v1/hfr"
NEW_FACILITY = "IN2910000777"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {"token": server.token, "client_id": server.client_id, "retry": NO_WAIT}
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with client_for(server, partner_hip_id="hip-9") as c:
        yield c


def routes(server: FakeHealthServer) -> list[tuple[str, str, str, Any]]:
    return [(r.route, r.method, r.path, r.json) for r in server.requests]


async def test_search_finds_a_facility(server: FakeHealthServer, client: ha.HealthClient) -> None:
    found = await client.hfr.search(SEEDED_FACILITY)
    assert isinstance(found, Facility) and found.facility_id == SEEDED_FACILITY
    assert found.facility_name == "Sunrise Multispeciality Hospital" and found.facility_status == "Approved"
    assert found.state_lgd_code == "29" and found.village_city_town_lgd_code == "803162"  # untyped: kept as text
    assert routes(server) == [("hfr_search", "GET", f"{HFR}/search/{SEEDED_FACILITY}", None)]
    assert server.requests[0].headers["X-Hip-Id"] == "hip-9"
    assert "Sunrise" in repr(found) and "MG Road" not in repr(found)


async def test_search_answers_none_for_a_facility_not_in_the_registry(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    assert await client.hfr.search(NEW_FACILITY) is None
    assert server.calls("hfr_search") == 1  # a 404 is an answer, not retried


async def test_register_links_a_facility_that_exists(server: FakeHealthServer, client: ha.HealthClient) -> None:
    done = await client.hfr.register("clinic-42", SEEDED_FACILITY)
    assert isinstance(done, HfrRegistration) and not done.was_onboarded
    assert done.facility is not None and done.facility.facility_id == SEEDED_FACILITY
    assert done.linked == HfrLinked(clinic_id="clinic-42", hfr_id=SEEDED_FACILITY)
    assert routes(server) == [
        ("hfr_search", "GET", f"{HFR}/search/{SEEDED_FACILITY}", None),
        ("hfr_link", "POST", f"{HFR}/link", {"clinic_id": "clinic-42", "hfr_id": SEEDED_FACILITY}),
    ]
    assert server.hfr.links == {"clinic-42": SEEDED_FACILITY}


async def test_register_onboards_then_links_a_facility_that_does_not_exist(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    done = await client.hfr.register(" clinic-42 ", NEW_FACILITY)
    assert done.was_onboarded and done.facility is None
    assert done.onboarded == HfrOnboarded(facility_id=NEW_FACILITY)
    assert routes(server) == [
        ("hfr_search", "GET", f"{HFR}/search/{NEW_FACILITY}", None),
        ("hfr_onboard", "POST", f"{HFR}/onboard", {"clinic_id": "clinic-42", "hfr_id": NEW_FACILITY}),
        ("hfr_link", "POST", f"{HFR}/link", {"clinic_id": "clinic-42", "hfr_id": NEW_FACILITY}),
    ]
    # once onboarded, the registry has it: a second registration only links
    again = await client.hfr.register("clinic-43", NEW_FACILITY)
    assert not again.was_onboarded and server.calls("hfr_onboard") == 1


async def test_onboard_and_link_one_by_one_and_their_refusals(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    with pytest.raises(E.AbhaError) as unknown:
        await client.hfr.link("clinic-42", NEW_FACILITY)
    assert unknown.value.source_code == "HFR-1404"
    onboarded = await client.hfr.onboard("clinic-42", NEW_FACILITY)
    assert onboarded.facility_id == NEW_FACILITY
    with pytest.raises(E.AbhaError) as taken:
        await client.hfr.onboard("clinic-42", NEW_FACILITY)
    assert taken.value.source_code == "HFR-1409"
    linked = await client.hfr.link("clinic-42", NEW_FACILITY)
    assert linked.hfr_id == NEW_FACILITY and linked.clinic_id == "clinic-42"


@pytest.mark.parametrize("route", ["hfr_onboard", "hfr_link"])
@pytest.mark.parametrize("fault", [Fault(status=503, times=1), Fault(drop=True, times=1)], ids=["503", "drop"])
async def test_onboard_and_link_are_sent_once(server: FakeHealthServer, route: str, fault: Fault) -> None:
    server.inject(route, Fault(status=fault.status, drop=fault.drop, times=1))
    async with client_for(server) as client:
        call = client.hfr.onboard if route == "hfr_onboard" else client.hfr.link
        hfr_id = NEW_FACILITY if route == "hfr_onboard" else SEEDED_FACILITY
        with pytest.raises(E.OutcomeUnknown) as info:
            await call("clinic-42", hfr_id)
    assert server.calls(route) == 1 and info.value.operation == route


async def test_register_after_a_lost_onboarding_is_safe_to_call_again(server: FakeHealthServer) -> None:
    server.inject("hfr_link", Fault(drop=True, times=1))
    async with client_for(server) as client:
        with pytest.raises(E.OutcomeUnknown):
            await client.hfr.register("clinic-42", NEW_FACILITY)  # onboarded; the link's answer lost
        again = await client.hfr.register("clinic-42", NEW_FACILITY)
    assert not again.was_onboarded and again.linked.hfr_id == NEW_FACILITY
    assert server.calls("hfr_onboard") == 1 and server.calls("hfr_link") == 2


async def test_search_is_retried_after_a_5xx(server: FakeHealthServer) -> None:
    server.inject("hfr_search", Fault(status=503, times=1))
    async with client_for(server) as client:
        assert await client.hfr.search(SEEDED_FACILITY) is not None
    assert server.calls("hfr_search") == 2


@pytest.mark.parametrize(
    ("clinic_id", "hfr_id"),
    [("clinic-42", "IN/2910"), ("clinic-42", ""), ("clinic-42", "IN 29"), ("", SEEDED_FACILITY), ("a b", "IN1")],
)
async def test_bad_ids_are_refused_before_sending(
    server: FakeHealthServer, client: ha.HealthClient, clinic_id: str, hfr_id: str
) -> None:
    with pytest.raises(E.InvalidRequest):
        await client.hfr.register(clinic_id, hfr_id)
    with pytest.raises(E.InvalidRequest):
        await client.hfr.onboard(clinic_id, hfr_id)
    assert server.requests == []
