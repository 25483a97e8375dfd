"""Issue 42 against a real Redis: a seen store's claim carries a random token, and only that token ends it
(compare-and-delete), so a replay cancelled while its claim is in flight (Redis slow: a proxy holds every byte
300 ms) never erases the key of the delivery that ran; and a claim is "in progress" until finished."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web

import health_async as ha
from health_async import webhooks
from health_async.models import HealthDataRequest
from health_async.redis import RedisSeenStore
from health_async.testing import FakeHealthServer
from health_async.testing.webhooks._send import sign
from health_async.webhooks import Claim, WebhookEvent
from health_async.webhooks._abdm import _taken_key

from .. import _abdm_fixtures
from ..conftest import Serve
from ..webhooks.test_abdm_asgi import SECRET as ABDM_SECRET
from ..webhooks.test_abdm_asgi import call, envelope
from ..webhooks.test_abdm_bounds import resigned
from ..webhooks.test_abdm_shared_store import bundles
from ._slow_proxy import SlowProxy
from .conftest import RedisServer
from .test_seen_store import BODY, KEY, SECRET

server = _abdm_fixtures.server
client = _abdm_fixtures.client

#: How long the proxy holds each chunk, each way, once a test makes Redis slow.
SLOW = 0.3


async def test_claim_is_held_by_its_token_until_finished_or_released(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    async with RedisSeenStore(redis_server.url, name=name) as store:
        assert isinstance(store, webhooks.SeenStore)
        assert await store.claim(KEY, time.time() + 60, token="first") is Claim.NEW
        assert await store.claim(KEY, time.time() + 60, token="replay") is Claim.IN_PROGRESS
        await store.release(KEY, token="replay")  # not its claim: nothing happens
        await store.finish(KEY, token="replay")
        assert await store.claim(KEY, time.time() + 60, token="again") is Claim.IN_PROGRESS
        await store.release(KEY, token="first")  # the holder's release frees it
        assert await store.claim(KEY, time.time() + 60, token="second") is Claim.NEW
        await store.finish(KEY, token="second")
        ttl = await redis_client.pttl(f"{{{name}}}:seen:{KEY}")
        assert 0 < ttl <= 60_000  # finishing keeps the expiry
        assert await store.claim(KEY, time.time() + 60, token="replay") is Claim.DONE
        await store.release(KEY, token="second")  # done: no longer releasable, even by its holder
        assert await store.claim(KEY, time.time() + 60, token="replay") is Claim.DONE
        # an entry set by the old protocol (or a version before issue 42) reads as done
        assert await store.add("cd" * 32, time.time() + 60) is True
        assert await store.claim("cd" * 32, time.time() + 60, token="t") is Claim.DONE


async def _post(session: aiohttp.ClientSession, url: str, header: str) -> tuple[int, str]:
    async with session.post(url, data=BODY, headers={webhooks.SIGNATURE_HEADER: header}) as response:
        return response.status, await response.text()


async def test_a_replay_cancelled_with_its_claim_in_flight_keeps_the_first_deliverys_key(
    serve: Serve, redis_server: RedisServer, name: str
) -> None:
    received: list[WebhookEvent] = []
    ended = asyncio.Event()

    async def callback(event: WebhookEvent) -> None:
        received.append(event)

    async with SlowProxy(redis_server.port) as proxy, RedisSeenStore(proxy.url, name=name) as store:
        handler = webhooks.aiohttp_handler(SECRET, callback, seen_store=store)

        async def handle(request: web.Request) -> web.Response:
            try:
                return await handler(request)
            finally:
                ended.set()

        url = await serve({("POST", "/hook"): handle}) + "/hook"
        header = sign(BODY, SECRET)
        key = header.split("v1=")[1].encode()
        async with aiohttp.ClientSession() as session:
            assert await _post(session, url, header) == (200, "ok")
            ended.clear()
            proxy.delay = SLOW
            in_redis = proxy.watch(key)
            replay = asyncio.ensure_future(_post(session, url, header))
            await in_redis.wait()  # the replay's claim reached Redis; its answer is 300 ms away
            replay.cancel()  # the sender goes away: aiohttp cancels the handler in the claim
            proxy.delay = 0.0  # what follows (the release) reaches Redis after the claim all the same
            with pytest.raises(asyncio.CancelledError):
                await replay
            await ended.wait()  # the handler released what it claimed (nothing: the key was not its own)
            assert await _post(session, url, header) == (200, "duplicate webhook ignored")
    assert len(received) == 1


async def test_a_data_request_redelivered_and_cancelled_in_flight_is_still_pushed_once(
    server: FakeHealthServer, client: ha.HealthClient, redis_server: RedisServer, name: str
) -> None:
    fetched: list[str] = []

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        fetched.append(request.transaction_id)
        return await bundles(request)

    async with SlowProxy(redis_server.port) as proxy, RedisSeenStore(proxy.url, name=name) as store:
        app = webhooks.abdm_asgi(ABDM_SECRET, client=client, on_data_fetch=on_data_fetch, seen_store=store)
        data = server.abdm.data_request(["visit-1"], oid="oid-1")
        body = envelope("abha.hip_data_fetch", data)
        assert (await call(app, body, signature=sign(body, ABDM_SECRET))).body == b"accepted"
        await app.join()
        proxy.delay = SLOW
        in_redis = proxy.watch(_taken_key("request", data["transaction_id"]).encode())
        redelivery = asyncio.ensure_future(call(app, body, signature=resigned(body)))
        await in_redis.wait()  # the redelivery's claim of the data request reached Redis
        redelivery.cancel()
        proxy.delay = 0.0  # what follows (the release) reaches Redis after the claim all the same
        with pytest.raises(asyncio.CancelledError):
            await redelivery  # returns once the cancelled claim was released
        again = await call(app, body, signature=resigned(body, 2))
        assert (again.status, again.body) == (200, b"duplicate data request ignored")
        await app.join()
        await app.aclose()
    assert fetched == [data["transaction_id"]] and server.calls("hip_data_push") == 1


async def test_a_replay_during_a_slow_failing_delivery_is_retried_then_runs_across_workers(
    serve: Serve, redis_server: RedisServer, name: str
) -> None:
    calls: list[WebhookEvent] = []
    started, fail = asyncio.Event(), asyncio.Event()

    async def callback(event: WebhookEvent) -> None:
        calls.append(event)
        if len(calls) == 1:
            started.set()
            await fail.wait()
            raise RuntimeError("database down")

    async with RedisSeenStore(redis_server.url, name=name) as one, RedisSeenStore(redis_server.url, name=name) as two:
        urls = [
            await serve({("POST", "/hook"): webhooks.aiohttp_handler(SECRET, callback, seen_store=store)}) + "/hook"
            for store in (one, two)
        ]
        header = sign(BODY, SECRET)
        async with aiohttp.ClientSession() as session:
            first = asyncio.ensure_future(_post(session, urls[0], header))
            await started.wait()
            assert await _post(session, urls[1], header) == (503, "webhook already being processed, retry later")
            fail.set()
            assert (await first)[0] == 500
            assert await _post(session, urls[1], header) == (200, "ok")
            assert await _post(session, urls[0], header) == (200, "duplicate webhook ignored")
    assert len(calls) == 2
