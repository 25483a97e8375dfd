"""describe_many, list and upload_many against a loopback server: order, errors, input kinds, bounds, cleanup."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

import health_async as ha
from health_async.models import DocumentListItem

from ..conftest import FAST_RETRY, Serve


class DocServer:
    """Describes any id as a small document; ids starting with ``missing`` are 404, ``broken`` are 500."""

    def __init__(self, delay: Callable[[str], float] = lambda _id: 0.0) -> None:
        self.delay = delay
        self.seen: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.times: list[tuple[float, str]] = []

    async def describe(self, request: web.Request) -> web.Response:
        doc_id = request.match_info["id"]
        self.seen.append(doc_id)
        self.times.append((time.monotonic(), doc_id))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay(doc_id):
                await asyncio.sleep(self.delay(doc_id))
        finally:
            self.in_flight -= 1
        if doc_id.startswith("missing"):
            return web.Response(status=404, text="No such document.")
        if doc_id.startswith("broken"):
            return web.Response(status=500)
        body = {"document_id": doc_id, "document_type": "lr", "tags": ["t"], "smart_report": {"verified": []}}
        return web.Response(body=orjson.dumps(body), content_type="application/json")


def bulk_tasks() -> int:
    """Live worker tasks of the bulk helpers (server-side connection tasks come and go, so count only ours)."""
    return sum(1 for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") == "_pool.<locals>.worker")


async def client_for(url: str, **kwargs: Any) -> ha.HealthClient:
    return ha.HealthClient(base_url=url, token="tok", user_id="oid-1", retry=FAST_RETRY, **kwargs)


@pytest.fixture
async def docs(serve: Serve) -> tuple[DocServer, str]:
    server = DocServer()
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): server.describe})
    return server, url


async def test_every_id_ends_in_a_document_or_a_typed_error(docs: tuple[DocServer, str]) -> None:
    server, url = docs
    ids = [f"doc-{i}" for i in range(40)] + ["missing-1", "broken-1", "bad/id"]
    async with await client_for(url) as client:
        results = {r.document_id: r async for r in client.documents.describe_many(ids, concurrency=8)}
    assert set(results) == set(ids)
    for i in range(40):
        r = results[f"doc-{i}"]
        assert r.ok and r.error is None and r.document is not None and r.document.document_id == f"doc-{i}"
    assert isinstance(results["missing-1"].error, ha.DocumentNotFound) and results["missing-1"].document is None
    assert isinstance(results["broken-1"].error, ha.ServerError)
    assert isinstance(results["bad/id"].error, ha.InvalidRequest)
    assert "bad/id" not in server.seen  # refused before sending
    assert server.seen.count("broken-1") == FAST_RETRY.attempts  # retried inside its own call


#: Bodies for one id each: what the fast decode takes, the vendor's shape (no id in the body), one for the tolerant
#: rules (numbers as strings, an id as a number) and one that fits no document.
ODD_BODIES: dict[str, Any] = {
    "fast": {"document_id": "fast", "smart_report": {"verified": [{"name": "H", "eka_id": "e"}]}},
    "noid": {"document_type": "lr", "tags": ["x"]},
    "odd": {
        "document_id": "odd",
        "document_date_epoch": "1614556800",
        "smart_report": {"verified": [{"id": "7", "eka_id": 42}]},
    },
    "unfit": {"document_id": "unfit", "files": "not a list"},
}


@pytest.mark.parametrize("ordered", [False, True])
async def test_each_body_reads_as_describe_reads_it_whatever_the_path(serve: Serve, ordered: bool) -> None:
    """describe_many decodes in its consumer (the workers keep the bytes): every kind of body gives what describe()
    gives, the one that fits no document is that id's error, and progress counts it as failed."""

    async def describe(request: web.Request) -> web.Response:
        return web.json_response(ODD_BODIES[request.match_info["id"]])

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe})
    seen: list[tuple[int, int, int | None]] = []
    ids = list(ODD_BODIES) * 3
    async with await client_for(url) as client:
        stream = client.documents.describe_many(ids, concurrency=4, ordered=ordered, progress=lambda *a: seen.append(a))
        results = [r async for r in stream]
        singles = {i: await client.documents.describe(i) for i in ("fast", "noid", "odd")}
        with pytest.raises(ha.ResponseValidationError, match="files"):
            await client.documents.describe("unfit")
    if ordered:
        assert [r.document_id for r in results] == ids
    for r in results:
        if r.document_id == "unfit":
            assert isinstance(r.error, ha.ResponseValidationError) and r.document is None and not r.ok
        else:
            assert r.ok and r.document == singles[r.document_id]
    assert singles["noid"].document_id == "noid"  # the id asked for, where the body has none
    item = singles["odd"].smart_report.verified[0]  # type: ignore[union-attr]
    assert (item.id, item.svc_id, singles["odd"].document_date_epoch) == (7, "42", 1614556800)
    assert seen[-1] == (12, 3, 12) and [d for d, _, _ in seen] == list(range(1, 13))


