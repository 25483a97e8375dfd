"""Reading an ABDM FHIR document: :func:`read` turns any producer's Bundle into a typed, tolerant :class:`FhirRecord`.

Tolerant means: a bundle that parses as JSON never makes :func:`read` raise (text or bytes that are not JSON are
the library's :class:`~health_async.errors.InvalidRequest`, never a JSON library's error). A field of the wrong
type (a list where an object is expected, an object where a list is, a number where a string is), a number that is
not finite, a missing field, an unknown resource type or a reference that points nowhere is read as *absent*
(``None`` or an empty tuple); nothing the reader does not know is lost, since :attr:`FhirRecord.raw` (the decoded
bundle) and :attr:`FhirRecord.resources` (its resources by type) keep it all.

Health data never appears in a ``repr``: the patient, the clinical values, names and attachments are left out (a
record's ``repr`` shows its type and how many items of each kind it holds), and nothing here logs.

The reading follows the NRCeS implementation guide's examples (``tests/data/fhir_read/README.md`` says which):
references are resolved by the entry's ``fullUrl`` (``urn:uuid:...`` or ``Type/id``) or the resource's own
``Type/id``, each entry indexed once, so reading is linear in the size of the bundle.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, TypeAlias

import attrs

from .._json import JSONDecodeError, loads
from ..errors import InvalidRequest
from ._recognise import record_type_of
from ._types import RecordType

__all__ = [
    "Attachment",
    "ClinicalEntry",
    "Dosage",
    "FhirDate",
    "FhirRecord",
    "InvoiceLine",
    "MedicationInfo",
    "ObservationValue",
    "Party",
    "PatientInfo",
    "read",
]

#: A date of the document: a :class:`datetime.datetime` (a time given), a :class:`datetime.date` (a day given), or
#: the text as written when it is neither (a partial date such as ``"2020-07"``, or one that does not parse).
FhirDate: TypeAlias = dt.datetime | dt.date | str
#: What an observation's value can be (see :attr:`ObservationValue.value`).
ObservedValue: TypeAlias = float | int | str | bool | dt.datetime | dt.date | None

# ABHA identifiers of a Patient. The guide's examples write the ABHA number as an identifier of system
# https://healthid.ndhm.gov.in (type v2-0203#MR) with a 14-digit value ("22-7225-4829-5255"); its identifier-type
# code system (ndhm-identifier-type-code) has HIN (the 14-digit health ID) and ABHA (the ABHA address).
_ABHA_NUMBER: Final = re.compile(r"\d{2}-?\d{4}-?\d{4}-?\d{4}")
_ABHA_HOSTS: Final = ("healthid.", "abha.", "phr.", "healthidsbx.", "abhasbx.")
_ABHA_TYPE_CODES: Final = frozenset({"HIN", "ABHA", "ABHAADDRESS", "PHR"})
_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
_NUMBER: Final = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_CLINICAL_TYPES: Final = ("Condition", "AllergyIntolerance", "Procedure", "Immunization")
#: A leading byte order mark, as UTF-8 bytes and as text: accepted (and skipped) by :func:`read`,
#: :func:`~health_async.fhir.validate` and ``health-async fhir``, as editors on Windows write it.
_BOM_BYTES: Final = b"\xef\xbb\xbf"
_BOM_TEXT: Final = "\ufeff"
#: JSON's whitespace (RFC 8259), as bytes and as text.
_SPACE_BYTES: Final = b" \t\n\r"
_SPACE_TEXT: Final = " \t\n\r"
#: Every control character (U+0000 to U+001F, which JSON allows inside a string only escaped) mapped to a space.
_BLANK_BYTES: Final = bytes(0x20 if byte < 0x20 else byte for byte in range(256))
_BLANK_TEXT: Final[Mapping[int, int]] = dict.fromkeys(range(0x20), 0x20)
#: The largest number read as one: beyond a double's range (``1e400``, a 400-digit integer) a number is absent.
_LARGEST: Final = sys.float_info.max
_AT_BYTE: Final = re.compile(r"\(byte (\d+)\)")
#: UCUM's units of time, as ``Timing.repeat.periodUnit`` codes them (FHIR's units-of-time value set), in words.
_TIME_UNITS: Final[Mapping[str, tuple[str, str]]] = {
    "s": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "d": ("day", "days"),
    "wk": ("week", "weeks"),
    "mo": ("month", "months"),
    "a": ("year", "years"),
}


# ---------------------------------------------------------------------------------------------------------- models


@attrs.frozen
class PatientInfo:
    """The patient of the document (the Composition's subject, else the bundle's first Patient).

    Every field is personal data and is left out of the ``repr``.
    """

    #: The name as written: ``name[0].text``, else its given and family parts joined.
    name: str | None = attrs.field(default=None, repr=False)
    #: ``male``, ``female``, ``other`` or ``unknown`` (FHIR's codes), as written.
    gender: str | None = attrs.field(default=None, repr=False)
    birth_date: FhirDate | None = attrs.field(default=None, repr=False)
    #: The 14-digit ABHA number as the document writes it (e.g. ``"22-7225-4829-5255"``).
    abha_number: str | None = attrs.field(default=None, repr=False)
    #: The ABHA address (e.g. ``"name@abdm"``).
    abha_address: str | None = attrs.field(default=None, repr=False)
    #: The Patient resource as written.
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class Party:
    """An author or the facility: a Practitioner, an Organization, a PractitionerRole, a Device...

    Only :attr:`resource_type` is in the ``repr`` (names are personal data).
    """

    #: The resource type (``"Practitioner"``, ``"Organization"``...), or ``None`` when only a display was given.
    resource_type: str | None
    name: str | None = attrs.field(default=None, repr=False)
    #: Its first identifier's value (e.g. the HPR or HFR id), as written.
    identifier: str | None = attrs.field(default=None, repr=False)
    #: The resource as written (empty when the reference pointed outside the bundle).
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class ObservationValue:
    """One Observation (a vital sign, a lab result, a lifestyle answer), or one component of a panel.

    A panel (blood pressure: LOINC 85354-9) is one :class:`ObservationValue` whose :attr:`components` hold its
    parts (systolic, diastolic), each an :class:`ObservationValue` of its own. Clinical values are left out of
    the ``repr``.
    """

    #: What was observed: ``code.text``, else the first coding's display, else its code.
    name: str | None = attrs.field(default=None, repr=False)
    #: The first coding's code (LOINC or SNOMED CT in the guide), as written.
    code: str | None = attrs.field(default=None, repr=False)
    #: The value: a number (``valueQuantity``, ``valueInteger``; a number written as a string is read as one), a
    #: string (``valueString``; a ``valueCodeableConcept``'s text or display; a ``valueRange`` or ``valueRatio``
    #: written out, e.g. ``"4.5-6.0"``), a boolean, a date (``valueDateTime``, ``valuePeriod``'s start), or ``None``.
    value: ObservedValue = attrs.field(default=None, repr=False)
    #: The unit of a quantity: ``unit``, else its UCUM ``code``.
    unit: str | None = attrs.field(default=None, repr=False)
    #: ``referenceRange[0].low.value``.
    low: float | int | None = attrs.field(default=None, repr=False)
    #: ``referenceRange[0].high.value``.
    high: float | int | None = attrs.field(default=None, repr=False)
    #: ``interpretation[0]``: its text, else its first coding's display, else its code (``"H"``, ``"N"``...).
    interpretation: str | None = attrs.field(default=None, repr=False)
    #: ``effectiveDateTime`` (or ``effectivePeriod.start``, ``effectiveInstant``), else ``issued``.
    date: FhirDate | None = attrs.field(default=None, repr=False)
    #: A panel's parts (``component``), in order; empty for a single value.
    components: tuple[ObservationValue, ...] = attrs.field(default=(), repr=False)
    #: The Observation (or the component) as written.
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class Dosage:
    """One dosage of a medication (a MedicationRequest's ``dosageInstruction``, a MedicationStatement's ``dosage``):
    its coded parts, typed, and a one-line :attr:`summary` of them. Left out of the ``repr`` (health data).

    The guide's examples write a dosage either as ``text`` or only as coded parts (the OP consult example's
    MedicationRequest has a route and an additional instruction, no text): :attr:`MedicationInfo.dosage` reads the
    text when there is one, else this summary.
    """

    #: ``text`` as written (``"One tablet at once"``).
    text: str | None = attrs.field(default=None, repr=False)
    #: ``doseAndRate[0].doseQuantity.value`` (``1``).
    dose: float | int | None = attrs.field(default=None, repr=False)
    #: That quantity's ``unit``, else its ``code`` (``"tablet"``).
    dose_unit: str | None = attrs.field(default=None, repr=False)
    #: ``timing.repeat.frequency``: how many times per :attr:`period`.
    frequency: float | int | None = attrs.field(default=None, repr=False)
    #: ``timing.repeat.period``.
    period: float | int | None = attrs.field(default=None, repr=False)
    #: ``timing.repeat.periodUnit`` as written: a UCUM unit of time (``"s"``, ``"min"``, ``"h"``, ``"d"``,
    #: ``"wk"``, ``"mo"``, ``"a"``).
    period_unit: str | None = attrs.field(default=None, repr=False)
    #: ``timing.code`` (``"BID"``...): its text, else the first coding's display, else its code.
    timing: str | None = attrs.field(default=None, repr=False)
    #: ``route`` (``"Oral Route"``): its text, else the first coding's display, else its code.
    route: str | None = attrs.field(default=None, repr=False)
    #: ``method`` (``"Swallow"``), read as :attr:`route` is.
    method: str | None = attrs.field(default=None, repr=False)
    #: ``asNeededBoolean``; ``True`` when an ``asNeededCodeableConcept`` is given (the need it names is
    #: :attr:`as_needed_for`); ``None`` when the dosage does not say.
    as_needed: bool | None = attrs.field(default=None, repr=False)
    #: ``asNeededCodeableConcept`` (``"Pain"``), read as :attr:`route` is.
    as_needed_for: str | None = attrs.field(default=None, repr=False)
    #: Each ``additionalInstruction`` (``"With or after food"``), read as :attr:`route` is, in order.
    additional_instructions: tuple[str, ...] = attrs.field(default=(), repr=False)
    #: The coded parts in one line, in this order and joined by ``", "``: the dose (``"1 tablet"``), the timing
    #: (:attr:`timing` when coded, else ``"2 time(s) per 1 day"``, or ``"every 8 hours"`` without a frequency),
    #: the route, the method, ``"as needed"`` (``"as needed for Pain"``), the additional instructions; e.g.
    #: ``"1 tablet, 1 time(s) per 1 day, Oral Route, Swallow, With or after food"``. Names are as written (not
    #: recased); ``None`` when the dosage has no coded part. The :attr:`text` is not part of it.
    summary: str | None = attrs.field(default=None, repr=False)
    #: The Dosage as written.
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class MedicationInfo:
    """A MedicationRequest (prescribed) or a MedicationStatement (taken). Left out of the ``repr`` but its type."""

    #: ``"MedicationRequest"`` or ``"MedicationStatement"``.
    resource_type: str
    #: The medicine: ``medicationCodeableConcept`` (text, else display) or the referenced Medication's code.
    name: str | None = attrs.field(default=None, repr=False)
    #: The first coding's code (SNOMED CT in the guide).
    code: str | None = attrs.field(default=None, repr=False)
    #: How to take it: each dosage's ``text``, else its coded parts in one line (:attr:`Dosage.summary`), joined
    #: by ``"; "``; ``None`` when no dosage says anything.
    dosage: str | None = attrs.field(default=None, repr=False)
    #: ``status`` as written (``active``, ``completed``...).
    status: str | None = attrs.field(default=None, repr=False)
    #: ``authoredOn`` (a request), else ``effectiveDateTime`` or ``dateAsserted`` (a statement).
    date: FhirDate | None = attrs.field(default=None, repr=False)
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)
    #: Each dosage (``dosageInstruction`` of a request, ``dosage`` of a statement), typed, in order.
    dosages: tuple[Dosage, ...] = attrs.field(default=(), repr=False)


@attrs.frozen
class ClinicalEntry:
    """A Condition, an AllergyIntolerance, a Procedure or an Immunization: what it is, its code, status and date.

    Left out of the ``repr`` but its type.
    """

    #: ``"Condition"``, ``"AllergyIntolerance"``, ``"Procedure"`` or ``"Immunization"``.
    resource_type: str
    #: ``code`` (``vaccineCode`` for an immunization): its text, else the first coding's display, else its code.
    name: str | None = attrs.field(default=None, repr=False)
    code: str | None = attrs.field(default=None, repr=False)
    #: ``clinicalStatus``'s code (a condition, an allergy), else ``status`` (a procedure, an immunization).
    status: str | None = attrs.field(default=None, repr=False)
    #: Onset or recorded date (a condition, an allergy), performed (a procedure), occurrence (an immunization).
    date: FhirDate | None = attrs.field(default=None, repr=False)
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen
class Attachment:
    """A document carried by the record: a DocumentReference's or a Media's content, a DiagnosticReport's
    ``presentedForm``, or a Binary. The bytes are not decoded until :meth:`data` is called.

    Judgement call: only the content type is in the ``repr``; the title may name a test or a diagnosis.
    """

    #: The resource it came from: ``"DocumentReference"``, ``"DiagnosticReport"``, ``"Binary"`` or ``"Media"``.
    source: str
    #: ``contentType`` (``"application/pdf"``...), as written.
    content_type: str | None
    title: str | None = attrs.field(default=None, repr=False)
    #: The size in bytes: ``size`` when given, else computed from the base64 ``data`` (without decoding it).
    size: int | None = attrs.field(default=None, repr=False)
    #: Where the bytes are, when they are not inline.
    url: str | None = attrs.field(default=None, repr=False)
    creation: FhirDate | None = attrs.field(default=None, repr=False)
    _base64: str | None = attrs.field(default=None, repr=False, alias="base64")
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)

    def data(self) -> bytes | None:
        """The attachment's bytes, decoded from its base64 ``data``; ``None`` when it has none (a ``url`` only).

        Judgement call: base64 that does not decode raises :class:`ValueError` here (reading the record never
        does): a caller who asks for the bytes should not mistake a damaged document for a missing one.
        """
        if self._base64 is None:
            return None
        try:
            return base64.b64decode("".join(self._base64.split()), validate=True)
        except (binascii.Error, ValueError) as error:
            raise ValueError("the attachment's data is not valid base64") from error


@attrs.frozen
class InvoiceLine:
    """One line of an Invoice (an invoice record's ``lineItem``): what was charged, how many, at what rate.

    Left out of the ``repr`` (what a patient bought is health data). The guide's invoice example charges each
    line through a ChargeItem, whose ``productReference`` names a Medication; a line's :attr:`price` is its
    ``base`` price component (the rate), the other components (MRP, discount, taxes) are in :attr:`raw`.
    """

    #: ``sequence``.
    sequence: int | None = attrs.field(default=None, repr=False)
    #: The product charged (the ChargeItem's ``productReference``'s code, or ``productCodeableConcept``), else the
    #: charge's own code (the ChargeItem's ``code``, or the line's ``chargeItemCodeableConcept``); read as
    #: :attr:`ObservationValue.name` is.
    name: str | None = attrs.field(default=None, repr=False)
    #: That concept's first code (SNOMED CT for a medicine in the guide).
    code: str | None = attrs.field(default=None, repr=False)
    #: The ChargeItem's ``quantity.value``.
    quantity: float | int | None = attrs.field(default=None, repr=False)
    #: Its ``unit``, else its ``code`` (``"Tablet"``).
    unit: str | None = attrs.field(default=None, repr=False)
    #: The ``amount.value`` of the first price component of type ``base``.
    price: float | int | None = attrs.field(default=None, repr=False)
    #: That amount's ``currency`` (``"INR"``).
    currency: str | None = attrs.field(default=None, repr=False)
    #: The line item as written.
    raw: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)


@attrs.frozen(repr=False)
class FhirRecord:
    """A read FHIR document: what the guide's seven record types carry, typed, and everything else raw.

    Built by :func:`read`; every field may be absent (``None``, an empty tuple) in a bundle that does not carry
    it. The ``repr`` shows the record type and how many items of each kind the record holds, never their values.
    """

    #: The record type, from the profile or the Composition's type (see :func:`read`); ``None`` when unknown.
    record_type: RecordType | None
    #: ``Composition.date``, else ``Bundle.timestamp``.
    date: FhirDate | None
    #: ``Composition.title``.
    title: str | None
    patient: PatientInfo | None
    #: ``Composition.author``, resolved; a reference outside the bundle keeps its ``display`` as the name.
    authors: tuple[Party, ...]
    #: The care facility: ``Composition.custodian``, else an Encounter's ``serviceProvider``, else an author that
    #: is an Organization, else the bundle's first Organization.
    facility: Party | None
    #: Every Observation of the bundle, in entry order (a panel's parts are in its ``components``).
    observations: tuple[ObservationValue, ...]
    #: Every MedicationRequest and MedicationStatement, in entry order.
    medications: tuple[MedicationInfo, ...]
    conditions: tuple[ClinicalEntry, ...]
    allergies: tuple[ClinicalEntry, ...]
    procedures: tuple[ClinicalEntry, ...]
    immunizations: tuple[ClinicalEntry, ...]
    #: Every attachment, in entry order (a DocumentReference's contents in their order).
    attachments: tuple[Attachment, ...]
    #: Every resource of the bundle by its ``resourceType`` (unknown types included), in entry order.
    resources: Mapping[str, tuple[Mapping[str, Any], ...]]
    #: The decoded bundle, as given (not copied).
    raw: Any
    _index: Mapping[str, Mapping[str, Any]] = attrs.field(alias="index", eq=False)
    #: Every Invoice's line items, in entry order (an invoice record's content).
    invoice_lines: tuple[InvoiceLine, ...] = ()

    def resolve(self, reference: str) -> Mapping[str, Any] | None:
        """The bundle's resource a reference names (``"urn:uuid:..."``, ``"Patient/1"``, a full URL ending in
        ``Type/id``); ``None`` when it is not in the bundle."""
        return _resolve(self._index, reference) if isinstance(reference, str) else None

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{name}={len(getattr(self, name))}"
            for name in (
                "observations",
                "medications",
                "conditions",
                "allergies",
                "procedures",
                "immunizations",
                "attachments",
                "invoice_lines",
            )
        )
        kind = self.record_type.value if self.record_type is not None else None
        return f"FhirRecord(record_type={kind!r}, {counts})"


# ------------------------------------------------------------------------------------------------------- reading


def read(bundle: Mapping[str, Any] | str | bytes | bytearray) -> FhirRecord:
    """Read an ABDM FHIR document (a Bundle) into a :class:`FhirRecord`.

    Args:
        bundle: the decoded Bundle, or its JSON text or bytes.

    Returns:
        The record. A JSON value that is not a Bundle is read as an empty record (a single resource as a bundle
        of one), with :attr:`FhirRecord.raw` holding it.

    Raises:
        InvalidRequest: ``bundle`` is text or bytes that are not JSON: empty (nothing but whitespace), truncated,
            malformed, not UTF-8, nested too deeply, or holding an integer too large to decode. The library's own
            error (also a ``ValueError``); its message says which, and never holds the input.
        TypeError: ``bundle`` is none of the accepted types.

    The record type is found as :func:`~health_async.fhir.validate` finds it (one function for both): the first
    found of a ``meta.profile`` of the Composition, then of the Bundle, whose last segment (without a
    ``|version``) is a :class:`RecordType` value; the Composition's SNOMED CT type code the guide's profiles name
    (371530004 OP consult, 440545006 prescription, 721981007 and the other codes of the guide's diagnostic report
    types, 373942005 discharge summary, 41000179103 immunization, 419891008 health document); a type text or
    title of "Wellness Record" or "Invoice Record" (the guide gives those two profiles no code). ``None`` when none
    matches.

    Judgement call: JSON text the strict decoder refuses is decoded again leniently (Python's ``json`` with
    ``strict=False``), because the guide's own published examples hold raw control characters inside their
    narratives' strings (kept as written: a raw newline is read as ``"\\n"``); text that neither decodes is
    :class:`~health_async.errors.InvalidRequest`, whose reason is found as if those characters were spaces (a
    truncated text says truncated, not "malformed" at its first raw tab). The lenient
    decoder also takes ``NaN``, ``Infinity`` and numbers beyond a double's range (``1e400``): tolerant, the record
    reads such a number as absent (``None``), as it does in a decoded bundle; :func:`~health_async.fhir.validate`
    reports each as an error.

    Judgement call: a leading byte order mark (``b"\\xef\\xbb\\xbf"`` in bytes, ``"\\ufeff"`` in text) is skipped,
    as :func:`~health_async.fhir.validate` and ``health-async fhir`` skip it: editors on Windows write it, and it
    is no part of the JSON. A JSON value that is not an object (``[1, 2]``) is still read as an empty record, as
    before: it is JSON, and :attr:`FhirRecord.raw` holds it.
    """
    if isinstance(bundle, (str, bytes, bytearray)):
        decoded: Any = _decode(bundle)
    elif isinstance(bundle, Mapping):
        decoded = bundle
    else:
        raise TypeError(f"read() takes a Mapping, str or bytes, not {type(bundle).__name__}")
    return _Reader(decoded).record()


def without_bom(data: str | bytes | bytearray | memoryview) -> str | bytes:
    """``data`` without one leading byte order mark (UTF-8 bytes ``EF BB BF``, or the character U+FEFF in text);
    bytes-like input comes back as ``bytes``."""
    if isinstance(data, str):
        return data[1:] if data.startswith(_BOM_TEXT) else data
    raw = bytes(data)
    return raw[3:] if raw.startswith(_BOM_BYTES) else raw


def is_blank(data: str | bytes) -> bool:
    """True when ``data`` holds no JSON text: empty, or JSON whitespace only (a byte order mark already removed)."""
    if isinstance(data, str):
        return not data or (data[0] in _SPACE_TEXT and not data.strip(_SPACE_TEXT))
    return not data or (data[:1] in _SPACE_BYTES and not data.strip(_SPACE_BYTES))


def _decode(text: str | bytes | bytearray) -> Any:
    """The JSON value of ``text`` (a leading byte order mark skipped); :class:`InvalidRequest` when there is none.

    The error is raised outside the ``except`` blocks, so that it carries no JSON library's exception as its
    context (:class:`json.JSONDecodeError` keeps the whole input in its ``doc``)."""
    data = without_bom(text)
    if is_blank(data):
        raise InvalidRequest("the FHIR input is empty: there is no JSON text")
    skipped = len(_BOM_BYTES) if len(data) != len(text) else 0  # msgspec's offsets count UTF-8 bytes
    strict = True
    try:
        return loads(data)
    except JSONDecodeError as strict_error:
        reason = _reason(str(strict_error), skipped)
    except ValueError:  # msgspec encodes text to UTF-8 first: a lone surrogate is a UnicodeEncodeError
        reason = "it is not UTF-8 (it holds a lone surrogate)"
        strict = False
    try:  # UTF-8 only, as the strict decoder (and RFC 8259): json.loads of bytes would guess UTF-16 or a 2nd BOM
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data, strict=False)
    except (ValueError, RecursionError):
        pass
    if strict:
        reason = _blanked_reason(data, skipped) or reason
    raise InvalidRequest(f"the FHIR input is not JSON: {reason}")


def _blanked_reason(data: str | bytes, skipped: int) -> str | None:
    """Why ``data`` is not JSON once its raw control characters are read as spaces (as the lenient decoder reads
    them inside strings), so that a raw control character inside a string is not named as the fault of text whose
    fault is elsewhere (truncated, or something after its value); ``None`` when the blanked text decodes (the
    fault was a control character outside any string: the first reason stands). Same length, so same offsets."""
    blanked = data.translate(_BLANK_BYTES) if isinstance(data, bytes) else data.translate(_BLANK_TEXT)
    if blanked == data:
        return None
    try:
        loads(blanked)
    except JSONDecodeError as error:
        return _reason(str(error), skipped)
    except ValueError:
        return None
    return None


def _reason(message: str, skipped: int) -> str:
    """What msgspec's (or :mod:`health_async._json`'s) message says is wrong, in words that hold no input: where
    the text breaks (a byte offset in the input as given), never what it holds."""
    if "truncated" in message:
        return "it ends before its JSON value does (truncated)"
    if "out of range" in message:
        return "it holds a number too large to decode"
    if "nested too deeply" in message:
        return "it is nested too deeply"
    if "not UTF-8" in message:
        return "it is not UTF-8"
    if "trailing characters" in message:
        found = _AT_BYTE.search(message)
        return "something follows its JSON value" + (f" (at byte {int(found[1]) + skipped})" if found else "")
    found = _AT_BYTE.search(message)
    return "it is malformed" + (f" (at byte {int(found[1]) + skipped})" if found else "")


class _Reader:
    """One reading: the entries indexed once, then each part of the record built from the index."""

    def __init__(self, decoded: Any) -> None:
        self.raw = decoded
        bundle = decoded if isinstance(decoded, Mapping) else {}
        self.bundle: Mapping[str, Any] = bundle
        self.index: dict[str, Mapping[str, Any]] = {}
        self.by_type: dict[str, list[Mapping[str, Any]]] = {}
        if bundle.get("resourceType") == "Bundle":
            for entry in _objects(bundle.get("entry")):
                resource = _obj(entry.get("resource"))
                if resource is not None:
                    self._add(resource, _str(entry.get("fullUrl")))
        elif isinstance(bundle.get("resourceType"), str):
            self._add(bundle, None)

    def _add(self, resource: Mapping[str, Any], full_url: str | None) -> None:
        kind = _str(resource.get("resourceType"))
        if kind is None:
            return
        self.by_type.setdefault(kind, []).append(resource)
        if full_url is not None:
            self.index.setdefault(full_url, resource)
        rid = _str(resource.get("id"))
        if rid is not None:
            self.index.setdefault(f"{kind}/{rid}", resource)

    def first(self, kind: str) -> Mapping[str, Any] | None:
        found = self.by_type.get(kind)
        return found[0] if found else None

    def target(self, reference: Any, within: Mapping[str, Any] | None = None) -> Mapping[str, Any] | None:
        """The resource a Reference (object) points at, in the bundle or ``within``'s contained resources."""
        ref = _obj(reference)
        text = _str(ref.get("reference")) if ref is not None else None
        if text is None:
            return None
        if text.startswith("#") and within is not None:
            for contained in _objects(within.get("contained")):
                if _str(contained.get("id")) == text[1:]:
                    return contained
            return None
        return _resolve(self.index, text)

    def record(self) -> FhirRecord:
        composition = self.first("Composition") or {}
        subject = self.target(composition.get("subject"))
        patient_resource = subject if _kind(subject) == "Patient" else self.first("Patient")
        return FhirRecord(
            record_type=record_type_of(self.bundle),
            date=_date(composition.get("date")) or _date(self.bundle.get("timestamp")),
            title=_str(composition.get("title")),
            patient=_patient(patient_resource) if patient_resource is not None else None,
            authors=tuple(self._party(author) for author in _objects(composition.get("author"))),
            facility=self._facility(composition),
            observations=tuple(_observation(resource) for resource in self.by_type.get("Observation", ())),
            medications=tuple(self._medications()),
            conditions=self._clinical("Condition"),
            allergies=self._clinical("AllergyIntolerance"),
            procedures=self._clinical("Procedure"),
            immunizations=self._clinical("Immunization"),
            attachments=tuple(self._attachments()),
            resources=types.MappingProxyType({kind: tuple(found) for kind, found in self.by_type.items()}),
            raw=self.raw,
            index=types.MappingProxyType(self.index),
            invoice_lines=tuple(self._invoice_lines()),
        )

    def _party(self, reference: Mapping[str, Any]) -> Party:
        resource = self.target(reference)
        if resource is None:
            ref = _str(reference.get("reference"))
            kind = ref.split("/_history/")[0].split("/")[-2] if ref is not None and "/" in ref else None
            return Party(
                resource_type=kind if kind and kind[0].isupper() else None, name=_str(reference.get("display"))
            )
        return _party_of(resource, _str(reference.get("display")))

    def _facility(self, composition: Mapping[str, Any]) -> Party | None:
        custodian = _obj(composition.get("custodian"))
        if custodian is not None and (self.target(custodian) is not None or _str(custodian.get("display"))):
            return self._party(custodian)
        for encounter in self.by_type.get("Encounter", ()):
            provider = _obj(encounter.get("serviceProvider"))
            if provider is not None and self.target(provider) is not None:
                return self._party(provider)
        for author in _objects(composition.get("author")):
            if _kind(self.target(author)) == "Organization":
                return self._party(author)
        organization = self.first("Organization")
        return _party_of(organization, None) if organization is not None else None

    def _medications(self) -> Iterator[MedicationInfo]:
        for kind in ("MedicationRequest", "MedicationStatement"):
            for resource in self.by_type.get(kind, ()):
                concept = _obj(resource.get("medicationCodeableConcept"))
                if concept is None:
                    medication = self.target(resource.get("medicationReference"), within=resource)
                    concept = _obj(medication.get("code")) if medication is not None else None
                    if concept is None:
                        reference = _obj(resource.get("medicationReference"))
                        concept = {"text": reference.get("display")} if reference is not None else None
                dosages = tuple(
                    map(
                        _dosage,
                        _objects(resource.get("dosageInstruction" if kind == "MedicationRequest" else "dosage")),
                    )
                )
                yield MedicationInfo(
                    resource_type=kind,
                    name=_concept_name(concept),
                    code=_concept_code(concept),
                    dosage="; ".join(filter(None, (dosage.text or dosage.summary for dosage in dosages))) or None,
                    status=_str(resource.get("status")),
                    date=_date(resource.get("authoredOn"))
                    or _date(resource.get("effectiveDateTime"))
                    or _period_start(resource.get("effectivePeriod"))
                    or _date(resource.get("dateAsserted")),
                    raw=resource,
                    dosages=dosages,
                )

    def _invoice_lines(self) -> Iterator[InvoiceLine]:
        for invoice in self.by_type.get("Invoice", ()):
            for line in _objects(invoice.get("lineItem")):
                charge = self.target(line.get("chargeItemReference"), within=invoice) or {}
                product = self.target(charge.get("productReference"), within=charge)
                concept = (
                    (_obj(product.get("code")) if product is not None else None)
                    or _obj(charge.get("productCodeableConcept"))
                    or _obj(charge.get("code"))
                    or _obj(line.get("chargeItemCodeableConcept"))
                )
                base = next((p for p in _objects(line.get("priceComponent")) if p.get("type") == "base"), {})
                amount = _obj(base.get("amount")) or {}
                quantity = _obj(charge.get("quantity"))
                sequence = _number(line.get("sequence"))
                line_number = int(sequence) if sequence is not None and float(sequence).is_integer() else None
                yield InvoiceLine(
                    sequence=line_number,
                    name=_concept_name(concept),
                    code=_concept_code(concept),
                    quantity=_quantity_value(quantity),
                    unit=_quantity_unit(quantity),
                    price=_number(amount.get("value")),
                    currency=_str(amount.get("currency")),
                    raw=line,
                )

    def _clinical(self, kind: str) -> tuple[ClinicalEntry, ...]:
        return tuple(_clinical_entry(kind, resource) for resource in self.by_type.get(kind, ()))

    def _attachments(self) -> Iterator[Attachment]:
        for resource in self._in_order(("DocumentReference", "DiagnosticReport", "Binary", "Media")):
            kind = _kind(resource) or ""
            if kind == "DocumentReference":
                for content in _objects(resource.get("content")):
                    attachment = _obj(content.get("attachment"))
                    if attachment is not None:
                        yield _attachment(kind, attachment)
            elif kind == "DiagnosticReport":
                for form in _objects(resource.get("presentedForm")):
                    yield _attachment(kind, form)
            elif kind == "Media":
                media = _obj(resource.get("content"))
                if media is not None:
                    yield _attachment(kind, media)
            else:
                yield _attachment(kind, resource)

    def _in_order(self, kinds: tuple[str, ...]) -> Iterator[Mapping[str, Any]]:
        """The resources of these types, in the bundle's entry order."""
        wanted = [resource for kind in kinds for resource in self.by_type.get(kind, ())]
        if len(wanted) < 2:
            yield from wanted
            return
        order = {id(resource): position for position, resource in enumerate(self._all())}
        yield from sorted(wanted, key=lambda resource: order.get(id(resource), 0))

    def _all(self) -> Iterator[Mapping[str, Any]]:
        if self.bundle.get("resourceType") == "Bundle":
            for entry in _objects(self.bundle.get("entry")):
                resource = _obj(entry.get("resource"))
                if resource is not None:
                    yield resource
        else:
            yield self.bundle


