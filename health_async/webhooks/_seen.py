"""Replays: the :class:`SeenStore` protocol and the bounded :class:`InMemorySeenStore`."""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

from ..errors import InvalidArgumentType, InvalidRequest

__all__ = ["DEFAULT_MAX_SEEN", "InMemorySeenStore", "SeenStore"]

#: Most entries an :class:`InMemorySeenStore` holds by default (a few tens of MB at most).
DEFAULT_MAX_SEEN: Final = 100_000


@runtime_checkable
class SeenStore(Protocol):
    """Where :func:`aiohttp_handler` remembers the webhooks it has accepted, to refuse a replay.

    The methods are ``async`` on purpose: a store shared by several processes (Redis ``SET key 1 NX PXAT``, a
    database row with a unique key) does I/O and must not block the event loop. An in-memory store just never
    awaits, which also makes its check-and-insert atomic under asyncio.

    The handler calls :meth:`add` only for a webhook whose signature and timestamp have verified (unsigned junk
    never reaches the store), and :meth:`discard` when the callback then failed or was cancelled, so that the
    service's next delivery of that webhook is processed. Keys are 64 lowercase hex digits (an HMAC under your
    secret, so they disclose nothing); namespace them yourself in a shared store.
    """

    async def add(self, key: str, expires_at: float) -> bool:
        """Record ``key`` until the unix time ``expires_at``, atomically: True when it was not there (the first
        delivery), False when it already was (a replay)."""
        ...

    async def discard(self, key: str) -> None:
        """Forget ``key`` (nothing happens when it is not there)."""
        ...


class InMemorySeenStore:
    """The default :class:`SeenStore`: a dict of key -> expiry plus a heap of expiries, in this process only.

    Bounded in time and size. An entry expires at the ``expires_at`` it was added with (the handler passes the
    signed time plus the tolerance: after that the timestamp check refuses the webhook anyway); expired entries
    are evicted from the heap's top on every :meth:`add`, O(log n) each. Under a flood it never holds more than
    ``max_entries``: the entry closest to expiry is evicted first. That can only weaken replay protection for
    someone who gets more than ``max_entries`` genuine signed webhooks within the tolerance window, whereas
    refusing new webhooks when full would drop the service's real events.

    Args:
        max_entries: most keys held (default :data:`DEFAULT_MAX_SEEN`).
        clock: the current unix time, for tests; default :func:`time.time`.
    """

    def __init__(self, *, max_entries: int = DEFAULT_MAX_SEEN, clock: Callable[[], float] = time.time) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise InvalidRequest("max_entries must be a positive number of entries")
        if not callable(clock):
            raise InvalidRequest("clock must be a function returning the unix time")
        self._max = max_entries
        self._clock = clock
        self._expiry: dict[str, float] = {}
        # (expires_at, key); entries whose key was discarded or re-added are stale and skipped when popped
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        """Keys held, expired ones not yet evicted included."""
        return len(self._expiry)

    async def add(self, key: str, expires_at: float) -> bool:
        """True and remember ``key`` until ``expires_at`` when it is new (or had expired), else False.

        Raises:
            InvalidArgumentType: ``key`` is not a str.
            InvalidRequest: ``expires_at`` is not a finite number of seconds, or the clock gave none (the handler
                then answers 500 and processes nothing: judgement call, a clock at +infinity would otherwise
                evict every live entry and let every replay through).
        """
        if not isinstance(key, str):
            raise InvalidArgumentType(f"key must be a str, not {type(key).__name__}")
        if not _finite(expires_at):
            raise InvalidRequest("expires_at must be a finite unix time in seconds")
        now = self._clock()
        if not _finite(now):
            raise InvalidRequest("the seen store's clock must give a finite unix time in seconds")
        self._evict(now)
        if key in self._expiry:
            return False
        while len(self._expiry) >= self._max and self._heap:
            self._pop()
        self._expiry[key] = expires_at
        heapq.heappush(self._heap, (expires_at, key))
        if len(self._heap) > 2 * self._max:  # too many stale entries (discards): rebuild from the live ones
            self._heap = [(e, k) for k, e in self._expiry.items()]
            heapq.heapify(self._heap)
        return True

    async def discard(self, key: str) -> None:
        """Forget ``key``; its heap entry goes stale."""
        self._expiry.pop(key, None)

    def _evict(self, now: float) -> None:
        """Drop every entry expired at ``now``. One heap entry at a time: a stale one (its key discarded, or
        re-added with another expiry) is only dropped from the heap, never taken for the next live entry, which
        may expire much later."""
        # an entry is live up to and including expires_at, as verify accepts an age equal to the tolerance
        while self._heap and self._heap[0][0] < now:
            expires_at, key = heapq.heappop(self._heap)
            if self._expiry.get(key) == expires_at:
                del self._expiry[key]

    def _pop(self) -> None:
        """Drop the live entry closest to expiry (skipping stale heap entries): the eviction when full. A key is
        only removed through a heap entry holding its current expiry."""
        while self._heap:
            expires_at, key = heapq.heappop(self._heap)
            if self._expiry.get(key) == expires_at:
                del self._expiry[key]
                return


def _finite(value: object) -> bool:
    """A finite number of seconds (a bool is not one; an int always is, however large: it compares exactly)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
