"""The fake server's ABHA milestone-1 flow (registration and login): a state machine per ``txn_id``.

Every transaction has a kind (``aadhaar``, ``mobile``, ``login``) and a step; each route accepts a transaction only
at the steps where the real flow allows that call:

=================  =====================================================================================
step               calls accepted
=================  =====================================================================================
``otp``            the resend of its kind; its verify (``aadhaar_verify``, ``mobile_verify``, ``login_verify``)
``mobile_otp``     ``aadhaar_mobile_verify``, ``aadhaar_mobile_resend`` (after ``confirm_mobile_otp``)
``create``         ``aadhaar_create`` (a transaction with Aadhaar KYC), ``mobile_create`` (mobile), ``auto_login``
``select``         ``login_phr``
``done``           nothing (answered ``ABDM-1031``)
``locked``         nothing: ``ABDM-1100`` (too many OTPs or wrong OTPs)
=================  =====================================================================================

What it answers, and the errors it uses (from the service's error table):

* wrong OTP: 400 ``MIS-1013`` (an Aadhaar OTP) or 400 ``ABDM-1035`` (an ABDM mobile OTP); the step is unchanged.
  After :attr:`FakeAbha.max_otp_attempts` wrong OTPs, or more than :attr:`FakeAbha.max_otp_sends` OTPs sent in one
  transaction, the transaction is locked: 500 ``ABDM-1100``.
* unknown ``txn_id``: 500 ``MIS-1026``; a call at the wrong step: 400 ``ABDM-1031`` (``ABDM-1102`` when the
  mobile OTP is still pending); a malformed body: 400 ``ABDM-1006``; an address breaking the creation rules: 400
  ``ABDM-1010``; an address taken: 500 ``ABDM-1101``; an unknown ABHA address: 400 ``ABDM-1012``; an unknown mobile
  at login: 400 ``ABDM-1111``; an unknown ABHA number: 400 ``ABDM-1013``; a blocked identifier
  (:meth:`FakeAbha.block`): 500 ``ABDM-1027``.
* Aadhaar verify: the mobile given is the Aadhaar-linked one (:meth:`FakeAbha.linked_mobile`) -> ``abha_create``
  (with ``abha_profiles`` when the Aadhaar already holds ABHA addresses), else ``confirm_mobile_otp`` and an OTP to
  the new mobile. Login verify: by ABHA address -> ``abha_end``; by mobile or ABHA number -> ``abha_select`` (one
  or several); by Aadhaar -> ``abha_create`` with the Aadhaar's ABHA addresses (then ``auto_login``).
* Judgement calls: the ``txn_id`` stays the same for a whole transaction; ABHA addresses are compared without
  case and without their suffix, and stored with ``@sbx``; ``method=search`` logins are not simulated (400).

Seeded accounts (see :attr:`FakeAbha.accounts`): the last of ``server.data.valid_aadhaar`` already holds the ABHA
address ``asha.verma@sbx`` (on its linked mobile); the mobile :data:`SEEDED_MOBILE` holds two mobile-only ABHA
addresses. Every other valid Aadhaar number has none. Tests read the OTPs "sent" with :meth:`FakeAbha.last_otp`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
from aiohttp import web

from .. import _routes as R
from .._domain import Domain
from .._refusals import Refusal, answer, bad_body, check_otp, json_route, no_txn, otp_lock

if TYPE_CHECKING:
    from .._common import Handler, RecordedRequest
    from .._domain import Server

__all__ = ["ROUTES", "SEEDED_MOBILE", "FakeAbha", "FakeAccount"]

#: Route names (usable with ``server.inject``), from the fake's own table of the vendor's ABHA operations
#: (``_routes.ABHA``); ``aadhaar_init`` is a core route of the server.
ROUTES: Final[tuple[str, ...]] = tuple(sorted(R.ABHA))

#: A mobile number that holds two mobile-only ABHA addresses in the seeded state.
SEEDED_MOBILE: Final = "9876501234"

_FIRST = ("Asha", "Ravi", "Meera", "Arjun", "Kavya", "Rohan", "Nisha", "Vikram")
_LAST = ("Verma", "Kumar", "Iyer", "Sharma", "Reddy", "Das", "Nair", "Gupta")
_NEW_ADDRESS: Final = re.compile(r"(?=.{8,18}$)[a-z0-9]+(?:[._][a-z0-9]+){0,2}")


@attrs.define
class FakeAccount:
    """An ABHA address held by the fake service."""

    abha_address: str
    first_name: str
    last_name: str
    gender: str
    date_of_birth: dt.date
    mobile: str
    oid: str
    aadhaar: str | None = None
    abha_number: str | None = None
    kyc_verified: bool = False
    pincode: str = "560001"


@attrs.define
class _Txn:
    kind: str  # "aadhaar" | "mobile" | "login"
    step: str  # "otp" | "mobile_otp" | "create" | "select" | "done" | "locked"
    otp: str
    mismatch_code: str  # the code a wrong OTP gets: MIS-1013 (Aadhaar OTP) or ABDM-1035 (ABDM OTP)
    sends: int = 1
    wrong: int = 0
    aadhaar: str | None = None
    mobile: str | None = None
    method: str | None = None
    candidates: list[str] = attrs.Factory(list)
    login_address: str | None = None


#: What each kind of transaction's OTP is for (as the fake shows it: ``FakeHealthServer(show_otps=True)``).
_PURPOSES: Final = {"aadhaar": "ABHA registration", "mobile": "ABHA registration", "login": "ABHA login"}


def _body_only(handler: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[web.Request, Any], Any]:
    """A handler of the body alone, as :func:`~._refusals.json_route` calls one (with the request too)."""
    return lambda _request, body: handler(body)


def _key(address: str) -> str:
    return address.strip().lower().partition("@")[0]


def _mask(mobile: str) -> str:
    return "******" + mobile[-4:]


class FakeAbha(Domain):
    """State and routes of the ABHA milestone-1 flow (registration and login), a state machine per txn_id.

    Test controls: :meth:`last_otp`, :meth:`linked_mobile`, :meth:`add_account`, :meth:`block`, :meth:`step_of`,
    :attr:`accounts`, :attr:`max_otp_sends`, :attr:`max_otp_attempts`.
    """

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: OTPs sent in one transaction (the init and the resends) before it is locked with ``ABDM-1100``.
        self.max_otp_sends = 3
        #: Wrong OTPs answered ``OtpMismatch`` in one transaction; any OTP check after that gets ``ABDM-1100``.
        self.max_otp_attempts = 3
        #: ABHA addresses held by the service, by their name (lowercase, without suffix).
        self.accounts: dict[str, FakeAccount] = {}
        self._txns: dict[str, _Txn] = {}
        self._blocked: set[str] = set()
        self._rng = random.Random(0)
        self._serial = 0
        self._seed()

    # ------------------------------------------------------------------------------ test controls

    def reset(self) -> None:
        """Forget transactions, blocks and added accounts; back to the seeded accounts."""
        self._txns.clear()
        self._blocked.clear()
        self.accounts.clear()
        self._rng = random.Random(0)
        self._serial = 0
        self._seed()

    def last_otp(self, txn_id: str | None = None) -> str:
        """The OTP the transaction's last SMS carried (what the patient would type); without ``txn_id``, that of
        the transaction started last (for tests that drive a flow from outside, like the CLI's)."""
        if txn_id is None:
            if not self._txns:
                raise LookupError("no ABHA transaction was started")
            txn_id = next(reversed(self._txns))
        return self._txns[txn_id].otp

    def step_of(self, txn_id: str) -> str:
        """The transaction's step (``otp``, ``mobile_otp``, ``create``, ``select``, ``done``, ``locked``)."""
        return self._txns[txn_id].step

    def linked_mobile(self, aadhaar: str) -> str:
        """The 10-digit mobile number linked to an Aadhaar number (deterministic; its last four digits are the
        ones in the ``aadhaar_init`` hint)."""
        digest = hashlib.sha256(aadhaar.encode()).hexdigest()
        tail = "".join(str(int(c, 16) % 10) for c in digest[:4])
        middle = "".join(str(int(c, 16) % 10) for c in digest[4:9])
        return "9" + middle + tail

    def add_account(
        self,
        abha_address: str,
        *,
        mobile: str | None = None,
        aadhaar: str | None = None,
        first_name: str = "Asha",
        last_name: str = "Verma",
        gender: str = "F",
        date_of_birth: dt.date = dt.date(1990, 5, 15),
    ) -> FakeAccount:
        """Add an existing ABHA address (linked to ``aadhaar`` for a KYC-verified one, and/or to ``mobile``; a
        given Aadhaar with no mobile uses its linked mobile)."""
        if mobile is None:
            mobile = self.linked_mobile(aadhaar) if aadhaar is not None else SEEDED_MOBILE
        account = FakeAccount(
            abha_address=f"{_key(abha_address)}@sbx",
            first_name=first_name,
            last_name=last_name,
            gender=gender,
            date_of_birth=date_of_birth,
            mobile=mobile,
            oid=str(self._rng.randint(10**14, 10**15 - 1)),
            aadhaar=aadhaar,
            abha_number=self._abha_number_for(aadhaar) if aadhaar is not None else None,
            kyc_verified=aadhaar is not None,
        )
        self.accounts[_key(abha_address)] = account
        return account

    def block(self, identifier: str) -> None:
        """Answer ``ABDM-1027`` (blocked for 24 hours) to OTP requests for this mobile number, Aadhaar number or
        ABHA address."""
        self._blocked.add(_key(identifier) if "@" in identifier else identifier)

    # ------------------------------------------------------------------------------ state

    def _seed(self) -> None:
        aadhaar = self.server.data.valid_aadhaar[-1]
        self.add_account("asha.verma", aadhaar=aadhaar, first_name="Asha", last_name="Verma")
        self.add_account("ravi_kumar", mobile=SEEDED_MOBILE, first_name="Ravi", last_name="Kumar", gender="M")
        self.add_account("ravi.k1990", mobile=SEEDED_MOBILE, first_name="Ravi", last_name="Kumar", gender="M")

    def _abha_number_for(self, aadhaar: str) -> str:
        for account in self.accounts.values():
            if account.aadhaar == aadhaar and account.abha_number:
                return account.abha_number
        digest = hashlib.sha256(b"abha" + aadhaar.encode()).hexdigest()
        return "91" + "".join(str(int(c, 16) % 10) for c in digest[:12])

    def _person(self, aadhaar: str) -> dict[str, Any]:
        digest = hashlib.sha256(b"kyc" + aadhaar.encode()).digest()
        return {
            "first_name": _FIRST[digest[0] % len(_FIRST)],
            "last_name": _LAST[digest[1] % len(_LAST)],
            "gender": "MFO"[digest[2] % 3],
            "date_of_birth": dt.date(1960 + digest[3] % 45, 1 + digest[4] % 12, 1 + digest[5] % 28),
        }

    def _otp(self, kind: str, mobile: str | None) -> str:
        otp = f"{self._rng.randint(0, 999_999):06d}"
        self.server._otp_sent(otp, _PURPOSES.get(kind, "ABHA"), mobile)  # shown to a person trying the fake
        return otp

    def start_aadhaar(self, aadhaar: str) -> str:
        """Start an Aadhaar registration (called by the server's ``aadhaar_init`` route); the new txn id."""
        txn_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        self._txns[txn_id] = _Txn(
            kind="aadhaar",
            step="otp",
            otp=self._otp("aadhaar", self.linked_mobile(aadhaar)),
            mismatch_code="MIS-1013",
            aadhaar=aadhaar,
            mobile=self.linked_mobile(aadhaar),
        )
        return txn_id

    def _new_txn(self, txn: _Txn) -> str:
        txn_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        self._txns[txn_id] = txn
        return txn_id

    def _txn(self, body: dict[str, Any], kind: str | tuple[str, ...], *steps: str) -> tuple[str, _Txn]:
        txn_id = body.get("txn_id")
        txn = self._txns.get(txn_id) if isinstance(txn_id, str) else None
        if txn is None or not isinstance(txn_id, str):
            raise no_txn()
        if txn.step == "locked":
            raise otp_lock()
        kinds = (kind,) if isinstance(kind, str) else kind
        if txn.kind not in kinds or txn.step not in steps:
            if txn.step == "mobile_otp":
                raise Refusal(400, "Mobile number verification is pending.", "ABDM-1102")
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        return txn_id, txn

    def _resend(self, txn: _Txn) -> None:
        if txn.sends >= self.max_otp_sends:
            txn.step = "locked"
            raise otp_lock()
        txn.sends += 1
        txn.otp = self._otp(txn.kind, txn.mobile)

    def _new_otp_step(self, txn: _Txn, step: str, mismatch_code: str) -> None:
        txn.step, txn.otp, txn.sends, txn.wrong = step, self._otp(txn.kind, txn.mobile), 1, 0
        txn.mismatch_code = mismatch_code

    def _check_blocked(self, *identifiers: str | None) -> None:
        if any(i is not None and i in self._blocked for i in identifiers):
            raise Refusal(
                500,
                "You are blocked. Please try again after 24 hours.",
                "ABDM-1027",
                "You are blocked. Please try again after 24 hours.",
            )

    # ------------------------------------------------------------------------------ answers

    def _profile(self, account: FakeAccount) -> dict[str, Any]:
        dob = account.date_of_birth
        others = [a.abha_address for a in self.accounts.values() if account.aadhaar and a.aadhaar == account.aadhaar]
        return {
            "abha_address": account.abha_address,
            "abha_addresses": others or [account.abha_address],
            "abha_number": _format_abha_number(account.abha_number) if account.abha_number else None,
            "first_name": account.first_name,
            "middle_name": None,
            "last_name": account.last_name,
            "full_name": f"{account.first_name} {account.last_name}",
            "gender": account.gender,
            "day_of_birth": dob.day,
            "month_of_birth": dob.month,
            "year_of_birth": dob.year,
            "mobile": account.mobile,
            "pincode": account.pincode,
            "state_name": "KARNATAKA",
            "district_name": "BENGALURU URBAN",
            "kyc_verified": account.kyc_verified,
        }

    def _kyc_profile(self, txn: _Txn) -> dict[str, Any]:
        assert txn.aadhaar is not None
        person = self._person(txn.aadhaar)
        dob = person["date_of_birth"]
        return {
            "first_name": person["first_name"],
            "last_name": person["last_name"],
            "full_name": f"{person['first_name']} {person['last_name']}",
            "gender": person["gender"],
            "day_of_birth": dob.day,
            "month_of_birth": dob.month,
            "year_of_birth": dob.year,
            "mobile": txn.mobile,
            "kyc_verified": True,
        }

    def _summaries(self, addresses: list[str]) -> list[dict[str, Any]]:
        out = []
        for key in addresses:
            account = self.accounts[key]
            out.append(
                {
                    "abha_address": account.abha_address,
                    "name": f"{account.first_name} {account.last_name}",
                    "kyc_verified": "true" if account.kyc_verified else "false",
                }
            )
        return out

    def _end(self, txn: _Txn, txn_id: str | None, account: FakeAccount) -> dict[str, Any]:
        txn.step = "done"
        self._serial += 1
        answer: dict[str, Any] = {
            "skip_state": "abha_end",
            "profile": self._profile(account),
            "eka": {
                "oid": account.oid,
                "uuid": str(uuid.UUID(int=int(account.oid), version=4)),
                "min_token": f"fake-min-token-{self._serial}",
            },
            "token": f"fake-abha-token-{self._serial}",
            "refresh_token": f"fake-abha-refresh-{self._serial}",
        }
        if txn_id is not None:
            answer["txn_id"] = txn_id
        return answer

    def _create_step(self, txn: _Txn, txn_id: str, candidates: list[str], **extra: Any) -> dict[str, Any]:
        txn.step, txn.candidates = "create", candidates
        return {"skip_state": "abha_create", "txn_id": txn_id, "abha_profiles": self._summaries(candidates), **extra}

    def _new_account(self, txn: _Txn, address: Any, details: dict[str, Any]) -> FakeAccount:
        if not isinstance(address, str) or not address.strip():
            raise bad_body()
        local, _, suffix = address.strip().lower().partition("@")
        if (suffix and suffix not in R.ABHA_ADDRESS_SUFFIXES) or not _NEW_ADDRESS.fullmatch(local):
            raise Refusal(400, "Validation failed", "ABDM-1010", "Validation failed")
        if local.count(".") > 1 or local.count("_") > 1:
            raise Refusal(400, "Validation failed", "ABDM-1010", "Validation failed")
        if local in self.accounts:
            raise Refusal(
                500,
                "Something went wrong",
                "ABDM-1101",
                "This ABHA Address already exists. Please create with unique ABHA Address",
            )
        assert txn.mobile is not None
        account = FakeAccount(
            abha_address=f"{local}@sbx",
            mobile=txn.mobile,
            oid=str(self._rng.randint(10**14, 10**15 - 1)),
            aadhaar=txn.aadhaar,
            abha_number=self._abha_number_for(txn.aadhaar) if txn.aadhaar else None,
            kyc_verified=txn.aadhaar is not None,
            **details,
        )
        self.accounts[local] = account
        return account

    # ------------------------------------------------------------------------------ routes

    def add_routes(self, app: web.Application) -> None:
        """Register the ABHA routes (besides the server's own ``aadhaar_init``)."""
        json_handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "aadhaar_resend": self._aadhaar_resend,
            "aadhaar_verify": self._aadhaar_verify,
            "aadhaar_mobile_verify": self._aadhaar_mobile_verify,
            "aadhaar_mobile_resend": self._aadhaar_mobile_resend,
            "aadhaar_create": self._aadhaar_create,
            "auto_login": self._auto_login,
            "mobile_init": self._mobile_init,
            "mobile_resend": self._mobile_resend,
            "mobile_verify": self._mobile_verify,
            "mobile_create": self._mobile_create,
            "address_exists": self._address_exists,
            "login_methods": self._login_methods,
            "login_init": self._login_init,
            "login_verify": self._login_verify,
            "login_phr": self._login_phr,
        }
        for name, (method, path) in R.ABHA.items():
            if name == "suggest_addresses":
                handler: Handler = self._suggest
            else:
                handler = json_route(self.server, _body_only(json_handlers[name]))
            app.router.add_route(method, path, self.server._route(name, handler))

    # registration with Aadhaar

    def _aadhaar_resend(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "aadhaar", "otp")
        self._resend(txn)
        assert txn.mobile is not None
        return {"hint": f"OTP sent successfully to your mobile number {_mask(txn.mobile)}", "txn_id": txn_id}

    def _aadhaar_verify(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "aadhaar", "otp")
        mobile = body.get("mobile")
        if not isinstance(mobile, str) or len(mobile) != 10 or not mobile.isdigit():
            raise Refusal(400, "Invalid Mobile Email", "ABDM-1014")
        check_otp(txn, body, self.max_otp_attempts, txn.mismatch_code)
        assert txn.aadhaar is not None
        if mobile != self.linked_mobile(txn.aadhaar):
            txn.mobile = mobile
            self._new_otp_step(txn, "mobile_otp", "ABDM-1035")
            return {
                "skip_state": "confirm_mobile_otp",
                "txn_id": txn_id,
                "hint": f"OTP sent successfully to your mobile number {_mask(mobile)}",
                "abha_profiles": [],
                "profile": self._kyc_profile(txn),
            }
        return self._create_step(txn, txn_id, self._on_aadhaar(txn.aadhaar), profile=self._kyc_profile(txn))

    def _on_aadhaar(self, aadhaar: str) -> list[str]:
        return [key for key, a in self.accounts.items() if a.aadhaar == aadhaar]

    def _aadhaar_mobile_verify(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "aadhaar", "mobile_otp")
        check_otp(txn, body, self.max_otp_attempts, txn.mismatch_code)
        assert txn.aadhaar is not None
        return self._create_step(txn, txn_id, self._on_aadhaar(txn.aadhaar), profile=self._kyc_profile(txn))

    def _aadhaar_mobile_resend(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "aadhaar", "mobile_otp")
        self._resend(txn)
        assert txn.mobile is not None
        return {"hint": f"OTP sent successfully to your mobile number {_mask(txn.mobile)}", "txn_id": txn_id}

    def _aadhaar_create(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, ("aadhaar", "login"), "create")
        if txn.aadhaar is None:
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        person = self._person(txn.aadhaar)
        account = self._new_account(txn, body.get("abha_address"), person)
        return self._end(txn, txn_id, account)

    def _auto_login(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, ("aadhaar", "mobile", "login"), "create")
        address = body.get("abha_address")
        key = _key(address) if isinstance(address, str) else ""
        if key not in txn.candidates:
            raise Refusal(400, "No records found against the ABHA Address", "ABDM-1012")
        return self._end(txn, txn_id, self.accounts[key])

    # registration with a mobile number

    def _mobile_init(self, body: dict[str, Any]) -> dict[str, Any]:
        mobile = body.get("mobile_number")
        if not isinstance(mobile, str) or len(mobile) != 10 or not mobile.isdigit():
            raise Refusal(400, "Invalid Mobile Email", "ABDM-1014")
        self._check_blocked(mobile)
        txn = _Txn(kind="mobile", step="otp", otp=self._otp("mobile", mobile), mismatch_code="ABDM-1035", mobile=mobile)
        txn_id = self._new_txn(txn)
        return {"hint": f"OTP sent successfully to your mobile number {_mask(mobile)}", "txn_id": txn_id}

    def _mobile_resend(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "mobile", "otp")
        self._resend(txn)
        assert txn.mobile is not None
        return {"hint": f"OTP sent successfully to your mobile number {_mask(txn.mobile)}", "txn_id": txn_id}

    def _mobile_verify(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "mobile", "otp")
        check_otp(txn, body, self.max_otp_attempts, txn.mismatch_code)
        on_mobile = [key for key, a in self.accounts.items() if a.mobile == txn.mobile]
        return self._create_step(txn, txn_id, on_mobile)

    def _mobile_create(self, body: dict[str, Any]) -> dict[str, Any]:
        _, txn = self._txn(body, "mobile", "create")
        profile = body.get("profile")
        try:
            assert isinstance(profile, dict)
            first_name, gender, pincode = profile["first_name"], profile["gender"], profile["pincode"]
            dob = dt.date(profile["year_of_birth"], profile["month_of_birth"], profile["day_of_birth"])
            assert isinstance(first_name, str) and first_name and gender in ("M", "F", "O")
            assert isinstance(pincode, str) and len(pincode) == 6 and pincode.isdigit()
        except (AssertionError, KeyError, TypeError, ValueError):
            raise Refusal(400, "Validation failed", "ABDM-1010") from None
        details = {
            "first_name": first_name,
            "last_name": profile.get("last_name") or "",
            "gender": gender,
            "date_of_birth": dob,
        }
        account = self._new_account(txn, body.get("abha_address"), details)
        account.pincode = pincode
        answer = self._end(txn, None, account)
        answer["success"] = True
        return answer

    # helpers

    def _address_exists(self, body: dict[str, Any]) -> dict[str, Any]:
        address = body.get("abha_address")
        if not isinstance(address, str) or not address.strip():
            raise bad_body()
        return {"exists": _key(address) in self.accounts}

    async def _suggest(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        query = request.query
        txn = self._txns.get(query.get("transactionId", ""))
        if txn is None:
            return answer(self.server, request, no_txn())
        person: dict[str, Any] = self._person(txn.aadhaar) if txn.aadhaar else {}
        first = (query.get("fn") or person.get("first_name") or "").lower()
        last = (query.get("ln") or person.get("last_name") or "").lower()
        dob = query.get("dob") or (person["date_of_birth"].isoformat() if "date_of_birth" in person else "")
        year = dob[:4]
        candidates = [f"{first}.{last}", f"{first}{last}{year}", f"{first}_{last}", f"{first}.{last}{year[2:]}"]
        free = [c for c in candidates if _NEW_ADDRESS.fullmatch(c) and c not in self.accounts]
        return self.server._json(request, {"suggestions": free})

    # login

    def _login_methods(self, body: dict[str, Any]) -> dict[str, Any]:
        address = body.get("abha_address")
        account = self.accounts.get(_key(address)) if isinstance(address, str) else None
        if account is None:
            raise Refusal(400, "No records found against the ABHA Address", "ABDM-1012")
        return {
            "abha_address": account.abha_address,
            "abha_number": "xx-xxxx-xxxx-" + account.abha_number[-4:] if account.abha_number else None,
            "auth_methods": ["MOBILE_OTP", "AADHAAR_OTP"] if account.aadhaar else ["MOBILE_OTP"],
            "blocked_methods": [],
            "fullname": f"{account.first_name} {account.last_name}",
            "mobile": _mask(account.mobile),
            "status": "ACTIVE",
        }

    def _login_init(self, body: dict[str, Any]) -> dict[str, Any]:
        method, identifier, system = body.get("method"), body.get("identifier"), body.get("otp_system", "abdm")
        if not isinstance(identifier, str) or system not in ("abdm", "aadhaar"):
            raise bad_body()
        aadhaar: str | None = None
        if method == "phr_address":
            self._check_blocked(_key(identifier))
            account = self.accounts.get(_key(identifier))
            if account is None:
                raise Refusal(400, "No records found against the ABHA Address", "ABDM-1012")
            if system == "aadhaar" and account.aadhaar is None:
                raise Refusal(400, "Login via Aadhaar OTP is not allowed", "ABDM-1115")
            candidates, mobile, aadhaar = [_key(identifier)], account.mobile, account.aadhaar
        elif method == "mobile":
            self._check_blocked(identifier)
            candidates = [key for key, a in self.accounts.items() if a.mobile == identifier]
            if not candidates:
                raise Refusal(400, "Mobile number not found.", "ABDM-1111")
            mobile = identifier
        elif method == "aadhaar_number":
            self._check_blocked(identifier)
            candidates, mobile, aadhaar = self._on_aadhaar(identifier), self.linked_mobile(identifier), identifier
            system = "aadhaar"
        elif method == "abha_number":
            candidates = [key for key, a in self.accounts.items() if a.abha_number == identifier]
            if not candidates:
                raise Refusal(400, "Invalid ABHA Number", "ABDM-1013")
            mobile = self.accounts[candidates[0]].mobile
        else:
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        txn = _Txn(
            kind="login",
            step="otp",
            otp=self._otp("login", mobile),
            mismatch_code="MIS-1013" if system == "aadhaar" else "ABDM-1035",
            aadhaar=aadhaar,
            mobile=mobile,
            method=method,
            candidates=candidates,
        )
        return {"hint": f"OTP sent successfully to your mobile number {_mask(mobile)}", "txn_id": self._new_txn(txn)}

    def _login_verify(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "login", "otp")
        check_otp(txn, body, self.max_otp_attempts, txn.mismatch_code)
        if txn.method == "phr_address":
            return self._end(txn, txn_id, self.accounts[txn.candidates[0]])
        if txn.method == "aadhaar_number":
            return self._create_step(txn, txn_id, txn.candidates, profile=self._kyc_profile(txn))
        txn.step = "select"
        return {"skip_state": "abha_select", "txn_id": txn_id, "abha_profiles": self._summaries(txn.candidates)}

    def _login_phr(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "login", "select")
        address = body.get("phr_address")
        key = _key(address) if isinstance(address, str) else ""
        if key not in txn.candidates:
            raise Refusal(400, "No records found against the ABHA Address", "ABDM-1012")
        return self._end(txn, txn_id, self.accounts[key])


def _format_abha_number(number: str) -> str:
    return f"{number[:2]}-{number[2:6]}-{number[6:10]}-{number[10:]}"