# ---------------------------------------------------------------------------------------------- the resources


def _patient(resource: Mapping[str, Any]) -> PatientInfo:
    number: str | None = None
    address: str | None = None
    for identifier in _objects(resource.get("identifier")):
        value = _str(identifier.get("value"))
        if value is None:
            continue
        value = value.strip()
        system = (_str(identifier.get("system")) or "").lower()
        host = system.split("://", 1)[-1]
        type_codes = {code.upper() for code in _codes(identifier.get("type"))}
        abdm = host.startswith(_ABHA_HOSTS) or bool(type_codes & _ABHA_TYPE_CODES)
        if "@" in value and (abdm or "ABHA" in type_codes):
            address = address or value
        elif _ABHA_NUMBER.fullmatch(value) and (abdm or "HIN" in type_codes):
            number = number or value
    return PatientInfo(
        name=_human_name(resource.get("name")),
        gender=_str(resource.get("gender")),
        birth_date=_date(resource.get("birthDate")),
        abha_number=number,
        abha_address=address,
        raw=resource,
    )


def _observation(resource: Mapping[str, Any]) -> ObservationValue:
    value, unit = _value(resource)
    ranges = _objects(resource.get("referenceRange"))
    first_range = ranges[0] if ranges else {}
    concept = _obj(resource.get("code"))
    return ObservationValue(
        name=_concept_name(concept),
        code=_concept_code(concept),
        value=value,
        unit=unit,
        low=_quantity_value(first_range.get("low")),
        high=_quantity_value(first_range.get("high")),
        interpretation=_concept_name(_first_object(resource.get("interpretation"))),
        date=_date(resource.get("effectiveDateTime"))
        or _period_start(resource.get("effectivePeriod"))
        or _date(resource.get("effectiveInstant"))
        or _date(resource.get("issued")),
        components=tuple(_observation(component) for component in _objects(resource.get("component"))),
        raw=resource,
    )


