"""``client.documents``: describe and upload medical record documents."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .. import _constants as C
from .._config import NOT_GIVEN, NotGiven, path_segment
from .._convert import structure, structure_document
from .._files import FileInput, FileSource, StreamBody, multipart_body
from .._retry import RetryPolicy
from ..errors import FileTooLarge
from ..models import Document, UploadResult
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
        segment = path_segment("document_id", document_id)
        data = await self._session.request(
            "GET",
            f"/mr/api/v1/docs/{segment}",
            route=C.PATH_DOCUMENT,
            operation="describe",
            headers={C.H_PT_ID: self._required_user_id(user_id)},
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
            raise ValueError("the upload file is empty")
        if not source.rereadable:
            retry = RetryPolicy.never()
        do_encrypt = client.encrypt if encrypt is None else encrypt
        if do_encrypt and client._session.config.encryption_key is None:
            raise ValueError("encrypt=True needs an encryption_key on the HealthClient")
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

    def _encrypted_body(self, source: FileSource) -> StreamBody:
        from .._jwe_stream import encrypted_upload_body

        config = self._session.config
        assert config.encryption_key is not None
        size, factory = encrypted_upload_body(source, config.encryption_key, kid=config.key_id)
        return StreamBody(size=size, content_type="application/json", factory=factory, headers={C.H_ENCRYPTION: "JWE"})

    def _required_user_id(self, user_id: str | NotGiven | None) -> str:
        user = self._user_id(user_id)
        if user is None:
            raise ValueError("this call needs a user id (X-Pt-Id): pass user_id= here or to HealthClient")
        return user


def _task_params(tasks: Iterable[str]) -> list[tuple[str, str]]:
    if isinstance(tasks, str):
        tasks = (tasks,)
    params = [("task", _task(t)) for t in dict.fromkeys(tasks)]
    if not params:
        raise ValueError(f"upload needs at least one task, e.g. tasks=['smart'] (known: {sorted(KNOWN_TASKS)})")
    return params


def _task(task: str) -> str:
    if not isinstance(task, str) or not _TASK.match(task):
        raise ValueError(f"invalid upload task {task!r}: known tasks are {sorted(KNOWN_TASKS)}")
    return task


def _query_value(name: str, value: str) -> str:
    if not isinstance(value, str) or not _TASK.match(value):
        raise ValueError(f"{name} must be a short lowercase code such as 'lr'")
    return value
