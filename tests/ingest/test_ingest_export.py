"""``ingest export``: a journal's results as two flat tables (documents, report items), CSV or Parquet, streamed."""

from __future__ import annotations

import asyncio
import csv
import os
import sqlite3
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from health_async import HealthClient, InvalidArgumentType, InvalidRequest, RetryPolicy, cli
from health_async.errors import IngestOutputError
from health_async.ingest import IngestJob, _export
from health_async.ingest._export import DOCUMENT_COLUMNS, ITEM_COLUMNS, export
from health_async.testing import FakeHealthServer

from ..conftest import non_utf8_name

NO_RETRY = RetryPolicy(attempts=1)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=30) as srv:
        yield srv


@pytest.fixture
async def job(server: FakeHealthServer, tmp_path: Path) -> tuple[Path, Path]:
    """A finished describe job over the fake's documents and one id that does not exist: (journal, output)."""
    user = server.data.user_ids[0]
    ids = [*server.data.document_ids(user), "no-such-doc"]
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    out, journal = tmp_path / "docs.jsonl", tmp_path / "j.db"
    async with HealthClient(base_url=server.url, token=server.token, user_id=user, retry=NO_RETRY) as client:
        await IngestJob.describe(tmp_path / "ids.txt", out=out, journal=journal, client=client, concurrency=8).run()
    return journal, out


def expected(out: Path) -> tuple[dict[str, dict[str, Any]], list[tuple[Any, ...]]]:
    """What the tables must say, read independently from the job's own output lines."""
    docs: dict[str, dict[str, Any]] = {}
    items: list[tuple[Any, ...]] = []
    for raw in out.read_bytes().splitlines():
        line = orjson.loads(raw)
        docs[line["key"]] = line
        report = (line.get("document") or {}).get("smart_report") or {}
        for verified, name in ((True, "verified"), (False, "unverified")):
            for item in report.get(name) or ():
                items.append(
                    (line["key"], item["name"], item["value"], item["unit"], item["range"], item["flag"], verified)
                )
    return docs, items


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def written(directory: Path) -> list[str]:
    """The export's files (tables or ``.partial`` ones) in ``directory``."""
    return sorted(p.name for p in directory.glob("results*"))


def _none(value: str) -> str | None:
    return value or None


async def test_csv_has_one_row_per_item_and_one_per_report_value(job: tuple[Path, Path], tmp_path: Path) -> None:
    journal, out = job
    docs, items = expected(out)
    counts = await IngestJob.export(journal, tmp_path / "results.csv")
    rows, item_rows = read_csv(tmp_path / "results.csv"), read_csv(tmp_path / "results.items.csv")
    assert counts == (len(rows), len(item_rows)) and len(rows) == len(docs) == 31
    assert list(rows[0]) == list(DOCUMENT_COLUMNS) and list(item_rows[0]) == list(ITEM_COLUMNS)
    for row in rows:
        line = docs[row["key"]]
        if row["key"] == "no-such-doc":
            assert row["status"] == "failed" and row["error_type"] == "DocumentNotFound" and row["error"]
            assert row["document_id"] == "" and row["report_items"] == ""
            continue
        doc = line["document"]
        assert row["status"] == "done" and row["error_type"] == "" and row["error"] == ""
        assert row["document_id"] == doc["document_id"] == row["key"]
        assert _none(row["document_type"]) == doc["document_type"]
        assert int(row["files"]) == len(doc["files"])
        assert int(row["index"]) == line["index"]
        if doc["document_date_epoch"] is not None:
            assert row["document_date"].endswith("+00:00")
    got = [
        (r["document_id"], _none(r["name"]), _none(r["value"]), _none(r["unit"]), _none(r["range"]), r["flag"],
         r["verified"] == "True")
        for r in item_rows
    ]  # fmt: skip
    assert sorted(got, key=repr) == sorted(items, key=repr) and items


