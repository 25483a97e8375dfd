"""The typed inputs of the builders (``_build.py``): who (patient, practitioner, organization, encounter) and what
(observations, conditions, medications, documents, ...).

Every class is a frozen attrs class. Their ``repr`` shows the class and no person's data nor clinical value: the
fields that hold them are ``repr=False`` (a repr ends up in logs and tracebacks). Checks at construction raise
:class:`~health_async.errors.InvalidRequest` naming the field, never its value (a wrong type is its subclass
:class:`~health_async.errors.InvalidArgumentType`, also a ``TypeError``): a mistake is refused before a bundle
exists.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Sequence
from typing import Any, Final

import attrs

from .._abha_input import normalize_abha_number
from ..errors import InvalidArgumentType, InvalidRequest

__all__ = [
    "Allergy",
    "Coding",
    "Gender",
    "Condition",
    "Document",
    "Encounter",
    "FamilyHistory",
    "FollowUp",
    "Immunization",
    "Investigation",
    "InvoiceItem",
    "MedicationHistory",
    "Medication",
    "Observation",
    "Organization",
    "Patient",
    "Practitioner",
    "PriceComponent",
    "Procedure",
    "Specimen",
    "VaccineDue",
]

SNOMED: Final = "http://snomed.info/sct"
LOINC: Final = "http://loinc.org"

When = dt.date | dt.datetime
Number = int | float


def _text(name: str) -> Any:
    def check(_inst: object, _attr: object, value: object) -> None:
        if type(value) is not str:
            raise InvalidArgumentType(f"{name} must be a str")
        if not value.strip():
            raise InvalidRequest(f"{name} must not be empty")

    return check


def _opt_text(name: str) -> Any:
    def check(_inst: object, _attr: object, value: object) -> None:
        if value is not None:
            _text(name)(_inst, _attr, value)

    return check


def _opt_when(name: str) -> Any:
    def check(_inst: object, _attr: object, value: object) -> None:
        if value is not None and not isinstance(value, dt.date):
            raise InvalidArgumentType(f"{name} must be a datetime.date or datetime.datetime")

    return check


def _opt_number(name: str) -> Any:
    def check(_inst: object, _attr: object, value: object) -> None:
        if value is None:
            return
        if type(value) is bool or not isinstance(value, (int, float)):
            raise InvalidArgumentType(f"{name} must be an int or a float")
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidRequest(f"{name} must be a finite number")

    return check


def _opt_coding(name: str) -> Any:
    def check(_inst: object, _attr: object, value: object) -> None:
        check_coding(value, name)

    return check


def check_coding(value: object, name: str) -> None:
    """Refuse what is not a :class:`Coding` (``None`` passes), and a ``Coding`` without its display: the guide's
    profiles (6.5.0 and 2.0.1) require ``coding.display`` (1..1) on every coding the builders write."""
    if value is None:
        return
    if not isinstance(value, Coding):
        raise InvalidArgumentType(f"{name} must be a fhir.Coding")
    if value.display is None:
        raise InvalidRequest(
            f"{name}.display is required: the guide's profiles require the display of every code "
            "(e.g. fhir.Coding.loinc(code, display))"
        )


def _one_of(name: str, allowed: Any) -> Any:
    def check(_inst: object, _attr: object, value: object) -> None:
        if value not in allowed:
            raise InvalidRequest(f"{name} must be one of {', '.join(allowed)}")

    return check


def _tuple(value: Sequence[Any] | None) -> tuple[Any, ...]:
    return () if value is None else tuple(value)


@attrs.frozen
class Coding:
    """A code the caller gives (SNOMED CT, LOINC, ...): the builders put it in a CodeableConcept beside the text.
    They never make one up: without a ``Coding`` an element carries its text only.

    ``display`` is the code system's own name of the code (LOINC's long common name, SNOMED CT's preferred term),
    not the caller's wording (that is the element's text). The guide's profiles require it on every coding they
    constrain, so a builder refuses a ``Coding`` without one (``InvalidRequest`` naming the field); judgement call:
    it is not looked up nor copied from the text, which would put words in the code system's mouth.

    ``repr`` shows the system, not the code (a diagnosis code is health data).
    """

    system: str = attrs.field(validator=_text("Coding.system"))
    code: str = attrs.field(repr=False, validator=_text("Coding.code"))
    display: str | None = attrs.field(repr=False, default=None, validator=_opt_text("Coding.display"))

    @classmethod
    def snomed(cls, code: str, display: str | None = None) -> Coding:
        """A SNOMED CT code (system ``http://snomed.info/sct``)."""
        return cls(SNOMED, code, display)

    @classmethod
    def loinc(cls, code: str, display: str | None = None) -> Coding:
        """A LOINC code (system ``http://loinc.org``)."""
        return cls(LOINC, code, display)


class Gender(enum.StrEnum):
    """FHIR's administrative gender (``Patient.gender``)."""

    MALE = "male"
    FEMALE = "female"
    OTHER = "other"
    UNKNOWN = "unknown"


def _gender(value: object) -> Gender | None:
    if value is None or isinstance(value, Gender):
        return value
    if type(value) is str:
        try:
            return Gender(value.strip().lower())
        except ValueError:
            pass
    raise InvalidRequest("Patient.gender must be male, female, other or unknown")


@attrs.frozen
class Patient:
    """The patient: ``name`` and at least one identifier, the ABHA number (``91-1111-2222-3333``), the ABHA address
    (``name@abdm``) or the hospital's own id (its medical record number).

    Identifiers as the guide's examples write them: the ABHA number and address under the system
    ``https://healthid.ndhm.gov.in``, the hospital's id with type ``MR`` (HL7 v2-0203) under
    ``hospital_id_system`` (omitted when not given).

    ``abha_number``: 14 digits, with or without hyphens; kept as ``91-1111-2222-3333`` (the guide's examples'
    form). Another shape is :class:`~health_async.errors.InvalidRequest` naming the field, never the number.

    Judgement call: 6.5.0 requires ``Patient.identifier.type``; the ABHA number and address both carry the guide's
    ``ABHA`` code (ndhm-identifier-type-code: the account's ID), their ``type.text`` saying which one it is.
    ``repr`` shows nothing of the person.
    """

    name: str = attrs.field(repr=False, validator=_text("Patient.name"))
    gender: Gender | None = attrs.field(repr=False, default=None, converter=_gender, kw_only=True)
    birth_date: dt.date | None = attrs.field(
        repr=False, default=None, validator=_opt_when("Patient.birth_date"), kw_only=True
    )
    abha_number: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("Patient.abha_number"), kw_only=True
    )
    abha_address: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("Patient.abha_address"), kw_only=True
    )
    hospital_id: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("Patient.hospital_id"), kw_only=True
    )
    hospital_id_system: str | None = attrs.field(
        default=None, validator=_opt_text("Patient.hospital_id_system"), kw_only=True
    )
    phone: str | None = attrs.field(repr=False, default=None, validator=_opt_text("Patient.phone"), kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.abha_number is None and self.abha_address is None and self.hospital_id is None:
            raise InvalidRequest("Patient needs an identifier: abha_number, abha_address or hospital_id")
        if self.abha_number is not None:
            try:
                digits = normalize_abha_number(self.abha_number)
            except InvalidRequest:
                raise InvalidRequest(
                    "Patient.abha_number must be 14 digits, with or without hyphens (2-4-4-4)"
                ) from None
            hyphenated = f"{digits[:2]}-{digits[2:6]}-{digits[6:10]}-{digits[10:]}"
            object.__setattr__(self, "abha_number", hyphenated)


@attrs.frozen
class Practitioner:
    """A practitioner: ``name`` and, when known, the medical licence (or HPR) number, written with type ``MD`` under
    ``https://doctor.ndhm.gov.in`` as in the guide's examples. ``repr`` shows neither (personal data)."""

    name: str = attrs.field(repr=False, validator=_text("Practitioner.name"))
    license_number: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("Practitioner.license_number"), kw_only=True
    )


