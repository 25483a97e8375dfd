"""Processing results: what the service extracted from an uploaded document, and how far it got.

``GET /mr/api/v1/docs/{document_id}/result`` answers ``{status, error[], data: {fhir, output: {data[], pii}}}``;
:class:`ProcessingResult` is that answer. Parsing a document takes the service 1-2 minutes up to 10 pages and
2-4 minutes beyond; :meth:`~health_async.resources.documents.Documents.wait_for_result` polls for you.

Extracted values follow the smart report's rules (see :class:`~health_async.models.ReportItem`): a test's value is
kept as text, as the report prints it (a number on the wire becomes its text, ``"<0.5"`` or ``"Positive"`` stay as
they are; :attr:`ExtractedTest.number` gives a float when there is one), and the tests are parsed on first access
(:attr:`ProcessingResult.tests`), so a malformed entry raises
:class:`~health_async.errors.ResponseValidationError` on that access rather than from the call.

Personal data stays out of every ``repr``: the PII block (patient name, age, gender, doctor, facility, dates), the
FHIR bundle (it names the patient) and any title.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final

import attrs

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
    code: int | str | None = None
    message: str | None = None


@attrs.frozen
class ReferenceRange:
    """A structured normal range (``normal_range_report`` / ``normal_range_eka``): low and high bounds.

    The service structures only low-high ranges; other forms ("normal: < 200, high: 240+") are only in
    :attr:`ExtractedTest.display_range`.
    """

    low: float | None = None
    high: float | None = None

    def contains(self, value: float) -> bool | None:
        """Whether ``value`` lies within the range (bounds included); ``None`` when the range has no bound."""
        if self.low is None and self.high is None:
            return None
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@attrs.frozen
class ExtractedTest:
    """One lab test read from the document (an item of ``data.output.data``).

    ``value``/``unit``/ranges are as written in the report (wire ``data``); the ``normalised_*`` ones are converted
    to the service's standard unit for that test (wire ``normalised_data``), for trends across reports.
    """

    #: Verbatim as written in the report (wire ``test_name``).
    name: str | None = None
    #: The value as text, as the report gives it (a number on the wire becomes its text); see :attr:`number`.
    value: str | None = None
    #: The unit as read by OCR (wire ``data.unit``); :attr:`unit_processed` is the service's clean-up of it.
    unit: str | None = None
    unit_processed: str | None = None
    #: The service's id for the unit (wire ``data.unit_eka_id``).
    unit_eka_id: str | None = None
    #: The normal range as printed (wire ``data.display_range``).
    display_range: str | None = None
    #: The report's own normal range, structured (wire ``data.normal_range_report``).
    range_report: ReferenceRange | None = None
    #: The service's normal range for the person's age and gender (wire ``data.normal_range_eka``).
    range_eka: ReferenceRange | None = None
    #: Wire ``normalised_data.value``, as text.
    normalised_value: str | None = None
    normalised_unit: str | None = None
    normalised_unit_eka_id: str | None = None
    normalised_range_report: ReferenceRange | None = None
    normalised_range_eka: ReferenceRange | None = None
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


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
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
    document_id: str | None = None
    status: ProcessingStatus = ProcessingStatus.UNKNOWN
    #: The status exactly as sent (useful when :attr:`status` is ``UNKNOWN``).
    raw_status: str | None = None
    #: The service's error entries (wire ``error``), usually only with status ``ERROR``.
    errors: tuple[ProcessingError, ...] = ()
    _tests_data: Any = attrs.field(default=None, repr=False, eq=False, hash=False, alias="tests_data")
    _fhir_data: Any = attrs.field(default=None, repr=False, eq=False, hash=False, alias="fhir_data")
    #: Wire ``data.output.pii``: ``{file path: [{PageNum, DocumentDate, Patient, Report}, ...]}`` as sent.
    #: Personal data (names, ages, doctors, dates): hidden from ``repr``.
    pii: Mapping[str, Any] | None = attrs.field(default=None, repr=False, eq=False, hash=False)
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
                from .._convert_processing import structure_tests

                tests = structure_tests(self._tests_data)
            object.__setattr__(self, "_tests", tests)
        return tests  # type: ignore[no-any-return]

    @property
    def fhir(self) -> dict[str, Any] | None:
        """The FHIR bundle (wire ``data.fhir``, base64 JSON), decoded on first access; ``None`` if absent.

        Raises :class:`~health_async.errors.ResponseValidationError` if it is not base64 of a JSON object.
        """
        fhir = self._fhir
        if fhir is _UNSET:
            from .._convert_processing import decode_fhir

            fhir = None if self._fhir_data is None else decode_fhir(self._fhir_data)
            object.__setattr__(self, "_fhir", fhir)
        return fhir  # type: ignore[no-any-return]
