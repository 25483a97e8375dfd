"""The ingest journal: a local SQLite file (WAL) owned by one thread, and the output file it vouches for.

Every method that touches the database or the output runs in the journal's single thread
(:meth:`Journal.call`): the event loop never blocks on SQLite or on ``fsync``. The connection is created in
that thread and used only there.

Tables::

    items(key PRIMARY KEY, idx, state, retryable, line,   state: pending | inflight | done | failed | unknown
          payload, link_status, link_error)
    meta(k PRIMARY KEY, v)                                 op, output path, committed output offset, input mark

``line`` holds the JSON line (without ``key``) of a failed or unknown item: failures reach the output only in
the *tail* written at the end of a complete run (see :mod:`health_async.ingest`). ``payload`` is what a link
item sends (its input row, bundle included); ``link_status`` and ``link_error`` are the
``abha.link_care_context`` webhook's outcome, recorded by :class:`~health_async.ingest.LinkRecorder` (a journal of
an earlier version gets the three columns when opened).

The journal and the output file are health data: a job creates them readable and writable by their owner only
(mode 0600, whatever the umask: :func:`open_private`), and SQLite gives the journal's ``-wal`` and ``-shm`` files
the journal's mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, Final, NamedTuple, TypeVar

import attrs

from .. import _json
from ..errors import IngestOutputError, InvalidArgumentType, InvalidRequest
from ._links import BUSY_TIMEOUT_MS
from ._work import WorkResult

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, one run at a time is then the user's care
    fcntl = None  # type: ignore[assignment]

__all__ = ["PRIVATE", "IngestStatus", "Journal", "ScanResult", "TodoRow", "check_path", "open_private"]

#: The mode of every file an ingest job or export creates: its owner's only (they hold health data).
PRIVATE: Final = 0o600


def open_private(path: str | os.PathLike[str], flags: int, *, replace: bool = False) -> tuple[int, bool]:
    """``os.open(path, flags)``, creating the file readable and writable by its owner only (:data:`PRIVATE`)
    whatever the umask; returns the descriptor and whether this call created the file.

    A file that already exists is opened as it is and keeps its mode (judgement call: its owner chose it; a file
    this package created is private already), except with ``replace`` (a temporary file of ours, which a crashed
    run may have left): it is truncated and made private again. Made so before anything is written, so no byte of
    health data is ever readable by others, not even while it is written."""
    if replace:
        fd = os.open(path, flags | os.O_CREAT | os.O_TRUNC, PRIVATE)
        created = True
    else:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, PRIVATE)
            created = True
        except FileExistsError:
            fd = os.open(path, flags & ~(os.O_CREAT | os.O_EXCL))
            created = False
    if created and hasattr(os, "fchmod"):  # os.open's mode passes through the umask: set it exactly
        try:
            os.fchmod(fd, PRIVATE)
        except BaseException:
            os.close(fd)
            raise
    return fd, created


T = TypeVar("T")

PENDING: Final = "pending"
INFLIGHT: Final = "inflight"
DONE: Final = "done"
FAILED: Final = "failed"
UNKNOWN: Final = "unknown"

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS items (
    key TEXT PRIMARY KEY,
    idx INTEGER NOT NULL,
    state TEXT NOT NULL,
    retryable INTEGER NOT NULL DEFAULT 0,
    line BLOB,
    payload BLOB,
    link_status TEXT,
    link_error TEXT
);
CREATE INDEX IF NOT EXISTS items_state ON items(state);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""

#: The line of an upload left in flight by a crash (or Ctrl-C) and not resolved since.
UNKNOWN_MESSAGE: Final = (
    "the upload may or may not have reached the service (the run stopped while it was in flight); it was not sent "
    "again: check the document list, then rerun with --reupload-unknown to send it again"
)
#: The same for a link (settled at the next run when it can be: see ``health_async.ingest._links``).
UNKNOWN_LINK_MESSAGE: Final = (
    "the link may or may not have reached the service (the run stopped while it was in flight); the next run "
    "checks it (a recorded webhook, or the linked list for the row's oid) before sending it again"
)
#: Columns added after the first version, with their types (added to an older journal when it is opened).
_ADDED_COLUMNS: Final = (("payload", "BLOB"), ("link_status", "TEXT"), ("link_error", "TEXT"))


@attrs.frozen
class IngestStatus:
    """Counts of a journal's items: what ``health-async ingest status`` shows."""

    op: str
    total: int
    done: int
    failed: int
    #: Failed items whose error is worth ``--retry-failed``.
    retryable: int
    pending: int
    #: Uploads whose outcome is unknown (sent, or perhaps sent, when a run stopped): never resent unless asked.
    unknown: int
    #: Keys (file paths) of the unknown-outcome uploads, in input order.
    unknown_keys: tuple[str, ...] = attrs.field(default=(), repr=False)
    #: Link jobs: items whose ``abha.link_care_context`` webhook said ``LINKED`` (recorded by a LinkRecorder).
    linked: int = 0
    #: Link jobs: items whose webhook said ``ERRORED``.
    errored: int = 0
    #: Link jobs: items sent (done) whose webhook has not been recorded yet.
    waiting: int = 0
    #: Link jobs: keys of the ``ERRORED`` items, in input order.
    errored_keys: tuple[str, ...] = attrs.field(default=(), repr=False)

    @property
    def complete(self) -> bool:
        """True when every item is done, failed or of unknown outcome (each then has its line in the output)."""
        return self.pending == 0


