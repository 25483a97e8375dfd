"""The one cattrs converter that turns the service's JSON into :mod:`health_async.models`, and back for output.

Rules, for every model: unknown keys are ignored; a missing optional field is ``None`` (or ``()``); the live
service's spellings are accepted beside the interface's (``document_type``/``dt``, ``eka_id``/``svc_id``,
``unit_eka_id``/``unit_svc_id``); anything else that does not fit raises
:class:`~health_async.errors.ResponseValidationError` naming the model and field, never the value (values can be
personal data).

Speed matters here (bulk describe parses thousands of documents a second), so the hooks of the document models
are written by hand: one ``dict.get`` per field and a type check, no per-field dispatch. The flat models use
hooks that cattrs generates with renames, strict primitive hooks below them.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable
from typing import Any, Final, TypeVar, cast

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

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
    SmartReport,
    UploadResult,
    _documents,
)
from .models._documents import _FILE_TYPES

__all__ = ["converter", "parse_smart_report", "structure", "structure_document", "unstructure"]

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


# ----------------------------------------------------------------------------- hand-written hooks
#
# The document models (a describe's body) have two paths each:
#
# * a fast path for the usual body: every field read in one C call (``map(dict.get, KEYS)``), the types of all
#   fields checked at once by looking the tuple of their types up in a small table of accepted "signatures",
#   coordinates built in C (``itemgetter`` + ``tuple.__new__``). It does not convert anything: any value that
#   is not already of the model's type (an id sent as a number, a number sent as a string, an int coordinate, a
#   wrong shape) makes it give up and hand the same data to
# * the checked path, field by field, which converts what is tolerated and raises ``_Invalid(field)`` for the
#   rest, so the error names the field. Both give the same model for the same input.


_NONE: Final[type] = type(None)
_STR_OR_NONE: Final[frozenset[type]] = frozenset({str, _NONE})
_INT_OR_NONE: Final[frozenset[type]] = frozenset({int, _NONE})
_BOOL_OR_NONE: Final[frozenset[type]] = frozenset({bool, _NONE})
_LIST_OR_NONE: Final[frozenset[type]] = frozenset({list, _NONE})
_DICT_OR_NONE: Final[frozenset[type]] = frozenset({dict, _NONE})
_ONLY_STR: Final[frozenset[type]] = frozenset({str})
_SIGNATURES_MAX: Final = 512  # accepted type signatures remembered per model (real bodies show a handful)


class _Signatures:
    """Which tuples of field types the fast path takes, remembered: one dict lookup per object.

    Only accepted signatures are stored, at most :data:`_SIGNATURES_MAX` (a body cannot grow it without bound).
    """

    __slots__ = ("accepted", "kinds")

    def __init__(self, kinds: tuple[frozenset[type], ...]) -> None:
        self.kinds = kinds
        #: The signatures seen and accepted (test ``in`` it first: the common case costs no call).
        self.accepted: dict[tuple[type, ...], bool] = {}

    def fits(self, signature: tuple[type, ...]) -> bool:
        """Whether every field's type is one the fast path takes as is; remembered when it is."""
        ok = len(signature) == len(self.kinds) and all(t in k for t, k in zip(signature, self.kinds, strict=True))
        if ok and len(self.accepted) < _SIGNATURES_MAX:
            self.accepted[signature] = True
        return ok


def _file_entry(data: Any, _: Any = None) -> FileEntry:
    return _files([data])[0]


def _objects(value: Any, field: str) -> list[dict[str, Any]]:
    """A JSON array of objects, checked (``null`` counts as empty)."""
    if value is None:
        return []
    if type(value) is not list or not all(type(v) is dict for v in value):
        raise _Invalid(field)
    return value


_new_tuple: Final = tuple.__new__


def _coordinates_fast(points: list[Any]) -> tuple[Coordinate, ...] | None:
    """Objects whose ``x`` and ``y`` are floats, as Coordinates; ``None``: take the checked path.

    A plain loop: measured faster than chains of ``map``/``itemgetter`` for the usual four points.
    """
    out = []
    for point in points:
        if type(point) is not dict:
            return None
        x = point.get("x")
        y = point.get("y")
        if type(x) is not float or type(y) is not float:
            return None  # an int (or worse): the checked path converts or names the field
        out.append(_new_tuple(Coordinate, (x, y)))
    return tuple(out)