def _value(resource: Mapping[str, Any]) -> tuple[ObservedValue, str | None]:
    quantity = _obj(resource.get("valueQuantity"))
    if quantity is not None:
        return _quantity_value(quantity), _quantity_unit(quantity)
    if "valueString" in resource:
        return _str(resource.get("valueString")), None
    if "valueBoolean" in resource:
        flag = resource.get("valueBoolean")
        if isinstance(flag, bool):
            return flag, None
        text = _str(flag)
        return ({"true": True, "false": False}.get(text.lower()) if text is not None else None), None
    if "valueInteger" in resource:
        number = _number(resource.get("valueInteger"))
        return (int(number) if isinstance(number, float) and number.is_integer() else number), None
    concept = _obj(resource.get("valueCodeableConcept"))
    if concept is not None:
        return _concept_name(concept), None
    span = _obj(resource.get("valueRange"))
    if span is not None:
        low, high = _quantity_value(span.get("low")), _quantity_value(span.get("high"))
        unit = _quantity_unit(_obj(span.get("low"))) or _quantity_unit(_obj(span.get("high")))
        if low is None and high is None:
            return None, unit
        return f"{'' if low is None else low}-{'' if high is None else high}", unit
    ratio = _obj(resource.get("valueRatio"))
    if ratio is not None:
        top, bottom = _quantity_value(ratio.get("numerator")), _quantity_value(ratio.get("denominator"))
        return (f"{top}/{bottom}" if top is not None and bottom is not None else None), None
    if "valueDateTime" in resource:
        return _date(resource.get("valueDateTime")), None
    if "valuePeriod" in resource:
        return _period_start(resource.get("valuePeriod")), None
    if "valueTime" in resource:
        return _str(resource.get("valueTime")), None
    return None, None


