"""Document models: descriptions, lists and uploads.

Attribute names are readable; where the wire name differs, the field's ``wire(...)`` declaration gives it.

Every model is a frozen, slotted attrs class whose wire names are declared beside its fields
(:mod:`health_async._wire`). ``describe`` decodes a description's bytes straight into :class:`Document` with
msgspec (derived from the same declarations); a body that does not fit that fast decode (a number sent as a
string, an unknown file type, a malformed report, ...) is parsed again by the tolerant rules, which give the same
model or a :class:`~health_async.errors.ResponseValidationError` naming the field.

Personal data (names, mobile, e-mail, date of birth, the OTP hint) is left out of every ``repr``.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterator
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from ..._wire import WireEnum, empty_is_none, epoch_datetime, fast_decoder, local, non_empty, structure, wire
from ._processing import ProcessingResult

if TYPE_CHECKING:
    from ..._files import FileInput
    from ...errors import HealthError

__all__ = [
    "Coordinate",
    "DescribeResult",
    "Document",
    "DocumentListItem",
    "DocumentPage",
    "FileEntry",
    "FileType",
    "ReportItem",
    "ResultFlag",
    "SmartReport",
    "UploadOutcome",
    "UploadResult",
]


class FileType(WireEnum):
    """Kind of a document's file (wire ``file_type``). ``UNKNOWN`` stands for any value not documented."""

    IMG = "IMG"
    PDF = "PDF"
    UNKNOWN = "UNKNOWN"


class ResultFlag(enum.Enum):
    """Meaning of a report item's ``result_id`` (``sm-...`` codes). ``UNKNOWN`` for a code not documented."""

    CRITICALLY_HIGH = "sm-4067205096"
    VERY_HIGH = "sm-2631712380"
    HIGH = "sm-1420480405"
    BORDERLINE_HIGH = "sm-5279215230"
    NORMAL = "sm-8146614980"
    BORDERLINE_LOW = "sm-5279274814"
    LOW = "sm-1220479757"
    VERY_LOW = "sm-2631771970"
    CRITICALLY_LOW = "sm-4067860500"
    ABNORMAL = "sm-5379306527"
    UNDETERMINED = "sm-5612225938"
    UNKNOWN = "unknown"

    @classmethod
    def from_id(cls, result_id: str | None) -> ResultFlag:
        """The flag for a ``result_id``; ``UNKNOWN`` for ``None`` or a code this version does not know."""
        return _RESULT_FLAGS.get(result_id, cls.UNKNOWN) if isinstance(result_id, str) else cls.UNKNOWN

    @property
    def label(self) -> str:
        """Human-readable meaning: ``"critically high"``, ``"normal"``, ..."""
        return self.name.lower().replace("_", " ")

    @property
    def is_abnormal(self) -> bool:
        """True for every flag outside the normal range (``ABNORMAL``, high and low ones)."""
        return self not in _NOT_ABNORMAL


_RESULT_FLAGS: Final[dict[object, ResultFlag]] = {m.value: m for m in ResultFlag}
_NOT_ABNORMAL: Final = frozenset({ResultFlag.NORMAL, ResultFlag.UNDETERMINED, ResultFlag.UNKNOWN})


@attrs.frozen
class Coordinate:
    """A point on a page of the document's file where a report value was read (wire ``{"x": .., "y": ..}``).

    It unpacks: ``x, y = point``.
    """

    x: float
    y: float

    def __iter__(self) -> Iterator[float]:
        return iter((self.x, self.y))


@attrs.frozen(repr=False)
class ReportItem:
    """One value of a smart report (a lab result, a vital, ...). Its ``repr`` leaves out the fields that are unset."""

    name: str | None = None
    value: str | None = None
    unit: str | None = None
    #: The service's id for the unit (wire ``unit_svc_id``, or ``unit_eka_id`` on the live service).
    unit_svc_id: str | None = wire("unit_svc_id", "unit_eka_id", one_key=True, default=None)
    #: Reference range as printed, e.g. ``"13.0-17.0"``.
    range: str | None = None
    result: str | None = None
    #: The raw ``sm-...`` code; :attr:`flag` gives its meaning.
    result_id: str | None = None
    display_result: str | None = None
    id: int | None = None
    vital_id: str | None = None
    page_num: int | None = None
    file_index: int | None = None
    coordinates: tuple[Coordinate, ...] = ()
    #: The service's id for the item (wire ``svc_id``, or ``eka_id`` on the live service).
    svc_id: str | None = wire("svc_id", "eka_id", one_key=True, default=None)
    is_result_editable: bool | None = None
    #: Date of the value as an epoch number.
    date: int | None = None

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in _REPORT_ITEM_FIELDS if _is_set(self, f))
        return f"ReportItem({shown})"

    @property
    def flag(self) -> ResultFlag:
        """What :attr:`result_id` means (``ResultFlag.UNKNOWN`` for an undocumented code)."""
        return ResultFlag.from_id(self.result_id)


