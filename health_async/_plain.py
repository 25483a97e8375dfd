"""Models as plain JSON-ready data, for output (the command line, ingest's result lines): readable attribute
names, enums as their values, dates as ISO text, tuples as lists.

Parsing is :mod:`health_async._wire`'s; this is the other direction, on the one cattrs converter. Three outputs
are shaped on purpose: a document (decoded to plain data by msgspec in C, bulk output writes every one), a report
item (with its flag's name beside the raw code) and a processing result (personal data, the PII block and the
FHIR bundle, is left out: ask for it explicitly with ``result.pii`` or ``result.fhir``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

import cattrs
import msgspec

from .models import Document, ProcessingResult, ProcessingStatus, ReportItem, ResultFlag

__all__ = ["converter", "unstructure"]

converter: Final = cattrs.Converter()
"""The converter of output: its unstructure hooks give readable plain data."""

_to_builtins: Final = msgspec.to_builtins


def _document(doc: Document) -> dict[str, Any]:
    out: dict[str, Any] = _to_builtins(doc)
    report = out["smart_report"]
    if report is not None:
        for items in (report["verified"], report["unverified"]):
            for item in items:
                item["flag"] = ResultFlag.from_id(item["result_id"]).name
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
