"""The base of the fake's domains that send webhooks (the hospital side of ABDM, Scan & Share): the target a test
registers, every delivery attempt, and the background tasks that send them (awaited by ``flush``, cancelled on
close and reset)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .._domain import Domain
from ._send import Outcome, Target, WebhookSecret, loopback_target

if TYPE_CHECKING:
    from .._domain import Server

__all__ = ["WebhookDomain"]


class WebhookDomain(Domain):
    """A fake domain sending webhooks in the background (see the module)."""

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        #: Every attempt at a webhook, in order: ``(what it was for, HTTP status or the exception's type name)``.
        self.deliveries: list[tuple[str, Outcome]] = []
        self._target: Target | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def webhooks(self, url: str | None, secret: WebhookSecret | None = None) -> None:
        """Send this domain's webhooks to ``url`` (http(s) on loopback), signed with ``secret``; ``None``
        unregisters. ``ValueError`` (at once, not in a background task) for a URL off loopback, or a secret that is
        not a non-empty str or bytes."""
        self._target = loopback_target(url, secret)

    async def flush(self) -> None:
        """Wait until the webhooks being sent in the background have been delivered or given up."""
        for outcome in await self._settle(cancel=False):
            if isinstance(outcome, Exception):
                raise outcome

    async def start(self) -> None:
        self._closed = False

    async def close(self) -> None:
        """Cancel the webhooks still being sent and wait for them: nothing is left running."""
        self._closed = True
        await self._settle(cancel=True)

    def _forget_webhooks(self) -> None:
        """For ``reset``: a previous test's webhooks must not reach the next one's receiver."""
        for task in self._tasks:
            task.cancel()
        self.deliveries.clear()
        self._target = None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _settle(self, *, cancel: bool) -> list[object]:
        """Wait until no webhook is being sent (cancelling each first with ``cancel``); their outcomes.

        The fake's own copy of ``health_async._tasks.settle`` (the fake imports nothing of the client's): each task
        gathered is removed here, since on Python 3.12+ a gather over done tasks does not yield to the loop and
        their discard callbacks would never run."""
        outcomes: list[object] = []
        while self._tasks:
            batch = list(self._tasks)
            if cancel:
                for task in batch:
                    task.cancel()
            outcomes.extend(await asyncio.gather(*batch, return_exceptions=True))
            self._tasks.difference_update(batch)
        return outcomes