@attrs.frozen
class Organization:
    """The hospital, clinic or lab: ``name`` and its ABDM facility id (HFR), written with type ``PRN`` under
    ``https://facility.ndhm.gov.in`` as in the guide's examples; ``phone`` and ``email`` as its contacts."""

    name: str = attrs.field(validator=_text("Organization.name"))
    facility_id: str | None = attrs.field(default=None, validator=_opt_text("Organization.facility_id"), kw_only=True)
    phone: str | None = attrs.field(default=None, validator=_opt_text("Organization.phone"), kw_only=True)
    email: str | None = attrs.field(default=None, validator=_opt_text("Organization.email"), kw_only=True)


_ENCOUNTER_CLASSES: Final = {
    "ambulatory": ("AMB", "ambulatory"),
    "inpatient": ("IMP", "inpatient encounter"),
    "emergency": ("EMER", "emergency"),
    "virtual": ("VR", "virtual"),
    "home": ("HH", "home health"),
}


def _kind(_inst: object, _attr: object, value: object) -> None:
    if value not in _ENCOUNTER_CLASSES:
        raise InvalidRequest(f"Encounter.kind must be one of {', '.join(_ENCOUNTER_CLASSES)}")


@attrs.frozen(kw_only=True)
class Encounter:
    """The visit: its ``kind`` (``ambulatory``, ``inpatient``, ``emergency``, ``virtual``, ``home``: HL7
    v3-ActCode ``AMB``, ``IMP``, ``EMER``, ``VR``, ``HH``), ``start`` (default: the record's date) and ``end``."""

    kind: str = attrs.field(default="ambulatory", validator=_kind)
    start: dt.date | None = attrs.field(repr=False, default=None, validator=_opt_when("Encounter.start"))
    end: dt.date | None = attrs.field(repr=False, default=None, validator=_opt_when("Encounter.end"))


