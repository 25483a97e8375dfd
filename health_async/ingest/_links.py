"""The bulk link job's own pieces: its input (care contexts as CSV or JSON Lines), the item key, the row stored in
the journal, and :class:`LinkRecorder`, which records the ``abha.link_care_context`` webhook's outcome against
the journal.

Input
-----
One care context per CSV row (a header row names the columns) or per JSON Lines object; the format comes from the
suffix (``.csv``; ``.jsonl``, ``.ndjson``, ``.json``), else from the first character (``{``: JSON Lines). Fields:

==================  =========================================================================================
``care_context_id`` required: your id of the visit (at most 255 printable characters)
``display``         required: what the patient sees in their PHR app
``hi_type``         required: one of the vendor's ``hi_type`` values (``OPConsultation``, ``Prescription``, ...)
``abha_address``    the patient, by ABHA address ...
``oid``             ... or by the service's patient id (OID): needed to check an unknown outcome (below) ...
``partner_user_id`` ... or by your own patient id; at least one of the three
``data``            optional: the visit's FHIR bundle (a JSON object; in CSV, its JSON text)
==================  =========================================================================================

Other columns are ignored (an export from a hospital system has many). A row that breaks a rule fails alone, its
error naming the row and the rule (never the content); a CSV without one of the three required columns, or not
UTF-8, is refused before anything is sent.

Keys
----
An item's key is ``<care_context_id>@<patient>``, the patient being ``oid:<oid>`` when the row gives an OID, else
``partner:<id>``, else the ABHA address in lower case (ABHA addresses are case-insensitive). So the same visit id
of two patients makes two items, and the same row twice is one item (a repeat, counted). Judgement call: the key
is readable (``ingest status`` lists the keys of unknown outcomes so that they can be found); it can hold the ABHA
address, like the input and the output it names, which are the hospital's own files.

Unknown outcomes, and why a link is never sent twice on a guess
----------------------------------------------------------------
Each link is committed as in flight before it is sent. One found in flight after a crash, or that failed after it
may have reached the service, is of *unknown* outcome. At the next run it is settled before anything is sent
again: by a ``LINKED`` webhook recorded against the journal (done), an ``ERRORED`` one (failed, retryable: it was
not linked), or by asking :meth:`~health_async.resources.Abdm.linked_care_contexts` for the patient's OID (listed:
done; not listed: sent). Without an OID (or a HIP id) the check cannot be made: the item stays unknown, and is sent
again only with ``relink_unknown`` (``--relink-unknown``), which may link it twice.
"""

from __future__ import annotations

import asyncio
import codecs
import csv
import io
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from .. import _json
from .._abha_input import normalize_abha_address
from .._logging import logger
from ..errors import HealthError, IngestOutputError, InvalidRequest
from ..models.abdm._hospital import CareContext, LinkResult, LinkStatus
from ..resources.abdm.abdm import link_entry

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent

__all__ = [
    "BUSY_TIMEOUT_MS",
    "LINK_EVENT",
    "REQUIRED_COLUMNS",
    "LinkRecorder",
    "LinkRow",
    "check_link_input",
    "link_rows",
]

#: The columns (fields) every row needs.
REQUIRED_COLUMNS: Final = ("care_context_id", "display", "hi_type")
#: The webhook event whose outcome :class:`LinkRecorder` records.
LINK_EVENT: Final = "abha.link_care_context"
_JSON_SUFFIXES: Final = (".jsonl", ".ndjson", ".json")
_PATIENT_FIELDS: Final = ("abha_address", "oid", "partner_user_id")
#: How long a journal writer waits for another connection's transaction (the recorder beside a run, and the
#: run's own connection: one waits for the other rather than failing).
BUSY_TIMEOUT_MS: Final = 10_000


