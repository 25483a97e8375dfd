"""The fake KYC upgrade and user-session flows (``registration.yml``: ``/abdm/v1/profile/kyc/init``, ``/resend``,
``/verify``; ``/abdm/v1/session/init``, ``/verify``, ``/status``), on the ABHA accounts of the fake's ABHA domain
(``server.abha.accounts``: a KYC changes them, as the real upgrade does).

Routes (names for ``server.inject`` and ``server.calls``): ``kyc_init``, ``kyc_resend``, ``kyc_verify``,
``session_init``, ``session_verify``, ``session_status``. A transaction per ``txn_id``, at step ``otp``, ``done``
or ``locked``:

* ``kyc_init`` ``{method, identifier, user_x_token?}``: the user is the holder of the session token
  ``user_x_token`` when one is given, else the account whose OID is ``X-Pt-Id``. ``aadhaar``: the OTP goes to the
  Aadhaar-linked mobile (:meth:`FakeAbha.linked_mobile`), a wrong one is UIDAI's ``MIS-1013``; ``abha-number``: to
  the mobile of the account holding that ABHA number, a wrong one is ``ABDM-1035``. Answers ``{txn_id}``.
* ``kyc_resend`` ``{txn_id}``: a new OTP; ``kyc_verify`` ``{txn_id, otp, user_x_token?}``: the user's account
  becomes KYC-verified (``kyc_verified``, its Aadhaar and ABHA number set); answers ``{txn_id}``.
* ``session_init`` ``{abha_address}``: the OTP goes to the address's mobile (``ABDM-1035`` when wrong); answers
  ``{txn_id}``. ``session_verify`` ``{txn_id, otp}``: answers ``{token, refresh_token}`` and opens a session for
  the address's OID (:attr:`FakeAbhaKyc.sessions`). ``session_status`` (``X-Pt-Id``): ``{logged_in,
  kyc_verified}``.

Errors (the service's table, the same bodies as the ABHA fake): a wrong OTP 400 ``MIS-1013`` / ``ABDM-1035``;
after :attr:`FakeAbhaKyc.max_otp_attempts` wrong OTPs, or past :attr:`FakeAbhaKyc.max_otp_sends` OTPs in one
transaction, 500 ``ABDM-1100`` and the transaction is locked; a blocked identifier (``server.abha.block``, the
Aadhaar or ABHA number or address) 500 ``ABDM-1027``; an unknown ``txn_id`` 500 ``MIS-1026``; a call at the
wrong step or of the other flow 400 ``ABDM-1031``; a malformed body 400 ``ABDM-1006``; no such user 500
``ABDM-1110``; an unknown ABHA address 400 ``ABDM-1012``; an unknown ABHA number 400 ``ABDM-1013``; a status
without ``X-Pt-Id`` 400 ``ABDM-1032``.

Judgement calls: a ``user_x_token`` must be a live session token of the user (else 500 ``ABDM-1023`` "Invalid
User"), and a KYC started with one must be verified with the same one; a KYC of an account already
KYC-verified is refused (400 ``ABDM-1031``); sessions never expire by themselves (:meth:`FakeAbhaKyc.expire_sessions`);
the answers carry no ``hint`` (the schemas have none). Tests read the OTPs "sent" with :meth:`FakeAbhaKyc.last_otp`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

import attrs
from aiohttp import web

from .. import _routes as R
from .._domain import Domain
from .._refusals import Refusal, answer, bad_body, check_otp, json_route, no_txn, otp_lock
from ._registration import FakeAbha, FakeAccount, _key

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = ["ROUTES", "FakeAbhaKyc"]

_TABLE: Final[dict[str, tuple[str, str]]] = {
    "kyc_init": ("POST", R.KYC_INIT),
    "kyc_resend": ("POST", R.KYC_RESEND),
    "kyc_verify": ("POST", R.KYC_VERIFY),
    "session_init": ("POST", R.SESSION_INIT),
    "session_verify": ("POST", R.SESSION_VERIFY),
    "session_status": ("GET", R.SESSION_STATUS),
}
#: Route names (usable with ``server.inject`` and ``server.calls``).
ROUTES: Final[tuple[str, ...]] = tuple(_TABLE)


class _WithAbha(Protocol):
    abha: FakeAbha


@attrs.define
class _Txn:
    kind: str  # "kyc" | "session"
    step: str  # "otp" | "done" | "locked"
    otp: str
    mismatch_code: str  # what a wrong OTP gets: MIS-1013 (Aadhaar OTP) or ABDM-1035 (ABDM OTP)
    oid: str  # the user's OID
    sends: int = 1
    wrong: int = 0
    aadhaar: str | None = None  # what a KYC ties the account to
    abha_number: str | None = None
    user_token: str | None = None  # the user_x_token a KYC was started with


class FakeAbhaKyc(Domain):
    """State and routes of the KYC upgrade and user session (see the module docstring).

    Test controls: :meth:`last_otp`, :meth:`step_of`, :attr:`sessions`, :meth:`expire_sessions`,
    :attr:`max_otp_sends`, :attr:`max_otp_attempts`; the accounts, blocks and linked mobiles are the ABHA
    domain's (``server.abha``).
    """

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: OTPs sent in one transaction (the init and the resends) before it is locked with ``ABDM-1100``.
        self.max_otp_sends = 3
        #: Wrong OTPs answered with a mismatch in one transaction; any OTP check after that gets ``ABDM-1100``.
        self.max_otp_attempts = 3
        #: Live session tokens, each with its user's OID.
        self.sessions: dict[str, str] = {}
        self._txns: dict[str, _Txn] = {}
        self._rng = random.Random(23)
        self._serial = 0

    # ------------------------------------------------------------------------------ test controls

    def reset(self) -> None:
        """Forget transactions and sessions."""
        self._txns.clear()
        self.sessions.clear()
        self._rng = random.Random(23)
        self._serial = 0

    def last_otp(self, txn_id: str | None = None) -> str:
        """The OTP the transaction's last SMS carried (what the person would type); without ``txn_id``, that of
        the transaction started last."""
        if txn_id is None:
            if not self._txns:
                raise LookupError("no KYC or session transaction was started")
            txn_id = next(reversed(self._txns))
        return self._txns[txn_id].otp

    def step_of(self, txn_id: str) -> str:
        """The transaction's step (``otp``, ``done``, ``locked``)."""
        return self._txns[txn_id].step

    def expire_sessions(self) -> None:
        """End every session (``session_status`` then says ``logged_in: false``)."""
        self.sessions.clear()

    # ------------------------------------------------------------------------------ state

    @property
    def _abha(self) -> FakeAbha:
        return cast(_WithAbha, self.server).abha

    def _account_of(self, oid: str | None) -> FakeAccount:
        for account in self._abha.accounts.values():
            if oid is not None and account.oid == oid:
                return account
        raise Refusal(500, "ABHA User not found.", "ABDM-1110")

    def _user(self, request: web.Request, token: Any) -> FakeAccount:
        pt_id = request.headers.get(R.PT_ID)
        if token is None:
            return self._account_of(pt_id)
        oid = self.sessions.get(token) if isinstance(token, str) else None
        if oid is None or (pt_id is not None and pt_id != oid):
            raise Refusal(500, "Something went wrong", "ABDM-1023", "Invalid User")
        return self._account_of(oid)

    def _new_txn(self, txn: _Txn) -> str:
        txn_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        self._txns[txn_id] = txn
        return txn_id

    def _otp(self, purpose: str, mobile: str | None) -> str:
        otp = f"{self._rng.randint(0, 999_999):06d}"
        self.server._otp_sent(otp, purpose, mobile)  # shown to a person trying the fake
        return otp

    def _kyc_mobile(self, aadhaar: str | None, abha_number: str | None) -> str | None:
        """Where a KYC's OTP goes: the Aadhaar-linked mobile, else the ABHA number's account's."""
        if aadhaar is not None:
            return self._abha.linked_mobile(aadhaar)
        owner = next((a for a in self._abha.accounts.values() if a.abha_number == abha_number), None)
        return None if owner is None else owner.mobile

    def _txn(self, body: dict[str, Any], kind: str) -> tuple[str, _Txn]:
        txn_id = body.get("txn_id")
        txn = self._txns.get(txn_id) if isinstance(txn_id, str) else None
        if txn is None or not isinstance(txn_id, str):
            raise no_txn()
        if txn.step == "locked":
            raise otp_lock()
        if txn.kind != kind or txn.step != "otp":
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        return txn_id, txn

    # ------------------------------------------------------------------------------ routes

    def add_routes(self, app: web.Application) -> None:
        """Register the KYC and session routes."""
        handlers: dict[str, Callable[[web.Request, dict[str, Any]], dict[str, Any]]] = {
            "kyc_init": self._kyc_init,
            "kyc_resend": self._kyc_resend,
            "kyc_verify": self._kyc_verify,
            "session_init": self._session_init,
            "session_verify": self._session_verify,
        }
        for name, (method, path) in _TABLE.items():
            handler = self._status if name == "session_status" else json_route(self.server, handlers[name])
            app.router.add_route(method, path, self.server._route(name, handler))

    # KYC

    def _kyc_init(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        method, identifier, token = body.get("method"), body.get("identifier"), body.get("user_x_token")
        if method not in ("aadhaar", "abha-number") or not isinstance(identifier, str):
            raise bad_body()
        if not (token is None or isinstance(token, str)):
            raise bad_body()
        account = self._user(request, token)
        if account.kyc_verified:
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        abha = self._abha
        if method == "aadhaar":
            if len(identifier) != 12 or not identifier.isdigit():
                raise Refusal(400, "Validation failed", "ABDM-1010")
            abha._check_blocked(identifier)
            txn = _Txn(
                kind="kyc",
                step="otp",
                otp=self._otp("ABHA KYC", abha.linked_mobile(identifier)),
                mismatch_code="MIS-1013",
                oid=account.oid,
                aadhaar=identifier,
                abha_number=abha._abha_number_for(identifier),
                user_token=token,
            )
        else:
            owner = next((a for a in abha.accounts.values() if a.abha_number == identifier), None)
            if owner is None:
                raise Refusal(400, "Invalid ABHA Number", "ABDM-1013")
            abha._check_blocked(identifier)
            txn = _Txn(
                kind="kyc",
                step="otp",
                otp=self._otp("ABHA KYC", owner.mobile),
                mismatch_code="ABDM-1035",
                oid=account.oid,
                aadhaar=owner.aadhaar,
                abha_number=identifier,
                user_token=token,
            )
        return {"txn_id": self._new_txn(txn)}

    def _resend(self, txn: _Txn) -> None:
        if txn.sends >= self.max_otp_sends:
            txn.step = "locked"
            raise otp_lock()
        txn.sends += 1
        txn.otp = self._otp("ABHA KYC", self._kyc_mobile(txn.aadhaar, txn.abha_number))

    def _kyc_resend(self, _request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "kyc")
        self._resend(txn)
        return {"txn_id": txn_id}

    def _kyc_verify(self, _request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "kyc")
        if body.get("user_x_token") != txn.user_token:
            raise Refusal(500, "Something went wrong", "ABDM-1023", "Invalid User")
        check_otp(txn, body, self.max_otp_attempts, txn.mismatch_code)
        account = self._account_of(txn.oid)
        account.kyc_verified, account.aadhaar, account.abha_number = True, txn.aadhaar, txn.abha_number
        txn.step = "done"
        return {"txn_id": txn_id}

    # user session

    def _session_init(self, _request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        address = body.get("abha_address")
        if not isinstance(address, str) or not address.strip():
            raise bad_body()
        self._abha._check_blocked(_key(address))
        account = self._abha.accounts.get(_key(address))
        if account is None:
            raise Refusal(400, "No records found against the ABHA Address", "ABDM-1012")
        otp = self._otp("ABHA user session", account.mobile)
        txn = _Txn(kind="session", step="otp", otp=otp, mismatch_code="ABDM-1035", oid=account.oid)
        return {"txn_id": self._new_txn(txn)}

    def _session_verify(self, _request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        _, txn = self._txn(body, "session")
        check_otp(txn, body, self.max_otp_attempts, txn.mismatch_code)
        txn.step = "done"
        self._serial += 1
        token = f"fake-session-token-{self._serial}"
        self.sessions[token] = txn.oid
        return {"token": token, "refresh_token": f"fake-session-refresh-{self._serial}"}

    async def _status(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        pt_id = request.headers.get(R.PT_ID)
        try:
            if not pt_id:
                raise Refusal(400, "Something went wrong", "ABDM-1032", "Invalid header")
            account = self._account_of(pt_id)
        except Refusal as refusal:
            return answer(self.server, request, refusal)
        logged_in = pt_id in self.sessions.values()
        return self.server._json(request, {"logged_in": logged_in, "kyc_verified": account.kyc_verified})
