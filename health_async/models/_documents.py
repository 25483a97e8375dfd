"""Document models: descriptions, lists, uploads, the profile and Aadhaar init.

Every model is built from the service's JSON by the one converter in :mod:`health_async._convert`, which
ignores unknown keys, gives ``None`` (or an empty tuple) for a missing optional field, accepts the live
service's spellings beside the documented ones and raises
:class:`~health_async.errors.ResponseValidationError` for a body that does not fit.

Attribute names are readable; where the wire name differs, the attribute's documentation gives it.

Judgement call, for bulk speed: the five models of a document description (:class:`Document`,
:class:`FileEntry`, :class:`SmartReport`, :class:`ReportItem`, :class:`Coordinate`) are ``msgspec.Struct``
classes, not attrs classes, so that ``describe`` decodes the response bytes straight into them in C (a 3 KB
document with a 7-item report in about the time ``orjson.loads`` takes to build plain dicts). They behave like
the other models (frozen, hashable, compared by value, readable ``repr``); to copy one with changes use
``msgspec.structs.replace`` rather than ``attrs.evolve``. A body that does not fit that fast decode (a number
sent as a string, an unknown file type, a malformed report, ...) is parsed again by the tolerant converter, which
gives the same model or a :class:`~health_async.errors.ResponseValidationError` naming the field.

Personal data (names, mobile, e-mail, date of birth, the OTP hint) is left out of every ``repr``.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterator
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
import msgspec
from msgspec.structs import force_setattr as _force_setattr

from ._processing import ProcessingResult

if TYPE_CHECKING:
    from .._files import FileInput
    from ..errors import HealthError

__all__ = [
    "AadhaarInit",
    "Coordinate",
    "DescribeResult",
    "Document",
    "DocumentListItem",
    "DocumentPage",
    "FileEntry",
    "FileType",
    "Profile",
    "ReportItem",
    "ResultFlag",
    "SmartReport",
    "UploadOutcome",
    "UploadResult",
]


def _epoch_to_datetime(epoch: int | None) -> dt.datetime | None:
    if epoch is None:
        return None
    if epoch > 100_000_000_000:  # milliseconds, as some services send
        epoch //= 1000
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC)


class FileType(enum.Enum):
    """Kind of a document's file (wire ``file_type``). ``UNKNOWN`` stands for any value not documented."""

    IMG = "IMG"
    PDF = "PDF"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def from_wire(cls, value: str | None) -> FileType:
        """The member for a wire value; ``UNKNOWN`` for a value this version does not know (never an error)."""
        return _FILE_TYPES.get(value, cls.UNKNOWN) if isinstance(value, str) else cls.UNKNOWN


_FILE_TYPES: Final[dict[object, FileType]] = {m.value: m for m in FileType}


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


class Coordinate(msgspec.Struct, frozen=True, gc=False):
    """A point on a page of the document's file where a report value was read (wire ``{"x": .., "y": ..}``).

    Immutable and hashable like the other models, and it unpacks: ``x, y = point``.
    """

    x: float
    y: float

    def __iter__(self) -> Iterator[float]:
        return iter((self.x, self.y))


class ReportItem(msgspec.Struct, frozen=True, gc=False, repr_omit_defaults=True):
    """One value of a smart report (a lab result, a vital, ...). Its ``repr`` leaves out the fields that are unset."""

    name: str | None = None
    value: str | None = None
    unit: str | None = None
    #: The service's id for the unit (wire ``unit_svc_id``, or ``unit_eka_id`` on the live service).
    unit_svc_id: str | None = None
    #: Reference range as printed, e.g. ``"13.0-17.0"`` (wire ``range``).
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
    svc_id: str | None = None
    is_result_editable: bool | None = None
    #: Date of the value as an epoch number (wire ``date``).
    date: int | None = None
    # The live spellings, read from the wire and moved into svc_id / unit_svc_id by __post_init__ (always None
    # after it, so they never show in repr nor make two equal items unequal). Not part of the API.
    _eka_id: str | None = msgspec.field(default=None, name="eka_id")
    _unit_eka_id: str | None = msgspec.field(default=None, name="unit_eka_id")

    def __post_init__(self) -> None:
        live = self._eka_id
        if live is not None:
            if self.svc_id is None:
                _force_setattr(self, "svc_id", live)
            _force_setattr(self, "_eka_id", None)
        live = self._unit_eka_id
        if live is not None:
            if self.unit_svc_id is None:
                _force_setattr(self, "unit_svc_id", live)
            _force_setattr(self, "_unit_eka_id", None)

    @property
    def flag(self) -> ResultFlag:
        """What :attr:`result_id` means (``ResultFlag.UNKNOWN`` for an undocumented code)."""
        return ResultFlag.from_id(self.result_id)


class SmartReport(msgspec.Struct, frozen=True, gc=False):
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


class FileEntry(msgspec.Struct, frozen=True, gc=False):
    """One file of a document (an image or a PDF rendering of the same record)."""

    #: A presigned link to the file; its query string (the signature) is left out of ``repr``.
    asset_url: str | None = None
    file_type: FileType = FileType.UNKNOWN

    def __repr__(self) -> str:
        return f"FileEntry(asset_url={url_repr(self.asset_url)}, file_type={self.file_type!r})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        # rich's pretty printer asks this, not __repr__: the link without its signature here too
        return [("asset_url", _Shown(url_repr(self.asset_url))), ("file_type", self.file_type)]


