"""RedisLimiter against a real Redis server, in this process: two limiters with the same name are two sharers
exactly as two processes are (they share nothing but Redis). The deadline while the rate is exhausted, the shared
pause, one round trip per request, cancellation, closing, a Redis that is down and one that restarts."""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from health_async import HealthClient, RetryPolicy, SharedLimiter
from health_async.errors import HealthError, InvalidArgumentType, InvalidRequest, RequestTimeout, TransportError
from health_async.redis import DEFAULT_LEASE, DEFAULT_MAX_CONNECTIONS, RedisLimiter, RedisUnavailable
from health_async.testing import FakeHealthServer

from .conftest import RedisServer, free_port


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(record=False) as fake:
        yield fake


def client(server: FakeHealthServer, limiter: RedisLimiter, **kwargs: Any) -> HealthClient:
    return HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], limiter=limiter, **kwargs
    )


def doc(server: FakeHealthServer, n: int = 0) -> str:
    return list(server.data.documents[server.data.user_ids[0]])[n]


def test_is_a_shared_limiter_and_its_repr_hides_the_url() -> None:
    limiter = RedisLimiter("redis://:s3cret-pw@127.0.0.1:1/0", rate_limit=5, name="acct")
    assert isinstance(limiter, SharedLimiter)
    assert "s3cret" not in repr(limiter) and "127.0.0.1" not in repr(limiter)
    assert repr(limiter) == "RedisLimiter(name='acct', rate_limit=5.0)"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"rate_limit": 0}, InvalidRequest),
        ({"rate_limit": -1.0}, InvalidRequest),
        ({"rate_limit": float("inf")}, InvalidRequest),
        ({"rate_limit": True}, InvalidRequest),
        ({"name": ""}, InvalidRequest),
        ({"name": "a{b}"}, InvalidRequest),
        ({"unreported_ttl": 0}, InvalidRequest),
        ({"report_delay": -1}, InvalidRequest),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        RedisLimiter("redis://127.0.0.1:1/0", **kwargs)  # type: ignore[arg-type]


def test_bad_redis_is_refused_without_quoting_it() -> None:
    with pytest.raises(InvalidArgumentType):
        RedisLimiter(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest) as info:
        RedisLimiter("http://user:s3cret@host/")
    assert "s3cret" not in str(info.value)


def test_import_health_async_does_not_import_redis() -> None:
    code = "import health_async, health_async.webhooks, sys; assert 'redis' not in sys.modules, 'redis imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_deadline_honoured_while_the_rate_is_exhausted(
    server: FakeHealthServer, redis_server: RedisServer, name: str
) -> None:
    async with (
        RedisLimiter(redis_server.url, rate_limit=1, name=name) as one,
        RedisLimiter(redis_server.url, rate_limit=1, name=name) as other,
    ):
        async with client(server, one) as first, client(server, other, timeout=0.5) as second:
            await first.documents.describe(doc(server))  # the account's one request of this second
            started = time.monotonic()
            with pytest.raises(RequestTimeout) as info:
                await second.documents.describe(doc(server))  # the other worker's call cannot fit in 0.5 s
            assert time.monotonic() - started < 0.25  # refused at once, not after waiting in vain
            assert info.value.sent is False
            # the real wait (the account's request leaves the window in about a second), not "0.0 s"
            figure = float(re.search(r"\((\d+\.\d) s\)", str(info.value)).group(1))  # type: ignore[union-attr]
            assert 0.5 <= figure <= 1.0, str(info.value)
            assert server.calls("describe") == 1
            # with a budget that fits, it waits for the window and goes
            await second.documents.describe(doc(server), timeout=3.0)
            assert 0.6 < time.monotonic() - started < 1.5
            assert server.calls("describe") == 2


async def test_a_pause_holds_back_the_other_sharers(redis_server: RedisServer, name: str) -> None:
    async with (
        RedisLimiter(redis_server.url, name=name) as one,
        RedisLimiter(redis_server.url, name=name) as other,
    ):
        one.pause(0.4)
        await asyncio.sleep(0.05)  # the pause is sent in the background
        assert await other.acquire(time.monotonic() + 0.1) is False  # would outlast the deadline: False at once
        started = time.monotonic()
        assert await other.acquire(time.monotonic() + 2) is True
        assert 0.2 < time.monotonic() - started < 0.5


