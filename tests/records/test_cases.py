"""``client.cases``: list (paged, incremental), create, update, delete over ``/mr/api/v1/cases``."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from health_async import HealthClient, RetryPolicy
from health_async.errors import ApiError, DocumentNotFound, InvalidRequest, NotFoundError, ResponseValidationError
from health_async.models import Case, HiType
from health_async.testing import FakeHealthServer, Fault

FAST = RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
WHEN = 1_678_886_400


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(documents_per_user=1, page_size=2) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id=server.data.user_ids[0], retry=FAST
    ) as c:
        yield c


def last_json(server: FakeHealthServer, route: str) -> Any:
    return [r for r in server.requests if r.route == route][-1].json


async def all_cases(client: HealthClient, **kwargs: Any) -> list[Case]:
    return [c async for c in client.cases.list(**kwargs)]


async def test_create_then_list(client: HealthClient, server: FakeHealthServer) -> None:
    case_id = await client.cases.create(
        case_id="CASE_1",
        display_name="Leg Injury",
        occurred_at=dt.datetime(2023, 3, 15, 13, 20, tzinfo=dt.UTC),
        hi_type=HiType.OP_CONSULTATION,
        case_type="OP",
        partner_meta={"facility_id": "GH", "uhid": "UHID_1234"},
    )
    assert case_id == "CASE_1"
    assert last_json(server, "case_create") == {
        "id": "CASE_1",
        "display_name": "Leg Injury",
        "occurred_at": 1_678_886_400,
        "hi_type": "OPConsultation",
        "type": "OP",
        "partner_meta": {"facility_id": "GH", "uhid": "UHID_1234"},
    }
    [case] = await all_cases(client)
    assert (case.case_id, case.status, case.deleted) == ("CASE_1", "A", False)
    assert case.display_name == "Leg Injury" and case.hi_type == HiType.OP_CONSULTATION and case.case_type == "OP"
    assert case.partner_meta == {"facility_id": "GH", "uhid": "UHID_1234"}
    assert case.occurred == dt.datetime(2023, 3, 15, 13, 20, tzinfo=dt.UTC)
    assert "Leg Injury" not in repr(case) and "UHID_1234" not in repr(case)  # health data and a hospital id


async def test_create_generates_an_id_when_none_is_given(client: HealthClient, server: FakeHealthServer) -> None:
    case_id = await client.cases.create(display_name="Fever", occurred_at=dt.date(2024, 1, 2))
    assert uuid.UUID(case_id).version == 4
    assert last_json(server, "case_create")["id"] == case_id
    assert last_json(server, "case_create")["occurred_at"] == 1_704_153_600


async def test_a_repeat_of_a_generated_id_meeting_409_is_success(
    client: HealthClient, server: FakeHealthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if a first attempt created the case and its answer was lost: the retry meets "already exists".
    fixed = uuid.UUID("12345678-1234-4234-8234-123456789abc")
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)  # the id cases.create generates
    await client.cases.create(display_name="Fever", occurred_at=WHEN)
    assert await client.cases.create(display_name="Fever", occurred_at=WHEN) == str(fixed)


async def test_a_given_id_that_exists_raises_409(client: HealthClient, server: FakeHealthServer) -> None:
    await client.cases.create(case_id="C1", display_name="Fever", occurred_at=WHEN)
    with pytest.raises(ApiError) as info:
        await client.cases.create(case_id="C1", display_name="Fever again", occurred_at=WHEN)
    assert info.value.status == 409


async def test_create_is_retried_as_idempotent(client: HealthClient, server: FakeHealthServer) -> None:
    server.inject("case_create", Fault(status=503, times=1))
    case_id = await client.cases.create(display_name="Fever", occurred_at=WHEN)
    assert server.calls("case_create") == 2
    assert [c.case_id for c in await all_cases(client)] == [case_id]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"display_name": "", "occurred_at": WHEN},
        {"display_name": "x" * 257, "occurred_at": WHEN},
        {"display_name": "Fever", "occurred_at": dt.datetime(2024, 1, 1)},  # naive
        {"display_name": "Fever", "occurred_at": "2024-01-01"},
        {"display_name": "Fever", "occurred_at": WHEN, "hi_type": "Consultation"},
        {"display_name": "Fever", "occurred_at": WHEN, "case_id": "a/b"},
        {"display_name": "Fever", "occurred_at": WHEN, "partner_meta": {"tags": {"a", "b"}}},
        {"display_name": "Fever", "occurred_at": WHEN, "partner_meta": {1: "x"}},
        {"display_name": "Fever", "occurred_at": WHEN, "case_type": "O\nP"},
        {"display_name": "Fever", "occurred_at": WHEN, "user_id": None},
        {"display_name": "Fever", "occurred_at": 10**16},  # milliseconds past the year 9999
        {"display_name": "Fever", "occurred_at": -(10**14)},  # seconds before the year 1
        {"display_name": "Fever", "occurred_at": 10**20},
        {"display_name": "Fever", "occurred_at": dt.datetime(6000, 1, 1, tzinfo=dt.UTC)},  # reads back as ms
    ],
)
async def test_create_refuses_bad_input_before_sending(
    kwargs: dict[str, Any], client: HealthClient, server: FakeHealthServer
) -> None:
    with pytest.raises(InvalidRequest):
        await client.cases.create(**kwargs)
    assert server.calls("case_create") == 0


async def test_occurred_at_in_milliseconds_is_sent_as_seconds_and_read_back(
    client: HealthClient, server: FakeHealthServer
) -> None:
    """The library's rule for epochs: an int above 10**11 is milliseconds. It used to be sent as it was, and the
    listed case's ``occurred`` then raised ValueError (year 55840)."""
    case_id = await client.cases.create(display_name="Leg injury", occurred_at=1_700_000_000_123)
    assert last_json(server, "case_create")["occurred_at"] == 1_700_000_000
    (case,) = [c for c in await all_cases(client) if c.case_id == case_id]
    assert case.occurred == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)
    await client.cases.update(case_id, occurred_at=1_600_000_000_000)
    assert last_json(server, "case_update")["occurred_at"] == 1_600_000_000
    with pytest.raises(InvalidRequest, match="out of range"):
        await client.cases.update(case_id, occurred_at=10**16)
    assert server.calls("case_update") == 1