def _clinical_entry(kind: str, resource: Mapping[str, Any]) -> ClinicalEntry:
    concept = _obj(resource.get("vaccineCode" if kind == "Immunization" else "code"))
    status_codes = _codes(resource.get("clinicalStatus"))
    if kind == "Condition":
        date = _date(resource.get("onsetDateTime")) or _period_start(resource.get("onsetPeriod"))
        date = date or _date(resource.get("recordedDate"))
    elif kind == "AllergyIntolerance":
        date = _date(resource.get("onsetDateTime")) or _date(resource.get("recordedDate"))
    elif kind == "Procedure":
        date = _date(resource.get("performedDateTime")) or _period_start(resource.get("performedPeriod"))
    else:
        date = _date(resource.get("occurrenceDateTime")) or _date(resource.get("recorded"))
    return ClinicalEntry(
        resource_type=kind,
        name=_concept_name(concept),
        code=_concept_code(concept),
        status=status_codes[0] if status_codes else _str(resource.get("status")),
        date=date,
        raw=resource,
    )


def _attachment(source: str, attachment: Mapping[str, Any]) -> Attachment:
    data = _str(attachment.get("data")) if isinstance(attachment.get("data"), str) else None
    size = attachment.get("size")
    declared = _number(size) if not isinstance(size, bool) else None
    return Attachment(
        source=source,
        content_type=_str(attachment.get("contentType")),
        title=_str(attachment.get("title")),
        size=int(declared)
        if declared is not None and declared >= 0 and float(declared).is_integer()
        else (_base64_size(data) if data is not None else None),
        url=_str(attachment.get("url")),
        creation=_date(attachment.get("creation")),
        base64=data,
        raw=attachment,
    )


