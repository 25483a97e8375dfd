"""Uploads that can be recognised later: a document id chosen by the caller (presigned route), the reconcilable
ingest upload job that settles unknown outcomes by asking, ``IngestJob.reconcile`` / ``ingest reconcile``, and the
hard way: a child killed with SIGKILL at random points, every file stored exactly once with no unknown left."""

from __future__ import annotations

import hashlib
import random
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from health_async import DocumentNotFound, HealthClient, InvalidRequest, OutcomeUnknown, RetryPolicy, cli
from health_async.errors import ResponseValidationError
from health_async.ingest import IngestJob
from health_async.testing import FakeHealthServer, Fault

from ..conftest import ServerThread
from .test_ingest_crash import child_env, complete_lines, run_child

NO_RETRY = RetryPolicy(attempts=1)
PDF = b"%PDF-1.4\n%fake report\n"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], retry=NO_RETRY
    ) as c:
        yield c


def stored(server: FakeHealthServer) -> Counter[str]:
    """SHA-256 of every file the fake stored through presigned storage (a repeat counts twice)."""
    out: Counter[str] = Counter()
    for docs in server.data.documents.values():
        for raw in docs.values():
            doc = orjson.loads(raw)
            if doc.get("source") == "presigned":
                out.update(f["sha256"] for f in doc["upload"]["files"])
    return out


def pdfs(folder: Path, n: int) -> dict[str, bytes]:
    folder.mkdir()
    files = {}
    for i in range(n):
        data = PDF + f"report {i}\n".encode()
        path = folder / f"r{i:04d}.pdf"
        path.write_bytes(data)
        files[str(path)] = data
    return files


# ------------------------------------------------------------------------------------ a chosen document id


async def test_a_chosen_id_names_the_document_and_a_repeat_declares_the_same_one(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    path = tmp_path / "r.pdf"
    path.write_bytes(PDF)
    chosen = str(uuid.uuid4())
    with pytest.raises(DocumentNotFound):
        await client.documents.describe(chosen)  # not stored: safe to upload
    first = await client.documents.create(path, document_id=chosen, title="lab")
    assert first.document_id == chosen and (await client.documents.describe(chosen)).document_id == chosen
    again = await client.documents.create(path, document_id=chosen)
    assert again.document_id == chosen and server.storage.redeclared == 1
    assert sum(1 for d in server.data.documents[server.data.user_ids[0]] if d == chosen) == 1
    assert len(stored(server)) == 1 and sum(stored(server).values()) == 1  # replaced, never a second document


async def test_a_bad_chosen_id_is_refused_before_sending_and_another_users_id_is_refused_by_the_service(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    path = tmp_path / "r.pdf"
    path.write_bytes(PDF)
    for bad in ("", "a/b", "x" * 65, "id with space"):
        with pytest.raises(InvalidRequest, match="document_id must be"):
            await client.documents.create(path, document_id=bad)
    assert server.calls("presigned_batch") == 0
    other = server.data.user_ids[0]
    taken = next(iter(server.data.documents[other]))
    async with HealthClient(base_url=server.url, token=server.token, user_id="someone-else", retry=NO_RETRY) as c:
        with pytest.raises(Exception, match="DOCUMENT_ID_IN_USE"):
            await c.documents.create(path, document_id=taken)


async def test_with_a_chosen_id_the_declaring_post_is_retried_and_without_it_never(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    path = tmp_path / "r.pdf"
    path.write_bytes(PDF)
    retrying = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)
    async with HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], retry=retrying
    ) as c:
        server.inject("presigned_batch", Fault(status=502, times=1))
        chosen = str(uuid.uuid4())
        assert (await c.documents.create(path, document_id=chosen)).document_id == chosen
        assert server.calls("presigned_batch") == 2
        server.inject("presigned_batch", Fault(status=502, times=1))
        with pytest.raises(OutcomeUnknown):
            await c.documents.create(path)  # no id of ours: a repeat could declare a second document
        assert server.calls("presigned_batch") == 3