async def test_parquet_has_the_same_rows_with_typed_columns(job: tuple[Path, Path], tmp_path: Path) -> None:
    journal, out = job
    docs, items = expected(out)
    await IngestJob.export(journal, tmp_path / "results.parquet")
    table = pq.read_table(tmp_path / "results.parquet")
    item_table = pq.read_table(tmp_path / "results.items.parquet")
    assert table.column_names == list(DOCUMENT_COLUMNS) and item_table.column_names == list(ITEM_COLUMNS)
    assert str(table.schema.field("index").type) == "int64" and str(item_table.schema.field("verified").type) == "bool"
    rows = table.to_pylist()
    assert {r["key"] for r in rows} == set(docs)
    assert next(r for r in rows if r["status"] != "done")["error_type"] == "DocumentNotFound"
    got = [tuple(r[c] for c in ITEM_COLUMNS) for r in item_table.to_pylist()]
    assert sorted(got, key=repr) == sorted(items, key=repr)


async def test_the_command_line_exports(
    job: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal, _ = job
    argv = ["ingest", "export", "--journal", str(journal), "--to", str(tmp_path / "r.csv")]
    status = await asyncio.to_thread(cli.main, argv)  # the CLI runs its own event loop
    assert status == 0 and (tmp_path / "r.items.csv").exists()
    assert "exported 31 documents" in capsys.readouterr().err
    argv = ["ingest", "export", "--journal", str(journal), "--to", str(tmp_path / "r.out"), "--format", "parquet"]
    assert await asyncio.to_thread(cli.main, argv) == 0
    assert pq.read_table(tmp_path / "r.out").num_rows == 31 and (tmp_path / "r.items.parquet").exists()
    argv = ["ingest", "export", "--journal", str(journal), "--to", str(tmp_path / "r.json")]
    assert await asyncio.to_thread(cli.main, argv) == 2
    assert ".csv or .parquet" in capsys.readouterr().err and not (tmp_path / "r.json").exists()


async def test_format_argument_wins_over_the_suffix(job: tuple[Path, Path], tmp_path: Path) -> None:
    journal, _ = job
    assert (await IngestJob.export(journal, tmp_path / "results.txt", format="csv"))[0] == 31
    assert read_csv(tmp_path / "results.txt")[0].keys() == set(DOCUMENT_COLUMNS)
    assert read_csv(tmp_path / "results.items.csv")
    with pytest.raises(InvalidRequest, match=r"\.csv or \.parquet"):
        await IngestJob.export(journal, tmp_path / "results.csv", format="xlsx")  # type: ignore[arg-type]


async def test_bad_requests_are_refused_before_writing(job: tuple[Path, Path], tmp_path: Path) -> None:
    journal, _ = job
    with pytest.raises(InvalidRequest, match=r"\.csv or \.parquet"):
        await IngestJob.export(journal, tmp_path / "results.xlsx")
    with pytest.raises(InvalidRequest, match="does not exist"):
        await IngestJob.export(tmp_path / "nope.db", tmp_path / "r.csv")
    (tmp_path / "other.db").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(InvalidRequest, match="not an ingest journal"):
        await IngestJob.export(tmp_path / "other.db", tmp_path / "r.csv")
    assert not (tmp_path / "results.xlsx").exists() and not (tmp_path / "r.csv").exists()


async def test_parquet_without_pyarrow_is_refused_before_writing(
    job: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, _ = job
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    with pytest.raises(InvalidRequest, match=r"health_async\[parquet\]"):
        await IngestJob.export(journal, tmp_path / "results.parquet")
    assert not written(tmp_path)


async def test_a_missing_or_changed_output_is_refused_and_leaves_no_table(
    job: tuple[Path, Path], tmp_path: Path
) -> None:
    journal, out = job
    kept = out.read_bytes()
    with pytest.raises(InvalidRequest, match="write over the journal"):
        await IngestJob.export(journal, journal, format="csv")
    with pytest.raises(InvalidRequest, match="write over the journal"):
        await IngestJob.export(journal, out, format="csv")
    assert out.read_bytes() == kept
    for changed in (b"x" * len(kept), b"x\n" * len(kept)):  # same size, not the job's lines: found while writing
        out.write_bytes(changed)
        with pytest.raises(InvalidRequest, match="changed outside the job"):
            await IngestJob.export(journal, tmp_path / "results.csv")
        assert not written(tmp_path)  # neither table nor a .partial file
    out.write_bytes(kept[:10])
    with pytest.raises(InvalidRequest, match="shorter than the journal"):
        await IngestJob.export(journal, tmp_path / "results.csv")
    out.unlink()
    with pytest.raises(InvalidRequest, match="missing"):
        await IngestJob.export(journal, tmp_path / "results.parquet")
    assert not written(tmp_path)


def test_every_journal_state_has_its_row(tmp_path: Path) -> None:
    """Pending, in flight (a running or killed upload: unknown), unknown and failed items, with their errors; the
    uncommitted bytes past the journal's offset (a half-written batch) are not read."""
    journal = _synthetic_journal(tmp_path, 2)
    with open(tmp_path / "big.jsonl", "ab") as f:
        f.write(b'{"key":"half-written","index":9,"docum')
    failed = orjson.dumps(
        {"index": 5, "upload": {"document_id": "up-1"}, "error": {"type": "ServerError", "message": "HTTP 503"}}
    )
    db = sqlite3.connect(journal)
    db.executemany(
        "INSERT INTO items VALUES (?, ?, ?, 0, ?)",
        [("p", 2, "pending", None), ("i", 3, "inflight", None), ("u", 4, "unknown", None), ("f", 5, "failed", failed)],
    )
    db.commit()
    db.close()
    assert export(journal, tmp_path / "r.csv") == (6, 6)
    rows = {r["key"]: r for r in read_csv(tmp_path / "r.csv")}
    assert [r["status"] for r in rows.values()] == ["done", "done", "pending", "unknown", "unknown", "failed"]
    assert rows["f"]["document_id"] == "up-1" and rows["f"]["error_type"] == "ServerError"
    assert rows["f"]["error"] == "HTTP 503" and rows["p"]["error"] == ""
    assert rows["d1"]["document_date"] == "2023-11-14T22:13:20+00:00" and rows["d1"]["report_items"] == "3"


def _synthetic_journal(tmp_path: Path, n: int, dates: list[int] | None = None) -> Path:
    """A finished describe journal of ``n`` documents of 3 report items each, written directly (document ``i``
    dated ``dates[i]``, else 1_700_000_000)."""
    out = tmp_path / "big.jsonl"
    item = {"name": "Hb", "value": "13.5", "unit": "g/dL", "range": "13-17", "flag": "NORMAL", "result_id": None}
    with open(out, "wb") as f:
        for i in range(n):
            date = dates[i] if dates else 1_700_000_000
            doc = {"document_id": f"d{i}", "document_type": "lr", "document_date_epoch": date,
                   "files": [{}], "smart_report": {"verified": [item, item], "unverified": [item]}}  # fmt: skip
            f.write(orjson.dumps({"key": f"d{i}", "index": i, "document": doc}) + b"\n")
    db = sqlite3.connect(tmp_path / "big.db")
    db.executescript("CREATE TABLE items (key TEXT PRIMARY KEY, idx INTEGER, state TEXT, retryable INTEGER, line BLOB);"
                     "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT);")  # fmt: skip
    db.executemany(
        "INSERT INTO meta VALUES (?, ?)", [("op", "describe"), ("out", str(out)), ("offset", str(out.stat().st_size))]
    )
    db.executemany("INSERT INTO items VALUES (?, ?, 'done', 0, NULL)", ((f"d{i}", i) for i in range(n)))
    db.commit()
    db.close()
    return tmp_path / "big.db"


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_document_dates_follow_the_models_epoch_rule(tmp_path: Path, suffix: str) -> None:
    """Milliseconds are read as the models read them (a date in milliseconds raised ValueError: year 55840); a
    date out of range is null, as ``Document.document_date`` is None."""
    journal = _synthetic_journal(tmp_path, 4, [1_700_000_000, 1_700_000_000_250, 10**16, -(10**14)])
    assert export(journal, tmp_path / f"r.{suffix}") == (4, 12)
    if suffix == "csv":
        dates = [_none(r["document_date"]) for r in read_csv(tmp_path / "r.csv")]
    else:
        dates = pq.read_table(tmp_path / "r.parquet").column("document_date").to_pylist()
    assert dates == ["2023-11-14T22:13:20+00:00", "2023-11-14T22:13:20.250000+00:00", None, None]


async def test_a_target_that_cannot_be_written_is_refused_and_leaves_nothing(
    job: tuple[Path, Path], tmp_path: Path
) -> None:
    """A missing folder, a directory, a NUL or a wrong type: InvalidRequest before anything is written (they
    raised FileNotFoundError, IsADirectoryError, ValueError, TypeError); no message shows the path."""
    journal, _ = job
    (tmp_path / "results.csv").mkdir()
    (tmp_path / "other.items.csv").mkdir()
    (tmp_path / "a-file").write_bytes(b"")
    for to, match in (
        (tmp_path / "missing" / "r.csv", "folder of the export file does not exist"),
        (tmp_path / "a-file" / "r.csv", "folder of the export file does not exist"),
        (tmp_path / "results.csv", "is a directory"),
        (tmp_path / "other.csv", "is a directory"),  # its items table's name
        (str(tmp_path / "r\x00.csv"), "to contains a NUL"),
    ):
        with pytest.raises(InvalidRequest, match=match) as info:
            await IngestJob.export(journal, to)
        assert str(tmp_path) not in str(info.value)
    bad: Any = 5
    with pytest.raises(InvalidArgumentType, match="to must be a str"):
        await IngestJob.export(journal, bad)
    with pytest.raises(InvalidArgumentType, match="journal must be a str"):
        export(bad, tmp_path / "r.csv")
    with pytest.raises(InvalidRequest, match="journal contains a NUL"):
        await IngestJob.export(str(tmp_path / "j\x00.db"), tmp_path / "r.csv")
    assert sorted(os.listdir(tmp_path)) == [
        "a-file", "docs.jsonl", "ids.txt", "j.db", "other.items.csv", "results.csv"
    ]  # fmt: skip


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_table_that_fails_to_be_written_is_ingest_output_error_and_nothing_is_published(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = _synthetic_journal(tmp_path, 3)
    if os.path.exists("/dev/full"):  # a full disk: every write fails with ENOSPC
        (tmp_path / f"r.items.{suffix}.partial").symlink_to("/dev/full")
        with pytest.raises(IngestOutputError, match="could not be written") as info:
            export(journal, tmp_path / f"r.{suffix}")
        assert str(tmp_path) not in str(info.value)
        assert not written(tmp_path) and not list(tmp_path.glob("r.*"))  # the link removed with the partial files
    real = os.replace

    def fail_second(src: Any, dst: Any) -> None:  # the first table renamed, the second refused
        if str(dst).endswith(f".items.{suffix}"):
            raise PermissionError(13, "Permission denied", str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", fail_second)
    with pytest.raises(IngestOutputError, match=r"\(Permission denied\); nothing was published"):
        export(journal, tmp_path / f"r.{suffix}")
    assert not list(tmp_path.glob("*.partial"))  # no .partial file is left behind


async def test_a_journal_whose_name_is_not_utf8_is_exported(server: FakeHealthServer, tmp_path: Path) -> None:
    """``quote`` of its name for SQLite's URI raised UnicodeEncodeError."""
    journal = non_utf8_name(tmp_path, b"j\xff.db")
    user = server.data.user_ids[0]
    (tmp_path / "ids.txt").write_text("\n".join(server.data.document_ids(user)[:3]) + "\n")
    async with HealthClient(base_url=server.url, token=server.token, user_id=user, retry=NO_RETRY) as client:
        await IngestJob.describe(tmp_path / "ids.txt", out=tmp_path / "o.jsonl", journal=journal, client=client).run()
    assert (await IngestJob.export(journal, tmp_path / "r.csv"))[0] == 3


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_memory_stays_flat_over_many_rows(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_export, "BATCH", 500)  # both journals span many row groups
    (tmp_path / "s").mkdir()
    (tmp_path / "b").mkdir()
    small = _synthetic_journal(tmp_path / "s", 2_000)
    big = _synthetic_journal(tmp_path / "b", 30_000)
    peaks = []
    for journal in (small, big):
        tracemalloc.start()
        counts = export(journal, journal.parent / f"r.{suffix}")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert counts[1] == 3 * counts[0]
    assert peaks[1] < 2 * peaks[0] + 1_000_000, peaks  # 15x the rows, not 15x the memory
    assert peaks[1] < 8_000_000, peaks  # 120,000 rows in all, in batches of 500


def test_import_health_async_never_imports_pyarrow() -> None:
    code = "import sys, health_async, health_async.ingest; assert 'pyarrow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------ stopping an export


@pytest.mark.parametrize("cancels", [1, 2])
async def test_a_cancelled_export_stops_its_thread_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cancels: int
) -> None:
    """Ctrl-C mid-way through a large export: the thread stops and has ended when the CancelledError reaches the
    caller (also when cancelled again while it stops), the ``.partial`` files are removed and no table is
    published."""
    journal = _synthetic_journal(tmp_path, 40_000)
    reached, go, ended = threading.Event(), threading.Event(), threading.Event()
    rows = 0
    done_row, real_export = _export._done_row, _export.export

    def held_mid_way(line: dict[str, Any], items: list[tuple[Any, ...]]) -> tuple[Any, ...]:
        nonlocal rows
        rows += 1
        if rows == 15_000:  # the first batch is in the .partial files; the thread waits here until cancelled
            reached.set()
            go.wait(30)
        return done_row(line, items)

    def export(*args: Any, **kwargs: Any) -> tuple[int, int]:
        try:
            return real_export(*args, **kwargs)
        finally:
            ended.set()

    monkeypatch.setattr(_export, "_done_row", held_mid_way)
    monkeypatch.setattr(_export, "export", export)
    task = asyncio.create_task(IngestJob.export(journal, tmp_path / "results.csv"))
    assert await asyncio.to_thread(reached.wait, 30)
    assert written(tmp_path) == ["results.csv.partial", "results.items.csv.partial"]
    for _ in range(cancels):
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)  # the cancellation reaches the export before the thread goes on
    go.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended.is_set()  # the thread had ended when the cancellation propagated
    assert rows < 40_000  # stopped mid-way, not run to the end
    assert written(tmp_path) == []  # no table, no .partial file


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
@pytest.mark.parametrize("stop_at", [1, 3, 6])
def test_a_stopped_export_leaves_the_earlier_tables_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, stop_at: int
) -> None:
    """``stop`` is asked before the first row, every STOP_EVERY rows and once more when both tables are written
    (6 asks for 10,000 rows): at any of them, the export raises ExportStopped and publishes nothing."""
    monkeypatch.setattr(_export, "BATCH", 3_000)  # row groups written before the stop
    journal = _synthetic_journal(tmp_path, 10_000)
    target = tmp_path / f"results.{suffix}"
    assert export(journal, target) == (10_000, 30_000)
    earlier = {name: (tmp_path / name).read_bytes() for name in written(tmp_path)}
    asks = 0

    def stop() -> bool:
        nonlocal asks
        asks += 1
        return asks == stop_at

    with pytest.raises(_export.ExportStopped):
        export(journal, target, stop=stop)
    assert asks == stop_at
    assert {name: (tmp_path / name).read_bytes() for name in written(tmp_path)} == earlier  # no .partial either
    asks, stop_at = 0, 0  # never stops
    assert export(journal, target, stop=stop) == (10_000, 30_000)
    assert asks == 6 and _export.STOP_EVERY == 2_000  # at rows 0, 2,000, ... 8,000, and before publishing


async def test_an_export_leaves_a_cleanly_closed_journal_as_it_was(job: tuple[Path, Path], tmp_path: Path) -> None:
    journal, _ = job
    files, kept = sorted(os.listdir(tmp_path)), journal.read_bytes()
    assert "j.db-wal" not in files and "j.db-shm" not in files
    await IngestJob.export(journal, tmp_path / "results.csv")
    assert sorted(set(os.listdir(tmp_path)) - set(written(tmp_path))) == files and journal.read_bytes() == kept
