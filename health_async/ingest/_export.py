"""An ingest job's results as two flat tables, for a data person to load at once (``health-async ingest export``,
:meth:`IngestJob.export <health_async.ingest.IngestJob.export>`).

**documents** (one row per item of the job: the done ones in the order of the output file, which is the order
they finished in, then the others in input order):

==================  ========  =====================================================================================
column              type      meaning
==================  ========  =====================================================================================
``key``             string    the item as the job knows it: a document id (describe) or a file path (upload)
``index``           int64     the item's position in the input
``status``          string    the journal's: ``done``, ``failed``, ``unknown`` (an upload that may or may not
                              have been made; also one in flight in a running job), ``pending`` (not done yet)
``document_id``     string    the document (describe: the id; upload: the id the service gave, also for an
                              upload whose processing failed under ``--wait``); null if none
``document_type``   string    type code such as ``lr``; null if not known
``document_date``   string    the document's date, ISO 8601 UTC (``2024-03-01T00:00:00+00:00``); null if none
                              or out of range (as :attr:`~health_async.models.Document.document_date`)
``files``           int64     number of files of the document (describe); null otherwise
``report_items``    int64     number of smart-report items (rows of the second table); null: no smart report
``error_type``      string    the error's class (``DocumentNotFound``, ``ServerError``, ...); null when done
``error``           string    the error's message (never a body or personal data); null when done
==================  ========  =====================================================================================

**report items** (one row per extracted smart-report value of a described document):

===============  ======  ==============================================================================
column           type    meaning
===============  ======  ==============================================================================
``document_id``  string  the document it was read from
``name``         string  e.g. ``Haemoglobin``
``value``        string  as printed (a number is text here: ``13.5``, ``<0.5``, ``Positive``)
``unit``         string  e.g. ``g/dL``
``range``        string  reference range as printed, e.g. ``13.0-17.0``
``flag``         string  :class:`~health_async.models.ResultFlag` name: ``NORMAL``, ``HIGH``, ``LOW``, ...
``verified``     bool    the value was verified by a person (the report's ``verified`` list)
===============  ======  ==============================================================================

**links** (a link job's journal: one table, instead of the two above, whose document columns a link has none
of; no items table is written):

===================  ======  =========================================================================================
column               type    meaning
===================  ======  =========================================================================================
``key``              string  the item: ``<care_context_id>@<patient>`` (see :mod:`health_async.ingest._links`)
``index``            int64   the row's position in the input
``status``           string  as in the documents table: ``done``, ``failed``, ``unknown``, ``pending``
``care_context_id``  string  the care context linked (or to link)
``outcome``          string  how the job knows it is linked: ``sent``, or ``listed`` / ``webhook`` for a link of
                             unknown outcome found made; null when not done
``webhook_status``   string  the ``abha.link_care_context`` webhook recorded for it: ``LINKED``, ``ERRORED``; null:
                             none recorded yet
``webhook_error``    string  the webhook's reason when ``ERRORED``
``error_type``       string  as in the documents table
``error``            string  as in the documents table
===================  ======  =========================================================================================

The tables are written beside each other with the suffix as given: ``R.CSV`` and ``R.items.CSV``.

Both tables are health data: each is created readable and writable by its owner only (mode 0600, whatever the
umask), also when it replaces an earlier export.

Formats, chosen by ``format`` or else by the suffix of ``to`` (``.csv``, ``.parquet``; anything else is
:class:`~health_async.errors.InvalidRequest` before anything is written): ``csv`` writes ``to`` (documents) and,
beside it, ``<stem>.items.csv`` (report items), with the standard library (UTF-8, a header row, ``csv``'s
default dialect; null is the empty field, ``verified`` is ``True``/``False``); ``parquet`` writes ``to`` and
``<stem>.items.parquet`` through ``pyarrow`` (the ``health_async[parquet]`` extra, imported only here, when asked
for), in row groups of :data:`BATCH` rows with the fixed schemas above (string = ``pa.string()``, int64 =
``pa.int64()``, bool = ``pa.bool_()``, every column nullable). Both stream: the journal is read with a cursor and
the output file line by line, so memory stays flat over millions of rows.

The export reads one snapshot of the journal (one SQLite read transaction) and only the committed part of the
output file, so it is consistent even while a run is going on, and never changes either. Each table is written
to ``<name>.partial`` and renamed over ``<name>`` only when both are complete: a failed export leaves no half
table behind. So does a stopped one: ``stop`` (a callable) is asked every :data:`STOP_EVERY` rows and once more
when both tables are written, before they are published; when it says so, the export removes its ``.partial``
files and raises :class:`ExportStopped`. That is how a cancelled :meth:`IngestJob.export
<health_async.ingest.IngestJob.export>` (Ctrl-C) ends its thread with nothing published. A stop that comes
after the last ask finds both tables published (the export had finished).

Judgement calls: two files rather than one with a repeated document part (a report item is a different grain);
``files`` is a count (the links in the output are presigned and expire); ``key`` and ``index`` are kept (an
upload's key is its file path, the only link back to the input); a failed item's error is split into
``error_type`` and ``error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, Literal

from .. import _json
from .._wire import epoch_datetime
from ..errors import IngestOutputError, InvalidRequest
from ..models import ResultFlag
from ._journal import check_path, open_private, read_connection

__all__ = [
    "BATCH",
    "DOCUMENT_COLUMNS",
    "ITEM_COLUMNS",
    "LINK_COLUMNS",
    "STOP_EVERY",
    "ExportFormat",
    "ExportStopped",
    "export",
    "export_in_thread",
]

ExportFormat = Literal["csv", "parquet"]

#: Rows per Parquet row group (and per batch held in memory).
BATCH: Final = 10_000

#: Rows between two asks of an export's ``stop``.
STOP_EVERY: Final = 2_000

DOCUMENT_COLUMNS: Final = (
    "key",
    "index",
    "status",
    "document_id",
    "document_type",
    "document_date",
    "files",
    "report_items",
    "error_type",
    "error",
)
ITEM_COLUMNS: Final = ("document_id", "name", "value", "unit", "range", "flag", "verified")
LINK_COLUMNS: Final = (
    "key",
    "index",
    "status",
    "care_context_id",
    "outcome",
    "webhook_status",
    "webhook_error",
    "error_type",
    "error",
)
_INT_COLUMNS: Final = frozenset({"index", "files", "report_items"})
_BOOL_COLUMNS: Final = frozenset({"verified"})

Row = tuple[Any, ...]
#: A table to write: its path and its columns.
Table = tuple[Path, tuple[str, ...]]
Stop = Callable[[], bool]


class ExportStopped(Exception):
    """The export's ``stop`` said so: nothing was published, and its ``.partial`` files are removed."""


