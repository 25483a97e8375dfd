"""Presigned uploads (``POST /mr/api/v1/docs`` then one storage form per file), document update and delete.

The machinery behind :meth:`Documents.create`, :meth:`Documents.update`, :meth:`Documents.delete` and the size
routing of :meth:`Documents.upload`; kept apart from ``documents.py`` so that module stays a thin, readable list
of operations. Also the value checks shared with ``client.cases`` (dates, tags, ids).

The vendor's limits (``records-presigned-limits``), checked before anything is sent:

* at most :data:`MAX_FILES` (10) files a document, all of one content type;
* content types ``application/pdf``, ``image/png``, ``image/jpg``, decided by the file's first bytes (its
  "magic number"), never by its name;
* a PDF at most :data:`MAX_PDF_SIZE` (25 MiB), an image at most :data:`MAX_IMAGE_SIZE` (10 MiB);
* at most :data:`MAX_CONCURRENT_BATCHES` (5) batches of one client at a time: a sixth ``create`` waits.

A presigned form's URL and signed fields are credentials: they go only to the storage host, through
``Session.request(url=...)`` (which sends nothing of ours: no bearer token, ``client-id`` or ``X-Pt-Id``, and never
follows a redirect), and appear in no repr, error or log (logs name the route ``<storage form>`` only).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from yarl import URL

from ... import _constants as C
from ... import _routes as R
from ..._config import NOT_GIVEN, NotGiven, check_header_value, normalize_base_url, path_segment
from ..._files import FileInput, FileSource, multipart_body, read_head, sniff_content_type
from ..._retry import RetryPolicy, retry_reason
from ..._wire import structure
from ...errors import (
    ApiError,
    DocumentNotFound,
    FileTooLarge,
    HealthError,
    InvalidRequest,
    ResponseValidationError,
    UploadFailed,
)
from ...models import UploadResult
from ...models.records._cases import PresignedBatch

if TYPE_CHECKING:
    from ..._session import Session
    from .._base import Resource

__all__ = [
    "ALLOWED_CONTENT_TYPES",
    "MAX_CONCURRENT_BATCHES",
    "MAX_FILES",
    "MAX_IMAGE_SIZE",
    "MAX_PDF_SIZE",
    "chosen_id",
    "create",
    "delete",
    "epoch_seconds",
    "large_pdf",
    "prepare",
    "tags_value",
    "update",
]

MiB: Final = 1024 * 1024
#: Files one presigned document may have.
MAX_FILES: Final = 10
#: Largest PDF file a presigned upload takes (the vendor's ``pdfMaxSizeMb``).
MAX_PDF_SIZE: Final = 25 * MiB
#: Largest image file a presigned upload takes (the vendor's ``imageMaxSizeMb``).
MAX_IMAGE_SIZE: Final = 10 * MiB
#: The content types the vendor accepts, with the size limit of each.
ALLOWED_CONTENT_TYPES: Final[Mapping[str, int]] = {
    "application/pdf": MAX_PDF_SIZE,
    "image/png": MAX_IMAGE_SIZE,
    "image/jpg": MAX_IMAGE_SIZE,
}
#: Batches one client may have open at a time (the vendor's limit); ``create`` waits for a free one.
MAX_CONCURRENT_BATCHES: Final = 5
#: Files of one document posted to storage at the same time.
FORM_CONCURRENCY: Final = 4
#: What logs and the retry log call a storage form request (never its URL).
STORAGE_ROUTE: Final = "<storage form>"

MAX_TAGS: Final = 10
TAG_LENGTH: Final = (2, 20)
MAX_TITLE: Final = 256
#: A document id chosen by the caller (see :func:`chosen_id`).
_CHOSEN_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

_CODE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_batch_slots: weakref.WeakKeyDictionary[Session, asyncio.Semaphore] = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------------------------------------------- input checks


def epoch_seconds(name: str, value: dt.datetime | dt.date | int) -> int:
    """A date for the service, as whole epoch seconds.

    An aware ``datetime`` is converted exactly (fractions of a second dropped); a ``date`` is its midnight UTC
    (the service keeps document dates as instants; UTC midnight keeps the calendar day in every UTC+ zone, India
    included); an ``int`` is taken as epoch seconds already. A naive ``datetime`` is refused: its instant depends
    on the machine's time zone, and a health record's date must not move with the server it was sent from.
    """
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidRequest(f"{name} must be a timezone-aware datetime (or a date, or epoch seconds)")
        return math.floor(value.timestamp())
    if isinstance(value, dt.date):
        return int(dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp())
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidRequest(f"{name} must be a datetime, a date or epoch seconds (int)")


def tags_value(tags: Iterable[str]) -> list[str]:
    """The vendor's tag rules: a set (duplicates dropped, first order kept) of at most 10 tags of 2 to 20
    characters each. The vendor silently keeps only the first 10; refusing instead tells the caller."""
    if isinstance(tags, str | bytes):
        raise InvalidRequest("tags must be a list of strings, not one string")
    unique = list(dict.fromkeys(_tag(i, tag) for i, tag in enumerate(tags)))
    if len(unique) > MAX_TAGS:
        raise InvalidRequest(f"at most {MAX_TAGS} distinct tags are allowed, got {len(unique)}")
    return unique


def _tag(index: int, tag: object) -> str:
    low, high = TAG_LENGTH
    if not isinstance(tag, str):
        raise InvalidRequest(f"tag {index} must be a str")
    if not low <= len(tag) <= high:
        raise InvalidRequest(f"tag {index} has {len(tag)} characters: tags must have {low} to {high}")
    return tag


def ids_value(name: str, ids: Iterable[str]) -> list[str]:
    """A set of ids (case ids): each a non-empty string without control characters; duplicates dropped."""
    if isinstance(ids, str | bytes):
        raise InvalidRequest(f"{name} must be a list of ids, not one string")
    out: list[str] = []
    for i, value in enumerate(ids):
        try:
            check_header_value(f"{name}[{i}]", value)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(str(exc)) from None
        if len(value) > 256:
            raise InvalidRequest(f"{name}[{i}] must be at most 256 characters")
        out.append(value)
    return list(dict.fromkeys(out))


def code_value(name: str, value: str) -> str:
    """A short lowercase code such as a document type (``lr``)."""
    if not isinstance(value, str) or not _CODE.match(value):
        raise InvalidRequest(f"{name} must be a short lowercase code such as 'lr'")
    return value


def as_sources(files: FileInput | Sequence[FileInput]) -> list[FileSource]:
    """One :class:`FileSource` per file: ``files`` is one file (a path, bytes, a binary file object) or a
    list/tuple of them (the pages of one document). A bad file raises :class:`InvalidRequest` naming ``files``
    (``files[i]`` in a list) and the reason, never the file (:meth:`FileSource.from_input`)."""
    if isinstance(files, list | tuple):
        items: Sequence[FileInput] = files
        names = [f"files[{i}]" for i in range(len(items))]
    else:
        items = (files,)  # type: ignore[assignment]
        names = ["files"]
    if not items:
        raise InvalidRequest("create needs at least one file")
    if len(items) > MAX_FILES:
        raise InvalidRequest(f"a document may have at most {MAX_FILES} files, got {len(items)}")
    return [FileSource.from_input(item, argument=name) for item, name in zip(items, names, strict=True)]


async def prepare(sources: Sequence[FileSource]) -> str:
    """Check the vendor's limits on the files of one document; return their one content type.

    Reads the first bytes of each file to learn its type. Raises :class:`InvalidRequest` (:class:`FileTooLarge`
    for a size) naming the file's index and the rule, never its name or content.
    """
    if not sources:
        raise InvalidRequest("create needs at least one file")
    if len(sources) > MAX_FILES:
        raise InvalidRequest(f"a document may have at most {MAX_FILES} files, got {len(sources)}")
    content_type: str | None = None
    for i, source in enumerate(sources):
        if source.size == 0:
            raise InvalidRequest(f"file {i} is empty")
        if not source.rereadable:
            raise InvalidRequest(f"file {i}: a presigned upload needs a path, bytes or a seekable file object")
        sniffed = sniff_content_type(await read_head(source))
        if sniffed is None:
            raise InvalidRequest(f"file {i} is not a PDF, PNG or JPEG (judged by its content, not its name)")
        if content_type is not None and sniffed != content_type:
            raise InvalidRequest(
                f"all files of a document must have one content type: file {i} is {sniffed}, file 0 is {content_type}"
            )
        content_type = sniffed
        limit = ALLOWED_CONTENT_TYPES[sniffed]
        if source.size > limit:
            kind = "PDF" if sniffed == "application/pdf" else "image"
            raise FileTooLarge(f"file {i} is {source.size} bytes, over the {limit}-byte limit for a {kind}")
    assert content_type is not None
    return content_type


async def large_pdf(source: FileSource) -> bool:
    """True when ``source`` can take the presigned route of ``upload``: a re-readable PDF (by its bytes) of at
    most :data:`MAX_PDF_SIZE`."""
    if source.size > MAX_PDF_SIZE or not source.rereadable:
        return False
    return sniff_content_type(await read_head(source)) == "application/pdf"


# ---------------------------------------------------------------------------------------------------- create


async def create(
    resource: Resource,
    sources: Sequence[FileSource],
    *,
    document_type: str | None = None,
    title: str | None = None,
    tags: Iterable[str] | None = (),
    date: dt.datetime | dt.date | int | None = None,
    cases: Iterable[str] | None = (),
    document_id: str | None = None,
    user_id: str | NotGiven | None = NOT_GIVEN,
    retry: RetryPolicy | NotGiven = NOT_GIVEN,
    timeout: float | NotGiven | None = NOT_GIVEN,
) -> UploadResult:
    """Declare the files of one document, then post each to the storage form the service gives for it."""
    entry: dict[str, Any] = {}
    if document_id is not None:
        entry["document_id"] = chosen_id(document_id)
    if document_type is not None:
        entry["dt"] = code_value("document_type", document_type)
    if date is not None:
        entry["dd_e"] = epoch_seconds("date", date)
    tag_list = tags_value(() if tags is None else tags)
    if tag_list:
        entry["tg"] = tag_list
    if title is not None:
        if not isinstance(title, str) or len(title) > MAX_TITLE:
            raise InvalidRequest(f"title must be a str of at most {MAX_TITLE} characters")
        entry["title"] = title
    case_list = ids_value("cases", () if cases is None else cases)
    if case_list:
        entry["cases"] = case_list
    headers = {C.H_PT_ID: resource._required_user_id(user_id)}
    content_type = await prepare(sources)
    entry["files"] = [{"contentType": content_type, "file_size": s.size} for s in sources]

    session = resource._session
    slots = _batch_slots.get(session)
    if slots is None:
        slots = _batch_slots[session] = asyncio.Semaphore(MAX_CONCURRENT_BATCHES)
    async with slots:
        document_id, forms = await _declare(resource, entry, headers, len(sources), retry, timeout)
        await _post_forms(session, document_id, sources, forms, content_type, retry, timeout)
    return UploadResult(document_id=document_id, route="presigned")


async def _declare(
    resource: Resource,
    entry: dict[str, Any],
    headers: dict[str, str],
    count: int,
    retry: RetryPolicy | NotGiven,
    timeout: float | NotGiven | None,
) -> tuple[str, tuple[Any, ...]]:
    """``POST /mr/api/v1/docs`` with one batch entry: the new document's id and its forms, one per file.

    Without a chosen ``document_id`` it is not idempotent (a repeat would declare a second document): sent once,
    as uploads are (see ``_send_once``). With one, a repeat declares the same document again, so it is retried as
    any idempotent call (the library's assumption beyond the vendor's files: see :meth:`Documents.create`).
    """
    send: dict[str, Any] = {"headers": headers, "json": {"batch_request": [entry]}, "retry": retry, "timeout": timeout}
    try:
        if "document_id" in entry:
            data = await resource._session.request(
                "POST", R.PATH_DOCUMENTS, operation="presigned_batch", idempotent=True, **send
            )
        else:
            data = await resource._send_once("POST", R.PATH_DOCUMENTS, operation="presigned_batch", **send)
    except ApiError as exc:
        refused = _refusal(exc.body)
        if refused is not None:
            raise UploadFailed(f"create: the service refused the document (code {refused})", code=refused) from exc
        raise
    entries = structure(data, PresignedBatch).entries
    if len(entries) != 1:
        raise ResponseValidationError(f"create: the service answered {len(entries)} batch entries for 1 document")
    answer = entries[0]
    if answer.refused:
        code = _safe_code(answer.error_code)
        raise UploadFailed(f"create: the service refused the document (code {code})", code=code)
    if answer.document_id is None:
        raise ResponseValidationError("create: the batch answer has no document_id")
    if "document_id" in entry and answer.document_id != entry["document_id"]:
        # the service did not keep the id we chose: the upload could not be recognised later; nothing is stored yet
        raise ResponseValidationError(
            "create: the service answered another document_id than the one chosen: ids chosen by the caller are not "
            "honoured, so this upload could not be recognised later (nothing was stored; upload without document_id)"
        )
    if len(answer.forms) != count:
        raise ResponseValidationError(f"create: the service gave {len(answer.forms)} upload forms for {count} files")
    for form in answer.forms:
        try:
            normalize_base_url(form.url, name="the storage form URL")
        except ValueError:  # InvalidRequest, or anything else the URL's parsing raises: the service's fault
            # never the URL or the check's message: its query may carry the presigned signature, a credential
            raise ResponseValidationError(
                "create: the storage form URL the service gave is not usable (it must be a valid https:// URL, "
                "with a host name or IP address)"
            ) from None
    return answer.document_id, answer.forms


def chosen_id(document_id: object) -> str:
    """A document id chosen by the caller (``UpdateDocumentV3Request.document_id``), checked: 1 to 64 ASCII letters,
    digits, ``-`` and ``_`` (a UUID's text fits). Judgement call: the vendor gives no format; this one is safe in a
    path segment, a header and a log, and the ids the service itself hands out (UUIDs) fit it."""
    if not isinstance(document_id, str) or not _CHOSEN_ID.match(document_id):
        raise InvalidRequest("document_id must be 1 to 64 letters, digits, '-' or '_' (a UUID, say)")
    return document_id


def _refusal(body: Any) -> str | None:
    """The ``error_details.code`` of a 4XX batch answer that carries one (``ErrorUploadResponse``)."""
    try:
        entries = structure(body, PresignedBatch).entries
    except ResponseValidationError:
        return None
    for entry in entries:
        if entry.refused:
            return _safe_code(entry.error_code)
    return None


def _safe_code(code: str | None) -> str:
    """The service's error code, shortened and stripped of anything that is not a plain code character."""
    text = "".join(ch for ch in (code or "UNKNOWN") if ch.isalnum() or ch in "-_.:")[:64]
    return text or "UNKNOWN"


async def _post_forms(
    session: Session,
    document_id: str,
    sources: Sequence[FileSource],
    forms: Sequence[Any],
    content_type: str,
    retry: RetryPolicy | NotGiven,
    timeout: float | NotGiven | None,
) -> None:
    """Post every file to its form, :data:`FORM_CONCURRENCY` at a time; every file is tried (each with the
    client's retries) before a failure is reported, so the error names the first file that could not be stored
    and how many failed."""
    gate = asyncio.Semaphore(FORM_CONCURRENCY)

    async def one(source: FileSource, form: Any) -> None:
        async with gate:
            await post_form(session, source, form.url, form.fields, content_type, retry, timeout)

    outcomes = await asyncio.gather(*(one(s, f) for s, f in zip(sources, forms, strict=True)), return_exceptions=True)
    failed = [(i, exc) for i, exc in enumerate(outcomes) if isinstance(exc, BaseException)]
    for _, exc in failed:
        if not isinstance(exc, HealthError):
            raise exc  # a bug or a cancellation: not an upload failure
    if failed:
        index, first = failed[0]
        assert isinstance(first, HealthError)
        more = f" ({len(failed)} of {len(sources)} files failed)" if len(failed) > 1 else ""
        raise UploadFailed(
            f"create: file {index} of the document could not be stored ({retry_reason(first)}){more}; "
            "the partly stored document is .document_id",
            file_index=index,
            document_id=document_id,
        ) from first


async def post_form(
    session: Session,
    source: FileSource,
    url: str,
    fields: Mapping[str, str],
    content_type: str,
    retry: RetryPolicy | NotGiven,
    timeout: float | NotGiven | None,
) -> None:
    """Post one file to a presigned storage form: its ``fields`` first, then the file, streamed from ``source``.

    Idempotent: the form names one object key, so a repeat overwrites the same object with the same bytes; it
    is retried per the client's :class:`RetryPolicy`. Any 2XX is success (the service's storage answers 204).
    A redirect is not followed (an error); nothing of ours (token, ``client-id``, ``X-Pt-Id``) is sent.
    """
    try:
        await session.request(
            "POST",
            "",
            url=URL(url, encoded=True),  # as given: re-quoting could break a signature carried in the URL
            operation="presigned_upload",
            route=STORAGE_ROUTE,
            body=lambda: multipart_body(source, fields=fields, content_type=content_type),
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
    except ResponseValidationError:
        pass  # a 2XX whose body is not JSON (storage may answer 200/201 with XML or nothing): stored


# ---------------------------------------------------------------------------------------------------- update, delete


async def update(
    resource: Resource,
    document_id: str,
    *,
    document_type: str | None,
    date: dt.datetime | dt.date | int | None,
    tags: Iterable[str] | None,
    cases: Iterable[str] | None,
    link_abha: bool | None,
    owner: str | None,
    user_id: str | NotGiven | None,
    retry: RetryPolicy | NotGiven,
    timeout: float | NotGiven | None,
) -> None:
    """``PATCH /mr/api/v1/docs/{id}`` with the given fields only."""
    segment = path_segment("document_id", document_id)
    body: dict[str, Any] = {}
    if document_type is not None:
        body["dt"] = code_value("document_type", document_type)
    if date is not None:
        body["dd_e"] = epoch_seconds("date", date)
    if tags is not None:
        body["tg"] = tags_value(tags)
    if cases is not None:
        body["cases"] = ids_value("cases", cases)
    if link_abha is not None:
        if not isinstance(link_abha, bool):
            raise InvalidRequest("link_abha must be True or False")
        body["ndhm"] = link_abha
    if owner is not None:
        try:
            body["oid"] = check_header_value("owner", owner)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(str(exc)) from None
    if not body:
        raise InvalidRequest("update needs at least one of document_type, date, tags, cases, link_abha, owner")
    headers = {C.H_PT_ID: resource._required_user_id(user_id)}
    try:
        await resource._session.request(
            "PATCH",
            f"/mr/api/v1/docs/{segment}",
            route=R.PATH_DOCUMENT,
            operation="update",
            headers=headers,
            json=body,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
    except ResponseValidationError:
        # The service answers a successful PATCH with 200 and an empty body (the session reads that as None). Any
        # 2XX is success: the body is not used, so a body that does not parse cannot make a done update "fail".
        pass


async def delete(
    resource: Resource,
    document_id: str,
    *,
    missing_ok: bool,
    user_id: str | NotGiven | None,
    retry: RetryPolicy | NotGiven,
    timeout: float | NotGiven | None,
) -> None:
    """``DELETE /mr/api/v1/docs/{id}``."""
    segment = path_segment("document_id", document_id)
    user = resource._user_id(user_id)
    headers = {C.H_PT_ID: user} if user is not None else {}
    try:
        await resource._session.request(
            "DELETE",
            f"/mr/api/v1/docs/{segment}",
            route=R.PATH_DOCUMENT,
            operation="delete",
            headers=headers,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
    except DocumentNotFound:
        if not missing_ok:
            raise
    except ResponseValidationError:
        pass  # a 2XX with a body that is not JSON: deleted (the body is not used)