def _dosage(dosage: Mapping[str, Any]) -> Dosage:
    timing = _obj(dosage.get("timing")) or {}
    repeat = _obj(timing.get("repeat")) or {}
    frequency, period = _number(repeat.get("frequency")), _number(repeat.get("period"))
    period_unit = _str(repeat.get("periodUnit"))
    quantity = _obj((_first_object(dosage.get("doseAndRate")) or {}).get("doseQuantity"))
    dose, dose_unit = _quantity_value(quantity), _quantity_unit(quantity)
    flag = dosage.get("asNeededBoolean")
    as_needed_for = _concept_name(_obj(dosage.get("asNeededCodeableConcept")))
    as_needed = flag if isinstance(flag, bool) else (True if as_needed_for is not None else None)
    named = _concept_name(_obj(timing.get("code")))
    route = _concept_name(_obj(dosage.get("route")))
    method = _concept_name(_obj(dosage.get("method")))
    instructions = tuple(filter(None, map(_concept_name, _objects(dosage.get("additionalInstruction")))))
    parts = [
        None if dose is None else " ".join(filter(None, (_plain(dose), dose_unit))),
        named or _every(frequency, period, period_unit),
        route,
        method,
        ("as needed" + ("" if as_needed_for is None else f" for {as_needed_for}")) if as_needed else None,
        *instructions,
    ]
    return Dosage(
        text=_str(dosage.get("text")),
        dose=dose,
        dose_unit=dose_unit,
        frequency=frequency,
        period=period,
        period_unit=period_unit,
        timing=named,
        route=route,
        method=method,
        as_needed=as_needed,
        as_needed_for=as_needed_for,
        additional_instructions=instructions,
        summary=", ".join(part.strip() for part in parts if part and part.strip()) or None,
        raw=dosage,
    )


