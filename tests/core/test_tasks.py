"""health_async._tasks: background tasks held in a set, and waited for until none is left.

The webhook receivers (``join``, ``aclose``) and the fake server's webhook senders wait this way. On Python 3.12+
``asyncio.gather`` over tasks that are all done completes without yielding to the loop, so the done callback that
removes a task from its set may not have run yet when the set is looked at again: a loop waiting for the set to
empty then spun forever, holding the event loop (the suite hung on 3.12 in a Scan & Share test). The first test
builds that state on any Python: a done task in the set whose removal has not run.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async._tasks import keep, settle
from health_async.testing import FakeHealthServer


async def _done_task() -> asyncio.Task[str]:
    async def work() -> str:
        return "answered"

    task = asyncio.get_running_loop().create_task(work())
    await task
    return task


async def test_a_done_task_whose_removal_has_not_run_is_settled_not_waited_for_forever() -> None:
    tasks: set[asyncio.Task[Any]] = {await _done_task()}  # in the set, its discard callback not (yet) run
    assert await asyncio.wait_for(settle(tasks), 2) == ["answered"]
    assert tasks == set()


async def test_tasks_started_while_settling_are_waited_for_and_outcomes_kept() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    finished: list[str] = []

    async def later() -> None:
        await asyncio.sleep(0.01)
        finished.append("later")

    async def first() -> str:
        await asyncio.sleep(0.01)
        keep(tasks, later())  # started while settle() waits for this one
        raise RuntimeError("boom")

    keep(tasks, first())
    outcomes = await asyncio.wait_for(settle(tasks), 2)
    assert [type(o).__name__ for o in outcomes] == ["RuntimeError", "NoneType"]
    assert finished == ["later"] and tasks == set()


async def test_settle_with_cancel_cancels_what_runs_and_leaves_nothing() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.sleep(60)

    task = keep(tasks, forever())
    await started.wait()
    outcomes = await asyncio.wait_for(settle(tasks, cancel=True), 2)
    assert task.cancelled() and isinstance(outcomes[0], asyncio.CancelledError) and tasks == set()


@pytest.mark.parametrize("closing", [False, True])
async def test_a_receiver_whose_answer_ended_joins_and_closes_at_once(closing: bool) -> None:
    """The receiver's own ``join``/``aclose`` with an ended answer still in its set (the 3.12 hang)."""
    async with ha.HealthClient(base_url="http://127.0.0.1:9", token="t") as client:  # never called
        receiver = webhooks.abdm_handler(b"s" * 32, client=client)
        ended: asyncio.Task[Any] = await _done_task()
        receiver._tasks.add(ended)
        await asyncio.wait_for(receiver.aclose() if closing else receiver.join(), 2)
        assert receiver.pending == 0


@pytest.mark.parametrize("closing", [False, True])
async def test_the_fake_servers_webhook_senders_flush_and_close_at_once(closing: bool) -> None:
    """The fake's own copy (it imports nothing of the client's), with an ended delivery still in its set."""
    async with FakeHealthServer(users=1, documents_per_user=1) as server:
        ended: asyncio.Task[Any] = await _done_task()
        server.scan_share._tasks.add(ended)
        await asyncio.wait_for(server.scan_share.close() if closing else server.scan_share.flush(), 2)
        assert server.scan_share._tasks == set()
