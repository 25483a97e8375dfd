"""One records web worker for tests/redis/test_claim_lease.py, run as a child process: an aiohttp app serving
``webhooks.aiohttp_handler`` on 127.0.0.1 with a ``RedisSeenStore`` shared with the other workers and a short
``claim_lease``. Its callback writes ``<DIRECTORY>/<LABEL>.started`` when it starts; then, in mode ``hang``, waits
forever (the test kills the process with SIGKILL), in mode ``slow`` until ``<DIRECTORY>/go`` exists, and in mode
``quick`` not at all; ``<DIRECTORY>/<LABEL>.done`` once it returned. It writes its port to ``<DIRECTORY>/<LABEL>.port``.

Usage: ``python -m tests.redis._lease_worker REDIS_URL NAME SECRET LEASE MODE LABEL DIRECTORY``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from health_async import webhooks
from health_async.redis import RedisSeenStore
from health_async.webhooks import WebhookEvent

from ._serve import serve_until_killed


async def main(argv: list[str]) -> None:
    redis_url, name, secret, lease, mode, label, directory = argv
    folder = Path(directory)

    async def callback(event: WebhookEvent) -> None:
        await asyncio.to_thread((folder / f"{label}.started").write_text, "1")
        if mode == "hang":
            await asyncio.Event().wait()
        while mode == "slow" and not await asyncio.to_thread((folder / "go").exists):  # noqa: ASYNC110 - a file
            await asyncio.sleep(0.02)
        await asyncio.to_thread((folder / f"{label}.done").write_text, "1")

    async with RedisSeenStore(redis_url, name=name) as seen:
        handler = webhooks.aiohttp_handler(secret, callback, seen_store=seen, claim_lease=float(lease))
        await serve_until_killed("/hook", handler, folder / f"{label}.port")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
