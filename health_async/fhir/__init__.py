"""FHIR records for ABDM: the seven NRCeS document types (:class:`RecordType`).

Needs neither the network nor the client: ``import health_async.fhir`` works on its own.
"""

from ._types import NRCES_PROFILE_BASE, RecordType

__all__ = ["NRCES_PROFILE_BASE", "RecordType"]