def _every(frequency: float | int | None, period: float | int | None, unit: str | None) -> str | None:
    """A timing's repeat in words: ``"2 time(s) per 1 day"``, ``"every 8 hours"`` (no frequency), ``"2 time(s)"``
    (no period); a unit that is not UCUM's unit of time is written as given."""
    span = None
    if period is not None:
        words = _TIME_UNITS.get(unit or "")
        name = (words[0] if period == 1 else words[1]) if words is not None else unit
        span = " ".join(filter(None, (_plain(period), name)))
    if frequency is not None:
        return f"{_plain(frequency)} time(s)" + ("" if span is None else f" per {span}")
    return None if span is None else f"every {span}"


# ---------------------------------------------------------------------------------------------------- helpers


def _resolve(index: Mapping[str, Mapping[str, Any]], reference: str) -> Mapping[str, Any] | None:
    found = index.get(reference)
    if found is not None:
        return found
    parts = reference.split("/_history/", 1)[0].rstrip("/").split("/")
    return index.get("/".join(parts[-2:])) if len(parts) >= 2 else None


def _obj(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _objects(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list (a lone object counts as a list of one; anything else is none)."""
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, Mapping)]
    return []


def _first_object(value: Any) -> Mapping[str, Any] | None:
    found = _objects(value)
    return found[0] if found else None


def _str(value: Any) -> str | None:
    """A string field: a string as written (``None`` when empty), a number as its text, anything else ``None``."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _strings(value: Any) -> Iterable[str]:
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, str)]