@attrs.frozen
class Condition:
    """A complaint, diagnosis or past illness: its text and, when the caller has one, its code."""

    text: str = attrs.field(repr=False, validator=_text("Condition.text"))
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("Condition.code"), kw_only=True)
    #: ``active``, ``recurrence``, ``relapse``, ``inactive``, ``remission`` or ``resolved`` (HL7
    #: condition-clinical); ``None``: not said.
    clinical_status: str | None = attrs.field(repr=False, default=None, kw_only=True)
    onset: dt.date | None = attrs.field(repr=False, default=None, validator=_opt_when("Condition.onset"), kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.clinical_status is not None and self.clinical_status not in _CLINICAL:
            raise InvalidRequest(f"Condition.clinical_status must be one of {', '.join(_CLINICAL)}")


_CLINICAL: Final = ("active", "recurrence", "relapse", "inactive", "remission", "resolved")


@attrs.frozen
class Allergy:
    """An allergy or intolerance (``"No known allergy"`` is one too): its text and, when given, its code."""

    text: str = attrs.field(repr=False, validator=_text("Allergy.text"))
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("Allergy.code"), kw_only=True)


@attrs.frozen
class Procedure:
    """A procedure done: its text, its code when given, and its date."""

    text: str = attrs.field(repr=False, validator=_text("Procedure.text"))
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("Procedure.code"), kw_only=True)
    date: dt.date | None = attrs.field(repr=False, default=None, validator=_opt_when("Procedure.date"), kw_only=True)


@attrs.frozen
class Investigation:
    """A test or service asked for (a ServiceRequest): investigation advice, or a referral."""

    text: str = attrs.field(repr=False, validator=_text("Investigation.text"))
    code: Coding | None = attrs.field(
        repr=False, default=None, validator=_opt_coding("Investigation.code"), kw_only=True
    )


@attrs.frozen
class Medication:
    """A medicine prescribed (a MedicationRequest): its text (name and strength), its code when given, the dosage
    as written (``"1 tablet twice a day after food"``) and the reason."""

    text: str = attrs.field(repr=False, validator=_text("Medication.text"))
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("Medication.code"), kw_only=True)
    dosage: str | None = attrs.field(repr=False, default=None, validator=_opt_text("Medication.dosage"), kw_only=True)
    reason: str | None = attrs.field(repr=False, default=None, validator=_opt_text("Medication.reason"), kw_only=True)


