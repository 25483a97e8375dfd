"""The engine of the bulk helpers: a fixed pool of workers pulling from any iterable, results as they complete.

Design (one piece of code for ``describe_many`` and ``upload_many``):

* ``concurrency`` worker tasks, started with :meth:`Session.spawn` so closing the client cancels them; never a
  task per input item. Workers pull the next item themselves, so an unbounded (async) generator is consumed
  lazily.
* A window of ``2 * concurrency`` slots bounds the items taken from the input but not yet handed to the
  consumer: memory stays O(concurrency) whatever the input's length and however slow the consumer, and with
  ``ordered=True`` it bounds the reorder buffer too.
* Cheap per item (batches of tens of thousands, each call a few tens of microseconds of CPU): beyond ``call`` and
  ``wrap``, the pool creates no coroutine, task or lock per item of a sync input, pulled with a plain ``next()``
  (an async input is pulled one worker at a time, without a fair lock's convoy: see :class:`_AsyncSource`). The
  window is a :class:`~health_async._limits.Slots` (a slot counter with a FIFO of waiting workers) and the
  results channel a deque the consumer drains, woken once per batch of ready results, instead of
  ``asyncio.Semaphore`` and ``asyncio.Queue``;
  :meth:`BulkStream.__anext__` hands out the generator's own awaitable. ``benchmarks/pool_bench.py`` measures
  what is left.
* ``run_pool`` turns every :class:`~health_async.errors.HealthError` of one item into that item's result; input
  problems detected before sending (``ValueError``, ``TypeError``, ``OSError``) become
  :class:`~health_async.errors.InvalidRequest` results. Anything else is a bug: it stops the batch and is raised.
  Closing the client mid-batch raises :class:`~health_async.errors.ClientClosedError` from the iteration, so
  a batch never looks complete when it was not.
* A result is made (``wrap``) by the consumer, as it takes it, not by the worker that got it: what waits in
  between is what ``call`` returned (for ``describe_many``, a response's bytes: one object, not the hundred of a
  decoded document), so the result is built, read by the caller and freed while it is in the CPU's cache.
  Measured: a document built by a worker and freed by the consumer a batch later costs about 6 µs more a request
  at concurrency 64 than one built and freed at once (``benchmarks/bulk_bench.py``).
* Leaving the ``async for`` early (``break``, an exception, cancellation of the consumer) cancels the workers
  when the stream is closed; ``async with`` the stream (or :func:`contextlib.aclosing`) makes that immediate
  rather than when it is garbage-collected. With ``drain`` (uploads, which are not idempotent) the workers
  already inside a call are let finish and their results kept in :attr:`BulkStream.left_behind`.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
)
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._limits import Slots
from ._logging import logger
from ._telemetry import bulk_span
from .errors import ClientClosedError, HealthError, InvalidArgumentType, InvalidRequest

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["BulkStream", "ProgressCallback", "check_many_input", "known_length", "run_pool"]

T = TypeVar("T")
R = TypeVar("R")

#: ``progress(done, failed, total)``: ``total`` is ``None`` when the input's length is not known.
ProgressCallback = Callable[[int, int, "int | None"], None]

_DONE: Any = object()


def known_length(items: object) -> int | None:
    """``len(items)`` for a sized input (a list, a tuple, ...), else ``None``; never consumes an iterator."""
    try:
        return len(items)  # type: ignore[arg-type]
    except TypeError:
        return None


class _AsyncSource(Generic[T]):
    """An async input, pulled by many workers: one at a time (an async generator cannot be re-entered).

    Not an ``asyncio.Lock``: a fair lock, once the input has suspended once (a page read from a database, say),
    lets every later worker in only through its queue of waiters, one per event-loop iteration, for the rest of
    the batch: a lock convoy that cost ~30 µs an item (measured with an input that pauses every 512 items). Here
    a worker that finds the input free takes it at once, and the workers that found it busy are all woken when it
    is released: the input is held only while ``anext`` runs, and usually that does not suspend.
    """

    def __init__(self, items: AsyncIterable[T]) -> None:
        self._async = aiter(items)
        self._busy = False
        self._waiting: list[asyncio.Future[None]] = []
        self._index = 0
        self.exhausted = False

    async def next(self) -> tuple[int, T] | None:
        while self._busy:  # another worker is inside anext(), which has suspended
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            await waiter
        if self.exhausted:
            return None
        self._busy = True
        try:
            item = await anext(self._async)
        except StopAsyncIteration:
            self.exhausted = True
            return None
        finally:
            self._busy = False
            if self._waiting:
                waiting, self._waiting = self._waiting, []
                for waiter in waiting:
                    if not waiter.done():
                        waiter.set_result(None)
        index = self._index
        self._index += 1
        return index, item


class BulkStream(AsyncIterator[R]):
    """What ``describe_many`` and ``upload_many`` return: an async iterator of results, closable early.

    Use it in ``async for``; leave early with ``break`` and close it (``async with`` it, or
    :func:`contextlib.aclosing`, to have that happen at once). For uploads, leaving early does not abandon uploads
    that may already have reached the service: the calls already running are let finish, and their results land
    in :attr:`left_behind` (also logged as a count at WARNING), so every upload the service saw is reported.
    """

    def __init__(self, results: AsyncGenerator[R, None], left_behind: list[R]) -> None:
        self._results = results
        #: Results of calls that were already running when the iteration was left early (uploads only; empty
        #: for describes, whose calls are simply cancelled). Complete once :meth:`aclose` has returned.
        self.left_behind = left_behind

    def __aiter__(self) -> BulkStream[R]:
        return self

    def __anext__(self) -> Coroutine[Any, Any, R]:
        # A plain def handing out the generator's own awaitable: no extra coroutine per item.
        return self._results.__anext__()

    async def aclose(self) -> None:
        """Stop: cancel the idle workers, let running uploads finish (into :attr:`left_behind`), release all."""
        await self._results.aclose()

    async def __aenter__(self) -> BulkStream[R]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def check_many_input(items: object, what: str) -> None:
    """Refuse, before anything is sent, a single value where an iterable of many is expected."""
    if isinstance(items, str | bytes | bytearray | memoryview | os.PathLike):
        raise InvalidArgumentType(
            f"{what} must be an iterable of many (a list, a generator, an async iterator), not a single "
            f"{type(items).__name__}: wrap one item in a list"
        )
    if not isinstance(items, Iterable | AsyncIterable):
        raise InvalidArgumentType(f"{what} must be an iterable or an async iterable, not {type(items).__name__}")


def run_pool(
    session: Session,
    items: Iterable[T] | AsyncIterable[T],
    call: Callable[[T], Awaitable[R]],
    wrap: Callable[[T, R | None, HealthError | None], Any],
    *,
    concurrency: int,
    ordered: bool,
    progress: ProgressCallback | None = None,
    total: int | None = None,
    drain: bool = False,
    what: str = "items",
    name: str = "bulk",
) -> BulkStream[Any]:
    """``wrap(item, result, error)`` for every item of ``items``, ``call`` running ``concurrency`` at a time.

    ``wrap`` runs in the consumer, as each result is taken (see the module's documentation); it returns the
    result to yield (whose ``ok`` says whether it counts as failed for ``progress``), or a coroutine giving it, for
    a result that needs to wait for something (never with ``drain``).

    Checked at once, before anything is sent: a closed client raises :class:`ClientClosedError`, a single
    ``str``/``bytes``/path where many are expected raises ``TypeError``. ``concurrency`` is capped by the client's
    ``max_connections`` and by the input's length when known: more workers would only wait. ``drain`` (uploads)
    lets the calls already running finish when the consumer leaves early (see :class:`BulkStream`). ``name``
    names the run in telemetry (``describe_many``, ``upload_many``, ``ingest``): one span, its items counted.
    """
    if not isinstance(concurrency, int) or isinstance(concurrency, bool):
        raise InvalidArgumentType(f"concurrency must be an int, not {type(concurrency).__name__}")
    if concurrency < 1:
        raise InvalidRequest("concurrency must be a positive int")
    check_many_input(items, what)
    if session.closed:
        raise ClientClosedError("the HealthClient is closed; create a new one")
    if total is None:
        total = known_length(items)
    concurrency = min(concurrency, session.config.max_connections, max(1, total) if total is not None else concurrency)
    left_behind: list[Any] = []
    results = _pool(session, items, call, wrap, concurrency, ordered, progress, total, drain, left_behind, name)
    return BulkStream(results, left_behind)


async def _pool(
    session: Session,
    items: Iterable[T] | AsyncIterable[T],
    call: Callable[[T], Awaitable[R]],
    wrap: Callable[[T, R | None, HealthError | None], Any],
    concurrency: int,
    ordered: bool,
    progress: ProgressCallback | None,
    total: int | None,
    drain: bool,
    left_behind: list[Any],
    name: str,
) -> AsyncGenerator[Any, None]:
    # The hot path (per item) avoids asyncio's general-purpose primitives; see the module docstring.
    loop = asyncio.get_running_loop()
    # A sync input is pulled with a plain next() (no lock, no coroutine); an async one through _AsyncSource.
    pull: Iterator[tuple[int, T]] | None = None if isinstance(items, AsyncIterable) else enumerate(items)
    source: _AsyncSource[T] | None = _AsyncSource(items) if isinstance(items, AsyncIterable) else None
    exhausted = False
    # The window: a slot taken per item pulled, given back when the consumer takes its result (FIFO; one plain
    # call when a slot is free, the same Slots as the client's in-flight bound).
    window = Slots(2 * concurrency)
    # The results, hand-rolled: a deque the consumer drains without suspending, and one future it waits on only
    # when the deque is empty (set by the next worker that appends): one wake-up per batch of ready results.
    ready: deque[Any] = deque()
    wakeup: asyncio.Future[None] | None = None
    calling: set[asyncio.Task[Any]] = set()  # with drain: workers inside `call` (their request may be on the wire)
    stopping = False

    def push(entry: Any) -> None:
        """Hand ``entry`` to the consumer, waking it if it waits (the workers' hot path inlines this)."""
        nonlocal wakeup
        ready.append(entry)
        if wakeup is not None:
            if not wakeup.done():
                wakeup.set_result(None)
            wakeup = None

    async def worker() -> None:
        nonlocal exhausted, wakeup
        me = asyncio.current_task()
        assert me is not None
        try:
            while not stopping:
                if not window.enter():
                    await window.wait_slot()
                if pull is not None:
                    taken = None if exhausted else next(pull, None)
                    if taken is None:
                        exhausted = True
                else:
                    assert source is not None
                    taken = await source.next()
                if taken is None:
                    window.leave()
                    return
                index, item = taken
                if drain:
                    calling.add(me)
                try:
                    result: R | None = await call(item)
                    error: HealthError | None = None
                except HealthError as exc:
                    result, error = None, exc
                except (ValueError, TypeError, OSError) as exc:
                    result, error = None, InvalidRequest(str(exc))
                    error.__cause__ = exc
                finally:
                    if drain:
                        calling.discard(me)
                ready.append((index, item, result, error))  # push(), inlined; wrapped by the consumer
                if wakeup is not None:
                    if not wakeup.done():
                        wakeup.set_result(None)
                    wakeup = None
        except asyncio.CancelledError:
            # Cancelled by the consumer's cleanup (nobody reads this), or by the client closing mid-batch:
            # then the consumer must hear of it rather than see the batch end early as if complete.
            push((-1, None, None, ClientClosedError("the client was closed while the batch was running")))
            raise
        except BaseException as exc:  # a bug or the input's own exception: stop the batch, re-raised below
            push((-1, None, None, exc))
        finally:
            push(_DONE)

    telemetry = session.telemetry
    run = None if telemetry is None else bulk_span(telemetry, name)
    if run is None or not run.on:
        workers = [session.spawn(worker()) for _ in range(concurrency)]
    else:
        with run.workers():  # the run's span current while they are made: their calls are its children
            workers = [session.spawn(worker()) for _ in range(concurrency)]
    counting = progress is not None or (run is not None and run.on)
    running = len(workers)
    done = failed = 0
    error: BaseException | None = None
    pending: dict[int, Any] = {}
    next_index = 0
    try:
        while running:
            if not ready:
                wakeup = loop.create_future()
                await wakeup
                continue
            entry = ready.popleft()
            if entry is _DONE:
                running -= 1
                continue
            if entry[0] < 0:
                raise entry[3]
            if ordered:
                pending[entry[0]] = entry
                if next_index not in pending:
                    continue
                entry = pending.pop(next_index)
                next_index += 1
            while True:
                value = wrap(entry[1], entry[2], entry[3])
                if type(value) is CoroutineType:
                    value = await value
                done += 1
                if counting:
                    failed += not value.ok
                    if progress is not None:
                        progress(done, failed, total)
                window.leave()
                yield value
                if not ordered or next_index not in pending:
                    break
                entry = pending.pop(next_index)
                next_index += 1
    except BaseException as exc:
        error = exc
        raise
    finally:
        if run is not None:
            run.ok, run.failed = done - failed, failed
            run.end(None if isinstance(error, GeneratorExit) else error)
        stopping = True
        wakeup = None
        finishing = [task for task in workers if task in calling] if drain else []
        for task in workers:
            if task not in finishing:
                task.cancel()
        # shielded: a consumer cancelled (Ctrl-C) still waits for the uploads already sent, then re-raises
        await asyncio.shield(asyncio.gather(*workers, return_exceptions=True))
        if drain:  # (a wrap of a draining pool returns its result, never a coroutine)
            left_behind.extend(wrap(*pending[i][1:]) for i in sorted(pending))
            for entry in ready:
                if entry is not _DONE and entry[0] >= 0:
                    left_behind.append(wrap(entry[1], entry[2], entry[3]))
            if left_behind:
                logger.warning(
                    "%d call(s) already sent finished after the iteration was left; see .left_behind",
                    len(left_behind),
                )
