"""The fake server's presigned batch upload (``POST /mr/api/v1/docs``) and its second storage host, PATCH and
DELETE of documents, and ``/mr/api/v1/cases``.

**Presigned uploads.** ``presigned_batch`` checks the vendor's limits (at most 10 files an entry, one content type,
``application/pdf``/``image/png``/``image/jpg``, PDF 25 MiB, image 10 MiB, tags of 2-20 characters; of more than 10
tags the first 10 are kept, as records.yaml says) and answers, per entry, a ``document_id`` and one form per file,
or ``error_details`` ``{code, message}``. The forms point at a *second* host, :attr:`FakeStorage.storage_url` (its
own aiohttp runner on 127.0.0.1, port 0), whose ``storage_form`` route wants the signed fields first, exactly as
issued, then the file with the declared content type and exact size; it answers 204 and keeps a
:class:`StorageRequest` in :attr:`FakeStorage.received` (headers included, so a test can assert that no
``Authorization``, ``client-id`` or ``X-Pt-Id`` arrived). Once every file of a document arrived, the document is
stored in ``server.data.documents[user]`` (and listed), so describe finds it. The storage route takes no bearer
token (as real presigned storage); ``server.inject("storage_form", ...)`` faults apply to it, after its body was
read.

**Processing marker.** As on the direct upload route (one rule: :data:`ERROR_MARKER`, checked by
:class:`ErrorMarker`), a file whose content ends in ``b"error"`` makes its document's processing end in ``error``
(``testing/records/_results.py``; ``wait_for_result`` raises ``ProcessingFailed``): the stored document notes it per
file
and for the document (``upload.ends_in_error``: true when any of its files ends so), and
:attr:`StorageRequest.ends_in_error` says it of each post.

**Test controls.** :meth:`FakeStorage.fail_next` (the next N form posts answer 500 or the given status),
:meth:`FakeStorage.fail_file` (the posts of file *i* of a document fail, N times or always),
:meth:`FakeStorage.redirect_next` (answer 307 to another place: :attr:`FakeStorage.followed` counts posts that
arrived there, i.e. redirects wrongly followed), :meth:`FakeStorage.refuse_next` (the next batch entries come back
with ``error_details``), :attr:`FakeStorage.max_open_batches` (the most documents declared and not yet complete
at one time).

**A document id chosen by the caller.** A batch entry may name its ``document_id`` (``UpdateDocumentV3Request``
in records.yaml: "Unique identifier for the document"; the files say no more). The fake takes it as the new
document's id; an entry naming a document of the same user already declared or stored declares *that* document
again (its new files replace the old ones when they arrive; counted in :attr:`FakeStorage.redeclared`), never a
second one; an id of another user's document is refused (``DOCUMENT_ID_IN_USE``), a malformed one too
(``INVALID_DOCUMENT_ID``). The library relies on exactly this to make an upload recognisable (see
``resources/records/_presigned.py``); it is an assumption beyond the vendor's files.

**Documents.** ``document_update`` (PATCH ``dt``, ``dd_e``, ``tg``, ``cases``, ``ndhm``, ``oid``; at least one of
them, else 400) and ``document_delete`` answer 200 with an **empty body**, as the live service does; 404 ``No such
document.`` for an unknown id. A DELETE without ``X-Pt-Id`` searches every user.

**Cases.** ``cases_list`` (pages of ``server.page_size``, ordered by ``updated_at``; ``offset``, ``u_at__gt``;
deleted cases listed with status ``D`` and no ``item``), ``case_create`` (200 ``{id}``; 409 for an id already
used; 400 without ``id``/``display_name``/``occurred_at``), ``case_update`` and ``case_delete`` (204; 404 for an
unknown or deleted case). ``updated_at`` comes from a counter, so runs are deterministic. Every route of this
module but ``storage_form`` requires ``X-Pt-Id`` (400 without), except ``document_delete``.

``reset()`` forgets the controls and :attr:`FakeStorage.received`; stored documents and cases stay (as the core
data does).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from typing import TYPE_CHECKING, Any, Final

import attrs
from aiohttp import BodyPartReader, web

from ... import _json
from .. import _routes as R
from .._common import ERROR_MARKER, ErrorMarker, RecordedRequest
from .._domain import Domain

if TYPE_CHECKING:
    from .._domain import Server

__all__ = ["ERROR_MARKER", "ROUTES", "ErrorMarker", "FakeStorage", "StorageRequest"]

ROUTES: Final[tuple[str, ...]] = (
    "presigned_batch",
    "storage_form",
    "document_update",
    "document_delete",
    "cases_list",
    "case_create",
    "case_update",
    "case_delete",
)

MiB: Final = 1024 * 1024
#: By content type. The vendor's files spell JPEG both ways: ``image/jpg`` in the presigned limits page (what the
#: client sends), ``image/jpeg`` in records.yaml's example: both are taken.
LIMITS: Final = {"application/pdf": 25 * MiB, "image/png": 10 * MiB, "image/jpg": 10 * MiB, "image/jpeg": 10 * MiB}
_PATCH_FIELDS: Final = ("dt", "ndhm", "oid", "dd_e", "tg", "cases")
#: A caller-chosen ``document_id`` of a batch entry (``UpdateDocumentV3Request.document_id``: "Unique identifier
#: for the document"; the files give no format: the fake takes 1 to 64 letters, digits, ``-`` and ``_``).
_CHOSEN_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@attrs.define
class StorageRequest:
    """One form post as the storage host received it."""

    path: str
    headers: dict[str, str]
    #: The text fields, in arrival order.
    fields: dict[str, str] = attrs.field(factory=dict)
    #: Names of the parts in arrival order (``"file"`` for the file).
    order: list[str] = attrs.field(factory=list)
    file_size: int = 0
    sha256: str | None = None
    #: Whether the file's content ends in :data:`ERROR_MARKER` (its document's processing then ends in ``error``).
    ends_in_error: bool = False
    content_type: str | None = None
    status: int | None = None


@attrs.define
class _Form:
    user: str
    document_id: str
    index: int
    size: int
    content_type: str
    fields: dict[str, str]


@attrs.define
class _Pending:
    user: str
    entry: dict[str, Any]
    #: file index -> (size, SHA-256, whether it ends in :data:`ERROR_MARKER`)
    stored: dict[int, tuple[int, str, bool]] = attrs.field(factory=dict)


class FakeStorage(Domain):
    """State and routes of presigned uploads (with the storage host), document PATCH/DELETE and cases."""

    ROUTES = ROUTES

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: Every form post the storage host received (see :class:`StorageRequest`).
        self.received: list[StorageRequest] = []
        #: Posts that arrived where a redirect pointed: a client that follows redirects shows up here.
        self.followed = 0
        #: Batch entries that named a document already declared or stored (declared again, never a second one).
        self.redeclared = 0
        #: The most documents declared and not yet complete at one time.
        self.max_open_batches = 0
        #: user OID -> case id -> the stored case (wire shape).
        self.cases: dict[str, dict[str, dict[str, Any]]] = {}
        self._forms: dict[str, _Form] = {}
        self._pending: dict[str, _Pending] = {}
        self._fail: list[int] = []
        self._redirect: list[str | None] = []
        self._refuse: list[tuple[str, str]] = []
        self._fail_file: dict[int, list[Any]] = {}
        self._clock = 1_753_958_000
        self._runner: web.AppRunner | None = None
        self._port = 0

    # ------------------------------------------------------------------------------ controls

    @property
    def storage_url(self) -> str:
        """Base URL of the storage host (a different port from the API)."""
        if self._runner is None:
            raise RuntimeError("the fake storage host is not started")
        return f"http://{self.server.host}:{self._port}"

    def fail_next(self, times: int = 1, *, status: int = 500) -> None:
        """Answer the next ``times`` form posts with ``status`` (their file is not stored)."""
        self._fail.extend([status] * times)

    def fail_file(self, index: int, *, times: int | None = None, status: int = 500) -> None:
        """Answer the form posts of file ``index`` (of any document) with ``status``: the next ``times`` of them,
        or every one (``None``)."""
        self._fail_file[index] = [times, status]

    def redirect_next(self, times: int = 1, *, location: str | None = None) -> None:
        """Answer the next ``times`` form posts with 307 to ``location`` (default: this host's ``/elsewhere``,
        which counts in :attr:`followed`)."""
        self._redirect.extend([location] * times)

    def refuse_next(self, code: str = "INVALID_REQUEST", message: str = "refused", *, times: int = 1) -> None:
        """The next ``times`` batch entries come back with ``error_details`` ``{code, message}`` and no forms."""
        self._refuse.extend([(code, message)] * times)

    def reset(self) -> None:
        """Forget the controls and the received posts (stored documents and cases stay)."""
        self.redeclared = 0
        self.received.clear()
        self._fail.clear()
        self._redirect.clear()
        self._refuse.clear()
        self._fail_file.clear()
        self.followed = 0
        self.max_open_batches = len(self._pending)

    # ------------------------------------------------------------------------------ lifecycle

    def add_routes(self, app: web.Application) -> None:
        """The API side: presigned batch, document PATCH/DELETE, cases."""
        route = self.server._route
        app.router.add_post(R.DOCUMENTS, route("presigned_batch", self._batch))
        app.router.add_patch(R.DOCUMENT, route("document_update", self._patch_document))
        app.router.add_delete(R.DOCUMENT, route("document_delete", self._delete_document))
        app.router.add_get(R.CASES, route("cases_list", self._list_cases))
        app.router.add_post(R.CASES, route("case_create", self._create_case))
        app.router.add_patch(R.CASE, route("case_update", self._update_case))
        app.router.add_delete(R.CASE, route("case_delete", self._delete_case))

    async def start(self) -> None:
        """Start the storage host on its own port."""
        if self._runner is not None:
            return
        app = web.Application(client_max_size=64 * MiB)
        app.router.add_post("/upload/{token}", self._form)
        app.router.add_route("*", "/elsewhere", self._elsewhere)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, self.server.host, 0)
        await site.start()
        self._runner = runner
        self._port = runner.addresses[0][1]

    async def close(self) -> None:
        """Stop the storage host."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ------------------------------------------------------------------------------ presigned batch

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    async def _batch(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        if not user:
            return web.json_response({"message": "X-Pt-Id header is required"}, status=400)
        body = await self.server._read_json(request, rec)
        entries = body.get("batch_request") if isinstance(body, dict) else None
        if not isinstance(entries, list) or not entries:
            return web.json_response(
                {"error": True, "message": "batch_request is required", "batch_response": [], "upload_time": None},
                status=400,
            )
        answers = [self._declare(user, entry) for entry in entries]
        return self.server._json(request, {"error": False, "message": "", "batch_response": answers})

    def _declare(self, user: str, entry: Any) -> dict[str, Any]:
        if self._refuse:
            code, message = self._refuse.pop(0)
            return {"error_details": {"code": code, "message": message}}
        problem = _entry_problem(entry)
        if problem is not None:
            return {"error_details": {"code": problem[0], "message": problem[1]}}
        chosen = entry.get("document_id")
        if chosen is not None:
            if not isinstance(chosen, str) or not _CHOSEN_ID.match(chosen):
                return {"error_details": {"code": "INVALID_DOCUMENT_ID", "message": "document_id is not a valid id"}}
            owners = [u for u, docs in self.server.data.documents.items() if chosen in docs]
            held = self._pending.get(chosen)
            if any(u != user for u in owners) or (held is not None and held.user != user):
                return {"error_details": {"code": "DOCUMENT_ID_IN_USE", "message": "document_id belongs to another"}}
            if owners or held is not None:
                self.redeclared += 1  # the same document declared again: its files replace the earlier ones
            self._forms = {t: f for t, f in self._forms.items() if f.document_id != chosen}
        document_id = chosen if chosen is not None else str(uuid.uuid4())
        self._pending[document_id] = _Pending(user=user, entry=entry)
        self.max_open_batches = max(self.max_open_batches, len(self._pending))
        forms = []
        for index, file in enumerate(entry["files"]):
            token = secrets.token_hex(12)
            fields = {
                "key": f"{user}/{document_id}/{index}",
                "Content-Type": file["contentType"],
                "policy": secrets.token_urlsafe(24),
                "x-amz-credential": f"FAKEKEY/{secrets.token_hex(4)}/ap-south-1/s3/aws4_request",
                "x-amz-signature": secrets.token_hex(32),
            }
            self._forms[token] = _Form(user, document_id, index, file["file_size"], file["contentType"], fields)
            forms.append({"url": f"{self.storage_url}/upload/{token}", "fields": fields})
        return {"document_id": document_id, "forms": forms}

    # ------------------------------------------------------------------------------ the storage host

    async def _form(self, request: web.Request) -> web.StreamResponse:
        server = self.server
        server._counts["storage_form"] += 1
        got = StorageRequest(path=request.path, headers=dict(request.headers))
        self.received.append(got)
        rec = RecordedRequest(
            route="storage_form", method=request.method, path=request.path, query=[], headers=got.headers
        )
        if server.record:
            server.requests.append(rec)
        response = await self._store(request, got)
        got.status = rec.status = response.status
        rec.body_size = got.file_size
        return response

    async def _store(self, request: web.Request, got: StorageRequest) -> web.StreamResponse:
        form = self._forms.get(request.match_info["token"])
        problem = await self._read_form(request, got, form)  # the whole body is read before any answer
        if self._redirect:
            location = self._redirect.pop(0) or f"{self.storage_url}/elsewhere"
            return web.Response(status=307, headers={"Location": location})
        if self._fail:
            return web.Response(status=self._fail.pop(0), text="<Error><Code>InternalError</Code></Error>")
        if form is not None and (rule := self._fail_file.get(form.index)) is not None:
            times, status = rule
            if times is not None:
                rule[0] = times - 1
                if rule[0] <= 0:
                    del self._fail_file[form.index]
            return web.Response(status=status, text="<Error><Code>InternalError</Code></Error>")
        fault = await self.server._fault("storage_form", request)
        if fault is not None:
            return fault
        if form is None:
            return web.Response(status=403, text="<Error><Code>AccessDenied</Code></Error>")
        if problem is not None:
            return web.Response(status=400, text=f"<Error><Code>{problem}</Code></Error>")
        pending = self._pending.get(form.document_id)
        if pending is not None:
            assert got.sha256 is not None
            pending.stored[form.index] = (got.file_size, got.sha256, got.ends_in_error)
            if len(pending.stored) == len(pending.entry["files"]):
                self._complete(form.document_id, pending)
        return web.Response(status=204)

    async def _read_form(self, request: web.Request, got: StorageRequest, form: _Form | None) -> str | None:
        """Read the multipart body into ``got``; the S3-like reason it is refused, or None."""
        if request.content_type != "multipart/form-data":
            await request.read()
            return "InvalidArgument"
        problem = None
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader):
                continue
            name = part.name or ""
            got.order.append(name)
            if name != "file":
                got.fields[name] = await part.text()
                continue
            got.content_type = part.headers.get("Content-Type")
            digest, size, marker = hashlib.sha256(), 0, ErrorMarker()
            while chunk := await part.read_chunk(256 * 1024):
                size += len(chunk)
                digest.update(chunk)
                marker.update(chunk)
            got.file_size, got.sha256, got.ends_in_error = size, digest.hexdigest(), marker.found
        if form is None:
            return "AccessDenied"
        if "file" not in got.order:
            problem = "MissingFile"
        elif any(name not in form.fields for name in got.order[: got.order.index("file")]) or any(
            got.fields.get(k) != v for k, v in form.fields.items()
        ):
            problem = "SignatureDoesNotMatch"  # the signed fields, exactly as issued, must come before the file
        elif got.file_size != form.size:
            problem = "EntityTooLarge" if got.file_size > form.size else "EntityTooSmall"
        elif got.content_type != form.content_type:
            problem = "InvalidContentType"
        return problem

    async def _elsewhere(self, request: web.Request) -> web.StreamResponse:
        self.followed += 1
        await request.read()
        return web.Response(status=204)

    def _complete(self, document_id: str, pending: _Pending) -> None:
        del self._pending[document_id]
        entry = pending.entry
        content_type = entry["files"][0]["contentType"]
        file_type = "PDF" if content_type == "application/pdf" else "IMG"
        ext = "pdf" if file_type == "PDF" else content_type.rsplit("/", 1)[1]
        doc: dict[str, Any] = {
            "document_id": document_id,
            "source": "presigned",
            "document_type": entry.get("dt"),
            "document_date_epoch": entry.get("dd_e"),
            "tags": _kept_tags(entry.get("tg") or []),
            "cases": list(entry.get("cases") or []),
            "title": entry.get("title"),
            "files": [
                {"asset_url": f"https://vault.fake.example/{document_id}/{i}.{ext}", "file_type": file_type}
                for i in range(len(entry["files"]))
            ],
            # a file whose content ends in b"error" ends its processing in ERROR (testing/records/_results.py)
            "upload": {
                "files": [
                    {"size": size, "sha256": sha, "ends_in_error": error}
                    for _, (size, sha, error) in sorted(pending.stored.items())
                ],
                "ends_in_error": any(error for _, _, error in pending.stored.values()),
            },
        }
        data = self.server.data
        data.documents.setdefault(pending.user, {})[document_id] = _json.dumps(doc)
        now = self._tick()
        listed = data.list_items.setdefault(pending.user, [])
        listed[:] = [item for item in listed if item.get("document_id") != document_id]  # declared again: one entry
        listed.append(
            {
                "document_id": document_id,
                "upload_date": now,
                "document_type": entry.get("dt"),
                "patient_id": pending.user,
                "metadata": {"title": entry.get("title"), "tags": doc["tags"], "document_date": entry.get("dd_e")},
            }
        )

    # ------------------------------------------------------------------------------ document PATCH / DELETE

    async def _patch_document(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        if not user:
            return web.json_response({"message": "X-Pt-Id header is required"}, status=400)
        document_id = request.match_info["id"]
        raw = self.server.data.documents.get(user, {}).get(document_id)
        if raw is None:
            return web.Response(status=404, text="No such document.")
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not any(body.get(k) is not None for k in _PATCH_FIELDS):
            return web.json_response({"message": "nothing to update"}, status=400)
        tags = body.get("tg")
        if tags is not None and (
            not isinstance(tags, list) or not all(isinstance(t, str) and 2 <= len(t) <= 20 for t in tags)
        ):
            return web.json_response({"message": "invalid tags"}, status=400)
        doc = _json.loads(raw)
        if body.get("dt") is not None:
            doc.pop("dt", None)
            doc["document_type"] = body["dt"]
        if body.get("dd_e") is not None:
            doc["document_date_epoch"] = body["dd_e"]
        if tags is not None:
            doc["tags"] = list(dict.fromkeys(tags))[:10]
        if body.get("cases") is not None:
            doc["cases"] = list(body["cases"])
        if body.get("ndhm") is not None:
            doc["ndhm"] = bool(body["ndhm"])
        documents = self.server.data.documents
        owner = body.get("oid") or user
        del documents[user][document_id]
        documents.setdefault(owner, {})[document_id] = _json.dumps(doc)
        return web.Response(status=200)  # the live service's answer: 200, empty body

    async def _delete_document(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        document_id = request.match_info["id"]
        data = self.server.data
        users = [user] if user else list(data.documents)
        for owner in users:
            if document_id in data.documents.get(owner, {}):
                del data.documents[owner][document_id]
                items = data.list_items.get(owner, [])
                items[:] = [i for i in items if i.get("document_id") != document_id]
                return web.Response(status=200)  # 200, empty body
        return web.Response(status=404, text="No such document.")

    # ------------------------------------------------------------------------------ cases

    async def _list_cases(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        if not user:
            return web.json_response({"error": "X-Pt-Id header is required", "code": "BAD_REQUEST"}, status=400)
        try:
            offset = int(request.query.get("offset", "0"))
            after = int(request.query["u_at__gt"]) if "u_at__gt" in request.query else None
        except ValueError:
            return web.json_response({"error": "bad offset or u_at__gt", "code": "BAD_REQUEST"}, status=400)
        cases = sorted(self.cases.get(user, {}).values(), key=lambda c: c["updated_at"])
        if after is not None:
            cases = [c for c in cases if c["updated_at"] > after]
        size = self.server.page_size
        payload: dict[str, Any] = {"cases": cases[offset : offset + size]}
        if offset + size < len(cases):
            payload["next_token"] = str(offset + size)
        return self.server._json(request, payload)

    async def _create_case(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        user = request.headers.get(R.PT_ID)
        if not user:
            return web.json_response({"error": "X-Pt-Id header is required", "code": "BAD_REQUEST"}, status=400)
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict):
            return web.json_response({"error": "invalid body", "code": "BAD_REQUEST"}, status=400)
        for name in ("id", "display_name", "occurred_at"):
            if body.get(name) is None:
                return web.json_response(
                    {"error": f"Missing required field: {name}", "code": "BAD_REQUEST"}, status=400
                )
        cases = self.cases.setdefault(user, {})
        if body["id"] in cases:
            return web.json_response({"error": "Case Already Exist"}, status=409)
        now = self._tick()
        item = {k: body[k] for k in ("display_name", "type", "hi_type", "partner_meta", "occurred_at") if k in body}
        item["created_at"] = now
        cases[body["id"]] = {"id": body["id"], "status": "A", "updated_at": now, "item": item}
        return self.server._json(request, {"id": body["id"]})

    def _live_case(self, request: web.Request) -> tuple[str | None, dict[str, Any] | None]:
        user = request.headers.get(R.PT_ID)
        case = self.cases.get(user or "", {}).get(request.match_info["id"])
        return user, (case if case is not None and case["status"] == "A" else None)

    async def _update_case(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        user, case = self._live_case(request)
        if not user:
            return web.json_response({"error": "X-Pt-Id header is required", "code": "BAD_REQUEST"}, status=400)
        if case is None:
            return web.json_response({"error": "Case not found for the given ID", "code": "CASE_NOT_FOUND"}, status=404)
        body = await self.server._read_json(request, rec)
        if not isinstance(body, dict) or not body:
            return web.json_response({"error": "nothing to update", "code": "BAD_REQUEST"}, status=400)
        for key in ("display_name", "type", "hi_type", "partner_meta", "occurred_at"):
            if key in body:
                case["item"][key] = body[key]
        case["updated_at"] = self._tick()
        return web.Response(status=204)

    async def _delete_case(self, request: web.Request, _rec: RecordedRequest) -> web.StreamResponse:
        user, case = self._live_case(request)
        if not user:
            return web.json_response({"error": "X-Pt-Id header is required", "code": "BAD_REQUEST"}, status=400)
        if case is None:
            return web.json_response({"error": "No case found with the given ID.", "code": "NOT_FOUND"}, status=404)
        case["status"] = "D"
        case.pop("item", None)
        case["updated_at"] = self._tick()
        return web.Response(status=204)


def _kept_tags(tags: list[Any]) -> list[Any]:
    """The tags a batch entry keeps: a set (duplicates dropped, order kept), the first 10 (records.yaml, ``tg``:
    "If more than 10 tags are provided in the request, only the first 10 tags will be considered")."""
    return list(dict.fromkeys(tags))[:10]


def _entry_problem(entry: Any) -> tuple[str, str] | None:
    """The vendor's limits on one batch entry: an ``(code, message)`` refusal, or None."""
    if not isinstance(entry, dict):
        return "INVALID_REQUEST", "a batch entry must be an object"
    files = entry.get("files")
    if not isinstance(files, list) or not 1 <= len(files) <= 10:
        return "INVALID_FILES", "an entry needs 1 to 10 files"
    types = set()
    for file in files:
        content_type = file.get("contentType") if isinstance(file, dict) else None
        size = file.get("file_size") if isinstance(file, dict) else None
        if content_type not in LIMITS:
            return "INVALID_CONTENT_TYPE", "content type not allowed"
        if not isinstance(size, int) or size <= 0:
            return "INVALID_FILE_SIZE", "file_size must be a positive int"
        if size > LIMITS[content_type]:
            return "FILE_TOO_LARGE", "file over the size limit"
        types.add(content_type)
    if len(types) > 1:
        return "MIXED_CONTENT_TYPES", "all files of a batch must have one content type"
    tags = entry.get("tg")
    if tags is not None and (
        not isinstance(tags, list)
        or not all(isinstance(t, str) for t in tags)
        or not all(2 <= len(t) <= 20 for t in _kept_tags(tags))
    ):
        return "INVALID_TAGS", "tags must be of 2 to 20 characters"
    title = entry.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > 256):
        return "INVALID_TITLE", "title must be at most 256 characters"
    return None
