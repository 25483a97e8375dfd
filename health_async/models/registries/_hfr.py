"""Facility registry (HFR) models: the answers of ``client.hfr`` (``/abdm/nhpr/v1/hfr/...``).

A facility's registry entry is public data (a hospital's name, type and address), shown in ``repr`` in part: the
id, name, status and type. Wire names are registration.yml's (``ModelsFacility`` in camelCase, the onboard and link
answers in snake case), read from the ``data`` of the answer's envelope (:func:`._answer.unwrap`).
"""

from __future__ import annotations

import attrs

from ..._wire import as_text, empty_is_none, wire

__all__ = ["Facility", "HfrLinked", "HfrOnboarded", "HfrRegistration"]


@attrs.frozen
class Facility:
    """A facility of the registry (``GET /abdm/nhpr/v1/hfr/search/{hfrId}``, wire ``ModelsFacility``)."""

    #: The facility's HFR ID (wire ``facilityId``), e.g. ``IN2910000123``.
    facility_id: str | None = wire("facilityId", parse=empty_is_none, default=None)
    facility_name: str | None = wire("facilityName", default=None)
    #: The registry's status of the facility, as sent (e.g. ``"Approved"``).
    facility_status: str | None = wire("facilityStatus", default=None)
    facility_type: str | None = wire("facilityType", default=None)
    facility_type_code: str | None = wire("facilityTypeCode", default=None, repr=False)
    ownership: str | None = wire(default=None, repr=False)
    ownership_code: str | None = wire("ownershipCode", default=None, repr=False)
    system_of_medicine: str | None = wire("systemOfMedicine", default=None, repr=False)
    system_of_medicine_code: str | None = wire("systemOfMedicineCode", default=None, repr=False)
    address: str | None = wire(default=None, repr=False)
    pincode: str | None = wire(default=None, repr=False)
    latitude: str | None = wire(parse=as_text, default=None, repr=False)
    longitude: str | None = wire(parse=as_text, default=None, repr=False)
    state_name: str | None = wire("stateName", default=None, repr=False)
    state_lgd_code: str | None = wire("stateLGDCode", default=None, repr=False)
    district_name: str | None = wire("districtName", default=None, repr=False)
    district_lgd_code: str | None = wire("districtLGDCode", default=None, repr=False)
    sub_district_name: str | None = wire("subDistrictName", default=None, repr=False)
    sub_district_lgd_code: str | None = wire("subDistrictLGDCode", default=None, repr=False)
    #: Untyped in the schema: kept as text (a number is its decimal text).
    village_city_town_name: str | None = wire("villageCityTownName", parse=as_text, default=None, repr=False)
    village_city_town_lgd_code: str | None = wire("villageCityTownLGDCode", parse=as_text, default=None, repr=False)


@attrs.frozen
class HfrOnboarded:
    """A facility onboarded (``POST /abdm/nhpr/v1/hfr/onboard``, wire ``NhprOnboardFacilityResponse``)."""

    #: The facility's id in the registry: link it with ``client.hfr.link``.
    facility_id: str | None = wire(parse=empty_is_none, default=None)


@attrs.frozen
class HfrLinked:
    """A facility linked to the ABDM bridge (``POST /abdm/nhpr/v1/hfr/link``: the answer echoes the request,
    wire ``NhprUpdateBridgeRequest``)."""

    #: Your clinic's id, as linked.
    clinic_id: str | None = wire(parse=empty_is_none, default=None)
    #: The facility's HFR ID, as linked.
    hfr_id: str | None = wire(parse=empty_is_none, default=None)


@attrs.frozen
class HfrRegistration:
    """What ``client.hfr.register`` did, in the documented order (abdm-connect/flows/m4.mdx): the search's
    :attr:`facility` (``None``: not in the registry), :attr:`onboarded` when it had to onboard it, and the
    :attr:`linked` answer. Built by the client, not read from the wire."""

    #: The registry's entry found by the search; ``None`` when the facility was not in the registry.
    facility: Facility | None
    #: The onboarding answer, when the facility was onboarded by this call; ``None`` when it existed.
    onboarded: HfrOnboarded | None
    #: The link answer.
    linked: HfrLinked

    @property
    def was_onboarded(self) -> bool:
        """True when this call onboarded the facility (it was not in the registry)."""
        return self.onboarded is not None