def _coordinates(points: Any) -> tuple[Coordinate, ...]:
    out = []
    for point in _objects(points, "coordinates"):
        x, y = point.get("x"), point.get("y")
        if type(x) is not float and type(x) is not int:
            raise _Invalid("x")
        if type(y) is not float and type(y) is not int:
            raise _Invalid("y")
        out.append(_new_tuple(Coordinate, (float(x), float(y))))
    return tuple(out)


def _coordinate(data: Any, _: Any = None) -> Coordinate:
    return _coordinates([data])[0]


# The wire keys of a report item: the model's fields in order, then the live spellings of two of them.
_ITEM_KEYS: Final = (
    "name",
    "value",
    "unit",
    "unit_svc_id",
    "range",
    "result",
    "result_id",
    "display_result",
    "id",
    "vital_id",
    "page_num",
    "file_index",
    "coordinates",
    "svc_id",
    "is_result_editable",
    "date",
    "eka_id",
    "unit_eka_id",
)
_S, _I = _STR_OR_NONE, _INT_OR_NONE
_ITEM_SIGNATURES: Final = _Signatures(
    (_S, _S, _S, _S, _S, _S, _S, _S, _I, _S, _I, _I, _LIST_OR_NONE, _S, _BOOL_OR_NONE, _I, _S, _S)
)
_ITEM_ACCEPTED: Final = _ITEM_SIGNATURES.accepted


def _slot_builder(cls: type[T]) -> Callable[..., T]:
    """``build(*values)``: an instance of the frozen slotted attrs class ``cls`` from its fields' values in order,
    without its ``__init__``: ``object.__new__`` and one slot setter per field (the setters are the slots' own
    descriptors, so the instance is exactly what ``cls(*values)`` gives, still frozen to its users). For classes
    whose fields all have ``init=True`` and no converters or validators; checked once, here, at import."""
    fields = attrs.fields(cast("type[attrs.AttrsInstance]", cls))
    if not all(f.init and f.converter is None and f.validator is None for f in fields):
        raise TypeError(f"{cls.__name__} cannot be built slot by slot")
    names = [f"v{i}" for i in range(len(fields))]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = [f"def build({', '.join(names)}):", "    self = _new(_cls)"]
    for i, field in enumerate(fields):
        namespace[f"_set{i}"] = cls.__dict__[field.name].__set__
        lines.append(f"    _set{i}(self, v{i})")
    lines.append("    return self")
    exec("\n".join(lines), namespace)  # our own text, as attrs builds its methods
    build: Callable[..., T] = namespace["build"]
    sample = tuple(range(len(fields)))
    if build(*sample) != cls(*sample):
        raise TypeError(f"{cls.__name__} cannot be built slot by slot")
    return build


#: ReportItem(*values) at ~0.8 the cost of its frozen ``__init__`` (seven per document, measured).
_new_item: Final = _slot_builder(ReportItem)


def _report_item(data: Any, _: Any = None) -> ReportItem:
    """One smart report item: the fast path when it fits, else :func:`_report_item_checked`."""
    if type(data) is dict:
        values = tuple(map(data.get, _ITEM_KEYS))
        signature = tuple(map(type, values))
        if signature in _ITEM_ACCEPTED or _ITEM_SIGNATURES.fits(signature):
            (name, value, unit, unit_svc_id, range_, result, result_id, display_result, id_, vital_id, page_num,
             file_index, points, svc_id, is_result_editable, date, eka_id, unit_eka_id) = values  # fmt: skip
            coordinates = _coordinates_fast(points) if points else ()
            if coordinates is not None:
                return _new_item(
                    name,
                    value,
                    unit,
                    unit_eka_id if unit_svc_id is None else unit_svc_id,
                    range_,
                    result,
                    result_id,
                    display_result,
                    id_,
                    vital_id,
                    page_num,
                    file_index,
                    coordinates,
                    eka_id if svc_id is None else svc_id,
                    is_result_editable,
                    date,
                )
    return _report_item_checked(data)


def _report_item_checked(data: Any) -> ReportItem:
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


def parse_smart_report(data: Any) -> SmartReport:
    """A smart report's JSON as :class:`SmartReport` (what :attr:`Document.smart_report` runs on first read)."""
    if type(data) is not dict:
        raise ResponseValidationError("the response does not fit SmartReport: expected a JSON object")
    try:
        return _smart_report(data)
    except Exception as exc:
        raise _validation_error("SmartReport", exc) from exc


_FILE_UNKNOWN: Final = FileType.UNKNOWN


