"""Many workers, one account: the rate limit, the ``Retry-After`` pause and webhook de-duplication shared through
Redis, for a backend that runs several processes (web workers, often on several machines) with one client id.

An optional extra: ``pip install 'health_async[redis]'`` (redis-py's asyncio client). ``import health_async`` never
imports this module, nor redis.

* :class:`RedisLimiter`: a :class:`~health_async.SharedLimiter` for ``HealthClient(limiter=...)``: one request rate
  and one ``Retry-After`` pause for every process that uses the same Redis and ``name``.
* :class:`RedisSeenStore`: a :class:`~health_async.webhooks.SeenStore` whose entries expire on the server, so a
  webhook redelivered to another worker is recognised as a replay.
* :class:`RedisLinkOtpStore`: a :class:`~health_async.webhooks.LinkOtpStore` for the ABDM receivers'
  ``link_store=``: the pending links and OTPs of a patient's own search, so that a link requested at one worker is
  confirmed at any other (only an HMAC of each OTP is kept, under a key of the workers' configuration).
* :class:`RedisConsentBook`: a :class:`~health_async.resources.ConsentStore` shared by every worker, so a consent
  revoked by a webhook that reached one worker is refused by all of them.
* :class:`RedisUnavailable`: what they all raise when Redis cannot be reached (a
  :class:`~health_async.errors.TransportError` with ``sent=False``: nothing was sent to the service).

The ingest Ray engine keeps its own coordinator (an actor): Redis is the choice for web backends, Ray's for Ray jobs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import hmac
import logging
import math
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import attrs
import redis.asyncio as aioredis
import redis.exceptions
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from . import _json
from ._limits import refused_wait
from .errors import InvalidArgumentType, InvalidRequest, TransportError
from .models import CareContext, ConsentUpdate, HiType
from .models.webhooks._events import WebhookEvent
from .resources.abdm._guard import (
    DEFAULT_MAX_CONSENTS,
    RULE_ENDED_IS_FINAL,
    ConsentGrant,
    checked_id,
    checked_max_consents,
    consent_statuses,
    granted,
)
from .webhooks import OtpCheck, OtpOutcome, PendingLink
from .webhooks._seen import Claim

__all__ = [
    "DEFAULT_CONSENT_TTL",
    "DEFAULT_LEASE",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_NAME",
    "DEFAULT_REPORT_DELAY",
    "DEFAULT_SOCKET_TIMEOUT",
    "DEFAULT_UNREPORTED_TTL",
    "MIN_OTP_KEY_BYTES",
    "RedisConsentBook",
    "RedisLimiter",
    "RedisLinkOtpStore",
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

#: The smallest batch for which a process asks for the next one ahead, when half of its spares are used (see
#: :class:`RedisLimiter`, "Batches"): below it (a rate that gives fewer in a lease, or a process not busy enough)
#: it asks when they run out.
_AHEAD_MIN_BATCH: Final = 4

#: Seconds a waiting process keeps its place in the shared queue after the moment it was told to come back: a
#: process that comes later (a busy event loop) loses its place and queues again at the back.
_CLAIM_GRACE: Final = 0.05

#: The most of the window's count that the shared pace admits at once (a burst), before it spaces admissions by the
#: window's length over its count: a process that asks first cannot take a fresh window before the others arrive.
_BURST_SHARE: Final = 0.25

#: The errors of a Redis call that mean "Redis cannot be used now" (its own, and the socket's).
_REDIS_ERRORS: Final = (redis.exceptions.RedisError, OSError)


@attrs.frozen
class _Lua:
    """A Lua script and its SHA-1, which the server knows it by once loaded."""

    text: str
    sha: str = attrs.field(init=False)

    @sha.default
    def _sha(self) -> str:
        return hashlib.sha1(self.text.encode(), usedforsecurity=False).hexdigest()


async def _eval(client: aioredis.Redis, script: _Lua, keys: Sequence[str], args: Sequence[object]) -> Any:
    """Run ``script`` on ``keys`` and ``args``: by its SHA (one short command), else, on a new or restarted server
    that does not know it yet, by its text, which loads it (one trip more, once)."""
    try:
        return await client.evalsha(script.sha, len(keys), *keys, *args)  # type: ignore[arg-type]
    except redis.exceptions.NoScriptError:
        return await client.eval(script.text, len(keys), *keys, *args)  # type: ignore[arg-type]


# The limiter, in one script run atomically by the server, on the server's clock (TIME, microseconds as integers:
# exact in a double up to 2**53). KEYS (one hash tag, so one Redis Cluster slot): sent (zset member -> when it was
# sent), held (member -> when its admission expires unreported: admitted at that less the TTL), pause (the end of
# the shared pause), queue (process -> since when it waits for its turn), claims (process -> when its place in the
# queue lapses), pace (the pace's theoretical arrival time: GCRA). ARGV: 1 the mode ("a" acquire, "r" only the
# reports, "p" pause: ARGV[2] its length), 2 the window's count, 3 its length, 4 the unreported TTL, 5 the pace's
# interval, 6 its burst tolerance, 7 the batch a lone process waits for, 8 this process, 9 the admissions it needs
# (its waiters), 10 those it would take (with spares), 11 the claim grace, 12 the first member number, 13 the
# reports' count, then (member, age in microseconds or -1 for unsent) pairs; a sent request is stamped at the
# server's now less its age as measured by the reporter, so no clock is compared across machines (the stamp errs
# late by the report's one-way trip: the safe side). Answer: {admitted, wait in microseconds (0: none; the
# admitted members are the process's ARGV[12], ARGV[12] + 1, ...)}.
#
# Fairness: processes that wait queue in Redis, oldest first; each one ahead of a process claims one slot that frees
# (a process served goes to the back while it still waits: round robin between processes, whatever their number of
# waiting requests). A process refused is told when its own slot frees (the j-th entry to leave the window, j its
# place in the queue), so the waiters of different processes come back one after the other instead of racing for
# the same moment; one that does not come back within the grace loses its place.
#
# The pace (issue 44: no process takes most of a fresh window before the others arrive): besides the window,
# admissions are spaced by the interval (the window's length over its count, in whole microseconds, rounded down:
# the pace never lowers the rate, the window holds it), with a burst of a quarter of the window's count (GCRA: an
# admission is allowed while the pace's time is at most the tolerance ahead of now). An unsent report gives its
# admission's interval back. A process held back by the pace alone in the queue is told to come back when a batch
# has accrued (what the rate gives in a lease at most, as its spares), not after every interval: a busy process
# keeps its few round trips; with others waiting, one interval each in turn.
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
local step = tonumber(ARGV[5])
local tau = tonumber(ARGV[6])
local chunk = tonumber(ARGV[7])
local reports = tonumber(ARGV[13])
local unsent = 0
for i = 0, reports - 1 do
  local m = ARGV[14 + 2 * i]
  local age = tonumber(ARGV[15 + 2 * i])
  redis.call('ZREM', KEYS[2], m)
  if age >= 0 and age < w then
    redis.call('ZADD', KEYS[1], now - age, m)
  elseif age < 0 then
    unsent = unsent + 1
  end
end
if reports > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil(w / 1000) + 1000)
end
local tat = tonumber(redis.call('GET', KEYS[6]) or '0')
if tat < now then tat = now end
if unsent > 0 and tat > now then
  tat = math.max(now, tat - unsent * step)
  redis.call('SET', KEYS[6], string.format('%.0f', tat), 'PX', math.ceil((tat - now + w) / 1000) + 1000)
end
if mode == 'r' then
  return {0, 0}
end
local pause = tonumber(redis.call('GET', KEYS[3]) or '0')
if pause > now then
  return {0, pause - now}
end
local want = tonumber(ARGV[10])
if n == 0 then
  return {want, 0}
end
local me = ARGV[8]
local need = tonumber(ARGV[9])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - w)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now)) do
  redis.call('ZREM', KEYS[4], gone)
  redis.call('ZREM', KEYS[5], gone)
end
local count = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
local paced = math.floor((now + tau - tat) / step) + 1
local free = math.max(0, math.min(n - count, paced))
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
  local base = tonumber(ARGV[12])
  for i = 0, granted - 1 do
    redis.call('ZADD', KEYS[2], now + ttl, me .. ':' .. string.format('%.0f', base + i))
  end
  redis.call('PEXPIRE', KEYS[2], math.ceil(ttl / 1000) + 1000)
  tat = tat + granted * step
  redis.call('SET', KEYS[6], string.format('%.0f', tat), 'PX', math.ceil((tat - now + w) / 1000) + 1000)
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
local k = 1
if redis.call('ZCARD', KEYS[4]) == 1 then
  k = math.max(1, math.min(need - granted, chunk, math.floor(tau / step) + 1))
end
local due = tat + (place + k - 1) * step - tau
if due > at then at = due end
local wait = math.max(at - now, 1000)
redis.call('ZADD', KEYS[5], now + wait + tonumber(ARGV[11]), me)
redis.call('PEXPIRE', KEYS[4], math.ceil(w / 1000) + 60000)
redis.call('PEXPIRE', KEYS[5], math.ceil(w / 1000) + 60000)
return {granted, wait}
"""
_LIMITER_LUA: Final = _Lua(_SCRIPT)


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

    **The pace**: the window is also paced (GCRA): admissions are spaced by the window's length over its count
    (50 ms at 20 a second), with bursts of at most a quarter of the window's count (at least 1). So the process
    that asks first cannot take a fresh window before the others arrive (without it, one run of four processes
    split the first second 15/5/0/0): it gets a quarter at once, then its turn among those who queued. Judgement
    call: a pace rather than a share per process counted in Redis, because processes not yet seen asking cannot be
    counted, and a late starter is exactly the one a share would miss. The pace does not lower the rate (the
    bursts take back what a late process left), and the window alone still decides what "at most ``rate_limit``
    in any second" means. A spare handed back unused gives its interval back to the pace.

    **Batches**: one script run admits as many of this process's waiting requests as the window and the queue
    allow (at most ``max_batch``). When no other process waits, it also takes a few spares for the requests about
    to come (as many as the last batch used, doubling while they are all used, at most what the rate gives in
    ``lease`` seconds): a spare unused after ``lease`` seconds is handed back. A busy process so makes one round
    trip for many requests; a spare counts in the window from when it is taken (the safe side). A busy process
    (batches of 4 or more) asks for its next batch in the background once a quarter of its spares are used, rather
    than when they run out, so its requests rarely wait for a round trip (issue 44: about half of them did, at 16
    at a time); that run waits for nobody, so it takes spares only when no other process waits (it never takes a
    queued process's turn), and a process may so hold up to a batch and three quarters, each handed back after
    its lease. Judgement call: a
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
            ``{name}:rate:sent``, ``{name}:rate:held``, ``{name}:pause``, ``{name}:rate:queue``,
            ``{name}:rate:claims`` and ``{name}:rate:pace`` (the braces put them in one Redis Cluster slot, as the
            script needs).
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
            f"{tag}:rate:pace",
        )
        count = max(1, int(rate_limit)) if rate_limit is not None else 0
        window = count / rate_limit if rate_limit is not None else 0.0
        # the pace: an admission every window / count (whole microseconds, rounded down), bursts of a quarter of
        # the window's count at most (the tolerance: that many intervals less one)
        step = max(1, math.floor(window * 1e6 / count)) if count else 1
        burst = max(1, math.ceil(count * _BURST_SHARE))
        # the script's fixed arguments: the window's count and length, the unreported TTL, the pace's interval and
        # its tolerance (microseconds)
        self._fixed = (
            str(count),
            str(math.ceil(window * 1e6)),
            str(math.ceil(unreported_ttl * 1e6)),
            str(step),
            str((burst - 1) * step),
            "1",  # the batch a lone process waits for: its spares' bound, set below
        )
        self._report_delay = float(report_delay)
        self._lease = float(lease)
        # spares: at most what the rate gives in a lease (none at a low rate, where they would only keep slots
        # from the other processes), and never more than a batch
        spares = max_batch if rate_limit is None else min(max_batch, math.ceil(rate_limit * self._lease))
        self._max_batch = max_batch
        self._max_spares = max(1, spares) if lease > 0 else 1
        self._fixed = (*self._fixed[:-1], str(self._max_spares))
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
                self._refill_ahead()
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

    def _refill_ahead(self) -> None:
        """The spares fell to their low-water mark (three quarters of the batch) within their lease: ask for the
        next batch now, in the background, so that the requests about to come find spares instead of waiting for a
        round trip (the requests in flight come back for their next admission within about one round trip, which
        at 16 at a time took most of half a batch).

        Only for batches of :data:`_AHEAD_MIN_BATCH` or more (a busy process at a rate that gives that many in a
        lease), only while no one asks already, and never during a pause. The early run waits for nobody
        (``need`` 0): the script grants it spares only when no other process waits, so it takes nothing from the
        queue's turns; the demand it answers was seen (a quarter of a batch used within its lease), so the next
        batch may be larger."""
        if (
            self._fetcher is not None
            or self._closed
            or self._batch < _AHEAD_MIN_BATCH
            or len(self._spares) * 4 > self._batch * 3
        ):
            return
        self._spares_dry = True
        self._fetcher = asyncio.ensure_future(self._fetch(ahead=True))

    async def _fetch(self, *, ahead: bool = False) -> None:
        """The one task of this process that asks Redis, for every waiter in arrival order, until none is left
        (``ahead``: first one run for the spares, see :meth:`_refill_ahead`)."""
        waiters = self._waiters
        try:
            if ahead and self._paused_until <= time.monotonic():
                await self._ask(ahead=True)
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

    async def _ask(self, *, ahead: bool = False) -> float:
        """One script run for the waiters (``ahead``: for the spares too, even with no waiter): hand out what it
        admits (spares to the pool), and return how long to wait before the next run (0: none)."""
        need = min(sum(1 for answer, _ in self._waiters if not answer.done()), self._max_batch)
        if need == 0 and not ahead:
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
                result = await _eval(redis_client, _LIMITER_LUA, self._keys, argv)
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
            await self._run(["r", *self._fixed, "", "0", "0", "0", "0"], reports)  # ARGV[13]: the reports
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