class _Shown(str):
    """Text that ``repr`` shows as it is (for ``__rich_repr__``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


class Document(msgspec.Struct, frozen=True, gc=False):
    """A document's description (``GET /mr/api/v1/docs/{id}``)."""

    #: The document's id (live responses carry it; ``describe`` fills it from the request when absent).
    document_id: str | None = None
    #: Origin of the document, e.g. ``"androidp"``.
    source: str | None = None
    #: Document date as an epoch number (wire ``document_date_epoch``); see :attr:`document_date`.
    document_date_epoch: int | None = None
    #: Type code such as ``"lr"`` (lab report): wire ``document_type``, or ``dt`` as the schema names it.
    document_type: str | None = None
    tags: tuple[str, ...] = ()
    files: tuple[FileEntry, ...] = ()
    #: The extracted values, or ``None`` when the service sent none.
    smart_report: SmartReport | None = None
    _dt: str | None = msgspec.field(default=None, name="dt")  # the schema's spelling; moved by __post_init__

    def __post_init__(self) -> None:
        spelled = self._dt
        if spelled is not None:
            if self.document_type is None:
                _force_setattr(self, "document_type", spelled)
            _force_setattr(self, "_dt", None)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _DOCUMENT_REPR)
        return f"Document({fields})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        return [(name, getattr(self, name)) for name in _DOCUMENT_REPR]

    @property
    def document_date(self) -> dt.datetime | None:
        """:attr:`document_date_epoch` as an aware UTC datetime."""
        return _epoch_to_datetime(self.document_date_epoch)


_DOCUMENT_REPR: Final = ("document_id", "source", "document_date_epoch", "document_type", "tags", "files")


@attrs.frozen
class DocumentListItem:
    """One entry of the document list (``GET /mr/api/v1/docs``), flattened from ``record.item``."""

    document_id: str
    #: Upload time as an epoch number (wire ``upload_date``).
    upload_date: int | None = None
    document_type: str | None = None
    #: OID of the user the document belongs to (wire ``patient_id``).
    patient_id: str | None = attrs.field(default=None, repr=False)
    #: From ``metadata.title``.
    title: str | None = attrs.field(default=None, repr=False)
    #: From ``metadata.tags``.
    tags: tuple[str, ...] = ()
    #: From ``metadata.auto_tags``.
    auto_tags: tuple[str, ...] = ()
    #: From ``metadata.document_date`` (epoch).
    document_date: int | None = None
    #: From ``metadata.thumbnail``.
    thumbnail: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class DocumentPage:
    """One page of the document list; ``next_token`` is ``None`` on the last page."""

    items: tuple[DocumentListItem, ...] = ()
    next_token: str | None = None
    source_refreshed_at: int | None = None


@attrs.frozen
class UploadResult:
    """The answer to an upload: the new document's id (describe it once processing has finished).

    With ``upload(..., wait=True)`` :attr:`processing` holds the finished processing result.
    """

    document_id: str
    #: The ``COMPLETED`` processing result when the upload waited for it (``wait=True``), else ``None``.
    processing: ProcessingResult | None = None
    #: How the file went: ``"direct"`` (``POST /mr/api/v2/docs``, which runs the upload ``tasks``) or
    #: ``"presigned"`` (declared with ``POST /mr/api/v1/docs``, then posted to the storage form it gave).
    route: Literal["direct", "presigned"] = "direct"


@attrs.frozen
class AadhaarInit:
    """Result of starting Aadhaar registration: an OTP went to the mobile number linked to the Aadhaar number."""

    #: Transaction id to pass to the next registration steps (wire ``txn_id``); hidden from ``repr``.
    txn_id: str = attrs.field(repr=False)
    #: Text saying where the OTP went, the mobile number masked (hidden from ``repr``).
    hint: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class Profile:
    """An EMR user's profile (``GET /profiles/v1/emr-user/{oid}``). Personal fields are hidden from ``repr``."""

    #: The user id (wire ``oid``).
    oid: str | None = None
    #: Wire ``bid`` (business id).
    business_id: str | None = None
    #: Status short code (wire ``ps``).
    status: str | None = None
    #: Creation timestamp as sent (wire ``c_ate``).
    created_at: int | None = None
    #: Update timestamp as sent (wire ``u_ate``).
    updated_at: int | None = None
    #: Gender short code (wire ``gen``).
    gender: str | None = attrs.field(default=None, repr=False)
    #: Wire ``dob`` (``YYYY-MM-DD``).
    date_of_birth: dt.date | None = attrs.field(default=None, repr=False)
    #: Whether the date of birth was derived from a stated age (wire ``is_age``).
    dob_from_age: bool | None = attrs.field(default=None, repr=False)
    #: Wire ``fn``.
    first_name: str | None = attrs.field(default=None, repr=False)
    #: Wire ``ln``.
    last_name: str | None = attrs.field(default=None, repr=False)
    #: Wire ``fln``.
    full_name: str | None = attrs.field(default=None, repr=False)
    #: Wire ``bg``.
    blood_group: str | None = attrs.field(default=None, repr=False)
    #: With the country prefix (wire ``mobile``).
    mobile: str | None = attrs.field(default=None, repr=False)
    email: str | None = attrs.field(default=None, repr=False)
    #: Wire ``s``.
    salutation: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class DescribeResult:
    """One item of :meth:`~health_async.resources.documents.Documents.describe_many`.

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
    """One item of :meth:`~health_async.resources.documents.Documents.upload_many`.

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