def _number(value: Any) -> float | int | None:
    """A number, or a string holding one (``"6.3"``); ``None`` otherwise (``NaN``, infinities and numbers beyond a
    double's range included: an integer of 400 digits could be neither compared as a float nor printed)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -_LARGEST <= value <= _LARGEST else None
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        text = value.strip()
        try:
            return _number(int(text)) if text.lstrip("+-").isdigit() else _number(float(text))
        except (ValueError, OverflowError):
            return None
    return None


def _plain(number: float | int) -> str:
    return str(int(number)) if isinstance(number, float) and number.is_integer() else str(number)


def _quantity_value(value: Any) -> float | int | None:
    quantity = _obj(value)
    return _number(quantity.get("value")) if quantity is not None else None


def _quantity_unit(quantity: Mapping[str, Any] | None) -> str | None:
    if quantity is None:
        return None
    return _str(quantity.get("unit")) or _str(quantity.get("code"))


def _codes(concept: Any) -> list[str]:
    found = _obj(concept)
    codes = (_str(coding.get("code")) for coding in _objects(found.get("coding") if found is not None else None))
    return [code for code in codes if code is not None]


def _concept_name(concept: Mapping[str, Any] | None) -> str | None:
    if concept is None:
        return None
    text = _str(concept.get("text"))
    if text is not None:
        return text
    codings = _objects(concept.get("coding"))
    for coding in codings:
        display = _str(coding.get("display"))
        if display is not None:
            return display
    codes = _codes(concept)
    return codes[0] if codes else None


def _concept_code(concept: Mapping[str, Any] | None) -> str | None:
    codes = _codes(concept)
    return codes[0] if codes else None


def _human_name(value: Any) -> str | None:
    for name in _objects(value):
        text = _str(name.get("text"))
        if text is not None:
            return text
        parts = [*_strings(name.get("prefix")), *_strings(name.get("given")), *_strings(name.get("family"))]
        parts += _strings(name.get("suffix"))
        joined = " ".join(part.strip() for part in parts if part.strip())
        if joined:
            return joined
    return None


def _party_of(resource: Mapping[str, Any], display: str | None) -> Party:
    return Party(
        resource_type=_kind(resource),
        name=_party_name(resource) or display,
        identifier=_first_identifier(resource),
        raw=resource,
    )


def _party_name(resource: Mapping[str, Any] | None) -> str | None:
    if resource is None:
        return None
    name = resource.get("name")
    return _str(name) if isinstance(name, str) else _human_name(name)


def _first_identifier(resource: Mapping[str, Any] | None) -> str | None:
    found = _first_object(resource.get("identifier")) if resource is not None else None
    return _str(found.get("value")) if found is not None else None


def _kind(resource: Mapping[str, Any] | None) -> str | None:
    return _str(resource.get("resourceType")) if resource is not None else None


def _date(value: Any) -> FhirDate | None:
    """A FHIR date, dateTime or instant: a datetime (a time given), a date (a day), else the text as written."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if not _DATE.match(text):
        return text
    try:
        if len(text) == 10:
            return dt.date.fromisoformat(text)
        return dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        return text


def _period_start(value: Any) -> FhirDate | None:
    period = _obj(value)
    return _date(period.get("start")) if period is not None else None


def _base64_size(data: str) -> int | None:
    """The decoded size of base64 text, from its length (nothing decoded); ``None`` when it cannot be base64."""
    compact = "".join(data.split())
    if len(compact) % 4:
        return None
    padding = len(compact) - len(compact.rstrip("="))
    return len(compact) // 4 * 3 - min(padding, 2)
