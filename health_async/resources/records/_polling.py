"""Waiting for a document's processing: one poll, the polling loop, and the wait stage of ``upload_many``.

The schedule (see :class:`PollPolicy`): the first poll after about ``first_poll`` seconds (1 s), then each delay
``multiplier`` (2) times the last, up to ``max_poll`` (30 s), every delay spread by ``+-jitter`` (20 %) so that
thousands of waits started together do not poll together. A 10-minute wait makes at most 30 polls.

Every poll is an ordinary request through ``Session.request``: it shares the client's connection limit, rate
limit and ``Retry-After`` pause, and gets the client's retries. After those retries, a rate limit (429), a server
error or a transport failure does not end the wait: the next poll comes later (no sooner than the answer's
``Retry-After``), and if the deadline comes first the :class:`~health_async.errors.ProcessingTimeout` is chained
to the last such failure. Any other failure (401, 404, a malformed answer, a closed client) ends the wait at once.

The wait never outlives its deadline: the sleep that would cross it is cut so one last poll fits before it, and
each poll's own timeout is cut to the time left. Nothing is spawned: cancelling the wait cancels its sleep or its
request, and leaves nothing behind. The clock, the sleep and the random source are parameters, for tests.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from ..._bulk import BulkStream, ProgressCallback
from ..._config import finite
from ..._logging import logger
from ..._routes import PATH_RESULT
from ...errors import (
    ClientClosedError,
    DocumentNotFound,
    HealthError,
    InvalidRequest,
    ProcessingFailed,
    ProcessingTimeout,
    RateLimitError,
    ServerError,
    TransportError,
)
from ...models import ProcessingResult, ProcessingStatus, UploadOutcome

if TYPE_CHECKING:
    from ..._session import Session

__all__ = ["DEFAULT_WAIT_TIMEOUT", "PATH_RESULT", "PollPolicy", "check_timeout", "poll_until_final", "wait_stage"]

#: The result operation's path template (for logs and the fake server).

#: Default deadline of a wait, in seconds (parsing takes 1-4 minutes).
DEFAULT_WAIT_TIMEOUT: Final = 600.0
#: Room kept before the deadline for the last poll (at most half of the time then left).
_LAST_POLL_ROOM: Final = 2.0

Fetch = Callable[[float | None], Awaitable[ProcessingResult]]
T = TypeVar("T")


def _positive_finite(name: str, value: object) -> float:
    number = finite(value)
    if number is None or number <= 0:
        raise InvalidRequest(f"{name} must be a positive number of seconds")
    return number


@attrs.frozen
class PollPolicy:
    """How often to poll a processing result.

    Poll ``n`` (0-based) comes ``min(max_poll, first_poll * multiplier**n) * (1 + jitter * u)`` seconds after the
    previous one (``u`` uniform in ``[-1, 1]``; the first counts from the start of the wait). With the defaults
    (1 s, 30 s, x2, +-20 %) a 10-minute wait polls at most 30 times. A ``Retry-After`` from the service
    lengthens the next delay to at least that much.

    Raises :class:`~health_async.errors.InvalidRequest` for a non-positive delay, a ``multiplier`` below 1, a
    ``max_poll`` below ``first_poll`` or a ``jitter`` outside ``[0, 0.9]``.
    """

    first_poll: float = 1.0
    max_poll: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def __attrs_post_init__(self) -> None:
        first = _positive_finite("first_poll", self.first_poll)
        cap = _positive_finite("max_poll", self.max_poll)
        if cap < first:
            raise InvalidRequest("max_poll must be at least first_poll")
        mult = finite(self.multiplier)
        if mult is None or mult < 1:
            raise InvalidRequest("multiplier must be a finite number >= 1")
        jit = self.jitter
        if isinstance(jit, bool) or not isinstance(jit, int | float) or not 0 <= jit <= 0.9:
            raise InvalidRequest("jitter must be within [0, 0.9]")

    def delay(self, poll: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds before poll number ``poll`` (0-based), jitter included."""
        base = self.max_poll if poll >= 64 else min(self.max_poll, self.first_poll * self.multiplier**poll)
        return base * (1.0 + self.jitter * (2.0 * rand() - 1.0))

    @classmethod
    def of(
        cls, policy: PollPolicy | None = None, *, first_poll: float | None = None, max_poll: float | None = None
    ) -> PollPolicy:
        """``policy`` (default ``PollPolicy()``) with ``first_poll``/``max_poll`` replaced when given."""
        base = cls() if policy is None else policy
        if not isinstance(base, PollPolicy):
            raise InvalidRequest("poll must be a PollPolicy")
        if first_poll is None and max_poll is None:
            return base
        first = base.first_poll if first_poll is None else first_poll
        cap = base.max_poll if max_poll is None else max_poll
        if max_poll is None and first_poll is not None and isinstance(first, int | float) and first > cap:
            cap = first  # a long first poll alone raises the cap with it, rather than being refused
        return attrs.evolve(base, first_poll=first, max_poll=cap)


