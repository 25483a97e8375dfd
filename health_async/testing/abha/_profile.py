"""The fake ABHA profile after registration: profile (read, update, delete), card, QR, search, pincode.

Written from ``registration.yml`` (``ProfileResponse``, ``DetailsRequestType2``, ``AssetQRData``,
``ProfileDiscoverAbhaRequest``, ``ProfileSearchKycAbhaResponse``, ``PincodeResolvedPincodeData``, ``GenericError``)
and the pages ``profile/**``, ``phr/profile.mdx``.

Routes (names for ``server.inject`` and ``server.calls``): ``abha_profile_get``, ``abha_profile_update``,
``abha_profile_delete`` (``/abdm/v1/profile``), ``abha_card``, ``abha_qr``, ``abha_search``, ``abha_pincode``.

* The user is the ``oid`` query, else the ``X-Pt-Id`` header: neither is 400 ``ABDM-1006``; a user without a
  profile (never had one, or deleted) is 404 (the fake's own ``source_error.code`` ``NOT_FOUND``: the vendor
  names none).
* ``GET`` answers the stored ``ProfileResponse``; ``PATCH`` takes a ``DetailsRequestType2`` (``first_name``,
  ``gender``, day, month and year of birth and ``pincode`` required, else 400 ``ABDM-1006``), refuses a change of
  name (first, middle or last), gender or date of birth on a KYC-verified profile (400 ``ABDM-1010``, the update
  page's warning), applies the rest (a known pincode also sets the state and district) and answers 204;
  ``DELETE`` removes the profile and answers 204.
* The card is a PNG (86 x 54 pixels of noise, about 14 KB: not compressible, so a size cap test needs no large
  body) or, with :attr:`FakeAbhaProfile.card_format` ``"pdf"``, a small PDF; the QR is a small PNG, or the
  ``AssetQRData`` JSON with ``?format=json`` (or always, with :attr:`FakeAbhaProfile.qr_answers_json`). With
  :attr:`FakeAbhaProfile.chunked` both are sent with chunked encoding (no ``Content-Length``), 1 KiB at a time
  (:attr:`FakeAbhaProfile.chunk_delay` seconds apart); :attr:`FakeAbhaProfile.cut_after` cuts the next one after
  that many bytes (the connection closed mid-body, once).
* Search: the KYC-verified profiles whose mobile is the body's ``mobile`` (10 digits, else 400 ``ABDM-1014``),
  ABHA numbers masked (``xx-xxxx-xxxx-1234``), indexed from 1, with a fresh ``txn_id``. Judgement call: no match
  answers ``profiles: null`` (the schema allows it) with a ``txn_id``.
* Pincode: the few in :data:`PINCODES` (the vendor's example ``834001`` among them); any other is 404 with the
  vendor's error shape (``GenericError``).

Seeded state (:attr:`FakeAbhaProfile.profiles`, OID -> the stored ``ProfileResponse``): one profile per seeded
user (``server.data.user_ids``), with sample personal data; the first is KYC-verified (an ABHA number, Aadhaar
locks) on :data:`SEEDED_PROFILE_MOBILE`, the others are mobile-only. Test controls: :meth:`FakeAbhaProfile.add`,
:attr:`FakeAbhaProfile.card_format`, :attr:`FakeAbhaProfile.qr_answers_json`, :attr:`FakeAbhaProfile.chunked`,
:attr:`FakeAbhaProfile.chunk_delay`, :attr:`FakeAbhaProfile.cut_after`;
:meth:`FakeAbhaProfile.card_bytes` and :meth:`FakeAbhaProfile.qr_bytes` give what the assets hold.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import struct
import uuid
import zlib
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from .. import _routes as R
from .._domain import Domain
from .._refusals import Refusal, answer, bad_body

if TYPE_CHECKING:
    from .._common import Handler, RecordedRequest
    from .._domain import Server

__all__ = ["PINCODES", "ROUTES", "SEEDED_PROFILE_MOBILE", "FakeAbhaProfile"]

#: Route names (usable with ``server.inject`` and ``server.calls``).
ROUTES: Final[tuple[str, ...]] = (
    "abha_card",
    "abha_pincode",
    "abha_profile_delete",
    "abha_profile_get",
    "abha_profile_update",
    "abha_qr",
    "abha_search",
)

#: The mobile number of the seeded KYC-verified profile (the first seeded user's).
SEEDED_PROFILE_MOBILE: Final = "9898012345"

#: The pincodes the fake knows (``PincodeResolvedPincodeData``; the first is the vendor's example).
PINCODES: Final[dict[str, dict[str, str]]] = {
    "834001": {"pincode": "834001", "dist_code": "339", "dist_name": "Ranchi", "state_code": "20",
               "state_name": "Jharkhand"},
    "560001": {"pincode": "560001", "dist_code": "572", "dist_name": "Bengaluru Urban", "state_code": "29",
               "state_name": "Karnataka"},
    "110001": {"pincode": "110001", "dist_code": "77", "dist_name": "New Delhi", "state_code": "7",
               "state_name": "Delhi"},
    "400001": {"pincode": "400001", "dist_code": "519", "dist_name": "Mumbai", "state_code": "27",
               "state_name": "Maharashtra"},
}  # fmt: skip

_FIRST = ("Asha", "Ravi", "Meera", "Arjun", "Kavya", "Rohan", "Nisha", "Vikram")
_LAST = ("Verma", "Kumar", "Iyer", "Sharma", "Reddy", "Das", "Nair", "Gupta")
#: Fields of a KYC-verified profile that an update must not change (the update page's warning).
_LOCKED: Final = ("first_name", "middle_name", "last_name", "gender", "day_of_birth", "month_of_birth", "year_of_birth")
_PDF: Final = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/MediaBox[0 0 243 153]/Parent 2 0 R>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
)


def _png(width: int, height: int, seed: bytes) -> bytes:
    """A valid RGB PNG of pseudo-random pixels (deterministic for ``seed``)."""
    row_bytes = width * 3
    noise = bytearray()
    block = seed
    while len(noise) < row_bytes * height:
        block = hashlib.sha256(block).digest()
        noise += block
    raw = b"".join(b"\x00" + bytes(noise[y * row_bytes : (y + 1) * row_bytes]) for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _format_abha_number(digits: str) -> str:
    return f"{digits[:2]}-{digits[2:6]}-{digits[6:10]}-{digits[10:]}"


class FakeAbhaProfile(Domain):
    """State and routes of the ABHA profile after registration (see the module docstring)."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: OID -> the stored profile (wire ``ProfileResponse``).
        self.profiles: dict[str, dict[str, Any]] = {}
        #: ``"png"`` (``image/png``, the vendor's documented card) or ``"pdf"`` (``application/pdf``).
        self.card_format = "png"
        #: Answer the QR as ``AssetQRData`` JSON even without ``?format=json`` (the OpenAPI's only answer).
        self.qr_answers_json = False
        #: Send the card and the QR with chunked encoding (no ``Content-Length``), 1 KiB at a time.
        self.chunked = False
        #: Seconds between those 1 KiB pieces (so a client reads them one by one).
        self.chunk_delay = 0.0
        #: Cut the next card or QR answer after this many bytes (the connection closed; once).
        self.cut_after: int | None = None
        self._serial = 0
        self._seed()

    # ------------------------------------------------------------------------------ test controls

    def reset(self) -> None:
        """Back to the seeded profiles and the default asset settings."""
        self.profiles.clear()
        self.card_format = "png"
        self.qr_answers_json = False
        self.chunked = False
        self.chunk_delay = 0.0
        self.cut_after = None
        self._serial = 0
        self._seed()

    def add(
        self,
        oid: str,
        *,
        first_name: str = "Meera",
        middle_name: str | None = None,
        last_name: str | None = "Iyer",
        gender: str = "F",
        date_of_birth: dt.date = dt.date(1992, 3, 4),
        mobile: str = SEEDED_PROFILE_MOBILE,
        kyc_verified: bool = False,
        abha_address: str | None = None,
        abha_number: str | None = None,
        pincode: str = "560001",
        address: str | None = "12, MG Road, Bengaluru",
    ) -> dict[str, Any]:
        """Store (or replace) the profile of ``oid``; returns it as the service answers it. A KYC-verified profile
        without ``abha_number`` gets one (14 digits, derived from the OID)."""
        if abha_address is None:
            abha_address = f"{first_name.lower()}.{oid[-6:]}@sbx"
        if kyc_verified and abha_number is None:
            digest = hashlib.sha256(b"abha" + oid.encode()).hexdigest()
            abha_number = "91" + "".join(str(int(c, 16) % 10) for c in digest[:12])
        profile: dict[str, Any] = {
            "abha_address": abha_address,
            "abha_addresses": [abha_address],
            "abha_number": _format_abha_number(abha_number) if abha_number else None,
            "first_name": first_name,
            "middle_name": middle_name,
            "last_name": last_name,
            "gender": gender,
            "day_of_birth": date_of_birth.day,
            "month_of_birth": date_of_birth.month,
            "year_of_birth": date_of_birth.year,
            "mobile": mobile,
            "address": address,
            "kyc_verified": kyc_verified,
            "profile_photo": "",
        }
        _set_pincode(profile, pincode)
        _set_full_name(profile)
        self.profiles[oid] = profile
        return profile

    def card_bytes(self, oid: str) -> bytes:
        """The card of ``oid`` as served now (per :attr:`card_format`)."""
        if self.card_format == "pdf":
            return _PDF
        return _png(86, 54, b"card" + oid.encode())

    def qr_bytes(self, oid: str) -> bytes:
        """The QR image of ``oid`` (a small PNG)."""
        return _png(33, 33, b"qr" + oid.encode())

    # ------------------------------------------------------------------------------ state

    def _seed(self) -> None:
        for index, oid in enumerate(self.server.data.user_ids):
            digest = hashlib.sha256(b"profile" + oid.encode()).digest()
            first = index == 0
            self.add(
                oid,
                first_name=_FIRST[digest[0] % len(_FIRST)],
                last_name=_LAST[digest[1] % len(_LAST)],
                gender="MFO"[digest[2] % 3],
                date_of_birth=dt.date(1960 + digest[3] % 45, 1 + digest[4] % 12, 1 + digest[5] % 28),
                mobile=SEEDED_PROFILE_MOBILE if first else "9" + str(int.from_bytes(digest[6:10]) % 10**9).zfill(9),
                kyc_verified=first,
                pincode=list(PINCODES)[index % len(PINCODES)],
            )

    def _user(self, request: web.Request) -> tuple[str, dict[str, Any]]:
        oid = request.query.get("oid") or request.headers.get(R.PT_ID)
        if not oid:
            raise Refusal(400, "Bad Request, invalid request", "ABDM-1006", "X-Pt-Id or oid is required")
        profile = self.profiles.get(oid)
        if profile is None:
            raise Refusal(404, "ABHA profile not found", "NOT_FOUND", "No ABHA profile for this user")
        return oid, profile

    # ------------------------------------------------------------------------------ routes

    def add_routes(self, app: web.Application) -> None:
        """Register the profile, card, QR, search and pincode routes."""
        route = self.server._route
        app.router.add_get(R.ABHA_PROFILE, route("abha_profile_get", self._guard(self._get)))
        app.router.add_patch(R.ABHA_PROFILE, route("abha_profile_update", self._guard(self._update)))
        app.router.add_delete(R.ABHA_PROFILE, route("abha_profile_delete", self._guard(self._delete)))
        app.router.add_get(R.ABHA_CARD, route("abha_card", self._guard(self._card)))
        app.router.add_get(R.ABHA_QR, route("abha_qr", self._guard(self._qr)))
        app.router.add_post(R.ABHA_SEARCH, route("abha_search", self._guard(self._search)))
        app.router.add_get(R.PINCODE, route("abha_pincode", self._guard(self._pincode)))

    def _guard(self, handler: Handler) -> Handler:
        """``handler`` with a :class:`Refusal` answered as the vendor's ``GenericError``."""

        async def handle(request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
            try:
                response = await handler(request, rec)
            except Refusal as refusal:
                return answer(self.server, request, refusal)
            return response

        return handle

    async def _get(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        _, profile = self._user(request)
        return self.server._json(request, profile)

    async def _update(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        _, profile = self._user(request)
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict):
            raise bad_body()
        try:
            first_name, gender, pincode = body["first_name"], body["gender"], body["pincode"]
            dob = dt.date(body["year_of_birth"], body["month_of_birth"], body["day_of_birth"])
            assert isinstance(first_name, str) and first_name.strip() and gender in ("M", "F", "O")
            assert isinstance(pincode, str) and len(pincode) == 6 and pincode.isdigit()
            for name in ("middle_name", "last_name", "address"):
                assert body.get(name) is None or isinstance(body[name], str)
        except (AssertionError, KeyError, TypeError, ValueError):
            raise bad_body() from None
        new = {
            "first_name": first_name,
            "middle_name": body.get("middle_name"),
            "last_name": body.get("last_name"),
            "gender": gender,
            "day_of_birth": dob.day,
            "month_of_birth": dob.month,
            "year_of_birth": dob.year,
        }
        if profile.get("kyc_verified") and any((new[k] or None) != (profile.get(k) or None) for k in _LOCKED):
            raise Refusal(400, "Name, gender and date of birth cannot be edited for a KYC verified ABHA", "ABDM-1010")
        profile.update(new)
        profile["address"] = body.get("address")
        _set_pincode(profile, pincode)
        _set_full_name(profile)
        return web.Response(status=204)

    async def _delete(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        oid, _ = self._user(request)
        del self.profiles[oid]
        return web.Response(status=204)

    async def _card(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        oid, _ = self._user(request)
        kind = "application/pdf" if self.card_format == "pdf" else "image/png"
        return await self._asset(request, self.card_bytes(oid), kind)

    async def _qr(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        oid, profile = self._user(request)
        if request.query.get("format") == "json" or self.qr_answers_json:
            return self.server._json(request, _qr_data(profile))
        return await self._asset(request, self.qr_bytes(oid), "image/png")

    async def _asset(self, request: web.Request, body: bytes, content_type: str) -> web.StreamResponse:
        cut, self.cut_after = self.cut_after, None
        if not self.chunked and cut is None:
            return web.Response(body=body, content_type=content_type)
        response = web.StreamResponse()
        response.content_type = content_type
        response.enable_chunked_encoding()
        await response.prepare(request)
        end = len(body) if cut is None else min(cut, len(body))
        for offset in range(0, end, 1024):
            if offset and self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            await response.write(body[offset : min(offset + 1024, end)])
        if cut is not None:
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response

    async def _search(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        mobile = body.get("mobile") if isinstance(body, dict) else None
        if not isinstance(mobile, str) or len(mobile) != 10 or not mobile.isdigit():
            raise Refusal(400, "Invalid Mobile Email", "ABDM-1014")
        today = dt.date.today()
        found: list[dict[str, Any]] = []
        for profile in self.profiles.values():
            if profile.get("mobile") != mobile or not profile.get("kyc_verified"):
                continue
            born = dt.date(profile["year_of_birth"], profile["month_of_birth"], profile["day_of_birth"])
            number = "".join(ch for ch in profile.get("abha_number") or "" if ch.isdigit())
            found.append(
                {
                    "index": len(found) + 1,
                    "abha_address": profile["abha_address"],
                    "abha_number": f"xx-xxxx-xxxx-{number[-4:]}" if number else None,
                    "name": profile["full_name"],
                    "gender": profile["gender"],
                    "age": today.year - born.year - ((today.month, today.day) < (born.month, born.day)),
                    "kyc_verified": "true",
                    "internal": True,
                }
            )
        self._serial += 1
        txn_id = str(uuid.UUID(int=self._serial, version=4))
        return self.server._json(request, {"profiles": found or None, "txn_id": txn_id})

    async def _pincode(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        details = PINCODES.get(request.match_info["pincode"])
        if details is None:
            raise Refusal(404, "Invalid pincode", "NOT_FOUND", "No details found for this pincode")
        return self.server._json(request, details)


def _set_pincode(profile: dict[str, Any], pincode: str) -> None:
    profile["pincode"] = pincode
    details = PINCODES.get(pincode)
    if details is not None:
        profile.update(
            state_code=details["state_code"],
            state_name=details["state_name"].upper(),
            district_code=details["dist_code"],
            district_name=details["dist_name"].upper(),
        )


def _set_full_name(profile: dict[str, Any]) -> None:
    parts = (profile.get("first_name"), profile.get("middle_name"), profile.get("last_name"))
    profile["full_name"] = " ".join(p for p in parts if p)


def _qr_data(profile: dict[str, Any]) -> dict[str, Any]:
    """``AssetQRData`` of a profile (the keys as the schema spells them, spaces included)."""
    dob = f"{profile['day_of_birth']:02d}-{profile['month_of_birth']:02d}-{profile['year_of_birth']}"
    return {
        "hidn": profile.get("abha_number") or "",
        "hid": profile["abha_address"],
        "name": profile["full_name"],
        "gender": profile["gender"],
        "dob": dob,
        "mobile": profile.get("mobile") or "",
        "address": profile.get("address") or "",
        "phr": profile["abha_address"],
        "district_name": profile.get("district_name", ""),
        "dist name": profile.get("district_name", ""),
        "state name": profile.get("state_name", ""),
        "distlgd": profile.get("district_code", ""),
        "statelgd": profile.get("state_code", ""),
    }
