"""One worker process of the several-workers tests: ONE HealthClient with a RedisLimiter, describing documents
``concurrency`` at a time, until it has sent ``requests`` calls or ``seconds`` have passed (with ``barrier``: from
the line the test writes on its stdin, once it printed ``ready``). Prints a JSON summary (calls that succeeded, and
the type of each error) on its last line. Run as ``python _worker.py '<json>'``."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from typing import Any

from health_async import HealthClient
from health_async.redis import RedisLimiter


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    limiter = RedisLimiter(spec["redis"], rate_limit=spec["rate"], name=spec["name"])
    outcomes: Counter[str] = Counter()
    ids: list[str] = spec["ids"]
    total: int | None = spec.get("requests")
    stop_at = time.monotonic() + spec.get("seconds", 60.0)
    taken = 0

    async with (
        limiter,
        HealthClient(
            base_url=spec["base_url"],
            token=spec["token"],
            user_id=spec["user_id"],
            limiter=limiter,
            timeout=spec.get("timeout", 10.0),
        ) as client,
    ):
        if spec.get("barrier"):  # wait for the test's go, so that every worker runs the same seconds
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            stop_at = time.monotonic() + spec.get("seconds", 60.0)

        async def loop() -> None:
            nonlocal taken
            while time.monotonic() < stop_at and (total is None or taken < total):
                doc = ids[taken % len(ids)]
                taken += 1
                try:
                    await client.documents.describe(doc)
                    outcomes["ok"] += 1
                except Exception as exc:  # every failure is counted by type: the test checks they are ours
                    outcomes[f"{type(exc).__module__}.{type(exc).__name__}"] += 1

        await asyncio.gather(*(loop() for _ in range(spec.get("concurrency", 2))))
    return dict(outcomes)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
