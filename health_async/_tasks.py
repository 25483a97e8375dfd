"""Background tasks kept in a set: each started with its own removal, and all waited for until none is left."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["keep", "settle"]

T = TypeVar("T")


def keep(tasks: set[asyncio.Task[Any]], work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start ``work`` as a task of the running loop, held in ``tasks`` until it ends (then removed)."""
    task = asyncio.get_running_loop().create_task(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task


async def settle(tasks: set[asyncio.Task[Any]], *, cancel: bool = False) -> list[Any]:
    """Wait until ``tasks`` is empty, tasks added meanwhile included, cancelling each first with ``cancel``; the
    outcomes (results or exceptions) of all, in the order gathered. A cancellation of the caller cancels the tasks
    being gathered and propagates.

    Each task gathered is removed from the set here, not left to its done callback: on Python 3.12 and later,
    ``asyncio.gather`` over tasks that are all done completes without yielding to the loop, so the callback that
    removes them never runs and a loop waiting for the set to empty spins forever, holding the event loop (found
    running the suite on Python 3.12: a webhook receiver's ``join`` after its answer had ended)."""
    outcomes: list[Any] = []
    while tasks:
        batch = list(tasks)
        if cancel:
            for task in batch:
                task.cancel()
        outcomes.extend(await asyncio.gather(*batch, return_exceptions=True))
        tasks.difference_update(batch)
    return outcomes