async def test_a_body_that_is_not_utf8_is_that_ids_typed_error(serve: Serve) -> None:
    """A string of the body that is not UTF-8 (msgspec raises UnicodeDecodeError for it) is a
    ResponseValidationError on every path: describe, and describe_many's consumer."""

    async def describe(request: web.Request) -> web.Response:
        return web.Response(body=b'{"document_id":"bad\xff"}', content_type="application/json")

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe})
    async with await client_for(url) as client:
        with pytest.raises(ha.ResponseValidationError, match="not JSON"):
            await client.documents.describe("d-1")
        results = [r async for r in client.documents.describe_many(["d-1", "d-2"], concurrency=2)]
    assert all(isinstance(r.error, ha.ResponseValidationError) for r in results)


async def test_ordered_yields_in_input_order_despite_latency(serve: Serve) -> None:
    server = DocServer(delay=lambda doc_id: 0.03 if doc_id.endswith(("0", "3")) else 0.0)
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): server.describe})
    ids = [f"doc-{i}" for i in range(30)]
    async with await client_for(url) as client:
        ordered = [r.document_id async for r in client.documents.describe_many(ids, concurrency=6, ordered=True)]
        unordered = [r.document_id async for r in client.documents.describe_many(ids, concurrency=6)]
    assert ordered == ids
    assert sorted(unordered) == sorted(ids)
    assert unordered != ids  # the slow ones came last: results are yielded as they complete


def _sync_gen() -> Iterator[str]:
    yield from ("a", "b", "c")


async def _async_gen() -> AsyncIterator[str]:
    for doc_id in ("a", "b", "c"):
        await asyncio.sleep(0)
        yield doc_id


@pytest.mark.parametrize(
    "make",
    [
        lambda: ["a", "b", "c"],
        lambda: ("a", "b", "c"),
        lambda: iter(["a", "b", "c"]),
        _sync_gen,
        _async_gen,
        lambda: [DocumentListItem(document_id=i) for i in "abc"],
    ],
    ids=["list", "tuple", "iterator", "generator", "async-generator", "list-items"],
)
async def test_input_kinds(docs: tuple[DocServer, str], make: Callable[[], Any]) -> None:
    _, url = docs
    async with await client_for(url) as client:
        got = sorted([r.document_id async for r in client.documents.describe_many(make(), concurrency=2)])
    assert got == ["a", "b", "c"]


async def test_an_async_input_that_pauses_is_read_once_per_item(docs: tuple[DocServer, str]) -> None:
    # Workers that find the input busy (its anext() paused, as a page read from a database does) wait and are
    # woken; every item is taken exactly once, in order, and none is taken after the input ended.
    server, url = docs
    entered = 0
    inside = 0

    async def paged() -> AsyncIterator[str]:
        nonlocal entered, inside
        for page in range(10):
            inside += 1
            entered = max(entered, inside)
            await asyncio.sleep(0.002)  # the page read: other workers arrive meanwhile
            inside -= 1
            for i in range(20):
                yield f"doc-{page * 20 + i}"

    async with await client_for(url) as client:
        got = [r.document_id async for r in client.documents.describe_many(paged(), concurrency=16, ordered=True)]
    assert got == [f"doc-{i}" for i in range(200)]
    assert sorted(server.seen) == sorted(got)  # each requested once
    assert entered == 1  # the generator was never entered by two workers at once


async def test_empty_input_and_bad_concurrency(docs: tuple[DocServer, str]) -> None:
    _, url = docs
    async with await client_for(url) as client:
        assert [r async for r in client.documents.describe_many([])] == []
        with pytest.raises(ValueError, match="concurrency"):
            [r async for r in client.documents.describe_many(["a"], concurrency=0)]


async def test_memory_stays_bounded_for_an_unbounded_input(docs: tuple[DocServer, str]) -> None:
    """A slow consumer of an endless generator: the items taken but not consumed, and the tasks, stay bounded."""
    server, url = docs
    produced = consumed = 0
    max_ahead = 0
    max_tasks = 0
    concurrency = 8

    async def endless() -> AsyncIterator[str]:
        nonlocal produced
        while True:
            produced += 1
            yield f"doc-{produced}"

    async with await client_for(url) as client:
        async with contextlib.aclosing(client.documents.describe_many(endless(), concurrency=concurrency)) as results:
            async for _ in results:
                consumed += 1
                max_ahead = max(max_ahead, produced - consumed)
                max_tasks = max(max_tasks, bulk_tasks())
                if consumed % 50 == 0:
                    await asyncio.sleep(0.01)  # a slow consumer
                if consumed == 400:
                    break
        assert bulk_tasks() == 0  # workers gone as soon as the loop was closed
    assert max_ahead <= 2 * concurrency + 1
    assert 0 < max_tasks <= concurrency  # the count sees the workers while they run
    assert server.max_in_flight <= concurrency