_REPORT_ITEM_FIELDS: Final = attrs.fields(ReportItem)


def _is_set(item: ReportItem, field: attrs.Attribute[Any]) -> bool:
    return bool(getattr(item, field.name) != field.default)


@attrs.frozen
class SmartReport:
    """Values the service extracted from a document, split by whether a person verified them."""

    verified: tuple[ReportItem, ...] = ()
    unverified: tuple[ReportItem, ...] = ()

    @property
    def items(self) -> tuple[ReportItem, ...]:
        """Verified then unverified items."""
        return self.verified + self.unverified


def url_repr(url: str | None) -> str:
    """A link for a repr: scheme, host and path only. The query string of a presigned link is its signature (a
    credential): it never appears in a repr, nor in anything derived from one (logs, errors, tracebacks)."""
    if url is None:
        return "None"
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return repr(url[:cut] + ("?…" if cut < len(url) else ""))


@attrs.frozen
class FileEntry:
    """One file of a document (an image or a PDF rendering of the same record)."""

    #: A presigned link to the file; its query string (the signature) is left out of ``repr``.
    asset_url: str | None = attrs.field(default=None, repr=url_repr)
    file_type: FileType = FileType.UNKNOWN

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        # rich's pretty printer asks this, not __repr__: the link without its signature here too
        return [("asset_url", _Shown(url_repr(self.asset_url))), ("file_type", self.file_type)]


class _Shown(str):
    """Text that ``repr`` shows as it is (for ``__rich_repr__``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


@attrs.frozen
class Document:
    """A document's description (``GET /mr/api/v1/docs/{id}``). Its ``repr`` leaves out the smart report."""

    #: The document's id (live responses carry it; ``describe`` fills it from the request when absent).
    document_id: str | None = None
    #: Origin of the document, e.g. ``"androidp"``.
    source: str | None = None
    #: Document date as an epoch number; see :attr:`document_date`.
    document_date_epoch: int | None = None
    #: Type code such as ``"lr"`` (lab report): wire ``document_type``, or ``dt`` as the schema names it.
    document_type: str | None = wire("document_type", "dt", one_key=True, default=None)
    tags: tuple[str, ...] = ()
    files: tuple[FileEntry, ...] = ()
    #: The extracted values, or ``None`` when the service sent none.
    smart_report: SmartReport | None = attrs.field(default=None, repr=False)

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        return [(f.name, getattr(self, f.name)) for f in attrs.fields(Document) if f.repr]

    @property
    def document_date(self) -> dt.datetime | None:
        """:attr:`document_date_epoch` as an aware UTC datetime (epoch seconds, or milliseconds: see
        :func:`epoch_datetime`); ``None`` when absent, or when the number is out of ``datetime``'s range (years 1
        to 9999): the service's value is kept as sent in :attr:`document_date_epoch`, never an error here."""
        return epoch_datetime(self.document_date_epoch)


@attrs.frozen
class DocumentListItem:
    """One entry of the document list (``GET /mr/api/v1/docs``), flattened from ``record.item``."""

    document_id: str = wire("record.item.document_id", parse=non_empty)
    #: Upload time as an epoch number.
    upload_date: int | None = wire("record.item.upload_date", default=None)
    document_type: str | None = wire("record.item.document_type", default=None)
    #: OID of the user the document belongs to.
    patient_id: str | None = wire("record.item.patient_id", default=None, pii=True)
    title: str | None = wire("record.item.metadata.title", default=None, pii=True)
    tags: tuple[str, ...] = wire("record.item.metadata.tags", default=())
    auto_tags: tuple[str, ...] = wire("record.item.metadata.auto_tags", default=())
    #: Document date as an epoch number.
    document_date: int | None = wire("record.item.metadata.document_date", default=None)
    thumbnail: str | None = wire("record.item.metadata.thumbnail", default=None, pii=True)


