"""The fake consents: requests and artefacts per patient, approve / deny / revoke, the consent PIN, auto-approval.

Written from ``registration.yml`` (``/abdm/v1/consents/*``: ``ConsentCreateConsentRequest``, ``ApproveRequest``,
``DenyRequest``, ``RevokeRequest``, ``SetRequest``, ``VerifyRequestType4`` / ``5``, ``ChangeRequest``,
``ExistResponse``, ``InitResponseType3``, ``SettingsResponse``, ``GenericError``) and ``consents/*.mdx``.

Routes (names for ``server.inject`` and ``server.calls``): ``consents_create``, ``consents_list``,
``consents_details``, ``consents_approve``, ``consents_deny``, ``consents_revoke``, ``consents_auto_approval``
(GET), ``consents_set_auto_approval`` (PATCH), ``consent_pin_exists``, ``consent_pin_set``, ``consent_pin_verify``,
``consent_pin_change``, ``consent_pin_forgot_init``, ``consent_pin_forgot_verify``, ``consent_pin_reset``.

State (:attr:`FakeConsents.consents`, consent id -> the stored consent): each consent has its ``patient`` (an OID,
or ``None``), ``abha_address``, ``hip_ids``, ``hi_types``, ``purpose``, ``period``, ``status`` (``REQUESTED`` ->
``GRANTED`` on approve, ``DENIED`` on deny, ``REVOKED`` once every artefact is revoked) and ``artefacts`` (one per
HIP approved: ``artefact_id``, ``hip_id``, ``care_contexts``, ``hi_types``, ``status`` ``GRANTED`` / ``REVOKED``).
Tests seed consents with :meth:`FakeConsents.add_request`; ``create`` adds one too (its ``consent_init_id`` is also
its consent id here), for the patient its body's ``patient.oid`` names, else the one :attr:`FakeConsents.patient_of`
finds for its ``patient.health_id`` (the server wires it to the fake's ABHA accounts), so a consent an HIU creates
reaches that patient's request inbox (:meth:`FakeConsents.inbox_items`; ``purpose.code`` is ABDM's code of the
purpose, :data:`PURPOSE_CODES`; ``requester.name`` the one the HIU sent). The PIN (:attr:`FakeConsents.pins`, user
-> PIN) and the auto-approval policy (:attr:`FakeConsents.auto_approval`) are per user.

The user acting is the ``oid`` query parameter (or form field, for the PATCH), else ``X-Pt-Id``: 400 ``ABDM-1032``
without either (but for ``create``, ``list`` and ``details``, the HIU's calls, which need none).

Rules and answers (``GenericError`` bodies, the codes of the vendor's table where one fits):

* ``pin/verify`` ``{pin, scope?}``: no PIN set 404 ``ABDM-1001``; a wrong PIN 400 ``ABDM-1035`` "Invalid PIN" (and
  counted); after :attr:`FakeConsents.max_pin_attempts` wrong PINs every PIN check answers 500 ``ABDM-1022`` until
  the PIN is reset; the right PIN answers 204 and authorises **one** approve (scope ``consentrequest.approve``) or
  revoke (``consent.revoke``) of that user. ``pin/change`` checks ``old`` the same way; ``pin/set`` on a user who
  has a PIN 500 ``ABDM-1053`` "Data already exists"; a PIN that is not 4 digits 400 ``ABDM-1006``.
* ``approve`` without a PIN check for it 400 ``ABDM-1031``; a consent of another patient, or unknown, 500
  ``ABDM-1039`` "Invalid Consent request id"; not ``REQUESTED`` 400 ``ABDM-1031``; an artefact for a HIP the
  request does not name 400 ``ABDM-1031``. Answered 204 after :attr:`FakeConsents.on_approved` (when set) is
  awaited. ``deny`` and ``revoke`` alike (``revoke``: unknown or not granted artefacts 400 ``ABDM-1062``).
* ``pin/forgot/init`` answers ``{txn_id, medium, otp_medium_value, expiry_in_minutes}`` (the OTP readable with
  :meth:`FakeConsents.last_otp`); ``forgot/verify`` ``{otp, txn_id}``: unknown txn 500 ``MIS-1026``, wrong OTP 400
  ``ABDM-1035`` "OTP doesn't match", after :attr:`FakeConsents.max_otp_attempts` wrong ones 500 ``ABDM-1100``;
  ``pin/reset`` ``{pin}`` only after the user's last forgot transaction was verified (else 400 ``ABDM-1031``).
* ``create``, ``list``, ``details`` answer 200 with their bodies (the OpenAPI's "204 with a body" cannot carry one).

Judgement calls: the vendor documents no code for a wrong PIN, a PIN not set, or a PIN check missing before an
approval; the ones above are the fake's. Nothing is sent to any other domain of the fake: the lead wires
:attr:`FakeConsents.on_approved` (to the fake HIU, say).
"""

