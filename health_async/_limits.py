"""Client-wide limits shared by every call of one client: requests in flight, requests per second, and a
shared pause when the service asks for one (429 or 503 with ``Retry-After``).

Created lazily inside the running loop (asyncio primitives bind to it on first use).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Protocol, runtime_checkable

__all__ = ["Limits", "Overdue", "SharedLimiter", "Slots"]


@runtime_checkable
class SharedLimiter(Protocol):
    """Admission shared beyond one client: one account-wide request rate and one ``Retry-After`` pause for
    several clients (processes, Ray actors). Pass one as ``HealthClient(limiter=...)``; the client then asks it
    before every request, besides its own limits, and tells it of every pause the service asks for.
    :mod:`health_async.ingest`'s Ray engine has one backed by a coordinator actor.
    """

    async def acquire(self) -> None:
        """Wait until one more request may be sent (the shared rate and the shared pause)."""

    def pause(self, seconds: float) -> None:
        """The service asked for a pause (429/503 with ``Retry-After``): hold back every sharer for ``seconds``."""


class Slots:
    """A bound of ``size`` slots, first come first served: what ``asyncio.Semaphore`` does, for hot paths.

    Taking a free slot is one plain call (:meth:`enter`: no coroutine, no context manager, no scan of the
    waiters); only a taker that finds none free waits (:meth:`wait_slot`), and a newcomer never overtakes a
    waiter. :meth:`leave` gives a slot straight to the first waiter. The client's in-flight bound
    (:class:`Limits`) and the bulk pool's window (:mod:`health_async._bulk`) are both one.
    """

    def __init__(self, size: int) -> None:
        self._free = size  # slots not taken
        self._slot_waiters: deque[asyncio.Future[None]] = deque()

    def enter(self) -> bool:
        """Take a slot if one is free and nobody waits for one; else False (then :meth:`wait_slot`).
        Every slot taken is given back with :meth:`leave`."""
        if self._free and not self._slot_waiters:
            self._free -= 1
            return True
        return False

    async def wait_slot(self) -> None:
        """Wait for a slot, in arrival order; the slot is then held (give it back with :meth:`leave`).
        Cancelled while waiting, it holds nothing: a slot handed over at that moment is passed on."""
        if self.enter():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.leave()  # the slot was ours already: hand it to the next waiter
            elif waiter in self._slot_waiters:  # (leave() drops a cancelled waiter it meets first)
                self._slot_waiters.remove(waiter)
            raise

    def leave(self) -> None:
        """Give back a slot: straight to the first waiter, if any (it then holds it)."""
        waiters = self._slot_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class Limits(Slots):
    """Admission control for one client.

    * ``max_in_flight``: at most this many requests are on the wire at once (also the connector's limit for
      a session the client owns; a caller-owned session gets the same bound from here).
    * ``rate``: optional requests per second, held in *every* one-second window, the first included: a sliding
      window that admits a request only when fewer than ``max(1, floor(rate))`` were sent in the last
      ``max(1, floor(rate)) / rate`` seconds (one second for a whole ``rate``). Burst behaviour: up to
      ``floor(rate)`` requests may leave at once (at the start, or after a quiet second), never more in any
      one-second window; a fractional rate below 1 spaces single requests ``1 / rate`` seconds apart.
    * ``pause(seconds)``: every request of this client waits until the pause has passed before it is sent, so
      that a 429/503 ``Retry-After`` stops all workers at once instead of each hammering on its own.
    * ``shared``: an optional :class:`SharedLimiter` asked after the above (one account-wide limit).

    Every wait is bounded by the caller's deadline (:meth:`admit`): a call never waits in a pause or for a rate
    slot longer than its own time budget allows.
    """

    def __init__(self, max_in_flight: int, rate: float | None = None, shared: SharedLimiter | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError("max_connections must be >= 1")
        if rate is not None and rate <= 0:
            raise ValueError("rate_limit must be > 0 requests per second, or None")
        self.max_in_flight = max_in_flight
        self.rate = rate
        self.shared = shared
        super().__init__(max_in_flight)  # the in-flight bound: enter() / wait_slot() / leave()
        self._paused_until = 0.0
        self._window_count = max(1, int(rate)) if rate is not None else 1
        self._window = self._window_count / rate if rate is not None else 0.0
        self._sent: deque[float] = deque()
        self._rate_lock = asyncio.Lock()

    @property
    def in_flight(self) -> int:
        """Requests currently holding a slot."""
        return self.max_in_flight - self._free

    def pause(self, seconds: float) -> None:
        """Hold back every request of this client for ``seconds`` from now (extends, never shortens)."""
        if seconds > 0:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)
            if self.shared is not None:
                self.shared.pause(seconds)

    @property
    def paused_for(self) -> float:
        """Seconds left of the current shared pause (0 when none)."""
        return max(0.0, self._paused_until - time.monotonic())

    @property
    def must_wait(self) -> bool:
        """Whether :meth:`admit` may have to wait (a pause is on, or a rate limit is set): lets the hot path
        skip a coroutine call per request."""
        return self.rate is not None or self.shared is not None or self._paused_until > time.monotonic()

    async def admit(self, deadline: float | None = None, pause_deadline: float | None = None) -> None:
        """Wait for the shared pause and the rate limit. Call before :meth:`slot`.

        ``deadline`` (a ``time.monotonic()`` instant) bounds every wait, ``pause_deadline`` the wait in a pause
        besides: when the pause or the rate would hold the call past them, :class:`Overdue` is raised at once,
        without waiting in vain.
        """
        if pause_deadline is None or (deadline is not None and deadline < pause_deadline):
            pause_deadline = deadline
        # a loop, not an Event: another 429 may extend the pause while we sleep
        while (wait := self._paused_until - time.monotonic()) > 0:
            _check(pause_deadline, wait, "the service asked this client to pause (Retry-After)")
            await asyncio.sleep(wait)
        if self.rate is not None:
            await self._take_slot(deadline)
        if self.shared is not None:
            await self.shared.acquire()

    async def _take_slot(self, deadline: float | None) -> None:
        async with self._rate_lock:  # FIFO: waiters are served in arrival order
            sent = self._sent
            while True:
                now = time.monotonic()
                while sent and now - sent[0] >= self._window:
                    sent.popleft()
                if len(sent) < self._window_count:
                    sent.append(now)
                    return
                wait = self._window - (now - sent[0])
                _check(deadline, wait, "the client's rate_limit")
                await asyncio.sleep(wait)


class Overdue(Exception):
    """Waiting for admission would end after the caller's deadline (nothing was sent)."""

    def __init__(self, reason: str, wait: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


def _check(deadline: float | None, wait: float, reason: str) -> None:
    if deadline is not None and time.monotonic() + wait > deadline:
        raise Overdue(reason, wait)
