"""``client.documents``: describe, list and upload medical record documents, one at a time or in bulk."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import attrs

from ... import _constants as C
from ... import _routes as R
from ..._bulk import BulkStream, ProgressCallback, known_length, run_pool
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, path_segment
from ..._files import FileInput, FileSource, StreamBody, multipart_body
from ..._items import outcome_unknown
from ..._retry import RetryPolicy
from ..._routes import PATH_RESULT
from ..._wire import structure
from ...errors import DocumentNotFound, FileTooLarge, HealthError, InvalidRequest, OutcomeUnknown
from ...models import (
    DescribeResult,
    Document,
    DocumentListItem,
    DocumentPage,
    ProcessingResult,
    UploadOutcome,
    UploadResult,
)
from ...models.records._documents import document_from_bytes, structure_document, with_document_id
from .._base import Resource
from . import _presigned
from ._polling import DEFAULT_WAIT_TIMEOUT, PollPolicy, check_timeout, poll_until_final, wait_stage

__all__ = ["KNOWN_TASKS", "Documents", "task_params"]

#: Upload tasks the live service knows: smart report parsing ("SRP"), PII extraction, classification.
KNOWN_TASKS = frozenset({"smart", "pii", "classification"})
_TASK = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


class Documents(Resource):
    """Medical record documents (``/mr/api``)."""

    @checked
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
        headers = {C.H_PT_ID: self._required_user_id(user_id)}
        data = await self._describe_call(document_id, headers, retry, timeout, document_from_bytes)
        return _as_document(data, document_id)

    def _describe_call(
        self,
        document_id: str,
        headers: dict[str, str],
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
        decode: Callable[[bytes], Any],
    ) -> Awaitable[Any]:
        """The describe request, a 200's body given to ``decode`` (a plain def handing out the session's coroutine:
        no coroutine of its own). ``describe`` and ``describe_many`` (which checks the user header once for the
        whole batch) both send it."""
        segment = path_segment("document_id", document_id)
        return self._session.request(
            "GET",
            f"/mr/api/v1/docs/{segment}",
            route=R.PATH_DOCUMENT,
            operation="describe",
            headers=headers,
            idempotent=True,
            retry=retry,
            timeout=timeout,
            decode=decode,
        )

    @checked
    async def result(
        self,
        document_id: str,
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> ProcessingResult:
        """``GET /mr/api/v1/docs/{id}/result``: how far the document's processing is, and what it extracted.

        One look, no waiting (see :meth:`wait_for_result`). ``result.status`` is a :class:`ProcessingStatus`
        (``UNKNOWN`` for a value this version does not know); ``result.tests`` are the extracted lab tests once
        ``COMPLETED``; ``result.fhir`` the FHIR bundle. ``user_id`` (``X-Pt-Id``) defaults to the client's.

        Raises:
            DocumentNotFound: no such document for that user (404).
            InvalidRequest: ``document_id`` is not a single path segment, or there is no user id.
        """
        headers = {C.H_PT_ID: self._required_user_id(user_id)}
        return await self._result(document_id, headers, retry, timeout)

    async def _result(
        self,
        document_id: str,
        headers: dict[str, str],
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> ProcessingResult:
        segment = path_segment("document_id", document_id)
        data = await self._session.request(
            "GET",
            f"/mr/api/v1/docs/{segment}/result",
            route=PATH_RESULT,
            operation="result",
            headers=headers,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, ProcessingResult, document_id=document_id)

    @checked
    async def wait_for_result(
        self,
        document_id: str,
        *,
        timeout: float | None = DEFAULT_WAIT_TIMEOUT,
        user_id: str | NotGiven | None = NOT_GIVEN,
        first_poll: float | None = None,
        max_poll: float | None = None,
        poll: PollPolicy | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
    ) -> ProcessingResult:
        """Poll :meth:`result` until processing is final; return the ``COMPLETED`` result.

        Parsing takes the service 1-2 minutes up to 10 pages, 2-4 beyond. The first poll comes after about
        ``first_poll`` seconds (1), the delays then double up to ``max_poll`` (30), each spread by jitter; or pass
        a whole :class:`PollPolicy` as ``poll``. A 10-minute wait polls at most about 30 times. Polls share the
        client's limits and pause, and a ``Retry-After`` lengthens the next delay; a rate limit, a server error
        or a transport failure that outlasts the client's retries does not end the wait (see
        :mod:`health_async.resources.records._polling`). ``timeout`` is the deadline in seconds (``None``: none); the
        wait never outlives it, and each poll's own timeout is cut to the time left. Cancelling the wait
        leaves nothing running.

        Raises:
            ProcessingFailed: the status is ``ERROR``; ``.errors`` has the service's entries.
            DocumentNotFound: the document was deleted (status ``DELETED``) or does not exist (404).
            ProcessingTimeout: not final by the deadline (also a ``TimeoutError``); ``.last_status`` says where
                it was.
            InvalidRequest: a bad id, no user id, or a bad ``timeout``/poll setting; nothing is sent.
        """
        headers = {C.H_PT_ID: self._required_user_id(user_id)}
        path_segment("document_id", document_id)
        policy = PollPolicy.of(poll, first_poll=first_poll, max_poll=max_poll)
        deadline = check_timeout(timeout)

        def fetch(budget: float | None) -> Awaitable[ProcessingResult]:
            return self._result(document_id, headers, retry, budget)

        return await poll_until_final(
            fetch, document_id, timeout=deadline, policy=policy, request_timeout=self._session.config.timeout
        )

    @checked
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
        wait: bool = False,
        wait_timeout: float | None = DEFAULT_WAIT_TIMEOUT,
        poll: PollPolicy | None = None,
    ) -> UploadResult:
        """``POST /mr/api/v2/docs``: upload one document (a path, bytes, or a binary file object).

        With ``wait=True`` it then waits for the document's processing (:meth:`wait_for_result`, deadline
        ``wait_timeout`` seconds, schedule ``poll``) and returns the :class:`UploadResult` with
        :attr:`~UploadResult.processing` set. Waiting needs a user id (checked before anything is sent); if
        processing fails or times out, :class:`~health_async.errors.ProcessingFailed` /
        :class:`~health_async.errors.ProcessingTimeout` carry the new document's id.

        ``tasks`` fills the repeatable ``task`` query parameter the service requires (``"smart"``, ``"pii"``,
        ``"classification"``); it defaults to ``("smart",)``, smart report parsing. ``document_type`` is sent
        as ``dt`` (e.g. ``"lr"`` for a lab report), ``batch`` as ``batch=true``.

        The plain form streams the file as ``multipart/form-data`` without reading it whole into memory. With
        ``encrypt`` (default: the client's setting) the body is a JWE envelope of ``{"file": <base64>}``,
        also produced chunk by chunk while it is sent.

        Not idempotent (a repeat can create a duplicate document): retried only when the request cannot have
        reached the server (see :class:`RetryPolicy`).

        **Size routing.** Up to the client's ``max_upload_size`` (10 MiB by default) the file goes this direct
        route, which runs the ``tasks``. A larger file that is a PDF (judged by its bytes) of at most 25 MiB goes
        through :meth:`create` instead (presigned storage: the ``tasks`` are not run there, ``batch`` does not
        apply); the result's :attr:`~UploadResult.route` says which route it took (``"direct"``/``"presigned"``).
        With encryption on, a large file is refused rather than sent the presigned way, which has no JWE layer.

        Raises:
            FileTooLarge: over ``max_upload_size`` and not a PDF of up to 25 MiB (or encryption is on); nothing
                is sent.
            UploadFailed: (presigned route) the service refused the document, or the file could not be stored.
            InvalidRequest: bad input, nothing sent: ``file`` does not exist, is a directory or not a regular file,
                is not readable (permissions included), is a path too long or holding a NUL, is a closed, write-only
                or non-seekable file object, or is empty; its name or ``filename`` is not valid UTF-8; a bad task,
                ``document_type`` or ``encrypt`` without a key. The message names the argument and the reason,
                never the path or file name. :class:`~health_async.errors.InvalidArgumentType` (also a
                ``TypeError``) for an unsupported type of ``file`` or ``filename``.
        """
        if wait:
            wait_user = self._required_user_id(user_id)
            wait_deadline, wait_policy = check_timeout(wait_timeout), PollPolicy.of(poll)
            uploaded = await self.upload(
                file,
                tasks=tasks,
                document_type=document_type,
                batch=batch,
                filename=filename,
                user_id=user_id,
                encrypt=encrypt,
                retry=retry,
                timeout=timeout,
            )
            processing = await self.wait_for_result(
                uploaded.document_id, timeout=wait_deadline, user_id=wait_user, poll=wait_policy
            )
            return attrs.evolve(uploaded, processing=processing)
        params = task_params(tasks)
        if document_type is not None:
            params.append(("dt", _query_value("document_type", document_type)))
        if batch is not None:
            params.append(("batch", "true" if batch else "false"))
        source = FileSource.from_input(file, filename=filename)
        client = self._client
        if source.size > client.max_upload_size:
            # Above the direct route's limit, a PDF (by its bytes) of up to 25 MiB goes the presigned way.
            if not (client.encrypt if encrypt is None else encrypt) and await _presigned.large_pdf(source):
                return await _presigned.create(
                    self, [source], document_type=document_type, user_id=user_id, retry=retry, timeout=timeout
                )
            raise FileTooLarge(
                f"the file is {source.size} bytes, over the {client.max_upload_size}-byte direct upload limit; "
                f"only a PDF of up to {_presigned.MAX_PDF_SIZE} bytes, sent without encrypt, can go the presigned way"
            )
        if source.size == 0:
            raise InvalidRequest("the upload file is empty")
        if not source.rereadable:
            retry = RetryPolicy.never()
        do_encrypt = client.encrypt if encrypt is None else encrypt
        if do_encrypt:
            client._session.check_encryption()
        headers: dict[str, str] = {}
        user = self._user_id(user_id)
        if user is not None:
            headers[C.H_PT_ID] = user
        data = await self._session.request(
            "POST",
            R.PATH_UPLOAD,
            operation="upload",
            params=params,
            headers=headers,
            body=(lambda: self._encrypted_body(source)) if do_encrypt else (lambda: multipart_body(source)),
            idempotent=False,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, UploadResult)

    @checked
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
        async for page in self._token_pages(
            R.PATH_DOCUMENTS,
            operation="list",
            parse=lambda data: structure(data, DocumentPage),
            user_id=user_id,
            updated_after=updated_after,
            start_token=start_token,
            retry=retry,
            timeout=timeout,
        ):
            yield page

    @checked
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

    @checked
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
    ) -> BulkStream[DescribeResult]:
        """Describe many documents, ``concurrency`` at a time; yield a :class:`DescribeResult` per id.

        ``ids`` may be any iterable or async iterable of ids (or of :class:`DocumentListItem`, so the output of
        :meth:`list` pipes straight in), including an unbounded generator: it is read lazily by a fixed pool
        of workers and memory stays O(concurrency). Results come as they complete; ``ordered=True`` yields
        them in input order (a slow id then holds back at most ``2 * concurrency`` finished ones).

        One failing id never stops the batch: its :class:`~health_async.errors.HealthError` is in its result,
        after the retries the client's :class:`RetryPolicy` allows. Every call shares the client's limits
        (``max_connections``, ``rate_limit`` and the pause after a 429/503 with ``Retry-After``).

        ``progress(done, failed, total)`` is called as each result is handed out (with ``ordered=True``, in input
        order); ``total`` is ``len(ids)`` when known. Each document is decoded as it is handed out, from the bytes
        its worker kept, so it is built, read and freed while in the CPU's cache.
        Leaving the loop early cancels the workers; ``async with`` the returned :class:`BulkStream` (or
        ``contextlib.aclosing``) to have that happen at once. Arguments are checked when this is called (a missing
        user id, a closed client, a single ``str`` instead of many ids raise at once); no request is sent before the
        iteration starts. ``concurrency`` is capped by ``max_connections`` and the input's length when known.
        """
        headers = {C.H_PT_ID: self._required_user_id(user_id)}  # one dict for the batch: never mutated

        # The workers keep a 200's bytes as they are (decode=memoryview): the consumer decodes each as it takes it
        # (wrap runs there), so a document is built, read and freed while it is in the CPU's cache.
        def call(item: str | DocumentListItem) -> Awaitable[Any]:
            return self._describe_call(item if type(item) is str else _id_of(item), headers, retry, timeout, memoryview)

        def wrap(item: str | DocumentListItem, body: Any, error: HealthError | None) -> Any:
            document_id = item if type(item) is str else str(_id_of(item))
            if error is not None:
                return DescribeResult(document_id, None, error)  # positional: measurably cheaper per id
            doc = document_from_bytes(body) if type(body) is memoryview else None
            if doc is None:  # not for the fast decode: the general way, a coroutine the pool awaits
                return self._described_slowly(document_id, body)
            return DescribeResult(document_id, with_document_id(doc, document_id), None)

        return run_pool(
            self._session,
            ids,
            call,
            wrap,
            name="describe_many",
            concurrency=concurrency,
            ordered=ordered,
            progress=progress,
            total=total,
            what="ids",
        )

    async def _described_slowly(self, document_id: str, body: Any) -> DescribeResult:
        """describe_many's result for a body the fast decode did not take: read the general way (JSON, decrypted
        when an envelope) and converted by the tolerant rules; what does not fit is that id's error."""
        try:
            data = await self._session.read_json("describe", body) if type(body) is memoryview else body
            return DescribeResult(document_id, _as_document(data, document_id), None)
        except HealthError as exc:
            return DescribeResult(document_id, None, exc)

    @checked
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
        wait: bool = False,
        wait_timeout: float | None = DEFAULT_WAIT_TIMEOUT,
        poll: PollPolicy | None = None,
        wait_concurrency: int = 1000,
        upload_progress: ProgressCallback | None = None,
        reconcilable: bool = False,
    ) -> BulkStream[UploadOutcome]:
        """Upload many files, ``concurrency`` at a time; yield an :class:`UploadOutcome` per file.

        With ``wait=True`` each uploaded file's processing is then waited for (as :meth:`wait_for_result`, with
        ``wait_timeout`` and ``poll``), up to ``wait_concurrency`` waits at a time: a wait mostly sleeps, so many
        more run than uploads, and the uploads go on while earlier files are processed. Each outcome then has
        ``result`` (the document id), ``processing`` (the ``COMPLETED`` result) and ``error`` (an upload error, or
        ``ProcessingFailed``/``ProcessingTimeout``/... beside the ``result``). ``progress`` then counts finished
        outcomes, ``upload_progress`` (called as each upload ends, with or without ``wait``) counts uploads.
        Waiting needs a user id (checked at once).

        Works like :meth:`describe_many` (lazy input, bounded memory, errors in results, shared limits). Each
        file is streamed from disk; a missing, unreadable, empty or too large file fails alone with
        :class:`~health_async.errors.InvalidRequest` (or its subclass ``FileTooLarge``). Uploads are not
        idempotent, so they are retried only as :meth:`upload` is.

        ``reconcilable=True`` sends each file through presigned storage (:meth:`create`) under a document id chosen
        for it (a fresh UUID), so that an upload whose outcome is unknown is settled before it is reported: the
        document is looked for (``describe``): found, the outcome is a success; not stored, it is created again
        under the same id (never a second document: see :meth:`create` for what this assumes of the service). Only
        when that question cannot be answered is the outcome :class:`~health_async.errors.OutcomeUnknown`, its
        message naming the document id to look for. The processing ``tasks`` do not run on that route (give none,
        and no ``wait``), nor does ``encrypt``.

        Leaving the loop early (``break``, an exception, cancellation) never abandons an upload that may have
        reached the service: the uploads already running are let finish when the stream is closed, and their
        outcomes are in the stream's :attr:`~health_async.BulkStream.left_behind` list (a WARNING log gives their
        count)::

            async with client.documents.upload_many(paths) as stream:
                async for outcome in stream:
                    if not outcome.ok:
                        break
            for outcome in stream.left_behind:  # finished after the break: record them too
                ...
        """
        tasks = tuple(tasks) if not isinstance(tasks, str) else (tasks,)
        task_params(tasks)  # bad tasks fail the whole call, before anything is read or sent
        if document_type is not None:
            _query_value("document_type", document_type)

        async def call(file: FileInput) -> UploadResult:
            if reconcilable:
                return await self._reconciled_create(file, document_type, user_id, retry, timeout)
            return await self.upload(
                file,
                tasks=tasks,
                document_type=document_type,
                user_id=user_id,
                encrypt=encrypt,
                retry=retry,
                timeout=timeout,
            )

        if reconcilable and (wait or encrypt or tasks != ("smart",)):
            raise InvalidRequest(
                "reconcilable uploads go through presigned storage, where neither the processing tasks nor "
                "encryption apply: give no tasks, no wait and no encrypt"
            )

        def wrap(file: FileInput, result: UploadResult | None, error: HealthError | None) -> UploadOutcome:
            return UploadOutcome(source=file, result=result, error=error)

        if wait:
            wait_user = self._required_user_id(user_id)
            wait_deadline, wait_policy = check_timeout(wait_timeout), PollPolicy.of(poll)
            if not isinstance(wait_concurrency, int) or isinstance(wait_concurrency, bool) or wait_concurrency < 1:
                raise InvalidRequest("wait_concurrency must be a positive int")
        uploads = run_pool(
            self._session,
            files,
            call,
            wrap,
            name="upload_many",
            concurrency=concurrency,
            ordered=ordered,
            progress=upload_progress if wait else _both(progress, upload_progress),
            total=total,
            drain=True,
            what="files",
        )
        if not wait:
            return uploads

        async def wait_one(document_id: str) -> ProcessingResult:
            return await self.wait_for_result(document_id, timeout=wait_deadline, user_id=wait_user, poll=wait_policy)

        return wait_stage(
            self._session,
            uploads,
            wait_one,
            limit=wait_concurrency,
            ordered=ordered,
            progress=progress,
            total=known_length(files) if total is None else total,
        )

    async def _reconciled_create(
        self,
        file: FileInput,
        document_type: str | None,
        user_id: str | NotGiven | None,
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> UploadResult:
        """:meth:`create` under a fresh id of ours; an unknown outcome is settled by asking (see ``upload_many``)."""
        document_id = str(uuid.uuid4())

        async def create() -> UploadResult:
            return await self.create(
                file, document_type=document_type, document_id=document_id, user_id=user_id, retry=retry,
                timeout=timeout,
            )  # fmt: skip

        try:
            return await create()
        except HealthError as exc:
            if not outcome_unknown(exc):
                raise
            first = exc
        try:
            await self.describe(document_id, user_id=user_id, retry=retry, timeout=timeout)
        except DocumentNotFound:
            return await create()  # never stored: the same id again declares the same document
        except HealthError:
            raise OutcomeUnknown(
                f"upload: the outcome is unknown and could not be checked: look for document {document_id}",
                operation="upload",
            ) from first
        return UploadResult(document_id=document_id, route="presigned")

    @checked
    async def create(
        self,
        files: FileInput | Sequence[FileInput],
        *,
        document_type: str | None = None,
        title: str | None = None,
        tags: Iterable[str] = (),
        date: dt.datetime | dt.date | int | None = None,
        cases: Iterable[str] = (),
        document_id: str | None = None,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> UploadResult:
        """Upload one document of one or more files through presigned storage (for large or multi-page records).

        ``files`` is one file (a path, bytes, a seekable binary file object) or a list of up to 10 (the pages of
        one document). First ``POST /mr/api/v1/docs`` declares the document (``dt``, ``dd_e``, ``tg``, ``title``,
        ``cases``) and each file's content type and exact size; the service answers with a storage form per file.
        Then each file is posted to its form (the form's signed fields first, then the file, streamed from disk:
        memory stays at one chunk however large the file). Returns the new document's id with ``route ==
        "presigned"``. The upload ``tasks`` of :meth:`upload` do not run on this route.

        The vendor's limits are checked before anything is sent: at most 10 files, all of one content type,
        ``application/pdf``, ``image/png`` or ``image/jpg`` *judged by the bytes* (a ``.pdf`` holding a PNG is a
        PNG), a PDF at most 25 MiB, an image at most 10 MiB; tags as in :meth:`update`; a title of at most 256
        characters. ``date`` is an aware ``datetime``, a ``date`` (midnight UTC) or epoch seconds. At most 5
        ``create`` calls of one client run at a time (the vendor's batch limit); more wait.

        The declaring POST is not idempotent (a repeat declares another document): it is retried only when it
        cannot have reached the service.

        **An upload that can be recognised later**: ``document_id`` (1 to 64 letters, digits, ``-``, ``_``; e.g.
        ``str(uuid.uuid4())``) names the new document yourself (``UpdateDocumentV3Request.document_id`` of
        records.yaml). Then an upload whose outcome is unknown is settled by asking: ``describe(document_id)``
        finds it (done) or raises :class:`~health_async.DocumentNotFound` (not stored: ``create`` it again with
        the same id). The vendor's files promise only that the field is "the unique identifier for the
        document"; this library assumes, beyond them, that an entry naming a document already declared declares
        that document again (its files replace the earlier ones) rather than a second one, so the declaring POST
        is then retried as any idempotent call. The fake server behaves so. A service that answers another id
        than the chosen one raises :class:`~health_async.errors.ResponseValidationError` before any file is
        stored. A storage form post is idempotent (same object, same bytes) and is
        retried per the client's :class:`RetryPolicy`. The storage host gets nothing of ours (no bearer token,
        ``client-id`` or ``X-Pt-Id``), and a redirect from it is never followed. Its URL and signed fields are
        credentials: they appear in no repr, error or log.

        Raises:
            InvalidRequest: a limit or value rule broken (the message names the file index and the rule);
                :class:`FileTooLarge` for a size; no user id; a file that cannot be used (``files``/``files[i]``
                does not exist, is a directory or not a regular file, is not readable, is a path too long or holding
                a NUL, is a closed or write-only file object, or has a name that is not valid UTF-8: the message
                names the argument and the reason, never the path or file name;
                :class:`~health_async.errors.InvalidArgumentType`, also a ``TypeError``, for an unsupported type).
                Nothing is sent.
            UploadFailed: the service refused the document (``code`` from its ``error_details``), or a file could
                not be stored after the retries (``file_index`` says which; the document id is in the message).
            OutcomeUnknown: the declaring POST failed in a way that leaves unknown whether the document exists.
        """
        sources = _presigned.as_sources(files)
        return await _presigned.create(
            self,
            sources,
            document_type=document_type,
            title=title,
            tags=tags,
            date=date,
            cases=cases,
            document_id=document_id,
            user_id=user_id,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def update(
        self,
        document_id: str,
        *,
        document_type: str | None = None,
        date: dt.datetime | dt.date | int | None = None,
        tags: Iterable[str] | None = None,
        cases: Iterable[str] | None = None,
        link_abha: bool | None = None,
        owner: str | None = None,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``PATCH /mr/api/v1/docs/{id}``: change a document's details; only the fields given are sent.

        ``document_type`` is sent as ``dt``; ``date`` as ``dd_e`` in epoch seconds (an aware ``datetime``, a
        ``date`` taken at midnight UTC, or an int); ``tags`` as ``tg``, replacing the document's tags (``[]``
        clears them): a set of at most 10 tags of 2 to 20 characters each, duplicates dropped; ``cases`` replaces
        the linked case ids; ``link_abha`` is ``ndhm`` (link the record to the user's ABHA); ``owner`` is ``oid``,
        the user the document belongs to. ``None`` leaves a field as it is; at least one field must be given.
        The service answers 200 with an empty body: that is success.

        Retried as an idempotent call: every field *sets* a value (tags and cases replace the whole set, they do
        not add), so sending the same PATCH twice leaves the document exactly as sending it once.

        Raises:
            DocumentNotFound: no such document for that user (404).
            InvalidRequest: no field given, a bad id, tag or date, no user id; nothing is sent.
        """
        await _presigned.update(
            self,
            document_id,
            document_type=document_type,
            date=date,
            tags=tags,
            cases=cases,
            link_abha=link_abha,
            owner=owner,
            user_id=user_id,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def delete(
        self,
        document_id: str,
        *,
        missing_ok: bool = False,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``DELETE /mr/api/v1/docs/{id}``: delete a document. ``user_id`` (``X-Pt-Id``) defaults to the client's.

        Idempotent, so retried on transient failures. If an attempt deleted the document but its answer was lost,
        the retry finds no document and raises :class:`DocumentNotFound`; pass ``missing_ok=True`` to treat "not
        there" as done (the state you asked for).

        Raises:
            DocumentNotFound: no such document for that user (404), unless ``missing_ok``.
            InvalidRequest: ``document_id`` is not a single path segment; nothing is sent.
        """
        await _presigned.delete(self, document_id, missing_ok=missing_ok, user_id=user_id, retry=retry, timeout=timeout)

    def _encrypted_body(self, source: FileSource) -> StreamBody:
        from ..._jwe_stream import encrypted_upload_body

        config = self._session.config
        assert config.encryption_key is not None
        size, factory = encrypted_upload_body(source, config.encryption_key, kid=config.key_id)
        return StreamBody(size=size, content_type="application/json", factory=factory, headers={C.H_ENCRYPTION: "JWE"})


def _both(first: ProgressCallback | None, second: ProgressCallback | None) -> ProgressCallback | None:
    if first is None or second is None:
        return first or second

    def both(done: int, failed: int, total: int | None) -> None:
        first(done, failed, total)
        second(done, failed, total)

    return both


def task_params(tasks: Iterable[str]) -> list[tuple[str, str]]:
    """The ``task`` query parameters of an upload, each checked (:class:`~health_async.errors.InvalidRequest` for a
    malformed task, or none); a task named twice is sent once. Ingest checks a job's tasks with it before anything
    is read or sent. Judgement call: a well-formed task this version does not know (not in :data:`KNOWN_TASKS`) is
    sent, for the service may have added it; a misspelt one is then the service's 400."""
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


def _as_document(data: Any, document_id: str) -> Document:
    """A describe's answer as a :class:`Document`: the fast decode's (its id filled from the request when the body
    has none), or the JSON of a body it did not take, by the tolerant rules."""
    if type(data) is not Document:
        return structure_document(data, document_id)
    return with_document_id(data, document_id)


def _id_of(item: str | DocumentListItem) -> str:
    """A describe_many input's document id: a list item's, else the item as given (a wrong type is refused by the
    describe it goes to, as that item's error)."""
    return item.document_id if isinstance(item, DocumentListItem) else item