async def test_a_service_that_does_not_keep_the_chosen_id_is_found_out_before_any_file_is_stored(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    path = tmp_path / "r.pdf"
    path.write_bytes(PDF)
    answer = {"batch_response": [{"document_id": "theirs", "forms": [{"url": "https://s.test/u", "fields": {}}]}]}
    server.inject("presigned_batch", Fault(status=200, body=answer, times=1))
    with pytest.raises(ResponseValidationError, match="not honoured"):
        await client.documents.create(path, document_id=str(uuid.uuid4()))
    assert server.calls("storage_form") == 0


# ------------------------------------------------------------------------------------ the reconcilable job


async def test_a_reconcilable_job_settles_an_unknown_upload_by_asking_and_never_stores_twice(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    files = pdfs(tmp_path / "in", 6)
    out, journal = tmp_path / "up.jsonl", tmp_path / "up.db"
    server.inject("presigned_batch", Fault(status=502, times=1))  # a gateway's 5XX: the outcome is unknown
    first = await IngestJob.upload(tmp_path / "in", out=out, journal=journal, client=client, reconcilable=True).run()
    assert first.status.unknown == 1 and first.status.done == 5
    second = await IngestJob.upload(tmp_path / "in", out=out, journal=journal, client=client, reconcilable=True).run()
    assert second.ok and second.processed == 1
    assert server.calls("presigned_batch") == 7  # asked (404: never stored), then uploaded under the same id
    rows = {r["key"]: r for r in complete_lines(out)}
    assert set(rows) == set(files) and all(r["upload"]["route"] == "presigned" for r in rows.values())
    assert stored(server) == Counter({hashlib.sha256(d).hexdigest(): 1 for d in files.values()})


async def test_reconcile_asks_and_uploads_nothing_found_is_done_and_missing_is_pending(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    pdfs(tmp_path / "in", 4)
    out, journal = tmp_path / "up.jsonl", tmp_path / "up.db"
    # two uploads whose answers are lost: one stored (its storage post done, the answer gone), one never declared
    server.inject("presigned_batch", Fault(status=503, times=2))
    job = IngestJob.upload(tmp_path / "in", out=out, journal=journal, client=client, reconcilable=True)
    first = await job.run()
    unknown = list(first.status.unknown_keys)
    assert len(unknown) == 2
    assert job.spec.namespace is not None
    made = str(uuid.uuid5(uuid.UUID(job.spec.namespace), unknown[0]))
    await client.documents.create(unknown[0], document_id=made)  # as if the first attempt had been stored
    declared = server.calls("presigned_batch")

    summary = await IngestJob.reconcile(journal, client=client)

    assert server.calls("presigned_batch") == declared  # nothing uploaded
    assert summary.status.done == 3 and summary.status.pending == 1 and summary.status.unknown == 0
    rows = {r["key"]: r for r in complete_lines(out)}
    assert rows[unknown[0]]["reconciled"] == "found" and rows[unknown[0]]["upload"]["document_id"] == made
    last = await IngestJob.upload(tmp_path / "in", out=out, journal=journal, client=client, reconcilable=True).run()
    assert last.ok and len(complete_lines(out)) == 4 and max(stored(server).values()) == 1


async def test_the_mode_is_the_jobs_from_its_first_run_and_excludes_tasks(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    pdfs(tmp_path / "in", 2)
    out, journal = tmp_path / "up.jsonl", tmp_path / "up.db"
    await IngestJob.upload(tmp_path / "in", out=out, journal=journal, client=client, reconcilable=True).run()
    with pytest.raises(InvalidRequest, match="started with --reconcilable"):
        await IngestJob.upload(tmp_path / "in", out=out, journal=journal, client=client).run()
    with pytest.raises(InvalidRequest, match="tasks do not run"):
        IngestJob.upload(tmp_path / "in", out=out, client=client, reconcilable=True, tasks=["pii"])
    with pytest.raises(InvalidRequest, match="tasks do not run"):
        IngestJob.upload(tmp_path / "in", out=out, client=client, reconcilable=True, wait=True)
    plain = tmp_path / "plain.db"
    await IngestJob.upload(tmp_path / "in", out=tmp_path / "p.jsonl", journal=plain, client=client).run()
    with pytest.raises(InvalidRequest, match="only a reconcilable upload job"):
        await IngestJob.reconcile(plain, client=client)


def test_cli_upload_reconcilable_and_reconcile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pdfs(tmp_path / "in", 3)
    out, journal = tmp_path / "up.jsonl", tmp_path / "up.db"
    with ServerThread(documents_per_user=1) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        argv = ["ingest", "upload", str(tmp_path / "in"), "--out", str(out), "--journal", str(journal),
                "--reconcilable", "--quiet"]  # fmt: skip
        assert cli.main(argv) == 0
        assert cli.main(["ingest", "reconcile", "--journal", str(journal)]) == 0
        err = capsys.readouterr().err
        assert "ingest upload: done 3" in err and "ingest reconcile: done 3" in err
        assert cli.main(["ingest", "reconcile", "--journal", str(tmp_path / "none.db")]) == 2


# ------------------------------------------------------------------------------------ the hard way

UPLOAD_KILLS = 10


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
async def test_reconcilable_uploads_killed_at_random_points_store_every_file_exactly_once(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    files = pdfs(tmp_path / "in", 300)
    out, journal = tmp_path / "up.jsonl", tmp_path / "up.db"
    argv = ["ingest", "upload", str(tmp_path / "in"), "--out", str(out), "--journal", str(journal),
            "--concurrency", "4", "--reconcilable", "--quiet"]  # fmt: skip
    server.inject("presigned_batch", Fault(latency=0.01))
    server.inject("storage_form", Fault(latency=0.01))
    env = child_env(server)
    rng = random.Random(20261125)
    for _ in range(UPLOAD_KILLS):
        assert await run_child(argv, env, server, rng, most=60) is None, "finished before the kills"
        assert max(stored(server).values(), default=1) == 1  # no file stored twice
    server.clear_faults()
    assert await run_child(argv, env) == 0  # every unknown outcome settled: nothing left to the user
    rows: dict[str, dict[str, Any]] = {r["key"]: r for r in complete_lines(out)}
    assert len(complete_lines(out)) == len(rows) == 300 and set(rows) == set(files)
    assert all("upload" in r for r in rows.values())
    assert stored(server) == Counter({hashlib.sha256(d).hexdigest(): 1 for d in files.values()})
    status = await IngestJob.status(journal)
    assert status.done == 300 and status.unknown == 0
    found = sum(1 for r in rows.values() if r.get("reconciled") == "found")
    print(f"after {UPLOAD_KILLS} kills: {found} found by asking, {server.storage.redeclared} declared again")
    assert found + server.storage.redeclared > 0, "no kill left an upload to settle: the test proved nothing"


# ------------------------------------------------------------------------------------ upload_many


async def test_upload_many_reconcilable_settles_an_unknown_outcome_before_reporting_it(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    files = pdfs(tmp_path / "in", 5)
    server.inject("presigned_batch", Fault(status=502, times=1))  # unknown: asked, never stored, created again
    outcomes = [o async for o in client.documents.upload_many(list(files), reconcilable=True, concurrency=1)]
    assert all(o.ok and o.result is not None and o.result.route == "presigned" for o in outcomes)
    assert server.calls("presigned_batch") == 6 and server.calls("describe") == 1
    assert stored(server) == Counter({hashlib.sha256(d).hexdigest(): 1 for d in files.values()})

    server.inject("presigned_batch", Fault(status=502, times=1))
    server.inject("describe", Fault(status=500))  # the question cannot be answered: unknown, with the id to look for
    [outcome] = [o async for o in client.documents.upload_many([next(iter(files))], reconcilable=True)]
    assert isinstance(outcome.error, OutcomeUnknown) and "look for document" in str(outcome.error)
    with pytest.raises(InvalidRequest, match="no tasks, no wait"):
        client.documents.upload_many(list(files), reconcilable=True, tasks=["pii"])
