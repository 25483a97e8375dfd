"""FHIR records for ABDM: the seven NRCeS document types (:class:`RecordType`), :func:`validate`, which checks a
document offline before it leaves, and :func:`read`, which turns any producer's document into a typed, tolerant
:class:`FhirRecord`.

Needs neither the network nor the client: ``import health_async.fhir`` works on its own.
"""

from ._read import (
    Attachment,
    ClinicalEntry,
    FhirDate,
    FhirRecord,
    MedicationInfo,
    ObservationValue,
    Party,
    PatientInfo,
    read,
)
from ._types import NRCES_PROFILE_BASE, RecordType
from ._validate import Problem, ValidationReport, validate

__all__ = [
    "NRCES_PROFILE_BASE",
    "Attachment",
    "ClinicalEntry",
    "FhirDate",
    "FhirRecord",
    "MedicationInfo",
    "ObservationValue",
    "Party",
    "PatientInfo",
    "Problem",
    "RecordType",
    "ValidationReport",
    "read",
    "validate",
]
