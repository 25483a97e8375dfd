"""The builders: one function per ABDM record type, from typed inputs (``_build_inputs.py``) to the FHIR R4
``document`` Bundle as it must be sent (a dict; :func:`bundle_bytes` gives its JSON).

The guide written is NRCeS's "FHIR Implementation Guide for ABDM" 6.5.0 (:data:`GUIDE_VERSION`): its profiles'
fixed values, section slices and cardinalities, with the guide's 6.5.0 examples as the model of each shape.

What every bundle has: the Composition first; ``urn:uuid:`` full URLs and references; the guide's ``meta.profile``
on every resource (``DocumentBundle`` on the Bundle; a wellness Observation carries ``Observation`` and its
section's profile, as the guide's examples do); the record's SNOMED CT Composition type and display and the section
codes and displays the 6.5.0 profiles fix (the tables below); in the single-section records (prescription, lab and
imaging report, immunization, invoice) each section entry names its resource type (``entry.type``, the slices'
discriminator); an identifier and a timestamp with India's offset (+05:30).

Deterministic: the same input gives the same bytes. Every id is ``uuid5(namespace, f"{care_context_id}/{role}/{i}")``
(``role`` the resource's place, e.g. ``observation``, ``allergies``; ``i`` its index there), keys are written in a
fixed order and no clock is read: the timestamp is the record's date unless given. So a re-push or a re-link sends
the same document.

Codes: the caller's (:class:`Coding`) are used; without one an element carries its text only. The builders write
no clinical code of their own: only the guide's fixed document and section codes and HL7's structural codes
(encounter class, observation interpretation, diagnostic service section, identifier types).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .. import _json
from .._wire import epoch_datetime
from ..errors import InvalidArgumentType, InvalidRequest
from ..models.records._documents import ReportItem, SmartReport
from ..models.records._processing import ProcessingResult
from ._build_inputs import (
    _ENCOUNTER_CLASSES,
    BILLING_CODES,
    DATA_ABSENT_REASONS,
    INTERPRETATIONS,
    INVOICE_TYPES,
    LOINC,
    PRICE_COMPONENTS,
    SNOMED,
    Allergy,
    Coding,
    Condition,
    Document,
    Encounter,
    FamilyHistory,
    FollowUp,
    Immunization,
    Investigation,
    InvoiceItem,
    Medication,
    MedicationHistory,
    Observation,
    Organization,
    Patient,
    Practitioner,
    Procedure,
    Specimen,
    VaccineDue,
    check_coding,
)
from ._types import NRCES_PROFILE_BASE, RecordType

__all__ = [
    "DEFAULT_NAMESPACE",
    "INDIA",
    "bundle_bytes",
    "discharge_summary",
    "from_processing_result",
    "health_document",
    "imaging_report",
    "immunization_record",
    "invoice_record",
    "lab_report",
    "op_consult",
    "prescription",
    "wellness_record",
]

#: The default namespace of the builders' ids: ``uuid5(NAMESPACE_URL, "https://nrces.in/ndhm/fhir/r4")``.
#: Judgement call: a default keeps the few-lines promise, but two hospitals with the same care context id would then
#: write the same ids; pass your own (``uuid5(NAMESPACE_URL, "https://your-hospital.example")``) in production.
DEFAULT_NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_URL, "https://nrces.in/ndhm/fhir/r4")

#: India Standard Time (+05:30): every date-time the builders write is in it.
INDIA: Final = dt.timezone(dt.timedelta(hours=5, minutes=30), "IST")

When = dt.date | dt.datetime
People = Practitioner | Sequence[Practitioner] | None

_V2_0203: Final = "http://terminology.hl7.org/CodeSystem/v2-0203"
_HEALTH_ID: Final = "https://healthid.ndhm.gov.in"
_DOCTOR_ID: Final = "https://doctor.ndhm.gov.in"
_FACILITY_ID: Final = "https://facility.ndhm.gov.in"
_RFC3986: Final = "urn:ietf:rfc:3986"
_NDHM_CS: Final = "https://nrces.in/ndhm/fhir/r4/CodeSystem/"
_NDHM_IDENTIFIER_TYPE: Final = _NDHM_CS + "ndhm-identifier-type-code"

#: The guide's version the builders write (the profiles below are read from its package, ``ndhm.in`` 6.5.0).
GUIDE_VERSION: Final = "6.5.0"

#: The Composition type of each record type: (SNOMED CT code, its display fixed by the 6.5.0 profile, type.text).
#: Judgement call: DiagnosticReportRecord's code is not fixed (1..1, bound to ndhm-diagnostic-report-type); the
#: guide's examples use 721981007 "Diagnostic studies report", so it is used here. WellnessRecord and InvoiceRecord
#: have no coding: their profiles fix ``type.text`` only ("Wellness Record", "Invoice Record").
_DOCUMENT: Final[dict[RecordType, tuple[str | None, str | None, str]]] = {
    RecordType.OP_CONSULT: ("371530004", "Clinical consultation report", "Clinical Consultation report"),
    RecordType.PRESCRIPTION: ("440545006", "Prescription record", "Prescription record"),
    RecordType.DIAGNOSTIC_REPORT: ("721981007", "Diagnostic studies report", "Diagnostic Report"),
    RecordType.DISCHARGE_SUMMARY: ("373942005", "Discharge summary", "Discharge Summary"),
    RecordType.IMMUNIZATION: ("41000179103", "Immunization record", "Immunization record"),
    RecordType.WELLNESS: (None, None, "Wellness Record"),
    RecordType.HEALTH_DOCUMENT: ("419891008", "Record artifact", "Record artifact"),
    RecordType.INVOICE: (None, None, "Invoice Record"),
}
#: The Composition's default title of each record type, as in the guide's examples.
_TITLE: Final = {
    RecordType.OP_CONSULT: "Consultation Report",
    RecordType.PRESCRIPTION: "Prescription record",
    RecordType.DIAGNOSTIC_REPORT: "Diagnostic Report",
    RecordType.DISCHARGE_SUMMARY: "Discharge Summary",
    RecordType.IMMUNIZATION: "Immunization record",
    RecordType.WELLNESS: "Wellness Record",
    RecordType.HEALTH_DOCUMENT: "Health Document",
    RecordType.INVOICE: "Invoice Record",
}

#: The named sections of OPConsultRecord 6.5.0: (title as in the guide's examples, SNOMED CT code and display fixed
#: by the profile's slice ``Composition.section:<name>``).
_OP_SECTIONS: Final = {
    "ChiefComplaints": ("Chief complaints", "422843007", "Chief complaint section"),
    "PhysicalExamination": ("Physical examination", "425044008", "Physical exam section"),
    "Allergies": ("Allergies", "722446000", "Allergy record"),
    "MedicalHistory": ("Medical History", "371529009", "History and physical report"),
    "FamilyHistory": ("Family history", "422432008", "Family history section"),
    "InvestigationAdvice": ("Investigation Advice", "721963009", "Order document"),
    "Medications": ("Medications", "721912009", "Medication summary document"),
    "FollowUp": ("Follow Up", "390906007", "Follow-up encounter"),
    "Procedure": ("Procedure", "371525003", "Clinical procedure report"),
    "Referral": ("Referral", "306206005", "Referral to service"),
    "OtherObservations": ("Other Observations", "404684003", "Clinical finding"),
    "DocumentReference": ("Document Reference", "371530004", "Clinical consultation report"),
}
#: The named sections of DischargeSummaryRecord 6.5.0, as :data:`_OP_SECTIONS`.
_DS_SECTIONS: Final = {
    "ChiefComplaints": ("Chief complaints", "422843007", "Chief complaint section"),
    "PhysicalExamination": ("Physical examination", "425044008", "Physical exam section"),
    "Allergies": ("Allergies", "722446000", "Allergy record"),
    "MedicalHistory": ("Medical History", "1003642006", "Past medical history section"),
    "FamilyHistory": ("Family history", "422432008", "Family history section"),
    "Investigations": ("Investigations", "721981007", "Diagnostic studies report"),
    "Medications": ("Medications", "1003606003", "Medication history section"),
    "Procedures": ("Procedures", "1003640003", "History of past procedure section"),
    "CarePlan": ("Care Plan", "734163000", "Care plan"),
    "DocumentReference": ("Document Reference", "373942005", "Discharge summary"),
}
_WELLNESS: Final = {
    "VitalSigns": ("Vital Signs", "ObservationVitalSigns"),
    "BodyMeasurement": ("Body Measurement", "ObservationBodyMeasurement"),
    "PhysicalActivity": ("Physical Activity", "ObservationPhysicalActivity"),
    "GeneralAssessment": ("General Assessment", "ObservationGeneralAssessment"),
    "WomenHealth": ("Women Health", "ObservationWomenHealth"),
    "Lifestyle": ("Lifestyle", "ObservationLifestyle"),
    "OtherObservations": ("Other Observations", None),
}
#: The DiagnosticReport profile and its category text of each kind. Judgement call: 6.5.0 fixes the category's coding
#: system to SNOMED CT without fixing a code (the examples write specific services, e.g. 708196005 "Hematology
#: service"); the builders write the category as text only rather than choose a clinical code.
#: The one section of a DiagnosticReportRecord: its code is required (1..1) and not fixed by 6.5.0. Judgement call:
#: the Composition's own type, 721981007 "Diagnostic studies report" (the examples use a specific report type).
_DIAGNOSTIC_SECTION: Final = ("721981007", "Diagnostic studies report")
_SERVICE_SECTIONS: Final = {
    "lab": ("DiagnosticReportLab", "Laboratory"),
    "imaging": ("DiagnosticReportImaging", "Radiology"),
}


# ------------------------------------------------------------------------------------------------- dates


def _datetime(value: When) -> str:
    """A FHIR dateTime: a date as ``YYYY-MM-DD``; a datetime in India's offset (a naive one is taken as IST)."""
    if isinstance(value, dt.datetime):
        local = value.replace(tzinfo=INDIA) if value.tzinfo is None else value.astimezone(INDIA)
        return local.isoformat(timespec="milliseconds" if local.microsecond else "seconds")
    return value.isoformat()