def check_timeout(timeout: float | None) -> float | None:
    """A wait's deadline in seconds (``None``: no deadline), refused with :class:`InvalidRequest` if not positive."""
    return None if timeout is None else _positive_finite("timeout", timeout)


_TRANSIENT: Final = (RateLimitError, ServerError, TransportError)


async def poll_until_final(
    fetch: Fetch,
    document_id: str,
    *,
    timeout: float | None,
    policy: PollPolicy,
    request_timeout: float | None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    rand: Callable[[], float] = random.random,
) -> ProcessingResult:
    """Poll with ``fetch(poll_timeout)`` until the result is final; return it when ``COMPLETED``.

    Raises :class:`ProcessingFailed` (status ``ERROR``), :class:`DocumentNotFound` (``DELETED``, or a 404),
    :class:`ProcessingTimeout` at the deadline, or the first failure that is not transient (see the module).
    ``request_timeout`` is the budget of one poll (the client's ``timeout``), cut to the time left.
    """
    deadline = None if timeout is None else clock() + timeout
    last_status: ProcessingStatus | None = None
    last_error: HealthError | None = None
    at_least = 0.0  # from a Retry-After: the next poll no sooner than this
    poll = 0
    last = False
    while True:
        delay = max(policy.delay(poll, rand), at_least)
        poll += 1
        if deadline is not None:
            remaining = deadline - clock()
            if remaining <= 0:
                break
            if delay >= remaining:  # the sleep that would cross the deadline: cut it so a last poll fits
                delay = max(0.0, remaining - min(_LAST_POLL_ROOM, remaining / 2))
                last = True
        await sleep(delay)
        budget = request_timeout
        if deadline is not None:
            remaining = deadline - clock()
            if remaining <= 0:
                break
            budget = remaining if budget is None else min(budget, remaining)
        at_least = 0.0
        try:
            result = await fetch(budget)
        except _TRANSIENT as exc:
            last_error = exc
            retry_after = getattr(exc, "retry_after", None)
            if retry_after is not None:
                at_least = retry_after
            logger.info("polling a processing result: %s; polling again later", type(exc).__name__)
        else:
            last_error = None
            last_status = result.status
            logger.debug("processing result: %s (poll %d)", result.status.name, poll)
            status = result.status
            if status is ProcessingStatus.COMPLETED:
                return result
            if status is ProcessingStatus.ERROR:
                codes = ", ".join(str(e.code) for e in result.errors if e.code is not None)
                raise ProcessingFailed(
                    "the service could not process the document" + (f" (error codes: {codes})" if codes else ""),
                    document_id=document_id,
                    errors=result.errors,
                )
            if status is ProcessingStatus.DELETED:
                raise DocumentNotFound("result: the document was deleted", status=404, operation="result")
        if last:
            break
    where = f"last status {last_status.name}" if last_status is not None else "no answer yet"
    error = ProcessingTimeout(
        f"the document was not processed within {timeout:g} s ({where}); it may still finish later",
        document_id=document_id,
        last_status=last_status,
    )
    if last_error is not None:
        raise error from last_error
    raise error


# ---------------------------------------------------------------------------------- upload_many(wait=True)

_FED: Final[Any] = object()


def wait_stage(
    session: Session,
    uploads: BulkStream[UploadOutcome],
    wait_one: Callable[[str], Awaitable[ProcessingResult]],
    *,
    limit: int,
    ordered: bool,
    progress: ProgressCallback | None,
    total: int | None,
) -> BulkStream[UploadOutcome]:
    """Wait for the processing of each uploaded file of ``uploads``, up to ``limit`` waits at a time.

    A wait mostly sleeps, so far more of them run than uploads (``limit``, not the upload ``concurrency``); they
    are helper tasks of the client (closing it cancels them). An outcome taken from ``uploads`` holds one of the
    ``limit`` places until it is handed to the consumer, which bounds memory and, with ``ordered``, the reorder
    buffer. Leaving the iteration early cancels the waits (polls are harmless to cancel) and puts the uploads
    they were waiting for, without their processing, in :attr:`BulkStream.left_behind` beside the uploads'
    own left-behind ones, and so is the one outcome taken but still waiting for a place: every document the
    service created is reported.
    """
    left_behind: list[UploadOutcome] = []
    return BulkStream(_waits(session, uploads, wait_one, limit, ordered, progress, total, left_behind), left_behind)