@pytest.mark.parametrize(
    "meta",
    [{"score": float("nan")}, {"w": float("inf")}, {"deep": [{"w": -float("inf")}]}],
    ids=["nan", "inf", "nested"],
)
async def test_a_non_finite_partner_meta_number_is_refused_before_sending(
    meta: dict[str, Any], client: HealthClient, server: FakeHealthServer
) -> None:
    with pytest.raises(InvalidRequest, match="partner_meta numbers must be finite"):
        await client.cases.create(display_name="Fever", occurred_at=WHEN, partner_meta=meta)
    with pytest.raises(InvalidRequest, match="partner_meta numbers must be finite"):
        await client.cases.update("C1", partner_meta=meta)
    assert server.calls("case_create") == 0 and server.calls("case_update") == 0


async def test_update_sends_only_the_fields_given(client: HealthClient, server: FakeHealthServer) -> None:
    await client.cases.create(case_id="C1", display_name="Fever", occurred_at=WHEN, case_type="OP")
    await client.cases.update("C1", hi_type="Prescription")  # answered 204
    assert last_json(server, "case_update") == {"hi_type": "Prescription"}
    [case] = await all_cases(client)
    assert case.hi_type == "Prescription" and case.display_name == "Fever" and case.case_type == "OP"


async def test_update_needs_a_field(client: HealthClient, server: FakeHealthServer) -> None:
    with pytest.raises(InvalidRequest, match="at least one"):
        await client.cases.update("C1")
    assert server.calls("case_update") == 0


async def test_update_unknown_case_is_not_found(client: HealthClient, server: FakeHealthServer) -> None:
    with pytest.raises(NotFoundError) as info:
        await client.cases.update("nope", display_name="x")
    assert not isinstance(info.value, DocumentNotFound)  # a case, not a document


async def test_delete_keeps_the_case_listed_as_deleted(client: HealthClient, server: FakeHealthServer) -> None:
    await client.cases.create(case_id="C1", display_name="Fever", occurred_at=WHEN)
    before = (await all_cases(client))[0].updated_at
    await client.cases.delete("C1")  # answered 204
    [case] = await all_cases(client)
    assert case.deleted and case.display_name is None
    assert before is not None and case.updated_at is not None and case.updated_at > before
    with pytest.raises(NotFoundError):
        await client.cases.delete("C1")
    await client.cases.delete("C1", missing_ok=True)


async def test_list_pages_and_incremental_sync(client: HealthClient, server: FakeHealthServer) -> None:
    for i in range(5):
        await client.cases.create(case_id=f"C{i}", display_name=f"Case {i}", occurred_at=WHEN)
    cases = await all_cases(client)
    assert [c.case_id for c in cases] == [f"C{i}" for i in range(5)]  # ordered by updated_at
    assert server.calls("cases_list") == 3  # page size 2: followed lazily to the end
    since = cases[2].updated_at
    assert since is not None
    assert [c.case_id for c in await all_cases(client, updated_after=since)] == ["C3", "C4"]
    assert [r for r in server.requests if r.route == "cases_list"][-1].query[-1] == ("u_at__gt", str(since))


async def test_list_is_per_user(client: HealthClient, server: FakeHealthServer) -> None:
    await client.cases.create(case_id="C1", display_name="Fever", occurred_at=WHEN)
    assert await all_cases(client, user_id=server.data.user_ids[1]) == []
    with pytest.raises(InvalidRequest):
        await all_cases(client, user_id=None)


async def test_list_refuses_a_body_that_does_not_fit(client: HealthClient, server: FakeHealthServer) -> None:
    server.inject("cases_list", Fault(status=200, body={"cases": [{"id": "C1", "item": {"display_name": ["x"]}}]}))
    with pytest.raises(ResponseValidationError, match="display_name"):
        await all_cases(client)


async def test_list_retries_a_server_error(client: HealthClient, server: FakeHealthServer) -> None:
    server.inject("cases_list", Fault(status=500, times=2))
    assert await all_cases(client) == []
    assert server.calls("cases_list") == 3