@attrs.frozen
class DocumentPage:
    """One page of the document list; ``next_token`` is ``None`` on the last page."""

    items: tuple[DocumentListItem, ...] = ()
    next_token: str | None = wire(parse=empty_is_none, default=None)
    source_refreshed_at: int | None = None


@attrs.frozen
class UploadResult:
    """The answer to an upload: the new document's id (describe it once processing has finished).

    With ``upload(..., wait=True)`` :attr:`processing` holds the finished processing result.
    """

    document_id: str
    #: The ``COMPLETED`` processing result when the upload waited for it (``wait=True``), else ``None``.
    processing: ProcessingResult | None = local()
    #: How the file went: ``"direct"`` (``POST /mr/api/v2/docs``, which runs the upload ``tasks``) or
    #: ``"presigned"`` (declared with ``POST /mr/api/v1/docs``, then posted to the storage form it gave).
    route: Literal["direct", "presigned"] = local(default="direct")


@attrs.frozen
class DescribeResult:
    """One item of :meth:`~health_async.resources.records.documents.Documents.describe_many`.

    Exactly one of :attr:`document` and :attr:`error` is set.
    """

    document_id: str
    document: Document | None = None
    #: Why this id failed (``DocumentNotFound``, ``ServerError`` after retries, ``InvalidRequest``, ...).
    error: HealthError | None = None

    @property
    def ok(self) -> bool:
        """True when the document was described."""
        return self.error is None


def _source_repr(source: object) -> str:
    # Paths are shown; bytes and file objects only by type (their content may be health data).
    return repr(source) if isinstance(source, str | PurePath) else f"<{type(source).__name__}>"


@attrs.frozen
class UploadOutcome:
    """One item of :meth:`~health_async.resources.records.documents.Documents.upload_many`.

    Without ``wait``, exactly one of :attr:`result` and :attr:`error` is set. With ``wait=True`` a file that was
    uploaded but whose processing failed (``ProcessingFailed``, ``ProcessingTimeout``, ...) has both: the
    :attr:`result` (its document id) and the :attr:`error`; :attr:`processing` is set when it completed.
    """

    #: The input as given (a path, bytes or a file object).
    source: FileInput = attrs.field(repr=_source_repr)
    result: UploadResult | None = None
    #: Why this file failed (``FileTooLarge``, ``InvalidRequest`` for a missing file, ``ServerError``, ...).
    error: HealthError | None = None
    #: With ``wait=True``: the ``COMPLETED`` processing result (also on ``result.processing``), else ``None``.
    processing: ProcessingResult | None = None

    @property
    def ok(self) -> bool:
        """True when the file was uploaded."""
        return self.error is None


# ----------------------------------------------------------------------------- reading a description
#
# Two paths give the same model for the same body (a property test checks it): the fast one decodes the response
# bytes straight into the models with msgspec (derived from the declarations above, live spellings included); a
# body that does not fit it as it is takes the tolerant rules of :func:`health_async._wire.structure`.

#: The fast path itself: a describe's response bytes as a :class:`Document` (its id as the body has it), or
#: ``None`` when the body does not fit it as it is (see :func:`decode_document`).
document_from_bytes: Final = fast_decoder(Document)


def with_document_id(doc: Document, document_id: str | None) -> Document:
    """``doc`` with ``document_id`` filled in when the body had none (a description answered without its id), in
    place: only for a document just decoded, not yet seen by anyone."""
    if doc.document_id is None and document_id is not None:
        object.__setattr__(doc, "document_id", document_id)
    return doc


def decode_document(raw: bytes, document_id: str | None = None) -> Document | None:
    """The fast path: a describe's response bytes as a :class:`Document`, or ``None`` when the body does not fit
    it as it is (then decode the JSON and call :func:`structure_document`, which tolerates more and names the field
    that does not fit). ``document_id`` fills the id when the body has none. An encrypted envelope (no key of a
    document) is left to the generic path."""
    doc = document_from_bytes(raw)
    return None if doc is None else with_document_id(doc, document_id)


def structure_document(data: Any, document_id: str | None = None) -> Document:
    """Parse a document description (decoded JSON), tolerantly; ``document_id`` fills the id when the body has
    none (absent or ``null``). Raises :class:`~health_async.errors.ResponseValidationError`."""
    return with_document_id(structure(data, Document), document_id)
