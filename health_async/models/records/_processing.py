"""Processing results: what the service extracted from an uploaded document, and how far it got.

``GET /mr/api/v1/docs/{document_id}/result`` answers ``{status, error[], data: {fhir, output: {data[], pii}}}``;
:class:`ProcessingResult` is that answer. Parsing a document takes the service 1-2 minutes up to 10 pages and
2-4 minutes beyond; :meth:`~health_async.resources.records.documents.Documents.wait_for_result` polls for you.

Extracted values follow the smart report's rules (see :class:`~health_async.models.ReportItem`): a test's value is
kept as text, as the report prints it (a number on the wire becomes its text, ``"<0.5"`` or ``"Positive"`` stay as
they are; :attr:`ExtractedTest.number` gives a float when there is one), and the tests are parsed on first access
(:attr:`ProcessingResult.tests`), so a malformed entry raises
:class:`~health_async.errors.ResponseValidationError` on that access rather than from the call.

Personal data stays out of every ``repr``: the PII block (patient name, age, gender, doctor, facility, dates), the
FHIR bundle (it names the patient) and any title.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ... import _json
from ..._wire import Invalid, as_text, local, rule_for, structure_many, wire
from ...errors import ResponseValidationError

__all__ = [
    "ExtractedTest",
    "ProcessingError",
    "ProcessingResult",
    "ProcessingStatus",
    "ReferenceRange",
]


class ProcessingStatus(enum.Enum):
    """Where a document's processing is. ``UNKNOWN`` stands for any value this version does not know."""

    QUEUED = "queued"
    IN_PROGRESS = "inprogress"
    COMPLETED = "completed"
    DELETED = "deleted"
    ERROR = "error"
    UNKNOWN = "unknown"

    @classmethod
    def from_wire(cls, value: object) -> ProcessingStatus:
        """The member for a wire value (case, ``_`` and ``-`` ignored: ``in_progress`` is ``IN_PROGRESS``);
        ``UNKNOWN`` for anything else, never an error."""
        if type(value) is not str:
            return cls.UNKNOWN
        member = _STATUSES.get(value)
        if member is None:
            member = _STATUSES.get(value.strip().lower().replace("_", "").replace("-", "").replace(" ", ""))
        return member if member is not None and member is not cls.UNKNOWN else cls.UNKNOWN

    @property
    def is_final(self) -> bool:
        """True for ``COMPLETED``, ``DELETED`` and ``ERROR``: the status will not change any more."""
        return self in _FINAL


_STATUSES: Final[dict[str, ProcessingStatus]] = {m.value: m for m in ProcessingStatus}
_FINAL: Final = frozenset({ProcessingStatus.COMPLETED, ProcessingStatus.DELETED, ProcessingStatus.ERROR})


@attrs.frozen
class ProcessingError:
    """One entry of the result's ``error`` array."""

    #: The service's code: an int as documented (a string if the service sends a symbolic code).
    code: int | str | None = wire(parse=lambda value, label: _code(value, label), default=None)
    message: str | None = wire(parse=as_text, default=None)


def _code(value: Any, label: str) -> int | str | None:
    if value is None or type(value) is int or type(value) is str:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise Invalid(label)


@attrs.frozen
class ReferenceRange:
    """A structured normal range (``normal_range_report`` / ``normal_range_eka``): low and high bounds.

    The service structures only low-high ranges; other forms ("normal: < 200, high: 240+") are only in
    :attr:`ExtractedTest.display_range`.
    """

    low: float | None = None
    high: float | None = None

    @staticmethod
    def __wire_rule__(value: Any, _: str) -> ReferenceRange | None:
        """The wire rule of a range: an object, or (as the schema says) a JSON string of one, with ``low``/``high``
        (or ``min``/``max``), each a number or a numeric string.

        Judgement call: anything else (empty, a text range, JSON that is not an object) gives ``None`` rather than
        failing the whole result; the printed range is still in ``display_range``.
        """
        if type(value) is str:
            if not value.strip():
                return None
            try:
                value = _json.loads(value)
            except _json.JSONDecodeError:
                return None
        if type(value) is not dict:
            return None
        get = value.get
        found = ReferenceRange(_bound(get("low", get("min"))), _bound(get("high", get("max"))))
        return None if found.low is None and found.high is None else found

    def contains(self, value: float) -> bool | None:
        """Whether ``value`` lies within the range (bounds included); ``None`` when the range has no bound."""
        if self.low is None and self.high is None:
            return None
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


