"""The ABDM receivers keep their de-duplication of data requests, profile shares and linking steps in the seen store
they are given (issue 38): with one store shared by two receivers (two "workers"), one request is pushed once
across both; one that fails before anything was pushed (or whose worker closed meanwhile) is released, so the
other worker's delivery pushes."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import HealthDataRequest, ProfileShare
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abdm._hiu import example_document
from health_async.testing.webhooks._send import sign

from .test_abdm_asgi import SECRET, call, envelope
from .test_abdm_bounds import resigned

#: The guide's own example: a valid document (pushes are validated before they leave).
BUNDLE = json.dumps(example_document("OPConsultation")).encode()


async def bundles(request: HealthDataRequest) -> dict[str, bytes]:
    return dict.fromkeys(request.care_contexts, BUNDLE)


async def test_one_data_request_delivered_to_two_workers_is_pushed_once(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    store = webhooks.InMemorySeenStore()
    fetched: list[str] = []

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        fetched.append(request.transaction_id)
        return await bundles(request)

    workers = [webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch, seen_store=store) for _ in "ab"]
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    assert (await call(workers[0], body, signature=sign(body, SECRET))).body == b"accepted"
    await workers[0].join()
    answer = await call(workers[1], body, signature=resigned(body))  # the service's redelivery, to the other one
    assert (answer.status, answer.body) == (200, b"duplicate data request ignored")
    await workers[1].join()
    assert len(fetched) == 1 and server.calls("hip_data_push") == 1
    assert list(server.abdm.received(data["transaction_id"])) == ["visit-1"]
    # while the first worker still answers, the other asks for a retry (the first may yet fail and release it)
    slow = asyncio.Event()

    async def waits(request: HealthDataRequest) -> dict[str, bytes]:
        await slow.wait()
        return await bundles(request)

    pair = [webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=waits, seen_store=store) for _ in "ab"]
    later = server.abdm.data_request(["visit-2"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", later)
    assert (await call(pair[0], body, signature=sign(body, SECRET))).body == b"accepted"
    meanwhile = await call(pair[1], body, signature=resigned(body))
    assert (meanwhile.status, meanwhile.headers.get("retry-after")) == (503, "5")
    slow.set()
    await pair[0].join()
    after = await call(pair[1], body, signature=resigned(body, 2))
    assert (after.status, after.body) == (200, b"duplicate data request ignored")
    for worker in (*workers, *pair):
        await worker.join()
        await worker.aclose()
    assert server.calls("hip_data_push") == 2
    # what the store holds: hashed keys only, never a raw transaction id
    keys = list(store._expiry)
    assert all(re.fullmatch(r"[0-9a-f]{64}", key) for key in keys)
    assert not any(data["transaction_id"] in key or later["transaction_id"] in key for key in keys)


def _raises(request: HealthDataRequest) -> dict[str, bytes]:
    raise RuntimeError("the records database is down")


def _unasked(request: HealthDataRequest) -> dict[str, bytes]:
    return {"not-asked-for": BUNDLE}  # push_health_data refuses it before sending anything (InvalidRequest)


@pytest.mark.parametrize("first", [_raises, _unasked], ids=["on_data_fetch fails", "push refused before sending"])
async def test_a_push_that_fails_on_one_worker_is_released_for_the_other(
    server: FakeHealthServer, client: ha.HealthClient, first: Callable[[HealthDataRequest], dict[str, bytes]]
) -> None:
    store = webhooks.InMemorySeenStore()

    async def failing(request: HealthDataRequest) -> dict[str, bytes]:
        return first(request)

    one = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=failing, seen_store=store)
    two = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=bundles, seen_store=store)
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    assert (await call(one, body, signature=sign(body, SECRET))).body == b"accepted"
    await one.join()
    assert server.calls("hip_data_push") == 0
    assert (await call(two, body, signature=resigned(body))).body == b"accepted"
    await two.join()
    assert list(server.abdm.received(data["transaction_id"])) == ["visit-1"]
    for worker in (one, two):
        await worker.aclose()


async def test_a_push_under_way_is_not_released_so_it_is_never_pushed_twice(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    store = webhooks.InMemorySeenStore()
    server.inject("hip_data_push", Fault(status=502))  # the page may have arrived: outcome unknown
    one = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=bundles, seen_store=store)
    two = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=bundles, seen_store=store)
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    assert (await call(one, body, signature=sign(body, SECRET))).body == b"accepted"
    await one.join()
    pushes = server.calls("hip_data_push")
    assert pushes >= 1
    assert (await call(two, body, signature=resigned(body))).body == b"duplicate data request ignored"
    await two.join()
    assert server.calls("hip_data_push") == pushes
    for worker in (one, two):
        await worker.aclose()


async def test_a_worker_closed_during_its_fetch_releases_the_request_for_another(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    store = webhooks.InMemorySeenStore()
    started = asyncio.Event()

    async def hangs(request: HealthDataRequest) -> dict[str, bytes]:
        started.set()
        await asyncio.Event().wait()
        return {}

    one = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=hangs, seen_store=store)
    two = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=bundles, seen_store=store)
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    assert (await call(one, body, signature=sign(body, SECRET))).body == b"accepted"
    await started.wait()
    await one.aclose()  # shutdown: the fetch is cancelled before anything was pushed
    assert one.pending == 0
    assert (await call(two, body, signature=resigned(body))).body == b"accepted"
    await two.join()
    assert list(server.abdm.received(data["transaction_id"])) == ["visit-1"]
    await two.aclose()


async def test_a_profile_share_delivered_to_two_workers_is_answered_once(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    store = webhooks.InMemorySeenStore()
    asked: list[str | None] = []

    async def on_profile_share(share: ProfileShare) -> None:
        asked.append(share.request_id)  # no token: nothing sent, nothing to fail

    workers = [
        webhooks.abdm_asgi(SECRET, client=client, on_profile_share=on_profile_share, seen_store=store) for _ in "ab"
    ]
    body = envelope("abha.hip_profile_share", {"abha_address": "shyam@abdm", "hip_id": "HIP-1", "req_id": "s-1"})
    assert (await call(workers[0], body, signature=sign(body, SECRET))).body == b"accepted"
    answer = await call(workers[1], body, signature=resigned(body))
    assert answer.body == b"duplicate profile share ignored"
    for worker in workers:
        await worker.join()
        await worker.aclose()
    assert asked == ["s-1"]


async def test_a_seen_store_that_fails_answers_500_and_starts_nothing(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    class Flaky(webhooks.InMemorySeenStore):
        """Accepts the replay key (the first add), then fails: the de-duplication check cannot be made."""

        adds = 0

        async def claim(self, key: str, expires_at: float, *, token: str, lease: float | None = None) -> webhooks.Claim:
            self.adds += 1
            if self.adds > 1:
                raise ConnectionError("the store is down")
            return await super().claim(key, expires_at, token=token, lease=lease)

    fetched: list[Any] = []

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        fetched.append(request)
        return {}

    store = Flaky()
    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch, seen_store=store)
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    answer = await call(app, body, signature=sign(body, SECRET))
    assert answer.status == 500 and app.pending == 0 and fetched == []
    assert "abha.hip_data_fetch: the seen store failed: ConnectionError" in caplog.text
    assert len(store) == 0  # the replay key was forgotten too: the service's redelivery runs
    await app.aclose()
