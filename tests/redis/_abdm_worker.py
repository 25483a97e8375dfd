"""One hospital web worker for tests/redis/test_abdm_workers.py, run as a child process: an aiohttp app serving
``webhooks.abdm_handler`` on 127.0.0.1, whose replay and de-duplication memory is a ``RedisSeenStore`` shared
with the other workers. It writes its port to ``PORT_FILE`` and serves until killed.

Usage: ``python -m tests.redis._abdm_worker FAKE_URL TOKEN CLIENT_ID REDIS_URL NAME SECRET PORT_FILE``
"""

from __future__ import annotations

import asyncio
import json
import sys

import health_async as ha
from health_async import webhooks
from health_async.models import HealthDataRequest
from health_async.redis import RedisSeenStore
from health_async.testing.abdm._hiu import example_document

from ._serve import serve_until_killed


async def main(argv: list[str]) -> None:
    fake_url, token, client_id, redis_url, name, secret, port_file = argv
    bundle = json.dumps(example_document("OPConsultation")).encode()

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        return dict.fromkeys(request.care_contexts, bundle)

    async with (
        ha.HealthClient(base_url=fake_url, token=token, client_id=client_id, user_id="oid-1") as client,
        RedisSeenStore(redis_url, name=name) as seen,
    ):
        handler = webhooks.abdm_handler(secret, client=client, on_data_fetch=on_data_fetch, seen_store=seen)
        await serve_until_killed("/abdm", handler.handle, port_file, aclose=handler.aclose)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
