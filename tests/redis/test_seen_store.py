"""RedisSeenStore against a real Redis server: atomic first-seen, expiry on the server, shared by every worker
with the same name, and a webhook redelivered to another worker's receiver refused as a replay."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
import redis.asyncio as aioredis

from health_async import webhooks
from health_async.redis import RedisSeenStore, RedisUnavailable
from health_async.testing.webhooks._send import sign
from health_async.webhooks import SeenStore, WebhookEvent

from ..conftest import Serve
from .conftest import RedisServer, free_port

KEY = "ab" * 32
SECRET = "whsec-test-redis"
BODY = (
    b'{"event": "rec.srp", "service": "rec", "event_time": 1759234802, '
    b'"transaction_id": "tx-1", "data": {"status": "parsing_complete", "document_id": "doc-1"}}'
)


async def test_add_is_first_seen_then_replay_until_discarded(redis_server: RedisServer, name: str) -> None:
    async with RedisSeenStore(redis_server.url, name=name) as store:
        assert isinstance(store, SeenStore)
        assert await store.add(KEY, time.time() + 60) is True
        assert await store.add(KEY, time.time() + 60) is False
        await store.discard(KEY)
        await store.discard(KEY)  # nothing there: nothing happens
        assert await store.add(KEY, time.time() + 60) is True


async def test_entries_expire_on_the_server(redis_server: RedisServer, redis_client: aioredis.Redis, name: str) -> None:
    async with RedisSeenStore(redis_server.url, name=name) as store:
        assert await store.add(KEY, time.time() + 0.3)
        ttl = await redis_client.pttl(f"{{{name}}}:seen:{KEY}")
        assert 0 < ttl <= 300
        await asyncio.sleep(0.4)
        assert await store.add(KEY, time.time() + 60) is True  # expired: new again


async def test_shared_by_name_between_workers(redis_server: RedisServer, name: str) -> None:
    async with (
        RedisSeenStore(redis_server.url, name=name) as one,
        RedisSeenStore(redis_server.url, name=name) as two,
        RedisSeenStore(redis_server.url, name=name + "-other") as elsewhere,
    ):
        results = await asyncio.gather(*(store.add(KEY, time.time() + 60) for store in (one, two, one, two)))
        assert sorted(results) == [False, False, False, True]  # exactly one first delivery, atomically
        assert await elsewhere.add(KEY, time.time() + 60) is True  # another name is another namespace


async def test_redis_down_is_a_typed_error() -> None:
    async with RedisSeenStore(f"redis://:s3cret@127.0.0.1:{free_port()}/0") as store:
        with pytest.raises(RedisUnavailable) as info:
            await store.add(KEY, time.time() + 60)
        assert "s3cret" not in str(info.value) and "s3cret" not in repr(store)
        with pytest.raises(RedisUnavailable):
            await store.discard(KEY)


async def test_a_webhook_redelivered_to_another_worker_is_a_replay(
    serve: Serve, redis_server: RedisServer, name: str
) -> None:
    received: list[tuple[int, WebhookEvent]] = []
    urls = []
    stores = [RedisSeenStore(redis_server.url, name=name) for _ in range(2)]
    for worker, store in enumerate(stores):

        async def callback(event: WebhookEvent, worker: int = worker) -> None:
            received.append((worker, event))

        handler = webhooks.aiohttp_handler(SECRET, callback, seen_store=store)
        urls.append(await serve({("POST", "/hook"): handler}) + "/hook")
    header = sign(BODY, SECRET)
    async with aiohttp.ClientSession() as session:
        answers = []
        for url in urls:  # the service's delivery to one worker, its redelivery to the other
            async with session.post(url, data=BODY, headers={webhooks.SIGNATURE_HEADER: header}) as response:
                answers.append((response.status, await response.text()))
    for store in stores:
        await store.aclose()
    assert answers == [(200, "ok"), (200, "duplicate webhook ignored")]
    assert [worker for worker, _ in received] == [0]