def _bound(value: Any) -> float | None:
    # A range bound: a number or a numeric string; anything else is "no bound" (ranges are best effort).
    if type(value) is str or type(value) is int or type(value) is float:
        return _number(value)
    return None


@attrs.frozen
class ExtractedTest:
    """One lab test read from the document (an item of ``data.output.data``).

    ``value``/``unit``/ranges are as written in the report (wire ``data``); the ``normalised_*`` ones are converted
    to the service's standard unit for that test (wire ``normalised_data``), for trends across reports.
    """

    #: Verbatim as written in the report.
    name: str | None = wire("test_name", "name", default=None)
    #: The value as text, as the report gives it (a number on the wire becomes its text); see :attr:`number`.
    value: str | None = wire("data.value", parse=as_text, default=None)
    #: The unit as read by OCR; :attr:`unit_processed` is the service's clean-up of it.
    unit: str | None = wire("data.unit", default=None)
    unit_processed: str | None = wire("data.unit_processed", default=None)
    #: The service's id for the unit.
    unit_eka_id: str | None = wire("data.unit_eka_id", default=None)
    #: The normal range as printed.
    display_range: str | None = wire("data.display_range", parse=as_text, default=None)
    #: The report's own normal range, structured.
    range_report: ReferenceRange | None = wire("data.normal_range_report", default=None)
    #: The service's normal range for the person's age and gender.
    range_eka: ReferenceRange | None = wire("data.normal_range_eka", default=None)
    #: The value converted to the standard unit, as text.
    normalised_value: str | None = wire("normalised_data.value", "normalized_data.value", parse=as_text, default=None)
    normalised_unit: str | None = wire("normalised_data.unit", "normalized_data.unit", default=None)
    normalised_unit_eka_id: str | None = wire(
        "normalised_data.unit_eka_id", "normalized_data.unit_eka_id", default=None
    )
    normalised_range_report: ReferenceRange | None = wire(
        "normalised_data.normal_range_report", "normalized_data.normal_range_report", default=None
    )
    normalised_range_eka: ReferenceRange | None = wire(
        "normalised_data.normal_range_eka", "normalized_data.normal_range_eka", default=None
    )
    #: How sure the service is of this test's data.
    confidence: float | None = None
    #: The service's identifier of the test.
    test_eka_id: str | None = None
    #: The LOINC code of the test (method-agnostic in most cases).
    loinc_id: str | None = None

    @property
    def number(self) -> float | None:
        """:attr:`value` as a float, or ``None`` when it is not a plain number (``"<0.5"``, ``"Positive"``)."""
        return _number(self.value)

    @property
    def normalised_number(self) -> float | None:
        """:attr:`normalised_value` as a float, or ``None``."""
        return _number(self.normalised_value)

    @property
    def range(self) -> ReferenceRange | None:
        """The best structured range for :attr:`value`: the report's, else the service's."""
        return self.range_report or self.range_eka


def _number(text: str | float | None) -> float | None:
    if text is None:
        return None
    try:
        number = float(text)
    except (ValueError, OverflowError):  # 10**400 is valid JSON, and no float
        return None
    return number if number == number and abs(number) != float("inf") else None


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET


