"""One unit of ingest work, shared by every engine: :class:`WorkItem` in, :class:`WorkResult` out.

:func:`process` does one item with one :class:`~health_async.HealthClient` and never raises for a per-item
failure: the failure becomes the item's result, classified as *retryable* (worth ``--retry-failed``: transport
errors, 5XX, 429) or not (404, bad input), and, for uploads, as *outcome unknown* (the request may have reached
the service: a timeout or reset after sending, a 5XX without a definite answer). Cancellation, a closed client
and bugs are raised.

Everything here is picklable and free of module-level ``ray`` imports: the Ray engine sends :class:`JobSpec`
and :class:`WorkItem` to its actors and calls :func:`process` there.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .. import _json
from .._config import NOT_GIVEN, NotGiven
from .._items import error_json, outcome_unknown
from .._plain import document_json, unstructure
from ..errors import (
    ApiError,
    ClientClosedError,
    DocumentNotFound,
    HealthError,
    InvalidRequest,
    OutcomeUnknown,
    RateLimitError,
    ServerError,
    TransportError,
)
from ._links import LinkRow

if TYPE_CHECKING:
    from .._client import HealthClient
    from ..models import Document

__all__ = ["JobSpec", "WorkItem", "WorkResult", "described", "error_line", "is_retryable", "process", "user_of"]


@attrs.frozen
class WorkItem:
    """One input item of a job."""

    #: Unique key of the item in the job: the document id (describe) or the absolute file path (upload).
    key: str
    #: Position of the item in the input (0-based; blank lines, comments and repeated keys are not counted).
    index: int
    #: What a link item sends (its input row, as the journal keeps it); ``None`` for the other jobs.
    payload: bytes | None = attrs.field(default=None, repr=False)
    #: A link of unknown outcome: checked (linked list) before it is sent again.
    recheck: bool = False


def _encoded(line: dict[str, Any] | bytes) -> bytes:
    return line if isinstance(line, bytes) else _json.dumps(line)


@attrs.frozen
class WorkResult:
    """What became of one item.

    ``line`` is given as a dict and kept as its JSON bytes, encoded at once: results wait in batches for the
    journal, and thousands of waiting dicts (a document's line is dozens of containers) made the garbage
    collector's passes a large share of an ingest's CPU (measured: about a fifth of the event loop's time).
    """

    key: str
    #: The output line for this item as JSON bytes (an object without ``"key"``: the writer adds it).
    line: bytes = attrs.field(converter=_encoded)
    ok: bool
    #: For failures: worth ``--retry-failed`` (transport errors, 5XX, 429) or not (404, bad input).
    retryable: bool
    #: For uploads: the outcome is unknown (the request may have reached the service).
    unknown: bool = False
    #: Reconciliation found the item never stored: it is to do again (pending), with no line.
    pending: bool = False

    def line_json(self) -> dict[str, Any]:
        """The output line, decoded (for inspection; the writer uses the bytes)."""
        value: dict[str, Any] = _json.loads(self.line)
        return value


@attrs.frozen
class JobSpec:
    """What every engine needs to do the work; picklable (the Ray engine sends it to its actors)."""

    op: Literal["describe", "upload", "link"]
    concurrency: int
    #: Upload processing tasks (``smart``, ``pii``, ``classification``).
    tasks: tuple[str, ...] = ("smart",)
    #: After an upload, wait for its processing result (``client.documents.wait_for_result``).
    wait: bool = False
    #: The OID sent as ``X-Pt-Id``; ``None``: the client's default.
    user_id: str | None = None
    #: Link: your facility's HIP id, to check a link of unknown outcome (``None``: the client's ``partner_hip_id``).
    hip_id: str | None = None
    #: Link: send again a link of unknown outcome that cannot be checked (the row has no OID, or no HIP id).
    relink_unknown: bool = False
    #: Upload: through presigned storage under a document id chosen from :attr:`namespace` and the item's key, so
    #: that an unknown outcome is settled by asking (``describe``) instead of being left to the user.
    reconcilable: bool = False
    #: The job's namespace (a UUID, kept in the journal): an item's document id is ``uuid5(namespace, key)``.
    namespace: str | None = None
    #: Only settle unknown outcomes (found: done; not stored: pending again); never upload.
    reconcile_only: bool = False


def document_id_of(spec: JobSpec, key: str) -> str:
    """The document id a reconcilable upload job chooses for ``key``: the same in every run of the job."""
    if spec.namespace is None:
        raise RuntimeError("a reconcilable job without its namespace")
    return str(uuid.uuid5(uuid.UUID(spec.namespace), key))


def is_retryable(error: BaseException) -> bool:
    """Whether trying the item again later may succeed: transport errors, 5XX and 429; not 404 or bad input."""
    return isinstance(error, TransportError | ServerError | RateLimitError)


def error_line(index: int, error: BaseException, *, retryable: bool) -> dict[str, Any]:
    """The output line (without ``key``) of a failed item."""
    return {"index": index, "error": {**error_json(error), "retryable": retryable}}


def user_of(spec: JobSpec) -> str | NotGiven:
    """The ``user_id`` argument of the job's calls: its own, else the client's."""
    return NOT_GIVEN if spec.user_id is None else spec.user_id


def described(spec: JobSpec, key: str, index: int, document: Document | None, error: HealthError | None) -> WorkResult:
    """The result of the describe item ``key`` (at ``index``) from its document, or from its error (a closed client
    is raised: the run cannot go on)."""
    if error is None:
        assert document is not None
        return WorkResult(key, {"index": index, "document": document_json(document)}, ok=True, retryable=False)
    if isinstance(error, ClientClosedError):
        raise error
    return _failure(spec, WorkItem(key, index), error)


async def process(client: HealthClient, spec: JobSpec, item: WorkItem) -> WorkResult:
    """Do one item with ``client``; a per-item failure becomes the result (never raised).

    Raises only cancellation, :class:`~health_async.errors.ClientClosedError` (the run cannot go on) and bugs.
    """
    if spec.op == "link":
        return await _link(client, spec, item)
    if spec.op == "upload" and spec.reconcilable:
        return await _reconcilable_upload(client, spec, item)
    user = user_of(spec)
    try:
        if spec.op == "describe":
            return described(spec, item.key, item.index, await client.documents.describe(item.key, user_id=user), None)
        result = await client.documents.upload(item.key, tasks=spec.tasks, user_id=user)
    except ClientClosedError:
        raise
    except HealthError as exc:
        return _failure(spec, item, exc)
    except (ValueError, TypeError, OSError) as exc:  # bad input found before sending (missing, unreadable file)
        return _failure(spec, item, InvalidRequest(str(exc)))
    line: dict[str, Any] = {"index": item.index, "upload": unstructure(result)}
    if spec.wait:
        try:
            processing = await client.documents.wait_for_result(result.document_id, user_id=user)
            line["processing"] = unstructure(processing)
        except ClientClosedError:
            raise
        except HealthError as exc:
            # uploaded (the id is in the line), processing failed or timed out: a failure, never re-uploaded
            failed = error_line(item.index, exc, retryable=False)
            return WorkResult(item.key, {**line, **failed}, ok=False, retryable=False)
    return WorkResult(item.key, line, ok=True, retryable=False)


async def _reconcilable_upload(client: HealthClient, spec: JobSpec, item: WorkItem) -> WorkResult:
    """Upload through presigned storage under the item's own document id; an item of unknown outcome
    (``recheck``) is first looked for (``describe``): found, it is done without sending anything; not found, it
    was never stored and is uploaded again under the same id (a repeat declares the same document, never a second
    one: see :meth:`~health_async.resources.Documents.create`)."""
    user: str | NotGiven = NOT_GIVEN if spec.user_id is None else spec.user_id
    document_id = document_id_of(spec, item.key)
    try:
        if item.recheck:
            try:
                await client.documents.describe(document_id, user_id=user)
            except DocumentNotFound:
                if spec.reconcile_only:  # never stored: to upload at the next run
                    return WorkResult(item.key, b"{}", ok=False, retryable=False, pending=True)
            else:
                line = {"index": item.index, "upload": {"document_id": document_id, "route": "presigned"}}
                return WorkResult(item.key, {**line, "reconciled": "found"}, ok=True, retryable=False)
        result = await client.documents.create(item.key, document_id=document_id, user_id=user)
    except ClientClosedError:
        raise
    except HealthError as exc:
        if item.recheck and not outcome_unknown(exc) and not isinstance(exc, InvalidRequest):
            # the question (or the new upload) failed for a reason that says nothing of the first send
            return WorkResult(item.key, error_line(item.index, exc, retryable=False), False, False, unknown=True)
        return _failure(spec, item, exc)
    except (ValueError, TypeError, OSError) as exc:  # bad input found before sending (missing, unreadable file)
        return _failure(spec, item, InvalidRequest(str(exc)))
    return WorkResult(item.key, {"index": item.index, "upload": unstructure(result)}, ok=True, retryable=False)


async def _link(client: HealthClient, spec: JobSpec, item: WorkItem) -> WorkResult:
    """Link one care context; one of unknown outcome (``recheck``) is first looked for among the patient's
    linked care contexts, and sent again only when not there (see :mod:`health_async.ingest._links`)."""
    if item.payload is None:
        raise RuntimeError("a link item without its row")
    row = LinkRow.from_payload(item.payload)
    cc = row.care_context
    try:
        if item.recheck:
            hip_id = spec.hip_id or client.partner_hip_id
            if row.oid is None or hip_id is None:
                if not spec.relink_unknown:
                    why = "the row has no oid" if row.oid is None else "no HIP id was given (--hip-id)"
                    error = OutcomeUnknown(
                        f"the link may or may not have been made, and it cannot be checked ({why}): not sent again; "
                        "rerun with --relink-unknown to send it (it may then be linked twice)",
                        operation="care_contexts_link",
                    )
                    return WorkResult(item.key, error_line(item.index, error, retryable=False), False, False, True)
            else:
                listed = await client.abdm.linked_care_contexts(hip_id, oid=row.oid)
                if any(c.care_context_id == cc.care_context_id for c in listed):
                    return _linked(item, cc.care_context_id, "listed")
        await client.abdm.link_care_contexts(
            [cc], abha_address=row.abha_address, oid=row.oid, partner_user_id=row.partner_user_id
        )
    except ClientClosedError:
        raise
    except HealthError as exc:
        if item.recheck and not isinstance(exc, InvalidRequest) and not outcome_unknown(exc):
            # the check (or a resend) failed for a reason that says nothing of the first send: still unknown
            line = error_line(item.index, exc, retryable=False)
            return WorkResult(item.key, line, ok=False, retryable=False, unknown=True)
        return _failure(spec, item, exc)
    return _linked(item, cc.care_context_id, "sent")


def _linked(item: WorkItem, care_context_id: str, how: str) -> WorkResult:
    """The line of a link made: ``sent`` (answered 202: the webhook tells the outcome), ``listed`` (found linked
    when an unknown outcome was checked), ``webhook`` (settled by a recorded ``LINKED`` webhook)."""
    line = {"index": item.index, "link": {"care_context_id": care_context_id, "status": how}}
    return WorkResult(item.key, line, ok=True, retryable=False)


def _failure(spec: JobSpec, item: WorkItem, exc: HealthError) -> WorkResult:
    # only an upload or a link (not idempotent) can have an unknown outcome; a describe failed so is just failed
    if spec.op != "describe" and outcome_unknown(exc):
        line = error_line(item.index, exc, retryable=False)
        return WorkResult(item.key, line, ok=False, retryable=False, unknown=True)
    retryable = is_retryable(exc) and not (isinstance(exc, ApiError) and exc.status == 404)
    return WorkResult(item.key, error_line(item.index, exc, retryable=retryable), ok=False, retryable=retryable)