@attrs.frozen
class ScanResult:
    """What a scan of the input found."""

    #: Items new to the journal.
    added: int
    #: Repeated keys skipped (each key is processed once).
    duplicates: int
    #: Items refused at reading (a line that is not UTF-8, a directory that cannot be listed).
    invalid: int


class Journal:
    """The journal file and the output file of one job, used from one thread (see :meth:`call`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(check_path("journal", path))
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="health-async-journal")
        self._db: sqlite3.Connection | None = None
        self._out: IO[bytes] | None = None
        self.offset = 0

    def __repr__(self) -> str:
        return "Journal()"

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in the journal's thread. If the caller is cancelled meanwhile, ``fn`` still completes
        (a batch is never half-committed by a cancellation): the journal stays consistent.

        SQLite failing to write (a full disk, a file-size limit, an I/O error: its transaction is rolled back, so
        nothing of it is marked done) raises :class:`IngestOutputError`, as the output's own failures do."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        except sqlite3.OperationalError as exc:
            raise IngestOutputError(
                f"ingest: the journal could not be written ({exc}); its last transaction was rolled back, so "
                "nothing of it is marked done: the next run redoes it"
            ) from exc

    def shutdown(self) -> None:
        """Stop the thread (after closing, in it)."""
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ in the journal's thread

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the journal is not open")
        return self._db

    def open(self) -> None:
        """Open (or create) the journal for a run. A new journal is created private (mode 0600: its lines are
        health data); SQLite gives its ``-wal`` and ``-shm`` files the journal's own mode."""
        with contextlib.suppress(OSError):  # what cannot be opened here, SQLite refuses below, as it always did
            os.close(open_private(self.path, os.O_RDONLY)[0])
        try:
            db = sqlite3.connect(self.path, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)
            have = {str(row[1]) for row in db.execute("PRAGMA table_info(items)")}
            for name, kind in _ADDED_COLUMNS:
                if name not in have:
                    db.execute(f"ALTER TABLE items ADD COLUMN {name} {kind}")
        except sqlite3.OperationalError as exc:  # it cannot be written (a full disk, a file-size limit, I/O)
            raise IngestOutputError(f"ingest: the journal could not be written ({exc})") from exc
        except sqlite3.DatabaseError:  # not an SQLite database at all
            raise InvalidRequest("the journal file cannot be used as an ingest journal") from None
        self._db = db

    def open_readonly(self) -> None:
        """Open an existing journal to read it (``status``): never creates it, changes its content or leaves a
        ``-wal`` or ``-shm`` file beside it (see :func:`read_connection`)."""
        if not os.path.isfile(self.path):
            raise InvalidRequest("the journal file does not exist")
        db = read_connection(self.path)
        try:
            db.execute("SELECT count(*) FROM items").fetchone()
            db.execute("SELECT count(*) FROM meta").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise InvalidRequest("the file is not an ingest journal") from None
        self._db = db

    def close(self) -> None:
        if self._out is not None:
            self._out.close()  # also releases the lock
            self._out = None
        if self._db is not None:
            self._db.close()
            self._db = None

    def settle_meta(self, name: str, value: str) -> str:
        """The journal's ``name`` as first set: ``value`` is stored when there is none yet (committed)."""
        old = self.meta(name)
        if old is not None:
            return old
        self.db.execute("BEGIN")
        self._set_meta(name, value)
        self.db.execute("COMMIT")
        return value

    def meta(self, name: str) -> str | None:
        row = self.db.execute("SELECT v FROM meta WHERE k = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, name: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(k, v) VALUES (?, ?)", (name, value))

    def bind(self, op: str, out: str) -> None:
        """Tie a new journal to ``op`` and the output ``out``; check an old one was tied to the same.

        Then lock the output (one run at a time) and open it at the committed offset.
        """
        out = os.path.abspath(check_path("out", out))
        old_op, old_out = self.meta("op"), self.meta("out")
        if old_op is not None and old_op != op:
            raise InvalidRequest(f"the journal belongs to an ingest {old_op} job, not {op}")
        if old_out is not None and old_out != out:
            raise InvalidRequest("the journal was written for another output file: give that one, or a new journal")
        if os.path.isdir(out):
            raise InvalidRequest("the output path is a directory")
        exists = os.path.exists(out)
        if old_out is None and exists and os.path.getsize(out) > 0:
            raise InvalidRequest(
                "the output file exists and is not empty but the journal is new: give the journal that wrote it, "
                "or another output file"
            )
        if old_out is not None and not exists:
            raise InvalidRequest("the output file the journal vouches for is missing: restore it or start anew")
        try:
            fd, _ = open_private(out, os.O_RDWR)  # health data: its owner's only (an existing file keeps its mode)
        except OSError as exc:
            raise InvalidRequest(f"the output file cannot be opened for writing ({exc.strerror})") from None
        handle = open(fd, "r+b", buffering=0)
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                raise InvalidRequest("another ingest run is writing this output file") from None
        self._out = handle
        if not exists:
            _fsync_dir(out)
        self.offset = int(self.meta("offset") or 0)
        if os.fstat(handle.fileno()).st_size < self.offset:
            raise InvalidRequest("the output file is shorter than the journal records: it was changed outside the job")
        self.db.execute("BEGIN")
        self._set_meta("op", op)
        self._set_meta("out", out)
        self._set_meta("offset", str(self.offset))
        self.db.execute("COMMIT")

    def scan(self, items: Iterable[tuple[str, str | None, bytes | None]], mark: str | None) -> ScanResult:
        """Add the input's items to the journal: ``(key, error, payload)`` triples, ``error`` set for an item refused
        at reading, ``payload`` what a link item sends. Skipped when ``mark`` (a fingerprint of the input) matches
        the last complete scan's."""
        if mark is not None and self.meta("input") == mark:
            return ScanResult(0, 0, 0)
        db = self.db
        seen: set[str] = set()
        added = duplicates = invalid = 0
        index = 0
        # Plain items (no error, no payload: every id of a describe, every file of an upload) go in runs of
        # consecutive indexes, one statement per run over a JSON array of keys (SQLite's json_each), not one per
        # key: per-row statements cost about 8 us a row here, a run about 1.5 us (benchmarks/ingest_bench.py).
        run: list[str] = []
        run_start = 0
        db.execute("BEGIN")
        try:
            for key, error, payload in items:
                if key in seen:
                    duplicates += 1
                    continue
                seen.add(key)
                if error is None and payload is None:
                    if not run:
                        run_start = index
                    run.append(key)
                    if len(run) >= _SCAN_RUN:
                        added += _insert_run(db, run_start, run)
                        run = []
                    index += 1
                    continue
                if run:
                    added += _insert_run(db, run_start, run)
                    run = []
                if error is None:
                    cursor = db.execute(
                        "INSERT OR IGNORE INTO items(key, idx, state, payload) VALUES (?, ?, ?, ?)",
                        (key, index, PENDING, payload),
                    )
                else:
                    invalid += 1
                    line = _json.dumps(
                        {"index": index, "error": {"type": "InvalidRequest", "message": error, "retryable": False}}
                    )
                    cursor = db.execute(
                        "INSERT OR IGNORE INTO items(key, idx, state, line) VALUES (?, ?, ?, ?)",
                        (key, index, FAILED, line),
                    )
                added += cursor.rowcount
                index += 1
            if run:
                added += _insert_run(db, run_start, run)
            if mark is not None:
                self._set_meta("input", mark)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return ScanResult(added, duplicates, invalid)

    def recover(self) -> int:
        """After a crash: adopt the complete result lines written after the committed offset (their keys become
        done), cut what follows (a partial line, the failure tail of an earlier run), then turn uploads left in
        flight into unknown outcomes. Returns how many lines were adopted."""
        out = self._require_out()
        out.seek(self.offset)
        rest = out.read()
        adopted: list[str] = []
        seen: set[str] = set()
        keep = 0
        db = self.db
        for raw in _complete_lines(rest):
            try:
                obj = _json.loads(raw)
            except _json.JSONDecodeError:
                break
            if not isinstance(obj, dict) or "error" in obj or not isinstance(obj.get("key"), str):
                break  # the failure tail (regenerated at the end of a complete run) or foreign bytes
            row = db.execute("SELECT state FROM items WHERE key = ?", (obj["key"],)).fetchone()
            if row is None or row[0] == DONE or obj["key"] in seen:
                break  # not this job's, or already has its line: cut here (never two lines for one key)
            adopted.append(obj["key"])
            seen.add(obj["key"])
            keep += len(raw)
        new_offset = self.offset + keep
        if new_offset != self.offset + len(rest):
            out.truncate(new_offset)
            os.fsync(out.fileno())
        db.execute("BEGIN")
        db.executemany("UPDATE items SET state = ?, line = NULL WHERE key = ?", ((DONE, k) for k in adopted))
        self._set_meta("offset", str(new_offset))
        db.execute("COMMIT")
        self.offset = new_offset
        out.seek(new_offset)
        self.resolve_inflight()
        return len(adopted)

    def resolve_inflight(self) -> int:
        """Uploads marked in flight without a result: their outcome is unknown (never resent unless asked)."""
        cursor = self.db.execute("UPDATE items SET state = ?, line = NULL WHERE state = ?", (UNKNOWN, INFLIGHT))
        return cursor.rowcount

    def todo(
        self, after: int, limit: int, retry_failed: bool, unknown: bool, only_unknown: bool = False
    ) -> list[TodoRow]:
        """The next ``limit`` items to do, in input order, after rowid ``after`` (``unknown``: items of unknown
        outcome too; ``only_unknown``: only those)."""
        states = "state = 'unknown'" if only_unknown else _todo(retry_failed, unknown)
        rows = self.db.execute(
            f"SELECT rowid, key, idx, state, payload FROM items WHERE rowid > ? AND ({states}) ORDER BY rowid LIMIT ?",
            (after, limit),
        ).fetchall()
        return list(map(TodoRow._make, rows))  # the columns' SQLite types are the fields' (INTEGER, TEXT, BLOB)

    def count_todo(self, retry_failed: bool, unknown: bool, only_unknown: bool = False) -> int:
        states = "state = 'unknown'" if only_unknown else _todo(retry_failed, unknown)
        return int(self.db.execute(f"SELECT count(*) FROM items WHERE {states}").fetchone()[0])

    def mark_inflight(self, keys: list[str]) -> None:
        """Commit, in one transaction, that ``keys`` are about to be sent (uploads, links: before the requests
        leave)."""
        db = self.db
        db.execute("BEGIN")
        try:
            db.executemany("UPDATE items SET state = ? WHERE key = ?", ((INFLIGHT, k) for k in keys))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def settled_by_webhook(self) -> list[tuple[str, int, bytes | None, str, str | None]]:
        """Unknown-outcome items whose link webhook was recorded: ``(key, index, payload, status, error)``."""
        rows = self.db.execute(
            "SELECT key, idx, payload, link_status, link_error FROM items WHERE state = ? AND link_status IN "
            "('LINKED', 'ERRORED') ORDER BY rowid",
            (UNKNOWN,),
        ).fetchall()
        return [(str(r[0]), int(r[1]), r[2], str(r[3]), None if r[4] is None else str(r[4])) for r in rows]

    def commit(self, results: list[WorkResult]) -> None:
        """Write the successes' lines, flush and fsync the output, then commit every result's new state and the
        output's new offset in one transaction. A crash between the two leaves lines that :meth:`recover`
        adopts; a crash during the write leaves a partial line that it cuts."""
        out = self._require_out()
        lines = [_keyed(r.key, r.line) for r in results if r.ok]
        if lines:
            data = b"".join(lines)
            self._write_durably(out, data)
            self.offset += len(data)  # the bytes written: _write_durably wrote them all, or raised
        db = self.db
        db.execute("BEGIN")
        try:
            done = [r.key for r in results if r.ok]
            if done:  # one statement over a JSON array of keys, not one per key (see scan)
                db.execute(
                    "UPDATE items SET state = 'done', line = NULL WHERE key IN (SELECT value FROM json_each(?))",
                    (_json.dumps(done).decode(),),
                )
            failed = [
                (UNKNOWN if r.unknown else FAILED, int(r.retryable), r.line, r.key)
                for r in results
                if not r.ok and not r.pending
            ]
            again = [(r.key,) for r in results if r.pending]
            if again:
                db.executemany("UPDATE items SET state = 'pending', line = NULL WHERE key = ?", again)
            if failed:
                db.executemany("UPDATE items SET state = ?, retryable = ?, line = ? WHERE key = ?", failed)
            self._set_meta("offset", str(self.offset))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _write_durably(self, out: IO[bytes], data: bytes) -> None:
        """Write ``data`` at the committed offset and fsync it, every byte (a short write is continued), or cut
        the output back to the committed offset and raise :class:`IngestOutputError` (nothing is then marked
        done: the caller commits only after this returns)."""
        try:
            out.seek(self.offset)
            view = memoryview(data)
            while view:
                written = out.write(view)
                if not written:  # the OS took nothing (and said no more): no progress can be made
                    raise OSError(errno.ENOSPC, "the output file takes no more data")
                view = view[written:]
            os.fsync(out.fileno())
        except OSError as exc:
            with contextlib.suppress(OSError):  # best effort: recover() would cut a partial line at the next run
                out.truncate(self.offset)
                out.seek(self.offset)
                os.fsync(out.fileno())
            reason = exc.strerror or type(exc).__name__
            raise IngestOutputError(
                f"ingest: the output could not be written ({reason}); it was cut back to the last committed line "
                "and nothing of this batch was marked done: the next run redoes it"
            ) from exc

    def write_tail(self) -> int:
        """When no item is pending or in flight: write the lines of failed and unknown items after the committed
        offset (replacing an earlier tail), so the output holds exactly one line per item. Not committed as
        part of the offset: the next run cuts it and writes it anew. Returns the lines written (-1: not complete)."""
        out = self._require_out()
        db = self.db
        left = db.execute("SELECT count(*) FROM items WHERE state IN (?, ?)", (PENDING, INFLIGHT)).fetchone()[0]
        if left:
            return -1
        out.seek(self.offset)
        out.truncate(self.offset)
        written = 0
        buffer: list[bytes] = []
        for key, idx, state, line in db.execute(
            "SELECT key, idx, state, line FROM items WHERE state IN (?, ?) ORDER BY rowid", (FAILED, UNKNOWN)
        ):
            if line is not None:
                body = _json.loads(line)
            else:
                message = UNKNOWN_LINK_MESSAGE if self.meta("op") == "link" else UNKNOWN_MESSAGE
                body = {"index": idx, "error": {"type": "OutcomeUnknown", "message": message}}
            if state == UNKNOWN:
                body["error"]["retryable"] = False
                body["error"]["outcome"] = "unknown"
            buffer.append(_json.dumps({"key": key, **body}) + b"\n")
            written += 1
        # the tail is never committed (the next run cuts it and writes it anew), but it is written whole or not
        # at all: a short or failed write raises, with the output cut back to the committed offset
        self._write_durably(out, b"".join(buffer))
        return written

    def status(self) -> IngestStatus:
        db = self.db
        counts = dict.fromkeys((PENDING, INFLIGHT, DONE, FAILED, UNKNOWN), 0)
        for state, n in db.execute("SELECT state, count(*) FROM items GROUP BY state"):
            counts[str(state)] = int(n)
        retryable = db.execute("SELECT count(*) FROM items WHERE state = ? AND retryable = 1", (FAILED,)).fetchone()[0]
        unknown_keys = tuple(
            str(r[0])
            for r in db.execute("SELECT key FROM items WHERE state IN (?, ?) ORDER BY rowid", (UNKNOWN, INFLIGHT))
        )
        links = dict(
            db.execute("SELECT link_status, count(*) FROM items WHERE link_status IS NOT NULL GROUP BY link_status")
        )
        waiting = db.execute("SELECT count(*) FROM items WHERE state = ? AND link_status IS NULL", (DONE,)).fetchone()
        errored_keys = tuple(
            str(r[0]) for r in db.execute("SELECT key FROM items WHERE link_status = 'ERRORED' ORDER BY rowid")
        )
        op = self.meta("op") or ""
        return IngestStatus(
            op=op,
            total=sum(counts.values()),
            done=counts[DONE],
            failed=counts[FAILED],
            retryable=int(retryable),
            pending=counts[PENDING],
            # in flight in the journal = a run is going on, or one was killed: unknown until resolved
            unknown=counts[UNKNOWN] + counts[INFLIGHT],
            unknown_keys=unknown_keys,
            linked=int(links.get("LINKED", 0)),
            errored=int(links.get("ERRORED", 0)),
            waiting=int(waiting[0]) if op == "link" else 0,
            errored_keys=errored_keys,
        )

    def _require_out(self) -> IO[bytes]:
        if self._out is None:
            raise RuntimeError("the output is not open")
        return self._out