async def test_in_flight_never_exceeds_max_connections(serve: Serve) -> None:
    server = DocServer(delay=lambda _id: 0.005)
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): server.describe})
    ids = [f"doc-{i}" for i in range(60)]
    async with await client_for(url, max_connections=4) as client:
        # Two bulk jobs and direct calls at once all share the client's four slots.
        async def drain() -> int:
            return len([r async for r in client.documents.describe_many(ids, concurrency=16)])

        counts = await asyncio.gather(drain(), drain(), client.documents.describe("direct"))
    assert list(counts[:2]) == [60, 60]
    assert server.max_in_flight <= 4


async def test_breaking_out_cancels_the_workers(serve: Serve) -> None:
    server = DocServer(delay=lambda _id: 0.01)
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): server.describe})
    async with await client_for(url) as client:
        results = client.documents.describe_many((f"doc-{i}" for i in range(10_000)), concurrency=4)
        async for _ in results:
            break
        await results.aclose()
        assert bulk_tasks() == 0
        seen = len(server.seen)
        await asyncio.sleep(0.05)
        assert len(server.seen) == seen  # nothing more was sent
    assert seen < 20


async def test_cancelling_the_consumer_cancels_the_workers(serve: Serve) -> None:
    server = DocServer(delay=lambda _id: 0.01)
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): server.describe})
    async with await client_for(url) as client:

        async def consume() -> None:
            async for _ in client.documents.describe_many((f"doc-{i}" for i in range(10_000)), concurrency=4):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert bulk_tasks() == 0


async def test_closing_the_client_mid_batch_is_an_error_not_a_short_batch(serve: Serve) -> None:
    server = DocServer(delay=lambda _id: 0.01)
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): server.describe})
    client = await client_for(url)

    async def consume() -> int:
        got = 0
        async for _ in client.documents.describe_many((f"doc-{i}" for i in range(10_000)), concurrency=4):
            got += 1
            if got == 5:
                await client.aclose()
        return got

    with pytest.raises(ha.ClientClosedError):
        await consume()
    assert client.closed


async def test_progress_callback(docs: tuple[DocServer, str]) -> None:
    _, url = docs
    calls: list[tuple[int, int, int | None]] = []
    async with await client_for(url) as client:
        ids = ["a", "missing-b", "c"]
        _ = [r async for r in client.documents.describe_many(ids, progress=lambda *a: calls.append(a))]
        assert calls[-1] == (3, 1, 3)
        assert [c[0] for c in calls] == [1, 2, 3]
        unsized: list[tuple[int, int, int | None]] = []
        _ = [r async for r in client.documents.describe_many(iter(ids), progress=lambda *a: unsized.append(a))]
        assert unsized[-1] == (3, 1, None)  # an iterator's length is not known


async def test_shared_pause_after_429_with_retry_after(serve: Serve) -> None:
    """One 429 with Retry-After pauses every worker of the client, not just the one that got it."""
    arrivals: list[tuple[float, str]] = []
    refused: list[float] = []

    async def describe(request: web.Request) -> web.Response:
        doc_id = request.match_info["id"]
        now = time.monotonic()
        arrivals.append((now, doc_id))
        if doc_id == "doc-0" and not refused:
            refused.append(now)
            return web.Response(status=429, headers={"Retry-After": "1"})  # delta-seconds: whole seconds only
        await asyncio.sleep(0.005)
        return web.Response(body=orjson.dumps({"document_id": doc_id}), content_type="application/json")

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe})
    policy = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=1)
    async with ha.HealthClient(base_url=url, token="t", user_id="u", retry=policy) as client:
        ids = [f"doc-{i}" for i in range(40)]
        results = [r async for r in client.documents.describe_many(ids, concurrency=8)]
    assert all(r.ok for r in results)
    # Requests already on the wire when the 429 came may finish; none may *start* during the pause.
    started_during_pause = [d for t, d in arrivals if refused[0] + 0.02 < t < refused[0] + 0.9]
    assert started_during_pause == []
    assert sum(1 for _, d in arrivals if d == "doc-0") == 2


