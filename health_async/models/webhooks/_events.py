"""The typed webhook event: :class:`WebhookEvent`, its kinds and parsing statuses, and :func:`parse_event`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import attrs

from ..._wire import WireEnum, epoch_datetime, structure
from ...errors import InvalidRequest, WebhookSignatureError
from ..abdm._events import EVENT_PAYLOADS, AbdmPayload
from ..abdm._hospital import HealthDataRequest, LinkResult

__all__ = ["EventKind", "ParsingStatus", "WebhookEvent", "parse_event"]


class EventKind(WireEnum):
    """The documented webhook events. ``UNKNOWN`` stands for any event name this version does not know."""

    #: A record was uploaded (``rec.uploaded``).
    UPLOADED = "rec.uploaded"
    #: Smart-report parsing progressed (``rec.srp``).
    SMART_REPORT = "rec.srp"
    #: PII extraction progressed (``rec.pii``).
    PII = "rec.pii"
    #: Document classification progressed (``rec.classification``).
    CLASSIFICATION = "rec.classification"
    #: ABDM: the outcome of a care-context link (``abha.link_care_context``; :meth:`WebhookEvent.link_result`).
    LINK_CARE_CONTEXT = "abha.link_care_context"
    #: ABDM: an HIU asks for a patient's records (``abha.hip_data_fetch``; :meth:`WebhookEvent.data_request`).
    HIP_DATA_FETCH = "abha.hip_data_fetch"
    #: ABDM: health data pushed to you as an HIU (``abha.hiu_data_push``).
    HIU_DATA_PUSH = "abha.hiu_data_push"
    #: ABDM: a consent changed (``abha.consent_update``).
    CONSENT_UPDATE = "abha.consent_update"
    #: ABDM: a patient shared their profile at your counter (``abha.hip_profile_share``, Scan & Share).
    HIP_PROFILE_SHARE = "abha.hip_profile_share"
    #: ABDM: an ABHA was created (``abha.created``).
    ABHA_CREATED = "abha.created"
    #: ABDM: a health locker was created (``abha.locker_created``).
    LOCKER_CREATED = "abha.locker_created"
    #: ABDM: a PHR app looks for a patient's care contexts (``abha.care_context_discover``).
    CARE_CONTEXT_DISCOVER = "abha.care_context_discover"
    #: ABDM: a discovered care context's link begins (``abha.care_context_discover_link_init``).
    DISCOVER_LINK_INIT = "abha.care_context_discover_link_init"
    #: ABDM: a discovered care context's link is confirmed (``abha.context_discover_link_confirm``, as spelled).
    DISCOVER_LINK_CONFIRM = "abha.context_discover_link_confirm"
    #: ABDM: a subscription changed (``abha.subscription_modified``).
    SUBSCRIPTION_MODIFIED = "abha.subscription_modified"
    #: ABDM: a subscription's notification (``abha.subscription_notify``).
    SUBSCRIPTION_NOTIFY = "abha.subscription_notify"
    UNKNOWN = "unknown"


class ParsingStatus(WireEnum):
    """State of a parsing event (``data.status`` of ``rec.srp``, ``rec.pii``, ``rec.classification``).

    ``UNKNOWN`` stands for a status this version does not know (never an error)."""

    INITIATED = "parsing_initiated"
    COMPLETE = "parsing_complete"
    ERROR = "parsing_error"
    UNKNOWN = "unknown"


@attrs.frozen
class WebhookEvent:
    """One verified webhook. Personal data (ids of people, the transaction id, ``data`` and ``raw``, which can
    hold PII such as names) is left out of ``repr``.

    Ids sent as JSON numbers are given as strings. Times are timezone-aware UTC datetimes (epoch seconds on the
    wire; a value in milliseconds is recognised).
    """

    #: Event name as sent (``rec.uploaded``, ``rec.srp``, ``rec.pii``, ``rec.classification``, or another).
    event: str
    #: Parsing state (``data.status`` of a records event); ``None`` when the event carries none (``rec.uploaded``)
    #: and for every ABDM event (:attr:`is_abdm`), whose own ``data.status`` (a link's, a consent's) is not a
    #: parsing state: it is read, typed, by :meth:`payload` (:attr:`data` holds it as sent).
    status: ParsingStatus | None = None
    #: The document concerned (``data.document_id``).
    document_id: str | None = None
    #: The service that sent the event (``service``, e.g. ``rec``).
    service: str | None = None
    #: When the event happened (``event_time``).
    event_time: dt.datetime | None = None
    #: When the webhook was sent (``timestamp``; only some events carry it).
    timestamp: dt.datetime | None = None
    #: When the webhook was signed (the header's ``t=``); ``None`` for :func:`parse_event` without it.
    signed_at: dt.datetime | None = None
    #: Business the event belongs to (``business_id``).
    business_id: str | None = None
    #: API client the event belongs to (``client_id``).
    client_id: str | None = None
    #: Category of the document for ``rec.classification`` (``data.document_classification``: ``lab_report``,
    #: ``prescription``, ``discharge_summary``, ...).
    document_classification: str | None = None
    #: The patient's id in the service (``data.patient_id``). Hidden from ``repr``.
    patient_id: str | None = attrs.field(default=None, repr=False)
    #: The doctor's id (``data.doctor_id``). Hidden from ``repr``.
    doctor_id: str | None = attrs.field(default=None, repr=False)
    #: Care-context id of the document (``data.identifier``, smart report). Hidden from ``repr``.
    identifier: str | None = attrs.field(default=None, repr=False)
    #: Identifier of this transaction (``transaction_id``). Hidden from ``repr``.
    transaction_id: str | None = attrs.field(default=None, repr=False)
    #: The body's ``data`` object as received (``{}`` when absent): PII entries, FHIR data, anything else.
    #: Hidden from ``repr``; do not log it.
    data: dict[str, Any] = attrs.field(factory=dict, repr=False, hash=False)
    #: The whole decoded body as received. Hidden from ``repr``; do not log it.
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, hash=False)

    @property
    def kind(self) -> EventKind:
        """The documented event this is, or ``EventKind.UNKNOWN``."""
        return EventKind.from_wire(self.event)

    @property
    def is_abdm(self) -> bool:
        """An ABDM event (``service`` ``abdm``, or an ``abha.`` event name)."""
        return self.service == "abdm" or self.event.startswith("abha.")

    def link_result(self) -> LinkResult:
        """The typed ``data`` of an ``abha.link_care_context`` event (:class:`InvalidRequest` for another event;
        :class:`~health_async.errors.ResponseValidationError` when the data does not fit)."""
        self._expect(EventKind.LINK_CARE_CONTEXT)
        return structure(self.data, LinkResult)

    def payload(self) -> AbdmPayload | None:
        """The typed ``data`` of an ABDM event: the model :data:`~health_async.models.EVENT_PAYLOADS` names for
        it (:class:`~health_async.models.LinkResult`, :class:`~health_async.models.HealthDataRequest`,
        :class:`~health_async.models.ConsentUpdate`, ...; a field that does not fit is ``None``, never an error);
        ``None`` for an event without a model (the ``rec.*`` events, whose fields are on the event itself, and an
        event this version does not know: its ``data`` stays on :attr:`data`).

        Judgement call: the typed data is asked for, not parsed with every event: a webhook handler that only
        routes events pays nothing for models it does not use."""
        model = EVENT_PAYLOADS.get(self.event)
        if model is None:
            return None
        if model is HealthDataRequest:
            return self.data_request()
        return structure(self.data, model)

    def data_request(self) -> HealthDataRequest:
        """The typed ``data`` of an ``abha.hip_data_fetch`` event: answer it with
        ``client.abdm.push_health_data(request, bundles)`` (the event's ``transaction_id`` stands in when the
        data's is empty)."""
        self._expect(EventKind.HIP_DATA_FETCH)
        requested_at = self.event_time or self.timestamp or self.signed_at
        return HealthDataRequest.from_event(self.data, transaction_id=self.transaction_id, requested_at=requested_at)

    def _expect(self, kind: EventKind) -> None:
        if self.kind is not kind:
            raise InvalidRequest(f"this is not an {kind.value} event")


def parse_event(payload: Mapping[str, Any]) -> WebhookEvent:
    """Build a :class:`WebhookEvent` from an already decoded body, WITHOUT checking any signature.

    Only for bodies you have verified yourself or that come from a trusted place (a queue your verified handler
    fed, a test). :attr:`WebhookEvent.signed_at` is ``None``.

    Raises:
        WebhookSignatureError: the payload is not a mapping with a non-empty ``event`` string.
    """
    if not isinstance(payload, Mapping):
        raise WebhookSignatureError("webhook refused: the body is not a JSON object")
    return _event(dict(payload), signed_at=None)


def _event(payload: dict[str, Any], *, signed_at: dt.datetime | None) -> WebhookEvent:
    name = payload.get("event")
    if type(name) is not str or not name:
        raise WebhookSignatureError("webhook refused: the body has no 'event' name")
    data = payload.get("data")
    if type(data) is not dict:
        data = {}
    status = data.get("status")
    service = _id(payload.get("service"))
    if name.startswith("abha.") or service == "abdm":  # WebhookEvent.is_abdm: a link's or consent's status, not parsing
        status = None
    return WebhookEvent(
        event=name,
        status=ParsingStatus.from_wire(status) if type(status) is str else None,
        document_id=_id(data.get("document_id")),
        service=service,
        event_time=_time(payload.get("event_time")),
        timestamp=_time(payload.get("timestamp")),
        signed_at=signed_at,
        business_id=_id(payload.get("business_id")),
        client_id=_id(payload.get("client_id")),
        document_classification=_id(data.get("document_classification")),
        patient_id=_id(data.get("patient_id")),
        doctor_id=_id(data.get("doctor_id")),
        identifier=_id(data.get("identifier")),
        transaction_id=_id(payload.get("transaction_id")),
        data=data,
        raw=payload,
    )


def _id(value: Any) -> str | None:
    if type(value) is str:
        return value
    if type(value) is int:  # ids sent as numbers
        return str(value)
    return None


def _time(value: Any) -> dt.datetime | None:
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or value < 0:
        return None
    return _datetime(value)


def _datetime(epoch: int) -> dt.datetime | None:
    return epoch_datetime(epoch)  # the library's one rule: seconds, or milliseconds; None when out of range