# The seen store's script. KEYS[1] the entry; ARGV[1] the mode: "c" claim (ARGV[2] the value to set, "t:<token>" or,
# under a lease, "t:<token>|<expires_at in unix ms>", ARGV[3] its time to live in ms; answers 0 taken, 1 in progress,
# 2 done), "f" finish (set "1": until the expires_at of the value when it has one, ARGV[3] being now in unix ms, else
# keeping the expiry), "r" release (delete), "n" renew (ARGV[3] now and ARGV[4] the lease's end, unix ms: the time to
# live becomes the lease's, never past the expires_at; answers 1 held, 0 not). Finish, release and renew act only
# when ARGV[2] "t:<token>" holds the entry, so only the claim that holds it ends it. A value that is not "t:..."
# ("1", set by add or by versions before issue 42) is done. The times are this process's clock: only the claim that
# set an expires_at (one process) reads it back.
_SEEN_SCRIPT: Final = """
local v = redis.call('GET', KEYS[1])
local mode = ARGV[1]
if mode == 'c' then
  if not v then
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
    return 0
  end
  if string.sub(v, 1, 2) == 't:' then
    return 1
  end
  return 2
end
if not v then
  return 0
end
local held, expiry = string.match(v, '^(.*)|(%d+)$')
if not held then
  held = v
end
if held ~= ARGV[2] then
  return 0
end
if mode == 'f' then
  if expiry then
    local ttl = math.max(1, math.floor(tonumber(expiry) - tonumber(ARGV[3])))
    redis.call('SET', KEYS[1], '1', 'PX', ttl)
  else
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then
      redis.call('SET', KEYS[1], '1', 'PX', ttl)
    else
      redis.call('SET', KEYS[1], '1')
    end
  end
elseif mode == 'r' then
  redis.call('DEL', KEYS[1])
elseif mode == 'n' and expiry then
  local until_ms = math.min(tonumber(ARGV[4]), tonumber(expiry))
  local ttl = math.max(1, math.floor(until_ms - tonumber(ARGV[3])))
  if ttl > redis.call('PTTL', KEYS[1]) then
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
return 1
"""
_SEEN_LUA: Final = _Lua(_SEEN_SCRIPT)

