"""ABDM exchange models for a hospital (HIP, milestone 2): care contexts to link, linked ones, and the health-data
request an HIU sends through the ``abha.hip_data_fetch`` webhook.

Wire names come from ``registration.yml`` (``LinkCareContextMeta``, ``RecordsCareContext``) and the webhook pages
(``webhooks/hip-data-fetch.mdx``, ``webhooks/link-care-context.mdx``). Health data (FHIR bundles), ABHA addresses,
keys, the patient's ids (``oid``, ``partner_patient_id``) and transaction ids are left out of every ``repr``; care
context ids (chosen by the hospital for a record) and the facility's id are shown.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs

from ..._wire import WireEnum, iso_instant, local, structure, wire
from ..records._cases import HiType

__all__ = [
    "CareContext",
    "CareContextStatus",
    "HealthDataRequest",
    "HiuKey",
    "LinkResult",
    "LinkStatus",
    "LinkedCareContext",
    "PushResult",
    "RefusedCareContext",
]


class CareContextStatus(WireEnum):
    """Where a linked care context stands in ABDM's exchange (wire ``status`` of ``RecordsCareContext``);
    ``UNKNOWN`` for a value this version does not know, or none."""

    CONSENT_RAISED = "ConsentRaised"
    CONSENT_GRANTED = "ConsentGranted"
    CONSENT_ERROR = "ConsentError"
    DATA_REQUESTED = "DataRequested"
    DATA_RECEIVED = "DataReceived"
    DATA_PROCESSING = "DataProcessing"
    DATA_PROCESSED = "DataProcessed"
    INVALID_DATA_RECEIVED = "InvalidDataReceived"
    NO_DATA_AVAILABLE = "NoDataAvailable"
    UNKNOWN = "unknown"


class LinkStatus(WireEnum):
    """The outcome the ``abha.link_care_context`` webhook reports for one care context."""

    LINKED = "LINKED"
    ERRORED = "ERRORED"
    UNKNOWN = "unknown"


def _bundle_repr(data: object) -> str:
    return "None" if data is None else "<FHIR bundle>"


@attrs.frozen
class CareContext:
    """A care context to link (a visit, a test, any grouping of a patient's records): what
    :meth:`client.abdm.link_care_contexts <health_async.resources.Abdm.link_care_contexts>` sends.

    ``data``, when given, is the visit's FHIR bundle (a ``dict``, or its JSON as ``bytes``/``str``): the service
    stores it and answers HIUs itself, so no ``abha.hip_data_fetch`` comes for this care context. It never appears
    in a ``repr``. The rules are checked when it is sent (nothing is sent if one breaks).
    """

    #: Your id of the visit: unique for the patient at your facility.
    care_context_id: str
    #: What the patient sees in their PHR app, e.g. ``"OP visit, 3 March 2024"``: health data, never in a ``repr``.
    display: str = attrs.field(repr=False)
    #: The kind of record (a :class:`~health_async.models.HiType` or its value).
    hi_type: HiType | str = attrs.field()
    #: The FHIR bundle, or ``None`` to answer data requests yourself (webhook).
    data: dict[str, Any] | bytes | str | None = attrs.field(default=None, repr=_bundle_repr)


@attrs.frozen
class LinkedCareContext:
    """A care context linked to a patient's ABHA (an item of ``GET /abdm/v1/care-contexts/linked``)."""

    care_context_id: str | None = None
    #: What the patient sees (health data: hidden from ``repr``).
    display: str | None = wire(pii=True, default=None)
    status: CareContextStatus = CareContextStatus.UNKNOWN
    #: As the service sent it (its format is not documented).
    created_at: str | None = None


@attrs.frozen
class HiuKey:
    """The requester's (HIU's) key material in a data request (wire ``key_information``)."""

    #: The HIU's public key (base64; a 65-byte point or X.509), wire ``dh_public_key.key_value``.
    public_key: str = wire("dh_public_key.key_value", repr=False)
    #: The HIU's 32-byte nonce, base64.
    nonce: str = wire(repr=False)
    #: When the key stops being valid (ISO 8601 as sent), wire ``dh_public_key.expiry``.
    expiry: str | None = wire("dh_public_key.expiry", default=None)
    crypto_alg: str | None = None
    curve: str | None = None
    parameters: str | None = wire("dh_public_key.parameters", default=None)

    @property
    def expires_at(self) -> dt.datetime | None:
        """:attr:`expiry` as an aware datetime, or ``None`` when absent or not ISO 8601."""
        return iso_instant(self.expiry)


@attrs.frozen
class HealthDataRequest:
    """An HIU's request for a patient's records (the ``data`` of an ``abha.hip_data_fetch`` webhook): answer it
    with :meth:`client.abdm.push_health_data <health_async.resources.Abdm.push_health_data>`."""

    #: The exchange's transaction id: the push names it. Wire ``data.transaction_id``, else the event's. Hidden
    #: from ``repr``.
    transaction_id: str = attrs.field(repr=False)
    #: The care contexts asked for (your ids).
    care_contexts: tuple[str, ...]
    key: HiuKey = wire("key_information")
    hi_types: tuple[str, ...] = ()
    #: The patient's ABHA address (personal data: hidden from ``repr``).
    abha_address: str | None = wire(pii=True, default=None)
    #: The patient's id in the service (hidden from ``repr``).
    oid: str | None = wire(pii=True, default=None)
    #: The hospital's own id of the patient, a UHID (hidden from ``repr``).
    partner_patient_id: str | None = wire(pii=True, default=None)
    hip_id: str | None = None
    #: The consent the request is made under, when the request names it (the vendor's example does not; ABDM's own
    #: request does: wire ``consent_id``, else ``consent.id``). Checked against a
    #: :class:`~health_async.resources.ConsentStore` (a :class:`~health_async.resources.ConsentBook`) before the
    #: records are loaded and before every page pushed.
    consent_id: str | None = wire("consent_id", "consent.id", default=None)
    #: The first instant of the records asked for (ISO 8601 as sent), when the request says (wire
    #: ``date_range.from``, ABDM's own name; the vendor's example has none).
    date_from: str | None = wire("date_range.from", default=None)
    #: The last instant of the records asked for (wire ``date_range.to``).
    date_to: str | None = wire("date_range.to", default=None)
    #: When the request was made: the webhook's event time (else its timestamp, else its signature's time); ``None``
    #: when built without an event. ABDM gives a hospital 20 minutes from the request to push: when this is
    #: ``None``, the window is counted from the moment the request was received, as nearly as it is known (the ABDM
    #: receivers stamp the moment they took the webhook; ``push_health_data`` its own first check), never skipped.
    requested_at: dt.datetime | None = local(default=None)

    @property
    def starts_at(self) -> dt.datetime | None:
        """:attr:`date_from` as an aware datetime, or ``None`` when absent or not ISO 8601."""
        return iso_instant(self.date_from)

    @property
    def ends_at(self) -> dt.datetime | None:
        """:attr:`date_to` as an aware datetime, or ``None`` when absent or not ISO 8601."""
        return iso_instant(self.date_to)

    @classmethod
    def from_event(
        cls, data: Any, *, transaction_id: str | None = None, requested_at: dt.datetime | None = None
    ) -> HealthDataRequest:
        """The request in the ``data`` of an ``abha.hip_data_fetch`` webhook; the event's own ``transaction_id``
        stands in when ``data.transaction_id`` is empty (the vendor's example leaves it so), and ``requested_at``
        is the event's time. :class:`~health_async.errors.ResponseValidationError` when ``data`` is not one."""
        if isinstance(data, dict) and not data.get("transaction_id") and transaction_id:
            data = {**data, "transaction_id": transaction_id}
        request = structure(data, cls)
        return request if requested_at is None else attrs.evolve(request, requested_at=requested_at)


@attrs.frozen
class LinkResult:
    """The outcome of linking one care context (the ``data`` of an ``abha.link_care_context`` webhook)."""

    care_context_id: str | None = None
    status: LinkStatus = LinkStatus.UNKNOWN
    #: The failure reason when :attr:`status` is ``ERRORED`` (as sent).
    error: str | None = None
    #: How many times the service retried the link.
    retry_count: int | None = None
    hip_id: str | None = None
    #: The patient's id in the service (hidden from ``repr``).
    oid: str | None = wire(pii=True, default=None)
    #: The hospital's own id of the patient, a UHID (hidden from ``repr``).
    partner_patient_id: str | None = wire(pii=True, default=None)
    #: The patient's ABHA address (personal data: hidden from ``repr``).
    abha_address: str | None = wire(pii=True, default=None)


@attrs.frozen
class PushResult:
    """What :meth:`~health_async.resources.Abdm.push_health_data` sent: one page per care context."""

    #: The exchange's transaction id (hidden from ``repr``).
    transaction_id: str = attrs.field(repr=False)
    #: The care contexts pushed, in page order.
    pushed: tuple[str, ...]
    #: Care contexts asked for that ``bundles`` did not hold (nothing was sent for them).
    missing: tuple[str, ...] = ()
    #: Care contexts whose bundle was held but not pushed, and why (the push's guard: ABDM's time window, the
    #: consent, the record type).
    refused: tuple[RefusedCareContext, ...] = ()


@attrs.frozen
class RefusedCareContext:
    """A care context a push did not send, and why (a rule, never data)."""

    care_context_id: str
    #: Why, as a sentence.
    reason: str
    #: The rule broken, a short stable name (what the receivers log): ``push_window`` (ABDM's 20 minutes passed),
    #: ``consent_unknown``, ``consent_revoked``, ``consent_denied``, ``consent_expired``, ``consent_not_granted``,
    #: ``consent_types`` / ``consent_dates`` (asked for more than the consent covers), ``record_type`` (a bundle of
    #: a type not asked for); ``""`` when built without one.
    rule: str = ""
