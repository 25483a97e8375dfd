"""The ingest journal never marks done what is not durably written, tested the hard way: a child process whose
writes are cut short by a file-size limit (``RLIMIT_FSIZE``: the kernel writes up to the limit, then refuses
with ``EFBIG``), not a mocked journal."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from health_async.testing import FakeHealthServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE semantics")

DOCS = 400
#: The file-size limit of the first run: the output (about 3 KB a line) reaches it part-way; the journal and its
#: write-ahead log stay well below it.
LIMIT = 600 * 1024

_CHILD = """
import resource, sys
limit = int(sys.argv[1])
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from health_async.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=DOCS) as srv:
        yield srv


async def _ingest(server: FakeHealthServer, limit: int, argv: list[str]) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEALTH_ASYNC_")}
    env.update(
        HEALTH_ASYNC_BASE_URL=server.url, HEALTH_ASYNC_TOKEN=server.token, HEALTH_ASYNC_USER_ID=server.data.user_ids[0]
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, str(limit), *argv, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def _committed_offset(journal: Path) -> int:
    with contextlib.closing(sqlite3.connect(journal)) as db:
        row = db.execute("SELECT v FROM meta WHERE k = 'offset'").fetchone()
    return int(row[0]) if row else 0


def _done_keys(journal: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(journal)) as db:
        return {str(r[0]) for r in db.execute("SELECT key FROM items WHERE state = 'done'")}


async def test_a_write_cut_short_marks_nothing_done_and_the_next_run_redoes_it(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    ids = server.data.document_ids(server.data.user_ids[0])
    source = tmp_path / "ids.txt"
    source.write_text("\n".join(ids) + "\n")
    out, journal = tmp_path / "out.jsonl", tmp_path / "job.db"
    argv = ["ingest", "describe", str(source), "--out", str(out), "--journal", str(journal), "--quiet"]
    # batches of at most 8 x 16 lines (~400 KB): the first commits before the limit, however fast the machine
    argv += ["--concurrency", "4", "--batch-size", "16"]

    # The output's lines reach the limit part-way through: the kernel writes what fits, then refuses (EFBIG).
    code, err = await _ingest(server, LIMIT, argv)
    assert code != 0, err
    assert "IngestOutputError" in err and "could not be written" in err and "Traceback" not in err, err
    offset = _committed_offset(journal)
    assert 0 < offset <= LIMIT
    assert out.stat().st_size == offset  # cut back to the last committed line: no partial line left behind
    lines = out.read_bytes().splitlines()
    written = {orjson.loads(line)["key"] for line in lines}  # every line is whole JSON
    assert written == _done_keys(journal)  # done in the journal = durably in the output, both ways
    assert len(written) < DOCS

    code, err = await _ingest(server, 0, argv)  # the next run, without the limit, redoes the rest
    assert code == 0, err
    final = Counter(orjson.loads(line)["key"] for line in out.read_bytes().splitlines())
    assert set(final) == set(ids) and set(final.values()) == {1}  # every item once: none lost, none twice
    assert _done_keys(journal) == set(ids)


async def test_a_journal_that_cannot_be_written_is_a_typed_error(server: FakeHealthServer, tmp_path: Path) -> None:
    """SQLite refused by the same limit (here the journal's own files hit it first): a clear error, no
    traceback, nothing marked done that is not in the output, and the next run completes the job."""
    ids = server.data.document_ids(server.data.user_ids[0])
    source = tmp_path / "ids.txt"
    source.write_text("\n".join(ids) + "\n")
    out, journal = tmp_path / "out.jsonl", tmp_path / "job.db"
    argv = ["ingest", "describe", str(source), "--out", str(out), "--journal", str(journal), "--quiet"]
    code, err = await _ingest(server, 16 * 1024, argv)
    assert code != 0 and "IngestOutputError" in err and "Traceback" not in err, err
    code, err = await _ingest(server, 0, argv)
    assert code == 0, err
    final = Counter(orjson.loads(line)["key"] for line in out.read_bytes().splitlines())
    assert set(final) == set(ids) and set(final.values()) == {1}