def _instant(value: When) -> str:
    """A FHIR instant (date, time and offset): a date is its midnight in India."""
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day, tzinfo=INDIA)
    return _datetime(value)


def _check_when(value: object, name: str) -> When:
    if not isinstance(value, dt.date):
        raise InvalidArgumentType(f"{name} must be a datetime.date or datetime.datetime")
    return value


# ------------------------------------------------------------------------------------------------- pieces


def _concept(text: str | None, code: Coding | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if code is not None:
        coding: dict[str, Any] = {"system": code.system, "code": code.code}
        if code.display is not None:
            coding["display"] = code.display
        out["coding"] = [coding]
    if text is not None:
        out["text"] = text
    return out


def _fixed(system: str, code: str, display: str | None) -> dict[str, Any]:
    coding: dict[str, Any] = {"system": system, "code": code}
    if display is not None:
        coding["display"] = display
    return {"coding": [coding]}


def _identifier(system: str | None, value: str, type_code: tuple[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if type_code is not None:
        out["type"] = _fixed(_V2_0203, *type_code)
    if system is not None:
        out["system"] = system
    out["value"] = value
    return out


def _abha_identifier(value: str, text: str) -> dict[str, Any]:
    """An ABHA identifier: 6.5.0 requires ``Patient.identifier.type`` (bound to ndhm-identifier-type-code), so it
    carries that code system's ``ABHA`` code, and ``text`` says which of the account's two identifiers it is."""
    kind = _fixed(_NDHM_IDENTIFIER_TYPE, "ABHA", "Ayushman Bharat Health Account (ABHA) ID")
    kind["text"] = text
    return {"type": kind, "system": _HEALTH_ID, "value": value}


def _attachment(doc: Document, title: str | None, created: When | None) -> dict[str, Any]:
    out: dict[str, Any] = {"contentType": doc.content_type, "data": base64.b64encode(doc.data).decode("ascii")}
    if title is not None:
        out["title"] = title
    if created is not None:
        out["creation"] = _datetime(created)
    return out


def _quantity(value: int | float, unit: str | None) -> dict[str, Any]:
    return {"value": value} if unit is None else {"value": value, "unit": unit}


def _people(practitioner: People) -> tuple[Practitioner, ...]:
    if practitioner is None:
        return ()
    if isinstance(practitioner, Practitioner):
        return (practitioner,)
    out = tuple(practitioner)
    if not all(isinstance(p, Practitioner) for p in out):
        raise InvalidArgumentType("practitioner must be a fhir.Practitioner or a sequence of them")
    return out


def _items(value: Sequence[Any] | None, kind: type | tuple[type, ...], name: str) -> tuple[Any, ...]:
    """A sequence input as a tuple; :class:`InvalidArgumentType` naming the field for one item where a list is
    expected (``observations=fhir.Observation(...)``), a str, anything not iterable, or an item of another type."""
    if value is None:
        return ()
    names = " or ".join("fhir." + k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    if isinstance(value, kind):
        raise InvalidArgumentType(f"{name} must be a list of {names}, not one: wrap it in [...]")
    if isinstance(value, (str, bytes, dict)):
        raise InvalidArgumentType(f"{name} must be a list of {names}")
    try:
        out = tuple(value)
    except TypeError:
        raise InvalidArgumentType(f"{name} must be a list of {names}") from None
    if not all(isinstance(v, kind) for v in out):
        raise InvalidArgumentType(f"{name} must hold {names} items")
    return out


# ------------------------------------------------------------------------------------------------- the document


class _Doc:
    """One bundle being built: the entries in order, the ids derived from the namespace and the care context."""

    __slots__ = (
        "_entries",
        "_kinds",
        "_prefix",
        "author",
        "date",
        "date_text",
        "encounter",
        "organization",
        "patient",
        "record",
    )

    def __init__(
        self,
        record: RecordType,
        care_context_id: str,
        namespace: uuid.UUID,
        date: When,
        patient: Patient,
        organization: Organization,
        practitioner: People,
    ) -> None:
        if type(care_context_id) is not str or not care_context_id:
            raise InvalidRequest("care_context_id must be a non-empty str")
        if not isinstance(namespace, uuid.UUID):
            raise InvalidArgumentType("namespace must be a uuid.UUID")
        if not isinstance(patient, Patient):
            raise InvalidArgumentType("patient must be a fhir.Patient")
        if not isinstance(organization, Organization):
            raise InvalidArgumentType("organization must be a fhir.Organization")
        self.record = record
        # uuid5 by hand (the same value as uuid.uuid5(namespace, name)), the common prefix hashed once: the ids are
        # a third of a lab report's build time otherwise.
        self._prefix = hashlib.sha1(namespace.bytes + care_context_id.encode() + b"/", usedforsecurity=False)
        self.date = _check_when(date, "date")
        self.date_text = _datetime(self.date)
        self._entries: list[dict[str, Any]] = [{}]  # the Composition's place
        self._kinds: dict[str, str] = {}
        self.patient = self._patient(patient)
        people = [self._practitioner(p, i) for i, p in enumerate(_people(practitioner))]
        self.organization = self._organization(organization)
        self.author = people or [self.organization]
        self.encounter: dict[str, str] | None = None

    def uid(self, role: str, index: int = 0) -> str:
        """``str(uuid.uuid5(namespace, f"{care_context_id}/{role}/{index}"))``."""
        sha = self._prefix.copy()
        sha.update(f"{role}/{index}".encode())
        d = bytearray(sha.digest()[:16])
        d[6] = (d[6] & 0x0F) | 0x50  # version 5
        d[8] = (d[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = d.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def add(
        self, role: str, index: int, kind: str, profile: str | None, body: dict[str, Any], extra: str | None = None
    ) -> dict[str, str]:
        """Append a resource (``extra``: a second profile, after ``profile``, as the guide's wellness examples
        write theirs); its reference."""
        rid = self.uid(role, index)
        url = "urn:uuid:" + rid
        res: dict[str, Any] = {"resourceType": kind, "id": rid}
        if profile is not None:
            profiles = [NRCES_PROFILE_BASE + profile]
            if extra is not None:
                profiles.append(NRCES_PROFILE_BASE + extra)
            res["meta"] = {"profile": profiles}
        self._kinds[url] = kind
        res.update(body)
        self._entries.append({"fullUrl": url, "resource": res})
        return {"reference": url}

    def typed(self, ref: dict[str, str]) -> dict[str, str]:
        """A section entry naming its resource type: ``{"reference": ..., "type": "MedicationRequest"}``."""
        return {"reference": ref["reference"], "type": self._kinds[ref["reference"]]}

    # ------------------------------------------------------------------------------------- who

    def _patient(self, p: Patient) -> dict[str, str]:
        ids = []
        if p.abha_number is not None:
            ids.append(_abha_identifier(p.abha_number, "ABHA number"))
        if p.abha_address is not None:
            ids.append(_abha_identifier(p.abha_address, "ABHA address"))
        if p.hospital_id is not None:
            ids.append(_identifier(p.hospital_id_system, p.hospital_id, ("MR", "Medical record number")))
        body: dict[str, Any] = {"identifier": ids, "name": [{"text": p.name}]}
        if p.phone is not None:
            body["telecom"] = [{"system": "phone", "value": p.phone}]
        if p.gender is not None:
            body["gender"] = p.gender.value
        if p.birth_date is not None:
            bd = p.birth_date.date() if isinstance(p.birth_date, dt.datetime) else p.birth_date
            body["birthDate"] = bd.isoformat()
        return self.add("patient", 0, "Patient", "Patient", body)

    def _practitioner(self, p: Practitioner, i: int) -> dict[str, str]:
        body: dict[str, Any] = {}
        if p.license_number is not None:
            body["identifier"] = [_identifier(_DOCTOR_ID, p.license_number, ("MD", "Medical License number"))]
        body["name"] = [{"text": p.name}]
        return self.add("practitioner", i, "Practitioner", "Practitioner", body)

    def _organization(self, o: Organization) -> dict[str, str]:
        body: dict[str, Any] = {}
        if o.facility_id is not None:
            body["identifier"] = [_identifier(_FACILITY_ID, o.facility_id, ("PRN", "Provider number"))]
        body["name"] = o.name
        telecom = []
        if o.phone is not None:
            telecom.append({"system": "phone", "value": o.phone, "use": "work"})
        if o.email is not None:
            telecom.append({"system": "email", "value": o.email, "use": "work"})
        if telecom:
            body["telecom"] = telecom
        return self.add("organization", 0, "Organization", "Organization", body)

    def add_encounter(self, encounter: Encounter | None, default_kind: str) -> None:
        if encounter is None:
            encounter = Encounter(kind=default_kind)
        elif not isinstance(encounter, Encounter):
            raise InvalidArgumentType("encounter must be a fhir.Encounter")
        code, display = _ENCOUNTER_CLASSES[encounter.kind]
        period: dict[str, str] = {"start": _datetime(encounter.start or self.date)}
        if encounter.end is not None:
            period["end"] = _datetime(encounter.end)
        body = {
            "status": "finished",
            "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": code, "display": display},
            "subject": self.patient,
            "period": period,
            "serviceProvider": self.organization,
        }
        self.encounter = self.add("encounter", 0, "Encounter", "Encounter", body)

    # ------------------------------------------------------------------------------------- what

    def condition(self, role: str, i: int, c: Condition) -> dict[str, str]:
        body: dict[str, Any] = {}
        if c.clinical_status is not None:
            body["clinicalStatus"] = _fixed(
                "http://terminology.hl7.org/CodeSystem/condition-clinical", c.clinical_status, None
            )
        body["code"] = _concept(c.text, c.code)
        body["subject"] = self.patient
        if c.onset is not None:
            body["onsetDateTime"] = _datetime(c.onset)
        return self.add(role, i, "Condition", "Condition", body)

    def allergy(self, role: str, i: int, a: Allergy) -> dict[str, str]:
        body = {"code": _concept(a.text, a.code), "patient": self.patient, "recordedDate": self.date_text}
        return self.add(role, i, "AllergyIntolerance", "AllergyIntolerance", body)

    def procedure(self, role: str, i: int, p: Procedure) -> dict[str, str]:
        body: dict[str, Any] = {"status": "completed", "code": _concept(p.text, p.code), "subject": self.patient}
        if p.date is not None:
            body["performedDateTime"] = _datetime(p.date)
        return self.add(role, i, "Procedure", "Procedure", body)

    def service_request(self, role: str, i: int, s: Investigation) -> dict[str, str]:
        body: dict[str, Any] = {
            "status": "active",
            "intent": "order",
            "code": _concept(s.text, s.code),
            "subject": self.patient,
            "authoredOn": self.date_text,
            "requester": self.author[0],
        }
        return self.add(role, i, "ServiceRequest", "ServiceRequest", body)

    def medication_request(self, role: str, i: int, m: Medication) -> dict[str, str]:
        body: dict[str, Any] = {
            "status": "active",
            "intent": "order",
            "medicationCodeableConcept": _concept(m.text, m.code),
            "subject": self.patient,
            "authoredOn": self.date_text,
            "requester": self.author[0],
        }
        if m.reason is not None:
            body["reasonCode"] = [{"text": m.reason}]
        if m.dosage is not None:
            body["dosageInstruction"] = [{"text": m.dosage}]
        return self.add(role, i, "MedicationRequest", "MedicationRequest", body)

    def appointment(self, role: str, i: int, f: FollowUp) -> dict[str, str]:
        body: dict[str, Any] = {"status": "booked"}
        if f.text is not None:
            body["description"] = f.text
        body["start"] = _instant(f.date)
        body["participant"] = [{"actor": self.patient, "status": "accepted"}]
        return self.add(role, i, "Appointment", "Appointment", body)

    def family_history(self, role: str, i: int, f: FamilyHistory) -> dict[str, str]:
        body = {
            "status": "completed",
            "patient": self.patient,
            "relationship": {"text": f.relationship},
            "condition": [{"code": _concept(f.condition, f.code)}],
        }
        return self.add(role, i, "FamilyMemberHistory", "FamilyMemberHistory", body)

    def observation(
        self,
        role: str,
        i: int,
        o: Observation,
        category: str | None = None,
        extra: str | None = None,
    ) -> dict[str, str]:
        body: dict[str, Any] = {"status": "final"}
        if category is not None:
            body["category"] = [
                _fixed("http://terminology.hl7.org/CodeSystem/observation-category", *_CATEGORIES[category])
            ]
        body["code"] = _concept(o.name, o.code)
        body["subject"] = self.patient
        body["effectiveDateTime"] = self.date_text if o.date is None else _datetime(o.date)
        body["performer"] = [self.organization]
        _observed(body, o)
        if o.components:
            parts = []
            for c in o.components:
                part: dict[str, Any] = {"code": _concept(c.name, c.code)}
                _observed(part, c)
                parts.append(part)
            body["component"] = parts
        return self.add(role, i, "Observation", "Observation", body, extra)

    def specimen(self, sp: Specimen) -> dict[str, str]:
        body: dict[str, Any] = {
            "type": _concept(sp.type, sp.code),
            "subject": self.patient,
            "receivedTime": _datetime(sp.received),
            "collection": {"collectedDateTime": _datetime(sp.collected)},
        }
        return self.add("specimen", 0, "Specimen", "Specimen", body)

    def medication_statement(self, role: str, i: int, m: MedicationHistory) -> dict[str, str]:
        body: dict[str, Any] = {
            "status": m.status,
            "medicationCodeableConcept": _concept(m.text, m.code),
            "subject": self.patient,
            "dateAsserted": self.date_text if m.asserted is None else _datetime(m.asserted),
        }
        if m.dosage is not None:
            body["dosage"] = [{"text": m.dosage}]
        return self.add(role, i, "MedicationStatement", "MedicationStatement", body)

    def media(self, i: int, image: Document) -> dict[str, str]:
        """One of an imaging report's images (a Media: the caller's file, of the patient, taken on the date)."""
        body: dict[str, Any] = {
            "status": "completed",
            "subject": self.patient,
            "createdDateTime": self.date_text,
            "content": _attachment(image, image.title, None),
        }
        return self.add("media", i, "Media", "Media", body)

    def document_reference(self, role: str, i: int, d: Document, default_title: str) -> dict[str, str]:
        title = d.title or default_title
        body = {
            "status": "current",
            "docStatus": "final",
            "type": _concept(title, d.type),
            "subject": self.patient,
            "date": _instant(self.date),
            "author": self.author,
            "content": [{"attachment": _attachment(d, title, self.date)}],
        }
        return self.add(role, i, "DocumentReference", "DocumentReference", body)

    def diagnostic_report(
        self,
        role: str,
        kind: str,
        title: str,
        code: Coding | None,
        results: list[dict[str, str]],
        conclusion: str | None,
        form: Document | None,
        specimen: dict[str, str] | None = None,
        media: Sequence[dict[str, str]] = (),
    ) -> dict[str, str]:
        profile, category = _SERVICE_SECTIONS[kind]
        body: dict[str, Any] = {
            "status": "final",
            "category": [{"text": category}],
            "code": _concept(title, code),
            "subject": self.patient,
        }
        if self.encounter is not None:
            body["encounter"] = self.encounter
        body["effectiveDateTime"] = self.date_text
        body["issued"] = _instant(self.date)
        body["performer"] = [self.organization]
        body["resultsInterpreter"] = self.author  # 1..* in 6.5.0: the practitioners, else the organization
        if specimen is not None:
            body["specimen"] = [specimen]
        if results:
            body["result"] = results
        if media:
            body["media"] = [{"link": m} for m in media]
        if conclusion is not None:
            body["conclusion"] = conclusion
        if form is not None:
            body["presentedForm"] = [_attachment(form, form.title or title, None)]
        return self.add(role, 0, "DiagnosticReport", profile, body)

    # ------------------------------------------------------------------------------------- the whole

    def finish(self, sections: list[dict[str, Any]], title: str | None, timestamp: When | None) -> dict[str, Any]:
        sections = [s for s in sections if s.get("entry")]
        if not sections:
            raise InvalidRequest(f"a {self.record.value} needs at least one entry in a section")
        code, display, type_text = _DOCUMENT[self.record]
        comp_type = _fixed(SNOMED, code, display) if code is not None else {}
        comp_type["text"] = type_text
        cid = self.uid("composition")
        comp: dict[str, Any] = {
            "resourceType": "Composition",
            "id": cid,
            "meta": {"profile": [self.record.profile]},
            "identifier": {"system": _RFC3986, "value": "urn:uuid:" + cid},
            "status": "final",
            "type": comp_type,
            "subject": self.patient,
        }
        if self.encounter is not None:
            comp["encounter"] = self.encounter
        comp["date"] = self.date_text
        comp["author"] = self.author
        comp["title"] = title or _TITLE[self.record]
        comp["custodian"] = self.organization
        comp["section"] = sections
        self._entries[0] = {"fullUrl": "urn:uuid:" + cid, "resource": comp}
        bid = self.uid("bundle")
        return {
            "resourceType": "Bundle",
            "id": bid,
            "meta": {"profile": [NRCES_PROFILE_BASE + "DocumentBundle"]},
            "identifier": {"system": _RFC3986, "value": "urn:uuid:" + bid},
            "type": "document",
            "timestamp": _instant(self.date if timestamp is None else _check_when(timestamp, "timestamp")),
            "entry": self._entries,
        }


_CATEGORIES: Final = {
    "laboratory": ("laboratory", "Laboratory"),
    "vital-signs": ("vital-signs", "Vital Signs"),
}


def _coded_section(
    title: str, code: str | None, display: str, refs: list[dict[str, str]], typed: _Doc | None = None
) -> dict[str, Any]:
    """A section; ``typed``: each entry also names its resource type (``entry.type``), as the 6.5.0 single-section
    profiles slice their entries by it."""
    section: dict[str, Any] = {"title": title}
    if code is not None:
        section["code"] = _fixed(SNOMED, code, display)
    section["entry"] = refs if typed is None else [typed.typed(r) for r in refs]
    return section


def _named(table: dict[str, tuple[str, str, str]], name: str, refs: list[dict[str, str]]) -> dict[str, Any]:
    title, code, display = table[name]
    return _coded_section(title, code, display, refs)


def _observed(body: dict[str, Any], o: Observation) -> None:
    """The value, absent reason, interpretation and reference range of an Observation or of a component."""
    value = o.value
    if isinstance(value, str):
        body["valueString"] = value
    elif value is not None:
        body["valueQuantity"] = _quantity(value, o.unit)
    if o.data_absent_reason is not None:
        body["dataAbsentReason"] = _fixed(
            "http://terminology.hl7.org/CodeSystem/data-absent-reason",
            o.data_absent_reason,
            DATA_ABSENT_REASONS[o.data_absent_reason],
        )
    if o.interpretation is not None:
        known = INTERPRETATIONS.get(o.interpretation.strip().lower())
        if known is None:
            body["interpretation"] = [{"text": o.interpretation}]
        else:
            body["interpretation"] = [
                {
                    **_fixed("http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation", *known),
                    "text": o.interpretation,
                }
            ]
    if o.low is not None or o.high is not None or o.range_text is not None:
        rng: dict[str, Any] = {}
        if o.low is not None:
            rng["low"] = _quantity(o.low, o.unit)
        if o.high is not None:
            rng["high"] = _quantity(o.high, o.unit)
        if o.range_text is not None:
            rng["text"] = o.range_text
        body["referenceRange"] = [rng]


def bundle_bytes(bundle: dict[str, Any]) -> bytes:
    """The bundle as compact UTF-8 JSON, keys in the builders' fixed order: the same bundle, the same bytes."""
    return _json.dumps(bundle)


# ------------------------------------------------------------------------------------------------- record types


def op_consult(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    practitioner: People = None,
    encounter: Encounter | None = None,
    chief_complaints: Sequence[Condition] = (),
    physical_examination: Sequence[Observation] = (),
    allergies: Sequence[Allergy] = (),
    medical_history: Sequence[Condition | Procedure] = (),
    family_history: Sequence[FamilyHistory] = (),
    investigation_advice: Sequence[Investigation] = (),
    medications: Sequence[Medication] = (),
    medication_history: Sequence[MedicationHistory] = (),
    procedures: Sequence[Procedure] = (),
    follow_up: Sequence[FollowUp] = (),
    referral: Sequence[Investigation] = (),
    documents: Sequence[Document] = (),
    title: str | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """An OP consultation (``OPConsultRecord``, SNOMED CT 371530004): the visit's encounter (ambulatory unless
    given) and the guide's sections, each written when it has entries: chief complaints, physical examination,
    allergies, medical history, family history, investigation advice, medications, procedures, follow-up,
    referral, documents. At least one section must have an entry. The medications section holds the medication
    history (``medication_history``: MedicationStatements, first) and the medicines prescribed (MedicationRequests),
    as the 6.5.0 profile's ``Medications`` slice allows both. (DischargeSummaryRecord 6.5.0 allows
    MedicationRequests only there, so :func:`discharge_summary` takes no medication history.)

    Judgement call: the referral section (306206005) is the guide's later ``Referral`` slice; see the module.
    """
    doc = _Doc(RecordType.OP_CONSULT, care_context_id, namespace, date, patient, organization, practitioner)
    doc.add_encounter(encounter, "ambulatory")
    t = _OP_SECTIONS
    sections = [
        _named(
            t,
            "ChiefComplaints",
            [
                doc.condition("chief-complaints", i, c)
                for i, c in enumerate(_items(chief_complaints, Condition, "chief_complaints"))
            ],
        ),
        _named(
            t,
            "PhysicalExamination",
            [
                doc.observation("physical-examination", i, o)
                for i, o in enumerate(_items(physical_examination, Observation, "physical_examination"))
            ],
        ),
        _named(
            t,
            "Allergies",
            [doc.allergy("allergies", i, a) for i, a in enumerate(_items(allergies, Allergy, "allergies"))],
        ),
        _named(t, "MedicalHistory", _history(doc, medical_history)),
        _named(
            t,
            "FamilyHistory",
            [
                doc.family_history("family-history", i, f)
                for i, f in enumerate(_items(family_history, FamilyHistory, "family_history"))
            ],
        ),
        _named(
            t,
            "InvestigationAdvice",
            [
                doc.service_request("investigation-advice", i, s)
                for i, s in enumerate(_items(investigation_advice, Investigation, "investigation_advice"))
            ],
        ),
        _named(
            t,
            "Medications",
            [
                doc.medication_statement("medication-history", i, m)
                for i, m in enumerate(_items(medication_history, MedicationHistory, "medication_history"))
            ]
            + [
                doc.medication_request("medications", i, m)
                for i, m in enumerate(_items(medications, Medication, "medications"))
            ],
        ),
        _named(
            t,
            "Procedure",
            [doc.procedure("procedures", i, p) for i, p in enumerate(_items(procedures, Procedure, "procedures"))],
        ),
        _named(
            t,
            "FollowUp",
            [doc.appointment("follow-up", i, f) for i, f in enumerate(_items(follow_up, FollowUp, "follow_up"))],
        ),
        _named(
            t,
            "Referral",
            [doc.service_request("referral", i, s) for i, s in enumerate(_items(referral, Investigation, "referral"))],
        ),
        _named(
            t,
            "DocumentReference",
            [
                doc.document_reference("documents", i, d, "Consultation document")
                for i, d in enumerate(_items(documents, Document, "documents"))
            ],
        ),
    ]
    return doc.finish(sections, title, timestamp)


def _history(doc: _Doc, items: Sequence[Condition | Procedure]) -> list[dict[str, str]]:
    out = []
    for i, item in enumerate(_items(items, (Condition, Procedure), "medical_history")):
        if isinstance(item, Condition):
            out.append(doc.condition("medical-history", i, item))
        else:
            out.append(doc.procedure("medical-history", i, item))
    return out


def prescription(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    medications: Sequence[Medication],
    practitioner: People = None,
    prescription_file: Document | None = None,
    title: str | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """A prescription (``PrescriptionRecord``, SNOMED CT 440545006): one section of MedicationRequests and, when
    given, the prescription's file as a Binary (the profile's one section allows both)."""
    doc = _Doc(RecordType.PRESCRIPTION, care_context_id, namespace, date, patient, organization, practitioner)
    refs = [
        doc.medication_request("medications", i, m)
        for i, m in enumerate(_items(medications, Medication, "medications"))
    ]
    if prescription_file is not None:
        if not isinstance(prescription_file, Document):
            raise InvalidArgumentType("prescription_file must be a fhir.Document")
        refs.append(
            doc.add(
                "file",
                0,
                "Binary",
                "Binary",
                {
                    "contentType": prescription_file.content_type,
                    "data": base64.b64encode(prescription_file.data).decode("ascii"),
                },
            )
        )
    section = _coded_section("Prescription record", "440545006", "Prescription record", refs, doc)
    return doc.finish([section], title, timestamp)


def _conclusion(value: object, field: str) -> None:
    """A report's conclusion: 1..1 in 6.5.0's DiagnosticReportLab and DiagnosticReportImaging, the caller's."""
    if value is None:
        raise InvalidRequest(f"{field} is required: the guide's profile requires the report's conclusion")
    if type(value) is not str:
        raise InvalidArgumentType(f"{field} must be a str")
    if not value.strip():
        raise InvalidRequest(f"{field} must not be empty")


def _report(
    kind: str,
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    practitioner: People,
    observations: Sequence[Observation],
    file: Document | None,
    conclusion: str | None,
    title: str,
    code: Coding | None,
    timestamp: When | None,
    namespace: uuid.UUID,
    specimen: Specimen | None = None,
    images: Sequence[Document] = (),
) -> dict[str, Any]:
    doc = _Doc(RecordType.DIAGNOSTIC_REPORT, care_context_id, namespace, date, patient, organization, practitioner)
    if file is not None and not isinstance(file, Document):
        raise InvalidArgumentType("the report's file must be a fhir.Document")
    check_coding(code, "code")
    if specimen is not None and not isinstance(specimen, Specimen):
        raise InvalidArgumentType("specimen must be a fhir.Specimen")
    obs = _items(observations, Observation, "observations")
    if not obs and file is None:
        raise InvalidRequest("a diagnostic report needs observations or a file (DiagnosticReport.result|presentedForm)")
    _conclusion(conclusion, "conclusion" if kind == "lab" else "text")
    category = "laboratory" if kind == "lab" else None
    results = [doc.observation("observation", i, o, category=category) for i, o in enumerate(obs)]
    pictures = _items(images, Document, "images")
    if kind == "imaging" and not pictures:  # 1..* in 6.5.0's DiagnosticReportImaging
        raise InvalidRequest(
            "images is required: the guide's profile requires the study's images (DiagnosticReport.media)"
        )
    sample = None if specimen is None else doc.specimen(specimen)
    media = [doc.media(i, p) for i, p in enumerate(pictures)]
    report = doc.diagnostic_report("report", kind, title, code, results, conclusion, file, sample, media)
    refs = [report]
    return doc.finish(
        [_coded_section(title, _DIAGNOSTIC_SECTION[0], _DIAGNOSTIC_SECTION[1], refs, doc)], title, timestamp
    )


def lab_report(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    observations: Sequence[Observation],
    practitioner: People = None,
    report_pdf: bytes | Document | None = None,
    conclusion: str | None = None,
    title: str = "Laboratory report",
    code: Coding | None = None,
    specimen: Specimen | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """A lab report (``DiagnosticReportRecord`` holding a ``DiagnosticReportLab``): one Observation per result
    (value and unit, reference range, interpretation, the caller's LOINC code), the report's PDF as its presented
    form (``report_pdf``: bytes of a PDF, or a :class:`Document` of another type), the date, the lab as performer
    and the practitioner as the results' interpreter. ``code``: the panel's code (e.g. LOINC 58410-2), else the
    title is its text.

    ``specimen``: the sample (a Specimen: its type, when collected and received), referenced from the report's
    ``specimen``.

    ``conclusion``: the report's conclusion or impression, as the lab wrote it. Required: 6.5.0's
    DiagnosticReportLab requires ``DiagnosticReport.conclusion`` (1..1), and it is clinical content the builder
    cannot make up, so its absence is an ``InvalidRequest`` naming ``conclusion`` (judgement call: the parameter
    keeps its ``None`` default so that a missing one is that ``InvalidRequest``, also through :class:`Record`,
    rather than Python's ``TypeError``). ``code``, when given, needs its display (the profile requires it).

    Judgement call: the one section is coded 721981007 "Diagnostic studies report" (6.5.0 requires a code and fixes
    none).
    """
    file = Document(report_pdf, title=title) if isinstance(report_pdf, (bytes, bytearray, memoryview)) else report_pdf
    return _report(
        "lab",
        care_context_id=care_context_id,
        patient=patient,
        organization=organization,
        date=date,
        practitioner=practitioner,
        observations=observations,
        file=file,
        conclusion=conclusion,
        title=title,
        code=code,
        timestamp=timestamp,
        namespace=namespace,
        specimen=specimen,
    )


def imaging_report(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    file: Document,
    text: str | None = None,
    images: Sequence[Document] = (),
    practitioner: People = None,
    observations: Sequence[Observation] = (),
    title: str = "Imaging report",
    code: Coding | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """An imaging report (``DiagnosticReportRecord`` holding a ``DiagnosticReportImaging``): the radiologist's text
    (``conclusion``), the report file as its presented form, the study's images (``images``: each a
    :class:`Document` such as a JPEG, written as a ``Media`` the report's ``media`` links to), optional measured
    findings as Observations, and the study's code when given, with its display (e.g. LOINC 36643-5 "XR Chest 2
    Views").

    ``text`` and ``images`` are required: 6.5.0's DiagnosticReportImaging requires ``conclusion`` (1..1) and
    ``media`` (1..*); both are the caller's, so their absence is an ``InvalidRequest`` naming the field.
    """
    return _report(
        "imaging",
        care_context_id=care_context_id,
        patient=patient,
        organization=organization,
        date=date,
        practitioner=practitioner,
        observations=observations,
        file=file,
        conclusion=text,
        title=title,
        code=code,
        timestamp=timestamp,
        namespace=namespace,
        images=images,
    )


def discharge_summary(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    practitioner: People = None,
    encounter: Encounter | None = None,
    chief_complaints: Sequence[Condition] = (),
    physical_examination: Sequence[Observation] = (),
    allergies: Sequence[Allergy] = (),
    medical_history: Sequence[Condition | Procedure] = (),
    family_history: Sequence[FamilyHistory] = (),
    investigations: Sequence[Observation] = (),
    investigations_conclusion: str | None = None,
    medications: Sequence[Medication] = (),
    procedures: Sequence[Procedure] = (),
    care_plan: str | None = None,
    documents: Sequence[Document] = (),
    title: str | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """A discharge summary (``DischargeSummaryRecord``, SNOMED CT 373942005): the stay's encounter (inpatient unless
    given) and the guide's sections: chief complaints, physical examination, allergies, medical history, family
    history, investigations (the results, in one lab DiagnosticReport), medications, procedures, the care plan
    (text, a CarePlan) and documents.

    ``investigations_conclusion``: the conclusion of the investigations' report, required with ``investigations``:
    the section holds DiagnosticReportLab (6.5.0), which requires ``conclusion`` (1..1); the builder does not make
    one up, so ``investigations`` without it is an ``InvalidRequest`` naming ``investigations_conclusion``.
    """
    doc = _Doc(RecordType.DISCHARGE_SUMMARY, care_context_id, namespace, date, patient, organization, practitioner)
    doc.add_encounter(encounter, "inpatient")
    t = _DS_SECTIONS
    results = [
        doc.observation("investigations", i, o, category="laboratory")
        for i, o in enumerate(_items(investigations, Observation, "investigations"))
    ]
    if results:
        _conclusion(investigations_conclusion, "investigations_conclusion")
    sections = [
        _named(
            t,
            "ChiefComplaints",
            [
                doc.condition("chief-complaints", i, c)
                for i, c in enumerate(_items(chief_complaints, Condition, "chief_complaints"))
            ],
        ),
        _named(
            t,
            "PhysicalExamination",
            [
                doc.observation("physical-examination", i, o)
                for i, o in enumerate(_items(physical_examination, Observation, "physical_examination"))
            ],
        ),
        _named(
            t,
            "Allergies",
            [doc.allergy("allergies", i, a) for i, a in enumerate(_items(allergies, Allergy, "allergies"))],
        ),
        _named(t, "MedicalHistory", _history(doc, medical_history)),
        _named(
            t,
            "FamilyHistory",
            [
                doc.family_history("family-history", i, f)
                for i, f in enumerate(_items(family_history, FamilyHistory, "family_history"))
            ],
        ),
        _named(
            t,
            "Investigations",
            [
                doc.diagnostic_report(
                    "investigations-report", "lab", "Investigations", None, results, investigations_conclusion, None
                )
            ]
            if results
            else [],
        ),
        _named(
            t,
            "Medications",
            [
                doc.medication_request("medications", i, m)
                for i, m in enumerate(_items(medications, Medication, "medications"))
            ],
        ),
        _named(
            t,
            "Procedures",
            [doc.procedure("procedures", i, p) for i, p in enumerate(_items(procedures, Procedure, "procedures"))],
        ),
        _named(t, "CarePlan", [_care_plan(doc, care_plan)] if care_plan is not None else []),
        _named(
            t,
            "DocumentReference",
            [
                doc.document_reference("documents", i, d, "Discharge summary document")
                for i, d in enumerate(_items(documents, Document, "documents"))
            ],
        ),
    ]
    return doc.finish(sections, title, timestamp)


def _care_plan(doc: _Doc, text: str) -> dict[str, str]:
    if type(text) is not str or not text.strip():
        raise InvalidRequest("care_plan must be a non-empty str")
    body = {"status": "active", "intent": "plan", "description": text, "subject": doc.patient}
    return doc.add("care-plan", 0, "CarePlan", "CarePlan", body)


def immunization_record(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    immunizations: Sequence[Immunization],
    practitioner: People = None,
    recommendations: Sequence[VaccineDue] = (),
    documents: Sequence[Document] = (),
    title: str | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """An immunization record (``ImmunizationRecord``, SNOMED CT 41000179103): one Immunization per vaccine given
    (the vaccine, its date, the dose number, the lot) and, when given, documents (e.g. the vaccination
    certificate), in the profile's one section. ``recommendations``: the vaccines due next (:class:`VaccineDue`), in
    one ImmunizationRecommendation (the 6.5.0 slice allows one), each ``forecastStatus`` "due" with its date as LOINC
    30980-7 "Date vaccine due" (as the guide's example writes it), supported by the immunizations given here."""
    doc = _Doc(RecordType.IMMUNIZATION, care_context_id, namespace, date, patient, organization, practitioner)
    refs = []
    for i, im in enumerate(_items(immunizations, Immunization, "immunizations")):
        body: dict[str, Any] = {
            "status": "completed",
            "vaccineCode": _concept(im.vaccine, im.code),
            "patient": doc.patient,
            "occurrenceDateTime": _datetime(im.date),
            "primarySource": True,
        }
        if im.lot_number is not None:
            body["lotNumber"] = im.lot_number
        body["performer"] = [{"actor": a} for a in doc.author]
        if im.dose_number is not None:
            body["protocolApplied"] = [{"doseNumberPositiveInt": im.dose_number}]
        refs.append(doc.add("immunization", i, "Immunization", "Immunization", body))
    due = _items(recommendations, VaccineDue, "recommendations")
    if due:
        refs.append(_recommendation(doc, due, refs))
    refs += [
        doc.document_reference("documents", i, d, "Immunization document")
        for i, d in enumerate(_items(documents, Document, "documents"))
    ]
    section = _coded_section("Immunization record", "41000179103", "Immunization record", refs, doc)
    return doc.finish([section], title, timestamp)


def _recommendation(doc: _Doc, due: tuple[VaccineDue, ...], given: list[dict[str, str]]) -> dict[str, str]:
    recs = []
    for v in due:
        rec: dict[str, Any] = {
            "vaccineCode": [_concept(v.vaccine, v.code)],
            "forecastStatus": _fixed(
                "http://terminology.hl7.org/CodeSystem/immunization-recommendation-status", "due", "Due"
            ),
            "dateCriterion": [{"code": _fixed(LOINC, "30980-7", "Date vaccine due"), "value": _datetime(v.due)}],
        }
        if v.dose_number is not None:
            rec["doseNumberPositiveInt"] = v.dose_number
        if given:
            rec["supportingImmunization"] = given[:]
        recs.append(rec)
    body = {
        "patient": doc.patient,
        "date": doc.date_text,
        "authority": doc.organization,
        "recommendation": recs,
    }
    return doc.add("immunization-recommendation", 0, "ImmunizationRecommendation", "ImmunizationRecommendation", body)


def wellness_record(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    practitioner: People = None,
    vital_signs: Sequence[Observation] = (),
    body_measurements: Sequence[Observation] = (),
    physical_activity: Sequence[Observation] = (),
    general_assessment: Sequence[Observation] = (),
    women_health: Sequence[Observation] = (),
    lifestyle: Sequence[Observation] = (),
    other_observations: Sequence[Observation] = (),
    documents: Sequence[Document] = (),
    title: str | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """A wellness record (``WellnessRecord``): the guide's sections, recognised by their fixed titles (the profile
    gives them no code): vital signs, body measurements, physical activity, general assessment, women's health,
    lifestyle, other observations, documents. Each Observation carries ``Observation`` and the section's Observation
    profile (``ObservationVitalSigns``, ...) in ``meta.profile``, as the guide's 6.5.0 example does.

    A blood pressure is one Observation with two components: :meth:`Observation.blood_pressure` (LOINC 85354-9 with
    8480-6 systolic and 8462-4 diastolic, as FHIR's vital-signs profile writes it).
    """
    doc = _Doc(RecordType.WELLNESS, care_context_id, namespace, date, patient, organization, practitioner)
    given = {
        "VitalSigns": vital_signs,
        "BodyMeasurement": body_measurements,
        "PhysicalActivity": physical_activity,
        "GeneralAssessment": general_assessment,
        "WomenHealth": women_health,
        "Lifestyle": lifestyle,
        "OtherObservations": other_observations,
    }
    sections = []
    for name, items in given.items():
        section_title, extra = _WELLNESS[name]
        role = name.lower()
        category = "vital-signs" if name == "VitalSigns" else None
        refs = [
            doc.observation(role, i, o, category, extra) for i, o in enumerate(_items(items, Observation, _snake(name)))
        ]
        sections.append(_coded_section(section_title, None, "", refs))
    refs = [
        doc.document_reference("documents", i, d, "Wellness document")
        for i, d in enumerate(_items(documents, Document, "documents"))
    ]
    sections.append(_coded_section("Document Reference", None, "", refs))
    return doc.finish(sections, title, timestamp)


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def health_document(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    documents: Sequence[Document] | Document,
    practitioner: People = None,
    title: str | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """A health document (``HealthDocumentRecord``, SNOMED CT 419891008 "Record artifact"): one or more files (a
    PDF, a scan) as DocumentReferences, each with its title and, when given, the code of its type."""
    doc = _Doc(RecordType.HEALTH_DOCUMENT, care_context_id, namespace, date, patient, organization, practitioner)
    docs = (documents,) if isinstance(documents, Document) else _items(documents, Document, "documents")
    refs = [doc.document_reference("documents", i, d, "Health document") for i, d in enumerate(docs)]
    section = _coded_section(title or "Health Document", "419891008", "Record artifact", refs)
    return doc.finish([section], title, timestamp)


def invoice_record(
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    date: When,
    invoice_number: str,
    invoice_type: str,
    items: Sequence[InvoiceItem],
    total_net: int | float,
    total_gross: int | float,
    currency: str = "INR",
    practitioner: People = None,
    title: str | None = None,
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """An invoice (``InvoiceRecord``, Composition ``type.text`` "Invoice Record" as its profile fixes): one Invoice
    (``invoice_number`` its identifier, ``invoice_type`` the guide's billing code of the bill: ``consultation``,
    ``pharmacy``, ``ipd``, ``opd``, ``others``; issued by the organization on ``date``) with one line item per
    :class:`InvoiceItem`, each referencing its ChargeItem (the item's billing code, quantity and product) and
    carrying its price components; the totals as given, in ``currency`` (default ``INR``).

    Judgement call: ``total_net`` and ``total_gross`` (1..1 each) are the bill's own printed totals, not computed
    from the price components: how a bill adds taxes and discounts is the bill's, not the builder's. The profile's
    one section holds the Invoice only, as in the guide's example (the ChargeItems are reached from it).
    """
    doc = _Doc(RecordType.INVOICE, care_context_id, namespace, date, patient, organization, practitioner)
    if type(invoice_number) is not str or not invoice_number.strip():
        raise InvalidRequest("invoice_number must be a non-empty str")
    if invoice_type not in INVOICE_TYPES:
        raise InvalidRequest(f"invoice_type must be one of {', '.join(INVOICE_TYPES)}")
    if type(currency) is not str or len(currency) != 3 or not currency.isascii() or not currency.isupper():
        raise InvalidRequest("currency must be an ISO 4217 code (e.g. INR)")
    totals = {}
    for name, value in (("total_net", total_net), ("total_gross", total_gross)):
        if type(value) is bool or not isinstance(value, (int, float)):
            raise InvalidArgumentType(f"{name} must be an int or a float")
        if value != value or value in (float("inf"), float("-inf")) or value < 0:
            raise InvalidRequest(f"{name} must be a finite, non-negative number")
        totals[name] = {"value": value, "currency": currency}
    lines = _items(items, InvoiceItem, "items")
    if not lines:
        raise InvalidRequest("items needs at least one fhir.InvoiceItem (Invoice.lineItem 1..*)")
    actors = [{"actor": a} for a in doc.author]
    line_items = []
    for i, item in enumerate(lines):
        quantity: dict[str, Any] = {"value": item.quantity}
        if item.unit is not None:
            quantity["unit"] = item.unit
        charge = doc.add(
            "charge-item",
            i,
            "ChargeItem",
            "ChargeItem",
            {
                "status": "billed",
                "code": _fixed(_NDHM_CS + "ndhm-billing-codes", *BILLING_CODES[item.category]),
                "subject": doc.patient,
                "occurrenceDateTime": doc.date_text,
                "performer": actors,
                "quantity": quantity,
                "productCodeableConcept": _concept(item.text, item.code),
            },
        )
        prices = []
        for p in item.prices:
            code, display, kind = PRICE_COMPONENTS[p.kind]
            prices.append(
                {
                    "type": kind,
                    "code": _fixed(_NDHM_CS + "ndhm-price-components", code, display),
                    "amount": {"value": p.amount, "currency": currency},
                }
            )
        line_items.append({"sequence": i + 1, "chargeItemReference": charge, "priceComponent": prices})
    invoice = doc.add(
        "invoice",
        0,
        "Invoice",
        "Invoice",
        {
            "identifier": [{"value": invoice_number}],
            "status": "issued",
            "type": _fixed(_NDHM_CS + "ndhm-billing-codes", *BILLING_CODES[invoice_type]),
            "subject": doc.patient,
            "date": doc.date_text,
            "participant": actors,
            "issuer": doc.organization,
            "lineItem": line_items,
            "totalNet": totals["total_net"],
            "totalGross": totals["total_gross"],
        },
    )
    section = _coded_section("Invoice", None, "", [invoice], doc)
    return doc.finish([section], title, timestamp)


# ------------------------------------------------------------------------------------------------- processing results


def from_processing_result(
    result: ProcessingResult | SmartReport,
    *,
    care_context_id: str,
    patient: Patient,
    organization: Organization,
    conclusion: str | None = None,
    loinc_displays: Mapping[str, str] | None = None,
    practitioner: People = None,
    original_file: bytes | None = None,
    content_type: str = "application/pdf",
    date: When | None = None,
    include_unverified: bool = False,
    title: str = "Laboratory report",
    timestamp: When | None = None,
    namespace: uuid.UUID = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """A records-service result to a lab report (:func:`lab_report`): each extracted test an Observation (its name,
    value, unit, the report's range, its LOINC code when the service found one and its display is known), the
    original file as the report's presented form when given, the report's date.

    ``conclusion``: the report's conclusion, required as in :func:`lab_report` (the guide requires it; a result
    carries none, and the builder does not write one): without it, an ``InvalidRequest`` naming ``conclusion``.

    ``loinc_displays``: LOINC's display of a code (``{"718-7": "Hemoglobin [Mass/volume] in Blood"}``). The guide
    requires the display of every LOINC coding and a result gives the code only; judgement call: a test whose code's
    display is not given here is written with its name as the code's text and no coding (the service's test name is
    not LOINC's display, and a coding without one would not validate).

    ``result`` is a :class:`~health_async.models.ProcessingResult` (its ``tests``) or a document's
    :class:`~health_async.models.SmartReport` (its ``verified`` items; ``include_unverified=True`` adds the
    others, each with the flag the service printed as its interpretation).

    ``date``: default the document date of the result's PII block (``DocumentDate``, an epoch); a ``ValueError``
    when there is none.

    Judgement call: a ``ProcessingResult`` has no verified flag nor printed flag; all its tests are taken and no
    interpretation is computed from the range (that would be a clinical judgement the report did not make).
    Judgement call: a value that is not a plain number (``"<0.5"``) is kept as text (``valueString``).
    """
    found: list[Observation | None]
    if isinstance(result, ProcessingResult):
        displays = dict(loinc_displays or {})
        found = [_from_test(t, displays) for t in result.tests]
        if date is None:
            date = _pii_date(result)
    elif isinstance(result, SmartReport):
        items = result.items if include_unverified else result.verified
        found = [_from_item(i) for i in items]
    else:
        raise InvalidArgumentType("result must be a ProcessingResult or a SmartReport")
    if date is None:
        raise InvalidRequest("no date: pass date= (the result's PII block has no DocumentDate)")
    observations = [o for o in found if o is not None]
    if not observations:
        raise InvalidRequest("the result has no test to report")
    file = None if original_file is None else Document(original_file, content_type=content_type, title=title)
    return lab_report(
        care_context_id=care_context_id,
        patient=patient,
        organization=organization,
        date=date,
        observations=observations,
        practitioner=practitioner,
        report_pdf=file,
        conclusion=conclusion,
        title=title,
        timestamp=timestamp,
        namespace=namespace,
    )


def _plain_number(text: str | None) -> float | int | None:
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    if number != number or number in (float("inf"), float("-inf")):
        return None
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def _from_test(test: Any, displays: Mapping[str, str]) -> Observation | None:
    if not test.name or not test.name.strip():
        return None
    number = _plain_number(test.value)
    rng = test.range
    value: int | float | str | None = number if number is not None else ((test.value or "").strip() or None)
    low, high = _range(rng.low if rng is not None else None, rng.high if rng is not None else None)
    return Observation(
        test.name.strip(),
        value=value,
        unit=((test.unit_processed or test.unit) or None) if value is not None else None,
        low=low,
        high=high,
        range_text=test.display_range or None,
        code=Coding.loinc(test.loinc_id, displays[test.loinc_id]) if test.loinc_id in displays else None,
    )


def _from_item(item: ReportItem) -> Observation | None:
    if not item.name or not item.name.strip():
        return None
    number = _plain_number(item.value)
    low = high = None
    if item.range:
        parts = item.range.split("-")
        if len(parts) == 2:
            low, high = _plain_number(parts[0].strip()), _plain_number(parts[1].strip())
    flag = item.flag
    interpretation = None if flag.name in ("UNKNOWN", "UNDETERMINED") else flag.label
    value = number if number is not None else ((item.value or "").strip() or None)
    low, high = _range(low, high)
    return Observation(
        item.name.strip(),
        value=value,
        unit=(item.unit or None) if value is not None else None,
        low=low,
        high=high,
        range_text=item.range or None,
        interpretation=interpretation,
        date=epoch_datetime(item.date) if item.date is not None else None,
    )


def _range(low: float | int | None, high: float | int | None) -> tuple[float | int | None, float | int | None]:
    """A service's range as bounds; judgement call: an inverted one (low above high) is not a range the report can
    mean, so its bounds are dropped (its printed text is kept) rather than the whole result refused."""
    if low is not None and high is not None and low > high:
        return None, None
    return low, high


def _pii_date(result: ProcessingResult) -> dt.datetime | None:
    pii = result.pii
    if not pii:
        return None
    for pages in pii.values():
        for page in pages if isinstance(pages, list) else ():
            if isinstance(page, dict) and page.get("DocumentDate") is not None:
                return epoch_datetime(page["DocumentDate"])
    return None
