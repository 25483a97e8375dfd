"""The fake server's professional registry (HPR, ``/abdm/nhpr/v1/hpr/aadhaar/...``): a state machine per ``txn_id``.

Written from registration.yml (the operations, their bodies and answers) and abdm-connect/flows/m4.mdx (their
order). Every answer but ``mobile/init``'s is wrapped in ``{"data", "error", "success"}``, as the vendor's schemas
are; ``suggest`` answers ``{"data": [...]}``.

=================  =====================================================================================
step               calls accepted
=================  =====================================================================================
``otp``            ``hpr_aadhaar_verify`` (the Aadhaar OTP, ``{otp, txn_id}``)
``verified``       ``hpr_demo_verify`` (``{mobile_num, txn_id}``: the Aadhaar-linked mobile -> ``ready``; another
                   -> ``verified: false``), ``hpr_mobile_init`` (an OTP to another mobile -> ``mobile_otp``)
``mobile_otp``     ``hpr_mobile_verify`` (``{otp, txnId}`` -> ``ready``), ``hpr_mobile_init`` (a new OTP)
``ready``          ``hpr_check_exist``, ``hpr_suggest``, ``hpr_create`` (-> ``done``)
``done``           ``hpr_check_exist`` (the account now held); anything else ``ABDM-1031``
``locked``         nothing: ``ABDM-1100`` (too many wrong OTPs)
=================  =====================================================================================

Refusals (the service's ``GenericError`` body): a malformed body 400 ``ABDM-1006``; an unknown ``txn_id`` 500
``MIS-1026``; a call at the wrong step 400 ``ABDM-1031``; a wrong Aadhaar OTP 400 ``MIS-1013``, a wrong mobile OTP
400 ``ABDM-1035`` (after :attr:`FakeHpr.max_otp_attempts`, 500 ``ABDM-1100``); a taken HPR ID at ``create`` 400
``HPR-1101`` (the fake's own code: the vendor's files list none for the registry), and the same when the
professional already holds one. ``check/available`` is not tied to a transaction.

Seeded (see :attr:`FakeHpr.accounts`): the last of ``server.data.valid_aadhaar`` already holds the HPR ID
``asha.verma@hpr.abdm`` (``check/exist`` answers ``new: false``), and ``ravi.kumar@hpr.abdm`` is taken. Tests read
the OTPs "sent" with :meth:`FakeHpr.last_otp` (they are also in ``server.otps``).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
from aiohttp import web

from .. import _routes as R
from .._domain import Domain
from .._refusals import Refusal, bad_body, check_otp, json_route, no_txn, otp_lock

if TYPE_CHECKING:
    from .._domain import Server

__all__ = ["HPR_SUFFIX", "ROUTES", "FakeHpr"]

#: Route names (usable with ``server.inject``), from the fake's table of the vendor's HPR operations.
ROUTES: Final[tuple[str, ...]] = tuple(R.HPR)
#: The suffix the fake's HPR IDs are stored with (``name@hpr.abdm``, as ABDM's registry shows them).
HPR_SUFFIX: Final = "hpr.abdm"

_FIRST = ("Asha", "Ravi", "Meera", "Arjun", "Kavya", "Rohan", "Nisha", "Vikram")
_LAST = ("Verma", "Kumar", "Iyer", "Sharma", "Reddy", "Das", "Nair", "Gupta")


@attrs.define
class _Txn:
    aadhaar: str
    linked_mobile: str
    step: str  # otp | verified | mobile_otp | ready | done | locked
    otp: str
    mismatch_code: str = "MIS-1013"
    wrong: int = 0
    mobile: str | None = None  # the mobile being confirmed with its own OTP


def _key(hpr_id: str) -> str:
    return hpr_id.strip().lower().partition("@")[0]


def _mask(mobile: str) -> str:
    return "******" + mobile[-4:]


def _body_only(handler: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[web.Request, Any], Any]:
    """A handler of the body alone, as :func:`~.._refusals.json_route` calls one (with the request too)."""
    return lambda _request, body: handler(body)


def _wrapped(data: Any) -> dict[str, Any]:
    return {"data": data, "error": None, "success": True}


class FakeHpr(Domain):
    """State and routes of the professional registry (see the module).

    Test controls: :meth:`last_otp`, :meth:`linked_mobile`, :meth:`step_of`, :meth:`add_account`,
    :attr:`accounts`, :attr:`max_otp_attempts`.
    """

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: Wrong OTPs refused in one transaction; the next OTP check gets ``ABDM-1100``.
        self.max_otp_attempts = 3
        #: HPR IDs held by the registry, by their name (lowercase, without suffix): the account's details.
        self.accounts: dict[str, dict[str, Any]] = {}
        self._txns: dict[str, _Txn] = {}
        self._rng = random.Random(46)
        self._seed()

    # ------------------------------------------------------------------------------ test controls

    def reset(self) -> None:
        """Forget transactions and created accounts; back to the seeded ones."""
        self._txns.clear()
        self.accounts.clear()
        self._rng = random.Random(46)
        self._seed()

    def last_otp(self, txn_id: str | None = None) -> str:
        """The OTP the transaction's last SMS carried; without ``txn_id``, that of the transaction started last."""
        if txn_id is None:
            if not self._txns:
                raise LookupError("no HPR transaction was started")
            txn_id = next(reversed(self._txns))
        return self._txns[txn_id].otp

    def step_of(self, txn_id: str) -> str:
        """The transaction's step (``otp``, ``verified``, ``mobile_otp``, ``ready``, ``done``, ``locked``)."""
        return self._txns[txn_id].step

    def linked_mobile(self, aadhaar: str) -> str:
        """The 10-digit mobile number linked to an Aadhaar number (deterministic; the ABHA fake's rule)."""
        digest = hashlib.sha256(aadhaar.encode()).hexdigest()
        tail = "".join(str(int(c, 16) % 10) for c in digest[:4])
        middle = "".join(str(int(c, 16) % 10) for c in digest[4:9])
        return "9" + middle + tail

    def add_account(self, hpr_id: str, *, aadhaar: str | None = None, email: str = "doctor@example.org") -> None:
        """Add an HPR ID the registry holds (held by the professional of ``aadhaar`` when given)."""
        key = _key(hpr_id)
        self.accounts[key] = {
            "hprId": f"{key}@{HPR_SUFFIX}",
            "hpr_id_number": "71-" + "".join(str(self._rng.randint(0, 9)) for _ in range(11)),
            "aadhaar": aadhaar,
            "email": email,
        }

    # ------------------------------------------------------------------------------ state

    def _seed(self) -> None:
        self.add_account("asha.verma", aadhaar=self.server.data.valid_aadhaar[-1])
        self.add_account("ravi.kumar")

    def _person(self, aadhaar: str) -> dict[str, Any]:
        digest = hashlib.sha256(b"kyc" + aadhaar.encode()).digest()
        return {
            "first_name": _FIRST[digest[0] % len(_FIRST)],
            "last_name": _LAST[digest[1] % len(_LAST)],
            "gender": "MF"[digest[2] % 2],
            "year_of_birth": str(1960 + digest[3] % 40),
            "month_of_birth": f"{1 + digest[4] % 12:02d}",
            "day_of_birth": f"{1 + digest[5] % 28:02d}",
        }

    def _held_by(self, aadhaar: str) -> dict[str, Any] | None:
        return next((a for a in self.accounts.values() if a["aadhaar"] == aadhaar), None)

    def _otp(self, mobile: str) -> str:
        otp = f"{self._rng.randint(0, 999_999):06d}"
        self.server._otp_sent(otp, "HPR registration", mobile)
        return otp

    def _txn(self, body: dict[str, Any], key: str, *steps: str) -> tuple[str, _Txn]:
        txn_id = body.get(key)
        txn = self._txns.get(txn_id) if isinstance(txn_id, str) else None
        if txn is None or not isinstance(txn_id, str):
            raise no_txn()
        if txn.step == "locked":
            raise otp_lock()
        if txn.step not in steps:
            raise Refusal(400, "Something went wrong", "ABDM-1031", "Invalid request")
        return txn_id, txn

    @staticmethod
    def _mobile(body: dict[str, Any]) -> str:
        mobile = body.get("mobile_num")
        if not isinstance(mobile, str) or len(mobile) != 10 or not mobile.isdigit():
            raise Refusal(400, "Invalid Mobile Email", "ABDM-1014")
        return mobile

    # ------------------------------------------------------------------------------ routes

    def add_routes(self, app: web.Application) -> None:
        """Register the HPR routes."""
        handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "hpr_aadhaar_init": self._aadhaar_init,
            "hpr_aadhaar_verify": self._aadhaar_verify,
            "hpr_demo_verify": self._demo_verify,
            "hpr_mobile_init": self._mobile_init,
            "hpr_mobile_verify": self._mobile_verify,
            "hpr_check_exist": self._check_exist,
            "hpr_check_available": self._check_available,
            "hpr_suggest": self._suggest,
            "hpr_create": self._create,
        }
        for name, (method, path) in R.HPR.items():
            handler = handlers[name]
            route = json_route(self.server, _body_only(handler))
            app.router.add_route(method, path, self.server._route(name, route))

    def _aadhaar_init(self, body: dict[str, Any]) -> dict[str, Any]:
        aadhaar = body.get("aadhaar")
        if not isinstance(aadhaar, str) or len(aadhaar) != 12 or not aadhaar.isdigit():
            raise bad_body()
        mobile = self.linked_mobile(aadhaar)
        txn_id = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        self._txns[txn_id] = _Txn(aadhaar=aadhaar, linked_mobile=mobile, step="otp", otp=self._otp(mobile))
        return _wrapped({"hint": f"OTP sent to {_mask(mobile)}", "mobile_num": _mask(mobile), "txn_id": txn_id})

    def _aadhaar_verify(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "txn_id", "otp")
        check_otp(txn, body, self.max_otp_attempts, "MIS-1013")
        txn.step = "verified"
        return _wrapped({"hint": "Aadhaar verified", "mobile_num": _mask(txn.linked_mobile), "txn_id": txn_id})

    def _demo_verify(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "txn_id", "verified")
        mobile = self._mobile(body)
        held = self._held_by(txn.aadhaar)
        if mobile != txn.linked_mobile:
            return _wrapped(
                {
                    "verified": False,
                    "txnId": txn_id,
                    "reason": "The mobile number is not linked to the Aadhaar number",
                    "error_code": "HPR-1035",
                    "suggested_hpr_ids": None,
                    "uidai_token": None,
                }
            )
        txn.step = "ready"
        answer: dict[str, Any] = {
            "verified": True,
            "txnId": txn_id,
            "reason": None,
            "error_code": None,
            "suggested_hpr_ids": self._free_ids(txn.aadhaar),
            "uidai_token": f"fake-uidai-{txn_id[:8]}",
        }
        if held is not None:
            answer["hpr"] = {"hprId": held["hprId"]}
        return _wrapped(answer)

    def _mobile_init(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "txn_id", "verified", "mobile_otp")
        mobile = self._mobile(body)
        txn.step, txn.mobile, txn.otp, txn.wrong, txn.mismatch_code = (
            "mobile_otp",
            mobile,
            self._otp(mobile),
            0,
            "ABDM-1035",
        )
        # registration.yml: this one answers NhprEkaAadhaarResponse itself, not wrapped
        return {"hint": f"OTP sent to {_mask(mobile)}", "mobile_num": _mask(mobile), "txn_id": txn_id}

    def _mobile_verify(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "txnId", "mobile_otp")
        check_otp(txn, body, self.max_otp_attempts, "ABDM-1035")
        txn.step = "ready"
        assert txn.mobile is not None
        return _wrapped({"hint": "Mobile verified", "mobile_num": _mask(txn.mobile), "txn_id": txn_id})

    def _check_exist(self, body: dict[str, Any]) -> dict[str, Any]:
        txn_id, txn = self._txn(body, "txn_id", "ready", "done")
        person = self._person(txn.aadhaar)
        held = self._held_by(txn.aadhaar)
        return _wrapped(
            {
                **person,
                "name": f"{person['first_name']} {person['last_name']}",
                "middle_name": "",
                "mobile": txn.mobile or txn.linked_mobile,
                "address": "12 MG Road, Bengaluru",
                "pincode": "560001",
                "state_code": "29",
                "state_name": "KARNATAKA",
                "district_code": "572",
                "district_name": "BENGALURU URBAN",
                "new": held is None,
                "hpr_id": "" if held is None else held["hprId"],
                "hpr_id_number": "" if held is None else held["hpr_id_number"],
                "category_id": 1,
                "sub_category_id": 1,
                "token": f"fake-hpr-token-{txn_id[:8]}",
                "txn_id": txn_id,
            }
        )

    def _check_available(self, body: dict[str, Any]) -> dict[str, Any]:
        hpr_id = body.get("hprId")
        if not isinstance(hpr_id, str) or not hpr_id.strip():
            raise bad_body()
        return _wrapped({"available": _key(hpr_id) not in self.accounts})

    def _free_ids(self, aadhaar: str) -> list[str]:
        person = self._person(aadhaar)
        first, last = person["first_name"].lower(), person["last_name"].lower()
        year = person["year_of_birth"]
        candidates = [f"{first}.{last}", f"{first}{last}{year}", f"dr.{first}.{last}", f"{first}_{last}{year[2:]}"]
        return [f"{c}@{HPR_SUFFIX}" for c in candidates if c not in self.accounts]

    def _suggest(self, body: dict[str, Any]) -> dict[str, Any]:
        _, txn = self._txn(body, "txn_id", "ready")
        return {"data": self._free_ids(txn.aadhaar)}

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        _, txn = self._txn(body, "txnId", "ready")
        hpr_id, password, email = body.get("hprId"), body.get("password"), body.get("email")
        categories = (body.get("hp_category_code"), body.get("hp_sub_category_code"))
        if not all(isinstance(v, str) and v.strip() for v in (hpr_id, password, email)):
            raise bad_body()
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in categories):
            raise bad_body()
        assert isinstance(hpr_id, str) and isinstance(email, str)
        if self._held_by(txn.aadhaar) is not None:
            raise Refusal(400, "HPR ID already exists for this professional", "HPR-1101")
        if _key(hpr_id) in self.accounts:
            raise Refusal(400, "HPR ID already exists", "HPR-1101", "This HPR ID is taken; choose another")
        self.add_account(hpr_id, aadhaar=txn.aadhaar, email=email)
        account = self.accounts[_key(hpr_id)]
        txn.step = "done"
        person = self._person(txn.aadhaar)
        return _wrapped(
            {
                **person,
                "first_name": body.get("first_name") or person["first_name"],
                "last_name": body.get("last_name") or person["last_name"],
                "name": f"{person['first_name']} {person['last_name']}",
                "hprId": account["hprId"],
                "hpr_id_number": account["hpr_id_number"],
                "email": email,
                "mobile": txn.mobile or txn.linked_mobile,
                "category_id": categories[0],
                "sub_category_id": categories[1],
                "auth_methods": ["PASSWORD", "MOBILE_OTP", "AADHAAR_OTP"],
                "new": True,
                "state_code": "29",
                "state_name": "KARNATAKA",
            }
        )
