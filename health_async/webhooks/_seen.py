"""Replays: the :class:`SeenStore` protocol, the :class:`Claim` it answers, and the bounded
:class:`InMemorySeenStore`."""

from __future__ import annotations

import enum
import heapq
import inspect
import math
import time
import warnings
from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

from ..errors import InvalidArgumentType, InvalidRequest

__all__ = ["DEFAULT_MAX_SEEN", "Claim", "InMemorySeenStore", "LeasingSeenStore", "SeenStore"]

#: Most entries an :class:`InMemorySeenStore` holds by default (a few tens of MB at most).
DEFAULT_MAX_SEEN: Final = 100_000


class Claim(enum.Enum):
    """What :meth:`SeenStore.claim` found: the key was free and is now held (``NEW``), or it was held already, by a
    delivery still running (``IN_PROGRESS``) or by one that finished (``DONE``)."""

    NEW = "new"
    IN_PROGRESS = "in_progress"
    DONE = "done"


@runtime_checkable
class SeenStore(Protocol):
    """Where the receivers (:func:`aiohttp_handler`, :func:`abdm_handler`, :func:`abdm_asgi`) remember the webhooks
    they have accepted, to refuse a replay, and what they are still working on, to answer a redelivery that comes
    meanwhile with a retryable 503.

    An entry is a key, held by one claim at a time: its ``token`` (a random value each claim makes with
    :mod:`secrets`) while the delivery runs, then "done". The receivers call :meth:`claim` only for a webhook whose
    signature and timestamp have verified (unsigned junk never reaches the store); then :meth:`finish` when the
    work succeeded, or :meth:`release` when it failed or was cancelled, so that the service's next delivery runs.
    Both act only when the key is still held by that token, so a delivery that lost (a replay, a redelivery) can
    never erase the entry of the one that won, even when it was cancelled with its :meth:`claim` in flight and
    cannot know whether it won. Keys are 64 lowercase hex digits (an HMAC under your secret, or a SHA-256, so
    they disclose nothing); namespace them yourself in a shared store.

    The methods are ``async`` on purpose: a store shared by several processes does I/O and must not block the event
    loop (Redis: one Lua script each, e.g. ``if GET == token then DEL``; a database: one conditional statement). An
    in-memory store just never awaits, which also makes each method atomic under asyncio.

    **Changed in issue 42** (a public protocol): it was ``add(key, expires_at) -> bool`` and ``discard(key)``. A
    store that has only those two methods is still accepted by the receivers, with a ``DeprecationWarning`` and
    the old, weaker guarantees: a replay cancelled with its ``add`` in flight then forgets the first delivery's key
    (so a later replay runs again), and a redelivery that comes while the first still runs is answered 200
    "duplicate" (so it is lost when the first fails). Add the three methods below to get the new ones.

    **Leases (issue 42 follow-up).** A store that also has ``renew`` is a :class:`LeasingSeenStore`: the receivers
    then claim with ``lease=``, so an entry in progress is held only for a short lease, renewed by a heartbeat while
    the work runs, and a worker that dies mid-delivery (``kill -9``, out of memory) frees its key once the lease
    lapses instead of at ``expires_at`` (a day for an ABDM data request). A store without ``renew`` is called
    exactly as before (no ``lease`` keyword, no heartbeat): its entries stay in progress until ``expires_at``.
    """

    async def claim(self, key: str, expires_at: float, *, token: str) -> Claim:
        """Hold ``key`` for ``token`` until the unix time ``expires_at`` when no one holds it (:attr:`Claim.NEW`),
        atomically; else leave it and say whether its holder is still running (:attr:`Claim.IN_PROGRESS`) or
        finished (:attr:`Claim.DONE`). An entry expires at ``expires_at`` whatever its state."""
        ...

    async def finish(self, key: str, *, token: str) -> None:
        """Mark ``key`` done, keeping its expiry, if ``token`` still holds it (otherwise nothing happens)."""
        ...

    async def release(self, key: str, *, token: str) -> None:
        """Forget ``key`` if ``token`` still holds it, in progress (otherwise, a key done or held by another token
        or already gone, nothing happens): compare-and-delete, atomically."""
        ...


