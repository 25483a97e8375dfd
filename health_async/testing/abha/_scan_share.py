"""The fake Scan & Share: a facility counter issuing tokens, the patient's share and its status, the answer.

Written from ``registration.yml`` (``POST /abdm/v2/profile/share`` with ``ScanandshareProfileShareRequest``, 202
``{request_id, status}``; ``GET /abdm/v2/profile/share/{request_id}``, ``ScanandshareResponse``;
``POST /abdm/v1/hip/patient/profile/on-share`` with ``ScanandshareHipScanAndShareOnRequest``, 202), the pages
``phr/scan-and-share.mdx`` (the status also carries "HIP details") and ``webhooks/hip-scan-and-share.mdx`` (the
``abha.hip_profile_share`` webhook's body).

Routes (names for ``server.inject`` and ``server.calls``):

* ``profile_share``: ``hip_id`` and ``counter_id`` required (non-empty strings), and the user: ``X-Pt-Id``, else
  the ``oid`` query (400 ``GenericError`` otherwise). The body's ``request_id`` is kept when it is a non-empty
  string (a repeat of a known one is 409), else one is made. Answers 202 ``{"request_id", "status": "processing"}``.
* ``profile_share_status``: 404 for an unknown request id; else ``{"request_id", "status", "token_number",
  "expiry", "hip_id", "hip_name", "show_token_screen"}`` (the OpenAPI's fields, plus the page's HIP details).
* ``profile_on_share``: the hospital's answer. 404 for an unknown ``request_id``; 400 without ``abha_address``, or
  with one that is not the share's (compared without case), or without ``token.token_number`` or ``error``; an
  ``error`` makes the share ``failed``; else the token (and its ``expires_at``, epoch seconds, as ``expiry``) is
  the share's, status ``success``. A second answer to one share is 409 and changes nothing. Answers 202.

Who gives the token (judgement call, both documented): when a hospital is registered with
:meth:`FakeScanShare.webhooks` ``(url, secret)``, each share is sent to it as a signed ``abha.hip_profile_share``
webhook (in a background task, after the 202) and stays ``processing`` until the hospital answers on-share; when
none is, the fake's own counter (:meth:`FakeScanShare.counter_token`) gives the token at once, status
``success``. The fake's counter follows the same rule as ``TokenCounter``: one token per person (ABHA address,
without case) per counter (``hip_id``, ``counter_id``) per day (UTC here), numbered from 1.

The patient: the ABHA address the fake holds for the user (:attr:`FakeScanShare.abha_addresses`, OID -> address;
default ``patient.<8 hex of the OID's SHA-256>@sbx``), the body's ``patient.abha_address`` when given instead;
:attr:`FakeScanShare.abha_numbers` (OID -> ABHA number) fills ``abha_number`` (else ``""``, as the page blanks it).

Webhooks are the vendor page's envelope (``service`` ``abdm``, a ``transaction_id`` of their own, ``business_id``
:attr:`FakeScanShare.business_id`, ``client_id`` the server's) with ``data`` ``{abha_address, abha_number, hip_id,
oid, partner_patient_id, hip_code (the counter), req_id}``. A webhook the receiver does not take (not 2xx, or no
answer) is sent again up to :data:`REDELIVERIES` (2) times, :data:`REDELIVERY_DELAY` s apart, re-signed each time
(as ``FakeAbdm``'s). :meth:`FakeScanShare.send_again` ``(request_id)`` delivers a share's webhook once more (the
service redelivering). :attr:`FakeScanShare.deliveries` lists every attempt as ``(request id, HTTP status or the
exception's type name)``; ``await`` :meth:`FakeScanShare.flush` waits for the webhooks being sent. The server's
``close`` cancels and awaits them; ``reset`` cancels them, unregisters the URL and forgets every share.

State: :attr:`FakeScanShare.shares` (request id -> :class:`FakeShare`), :attr:`FakeScanShare.answers` (every
on-share body received, in order), :attr:`FakeScanShare.hip_names` (HIP id -> the facility's name).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
import uuid
from typing import TYPE_CHECKING, Any, Final

import attrs
from aiohttp import web

from .. import _routes as R
from ..webhooks._domain import WebhookDomain
from ..webhooks._send import REDELIVERIES, REDELIVERY_DELAY, Outcome, Target, deliver

if TYPE_CHECKING:
    from .._common import RecordedRequest
    from .._domain import Server

__all__ = ["PROFILE_SHARE_EVENT", "REDELIVERIES", "REDELIVERY_DELAY", "ROUTES", "FakeScanShare", "FakeShare"]

ROUTES: Final[tuple[str, ...]] = ("profile_share", "profile_share_status", "profile_on_share")
#: The webhook event of a share (``webhooks/hip-scan-and-share.mdx``).
PROFILE_SHARE_EVENT: Final = "abha.hip_profile_share"


@attrs.define
class FakeShare:
    """One share the fake holds."""

    request_id: str
    hip_id: str
    counter_id: str
    oid: str
    abha_address: str
    abha_number: str
    partner_patient_id: str | None
    #: ``processing``, ``success`` or ``failed``.
    status: str = "processing"
    token_number: str | None = None
    #: When the token expires (ISO 8601), or None.
    expiry: str | None = None
    #: Who gave the token: ``"hospital"`` (on-share) or ``"fake"`` (the fake's own counter).
    answered_by: str | None = None
    #: The location sent with the share, as sent.
    location: dict[str, Any] | None = None


def _error(message: str, status: int = 400) -> web.Response:
    """``GenericError`` of registration.yml: ``{"code", "error"}``."""
    return web.json_response({"code": status, "error": message}, status=status)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


class FakeScanShare(WebhookDomain):
    """State and routes of Scan & Share (see the module docstring)."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: request id -> the share.
        self.shares: dict[str, FakeShare] = {}
        #: Every on-share body received, in order (a second answer to a share included).
        self.answers: list[dict[str, Any]] = []
        #: OID -> the ABHA address the fake holds for that user.
        self.abha_addresses: dict[str, str] = {}
        #: OID -> the ABHA number the fake holds for that user.
        self.abha_numbers: dict[str, str] = {}
        #: HIP id -> the facility's name (the status's ``hip_name``; ``None`` for another HIP).
        self.hip_names: dict[str, str] = {}
        #: ``business_id`` of every webhook sent.
        self.business_id = "fake-business"
        self._counter: dict[tuple[str, str, str], int] = {}  # (day, hip, counter) -> tokens given
        self._given: dict[tuple[str, str, str, str], str] = {}  # (day, hip, counter, address) -> token

    def add_routes(self, app: web.Application) -> None:
        route = self.server._route
        app.router.add_post(R.PROFILE_SHARE, route("profile_share", self._share))
        app.router.add_get(R.PROFILE_SHARE_STATUS, route("profile_share_status", self._status))
        app.router.add_post(R.PROFILE_ON_SHARE, route("profile_on_share", self._on_share))

    def reset(self) -> None:
        self._forget_webhooks()
        self.shares.clear()
        self.answers.clear()
        self.abha_addresses.clear()
        self.abha_numbers.clear()
        self.hip_names.clear()
        self._counter.clear()
        self._given.clear()

    # ------------------------------------------------------------------------------ routes

    async def _share(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict):
            return _error("the body must be a JSON object")
        hip_id, counter_id = _text(body.get("hip_id")), _text(body.get("counter_id"))
        if hip_id is None or counter_id is None:
            return _error("hip_id and counter_id are required")
        oid = _text(request.headers.get(R.PT_ID)) or _text(request.query.get("oid"))
        if oid is None:
            return _error("the user is required: X-Pt-Id or oid")
        request_id = _text(body.get("request_id")) or str(uuid.uuid4())
        if request_id in self.shares:
            return _error("request_id already used", 409)
        patient = body.get("patient")
        address = (_text(patient.get("abha_address")) if isinstance(patient, dict) else None) or self.abha_address(oid)
        location = body.get("location")
        share = FakeShare(
            request_id=request_id,
            hip_id=hip_id,
            counter_id=counter_id,
            oid=oid,
            abha_address=address,
            abha_number=self.abha_numbers.get(oid, ""),
            partner_patient_id=_text(request.headers.get(R.PARTNER_PT_ID)),
            location=location if isinstance(location, dict) else None,
        )
        self.shares[request_id] = share
        target = self._target
        if target is None:  # no hospital: the fake's own counter answers at once
            share.token_number = self.counter_token(hip_id, counter_id, address)
            share.status, share.answered_by = "success", "fake"
            share.expiry = _end_of_day()
        elif not self._closed:  # after the 202, in the background, as the service
            self._spawn(self._deliver(target, share))
        return web.json_response({"request_id": request_id, "status": "processing"}, status=202)

    async def _status(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:  # noqa: ARG002
        share = self.shares.get(request.match_info["request_id"])
        if share is None:
            return _error("no such request", 404)
        return self.server._json(
            request,
            {
                "request_id": share.request_id,
                "status": share.status,
                "token_number": share.token_number,
                "expiry": share.expiry,
                "hip_id": share.hip_id,
                "hip_name": self.hip_names.get(share.hip_id),
                "show_token_screen": share.token_number is not None,
            },
        )

    async def _on_share(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict):
            return _error("the body must be a JSON object")
        self.answers.append(body)
        request_id = body.get("request_id")
        share = self.shares.get(request_id) if isinstance(request_id, str) else None
        if share is None:
            return _error("no such request", 404)
        address = _text(body.get("abha_address"))
        if address is None or address.casefold() != share.abha_address.casefold():
            return _error("abha_address is required and must be the share's")
        token, error = body.get("token"), body.get("error")
        number = _text(token.get("token_number")) if isinstance(token, dict) else None
        if number is None and not isinstance(error, dict):
            return _error("token.token_number (or error) is required")
        if share.answered_by is not None:
            return _error("the share was already answered", 409)
        share.answered_by = "hospital"
        if number is None:
            share.status = "failed"
            return web.Response(status=202)
        assert isinstance(token, dict)
        expires = token.get("expires_at")
        if isinstance(expires, int) and not isinstance(expires, bool):
            share.expiry = dt.datetime.fromtimestamp(expires, tz=dt.UTC).isoformat()
        share.token_number, share.status = number, "success"
        return web.Response(status=202)

    # ------------------------------------------------------------------------------ webhooks

    def _event(self, share: FakeShare) -> dict[str, Any]:
        now = int(time.time())
        return {
            "service": "abdm",
            "event": PROFILE_SHARE_EVENT,
            "event_time": now,
            "transaction_id": str(uuid.uuid4()),
            "timestamp": now,
            "business_id": self.business_id,
            "client_id": self.server.client_id,
            "data": {
                "abha_address": share.abha_address,
                "abha_number": share.abha_number,
                "hip_id": share.hip_id,
                "oid": share.oid,
                "partner_patient_id": share.partner_patient_id,
                "hip_code": share.counter_id,
                "req_id": share.request_id,
            },
        }

    async def _deliver(self, target: Target, share: FakeShare) -> None:
        await self._attempts(target, share.request_id, self._event(share))

    async def _attempts(self, target: Target, request_id: str, event: dict[str, Any]) -> Outcome:
        return await deliver(target, event, lambda outcome: self.deliveries.append((request_id, outcome)))

    # ------------------------------------------------------------------------------ test controls

    async def send_again(self, request_id: str) -> Outcome:
        """Deliver the webhook of share ``request_id`` once more (a new transaction id, re-signed), as the
        service does when it redelivers; its outcome. ``KeyError`` for an unknown share, ``RuntimeError`` when
        no URL is registered."""
        share = self.shares[request_id]
        target = self._target
        if target is None:
            raise RuntimeError("no webhook URL registered: call server.scan_share.webhooks(url, secret) first")
        return await self._attempts(target, request_id, self._event(share))

    def abha_address(self, oid: str) -> str:
        """The ABHA address the fake holds for the user ``oid`` (see the module docstring)."""
        held = self.abha_addresses.get(oid)
        if held is not None:
            return held
        return f"patient.{hashlib.sha256(oid.encode()).hexdigest()[:8]}@sbx"

    def counter_token(self, hip_id: str, counter_id: str, abha_address: str) -> str:
        """The fake's own counter: the token this person got at this counter today, else the next one (from 1)."""
        day = dt.datetime.now(dt.UTC).date().isoformat()
        key = (day, hip_id, counter_id, abha_address.casefold())
        token = self._given.get(key)
        if token is None:
            number = self._counter.get((day, hip_id, counter_id), 0) + 1
            self._counter[(day, hip_id, counter_id)] = number
            token = self._given[key] = str(number)
        return token


def _end_of_day() -> str:
    """The end of today (UTC) in ISO 8601: when the fake counter's tokens expire."""
    today = dt.datetime.now(dt.UTC).date()
    return dt.datetime.combine(today, dt.time(23, 59, 59), tzinfo=dt.UTC).isoformat()
