"""``documents.update`` (PATCH: only the fields given, vendor tag rules, dates as epoch seconds) and
``documents.delete`` (DELETE), against the fake server, which answers both with 200 and an empty body."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aioresponses import aioresponses

from health_async import HealthClient, RetryPolicy
from health_async.errors import DocumentNotFound, InvalidRequest, NotFoundError
from health_async.testing import FakeHealthServer, Fault

FAST = RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(documents_per_user=3) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id=server.data.user_ids[0], retry=FAST
    ) as c:
        yield c


@pytest.fixture
def doc_id(server: FakeHealthServer) -> str:
    return server.data.document_ids(server.data.user_ids[0])[0]


def sent(server: FakeHealthServer) -> Any:
    return [r for r in server.requests if r.route == "document_update"][-1].json


# ------------------------------------------------------------------------------------------------ update


async def test_update_sends_only_the_fields_given(client: HealthClient, server: FakeHealthServer, doc_id: str) -> None:
    await client.documents.update(doc_id, tags=["covid", "follow-up"])  # 200 + empty body: success
    assert sent(server) == {"tg": ["covid", "follow-up"]}
    rec = [r for r in server.requests if r.route == "document_update"][-1]
    assert rec.method == "PATCH" and rec.status == 200 and rec.headers["X-Pt-Id"] == server.data.user_ids[0]
    assert (await client.documents.describe(doc_id)).tags == ("covid", "follow-up")


async def test_update_every_field_maps_to_its_wire_name(
    client: HealthClient, server: FakeHealthServer, doc_id: str
) -> None:
    other = server.data.user_ids[1]
    await client.documents.update(
        doc_id, document_type="ps", date=1_614_556_800, tags=[], cases=["c1", "c2", "c1"], link_abha=True, owner=other
    )
    assert sent(server) == {
        "dt": "ps",
        "dd_e": 1_614_556_800,
        "tg": [],
        "cases": ["c1", "c2"],
        "ndhm": True,
        "oid": other,
    }
    moved = await client.documents.describe(doc_id, user_id=other)  # the owner changed
    assert moved.document_type == "ps" and moved.tags == () and moved.document_date_epoch == 1_614_556_800


async def test_update_with_nothing_to_change_sends_nothing(client: HealthClient, server: FakeHealthServer) -> None:
    with pytest.raises(InvalidRequest, match="at least one"):
        await client.documents.update("any-id")
    with pytest.raises(InvalidRequest, match="at least one"):
        await client.documents.update("any-id", tags=None, date=None)
    assert server.calls("document_update") == 0


@pytest.mark.parametrize(
    ("value", "epoch"),
    [
        (dt.datetime(2021, 3, 1, 5, 30, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))), 1_614_556_800),
        (dt.datetime(2021, 3, 1, tzinfo=dt.UTC), 1_614_556_800),
        (dt.datetime(2021, 3, 1, 0, 0, 0, 999_999, tzinfo=dt.UTC), 1_614_556_800),  # whole seconds
        (dt.date(2021, 3, 1), 1_614_556_800),  # midnight UTC
        (1_614_556_800, 1_614_556_800),
    ],
)
async def test_dates_go_as_epoch_seconds(
    value: Any, epoch: int, client: HealthClient, server: FakeHealthServer, doc_id: str
) -> None:
    await client.documents.update(doc_id, date=value)
    assert sent(server) == {"dd_e": epoch}
    assert type(sent(server)["dd_e"]) is int


@pytest.mark.parametrize("value", [dt.datetime(2021, 3, 1), "2021-03-01", 1.5, True])
async def test_bad_dates_are_refused(value: Any, client: HealthClient, server: FakeHealthServer, doc_id: str) -> None:
    with pytest.raises(InvalidRequest, match="date"):
        await client.documents.update(doc_id, date=value)
    assert server.calls("document_update") == 0


@pytest.mark.parametrize(
    ("tags", "rule"),
    [
        (["a"], "2 to 20"),
        (["x" * 21], "2 to 20"),
        ([""], "2 to 20"),
        ([f"tag{i}" for i in range(11)], "at most 10"),
        ("covid", "not one string"),
        ([3], "must be a str"),
    ],
)
async def test_tag_rules_are_checked_before_sending(
    tags: Any, rule: str, client: HealthClient, server: FakeHealthServer, doc_id: str
) -> None:
    with pytest.raises(InvalidRequest, match=rule) as info:
        await client.documents.update(doc_id, tags=tags)
    assert server.calls("document_update") == 0
    if isinstance(tags, list) and tags and isinstance(tags[0], str) and len(tags[0]) > 2:
        assert tags[0] not in str(info.value)  # the rule, never the value


async def test_tags_are_a_set_of_at_most_ten(client: HealthClient, server: FakeHealthServer, doc_id: str) -> None:
    tags = [f"tag{i}" for i in range(10)] * 2 + ["ab", "x" * 20]
    with pytest.raises(InvalidRequest):  # 12 distinct
        await client.documents.update(doc_id, tags=tags)
    await client.documents.update(doc_id, tags=[f"tag{i}" for i in range(10)] * 3)  # 30 given, 10 distinct: fine
    assert sent(server) == {"tg": [f"tag{i}" for i in range(10)]}
    await client.documents.update(doc_id, tags=["ab", "x" * 20])  # both bounds allowed
    assert sent(server) == {"tg": ["ab", "x" * 20]}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"document_type": "Lab Report"},
        {"link_abha": "yes"},
        {"owner": ""},
        {"owner": "a\r\nb"},
        {"cases": "one-case"},
        {"cases": ["ok", ""]},
    ],
)
async def test_bad_values_are_refused(
    kwargs: dict[str, Any], client: HealthClient, server: FakeHealthServer, doc_id: str
) -> None:
    with pytest.raises(InvalidRequest):
        await client.documents.update(doc_id, **kwargs)
    assert server.calls("document_update") == 0


async def test_update_unknown_document(client: HealthClient, server: FakeHealthServer) -> None:
    with pytest.raises(DocumentNotFound):
        await client.documents.update("no-such-document", tags=["lab"])
    assert server.calls("document_update") == 1  # a 404 is final


async def test_update_needs_a_user(server: FakeHealthServer, doc_id: str) -> None:
    async with HealthClient(base_url=server.url, token=server.token, retry=FAST) as c:
        with pytest.raises(InvalidRequest, match="user id"):
            await c.documents.update(doc_id, tags=["lab"])
    assert server.calls("document_update") == 0


async def test_update_is_retried_as_idempotent(client: HealthClient, server: FakeHealthServer, doc_id: str) -> None:
    server.inject("document_update", Fault(status=503, times=2))
    await client.documents.update(doc_id, tags=["lab"])
    assert server.calls("document_update") == 3


async def test_an_empty_200_answer_to_patch_is_success(mocked: aioresponses) -> None:
    # The live service's exact answer, without the fake server: 200, no body, no content type.
    url = "https://api.test.example/mr/api/v1/docs/doc-1"
    mocked.patch(url, status=200, body=b"", content_type="")
    async with HealthClient(base_url="https://api.test.example", token="t", user_id="u1", retry=FAST) as c:
        await c.documents.update("doc-1", document_type="lr")
    assert len(mocked.requests) == 1


# ------------------------------------------------------------------------------------------------ delete


async def test_delete(client: HealthClient, server: FakeHealthServer, doc_id: str) -> None:
    await client.documents.delete(doc_id)  # 200 + empty body: success
    rec = [r for r in server.requests if r.route == "document_delete"][-1]
    assert rec.method == "DELETE" and rec.status == 200
    with pytest.raises(DocumentNotFound):
        await client.documents.describe(doc_id)
    listed = [item.document_id async for item in client.documents.list()]
    assert doc_id not in listed


async def test_delete_unknown_document(client: HealthClient, server: FakeHealthServer) -> None:
    with pytest.raises(DocumentNotFound) as info:
        await client.documents.delete("no-such-document")
    assert isinstance(info.value, NotFoundError) and info.value.operation == "delete"
    await client.documents.delete("no-such-document", missing_ok=True)  # "not there" is what was asked for


async def test_delete_is_retried_as_idempotent(client: HealthClient, server: FakeHealthServer, doc_id: str) -> None:
    server.inject("document_delete", Fault(status=502, times=1))
    await client.documents.delete(doc_id)
    assert server.calls("document_delete") == 2


async def test_delete_refuses_an_id_that_is_not_one_segment(client: HealthClient, server: FakeHealthServer) -> None:
    with pytest.raises(InvalidRequest):
        await client.documents.delete("../profiles")
    assert server.calls("document_delete") == 0