async def test_admissions_are_taken_in_batches(server: FakeHealthServer, redis_server: RedisServer, name: str) -> None:
    # one script run admits several requests (and the reports ride along): far fewer round trips than requests,
    # one after another as well as sixteen at a time
    requests = 200
    async with RedisLimiter(redis_server.url, rate_limit=1000, name=name) as limiter:
        async with client(server, limiter) as health:
            await health.documents.describe(doc(server))  # the connections opened, the script loaded
            before = redis_server.calls("evalsha") + redis_server.calls("eval")
            for _ in range(requests):
                await health.documents.describe(doc(server))
            one_by_one = redis_server.calls("evalsha") + redis_server.calls("eval") - before
            before += one_by_one
            pending = iter(range(requests))

            async def loop() -> None:
                for _ in pending:
                    await health.documents.describe(doc(server))

            await asyncio.gather(*(loop() for _ in range(16)))
            together = redis_server.calls("evalsha") + redis_server.calls("eval") - before
    assert one_by_one <= requests / 4  # one round trip a request before
    assert together <= requests / 4


async def test_batches_hold_the_window_and_hand_back_their_spares(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    # rate 100: a batch takes spares (at most what the rate gives in a lease), counted in the window from when
    # they were taken, and spares unused are handed back after their lease (20 at once: within the pace's burst)
    async with RedisLimiter(redis_server.url, rate_limit=100, name=name, report_delay=0) as one:
        admitted = await asyncio.gather(*(one.acquire(None) for _ in range(20)))
        assert all(admitted)
        for _ in range(20):
            one.sent(time.monotonic())
        for _ in range(3):  # used up: the next batches take spares
            assert await one.acquire(None)
            one.sent(time.monotonic())
        assert await redis_client.zcard(f"{{{name}}}:rate:held") > 0  # counted in the window
        await asyncio.sleep(DEFAULT_LEASE + 0.1)  # the spares' lease is over: handed back
        assert await redis_client.zcard(f"{{{name}}}:rate:held") == 0
        assert await redis_client.zcard(f"{{{name}}}:rate:sent") == 23


async def test_a_busy_process_asks_for_the_next_batch_before_its_spares_run_out(
    redis_server: RedisServer, name: str
) -> None:
    # issue 44: a busy process asks for its next batch when a quarter of its spares are used, so its requests find
    # a spare instead of waiting for a round trip (about half of them waited at 16 at a time, for a batch every 32)
    async with RedisLimiter(redis_server.url, rate_limit=1000, name=name, max_batch=8, lease=10) as limiter:

        async def without_waiting() -> bool:
            # an admission from the spares completes in the step that asks for it; one that waits for Redis not
            task = asyncio.ensure_future(limiter.acquire(None))
            await asyncio.sleep(0)
            waited = not task.done()
            assert await task
            limiter.sent(time.monotonic())
            for _ in range(500):  # the round trip asked ahead (if any) lands before the next request
                if limiter._fetcher is None:
                    break
                await asyncio.sleep(0.01)
            return not waited

        before = redis_server.calls("evalsha") + redis_server.calls("eval")
        warm_up = [await without_waiting() for _ in range(16)]  # the batch grows to its most, 8
        steady = [await without_waiting() for _ in range(48)]
        trips = redis_server.calls("evalsha") + redis_server.calls("eval") - before
    assert not all(warm_up)
    assert all(steady), steady.count(False)
    assert trips <= (16 + 48) / 4  # still batches: no more round trips than before


async def test_the_first_asker_does_not_take_a_fresh_window(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    # issue 44: a process that asks first for a whole fresh window (20 at rate 20) gets a quarter of it at once,
    # then admissions are paced, so a second process that asks just after gets its turn in the same window
    # instead of a second later (without the pace it was admitted only after all 20 of the first)
    order: list[str] = []
    began = asyncio.Event()

    async def take(limiter: RedisLimiter, who: str) -> None:
        assert await limiter.acquire(None)
        limiter.sent(time.monotonic())
        order.append(who)
        began.set()

    async with (
        RedisLimiter(redis_server.url, rate_limit=20, name=name, report_delay=0) as one,
        RedisLimiter(redis_server.url, rate_limit=20, name=name, report_delay=0) as other,
    ):
        first = [asyncio.ensure_future(take(one, "one")) for _ in range(20)]
        await asyncio.wait_for(began.wait(), 5)
        assert len(order) <= 5  # a quarter of the window at once, at most
        await asyncio.wait_for(take(other, "other"), 5)
        assert order.index("other") < 10  # its turn came while the first one was still being paced
        for task in first:
            task.cancel()
        await asyncio.gather(*first, return_exceptions=True)


async def test_cancelled_waiter_holds_nothing(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    async with RedisLimiter(redis_server.url, rate_limit=1, name=name, report_delay=0) as limiter:
        assert await limiter.acquire(None)
        waiter = asyncio.ensure_future(limiter.acquire(None))
        await asyncio.sleep(0.1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter  # cancellation goes through, never swallowed
        limiter.unsent()  # the first request never left: its place is freed
        await asyncio.sleep(0.1)
        assert await redis_client.zcard(f"{{{name}}}:rate:held") == 0
        assert await redis_client.zcard(f"{{{name}}}:rate:sent") == 0
        started = time.monotonic()
        assert await limiter.acquire(None)  # and the window is free again at once
        assert time.monotonic() - started < 0.1


async def test_aclose_closes_its_connections(redis_server: RedisServer, name: str) -> None:
    def connected() -> int:
        clients: Any = redis_server.info("clients")["connected_clients"]
        return int(clients)

    before = connected()
    limiter = RedisLimiter(redis_server.url, rate_limit=10, name=name)
    assert await limiter.acquire(None)
    limiter.sent(time.monotonic())
    assert connected() > before
    await limiter.aclose()
    await limiter.aclose()  # idempotent
    assert connected() == before
    with pytest.raises(RedisUnavailable):
        await limiter.acquire(None)


async def test_many_waiters_open_a_bounded_number_of_connections(redis_server: RedisServer, name: str) -> None:
    def connected() -> int:
        clients: Any = redis_server.info("clients")["connected_clients"]
        return int(clients)

    before = connected()
    async with RedisLimiter(redis_server.url, rate_limit=1e6, name=name) as limiter:
        assert all(await asyncio.gather(*(limiter.acquire(None) for _ in range(100))))  # 100 at once
        assert before < connected() <= before + DEFAULT_MAX_CONNECTIONS
    assert connected() == before


async def test_a_redis_it_does_not_own_is_left_open(redis_client: aioredis.Redis, name: str) -> None:
    async with RedisLimiter(redis_client, rate_limit=10, name=name) as limiter:
        assert await limiter.acquire(None)
        limiter.unsent()
    assert await redis_client.ping()


async def test_redis_down_is_a_typed_error_within_the_deadline(server: FakeHealthServer) -> None:
    url = f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0"  # nothing listens there
    async with RedisLimiter(url, rate_limit=10) as limiter:
        started = time.monotonic()
        with pytest.raises(RedisUnavailable) as info:
            await limiter.acquire(None)
        assert time.monotonic() - started < 1.0
        assert info.value.sent is False and isinstance(info.value, TransportError)
        assert "s3cret" not in str(info.value) and info.value.__cause__ is None
        async with client(server, limiter, timeout=1.0) as health:
            started = time.monotonic()
            with pytest.raises(HealthError) as call:  # retried as a refused connection, within the budget
                await health.documents.describe(doc(server))
            assert time.monotonic() - started < 1.5
            assert isinstance(call.value, TransportError) and call.value.sent is False
            assert "redis" not in type(call.value).__module__.split(".")[0]
    assert server.calls("describe") == 0


async def test_a_redis_restart_in_the_middle_of_a_run_is_survived(
    server: FakeHealthServer, restartable_redis: RedisServer, name: str
) -> None:
    outcomes: list[tuple[float, float, str]] = []  # (start, end, "ok" or the error's type)
    policy = RetryPolicy(attempts=2, base_delay=0.05)
    async with (
        RedisLimiter(restartable_redis.url, rate_limit=1000, name=name) as limiter,
        client(server, limiter, timeout=0.5, retry=policy) as health,
    ):

        async def run(until: float) -> None:
            while time.monotonic() < until:
                started = time.monotonic()
                try:
                    await health.documents.describe(doc(server))
                    outcomes.append((started, time.monotonic(), "ok"))
                except HealthError as exc:  # anything else fails the test
                    outcomes.append((started, time.monotonic(), type(exc).__name__))
                await asyncio.sleep(0.01)  # 3 loops, at most 300 calls a second: the rate is never exhausted

        t0 = time.monotonic()
        runners = asyncio.gather(*(run(t0 + 2.5) for _ in range(3)))
        await asyncio.sleep(0.5)
        stopping = time.monotonic()
        await asyncio.to_thread(restartable_redis.stop)
        stopped = time.monotonic()
        await asyncio.sleep(0.6)
        restarting = time.monotonic()  # from here Redis may answer again, before start() has returned
        await asyncio.to_thread(restartable_redis.start)  # empty, scripts flushed: EVALSHA answers NOSCRIPT
        restarted = time.monotonic()
        await runners
    before = [o for o in outcomes if o[1] < stopping]
    down = [o for o in outcomes if stopped + 0.05 < o[0] and o[1] < restarting]
    after = [o for o in outcomes if o[0] > restarted + 0.1]
    assert before and {kind for _, _, kind in before} == {"ok"}
    assert down and {kind for _, _, kind in down} == {"RedisUnavailable"}  # typed, never a redis exception
    assert all(end - start < 0.5 + 0.2 for start, end, _ in outcomes)  # every call within its budget
    assert after and {kind for _, _, kind in after} == {"ok"}  # recovered by itself


async def test_the_keys_of_one_limiter_share_a_hash_tag(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    # the script's keys must map to one Redis Cluster slot: every key is "{name}:...", and one slot for all
    async with (
        RedisLimiter(redis_server.url, rate_limit=1, name=name) as one,
        RedisLimiter(redis_server.url, rate_limit=1, name=name) as other,
    ):
        assert await one.acquire(None)
        assert await other.acquire(time.monotonic() + 0.1) is False  # refused: queued in Redis
        one.pause(0.01)
        one.sent(time.monotonic())
        await asyncio.sleep(0.1)
        keys = sorted(k.decode() if isinstance(k, bytes) else k for k in await redis_client.keys(f"*{name}*"))
    assert keys == [
        f"{{{name}}}:{suffix}" for suffix in ("pause", "rate:claims", "rate:pace", "rate:queue", "rate:sent")
    ]
    assert len({key_slot(key.encode()) for key in [*keys, f"{{{name}}}:rate:held"]}) == 1


async def test_a_redis_outage_is_logged_once_and_its_end_once(
    restartable_redis: RedisServer, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="health_async.redis")
    async with RedisLimiter(restartable_redis.url, rate_limit=1000, name=name, report_delay=0) as limiter:
        assert await limiter.acquire(None)
        limiter.sent(time.monotonic())
        await asyncio.sleep(0.05)
        await asyncio.to_thread(restartable_redis.stop)
        for _ in range(20):  # admissions, reports and pauses during the outage
            with pytest.raises(RedisUnavailable):
                await limiter.acquire(None)
            limiter.pause(0.001)
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.6)  # a report flush retried
        await asyncio.to_thread(restartable_redis.start)
        for _ in range(5):
            assert await limiter.acquire(None)
            limiter.sent(time.monotonic())
    records = [r for r in caplog.records if r.name == "health_async.redis"]
    assert [r.levelno for r in records] == [logging.WARNING, logging.INFO], [r.getMessage() for r in records]
    assert "Redis cannot be used" in records[0].getMessage() and "again" in records[1].getMessage()
    assert str(restartable_redis.port) not in records[0].getMessage()