async def _waits(
    session: Session,
    uploads: BulkStream[UploadOutcome],
    wait_one: Callable[[str], Awaitable[ProcessingResult]],
    limit: int,
    ordered: bool,
    progress: ProgressCallback | None,
    total: int | None,
    left_behind: list[UploadOutcome],
) -> AsyncGenerator[UploadOutcome, None]:
    places = asyncio.Semaphore(limit)
    results: asyncio.Queue[Any] = asyncio.Queue()
    waiting: dict[asyncio.Task[Any], UploadOutcome] = {}
    # The outcome the feeder has taken from `uploads` but not yet handed on (to `results` or to a wait): at most
    # one. Whatever stops the feeder meanwhile (its cancellation while it waits for a place, a closed client
    # refusing the wait's task), the cleanup below reports it in `left_behind` rather than dropping it.
    held: list[UploadOutcome] = []

    async def finish(index: int, outcome: UploadOutcome) -> None:
        assert outcome.result is not None
        try:
            try:
                processing = await wait_one(outcome.result.document_id)
            except HealthError as exc:
                done = attrs.evolve(outcome, error=exc)
            else:
                done = attrs.evolve(
                    outcome, result=attrs.evolve(outcome.result, processing=processing), processing=processing
                )
        except asyncio.CancelledError:
            results.put_nowait((-1, ClientClosedError("the client was closed while waiting for processing")))
            raise
        except BaseException as exc:  # a bug: stop the batch, re-raised by the consumer
            results.put_nowait((-1, exc))
            return
        results.put_nowait((index, done))

    def forget(task: asyncio.Task[Any]) -> None:
        # A wait that ended is forgotten; a cancelled one (the client closing, possibly while the consumer is away
        # from `results`) stays, so that the cleanup below reports its upload in `left_behind`.
        if not task.cancelled():
            waiting.pop(task, None)

    async def feed() -> None:
        index = 0
        try:
            async for outcome in uploads:
                held.append(outcome)
                await places.acquire()
                if outcome.error is not None or outcome.result is None:
                    results.put_nowait((index, outcome))  # not uploaded: nothing to wait for
                else:
                    task = session.spawn(finish(index, outcome))
                    waiting[task] = outcome
                    task.add_done_callback(forget)
                held.clear()  # handed on, with no suspension since: now in `results` or `waiting`
                index += 1
        except asyncio.CancelledError:
            results.put_nowait((-1, ClientClosedError("the client was closed while the batch was running")))
            raise
        except BaseException as exc:
            results.put_nowait((-1, exc))
            return
        results.put_nowait((index, _FED))

    feeder = session.spawn(feed())
    expected: int | None = None  # known once the feeder has taken every upload
    received = 0
    next_index = 0
    pending: dict[int, UploadOutcome] = {}
    done = failed = 0
    try:
        while expected is None or received < expected:
            index, value = await results.get()
            if index < 0:
                raise value
            if value is _FED:
                expected = index
                continue
            received += 1
            if ordered:
                pending[index] = value
                ready = []
                while next_index in pending:
                    ready.append(pending.pop(next_index))
                    next_index += 1
            else:
                ready = [value]
            for outcome in ready:
                places.release()
                done += 1
                failed += outcome.error is not None
                if progress is not None:
                    progress(done, failed, total)
                yield outcome
    finally:
        feeder.cancel()
        unfinished = dict(waiting)
        for task in unfinished:
            task.cancel()
        await asyncio.shield(asyncio.gather(feeder, *unfinished, return_exceptions=True))
        await uploads.aclose()
        left_behind.extend(pending[i] for i in sorted(pending))
        while not results.empty():
            index, value = results.get_nowait()
            if index >= 0 and value is not _FED:
                left_behind.append(value)
        left_behind.extend(o for t, o in unfinished.items() if t.cancelled())
        left_behind.extend(held)
        left_behind.extend(uploads.left_behind)
        if left_behind:
            logger.warning(
                "%d uploaded file(s) were not handed out before the iteration was left; see .left_behind",
                len(left_behind),
            )
