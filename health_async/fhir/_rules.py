"""The codes the builders write (``_build.py``): each record type's ``Composition.type`` and each named section's
code, as declarations naming the guide's text they come from.

The guide is "FHIR Implementation Guide for ABDM" (NRCeS, https://nrces.in/ndhm/fhir/r4/). The sources below name
its StructureDefinitions (``StructureDefinition-<name>``) and elements (``Composition.section:ChiefComplaints``),
read from the guide's published package ``ndhm.in`` 2.0.1 (provenance in ``tests/data/fhir/README.md``).

The validator no longer reads these: its profile rules are generated from the guide's own packages (``_ig.py``,
``tools/fhir_ig_profiles.py``) and interpreted by ``_profiles.py``. ``tests/fhir/test_profiles.py`` checks that
every code here is the one the generated 2.0.1 tables fix.
"""

from __future__ import annotations

from typing import Final

import attrs

from ._types import RecordType

__all__ = ["COMPOSITION_TYPES", "SECTION_RULES", "CompositionType", "SectionRule"]

SNOMED: Final = "http://snomed.info/sct"


@attrs.frozen
class CompositionType:
    """``Composition.type`` of a record type: a SNOMED CT code (fixed by the profile), or ``None`` if not fixed."""

    rule: str
    record_type: RecordType
    code: str | None
    source: str


@attrs.frozen
class SectionRule:
    """A named section of a multi-section profile: how it is recognised (SNOMED code or title), what it may hold."""

    rule: str
    record_type: RecordType
    name: str
    code: str | None
    title: str | None
    allowed: frozenset[str]
    source: str


def _sd(name: str, element: str) -> str:
    return f"StructureDefinition-{name}: {element}"


COMPOSITION_TYPES: Final = (
    CompositionType(
        "op-consult.type",
        RecordType.OP_CONSULT,
        "371530004",
        _sd("OPConsultRecord", "Composition.type.coding.code fixed 371530004"),
    ),
    CompositionType(
        "prescription.type",
        RecordType.PRESCRIPTION,
        "440545006",
        _sd("PrescriptionRecord", "Composition.type.coding.code fixed 440545006"),
    ),
    CompositionType(
        "discharge-summary.type",
        RecordType.DISCHARGE_SUMMARY,
        "373942005",
        _sd("DischargeSummaryRecord", "Composition.type.coding.code fixed 373942005"),
    ),
    CompositionType(
        "immunization.type",
        RecordType.IMMUNIZATION,
        "41000179103",
        _sd("ImmunizationRecord", "Composition.type.coding.code fixed 41000179103"),
    ),
    CompositionType(
        "health-document.type",
        RecordType.HEALTH_DOCUMENT,
        "419891008",
        _sd("HealthDocumentRecord", "Composition.type.coding.code fixed 419891008"),
    ),
    CompositionType(
        "diagnostic-report.type",
        RecordType.DIAGNOSTIC_REPORT,
        None,
        _sd("DiagnosticReportRecord", "Composition.type.coding.code 1..1, not fixed"),
    ),
    CompositionType(
        "wellness.type", RecordType.WELLNESS, None, _sd("WellnessRecord", "Composition.type not constrained")
    ),
)


def _op(name: str, code: str, *allowed: str) -> SectionRule:
    return SectionRule(
        f"op-consult.section.{name}",
        RecordType.OP_CONSULT,
        name,
        code,
        None,
        frozenset(allowed),
        _sd("OPConsultRecord", f"Composition.section:{name} (code {code}), entry Reference({' | '.join(allowed)})"),
    )


def _ds(name: str, code: str, *allowed: str) -> SectionRule:
    return SectionRule(
        f"discharge-summary.section.{name}",
        RecordType.DISCHARGE_SUMMARY,
        name,
        code,
        None,
        frozenset(allowed),
        _sd(
            "DischargeSummaryRecord",
            f"Composition.section:{name} (code {code}), entry Reference({' | '.join(allowed)})",
        ),
    )


def _wellness(name: str, title: str, *allowed: str) -> SectionRule:
    return SectionRule(
        f"wellness.section.{name}",
        RecordType.WELLNESS,
        name,
        None,
        title,
        frozenset(allowed),
        _sd(
            "WellnessRecord",
            f"Composition.section:{name} (title fixed {title!r}), entry Reference({' | '.join(allowed)})",
        ),
    )


#: Judgement call: the guide's wellness sections reference Observation profiles (ObservationVitalSigns, ...);
#: they are checked here as their base type, Observation.
SECTION_RULES: Final = (
    _op("ChiefComplaints", "422843007", "Condition"),
    _op("PhysicalExamination", "425044008", "Observation"),
    _op("Allergies", "722446000", "AllergyIntolerance"),
    _op("MedicalHistory", "371529009", "Condition", "Procedure"),
    _op("FamilyHistory", "422432008", "FamilyMemberHistory"),
    _op("InvestigationAdvice", "721963009", "ServiceRequest"),
    _op("Medications", "721912009", "MedicationStatement", "MedicationRequest"),
    _op("FollowUp", "736271009", "Appointment"),
    _op("Procedure", "371525003", "Procedure"),
    _op("DocumentReference", "371530004", "DocumentReference"),
    _ds("ChiefComplaints", "422843007", "Condition"),
    _ds("PhysicalExamination", "425044008", "Observation"),
    _ds("Allergies", "722446000", "AllergyIntolerance"),
    _ds("MedicalHistory", "1003642006", "Condition", "Procedure"),
    _ds("FamilyHistory", "422432008", "FamilyMemberHistory"),
    _ds("Investigations", "721981007", "DiagnosticReport"),
    _ds("Medications", "1003606003", "MedicationRequest"),
    _ds("Procedures", "1003640003", "Procedure"),
    _ds("CarePlan", "734163000", "CarePlan"),
    _ds("DocumentReference", "373942005", "DocumentReference"),
    _wellness("VitalSigns", "Vital Signs", "Observation"),
    _wellness("BodyMeasurement", "Body Measurement", "Observation"),
    _wellness("PhysicalActivity", "Physical Activity", "Observation"),
    _wellness("GeneralAssessment", "General Assessment", "Observation"),
    _wellness("WomenHealth", "Women Health", "Observation"),
    _wellness("Lifestyle", "Lifestyle", "Observation"),
    _wellness("OtherObservations", "Other Observations", "Observation", "Condition"),
    _wellness("DocumentReference", "Document Reference", "DocumentReference"),
)