@runtime_checkable
class LeasingSeenStore(SeenStore, Protocol):
    """A :class:`SeenStore` whose entries in progress are held by a lease, renewed while the work runs: a worker that
    dies mid-delivery holds its key only until its lease lapses, after which a redelivery claims it
    (:attr:`Claim.NEW`) and runs. :class:`InMemorySeenStore` and :class:`~health_async.redis.RedisSeenStore` are
    ones.

    The receivers treat a store as leasing when it has a ``renew`` method (``isinstance(store,
    LeasingSeenStore)``): they then pass ``lease=`` to :meth:`claim`, and while the work runs a heartbeat task
    calls :meth:`renew` every third of the lease; the heartbeat is cancelled, and awaited, when the work ends,
    before :meth:`~SeenStore.finish` or :meth:`~SeenStore.release`. A store with ``renew`` must therefore take the
    ``lease`` keyword. All times are unix times in seconds, as ``expires_at``.
    """

    async def claim(self, key: str, expires_at: float, *, token: str, lease: float | None = None) -> Claim:
        """As :meth:`SeenStore.claim`; with ``lease``, a key taken (:attr:`Claim.NEW`) is held in progress only
        until ``min(lease, expires_at)`` (then it is free again, as if released) unless :meth:`renew` extends it,
        and :meth:`~SeenStore.finish` keeps it done until ``expires_at``. ``lease=None``: held until
        ``expires_at``, as by a plain :class:`SeenStore`."""
        ...

    async def renew(self, key: str, *, token: str, until: float) -> bool:
        """Extend the lease of ``key`` to ``min(until, expires_at)`` if ``token`` still holds it in progress: True;
        otherwise (its lease lapsed, it was finished or released, another claim holds it) change nothing: False."""
        ...


@runtime_checkable
class _LegacySeenStore(Protocol):
    """The :class:`SeenStore` before issue 42: a key added once, and forgotten by anyone."""

    async def add(self, key: str, expires_at: float) -> bool: ...

    async def discard(self, key: str) -> None: ...


class _FromLegacy:
    """A :class:`SeenStore` over a store of the old protocol (:class:`_LegacySeenStore`), with its old guarantees:
    no token is kept, an entry is done once added, and releasing forgets it whoever holds it."""

    def __init__(self, store: _LegacySeenStore) -> None:
        self._store = store

    def __repr__(self) -> str:
        return f"_FromLegacy({type(self._store).__name__})"

    async def claim(self, key: str, expires_at: float, *, token: str) -> Claim:  # noqa: ARG002 - no token kept
        return Claim.NEW if await self._store.add(key, expires_at) else Claim.DONE

    async def finish(self, key: str, *, token: str) -> None:
        """Nothing to do: an added key is all the old protocol knows."""

    async def release(self, key: str, *, token: str) -> None:  # noqa: ARG002 - no token kept
        await self._store.discard(key)


