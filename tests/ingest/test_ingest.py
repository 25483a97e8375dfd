"""health_async.ingest: resume, status, retry-failed, unknown outcome, bad inputs, the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from health_async import ClientClosedError, HealthClient, InvalidArgumentType, InvalidRequest, RetryPolicy, cli
from health_async.ingest import (
    Engine,
    IngestJob,
    IngestProgress,
    IngestStatus,
    JobSpec,
    LocalEngine,
    WorkItem,
    WorkResult,
    _journal,
)
from health_async.testing import FakeHealthServer, Fault

from ..conftest import ServerThread, non_utf8_name

NO_RETRY = RetryPolicy(attempts=1)


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def by_key(path: Path) -> dict[str, dict[str, Any]]:
    rows = lines(path)
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), "an item has two lines"
    return {r["key"]: r for r in rows}


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(documents_per_user=120) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], retry=NO_RETRY
    ) as c:
        yield c


def doc_ids(server: FakeHealthServer) -> list[str]:
    return list(server.data.documents[server.data.user_ids[0]])


def write_ids(tmp_path: Path, ids: list[str], name: str = "ids.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(ids) + "\n")
    return path


# ------------------------------------------------------------------------------------------ describe and resume


async def test_describe_writes_one_line_per_item_and_skips_blank_comment_and_repeated_lines(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids = doc_ids(server)[:40]
    ids_file = write_ids(tmp_path, [ids[0], "", "# a comment", *ids, ids[3], "no-such-doc"])
    out = tmp_path / "docs.jsonl"
    summary = await IngestJob.describe(ids_file, out=out, client=client, concurrency=8).run()
    rows = by_key(out)
    assert set(rows) == {*ids, "no-such-doc"}
    assert rows[ids[0]]["index"] == 0 and rows[ids[0]]["document"]["document_id"] == ids[0]
    assert rows["no-such-doc"]["error"]["type"] == "DocumentNotFound"
    assert rows["no-such-doc"]["error"]["retryable"] is False
    assert rows["no-such-doc"]["index"] == 40  # blank lines, comments and repeats are not counted
    assert summary.duplicates == 2 and summary.blank == 1
    assert (summary.status.done, summary.status.failed, summary.status.pending) == (40, 1, 0)
    assert not summary.ok
    assert server.calls("describe") == 41  # the repeated ids were requested once


async def test_rerun_requests_nothing_and_keeps_the_output(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids_file = write_ids(tmp_path, doc_ids(server)[:30])
    out = tmp_path / "docs.jsonl"
    await IngestJob.describe(ids_file, out=out, client=client).run()
    before = out.read_bytes()
    summary = await IngestJob.describe(ids_file, out=out, client=client).run()
    assert server.calls("describe") == 30
    assert summary.processed == 0 and summary.ok
    assert out.read_bytes() == before


async def test_lines_written_before_a_crash_are_adopted_and_a_partial_line_is_cut(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids = doc_ids(server)[:20]
    ids_file = write_ids(tmp_path, ids)
    out = tmp_path / "docs.jsonl"
    journal = tmp_path / "j.db"
    await IngestJob.describe(ids_file, out=out, journal=journal, client=client).run()
    # the state a kill -9 leaves between "write + fsync the output" and "commit the journal": the journal has
    # not recorded the last batch, whose lines are in the file; then a torn line of a batch being written
    data = out.read_bytes()
    first = data.index(b"\n") + 1
    with contextlib.closing(sqlite3.connect(journal)) as db, db:  # closed, and committed
        db.execute("UPDATE meta SET v = ? WHERE k = 'offset'", (str(first),))
        db.execute("UPDATE items SET state = 'pending' WHERE key != ?", (orjson.loads(data[:first])["key"],))
    out.write_bytes(data + b'{"key":"' + ids[0].encode())
    summary = await IngestJob.describe(ids_file, out=out, journal=journal, client=client).run()
    assert summary.adopted == 19
    assert server.calls("describe") == 20  # nothing requested again
    assert set(by_key(out)) == set(ids)
    assert out.read_bytes() == data


async def test_cancellation_commits_what_finished_and_the_next_run_resumes(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids = doc_ids(server)[:100]
    ids_file = write_ids(tmp_path, ids)
    out = tmp_path / "docs.jsonl"
    server.inject("describe", Fault(latency=0.01))
    job = IngestJob.describe(ids_file, out=out, client=client, concurrency=4, flush_interval=0.01)
    task = asyncio.create_task(job.run())
    while not out.exists() or out.stat().st_size == 0:  # noqa: ASYNC110 - the first committed batch
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert job.summary is not None and job.summary.interrupted
    first = job.summary.status.done
    assert 0 < first < 100 and job.summary.status.pending == 100 - first
    assert len(lines(out)) == first  # every committed item has its line, nothing else
    server.clear_faults()
    summary = await IngestJob.describe(ids_file, out=out, client=client, concurrency=4).run()
    assert summary.ok and set(by_key(out)) == set(ids)
    # requested again: only the items in flight at the cancellation, or finished and not yet handed to the job
    assert server.calls("describe") <= 100 + 2 * 4


async def test_closing_the_client_stops_a_describe_job_and_records_no_failure(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    # a closed client is the run's end, never an item's failure (the next run redoes what was not committed)
    ids = doc_ids(server)[:60]
    ids_file = write_ids(tmp_path, ids)
    out = tmp_path / "docs.jsonl"
    server.inject("describe", Fault(latency=0.01))
    user = server.data.user_ids[0]
    client = HealthClient(base_url=server.url, token=server.token, user_id=user, retry=NO_RETRY)
    job = IngestJob.describe(ids_file, out=out, client=client, concurrency=4, flush_interval=0.01)
    task = asyncio.create_task(job.run())
    while not out.exists() or out.stat().st_size == 0:  # noqa: ASYNC110 - the first committed batch
        await asyncio.sleep(0.005)
    await client.aclose()
    with pytest.raises(ClientClosedError):
        await task
    assert job.summary is not None and job.summary.status.failed == 0
    assert 0 < job.summary.status.done < 60 and len(lines(out)) == job.summary.status.done
    server.clear_faults()
    async with HealthClient(base_url=server.url, token=server.token, user_id=user) as fresh:
        summary = await IngestJob.describe(ids_file, out=out, client=fresh).run()
    assert summary.ok and set(by_key(out)) == set(ids)


# ------------------------------------------------------------------------------------------ retry-failed


async def test_retry_failed_redoes_only_retryable_failures_and_supersedes_their_lines(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids = doc_ids(server)[:20]
    ids_file = write_ids(tmp_path, [*ids, "gone"])
    out = tmp_path / "docs.jsonl"
    server.inject("describe", Fault(status=503, times=5))
    summary = await IngestJob.describe(ids_file, out=out, client=client, concurrency=1).run()
    assert (summary.status.failed, summary.status.retryable) == (6, 5)
    rows = by_key(out)
    assert len(rows) == 21 and sum("error" in r for r in rows.values()) == 6
    # a plain rerun does not retry them
    await IngestJob.describe(ids_file, out=out, client=client).run()
    assert server.calls("describe") == 21
    summary = await IngestJob.describe(ids_file, out=out, client=client, retry_failed=True).run()
    assert server.calls("describe") == 26  # the 5 retryable ones; not the 404, not the done ones
    assert (summary.status.done, summary.status.failed) == (20, 1)
    rows = by_key(out)
    assert len(rows) == 21
    assert [k for k, r in rows.items() if "error" in r] == ["gone"]


# ------------------------------------------------------------------------------------------ uploads


def make_files(tmp_path: Path, n: int) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    for i in range(n):
        (folder / f"f{i:03d}.txt").write_text(f"report {i}\n")
    return folder


def uploaded_hashes(server: FakeHealthServer) -> list[str]:
    docs = server.data.documents[server.data.user_ids[0]].values()
    return [h for d in docs if (h := orjson.loads(d).get("upload", {}).get("sha256"))]


async def test_upload_of_unknown_outcome_is_listed_never_resent_unless_asked(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    folder = make_files(tmp_path, 6)
    out = tmp_path / "up.jsonl"
    journal = tmp_path / "up.db"
    server.inject("upload", Fault(status=502, times=1))  # a gateway error: the upload may have been made
    summary = await IngestJob.upload(folder, out=out, journal=journal, client=client, concurrency=1).run()
    assert (summary.status.done, summary.status.unknown) == (5, 1)
    status = await IngestJob.status(journal)
    assert status.unknown_keys == (str(folder / "f000.txt"),)
    rows = by_key(out)
    assert len(rows) == 6
    assert rows[str(folder / "f000.txt")]["error"]["outcome"] == "unknown"
    assert rows[str(folder / "f001.txt")]["upload"]["document_id"]
    await IngestJob.upload(folder, out=out, journal=journal, client=client).run()
    assert server.calls("upload") == 6  # not sent again
    summary = await IngestJob.upload(folder, out=out, journal=journal, client=client, reupload_unknown=True).run()
    assert server.calls("upload") == 7 and summary.ok
    rows = by_key(out)
    assert len(rows) == 6 and all("upload" in r for r in rows.values())
    gc.collect()  # no upload left a file open (a ResourceWarning here would fail the test)


async def test_upload_with_wait_writes_each_processing_result(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    folder = make_files(tmp_path, 2)
    (folder / "f001.txt").write_bytes(b"unreadable scan: error")  # the fake fails processing of this one
    server.records.configure(polls=0)  # final on the first poll
    out = tmp_path / "up.jsonl"
    summary = await IngestJob.upload(folder, out=out, client=client, wait=True).run()
    rows = by_key(out)
    done = rows[str(folder / "f000.txt")]
    assert done["processing"]["status"] == "COMPLETED" and done["upload"]["document_id"]
    failed = rows[str(folder / "f001.txt")]
    assert failed["upload"]["document_id"] and failed["error"]["type"] == "ProcessingFailed"
    assert failed["error"]["retryable"] is False  # uploaded: never sent again by --retry-failed
    assert (summary.status.done, summary.status.failed) == (1, 1)
    assert server.calls("upload") == 2


async def test_an_upload_left_in_flight_by_a_crash_becomes_unknown(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    folder = make_files(tmp_path, 3)
    out = tmp_path / "up.jsonl"
    journal = tmp_path / "up.db"
    await IngestJob.upload(folder, out=out, journal=journal, client=client).run()
    # as a kill -9 after "committed in flight", before the line: a crash of a rerun with --reupload-unknown
    with contextlib.closing(sqlite3.connect(journal)) as db, db:  # closed, and committed
        offset = len(out.read_bytes().splitlines(keepends=True)[0])
        key = orjson.loads(out.read_bytes().splitlines()[1])["key"]
        db.execute("UPDATE items SET state = 'inflight' WHERE key = ?", (key,))
        db.execute("UPDATE meta SET v = ? WHERE k = 'offset'", (str(offset),))
    out.write_bytes(out.read_bytes().splitlines(keepends=True)[0])
    status = await IngestJob.status(journal)
    assert status.unknown_keys == (key,)
    summary = await IngestJob.upload(folder, out=out, journal=journal, client=client).run()
    assert summary.status.unknown == 1 and server.calls("upload") == 3
    assert by_key(out)[key]["error"]["type"] == "OutcomeUnknown"
    assert len(uploaded_hashes(server)) == len(set(uploaded_hashes(server)))


async def test_upload_bad_files_fail_alone(server: FakeHealthServer, client: HealthClient, tmp_path: Path) -> None:
    folder = make_files(tmp_path, 2)
    (folder / "empty.txt").write_bytes(b"")
    (folder / "dangling").symlink_to(folder / "nowhere")
    listing = tmp_path / "list.txt"
    listing.write_text(f"{folder / 'f000.txt'}\n\n{folder / 'missing.pdf'}\n")
    out = tmp_path / "up.jsonl"
    summary = await IngestJob.upload(folder, out=out, client=client).run()
    rows = by_key(out)
    assert len(rows) == 4 and summary.status.done == 2
    assert rows[str(folder / "empty.txt")]["error"]["type"] == "InvalidRequest"
    assert rows[str(folder / "dangling")]["error"]["retryable"] is False
    out2 = tmp_path / "up2.jsonl"
    await IngestJob.upload(listing, out=out2, client=client).run()
    rows = by_key(out2)
    assert set(rows) == {str(folder / "f000.txt"), str(folder / "missing.pdf")}
    assert "does not exist" in rows[str(folder / "missing.pdf")]["error"]["message"]


async def test_an_unreadable_subdirectory_fails_as_one_item(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_files(tmp_path, 1)
    locked = folder / "locked"
    locked.mkdir()
    locked.chmod(0)
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:  # root (CI) reads every directory: refuse as the OS would for others
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    try:
        out = tmp_path / "up.jsonl"
        await IngestJob.upload(folder, out=out, client=client).run()
        rows = by_key(out)
        assert rows[str(locked)]["error"]["type"] == "InvalidRequest"
    finally:
        locked.chmod(0o755)


# ------------------------------------------------------------------------------------------ bad input


async def test_a_line_that_is_not_utf8_fails_that_item_only(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids = doc_ids(server)[:3]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_bytes(ids[0].encode() + b"\n\xff\xfebad\n" + b"\n".join(i.encode() for i in ids[1:]) + b"\n")
    out = tmp_path / "docs.jsonl"
    summary = await IngestJob.describe(ids_file, out=out, client=client).run()
    rows = by_key(out)
    assert summary.invalid == 1 and summary.status.done == 3
    assert rows["\\xff\\xfebad"]["error"] == {
        "type": "InvalidRequest",
        "message": "line 2 of the input is not valid UTF-8",
        "retryable": False,
    }
    assert server.calls("describe") == 3


async def test_blank_lines_are_counted_and_an_overlong_line_fails_alone(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids = doc_ids(server)[:6]
    long_a = "x" * 300
    long_b = "x" * 299 + "y"  # the same first characters: still an item of its own, with a key of its own
    ids_file = write_ids(tmp_path, [ids[0], "", "   ", ids[1], long_a, ids[2], "\t", long_b, *ids[3:]])
    out = tmp_path / "docs.jsonl"
    summary = await IngestJob.describe(ids_file, out=out, client=client).run()
    assert summary.blank == 3 and summary.invalid == 2 and summary.duplicates == 0
    assert summary.text().endswith("; 3 blank input line(s) skipped")
    rows = by_key(out)
    assert len(rows) == 8  # nothing lost: 6 ids and 2 failed lines, one line each
    assert all("document" in rows[i] for i in ids)
    bad = sorted((r for k, r in rows.items() if k not in ids), key=lambda r: r["index"])
    assert [r["error"] for r in bad] == [
        {
            "type": "InvalidRequest",
            "message": f"line {n} of the input is longer than 256 characters",
            "retryable": False,
        }
        for n in (5, 8)
    ]
    bad_keys = [k for k, r in rows.items() if k not in ids]
    assert len(set(bad_keys)) == 2 and all(k.startswith("x" * 64) and len(k) < 256 for k in bad_keys)
    assert all("300 characters" in k for k in bad_keys)
    assert sorted(r["index"] for r in rows.values()) == list(range(8))  # blank lines have no index
    assert (summary.status.done, summary.status.failed, summary.status.pending) == (6, 2, 0)
    assert server.calls("describe") == 6  # neither a blank nor a long line was sent


async def test_an_upload_list_skips_and_counts_blank_lines_and_accepts_long_paths(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    deep = tmp_path / ("d" * 120) / ("e" * 120)
    deep.mkdir(parents=True)
    report = deep / "report.txt"
    report.write_text("report\n")
    assert len(str(report)) > 256  # a path, not an id: the id length limit does not apply
    listing = tmp_path / "list.txt"
    listing.write_text(f"\n# reports\n{report}\n\n")
    out = tmp_path / "up.jsonl"
    summary = await IngestJob.upload(listing, out=out, client=client).run()
    assert summary.ok and summary.blank == 2 and summary.invalid == 0
    assert "2 blank input line(s) skipped" in summary.text()
    assert list(by_key(out)) == [str(report)]


def test_outcome_unknown_for_each_error_kind() -> None:
    from health_async import errors
    from health_async._items import outcome_unknown

    unknown = [
        errors.OutcomeUnknown("upload: may have reached the service", operation="upload"),
        errors.AccountLikelyCreated("create: lost answer", abha_address="a@abdm"),
        errors.TransportError("reset after sending", sent=True),
        errors.RequestTimeout("read timeout", sent=True),
        errors.ServerError("upload: server error (HTTP 502)", status=502, operation="upload"),
        errors.ServerError("upload: server error (HTTP 500)", status=500, operation="upload"),
    ]
    known = [
        None,
        errors.TransportError("connection refused", sent=False),
        errors.RequestTimeout("connect timeout", sent=False),
        errors.TLSVerificationError("bad certificate", sent=False),
        errors.RateLimitError("rate limited", status=429),
        errors.DocumentNotFound("no such document", status=404),
        errors.AuthenticationError("not authorised", status=401),
        errors.ApiError("request failed", status=400),
        errors.AbhaRateLimited("ABDM-1022 (HTTP 500)", status=500, source_error={"code": "ABDM-1022"}),
        errors.InvalidRequest("bad id"),
        errors.FileTooLarge("too large"),
        errors.ResponseValidationError("not JSON"),
        errors.ProcessingFailed("processing failed", document_id="d"),
        ValueError("not a HealthError"),
    ]
    assert [outcome_unknown(e) for e in unknown] == [True] * len(unknown)
    assert [outcome_unknown(e) for e in known] == [False] * len(known)


def test_only_an_upload_can_be_of_unknown_outcome() -> None:
    from health_async import errors
    from health_async.ingest._work import _failure

    item = WorkItem(key="k", index=0)
    for error in (errors.ServerError("HTTP 502", status=502), errors.TransportError("reset", sent=True)):
        upload = _failure(JobSpec(op="upload", concurrency=1), item, error)
        assert upload.unknown and not upload.retryable  # never resent blindly
        describe = _failure(JobSpec(op="describe", concurrency=1), item, error)
        assert not describe.unknown and describe.retryable  # a read: failed, worth --retry-failed


def test_a_describe_result_is_its_line_or_its_failure_and_a_closed_client_ends_the_run() -> None:
    from health_async import errors
    from health_async.ingest._work import described
    from health_async.models import Document

    spec = JobSpec(op="describe", concurrency=1)
    done = described(spec, "d1", 3, Document(document_id="d1"), None)
    assert done.ok and done.line_json()["index"] == 3 and done.line_json()["document"]["document_id"] == "d1"
    missing = described(spec, "d2", 4, None, errors.DocumentNotFound("no such document", status=404))
    assert not missing.ok and not missing.retryable and missing.line_json()["error"]["type"] == "DocumentNotFound"
    with pytest.raises(ClientClosedError):  # never an item's failure: the run stops, the next one resumes
        described(spec, "d3", 5, None, ClientClosedError("closed"))


def test_the_shared_rules_depend_on_neither_the_cli_nor_the_engine() -> None:
    import ast

    import health_async._items
    import health_async.ingest._work

    def imported(module: Any) -> set[str]:
        tree = ast.parse(Path(str(module.__file__)).read_text())
        return {
            part
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for part in (node.module or "").split(".")
        }

    assert "_cli" not in imported(health_async.ingest._work)  # the engine does not depend on the command line
    assert not {"_cli", "ingest"} & imported(health_async._items)
    code = (
        "import sys, health_async._items; "
        "assert not [m for m in sys.modules if m.split('.')[:2] in "
        "(['health_async', '_cli'], ['health_async', 'ingest'])]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_unusable_inputs_are_refused_before_anything_is_sent(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    out = tmp_path / "o.jsonl"
    with pytest.raises(InvalidRequest, match="does not exist"):
        await IngestJob.describe(tmp_path / "missing-ids.txt", out=out, client=client).run()
    with pytest.raises(InvalidRequest, match="is a directory"):
        await IngestJob.describe(tmp_path, out=out, client=client).run()
    with pytest.raises(InvalidRequest, match="concurrency"):
        IngestJob.describe(tmp_path, out=out, client=client, concurrency=0)
    with pytest.raises(InvalidRequest, match="task"):
        IngestJob.upload(tmp_path, out=out, client=client, tasks=["no such task!"])
    with pytest.raises(InvalidRequest, match="client_factory"):
        IngestJob.describe(tmp_path, out=out, client=client, engine="ray")
    with pytest.raises(InvalidRequest, match="does not exist"):
        await IngestJob.status(tmp_path / "nope.db")
    assert server.calls("describe") == 0 and not out.exists()


async def test_paths_of_a_wrong_type_or_with_a_nul_are_refused_before_anything_happens(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    """They raised TypeError (a path that is not a str) or ValueError (a NUL) from os or sqlite3."""
    ids_file = write_ids(tmp_path, doc_ids(server)[:2])
    out = tmp_path / "o.jsonl"
    bad: Any = 5
    makers: list[Callable[[], IngestJob]] = [
        lambda: IngestJob.describe(bad, out=out, client=client),
        lambda: IngestJob.describe(None, out=out, client=client),  # type: ignore[arg-type]
        lambda: IngestJob.describe(ids_file, out=bad, client=client),
        lambda: IngestJob.upload(ids_file, out=out, journal=bad, client=client),
        lambda: IngestJob.describe(ids_file, out=os.fsencode(out), client=client),  # type: ignore[arg-type]
    ]
    for make in makers:
        with pytest.raises(InvalidArgumentType):
            make()
    for status in (IngestJob.status(bad), IngestJob.reconcile(bad, client=client)):
        with pytest.raises(InvalidArgumentType, match="journal must be a str"):
            await status
    nul = str(tmp_path / "o\x00.jsonl")
    for kwargs in ({"out": nul}, {"out": out, "journal": str(tmp_path / "j\x00.db")}):
        with pytest.raises(InvalidRequest, match="NUL") as info:
            await IngestJob.describe(ids_file, client=client, **kwargs).run()
        assert str(tmp_path) not in str(info.value)  # the argument is named, never the path
    with pytest.raises(InvalidRequest, match="NUL"):
        await IngestJob.status(str(tmp_path / "j\x00.db"))
    assert server.calls("describe") == 0 and os.listdir(tmp_path) == ["ids.txt"]


async def test_status_reads_a_journal_whose_name_is_not_utf8(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    """The run wrote it; status raised UnicodeEncodeError quoting the name for SQLite's URI."""
    journal = non_utf8_name(tmp_path, b"j\xff.db")
    ids_file = write_ids(tmp_path, doc_ids(server)[:3])
    await IngestJob.describe(ids_file, out=tmp_path / "o.jsonl", journal=journal, client=client).run()
    status = await IngestJob.status(journal)
    assert (status.op, status.total, status.done) == ("describe", 3, 3)
    assert sorted(os.listdir(os.fsencode(tmp_path))) == [b"ids.txt", b"j\xff.db", b"o.jsonl"]  # no other file


