"""Many workers, one account: the rate limit, the ``Retry-After`` pause and webhook de-duplication shared through
Redis, for a backend that runs several processes (web workers, often on several machines) with one client id.

An optional extra: ``pip install 'health_async[redis]'`` (redis-py's asyncio client). ``import health_async`` never
imports this module, nor redis.

* :class:`RedisLimiter`: a :class:`~health_async.SharedLimiter` for ``HealthClient(limiter=...)``: one request rate
  and one ``Retry-After`` pause for every process that uses the same Redis and ``name``.
* :class:`RedisSeenStore`: a :class:`~health_async.webhooks.SeenStore` whose entries expire on the server, so a
  webhook redelivered to another worker is recognised as a replay.
* :class:`RedisUnavailable`: what both raise when Redis cannot be reached (a
  :class:`~health_async.errors.TransportError` with ``sent=False``: nothing was sent to the service).

The ingest Ray engine keeps its own coordinator (an actor): Redis is the choice for web backends, Ray's for Ray jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ._limits import refused_wait
from .errors import InvalidArgumentType, InvalidRequest, TransportError

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_NAME",
    "DEFAULT_REPORT_DELAY",
    "DEFAULT_SOCKET_TIMEOUT",
    "DEFAULT_UNREPORTED_TTL",
    "RedisLimiter",
    "RedisSeenStore",
    "RedisUnavailable",
]

T = TypeVar("T")

logger = logging.getLogger("health_async.redis")

#: The default ``name``: every key of a limiter or a seen store starts with ``{name}:``.
DEFAULT_NAME: Final = "health_async"

#: Seconds a request admitted by a :class:`RedisLimiter` but not yet reported sent or unsent is counted at most: a
#: process that dies with requests admitted frees their places after this long.
DEFAULT_UNREPORTED_TTL: Final = 60.0

#: Seconds a :class:`RedisLimiter` keeps a sent/unsent report waiting for the next acquire to carry it, before it
#: sends it on its own (see :class:`RedisLimiter`, "Round trips").
DEFAULT_REPORT_DELAY: Final = 0.02

#: Connect and command timeout (seconds) of a Redis client built from a URL: a Redis that does not answer fails a
#: call within this long even when the call has no deadline of its own.
DEFAULT_SOCKET_TIMEOUT: Final = 2.0

#: Most connections to Redis of a limiter or store built from a URL; more concurrent calls wait for one (within
#: :data:`DEFAULT_SOCKET_TIMEOUT` and the call's deadline).
DEFAULT_MAX_CONNECTIONS: Final = 16

#: Most admissions a :class:`RedisLimiter` takes in one script run (for the requests waiting in this process, and,
#: when no other process waits, a few more for those about to come; see "Batches").
DEFAULT_MAX_BATCH: Final = 32

#: Seconds an admission taken ahead (a batch's spare) is kept for this process's next requests before it is handed
#: back unused (see :class:`RedisLimiter`, "Batches").
DEFAULT_LEASE: Final = 0.05

#: Seconds a waiting process keeps its place in the shared queue after the moment it was told to come back: a
#: process that comes later (a busy event loop) loses its place and queues again at the back.
_CLAIM_GRACE: Final = 0.05

#: The errors of a Redis call that mean "Redis cannot be used now" (its own, and the socket's).
_REDIS_ERRORS: Final = (redis.exceptions.RedisError, OSError)

# The limiter, in one script run atomically by the server, on the server's clock (TIME, microseconds as integers:
# exact in a double up to 2**53). KEYS (one hash tag, so one Redis Cluster slot): sent (zset member -> when it was
# sent), held (member -> when its admission expires unreported: admitted at that less the TTL), pause (the end of
# the shared pause), queue (process -> since when it waits for its turn), claims (process -> when its place in the
# queue lapses). ARGV: 1 the mode ("a" acquire, "r" only the reports, "p" pause: ARGV[2] its length), 2 the
# window's count, 3 its length, 4 the unreported TTL, 5 this process, 6 the admissions it needs (its waiters), 7
# those it would take (with spares), 8 the claim grace, 9 the first member number, 10 the reports' count, then
# (member, age in microseconds or -1 for unsent) pairs; a sent request is stamped at the server's now less its age
# as measured by the reporter, so no clock is compared across machines (the stamp errs late by the report's
# one-way trip: the safe side). Answer: {admitted, wait in microseconds (0: none; the admitted members are the
# process's ARGV[9], ARGV[9] + 1, ...)}.
#
# Fairness: processes that wait queue in Redis, oldest first; each one ahead of a process claims one slot that frees
# (a process served goes to the back while it still waits: round robin between processes, whatever their number of
# waiting requests). A process refused is told when its own slot frees (the j-th entry to leave the window, j its
# place in the queue), so the waiters of different processes come back one after the other instead of racing for
# the same moment; one that does not come back within the grace loses its place.
_SCRIPT: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local mode = ARGV[1]
if mode == 'p' then
  local untl = now + tonumber(ARGV[2])
  local cur = tonumber(redis.call('GET', KEYS[3]) or '0')
  if untl > cur then
    redis.call('SET', KEYS[3], string.format('%.0f', untl), 'PX', math.ceil(tonumber(ARGV[2]) / 1000) + 1000)
  end
  return {0, 0}
end
local n = tonumber(ARGV[2])
local w = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local reports = tonumber(ARGV[10])
for i = 0, reports - 1 do
  local m = ARGV[11 + 2 * i]
  local age = tonumber(ARGV[12 + 2 * i])
  redis.call('ZREM', KEYS[2], m)
  if age >= 0 and age < w then
    redis.call('ZADD', KEYS[1], now - age, m)
  end
end
if reports > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil(w / 1000) + 1000)
end
if mode == 'r' then
  return {0, 0}
end
local pause = tonumber(redis.call('GET', KEYS[3]) or '0')
if pause > now then
  return {0, pause - now}
end
local want = tonumber(ARGV[7])
if n == 0 then
  return {want, 0}
end
local me = ARGV[5]
local need = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - w)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now)) do
  redis.call('ZREM', KEYS[4], gone)
  redis.call('ZREM', KEYS[5], gone)
end
local count = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
local free = n - count
local waiting = redis.call('ZCARD', KEYS[4])
local rank = redis.call('ZRANK', KEYS[4], me)
local ahead, behind = waiting, 0
if rank then
  ahead = rank
  behind = waiting - rank - 1
end
local total = ahead + behind + 1
local granted = 0
if free - ahead >= 1 then
  if total == 1 then
    granted = math.min(free, want)
  else
    granted = math.min(need, free - ahead, math.max(1, math.floor(free / total)))
  end
end
if granted > 0 then
  local base = tonumber(ARGV[9])
  for i = 0, granted - 1 do
    redis.call('ZADD', KEYS[2], now + ttl, me .. ':' .. string.format('%.0f', base + i))
  end
  redis.call('PEXPIRE', KEYS[2], math.ceil(ttl / 1000) + 1000)
end
if granted >= need then
  if rank then
    redis.call('ZREM', KEYS[4], me)
    redis.call('ZREM', KEYS[5], me)
  end
  return {granted, 0}
end
if granted > 0 or not rank then
  redis.call('ZADD', KEYS[4], now, me)
end
local place = redis.call('ZRANK', KEYS[4], me)
count = count + granted
local j = place - (n - count)
if j > count - 1 then j = count - 1 end
local at = now + 10000
if j < 0 then
  at = now
elseif j >= 0 then
  local sent = redis.call('ZRANGE', KEYS[1], 0, j, 'WITHSCORES')
  local held = redis.call('ZRANGE', KEYS[2], 0, j, 'WITHSCORES')
  local a, b = 1, 1
  for _ = 0, j do
    local x = sent[a + 1] and tonumber(sent[a + 1]) + w
    local y = held[b + 1] and tonumber(held[b + 1]) - ttl + w
    if x and (not y or x <= y) then
      at = x
      a = a + 2
    elseif y then
      at = y
      b = b + 2
    end
  end
end
local wait = math.max(at - now, 1000)
redis.call('ZADD', KEYS[5], now + wait + tonumber(ARGV[8]), me)
redis.call('PEXPIRE', KEYS[4], math.ceil(w / 1000) + 60000)
redis.call('PEXPIRE', KEYS[5], math.ceil(w / 1000) + 60000)
return {granted, wait}
"""
_SHA: Final = hashlib.sha1(_SCRIPT.encode(), usedforsecurity=False).hexdigest()