@attrs.frozen
class FollowUp:
    """A follow-up visit (an Appointment): when, and what for."""

    date: dt.date = attrs.field(repr=False, validator=_opt_when("FollowUp.date"))
    text: str | None = attrs.field(repr=False, default=None, validator=_opt_text("FollowUp.text"), kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.date is None:
            raise InvalidArgumentType("FollowUp.date must be a datetime.date or datetime.datetime")


@attrs.frozen
class FamilyHistory:
    """A relative's condition: the relationship (``"Father"``) and the condition, as text (codes when given)."""

    relationship: str = attrs.field(repr=False, validator=_text("FamilyHistory.relationship"))
    condition: str = attrs.field(repr=False, validator=_text("FamilyHistory.condition"))
    code: Coding | None = attrs.field(
        repr=False, default=None, validator=_opt_coding("FamilyHistory.code"), kw_only=True
    )


_NAMED_INTERPRETATIONS: Final = {
    "normal": ("N", "Normal"),
    "high": ("H", "High"),
    "low": ("L", "Low"),
    "abnormal": ("A", "Abnormal"),
    "critically high": ("HH", "Critical high"),
    "critically low": ("LL", "Critical low"),
    "very high": ("HU", "Significantly high"),
    "very low": ("LU", "Significantly low"),
}
#: The interpretations known by name or by their HL7 v3-ObservationInterpretation code, lower-cased (``high`` and
#: ``h`` -> ``H``): the code a report prints (``H``, ``L``, ``N``) is coded as its name is.
INTERPRETATIONS: Final = {
    **_NAMED_INTERPRETATIONS,
    **{code.lower(): (code, display) for code, display in _NAMED_INTERPRETATIONS.values()},
}

#: HL7's data-absent-reason codes (``Observation.dataAbsentReason``), to their displays.
DATA_ABSENT_REASONS: Final = {
    "unknown": "Unknown",
    "asked-unknown": "Asked But Unknown",
    "temp-unknown": "Temporarily Unknown",
    "not-asked": "Not Asked",
    "asked-declined": "Asked But Declined",
    "masked": "Masked",
    "not-applicable": "Not Applicable",
    "unsupported": "Unsupported",
    "as-text": "As Text",
    "error": "Error",
    "not-a-number": "Not a Number (NaN)",
    "negative-infinity": "Negative Infinity (NINF)",
    "positive-infinity": "Positive Infinity (PINF)",
    "not-performed": "Not Performed",
    "not-permitted": "Not Permitted",
}


def _value(_inst: object, _attr: object, value: Any) -> None:
    if value is None:
        return
    if type(value) is str:
        if not value.strip():
            raise InvalidRequest(
                "Observation.value must not be an empty string (leave it out, or give Observation.data_absent_reason)"
            )
        return
    _opt_number("Observation.value")(_inst, _attr, value)


def _absent(_inst: object, _attr: object, value: Any) -> None:
    if value is not None and value not in DATA_ABSENT_REASONS:
        raise InvalidRequest(
            "Observation.data_absent_reason must be one of HL7's data-absent-reason codes ("
            + ", ".join(DATA_ABSENT_REASONS)
            + ")"
        )


@attrs.frozen
class Observation:
    """One measured or observed value: a lab result, a vital sign, a body measurement.

    ``value`` a number (with ``unit``: a Quantity) or text (``"Positive"``, ``"<0.5"``); the reference range as
    ``low``/``high`` (in ``unit``) and/or ``range_text`` as printed; ``interpretation`` a name (``normal``,
    ``high``, ``low``, ``abnormal``, ``critically high``, ``critically low``, ``very high``, ``very low``: HL7's
    v3-ObservationInterpretation code; the code itself, ``H``, ``L``, ``N``, ..., is coded alike) or any other
    text (kept as text); ``code`` the LOINC (or SNOMED CT) code when the caller has one; ``date`` when it was taken
    (default: the record's date); ``data_absent_reason`` why there is no value (an HL7 data-absent-reason code:
    ``not-performed``, ``unknown``, ``error``, ...).

    Refused (:class:`~health_async.errors.InvalidRequest`, naming the field): a ``unit`` without a ``value`` (unless
    ``data_absent_reason`` says why), an empty-string ``value``, a ``value`` together with a
    ``data_absent_reason``, ``low`` greater than ``high``.
    """

    name: str = attrs.field(repr=False, validator=_text("Observation.name"))
    value: Number | str | None = attrs.field(repr=False, default=None, validator=_value, kw_only=True)
    unit: str | None = attrs.field(repr=False, default=None, validator=_opt_text("Observation.unit"), kw_only=True)
    low: Number | None = attrs.field(repr=False, default=None, validator=_opt_number("Observation.low"), kw_only=True)
    high: Number | None = attrs.field(repr=False, default=None, validator=_opt_number("Observation.high"), kw_only=True)
    range_text: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("Observation.range_text"), kw_only=True
    )
    interpretation: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("Observation.interpretation"), kw_only=True
    )
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("Observation.code"), kw_only=True)
    date: dt.date | None = attrs.field(repr=False, default=None, validator=_opt_when("Observation.date"), kw_only=True)
    data_absent_reason: str | None = attrs.field(default=None, validator=_absent, kw_only=True)
    #: The parts of a multi-part observation (``Observation.component``): each its name, code, value, unit, range and
    #: interpretation (a component has no date, no components of its own).
    components: tuple[Observation, ...] = attrs.field(repr=False, default=(), converter=_tuple, kw_only=True)

    @classmethod
    def blood_pressure(
        cls,
        systolic: Number,
        diastolic: Number,
        *,
        unit: str = "mm[Hg]",
        interpretation: str | None = None,
        date: dt.date | None = None,
    ) -> Observation:
        """A blood pressure as the FHIR vital-signs profile writes it: LOINC 85354-9 "Blood pressure panel with all
        children optional" with two components, 8480-6 "Systolic blood pressure" and 8462-4 "Diastolic blood
        pressure", in ``unit`` (default ``mm[Hg]``)."""
        return cls(
            "Blood pressure",
            code=Coding.loinc("85354-9", "Blood pressure panel with all children optional"),
            interpretation=interpretation,
            date=date,
            components=(
                cls(
                    "Systolic blood pressure",
                    value=systolic,
                    unit=unit,
                    code=Coding.loinc("8480-6", "Systolic blood pressure"),
                ),
                cls(
                    "Diastolic blood pressure",
                    value=diastolic,
                    unit=unit,
                    code=Coding.loinc("8462-4", "Diastolic blood pressure"),
                ),
            ),
        )

    def __attrs_post_init__(self) -> None:
        for part in self.components:
            if not isinstance(part, Observation):
                raise InvalidArgumentType("Observation.components must hold fhir.Observation items")
            if part.components or part.date is not None:
                raise InvalidRequest("Observation.components: a component has no components and no date of its own")
        if self.value is None and self.unit is not None and self.data_absent_reason is None:
            raise InvalidRequest(
                "Observation.unit is given without Observation.value: give the value, or data_absent_reason"
            )
        if self.value is not None and self.data_absent_reason is not None:
            raise InvalidRequest("Observation.data_absent_reason is for an Observation without a value")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise InvalidRequest("Observation.low must not be greater than Observation.high")


