"""The fake patient request inbox: the consent, subscription and authorization requests made to a patient.

Written from ``registration.yml`` (``GET /abdm/v1/requests``: ``status`` and ``type`` required, answer
``ListsResponse``; ``GET /abdm/v1/request``: ``id`` required, ``type`` and ``status`` optional, answer
``DetailsResponse``) and ``abdm-connect/patient-requests/*.mdx``.

Routes (names for ``server.inject`` and ``server.calls``): ``abdm_requests`` (400 without a documented ``status``
or ``type``; the requests of the patient with that status, one array per kind, ``null`` for a kind not asked for),
``abdm_request`` (400 without ``id``; 404 for an id the patient does not have, or whose kind or status is not the
one asked for).

State and test controls: :meth:`FakeRequests.add` ``(patient, kind, **details)`` seeds a request and returns its id;
:attr:`FakeRequests.items` (id -> the stored request, its ``DetailsResponse`` fields plus ``patient`` and
``kind``); ``reset`` forgets them.

Judgement calls: the patient is the ``oid`` query, else the ``X-Pt-Id`` header (400 without either); list items
carry ``ListsRequestDetail``'s fields only (``id``, ``created_at``, ``duration``, ``hiu``, ``purpose``,
``requester``), in the order they were added.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from .. import _routes as R
from .._domain import Domain

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = ["KINDS", "ROUTES", "STATUSES", "FakeRequests"]

ROUTES: Final[tuple[str, ...]] = ("abdm_requests", "abdm_request")
#: registration.yml: the ``status`` enum of both operations.
STATUSES: Final = frozenset({"requested", "granted", "expired", "denied", "revoked"})
#: registration.yml: the ``type`` enum of the list (``all`` aside); the details take ``consent`` or ``subscription``.
KINDS: Final = ("consent", "subscription", "authorization")
_LIST_KEYS: Final = {"consent": "consents", "subscription": "subscriptions", "authorization": "authorizations"}
_SUMMARY: Final = ("id", "created_at", "duration", "hiu", "purpose", "requester")


def _error(message: str, status: int = 400) -> web.Response:
    """``GenericError`` of registration.yml."""
    return web.json_response({"code": status, "error": message}, status=status)


class FakeRequests(Domain):
    """State and routes of the patient's request inbox (see the module docstring)."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: request id -> the stored request (``DetailsResponse`` fields, plus ``patient`` and ``kind``).
        self.items: dict[str, dict[str, Any]] = {}
        #: Other domains' requests, read at each call in the same form as :attr:`items` (the server adds the fake
        #: consents' here, so a consent request made by an HIU is in the patient's inbox).
        self.sources: list[Callable[[], Iterable[dict[str, Any]]]] = []

    def add_routes(self, app: web.Application) -> None:
        route = self.server._route
        app.router.add_get(R.REQUESTS, route("abdm_requests", self._list))
        app.router.add_get(R.REQUEST, route("abdm_request", self._details))

    def reset(self) -> None:
        self.items.clear()

    def _all(self) -> dict[str, dict[str, Any]]:
        merged = {item["id"]: item for source in self.sources for item in source()}
        merged.update(self.items)
        return merged

    def add(
        self,
        patient: str,
        kind: str,
        *,
        status: str = "requested",
        request_id: str | None = None,
        hiu: tuple[str, str] = ("HIU-1", "Fake Clinic"),
        requester: str = "Dr Fake",
        purpose: tuple[str, str] = ("CAREMGT", "Care Management"),
        hi_types: Iterable[str] = ("OPConsultation",),
        providers: Mapping[str, Iterable[str]] | None = None,
        days: int = 365,
    ) -> str:
        """Seed a request of ``kind`` (``consent``, ``subscription``, ``authorization``) for ``patient`` (an
        OID), with ``status``; ``providers``: HIP id -> care context ids (default one HIP, ``HIP-1``, with
        ``cc-1``). Returns its id (``request_id``, else a new UUID). ``ValueError`` for an undocumented kind or
        status."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        if status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(sorted(STATUSES))}")
        rid = request_id or str(uuid.uuid4())
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        stamp = now.isoformat().replace("+00:00", "Z")
        held = providers if providers is not None else {"HIP-1": ["cc-1"]}
        self.items[rid] = {
            "patient": patient,
            "kind": kind,
            "id": rid,
            "status": status,
            "access_mode": "view",
            "created_at": stamp,
            "updated_at": stamp,
            "erase_at": (now + dt.timedelta(days=days)).isoformat().replace("+00:00", "Z"),
            "duration": {
                "from": (now - dt.timedelta(days=days)).isoformat().replace("+00:00", "Z"),
                "to": stamp,
            },
            "hi_types": [{"id": t, "display": t, "enabled": True} for t in hi_types],
            "hiu": {"id": hiu[0], "name": hiu[1]},
            "providers": [
                {
                    "hip": {"id": hip, "name": f"{hip} hospital"},
                    "care_contexts": [{"id": cid, "display": f"visit {cid}"} for cid in cids],
                    "consent_artefact_id": str(uuid.uuid4()) if status == "granted" else None,
                }
                for hip, cids in held.items()
            ],
            "purpose": {"code": purpose[0], "text": purpose[1]},
            "requester": {"name": requester},
        }
        return rid

    # ------------------------------------------------------------------------------ routes

    @staticmethod
    def _patient(request: web.Request) -> str | None:
        return request.query.get("oid") or request.headers.get(R.PT_ID) or None

    async def _list(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        status, kind = request.query.get("status"), request.query.get("type")
        if status not in STATUSES:
            return _error("status is required: requested, granted, expired, denied or revoked")
        if kind not in (*KINDS, "all"):
            return _error("type is required: consent, subscription, authorization or all")
        patient = self._patient(request)
        if patient is None:
            return _error("oid or X-Pt-Id is required")
        lists: dict[str, list[dict[str, Any]] | None] = {
            key: ([] if kind in (name, "all") else None) for name, key in _LIST_KEYS.items()
        }
        for item in self._all().values():
            held = lists[_LIST_KEYS[item["kind"]]]
            if held is not None and item["patient"] == patient and item["status"] == status:
                held.append({k: item[k] for k in _SUMMARY})
        return self.server._json(request, lists)

    async def _details(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        rid = request.query.get("id")
        if not rid:
            return _error("id is required")
        kind, status = request.query.get("type"), request.query.get("status")
        if kind is not None and kind not in ("consent", "subscription"):
            return _error("type must be consent or subscription")
        if status is not None and status not in STATUSES:
            return _error("status is not one of the enum's values")
        item = self._all().get(rid)
        if (
            item is None
            or item["patient"] != self._patient(request)
            or (kind is not None and item["kind"] != kind)
            or (status is not None and item["status"] != status)
        ):
            return _error("request not found", 404)
        return self.server._json(request, {k: v for k, v in item.items() if k not in ("patient", "kind")})
