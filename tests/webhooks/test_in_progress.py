"""Issue 42: a delivery that comes while the first delivery of the same webhook (or data request) is still being
processed is answered 503 with ``Retry-After``, not 200 "duplicate": the first may yet fail and release its key,
and the retry then runs it. A delivery after a success stays a plain 200 duplicate."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import HealthDataRequest, ProfileShare
from health_async.testing import FakeHealthServer
from health_async.testing.webhooks._send import sign
from health_async.webhooks import WebhookEvent

from ..conftest import Serve
from .test_abdm_asgi import SECRET as ABDM_SECRET
from .test_abdm_asgi import call, envelope
from .test_abdm_bounds import resigned
from .test_abdm_shared_store import bundles
from .test_webhooks import PII, SECRET

RETRY = (503, "5", "webhook already being processed, retry later")


async def post(session: aiohttp.ClientSession, url: str, header: str) -> tuple[int, str | None, str]:
    async with session.post(url, data=PII, headers={webhooks.SIGNATURE_HEADER: header}) as response:
        return response.status, response.headers.get("Retry-After"), await response.text()


async def test_a_replay_during_a_slow_failing_delivery_is_retried_and_then_runs(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[WebhookEvent] = []
    started, fail = asyncio.Event(), asyncio.Event()

    async def callback(event: WebhookEvent) -> None:
        calls.append(event)
        if len(calls) == 1:
            started.set()
            await fail.wait()
            raise RuntimeError("database down")

    handler = webhooks.aiohttp_handler(SECRET, callback)
    url = f"{await serve({('POST', '/hook'): handler})}/hook"
    header = sign(PII, SECRET)
    async with aiohttp.ClientSession() as session:
        first = asyncio.ensure_future(post(session, url, header))
        await started.wait()
        assert await post(session, url, header) == RETRY  # the first still runs: come back later
        fail.set()
        assert (await first)[0] == 500
        assert await post(session, url, header) == (200, None, "ok")  # the retry runs it
        assert await post(session, url, header) == (200, None, "duplicate webhook ignored")  # done: a duplicate
    assert len(calls) == 2
    assert "replay of rec.pii answered 503: its first delivery still runs" in caplog.text


async def test_a_data_request_redelivered_during_a_slow_failing_answer_is_retried_and_then_pushed(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    fetched: list[str] = []
    started, fail = asyncio.Event(), asyncio.Event()

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        fetched.append(request.transaction_id)
        if len(fetched) == 1:
            started.set()
            await fail.wait()
            raise RuntimeError("the records database is down")
        return await bundles(request)

    app = webhooks.abdm_asgi(ABDM_SECRET, client=client, on_data_fetch=on_data_fetch)
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    assert (await call(app, body, signature=sign(body, ABDM_SECRET))).body == b"accepted"
    await started.wait()
    during = await call(app, body, signature=resigned(body))  # the service's redelivery, re-signed
    assert (during.status, during.headers.get("retry-after"), during.body) == (503, "5", RETRY[2].encode())
    fail.set()
    await app.join()  # the first failed before pushing: it released the data request
    after = await call(app, body, signature=resigned(body, 2))
    assert (after.status, after.body) == (200, b"accepted")
    await app.join()
    assert server.calls("hip_data_push") == 1 and list(server.abdm.received(data["transaction_id"])) == ["visit-1"]
    done = await call(app, body, signature=resigned(body, 3))
    assert (done.status, done.body) == (200, b"duplicate data request ignored")
    await app.aclose()
    assert fetched == [data["transaction_id"]] * 2 and server.calls("hip_data_push") == 1


async def test_a_profile_share_redelivered_while_answered_is_retried_then_a_duplicate(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    gate = asyncio.Event()
    asked: list[str | None] = []

    async def on_profile_share(share: ProfileShare) -> None:
        asked.append(share.request_id)
        await gate.wait()  # no token: nothing sent, nothing to fail

    app = webhooks.abdm_asgi(ABDM_SECRET, client=client, on_profile_share=on_profile_share)
    body = envelope("abha.hip_profile_share", {"abha_address": "shyam@abdm", "hip_id": "HIP-1", "req_id": "s-1"})
    assert (await call(app, body, signature=sign(body, ABDM_SECRET))).body == b"accepted"
    assert (await call(app, body, signature=resigned(body))).status == 503
    gate.set()
    await app.join()
    done = await call(app, body, signature=resigned(body, 2))
    assert (done.status, done.body) == (200, b"duplicate profile share ignored")
    await app.aclose()
    assert asked == ["s-1"]