class LinkRow:
    """One care context to link, as stored in the journal (the payload of its item)."""

    __slots__ = ("abha_address", "care_context", "oid", "partner_user_id")

    def __init__(
        self, care_context: CareContext, abha_address: str | None, oid: str | None, partner_user_id: str | None
    ) -> None:
        self.care_context = care_context
        self.abha_address = abha_address
        self.oid = oid
        self.partner_user_id = partner_user_id

    def __repr__(self) -> str:
        return "LinkRow()"

    @property
    def key(self) -> str:
        """The item's key (see the module)."""
        return item_key(self.care_context.care_context_id, self.abha_address, self.oid, self.partner_user_id)

    def payload(self) -> bytes:
        """The row as JSON bytes (the journal keeps it: the item is sent from it)."""
        cc = self.care_context
        data = cc.data
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        return _json.dumps(
            {
                "care_context_id": cc.care_context_id,
                "display": cc.display,
                "hi_type": cc.hi_type if isinstance(cc.hi_type, str) else cc.hi_type.value,
                "data": data,
                "abha_address": self.abha_address,
                "oid": self.oid,
                "partner_user_id": self.partner_user_id,
            }
        )

    @classmethod
    def from_payload(cls, payload: bytes) -> LinkRow:
        """The row a journal item holds."""
        raw = _json.loads(payload)
        cc = CareContext(raw["care_context_id"], raw["display"], raw["hi_type"], raw.get("data"))
        return cls(cc, raw.get("abha_address"), raw.get("oid"), raw.get("partner_user_id"))


def item_key(care_context_id: str, abha_address: str | None, oid: str | None, partner_user_id: str | None) -> str:
    """``<care_context_id>@<patient>`` (see the module)."""
    if oid:
        return f"{care_context_id}@oid:{oid}"
    if partner_user_id:
        return f"{care_context_id}@partner:{partner_user_id}"
    return f"{care_context_id}@{(abha_address or '').lower()}"


def result_keys(result: LinkResult) -> list[str]:
    """The keys a webhook's outcome may belong to: the service's ``data`` can name the patient in all three
    ways, while the input row named it in one."""
    cid = result.care_context_id
    if not cid:
        return []
    keys = []
    if result.oid:
        keys.append(item_key(cid, None, result.oid, None))
    if result.partner_patient_id:
        keys.append(item_key(cid, None, None, result.partner_patient_id))
    if result.abha_address:
        keys.append(item_key(cid, result.abha_address, None, None))
    return keys


