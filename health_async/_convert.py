"""The one cattrs converter that turns the service's JSON into :mod:`health_async.models`, and back for output.

Rules, for every model: unknown keys are ignored; a missing optional field is ``None`` (or ``()``); the live
service's spellings are accepted beside the interface's (``document_type``/``dt``, ``eka_id``/``svc_id``,
``unit_eka_id``/``unit_svc_id``); anything else that does not fit raises
:class:`~health_async.errors.ResponseValidationError` naming the model and field, never the value (values can be
personal data).

Speed matters for document descriptions (bulk describe parses thousands a second): :func:`decode_document`
decodes their bytes with msgspec straight into the models, and only a body that does not fit that strict decode
takes the tolerant hand-written hooks here (one ``dict.get`` per field and a type check). The flat models use
hooks that cattrs generates with renames, strict primitive hooks below them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Final, TypeVar

import cattrs
import msgspec
from cattrs.gen import make_dict_structure_fn, override
from msgspec.structs import force_setattr as _force_setattr

from .errors import ResponseValidationError
from .models import (
    AadhaarInit,
    Coordinate,
    Document,
    DocumentListItem,
    DocumentPage,
    FileEntry,
    FileType,
    Profile,
    ReportItem,
    ResultFlag,
    SmartReport,
    UploadResult,
)

__all__ = ["converter", "decode_document", "structure", "structure_document", "unstructure"]

T = TypeVar("T")


class _Invalid(ValueError):
    """A field does not fit; carries the field name only."""


# ----------------------------------------------------------------------------- primitive checks


def _str(value: Any, field: str) -> str | None:
    if value is None or type(value) is str:
        return value
    if type(value) is int:  # ids sent as numbers by some producers
        return str(value)
    raise _Invalid(field)


def _int(value: Any, field: str) -> int | None:
    if value is None or type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    if type(value) is str and value.isascii() and value.lstrip("-").isdigit():
        return int(value)
    raise _Invalid(field)


def _float(value: Any, field: str) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
    raise _Invalid(field)


def _bool(value: Any, field: str) -> bool | None:
    if value is None or type(value) is bool:
        return value
    raise _Invalid(field)


def _strs(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) is not list or not all(type(v) is str for v in value):
        raise _Invalid(field)
    return tuple(value)


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise _Invalid(field)
    return value


def _dict(value: Any, field: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise _Invalid(field)
    return value


def _date(value: Any, field: str) -> dt.date | None:
    if value is None or value == "":
        return None
    if type(value) is str:
        try:
            return dt.date.fromisoformat(value[:10])
        except ValueError:
            pass
    raise _Invalid(field)


# ----------------------------------------------------------------------------- document descriptions
#
# A describe's body has two paths:
#
# * the fast one, :func:`decode_document`: msgspec decodes the response bytes straight into the models (they are
#   ``msgspec.Struct`` classes) in C, the live spellings included (``dt``, ``eka_id``, ``unit_eka_id``: the models'
#   ``__post_init__`` moves them). It is strict: any value not already of the model's type (an id sent as a
#   number, a number sent as a string, an int epoch sent as a float, an unknown file type, a malformed report)
#   makes it give up, and
# * the tolerant one, :func:`structure_document`, takes the decoded JSON field by field, converts what is
#   tolerated and raises ``_Invalid(field)`` for the rest, so the error names the field. Both give the same
#   model for the same input (a property test checks it).


def _objects(value: Any, field: str) -> list[dict[str, Any]]:
    """A JSON array of objects, checked (``null`` counts as empty)."""
    if value is None:
        return []
    if type(value) is not list or not all(type(v) is dict for v in value):
        raise _Invalid(field)
    return value


def _coordinates(points: Any) -> tuple[Coordinate, ...]:
    out = []
    for point in _objects(points, "coordinates"):
        x, y = point.get("x"), point.get("y")
        if type(x) is not float and type(x) is not int:
            raise _Invalid("x")
        if type(y) is not float and type(y) is not int:
            raise _Invalid("y")
        out.append(Coordinate(float(x), float(y)))
    return tuple(out)


def _coordinate(data: Any, _: Any = None) -> Coordinate:
    return _coordinates([data])[0]


def _report_item(data: Any, _: Any = None) -> ReportItem:
    d = _dict(data, "smart_report item")
    get = d.get
    svc_id = get("svc_id")
    if svc_id is None:
        svc_id = get("eka_id")
    unit_svc_id = get("unit_svc_id")
    if unit_svc_id is None:
        unit_svc_id = get("unit_eka_id")
    return ReportItem(
        name=_str(get("name"), "name"),
        value=_str(get("value"), "value"),
        unit=_str(get("unit"), "unit"),
        unit_svc_id=_str(unit_svc_id, "unit_svc_id"),
        range=_str(get("range"), "range"),
        result=_str(get("result"), "result"),
        result_id=_str(get("result_id"), "result_id"),
        display_result=_str(get("display_result"), "display_result"),
        id=_int(get("id"), "id"),
        vital_id=_str(get("vital_id"), "vital_id"),
        page_num=_int(get("page_num"), "page_num"),
        file_index=_int(get("file_index"), "file_index"),
        coordinates=_coordinates(get("coordinates")),
        svc_id=_str(svc_id, "svc_id"),
        is_result_editable=_bool(get("is_result_editable"), "is_result_editable"),
        date=_int(get("date"), "date"),
    )


def _report_items(value: Any, field: str) -> tuple[ReportItem, ...]:
    if value is None:
        return ()
    if type(value) is not list:
        raise _Invalid(field)
    return tuple(map(_report_item, value))


def _smart_report(data: Any, _: Any = None) -> SmartReport:
    d = _dict(data, "smart_report")
    return SmartReport(_report_items(d.get("verified"), "verified"), _report_items(d.get("unverified"), "unverified"))


def _files(files: Any) -> tuple[FileEntry, ...]:
    out = []
    for entry in _objects(files, "files"):
        url = entry.get("asset_url")
        if url is not None and type(url) is not str:
            raise _Invalid("asset_url")
        out.append(FileEntry(url, FileType.from_wire(entry.get("file_type"))))
    return tuple(out)


def _file_entry(data: Any, _: Any = None) -> FileEntry:
    return _files([data])[0]


def _document(data: Any, _: Any = None, document_id: str | None = None) -> Document:
    if type(data) is not dict:
        raise _Invalid("document")
    get = data.get
    document_type = get("document_type")
    if document_type is None:
        document_type = get("dt")
    report = get("smart_report")
    doc_id = _str(get("document_id"), "document_id")
    return Document(
        document_id if doc_id is None else doc_id,
        _str(get("source"), "source"),
        _int(get("document_date_epoch"), "document_date_epoch"),
        _str(document_type, "document_type"),
        _strs(get("tags"), "tags"),
        _files(get("files")),
        None if report is None else _smart_report(report),
    )


_decode_document_fast: Final = msgspec.json.Decoder(Document).decode
# RecursionError: a body nested too deeply (the tolerant path then reports it as not JSON)
_FAST_DECODE_ERRORS: Final = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)


def decode_document(raw: bytes, document_id: str | None = None) -> Document | None:
    """The fast path: a describe's response bytes as a :class:`Document`, or ``None`` when the body does not fit
    it as it is (the caller then decodes the JSON and calls :func:`structure_document`, which tolerates more and
    names the field that does not fit). ``document_id`` fills the id when the body has none."""
    if _ENVELOPE_KEY in raw:  # possibly an encrypted body (or text that mentions it): the generic path decides
        return None
    try:
        doc = _decode_document_fast(raw)
    except _FAST_DECODE_ERRORS:
        return None
    if doc.document_id is None and document_id is not None:
        _force_setattr(doc, "document_id", document_id)  # our own new instance, not yet seen by anyone
    return doc


_ENVELOPE_KEY: Final = b'"ciphertext"'


def _list_item(data: Any, _: Any = None) -> DocumentListItem:
    record = _dict(data, "items[]").get("record")
    item = _dict(_dict(record, "record").get("item"), "record.item")
    meta = item.get("metadata")
    meta = {} if meta is None else _dict(meta, "metadata")
    document_id = item.get("document_id")
    if type(document_id) is not str or not document_id:
        raise _Invalid("document_id")
    return DocumentListItem(
        document_id=document_id,
        upload_date=_int(item.get("upload_date"), "upload_date"),
        document_type=_str(item.get("document_type"), "document_type"),
        patient_id=_str(item.get("patient_id"), "patient_id"),
        title=_str(meta.get("title"), "title"),
        tags=_strs(meta.get("tags"), "tags"),
        auto_tags=_strs(meta.get("auto_tags"), "auto_tags"),
        document_date=_int(meta.get("document_date"), "document_date"),
        thumbnail=_str(meta.get("thumbnail"), "thumbnail"),
    )


def _document_page(data: Any, _: Any = None) -> DocumentPage:
    d = _dict(data, "document list")
    return DocumentPage(
        items=tuple(map(_list_item, _list(d.get("items"), "items"))),
        next_token=_str(d.get("next_token"), "next_token") or None,
        source_refreshed_at=_int(d.get("source_refreshed_at"), "source_refreshed_at"),
    )


# ----------------------------------------------------------------------------- the converter

converter: Final = cattrs.Converter(detailed_validation=False, forbid_extra_keys=False)
"""The converter: its structure hooks parse wire JSON; its unstructure hooks give readable plain data."""

converter.register_structure_hook(str, lambda v, _: _str(v, ""))
converter.register_structure_hook(int, lambda v, _: _int(v, ""))
converter.register_structure_hook(float, lambda v, _: _float(v, ""))
converter.register_structure_hook(bool, lambda v, _: _bool(v, ""))
converter.register_structure_hook(dt.date, lambda v, _: _date(v, ""))

for _cls, _hook in (
    (FileEntry, _file_entry),
    (Coordinate, _coordinate),
    (ReportItem, _report_item),
    (SmartReport, _smart_report),
    (Document, _document),
    (DocumentListItem, _list_item),
    (DocumentPage, _document_page),
):
    converter.register_structure_hook(_cls, _hook)

# the route is the client's knowledge, not the service's: never read from a response
converter.register_structure_hook(
    UploadResult,
    make_dict_structure_fn(UploadResult, converter, route=override(omit=True), processing=override(omit=True)),
)
converter.register_structure_hook(AadhaarInit, make_dict_structure_fn(AadhaarInit, converter))
converter.register_structure_hook(
    Profile,
    make_dict_structure_fn(
        Profile,
        converter,
        business_id=override(rename="bid"),
        status=override(rename="ps"),
        created_at=override(rename="c_ate"),
        updated_at=override(rename="u_ate"),
        gender=override(rename="gen"),
        date_of_birth=override(rename="dob"),
        dob_from_age=override(rename="is_age"),
        first_name=override(rename="fn"),
        last_name=override(rename="ln"),
        full_name=override(rename="fln"),
        blood_group=override(rename="bg"),
        salutation=override(rename="s"),
    ),
)


def _unstructure_document(doc: Document) -> dict[str, Any]:
    # Bulk output (the CLI, ingest) writes every document: msgspec turns the whole tree into plain data in C
    # (enums as values, tuples as lists, coordinates as {"x", "y"} objects); then the live-spelling slots (always
    # None once read) are dropped and each item gets its flag's name.
    out: dict[str, Any] = _to_builtins(doc)
    del out["dt"]
    report = out["smart_report"]
    if report is not None:
        for items in (report["verified"], report["unverified"]):
            for item in items:
                _finish_report_item(item)
    return out


def _finish_report_item(item: dict[str, Any]) -> dict[str, Any]:
    del item["eka_id"], item["unit_eka_id"]
    item["flag"] = ResultFlag.from_id(item["result_id"]).name
    return item


def _unstructure_report_item(item: ReportItem) -> dict[str, Any]:
    return _finish_report_item(_to_builtins(item))


_to_builtins: Final = msgspec.to_builtins


converter.register_unstructure_hook(Coordinate, lambda point: {"x": point.x, "y": point.y})
converter.register_unstructure_hook(Document, _unstructure_document)
converter.register_unstructure_hook(ReportItem, _unstructure_report_item)
converter.register_unstructure_hook(dt.date, dt.date.isoformat)
converter.register_unstructure_hook(dt.datetime, dt.datetime.isoformat)

_HOOKS: Final[dict[type, Callable[[Any, Any], Any]]] = {}


def structure(data: Any, cls: type[T]) -> T:
    """Parse ``data`` (decoded JSON) as ``cls``; :class:`ResponseValidationError` if it does not fit."""
    hook = _HOOKS.get(cls)
    if hook is None:
        hook = _HOOKS[cls] = converter.get_structure_hook(cls)
    if type(data) is not dict:
        raise ResponseValidationError(f"the response does not fit {cls.__name__}: expected a JSON object")
    try:
        return hook(data, cls)  # type: ignore[no-any-return]
    except Exception as exc:
        raise _validation_error(cls.__name__, exc) from exc


def _validation_error(model: str, exc: Exception) -> ResponseValidationError:
    # Name the field where known, never the value (values can be personal data).
    if isinstance(exc, _Invalid) and str(exc):
        return ResponseValidationError(f"the response does not fit {model}: field {exc} has the wrong shape")
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        return ResponseValidationError(f"the response does not fit {model}: field {exc.args[0]} is missing")
    return ResponseValidationError(f"the response does not fit {model}")


def structure_document(data: Any, document_id: str | None = None) -> Document:
    """Parse a document description (decoded JSON), tolerantly; ``document_id`` fills the id when the body has
    none (absent or ``null``)."""
    try:
        return _document(data, None, document_id)
    except Exception as exc:
        raise _validation_error("Document", exc) from exc


def unstructure(value: Any) -> Any:
    """Models as plain JSON-ready data (readable attribute names, enums as their values)."""
    return converter.unstructure(value)