from __future__ import annotations

import datetime as dt
import random
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from .. import _routes as R
from .._domain import Domain
from .._refusals import Refusal, bad_body, json_route, no_txn, otp_lock

if TYPE_CHECKING:
    from .._domain import Server

__all__ = ["HI_TYPES", "PURPOSES", "PURPOSE_CODES", "ROUTES", "FakeConsents"]

_TABLE: Final[dict[str, tuple[str, str]]] = {
    "consents_create": ("POST", R.CONSENTS_CREATE),
    "consents_list": ("POST", R.CONSENTS_LIST),
    "consents_details": ("POST", R.CONSENTS_DETAILS),
    "consents_approve": ("POST", R.CONSENTS_APPROVE),
    "consents_deny": ("POST", R.CONSENTS_DENY),
    "consents_revoke": ("POST", R.CONSENTS_REVOKE),
    "consents_auto_approval": ("GET", R.CONSENTS_AUTO_APPROVAL),
    "consents_set_auto_approval": ("PATCH", R.CONSENTS_AUTO_APPROVAL),
    "consent_pin_exists": ("GET", R.PIN_EXISTS),
    "consent_pin_set": ("POST", R.PIN_SET),
    "consent_pin_verify": ("POST", R.PIN_VERIFY),
    "consent_pin_change": ("POST", R.PIN_CHANGE),
    "consent_pin_forgot_init": ("POST", R.PIN_FORGOT_INIT),
    "consent_pin_forgot_verify": ("POST", R.PIN_FORGOT_VERIFY),
    "consent_pin_reset": ("POST", R.PIN_RESET),
}
#: Route names (usable with ``server.inject`` and ``server.calls``).
ROUTES: Final[tuple[str, ...]] = tuple(_TABLE)
#: registration.yml: the ``record_types`` enum of ``ConsentCreateConsentRequest``.
HI_TYPES: Final = frozenset(
    {
        "OPConsultation",
        "Prescription",
        "DischargeSummary",
        "DiagnosticReport",
        "ImmunizationRecord",
        "HealthDocumentRecord",
        "WellnessRecord",
        "Invoice",
    }
)
#: registration.yml: the ``purpose`` enum of ``ConsentCreateConsentRequest``, each with the ABDM purpose code a
#: request inbox shows it with (``CommonsPurpose.code``; registration.yml documents no values: ABDM's own codes).
PURPOSE_CODES: Final = {
    "Self Requested": "PATRQT",
    "Care management": "CAREMGT",
    "Public Health": "PUBHLTH",
    "Disease Specific Health Research": "DSRCH",
}
PURPOSES: Final = frozenset(PURPOSE_CODES)
_SCOPE_APPROVE: Final = "consentrequest.approve"
_SCOPE_REVOKE: Final = "consent.revoke"
_PIN: Final = re.compile(r"[0-9]{4}")

#: What :attr:`FakeConsents.on_approved` is called with (see there).
ApprovedHook = Callable[[dict[str, Any]], Awaitable[None]]


def _stamp(when: dt.datetime | None = None) -> str:
    return (when or dt.datetime.now(dt.UTC)).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _invalid_request() -> Refusal:
    return Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")


def _unknown_consent() -> Refusal:
    return Refusal(500, "Something went wrong", "ABDM-1039", "Invalid Consent request id")


def _object(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}


def _str_list(value: Any) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        return None
    return list(value)