class RedisUnavailable(TransportError):
    """Redis could not be reached, did not answer in time, or refused a command (a
    :class:`~health_async.errors.TransportError`, ``sent=False``: nothing went to the service, so the client's
    :class:`~health_async.RetryPolicy` retries it within the call's deadline, and a call made once Redis is back
    goes through). The message names the Redis error's type only, never the URL (it may hold a password)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, sent=False)


def _connect(client: str | aioredis.Redis, owner: str) -> tuple[aioredis.Redis, bool]:
    """The Redis client to use, and whether we own it (built from a URL: then closed by ``aclose``)."""
    if isinstance(client, str):
        try:
            # a plain pool: its connections are bounded by the limiter's or the store's own semaphore
            # (DEFAULT_MAX_CONNECTIONS commands at once), about 30 µs a command cheaper than redis-py's blocking pool
            pool = aioredis.ConnectionPool.from_url(
                client,
                socket_connect_timeout=DEFAULT_SOCKET_TIMEOUT,
                socket_timeout=DEFAULT_SOCKET_TIMEOUT,
                # one immediate retry: the first command on a connection that a Redis restart closed fails, the
                # retry opens a new one; no backoff, the caller's deadline and RetryPolicy do the waiting
                retry=Retry(NoBackoff(), 1),
            )
            built = aioredis.Redis.from_pool(pool)
        except ValueError:  # the message may quote the URL
            raise InvalidRequest(f"{owner}: not a Redis URL (redis://, rediss:// or unix://)") from None
        return built, True
    if isinstance(client, aioredis.Redis):
        return client, False
    raise InvalidArgumentType(f"{owner}: redis must be a URL or a redis.asyncio.Redis")


def _check_name(name: object, owner: str) -> str:
    if not isinstance(name, str) or not name or "{" in name or "}" in name:
        raise InvalidRequest(f"{owner}: name must be a non-empty string without braces")
    return name


async def _call(what: str, slots: asyncio.Semaphore, call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` (a Redis command, made once a slot is free) within ``slots``, its failures as
    :class:`RedisUnavailable`; a cancellation goes through."""
    try:
        async with slots:
            return await call()
    except _REDIS_ERRORS as exc:
        raise RedisUnavailable(f"{what}: Redis cannot be used: {type(exc).__name__}") from None