#: A seen entry's value while its claim runs is this and the token (and, under a lease, ``|`` and its expires_at in
#: unix milliseconds); once done it is :data:`_SEEN_DONE`.
_SEEN_RUNNING: Final = "t:"
_SEEN_DONE: Final = b"1"
_SEEN_CLAIMS: Final = {0: Claim.NEW, 1: Claim.IN_PROGRESS, 2: Claim.DONE}


def _ttl_ms(expires_at: float) -> int:
    """Milliseconds from now to the unix time ``expires_at``, at least one."""
    return max(1, math.ceil((expires_at - time.time()) * 1000))


def _unix_ms(moment: float) -> str:
    """The unix time ``moment`` in whole milliseconds, as the seen store's script reads it."""
    return str(math.ceil(moment * 1000))


def _check_token(token: object) -> str:
    """``token`` as a seen entry's token: a str without ``|`` (the separator of a lease's expiry)."""
    if not isinstance(token, str):
        raise InvalidArgumentType(f"token must be a str, not {type(token).__name__}")
    if "|" in token:
        raise InvalidRequest("a seen store token must not contain '|'")
    return token


class RedisSeenStore:
    """A :class:`~health_async.webhooks.SeenStore` in Redis: a webhook accepted by one worker is a replay for every
    other worker using the same Redis and ``name``.

    An entry is one string key, ``t:<token>`` while its claim runs, ``1`` once done (the value the versions before
    issue 42 set, so their entries read as done). :meth:`claim`, :meth:`finish`, :meth:`release` and :meth:`renew`
    are each one Lua script, atomic on the server: set if absent (else say in progress or done); set done keeping
    the expiry if the token holds it; delete if the token holds it (compare-and-delete, so a replay cancelled with
    its claim in flight never deletes the entry of the delivery that was processed); extend the lease if the token
    holds it.

    A :class:`~health_async.webhooks.LeasingSeenStore`: a claim with ``lease`` lives on the server only until the
    lease (its value is then ``t:<token>|<expires_at in ms>``), so the entry of a worker killed mid-delivery
    vanishes when its lease lapses and a redelivery takes it; :meth:`renew` extends it (never past
    ``expires_at``), and :meth:`finish` sets it done until ``expires_at``. Workers of a version before the lease
    read such an entry as in progress, as they should. Entries expire on the server: the time to
    live is ``expires_at`` less this process's clock, a duration, so skew between the machines' clocks shifts an
    expiry by no more than the skew (the receivers' expiry is the signed time plus the tolerance, after which the
    timestamp check refuses the webhook anyway). An ``expires_at`` already past is kept one millisecond.

    When Redis cannot be reached, every method raises :class:`RedisUnavailable`: the receivers then answer 500 and
    the service delivers the webhook again later (a webhook is never processed unchecked).

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

    async def claim(self, key: str, expires_at: float, *, token: str, lease: float | None = None) -> Claim:
        """Hold ``key`` for ``token`` until the unix time ``expires_at`` (with ``lease``, a unix time: in progress
        until ``min(lease, expires_at)`` only, unless renewed) when it is free: ``Claim.NEW``; else
        ``Claim.IN_PROGRESS`` or ``Claim.DONE``, as its holder is.

        Raises:
            InvalidRequest: ``lease`` is not a finite number, or ``token`` holds a ``|``.
            RedisUnavailable: Redis could not be used.
        """
        value = _SEEN_RUNNING + _check_token(token)
        if lease is not None and (
            isinstance(lease, bool) or not isinstance(lease, int | float) or not math.isfinite(lease)
        ):
            raise InvalidRequest("lease must be a finite unix time in seconds")
        if lease is None or expires_at <= lease:
            found = await self._seen("c", key, value, str(_ttl_ms(expires_at)))
        else:
            found = await self._seen("c", key, f"{value}|{_unix_ms(expires_at)}", str(_ttl_ms(lease)))
        return _SEEN_CLAIMS.get(int(found), Claim.DONE)

    async def renew(self, key: str, *, token: str, until: float) -> bool:
        """Extend the lease of ``key`` to the unix time ``min(until, expires_at)`` if ``token`` still holds it in
        progress: True; else (the lease lapsed, finished, released, or another claim holds it) False.

        Raises:
            InvalidRequest: ``until`` is not a finite number, or ``token`` holds a ``|``.
            RedisUnavailable: Redis could not be used.
        """
        if isinstance(until, bool) or not isinstance(until, int | float) or not math.isfinite(until):
            raise InvalidRequest("until must be a finite unix time in seconds")
        value = _SEEN_RUNNING + _check_token(token)
        return bool(await self._seen("n", key, value, _unix_ms(time.time()), _unix_ms(until)))

    async def finish(self, key: str, *, token: str) -> None:
        """Mark ``key`` done, keeping its expiry, if ``token`` holds it.

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        await self._seen("f", key, _SEEN_RUNNING + _check_token(token), _unix_ms(time.time()))

    async def release(self, key: str, *, token: str) -> None:
        """Forget ``key`` if ``token`` holds it (in progress); otherwise nothing happens.

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        await self._seen("r", key, _SEEN_RUNNING + _check_token(token))

    async def add(self, key: str, expires_at: float) -> bool:
        """The old protocol's add (``SET key 1 NX PX ttl``): record ``key`` as done until the unix time
        ``expires_at``: True when it was not there, False when it was.

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        ttl = _ttl_ms(expires_at)
        result = await _call(
            "RedisSeenStore", self._slots, lambda: self._redis.set(self._prefix + key, _SEEN_DONE, nx=True, px=ttl)
        )
        return bool(result)

    async def discard(self, key: str) -> None:
        """The old protocol's discard: forget ``key``, whoever holds it.

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        await _call("RedisSeenStore", self._slots, lambda: self._redis.delete(self._prefix + key))

    async def _seen(self, mode: str, key: str, *argv: str) -> int:
        """Run the seen store's script in ``mode`` on ``key``: its integer answer."""
        name = self._prefix + key

        result = await _call(
            "RedisSeenStore", self._slots, lambda: _eval(self._redis, _SEEN_LUA, [name], [mode, *argv])
        )
        if not isinstance(result, int):  # the script answers integers only
            raise RedisUnavailable(f"RedisSeenStore: Redis gave an unexpected answer: {type(result).__name__}")
        return result

    async def aclose(self) -> None:
        """Close the connection pool if this store built it from a URL."""
        if self._owned:
            with contextlib.suppress(*_REDIS_ERRORS):
                await self._redis.aclose()