class TodoRow(NamedTuple):
    """An item to do, as :meth:`Journal.todo` reads it (a named tuple: built straight from the row, a page of
    hundreds at a time)."""

    rowid: int
    key: str
    #: The item's position in the input (``WorkItem.index``; ``index`` is a tuple's method).
    idx: int
    state: str
    payload: bytes | None


def _todo(retry_failed: bool, unknown: bool) -> str:
    """The SQL condition of the items to do."""
    states = "state = 'pending'"
    if retry_failed:
        states += " OR (state = 'failed' AND retryable = 1)"
    if unknown:
        states += " OR state = 'unknown'"
    return states


#: Keys per statement when the scan inserts a run of plain items.
_SCAN_RUN: Final = 4096


def _insert_run(db: sqlite3.Connection, start: int, keys: list[str]) -> int:
    """Insert ``keys`` as pending items with indexes ``start, start + 1, ...`` in one statement; how many were new
    (a key already in the journal is kept as it is). The rowids follow the list's order, which is the input's."""
    cursor = db.execute(
        "INSERT OR IGNORE INTO items(key, idx, state) SELECT value, ? + key, 'pending' FROM json_each(?)",
        (start, _json.dumps(keys).decode()),
    )
    return cursor.rowcount


def _complete_lines(data: bytes) -> Iterator[bytes]:
    """The newline-terminated lines of ``data`` (with their newline); a last partial line is left out."""
    start = 0
    while (end := data.find(b"\n", start)) >= 0:
        yield data[start : end + 1]
        start = end + 1