_CHANGED: Final = (
    "the output file was changed outside the job (its committed lines are not the job's): nothing exported"
)


def export(
    journal: str | os.PathLike[str],
    to: str | os.PathLike[str],
    *,
    format: ExportFormat | None = None,
    stop: Stop | None = None,
) -> tuple[int, int]:
    """Write the two tables of the job behind ``journal``; returns (document rows, report item rows).

    Raises :class:`~health_async.errors.InvalidRequest` before writing anything for an unknown format, a path
    that is not a ``str`` or ``os.PathLike`` (:class:`~health_async.errors.InvalidArgumentType`) or has a NUL
    character, a file that is not an ingest journal, a missing or shortened output file, a target that is the
    journal or its output, a target that is a directory or in a folder that does not exist, or ``parquet`` without
    ``pyarrow``; and, leaving no table behind, for an output file changed outside the job,
    :class:`~health_async.errors.IngestOutputError` when a table cannot be written (no permission, a full disk),
    and :class:`ExportStopped` when ``stop()`` returns true (asked every :data:`STOP_EVERY` rows and before
    publishing; from another thread, pass ``threading.Event().is_set``). No message shows a path."""
    journal, target = check_path("journal", journal), Path(check_path("to", to))
    kind = str(format).lower() if format is not None else target.suffix.lstrip(".").lower()
    if kind not in ("csv", "parquet"):
        raise InvalidRequest("export writes .csv or .parquet (give a name with that suffix, or format=)")
    # the items table beside, with the suffix as given (R.CSV: R.items.CSV)
    suffix = target.suffix if target.suffix.lower() == f".{kind}" else f".{kind}"
    items_path = target.with_name(f"{target.stem}.items{suffix}")
    with _open_journal(journal) as db:
        out_path, offset = _output_of(db)
        write = _write_csv if kind == "csv" else _write_parquet
        if _op_of(db) == "link":
            _check_targets((target,), [journal, *([out_path] if out_path else [])])
            tables: list[Table] = [(target, LINK_COLUMNS)]
            batches: Iterator[tuple[list[Row], ...]] = _link_batches(_link_rows(db, out_path, offset), stop or _never)
        else:
            _check_targets((target, items_path), [journal, *([out_path] if out_path else [])])
            documents, items = _tables(db, out_path, offset)
            tables = [(target, DOCUMENT_COLUMNS), (items_path, ITEM_COLUMNS)]
            batches = _batches(documents, items, stop or _never)
        try:
            counts = write(tables, batches)
        except OSError as exc:  # the tables' own files (reading the output raises InvalidRequest)
            reason = exc.strerror or type(exc).__name__  # never the path
            raise IngestOutputError(
                f"export: the tables could not be written ({reason}); nothing was published"
            ) from None
        return counts[0], (counts[1] if len(counts) > 1 else 0)