#: Fewest bytes of a :class:`RedisLinkOtpStore`'s ``otp_key`` (256 bits).
MIN_OTP_KEY_BYTES: Final = 32

# The pending links' scripts, each run atomically by the server. An entry is a hash: ``l`` the link (encrypted),
# ``v`` its version, ``d`` the OTP's HMAC (hex; absent: no OTP), ``t`` the name of its counting entry (absent: it
# counts on itself), ``n`` the wrong tries counted on it, ``x`` "1" once it is locked; its expiry is the key's PX.

# put. KEYS[1] the entry, KEYS[2] (optional) its counting entry. ARGV: ttl (ms), link, version, digest ('' none).
_LINK_PUT: Final = """
local ttl = tonumber(ARGV[1])
local counter = KEYS[2]
if counter then
  if counter == KEYS[1] or redis.call('EXISTS', counter) == 0 or redis.call('HEXISTS', counter, 'x') == 1 then
    return 0
  end
  local left = redis.call('PTTL', counter)
  if left >= 0 and left < ttl then
    redis.call('PEXPIRE', counter, ttl)
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'l', ARGV[2], 'v', ARGV[3])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'd', ARGV[4])
end
if counter then
  redis.call('HSET', KEYS[1], 't', counter)
end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
"""
_LINK_PUT_LUA: Final = _Lua(_LINK_PUT)