async def _list_routes(serve: Serve, pages: int = 3) -> tuple[str, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    async def list_docs(request: web.Request) -> web.Response:
        seen.append({"query": list(request.query.items()), "accept": request.headers.get("Accept")})
        offset = int(request.query.get("offset", "0"))
        items = [{"record": {"item": {"document_id": f"doc-{offset + i}", "upload_date": 1}}} for i in range(2)]
        body: dict[str, Any] = {"items": items}
        if offset // 2 + 1 < pages:
            body["next_token"] = str(offset + 2)
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    server = DocServer()
    url = await serve({("GET", "/mr/api/v1/docs"): list_docs, ("GET", "/mr/api/v1/docs/{id}"): server.describe})
    return url, seen


async def test_list_follows_next_token_lazily(serve: Serve) -> None:
    url, seen = await _list_routes(serve)
    async with await client_for(url) as client:
        items = client.documents.list(updated_after=1700000000)
        first = await anext(items)
        assert first.document_id == "doc-0" and len(seen) == 1  # one page fetched, no more
        rest = [i.document_id async for i in items]
    assert rest == ["doc-1", "doc-2", "doc-3", "doc-4", "doc-5"]
    assert [s["query"] for s in seen] == [
        [("u_at__gt", "1700000000")],
        [("offset", "2"), ("u_at__gt", "1700000000")],
        [("offset", "4"), ("u_at__gt", "1700000000")],
    ]
    assert {s["accept"] for s in seen} == {"application/json"}


async def test_list_pipes_into_describe_many(serve: Serve) -> None:
    url, _ = await _list_routes(serve)
    async with await client_for(url) as client:
        results = [r async for r in client.documents.describe_many(client.documents.list(), ordered=True)]
    assert [r.document_id for r in results] == [f"doc-{i}" for i in range(6)]
    assert all(r.document is not None and r.document.document_type == "lr" for r in results)


async def test_list_refuses_a_bad_updated_after(serve: Serve) -> None:
    url, seen = await _list_routes(serve)
    async with await client_for(url) as client:
        with pytest.raises(ha.InvalidRequest):
            await anext(client.documents.list(updated_after=-1))
    assert seen == []


async def test_upload_many_reports_each_file(serve: Serve, tmp_path: Path) -> None:
    received: list[int] = []

    async def upload(request: web.Request) -> web.Response:
        body = await request.read()
        received.append(len(body))
        return web.json_response({"document_id": f"up-{len(received)}"})

    url = await serve({("POST", "/mr/api/v2/docs"): upload})
    good = []
    for i in range(5):
        path = tmp_path / f"r{i}.pdf"
        path.write_bytes(b"%PDF" + bytes(100 * i))
        good.append(path)
    big = tmp_path / "big.pdf"
    big.write_bytes(bytes(2048))
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    files: list[Any] = [*good, tmp_path / "missing.pdf", big, empty, b"raw bytes"]
    async with await client_for(url, max_upload_size=1024) as client:
        outcomes = [o async for o in client.documents.upload_many(files, concurrency=3, ordered=True)]
    assert [o.source for o in outcomes] == files
    assert all(o.ok and o.result is not None for o in outcomes[:5])
    assert outcomes[8].ok
    assert isinstance(outcomes[5].error, ha.InvalidRequest) and "does not exist" in str(outcomes[5].error)
    assert "missing.pdf" not in str(outcomes[5].error)  # file names can be personal data
    assert isinstance(outcomes[6].error, ha.FileTooLarge)
    assert isinstance(outcomes[7].error, ha.InvalidRequest)
    assert len(received) == 6
    assert "raw bytes" not in repr(outcomes[8])


async def test_upload_many_refuses_bad_tasks_before_reading_anything(serve: Serve) -> None:
    url = await serve({})
    async with await client_for(url) as client:
        with pytest.raises(ValueError, match="task"):
            await anext(client.documents.upload_many(["x"], tasks=["Bad Task"]))


async def test_a_plain_break_cleans_up_too(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    """Without aclosing: the abandoned generator is finalised by the loop, and the client's close reaps the rest."""
    server = DocServer(delay=lambda _id: 0.005)
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): server.describe})
    async with await client_for(url) as client:
        async for _ in client.documents.describe_many((f"doc-{i}" for i in range(10_000)), concurrency=4):
            break
        for _ in range(5):
            await asyncio.sleep(0)
    assert bulk_tasks() == 0
    assert not [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    ("concurrency", "error"), [(0, ha.InvalidRequest), (-1, ha.InvalidRequest), ("8", ha.InvalidArgumentType)]
)
async def test_a_bad_concurrency_is_a_typed_error_before_anything_is_sent(
    serve: Serve, concurrency: Any, error: type[Exception]
) -> None:
    url = await serve({})
    async with await client_for(url) as client:
        with pytest.raises(error, match="concurrency"):
            client.documents.describe_many(["d-1"], concurrency=concurrency)
