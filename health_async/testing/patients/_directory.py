"""The fake server's patient directory (``/profiles/v1/patient/...``) and the EMR user profile update.

State: :attr:`FakePatients.directory`, OID -> the stored patient (wire names, as the service stores them: names and
e-mail in lowercase, the mobile number as 10 digits with ``ccd`` ``"+91"``), seeded deterministically from the
server's seed with invented Indian names: :attr:`FakePatients.count` patients (120 by default), some sharing a
mobile number (a family), some archived-free, all with usernames ``UH00001``, ``UH00002``, ...

Routes (names for ``server.inject`` and ``server.calls``): ``patient_create`` (201 ``{oid}``), ``patient_list``
(minified, ``pageNo``/``pageSize``/``select``/``from``/``arc``), ``patient_search`` (prefix of username, mobile or
full name; ``limit`` capped at 50), ``patient_by_mobile`` (``mob=+91...``), ``patient_by_username``
(``flatten=true``: an array), ``patient_get`` (``arc=true`` finds archived ones), ``patient_update`` (PATCH),
``patient_archive`` (DELETE; a repeat answers 200 again), ``profile_update`` (PATCH of an EMR user profile, the
profiles the core ``profile`` route serves).

Every route requires the ``client-id`` header (400 without it, 401 for another client's). Validation errors answer
400 with the documented ``{"error": {"message", "code"}}``; unknown patients 404 ``{"message", "code":
"profile_not_found"}``.

Judgement calls (the live behaviour is not documented): by-mobile answers the documented single object when one
patient has the number, an array when several share it, and 404 ``profile_not_found`` when none; a username
already in use answers 409; ``reset()`` keeps the directory (as the core data is kept) but forgets
:meth:`FakePatients.fail_after_create`; :meth:`FakePatients.populate` re-seeds the directory.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import re
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from ... import _json
from .. import _routes as R
from .._common import drop
from .._domain import Domain

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = ["ROUTES", "FakePatients"]

ROUTES: Final[tuple[str, ...]] = (
    "patient_create",
    "patient_list",
    "patient_search",
    "patient_by_mobile",
    "patient_by_username",
    "patient_get",
    "patient_update",
    "patient_archive",
    "profile_update",
)

_GENDERS: Final = frozenset({"M", "F", "O"})
_BLOOD_GROUPS: Final = frozenset({"A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"})
_LIST_SELECT: Final = frozenset({"abha", "c_ate", "dob", "gen", "u_ate"})
_SEARCH_SELECT: Final = _LIST_SELECT | {"is_age"}
_BY_MOBILE_MIN: Final = ("oid", "username", "fln", "gen", "dob", "abha", "ccd", "ps", "mobile")
_E164: Final = re.compile(r"^\+[1-9]\d{6,14}$")
_FEMALE: Final = ["aarti", "ananya", "deepa", "divya", "isha", "kavita", "lakshmi", "meena", "nandini", "pooja",
                  "priya", "radha", "sangeeta", "shreya", "sunita", "swati", "uma", "vidya"]  # fmt: skip
_MALE: Final = ["aditya", "amit", "anil", "arjun", "gaurav", "harish", "karthik", "manoj", "mohan", "naveen",
                "rajesh", "rohit", "sachin", "suresh", "varun", "venkat", "vijay", "yash"]  # fmt: skip
_MIDDLE: Final = ["kumar", "devi", "prasad", "rani", "lal", "bai"]
_LAST: Final = ["sharma", "iyer", "reddy", "nair", "patel", "gupta", "menon", "das", "kulkarni", "singh", "rao",
                "joshi", "chatterjee", "pillai", "verma", "naidu", "banerjee", "mishra"]  # fmt: skip


class FakePatients(Domain):
    """State and routes of the patient directory (see the module docstring)."""

    ROUTES = ROUTES

    def __init__(self, server: Server, *, count: int = 120) -> None:
        super().__init__(server)
        #: OID -> stored patient (wire names; ``arc`` marks an archived one). Insertion order = creation order.
        self.directory: dict[str, dict[str, Any]] = {}
        #: The workspace id of every patient.
        self.workspace_id = ""
        self.count = count
        self._fail_after_create: list[int | None] = []
        self.populate(count)

    def fail_after_create(self, times: int = 1, *, status: int | None = 504) -> None:
        """Store each of the next ``times`` created patients, then answer ``status`` (``None``: drop the
        connection): the service committed, but the client cannot know (to exercise ``OutcomeUnknown``)."""
        self._fail_after_create.extend([status] * times)

    def populate(self, count: int, *, seed: int | None = None) -> None:
        """Replace the directory with ``count`` seeded patients (default seed: the server's)."""
        rng = random.Random(self._seed() if seed is None else seed)
        self.count = count
        self.workspace_id = str(rng.randint(10**13, 10**14 - 1))
        self.directory = {}
        mobile = ""
        for n in range(count):
            female = rng.random() < 0.5
            first = rng.choice(_FEMALE if female else _MALE)
            middle = rng.choice(_MIDDLE) if rng.random() < 0.25 else None
            last = rng.choice(_LAST)
            if n % 7 != 6 or not mobile:  # every seventh shares the previous patient's number (a family)
                mobile = str(rng.randint(6 * 10**9, 10**10 - 1))
            created = 1_700_000_000 + n * 3600
            oid = str(rng.randint(10**14, 10**15 - 1))
            patient: dict[str, Any] = {
                "oid": oid,
                "wid": self.workspace_id,
                "ps": "P",
                "c_ate": created,
                "u_ate": created + rng.randint(0, 10**6),
                "gen": "O" if rng.random() < 0.02 else ("F" if female else "M"),
                "dob": f"{rng.randint(1940, 2023)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "is_age": rng.random() < 0.1,
                "fn": first,
                "ln": last,
                "fln": " ".join(x for x in (first, middle, last) if x),
                "mobile": mobile,
                "ccd": "+91",
                "username": f"UH{n + 1:05d}",
                "arc": False,
            }
            if middle:
                patient["mn"] = middle
            if rng.random() < 0.6:
                patient["bg"] = rng.choice(sorted(_BLOOD_GROUPS))
            if rng.random() < 0.5:
                patient["email"] = f"{first}.{last}{rng.randint(1, 99)}@example.in"
            if rng.random() < 0.3:
                patient["abha"] = f"{first}{last}{rng.randint(10, 99)}@abdm"
            if rng.random() < 0.2:
                patient["s"] = rng.choice(["mr", "ms", "mrs", "dr"])
            self.directory[oid] = patient
        self._rng = rng

    def _seed(self) -> int:
        seed = getattr(self.server, "seed", None)
        if isinstance(seed, int):
            return seed
        # The server does not keep its seed; its seeded user ids are a deterministic function of it.
        digest = hashlib.sha256(",".join(self.server.data.user_ids).encode()).digest()
        return int.from_bytes(digest[:8], "big")

    @property
    def oids(self) -> list[str]:
        """OIDs of the patients that are not archived, in creation order."""
        return [oid for oid, p in self.directory.items() if not p["arc"]]

    def add_routes(self, app: web.Application) -> None:
        """Register the directory's routes (the fixed paths before ``{oid}``, which would match them)."""
        route = self.server._route
        app.router.add_post(R.PATIENT_CREATE, route("patient_create", self._create))
        app.router.add_get(R.PATIENT_LIST, route("patient_list", self._list))
        app.router.add_get(R.PATIENT_SEARCH, route("patient_search", self._search))
        app.router.add_get(R.PATIENT_BY_MOBILE, route("patient_by_mobile", self._by_mobile))
        app.router.add_get(R.PATIENT_BY_USERNAME, route("patient_by_username", self._by_username))
        app.router.add_get(R.PATIENT, route("patient_get", self._get))
        app.router.add_patch(R.PATIENT, route("patient_update", self._update))
        app.router.add_delete(R.PATIENT, route("patient_archive", self._archive))
        app.router.add_patch(R.EMR_USER, route("profile_update", self._profile_update))

    # ------------------------------------------------------------------------------ helpers

    def _client_error(self, request: web.Request) -> web.Response | None:
        client_id = request.headers.get(R.CLIENT_ID)
        if not client_id:
            return web.json_response({"message": "client-id header is required", "code": "bad_request"}, status=400)
        if client_id != self.server.client_id:
            return web.json_response({"message": "Unauthorized", "code": "unauthorized"}, status=401)
        return None

    @staticmethod
    def _bad(message: str, code: str = "invalid_request", status: int = 400) -> web.Response:
        return web.json_response({"error": {"message": message, "code": code}}, status=status)

    @staticmethod
    def _not_found() -> web.Response:
        return web.json_response({"message": "Profile not found", "code": "profile_not_found"}, status=404)

    def _live(self, oid: str, *, archived: bool = False) -> dict[str, Any] | None:
        patient = self.directory.get(oid)
        if patient is None or (patient["arc"] and not archived):
            return None
        return patient

    @staticmethod
    def _full(patient: dict[str, Any], *, arc: bool = False) -> dict[str, Any]:
        return {k: v for k, v in patient.items() if k != "arc" or arc}

    @staticmethod
    def _pick(patient: dict[str, Any], keys: tuple[str, ...] | list[str]) -> dict[str, Any]:
        return {k: patient[k] for k in keys if k in patient}

    @staticmethod
    def _select(request: web.Request, allowed: frozenset[str]) -> list[str] | None:
        raw = request.query.get("select", "")
        fields = [f.strip() for f in raw.split(",") if f.strip()]
        return fields if set(fields) <= allowed else None

    def _apply(self, patient: dict[str, Any], body: dict[str, Any], *, bg_key: str) -> str | None:
        """Validate ``body`` and apply it to ``patient``; the error message, or None."""
        if "gen" in body and body["gen"] not in _GENDERS:
            return "Invalid Gender Enum"
        if bg_key in body and body[bg_key] not in _BLOOD_GROUPS:
            return "Invalid Blood Group Enum"
        if "dob" in body:
            try:
                born = dt.date.fromisoformat(body["dob"])
            except (TypeError, ValueError):
                return "Invalid date of birth"
            if born > dt.date.today() + dt.timedelta(days=1):
                return "Date of birth is in the future"
        if "mobile" in body and (not isinstance(body["mobile"], str) or not _E164.match(body["mobile"])):
            return "Invalid mobile number: use +<country code><number>"
        if "email" in body and (not isinstance(body["email"], str) or "@" not in body["email"]):
            return "Invalid email"
        if "extras" in body and not isinstance(body["extras"], dict):
            return "extras must be an object"
        for key in ("fn", "mn", "ln", "fln", "s", "username", "abha"):
            if key in body and (not isinstance(body[key], str) or not body[key].strip()):
                return f"Invalid {key}"
        for key in ("fn", "mn", "ln", "s", "gen", "dob", "abha", "username"):
            if key in body:
                patient[key] = body[key].lower() if key in ("fn", "mn", "ln", "s") else body[key]
        if bg_key in body:
            patient["bg"] = body[bg_key]
        if "email" in body:
            patient["email"] = body["email"].lower()
        if "mobile" in body:
            mobile = body["mobile"]
            patient["ccd"], patient["mobile"] = ("+91", mobile[3:]) if mobile.startswith("+91") else (None, mobile)
        if "extras" in body:
            patient["extras"] = {
                **patient.get("extras", {}),
                **{k: v for k, v in body["extras"].items() if k[:1] != "_"},
            }
        if "fln" in body:
            parts = body["fln"].lower().split()
            patient["fln"] = " ".join(parts)
            patient["fn"], patient["ln"] = parts[0], parts[-1] if len(parts) > 1 else None
            patient["mn"] = " ".join(parts[1:-1]) or None
            for key in ("ln", "mn"):
                if patient[key] is None:
                    del patient[key]
        elif "fn" in body:
            for key in ("mn", "ln"):
                if key not in body:
                    patient.pop(key, None)
            patient["fln"] = " ".join(patient[k] for k in ("fn", "mn", "ln") if patient.get(k))
        return None

    # ------------------------------------------------------------------------------ routes

    async def _create(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict):
            return self._bad("Invalid JSON body")
        if "dob" not in body or "gen" not in body:
            return self._bad("dob and gen are required")
        if "fn" not in body and "fln" not in body:
            return self._bad("Either fln or fn is required")
        username = body.get("username")
        if username is not None and any(p.get("username") == username for p in self.directory.values()):
            return self._bad("username already exists", "conflict", 409)
        now = max((p["c_ate"] for p in self.directory.values()), default=1_700_000_000) + 1
        oid = str(self._rng.randint(10**14, 10**15 - 1))
        patient: dict[str, Any] = {"oid": oid, "wid": self.workspace_id, "ps": "P", "c_ate": now, "u_ate": now}
        patient["arc"] = False
        if (message := self._apply(patient, body, bg_key="bloodgroup")) is not None:
            return self._bad(message)
        self.directory[oid] = patient
        if self._fail_after_create:
            status = self._fail_after_create.pop(0)
            if status is not None:
                return web.json_response({"message": "Gateway Timeout"}, status=status)
            return drop(request)
        return self.server._json(request, {"oid": oid}, status=201)

    async def _list(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        query = request.query
        try:
            page_no = int(query["pageNo"])
            size = int(query.get("pageSize", "500"))
            after = int(query["from"]) if "from" in query else None
        except (KeyError, ValueError):
            return self._bad("pageNo is required; pageNo, pageSize and from are integers")
        if page_no < 1 or not 1 <= size <= 2000:
            return self._bad("pageNo must be >= 1 and pageSize 1..2000")
        select = self._select(request, _LIST_SELECT)
        if select is None:
            return self._bad("Invalid select field")
        arc = query.get("arc") == "true"
        rows = [p for p in self.directory.values() if (arc or not p["arc"]) and (after is None or p["c_ate"] > after)]
        start = (page_no - 1) * size
        page = rows[start : start + size]
        keys = ["oid", "wid", "mobile", "username", "fln", *select, *(["arc"] if arc else [])]
        return self.server._json(
            request,
            {
                "profiles": [self._pick(p, keys) for p in page],
                "currPageMeta": {
                    "currPageNo": page_no,
                    "pageSize": size,
                    "nextPage": page_no + 1 if start + size < len(rows) else -1,
                },
            },
        )

    async def _search(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        prefix = request.query.get("prefix", "").strip().lower()
        if not prefix:
            return self._bad("prefix is required")
        try:
            limit = min(int(request.query.get("limit", "50")), 50)
        except ValueError:
            return self._bad("limit must be an integer")
        select = self._select(request, _SEARCH_SELECT)
        if select is None:
            return self._bad("Invalid select field")
        found = [
            self._pick(p, ["username", "mobile", "oid", "fln", *select])
            for p in self.directory.values()
            if not p["arc"]
            and (
                str(p.get("username", "")).lower().startswith(prefix)
                or str(p.get("mobile", "")).startswith(prefix)
                or str(p.get("fln", "")).startswith(prefix)
            )
        ]
        return self.server._json(request, found[: max(limit, 0)])

    async def _by_mobile(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        mob = request.query.get("mob", "")
        if not _E164.match(mob):
            return self._bad("mob must be +<country code><number>")
        full = request.query.get("full_profile") == "true"
        found = [
            self._full(p) if full else self._pick(p, _BY_MOBILE_MIN)
            for p in self.directory.values()
            if not p["arc"] and "mobile" in p and f"{p.get('ccd') or ''}{p['mobile']}" == mob
        ]
        if not found:
            return self._not_found()
        return self.server._json(request, found[0] if len(found) == 1 else found)

    async def _by_username(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        username = request.match_info["username"]
        found = [self._full(p) for p in self.directory.values() if not p["arc"] and p.get("username") == username]
        if not found:
            return self._not_found()
        return self.server._json(request, found)

    async def _get(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        arc = request.query.get("arc") == "true"
        patient = self._live(request.match_info["oid"], archived=arc)
        if patient is None:
            return self._not_found()
        return self.server._json(request, self._full(patient, arc=arc))

    async def _update(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        patient = self._live(request.match_info["oid"])
        if patient is None:
            return self._not_found()
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not body:
            return self._bad("Invalid JSON body")
        username = body.get("username")
        if username is not None and any(
            p.get("username") == username and p is not patient for p in self.directory.values()
        ):
            return self._bad("username already exists", "conflict", 409)
        updated = dict(patient)
        if (message := self._apply(updated, body, bg_key="bloodgroup")) is not None:
            return self._bad(message)
        updated["u_ate"] = patient["u_ate"] + 1
        patient.clear()
        patient.update(updated)
        return self.server._json(request, {"message": "Profile updated successfully"})

    async def _archive(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        patient = self._live(request.match_info["oid"], archived=True)
        if patient is None:
            return web.json_response({"message": "Not found", "code": "profile_not_found"}, status=404)
        patient["arc"] = True
        return self.server._json(request, {"message": "Profile archived successfully"})

    async def _profile_update(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        if (error := self._client_error(request)) is not None:
            return error
        oid = request.match_info["oid"]
        raw = self.server.data.profiles.get(oid)
        if raw is None:
            return self._not_found()
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not body:
            return self._bad("Invalid JSON body")
        profile = _json.loads(raw)
        if (message := self._apply(profile, body, bg_key="bg")) is not None:
            return self._bad(message)
        if "mobile" in body:  # EMR user profiles keep the E.164 form
            profile["mobile"] = body["mobile"]
            profile.pop("ccd", None)
        profile["u_ate"] = int(profile.get("u_ate") or 0) + 1
        self.server.data.profiles[oid] = _json.dumps(profile)
        return self.server._json(request, {"message": "Profile updated successfully"})

    def reset(self) -> None:
        """Forget pending :meth:`fail_after_create` failures (the directory is kept)."""
        self._fail_after_create.clear()
