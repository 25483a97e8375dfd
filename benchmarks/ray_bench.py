"""Ingest throughput: the Ray engine with 2 local worker actors beside the LocalEngine, measured in the same run.

    .venv/bin/python benchmarks/ray_bench.py            # full run
    .venv/bin/python benchmarks/ray_bench.py --quick    # about a minute

A fast local server runs in a separate process on 127.0.0.1 and answers every describe with one of a few hundred
realistic 2-4 KB document bodies (the fake server's generator). A local Ray cluster is started once. For each
concurrency the script measures, in alternation and ``--repeats`` times, describe jobs of ``N`` ids through:

* ``local``: :class:`LocalEngine`, one client in this process, ``concurrency`` workers;
* ``ray``: :class:`RayEngine` with 2 worker actors, each with one client doing ``concurrency`` at a time (so
  twice the requests in flight), results sent back to this process, the single writer;
* ``ray+rate``: the same with ``rate_limit=50_000`` (far above what is reached), so every request takes a slot
  of a lease from the coordinator actor (2 500 slots a lease at that rate): the cost of the account-wide
  coordination.

It prints requests per second (medians) and the ratios to ``local``. On a two-core machine the server, the two
actors and the driver share the cores: expect ``ray`` near ``local`` there, and above it with more cores (or
nodes), where one process's event loop is the limit of ``local``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import start_describe_server

from health_async.ingest._engine import Engine, LocalEngine
from health_async.ingest._ray import ClientRecipe, RayEngine
from health_async.ingest._work import JobSpec, WorkItem

TOKEN = "bench-token"
USER = "oid-1"


async def ids(n: int) -> AsyncIterator[WorkItem]:
    for i in range(n):
        yield WorkItem(f"doc-{i}", i)


async def measure(engine: Engine, n: int, concurrency: int) -> tuple[float, float]:
    """One describe job of ``n`` ids (every result must be a success): requests per second from the first
    result to the last (the steady rate), and seconds to the first result (the start: Ray starts its actors)."""
    started = time.perf_counter()
    first = 0.0
    count = 0
    async for result in engine.run(JobSpec(op="describe", concurrency=concurrency), ids(n)):
        if not result.ok:
            raise RuntimeError(f"benchmark request failed: {result.line_json().get('error')}")
        count += 1
        if count == 1:
            first = time.perf_counter()
    elapsed = time.perf_counter() - first
    assert count == n
    return (n - 1) / elapsed, first - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests and repeats")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (2 if args.quick else 4)
    per_run = 3000 if args.quick else 10_000

    import ray

    server, url = start_describe_server()
    cpus = os.cpu_count() or 2
    ray.init(num_cpus=cpus, include_dashboard=False, configure_logging=False, log_to_driver=False)
    print(f"server: {url}; local Ray cluster with {cpus} CPUs; {per_run} ids per run, median of {repeats}")

    def recipe(concurrency: int) -> ClientRecipe:
        return ClientRecipe(base_url=url, token=TOKEN, user_id=USER, max_connections=concurrency)

    # the actors ask for no CPU: on a small machine the server and the driver need the cores too
    options = {"num_cpus": 0}
    print(f"\n{'conc':>5} {'local/s':>9} {'ray/s':>9} {'ratio':>6} {'ray+rate/s':>11} {'ratio':>6} {'ray start':>10}")
    try:
        for concurrency in (16, 64):
            engines: dict[str, Engine] = {
                "local": LocalEngine(client_factory=recipe(concurrency)),
                "ray": RayEngine(recipe(concurrency), workers=2, actor_options=options),
                "ray+rate": RayEngine(
                    recipe(concurrency), workers=2, rate_limit=50_000, lease_size=64, actor_options=options
                ),
            }
            rates: dict[str, list[float]] = {name: [] for name in engines}
            starts: list[float] = []
            for _ in range(repeats):  # alternate so drift on a noisy machine hits all alike
                for name, engine in engines.items():
                    rate, start = asyncio.run(measure(engine, per_run, concurrency))
                    rates[name].append(rate)
                    if name == "ray":
                        starts.append(start)
            local, on_ray, rated = (statistics.median(rates[name]) for name in engines)
            print(
                f"{concurrency:>5} {local:>9.0f} {on_ray:>9.0f} {on_ray / local:>6.2f} {rated:>11.0f} "
                f"{rated / local:>6.2f} {statistics.median(starts):>9.2f}s"
            )
    finally:
        ray.shutdown()
        server.terminate()
    print("\n(rates from the first result to the last; ray: 2 actors x conc in flight; ray start: to the first result)")


if __name__ == "__main__":
    main()
