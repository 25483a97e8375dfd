"""Several worker processes, one account: each runs its own HealthClient with a RedisLimiter against one fake
server in this process, which notes when each request arrives and from which worker (its user id). The rate holds
in every one-second window as the server counts arrivals, and one worker's 429 holds back all of them."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from health_async.testing import FakeHealthServer, Fault

from .conftest import RedisServer

WORKER = str(Path(__file__).with_name("_worker.py"))


class TimedServer(FakeHealthServer):
    """The fake server, noting each request's arrival (``time.monotonic()``), its worker (user id) and status."""

    def __init__(self, users: int = 3) -> None:
        super().__init__(record=False, users=users)
        self.arrivals: list[tuple[float, str, int]] = []

    def make_app(self) -> web.Application:
        app = super().make_app()

        @web.middleware
        async def timing(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            arrived = time.monotonic()
            response = await handler(request)
            self.arrivals.append((arrived, request.headers.get("X-Pt-Id", ""), response.status))
            return response

        app.middlewares.append(timing)
        return app


@pytest.fixture
async def server() -> AsyncIterator[TimedServer]:
    timed = TimedServer()
    async with timed:
        yield timed


def max_per_window(times: list[float], window: float = 1.0) -> int:
    """The most arrivals in any window of ``window`` seconds."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


async def run_workers(server: TimedServer, redis: RedisServer, name: str, **spec: Any) -> list[dict[str, int]]:
    """Start one worker process per user of the fake (three), wait for all of them, return their summaries."""
    procs = []
    for user in server.data.user_ids:
        worker_spec = {
            "base_url": server.url,
            "token": server.token,
            "user_id": user,
            "ids": list(server.data.documents[user])[:10],
            "redis": redis.url,
            "name": name,
            **spec,
        }
        procs.append(
            await asyncio.create_subprocess_exec(
                sys.executable, WORKER, json.dumps(worker_spec), stdout=asyncio.subprocess.PIPE
            )
        )
    summaries = []
    for proc in procs:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0
        summaries.append(json.loads(out.decode().strip().splitlines()[-1]))
    return summaries


async def run_together(
    server: TimedServer, redis: RedisServer, name: str, **spec: Any
) -> tuple[list[dict[str, int]], float]:
    """One worker process per user of the fake, started together once all are ready: their summaries, and when
    they were told to go (``time.monotonic()``, one clock for every process of the machine)."""
    procs = []
    for user in server.data.user_ids:
        worker_spec = {
            "base_url": server.url,
            "token": server.token,
            "user_id": user,
            "ids": list(server.data.documents[user])[:10],
            "redis": redis.url,
            "name": name,
            "barrier": True,
            **spec,
        }
        procs.append(
            await asyncio.create_subprocess_exec(
                sys.executable,
                WORKER,
                json.dumps(worker_spec),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        )
    for proc in procs:
        assert proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() == b"ready"
    go = time.monotonic()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
    summaries = []
    for proc in procs:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0
        summaries.append(json.loads(out.decode().strip().splitlines()[-1]))
    return summaries, go


async def test_four_workers_use_the_whole_rate_fairly_and_never_exceed_it(redis_server: RedisServer, name: str) -> None:
    # four processes with eight concurrent calls each share 20 requests a second for 3 s: admitted in batches
    # (several a script run), the rate holds in every one-second window as the server counts arrivals, the rate is
    # used (it was about half used, at times a third), and every worker gets its turn (one had 2 calls, another 42),
    # at least half its fair share (issue 44: the first to ask took most of the first window, one run split it
    # 15/5/0/0, before the pace)
    rate, seconds = 20.0, 3.0
    server = TimedServer(users=4)
    async with server:
        summaries, go = await run_together(server, redis_server, name, rate=rate, seconds=seconds, concurrency=8)
        arrivals = list(server.arrivals)
    assert all(set(summary) == {"ok"} for summary in summaries)
    assert max_per_window([t for t, _, _ in arrivals]) <= rate  # in EVERY one-second window
    during = [user for t, user, _ in arrivals if go <= t <= go + seconds]
    # generous bounds, the machine is shared: at full use about 60 arrive (20 in each second)
    assert len(during) >= 0.7 * rate * seconds
    fair = len(during) / 4
    assert all(during.count(user) >= fair / 2 for user in server.data.user_ids), sorted(map(during.count, set(during)))


async def test_rate_held_in_every_window_across_worker_processes(
    server: TimedServer, redis_server: RedisServer, name: str
) -> None:
    rate = 10.0
    summaries = await run_workers(server, redis_server, name, rate=rate, requests=12, concurrency=3)
    assert summaries == [{"ok": 12}] * 3
    times = [t for t, _, _ in server.arrivals]
    assert len(times) == 36
    assert len({user for _, user, _ in server.arrivals}) == 3  # three workers really shared it
    assert max_per_window(times) <= rate  # in EVERY one-second window, as the server counted arrivals
    achieved = (len(times) - 1) / (max(times) - min(times))
    assert achieved > rate * 0.5  # and the shared window does not starve them (a loose bound: the machine is shared)


async def test_retry_after_to_one_worker_holds_back_every_worker(
    server: TimedServer, redis_server: RedisServer, name: str
) -> None:
    workers = asyncio.ensure_future(run_workers(server, redis_server, name, rate=60.0, seconds=3.5, concurrency=2))
    deadline = time.monotonic() + 20
    while len({user for _, user, _ in server.arrivals}) < 3:  # every worker is sending
        assert time.monotonic() < deadline and not workers.done()
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    server.inject("describe", Fault(status=429, retry_after=1, times=1))
    summaries = await workers
    t429, got_it, _ = next(a for a in server.arrivals if a[2] == 429)
    during = [(t, user) for t, user, _ in server.arrivals if t429 + 0.2 < t < t429 + 0.9]
    assert during == []  # nobody sent while the service's pause was on, not only the worker that got the 429
    after = {user for t, user, _ in server.arrivals if t > t429 + 1.0}
    assert after == set(server.data.user_ids)  # and all of them went on afterwards
    assert {user for t, user, _ in server.arrivals if t < t429} == set(server.data.user_ids)
    assert sum(s.get("ok", 0) for s in summaries) > 0
    assert all(set(s) == {"ok"} for s in summaries)  # the 429 was retried after the pause: no call failed
    assert got_it in server.data.user_ids


async def test_a_redis_restart_in_the_middle_of_a_run_is_survived_by_every_worker(
    server: TimedServer, restartable_redis: RedisServer, name: str
) -> None:
    # three worker processes share a rate through a Redis that is stopped for 0.6 s in the middle of their run:
    # while it is down their calls fail with the library's typed errors (nothing reaches the service), and every
    # worker sends again once it is back, by itself
    spec = {"rate": 200.0, "seconds": 4.0, "concurrency": 2, "timeout": 0.5}
    workers = asyncio.ensure_future(run_workers(server, restartable_redis, name, **spec))
    deadline = time.monotonic() + 20
    while len({user for _, user, _ in server.arrivals}) < 3:  # every worker is sending
        assert time.monotonic() < deadline and not workers.done()
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    await asyncio.to_thread(restartable_redis.stop)
    stopped = time.monotonic()
    await asyncio.sleep(0.6)
    restarting = time.monotonic()
    await asyncio.to_thread(restartable_redis.start)
    restarted = time.monotonic()  # a loaded machine may take a while to start Redis again: count from here
    summaries = await workers
    down = [(t, user) for t, user, _ in server.arrivals if stopped + 0.2 < t < restarting]
    assert down == []  # nothing was sent without the shared rate
    assert restarted < stopped + 3.0, "Redis took too long to restart for the workers' run to show a recovery"
    after = {user for t, user, _ in server.arrivals if t > restarted + 0.2}
    assert after == set(server.data.user_ids)  # every worker recovered by itself
    failures = {kind for summary in summaries for kind in summary if kind != "ok"}
    # typed library errors only, never a redis-py exception: Redis unreachable, or a call's 0.5 s budget spent on it
    assert failures <= {"health_async.redis.RedisUnavailable", "health_async.RequestTimeout"}
    assert all(summary.get("ok", 0) > 0 for summary in summaries)