@attrs.frozen
class ProcessingResult:
    """A document's processing status and, once ``COMPLETED``, what was extracted
    (``GET /mr/api/v1/docs/{document_id}/result``).

    :attr:`tests` and :attr:`fhir` are parsed on first access (and cached); :attr:`pii` is the service's PII
    block as sent. None of the three appears in ``repr``.
    """

    #: The document (from the request; the answer does not carry it).
    document_id: str | None = local()
    status: ProcessingStatus = ProcessingStatus.UNKNOWN
    #: The status exactly as sent (useful when :attr:`status` is ``UNKNOWN``).
    raw_status: str | None = wire("status", default=None)
    #: The service's error entries (wire ``error``; one object is taken as a list of one), usually only with
    #: status ``ERROR``.
    errors: tuple[ProcessingError, ...] = wire("error", "errors", parse=lambda v, label: _errors(v, label), default=())
    _tests_data: list[Any] | None = wire(
        "data.output.data",
        parse=lambda v, label: _array(v, label),
        default=None,
        repr=False,
        eq=False,
        hash=False,
        alias="tests_data",
    )
    _fhir_data: str | dict[str, Any] | None = wire(
        "data.fhir",
        parse=lambda v, label: _fhir_as_sent(v, label),
        default=None,
        repr=False,
        eq=False,
        hash=False,
        alias="fhir_data",
    )
    #: Wire ``data.output.pii`` (or ``data.pii``): ``{file path: [{PageNum, DocumentDate, Patient, Report}, ...]}``
    #: as sent. Personal data (names, ages, doctors, dates): hidden from ``repr``.
    pii: Mapping[str, Any] | None = wire("data.output.pii", "data.pii", default=None, pii=True, eq=False, hash=False)
    _tests: Any = attrs.field(init=False, default=_UNSET, repr=False, eq=False, hash=False)
    _fhir: Any = attrs.field(init=False, default=_UNSET, repr=False, eq=False, hash=False)

    @property
    def is_final(self) -> bool:
        """True for ``COMPLETED``, ``DELETED`` and ``ERROR``."""
        return self.status.is_final

    @property
    def tests(self) -> tuple[ExtractedTest, ...]:
        """The extracted lab tests (wire ``data.output.data``); ``()`` until the status is ``COMPLETED``.

        Raises :class:`~health_async.errors.ResponseValidationError` if they do not fit the model.
        """
        tests = self._tests
        if tests is _UNSET:
            if self.status is not ProcessingStatus.COMPLETED or self._tests_data is None:
                tests = ()
            else:
                tests = structure_many(self._tests_data, ExtractedTest, "data.output.data")
            object.__setattr__(self, "_tests", tests)
        return tests  # type: ignore[no-any-return]

    @property
    def fhir(self) -> dict[str, Any] | None:
        """The FHIR bundle (wire ``data.fhir``, base64 JSON), decoded on first access; ``None`` if absent.

        Raises :class:`~health_async.errors.ResponseValidationError` if it is not base64 of a JSON object.
        """
        fhir = self._fhir
        if fhir is _UNSET:
            fhir = None if self._fhir_data is None else decode_fhir(self._fhir_data)
            object.__setattr__(self, "_fhir", fhir)
        return fhir  # type: ignore[no-any-return]


_ERRORS_RULE: Final = rule_for(tuple[ProcessingError, ...])


def _errors(value: Any, label: str) -> tuple[ProcessingError, ...]:
    return _ERRORS_RULE([value] if type(value) is dict else value, label)  # type: ignore[no-any-return]


def _array(value: Any, label: str) -> list[Any] | None:
    if value is None or type(value) is list:
        return value
    raise Invalid(label)


def _fhir_as_sent(value: Any, label: str) -> str | dict[str, Any] | None:
    if not value:
        return None
    if type(value) is str or type(value) is dict:
        return value
    raise Invalid(label)


def decode_fhir(data: Any) -> dict[str, Any]:
    """``data.fhir``: base64 (standard or URL-safe, padding optional) of a JSON object; an object is taken as is.

    Raises :class:`ResponseValidationError` (naming the field, never the content) when it is neither.
    """
    if type(data) is dict:
        return data
    if type(data) is not str:
        raise ResponseValidationError("the response does not fit ProcessingResult: field data.fhir has the wrong shape")
    text = data.strip()
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_" if "-" in text or "_" in text else None)
        bundle = _json.loads(raw)
    except (binascii.Error, ValueError):
        raise ResponseValidationError(
            "the response does not fit ProcessingResult: field data.fhir is not base64 of JSON"
        ) from None
    if type(bundle) is not dict:
        raise ResponseValidationError(
            "the response does not fit ProcessingResult: field data.fhir is not a JSON object"
        )
    return bundle
