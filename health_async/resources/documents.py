"""``client.documents``: describe, list and upload medical record documents, one at a time or in bulk."""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable

from .. import _constants as C
from .._bulk import ProgressCallback, run_pool
from .._config import NOT_GIVEN, NotGiven, path_segment
from .._convert import structure, structure_document
from .._files import FileInput, FileSource, StreamBody, multipart_body
from .._retry import RetryPolicy
from ..errors import FileTooLarge, HealthError, InvalidRequest
from ..models import DescribeResult, Document, DocumentListItem, DocumentPage, UploadOutcome, UploadResult
from ._base import Resource

__all__ = ["KNOWN_TASKS", "Documents"]

#: Upload tasks the live service knows: smart report parsing ("SRP"), PII extraction, classification.
KNOWN_TASKS = frozenset({"smart", "pii", "classification"})
_TASK = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


class Documents(Resource):
    """Medical record documents (``/mr/api``)."""

    async def describe(
        self,
        document_id: str,
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> Document:
        """``GET /mr/api/v1/docs/{id}``: a document's metadata, smart report and file links.

        ``user_id`` is the OID sent as ``X-Pt-Id`` (required by the service); it defaults to the client's.

        Raises:
            DocumentNotFound: no such document for that user.
            ValueError: ``document_id`` is not a single path segment, or there is no user id.
        """
        return await self._describe(document_id, {C.H_PT_ID: self._required_user_id(user_id)}, retry, timeout)

    async def _describe(
        self,
        document_id: str,
        headers: dict[str, str],
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> Document:
        # describe() once its user header is checked; describe_many checks that header once for the whole batch.
        segment = path_segment("document_id", document_id)
        data = await self._session.request(
            "GET",
            f"/mr/api/v1/docs/{segment}",
            route=C.PATH_DOCUMENT,
            operation="describe",
            headers=headers,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return structure_document(data, document_id)

    async def upload(
        self,
        file: FileInput,
        *,
        tasks: Iterable[str] = ("smart",),
        document_type: str | None = None,
        batch: bool | None = None,
        filename: str | None = None,
        user_id: str | NotGiven | None = NOT_GIVEN,
        encrypt: bool | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> UploadResult:
        """``POST /mr/api/v2/docs``: upload one document (a path, bytes, or a binary file object).

        ``tasks`` fills the repeatable ``task`` query parameter the service requires (``"smart"``, ``"pii"``,
        ``"classification"``); it defaults to ``("smart",)``, smart report parsing. ``document_type`` is sent
        as ``dt`` (e.g. ``"lr"`` for a lab report), ``batch`` as ``batch=true``.

        The plain form streams the file as ``multipart/form-data`` without reading it whole into memory. With
        ``encrypt`` (default: the client's setting) the body is a JWE envelope of ``{"file": <base64>}``,
        also produced chunk by chunk while it is sent.

        Not idempotent (a repeat can create a duplicate document): retried only when the request cannot have
        reached the server (see :class:`RetryPolicy`).

        Raises:
            FileTooLarge: the file is over the client's ``max_upload_size`` (10 MB by default); nothing is sent.
            FileNotFoundError, PermissionError, TypeError, ValueError: bad input; nothing is sent.
        """
        params = _task_params(tasks)
        if document_type is not None:
            params.append(("dt", _query_value("document_type", document_type)))
        if batch is not None:
            params.append(("batch", "true" if batch else "false"))
        source = FileSource.from_input(file, filename=filename)
        client = self._client
        if source.size > client.max_upload_size:
            raise FileTooLarge(f"the file is {source.size} bytes, over the {client.max_upload_size}-byte upload limit")
        if source.size == 0:
            raise InvalidRequest("the upload file is empty")
        if not source.rereadable:
            retry = RetryPolicy.never()
        do_encrypt = client.encrypt if encrypt is None else encrypt
        if do_encrypt and client._session.config.encryption_key is None:
            raise InvalidRequest("encrypt=True needs an encryption_key on the HealthClient")
        headers: dict[str, str] = {}
        user = self._user_id(user_id)
        if user is not None:
            headers[C.H_PT_ID] = user
        data = await self._session.request(
            "POST",
            C.PATH_UPLOAD,
            operation="upload",
            params=params,
            headers=headers,
            body=(lambda: self._encrypted_body(source)) if do_encrypt else (lambda: multipart_body(source)),
            idempotent=False,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, UploadResult)

    async def pages(
        self,
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        updated_after: int | None = None,
        start_token: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[DocumentPage]:
        """``GET /mr/api/v1/docs`` page by page, following ``next_token`` lazily (a page is fetched when asked for).

        ``updated_after`` (epoch seconds) is sent as ``u_at__gt`` for incremental sync; ``start_token`` resumes
        from a ``next_token`` saved earlier. Sends ``Accept: application/json`` as the service requires.
        """
        headers = {C.H_PT_ID: self._required_user_id(user_id)}
        token = start_token
        while True:
            params: list[tuple[str, str]] = []
            if token:
                params.append(("offset", token))
            if updated_after is not None:
                if not isinstance(updated_after, int) or isinstance(updated_after, bool) or updated_after < 0:
                    raise InvalidRequest("updated_after must be a non-negative int (epoch seconds)")
                params.append(("u_at__gt", str(updated_after)))
            data = await self._session.request(
                "GET",
                C.PATH_DOCUMENTS,
                operation="list",
                params=params,
                headers=headers,
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
            page = structure(data, DocumentPage)
            yield page
            if page.next_token is None or page.next_token == token:
                return
            token = page.next_token

    async def list(
        self,
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        updated_after: int | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[DocumentListItem]:
        """Every document of a user, as an async iterator over :class:`DocumentListItem` (pages fetched lazily).

        Feed it straight into :meth:`describe_many` to describe them all::

            async for r in client.documents.describe_many(client.documents.list()):
                ...
        """
        async for page in self.pages(user_id=user_id, updated_after=updated_after, retry=retry, timeout=timeout):
            for item in page.items:
                yield item

    def describe_many(
        self,
        ids: Iterable[str | DocumentListItem] | AsyncIterable[str | DocumentListItem],
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        concurrency: int = 32,
        ordered: bool = False,
        progress: ProgressCallback | None = None,
        total: int | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[DescribeResult]:
        """Describe many documents, ``concurrency`` at a time; yield a :class:`DescribeResult` per id.

        ``ids`` may be any iterable or async iterable of ids (or of :class:`DocumentListItem`, so the output of
        :meth:`list` pipes straight in), including an unbounded generator: it is read lazily by a fixed pool
        of workers and memory stays O(concurrency). Results come as they complete; ``ordered=True`` yields
        them in input order (a slow id then holds back at most ``2 * concurrency`` finished ones).

        One failing id never stops the batch: its :class:`~health_async.errors.HealthError` is in its result,
        after the retries the client's :class:`RetryPolicy` allows. Every call shares the client's limits
        (``max_connections``, ``rate_limit`` and the pause after a 429/503 with ``Retry-After``).

        ``progress(done, failed, total)`` is called after each result; ``total`` is ``len(ids)`` when known.
        Leaving the loop early cancels the workers; use ``contextlib.aclosing`` to have that happen at once.
        Arguments are checked when this is called (a missing user id raises at once); no request is sent
        before the iteration starts.
        """
        headers = {C.H_PT_ID: self._required_user_id(user_id)}  # one dict for the batch: never mutated

        def id_of(item: str | DocumentListItem) -> str:
            return item.document_id if isinstance(item, DocumentListItem) else item

        async def call(item: str | DocumentListItem) -> Document:
            return await self._describe(id_of(item), headers, retry, timeout)

        def wrap(item: str | DocumentListItem, doc: Document | None, error: HealthError | None) -> DescribeResult:
            return DescribeResult(document_id=str(id_of(item)), document=doc, error=error)

        return run_pool(
            self._session, ids, call, wrap, concurrency=concurrency, ordered=ordered, progress=progress, total=total
        )

    def upload_many(
        self,
        files: Iterable[FileInput] | AsyncIterable[FileInput],
        *,
        concurrency: int = 8,
        ordered: bool = False,
        tasks: Iterable[str] = ("smart",),
        document_type: str | None = None,
        user_id: str | NotGiven | None = NOT_GIVEN,
        encrypt: bool | None = None,
        progress: ProgressCallback | None = None,
        total: int | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[UploadOutcome]:
        """Upload many files, ``concurrency`` at a time; yield an :class:`UploadOutcome` per file.

        Works like :meth:`describe_many` (lazy input, bounded memory, errors in results, shared limits). Each
        file is streamed from disk; a missing, unreadable, empty or too large file fails alone with
        :class:`~health_async.errors.InvalidRequest` (or its subclass ``FileTooLarge``). Uploads are not
        idempotent, so they are retried only as :meth:`upload` is.
        """
        tasks = tuple(tasks) if not isinstance(tasks, str) else (tasks,)
        _task_params(tasks)  # bad tasks fail the whole call, before anything is read or sent
        if document_type is not None:
            _query_value("document_type", document_type)

        async def call(file: FileInput) -> UploadResult:
            return await self.upload(
                file,
                tasks=tasks,
                document_type=document_type,
                user_id=user_id,
                encrypt=encrypt,
                retry=retry,
                timeout=timeout,
            )

        def wrap(file: FileInput, result: UploadResult | None, error: HealthError | None) -> UploadOutcome:
            return UploadOutcome(source=file, result=result, error=error)

        return run_pool(
            self._session, files, call, wrap, concurrency=concurrency, ordered=ordered, progress=progress, total=total
        )

    def _encrypted_body(self, source: FileSource) -> StreamBody:
        from .._jwe_stream import encrypted_upload_body

        config = self._session.config
        assert config.encryption_key is not None
        size, factory = encrypted_upload_body(source, config.encryption_key, kid=config.key_id)
        return StreamBody(size=size, content_type="application/json", factory=factory, headers={C.H_ENCRYPTION: "JWE"})

    def _required_user_id(self, user_id: str | NotGiven | None) -> str:
        user = self._user_id(user_id)
        if user is None:
            raise InvalidRequest("this call needs a user id (X-Pt-Id): pass user_id= here or to HealthClient")
        return user


def _task_params(tasks: Iterable[str]) -> list[tuple[str, str]]:
    if isinstance(tasks, str):
        tasks = (tasks,)
    params = [("task", _task(t)) for t in dict.fromkeys(tasks)]
    if not params:
        raise InvalidRequest(f"upload needs at least one task, e.g. tasks=['smart'] (known: {sorted(KNOWN_TASKS)})")
    return params


def _task(task: str) -> str:
    if not isinstance(task, str) or not _TASK.match(task):
        raise InvalidRequest(f"invalid upload task {task!r}: known tasks are {sorted(KNOWN_TASKS)}")
    return task


def _query_value(name: str, value: str) -> str:
    if not isinstance(value, str) or not _TASK.match(value):
        raise InvalidRequest(f"{name} must be a short lowercase code such as 'lr'")
    return value
