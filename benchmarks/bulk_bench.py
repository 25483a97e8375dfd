"""Bulk describe throughput: ``describe_many`` beside a hand-written raw aiohttp loop, measured in the same run.

    .venv/bin/python benchmarks/bulk_bench.py            # full run (a few minutes)
    .venv/bin/python benchmarks/bulk_bench.py --quick    # about a minute

A fast local server runs in a separate process on 127.0.0.1 and answers every describe with one of a few
hundred realistic 2-4 KB document bodies (files, tags, a smart report of several items). For each event loop
(asyncio's default, uvloop when installed) and each concurrency (1, 16, 64, 256) the script measures, in
alternation and ``--repeats`` times:

* ``raw``: aiohttp GET + ``orjson.loads`` per id, no models, the same headers, same concurrency (the baseline);
* ``describe_many``: the library's helper, every result a full :class:`health_async.Document` (its smart report
  left unparsed until read, as a bulk job that only stores documents would use it);
* ``+report``: the same, reading ``document.smart_report`` of every result (all items parsed).

It prints requests per second (medians) and the ratios to ``raw``; the target is ``describe_many`` at
concurrency 64 reaching 0.8 of ``raw``. Last, the memory growth of ``describe_many`` over 100 000 ids from an
async generator (peak RSS after, minus peak RSS after a warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import resource
import socket
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import health_async as ha
from health_async.testing._data import make_document


def make_bodies(count: int = 256, seed: int = 1) -> list[bytes]:
    """Realistic document descriptions (the fake server's generator): 2-4 KB, live spellings mixed in."""
    rng = random.Random(seed)
    return [orjson.dumps(make_document(rng, f"doc-{n}", date=1614556800 + n)) for n in range(count)]


def _server(port: int, ready: Any) -> None:
    """The benchmark's server process: the fastest aiohttp.web handler we can write."""
    from aiohttp import web

    bodies = make_bodies()

    async def describe(request: web.Request) -> web.Response:
        doc_id = request.match_info["id"]
        body = bodies[hash(doc_id) % len(bodies)]
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/mr/api/v1/docs/{id}", describe)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()
        ready.set()
        await asyncio.Event().wait()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


HEADERS = {"X-Pt-Id": "oid-1", "Authorization": "Bearer bench-token", "Accept": "application/json"}


async def raw_loop(url: str, n: int, concurrency: int) -> float:
    """The baseline: a fixed pool of ``concurrency`` workers doing aiohttp GET + orjson.loads."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        ids = iter(range(n))

        async def worker() -> None:
            for i in ids:
                async with session.get(f"{url}/mr/api/v1/docs/doc-{i}", headers=HEADERS) as resp:
                    resp.raise_for_status()
                    orjson.loads(await resp.read())

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return n / (time.perf_counter() - started)


async def ours(url: str, n: int, concurrency: int, *, read_report: bool = False) -> float:
    async with ha.HealthClient(
        base_url=url, token="bench-token", user_id="oid-1", max_connections=concurrency
    ) as client:
        started = time.perf_counter()
        count = 0
        async for r in client.documents.describe_many((f"doc-{i}" for i in range(n)), concurrency=concurrency):
            if r.document is None:
                raise RuntimeError(f"benchmark request failed: {r.error!r}")
            if read_report:
                _ = r.document.smart_report
            count += 1
        assert count == n
        return n / (time.perf_counter() - started)


def run_in_loop(make: Callable[[], Coroutine[Any, Any, float]], use_uvloop: bool) -> float:
    if use_uvloop:
        import uvloop

        return uvloop.run(make())
    return asyncio.run(make())


def rss_mb() -> float:
    """Current resident set size (Linux ``/proc``; the peak-RSS counter would remember earlier phases)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


async def memory_growth(url: str, total: int, concurrency: int = 64) -> tuple[float, int]:
    """RSS growth (MB, the most seen while running) of describe_many over ``total`` ids from an async generator."""

    async def ids(count: int) -> AsyncIterator[str]:
        for i in range(count):
            yield f"doc-{i}"

    async with ha.HealthClient(
        base_url=url, token="bench-token", user_id="oid-1", max_connections=concurrency
    ) as client:
        async for _ in client.documents.describe_many(ids(5000), concurrency=concurrency):
            pass  # warm-up: pools, caches and the allocator reach their steady state
        before = peak = rss_mb()
        done = 0
        async for r in client.documents.describe_many(ids(total), concurrency=concurrency):
            done += r.ok
            if done % 1000 == 0:
                peak = max(peak, rss_mb())
    return peak - before, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests and repeats")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    per_run = 1500 if args.quick else 4000
    memory_ids = 20_000 if args.quick else 100_000

    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(target=_server, args=(port, ready), daemon=True)
    server.start()
    if not ready.wait(30):
        raise SystemExit("the benchmark server did not start")
    url = f"http://127.0.0.1:{port}"
    sizes = [len(b) for b in make_bodies()]
    print(f"server: {url}, {len(sizes)} bodies of {min(sizes)}-{max(sizes)} bytes (median {statistics.median(sizes)})")

    try:
        import uvloop  # noqa: F401

        loops = [("asyncio", False), ("uvloop", True)]
    except ImportError:
        loops = [("asyncio", False)]
        print("uvloop not installed: default loop only (pip install -e '.[bench]')")

    print(f"\n{'loop':8} {'conc':>5} {'raw/s':>9} {'ours/s':>9} {'ratio':>6} {'+report/s':>10} {'ratio':>6}")
    verdicts = []
    try:
        for loop_name, use_uvloop in loops:
            for concurrency in (1, 16, 64, 256):
                n = per_run // 4 if concurrency == 1 else per_run
                raw_rates, our_rates, report_rates = [], [], []
                for _ in range(repeats):  # alternate so drift on a noisy machine hits all three alike
                    raw_rates.append(run_in_loop(lambda c=concurrency, n=n: raw_loop(url, n, c), use_uvloop))
                    our_rates.append(run_in_loop(lambda c=concurrency, n=n: ours(url, n, c), use_uvloop))
                    report_rates.append(
                        run_in_loop(lambda c=concurrency, n=n: ours(url, n, c, read_report=True), use_uvloop)
                    )
                raw_m, our_m, rep_m = (statistics.median(x) for x in (raw_rates, our_rates, report_rates))
                print(
                    f"{loop_name:8} {concurrency:>5} {raw_m:>9.0f} {our_m:>9.0f} {our_m / raw_m:>6.2f}"
                    f" {rep_m:>10.0f} {rep_m / raw_m:>6.2f}"
                )
                if concurrency == 64:
                    verdicts.append((loop_name, our_m / raw_m))
        growth, done = run_in_loop(lambda: memory_growth(url, memory_ids), False)
    finally:
        server.kill()
        server.join()

    print()
    for loop_name, ratio in verdicts:
        verdict = "PASS" if ratio >= 0.8 else "MISS"
        print(f"target describe_many >= 0.80 of raw at concurrency 64 ({loop_name}): {ratio:.3f} {verdict}")
    print(f"memory: describe_many over {done} ids from an async generator grew RSS by at most {growth:.1f} MB")


if __name__ == "__main__":
    main()