def _is_json_lines(path: str) -> bool:
    if path.lower().endswith(_JSON_SUFFIXES):
        return True
    if path.lower().endswith(".csv"):
        return False
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{")


def check_link_input(path: str) -> None:
    """Refuse, before anything is read or sent, a CSV whose header lacks a required column or that is not
    UTF-8 text (:class:`InvalidRequest`; the message names the rule, never the content)."""
    if _is_json_lines(path):
        return
    _check_utf8(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader(f), None)
    except csv.Error:
        raise InvalidRequest("the care contexts CSV's header row cannot be read") from None
    names = [c.strip() for c in header or ()]
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:  # a DictReader would keep the last: a row could be linked to the patient of the wrong column
        raise InvalidRequest(f"the care contexts CSV repeats the column {', '.join(repeated)}: name each column once")
    columns = set(names)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise InvalidRequest(f"the care contexts CSV has no {', '.join(missing)} column (a header row names them)")
    if not columns & set(_PATIENT_FIELDS):
        raise InvalidRequest("the care contexts CSV names no patient: an abha_address, oid or partner_user_id column")


def _check_utf8(path: str) -> None:
    """The whole CSV decodes as UTF-8 (read in chunks), else :class:`InvalidRequest` naming the line. Judgement
    call: a CSV saved in another encoding (a spreadsheet's default) is refused whole before anything is sent,
    rather than failing from its first accented row on."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                line += chunk.count(b"\n", 0, exc.start)
                raise InvalidRequest(
                    f"the care contexts CSV is not UTF-8 text (line {line}): save it as UTF-8"
                ) from None
            line += chunk.count(b"\n")
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InvalidRequest("the care contexts CSV is not UTF-8 text (it ends inside a character)") from None


def _text(row: dict[str, Any], name: str) -> str | None:
    value = row.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        if isinstance(value, int) and not isinstance(value, bool) and name != "abha_address":
            return str(value)  # an id written as a JSON number
        raise InvalidRequest(f"{name} must be text")
    value = value.strip()
    return value or None


def parse_row(row: dict[str, Any], where: str) -> LinkRow:
    """A row of the input as a :class:`LinkRow`, every rule checked (:class:`InvalidRequest` naming ``where``
    and the rule, never the content)."""
    try:
        cid, display, hi_type = (_text(row, n) for n in REQUIRED_COLUMNS)
        abha, oid, partner = (_text(row, n) for n in _PATIENT_FIELDS)
    except InvalidRequest as exc:
        raise InvalidRequest(f"{where}: {exc}") from None
    if abha is None and oid is None and partner is None:
        raise InvalidRequest(f"{where}: no patient (abha_address, oid or partner_user_id)")
    data = row.get("data")
    if isinstance(data, str) and not data.strip():
        data = None
    care_context = CareContext(cid or "", display or "", hi_type or "", data)
    try:
        link_entry(care_context, where)  # the rules of client.abdm.link_care_contexts, checked now
        if abha is not None:
            normalize_abha_address(abha)
    except InvalidRequest as exc:
        raise InvalidRequest(str(exc) if str(exc).startswith(where) else f"{where}: {exc}") from None
    if isinstance(data, dict):  # kept as its JSON text: the journal stores the row as sent
        care_context = CareContext(care_context.care_context_id, care_context.display, hi_type or "", _json.dumps(data))
    return LinkRow(care_context, abha, oid, partner)


class LinkRows:
    """The rows of a link input as ``(key, error, payload)`` triples, read lazily (once); ``blank`` counts the
    blank lines of JSON Lines skipped."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.blank = 0

    def __iter__(self) -> Iterator[tuple[str, str | None, bytes | None]]:
        rows = self._json_lines() if _is_json_lines(self.path) else self._csv()
        for where, row in rows:
            if isinstance(row, str):  # the row could not be read: it fails alone
                yield f"<{where}>", row, None
                continue
            try:
                link = parse_row(row, where)
            except InvalidRequest as exc:
                yield f"<{where}>", str(exc), None
                continue
            yield link.key, None, link.payload()

    def _json_lines(self) -> Iterator[tuple[str, dict[str, Any] | str]]:
        self.blank = 0
        with open(self.path, "rb") as f:
            for number, raw in enumerate(f, start=1):
                where = f"line {number}"
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 BOM, as some editors write
                    raw = raw[3:]
                if not raw.strip():
                    self.blank += 1
                    continue
                try:
                    row = _json.loads(raw)
                except ValueError:
                    yield where, f"{where} is not a JSON object"
                    continue
                yield (where, row) if isinstance(row, dict) else (where, f"{where} is not a JSON object")

    def _csv(self) -> Iterator[tuple[str, dict[str, Any] | str]]:
        with open(self.path, "rb") as f:
            text = io.TextIOWrapper(f, encoding="utf-8-sig", errors="strict", newline="")
            _allow_cells_up_to(_MAX_CELL)
            # strict: a quote left open is an error, not the rest of the file swallowed into one cell
            reader = csv.DictReader(text, skipinitialspace=False, strict=True)
            if reader.fieldnames is not None:
                reader.fieldnames = [c.strip() for c in reader.fieldnames]
            number = 1
            while True:
                number += 1
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except (UnicodeDecodeError, csv.Error):
                    # a record that cannot be read ends the reading: what follows cannot be trusted to be rows
                    yield (
                        f"row {number}",
                        (
                            f"row {number} and after cannot be read (not UTF-8, not CSV such as a quote left "
                            f"open, or a cell over {_MAX_CELL >> 20} MiB)"
                        ),
                    )
                    return
                yield f"row {number}", row


#: The largest CSV cell read (a ``data`` cell holds a whole FHIR bundle's JSON): Python's csv module stops at
#: 128 KiB by default, and the first cell over its limit ended the reading.
_MAX_CELL: Final = 256 << 20


def _allow_cells_up_to(size: int) -> None:
    """Raise the csv module's cell limit to ``size`` if it is lower. Judgement call: the limit is the process's
    (the module has no per-reader one); it is only ever raised, which no other reader of CSV relies on."""
    if csv.field_size_limit() < size:
        csv.field_size_limit(size)


def link_rows(path: str | os.PathLike[str]) -> LinkRows:
    """The items of a link input (see the module)."""
    return LinkRows(os.fspath(path))


class LinkRecorder:
    """Records the outcome of each link, as the ``abha.link_care_context`` webhook reports it, against a link job's
    journal: ``ingest status`` then shows linked / errored / waiting, and an item of unknown outcome is settled by
    it at the next run (``LINKED``: done; ``ERRORED``: failed, retryable) without asking the service.

    Give it to the ABDM webhook handler as ``on_event`` (other events are ignored)::

        recorder = LinkRecorder("links.db")
        handler = webhooks.abdm_handler(secret, client=client, on_event=recorder)

    or call :meth:`record` with a :class:`~health_async.models.LinkResult`. Safe while a run writes the journal
    (SQLite's own locking; each call opens and closes its connection in a worker thread). Nothing is logged but
    counts and event names: a webhook for a care context the journal does not hold is skipped (debug log). A
    webhook that cannot be recorded (the journal missing or unwritable) raises, so the handler answers 500 and
    the service delivers it again later; the recorder may be made before the job's first run creates the journal.
    """

    def __init__(self, journal: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(journal))

    def __repr__(self) -> str:
        return "LinkRecorder()"

    async def record(self, result: LinkResult) -> bool:
        """Record one outcome; ``True`` when it matched an item of the journal."""
        if result.status is LinkStatus.UNKNOWN:
            logger.warning("ABDM link webhook with a status this version does not know: not recorded")
            return False
        keys = result_keys(result)
        if not keys:
            return False
        matched = await asyncio.to_thread(record_link_status, self.path, keys, result.status.value, result.error)
        if not matched:
            logger.debug("ABDM link webhook for a care context this journal does not hold: skipped")
        return matched

    async def __call__(self, event: WebhookEvent) -> None:
        """``on_event`` for :func:`~health_async.webhooks.abdm_handler`: records ``abha.link_care_context``."""
        if event.event != LINK_EVENT:
            return
        try:
            result = event.link_result()
        except HealthError:
            logger.warning("ABDM link webhook whose data does not fit: not recorded")
            return
        await self.record(result)


def record_link_status(path: str, keys: list[str], status: str, error: str | None) -> bool:
    """Record a link webhook's outcome on the item of the first of ``keys`` the journal at ``path`` holds (its own
    connection: safe beside a run, which it waits for). ``True`` when one matched. A later outcome of the same
    link replaces an earlier one (the service retries a link and reports again)."""
    if not os.path.isfile(path):
        raise InvalidRequest("the link job's journal does not exist yet: the outcome cannot be recorded")
    db = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=rw", uri=True, isolation_level=None)
    try:
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        columns = {str(row[1]) for row in db.execute("PRAGMA table_info(items)")}
        if "link_status" not in columns:
            raise InvalidRequest("the journal is not a link job's journal")
        for key in keys:
            cursor = db.execute("UPDATE items SET link_status = ?, link_error = ? WHERE key = ?", (status, error, key))
            if cursor.rowcount:
                return True
        return False
    except sqlite3.OperationalError as exc:
        raise IngestOutputError(f"ingest: the journal could not be written ({exc})") from exc
    except sqlite3.DatabaseError:
        raise InvalidRequest("the file is not an ingest journal") from None
    finally:
        db.close()
