"""The fake server's ABDM exchange, hospital side (milestone 2): care-context links, the linked list, the SMS
notification, and the data pushes that answer an HIU's request.

Written from ``registration.yml`` (``LinkCareContextLinkingRequest``, ``RecordsResponse``,
``LinkUnlinkedRecordsNotificationRequest``, ``RecordsHipDataPushRequest``) and the webhook pages
(``webhooks/hip-data-fetch.mdx``); ABDM's encryption is checked with :mod:`health_async.abdm_crypto` here (and the
tests check the same pushes with the vendor's ``abdm-ecdh``).

Routes (names for ``server.inject`` and ``server.calls``): ``care_contexts_link`` (202; a linked care context is
listed with status ``null``: the consent states that follow are not simulated), ``care_contexts_linked``
(``hip_id`` required: 400 without), ``care_contexts_notify`` (202; 400 unless 10 digits), ``hip_data_push`` (202;
every page kept).

State and test controls: :attr:`FakeAbdm.links` (patient -> care context id -> what was linked: ``display``,
``hi_type``, the decoded ``data`` bundle or ``None``); :attr:`FakeAbdm.notified` (mobile numbers); a data request
with :meth:`FakeAbdm.data_request` (a fresh HIU key, the webhook's ``data`` returned); the pushes of a transaction
decrypted and checked with :meth:`FakeAbdm.received`, or as sent with :meth:`FakeAbdm.pages`.

Judgement calls: a patient is the ``abha_address`` of a link, else its ``oid``, else ``X-Pt-Id``; a care context
linked twice keeps the first link and is counted in :attr:`FakeAbdm.relinked`; the checksum is MD5 hex of the plain
text (ABDM's HIP specification: "Md5 checksum of the content, before encryption").
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import re
import uuid
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from .. import _json
from ..abdm_crypto import KeyMaterial
from . import _routes as R
from ._domain import Domain

if TYPE_CHECKING:
    from ._common import RecordedRequest
    from ._domain import Server

__all__ = ["ROUTES", "FakeAbdm"]

ROUTES: Final[tuple[str, ...]] = ("care_contexts_link", "care_contexts_linked", "care_contexts_notify", "hip_data_push")
_MOBILE: Final = re.compile(r"^[6-9]\d{9}$")


def _error(message: str, status: int = 400) -> web.Response:
    """``GenericError`` of registration.yml: ``{"code", "error"}``."""
    return web.json_response({"code": status, "error": message}, status=status)


class FakeAbdm(Domain):
    """State and routes of the ABDM exchange, hospital side (see the module docstring)."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: patient (ABHA address, else OID) -> care context id -> {"display", "hi_type", "data"}.
        self.links: dict[str, dict[str, dict[str, Any]]] = {}
        #: Links of a care context already linked (ignored, counted).
        self.relinked = 0
        #: Mobile numbers an SMS notification was asked for.
        self.notified: list[str] = []
        #: transaction id -> the pushed pages, as received.
        self._pages: dict[str, list[dict[str, Any]]] = {}
        #: transaction id -> the HIU's key material of a data request made by :meth:`data_request`.
        self._hiu: dict[str, KeyMaterial] = {}

    def add_routes(self, app: web.Application) -> None:
        route = self.server._route
        app.router.add_post(R.CARE_CONTEXTS_LINK, route("care_contexts_link", self._link))
        app.router.add_get(R.CARE_CONTEXTS_LINKED, route("care_contexts_linked", self._linked))
        app.router.add_post(R.CARE_CONTEXTS_NOTIFY, route("care_contexts_notify", self._notify))
        app.router.add_post(R.HIP_DATA_ON_FETCH, route("hip_data_push", self._push))

    def reset(self) -> None:
        self.links.clear()
        self.notified.clear()
        self._pages.clear()
        self._hiu.clear()
        self.relinked = 0

    # ------------------------------------------------------------------------------ routes

    async def _link(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not isinstance(body.get("care_contexts"), list) or not body["care_contexts"]:
            return _error("care_contexts is required")
        patient = body.get("abha_address") or body.get("oid") or request.headers.get(R.PT_ID)
        if not isinstance(patient, str) or not patient:
            return _error("abha_address or oid is required")
        checked: list[dict[str, Any]] = []
        for item in body["care_contexts"]:
            if not isinstance(item, dict):
                return _error("care_contexts[] must be objects")
            cid, display, hi_type = item.get("care_context_id"), item.get("display"), item.get("hi_type")
            if not isinstance(cid, str) or not cid or not isinstance(display, str) or not display:
                return _error("care_context_id and display are required")
            if hi_type not in R.HI_TYPES:
                return _error("hi_type is not one of the enum's values")
            data = item.get("data")
            bundle = None
            if data is not None:
                try:
                    bundle = _json.loads(base64.b64decode(data, validate=True))
                except (binascii.Error, ValueError, TypeError):
                    return _error("data must be a base64 encoded FHIR bundle")
            checked.append({"care_context_id": cid, "display": display, "hi_type": hi_type, "data": bundle})
        held = self.links.setdefault(patient, {})
        for link in checked:
            if link["care_context_id"] in held:
                self.relinked += 1
            else:
                held[link["care_context_id"]] = link
        return web.Response(status=202)

    async def _linked(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:  # noqa: ARG002
        if not request.query.get("hip_id"):
            return _error("hip_id is required")
        patient = request.query.get("oid") or request.headers.get(R.PT_ID) or ""
        items = [
            {"care_context_id": cid, "display": link["display"], "status": None, "created_at": None}
            for cid, link in self.links.get(patient, {}).items()
        ]
        return self.server._json(request, {"care_contexts": items})

    async def _notify(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        mobile = body.get("mobile_number") if isinstance(body, dict) else None
        if not isinstance(mobile, str) or not _MOBILE.match(mobile):
            return _error("mobile_number must be a 10 digit mobile number")
        self.notified.append(mobile)
        return web.Response(status=202)

    async def _push(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not isinstance(body.get("transaction_id"), str):
            return _error("transaction_id is required")
        entries, key = body.get("entries"), body.get("key_information")
        if not isinstance(entries, list) or not isinstance(key, dict):
            return _error("entries and key_information are required")
        self._pages.setdefault(body["transaction_id"], []).append(body)
        return web.Response(status=202)

    # ------------------------------------------------------------------------------ test controls

    def data_request(
        self,
        care_contexts: list[str],
        *,
        abha_address: str = "shyam@sbx",
        oid: str | None = None,
        hip_id: str = "HIP-1",
        expires_in: float = 600.0,
        hi_types: tuple[str, ...] = ("OPConsultation",),
    ) -> dict[str, Any]:
        """A fresh HIU data request: the ``data`` of the ``abha.hip_data_fetch`` webhook, as the vendor's page
        shows it (``transaction_id`` filled), with a new HIU key the fake keeps to check the pushes."""
        transaction_id = str(uuid.uuid4())
        hiu = KeyMaterial.generate()
        self._hiu[transaction_id] = hiu
        expiry = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expires_in)
        return {
            "abha_address": abha_address,
            "oid": oid,
            "partner_patient_id": None,
            "hip_id": hip_id,
            "transaction_id": transaction_id,
            "care_contexts": list(care_contexts),
            "key_information": {
                "crypto_alg": "ECDH",
                "curve": "Curve25519",
                "dh_public_key": {
                    "expiry": expiry.isoformat().replace("+00:00", "Z"),
                    "parameters": "Curve25519/32byte random key",
                    "key_value": hiu.x509_public_key,
                },
                "nonce": hiu.nonce,
            },
            "hi_types": list(hi_types),
        }

    def hiu_key(self, transaction_id: str) -> KeyMaterial:
        """The HIU's key material of a request made by :meth:`data_request` (its private key opens the pushes)."""
        return self._hiu[transaction_id]

    def pages(self, transaction_id: str) -> list[dict[str, Any]]:
        """The pushed pages of a transaction, as received."""
        return list(self._pages.get(transaction_id, []))

    def received(self, transaction_id: str) -> dict[str, bytes]:
        """The plain bundles pushed for a transaction, each decrypted with the HIU's key and its checksum checked
        (``AssertionError`` on a page that does not open, a wrong checksum, or page numbers that do not add up)."""
        hiu = self._hiu[transaction_id]
        pages = self._pages.get(transaction_id, [])
        numbers = sorted(int(p.get("page_number", 0)) for p in pages)
        count = {int(p.get("page_count", 0)) for p in pages}
        assert not pages or (len(count) == 1 and numbers == list(range(1, count.pop() + 1))), "pages do not add up"
        out: dict[str, bytes] = {}
        for page in pages:
            key = page["key_information"]
            for entry in page["entries"]:
                assert entry.get("media") == "application/fhir+json", "media must be application/fhir+json"
                plain = hiu.decrypt(
                    entry["content"], peer_public_key=key["dh_public_key"]["key_value"], peer_nonce=key["nonce"]
                )
                assert hashlib.md5(plain, usedforsecurity=False).hexdigest() == entry.get("checksum"), "checksum"
                assert entry["care_context_id"] not in out, "a care context pushed twice"
                out[entry["care_context_id"]] = plain
        return out
