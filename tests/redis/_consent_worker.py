"""One hospital web worker for tests/redis/test_redis_consent_book.py, run as a child process: an aiohttp app serving
``webhooks.abdm_handler`` on 127.0.0.1 whose consent book is a ``RedisConsentBook`` shared with the other workers.
Each call of ``on_data_fetch`` appends a line to ``CALLS_FILE``; the library's log goes to ``LOG_FILE``. It writes
its port to ``PORT_FILE`` and serves until killed.

Usage: ``python -m tests.redis._consent_worker FAKE_URL TOKEN CLIENT_ID REDIS_URL NAME SECRET PORT_FILE CALLS_FILE
LOG_FILE``
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

import health_async as ha
from health_async import webhooks
from health_async.models import HealthDataRequest
from health_async.redis import RedisConsentBook
from health_async.testing.abdm._hiu import example_document

from ._serve import serve_until_killed


async def main(argv: list[str]) -> None:
    fake_url, token, client_id, redis_url, name, secret, port_file, calls_file, log_file = argv
    log = logging.FileHandler(log_file)
    log.setLevel(logging.INFO)
    logging.getLogger("health_async").addHandler(log)
    logging.getLogger("health_async").setLevel(logging.INFO)
    bundle = json.dumps(example_document("OPConsultation")).encode()

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        with Path(calls_file).open("a") as calls:  # noqa: ASYNC230 - one short line, in a test worker
            calls.write(f"{request.transaction_id}\n")
        return dict.fromkeys(request.care_contexts, bundle)

    async with (
        ha.HealthClient(base_url=fake_url, token=token, client_id=client_id, user_id="oid-1") as client,
        RedisConsentBook(redis_url, name=name) as consents,
    ):
        handler = webhooks.abdm_handler(secret, client=client, on_data_fetch=on_data_fetch, consents=consents)
        await serve_until_killed("/abdm", handler.handle, port_file, aclose=handler.aclose)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
