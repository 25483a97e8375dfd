"""The fake's PHR side of a patient's own search (user-initiated linking), the facility's onboarding and the
providers list: a mixin of :class:`~health_async.testing.abdm._hospital.FakeAbdm` (``server.abdm``).

Written from ``care-contexts/discover/introduction.mdx``, the webhook pages ``webhooks/discover-care-context.mdx``,
``discover-link-init.mdx``, ``discover-link-confirm.mdx`` and ``registration.yml``
(``ModelsDiscoverCareContextHmisConnect``, ``ModelsLinkOnInitHmisConnect``, ``ModelsLinkOnConfirmHmisConnect``,
``ModelsAddFacilityRequest`` / ``ModelsAddFacilityResponse``, ``ProviderResponse``).

``await server.abdm.patient_discovers(hip_id, ...)`` plays the patient: it sends the signed
``abha.care_context_discover`` webhook to the registered URL (:meth:`webhooks`) and waits for the hospital's
``on-discover``; then ``abha.care_context_discover_link_init`` for the care contexts offered (or those of
``link=``) and waits for ``on-init``; then ``abha.context_discover_link_confirm`` with the OTP the patient
"received" (the last one the hospital's sender gave :meth:`UserLinkingFake.text`), or with the ``otp=`` given (a
list: one confirmation per OTP, until one links), waiting for each ``on-confirm``. It returns a
:class:`PatientSearch`: every answer, as received. ``await server.abdm.patient_links(search, ...)`` is the same
patient asking again under that discovery (a new link request and its confirmations). A care context confirmed is
held in :attr:`links` (so ``client.abdm.linked_care_contexts`` lists it).

Routes (names for ``server.inject`` and ``server.calls``): ``on_discover``, ``discover_link_on_init``,
``discover_link_on_confirm`` (204; each 400 ``{code, error}`` when its body does not fit its schema, when it
answers a request id the fake did not send (``ABDM-1030`` Invalid request ID) or one already answered
(``ABDM-1064``): an answer is sent once); ``hip_onboard`` (200 ``ModelsAddFacilityResponse``; 400 without
``hip_id`` and ``name``); ``care_contexts_providers`` (the facilities the user, ``oid`` query else ``X-Pt-Id``, has
care contexts linked at: ``{"providers": [...]}``, ``null`` when none).

Judgement calls: each webhook has an envelope transaction id of its own; the discovery and its link request
share one ``txn_id`` (as the vendor's examples do); the confirmation's ``linkRefNumber`` is ``on-init``'s
``ref_num``, whatever it is (the vendor's example shows the patient reference in both; the receivers send a link
reference of the request's own, and a PHR app echoes what it was given); a step not answered within ``timeout``
seconds ends the search (its answer ``None``); a facility not onboarded is listed with ``hip_name`` ``null``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
from aiohttp import web

from .. import _routes as R

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server
    from ..webhooks._send import Outcome

__all__ = ["DISCOVER_EVENT", "LINK_CONFIRM_EVENT", "LINK_INIT_EVENT", "USER_LINKING_ROUTES", "PatientSearch"]

DISCOVER_EVENT: Final = "abha.care_context_discover"
LINK_INIT_EVENT: Final = "abha.care_context_discover_link_init"
LINK_CONFIRM_EVENT: Final = "abha.context_discover_link_confirm"
USER_LINKING_ROUTES: Final[tuple[str, ...]] = (
    "on_discover",
    "discover_link_on_init",
    "discover_link_on_confirm",
    "hip_onboard",
    "care_contexts_providers",
)


@attrs.define
class PatientSearch:
    """What :meth:`UserLinkingFake.patient_discovers` saw: each answer's body as received (``None``: not sent, or
    the step was not reached)."""

    txn_id: str
    #: The ``on-discover`` body.
    discover: dict[str, Any] | None = None
    #: The ``on-init`` body.
    link_init: dict[str, Any] | None = None
    #: The ``on-confirm`` bodies, one per OTP tried.
    confirms: list[dict[str, Any]] = attrs.Factory(list)
    #: The care context references the last ``on-confirm`` linked.
    linked: tuple[str, ...] = ()
    #: Who searched where (for :meth:`UserLinkingFake.patient_links`; hidden from ``repr``).
    hip_id: str = attrs.field(default="", repr=False)
    abha_address: str = attrs.field(default="", repr=False)
    oid: str | None = attrs.field(default=None, repr=False)

    @property
    def errors(self) -> list[int]:
        """The ``error.code`` of every answer that carried one, in order."""
        bodies = [self.discover, self.link_init, *self.confirms]
        return [b["error"]["code"] for b in bodies if b is not None and isinstance(b.get("error"), dict)]

    def __repr__(self) -> str:
        """Which answers came and their error codes; never a body (names, references), nor the transaction id."""
        steps = (("discover", self.discover), ("link_init", self.link_init))
        shown = ", ".join(f"{name}={'answered' if body is not None else None}" for name, body in steps)
        return f"PatientSearch({shown}, confirms={len(self.confirms)}, linked={len(self.linked)}, errors={self.errors})"


def _refuse(message: str, code: str = "ABDM-1006") -> web.Response:
    """``GenericError`` with the service's ``source_error`` (errors.mdx's code)."""
    return web.json_response(
        {"code": 400, "error": message, "source_error": {"code": code, "message": message}}, status=400
    )


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _error_ok(error: object) -> bool:
    return isinstance(error, dict) and type(error.get("code")) is int and isinstance(error.get("message", ""), str)


def _patients_ok(patients: object) -> bool:
    """``ModelsPatient`` items: ``ref_num``, ``display``, ``hi_type`` of the enum, ``care_contexts`` of
    ``{ref_num, display}``."""
    if not isinstance(patients, list) or not patients:
        return False
    for item in patients:
        if not isinstance(item, dict) or not _text(item.get("ref_num")) or not _text(item.get("display")):
            return False
        if item.get("hi_type") not in R.HI_TYPES or not isinstance(item.get("care_contexts"), list):
            return False
        for cc in item["care_contexts"]:
            if not isinstance(cc, dict) or not _text(cc.get("ref_num")) or not _text(cc.get("display")):
                return False
    return True


class UserLinkingFake:
    """The PHR side of a patient's own search, mixed into ``FakeAbdm`` (see the module)."""

    server: Server
    links: dict[str, dict[str, dict[str, Any]]]

    def _init_user_linking(self) -> None:
        #: Every answer received, by route name (bodies as sent, the refused ones too).
        self.answers: dict[str, list[Any]] = {name: [] for name in USER_LINKING_ROUTES[:3]}
        #: ``(mobile, otp)`` the hospital's sender gave :meth:`text`, in order.
        self.texts: list[tuple[str, str]] = []
        #: Onboarded facilities: hip_id -> the answer sent.
        self.facilities: dict[str, dict[str, Any]] = {}
        self._asked: dict[str, str] = {}  # request id -> the route that must answer it
        self._answered: dict[str, asyncio.Future[dict[str, Any]]] = {}

    def _reset_user_linking(self) -> None:
        for future in self._answered.values():
            future.cancel()
        self._init_user_linking()

    def _add_user_linking_routes(self, app: web.Application) -> None:
        route = self.server._route
        app.router.add_post(R.ON_DISCOVER, route("on_discover", self._on_discover))
        app.router.add_post(R.DISCOVER_LINK_ON_INIT, route("discover_link_on_init", self._on_init))
        app.router.add_post(R.DISCOVER_LINK_ON_CONFIRM, route("discover_link_on_confirm", self._on_confirm))
        app.router.add_post(R.HIP_ONBOARD, route("hip_onboard", self._onboard))
        app.router.add_get(R.CARE_CONTEXTS_PROVIDERS, route("care_contexts_providers", self._providers))

    # ------------------------------------------------------------------------------ the patient's phone

    def text(self, mobile: str, otp: str) -> None:
        """The patient's phone: an SMS with ``otp`` reached ``mobile`` (call it from the hospital's sender)."""
        self.texts.append((mobile, otp))

    # ------------------------------------------------------------------------------ routes

    async def _answer(self, request: web.Request, rec: RecordedRequest, name: str) -> web.Response:
        body = await self.server._read_json(request, rec)
        self.answers[name].append(body)
        if not isinstance(body, dict) or not _text(body.get("request_id")):
            return _refuse("request_id is required")
        if not self._fits(name, body):
            return _refuse(f"the {name} body does not fit its schema")
        request_id = body["request_id"]
        if self._asked.get(request_id) != name:
            return _refuse("Invalid request ID", "ABDM-1030")
        future = self._answered.get(request_id)
        if future is None or future.done():
            return _refuse("request with this request id already exists", "ABDM-1064")
        future.set_result(body)
        return web.Response(status=204)

    @staticmethod
    def _fits(name: str, body: dict[str, Any]) -> bool:
        error = body.get("error")
        if error is not None and not _error_ok(error):
            return False
        if name in ("on_discover", "discover_link_on_init") and not _text(body.get("txn_id")):
            return False
        if name == "discover_link_on_init":
            if error is not None:
                return True
            expiry = body.get("otp_expiry")
            try:
                dt.datetime.fromisoformat(str(expiry).replace("Z", "+00:00"))
            except ValueError:
                return False
            return _text(body.get("ref_num"))
        patients = body.get("patients")
        return _patients_ok(patients) if patients is not None else error is not None

    async def _on_discover(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        return await self._answer(request, rec, "on_discover")

    async def _on_init(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        return await self._answer(request, rec, "discover_link_on_init")

    async def _on_confirm(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        return await self._answer(request, rec, "discover_link_on_confirm")

    async def _onboard(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not _text(body.get("hip_id")) or not _text(body.get("name")):
            return _refuse("hip_id and name are required")
        hip_id = body["hip_id"]
        answer = {
            "hip_id": hip_id,
            "hip_name": body["name"],
            "hip_code": f"HC-{len(self.facilities) + 1}",
            "scan_share_url": f"https://phr.example/share?hip_id={hip_id}",
        }
        self.facilities[hip_id] = answer
        return self.server._json(request, answer)

    async def _providers(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:  # noqa: ARG002
        oid = request.query.get("oid") or request.headers.get(R.PT_ID) or ""
        hips: dict[str, None] = {}
        for patient, held in self.links.items():
            for link in held.values():
                if oid and (link.get("oid") == oid or patient == oid) and link.get("hip_id"):
                    hips[link["hip_id"]] = None
        providers = [{"hip_id": h, "hip_name": self.facilities.get(h, {}).get("hip_name")} for h in hips]
        return self.server._json(request, {"providers": providers or None})

    # ------------------------------------------------------------------------------ the patient's search

    if TYPE_CHECKING:  # FakeAbdm's

        async def send_webhook(
            self, event: str, transaction_id: str, data: dict[str, Any], *, service: str = "abdm"
        ) -> Outcome: ...

    async def _ask(self, route: str, event: str, data: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send ``event`` and wait for its answer on ``route`` (``None``: refused delivery, or no answer in time)."""
        request_id = data["request_id"]
        self._asked[request_id] = route
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answered[request_id] = future
        outcome = await self.send_webhook(event, str(uuid.uuid4()), data)
        if not isinstance(outcome, int) or not 200 <= outcome < 300:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return None

    async def patient_discovers(
        self,
        hip_id: str = "HIP-1",
        *,
        abha_address: str = "shyam@sbx",
        name: str = "Shyam Kumar",
        gender: str = "M",
        year_of_birth: int = 1990,
        mobile: str = "9876543210",
        abha_number: str = "",
        oid: str | None = None,
        link: Iterable[str] | None = None,
        otp: str | Sequence[str | None] | None = None,
        timeout: float = 5.0,
    ) -> PatientSearch:
        """Play a patient searching ``hip_id`` from a PHR app, end to end (see the module). ``link``: the care
        context references to link (default: every one offered); ``otp``: what the patient types (default: the
        last OTP texted since the link request); a list tries each in turn until one links.

        ``RuntimeError`` when no webhook URL is registered. :meth:`patient_links` asks again under the same
        discovery."""
        txn_id = str(uuid.uuid4())
        ids = {"hip_id": hip_id, "oid": oid, "partner_patient_id": None}
        search = PatientSearch(txn_id, hip_id=hip_id, abha_address=abha_address, oid=oid)
        search.discover = await self._ask(
            "on_discover",
            DISCOVER_EVENT,
            {
                "abha_address": abha_address,
                "gender": gender,
                "identifiers": [
                    {"type": "MOBILE", "value": mobile},
                    {"type": "ABHA_NUMBER", "value": abha_number},
                    {"type": "abhaAddress", "value": abha_address},
                ],
                "patient_name": name,
                "request_id": str(uuid.uuid4()),
                "txn_id": txn_id,
                "year_of_birth": year_of_birth,
                **ids,
            },
            timeout,
        )
        return await self._link_and_confirm(search, link, otp, timeout)

    async def patient_links(
        self,
        search: PatientSearch,
        *,
        link: Iterable[str] | None = None,
        otp: str | Sequence[str | None] | None = None,
        timeout: float = 5.0,
    ) -> PatientSearch:
        """The patient of ``search`` asks again to link under the same discovery (its ``txn_id``), as a PHR app
        lets them after a refused OTP: a new ``abha.care_context_discover_link_init`` and its confirmations, as
        :meth:`patient_discovers` sends them after the discovery. Returns a new :class:`PatientSearch` (its
        ``discover`` that of ``search``)."""
        again = PatientSearch(
            search.txn_id, search.discover, hip_id=search.hip_id, abha_address=search.abha_address, oid=search.oid
        )
        return await self._link_and_confirm(again, link, otp, timeout)

    async def _link_and_confirm(
        self,
        search: PatientSearch,
        link: Iterable[str] | None,
        otp: str | Sequence[str | None] | None,
        timeout: float,
    ) -> PatientSearch:
        """The link request and confirmations of :meth:`patient_discovers`, under ``search``'s discovery."""
        ids = {"hip_id": search.hip_id, "oid": search.oid, "partner_patient_id": None}
        offered = (search.discover or {}).get("patients") or []
        wanted = None if link is None else set(link)
        patients = []
        for item in offered:
            chosen = [cc for cc in item["care_contexts"] if wanted is None or cc["ref_num"] in wanted]
            if chosen:
                patients.append(
                    {
                        "care_contexts": [{"reference_number": cc["ref_num"]} for cc in chosen],
                        "count": len(chosen),
                        "hi_type": item["hi_type"],
                        "id": "",
                        "ref_num": item["ref_num"],
                    }
                )
        if wanted is not None and not patients:  # the patient asks for what was not offered
            patients = [{"care_contexts": [{"reference_number": r} for r in sorted(wanted)], "count": len(wanted),
                         "hi_type": "OPConsultation", "id": "", "ref_num": "unknown"}]  # fmt: skip
        if not patients:
            return search
        texted = len(self.texts)
        search.link_init = await self._ask(
            "discover_link_on_init",
            LINK_INIT_EVENT,
            {
                "abha_address": search.abha_address,
                "patient": patients,
                "request_id": str(uuid.uuid4()),
                "txn_id": search.txn_id,
                **ids,
            },
            timeout,
        )
        if search.link_init is None or search.link_init.get("error") is not None:
            return search
        typed: list[str | None]
        typed = [otp] if isinstance(otp, str) else [None] if otp is None else list(otp)
        for attempt in typed:
            token = attempt if attempt is not None else (self.texts[-1][1] if len(self.texts) > texted else "")
            data = {
                "linkRefNumber": search.link_init["ref_num"],  # as the PHR app: on-init's reference, echoed
                "request_id": str(uuid.uuid4()),
                "token": token,
                **ids,
            }
            answer = await self._ask("discover_link_on_confirm", LINK_CONFIRM_EVENT, data, timeout)
            if answer is None:
                break
            search.confirms.append(answer)
            if answer.get("patients"):
                self._hold(search.abha_address, search.hip_id, search.oid, answer["patients"])
                search.linked = tuple(cc["ref_num"] for p in answer["patients"] for cc in p["care_contexts"])
                break
        return search

    def _hold(self, abha_address: str, hip_id: str, oid: str | None, patients: list[dict[str, Any]]) -> None:
        held = self.links.setdefault(abha_address, {})
        for item in patients:
            for cc in item["care_contexts"]:
                held.setdefault(
                    cc["ref_num"],
                    {"care_context_id": cc["ref_num"], "display": cc["display"], "hi_type": item["hi_type"],
                     "data": None, "oid": oid, "hip_id": hip_id},
                )  # fmt: skip