async def export_in_thread(
    journal: str | os.PathLike[str], to: str | os.PathLike[str], *, format: ExportFormat | None = None
) -> tuple[int, int]:
    """:func:`export` in a worker thread (the event loop never blocks on it), stopped by a cancellation.

    A cancellation (Ctrl-C) cannot stop a thread, and only abandoning the await would let it finish and publish
    both tables after the caller was told it was cancelled. So the export is given a ``stop`` that the
    cancellation sets; this then waits for the thread to end (within :data:`STOP_EVERY` rows: its ``.partial``
    files removed, nothing published), still waiting through a second cancellation, and re-raises the
    :class:`asyncio.CancelledError`. A cancellation after the export's last ask of ``stop`` finds both tables
    published; it is raised all the same."""
    check_path("journal", journal), check_path("to", to)  # a wrong argument before the thread starts
    stop = threading.Event()
    thread = asyncio.ensure_future(asyncio.to_thread(export, journal, to, format=format, stop=stop.is_set))
    try:
        return await asyncio.shield(thread)
    except asyncio.CancelledError:
        stop.set()
        while not thread.done():
            try:
                await asyncio.wait((thread,))
            except asyncio.CancelledError:
                continue  # cancelled again while waiting: the thread is stopping all the same
        if not thread.cancelled():
            thread.exception()  # retrieved (ExportStopped, or an error of the export's own): the cancellation wins
        raise


class _open_journal:
    """The journal, read-only, inside one read transaction: one snapshot, even while a run commits."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not os.path.isfile(path):
            raise InvalidRequest("the journal does not exist")
        self.db = read_connection(path)  # leaves no -wal or -shm file behind (see there why)
        try:
            self.db.execute("BEGIN")
            self.db.execute("SELECT k, v FROM meta LIMIT 1")
            self.db.execute("SELECT key, idx, state, line FROM items LIMIT 1")
        except sqlite3.DatabaseError:
            self.db.close()
            raise InvalidRequest("the file is not an ingest journal") from None

    def __enter__(self) -> sqlite3.Connection:
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.close()  # the read transaction ends with it: nothing was written


def _output_of(db: sqlite3.Connection) -> tuple[str | None, int]:
    meta = dict(db.execute("SELECT k, v FROM meta"))
    if "op" not in meta:
        raise InvalidRequest("the file is not an ingest journal")
    out, offset = meta.get("out"), int(meta.get("offset") or 0)
    if offset:
        if out is None or not os.path.isfile(out):
            raise InvalidRequest("the output file the journal vouches for is missing: restore it to export")
        if os.path.getsize(out) < offset:
            raise InvalidRequest("the output file is shorter than the journal records: it was changed outside the job")
    return out, offset


def _op_of(db: sqlite3.Connection) -> str | None:
    row = db.execute("SELECT v FROM meta WHERE k = 'op'").fetchone()
    return None if row is None else str(row[0])


def _check_targets(targets: tuple[Path, ...], protected: list[str]) -> None:
    """Refuse to write over the journal (or its WAL files) or the output it vouches for, or a directory (the
    rename that publishes a table would fail after all the work), or into a folder that does not exist."""
    keep = {os.path.realpath(p) for base in protected for p in (base, base + "-wal", base + "-shm")}
    for path in targets:
        if os.path.realpath(path) in keep or os.path.realpath(_partial(path)) in keep:
            raise InvalidRequest("the export would write over the journal or its output file: give another name")
        if os.path.isdir(path) or os.path.isdir(_partial(path)):
            raise InvalidRequest("the export path (or its items table's) is a directory: give a file name")
        if not os.path.isdir(path.parent):
            raise InvalidRequest("the folder of the export file does not exist")


def _tables(db: sqlite3.Connection, out_path: str | None, offset: int) -> tuple[Iterator[Row], list[Row]]:
    """The documents table as a stream, and the list the stream fills with each document's report items."""
    items: list[Row] = []

    def documents() -> Iterator[Row]:
        for line in _committed_lines(out_path, offset):
            yield _done_row(line, items)
        # the rest, from the same snapshot: done items have their line above (failed ones only in the journal)
        cursor = db.execute("SELECT key, idx, state, line FROM items WHERE state != 'done' ORDER BY idx")
        for key, idx, state, raw in cursor:
            body = _json.loads(raw) if raw is not None else {}
            error = body.get("error") or {}
            upload = body.get("upload")
            doc_id = upload.get("document_id") if isinstance(upload, dict) else None
            shown = "unknown" if state == "inflight" else str(state)  # as `ingest status` counts it
            yield (key, idx, shown, doc_id, None, None, None, None, error.get("type"), error.get("message"))

    return documents(), items


