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

from typing import TYPE_CHECKING, Any, Literal

import attrs

from .. import _json
from .._config import NOT_GIVEN, NotGiven
from .._items import error_json, outcome_unknown
from .._plain import unstructure
from ..errors import (
    ApiError,
    ClientClosedError,
    HealthError,
    InvalidRequest,
    RateLimitError,
    ServerError,
    TransportError,
)

if TYPE_CHECKING:
    from .._client import HealthClient

__all__ = ["JobSpec", "WorkItem", "WorkResult", "error_line", "is_retryable", "process"]


@attrs.frozen
class WorkItem:
    """One input item of a job."""

    #: Unique key of the item in the job: the document id (describe) or the absolute file path (upload).
    key: str
    #: Position of the item in the input (0-based; blank lines, comments and repeated keys are not counted).
    index: int


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

    def line_json(self) -> dict[str, Any]:
        """The output line, decoded (for inspection; the writer uses the bytes)."""
        value: dict[str, Any] = _json.loads(self.line)
        return value


@attrs.frozen
class JobSpec:
    """What every engine needs to do the work; picklable (the Ray engine sends it to its actors)."""

    op: Literal["describe", "upload"]
    concurrency: int
    #: Upload processing tasks (``smart``, ``pii``, ``classification``).
    tasks: tuple[str, ...] = ("smart",)
    #: After an upload, wait for its processing result (``client.documents.wait_for_result``).
    wait: bool = False
    #: The OID sent as ``X-Pt-Id``; ``None``: the client's default.
    user_id: str | None = None


def is_retryable(error: BaseException) -> bool:
    """Whether trying the item again later may succeed: transport errors, 5XX and 429; not 404 or bad input."""
    return isinstance(error, TransportError | ServerError | RateLimitError)


def error_line(index: int, error: BaseException, *, retryable: bool) -> dict[str, Any]:
    """The output line (without ``key``) of a failed item."""
    return {"index": index, "error": {**error_json(error), "retryable": retryable}}


async def process(client: HealthClient, spec: JobSpec, item: WorkItem) -> WorkResult:
    """Do one item with ``client``; a per-item failure becomes the result (never raised).

    Raises only cancellation, :class:`~health_async.errors.ClientClosedError` (the run cannot go on) and bugs.
    """
    user: str | NotGiven = NOT_GIVEN if spec.user_id is None else spec.user_id
    try:
        if spec.op == "describe":
            doc = await client.documents.describe(item.key, user_id=user)
            return WorkResult(item.key, {"index": item.index, "document": unstructure(doc)}, ok=True, retryable=False)
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


def _failure(spec: JobSpec, item: WorkItem, exc: HealthError) -> WorkResult:
    # only an upload (not idempotent) can have an unknown outcome; a describe failed this way is just failed
    if spec.op == "upload" and outcome_unknown(exc):
        line = error_line(item.index, exc, retryable=False)
        return WorkResult(item.key, line, ok=False, retryable=False, unknown=True)
    retryable = is_retryable(exc) and not (isinstance(exc, ApiError) and exc.status == 404)
    return WorkResult(item.key, error_line(item.index, exc, retryable=retryable), ok=False, retryable=retryable)
