"""FakeHealthServer: the whole service interface on 127.0.0.1, with seeded data, faults and a request record."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import random
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
from aiohttp import BodyPartReader, web

from .. import _json, jwe
from . import _domain
from . import _routes as R
from ._common import BAD, Dropped, ErrorMarker, Handler, RecordedRequest, drop
from ._data import FakeData
from .abdm import _consents as _abdm_consents
from .abdm import _discover as _abdm_discover
from .abdm import _hiu as _abdm_hiu
from .abdm import _hospital as _abdm
from .abdm import _requests as _abdm_requests
from .abha import _kyc as _abha_kyc
from .abha import _profile as _abha_profile
from .abha import _registration as _abha
from .abha import _scan_share
from .patients import _directory as _patients
from .records import _results as _records
from .records import _storage
from .registries import _hfr as _registries_hfr
from .registries import _hpr as _registries_hpr
from .webhooks import _subscriptions
from .webhooks._domain import WebhookDomain
from .webhooks._send import WebhookSecret

__all__ = ["ROUTES", "FakeHealthServer", "Fault", "RecordedRequest"]

#: The routes of the original interface; each domain module (``_records``, ``_storage``, ``_abha``,
#: ``_patients``, ``_abdm``) adds its own.
CORE_ROUTES: Final = ("login", "refresh", "describe", "list", "upload", "aadhaar_init", "profile")
UPLOAD_TASKS: Final = frozenset({"smart", "pii", "classification"})
MAX_UPLOAD: Final = 10 * 1024 * 1024  # service-facts.md: the live direct upload is limited to 10 MB a file
#: The fake's own debug route (not the service's; no token, not in :data:`ROUTES`): the OTPs it "sent".
OTPS_PATH: Final = "/_fake/otps"

#: Route names usable with :meth:`FakeHealthServer.inject` (``"*"`` means every route).
ROUTES: Final = (
    CORE_ROUTES
    + _records.ROUTES
    + _storage.ROUTES
    + _abha.ROUTES
    + _patients.ROUTES
    + _abdm.ROUTES
    + _abha_profile.ROUTES
    + _abha_kyc.ROUTES
    + _scan_share.ROUTES
    + _subscriptions.ROUTES
    + _abdm_discover.ROUTES
    + _abdm_consents.ROUTES
    + _abdm_hiu.ROUTES
    + _abdm_requests.ROUTES
    + _registries_hpr.ROUTES
    + _registries_hfr.ROUTES
)


@attrs.define
class Fault:
    """A failure to inject on a route (see :meth:`FakeHealthServer.inject`).

    A fault fires on a call with probability ``rate`` (from the server's seeded random generator), for the next
    ``times`` calls that it fires on (``None``: for as long as it is injected). When it fires, it waits
    ``latency`` seconds, then: ``drop`` closes the connection without an answer; ``truncate`` announces the
    full body but sends half of it and closes; otherwise ``status`` (if set) is answered with ``body`` (``bytes``,
    ``str`` or a JSON-able value; default empty), ``content_type`` and a ``Retry-After`` of ``retry_after``. A
    fault with only ``latency`` delays the call and lets it through.
    """

    status: int | None = None
    times: int | None = None
    rate: float = 1.0
    retry_after: float | None = None
    latency: float = 0.0
    drop: bool = False
    truncate: bool = False
    body: Any = None
    content_type: str | None = None


class FakeHealthServer:
    """An aiohttp.web server of the whole interface, for tests and demos: ``async with FakeHealthServer() as s``.

    Serves describe, list, upload (multipart and JWE), aadhaar init (plain and JWE), profile, and the token
    endpoints, with deterministic seeded data (:class:`FakeData`), bearer-token checks, per-route fault
    injection (:meth:`inject`), a record of every request (:attr:`requests`, :meth:`calls`) and encrypted
    responses (to encrypted requests, or to all with ``encrypt_responses=True``) using the library's own
    :mod:`health_async.jwe`. Binds to 127.0.0.1 by default; ``port=0`` picks a free port (see :attr:`url`).

    Judgement calls: the list operation answers 406 unless ``Accept`` is exactly ``application/json`` (records.yaml:
    required, enum of that one value; the live service may answer protobuf); refresh-token answers 401 without
    ``Authorization: Bearer ...`` and 400 without ``Client-Id`` (authorization.yml requires both); faults apply
    before the token check, as a gateway's would; an upload without ``X-Pt-Id`` is stored for the first seeded user.

    OTPs: every OTP the fake "sends" (ABHA registration, login and KYC, a consent PIN reset, a discovered care
    context's link, an HPR registration) is kept in :attr:`otps`, answered by ``GET /_fake/otps`` (the fake's own
    debug route: no token, not in :data:`ROUTES`), and, with ``show_otps=True`` (off by default; on in
    ``health-async fake-server``), printed to stderr as it is made: ``fake OTP for <what>, mobile ******1234:
    123456``.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str = "fake-token",
        client_id: str = "fake-client",
        client_secret: str = "fake-secret",
        encryption_key: str = "fakekey-16-bytes",
        key_id: str = "fake-key-1",
        seed: int = 0,
        users: int = 3,
        documents_per_user: int = 50,
        page_size: int = 20,
        encrypt_responses: bool = False,
        record: bool = True,
        show_otps: bool = False,
    ) -> None:
        self.host, self.port = host, port
        self.token, self.client_id, self.client_secret = token, client_id, client_secret
        self.encryption_key, self.key_id = encryption_key, key_id
        self._key = jwe.derive_key(encryption_key)
        self.data = FakeData.generate(seed=seed, users=users, documents_per_user=documents_per_user)
        self.page_size = page_size
        self.encrypt_responses = encrypt_responses
        self.record = record
        #: Every request received, in order (when ``record`` is true).
        self.requests: list[RecordedRequest] = []
        #: Print each OTP the fake "sends" to stderr as it is made (see the class docstring).
        self.show_otps = show_otps
        #: Every OTP the fake "sent", oldest first: ``{"purpose", "to", "otp"}`` (``to``: the masked mobile, or
        #: ``None``); what ``GET /_fake/otps`` answers. Cleared by :meth:`reset`.
        self.otps: list[dict[str, str | None]] = []
        self._counts: dict[str, int] = dict.fromkeys(ROUTES, 0)
        self._faults: dict[str, list[Fault]] = {}
        self._rng = random.Random(seed)
        self._issued: set[str] = set()
        self._refresh_tokens: set[str] = set()
        self._static_failures = 0
        self._token_serial = 0
        self._runner: web.AppRunner | None = None
        #: Per-domain state and test controls (see each module's docstring).
        self.records = _records.FakeRecords(self)
        self.storage = _storage.FakeStorage(self)
        self.abha = _abha.FakeAbha(self)
        self.patients = _patients.FakePatients(self)
        self.abdm = _abdm.FakeAbdm(self)
        self.abha_profile = _abha_profile.FakeAbhaProfile(self)
        self.abha_kyc = _abha_kyc.FakeAbhaKyc(self)
        self.scan_share = _scan_share.FakeScanShare(self)
        self.webhook_subscriptions = _subscriptions.FakeWebhookSubscriptions(self)
        self.abdm_discover = _abdm_discover.FakeDiscover(self)
        self.abdm_consents = _abdm_consents.FakeConsents(self)
        self.abdm_hiu = _abdm_hiu.FakeHiu(self)
        self.abdm_requests = _abdm_requests.FakeRequests(self)
        #: The registries of milestone 4: professionals (HPR) and facilities (HFR).
        self.hpr = _registries_hpr.FakeHpr(self)
        self.hfr = _registries_hfr.FakeHfr(self)
        # the fake plays ABDM's exchange after an approval: the HIPs push the records to the HIU's webhook
        self.abdm_consents.on_approved = self.abdm_hiu.answer_approval
        self.abdm_consents.on_status_changed = self.abdm_hiu.consent_changed
        # ... and a consent request is in the patient's request inbox, also one made by ABHA address alone
        self.abdm_requests.sources.append(self.abdm_consents.inbox_items)
        self.abdm_consents.patient_of = self._patient_of
        self._domains: tuple[_domain.Domain, ...] = (
            self.records,
            self.storage,
            self.abha,
            self.patients,
            self.abdm,
            self.abha_profile,
            self.abha_kyc,
            self.scan_share,
            self.webhook_subscriptions,
            self.abdm_discover,
            self.abdm_consents,
            self.abdm_hiu,
            self.abdm_requests,
            self.hpr,
            self.hfr,
        )

    def __repr__(self) -> str:
        return f"FakeHealthServer(url={self.url if self._runner else None!r})"

    # ------------------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:54321``."""
        if self._runner is None:
            raise RuntimeError("the FakeHealthServer is not started")
        return f"http://{self.host}:{self.port}"

    def make_app(self) -> web.Application:
        """The aiohttp application (for embedding in your own runner)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        route = self._route
        app.router.add_post(R.LOGIN, route("login", self._login))
        app.router.add_post(R.REFRESH, route("refresh", self._refresh))
        app.router.add_get(R.DOCUMENTS, route("list", self._list))
        app.router.add_get(R.DOCUMENT, route("describe", self._describe))
        app.router.add_post(R.UPLOAD, route("upload", self._upload))
        app.router.add_post(R.AADHAAR_INIT, route("aadhaar_init", self._aadhaar_init))
        app.router.add_get(R.EMR_USER, route("profile", self._profile))
        app.router.add_get(OTPS_PATH, self._otps)
        for domain in self._domains:
            domain.add_routes(app)
        return app

    async def start(self) -> None:
        """Start serving (idempotent)."""
        if self._runner is not None:
            return
        runner = web.AppRunner(self.make_app(), access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]
        for domain in self._domains:
            await domain.start()

    async def close(self) -> None:
        """Stop serving and close every connection (idempotent)."""
        runner, self._runner = self._runner, None
        for domain in self._domains:
            await domain.close()
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> FakeHealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run_forever(self) -> None:
        """Start and serve until cancelled (for a standalone server)."""
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    # ------------------------------------------------------------------------------ test controls

    def inject(self, route: str, fault: Fault) -> None:
        """Add ``fault`` to ``route`` (one of :data:`ROUTES`, or ``"*"`` for all); faults are checked in order."""
        if route != "*" and route not in ROUTES:
            raise ValueError(f"unknown route {route!r}; known: {', '.join(ROUTES)} or '*'")
        self._faults.setdefault(route, []).append(fault)

    def clear_faults(self, route: str | None = None) -> None:
        """Remove the faults of ``route``, or of every route."""
        if route is None:
            self._faults.clear()
        else:
            self._faults.pop(route, None)

    def webhooks(self, url: str | None, secret: WebhookSecret | None = None) -> None:
        """Send the webhooks of every domain that sends them (ABDM's: links, data requests, consent updates, a
        patient's search, the HIU's pushes; Scan & Share's profile shares) to ``url``, signed with ``secret``, as
        ``server.abdm.webhooks(url, secret)`` does for one domain; ``None`` unregisters. ``ValueError`` as there
        (a URL off loopback, no secret). :meth:`reset` unregisters."""
        for domain in self._domains:
            if isinstance(domain, WebhookDomain):
                domain.webhooks(url, secret)

    def calls(self, route: str) -> int:
        """How many requests ``route`` received (counted even when recording is off)."""
        return self._counts[route]

    def busiest_window(self, seconds: float = 1.0, *, route: str | None = None) -> int:
        """The most recorded requests (of ``route``, or of every route) that arrived within any ``seconds``: what
        the service's own rate limit would count. Against a shared limit of ``rate_limit`` requests a second, this
        is at most ``rate_limit``. Needs recording on (``record=True``, the default)."""
        if not seconds > 0:
            raise ValueError("seconds must be a positive number of seconds")
        times = sorted(r.arrived_at for r in self.requests if route is None or r.route == route)
        most, first = 0, 0
        for last, at in enumerate(times):
            while at - times[first] >= seconds:
                first += 1
            most = max(most, last - first + 1)
        return most

    def reset(self) -> None:
        """Forget the recorded requests and counts, and remove every fault."""
        self.requests.clear()
        self.otps.clear()
        self._counts = dict.fromkeys(ROUTES, 0)
        self._faults.clear()
        for domain in self._domains:
            domain.reset()

    def expire_tokens(self) -> None:
        """Invalidate every access token issued by login or refresh (their refresh tokens stay valid)."""
        self._issued.clear()

    def reject_static_token(self, times: int = 1) -> None:
        """Answer 401 to the static ``token`` for its next ``times`` uses (to exercise refresh-on-401)."""
        self._static_failures = times

    # ------------------------------------------------------------------------------ machinery

    def _otp_sent(self, otp: str, purpose: str, mobile: str | None = None) -> None:
        """The fake "sent" ``otp`` for ``purpose`` (to ``mobile``, shown masked): kept in :attr:`otps`, and printed
        to stderr with ``show_otps``."""
        to = None if not mobile else "mobile ******" + mobile[-4:]
        self.otps.append({"purpose": purpose, "to": to, "otp": otp})
        if self.show_otps:
            sys.stderr.write(f"fake OTP for {purpose}{'' if to is None else ', ' + to}: {otp}\n")
            sys.stderr.flush()

    async def _otps(self, _request: web.Request) -> web.StreamResponse:
        """``GET /_fake/otps``: :attr:`otps` as ``{"otps": [...]}`` (the fake's debug route)."""
        return web.json_response({"otps": self.otps})

    def _patient_of(self, abha_address: str) -> str | None:
        """The OID of the fake's ABHA account with this address (compared as the ABHA fake does: without case
        or suffix), or ``None``."""
        account = self.abha.accounts.get(abha_address.strip().lower().partition("@")[0])
        return None if account is None else account.oid

    def _route(self, name: str, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            self._counts[name] += 1
            rec = RecordedRequest(
                route=name,
                method=request.method,
                path=request.path,
                query=list(request.query.items()),
                headers=dict(request.headers),
            )
            if self.record:
                self.requests.append(rec)
            response = await self._fault(name, request)
            if response is None and name not in ("login", "refresh") and not self._authorized(request):
                response = web.json_response({"message": "Unauthorized"}, status=401)
            if response is None:
                response = await handler(request, rec)
            rec.status = None if isinstance(response, Dropped) else response.status
            return response

        return handle

    def _authorized(self, request: web.Request) -> bool:
        auth = request.headers.get(R.AUTHORIZATION, "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        if token == self.token:
            if self._static_failures > 0:
                self._static_failures -= 1
                return False
            return True
        return token in self._issued

    async def _fault(self, route: str, request: web.Request) -> web.StreamResponse | None:
        for key in (route, "*"):
            faults = self._faults.get(key)
            if not faults:
                continue
            for fault in list(faults):
                if fault.rate < 1.0 and self._rng.random() >= fault.rate:
                    continue
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        faults.remove(fault)
                if fault.latency:
                    await asyncio.sleep(fault.latency)
                if fault.drop:
                    return drop(request)
                if fault.truncate:
                    return await self._truncated(request, fault)
                if fault.status is not None:
                    return self._fault_response(fault)
        return None

    def _fault_response(self, fault: Fault) -> web.Response:
        headers = {R.RETRY_AFTER: f"{fault.retry_after:g}"} if fault.retry_after is not None else None
        body = fault.body
        if body is None:
            return web.Response(status=fault.status or 500, headers=headers)
        if isinstance(body, bytes | str):
            raw = body.encode() if isinstance(body, str) else body
            return web.Response(
                status=fault.status or 500, body=raw, headers=headers, content_type=fault.content_type or "text/plain"
            )
        return web.Response(
            status=fault.status or 500,
            body=_json.dumps(body),
            headers=headers,
            content_type=fault.content_type or "application/json",
        )

    async def _truncated(self, request: web.Request, fault: Fault) -> web.StreamResponse:
        body = fault.body if isinstance(fault.body, bytes) else _json.dumps({"document_id": "x", "tags": ["a" * 200]})
        response = web.StreamResponse(status=fault.status or 200)
        response.content_type = "application/json"
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        if request.transport is not None:
            request.transport.close()
        return response

    def _json(self, request: web.Request, payload: Any, status: int = 200) -> web.Response:
        return self._body(request, _json.dumps(payload), status)

    def _body(self, request: web.Request, body: bytes, status: int = 200) -> web.Response:
        if status < 300 and (self.encrypt_responses or _encrypted(request)):
            envelope = jwe.encrypt(body, self._key)
            del envelope["protected"]  # as the service's responses: no protected, no kid
            body = _json.dumps(envelope)
        return web.Response(status=status, body=body, content_type="application/json")

    async def _read_json(self, request: web.Request, rec: RecordedRequest) -> Any:
        """The request's JSON, decrypted when it is an envelope with X-Encryption: JWE; ``BAD`` if unreadable."""
        raw = await request.read()
        rec.body_size = len(raw)
        try:
            data = _json.loads(raw)
        except _json.JSONDecodeError:
            return BAD
        rec.json = data
        if _encrypted(request):
            if not isinstance(data, dict) or data.get("kid") != self.key_id:
                return BAD  # the service finds the shared key by the envelope's kid (service interface, 2.8)
            try:
                data = _json.loads(jwe.decrypt(data, self._key))
            except Exception:  # any envelope the fake cannot open (the primitive's EncryptionError), or not JSON
                return BAD
            rec.plaintext = data
        return data

    def _issue(self) -> dict[str, Any]:
        self._token_serial += 1
        access, refresh = f"fake-access-{self._token_serial}", f"fake-refresh-{self._token_serial}"
        self._issued.add(access)
        self._refresh_tokens.add(refresh)
        return {"access_token": access, "expires_in": 1800, "refresh_token": refresh, "refresh_expires_in": 86400}

    # ------------------------------------------------------------------------------ routes

    async def _login(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self._read_json(request, rec)
        if (
            not isinstance(body, dict)
            or body.get("client_id") != self.client_id
            or body.get("client_secret") != self.client_secret
        ):
            return web.json_response({"message": "invalid client credentials"}, status=401)
        return web.json_response(self._issue())

    async def _refresh(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        """authorization.yml requires ``Authorization`` (``Bearer <access_token>``) and ``Client-Id``: 401
        ``{code, error}`` without a bearer token (its access token may have expired: only its presence is
        checked), 400 without ``Client-Id``, 401 for another client's; then 401 for a refresh token not issued,
        or used already."""
        body = await self._read_json(request, rec)  # read first, so the record holds it whatever the answer
        scheme, _, bearer = request.headers.get(R.AUTHORIZATION, "").partition(" ")
        if scheme != "Bearer" or not bearer.strip():
            return web.json_response({"code": 401, "error": "Authorization: Bearer header is required"}, status=401)
        client_id = request.headers.get(R.CLIENT_ID)
        if not client_id:
            return web.json_response({"code": 400, "error": "Client-Id header is required"}, status=400)
        if client_id != self.client_id:
            return web.json_response({"code": 401, "error": "unknown Client-Id"}, status=401)
        token = body.get("refresh_token") if isinstance(body, dict) else None
        if token not in self._refresh_tokens:
            return web.json_response({"message": "invalid refresh token"}, status=401)
        self._refresh_tokens.discard(token)
        return web.json_response(self._issue())

    async def _describe(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        if not user:
            return web.json_response({"message": "X-Pt-Id header is required"}, status=400)
        body = self.data.documents.get(user, {}).get(request.match_info["id"])
        if body is None:
            return web.Response(status=404, text="No such document.")
        return self._body(request, body)

    async def _list(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        if not user:
            return web.json_response({"message": "X-Pt-Id header is required"}, status=400)
        if request.headers.get(R.ACCEPT, "").strip() != "application/json":  # records.yaml: enum, one value
            return web.Response(status=406, text="send Accept: application/json")
        try:
            offset = int(request.query.get("offset", "0"))
            after = int(request.query["u_at__gt"]) if "u_at__gt" in request.query else None
        except ValueError:
            return web.json_response({"message": "bad offset or u_at__gt"}, status=400)
        items = self.data.list_items.get(user, [])
        if after is not None:
            items = [i for i in items if i["upload_date"] > after]
        page = items[offset : offset + self.page_size]
        payload: dict[str, Any] = {
            "items": [{"record": {"item": item}} for item in page],
            "source_refreshed_at": 1_700_000_000,
        }
        if offset + self.page_size < len(items):
            payload["next_token"] = str(offset + self.page_size)
        return self._json(request, payload)

    async def _upload(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        tasks = request.query.getall("task", [])
        if not tasks or not set(tasks) <= UPLOAD_TASKS:
            return web.Response(status=400, text="Invalid form data.")
        files: list[tuple[int, str, bool]] = []  # size, SHA-256, whether it ends in b"error" (ErrorMarker)
        if _encrypted(request):
            body = await self._read_json(request, rec)
            try:
                data = base64.b64decode(body["file"], validate=True)
            except (TypeError, KeyError, binascii.Error):
                return web.Response(status=400, text="Invalid form data.")
            files.append((len(data), hashlib.sha256(data).hexdigest(), ErrorMarker(data).found))
            rec.plaintext = {"file": len(data)}
        elif request.content_type == "multipart/form-data":
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader) or part.name != "file":
                    continue
                digest, size, marker = hashlib.sha256(), 0, ErrorMarker()
                while chunk := await part.read_chunk(256 * 1024):
                    size += len(chunk)
                    if size > MAX_UPLOAD:
                        return web.Response(status=413, text="File too large.")
                    digest.update(chunk)
                    marker.update(chunk)
                files.append((size, digest.hexdigest(), marker.found))
        if not files:
            return web.Response(status=400, text="Invalid form data.")
        rec.body_size = sum(size for size, _, _ in files)
        if any(size > MAX_UPLOAD for size, _, _ in files):
            return web.Response(status=413, text="File too large.")
        user = request.headers.get(R.PT_ID) or self.data.user_ids[0]
        ids = []
        for size, sha256, ends_in_error in files:
            document_id = str(uuid.uuid4())
            ids.append(document_id)
            doc = {
                "document_id": document_id,
                "source": "upload",
                "document_type": request.query.get("dt", "lr"),
                "tags": sorted(tasks),
                "files": [],
                # a file whose content ends in b"error" ends its processing in ERROR (testing/records/_results.py); the
                # presigned storage host applies the same rule (_common.ErrorMarker)
                "upload": {"size": size, "sha256": sha256, "ends_in_error": ends_in_error},
            }
            self.data.documents.setdefault(user, {})[document_id] = _json.dumps(doc)
        return self._json(request, {"document_id": ids[0]})

    async def _aadhaar_init(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        body = await self._read_json(request, rec)
        number = body.get("aadhaar_number") if isinstance(body, dict) else None
        if not isinstance(number, str) or len(number) != 12 or not number.isdigit():
            return web.json_response(
                {"code": 400, "error": "Invalid request", "source_error": {"code": "MIS-1013", "message": "bad body"}},
                status=400,
            )
        if number in self.data.failing_aadhaar:
            status, error = self.data.failing_aadhaar[number]
            return web.json_response(error, status=status)
        mobile_tail = hashlib.sha256(number.encode()).hexdigest()[:4]
        digits = "".join(str(int(c, 16) % 10) for c in mobile_tail)
        return self._json(
            request,
            {
                "hint": f"OTP sent successfully to your mobile number ******{digits}",
                "txn_id": self.abha.start_aadhaar(number),
            },
        )

    async def _profile(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        client_id = request.headers.get(R.CLIENT_ID)
        if not client_id:
            return web.json_response({"message": "client-id header is required", "code": "bad_request"}, status=400)
        if client_id != self.client_id:
            return web.json_response({"message": "Unauthorized", "code": "unauthorized"}, status=401)
        body = self.data.profiles.get(request.match_info["oid"])
        if body is None:
            return web.json_response({"message": "Profile not found", "code": "profile_not_found"}, status=404)
        return self._body(request, body)


def _encrypted(request: web.Request) -> bool:
    """Whether the request says its body is a JWE envelope (guide.mdx: ``X-Encryption: JWE``)."""
    return request.headers.get(R.ENCRYPTION) == R.ENCRYPTION_JWE