def _committed_lines(out_path: str | None, offset: int) -> Iterator[dict[str, Any]]:
    """The lines of the output file's committed part (``offset`` bytes), each a JSON object with a ``key``;
    :class:`InvalidRequest` when the file says otherwise (it was changed outside the job)."""
    if not offset:
        return
    assert out_path is not None  # _output_of checked it
    try:
        out = open(out_path, "rb")
    except OSError as exc:
        raise InvalidRequest(f"the output file cannot be read ({exc.strerror})") from None
    with out:
        read = 0
        for raw in out:
            if read >= offset:  # the committed part only: past it is a tail or a half-written batch
                break
            read += len(raw)
            if read > offset or not raw.endswith(b"\n"):  # the committed part ends with a whole line
                raise InvalidRequest(_CHANGED)
            try:
                line = _json.loads(raw)
            except _json.JSONDecodeError:
                raise InvalidRequest(_CHANGED) from None
            if not isinstance(line, dict) or not isinstance(line.get("key"), str):
                raise InvalidRequest(_CHANGED)
            yield line
        if read < offset:
            raise InvalidRequest(_CHANGED)


def _done_row(line: dict[str, Any], items: list[Row]) -> Row:
    key, index = line.get("key"), line.get("index")
    doc = line.get("document")
    if isinstance(doc, dict):
        report = doc.get("smart_report") or {}
        count = 0
        for verified, name in ((True, "verified"), (False, "unverified")):
            for item in report.get(name) or ():
                count += 1
                flag = item.get("flag") or ResultFlag.from_id(item.get("result_id")).name
                items.append(
                    (doc.get("document_id"), item.get("name"), item.get("value"), item.get("unit"),
                     item.get("range"), flag, verified)
                )  # fmt: skip
        date = epoch_datetime(doc.get("document_date_epoch"))  # the model's rule: None when out of range
        iso = None if date is None else date.isoformat()
        files = doc.get("files")
        return (key, index, "done", doc.get("document_id"), doc.get("document_type"), iso,
                len(files) if isinstance(files, list) else None, count if report else None, None, None)  # fmt: skip
    upload = line.get("upload") or {}
    error = line.get("error") or {}
    status = "done" if not error else "failed"
    return (key, index, status, upload.get("document_id"), None, None, None, None, error.get("type"),
            error.get("message"))  # fmt: skip


def _link_rows(db: sqlite3.Connection, out_path: str | None, offset: int) -> Iterator[Row]:
    """A link job's table: one row per care context, the done ones from the committed output, with the outcome
    the job saw (``sent``, ``listed``, ``webhook``) and the ``abha.link_care_context`` webhook's as recorded."""
    webhook = "SELECT link_status, link_error FROM items WHERE key = ?"
    for line in _committed_lines(out_path, offset):
        key = line["key"]
        link = line["link"] if isinstance(line.get("link"), dict) else {}
        error = line.get("error") or {}
        found = db.execute(webhook, (key,)).fetchone() or (None, None)
        cid = link.get("care_context_id") or _care_context_of(db, key)
        status = "failed" if error else "done"
        yield (key, line.get("index"), status, cid, link.get("status"), found[0], found[1], error.get("type"),
               error.get("message"))  # fmt: skip
    cursor = db.execute(
        "SELECT key, idx, state, line, json_extract(CAST(payload AS TEXT), '$.care_context_id'), link_status, "
        "link_error FROM items WHERE state != 'done' ORDER BY idx"
    )
    for key, idx, state, raw, cid, link_status, link_error in cursor:
        body = _json.loads(raw) if raw is not None else {}
        error = body.get("error") or {}
        shown = "unknown" if state == "inflight" else str(state)
        yield (key, idx, shown, cid, None, link_status, link_error, error.get("type"), error.get("message"))