def check_path(name: str, value: object) -> str:
    """A path argument of the ingest API as a ``str``, checked before anything is opened: a ``str`` or an
    ``os.PathLike`` of one (:class:`InvalidArgumentType` otherwise), without a NUL character (no file can have
    one: :class:`InvalidRequest`). The messages name the argument, never the path."""
    if not isinstance(value, str | os.PathLike):
        raise InvalidArgumentType(f"{name} must be a str or an os.PathLike path, not {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise InvalidArgumentType(f"{name} must be a str path, not {type(path).__name__}")
    if "\x00" in path:
        raise InvalidRequest(f"{name} contains a NUL character: no file can have that name")
    return path


def read_connection(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection that only reads the journal at ``path`` (``status``, ``export``), safe beside a run, and that
    leaves no ``-wal`` or ``-shm`` file behind that was not there already for another connection.

    A journal is a WAL database, and SQLite needs ``-wal`` and ``-shm`` files to read one: it creates them when
    they are missing, and only the *last* connection to close, if it can write, checkpoints the WAL and removes
    both. So: ``mode=ro`` creates them and can never remove them (the leftovers this replaces);
    ``immutable=1`` creates none but skips locking and the WAL, so it misses what a running (or killed) run
    committed and may read pages a run is changing; removing the files ourselves when they were not there before
    is a race (a run may open the journal meanwhile, and a ``-wal`` or ``-shm`` removed under a live connection
    loses committed transactions). What is left, and used: an ordinary read-write connection (``mode=rw``:
    never creates the journal) with ``PRAGMA query_only`` (no statement can write), closed as soon as the read
    is done. SQLite's own locks then decide: while a run has the journal open ours is not the last connection and
    leaves the files to it; otherwise its close removes them. On a journal a run closed cleanly the WAL stays
    empty and the file's bytes do not change; on a killed run's, the close checkpoints the transactions that run
    committed into the file (its bytes change, not its content: any run's close does the same).

    A file that is not a WAL database (not one :meth:`Journal.open` made) is opened ``mode=ro``: reading it
    creates nothing, and a foreign database's hot rollback journal is not rolled back. A journal the user may not
    write is opened read-only by SQLite: the ``-wal`` and ``-shm`` it creates then stay (nothing can safely
    remove them). Raises :class:`InvalidRequest` when the file cannot be read."""
    path = os.path.abspath(check_path("journal", path))
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError as exc:
        raise InvalidRequest(f"the journal cannot be read ({exc.strerror})") from None
    wal = head[:16] == b"SQLite format 3\x00" and head[18:20] == b"\x02\x02"  # format versions 2: WAL
    # quoted from the file name's bytes: a name that is not UTF-8 (a surrogate in the str) is still the same file
    uri = f"file:{urllib.parse.quote(os.fsencode(path))}?mode={'rw' if wal else 'ro'}"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.DatabaseError:
        raise InvalidRequest("the file is not an ingest journal") from None
    try:
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA query_only=1")
    except BaseException:
        db.close()
        raise
    return db


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):  # not every platform can open a directory
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _keyed(key: str, line: bytes) -> bytes:
    """The output line: ``{"key": key, ...line}`` and a newline, spliced from the line's JSON bytes."""
    head = b'{"key":' + _json.dumps(key)
    return head + b"}\n" if line == b"{}" else head + b"," + line[1:] + b"\n"
