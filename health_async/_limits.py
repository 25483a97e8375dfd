"""Client-wide limits shared by every call of one client: requests in flight, requests per second, and a
shared pause when the service asks for one (429 or 503 with ``Retry-After``).

Created lazily inside the running loop (asyncio primitives bind to it on first use).
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
import types
from collections import deque
from collections.abc import Awaitable, Generator
from contextvars import ContextVar
from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["Limits", "Overdue", "SharedLimiter", "Slots", "refused_wait", "within"]

T = TypeVar("T")

#: How long the wait was (seconds) that a shared limiter's ``acquire`` refused by returning ``False``, when it knows:
#: set by the limiter in the calling task's context, read by :class:`Limits` for the call's ``RequestTimeout``
#: message (a limiter that does not set it is reported with what was left of the call's budget).
refused_wait: ContextVar[float | None] = ContextVar("health_async_refused_wait", default=None)


@runtime_checkable
class SharedLimiter(Protocol):
    """Admission shared beyond one client: one account-wide request rate and one ``Retry-After`` pause for
    several clients (processes, Ray actors). Pass one as ``HealthClient(limiter=...)``; the client then asks it
    right before every request to the service's API, besides its own limits, and tells it of every pause the API
    asks for. :mod:`health_async.ingest`'s Ray engine has one backed by a coordinator actor.
    """

    async def acquire(self, deadline: float | None = None) -> bool:
        """Wait until one more request may be sent (the shared rate and the shared pause), but not past
        ``deadline`` (a ``time.monotonic()`` instant of this process, or ``None`` for no limit): return ``False``
        at once, holding nothing, when the wait would end after it (the call then fails as not sent). The client
        also stops waiting at the deadline whatever the limiter does."""

    def pause(self, seconds: float) -> None:
        """The service asked for a pause (429/503 with ``Retry-After``): hold back every sharer for ``seconds``."""

    # Optional, for a limiter that holds its rate at the moment of sending, as a client's own ``rate_limit`` does:
    # when it defines both ``sent(at: float) -> None`` and ``unsent() -> None``, the client reports every request
    # it acquired, once, as sent (``at``: the ``time.monotonic()`` instant it left) or as never sent (refused
    # connection, cancelled, overdue). A limiter without them is charged at ``acquire``.


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
    """Admission control for one client, applied at the moment a request is sent.

    * ``max_in_flight``: at most this many requests are on the wire at once (also the connector's limit for
      a session the client owns; a caller-owned session gets the same bound from here). A request takes its
      slot (its connection) first, and only then the pause and the rate below: callers that waited for a
      connection are admitted one by one when they get one, not charged while they waited.
    * ``rate``: optional requests per second, held in *every* one-second window **as the service counts
      arrivals**, the first included: a request is admitted only when fewer than ``max(1, floor(rate))`` were
      sent in the last ``max(1, floor(rate)) / rate`` seconds (one second for a whole ``rate``), counting the
      requests admitted but not yet on the wire (a cold connection still opening) as sent now. A request is
      stamped when it is really sent (:meth:`sent`; the client's own session reports the moment its headers
      go out, a caller's session the moment the answer comes, which is later and so errs on the safe side) and
      dropped from the count if it never left (:meth:`unsent`). So a connect that takes a second shifts the
      requests behind it instead of bunching them into one window. Burst behaviour: up to ``floor(rate)``
      requests may leave at once (at the start, or after a quiet second); a fractional rate below 1 spaces
      single requests ``1 / rate`` seconds apart.
    * ``pause(seconds, origin)``: every request to that origin waits until the pause has passed before it is
      sent, so that a 429/503 ``Retry-After`` stops all workers at once instead of each hammering on its own. A
      request waits before it takes a slot and checks again once it has one, so requests already waiting for a
      connection are held back too. The API's pause (``origin=None``) is shared with ``shared``; another origin's
      (a presigned storage host) holds back that origin only.
    * ``shared``: an optional :class:`SharedLimiter` asked after the above, for the API only (one account-wide
      limit), with the call's deadline.

    Every wait is bounded by the caller's deadline (:meth:`admit`): a call never waits in a pause, for a rate
    slot (in the queue of waiting calls, too) or for the shared limiter longer than its own time budget allows. The
    session bounds the wait for a slot (:meth:`wait_slot`) the same way.
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
        self._paused_until = 0.0  # the API's pause
        #: The ``time.monotonic()`` instant from which an API request needs no wait at all (:attr:`must_wait`
        #: is false): the end of the API's pause, or infinity with a rate limit or a shared limiter. One number,
        #: so that the session's hot path asks it with one comparison.
        self.free_at = math.inf if rate is not None or shared is not None else 0.0
        #: The ``time.monotonic()`` instant from which an API request waits for nothing but the shared limiter (the
        #: end of the API's pause), or infinity with a rate limit or without a shared limiter: the session's plain
        #: way then asks the shared limiter itself (:meth:`admit`), and takes the general way only for the rest.
        self.shared_at = 0.0 if rate is None and shared is not None else math.inf
        self._origin_pauses: dict[object, float] = {}  # other origins' (presigned storage hosts)
        self._window_count = max(1, int(rate)) if rate is not None else 1
        self._window = self._window_count / rate if rate is not None else 0.0
        self._sent: deque[float] = deque()  # when each request of the last window was sent
        self._pending = 0  # admitted by the rate, not yet sent nor dropped
        self._rate_lock = asyncio.Lock()
        self._rate_moved: asyncio.Future[None] | None = None  # woken when a pending request is sent or dropped
        # a limiter written before acquire() took the deadline is still bounded by it (asyncio.timeout below)
        self._shared_takes_deadline = shared is not None and _takes_argument(shared.acquire)
        #: the shared limiter wants each request it admitted reported sent or unsent (see SharedLimiter)
        self._shared_reports = (
            shared is not None and callable(getattr(shared, "sent", None)) and callable(getattr(shared, "unsent", None))
        )

    @property
    def in_flight(self) -> int:
        """Requests currently holding a slot."""
        return self.max_in_flight - self._free

    @property
    def pending(self) -> int:
        """Requests charged to the rate and not yet reported :meth:`sent` or :meth:`unsent` (0 when every call
        is over: a charge never reported would count against the rate for good)."""
        return self._pending

    def pause(self, seconds: float, origin: object = None) -> None:
        """Hold back every request to ``origin`` (``None``: the service's API, shared with the
        :class:`SharedLimiter`) for ``seconds`` from now (extends, never shortens)."""
        if seconds <= 0:
            return
        until = time.monotonic() + seconds
        if origin is None:
            self._paused_until = max(self._paused_until, until)
            self.free_at = max(self.free_at, self._paused_until)
            self.shared_at = max(self.shared_at, self._paused_until)
            if self.shared is not None:
                self.shared.pause(seconds)
        else:
            self._origin_pauses[origin] = max(self._origin_pauses.get(origin, 0.0), until)

    def paused_for(self, origin: object = None) -> float:
        """Seconds left of the current pause of ``origin`` (``None``: the API); 0 when none."""
        until = self._paused_until if origin is None else self._origin_pauses.get(origin, 0.0)
        return max(0.0, until - time.monotonic())

    @property
    def must_wait(self) -> bool:
        """Whether :meth:`admit` may have to wait for an API request (a pause is on, or a rate limit or a shared
        limiter is set): lets the hot path skip a coroutine call per request."""
        return self.free_at > time.monotonic()

    def must_wait_for(self, origin: object) -> bool:
        """:attr:`must_wait` for a request to another origin (its own pause, and the rate)."""
        return self.rate is not None or self._origin_pauses.get(origin, 0.0) > time.monotonic()

    async def wait_pause(self, deadline: float | None = None, origin: object = None) -> None:
        """Wait until ``origin``'s pause has passed (:class:`Overdue` at once if it would outlast ``deadline``)."""
        # a loop, not an Event: another 429 may extend the pause while we sleep
        while (wait := self.paused_for(origin)) > 0:
            _check(deadline, wait, "the service asked this client to pause (Retry-After)")
            await asyncio.sleep(wait)

    async def admit(
        self, deadline: float | None = None, pause_deadline: float | None = None, origin: object = None
    ) -> bool:
        """Wait for the pause, the rate limit and the shared limiter, right before a request is sent (its slot
        already held). Returns whether the request is to be reported (a rate slot was taken, or the shared limiter
        wants to know): then report it :meth:`sent` or :meth:`unsent`, with its ``origin``, once its attempt is over.

        ``deadline`` (a ``time.monotonic()`` instant) bounds every wait, ``pause_deadline`` the wait in a pause
        besides: when a wait would hold the call past them, :class:`Overdue` is raised at once (or, for the
        shared limiter, as soon as it says so or the deadline passes), without waiting in vain.
        """
        if pause_deadline is None or (deadline is not None and deadline < pause_deadline):
            pause_deadline = deadline
        if self.paused_for(origin) > 0:
            await self.wait_pause(pause_deadline, origin)
        rated = shared = False
        if self.rate is not None:
            await self._take_rate(deadline)
            rated = True
        try:
            if self.shared is not None and origin is None:
                await self._acquire_shared(deadline)
                shared = self._shared_reports
            if self.paused_for(origin) > 0:  # a pause that began while waiting for the rate or the limiter
                await self.wait_pause(pause_deadline, origin)
        except BaseException:
            if rated:
                self._drop()
            if shared:
                self.shared.unsent()  # type: ignore[union-attr]
            raise
        return rated or shared

    async def _acquire_shared(self, deadline: float | None) -> None:
        """The shared limiter's admission, bounded by ``deadline``. Its ``acquire`` is run up to its first wait
        right here: one that admits without waiting (a spare in hand, a limiter in this process) costs no timer;
        only a wait is put under ``asyncio.timeout`` (the client stops waiting at the deadline whatever the limiter
        does), and then goes on where it began, never asked twice."""
        shared = self.shared
        assert shared is not None
        refused_wait.set(None)
        remaining = 0.0
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Overdue("the shared limiter", 0.0)
        asking: Awaitable[bool] = shared.acquire(deadline) if self._shared_takes_deadline else shared.acquire()
        admitted: bool | None = None
        waits = True
        if type(asking) is types.CoroutineType:
            try:
                step = asking.send(None)
            except StopIteration as done:  # admitted (or refused) without waiting
                admitted, waits = done.value, False
            else:  # it waits: the rest of its wait, in this task, from where it stopped
                asking = _Resumed(asking, step)
        if waits:
            if deadline is None:
                admitted = await asking
            else:
                remaining = deadline - time.monotonic()
                try:
                    async with asyncio.timeout(max(remaining, 0.0)):
                        admitted = await asking
                except TimeoutError:
                    raise Overdue("the shared limiter", remaining) from None
        if admitted is False:
            wait = refused_wait.get()
            raise Overdue("the shared limiter", remaining if wait is None else wait)

    async def _take_rate(self, deadline: float | None) -> None:
        lock = self._rate_lock  # FIFO: waiters are served in arrival order
        # the wait in the queue is bounded by the deadline too, not only the wait once first in it
        await within(lock.acquire(), deadline, "the client's rate_limit (behind other waiting requests)")
        try:
            await self._take_rate_locked(deadline)
        finally:
            lock.release()

    async def _take_rate_locked(self, deadline: float | None) -> None:
        """:meth:`_take_rate` once first in the queue: a slot of the window, waiting no later than ``deadline``."""
        sent = self._sent
        while True:
            now = time.monotonic()
            while sent and now - sent[0] >= self._window:
                sent.popleft()
            if len(sent) + self._pending < self._window_count:
                self._pending += 1
                return
            # wait for the oldest stamp to leave the window, or for a pending request to be stamped
            wait = self._window - (now - sent[0]) if sent else None
            if wait is not None:
                _check(deadline, wait, "the client's rate_limit")
            elif deadline is not None:
                wait = deadline - now
                if wait <= 0:
                    raise Overdue("the client's rate_limit", 0.0)
            moved = self._rate_moved
            if moved is None or moved.done():
                moved = self._rate_moved = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(wait):
                    await asyncio.shield(moved)
            except TimeoutError:
                if not sent:  # only pending requests, none sent by the deadline
                    raise Overdue("the client's rate_limit", wait or 0.0) from None

    def sent(self, at: float | None = None, origin: object = None) -> None:
        """A request :meth:`admit` said to report went out (``at``: when, by ``time.monotonic()``; default now)."""
        stamp = time.monotonic() if at is None else at
        if origin is None and self._shared_reports:
            self.shared.sent(stamp)  # type: ignore[union-attr]
        if self.rate is None:
            return
        self._pending -= 1
        sent = self._sent
        if sent and stamp < sent[-1]:  # keep the stamps in order (a late report of an earlier send)
            stamp = sent[-1]
        sent.append(stamp)
        self._wake_rate()

    def unsent(self, origin: object = None) -> None:
        """A request :meth:`admit` said to report never left (refused connection, cancelled, overdue): not
        counted."""
        if origin is None and self._shared_reports:
            self.shared.unsent()  # type: ignore[union-attr]
        if self.rate is not None:
            self._drop()

    def _drop(self) -> None:
        self._pending -= 1
        self._wake_rate()

    def _wake_rate(self) -> None:
        moved = self._rate_moved
        if moved is not None and not moved.done():
            moved.set_result(None)


class _Resumed:
    """The rest of a coroutine that was run up to its first wait by hand (``step``: what it yielded there), to be
    awaited by the task that started it: the task waits on what the coroutine waits on, and whatever the task
    sends or throws in (a cancellation) goes to the coroutine, as if it had been awaited from the start."""

    __slots__ = ("_coro", "_step")

    def __init__(self, coro: types.CoroutineType[object, object, T], step: object) -> None:
        self._coro = coro
        self._step = step

    def __await__(self) -> Generator[object, object, T]:
        coro, step = self._coro, self._step
        while True:
            try:
                sent = yield step
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # thrown in by the task (a cancellation): the coroutine's to handle
                try:
                    step = coro.throw(exc)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
            else:
                try:
                    step = coro.send(sent)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]


async def within(wait: Awaitable[T], deadline: float | None, reason: str) -> T:
    """``wait``, cancelled at ``deadline`` (a ``time.monotonic()`` instant; ``None``: no limit): past it,
    :class:`Overdue` naming ``reason``. For waits that are safe to cancel (a lock, a slot, a shared fetch); a
    ``TimeoutError`` of ``wait``'s own is raised as it is."""
    if deadline is None:
        return await wait
    remaining = deadline - time.monotonic()
    try:
        async with asyncio.timeout(max(remaining, 0.0)) as scope:
            return await wait
    except TimeoutError:
        if not scope.expired():
            raise
        raise Overdue(reason, remaining) from None


class Overdue(Exception):
    """Waiting for admission would end after the caller's deadline (nothing was sent)."""

    def __init__(self, reason: str, wait: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


def _takes_argument(function: object) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def _check(deadline: float | None, wait: float, reason: str) -> None:
    if deadline is not None and time.monotonic() + wait > deadline:
        raise Overdue(reason, wait)
