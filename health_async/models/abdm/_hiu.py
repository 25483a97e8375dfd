"""The requester's (HIU's) side: the health data received, decrypted, and the parsing status sent back.

The pushed data itself arrives typed as :class:`~health_async.models.HiuDataPush` (``models/abdm/_events.py``,
the ``abha.hiu_data_push`` webhook); :meth:`client.abdm.decrypt_health_data
<health_async.resources.Abdm.decrypt_health_data>` turns it into :class:`ReceivedBundle` items, and
:meth:`client.abdm.acknowledge_health_data <health_async.resources.Abdm.acknowledge_health_data>` sends one
:class:`HealthDataStatus` per care context (wire ``RecordsStatusResponse`` of ``registration.yml``).

Health data (the bundles) never appears in a ``repr``; nor does a status's free-text description.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["HealthDataStatus", "ReceivedBundle"]


@attrs.frozen
class ReceivedBundle:
    """One care context's FHIR bundle, decrypted from a data push and its checksum checked."""

    #: The care context's reference at the HIP (wire ``care_context_id`` of the entry).
    care_context_id: str
    #: The FHIR bundle (the decrypted JSON object). Health data: hidden from ``repr``.
    bundle: dict[str, Any] = attrs.field(repr=False)
    #: The entry's media type as sent (``"application/fhir+json"``), or ``None``.
    media: str | None = None


@attrs.frozen
class HealthDataStatus:
    """How reading one care context of a push went: what :meth:`client.abdm.acknowledge_health_data
    <health_async.resources.Abdm.acknowledge_health_data>` reports (wire ``RecordsStatusResponse``)."""

    #: The care context's reference (as in the push).
    care_context_id: str
    #: Whether its FHIR data was received and parsed.
    success: bool
    #: Why it failed (or a note); free text, hidden from ``repr``. Do not put health data in it.
    description: str | None = attrs.field(default=None, repr=False)
