"""FHIR records for ABDM: the seven NRCeS document types (:class:`RecordType`) and :func:`validate`.

Needs neither the network nor the client: ``import health_async.fhir`` works on its own.
"""

from ._types import NRCES_PROFILE_BASE, RecordType
from ._validate import Problem, ValidationReport, validate

__all__ = ["NRCES_PROFILE_BASE", "Problem", "RecordType", "ValidationReport", "validate"]