# consume. KEYS[1] the entry. ARGV: the HMAC of the OTP tried (hex), max tries. Answers {outcome, link}: 'm'
# matched (with the link), 'w' wrong, 'k' locked, 'u' unknown. The counting entry's name is read from the entry: a
# key not in KEYS, in the same Redis Cluster slot as KEYS[1] (both carry the store's hash tag).
_LINK_CONSUME: Final = """
local e = redis.call('HMGET', KEYS[1], 'l', 'd', 't')
if not e[1] or not e[2] then
  return {'u'}
end
local counter = KEYS[1]
if e[3] then
  counter = e[3]
  if redis.call('EXISTS', counter) == 0 then
    redis.call('DEL', KEYS[1])
    return {'u'}
  end
  if redis.call('HEXISTS', counter, 'x') == 1 then
    redis.call('DEL', KEYS[1])
    return {'k'}
  end
end
if e[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {'m', e[1]}
end
local tries = redis.call('HINCRBY', counter, 'n', 1)
if tries >= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  if counter ~= KEYS[1] then
    redis.call('HSET', counter, 'x', '1')
  end
  return {'k'}
end
return {'w'}
"""
_LINK_CONSUME_LUA: Final = _Lua(_LINK_CONSUME)

# discard. KEYS[1] the entry. ARGV[1]: the version to forget, or nothing (forget whatever is there).
_LINK_DISCARD: Final = """
if ARGV[1] == nil or redis.call('HGET', KEYS[1], 'v') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
_LINK_DISCARD_LUA: Final = _Lua(_LINK_DISCARD)

_OUTCOMES: Final = {"w": OtpOutcome.WRONG, "k": OtpOutcome.LOCKED, "u": OtpOutcome.UNKNOWN}
_HI_TYPES: Final = frozenset(item.value for item in HiType)


def _text(value: object) -> str:
    """A Redis reply as text (UTF-8 bytes, or str from a client made with ``decode_responses=True``)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _pack_data(data: dict[str, Any] | bytes | str | None) -> list[Any] | None:
    if data is None:
        return None
    if isinstance(data, bytes):
        return ["b", base64.b64encode(data).decode("ascii")]
    return ["s", data] if isinstance(data, str) else ["j", data]


def _unpack_data(packed: list[Any] | None) -> dict[str, Any] | bytes | str | None:
    if packed is None:
        return None
    kind, value = packed
    if kind == "b":
        return base64.b64decode(value)
    return str(value) if kind == "s" else dict(value)


def _pack_link(link: PendingLink) -> bytes:
    """``link`` as JSON (its care contexts included, each with its bundle if it has one)."""
    document = {
        "hip_id": link.hip_id,
        "reference": link.reference,
        "display": link.display,
        "care_contexts": [
            [cc.care_context_id, cc.display, str(cc.hi_type), _pack_data(cc.data)] for cc in link.care_contexts
        ],
        "mobile": link.mobile,
        "abha_address": link.abha_address,
        "oid": link.oid,
        "partner_patient_id": link.partner_patient_id,
    }
    try:
        return _json.dumps(document)
    except (TypeError, ValueError):  # msgspec's EncodeError is a ValueError; its message may quote the data
        raise InvalidRequest("RedisLinkOtpStore: the pending link cannot be written as JSON") from None


def _unpack_link(data: bytes) -> PendingLink:
    doc = _json.loads(data)
    care_contexts = tuple(
        CareContext(cc_id, display, HiType(hi_type) if hi_type in _HI_TYPES else hi_type, _unpack_data(packed))
        for cc_id, display, hi_type, packed in doc["care_contexts"]
    )
    return PendingLink(
        doc["hip_id"],
        doc["reference"],
        doc["display"],
        care_contexts,
        mobile=doc["mobile"],
        abha_address=doc["abha_address"],
        oid=doc["oid"],
        partner_patient_id=doc["partner_patient_id"],
    )