@attrs.frozen
class Specimen:
    """The sample a lab report was made on (a Specimen, ``DiagnosticReport.specimen``): its type as text (``"Serum
    specimen"``) and, when given, its SNOMED CT code; when it was collected and when the lab received it (both
    required by the guide's 6.5.0 Specimen profile)."""

    type: str = attrs.field(repr=False, validator=_text("Specimen.type"))
    collected: dt.date = attrs.field(repr=False, validator=_opt_when("Specimen.collected"), kw_only=True)
    received: dt.date = attrs.field(repr=False, validator=_opt_when("Specimen.received"), kw_only=True)
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("Specimen.code"), kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.collected is None or self.received is None:
            raise InvalidArgumentType(
                "Specimen.collected and Specimen.received must be datetime.date or datetime.datetime"
            )
        if self.code is not None and self.code.system != SNOMED:
            raise InvalidRequest("Specimen.code must be a SNOMED CT code (the 6.5.0 profile fixes its system)")


_STATEMENT_STATUSES: Final = (
    "active",
    "completed",
    "entered-in-error",
    "intended",
    "stopped",
    "on-hold",
    "unknown",
    "not-taken",
)


@attrs.frozen
class MedicationHistory:
    """A medicine the patient takes or took (a MedicationStatement: the OP consultation's medication history): its
    text, its code when given, ``status`` (FHIR's MedicationStatement status: ``active``, ``completed``, ...), the
    dosage as told and when it was told (``asserted``, default: the record's date)."""

    text: str = attrs.field(repr=False, validator=_text("MedicationHistory.text"))
    code: Coding | None = attrs.field(
        repr=False, default=None, validator=_opt_coding("MedicationHistory.code"), kw_only=True
    )
    status: str = attrs.field(
        default="completed", validator=_one_of("MedicationHistory.status", _STATEMENT_STATUSES), kw_only=True
    )
    dosage: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("MedicationHistory.dosage"), kw_only=True
    )
    asserted: dt.date | None = attrs.field(
        repr=False, default=None, validator=_opt_when("MedicationHistory.asserted"), kw_only=True
    )


