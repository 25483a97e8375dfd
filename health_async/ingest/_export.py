"""An ingest job's results as two flat tables, for a data person to load at once (``health-async ingest export``,
:meth:`IngestJob.export <health_async.ingest.IngestJob.export>`).

**documents** (one row per item of the job, in input order of the done ones, then the others):

==================  ========  =====================================================================================
column              type      meaning
==================  ========  =====================================================================================
``key``             string    the item as the job knows it: a document id (describe) or a file path (upload)
``index``           int64     the item's position in the input
``status``          string    ``done``, ``failed``, ``unknown`` (an upload that may have been made), ``pending``
``document_id``     string    the document (describe: the id; upload: the id the service gave); null if none
``document_type``   string    type code such as ``lr``; null if not known
``document_date``   string    the document's date, ISO 8601 UTC (``2024-03-01T00:00:00+00:00``); null if none
``files``           int64     number of files of the document (describe); null otherwise
``report_items``    int64     number of smart-report items (they are rows of the second table); null if none
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

Formats, chosen by the suffix of ``to`` or by ``format``: ``csv`` writes ``to`` (documents) and, beside it,
``<stem>.items.csv`` (report items), with the standard library; ``parquet`` writes ``to`` and
``<stem>.items.parquet`` through ``pyarrow`` (the ``health_async[parquet]`` extra, imported only here, when
asked for), in row groups of :data:`BATCH` rows with the fixed schemas above. Both stream: the journal is read
with a cursor and the output file line by line, so memory stays flat over millions of rows.

Judgement calls: two files rather than one with a repeated document part (a report item is a different grain);
the CSV null is the empty field; ``files`` is a count (the links in the output are presigned and expire).
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal

from .. import _json
from ..errors import InvalidRequest
from ..models import ResultFlag

__all__ = ["BATCH", "DOCUMENT_COLUMNS", "ITEM_COLUMNS", "ExportFormat", "export"]

ExportFormat = Literal["csv", "parquet"]

#: Rows per Parquet row group (and per batch held in memory).
BATCH: Final = 10_000

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

Row = tuple[Any, ...]


def export(
    journal: str | os.PathLike[str], to: str | os.PathLike[str], *, format: ExportFormat | None = None
) -> tuple[int, int]:
    """Write the two tables of the job behind ``journal``; returns (document rows, report item rows).

    Raises :class:`~health_async.errors.InvalidRequest` before writing anything for an unknown format, a file
    that is not an ingest journal, or ``parquet`` without ``pyarrow``."""
    target = Path(to)
    kind = format or target.suffix.lstrip(".").lower()
    if kind not in ("csv", "parquet"):
        raise InvalidRequest("export writes .csv or .parquet (give a name with that suffix, or format=)")
    items_path = target.with_name(f"{target.stem}.items.{kind}")
    with _open_journal(journal) as db:
        out_path, offset = _output_of(db)
        documents, items = _tables(db, out_path, offset)
        if kind == "csv":
            return _write_csv(target, items_path, documents, items)
        return _write_parquet(target, items_path, documents, items)


class _open_journal:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not os.path.isfile(path):
            raise InvalidRequest("the journal does not exist")
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        try:
            self.db = sqlite3.connect(uri, uri=True)
            self.db.execute("SELECT k, v FROM meta LIMIT 1")
        except sqlite3.DatabaseError:
            raise InvalidRequest("the file is not an ingest journal") from None

    def __enter__(self) -> sqlite3.Connection:
        return self.db

    def __exit__(self, *exc: object) -> None:
        self.db.close()


def _output_of(db: sqlite3.Connection) -> tuple[str | None, int]:
    meta = dict(db.execute("SELECT k, v FROM meta"))
    if "op" not in meta:
        raise InvalidRequest("the file is not an ingest journal")
    return meta.get("out"), int(meta.get("offset") or 0)


def _tables(db: sqlite3.Connection, out_path: str | None, offset: int) -> tuple[Iterator[Row], list[Row]]:
    items: list[Row] = []

    def documents() -> Iterator[Row]:
        if out_path is not None and os.path.exists(out_path):
            with open(out_path, "rb") as out:
                read = 0
                for raw in out:
                    read += len(raw)
                    if read > offset:  # the committed part only: past it is a tail or a half-written batch
                        break
                    line = _json.loads(raw)
                    yield _done_row(line, items)
        cursor = db.execute("SELECT key, idx, state, line FROM items WHERE state != 'done' ORDER BY idx")
        for key, idx, state, raw in cursor:
            error = _json.loads(raw).get("error", {}) if raw is not None else {}
            upload = _json.loads(raw).get("upload") if raw is not None else None
            doc_id = upload.get("document_id") if isinstance(upload, dict) else None
            shown = "unknown" if state == "inflight" else str(state)
            yield (key, idx, shown, doc_id, None, None, None, None, error.get("type"), error.get("message"))

    return documents(), items


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
        date = doc.get("document_date_epoch")
        iso = None if date is None else dt.datetime.fromtimestamp(int(date), dt.UTC).isoformat()
        files = doc.get("files")
        return (key, index, "done", doc.get("document_id"), doc.get("document_type"), iso,
                len(files) if isinstance(files, list) else None, count if report else None, None, None)  # fmt: skip
    upload = line.get("upload") or {}
    error = line.get("error") or {}
    status = "done" if not error else "failed"
    return (key, index, status, upload.get("document_id"), None, None, None, None, error.get("type"),
            error.get("message"))  # fmt: skip


def _batches(documents: Iterator[Row], items: list[Row]) -> Iterator[tuple[list[Row], list[Row]]]:
    """Both tables in batches of about :data:`BATCH` rows: a document's report items come in its batch (``items``
    is filled by the ``documents`` stream as it goes). The last batch may be empty."""
    batch: list[Row] = []
    pending: list[Row] = []
    for row in documents:
        batch.append(row)
        if items:
            pending.extend(items)
            items.clear()
        if len(batch) >= BATCH or len(pending) >= BATCH:
            yield batch, pending
            batch, pending = [], []
    yield batch, pending


def _write_csv(target: Path, items_path: Path, documents: Iterator[Row], items: list[Row]) -> tuple[int, int]:
    n_docs = n_items = 0
    with open(target, "w", newline="", encoding="utf-8") as d, open(items_path, "w", newline="", encoding="utf-8") as i:
        doc_writer, item_writer = csv.writer(d), csv.writer(i)
        doc_writer.writerow(DOCUMENT_COLUMNS)
        item_writer.writerow(ITEM_COLUMNS)
        for doc_rows, item_rows in _batches(documents, items):
            doc_writer.writerows(doc_rows)
            item_writer.writerows(item_rows)
            n_docs, n_items = n_docs + len(doc_rows), n_items + len(item_rows)
    return n_docs, n_items


def _write_parquet(target: Path, items_path: Path, documents: Iterator[Row], items: list[Row]) -> tuple[int, int]:
    try:
        import pyarrow as pa  # the parquet extra: imported only here, when asked for
        import pyarrow.parquet as pq
    except ImportError:
        raise InvalidRequest("parquet export needs pyarrow: pip install 'health_async[parquet]'") from None
    doc_schema = pa.schema(
        [(name, pa.int64() if name in ("index", "files", "report_items") else pa.string()) for name in DOCUMENT_COLUMNS]
    )
    item_schema = pa.schema([(name, pa.bool_() if name == "verified" else pa.string()) for name in ITEM_COLUMNS])
    n_docs = n_items = 0
    with pq.ParquetWriter(target, doc_schema) as doc_writer, pq.ParquetWriter(items_path, item_schema) as item_writer:
        for doc_rows, item_rows in _batches(documents, items):
            for writer, columns, schema, rows in (
                (doc_writer, DOCUMENT_COLUMNS, doc_schema, doc_rows),
                (item_writer, ITEM_COLUMNS, item_schema, item_rows),
            ):
                if rows:
                    table = pa.Table.from_pylist([dict(zip(columns, r, strict=True)) for r in rows], schema)
                    writer.write_table(table)
            n_docs, n_items = n_docs + len(doc_rows), n_items + len(item_rows)
    return n_docs, n_items
