"""Finding a hospital and discovering and linking its records: providers, matches, the link steps.

Wire names come from ``registration.yml``: ``ProviderResponseType2`` (``GET /abdm/v1/providers`` and
``GET /abdm/v1/provider/{hip_id}``), ``DiscoverResponse`` / ``DiscoverPatient`` / ``DiscoverCareContext``
(``POST /abdm/v1/care-contexts/discover``), ``InitResponseType4`` (``.../discover/link/init``) and
``ConfirmResponse`` (``.../discover/link/confirm``). Where the hospital side of the same exchange spells a field
otherwise (``ModelsPatient.ref_num``, ``patients``; ``ModelsProviderInfo.id`` / ``name``), that spelling is read
too: the client accepts both.

Personal data is left out of every ``repr``: the patient's name and reference at the hospital, what each care
context is (health data), the transaction ids.
"""

from __future__ import annotations

import enum
from typing import ClassVar

import attrs

from ..._wire import empty_is_none, non_empty, wire

__all__ = [
    "DiscoveredCareContext",
    "DiscoveredPatient",
    "Discovery",
    "LinkConfirmed",
    "LinkOtpSent",
    "LinkStep",
    "Provider",
]


@attrs.frozen
class Provider:
    """A health facility on ABDM (a HIP: a hospital, clinic or lab), as ``GET /abdm/v1/providers`` lists it and
    ``GET /abdm/v1/provider/{hip_id}`` gives it (``ProviderResponseType2``). A facility's details are public, not
    personal data: all of them are in the ``repr``."""

    #: The facility's ABDM id: what ``client.abdm.discover_and_link(hip_id)`` takes.
    hip_id: str = wire("hip_id", "id", parse=non_empty)
    #: The facility's name (wire ``hip_name``).
    name: str | None = wire("hip_name", "name", default=None)
    city: str | None = None
    state: str | None = None


@attrs.frozen
class DiscoveredCareContext:
    """A record (a visit, a test, a discharge) the hospital holds for the patient and that is not yet linked to
    their ABHA (``DiscoverCareContext``). ``repr`` shows the id only: :attr:`display` is health data."""

    #: The hospital's id of the record: what ``flow.link(care_context_id)`` takes (wire ``id``).
    care_context_id: str = wire("id", "ref_num", "reference_number", parse=non_empty)
    #: What the record is, for the patient to recognise it ("OP visit, 3 March 2024"). Hidden from ``repr``.
    display: str | None = wire(pii=True, default=None)


@attrs.frozen
class DiscoveredPatient:
    """A patient of the hospital that matched the person's verified ABHA details (``DiscoverPatient``), with the
    records not yet linked. A hospital may match several (a family sharing a mobile number, two registrations).
    ``repr`` shows its records' ids; the patient's name and reference are hidden."""

    #: The hospital's reference of the patient (wire ``id``), sent back as ``patient_ref_id`` by the link; what
    #: ``flow.link(..., patient_id=)`` takes when two patients hold the same care context id; ``None`` when the
    #: answer gives none. Hidden from ``repr``.
    patient_id: str | None = wire("id", "ref_num", parse=empty_is_none, default=None, pii=True)
    #: The patient's name as the hospital holds it. Hidden from ``repr``.
    display: str | None = wire(pii=True, default=None)
    #: The records not yet linked.
    care_contexts: tuple[DiscoveredCareContext, ...] = ()


@attrs.frozen
class Discovery:
    """The answer of ``POST /abdm/v1/care-contexts/discover`` (``DiscoverResponse``): the matching patients (wire
    ``patient``, a list), each with the records not yet linked, and the transaction the link continues.

    Not lenient (judgement call): nothing has happened yet when it arrives, and an answer whose patients do not fit
    is better an error naming the field than read as "nothing found"."""

    #: The discovery's transaction id, for ``link/init``. Hidden from ``repr``.
    txn_id: str = wire(parse=non_empty, pii=True)
    #: The matching patients (none: the hospital holds no unlinked record of the person).
    patients: tuple[DiscoveredPatient, ...] = wire("patient", "patients", default=())


@attrs.frozen
class LinkOtpSent:
    """The answer of ``POST .../discover/link/init`` (``InitResponseType4``): the hospital sent an OTP to the
    patient's mobile. Hidden from ``repr``: the transaction id."""

    __wire_lenient__: ClassVar[bool] = True  # an OTP went out: see health_async._wire

    #: The transaction id for ``link/confirm``; ``None`` when the answer has none (the discovery's then goes on).
    txn_id: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)


@attrs.frozen
class LinkConfirmed:
    """The answer of ``POST .../discover/link/confirm`` (``ConfirmResponse``): the record is linked to the
    person's ABHA. ``repr`` shows the care context id; the transaction id is hidden."""

    __wire_lenient__: ClassVar[bool] = True  # the link is made: never lost to a side field

    #: The linked record (wire ``cc_ref_id``); the flow fills in the one it linked when the answer has none.
    care_context_id: str | None = wire("cc_ref_id", parse=empty_is_none, default=None)
    #: The transaction id of the answer, if any. Hidden from ``repr``.
    txn_id: str | None = wire(parse=empty_is_none, default=None, pii=True)


class LinkStep(enum.Enum):
    """What a discover-and-link flow (``client.abdm.discover_and_link``) expects next: its ``next_step``. The value
    is what the flow's state (``to_state()``) stores."""

    #: Several records (or patients) matched: pick one of the flow's ``choices`` and ``link(care_context_id)``.
    SELECT_CARE_CONTEXT = "select_care_context"
    #: The hospital sent an OTP to the patient's mobile: ``confirm(otp)``.
    VERIFY_OTP = "verify_otp"
    #: Finished: the record is linked to the person's ABHA (the flow's ``linked``).
    DONE = "done"
    #: Finished: the hospital holds no record of the person that is not linked already; nothing to do.
    NOTHING_FOUND = "nothing_found"
    #: ABDM refused with a rate limit or a block (``AbhaRateLimited`` / ``AbhaBlocked``): the transaction is over;
    #: start a new flow after the flow's ``blocked_until``.
    BLOCKED = "blocked"
