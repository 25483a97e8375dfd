"""Models as plain JSON-ready data, for output (the command line, ingest's result lines): readable attribute
names, enums as their values, dates as ISO text, tuples as lists.

Parsing is :mod:`health_async._wire`'s; this is the other direction, on the one cattrs converter. Three outputs
are shaped on purpose: a document, a report item (with its flag's name beside the raw code) and a processing
result (personal data, the PII block and the FHIR bundle, is left out: ask for it explicitly with ``result.pii``
or ``result.fhir``).

A document's plain form is defined once, as JSON: :func:`document_json` encodes it in C (msgspec), because bulk
output writes one per document and building it as Python dicts first cost more than the rest of an ingest's own
work; :func:`unstructure` of a document decodes that JSON.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

import attrs
import cattrs
import msgspec

from . import _json
from .models import Document, ProcessingResult, ProcessingStatus, ReportItem, ResultFlag, SmartReport

__all__ = ["converter", "document_json", "unstructure"]

converter: Final = cattrs.Converter()
"""The converter of output: its unstructure hooks give readable plain data."""

_to_builtins: Final = msgspec.to_builtins


_encode: Final = msgspec.json.encode
#: The end of an item's JSON by its ``result_id``: its flag's name, then the closing brace.
_FLAG_TAIL: Final[dict[str | None, bytes]] = {
    flag.value: b',"flag":"' + flag.name.encode() + b'"}' for flag in ResultFlag
}
_UNKNOWN_TAIL: Final = _FLAG_TAIL[ResultFlag.UNKNOWN.value]
#: A document's fields in the order msgspec encodes a slotted class's (the order of its sorted slots).
_DOCUMENT_FIELDS: Final = tuple(sorted(field.name for field in attrs.fields(Document)))
#: How msgspec begins a report item's JSON: its first key, ``{"coordinates":``. Outside a string, ``{"`` only ever
#: begins an object (inside one a quote is escaped), so each report item of a document's JSON begins with this.
_ITEM_START: Final = _encode(ReportItem()).partition(b":")[0] + b":"
#: The same beginning with the item's flag name first, by ``result_id``.
_FLAG_HEAD: Final[dict[str | None, bytes]] = {
    flag.value: b'{"flag":"' + flag.name.encode() + b'",' + _ITEM_START[1:] for flag in ResultFlag
}
_UNKNOWN_HEAD: Final = _FLAG_HEAD[ResultFlag.UNKNOWN.value]
#: A report's lists in the order msgspec writes them.
_REPORT_LISTS: Final = tuple(_json.loads(_encode(SmartReport())))


def document_json(doc: Document) -> msgspec.Raw:
    """A document's plain form as JSON, encoded in C: every field (enums as their values), and in each report
    item its flag's name beside the raw code (``"flag": "HIGH"``, the item's first key). Embed it in what
    :func:`health_async._json.dumps` encodes (an ingest line), or decode it (:func:`unstructure`).

    One msgspec pass writes the whole document; each item's flag is then put at the item's beginning, found by
    its first key (see :data:`_ITEM_START`). A document in which that key begins anything else than its items
    (it cannot today: checked by counting) is written item by item instead."""
    raw = _encode(doc)
    report = doc.smart_report
    if report is None:
        return msgspec.Raw(raw)
    items = [item for name in _REPORT_LISTS for item in getattr(report, name)]
    parts = raw.split(_ITEM_START)
    if len(parts) != len(items) + 1:
        return _document_json_by_item(doc, report)
    pieces = [parts[0]]
    for item, part in zip(items, parts[1:], strict=True):
        pieces.append(_FLAG_HEAD.get(item.result_id, _UNKNOWN_HEAD))
        pieces.append(part)
    return msgspec.Raw(b"".join(pieces))


def _item_json(item: ReportItem) -> msgspec.Raw:
    # msgspec writes every field of the item (all set: attrs sets them), and the object never ends empty
    return msgspec.Raw(_encode(item)[:-1] + _FLAG_TAIL.get(item.result_id, _UNKNOWN_TAIL))


def _document_json_by_item(doc: Document, report: SmartReport) -> msgspec.Raw:
    """:func:`document_json` the long way: each item encoded on its own, its flag's name appended."""
    plain = {name: getattr(doc, name) for name in _DOCUMENT_FIELDS}
    plain["smart_report"] = {name: [_item_json(item) for item in getattr(report, name)] for name in _REPORT_LISTS}
    return msgspec.Raw(_encode(plain))


def _document(doc: Document) -> dict[str, Any]:
    out: dict[str, Any] = _json.loads(document_json(doc))
    return out


def _report_item(item: ReportItem) -> dict[str, Any]:
    out: dict[str, Any] = _to_builtins(item)
    out["flag"] = item.flag.name
    return out


def _result(result: ProcessingResult) -> dict[str, Any]:
    return {
        "document_id": result.document_id,
        "status": result.status.name,
        "raw_status": result.raw_status,
        "errors": [{"code": e.code, "message": e.message} for e in result.errors],
        "tests": converter.unstructure(result.tests),
    }


converter.register_unstructure_hook(Document, _document)
converter.register_unstructure_hook(ReportItem, _report_item)
converter.register_unstructure_hook(ProcessingResult, _result)
converter.register_unstructure_hook(ProcessingStatus, lambda status: status.name)
converter.register_unstructure_hook(dt.date, dt.date.isoformat)
converter.register_unstructure_hook(dt.datetime, dt.datetime.isoformat)


def unstructure(value: Any) -> Any:
    """Models as plain JSON-ready data (readable attribute names, enums as their values)."""
    return converter.unstructure(value)