@attrs.frozen
class VaccineDue:
    """A vaccine recommended (one ``recommendation`` of the ImmunizationRecord's ImmunizationRecommendation): the
    vaccine (text, and its code when given), when it is due, and the dose number."""

    vaccine: str = attrs.field(repr=False, validator=_text("VaccineDue.vaccine"))
    due: dt.date = attrs.field(repr=False, validator=_opt_when("VaccineDue.due"), kw_only=True)
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("VaccineDue.code"), kw_only=True)
    dose_number: int | None = attrs.field(repr=False, default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.due is None:
            raise InvalidArgumentType("VaccineDue.due must be a datetime.date or datetime.datetime")
        if self.dose_number is not None and (type(self.dose_number) is not int or self.dose_number < 1):
            raise InvalidRequest("VaccineDue.dose_number must be a positive int")


@attrs.frozen
class Immunization:
    """A vaccine given: the vaccine (text, and its code when given), the date, the dose number and the lot."""

    vaccine: str = attrs.field(repr=False, validator=_text("Immunization.vaccine"))
    date: dt.date = attrs.field(repr=False, validator=_opt_when("Immunization.date"), kw_only=True)
    code: Coding | None = attrs.field(
        repr=False, default=None, validator=_opt_coding("Immunization.code"), kw_only=True
    )
    dose_number: int | None = attrs.field(repr=False, default=None, kw_only=True)
    lot_number: str | None = attrs.field(
        repr=False, default=None, validator=_opt_text("Immunization.lot_number"), kw_only=True
    )

    def __attrs_post_init__(self) -> None:
        if self.date is None:
            raise InvalidArgumentType("Immunization.date must be a datetime.date or datetime.datetime")
        if self.dose_number is not None and (type(self.dose_number) is not int or self.dose_number < 1):
            raise InvalidRequest("Immunization.dose_number must be a positive int")


def _to_bytes(value: bytes | bytearray | memoryview) -> bytes:
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else value


def _bytes(_inst: object, _attr: object, value: Any) -> None:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgumentType("Document.data must be bytes")
    if not len(value):
        raise InvalidRequest("Document.data must not be empty")


#: The guide's price components (CodeSystem ndhm-price-components), by name: (code, display, FHIR
#: ``priceComponent.type``), the types as in the guide's InvoiceRecord example.
PRICE_COMPONENTS: Final = {
    "mrp": ("00", "MRP", "informational"),
    "rate": ("01", "Rate", "base"),
    "discount": ("02", "Discount", "discount"),
    "cgst": ("03", "CGST", "tax"),
    "sgst": ("04", "SGST", "tax"),
}
#: The guide's billing codes (CodeSystem ndhm-billing-codes), by name: (code, display).
BILLING_CODES: Final = {
    "consultation": ("00", "Consultation"),
    "pharmacy": ("01", "Pharmacy"),
    "ipd": ("02", "IPD"),
    "opd": ("03", "OPD"),
    "pathology": ("04", "Pathology"),
    "medicines": ("05", "Medicines"),
    "nursing charges": ("06", "Nursing Charges"),
    "handling charges": ("07", "Handling Charges"),
    "delivery charges": ("08", "Delivery Charges"),
    "others": ("99", "Others"),
}
#: The invoice types ValueSet ndhm-invoice-types allows (a subset of the billing codes).
INVOICE_TYPES: Final = ("consultation", "pharmacy", "ipd", "opd", "others")


def _amount(name: str) -> Any:
    number = _opt_number(name)

    def check(_inst: object, _attr: object, value: object) -> None:
        if value is None:
            raise InvalidArgumentType(f"{name} must be an int or a float")
        number(_inst, _attr, value)

    return check


@attrs.frozen
class PriceComponent:
    """One price of an invoice line (``Invoice.lineItem.priceComponent``): ``kind`` the guide's price component
    (``mrp``, ``rate``, ``discount``, ``cgst``, ``sgst``: ndhm-price-components ``00``-``04``; written with FHIR's
    type ``informational``, ``base``, ``discount``, ``tax``, ``tax`` as in the guide's example) and ``amount`` in the
    invoice's currency."""

    kind: str = attrs.field(validator=_one_of("PriceComponent.kind", PRICE_COMPONENTS))
    amount: Number = attrs.field(repr=False, validator=_amount("PriceComponent.amount"))


def _prices(value: Any) -> tuple[Any, ...]:
    if isinstance(value, PriceComponent):
        raise InvalidArgumentType("InvoiceItem.prices must be a list of fhir.PriceComponent, not one: wrap it in [...]")
    if isinstance(value, (str, bytes, dict)):
        raise InvalidArgumentType("InvoiceItem.prices must be a list of fhir.PriceComponent")
    try:
        return _tuple(value)
    except TypeError:
        raise InvalidArgumentType("InvoiceItem.prices must be a list of fhir.PriceComponent") from None


@attrs.frozen
class InvoiceItem:
    """One line of an invoice, and its ChargeItem: what was charged (``text``, its ``code`` when given, e.g. a
    medicine's SNOMED CT code: the ChargeItem's ``productCodeableConcept``), its ``category`` (the guide's billing
    code: ``consultation``, ``pharmacy``, ``ipd``, ``opd``, ``pathology``, ``medicines``, ``nursing charges``,
    ``handling charges``, ``delivery charges``, ``others``), the ``quantity`` (with its ``unit``) and its
    ``prices`` (at least one :class:`PriceComponent`)."""

    text: str = attrs.field(repr=False, validator=_text("InvoiceItem.text"))
    category: str = attrs.field(kw_only=True, validator=_one_of("InvoiceItem.category", BILLING_CODES))
    prices: tuple[PriceComponent, ...] = attrs.field(repr=False, converter=_prices, kw_only=True)
    quantity: Number = attrs.field(repr=False, default=1, validator=_amount("InvoiceItem.quantity"), kw_only=True)
    unit: str | None = attrs.field(repr=False, default=None, validator=_opt_text("InvoiceItem.unit"), kw_only=True)
    code: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("InvoiceItem.code"), kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not self.prices:
            raise InvalidRequest("InvoiceItem.prices needs at least one fhir.PriceComponent")
        if not all(isinstance(p, PriceComponent) for p in self.prices):
            raise InvalidArgumentType("InvoiceItem.prices must hold fhir.PriceComponent items")
        if self.quantity <= 0:
            raise InvalidRequest("InvoiceItem.quantity must be positive")


@attrs.frozen
class Document:
    """A file (a PDF, a scan): its bytes, content type, a title and, when given, a code of its type (SNOMED CT,
    e.g. ``4241000179101`` "Laboratory report"). Embedded as base64 (``attachment.data``)."""

    data: bytes = attrs.field(repr=False, validator=_bytes, converter=_to_bytes)
    content_type: str = attrs.field(default="application/pdf", validator=_text("Document.content_type"), kw_only=True)
    title: str | None = attrs.field(repr=False, default=None, validator=_opt_text("Document.title"), kw_only=True)
    type: Coding | None = attrs.field(repr=False, default=None, validator=_opt_coding("Document.type"), kw_only=True)


def as_tuple(value: Sequence[Any] | None) -> tuple[Any, ...]:
    """A sequence argument as a tuple (``None``: empty)."""
    return _tuple(value)