def _care_context_of(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute(
        "SELECT json_extract(CAST(payload AS TEXT), '$.care_context_id') FROM items WHERE key = ?", (key,)
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def _link_batches(rows: Iterator[Row], stop: Stop) -> Iterator[tuple[list[Row], ...]]:
    """A link table in batches of :data:`BATCH` rows, stopped as :func:`_batches` is."""
    batch: list[Row] = []
    for n, row in enumerate(rows):
        if n % STOP_EVERY == 0 and stop():
            raise ExportStopped("the export was stopped")
        batch.append(row)
        if len(batch) >= BATCH:
            yield (batch,)
            batch = []
    yield (batch,)
    if stop():
        raise ExportStopped("the export was stopped")


def _never() -> bool:
    return False


def _batches(documents: Iterator[Row], items: list[Row], stop: Stop) -> Iterator[tuple[list[Row], list[Row]]]:
    """Both tables in batches of about :data:`BATCH` rows: a document's report items come in its batch (``items``
    is filled by the ``documents`` stream as it goes). The last batch may be empty. Raises
    :class:`ExportStopped` when ``stop()`` is true: asked before the first row, every :data:`STOP_EVERY` rows and
    after the last batch is written (when the writer asks for the next one), before the tables are published."""
    batch: list[Row] = []
    pending: list[Row] = []
    for n, row in enumerate(documents):
        if n % STOP_EVERY == 0 and stop():
            raise ExportStopped("the export was stopped")
        batch.append(row)
        if items:
            pending.extend(items)
            items.clear()
        if len(batch) >= BATCH or len(pending) >= BATCH:
            yield batch, pending
            batch, pending = [], []
    yield batch, pending
    if stop():
        raise ExportStopped("the export was stopped")


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


@contextlib.contextmanager
def _published(*paths: Path) -> Iterator[tuple[Path, ...]]:
    """Temporary names for ``paths``, renamed over them when the block ends without error, else removed (also
    those left when a rename fails)."""
    partials = tuple(_partial(p) for p in paths)
    try:
        yield partials
        for partial, path in zip(partials, paths, strict=True):
            os.replace(partial, path)
    except BaseException:
        for partial in partials:
            with contextlib.suppress(OSError):
                os.unlink(partial)
        raise


def _private_opener(path: str, flags: int) -> int:
    """``open``'s opener for a table's ``.partial`` file: created (or truncated) private, mode 0600 whatever the
    umask, so the published table is its owner's only, as the journal and the output it is made from are."""
    return open_private(path, flags, replace=True)[0]


def _write_csv(tables: list[Table], batches: Iterator[tuple[list[Row], ...]]) -> tuple[int, ...]:
    counts = [0] * len(tables)
    with _published(*(path for path, _ in tables)) as partials, contextlib.ExitStack() as files:
        writers = []
        for partial, (_, columns) in zip(partials, tables, strict=True):
            f = files.enter_context(open(partial, "w", newline="", encoding="utf-8", opener=_private_opener))
            writer = csv.writer(f)
            writer.writerow(columns)
            writers.append(writer)
        for batch in batches:
            for n, (writer, rows) in enumerate(zip(writers, batch, strict=True)):
                writer.writerows(rows)
                counts[n] += len(rows)
        files.close()  # every table whole on disk before any is published
    return tuple(counts)


def _write_parquet(tables: list[Table], batches: Iterator[tuple[list[Row], ...]]) -> tuple[int, ...]:
    try:
        import pyarrow as pa  # the parquet extra: imported only here, when asked for
        import pyarrow.parquet as pq
    except ImportError:
        raise InvalidRequest("parquet export needs pyarrow: pip install 'health_async[parquet]'") from None

    def kind(name: str) -> Any:
        return pa.int64() if name in _INT_COLUMNS else pa.bool_() if name in _BOOL_COLUMNS else pa.string()

    schemas = [pa.schema([(name, kind(name)) for name in columns]) for _, columns in tables]
    counts = [0] * len(tables)
    with _published(*(path for path, _ in tables)) as partials, contextlib.ExitStack() as files:
        writers = []
        for partial, schema in zip(partials, schemas, strict=True):
            f = files.enter_context(open(partial, "wb", opener=_private_opener))
            writers.append(files.enter_context(pq.ParquetWriter(f, schema)))
        for batch in batches:
            for n, (writer, schema, rows) in enumerate(zip(writers, schemas, batch, strict=True)):
                if rows:
                    # column by column (no dict per row), each typed by the fixed schema
                    columns = zip(*rows, strict=True)
                    arrays = [pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)]
                    writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
                counts[n] += len(rows)
        files.close()  # every table whole on disk before any is published
    return tuple(counts)
