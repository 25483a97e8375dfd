"""Client-wide limits shared by every call of one client: requests in flight, requests per second, and a
shared pause when the service asks for one (429 or 503 with ``Retry-After``).

Created lazily inside the running loop (asyncio primitives bind to it on first use).
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["Limits"]


class Limits:
    """Admission control for one client.

    * ``max_in_flight``: at most this many requests are on the wire at once (also the connector's limit for
      a session the client owns; a caller-owned session gets the same bound from here).
    * ``rate``: optional requests per second, a token bucket with a burst of ``max(1, rate)`` (smooth: at most
      one second's worth of requests at once).
    * ``pause(seconds)``: every request of this client waits until the pause has passed before it is sent, so
      that a 429/503 ``Retry-After`` stops all workers at once instead of each hammering on its own.
    """

    def __init__(self, max_in_flight: int, rate: float | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError("max_connections must be >= 1")
        if rate is not None and rate <= 0:
            raise ValueError("rate_limit must be > 0 requests per second, or None")
        self.max_in_flight = max_in_flight
        self.rate = rate
        self._semaphore = asyncio.Semaphore(max_in_flight)
        self._paused_until = 0.0
        self._burst = max(1.0, rate or 1.0)
        self._tokens = self._burst
        self._refilled_at = time.monotonic()
        self._rate_lock = asyncio.Lock()

    @property
    def in_flight(self) -> int:
        """Requests currently holding a slot."""
        return self.max_in_flight - self._semaphore._value

    def pause(self, seconds: float) -> None:
        """Hold back every request of this client for ``seconds`` from now (extends, never shortens)."""
        if seconds > 0:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    @property
    def paused_for(self) -> float:
        """Seconds left of the current shared pause (0 when none)."""
        return max(0.0, self._paused_until - time.monotonic())

    @property
    def must_wait(self) -> bool:
        """Whether :meth:`admit` may have to wait (a pause is on, or a rate limit is set): lets the hot path
        skip a coroutine call per request."""
        return self.rate is not None or self._paused_until > time.monotonic()

    async def admit(self) -> None:
        """Wait for the shared pause and the rate limit. Call before :meth:`slot`."""
        # a loop, not an Event: another 429 may extend the pause while we sleep
        while (wait := self._paused_until - time.monotonic()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(wait)
        if self.rate is not None:
            await self._take_token(self.rate)

    async def _take_token(self, rate: float) -> None:
        async with self._rate_lock:  # FIFO: waiters are served in arrival order
            now = time.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._refilled_at) * rate)
            self._refilled_at = now
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / rate)
                self._tokens = 1.0
                self._refilled_at = time.monotonic()
            self._tokens -= 1

    @property
    def slot(self) -> asyncio.Semaphore:
        """The in-flight bound, as an async context manager."""
        return self._semaphore
