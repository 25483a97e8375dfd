"""The bulk pool's own CPU cost per item: ``run_pool`` beside a hand-written pool of plain worker tasks.

    .venv/bin/python benchmarks/pool_bench.py                    # 50,000 items, concurrency 64, 7 repeats
    .venv/bin/python benchmarks/pool_bench.py --switch-every 0   # calls that never suspend
    .venv/bin/python benchmarks/pool_bench.py --ordered          # run_pool with ordered=True

Both sides run the same trivial ``call`` (a coroutine returning its argument, suspending once with
``asyncio.sleep(0)`` every ``--switch-every`` calls, as a request would wait for its socket) over
``range(N)``:

* **pool**: ``run_pool`` (the engine of ``describe_many`` and ``upload_many``) at ``--concurrency``, with a
  ``wrap`` returning the result, consumed by ``async for`` counting the results;
* **baseline**: ``--concurrency`` plain tasks pulling from one shared iterator, appending ``await call(x)`` to a
  list: the least any pool can do.

No request is sent: ``run_pool`` only needs the client's :class:`Session` for ``spawn`` and its limits. Runs
alternate (pool, baseline, pool, ...) so a busy machine slows both alike; each is timed in CPU time of this
process (``time.process_time``), and the medians per item are printed with their spread (min-max). The
difference is what the pool machinery costs per item: its window, its results channel, its workers' bookkeeping,
the stream's async iteration.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import health_async as ha
from health_async._bulk import run_pool
from health_async._session import Session

Call = Callable[[int], Awaitable[int]]


def make_call(switch_every: int) -> Call:
    """A trivial call: returns its argument, suspending once every ``switch_every`` calls (never when 0)."""
    if switch_every <= 0:

        async def call(x: int) -> int:
            return x

        return call

    async def call_switching(x: int) -> int:
        if x % switch_every == 0:
            await asyncio.sleep(0)
        return x

    return call_switching


def wrap(item: int, result: int | None, error: ha.HealthError | None) -> int | None:
    """What ``describe_many`` does with a result, minus the result class: the result itself."""
    del item, error
    return result


async def pool_run(session: Session, n: int, concurrency: int, call: Call, ordered: bool) -> int:
    count = 0
    async with run_pool(session, range(n), call, wrap, concurrency=concurrency, ordered=ordered) as stream:
        async for _ in stream:
            count += 1
    return count


async def baseline_run(n: int, concurrency: int, call: Call) -> int:
    items = iter(range(n))
    out: list[int] = []

    async def worker() -> None:
        for x in items:
            out.append(await call(x))

    await asyncio.gather(*[asyncio.create_task(worker()) for _ in range(concurrency)])
    return len(out)


async def timed(run: Callable[[], Awaitable[int]], n: int) -> float:
    """CPU microseconds per item of one run (checking every item came back)."""
    gc.collect()
    start = time.process_time()
    count = await run()
    elapsed = time.process_time() - start
    if count != n:
        raise AssertionError(f"{count} results for {n} items")
    return elapsed / n * 1e6


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} us/item  ({min(values):.2f}-{max(values):.2f})"


async def main_async(args: argparse.Namespace) -> None:
    n, concurrency = args.n, args.concurrency
    call = make_call(args.switch_every)
    pool: list[float] = []
    base: list[float] = []
    async with ha.HealthClient(base_url="http://127.0.0.1:9", token="t", user_id="u") as client:
        session = client._session

        def run_pool_once() -> Awaitable[int]:
            return pool_run(session, n, concurrency, call, args.ordered)

        def run_base_once() -> Awaitable[int]:
            return baseline_run(n, concurrency, call)

        await timed(run_pool_once, n)  # warm-up of both
        await timed(run_base_once, n)
        for _ in range(args.repeats):
            pool.append(await timed(run_pool_once, n))
            base.append(await timed(run_base_once, n))
    diffs = [p - b for p, b in zip(pool, base, strict=True)]
    mode = "ordered" if args.ordered else "unordered"
    switching = f"suspending every {args.switch_every} call(s)" if args.switch_every > 0 else "never suspending"
    print(f"N={n}, concurrency={concurrency}, {mode}, call {switching}, {args.repeats} repeats, CPU time")
    print(f"  pool      {summary(pool)}")
    print(f"  baseline  {summary(base)}")
    print(f"  overhead  {summary(diffs)}   (pool - baseline, per repeat)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50_000, help="items per run (default 50,000)")
    parser.add_argument("--concurrency", type=int, default=64, help="workers (default 64)")
    parser.add_argument("--repeats", type=int, default=7, help="alternating runs of each (default 7)")
    parser.add_argument("--switch-every", type=int, default=1, help="suspend once every K calls; 0: never (default 1)")
    parser.add_argument("--ordered", action="store_true", help="run_pool with ordered=True")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
