"""The eight ABDM document profiles of the NRCeS implementation guide (FHIR R4), and their codes.

Each record type is a FHIR ``document`` Bundle whose first entry is a Composition of the profile's type. The
values are the profiles' names, exactly as the guide spells them (``meta.profile`` ends with them).
"""

from __future__ import annotations

import enum
from typing import Final

from ..models.records._cases import HiType

__all__ = ["NRCES_PROFILE_BASE", "RecordType"]

#: The canonical base of the guide's StructureDefinitions: a profile's URL is this plus its name.
NRCES_PROFILE_BASE: Final = "https://nrces.in/ndhm/fhir/r4/StructureDefinition/"


class RecordType(enum.StrEnum):
    """An ABDM record (document) type: the NRCeS profile of the Bundle. Members are strings."""

    OP_CONSULT = "OPConsultRecord"
    PRESCRIPTION = "PrescriptionRecord"
    DIAGNOSTIC_REPORT = "DiagnosticReportRecord"
    DISCHARGE_SUMMARY = "DischargeSummaryRecord"
    IMMUNIZATION = "ImmunizationRecord"
    WELLNESS = "WellnessRecord"
    HEALTH_DOCUMENT = "HealthDocumentRecord"
    INVOICE = "InvoiceRecord"

    @property
    def profile(self) -> str:
        """The guide's canonical URL of this document profile (the Bundle's ``meta.profile``)."""
        return NRCES_PROFILE_BASE + self.value

    @property
    def hi_type(self) -> HiType:
        """The ABDM health-information type a care context of this record type carries."""
        return _TO_HI_TYPE[self]

    @classmethod
    def from_hi_type(cls, hi_type: HiType | str) -> RecordType:
        """The record type of an ABDM health-information type (``HiType.DIAGNOSTIC_REPORT`` ->
        ``DIAGNOSTIC_REPORT``); ``ValueError`` for a value that is not one."""
        return _FROM_HI_TYPE[HiType(hi_type)]


_TO_HI_TYPE: Final = {
    RecordType.OP_CONSULT: HiType.OP_CONSULTATION,
    RecordType.PRESCRIPTION: HiType.PRESCRIPTION,
    RecordType.DIAGNOSTIC_REPORT: HiType.DIAGNOSTIC_REPORT,
    RecordType.DISCHARGE_SUMMARY: HiType.DISCHARGE_SUMMARY,
    RecordType.IMMUNIZATION: HiType.IMMUNIZATION_RECORD,
    RecordType.WELLNESS: HiType.WELLNESS_RECORD,
    RecordType.HEALTH_DOCUMENT: HiType.HEALTH_DOCUMENT_RECORD,
    RecordType.INVOICE: HiType.INVOICE,
}
_FROM_HI_TYPE: Final = {hi: record for record, hi in _TO_HI_TYPE.items()}