async def test_a_journal_is_tied_to_its_job_and_output(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    ids_file = write_ids(tmp_path, doc_ids(server)[:3])
    journal = tmp_path / "j.db"
    out = tmp_path / "a.jsonl"
    await IngestJob.describe(ids_file, out=out, journal=journal, client=client).run()
    with pytest.raises(InvalidRequest, match="another output"):
        await IngestJob.describe(ids_file, out=tmp_path / "b.jsonl", journal=journal, client=client).run()
    with pytest.raises(InvalidRequest, match="describe job"):
        await IngestJob.upload(ids_file, out=out, journal=journal, client=client).run()
    with pytest.raises(InvalidRequest, match="journal is new"):
        await IngestJob.describe(ids_file, out=out, journal=tmp_path / "new.db", client=client).run()
    out.write_bytes(b"")  # the output was emptied behind the journal's back
    with pytest.raises(InvalidRequest, match="shorter"):
        await IngestJob.describe(ids_file, out=out, journal=journal, client=client).run()
    assert server.calls("describe") == 3


# ------------------------------------------------------------------------------------------ engines, progress


class ListEngine:
    """An Engine that answers every item itself (no client)."""

    def __init__(self) -> None:
        self.seen: list[WorkItem] = []

    async def run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        async for item in items:
            self.seen.append(item)
            yield WorkResult(item.key, {"index": item.index, "document": {"document_id": item.key}}, True, False)


async def test_any_engine_can_do_the_work(tmp_path: Path) -> None:
    engine = ListEngine()
    assert isinstance(engine, Engine)
    out = tmp_path / "o.jsonl"
    summary = await IngestJob.describe(write_ids(tmp_path, ["a", "b", "a"]), out=out, engine=engine).run()
    assert [i.key for i in engine.seen] == ["a", "b"] and summary.ok
    assert lines(out) == [
        {"key": "a", "index": 0, "document": {"document_id": "a"}},
        {"key": "b", "index": 1, "document": {"document_id": "b"}},
    ]


class StallingEngine:
    """Answers ``count`` items, then hangs (a slow request) until cancelled."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.stalled = asyncio.Event()

    async def run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        async for item in items:
            yield WorkResult(item.key, {"index": item.index, "document": {}}, True, False)
            if item.index == self.count - 1:
                self.stalled.set()  # the job has taken every result
                await asyncio.Event().wait()


def other_tasks() -> list[str]:
    current = asyncio.current_task()
    return [t.get_coro().__qualname__ for t in asyncio.all_tasks() if t is not current]  # type: ignore[union-attr]


async def test_a_run_cancelled_again_while_it_commits_keeps_every_result_and_leaves_no_task(tmp_path: Path) -> None:
    # SIGTERM then Ctrl-C: the writer is still gathering its batch when the cancellations land
    out = tmp_path / "o.jsonl"
    engine = StallingEngine(5)
    job = IngestJob.describe(write_ids(tmp_path, [f"d{i}" for i in range(10)]), out=out, engine=engine)
    job.flush_interval = 0.2
    task = asyncio.create_task(job.run())
    await engine.stalled.wait()
    for _ in range(3):
        task.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done()  # still committing
    with pytest.raises(asyncio.CancelledError):
        await task
    assert job.summary is not None and job.summary.interrupted
    assert job.summary.processed == 5 and job.summary.status.done == 5 and job.summary.status.pending == 5
    assert len(lines(out)) == 5
    assert other_tasks() == []


async def test_a_run_cancelled_while_it_wraps_up_still_sets_its_summary_and_stops_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the second Ctrl-C lands while the journal is read for the summary (slowed down here)
    reading = threading.Event()
    status_of = _journal.Journal.status

    def slow_status(journal: _journal.Journal) -> IngestStatus:
        reading.set()
        time.sleep(0.3)
        return status_of(journal)

    monkeypatch.setattr(_journal.Journal, "status", slow_status)
    engine = StallingEngine(5)
    job = IngestJob.describe(write_ids(tmp_path, [f"d{i}" for i in range(10)]), out=tmp_path / "o.jsonl", engine=engine)
    task = asyncio.create_task(job.run())
    await engine.stalled.wait()
    task.cancel()
    await asyncio.to_thread(reading.wait, 5)
    task.cancel()  # while the summary is read
    with pytest.raises(asyncio.CancelledError):
        await task
    assert job.summary is not None and job.summary.interrupted and job.summary.status.done == 5
    assert other_tasks() == []
    assert not [t for t in threading.enumerate() if t.name.startswith("health-async-journal")]


class RefusingEngine:
    def run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        raise ValueError("engine refused the job")


async def test_an_engine_whose_run_raises_leaves_no_task(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    job = IngestJob.describe(write_ids(tmp_path, ["a", "b"]), out=out, engine=RefusingEngine())
    with pytest.raises(ValueError, match="engine refused"):
        await job.run()
    await asyncio.sleep(0)
    assert other_tasks() == []
    assert job.summary is not None and job.summary.status.pending == 2


async def test_local_engine_rate_limit_and_its_arguments(server: FakeHealthServer, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="rate_limit"):
        LocalEngine(HealthClient(base_url=server.url, token="t"), rate_limit=5)

    def factory(limiter: Any) -> HealthClient:
        return HealthClient(base_url=server.url, token=server.token, user_id=server.data.user_ids[0], limiter=limiter)

    # 30 per second with a burst of 30: 45 ids take at least half a second (concurrency alone: a few ms)
    ids_file = write_ids(tmp_path, doc_ids(server)[:45])
    started = asyncio.get_running_loop().time()
    summary = await IngestJob.describe(
        ids_file, out=tmp_path / "o.jsonl", client_factory=factory, rate_limit=30, concurrency=8
    ).run()
    assert summary.ok
    assert asyncio.get_running_loop().time() - started >= (45 - 30) / 30 * 0.9


def test_progress_shows_rate_eta_and_unknown() -> None:
    stream = io.StringIO()
    bar = IngestProgress("upload", total=4, enabled=True, stream=stream)
    bar.add(WorkResult("a", {}, ok=True, retryable=False))
    bar._last = 0
    bar.add(WorkResult("b", {}, ok=False, retryable=False, unknown=True))
    bar.close()
    text = stream.getvalue()
    assert "2/4" in text and "ETA" in text and "unknown 1" in text and "/s" in text


def test_health_async_does_not_import_ingest() -> None:
    code = "import sys, health_async; assert 'health_async.ingest' not in sys.modules; assert 'ray' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------ CLI


@pytest.fixture
def threaded_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=25) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        yield srv


def test_cli_describe_status_and_bad_input(
    threaded_server: FakeHealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = list(threaded_server.data.documents[threaded_server.data.user_ids[0]])[:10]
    ids_file = write_ids(tmp_path, [*ids, "missing"])
    out = tmp_path / "docs.jsonl"
    journal = tmp_path / "ingest.db"
    argv = ["ingest", "describe", str(ids_file), "--out", str(out), "--journal", str(journal), "--quiet"]
    assert cli.main(argv) == 1  # one item failed
    err = capsys.readouterr().err
    assert "done 10, failed 1 (0 retryable), unknown outcome 0, pending 0" in err
    assert len(by_key(out)) == 11
    assert cli.main(["ingest", "status", "--journal", str(journal)]) == 1
    text = capsys.readouterr().out
    assert "done 10" in text and "failed 1" in text and "pending 0" in text and "unknown outcome 0" in text
    assert cli.main(["ingest", "status", "--journal", str(journal), "--json"]) == 1
    assert orjson.loads(capsys.readouterr().out)["done"] == 10

    assert cli.main(["ingest", "describe", str(tmp_path / "nope.txt"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == "health-async: the ids file does not exist\n"  # one line, no traceback, no path
    unreadable = tmp_path / "dir-as-ids"
    unreadable.mkdir()
    assert cli.main(["ingest", "describe", str(unreadable), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_cli_upload_all_done_is_exit_0(
    threaded_server: FakeHealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_files(tmp_path, 3)
    out = tmp_path / "up.jsonl"
    code = cli.main(["ingest", "upload", str(folder), "--out", str(out), "--tasks", "smart,pii", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert len(by_key(out)) == 3
    assert all(sorted(r.query) == [("task", "pii"), ("task", "smart")] for r in threaded_server.requests[-3:])


def test_cli_ingest_summary_counts_blank_lines(
    threaded_server: FakeHealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = list(threaded_server.data.documents[threaded_server.data.user_ids[0]])[:3]
    ids_file = write_ids(tmp_path, [ids[0], "", ids[1], "", "", ids[2]])
    out = tmp_path / "docs.jsonl"
    assert cli.main(["ingest", "describe", str(ids_file), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.rstrip("\n").endswith("pending 0; 3 blank input line(s) skipped")
    assert set(by_key(out)) == set(ids)


def test_cli_and_ingest_agree_on_utf8_and_comments(
    threaded_server: FakeHealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = list(threaded_server.data.documents[threaded_server.data.user_ids[0]])[:2]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_bytes(
        ids[0].encode()
        + b"\n"
        + "\u00a0# a comment after a no-break space\n".encode()
        + b"\xff\xfebad\n"
        + b"   # an indented comment\n"
        + b"#"
        + b"x" * 400
        + b" (a long comment is still a comment)\n"
        + ids[1].encode()
        + b"\n"
    )
    # the command line: one error line for line 3, the two ids described, no comment sent
    assert cli.main(["describe-many", str(ids_file), "--ordered", "--quiet"]) == 1
    cli_lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line for line in cli_lines if "line" in line] == [
        {"line": 3, "error": {"type": "InvalidRequest", "message": "line 3: not valid UTF-8"}}
    ]
    assert [line["document_id"] for line in cli_lines if "document_id" in line] == ids
    # ingest: the same line fails alone with the same reason, the same ids are described, no comment sent
    out = tmp_path / "docs.jsonl"
    assert cli.main(["ingest", "describe", str(ids_file), "--out", str(out), "--quiet"]) == 1
    capsys.readouterr()
    rows = by_key(out)
    assert set(rows) == {*ids, "\\xff\\xfebad"}
    assert rows["\\xff\\xfebad"]["error"]["message"] == "line 3 of the input is not valid UTF-8"
    assert threaded_server.calls("describe") == 4  # each id once per run; never a comment


def test_journal_scan_keeps_input_order_and_indexes_across_runs_of_plain_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan inserts plain keys a run at a time (one statement per run): refused lines, link payloads, repeats
    and run boundaries in between must not move an item's index or its place in the order items are done."""

    monkeypatch.setattr(_journal, "_SCAN_RUN", 5)  # many run boundaries in a small input
    items: list[tuple[str, str | None, bytes | None]] = []
    expected: list[tuple[str, int, str, bytes | None]] = []  # key, index, state, payload: in input order
    for n in range(60):
        key = f"doc-{n:03d}"
        if n % 13 == 4:
            items.append((key, "not UTF-8", None))
            expected.append((key, len(expected), "failed", None))
        elif n % 11 == 7:
            items.append((key, None, b'{"row": %d}' % n))
            expected.append((key, len(expected), "pending", b'{"row": %d}' % n))
        else:
            items.append((key, None, None))
            expected.append((key, len(expected), "pending", None))
        if n % 9 == 2:
            items.append((key, None, None))  # a repeat: skipped, takes no index
    journal = _journal.Journal(tmp_path / "j.db")
    journal.open()
    try:
        journal.bind("describe", str(tmp_path / "out.jsonl"))
        scan = journal.scan(items, "mark-1")
        assert (scan.added, scan.duplicates, scan.invalid) == (60, 7, 5)
        rows = journal.db.execute("SELECT key, idx, state, payload FROM items ORDER BY rowid").fetchall()
        assert rows == expected
        todo = journal.todo(0, 100, retry_failed=False, unknown=False)
        assert [(row.key, row.idx, row.payload) for row in todo] == [
            (key, index, payload) for key, index, state, payload in expected if state == "pending"
        ]
        assert journal.scan(items, "mark-1") == _journal.ScanResult(0, 0, 0)  # the same input: not read again
        grown = [*items, ("doc-new", None, None)]
        assert journal.scan(grown, "mark-2").added == 1  # the keys it has are kept as they are
        assert journal.db.execute("SELECT idx FROM items WHERE key = 'doc-new'").fetchone() == (60,)
        done = [WorkResult(row.key, b'{"index": %d}' % row.idx, ok=True, retryable=False) for row in todo[:10]]
        journal.commit(done)
        assert journal.status().done == 10
        assert len(journal.todo(0, 100, retry_failed=False, unknown=False)) == len(todo) - 10 + 1
    finally:
        journal.close()
        journal.shutdown()


# ------------------------------------------------------------------------------------------ status reads only


async def test_status_leaves_a_cleanly_closed_journal_as_it_was(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ``-wal`` or ``-shm`` file appears beside the journal (a read-only SQLite connection would leave both),
    and the journal's bytes do not change."""
    ids_file = write_ids(tmp_path, doc_ids(server)[:3])
    journal = tmp_path / "j.db"
    await IngestJob.describe(ids_file, out=tmp_path / "o.jsonl", journal=journal, client=client).run()
    files, kept = sorted(os.listdir(tmp_path)), journal.read_bytes()
    assert "j.db-wal" not in files and "j.db-shm" not in files  # the run closed it cleanly
    assert (await IngestJob.status(journal)).done == 3
    assert sorted(os.listdir(tmp_path)) == files and journal.read_bytes() == kept
    assert await asyncio.to_thread(cli.main, ["ingest", "status", "--journal", str(journal)]) == 0
    assert "done 3" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path)) == files and journal.read_bytes() == kept


