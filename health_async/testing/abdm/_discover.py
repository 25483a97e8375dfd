"""The fake patient's-app side of ABDM: providers, discover, link init (an OTP to the patient) and confirm.

Written from ``registration.yml`` (``ProviderResponseType2``, ``DiscoverRequest`` / ``DiscoverResponse``,
``InitRequestType3`` / ``InitResponseType4``, ``ConfirmRequest`` / ``ConfirmResponse``, ``GenericError``) and
``phr/discover-and-link.mdx``.

Routes (names for ``server.inject`` and ``server.calls``):

* ``providers`` ``GET /abdm/v1/providers?name=``: the fixed facilities of :data:`PROVIDERS` whose name contains
  ``name`` (any case), as a JSON array, or ``null`` when none does (the schema's ``["null", "array"]``); a name
  shorter than 3 characters is 400 ``ABDM-1006``.
* ``provider`` ``GET /abdm/v1/provider/{hip_id}``: one of them; 404 ``{code, error}`` for another id.
* ``discover`` ``POST /abdm/v1/care-contexts/discover`` ``{hip_id, ref_id?}``: the user's patients at that facility
  (seeded with :meth:`FakeDiscover.add_records`; with ``ref_id``, only those the facility knows by it), each with the
  records the user has not linked yet; ``{txn_id, patient}`` (``patient`` ``null`` when nothing matched). An unknown
  facility is 500 ``ABDM-1035`` (Invalid HIP ID, the service's table).
* ``discover_link_init`` ``{txn_id, patient_ref_id, cc_ref_id}`` (the discovery's ``txn_id``): the facility "sends"
  an OTP (:meth:`FakeDiscover.last_otp`); answers a new ``{txn_id}`` for the confirm. Calling it again on the same
  discovery sends a new OTP under a new transaction (the earlier one no longer confirms); past
  :attr:`FakeDiscover.max_otp_sends` OTPs the discovery is locked (500 ``ABDM-1100``). A patient or record the
  discovery did not answer is 400 ``ABDM-1031``.
* ``discover_link_confirm`` ``{txn_id, otp}``: a wrong OTP 400 ``ABDM-1035`` (the step is unchanged); after
  :attr:`FakeDiscover.max_otp_attempts` wrong ones, 500 ``ABDM-1100`` and the transaction is locked. The right one
  links the record (:attr:`FakeDiscover.linked`) and answers ``{cc_ref_id, txn_id}``; the transaction is then done
  (another confirm: 400 ``ABDM-1031``).

The user is ``X-Pt-Id``, else the ``oid`` query, else ``X-Partner-Pt-Id`` (400 ``ABDM-1032`` without any); a
transaction belongs to its user (another user's, or an unknown one: 500 ``MIS-1026``). A blocked user
(:meth:`FakeDiscover.block`) gets 500 ``ABDM-1027`` from every call but the provider searches. A malformed body is
400 ``ABDM-1006``. Errors use the ABHA domain's ``GenericError`` bodies.

Judgement calls: an unknown provider is a 404 (the service's answer is not documented); a discovery lists every
patient of the user at the facility that still has an unlinked record, a patient whose records are all linked is
left out; a record linked is linked for its user at that facility (a later discovery no longer lists it).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

import attrs
from aiohttp import web

from .. import _routes as R
from .._domain import Domain
from .._refusals import Refusal, answer, bad_body, check_otp, json_route, no_txn, otp_lock

if TYPE_CHECKING:
    from .._common import Handler, RecordedRequest
    from .._domain import Server

__all__ = ["PROVIDERS", "ROUTES", "FakeDiscover", "FakePatientRecord"]

_TABLE: Final[dict[str, tuple[str, str]]] = {
    "providers": ("GET", R.PROVIDERS),
    "provider": ("GET", R.PROVIDER),
    "discover": ("POST", R.DISCOVER),
    "discover_link_init": ("POST", R.DISCOVER_LINK_INIT),
    "discover_link_confirm": ("POST", R.DISCOVER_LINK_CONFIRM),
}
#: Route names (usable with ``server.inject`` and ``server.calls``).
ROUTES: Final[tuple[str, ...]] = tuple(_TABLE)

#: The facilities of the fake (``ProviderResponseType2``); two of them match the search ``apollo``.
PROVIDERS: Final[tuple[dict[str, str | None], ...]] = (
    {"hip_id": "IN2910000101", "hip_name": "Apollo Clinic Koramangala", "city": "Bengaluru", "state": "Karnataka"},
    {"hip_id": "IN2910000102", "hip_name": "Apollo Diagnostics Indiranagar", "city": "Bengaluru", "state": None},
    {"hip_id": "IN2710000201", "hip_name": "Sunrise Hospital", "city": "Pune", "state": "Maharashtra"},
    {"hip_id": "IN0710000301", "hip_name": "City Care Lab", "city": None, "state": None},
)
_MIN_NAME: Final = 3


@attrs.define
class FakePatientRecord:
    """A patient of a facility, matched to one user of the service (an OID or a partner user id)."""

    hip_id: str
    user: str
    patient_id: str
    display: str
    #: ``(care context id, display)`` of each record the facility holds for the patient.
    care_contexts: list[tuple[str, str]]
    #: What else the facility knows the patient by (a registration number, a phone number): ``ref_id`` matches.
    ref_ids: frozenset[str] = frozenset()


@attrs.define
class _Txn:
    kind: str  # "discover" | "link"
    user: str
    hip_id: str
    step: str  # discover: "discovered" | "locked"; link: "otp" | "done" | "locked"
    patients: dict[str, set[str]] = attrs.Factory(dict)  # discover: patient id -> care context ids answered
    sends: int = 0  # discover: OTPs sent under it
    link_txn: str | None = None  # discover: its current link transaction
    parent: str | None = None  # link: the discovery
    patient_id: str = ""
    care_context_id: str = ""
    otp: str = ""
    wrong: int = 0


class FakeDiscover(Domain):
    """State and routes of discover-and-link (see the module docstring).

    Test controls: :meth:`add_records`, :meth:`last_otp`, :meth:`block`, :attr:`linked`, :attr:`max_otp_sends`,
    :attr:`max_otp_attempts`.
    """

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: OTPs sent under one discovery before it is locked with ``ABDM-1100``.
        self.max_otp_sends = 3
        #: Wrong OTPs answered ``ABDM-1035`` in one link transaction; any confirm after that gets ``ABDM-1100``.
        self.max_otp_attempts = 3
        #: user -> the records linked, in order: ``{"hip_id", "patient_id", "care_context_id"}``.
        self.linked: dict[str, list[dict[str, str]]] = {}
        self._records: list[FakePatientRecord] = []
        self._txns: dict[str, _Txn] = {}
        self._blocked: set[str] = set()
        self._rng = random.Random(22)

    # ------------------------------------------------------------------------------ test controls

    def reset(self) -> None:
        """Forget the seeded records, the transactions, the links and the blocks."""
        self.linked.clear()
        self._records.clear()
        self._txns.clear()
        self._blocked.clear()
        self._rng = random.Random(22)

    def add_records(
        self,
        hip_id: str,
        user: str,
        care_contexts: Iterable[tuple[str, str] | str],
        *,
        patient_id: str | None = None,
        display: str = "Asha Verma",
        ref_ids: Iterable[str] = (),
    ) -> str:
        """Seed a patient of the facility ``hip_id`` (one of :data:`PROVIDERS`) matched to ``user`` (the OID, or
        the partner user id, a discovery comes with), holding ``care_contexts`` (``(id, display)`` pairs, or ids: the
        display is then ``"Visit <id>"``). ``ref_ids``: what a discovery's ``ref_id`` may name it by (its
        ``patient_id`` always does). Returns the patient id (default ``P<n>``)."""
        if not any(p["hip_id"] == hip_id for p in PROVIDERS):
            raise ValueError(f"unknown facility {hip_id!r}: use one of the fake's PROVIDERS")
        records = [(c, f"Visit {c}") if isinstance(c, str) else (c[0], c[1]) for c in care_contexts]
        if not records:
            raise ValueError("care_contexts must hold at least one record")
        pid = patient_id if patient_id is not None else f"P{len(self._records) + 1}"
        self._records.append(
            FakePatientRecord(
                hip_id=hip_id,
                user=user,
                patient_id=pid,
                display=display,
                care_contexts=records,
                ref_ids=frozenset(ref_ids),
            )
        )
        return pid

    def last_otp(self, txn_id: str | None = None) -> str:
        """The OTP of a link transaction (what the patient's SMS carried); without ``txn_id``, of the one started
        last."""
        if txn_id is None:
            links = [t for t in self._txns.values() if t.kind == "link"]
            if not links:
                raise LookupError("no link was started")
            return links[-1].otp
        txn = self._txns[txn_id]
        if txn.kind != "link":
            raise LookupError("that is a discovery's transaction: its link has its own")
        return txn.otp

    def block(self, user: str) -> None:
        """ABDM blocks ``user``: every later discover and link call answers 500 ``ABDM-1027``."""
        self._blocked.add(user)

    # ------------------------------------------------------------------------------ routes

    def add_routes(self, app: web.Application) -> None:
        """Register the providers and discover-and-link routes."""
        handlers: dict[str, Callable[[web.Request, dict[str, Any]], Any]] = {
            "discover": self._discover,
            "discover_link_init": self._link_init,
            "discover_link_confirm": self._link_confirm,
        }
        reads: dict[str, Handler] = {"providers": self._providers, "provider": self._provider}
        for name, (method, path) in _TABLE.items():
            handler = reads[name] if name in reads else json_route(self.server, handlers[name])
            app.router.add_route(method, path, self.server._route(name, handler))

    async def _providers(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        name = request.query.get("name", "").strip().lower()
        if len(name) < _MIN_NAME:
            return answer(self.server, request, bad_body())
        found = [dict(p) for p in PROVIDERS if name in str(p["hip_name"]).lower()]
        return self.server._json(request, found or None)

    async def _provider(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        hip_id = request.match_info["hip_id"]
        for provider in PROVIDERS:
            if provider["hip_id"] == hip_id:
                return self.server._json(request, dict(provider))
        return self.server._json(request, {"code": 404, "error": "provider not found"}, 404)

    # ------------------------------------------------------------------------------ discover and link

    def _user(self, request: web.Request) -> str:
        user = request.headers.get(R.PT_ID) or request.query.get("oid") or request.headers.get(R.PARTNER_PT_ID)
        if not user:
            raise Refusal(400, "Something went wrong", "ABDM-1032", "Invalid header")
        if user in self._blocked:
            raise Refusal(
                500,
                "You are blocked. Please try again after 24 hours.",
                "ABDM-1027",
                "You are blocked. Please try again after 24 hours.",
            )
        return user

    def _new_txn(self, txn: _Txn) -> str:
        txn_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        self._txns[txn_id] = txn
        return txn_id

    def _txn(self, body: dict[str, Any], user: str, kind: str) -> _Txn:
        txn_id = body.get("txn_id")
        txn = self._txns.get(txn_id) if isinstance(txn_id, str) else None
        if txn is None or txn.user != user or txn.kind != kind:
            raise no_txn()
        if txn.step == "locked":
            raise otp_lock()
        return txn

    def _linked_ids(self, user: str, hip_id: str) -> set[str]:
        return {link["care_context_id"] for link in self.linked.get(user, []) if link["hip_id"] == hip_id}

    def _discover(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        user = self._user(request)
        hip_id, ref_id = body.get("hip_id"), body.get("ref_id")
        if not isinstance(hip_id, str) or not hip_id or not (ref_id is None or isinstance(ref_id, str)):
            raise bad_body()
        if not any(p["hip_id"] == hip_id for p in PROVIDERS):
            raise Refusal(500, "Something went wrong", "ABDM-1035", "Invalid HIP ID")
        done = self._linked_ids(user, hip_id)
        patients: list[dict[str, Any]] = []
        answered: dict[str, set[str]] = {}
        for record in self._records:
            if record.hip_id != hip_id or record.user != user:
                continue
            if ref_id is not None and ref_id != record.patient_id and ref_id not in record.ref_ids:
                continue
            open_ = [(cid, what) for cid, what in record.care_contexts if cid not in done]
            if not open_:
                continue
            patients.append(
                {
                    "id": record.patient_id,
                    "display": record.display,
                    "care_contexts": [{"id": cid, "display": what} for cid, what in open_],
                }
            )
            answered.setdefault(record.patient_id, set()).update(cid for cid, _ in open_)
        txn_id = self._new_txn(_Txn(kind="discover", user=user, hip_id=hip_id, step="discovered", patients=answered))
        return {"txn_id": txn_id, "patient": patients or None}

    def _link_init(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        user = self._user(request)
        patient_id, cc_id = body.get("patient_ref_id"), body.get("cc_ref_id")
        if not isinstance(patient_id, str) or not isinstance(cc_id, str) or not cc_id:
            raise bad_body()
        discovery = self._txn(body, user, "discover")
        if cc_id not in discovery.patients.get(patient_id, set()):
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        if discovery.sends >= self.max_otp_sends:
            discovery.step = "locked"
            raise otp_lock()
        discovery.sends += 1
        if discovery.link_txn is not None:  # a new OTP: the earlier link transaction no longer confirms
            self._txns[discovery.link_txn].step = "superseded"
        link = _Txn(
            kind="link",
            user=user,
            hip_id=discovery.hip_id,
            step="otp",
            parent=body["txn_id"],
            patient_id=patient_id,
            care_context_id=cc_id,
            otp=f"{self._rng.randint(0, 999_999):06d}",
        )
        self.server._otp_sent(link.otp, f"a care context link at {discovery.hip_id}")
        discovery.link_txn = self._new_txn(link)
        return {"txn_id": discovery.link_txn}

    def _link_confirm(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        user = self._user(request)
        txn = self._txn(body, user, "link")
        if txn.step != "otp":
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        check_otp(txn, body, self.max_otp_attempts)
        txn.step = "done"
        self.linked.setdefault(user, []).append(
            {"hip_id": txn.hip_id, "patient_id": txn.patient_id, "care_context_id": txn.care_context_id}
        )
        return {"cc_ref_id": txn.care_context_id, "txn_id": body["txn_id"]}
