"""client.patients and client.profiles.update against the FakeHealthServer: calls, input rules, the no-retry rule
of create, list stop conditions, hidden personal data, the vendor's OpenAPI examples, and the CLI."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from health_async import HealthClient, RetryPolicy
from health_async._wire import structure
from health_async.errors import (
    ApiError,
    InvalidAbhaAddress,
    InvalidArgumentType,
    InvalidMobileNumber,
    InvalidRequest,
    NotFoundError,
    OutcomeUnknown,
    PaginationError,
    ProfileNotFound,
    ResponseValidationError,
    ServerError,
    TransportError,
)
from health_async.models import Patient, PatientCreated, PatientPage, Profile
from health_async.models.patients._patients import structure_patients
from health_async.testing import FakeHealthServer, Fault

EXAMPLES: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "patient_directory_examples.json").read_text()
)
MOBILE = "9876543210"
DOB = dt.date(1990, 4, 17)


def _create_kwargs(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "first_name": "Lakshmi",
        "last_name": "Venkataraman",
        "dob": DOB,
        "gender": "F",
        "mobile": "+91 98765 43210",
    }
    kwargs.update(overrides)
    return kwargs


def _last(server: FakeHealthServer, route: str) -> Any:
    return [r for r in server.requests if r.route == route][-1]


def _fake_patient(n: int) -> dict[str, Any]:
    return {"oid": f"1000{n:011d}", "fln": f"patient {n}", "mobile": "9000000000", "username": f"U{n}"}


# ---------------------------------------------------------------------------------------------- calls


async def test_create_sends_wire_names_and_returns_the_oid(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    created = await health_client.patients.create(
        **_create_kwargs(email="Lakshmi.V@Example.in", blood_group="O+", username="UH90001", extras={"ward": "b2"})
    )
    assert isinstance(created, PatientCreated)
    rec = _last(fake_health_server, "patient_create")
    assert rec.status == 201
    assert rec.headers["client-id"] == fake_health_server.client_id
    assert rec.json == {
        "fn": "Lakshmi",
        "ln": "Venkataraman",
        "dob": "1990-04-17",
        "gen": "F",
        "bloodgroup": "O+",
        "mobile": "+919876543210",
        "email": "Lakshmi.V@Example.in",
        "username": "UH90001",
        "extras": {"ward": "b2"},
    }
    patient = await health_client.patients.get(created.oid)
    assert patient.oid == created.oid
    assert (patient.first_name, patient.last_name, patient.full_name) == (
        "lakshmi",
        "venkataraman",
        "lakshmi venkataraman",
    )
    assert patient.date_of_birth == DOB
    assert (patient.gender, patient.blood_group, patient.country_code, patient.mobile) == ("F", "O+", "+91", MOBILE)
    assert patient.email == "lakshmi.v@example.in"
    assert patient.extras == {"ward": "b2"}


async def test_create_with_full_name(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    created = await health_client.patients.create(full_name="Ravi Shankar Iyer", dob=DOB, gender="M")
    assert _last(fake_health_server, "patient_create").json == {
        "fln": "Ravi Shankar Iyer",
        "dob": "1990-04-17",
        "gen": "M",
    }
    patient = await health_client.patients.get(created.oid)
    assert (patient.first_name, patient.middle_name, patient.last_name) == ("ravi", "shankar", "iyer")


async def test_get_unknown_and_archived(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    with pytest.raises(NotFoundError):
        await health_client.patients.get("999999999999999")
    oid = fake_health_server.patients.oids[0]
    await health_client.patients.archive(oid)
    with pytest.raises(NotFoundError):
        await health_client.patients.get(oid)
    patient = await health_client.patients.get(oid, include_archived=True)
    assert patient.oid == oid and patient.archived is True
    assert _last(fake_health_server, "patient_get").query == [("arc", "true")]


async def test_archive_is_idempotent_and_retried(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    oid = fake_health_server.patients.oids[1]
    fake_health_server.inject("patient_archive", Fault(status=503, times=1))
    await health_client.patients.archive(oid)
    assert fake_health_server.calls("patient_archive") == 2
    await health_client.patients.archive(oid)  # archiving again is harmless
    assert fake_health_server.patients.directory[oid]["arc"] is True
    assert oid not in [p.oid async for p in health_client.patients.list()]
    with pytest.raises(NotFoundError):
        await health_client.patients.archive("999999999999999")


async def test_update_sends_only_the_given_fields(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    oid = fake_health_server.patients.oids[2]
    before = dict(fake_health_server.patients.directory[oid])
    await health_client.patients.update(oid, mobile="098765 43210", dob=dt.date(1985, 1, 31))
    rec = _last(fake_health_server, "patient_update")
    assert rec.method == "PATCH" and rec.json == {"mobile": "+919876543210", "dob": "1985-01-31"}
    patient = await health_client.patients.get(oid)
    assert (patient.mobile, patient.date_of_birth) == (MOBILE, dt.date(1985, 1, 31))
    assert patient.full_name == before["fln"] and patient.gender == before["gen"]


async def test_update_is_retried_as_idempotent(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    oid = fake_health_server.patients.oids[3]
    fake_health_server.inject("patient_update", Fault(status=503, times=1))
    fake_health_server.inject("patient_update", Fault(drop=True, times=1))
    await health_client.patients.update(oid, gender="O", blood_group="AB-")
    assert fake_health_server.calls("patient_update") == 3
    assert _last(fake_health_server, "patient_update").json == {"gen": "O", "bloodgroup": "AB-"}
    assert (await health_client.patients.get(oid)).blood_group == "AB-"


async def test_update_unknown_patient(health_client: HealthClient) -> None:
    with pytest.raises(NotFoundError):
        await health_client.patients.update("999999999999999", gender="M")


async def test_search_by_username_name_and_mobile(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    found = await health_client.patients.search("UH0000", limit=5)
    assert len(found) == 5 and all(isinstance(p, Patient) for p in found)
    assert {("prefix", "UH0000"), ("limit", "5")} <= set(_last(fake_health_server, "patient_search").query)
    first = fake_health_server.patients.directory[fake_health_server.patients.oids[0]]
    by_name = await health_client.patients.search(first["fln"].title(), limit=50)
    assert first["oid"] in {p.oid for p in by_name}
    by_mobile = await health_client.patients.search("+91" + first["mobile"][:6], fields=["date_of_birth", "gender"])
    assert first["oid"] in {p.oid for p in by_mobile}
    rec = _last(fake_health_server, "patient_search")
    assert ("prefix", first["mobile"][:6]) in rec.query and ("select", "dob,gen") in rec.query
    assert all(p.date_of_birth is not None and p.gender in ("M", "F", "O") for p in by_mobile)
    assert await health_client.patients.search("zzzz-nobody") == ()


async def test_by_mobile_finds_a_family_and_uses_the_documented_format(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    directory = fake_health_server.patients.directory
    counts: dict[str, int] = {}
    for p in directory.values():
        counts[p["mobile"]] = counts.get(p["mobile"], 0) + 1
    shared = next(m for m, n in counts.items() if n >= 2)
    single = next(m for m, n in counts.items() if n == 1)
    family = await health_client.patients.by_mobile(f"{shared[:5]} {shared[5:]}")
    assert _last(fake_health_server, "patient_by_mobile").query == [("mob", "+91" + shared)]
    assert {p.oid for p in family} == {oid for oid, p in directory.items() if p["mobile"] == shared}
    assert all(p.username and p.full_name for p in family)
    (one,) = await health_client.patients.by_mobile("0" + single, full_profile=True)
    assert one.workspace_id == fake_health_server.patients.workspace_id
    assert ("full_profile", "true") in _last(fake_health_server, "patient_by_mobile").query
    assert await health_client.patients.by_mobile("6000000001") == ()


async def test_by_mobile_raises_a_404_that_is_not_profile_not_found(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    # A wrong base URL must never read as "no such patient" (it would lead to a duplicate create).
    fake_health_server.inject("patient_by_mobile", Fault(status=404, body="404: Not Found"))
    with pytest.raises(NotFoundError):
        await health_client.patients.by_mobile(MOBILE)


async def test_by_username(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    (patient,) = await health_client.patients.by_username("UH00007")
    assert patient.username == "UH00007" and patient.date_of_birth is not None
    rec = _last(fake_health_server, "patient_by_username")
    assert rec.path == "/profiles/v1/patient/UH00007/username/" and rec.query == [("flatten", "true")]
    assert await health_client.patients.by_username("NOBODY") == ()


async def test_every_call_sends_the_client_id(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    patients = health_client.patients
    oid = fake_health_server.patients.oids[5]
    await patients.get(oid)
    await patients.search("UH")
    await patients.by_mobile(MOBILE)
    await patients.by_username("UH00001")
    await patients.update(oid, salutation="Dr")
    [p async for p in patients.list(page_size=2000)]
    await patients.create(**_create_kwargs())
    await patients.archive(oid)
    await health_client.profiles.update(fake_health_server.data.user_ids[0], salutation="Dr")
    recs = [r for r in fake_health_server.requests if r.route.startswith(("patient_", "profile_update"))]
    assert len({r.route for r in recs}) == 9
    assert all(r.headers.get("client-id") == fake_health_server.client_id for r in recs)


async def test_calls_without_client_id_are_refused_before_sending(fake_health_server: FakeHealthServer) -> None:
    async with HealthClient(base_url=fake_health_server.url, token=fake_health_server.token) as client:
        oid = "123456789012345"
        calls = [
            client.patients.create(**_create_kwargs()),
            client.patients.get(oid),
            client.patients.search("UH"),
            client.patients.by_mobile(MOBILE),
            client.patients.by_username("UH1"),
            client.patients.update(oid, gender="M"),
            client.patients.archive(oid),
            client.profiles.update(oid, gender="M"),
            client.profiles.get(oid),
        ]
        for call in calls:
            with pytest.raises(InvalidRequest, match="client-id"):
                await call
        with pytest.raises(InvalidRequest, match="client-id"):
            client.patients.list()
    assert fake_health_server.requests == []


# ---------------------------------------------------------------------------------------------- create: never twice


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        (Fault(status=503), ServerError),
        (Fault(status=500), ServerError),
        (Fault(status=504, retry_after=0), ServerError),
        (Fault(drop=True), TransportError),
        (Fault(truncate=True, status=201), TransportError),
    ],
    ids=["503", "500", "504-retry-after", "drop", "reset-mid-body"],
)
async def test_create_is_never_retried(
    health_client: HealthClient, fake_health_server: FakeHealthServer, fault: Fault, cause: type[Exception]
) -> None:
    fake_health_server.inject("patient_create", fault)
    with pytest.raises(OutcomeUnknown) as info:
        await health_client.patients.create(**_create_kwargs())
    assert isinstance(info.value.__cause__, cause)
    assert info.value.operation == "patient_create"
    assert fake_health_server.calls("patient_create") == 1
    assert MOBILE not in str(info.value)


async def test_create_ignores_retry_non_idempotent(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    fake_health_server.inject("patient_create", Fault(status=503))
    eager = RetryPolicy(attempts=5, base_delay=0, max_delay=0, jitter=0, retry_non_idempotent=True)
    with pytest.raises(OutcomeUnknown):
        await health_client.patients.create(**_create_kwargs(), retry=eager)
    assert fake_health_server.calls("patient_create") == 1


async def test_create_timeout_is_outcome_unknown(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    fake_health_server.inject("patient_create", Fault(latency=0.3))
    with pytest.raises(OutcomeUnknown):
        await health_client.patients.create(**_create_kwargs(), timeout=0.05)
    assert fake_health_server.calls("patient_create") == 1


async def test_a_refusal_is_a_definite_no(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    await health_client.patients.create(**_create_kwargs(username="UH77777"))
    with pytest.raises(ApiError) as info:
        await health_client.patients.create(**_create_kwargs(username="UH77777"))
    assert info.value.status == 409 and not isinstance(info.value, OutcomeUnknown)
    fake_health_server.inject("patient_create", Fault(status=400, body=EXAMPLES["error_400"]))
    with pytest.raises(ApiError) as info:
        await health_client.patients.create(**_create_kwargs())
    assert info.value.status == 400


@pytest.mark.parametrize("status", [504, None], ids=["504", "drop"])
async def test_readme_pattern_check_by_mobile_before_creating_again(
    health_client: HealthClient, fake_health_server: FakeHealthServer, status: int | None
) -> None:
    # The service stores the patient, then the answer is lost: the README's recovery finds it instead of
    # creating a duplicate.
    fake_health_server.patients.fail_after_create(status=status)
    kwargs = _create_kwargs(mobile="7012345678", first_name="Meenakshi")
    try:
        oid = (await health_client.patients.create(**kwargs)).oid
    except OutcomeUnknown:
        existing = [p for p in await health_client.patients.by_mobile(kwargs["mobile"]) if p.first_name == "meenakshi"
                    or (p.full_name or "").startswith("meenakshi")]  # fmt: skip
        oid = existing[0].oid if existing else (await health_client.patients.create(**kwargs)).oid
    assert fake_health_server.calls("patient_create") == 1
    matches = [p for p in fake_health_server.patients.directory.values() if p["mobile"] == "7012345678"]
    assert [p["oid"] for p in matches] == [oid]


# ---------------------------------------------------------------------------------------------- list


async def test_list_pages_lazily_and_yields_every_patient_once(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    iterator = health_client.patients.list(page_size=50)
    assert fake_health_server.calls("patient_list") == 0  # nothing sent before iterating
    first = await anext(iterator)
    assert fake_health_server.calls("patient_list") == 1
    rest = [p async for p in iterator]
    oids = [first.oid, *(p.oid for p in rest)]
    assert oids == list(fake_health_server.patients.directory)  # creation order, each once
    assert fake_health_server.calls("patient_list") == 3  # 50 + 50 + 20 (nextPage -1): no extra request
    queries = [dict(r.query) for r in fake_health_server.requests if r.route == "patient_list"]
    assert [q["pageNo"] for q in queries] == ["1", "2", "3"] and {q["pageSize"] for q in queries} == {"50"}
    assert all(p.full_name and p.username and p.mobile for p in [first, *rest])


async def test_list_stops_when_the_service_marks_the_last_page(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    fake_health_server.patients.populate(120)
    assert len([p async for p in health_client.patients.list(page_size=60)]) == 120
    assert fake_health_server.calls("patient_list") == 2  # the second page is full but says nextPage -1


async def test_list_stops_at_an_empty_page(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    body = {"profiles": [], "currPageMeta": {"currPageNo": 1, "pageSize": 10, "nextPage": 2}}
    fake_health_server.inject("patient_list", Fault(status=200, body=body))
    assert [p async for p in health_client.patients.list(page_size=10)] == []
    assert fake_health_server.calls("patient_list") == 1


async def test_list_without_meta_stops_at_a_short_page(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    full = {"profiles": [_fake_patient(n) for n in range(5)]}
    short = {"profiles": [_fake_patient(n) for n in range(5, 7)]}
    fake_health_server.inject("patient_list", Fault(status=200, body=full, times=1))
    fake_health_server.inject("patient_list", Fault(status=200, body=short, times=1))
    oids = [p.oid async for p in health_client.patients.list(page_size=5)]
    assert oids == [_fake_patient(n)["oid"] for n in range(7)]
    assert fake_health_server.calls("patient_list") == 2


async def test_list_follows_next_page_past_a_short_page(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    # A page the service filtered (archived ones removed) can be short and still not be the last.
    page1 = {"profiles": [_fake_patient(1)], "currPageMeta": {"currPageNo": 1, "pageSize": 5, "nextPage": 3}}
    page3 = {"profiles": [_fake_patient(3)], "currPageMeta": {"currPageNo": 3, "pageSize": 5, "nextPage": -1}}
    fake_health_server.inject("patient_list", Fault(status=200, body=page1, times=1))
    fake_health_server.inject("patient_list", Fault(status=200, body=page3, times=1))
    assert len([p async for p in health_client.patients.list(page_size=5)]) == 2
    assert [dict(r.query)["pageNo"] for r in fake_health_server.requests] == ["1", "3"]


async def test_list_uses_the_page_size_the_service_applied(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    capped = {"profiles": [_fake_patient(n) for n in range(3)], "currPageMeta": {"currPageNo": 1, "pageSize": 3}}
    fake_health_server.inject("patient_list", Fault(status=200, body=capped, times=1))
    fake_health_server.inject("patient_list", Fault(status=200, body={"profiles": []}, times=1))
    assert len([p async for p in health_client.patients.list(page_size=2000)]) == 3
    assert fake_health_server.calls("patient_list") == 2  # 3 of 2000 is not short: the service capped the size


async def test_list_raises_on_a_repeated_page(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    same = {"profiles": [_fake_patient(n) for n in range(4)]}  # a service ignoring pageNo
    fake_health_server.inject("patient_list", Fault(status=200, body=same))
    iterator = health_client.patients.list(page_size=4)
    seen = [(await anext(iterator)).oid for _ in range(4)]  # the first page is yielded
    with pytest.raises(PaginationError):
        await anext(iterator)  # its repeat is not: it would loop forever
    assert len(set(seen)) == 4 and fake_health_server.calls("patient_list") == 2


async def test_list_raises_on_pages_that_alternate(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    first = {"profiles": [_fake_patient(n) for n in range(2)]}  # a service ignoring pageNo: A, B, A, B, ...
    second = {"profiles": [_fake_patient(n) for n in range(2, 4)]}
    for _ in range(3):
        fake_health_server.inject("patient_list", Fault(status=200, body=first, times=1))
        fake_health_server.inject("patient_list", Fault(status=200, body=second, times=1))
    with pytest.raises(PaginationError, match="repeats an earlier page"):
        [p async for p in health_client.patients.list(page_size=2)]
    assert fake_health_server.calls("patient_list") == 3  # A, B, then A again: stopped


async def test_list_raises_when_next_page_points_back(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    body = {"profiles": [_fake_patient(1)], "currPageMeta": {"currPageNo": 1, "pageSize": 1, "nextPage": 1}}
    fake_health_server.inject("patient_list", Fault(status=200, body=body))
    with pytest.raises(PaginationError):
        [p async for p in health_client.patients.list(page_size=1)]
    assert fake_health_server.calls("patient_list") == 1


async def test_list_options_on_the_wire(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    archived = fake_health_server.patients.oids[-1]
    await health_client.patients.archive(archived)
    items = [
        p
        async for p in health_client.patients.list(
            page_size=2000, include_archived=True, created_after=1_700_000_000, fields=["date_of_birth", "created_at"]
        )
    ]
    query = dict(_last(fake_health_server, "patient_list").query)
    assert query == {"pageNo": "1", "pageSize": "2000", "select": "dob,c_ate", "from": "1700000000", "arc": "true"}
    assert len(items) == 119  # the first was created at exactly 1_700_000_000
    assert all(p.date_of_birth is not None and p.created_at is not None for p in items)
    assert [p.archived for p in items if p.oid == archived] == [True]
    pages = [page async for page in health_client.patients.pages(page_size=50, start_page=3)]
    assert len(pages) == 1 and isinstance(pages[0], PatientPage) and pages[0].is_last is True
    assert dict(_last(fake_health_server, "patient_list").query)["pageNo"] == "3"


async def test_list_oids_feed_a_concurrent_pipeline(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    async def oids() -> Any:
        async for p in health_client.patients.list(page_size=25):
            yield p.oid

    ids = [oid async for oid in oids()][:30]
    full = await asyncio.gather(*(health_client.patients.get(oid) for oid in ids))
    assert [p.oid for p in full] == ids and all(p.date_of_birth for p in full)


# ---------------------------------------------------------------------------------------------- input rules


_FUTURE = dt.date.today() + dt.timedelta(days=3)

CREATE_RULES: list[tuple[dict[str, Any], type[InvalidRequest], str]] = [
    ({"first_name": None, "last_name": None}, InvalidRequest, "needs a name"),
    ({"full_name": "Asha Rao"}, InvalidRequest, "not both"),
    ({"first_name": None, "last_name": "Rao"}, InvalidRequest, "need first_name"),
    ({"first_name": "   "}, InvalidRequest, "first_name must not be empty"),
    ({"first_name": 42}, InvalidRequest, "first_name must be a str"),
    ({"last_name": "Ra\x00o"}, InvalidRequest, "control characters"),
    ({"first_name": "A" * 129}, InvalidRequest, "at most 128"),
    ({"dob": "1990-04-17"}, InvalidRequest, "dob must be a datetime.date"),
    ({"dob": dt.datetime(1990, 4, 17, 10, 0)}, InvalidRequest, "dob must be a datetime.date"),
    ({"dob": _FUTURE}, InvalidRequest, "dob must not be in the future"),
    ({"dob": dt.date(1899, 12, 31)}, InvalidRequest, "before 1900"),
    ({"dob": None}, InvalidRequest, "dob must be a datetime.date, not None"),
    ({"gender": "f"}, InvalidRequest, "gender must be one of"),
    ({"gender": "Female"}, InvalidRequest, "gender must be one of"),
    ({"gender": None}, InvalidRequest, "gender must be a str, not None"),
    ({"mobile": "5876543210"}, InvalidMobileNumber, "start with 6, 7, 8 or 9"),
    ({"mobile": "98765 4321"}, InvalidMobileNumber, "10 digits"),
    ({"mobile": "+1 415 555 0100"}, InvalidMobileNumber, "Indian mobile"),
    ({"email": "lakshmi at example.in"}, InvalidRequest, "email must be an e-mail address"),
    ({"blood_group": "C+"}, InvalidRequest, "blood_group must be one of"),
    ({"abha": "not an abha"}, InvalidAbhaAddress, "ABHA address"),
    ({"username": ""}, InvalidRequest, "username must not be empty"),
    ({"salutation": "Honourable Justice"}, InvalidRequest, "salutation must be at most"),
    ({"extras": ["a"]}, InvalidRequest, "extras must be a mapping"),
    ({"extras": {"seventeen_chars_k": 1}}, InvalidRequest, "at most 16"),
    ({"extras": {"_hidden": 1}}, InvalidRequest, "must not start with '_'"),
    ({"extras": {"k": [[1]]}}, InvalidRequest, "nested lists"),
    ({"extras": {"k": [{"a": 1}]}}, InvalidRequest, "objects inside lists"),
    ({"extras": {"k": {"a": {"b": 1}}}}, InvalidRequest, "one level"),
    ({"extras": {"k": object()}}, InvalidRequest, "JSON strings, numbers"),
    ({"extras": {"k": math.nan}}, InvalidRequest, "finite"),
    ({"extras": {1: "a"}}, InvalidRequest, "keys must be non-empty strings"),
]


@pytest.mark.parametrize(("overrides", "error", "rule"), CREATE_RULES, ids=[r[2] for r in CREATE_RULES])
async def test_create_input_rules(
    health_client: HealthClient,
    fake_health_server: FakeHealthServer,
    overrides: dict[str, Any],
    error: type[InvalidRequest],
    rule: str,
) -> None:
    with pytest.raises(error, match=rule) as info:
        await health_client.patients.create(**_create_kwargs(**overrides))
    assert fake_health_server.calls("patient_create") == 0
    message = str(info.value)
    for value in overrides.values():
        if isinstance(value, str) and len(value.strip()) > 3:
            assert value not in message
        if isinstance(value, dt.date):
            assert value.isoformat() not in message and str(value.year) not in message


async def test_valid_edge_values_are_accepted(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    today = dt.date.today()
    extras = {"k": [1, "a", None, True], "nested": {"a": 1, "b": [2.5]}, "sixteen_chars_ok": "x"}
    await health_client.patients.create(**_create_kwargs(dob=today, gender="O", extras=extras, abha="asha.rao@abdm"))
    assert _last(fake_health_server, "patient_create").json["extras"] == extras


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"page_size": 0}, "page_size must be between 1 and 2000"),
        ({"page_size": 2001}, "page_size must be between 1 and 2000"),
        ({"page_size": "100"}, "page_size must be an int"),
        ({"page_size": True}, "page_size must be an int"),
        ({"start_page": 0}, "start_page must be between"),
        ({"fields": ["mobile_number"]}, "fields may only name"),
        ({"created_after": -1}, "created_after must be between"),
    ],
)
async def test_list_input_rules(
    health_client: HealthClient, fake_health_server: FakeHealthServer, kwargs: dict[str, Any], rule: str
) -> None:
    with pytest.raises(InvalidRequest, match=rule):
        health_client.patients.list(**kwargs)  # refused when called, before any iteration
    assert fake_health_server.calls("patient_list") == 0


@pytest.mark.parametrize("fields", [[["abha", "gender"]], [{"abha"}], ["abha", 5]], ids=["list", "set", "int"])
async def test_a_field_that_is_not_a_str_is_a_typed_refusal(
    health_client: HealthClient, fake_health_server: FakeHealthServer, fields: list[Any]
) -> None:
    with pytest.raises(InvalidArgumentType, match=r"fields\[\d\] must be a str"):
        await health_client.patients.search("UH", fields=fields)
    with pytest.raises(InvalidArgumentType, match=r"fields\[\d\] must be a str"):
        health_client.patients.pages(fields=fields)  # refused when called, before any iteration
    with pytest.raises(InvalidArgumentType, match=r"fields\[\d\] must be a str"):
        health_client.patients.list(fields=fields)
    assert fake_health_server.calls("patient_search") == 0 and fake_health_server.calls("patient_list") == 0


@pytest.mark.parametrize(
    ("prefix", "limit", "rule"),
    [
        ("", 10, "prefix must not be empty"),
        ("   ", 10, "prefix must not be empty"),
        ("x" * 65, 10, "prefix must be at most 64"),
        ("ab\ncd", 10, "control characters"),
        (None, 10, "prefix must be a str"),
        ("UH", 0, "limit must be between 1 and 50"),
        ("UH", 51, "limit must be between 1 and 50"),
        ("UH", True, "limit must be an int"),
    ],
)
async def test_search_input_rules(
    health_client: HealthClient, fake_health_server: FakeHealthServer, prefix: Any, limit: Any, rule: str
) -> None:
    with pytest.raises(InvalidRequest, match=rule):
        await health_client.patients.search(prefix, limit=limit)
    assert fake_health_server.calls("patient_search") == 0


async def test_lookup_and_update_input_rules(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    patients = health_client.patients
    with pytest.raises(InvalidMobileNumber) as info:
        await patients.by_mobile("12345")
    assert "12345" not in str(info.value)
    with pytest.raises(InvalidRequest, match="single path segment"):
        await patients.by_username("UH/0001")
    with pytest.raises(InvalidRequest, match="single path segment"):
        await patients.get("../emr-user/1")
    with pytest.raises(InvalidRequest, match="at least one field"):
        await patients.update("123456789012345")
    with pytest.raises(InvalidRequest, match="need first_name"):
        await patients.update("123456789012345", last_name="Rao")
    with pytest.raises(InvalidRequest, match="dob must not be in the future"):
        await patients.update("123456789012345", dob=_FUTURE)
    with pytest.raises(InvalidRequest, match="single path segment"):
        await patients.archive("a/b")
    assert fake_health_server.requests == []


# ---------------------------------------------------------------------------------------------- profiles.update


async def test_profile_update(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    oid = fake_health_server.data.user_ids[1]
    await health_client.profiles.update(
        oid, mobile="91-70123-45678", blood_group="AB+", full_name="Kavya Ramesh Nair", extras={"city": "Kochi"}
    )
    rec = _last(fake_health_server, "profile_update")
    assert rec.method == "PATCH" and rec.path == f"/profiles/v1/emr-user/{oid}"
    assert rec.json == {"fln": "Kavya Ramesh Nair", "bg": "AB+", "mobile": "+917012345678", "extras": {"city": "Kochi"}}
    profile = await health_client.profiles.get(oid)
    assert (profile.blood_group, profile.mobile) == ("AB+", "+917012345678")
    assert (profile.first_name, profile.last_name, profile.full_name) == ("kavya", "nair", "kavya ramesh nair")


async def test_profile_update_rules_and_not_found(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    oid = fake_health_server.data.user_ids[0]
    with pytest.raises(InvalidRequest, match="at least one field"):
        await health_client.profiles.update(oid)
    with pytest.raises(InvalidRequest, match="gender must be one of"):
        await health_client.profiles.update(oid, gender="male")  # type: ignore[arg-type]
    with pytest.raises(InvalidMobileNumber):
        await health_client.profiles.update(oid, mobile="12")
    assert fake_health_server.calls("profile_update") == 0
    with pytest.raises(ProfileNotFound):
        await health_client.profiles.update("999999999999999", gender="F")
    fake_health_server.inject("profile_update", Fault(status=502, times=1))
    await health_client.profiles.update(oid, dob=dt.date(1975, 6, 1))
    assert fake_health_server.calls("profile_update") == 3  # not found once, then 502 retried
    assert (await health_client.profiles.get(oid)).date_of_birth == dt.date(1975, 6, 1)


# ---------------------------------------------------------------------------------------------- models


def test_repr_hides_personal_data() -> None:
    patient = structure(EXAMPLES["get_response"], Patient)
    text = repr(patient) + str(patient)
    for secret in ("Eka", "User", "1201201201", "2000-01-02", "eka.user@example.com", "ABC001", "example@abdm", "B+"):
        assert secret not in text
    assert "175074536120088" not in text  # the OID is a person's id: hidden as well
    assert "77088166996724" in text  # the workspace is shown
    assert "Venkataraman" not in repr(Patient(oid="1", full_name="Venkataraman", extras={"k": "Venkataraman"}))


def test_vendor_examples_parse() -> None:
    patient = structure(EXAMPLES["get_response"], Patient)
    assert patient == Patient(
        oid="175074536120088",
        workspace_id="77088166996724",
        status="P",
        created_at=1750745358,
        updated_at=1750745358,
        gender="M",
        date_of_birth=dt.date(2000, 1, 2),
        dob_from_age=True,
        salutation="Mr.",
        first_name="Eka",
        last_name="User",
        full_name="Eka User",
        blood_group="B+",
        mobile="1201201201",
        country_code="+91",
        email="eka.user@example.com",
        username="ABC001",
        abha="example@abdm",
    )
    assert structure(EXAMPLES["create_response"], PatientCreated).oid == "1876816818618681"
    page = structure(EXAMPLES["list_response"], PatientPage)
    assert (page.page_no, page.page_size, page.next_page, page.is_last) == (1, 10, 2, False)
    (item,) = page.patients
    assert (item.oid, item.full_name, item.archived, item.updated_at) == (
        "175074536120088",
        "Test user",
        False,
        1750918049,
    )
    (hit,) = structure_patients(EXAMPLES["search_response"], "search")
    assert (hit.oid, hit.username, hit.mobile, hit.full_name) == ("17552615662165", "1111111111", "98765XXXXX", "Veena")
    (by_mobile,) = structure_patients(EXAMPLES["by_mobile_response"], "by-mobile")
    assert (by_mobile.username, by_mobile.country_code, by_mobile.status) == ("US0001", "+91", "P")
    assert structure_patients(EXAMPLES["by_username_response"], "by-username") == (patient,)
    profile = structure(EXAMPLES["emr_user_profile"], Profile)
    assert profile.mobile == "+911201201201" and profile.business_id == "77088166996724"


def test_models_tolerate_unknown_and_missing_fields() -> None:
    patient = structure({"oid": 175074536120088, "new_field": {"x": 1}, "dob": "", "bloodgroup": "O-"}, Patient)
    assert patient == Patient(oid="175074536120088", blood_group="O-")
    assert structure({"profiles": None}, PatientPage) == PatientPage()
    assert structure_patients({"profiles": [{"oid": "1"}]}, "search") == (Patient(oid="1"),)
    assert structure_patients(None, "search") == () == structure_patients({}, "by-mobile")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"fn": "Asha"}, "oid"),
        ({"oid": ""}, "oid"),
        ({"oid": "1", "dob": "17/04/1990"}, "dob"),
        ({"oid": "1", "fln": ["Asha"]}, "fln"),
        ({"oid": "1", "extras": "Asha"}, "extras"),
    ],
)
def test_bad_shapes_name_the_field_never_the_value(data: dict[str, Any], field: str) -> None:
    with pytest.raises(ResponseValidationError, match=f"field {field} ") as info:
        structure(data, Patient)
    assert "Asha" not in str(info.value) and "1990" not in str(info.value)
    with pytest.raises(ResponseValidationError):
        structure_patients("not a list", "search")


async def test_fake_accepts_the_vendor_request_examples(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    session = health_client._session
    body = {**EXAMPLES["create_request"], "dob": "2000-01-02"}
    created = await session.request("POST", "/profiles/v1/patient/", operation="t", json=body, idempotent=False)
    await session.request(
        "PATCH", f"/profiles/v1/patient/{created['oid']}", operation="t", json={**EXAMPLES["update_request"],
        "username": "UH0002"}, idempotent=True,
    )  # fmt: skip
    stored = fake_health_server.patients.directory[created["oid"]]
    assert (stored["fln"], stored["mobile"], stored["ccd"], stored["bg"]) == ("eka user", "6000000000", "+91", "A+")
    oid = fake_health_server.data.user_ids[0]
    answer = await session.request(
        "PATCH", f"/profiles/v1/emr-user/{oid}", operation="t", json=EXAMPLES["profile_update_request"], idempotent=True
    )
    assert answer == EXAMPLES["update_response"]


def test_fake_directory_is_seeded_deterministically() -> None:
    one, again, other = FakeHealthServer(seed=7), FakeHealthServer(seed=7), FakeHealthServer(seed=8)
    assert one.patients.directory == again.patients.directory
    assert one.patients.directory != other.patients.directory
    assert len(one.patients.directory) == 120
    assert len({p["username"] for p in one.patients.directory.values()}) == 120


# ---------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def cli_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    from tests.conftest import ServerThread

    with ServerThread(documents_per_user=1) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        yield srv


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    from health_async import cli

    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def test_cli_search_get_and_by_mobile(cli_server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = _run(capsys, "patients", "search", "UH0001", "--limit", "3")
    assert code == 0 and len(lines) == 3 and all(line["username"].startswith("UH0001") for line in lines)
    oid = lines[0]["oid"]
    code, (patient,), _ = _run(capsys, "patients", "get", oid)
    assert code == 0 and patient["oid"] == oid and patient["date_of_birth"] and patient["full_name"]
    mobile = cli_server.patients.directory[oid]["mobile"]
    code, lines, _ = _run(capsys, "patients", "by-mobile", mobile)
    assert code == 0 and oid in {line["oid"] for line in lines}


def test_cli_create(cli_server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["patients", "create", "--first-name", "Pooja", "--last-name", "Hegde", "--dob", "1992-11-05"]
    code, (created,), _ = _run(capsys, *argv, "--gender", "F", "--mobile", "8123456789", "--blood-group", "B-")
    assert code == 0
    stored = cli_server.patients.directory[created["oid"]]
    assert (stored["fln"], stored["dob"], stored["mobile"], stored["bg"]) == (
        "pooja hegde",
        "1992-11-05",
        "8123456789",
        "B-",
    )


def test_cli_create_refuses_bad_input_without_echoing_it(
    cli_server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        _run(capsys, "patients", "create", "--first-name", "Pooja", "--dob", "05/11/1992", "--gender", "F")
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "YYYY-MM-DD" in err and "05/11/1992" not in err
    code, _, err = _run(capsys, "patients", "create", "--first-name", "Pooja", "--dob", "1992-11-05", "--gender", "F",
                        "--mobile", "5123456789")  # fmt: skip
    assert code == 2 and "start with 6, 7, 8 or 9" in err and "5123456789" not in err
    assert cli_server.calls("patient_create") == 0


def test_cli_create_outcome_unknown(cli_server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    cli_server.inject("patient_create", Fault(status=503))
    argv = ["patients", "create", "--full-name", "Arjun Das", "--dob", "2001-01-01", "--gender", "M"]
    code, (line,), _ = _run(capsys, *argv)
    assert code == 1 and line["error"]["type"] == "OutcomeUnknown" and "by-mobile" in line["hint"]
    assert cli_server.calls("patient_create") == 1
