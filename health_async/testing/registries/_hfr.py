"""The fake server's facility registry (HFR, ``/abdm/nhpr/v1/hfr/...``): search, onboard, link.

Written from registration.yml (``ModelsFacility``, ``NhprUpdateBridgeRequest {clinic_id, hfr_id}`` for both onboard
and link, ``NhprOnboardFacilityResponse {facility_id}``) and abdm-connect/flows/m4.mdx (search first; link when it
exists, else onboard then link). Answers are wrapped in ``{"data", "error", "success"}`` as the vendor's are.

Refusals (``GenericError``): a malformed body 400 ``ABDM-1006``; an HFR ID the registry does not hold: 404
``HFR-1404`` at search, 400 ``HFR-1404`` at link; onboarding one it holds already: 400 ``HFR-1409``. The codes are
the fake's own (the vendor's files list none for the registry); only ``4XX`` is documented.

Seeded (:attr:`FakeHfr.facilities`): :data:`SEEDED_FACILITY` (``IN2910000001``, approved). Onboarding adds a
facility under the HFR ID given; :attr:`FakeHfr.links` holds each clinic's linked HFR ID.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from .. import _routes as R
from .._domain import Domain
from .._refusals import Refusal, answer, bad_body, json_route

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = ["ROUTES", "SEEDED_FACILITY", "FakeHfr"]

#: Route names (usable with ``server.inject``), from the fake's table of the vendor's HFR operations.
ROUTES: Final[tuple[str, ...]] = tuple(R.HFR)
#: The HFR ID of the facility the registry holds in the seeded state.
SEEDED_FACILITY: Final = "IN2910000001"


def _body_only(handler: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[web.Request, Any], Any]:
    """A handler of the body alone, as :func:`~.._refusals.json_route` calls one (with the request too)."""
    return lambda _request, body: handler(body)


def _wrapped(data: Any) -> dict[str, Any]:
    return {"data": data, "error": None, "success": True}


def _facility(hfr_id: str, name: str, status: str) -> dict[str, Any]:
    return {
        "facilityId": hfr_id,
        "facilityName": name,
        "facilityStatus": status,
        "facilityType": "Hospital",
        "facilityTypeCode": "5",
        "ownership": "Private",
        "ownershipCode": "P",
        "systemOfMedicine": "Modern Medicine(Allopathy)",
        "systemOfMedicineCode": "M",
        "address": "12 MG Road, Bengaluru",
        "pincode": "560001",
        "latitude": "12.9716",
        "longitude": "77.5946",
        "stateName": "KARNATAKA",
        "stateLGDCode": "29",
        "districtName": "BENGALURU URBAN",
        "districtLGDCode": "572",
        "subDistrictName": "Bangalore North",
        "subDistrictLGDCode": "5535",
        "villageCityTownName": "Bengaluru",
        "villageCityTownLGDCode": 803162,
    }


def _not_found() -> Refusal:
    return Refusal(404, "Facility not found", "HFR-1404", "No facility with this HFR ID")


class FakeHfr(Domain):
    """State and routes of the facility registry (see the module). Test controls: :attr:`facilities`,
    :attr:`links`, :meth:`add_facility`."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: The registry's facilities by HFR ID, as ``ModelsFacility`` objects.
        self.facilities: dict[str, dict[str, Any]] = {}
        #: Each clinic's linked HFR ID.
        self.links: dict[str, str] = {}
        self._seed()

    def reset(self) -> None:
        """Back to the seeded facility; no link."""
        self.facilities.clear()
        self.links.clear()
        self._seed()

    def add_facility(self, hfr_id: str, name: str = "Sunrise Clinic", status: str = "Approved") -> None:
        """Add a facility the registry holds."""
        self.facilities[hfr_id] = _facility(hfr_id, name, status)

    def _seed(self) -> None:
        self.add_facility(SEEDED_FACILITY, "Sunrise Multispeciality Hospital")

    def add_routes(self, app: web.Application) -> None:
        """Register the HFR routes."""
        handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "hfr_onboard": self._onboard,
            "hfr_link": self._link,
        }
        for name, (method, path) in R.HFR.items():
            if name == "hfr_search":
                app.router.add_route(method, path, self.server._route(name, self._search))
                continue
            handler = handlers[name]
            route = json_route(self.server, _body_only(handler))
            app.router.add_route(method, path, self.server._route(name, route))

    async def _search(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        facility = self.facilities.get(request.match_info["hfrId"])
        if facility is None:
            return answer(self.server, request, _not_found())
        return self.server._json(request, _wrapped(facility))

    @staticmethod
    def _ids(body: dict[str, Any]) -> tuple[str, str]:
        clinic_id, hfr_id = body.get("clinic_id"), body.get("hfr_id")
        if not isinstance(clinic_id, str) or not clinic_id or not isinstance(hfr_id, str) or not hfr_id:
            raise bad_body()
        return clinic_id, hfr_id

    def _onboard(self, body: dict[str, Any]) -> dict[str, Any]:
        _, hfr_id = self._ids(body)
        if hfr_id in self.facilities:
            raise Refusal(400, "Facility already onboarded", "HFR-1409")
        self.add_facility(hfr_id, f"Facility {hfr_id}", "Submitted")
        return _wrapped({"facility_id": hfr_id})

    def _link(self, body: dict[str, Any]) -> dict[str, Any]:
        clinic_id, hfr_id = self._ids(body)
        if hfr_id not in self.facilities:
            raise Refusal(400, "Facility not found", "HFR-1404", "No facility with this HFR ID")
        self.links[clinic_id] = hfr_id
        return _wrapped({"clinic_id": clinic_id, "hfr_id": hfr_id})