class FakeConsents(Domain):
    """State and routes of the consents, the consent PIN and auto-approval (see the module docstring).

    Test controls: :meth:`add_request`, :attr:`consents`, :meth:`artefact_ids`, :attr:`pins`, :meth:`last_otp`,
    :attr:`auto_approval`, :attr:`max_pin_attempts`, :attr:`max_otp_attempts`, :attr:`on_approved`.
    """

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: Consent id -> the stored consent (see the module docstring).
        self.consents: dict[str, dict[str, Any]] = {}
        #: User (OID) -> consent PIN.
        self.pins: dict[str, str] = {}
        #: User (OID) -> whether auto-approval is on.
        self.auto_approval: dict[str, bool] = {}
        #: Wrong PINs before every PIN check of the user answers 500 ``ABDM-1022`` (until a reset).
        self.max_pin_attempts = 3
        #: Wrong OTPs in one forgot transaction before it answers 500 ``ABDM-1100``.
        self.max_otp_attempts = 3
        #: Awaited after each approval, before the approve is answered (an exception in it makes that answer a
        #: 500), with a dict of the approved consent: ``consent_id`` (str), ``patient`` (the patient's OID, or
        #: ``None``), ``abha_address`` (str or ``None``), ``hip_ids`` (list of the HIP ids approved, in the
        #: approval's order), ``care_contexts`` (list of ``{"hip_id", "care_context_id"}``), ``hi_types`` (list of
        #: the record types granted: the approval's, else the request's), ``artefact_ids`` (list, one per HIP, in
        #: the order of ``hip_ids``) and ``artefacts`` (list of ``{"artefact_id", "hip_id", "care_context_ids",
        #: "hi_types"}``). ``None``: nothing is called. Not cleared by ``reset``.
        self.on_approved: ApprovedHook | None = None
        #: Awaited after every change of a consent's status (approved, denied, an artefact revoked) with
        #: ``{"consent_id", "status", "artefact_ids"}`` (the consent's status as stored, ``GRANTED``, ``DENIED``,
        #: ``REVOKED``; the artefacts it changed). The server wires it to the fake HIU's ``abha.consent_update``
        #: webhook. ``None``: nothing is called. Not cleared by ``reset``.
        self.on_status_changed: ApprovedHook | None = None
        #: The patient (OID) of an ABHA address, or ``None`` when the fake knows no such patient: who a consent an
        #: HIU creates without ``patient.oid`` is for. The server wires it to its ABHA accounts. ``None``: such a
        #: consent is for no known patient (in no inbox). Not cleared by ``reset``.
        self.patient_of: Callable[[str], str | None] | None = None
        self._wrong_pins: dict[str, int] = {}
        self._authorised: dict[str, set[str]] = {}
        self._txns: dict[str, dict[str, Any]] = {}
        self._rng = random.Random(22)

    # ------------------------------------------------------------------------------ test controls

    def reset(self) -> None:
        """Forget consents, PINs, policies and transactions (``on_approved`` stays)."""
        self.consents.clear()
        self.pins.clear()
        self.auto_approval.clear()
        self._wrong_pins.clear()
        self._authorised.clear()
        self._txns.clear()
        self._rng = random.Random(22)

    def add_request(
        self,
        patient: str | None,
        hip_ids: Iterable[str],
        hi_types: Iterable[str] = ("OPConsultation",),
        *,
        abha_address: str | None = None,
        purpose: str = "Care management",
        days: int = 365,
        clinic_id: str | None = None,
        doctor_oid: str | None = None,
        consent_id: str | None = None,
    ) -> str:
        """Seed a consent request (status ``REQUESTED``) to ``patient`` (an OID) for the records of ``hip_ids``;
        returns its id (``consent_id``, else a new one). ``ValueError`` for an undocumented record type or
        purpose."""
        types = list(hi_types)
        if not set(types) <= HI_TYPES:
            raise ValueError(f"hi_types must be of {', '.join(sorted(HI_TYPES))}")
        if purpose not in PURPOSES:
            raise ValueError(f"purpose must be one of {', '.join(sorted(PURPOSES))}")
        now = dt.datetime.now(dt.UTC)
        period = {
            "from": _stamp(now - dt.timedelta(days=days)),
            "to": _stamp(now),
            "expiry": _stamp(now + dt.timedelta(days=30)),
        }
        return self._add(
            consent_id or self._uuid(),
            patient=patient,
            abha_address=abha_address,
            hip_ids=list(hip_ids),
            hi_types=types,
            purpose=purpose,
            period=period,
            hiu={"clinic_id": clinic_id, "d_oid": doctor_oid},
        )

    def inbox_items(self) -> list[dict[str, Any]]:
        """The consents as the patient's request inbox shows them (``GET /abdm/v1/requests`` and
        ``/abdm/v1/request``: registration.yml's ``DetailsResponse``, plus ``patient`` and ``kind``), for
        :attr:`FakeRequests.sources <health_async.testing.abdm._requests.FakeRequests.sources>`; a consent of no
        known patient (an HIU's request by ABHA address alone) is in no inbox."""
        items = []
        for consent in self.consents.values():
            if consent["patient"] is None:
                continue
            granted = {a["hip_id"]: a for a in consent["artefacts"]}
            hips = consent["hip_ids"] or list(granted)
            items.append(
                {
                    "patient": consent["patient"],
                    "kind": "consent",
                    "id": consent["consent_id"],
                    "status": consent["status"].lower(),
                    "access_mode": "view",
                    "created_at": consent["c_at"],
                    "updated_at": consent["u_at"],
                    "erase_at": consent["period"]["expiry"],
                    "duration": {"from": consent["period"]["from"], "to": consent["period"]["to"]},
                    "hi_types": [{"id": t, "display": t, "enabled": True} for t in consent["hi_types"]],
                    "hiu": {"id": consent["hiu"].get("clinic_id") or "HIU-1", "name": "Fake HIU"},
                    "providers": [
                        {
                            "hip": {"id": hip, "name": f"{hip} hospital"},
                            "care_contexts": [
                                {"id": cid, "display": f"visit {cid}"}
                                for cid in (granted[hip]["care_contexts"] if hip in granted else [])
                            ],
                            "consent_artefact_id": granted[hip]["artefact_id"] if hip in granted else None,
                        }
                        for hip in hips
                    ],
                    "purpose": {"code": PURPOSE_CODES[consent["purpose"]], "text": consent["purpose"]},
                    "requester": {"name": consent.get("requester") or "Dr Fake"},
                }
            )
        return items

    def artefact_ids(self, consent_id: str) -> list[str]:
        """The consent artefact ids of a consent (one per HIP approved; empty before the approval)."""
        return [a["artefact_id"] for a in self.consents[consent_id]["artefacts"]]

    def last_otp(self, txn_id: str | None = None) -> str:
        """The OTP of a PIN-reset transaction (what the patient would type); without ``txn_id``, of the last one."""
        if txn_id is None:
            if not self._txns:
                raise LookupError("no PIN reset was started")
            txn_id = next(reversed(self._txns))
        return str(self._txns[txn_id]["otp"])

    # ------------------------------------------------------------------------------ state

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _add(self, consent_id: str, **fields: Any) -> str:
        stamp = _stamp()
        self.consents[consent_id] = {
            "consent_id": consent_id,
            "consent_init_id": consent_id,
            "status": "REQUESTED",
            "artefacts": [],
            "reason": None,
            "c_at": stamp,
            "u_at": stamp,
            **fields,
        }
        return consent_id

    @staticmethod
    def _user(request: web.Request, form: str | None = None) -> str:
        user = form or request.query.get("oid") or request.headers.get(R.PT_ID)
        if not user:
            raise Refusal(400, "Something went wrong", "ABDM-1032", "Invalid header")
        return user

    def _consent_of(self, user: str, consent_id: Any) -> dict[str, Any]:
        consent = self.consents.get(consent_id) if isinstance(consent_id, str) else None
        if consent is None or consent["patient"] not in (None, user):
            raise _unknown_consent()
        return consent

    def _check_pin(self, user: str, pin: Any) -> None:
        if not isinstance(pin, str) or not _PIN.fullmatch(pin):
            raise bad_body()
        held = self.pins.get(user)
        if held is None:
            raise Refusal(404, "No data found", "ABDM-1001", "Consent PIN not set")
        if self._wrong_pins.get(user, 0) >= self.max_pin_attempts:
            raise Refusal(500, "Too many requests", "ABDM-1022", "Too many requests")
        if pin != held:
            self._wrong_pins[user] = self._wrong_pins.get(user, 0) + 1
            raise Refusal(400, "Invalid PIN", "ABDM-1035", "PIN does not match")
        self._wrong_pins.pop(user, None)

    def _use_authorisation(self, user: str, scope: str) -> None:
        held = self._authorised.get(user, set())
        if scope not in held:
            raise _invalid_request()
        held.discard(scope)

    # ------------------------------------------------------------------------------ routes

    def add_routes(self, app: web.Application) -> None:
        """Register the consent, PIN and auto-approval routes."""
        handlers: dict[str, Callable[[web.Request, Any], Awaitable[Any]]] = {
            "consents_create": self._create,
            "consents_list": self._list,
            "consents_details": self._details,
            "consents_approve": self._approve,
            "consents_deny": self._deny,
            "consents_revoke": self._revoke,
            "consents_auto_approval": self._get_policy,
            "consents_set_auto_approval": self._set_policy,
            "consent_pin_exists": self._pin_exists,
            "consent_pin_set": self._pin_set,
            "consent_pin_verify": self._pin_verify,
            "consent_pin_change": self._pin_change,
            "consent_pin_forgot_init": self._forgot_init,
            "consent_pin_forgot_verify": self._forgot_verify,
            "consent_pin_reset": self._pin_reset,
        }
        no_body = {  # no JSON body: a GET, a form, or none at all
            "consents_auto_approval",
            "consents_set_auto_approval",
            "consent_pin_exists",
            "consent_pin_forgot_init",
        }
        for name, (method, path) in _TABLE.items():
            handler = json_route(self.server, handlers[name], read_body=name not in no_body)
            app.router.add_route(method, path, self.server._route(name, handler))

    # the HIU's side

    async def _create(self, _request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        patient, period = body.get("patient"), body.get("period")
        types = _str_list(body.get("record_types"))
        if not isinstance(patient, dict) or not isinstance(patient.get("health_id"), str):
            raise bad_body()
        if body.get("purpose") not in PURPOSES or not types or not set(types) <= HI_TYPES:
            raise bad_body()
        if not isinstance(period, dict) or not all(isinstance(period.get(k), str) for k in ("from", "to", "expiry")):
            raise bad_body()
        if period["from"] >= period["to"]:  # same format (the client's Z form): text order is time order
            raise Refusal(400, "Date Range given is invalid", "ABDM-1063")
        hip = body.get("hip_identifier")
        hip_ids = [hip["id"]] if isinstance(hip, dict) and isinstance(hip.get("id"), str) else []
        hiu = _object(body, "hiu")
        oid = patient.get("oid") if isinstance(patient.get("oid"), str) and patient["oid"] else None
        if oid is None and self.patient_of is not None:
            oid = self.patient_of(patient["health_id"])
        requester = _object(hiu, "requester").get("name")
        consent_id = self._add(
            self._uuid(),
            patient=oid,
            abha_address=patient["health_id"],
            hip_ids=hip_ids,
            hi_types=types,
            purpose=body["purpose"],
            period={k: period[k] for k in ("from", "to", "expiry")},
            hiu={"clinic_id": hiu.get("clinic_id"), "d_oid": hiu.get("d_oid")},
            requester=requester if isinstance(requester, str) and requester else None,
        )
        return {"consent_init_id": consent_id}

    async def _list(self, _request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        patient, hiu = _object(body, "patient"), _object(body, "hiu")
        wanted = {
            "patient": patient.get("oid"),
            "abha_address": patient.get("health_id"),
        }
        found = []
        for consent in self.consents.values():
            if any(value is not None and consent[key] != value for key, value in wanted.items()):
                continue
            if any(hiu.get(key) is not None and consent["hiu"].get(key) != hiu[key] for key in ("clinic_id", "d_oid")):
                continue
            found.append(
                {
                    "consent_id": consent["consent_id"],
                    "consent_init_id": consent["consent_init_id"],
                    "status": consent["status"],
                    "hi_types": consent["hi_types"],
                    "period": consent["period"],
                    "c_at": consent["c_at"],
                    "u_at": consent["u_at"],
                }
            )
        return {"consents": found}

    async def _details(self, _request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        given = body.get("consent_id")
        consent = self.consents.get(given) if isinstance(given, str) else None
        if consent is None:
            raise _unknown_consent()
        granted = {a["hip_id"]: a for a in consent["artefacts"] if a["status"] == "GRANTED"}
        data = []
        for hip_id in consent["hip_ids"] or list(granted):
            artefact = granted.get(hip_id)
            contexts = [] if artefact is None else artefact["care_contexts"]
            data.append(
                {
                    "hip": {"id": hip_id, "name": f"{hip_id} hospital"},
                    "care_contexts": [
                        {
                            "id": cid,
                            "display": f"visit {cid}",
                            "status": "ConsentGranted",
                            "created_at": consent["u_at"],
                            "documents": [],
                        }
                        for cid in contexts
                    ],
                }
            )
        return {"data": data}

    # the patient's answer

    async def _approve(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        consent = self._consent_of(user, body.get("id"))
        entries = body.get("consent_artefacts")
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise bad_body()
        artefacts = []
        for entry in entries:
            contexts = entry.get("care_contexts")
            if not isinstance(entry.get("hip_id"), str) or not isinstance(contexts, list) or not contexts:
                raise bad_body()
            if not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in contexts):
                raise bad_body()
            if consent["hip_ids"] and entry["hip_id"] not in consent["hip_ids"]:
                raise _invalid_request()
            types = _str_list(entry.get("hi_types")) or _str_list(body.get("hi_types")) or consent["hi_types"]
            artefacts.append(
                {
                    "artefact_id": self._uuid(),
                    "hip_id": entry["hip_id"],
                    "care_contexts": [c["id"] for c in contexts],
                    "hi_types": types,
                    "status": "GRANTED",
                }
            )
        self._use_authorisation(user, _SCOPE_APPROVE)
        if consent["status"] != "REQUESTED":
            raise _invalid_request()
        consent.update(status="GRANTED", artefacts=artefacts, u_at=_stamp())
        if self.on_approved is not None:
            await self.on_approved(
                {
                    "consent_id": consent["consent_id"],
                    "patient": consent["patient"],
                    "abha_address": consent["abha_address"],
                    "hip_ids": [a["hip_id"] for a in artefacts],
                    "care_contexts": [
                        {"hip_id": a["hip_id"], "care_context_id": cid} for a in artefacts for cid in a["care_contexts"]
                    ],
                    "hi_types": list(dict.fromkeys(t for a in artefacts for t in a["hi_types"])),
                    "artefact_ids": [a["artefact_id"] for a in artefacts],
                    "artefacts": [
                        {
                            "artefact_id": a["artefact_id"],
                            "hip_id": a["hip_id"],
                            "care_context_ids": list(a["care_contexts"]),
                            "hi_types": list(a["hi_types"]),
                        }
                        for a in artefacts
                    ],
                }
            )
        await self._changed(consent, [a["artefact_id"] for a in artefacts])

    async def _deny(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        consent = self._consent_of(user, body.get("id"))
        reason = body.get("reason")
        if not (reason is None or isinstance(reason, str)):
            raise bad_body()
        if consent["status"] != "REQUESTED":
            raise _invalid_request()
        consent.update(status="DENIED", reason=reason, u_at=_stamp())
        await self._changed(consent, [])

    async def _revoke(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        ids = _str_list(body.get("consent_artefacts"))
        if not ids:
            raise bad_body()
        found = []
        for artefact_id in ids:
            match = next(
                (
                    (consent, artefact)
                    for consent in self.consents.values()
                    for artefact in consent["artefacts"]
                    if artefact["artefact_id"] == artefact_id
                ),
                None,
            )
            if match is None or match[1]["status"] != "GRANTED" or match[0]["patient"] not in (None, user):
                raise Refusal(400, "Consent Not granted", "ABDM-1062")
            found.append(match)
        self._use_authorisation(user, _SCOPE_REVOKE)
        for consent, artefact in found:
            artefact["status"] = "REVOKED"
            consent["u_at"] = _stamp()
            if all(a["status"] == "REVOKED" for a in consent["artefacts"]):
                consent["status"] = "REVOKED"
        for consent in {id(c): c for c, _ in found}.values():
            await self._changed(consent, [a["artefact_id"] for c, a in found if c is consent])

    async def _changed(self, consent: dict[str, Any], artefact_ids: list[str]) -> None:
        if self.on_status_changed is not None:
            await self.on_status_changed(
                {"consent_id": consent["consent_id"], "status": consent["status"], "artefact_ids": artefact_ids}
            )

    # auto-approval

    async def _get_policy(self, request: web.Request, _body: None) -> dict[str, Any]:
        user = self._user(request)
        return {"status": "enabled" if self.auto_approval.get(user) else "disabled"}

    async def _set_policy(self, request: web.Request, _body: None) -> dict[str, Any]:
        form = await request.post()
        given = form.get("oid")
        user = self._user(request, given if isinstance(given, str) else None)
        self.auto_approval[user] = True
        return {"status": "enabled"}

    # the PIN

    async def _pin_exists(self, request: web.Request, _body: None) -> dict[str, Any]:
        return {"exist": self._user(request) in self.pins}

    async def _pin_set(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        pin = body.get("pin")
        if not isinstance(pin, str) or not _PIN.fullmatch(pin):
            raise bad_body()
        if user in self.pins:
            raise Refusal(500, "Something went wrong", "ABDM-1053", "Data already exists")
        self.pins[user] = pin

    async def _pin_verify(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        scope = body.get("scope")
        if not (scope is None or isinstance(scope, str)):
            raise bad_body()
        self._check_pin(user, body.get("pin"))
        self._authorised.setdefault(user, set()).add(scope or "")

    async def _pin_change(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        new = body.get("new")
        if not isinstance(new, str) or not _PIN.fullmatch(new):
            raise bad_body()
        self._check_pin(user, body.get("old"))
        self.pins[user] = new

    async def _forgot_init(self, request: web.Request, _body: None) -> dict[str, Any]:
        user = self._user(request)
        txn_id = self._uuid()
        otp = f"{self._rng.randint(0, 999_999):06d}"
        self._txns[txn_id] = {"user": user, "otp": otp, "step": "otp", "wrong": 0}
        self.server._otp_sent(otp, "consent PIN reset", "******3210")
        return {"txn_id": txn_id, "medium": "mobile", "otp_medium_value": "******3210", "expiry_in_minutes": 10}

    async def _forgot_verify(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        txn_id, otp = body.get("txn_id"), body.get("otp")
        txn = self._txns.get(txn_id) if isinstance(txn_id, str) else None
        if txn is None or txn["user"] != user:
            raise no_txn()
        if not isinstance(otp, str) or len(otp) != R.OTP_LENGTH or not otp.isdigit():
            raise bad_body()
        if txn["step"] == "locked" or txn["wrong"] >= self.max_otp_attempts:
            txn["step"] = "locked"
            raise otp_lock()
        if txn["step"] != "otp":
            raise _invalid_request()
        if otp != txn["otp"]:
            txn["wrong"] += 1
            raise Refusal(400, "OTP doesn't match", "ABDM-1035", "OTP does not matched")
        txn["step"] = "verified"

    async def _pin_reset(self, request: web.Request, body: dict[str, Any]) -> None:
        user = self._user(request)
        pin = body.get("pin")
        if not isinstance(pin, str) or not _PIN.fullmatch(pin):
            raise bad_body()
        mine = [txn for txn in self._txns.values() if txn["user"] == user]
        if not mine or mine[-1]["step"] != "verified":
            raise _invalid_request()
        mine[-1]["step"] = "done"
        self.pins[user] = pin
        self._wrong_pins.pop(user, None)
