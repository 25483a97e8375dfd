"""Models of cases (``/mr/api/v1/cases``) and of the presigned batch upload's answer (``POST /mr/api/v1/docs``).

Parsed by the hand-written hooks of :mod:`health_async._convert_records`. A case's name and its partner metadata
(which may carry a hospital id such as a UHID) are left out of ``repr``; the presigned storage forms (their URL
and signed fields are credentials) are never shown at all.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["Case", "CasePage", "HiType"]


class HiType(enum.StrEnum):
    """The health-information type of a case (wire ``hi_type``); members are strings, so either may be passed."""

    OP_CONSULTATION = "OPConsultation"
    PRESCRIPTION = "Prescription"
    DISCHARGE_SUMMARY = "DischargeSummary"
    DIAGNOSTIC_REPORT = "DiagnosticReport"
    IMMUNIZATION_RECORD = "ImmunizationRecord"
    HEALTH_DOCUMENT_RECORD = "HealthDocumentRecord"
    WELLNESS_RECORD = "WellnessRecord"


@attrs.frozen
class Case:
    """A case grouping a user's documents (an item of ``GET /mr/api/v1/cases``).

    A deleted case is still listed (so an incremental sync learns of the deletion), with :attr:`status` ``"D"``
    and no details.
    """

    #: The case id (wire ``id``).
    case_id: str
    #: ``"A"`` (active) or ``"D"`` (deleted); see :attr:`deleted`.
    status: str | None = None
    #: Last change as epoch seconds (wire ``updated_at``); the list is ordered by it.
    updated_at: int | None = None
    #: Human-readable name, e.g. ``"Leg Injury"`` (health data: hidden from ``repr``).
    display_name: str | None = attrs.field(default=None, repr=False)
    #: The partner's type code, e.g. ``"OP"`` (wire ``type``).
    case_type: str | None = None
    #: The health-information type (a :class:`HiType` value, or a newer one as sent).
    hi_type: str | None = None
    #: The partner's own metadata, e.g. ``{"uhid": ...}`` (hidden from ``repr``; read-only).
    partner_meta: Mapping[str, Any] | None = attrs.field(default=None, repr=False, hash=False)
    #: Creation time as epoch seconds.
    created_at: int | None = None
    #: When the event of the case happened, as epoch seconds.
    occurred_at: int | None = None

    @property
    def deleted(self) -> bool:
        """True for a deleted case (status ``"D"``)."""
        return self.status == "D"

    @property
    def occurred(self) -> dt.datetime | None:
        """:attr:`occurred_at` as an aware UTC datetime."""
        return None if self.occurred_at is None else dt.datetime.fromtimestamp(self.occurred_at, tz=dt.UTC)


@attrs.frozen
class CasePage:
    """One page of the case list; ``next_token`` is ``None`` on the last page."""

    items: tuple[Case, ...] = ()
    next_token: str | None = None


@attrs.frozen(repr=False)
class PresignedForm:
    """Where one file of a presigned upload goes: a storage URL and the signed form fields to post with it.

    Both are credentials (anyone holding them may write there until they expire): ``repr`` shows neither.
    Internal: not exported.
    """

    url: str
    fields: Mapping[str, str] = attrs.field(hash=False)

    def __repr__(self) -> str:
        return f"PresignedForm(url=<hidden>, fields=<{len(self.fields)} hidden>)"


@attrs.frozen
class PresignedEntry:
    """One entry of a presigned batch answer: the new document and a form per declared file, or the service's
    refusal (``error_code``, ``error_message``). Internal: not exported."""

    document_id: str | None = None
    forms: tuple[PresignedForm, ...] = ()
    error_code: str | None = None
    error_message: str | None = attrs.field(default=None, repr=False)

    @property
    def refused(self) -> bool:
        """True when the entry carries ``error_details``."""
        return self.error_code is not None or self.error_message is not None