def _seen_store(store: object, stacklevel: int) -> SeenStore:
    """``store`` as a :class:`SeenStore` (a store of the old protocol wrapped, with a ``DeprecationWarning`` pointing
    ``stacklevel`` frames up), or :class:`~health_async.errors.InvalidRequest`."""
    if isinstance(store, SeenStore):
        return store
    if isinstance(store, _LegacySeenStore):
        warnings.warn(
            "a seen store with only add(key, expires_at) and discard(key) is deprecated: give it async claim, finish "
            "and release (see health_async.webhooks.SeenStore); until then a cancelled replay check may forget the "
            "first delivery's key, and a redelivery during the first is answered duplicate",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        return _FromLegacy(store)
    raise InvalidRequest("seen_store must have async claim(key, expires_at, *, token), finish and release methods")


def _leasing(store: SeenStore) -> bool:
    """Whether the receivers claim in ``store`` with a lease and renew it: a :class:`LeasingSeenStore` (it has
    ``renew``) whose ``claim`` takes the ``lease`` keyword. Judgement call: the signature is checked too, once when a
    receiver is built, so a subclass of :class:`InMemorySeenStore` that overrides ``claim`` with the signature
    before leases (it inherits ``renew``) keeps working as before, without leases, rather than failing every claim."""
    if not isinstance(store, LeasingSeenStore):
        return False
    try:
        parameters = inspect.signature(store.claim).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "lease" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class InMemorySeenStore:
    """The default :class:`SeenStore`: a dict of key -> expiry plus a heap of expiries, in this process only.

    Bounded in time and size. An entry expires at the ``expires_at`` it was claimed with (the handler passes the
    signed time plus the tolerance: after that the timestamp check refuses the webhook anyway); expired entries
    are evicted from the heap's top on every :meth:`claim`, O(log n) each. Under a flood it never holds more than
    ``max_entries``: the entry closest to expiry is evicted first. That can only weaken replay protection for
    someone who gets more than ``max_entries`` genuine signed webhooks within the tolerance window, whereas
    refusing new webhooks when full would drop the service's real events.

    A :class:`LeasingSeenStore`: a key claimed with ``lease`` is held in progress until that lease (extended by
    :meth:`renew`), and until ``expires_at`` once finished; an entry past its lease is free again.

    Besides the protocol's :meth:`claim`, :meth:`finish` and :meth:`release`, it keeps the old protocol's
    :meth:`add` (an entry recorded done at once) and :meth:`discard` (forget a key, whoever holds it).

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
        # key -> the token of the claim that holds it, while in progress (a key done, or added, is not here)
        self._tokens: dict[str, str] = {}
        # key -> its expires_at, while in progress under a lease shorter than it (_expiry then holds the lease)
        self._full: dict[str, float] = {}
        # (expires_at, key); entries whose key was discarded or re-added are stale and skipped when popped
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        """Keys held, expired ones not yet evicted included."""
        return len(self._expiry)

    async def claim(self, key: str, expires_at: float, *, token: str, lease: float | None = None) -> Claim:
        """Hold ``key`` for ``token`` until ``expires_at`` (with ``lease``: in progress until ``min(lease,
        expires_at)`` only) when it is free (or had expired, or its lease lapsed): :attr:`Claim.NEW`; else
        :attr:`Claim.IN_PROGRESS` or :attr:`Claim.DONE`, as its holder is.

        Raises:
            InvalidArgumentType: ``key`` or ``token`` is not a str.
            InvalidRequest: ``expires_at`` or ``lease`` is not a finite number of seconds, or the clock gave none
                (the handler then answers 500 and processes nothing: judgement call, a clock at +infinity would
                otherwise evict every live entry and let every replay through).
        """
        if not isinstance(token, str):
            raise InvalidArgumentType(f"token must be a str, not {type(token).__name__}")
        if lease is not None and not _finite(lease):
            raise InvalidRequest("lease must be a finite unix time in seconds")
        held = expires_at if lease is None or not _finite(expires_at) else min(lease, expires_at)
        if not self._put(key, held):
            return Claim.IN_PROGRESS if key in self._tokens else Claim.DONE
        self._tokens[key] = token
        if held != expires_at:
            self._full[key] = expires_at
        return Claim.NEW

    async def renew(self, key: str, *, token: str, until: float) -> bool:
        """Extend the lease of ``key`` to ``min(until, expires_at)`` if ``token`` holds it in progress and its lease
        has not lapsed: True; else False (nothing changed).

        Raises:
            InvalidRequest: ``until`` is not a finite number of seconds, or the clock gave none.
        """
        if not _finite(until):
            raise InvalidRequest("until must be a finite unix time in seconds")
        if self._tokens.get(key) != token or self._lapsed(key):
            return False
        full = self._full.get(key)
        if full is None:  # claimed without a lease (or renewed up to its expiry): held until it expires already
            return True
        held = min(until, full)
        if held > self._expiry[key]:
            if held == full:
                del self._full[key]
            self._set(key, held)
        return True

    async def finish(self, key: str, *, token: str) -> None:
        """Mark ``key`` done if ``token`` holds it (under a lease: one not lapsed), kept until its ``expires_at``."""
        if self._tokens.get(key) == token and not (key in self._full and self._lapsed(key)):
            del self._tokens[key]
            full = self._full.pop(key, None)
            if full is not None:
                self._set(key, full)

    async def release(self, key: str, *, token: str) -> None:
        """Forget ``key`` if ``token`` holds it, in progress; its heap entry goes stale."""
        if self._tokens.get(key) == token:
            del self._tokens[key]
            self._full.pop(key, None)
            self._expiry.pop(key, None)

    async def add(self, key: str, expires_at: float) -> bool:
        """The old protocol's add: True and remember ``key`` as done until ``expires_at`` when it is new (or had
        expired), else False.

        Raises:
            InvalidArgumentType: ``key`` is not a str.
            InvalidRequest: as :meth:`claim`.
        """
        return self._put(key, expires_at)

    async def discard(self, key: str) -> None:
        """The old protocol's discard: forget ``key``, whoever holds it; its heap entry goes stale."""
        self._expiry.pop(key, None)
        self._tokens.pop(key, None)
        self._full.pop(key, None)

    def _now(self) -> float:
        """The clock's unix time (``InvalidRequest`` when it gives no finite number)."""
        now = self._clock()
        if not _finite(now):
            raise InvalidRequest("the seen store's clock must give a finite unix time in seconds")
        return now

    def _lapsed(self, key: str) -> bool:
        """Whether the entry of ``key`` (held) has expired, its lease lapsed, though not yet evicted: it is free,
        as it would be in a store whose entries vanish on time (Redis)."""
        return self._expiry[key] < self._now()

    def _set(self, key: str, expires_at: float) -> None:
        """Set the expiry of ``key`` to ``expires_at``; a former heap entry of it goes stale."""
        self._expiry[key] = expires_at
        heapq.heappush(self._heap, (expires_at, key))
        if len(self._heap) > 2 * self._max:  # too many stale entries (discards, renewals): rebuild from the live
            self._heap = [(e, k) for k, e in self._expiry.items()]
            heapq.heapify(self._heap)

    def _put(self, key: str, expires_at: float) -> bool:
        """Record ``key`` until ``expires_at`` (no token): True when it was not there, else False (left as is)."""
        if not isinstance(key, str):
            raise InvalidArgumentType(f"key must be a str, not {type(key).__name__}")
        if not _finite(expires_at):
            raise InvalidRequest("expires_at must be a finite unix time in seconds")
        self._evict(self._now())
        if key in self._expiry:
            return False
        while len(self._expiry) >= self._max and self._heap:
            self._pop()
        self._set(key, expires_at)
        return True

    def _evict(self, now: float) -> None:
        """Drop every entry expired at ``now``. One heap entry at a time: a stale one (its key discarded, or
        re-added with another expiry) is only dropped from the heap, never taken for the next live entry, which
        may expire much later."""
        # an entry is live up to and including expires_at, as verify accepts an age equal to the tolerance
        while self._heap and self._heap[0][0] < now:
            expires_at, key = heapq.heappop(self._heap)
            if self._expiry.get(key) == expires_at:
                del self._expiry[key]
                self._tokens.pop(key, None)
                self._full.pop(key, None)

    def _pop(self) -> None:
        """Drop the live entry closest to expiry (skipping stale heap entries): the eviction when full. A key is
        only removed through a heap entry holding its current expiry."""
        while self._heap:
            expires_at, key = heapq.heappop(self._heap)
            if self._expiry.get(key) == expires_at:
                del self._expiry[key]
                self._tokens.pop(key, None)
                self._full.pop(key, None)
                return


def _finite(value: object) -> bool:
    """A finite number of seconds (a bool is not one; an int always is, however large: it compares exactly)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
