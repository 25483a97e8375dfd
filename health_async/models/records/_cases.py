"""Models of cases (``/mr/api/v1/cases``) and of the presigned batch upload's answer (``POST /mr/api/v1/docs``).

Wire names are declared beside the fields (:mod:`health_async._wire`). A case's name and its partner metadata
(which may carry a hospital id such as a UHID) are left out of ``repr``; the presigned storage forms (their URL
and signed fields are credentials) are never shown at all.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

import attrs

from ..._wire import Invalid, empty_is_none, epoch_datetime, non_empty, wire

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
    INVOICE = "Invoice"


@attrs.frozen
class Case:
    """A case grouping a user's documents (an item of ``GET /mr/api/v1/cases``).

    A deleted case is still listed (so an incremental sync learns of the deletion), with :attr:`status` ``"D"``
    and no details.
    """

    #: The case id.
    case_id: str = wire("id", parse=non_empty)
    #: ``"A"`` (active) or ``"D"`` (deleted); see :attr:`deleted`.
    status: str | None = None
    #: Last change as epoch seconds (wire ``updated_at``); the list is ordered by it.
    updated_at: int | None = None
    #: Human-readable name, e.g. ``"Leg Injury"`` (health data: hidden from ``repr``).
    display_name: str | None = wire("item.display_name", default=None, pii=True)
    #: The partner's type code, e.g. ``"OP"``.
    case_type: str | None = wire("item.type", default=None)
    #: The health-information type (a :class:`HiType` value, or a newer one as sent).
    hi_type: str | None = wire("item.hi_type", default=None)
    #: The partner's own metadata, e.g. ``{"uhid": ...}`` (hidden from ``repr``; read-only).
    partner_meta: Mapping[str, Any] | None = wire("item.partner_meta", default=None, pii=True, hash=False)
    #: Creation time as epoch seconds.
    created_at: int | None = wire("item.created_at", default=None)
    #: When the event of the case happened, as epoch seconds (as sent: see :attr:`occurred`).
    occurred_at: int | None = wire("item.occurred_at", default=None)

    @property
    def deleted(self) -> bool:
        """True for a deleted case (status ``"D"``)."""
        return self.status == "D"

    @property
    def occurred(self) -> dt.datetime | None:
        """:attr:`occurred_at` as an aware UTC datetime, by the library's rule for epochs (seconds, or milliseconds
        above ``100_000_000_000``: :func:`~health_async._wire.epoch_datetime`); ``None`` when absent or
        out of ``datetime``'s range (years 1 to 9999), never an error: the value stays as sent in
        :attr:`occurred_at`."""
        return epoch_datetime(self.occurred_at)


@attrs.frozen
class CasePage:
    """One page of the case list; ``next_token`` is ``None`` on the last page."""

    items: tuple[Case, ...] = wire("cases", default=())
    next_token: str | None = wire(parse=empty_is_none, default=None)


@attrs.frozen(repr=False)
class PresignedForm:
    """Where one file of a presigned upload goes: a storage URL and the signed form fields to post with it.

    Both are credentials (anyone holding them may write there until they expire): ``repr`` shows neither.
    Internal: not exported.
    """

    url: str = wire(parse=lambda value, label: _storage_url(value, label))
    fields: Mapping[str, str] = wire(parse=lambda value, label: _form_fields(value, label), factory=dict, hash=False)

    def __repr__(self) -> str:
        return f"PresignedForm(url=<hidden>, fields=<{len(self.fields)} hidden>)"


@attrs.frozen
class PresignedEntry:
    """One entry of a presigned batch answer: the new document and a form per declared file, or the service's
    refusal (``error_code``, ``error_message``). Internal: not exported."""

    document_id: str | None = wire(parse=empty_is_none, default=None)
    forms: tuple[PresignedForm, ...] = ()
    #: ``error_details.code``; ``"UNKNOWN"`` for an ``error_details`` object without detail (still a refusal).
    error_code: str | None = wire("error_details", parse=lambda value, label: _refusal_code(value, label), default=None)
    error_message: str | None = wire("error_details.message", default=None, pii=True)

    @property
    def refused(self) -> bool:
        """True when the entry carries ``error_details``."""
        return self.error_code is not None or self.error_message is not None


@attrs.frozen
class PresignedBatch:
    """The presigned batch answer (``{"batch_response": [...]}``): one entry per declared document, in request
    order. Internal: not exported."""

    entries: tuple[PresignedEntry, ...] = wire("batch_response", default=())


def _refusal_code(value: Any, label: str) -> str | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise Invalid(label)
    code, message = value.get("code"), value.get("message")
    if code is None:
        return None if message is not None else "UNKNOWN"
    if type(code) is str or type(code) is int:
        return str(code)
    raise Invalid(f"{label}.code")


def _storage_url(value: Any, label: str) -> str:
    if type(value) is not str or not value.startswith(("https://", "http://")):
        raise Invalid(label)
    return value


def _form_fields(value: Any, label: str) -> dict[str, str]:
    if value is None:
        return {}
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        raise Invalid(label)
    return dict(value)
