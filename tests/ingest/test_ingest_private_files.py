"""The files of health data an ingest job and its export write are their owner's only (mode 0600), whatever the
umask, as the ABHA card and the CLI's state files are."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from health_async import cli
from health_async.ingest._journal import open_private
from health_async.testing import FakeHealthServer

from ..conftest import ServerThread


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The usual umask: a file created without care is readable by everyone (0644)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def threaded_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=5) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        yield srv


def test_ingest_output_journal_and_exported_tables_are_private(
    threaded_server: FakeHealthServer, tmp_path: Path
) -> None:
    ids = list(threaded_server.data.documents[threaded_server.data.user_ids[0]])
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    out, journal = tmp_path / "docs.jsonl", tmp_path / "ingest.db"
    argv = ["ingest", "describe", str(tmp_path / "ids.txt"), "--out", str(out), "--journal", str(journal), "--quiet"]
    assert cli.main(argv) == 0
    assert mode(out) == 0o600 and mode(journal) == 0o600
    assert (tmp_path / "ids.txt").stat().st_mode & 0o044  # the check is not vacuous: the umask lets others read

    for suffix in ("csv", "parquet"):
        target = tmp_path / f"results.{suffix}"
        items = tmp_path / f"results.items.{suffix}"
        for path in (target, items):  # an earlier export, readable by others: replaced by a private one
            path.write_bytes(b"old")
            os.chmod(path, 0o644)
        assert cli.main(["ingest", "export", "--journal", str(journal), "--to", str(target)]) == 0
        assert mode(target) == 0o600 and mode(items) == 0o600, suffix


def test_the_journals_wal_file_is_private_too(tmp_path: Path) -> None:
    # SQLite gives the -wal and -shm files the journal's own mode: created private, they are too
    journal = tmp_path / "j.db"
    os.close(open_private(journal, os.O_RDONLY)[0])
    db = sqlite3.connect(journal)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
        db.commit()
        assert mode(f"{journal}-wal") == 0o600 and mode(f"{journal}-shm") == 0o600
    finally:
        db.close()


def test_open_private_ignores_a_strict_umask_and_keeps_an_existing_files_mode(tmp_path: Path) -> None:
    os.umask(0o277)  # would make a new file read-only for its owner
    fd, created = open_private(tmp_path / "a", os.O_WRONLY)
    os.close(fd)
    assert created and mode(tmp_path / "a") == 0o600
    (tmp_path / "b").write_bytes(b"")
    os.chmod(tmp_path / "b", 0o640)  # its owner shares it with a group on purpose
    fd, created = open_private(tmp_path / "b", os.O_WRONLY)
    os.close(fd)
    assert not created and mode(tmp_path / "b") == 0o640
    fd, created = open_private(tmp_path / "b", os.O_WRONLY, replace=True)  # a temporary file of ours
    os.close(fd)
    assert mode(tmp_path / "b") == 0o600