class RedisLimiter:
    """A :class:`~health_async.SharedLimiter` backed by Redis: one request rate and one ``Retry-After`` pause for
    every process (on every machine) that uses the same Redis and ``name``.

    ``HealthClient(limiter=RedisLimiter("redis://redis:6379/0", rate_limit=20))`` in each worker: together they
    send at most ``rate_limit`` requests per second to the service's API, and a 429/503 with ``Retry-After`` that
    any of them gets holds back all of them.

    **The rate** is held in every one-second window *as the service counts arrivals*, with the rule of the client's
    own ``rate_limit`` (:class:`~health_async._limits.Limits`): a request is admitted only when fewer than
    ``max(1, floor(rate_limit))`` requests were sent in the last ``max(1, floor(rate_limit)) / rate_limit`` seconds,
    counting those admitted but not reported yet as sent now. The client reports each request when it really left
    (``sent``) or that it never did (``unsent``), so a slow connect shifts the requests behind it instead of
    bunching them. Everything is decided by one Lua script, atomically, on **the Redis server's clock** (``TIME``):
    the machines' clocks are never compared, so skew between them does not matter; a report carries how long ago
    its request left, measured on the reporter's monotonic clock.

    **Fairness**: the requests of one process wait in arrival order, and one task of the process asks Redis for
    all of them. Processes whose requests wait queue in Redis, oldest first, and are served in turn (one slot
    each as slots free, round robin: a process's share does not grow with its number of waiting requests). A
    process refused is told when *its* slot frees (from the entries of the window, not by polling), so the
    processes come back one after the other rather than all racing for the same instant; one that comes back more
    than a few tens of milliseconds late (a busy event loop) loses its place and queues again.

    **Batches**: one script run admits as many of this process's waiting requests as the window and the queue
    allow (at most ``max_batch``). When no other process waits, it also takes a few spares for the requests about
    to come (as many as the last batch used, doubling while they are all used, at most what the rate gives in
    ``lease`` seconds): a spare unused after ``lease`` seconds is handed back. A busy process so makes one round
    trip for many requests; a spare counts in the window from when it is taken (the safe side). Judgement call: a
    pause set by another process is seen at the next script run, so a spare already taken may still be used up to
    ``lease`` seconds into it (this process's own pauses drop its spares at once).

    **The pause**: :meth:`pause` holds this process back at once and sets the shared pause on the server (in the
    background: ``pause`` is not a coroutine); every sharer's next admission waits for it.

    **Deadlines**: :meth:`acquire` returns ``False`` at once when the wait (the pause, or this process's turn)
    would end after the call's deadline; the client also stops any wait at the deadline.

    **Round trips**: the sent/unsent reports ride on the next script run of this process; one that no script run
    picks up within ``report_delay`` seconds is sent by itself (off the request's path: nobody waits for it).

    **When Redis cannot be reached** (judgement call: an error, not a silent fallback): an admission fails with
    :class:`RedisUnavailable`, a ``TransportError`` with ``sent=False``, within the call's deadline (and within
    :data:`DEFAULT_SOCKET_TIMEOUT` for a client built from a URL). The client's retry policy retries it like a
    refused connection; the limiter holds no state that a Redis outage breaks, so calls go through again as soon
    as Redis is back (a restarted Redis starts with an empty window: the rate may be exceeded once, for one
    window, by what was sent just before the restart). Falling back to a per-process limit instead would multiply
    the account's rate by the number of workers without anyone noticing, until the service answers 429s. An outage
    is logged once (a warning on the logger ``health_async.redis`` when it begins, an info line when Redis answers
    again), not once per request.

    Args:
        redis: a URL (``redis://[[user]:password@]host:port/db``, ``rediss://``, ``unix://``; this limiter then
            owns a pool of at most :data:`DEFAULT_MAX_CONNECTIONS` connections and :meth:`aclose` closes it) or a
            ``redis.asyncio.Redis`` that you own and close (its timeouts, retries and pool are yours: keep the
            timeouts short; this limiter still sends at most :data:`DEFAULT_MAX_CONNECTIONS` commands at once).
        rate_limit: requests per second for the whole account, or ``None`` to share only the pause.
        name: the key prefix: sharers with the same Redis and name share one rate and one pause. Keys are
            ``{name}:rate:sent``, ``{name}:rate:held``, ``{name}:pause``, ``{name}:rate:queue`` and
            ``{name}:rate:claims`` (the braces put them in one Redis Cluster slot, as the script needs).
        unreported_ttl: seconds an admitted request is counted before its report at most (a process that died
            frees its places after this long); default :data:`DEFAULT_UNREPORTED_TTL`.
        report_delay: seconds a report waits for a script run to carry it; default :data:`DEFAULT_REPORT_DELAY`.
        max_batch: most admissions taken in one script run; default :data:`DEFAULT_MAX_BATCH` (1: one round trip
            per request, no spares).
        lease: seconds a spare admission is kept before it is handed back; default :data:`DEFAULT_LEASE`.

    Use it from one event loop (the client's), and ``await limiter.aclose()`` (or ``async with``) when done.
    """

    def __init__(
        self,
        redis: str | aioredis.Redis,
        *,
        rate_limit: float | None = None,
        name: str = DEFAULT_NAME,
        unreported_ttl: float = DEFAULT_UNREPORTED_TTL,
        report_delay: float = DEFAULT_REPORT_DELAY,
        max_batch: int = DEFAULT_MAX_BATCH,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        owner = "RedisLimiter"
        if rate_limit is not None and (
            isinstance(rate_limit, bool)
            or not isinstance(rate_limit, int | float)
            or not math.isfinite(rate_limit)
            or rate_limit <= 0
        ):
            raise InvalidRequest(f"{owner}: rate_limit must be > 0 requests per second, or None")
        for label, value in (("unreported_ttl", unreported_ttl), ("report_delay", report_delay), ("lease", lease)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise InvalidRequest(f"{owner}: {label} must be a number of seconds >= 0")
        if unreported_ttl <= 0:
            raise InvalidRequest(f"{owner}: unreported_ttl must be > 0 seconds")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or not 1 <= max_batch <= 1000:
            raise InvalidRequest(f"{owner}: max_batch must be an integer from 1 to 1000")
        self.name = _check_name(name, owner)
        self.rate_limit = None if rate_limit is None else float(rate_limit)
        self._redis, self._owned = _connect(redis, owner)
        self._slots = asyncio.Semaphore(DEFAULT_MAX_CONNECTIONS)  # Redis commands at once (so connections)
        tag = f"{{{self.name}}}"
        self._keys = (
            f"{tag}:rate:sent",
            f"{tag}:rate:held",
            f"{tag}:pause",
            f"{tag}:rate:queue",
            f"{tag}:rate:claims",
        )
        count = max(1, int(rate_limit)) if rate_limit is not None else 0
        window = count / rate_limit if rate_limit is not None else 0.0
        # the script's fixed arguments: the window's count and length, the unreported TTL (microseconds)
        self._fixed = (str(count), str(math.ceil(window * 1e6)), str(math.ceil(unreported_ttl * 1e6)))
        self._report_delay = float(report_delay)
        self._lease = float(lease)
        # spares: at most what the rate gives in a lease (none at a low rate, where they would only keep slots
        # from the other processes), and never more than a batch
        spares = max_batch if rate_limit is None else min(max_batch, math.ceil(rate_limit * self._lease))
        self._max_batch = max_batch
        self._max_spares = max(1, spares) if lease > 0 else 1
        self._batch = 1  # how many to take in the next script run (the spares' target)
        self._prefix = secrets.token_hex(6)  # this process's name in the queue, its members' prefix
        self._next_id = 0
        self._held: deque[str] = deque()  # admitted here and used, not reported yet (oldest first)
        self._spares: deque[tuple[str, float]] = deque()  # admitted, not used yet: (member, lease end)
        self._spares_timer: asyncio.TimerHandle | None = None
        self._spares_dry = False  # the last batch was used up (so the next may be larger)
        self._waiters: deque[tuple[asyncio.Future[str | float], float | None]] = deque()  # (its answer, deadline)
        self._fetcher: asyncio.Task[None] | None = None  # the one task that asks Redis for the waiters
        self._wake_at = 0.0  # when the fetcher asks again (time.monotonic()), while it sleeps
        self._reports: list[tuple[str, float | None]] = []  # (member, when it was sent; None: unsent), to send
        self._flush_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._paused_until = 0.0  # the pause this process knows of (time.monotonic())
        self._outage_since: float | None = None  # when Redis stopped answering (time.monotonic()), while it does
        self._closed = False

    def __repr__(self) -> str:
        return f"RedisLimiter(name={self.name!r}, rate_limit={self.rate_limit!r})"

    async def __aenter__(self) -> RedisLimiter:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # ---------------------------------------------------------------- the SharedLimiter protocol

    async def acquire(self, deadline: float | None = None) -> bool:
        """Wait until one more request may be sent (the shared pause, the shared rate), but not past ``deadline``
        (a ``time.monotonic()`` instant): ``False`` at once, holding nothing, when the wait would end after it.

        Raises:
            RedisUnavailable: Redis could not be used, or this limiter is closed (nothing was sent).
        """
        if self._closed:
            raise RedisUnavailable("RedisLimiter: closed")
        if not self._waiters and self._paused_until <= time.monotonic():
            member = self._take_spare()
            if member is not None:  # a spare of the last batch: no round trip
                self._held.append(member)
                return True
        if deadline is not None:
            wait = max(self._paused_until, self._wake_at) - time.monotonic()
            if wait > 0 and time.monotonic() + wait > deadline:  # the next try comes too late for this call
                return self._refused(wait)
        answer: asyncio.Future[str | float] = asyncio.get_running_loop().create_future()
        self._waiters.append((answer, deadline))
        if self._fetcher is None:
            self._fetcher = asyncio.ensure_future(self._fetch())
        try:
            result = await answer
        except asyncio.CancelledError:
            if answer.done() and not answer.cancelled() and isinstance(taken := answer.result(), str):
                self._give_spare(taken)  # admitted as the cancellation came: for the next waiter
            else:
                self._leave(answer)
            raise
        if isinstance(result, str):
            self._held.append(result)
            return True
        return self._refused(result)

    def pause(self, seconds: float) -> None:
        """The service asked for a pause: hold this process back now, and every sharer through Redis (sent in the
        background; a failure to reach Redis is logged, and this process still pauses)."""
        if seconds <= 0 or self._closed:
            return
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        self._drop_spares(everything=True)
        self._spawn(self._send_pause(seconds))

    def sent(self, at: float) -> None:
        """A request admitted here left at ``at`` (``time.monotonic()``): count it from then."""
        self._report(at)

    def unsent(self) -> None:
        """A request admitted here never left: free its place."""
        self._report(None)

    # ---------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        """Hand back the spares and send the reports still waiting (best effort, within
        :data:`DEFAULT_SOCKET_TIMEOUT`), finish the background sends, and close the connection pool if this limiter
        built it from a URL. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._fetcher is not None:
            self._fetcher.cancel()
        self._fail_waiters("RedisLimiter: closed")
        self._drop_spares(everything=True)
        for timer in (self._flush_timer, self._spares_timer):
            if timer is not None:
                timer.cancel()
        self._flush_timer = self._spares_timer = None
        if self._reports:
            self._spawn(self._flush())
        if self._tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DEFAULT_SOCKET_TIMEOUT):
                    await asyncio.gather(*self._tasks, return_exceptions=True)
            for task in self._tasks:
                task.cancel()
        if self._owned:
            with contextlib.suppress(*_REDIS_ERRORS):
                await self._redis.aclose()

    # ---------------------------------------------------------------- machinery

    @staticmethod
    def _refused(wait: float) -> bool:
        """Refused: the wait it would have taken, for the client's message (in this task's context)."""
        refused_wait.set(wait)
        return False

    def _leave(self, answer: asyncio.Future[str | float]) -> None:
        """A waiter went away (cancelled: the client's deadline, or its caller's): out of the queue; the last one
        stops the fetcher's sleep, so that the next request asks at once (what it waited for may have changed)."""
        waiters = self._waiters
        for entry in waiters:
            if entry[0] is answer:
                waiters.remove(entry)
                break
        fetcher = self._fetcher
        if fetcher is not None and self._wake_at and not any(not a.done() for a, _ in waiters):
            self._fetcher = None
            self._wake_at = 0.0
            fetcher.cancel()

    async def _fetch(self) -> None:
        """The one task of this process that asks Redis, for every waiter in arrival order, until none is left."""
        waiters = self._waiters
        try:
            while True:
                while waiters and waiters[0][0].done():  # cancelled, or the client stopped waiting
                    waiters.popleft()
                if not waiters:
                    return
                wait = self._paused_until - time.monotonic()
                if wait <= 0:
                    while waiters and (member := self._take_spare()) is not None:
                        self._give_spare(member)
                    if not waiters:
                        continue
                    wait = await self._ask()
                    if not waiters or wait <= 0:
                        continue
                self._wake_at = until = time.monotonic() + wait
                for entry in list(waiters):  # those that cannot wait that long: refused at once
                    answer, deadline = entry
                    if deadline is not None and deadline < until and not answer.done():
                        answer.set_result(wait)
                        waiters.remove(entry)
                try:
                    await asyncio.sleep(wait)
                finally:
                    self._wake_at = 0.0
        except RedisUnavailable as exc:
            self._fail_waiters(str(exc))
        except Exception:  # a bug, or an answer not of this script: the waiters must not hang
            logger.exception("RedisLimiter %r: admission failed", self.name)
            self._fail_waiters("RedisLimiter: admission failed")
        finally:
            if self._fetcher is asyncio.current_task():
                self._fetcher = None

    async def _ask(self) -> float:
        """One script run for the waiters: hand out what it admits (spares to the pool), and return how long to
        wait before the next run (0: none)."""
        need = min(sum(1 for answer, _ in self._waiters if not answer.done()), self._max_batch)
        if need == 0:
            return 0.0
        if self._spares_dry:  # the last batch was used up: take more this time
            self._batch = min(self._max_spares, self._batch * 2)
            self._spares_dry = False
        want = min(self._max_batch, max(need, self._batch))
        base = self._next_id
        self._next_id += want
        reports = self._take_reports()
        argv = ["a", *self._fixed, self._prefix, str(need), str(want), str(int(_CLAIM_GRACE * 1e6)), str(base)]
        try:
            granted, wait = await self._run(argv, reports)
        except BaseException:
            self._give_back(reports)
            if self.rate_limit is not None:  # the script may have run before the failure: free what it admitted
                self._reports.extend((f"{self._prefix}:{base + i}", None) for i in range(want))
                self._schedule_flush()
            raise
        until = time.monotonic() + self._lease
        counted = self.rate_limit is not None
        for i in range(granted):
            self._hand_out(f"{self._prefix}:{base + i}" if counted else "", until)
        if granted >= want and not self._spares:  # all taken by waiters: the demand is there for more
            self._spares_dry = True
        return wait / 1e6

    def _hand_out(self, member: str, until: float) -> None:
        """An admission: to the first waiter still waiting, else to the spares (kept until ``until``)."""
        waiters = self._waiters
        while waiters:
            answer, _ = waiters.popleft()
            if not answer.done():
                answer.set_result(member)
                return
        self._spares.append((member, until))
        self._arm_spares_timer()

    def _take_spare(self) -> str | None:
        spares = self._spares
        now = time.monotonic()
        while spares:
            member, until = spares.popleft()
            if until > now:
                if not spares:  # used up within its lease: the next batch may be larger
                    self._spares_dry = True
                return member
            self._hand_back(member)
        return None

    def _give_spare(self, member: str) -> None:
        """An admission whose taker went away: to the next waiter, else back to the spares."""
        self._hand_out(member, time.monotonic() + self._lease)

    def _drop_spares(self, *, everything: bool = False) -> None:
        """Hand back the spares whose lease is over (``everything``: all of them); the next batches are smaller."""
        now = time.monotonic()
        spares = self._spares
        dropped = False
        while spares and (everything or spares[0][1] <= now):
            self._hand_back(spares.popleft()[0])
            dropped = True
        if dropped:
            self._batch = max(1, self._batch // 2)
            self._spares_dry = False
        if spares:
            self._arm_spares_timer()

    def _hand_back(self, member: str) -> None:
        if member:  # counted in the window: free its place
            self._reports.append((member, None))
            if not self._closed:
                self._schedule_flush()

    def _arm_spares_timer(self) -> None:
        if self._spares_timer is None and self._spares and not self._closed:
            loop = asyncio.get_running_loop()
            delay = max(0.0, self._spares[0][1] - time.monotonic())
            self._spares_timer = loop.call_later(delay, self._spares_due)

    def _spares_due(self) -> None:
        self._spares_timer = None
        self._drop_spares()

    def _fail_waiters(self, message: str) -> None:
        while self._waiters:
            answer, _ = self._waiters.popleft()
            if not answer.done():
                answer.set_exception(RedisUnavailable(message))

    async def _run(self, argv: list[str], reports: list[tuple[str, float | None]]) -> tuple[int, int]:
        """Run the script with ``argv`` (its mode and fixed arguments) and ``reports``: ``(admitted, wait in
        microseconds)``."""
        now = time.monotonic()
        argv.append(str(len(reports)))
        for member, at in reports:
            argv.append(member)
            argv.append("-1" if at is None else str(max(0, int((now - at) * 1e6))))
        redis_client = self._redis
        try:
            async with self._slots:
                try:
                    result = await redis_client.evalsha(_SHA, len(self._keys), *self._keys, *argv)
                except redis.exceptions.NoScriptError:  # a new or restarted server: EVAL loads it (one trip too)
                    result = await redis_client.eval(_SCRIPT, len(self._keys), *self._keys, *argv)
        except _REDIS_ERRORS as exc:
            if self._outage_since is None:
                self._outage_since = time.monotonic()
                logger.warning(
                    "RedisLimiter %r: Redis cannot be used (%s): calls fail with RedisUnavailable, and request "
                    "reports and pauses wait, until it answers again",
                    self.name,
                    type(exc).__name__,
                )
            raise RedisUnavailable(f"RedisLimiter: Redis cannot be used: {type(exc).__name__}") from None
        if self._outage_since is not None:
            logger.info(
                "RedisLimiter %r: Redis answers again, after %.1f s", self.name, time.monotonic() - self._outage_since
            )
            self._outage_since = None
        return int(result[0]), int(result[1])

    def _report(self, at: float | None) -> None:
        if not self._held:
            return
        member = self._held.popleft()
        if not member or self._closed:  # nothing counted (no rate), or too late: its place expires by itself
            return
        self._reports.append((member, at))
        self._schedule_flush()

    def _take_reports(self) -> list[tuple[str, float | None]]:
        reports, self._reports = self._reports, []
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        return reports

    def _give_back(self, reports: list[tuple[str, float | None]]) -> None:
        if reports:
            self._reports[:0] = reports

    def _schedule_flush(self) -> None:
        if self._flush_timer is None and self._reports:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # reported outside a loop: the next acquire carries it
                return
            self._flush_timer = loop.call_later(self._report_delay, self._flush_now)

    def _flush_now(self) -> None:
        self._flush_timer = None
        if self._reports:
            self._spawn(self._flush())

    async def _flush(self) -> None:
        reports = self._take_reports()
        if not reports:
            return
        try:
            await self._run(["r", *self._fixed, "", "0", "0", "0", "0"], reports)
        except RedisUnavailable:
            # kept for the next try (the outage is logged once, by _run); a report lost for good only keeps its
            # place until its TTL (the safe side)
            self._give_back(reports)
            if not self._closed:
                self._schedule_flush_later()

    def _schedule_flush_later(self) -> None:
        if self._flush_timer is None:
            loop = asyncio.get_running_loop()
            self._flush_timer = loop.call_later(max(self._report_delay, 0.5), self._flush_now)

    async def _send_pause(self, seconds: float) -> None:
        # a failure is the outage's, logged once by _run: this process pauses all the same
        with contextlib.suppress(RedisUnavailable):
            await self._run(["p", str(math.ceil(seconds * 1e6))], [])

    def _spawn(self, work: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class RedisSeenStore:
    """A :class:`~health_async.webhooks.SeenStore` in Redis: a webhook accepted by one worker is a replay for every
    other worker using the same Redis and ``name``.

    :meth:`add` is one ``SET key 1 NX PX ttl``: atomic on the server, and the entry expires on the server. The
    time to live is ``expires_at`` less this process's clock, a duration, so skew between the machines' clocks
    shifts an expiry by no more than the skew (the receivers' expiry is the signed time plus the tolerance, after
    which the timestamp check refuses the webhook anyway). An ``expires_at`` already past is kept one millisecond.

    When Redis cannot be reached, :meth:`add` and :meth:`discard` raise :class:`RedisUnavailable`: the receivers
    then answer 500 and the service delivers the webhook again later (a webhook is never processed unchecked).

    Args:
        redis: a URL (this store owns the pool; :meth:`aclose` closes it) or a ``redis.asyncio.Redis`` you own.
        name: the key prefix: keys are ``{name}:seen:<key>``.
    """

    def __init__(self, redis: str | aioredis.Redis, *, name: str = DEFAULT_NAME) -> None:
        self.name = _check_name(name, "RedisSeenStore")
        self._redis, self._owned = _connect(redis, "RedisSeenStore")
        self._slots = asyncio.Semaphore(DEFAULT_MAX_CONNECTIONS)  # Redis commands at once (so connections)
        self._prefix = f"{{{self.name}}}:seen:"

    def __repr__(self) -> str:
        return f"RedisSeenStore(name={self.name!r})"

    async def __aenter__(self) -> RedisSeenStore:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def add(self, key: str, expires_at: float) -> bool:
        """Record ``key`` until the unix time ``expires_at``: True when it was not there, False for a replay.

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        ttl = max(1, math.ceil((expires_at - time.time()) * 1000))
        result = await _call(
            "RedisSeenStore", self._slots, lambda: self._redis.set(self._prefix + key, b"1", nx=True, px=ttl)
        )
        return bool(result)

    async def discard(self, key: str) -> None:
        """Forget ``key``.

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        await _call("RedisSeenStore", self._slots, lambda: self._redis.delete(self._prefix + key))

    async def aclose(self) -> None:
        """Close the connection pool if this store built it from a URL."""
        if self._owned:
            with contextlib.suppress(*_REDIS_ERRORS):
                await self._redis.aclose()