class RedisLinkOtpStore:
    """A :class:`~health_async.webhooks.LinkOtpStore` in Redis: the pending links (and their OTPs) of a patient's
    own search shared by every worker using the same Redis, ``name`` and ``otp_key``, so that a link requested at
    one worker is confirmed at another, once. Pass it as ``link_store=`` to
    :func:`~health_async.webhooks.abdm_handler` or :func:`~health_async.webhooks.abdm_asgi`.

    Its behaviour is :class:`~health_async.webhooks.InMemoryLinkOtpStore`'s (the reference), with each method one
    atomic step on the server: ``put``, ``consume`` and ``discard(only=)`` are one Lua script each (``get`` is one
    ``HGET``). ``consume`` reads the entry and its counting entry (``tries_key``), compares the OTP's HMAC, counts
    the wrong try there with ``HINCRBY``, locks it at the last try and deletes the entry on its one use or its
    lock, all in the script: two workers confirming one link at once get one ``MATCHED`` between them.
    ``discard(only=)`` deletes only when the entry's version is ``only`` (compare-and-delete). Entries expire on the
    server (``PX``); a counting entry is made to live at least as long as the entries counting on it.

    **What Redis holds.** Never an OTP: only an HMAC-SHA256 of it (and of the entry's name), computed in this
    process under a key derived from ``otp_key``, which is never sent to Redis. A 6-digit OTP has a million values,
    so a plain hash would be reversed at once by whoever reads Redis; the HMAC tells nothing without the key. The
    :class:`~health_async.webhooks.PendingLink` (the patient's reference, name, mobile, ABHA address, ids and care
    contexts) is written as JSON (the library's codec) and encrypted with AES-256-GCM under another key derived
    from ``otp_key``, bound to its entry's name; the entries' names are HMACs of the receivers' keys (which hold
    transaction ids and link references). So neither personal data nor a transaction id appears in Redis, in its
    ``MONITOR`` or in its slow log. Nothing of a link is logged.

    Judgement calls:

    * **The comparison in the script** is a plain equality of the two HMACs (hex), not a constant-time one: a
      timing difference could only tell how much of the stored HMAC a guess's HMAC shares, and the one who guesses
      never sees either HMAC (they are computed here, under a key the guesser does not have), so it tells nothing
      about the OTP. The tries are still bounded per discovery.
    * **An expired entry is gone** from the server, so ``consume`` answers ``UNKNOWN`` where the in-memory store
      may answer ``EXPIRED`` for an entry not yet dropped; the receivers answer both alike (``INVALID_LINK``).
    * **No bound on the number of entries** other than their time to live (the receivers' ``otp_ttl`` and
      offer TTL): Redis's ``maxmemory`` is the bound; with an eviction policy, prefer a ``volatile-*`` one.
    * **An entry that cannot be read** (encrypted under another ``otp_key``: workers configured with different
      keys, or written by something else) is treated as absent (``get`` answers ``None``, a matching ``consume``
      ``UNKNOWN``), and logged as an error naming no data. Give every worker the same key.

    When Redis cannot be reached, every method raises :class:`RedisUnavailable`: the receivers then leave the step
    unanswered and forget its request id, so the service's redelivery (or the patient asking again) runs it.

    Args:
        redis: a URL (this store owns the pool; :meth:`aclose` closes it) or a ``redis.asyncio.Redis`` you own.
        name: the key prefix: keys are ``{name}:link:<HMAC of the receivers' key>`` (the braces put them all in one
            Redis Cluster slot, as a script's keys must be).
        otp_key: the secret, at least :data:`MIN_OTP_KEY_BYTES` random bytes (``secrets.token_bytes(32)``), the
            same in every worker and kept in the workers' configuration (never in Redis): required. Changing it
            forgets every pending link (their patients ask again). Never shown in a ``repr``.

    Raises:
        InvalidRequest: ``otp_key`` missing, not bytes or shorter than :data:`MIN_OTP_KEY_BYTES`; a bad ``name``
            or URL.
    """

    def __init__(self, redis: str | aioredis.Redis, *, name: str = DEFAULT_NAME, otp_key: bytes | None = None) -> None:
        owner = "RedisLinkOtpStore"
        self.name = _check_name(name, owner)
        if not isinstance(otp_key, bytes) or len(otp_key) < MIN_OTP_KEY_BYTES:
            raise InvalidRequest(
                f"{owner}: otp_key is required: at least {MIN_OTP_KEY_BYTES} random bytes, the same in every worker "
                "(from its configuration, e.g. base64.b64decode(settings.LINK_OTP_KEY))"
            )
        self._otp_key, self._name_key, self._aead = (
            hmac.new(otp_key, f"health_async.redis.RedisLinkOtpStore:{label}".encode(), hashlib.sha256).digest()
            for label in ("otp", "name", "link")
        )
        self._cipher = AESGCM(self._aead)
        self._redis, self._owned = _connect(redis, owner)
        self._slots = asyncio.Semaphore(DEFAULT_MAX_CONNECTIONS)  # Redis commands at once (so connections)
        self._prefix = f"{{{self.name}}}:link:"

    def __repr__(self) -> str:
        return f"RedisLinkOtpStore(name={self.name!r})"

    async def __aenter__(self) -> RedisLinkOtpStore:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # ---------------------------------------------------------------- the LinkOtpStore protocol

    async def put(
        self, key: str, link: PendingLink, *, otp: str | None, ttl: float, tries_key: str | None = None
    ) -> str | None:
        """Keep ``link`` (encrypted) under ``key`` for ``ttl`` seconds with the HMAC of ``otp`` only; see
        :meth:`~health_async.webhooks.LinkOtpStore.put`.

        Raises:
            InvalidRequest: ``ttl`` is not a finite number, or the link cannot be written as JSON.
            RedisUnavailable: Redis could not be used.
        """
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
            raise InvalidRequest("RedisLinkOtpStore: ttl must be a finite number of seconds")
        name = self._key(key)
        keys = [name] if tries_key is None else [name, self._key(tries_key)]
        version = secrets.token_urlsafe(12)
        digest = "" if otp is None else self._digest(name, otp)
        nonce = secrets.token_bytes(12)
        sealed = nonce + self._cipher.encrypt(nonce, _pack_link(link), name.encode())
        args: list[bytes | str | int] = [max(1, math.ceil(ttl * 1000)), base64.b64encode(sealed), version, digest]
        done = await _call("RedisLinkOtpStore", self._slots, lambda: _eval(self._redis, _LINK_PUT_LUA, keys, args))
        return version if int(done) else None

    async def get(self, key: str) -> PendingLink | None:
        """The link under ``key`` (locked or not), or ``None``.

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        name = self._key(key)
        sealed = await _call("RedisLinkOtpStore", self._slots, lambda: self._redis.hget(name, "l"))
        return None if sealed is None else self._open(name, sealed)

    async def consume(self, key: str, otp: str, *, max_tries: int) -> OtpCheck:
        """Check ``otp`` against the HMAC under ``key``, count a wrong try and use a right one, in one script; see
        :meth:`~health_async.webhooks.LinkOtpStore.consume`.

        Raises:
            RedisUnavailable: Redis could not be used (the try may or may not have been counted).
        """
        name = self._key(key)
        args: list[str | int] = [self._digest(name, otp), max(1, int(max_tries))]
        reply = await _call(
            "RedisLinkOtpStore", self._slots, lambda: _eval(self._redis, _LINK_CONSUME_LUA, [name], args)
        )
        outcome = _text(reply[0])
        if outcome != "m":
            return OtpCheck(_OUTCOMES[outcome])
        link = self._open(name, reply[1])
        return OtpCheck(OtpOutcome.UNKNOWN) if link is None else OtpCheck(OtpOutcome.MATCHED, link)

    async def discard(self, key: str, *, only: str | None = None) -> None:
        """Forget ``key`` (with ``only``: only that version of it, compared and deleted in one script).

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        name = self._key(key)
        args: list[str] = [] if only is None else [only]
        await _call("RedisLinkOtpStore", self._slots, lambda: _eval(self._redis, _LINK_DISCARD_LUA, [name], args))

    async def aclose(self) -> None:
        """Close the connection pool if this store built it from a URL."""
        if self._owned:
            with contextlib.suppress(*_REDIS_ERRORS):
                await self._redis.aclose()

    # ---------------------------------------------------------------- machinery

    def _key(self, key: str) -> str:
        """The Redis key of the receivers' ``key``: an HMAC, so no transaction id or link reference is in Redis."""
        mac = hmac.new(self._name_key, key.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return self._prefix + mac.hexdigest()

    def _digest(self, name: str, otp: str) -> str:
        """The HMAC of ``otp`` for the entry ``name`` (bound to it: equal OTPs of two entries differ in Redis)."""
        message = name.encode() + b"\x00" + otp.encode("utf-8", "surrogatepass")
        return hmac.new(self._otp_key, message, hashlib.sha256).hexdigest()

    def _open(self, name: str, sealed: object) -> PendingLink | None:
        """The link sealed under ``name``, or ``None`` (logged) when it cannot be read."""
        try:
            raw = base64.b64decode(sealed if isinstance(sealed, bytes | str) else b"", validate=True)
            return _unpack_link(self._cipher.decrypt(raw[:12], raw[12:], name.encode()))
        except (InvalidTag, ValueError, TypeError, KeyError):  # binascii.Error and JSONDecodeError are ValueErrors
            logger.error("RedisLinkOtpStore: a pending link could not be read (do all workers share one otp_key?)")
            return None


# ------------------------------------------------------------------------------------------------ RedisConsentBook

#: Seconds a :class:`RedisConsentBook` keeps a consent at least after its last change (30 days): the whole life of a
#: consent whose expiry is not known, and how long an ended consent outlives its ending at least.
DEFAULT_CONSENT_TTL: Final = 30 * 24 * 3600.0

# The consent book's one script: read each consent's stored record, apply the forward-only rule, write, atomically
# on the server. KEYS[1] the index (zset: consent id -> when last written, the server's microseconds); KEYS[2..]
# the consents' hashes. ARGV[1] the mode: "g" a grant (one consent), "t" a webhook's statuses; ARGV[2] the default
# life (ms); ARGV[3] max_consents; ARGV[4] the consents' key prefix (the index's members are ids). "g": ARGV[5]
# expires_at (unix ms, -1 when not known), ARGV[6..] the record's field/value pairs. "t": for KEYS[i], ARGV[2i+1]
# the ended flag and ARGV[2i+2] the status. Whether a status ends a consent is decided in Python
# (ConsentGrant.ended: ENDED, declared once) and stored as the flag "ended"; the script applies advance(): a record
# flagged ended is final, anything else is replaced. An entry expires at the latest of its current expiry, its
# consent's expiry and now + the default life, so it never shortens (an ended consent outlives the grant it ends).
# Returns, per consent, 1 (taken) or the status that ended it (ignored). The index is trimmed to max_consents, the
# oldest change first, deleting their hashes (same hash tag: one Cluster slot).
_CONSENT_SCRIPT: Final = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local life = tonumber(ARGV[2])
local prefix = ARGV[4]
local out = {}
local index_until = -1
for i = 2, #KEYS do
  local key = KEYS[i]
  local known = redis.call('HMGET', key, 'ended', 'status')
  if known[1] == '1' then
    out[#out + 1] = known[2]
  else
    local untl = now + life
    local left = redis.call('PTTL', key)
    if left > 0 and now + left > untl then untl = now + left end
    if ARGV[1] == 'g' then
      local expires = tonumber(ARGV[5])
      if expires > untl then untl = expires end
      redis.call('DEL', key)
      redis.call('HSET', key, unpack(ARGV, 6))
    else
      redis.call('HSET', key, 'ended', ARGV[2 * i + 1], 'status', ARGV[2 * i + 2])
    end
    redis.call('PEXPIREAT', key, untl)
    redis.call('ZADD', KEYS[1], now_us, string.sub(key, #prefix + 1))
    if untl > index_until then index_until = untl end
    out[#out + 1] = 1
  end
end
if index_until > 0 then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 and now + left > index_until then index_until = now + left end
  redis.call('PEXPIREAT', KEYS[1], index_until)
  local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
  if over > 0 then
    local gone = redis.call('ZPOPMIN', KEYS[1], over)
    for j = 1, #gone, 2 do
      redis.call('DEL', prefix .. gone[j])
    end
  end
end
return out
"""
_CONSENT_LUA: Final = _Lua(_CONSENT_SCRIPT)


class RedisConsentBook:
    """A :class:`~health_async.resources.ConsentStore` in Redis: the consents a hospital knows of, shared by every
    worker that uses the same Redis and ``name``, so a consent revoked by a webhook that reached one worker is
    refused by all of them. Pass it as ``consents=`` to ``webhooks.abdm_handler`` / ``abdm_asgi`` (which keep it
    current with each ``abha.consent_update``) and to ``client.abdm.push_health_data``.

    It behaves as :class:`~health_async.resources.ConsentBook`: :meth:`grant` (same arguments, same checks) records
    a consent known to be granted, :meth:`take` a consent webhook, :meth:`lookup` what is known of an id.

    **A consent's status only moves forward**, decided atomically on the server: one Lua script per change reads
    the stored record, applies the guard's rule (``advance()``: revoked, expired and denied are final for a consent
    id) and writes, so a revocation and a late grant reaching two workers at once end revoked. Whether a status
    ends a consent is decided in Python (:attr:`~health_async.resources.ConsentGrant.ended`, one declaration) and
    stored beside it; an update ignored is logged at WARNING by the rule's name (``consent_ended_is_final``),
    never the id.

    **Expiry** (judgement calls): each consent's entry expires on the server at the latest of its consent's
    ``expires_at`` (``PEXPIREAT``), ``ttl`` seconds after its last change (default :data:`DEFAULT_CONSENT_TTL`, 30
    days: the life of a consent whose expiry is not known; pass ``expires_at`` to :meth:`grant` when you know it),
    and the expiry it already had: an entry's life never shortens, so an ended consent is kept at least as long as
    the grant it ended would have lived, and at least ``ttl`` after its ending; a late grant arriving within that
    time cannot revive it. A consent forgotten (expired, or trimmed by the bound) is not known: a push under it is
    refused (``consent_unknown``), but a late ``GRANTED`` webhook of it would be taken, as with ``ConsentBook``.
    The expiry is the consent's wall-clock time on the Redis server's clock.

    **Bound**: at most ``max_consents`` consents (a sorted set of their last changes, trimmed by the script, the
    oldest change forgotten first; default 100,000).

    **Keys**: ``{name}:consent:<consent id>`` (a hash) and ``{name}:consents`` (the sorted set); the braces put them
    in one Redis Cluster slot (the script deletes the trimmed consents' keys, which it is not given: they share the
    slot).

    **When Redis cannot be reached**, every method raises :class:`RedisUnavailable`: a push then fails before
    anything is sent (``sent=False``), and the receivers answer the consent webhook with 500, so the service
    delivers it again later.

    Args:
        redis: a URL (this store owns the pool; :meth:`aclose` closes it) or a ``redis.asyncio.Redis`` you own.
        name: the key prefix (sharers use the same).
        max_consents: consents kept at most.
        ttl: seconds a consent is kept at least after its last change; default :data:`DEFAULT_CONSENT_TTL`.
    """

    def __init__(
        self,
        redis: str | aioredis.Redis,
        *,
        name: str = DEFAULT_NAME,
        max_consents: int = DEFAULT_MAX_CONSENTS,
        ttl: float = DEFAULT_CONSENT_TTL,
    ) -> None:
        owner = "RedisConsentBook"
        self.name = _check_name(name, owner)
        self.max_consents = checked_max_consents(max_consents)
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf:
            raise InvalidRequest(f"{owner}: ttl must be a number of seconds > 0")
        self.ttl = float(ttl)
        self._redis, self._owned = _connect(redis, owner)
        self._slots = asyncio.Semaphore(DEFAULT_MAX_CONNECTIONS)  # Redis commands at once (so connections)
        self._index = f"{{{self.name}}}:consents"
        self._prefix = f"{{{self.name}}}:consent:"
        self._fixed = (str(math.ceil(self.ttl * 1000)), str(self.max_consents), self._prefix)

    def __repr__(self) -> str:
        return f"RedisConsentBook(name={self.name!r}, max_consents={self.max_consents})"

    async def __aenter__(self) -> RedisConsentBook:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def lookup(self, consent_id: str) -> ConsentGrant | None:
        """What the shared book knows of ``consent_id``, or ``None`` (one ``HGETALL``).

        Raises:
            RedisUnavailable: Redis could not be used.
        """
        if not isinstance(consent_id, str) or not consent_id:
            return None
        fields: dict[bytes | str, bytes | str] = await _call(
            "RedisConsentBook", self._slots, lambda: self._redis.hgetall(self._prefix + consent_id)
        )
        if not fields:
            return None
        try:
            return _grant_of({_text(k): _text(v) for k, v in fields.items()})
        except (ValueError, KeyError, UnicodeDecodeError):
            raise RedisUnavailable("RedisConsentBook: a stored consent is not one this book wrote") from None

    async def take(self, update: WebhookEvent | ConsentUpdate) -> None:
        """Take an ``abha.consent_update`` webhook (the event or its
        :class:`~health_async.models.ConsentUpdate`): its consent (artefact ids and request id) gets the status
        sent, unless it already ended; one script run for all of them. Any other event is refused
        (``InvalidRequest``); an update without an id or a status changes nothing.

        Raises:
            RedisUnavailable: Redis could not be used (nothing or all of the update was taken).
        """
        statuses = consent_statuses(update)
        if not statuses:
            return
        args: list[str] = []
        for _, status in statuses:
            args += ["1" if ConsentGrant(status).ended else "0", status]
        await self._run("t", [consent_id for consent_id, _ in statuses], [s for _, s in statuses], args)

    async def grant(
        self,
        consent_id: str,
        *,
        hi_types: object = None,
        date_from: dt.datetime | None = None,
        date_to: dt.datetime | None = None,
        expires_at: dt.datetime | None = None,
    ) -> None:
        """Record ``consent_id`` as granted, with what it allows when known (``hi_types``: an iterable of
        :class:`~health_async.models.HiType` or their values; times timezone-aware), as
        :meth:`ConsentBook.grant <health_async.resources.ConsentBook.grant>` does. A consent known as revoked,
        expired or denied stays so (the grant is ignored and logged).

        Raises:
            InvalidRequest: an argument is not as described.
            RedisUnavailable: Redis could not be used.
        """
        checked_id(consent_id)
        grant = granted(hi_types, date_from, date_to, expires_at)
        expires = -1 if expires_at is None else math.ceil(expires_at.timestamp() * 1000)
        await self._run("g", [consent_id], [grant.status], [str(expires), *_fields_of(grant)])

    async def aclose(self) -> None:
        """Close the connection pool if this book built it from a URL."""
        if self._owned:
            with contextlib.suppress(*_REDIS_ERRORS):
                await self._redis.aclose()

    async def _run(self, mode: str, ids: list[str], statuses: list[str], args: list[str]) -> None:
        """Run the script over ``ids`` and log each change ignored (an ended consent's new status)."""
        keys = [self._index, *(self._prefix + consent_id for consent_id in ids)]
        argv = [mode, *self._fixed, *args]

        results: list[int | bytes | str | None] = await _call(
            "RedisConsentBook", self._slots, lambda: _eval(self._redis, _CONSENT_LUA, keys, argv)
        )
        for status, result in zip(statuses, results, strict=True):
            if result == 1:
                continue
            known = _text(result) if isinstance(result, bytes | str) else ""
            if known.upper() != status.upper():  # a repeat of the ending is no news
                logger.warning(
                    "consent update ignored: %s (revoked, expired and denied are final)", RULE_ENDED_IS_FINAL
                )


def _fields_of(grant: ConsentGrant) -> list[str]:
    """A grant as the script's field/value pairs (a field left out is not known)."""
    fields = ["ended", "1" if grant.ended else "0", "status", grant.status]
    if grant.hi_types is not None:
        fields += ["hi_types", ",".join(sorted(grant.hi_types))]
    for label, when in (("date_from", grant.date_from), ("date_to", grant.date_to), ("expires_at", grant.expires_at)):
        if when is not None:
            fields += [label, when.isoformat()]
    return fields


def _grant_of(fields: dict[str, str]) -> ConsentGrant:
    """A grant read back from its fields (see :func:`_fields_of`)."""
    types = fields.get("hi_types")

    def when(label: str) -> dt.datetime | None:
        value = fields.get(label)
        return None if value is None else dt.datetime.fromisoformat(value)

    return ConsentGrant(
        status=fields["status"],
        hi_types=None if types is None else frozenset(t for t in types.split(",") if t),
        date_from=when("date_from"),
        date_to=when("date_to"),
        expires_at=when("expires_at"),
    )
