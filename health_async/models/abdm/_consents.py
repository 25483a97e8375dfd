"""Consents: requests, artefacts (purpose, hi types, period, expiry, status), the PIN and auto-approval.

Wire shapes from ``registration.yml``: ``ConsentCreateConsentRequest`` / ``ConsentCreateConsentResponse``
(``POST /abdm/v1/consents/create``), ``ConsentListConsentResponse`` / ``ConsentConsentDetail`` with
``CommonsPeriodWithExpiry`` (``/list``), ``ConsentConsentDetailResp`` / ``ConsentConsentDetailData`` /
``ConsentCareContextDetail`` / ``ConsentDocumentDetail`` (``/details``), ``ApproveRequest`` / ``ApproveConsent`` /
``CommonsCareContext`` / ``CommonsDuration`` (``/approve``), ``ExistResponse`` and ``InitResponseType3`` (the PIN),
``SettingsResponse`` (``/auto-approval``).

Enums read from the wire are tolerant (:class:`~health_async._wire.WireEnum`): a value this version does not
know is ``UNKNOWN``, never an error. Times are kept as the service sent them (ISO 8601 text) with a parsed
``*_at`` property beside each (``None`` when absent or not ISO 8601). Personal data stays out of ``repr``: the
ABHA address, a care context's display text (it says what the visit was), a document's FHIR URL, the mobile
number an OTP went to.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import ClassVar, Self

import attrs

from ..._wire import WireEnum, iso_instant, local, structure, wire
from ._hospital import CareContextStatus

__all__ = [
    "AutoApprovalPolicy",
    "AutoApprovalStatus",
    "Consent",
    "ConsentArtefact",
    "ConsentCareContext",
    "ConsentCreated",
    "ConsentDetails",
    "ConsentDocument",
    "ConsentHiType",
    "ConsentHip",
    "ConsentPeriod",
    "ConsentPurpose",
    "ConsentStatus",
    "PinOtpSent",
    "PinResetStep",
    "PinScope",
]


class ConsentPurpose(WireEnum):
    """Why an HIU asks for the records (the ``purpose`` enum of ``ConsentCreateConsentRequest``)."""

    SELF_REQUESTED = "Self Requested"
    CARE_MANAGEMENT = "Care management"
    PUBLIC_HEALTH = "Public Health"
    DISEASE_SPECIFIC_HEALTH_RESEARCH = "Disease Specific Health Research"
    UNKNOWN = "unknown"


class ConsentHiType(WireEnum):
    """A kind of health record a consent covers (``record_types`` / ``hi_types``). The same names as
    :class:`~health_async.models.HiType`, plus ``Invoice`` (the consent request's enum lists it); either enum, or
    the wire value as a ``str``, may be passed to the client."""

    OP_CONSULTATION = "OPConsultation"
    PRESCRIPTION = "Prescription"
    DISCHARGE_SUMMARY = "DischargeSummary"
    DIAGNOSTIC_REPORT = "DiagnosticReport"
    IMMUNIZATION_RECORD = "ImmunizationRecord"
    HEALTH_DOCUMENT_RECORD = "HealthDocumentRecord"
    WELLNESS_RECORD = "WellnessRecord"
    INVOICE = "Invoice"
    UNKNOWN = "unknown"


class ConsentStatus(WireEnum):
    """Where a consent stands. The list's ``status`` is a free string in the schema; ABDM's values are
    ``REQUESTED``, ``GRANTED``, ``DENIED``, ``REVOKED`` and ``EXPIRED`` (the requests API spells them in lower
    case: read without regard to case)."""

    REQUESTED = "requested"
    GRANTED = "granted"
    DENIED = "denied"
    REVOKED = "revoked"
    EXPIRED = "expired"
    UNKNOWN = "unknown"

    @classmethod
    def from_wire(cls, value: object) -> Self:
        """The member for a wire value, in any case; ``UNKNOWN`` for anything else."""
        return super().from_wire(value.lower() if isinstance(value, str) else value)


class AutoApprovalStatus(WireEnum):
    """Whether the patient's auto-approval policy is on (``SettingsResponse.status``)."""

    ENABLED = "enabled"
    DISABLED = "disabled"
    UNKNOWN = "unknown"


class PinScope(enum.Enum):
    """What a consent PIN check authorises (``VerifyRequestType4.scope``): the scopes of ABDM's consent manager."""

    #: Approve a consent request (what :meth:`~health_async.resources.Consents.approve` checks the PIN for).
    APPROVE = "consentrequest.approve"
    #: Revoke a granted consent (what :meth:`~health_async.resources.Consents.revoke` checks the PIN for).
    REVOKE = "consent.revoke"
    #: Change the PIN.
    CHANGE_PIN = "profile.changepin"


class PinResetStep(enum.Enum):
    """What a consent PIN reset (:class:`~health_async.resources.abdm._consent_pin.ConsentPinReset`) expects next; the
    value is what its state stores."""

    #: Type the OTP that was sent: ``verify_otp(otp)``.
    VERIFY_OTP = "verify_otp"
    #: The OTP matched: ``set_pin(new_pin)``.
    SET_PIN = "set_pin"
    #: Finished: the new PIN is set.
    DONE = "done"
    #: ABDM refused with a rate limit or a block: start a new reset after ``blocked_until``.
    BLOCKED = "blocked"


@attrs.frozen
class ConsentPeriod:
    """The date range of the records a consent covers and when the consent expires
    (``CommonsPeriodWithExpiry``), ISO 8601 as sent."""

    #: Wire ``from``: the oldest records covered.
    start: str | None = wire("from", default=None)
    #: Wire ``to``: the newest records covered.
    end: str | None = wire("to", default=None)
    #: When the consent stops being valid.
    expiry: str | None = None

    @property
    def start_at(self) -> dt.datetime | None:
        """:attr:`start` as an aware datetime."""
        return iso_instant(self.start)

    @property
    def end_at(self) -> dt.datetime | None:
        """:attr:`end` as an aware datetime."""
        return iso_instant(self.end)

    @property
    def expires_at(self) -> dt.datetime | None:
        """:attr:`expiry` as an aware datetime."""
        return iso_instant(self.expiry)


@attrs.frozen
class Consent:
    """A consent request an HIU made (an item of ``POST /abdm/v1/consents/list``, ``ConsentConsentDetail``).

    ``consent_init_id`` is what :meth:`~health_async.resources.Consents.create` answered; ``consent_id`` is ABDM's
    id of the request (``None`` until ABDM has acknowledged it): the id that ``details``, ``approve`` and
    ``deny`` take.
    """

    __wire_lenient__: ClassVar[bool] = True  # a listed consent is never lost to one side field

    consent_id: str | None = None
    consent_init_id: str | None = None
    status: ConsentStatus = ConsentStatus.UNKNOWN
    hi_types: tuple[ConsentHiType, ...] = ()
    period: ConsentPeriod | None = None
    #: When the request was made (wire ``c_at``), ISO 8601 as sent.
    created: str | None = wire("c_at", default=None)
    #: When it last changed (wire ``u_at``), ISO 8601 as sent.
    updated: str | None = wire("u_at", default=None)

    @property
    def created_at(self) -> dt.datetime | None:
        """:attr:`created` as an aware datetime."""
        return iso_instant(self.created)

    @property
    def updated_at(self) -> dt.datetime | None:
        """:attr:`updated` as an aware datetime."""
        return iso_instant(self.updated)


@attrs.frozen
class ConsentCreated:
    """What ``POST /abdm/v1/consents/create`` answered (``ConsentCreateConsentResponse``)."""

    #: The id of the new request (see :class:`Consent`); ``None`` when the service answered without a body (the
    #: OpenAPI documents the answer as a 204): find the request with ``list()``.
    consent_init_id: str | None = None


@attrs.frozen
class ConsentDocument:
    """A document received under a consent (``ConsentDocumentDetail``). Its FHIR URL is hidden from ``repr``."""

    document_id: str | None = wire("id", default=None)
    fhir_url: str | None = wire(pii=True, default=None)


@attrs.frozen
class ConsentCareContext:
    """A care context shared under a consent (``ConsentCareContextDetail``): its ``care_context_id`` is what the
    records API retrieves. The display text is health data: hidden from ``repr``."""

    care_context_id: str | None = wire("id", default=None)
    display: str | None = wire(pii=True, default=None)
    status: CareContextStatus = CareContextStatus.UNKNOWN
    #: As the service sent it (its format is not documented).
    created_at: str | None = None
    documents: tuple[ConsentDocument, ...] = ()


@attrs.frozen
class ConsentHip:
    """One facility (HIP) of a consent and what it shares (``ConsentConsentDetailData``)."""

    hip_id: str | None = wire("hip.id", default=None)
    #: The facility's name (not personal data).
    hip_name: str | None = wire("hip.name", default=None)
    care_contexts: tuple[ConsentCareContext, ...] = ()


@attrs.frozen
class ConsentDetails:
    """What ``POST /abdm/v1/consents/details`` answered for :attr:`consent_id` (``ConsentConsentDetailResp``):
    per facility, the care contexts shared and the documents received."""

    __wire_lenient__: ClassVar[bool] = True

    #: The consent asked about (the client's own: the answer does not repeat it).
    consent_id: str = local()
    #: Wire ``data``: one entry per facility.
    hips: tuple[ConsentHip, ...] = wire("data", default=())

    @property
    def care_context_ids(self) -> tuple[str, ...]:
        """Every shared care context's id, in the answer's order (what the records API retrieves)."""
        return tuple(
            cc.care_context_id for hip in self.hips for cc in hip.care_contexts if cc.care_context_id is not None
        )


@attrs.frozen
class ConsentArtefact:
    """What the patient grants one facility when approving a consent: one consent artefact per HIP
    (``ApproveConsent`` of ``ApproveRequest.consent_artefacts``). Given to
    :meth:`~health_async.resources.Consents.approve`; its rules are checked there, before anything is sent.

    ``care_contexts`` are the facility's care context ids to share (a ``str`` is one id), or ``(id, display)``
    pairs when the display text should go too (hidden from ``repr``: it says what the visit was).
    ``hi_types``, ``start`` / ``end`` (the date range shared) and ``erase_at`` narrow this artefact; ``None``
    leaves them to the request's own (or to what ``approve`` gives for all artefacts).
    """

    hip_id: str
    care_contexts: tuple[str | tuple[str, str], ...] = attrs.field(repr=False)
    hi_types: tuple[ConsentHiType | str, ...] | None = None
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    erase_at: dt.datetime | None = None


@attrs.frozen
class AutoApprovalPolicy:
    """The patient's auto-approval policy (``SettingsResponse``)."""

    status: AutoApprovalStatus = AutoApprovalStatus.UNKNOWN

    @property
    def enabled(self) -> bool:
        """True when the policy is on."""
        return self.status is AutoApprovalStatus.ENABLED


@attrs.frozen
class PinOtpSent:
    """What ``POST /abdm/v1/consents/pin/forgot/init`` answered (``InitResponseType3``): an OTP went out to reset
    the consent PIN. The destination (a mobile number) and the transaction id are hidden from ``repr``."""

    __wire_lenient__: ClassVar[bool] = True  # an OTP went out: the answer is never lost to a side field

    #: The transaction the OTP belongs to (``None`` if the answer lacks it: the schema does not require it).
    txn_id: str | None = wire(repr=False, default=None, strict=True)
    #: Where the OTP went (``mobile``).
    medium: str | None = None
    #: The medium's value (wire ``otp_medium_value``; a mobile number, as the service shows it).
    destination: str | None = wire("otp_medium_value", pii=True, default=None)
    #: Minutes the OTP stays valid.
    expiry_in_minutes: int | None = None


@attrs.frozen
class _PinExists:
    """``ExistResponse`` of ``GET /abdm/v1/consents/pin/exists`` (``exists`` read too, the spelling of the address
    check's answer)."""

    exist: bool = wire("exist", "exists")


def parse_pin_exists(data: object) -> bool:
    """Whether the patient has set a consent PIN, from ``ExistResponse``;
    :class:`~health_async.errors.ResponseValidationError` when the answer does not say."""
    return structure(data, _PinExists).exist