def _files(files: Any) -> tuple[FileEntry, ...]:
    out = []
    for entry in _objects(files, "files"):
        url = entry.get("asset_url")
        if url is not None and type(url) is not str:
            raise _Invalid("asset_url")
        out.append(FileEntry(url, FileType.from_wire(entry.get("file_type"))))
    return tuple(out)


def _files_fast(files: list[Any]) -> tuple[FileEntry, ...] | None:
    out = []
    for entry in files:
        if type(entry) is not dict:
            return None
        url = entry.get("asset_url")
        if url is not None and type(url) is not str:
            return None
        kind = entry.get("file_type")
        out.append(FileEntry(url, _FILE_TYPES.get(kind, _FILE_UNKNOWN) if type(kind) is str else _FILE_UNKNOWN))
    return tuple(out)


_DOCUMENT_KEYS: Final = ("document_id", "source", "document_date_epoch", "document_type", "dt", "tags", "files")
_DOCUMENT_SIGNATURES: Final = _Signatures((_S, _S, _I, _S, _S, _LIST_OR_NONE, _LIST_OR_NONE))
_DOCUMENT_ACCEPTED: Final = _DOCUMENT_SIGNATURES.accepted


def _document(data: Any, _: Any = None, document_id: str | None = None) -> Document:
    """A document description: the fast path when it fits, else :func:`_document_checked`."""
    if type(data) is dict:
        values = tuple(map(data.get, _DOCUMENT_KEYS))
        smart_report = data.get("smart_report")
        signature = tuple(map(type, values))
        if (signature in _DOCUMENT_ACCEPTED or _DOCUMENT_SIGNATURES.fits(signature)) and (
            type(smart_report) in _DICT_OR_NONE
        ):
            doc_id, source, epoch, document_type, dt_, tags, files = values
            if tags is None:
                tags = ()
            elif _ONLY_STR.issuperset(map(type, tags)):
                tags = tuple(tags)
            else:
                tags = None
            entries = _files_fast(files) if files else ()
            if tags is not None and entries is not None:
                if doc_id is None and "document_id" not in data:
                    doc_id = document_id
                return Document(
                    doc_id, source, epoch, dt_ if document_type is None else document_type, tags, entries, smart_report
                )
    return _document_checked(data, document_id)


def _document_checked(data: Any, document_id: str | None) -> Document:
    if type(data) is not dict:
        raise _Invalid("document")
    get = data.get
    document_type = get("document_type")
    if document_type is None:
        document_type = get("dt")
    smart_report = get("smart_report")
    if smart_report is not None and type(smart_report) is not dict:
        raise _Invalid("smart_report")
    return Document(
        _str(get("document_id", document_id), "document_id"),
        _str(get("source"), "source"),
        _int(get("document_date_epoch"), "document_date_epoch"),
        _str(document_type, "document_type"),
        _strs(get("tags"), "tags"),
        _files(get("files")),
        smart_report,
    )


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
    # By hand, not through cattrs' generated functions: bulk output (the CLI, ingest) writes every document.
    report = doc.smart_report
    return {
        "document_id": doc.document_id,
        "source": doc.source,
        "document_date_epoch": doc.document_date_epoch,
        "document_type": doc.document_type,
        "tags": list(doc.tags),
        "files": [{"asset_url": f.asset_url, "file_type": f.file_type.value} for f in doc.files],
        "smart_report": None
        if report is None
        else {
            "verified": [_unstructure_report_item(item) for item in report.verified],
            "unverified": [_unstructure_report_item(item) for item in report.unverified],
        },
    }


_ITEM_FIELDS: Final = tuple(f.name for f in attrs.fields(ReportItem))
_item_values: Final = operator.attrgetter(*_ITEM_FIELDS)


def _unstructure_report_item(item: ReportItem) -> dict[str, Any]:
    out: dict[str, Any] = dict(zip(_ITEM_FIELDS, _item_values(item), strict=True))
    out["coordinates"] = [{"x": x, "y": y} for x, y in item.coordinates]
    out["flag"] = item.flag.name
    return out


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
    """Parse a document description; ``document_id`` fills the id when the body does not carry it."""
    try:
        return _document(data, None, document_id)
    except Exception as exc:
        raise _validation_error("Document", exc) from exc


def unstructure(value: Any) -> Any:
    """Models as plain JSON-ready data (readable attribute names, enums as their values)."""
    return converter.unstructure(value)


_documents._parse_smart_report = parse_smart_report  # Document.smart_report's parser, without an import per read
