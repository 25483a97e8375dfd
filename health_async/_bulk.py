"""The engine of the bulk helpers: a fixed pool of workers pulling from any iterable, results as they complete.

Design (one piece of code for ``describe_many`` and ``upload_many``):

* ``concurrency`` worker tasks, started with :meth:`Session.spawn` so closing the client cancels them; never a
  task per input item. Workers pull the next item themselves, so an unbounded (async) generator is consumed
  lazily.
* A window semaphore bounds the items taken from the input but not yet handed to the consumer (``2 *
  concurrency``): memory stays O(concurrency) whatever the input's length and however slow the consumer, and
  with ``ordered=True`` it bounds the reorder buffer too.
* ``run`` turns every :class:`~health_async.errors.HealthError` of one item into that item's result; input
  problems detected before sending (``ValueError``, ``TypeError``, ``OSError``) become
  :class:`~health_async.errors.InvalidRequest` results. Anything else is a bug: it stops the batch and is raised.
  Closing the client mid-batch raises :class:`~health_async.errors.ClientClosedError` from the iteration, so
  a batch never looks complete when it was not.
* Leaving the ``async for`` early (``break``, an exception, cancellation of the consumer) cancels the workers
  when the generator is closed; wrap the iteration in :func:`contextlib.aclosing` to make that immediate rather
  than when the generator is garbage-collected.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import ClientClosedError, HealthError, InvalidRequest

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["ProgressCallback", "known_length", "run_pool"]

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


class _Source(Generic[T]):
    """The input, pulled by many workers: a sync iterator needs no lock, an async one gets one."""

    def __init__(self, items: Iterable[T] | AsyncIterable[T]) -> None:
        self._sync = iter(items) if not isinstance(items, AsyncIterable) else None
        self._async = aiter(items) if isinstance(items, AsyncIterable) else None
        self._lock = asyncio.Lock()
        self._index = 0
        self.exhausted = False

    async def next(self) -> tuple[int, T] | None:
        if self.exhausted:
            return None
        try:
            if self._sync is not None:
                item = next(self._sync)
            else:
                assert self._async is not None
                async with self._lock:
                    if self.exhausted:  # another worker reached the end while this one waited
                        return None  # type: ignore[unreachable]
                    item = await anext(self._async)
        except (StopIteration, StopAsyncIteration):
            self.exhausted = True
            return None
        index = self._index
        self._index += 1
        return index, item


async def run_pool(
    session: Session,
    items: Iterable[T] | AsyncIterable[T],
    call: Callable[[T], Awaitable[R]],
    wrap: Callable[[T, R | None, HealthError | None], Any],
    *,
    concurrency: int,
    ordered: bool,
    progress: ProgressCallback | None = None,
    total: int | None = None,
) -> AsyncIterator[Any]:
    """Yield ``wrap(item, result, error)`` for every item of ``items``, ``call`` running ``concurrency`` at a time."""
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError("concurrency must be a positive int")
    if total is None:
        total = known_length(items)
    source: _Source[T] = _Source(items)
    window = asyncio.Semaphore(2 * concurrency)
    results: asyncio.Queue[Any] = asyncio.Queue()

    async def worker() -> None:
        try:
            while True:
                await window.acquire()
                taken = await source.next()
                if taken is None:
                    window.release()
                    return
                index, item = taken
                try:
                    result: R | None = await call(item)
                    error: HealthError | None = None
                except HealthError as exc:
                    result, error = None, exc
                except (ValueError, TypeError, OSError) as exc:
                    result, error = None, InvalidRequest(str(exc))
                    error.__cause__ = exc
                results.put_nowait((index, wrap(item, result, error), error is not None))
        except asyncio.CancelledError:
            # Cancelled by the consumer's cleanup (nobody reads this), or by the client closing mid-batch:
            # then the consumer must hear of it rather than see the batch end early as if complete.
            results.put_nowait((-1, ClientClosedError("the client was closed while the batch was running"), True))
            raise
        except BaseException as exc:  # a bug or the input's own exception: stop the batch, re-raised below
            results.put_nowait((-1, exc, True))
        finally:
            results.put_nowait(_DONE)

    workers = [session.spawn(worker()) for _ in range(concurrency)]
    running = len(workers)
    done = failed = 0
    pending: dict[int, Any] = {}
    next_index = 0
    try:
        while running:
            entry = await results.get()
            if entry is _DONE:
                running -= 1
                continue
            index, value, is_error = entry
            if index < 0:
                raise value
            done += 1
            failed += is_error
            if progress is not None:
                progress(done, failed, total)
            if not ordered:
                window.release()
                yield value
                continue
            pending[index] = value
            while next_index in pending:
                window.release()
                value = pending.pop(next_index)
                next_index += 1
                yield value
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
