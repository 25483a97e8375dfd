"""The patient's request inbox: the consent, subscription and authorization requests made to their ABHA.

Wire shapes from ``registration.yml``: ``ListsResponse`` / ``ListsRequestDetail`` (``GET /abdm/v1/requests``) and
``DetailsResponse`` with ``CommonsDuration``, ``CommonsHiu``, ``CommonsHip``, ``CommonsPurpose``,
``CommonsRequester``, ``CommonsHiType``, ``DetailsProviders``, ``DetailsCareContext`` (``GET /abdm/v1/request``);
the pages ``abdm-connect/patient-requests/*.mdx``.

Personal data stays out of ``repr``: the requester's name (a person, e.g. a doctor) and a care context's display
text (it says what the visit was). Ids, statuses, purposes and the names of facilities (HIU, HIP) are shown.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

import attrs

from ..._wire import WireEnum, iso_instant, local, wire

__all__ = [
    "PatientRequest",
    "PatientRequests",
    "RequestCareContext",
    "RequestDetails",
    "RequestHiType",
    "RequestKind",
    "RequestParty",
    "RequestPeriod",
    "RequestProvider",
    "RequestPurpose",
    "RequestStatus",
]


class RequestKind(WireEnum):
    """The kind of a request in the patient's inbox (``patient-requests/getting-started.mdx``)."""

    #: An HIU (a doctor, a PHR app, an EMR) asks to see care contexts.
    CONSENT = "consent"
    #: A PHR app asks to be told when a new care context is linked at another facility.
    SUBSCRIPTION = "subscription"
    #: A hospital (HIP) asks to link a record to the patient's ABHA.
    AUTHORIZATION = "authorization"
    UNKNOWN = "unknown"


class RequestStatus(WireEnum):
    """Where a request stands (the ``status`` enum of ``DetailsResponse``)."""

    REQUESTED = "requested"
    GRANTED = "granted"
    EXPIRED = "expired"
    DENIED = "denied"
    REVOKED = "revoked"
    UNKNOWN = "unknown"


@attrs.frozen
class RequestPeriod:
    """The period a request covers (wire ``CommonsDuration``), ISO 8601 as sent."""

    __wire_lenient__: ClassVar[bool] = True  # an inbox entry is never lost to one side field

    #: Wire ``from``.
    start: str | None = wire("from", default=None)
    #: Wire ``to``.
    end: str | None = wire("to", default=None)

    @property
    def starts_at(self) -> dt.datetime | None:
        """:attr:`start` as an aware datetime (UTC when sent without a zone), or ``None``."""
        return iso_instant(self.start)

    @property
    def ends_at(self) -> dt.datetime | None:
        """:attr:`end` as an aware datetime (UTC when sent without a zone), or ``None``."""
        return iso_instant(self.end)


@attrs.frozen
class RequestParty:
    """A facility in a request: the requester (``CommonsHiu``) or a provider (``CommonsHip``)."""

    __wire_lenient__: ClassVar[bool] = True

    #: Its ABDM facility id, e.g. ``"IN2710001275"``.
    id: str | None = None
    #: Its name, e.g. ``"Apollo Hospital"``.
    name: str | None = None


@attrs.frozen
class RequestPurpose:
    """Why the data is asked for (wire ``CommonsPurpose``), e.g. code ``CAREMGT``."""

    __wire_lenient__: ClassVar[bool] = True

    code: str | None = None
    text: str | None = None


@attrs.frozen
class RequestHiType:
    """A health-information type a request covers (wire ``CommonsHiType``)."""

    __wire_lenient__: ClassVar[bool] = True

    #: ``OPConsultation``, ``Prescription``, ... as sent (compare with :class:`~health_async.models.HiType`).
    id: str | None = None
    display: str | None = None
    enabled: bool | None = None


@attrs.frozen
class RequestCareContext:
    """A care context a request names (wire ``DetailsCareContext``)."""

    __wire_lenient__: ClassVar[bool] = True

    #: The care context's reference at its provider.
    id: str | None = None
    #: What the patient sees (it says what the visit was: hidden from ``repr``).
    display: str | None = wire(pii=True, default=None)


@attrs.frozen
class RequestProvider:
    """A provider (HIP) a request covers, with its care contexts (wire ``DetailsProviders``)."""

    __wire_lenient__: ClassVar[bool] = True

    hip: RequestParty | None = None
    care_contexts: tuple[RequestCareContext, ...] = ()
    #: The consent artefact of this provider (each provider of a granted consent has its own), wire
    #: ``consent_artefact_id``; ``None`` before the consent is granted.
    artefact_id: str | None = wire("consent_artefact_id", default=None)


@attrs.frozen
class PatientRequest:
    """One request in the patient's inbox (wire ``ListsRequestDetail``): open it with
    :meth:`client.abdm.request(id) <health_async.resources.Abdm.request>`."""

    __wire_lenient__: ClassVar[bool] = True

    #: The consent, subscription or authorization id.
    id: str | None = None
    #: Which list of the answer it came from (the client fills it: the wire item does not say).
    kind: RequestKind = local(default=RequestKind.UNKNOWN)
    #: When it was made, ISO 8601 as sent.
    created_at: str | None = None
    #: The period of records it covers, wire ``duration``.
    period: RequestPeriod | None = wire("duration", default=None)
    #: The requesting facility, wire ``hiu``.
    hiu: RequestParty | None = None
    purpose: RequestPurpose | None = None
    #: The person who asked (e.g. a doctor), wire ``requester.name``: hidden from ``repr``.
    requester_name: str | None = wire("requester.name", pii=True, default=None)


@attrs.frozen
class PatientRequests:
    """The answer of :meth:`client.abdm.requests() <health_async.resources.Abdm.requests>` (wire
    ``ListsResponse``): one tuple per kind (``null`` is empty), each item's :attr:`PatientRequest.kind` set."""

    __wire_lenient__: ClassVar[bool] = True

    consents: tuple[PatientRequest, ...] = ()
    subscriptions: tuple[PatientRequest, ...] = ()
    authorizations: tuple[PatientRequest, ...] = ()

    @property
    def all(self) -> tuple[PatientRequest, ...]:
        """Every request: consents, then subscriptions, then authorizations, each in the service's order."""
        return self.consents + self.subscriptions + self.authorizations

    def __len__(self) -> int:
        return len(self.consents) + len(self.subscriptions) + len(self.authorizations)


@attrs.frozen
class RequestDetails:
    """One request in full (wire ``DetailsResponse``, ``GET /abdm/v1/request``)."""

    __wire_lenient__: ClassVar[bool] = True

    #: The consent or subscription id (wire ``id``); the id asked for when the answer omits it.
    id: str | None = None
    status: RequestStatus = RequestStatus.UNKNOWN
    #: ``"view"`` (the only documented mode).
    access_mode: str | None = None
    #: ISO 8601 as sent.
    created_at: str | None = None
    updated_at: str | None = None
    #: When the data shared under it is to be erased, ISO 8601 as sent.
    erase_at: str | None = None
    #: The period of records it covers, wire ``duration``.
    period: RequestPeriod | None = wire("duration", default=None)
    hi_types: tuple[RequestHiType, ...] = ()
    hiu: RequestParty | None = None
    providers: tuple[RequestProvider, ...] = ()
    purpose: RequestPurpose | None = None
    #: The person who asked, wire ``requester.name``: hidden from ``repr``.
    requester_name: str | None = wire("requester.name", pii=True, default=None)
