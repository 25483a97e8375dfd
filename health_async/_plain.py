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
from .models import Document, ProcessingResult, ProcessingStatus, ReportItem, ResultFlag

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


def _item_json(item: ReportItem) -> msgspec.Raw:
    # msgspec writes every field of the item (all set: attrs sets them), and the object never ends empty
    return msgspec.Raw(_encode(item)[:-1] + _FLAG_TAIL.get(item.result_id, _UNKNOWN_TAIL))


def document_json(doc: Document) -> msgspec.Raw:
    """A document's plain form as JSON, encoded in C: every field (enums as their values), and in each report
    item its flag's name beside the raw code (``"flag": "HIGH"``). Embed it in what :func:`health_async._json.dumps`
    encodes (an ingest line), or decode it (:func:`unstructure`)."""
    report = doc.smart_report
    if report is None:
        return msgspec.Raw(_encode(doc))
    plain = {name: getattr(doc, name) for name in _DOCUMENT_FIELDS}
    plain["smart_report"] = {
        "unverified": [_item_json(item) for item in report.unverified],
        "verified": [_item_json(item) for item in report.verified],
    }
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