def test_status_beside_a_run_sees_its_commits_and_leaves_its_wal_to_it(tmp_path: Path) -> None:
    """While a run holds the journal, status is not the last connection: the run's WAL stays (it is the run's to
    checkpoint), and status reads what the run committed there."""
    from health_async.ingest import _journal

    run = _journal.Journal(tmp_path / "j.db")
    run.open()
    try:
        run.bind("describe", str(tmp_path / "out.jsonl"))
        run.scan(((f"d{n}", None, None) for n in range(5)), None)
        run.commit([WorkResult("d0", b'{"index": 0}', ok=True, retryable=False)])
        wal = tmp_path / "j.db-wal"
        assert wal.stat().st_size > 0  # the run's commits are in its WAL, not yet in the file
        status = asyncio.run(IngestJob.status(tmp_path / "j.db"))
        assert (status.done, status.pending) == (1, 4)
        assert wal.stat().st_size > 0 and (tmp_path / "j.db-shm").exists()
        run.commit([WorkResult("d1", b'{"index": 1}', ok=True, retryable=False)])  # the run goes on
        assert run.status().done == 2
    finally:
        run.close()
        run.shutdown()
    assert not (tmp_path / "j.db-wal").exists() and not (tmp_path / "j.db-shm").exists()
    assert asyncio.run(IngestJob.status(tmp_path / "j.db")).done == 2
