"""The ABDM receivers' callbacks are bounded (issue 36): a hanging ``on_data_fetch``, ``on_profile_share`` or
``on_discover`` is cancelled at ``callback_timeout`` and counts as failed (its redelivery runs); a hanging
``on_event`` is cancelled at ``event_timeout`` so the webhook is still answered (500: the service redelivers);
``join(timeout)`` returns; ``aclose()`` leaves nothing running. And the receivers keep a ``ConsentBook`` current
(``consents=``): a consent revoked by a webhook is never pushed for."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import CareContextDiscover, HealthDataRequest, ProfileShare
from health_async.resources import ConsentBook
from health_async.testing import FakeHealthServer, send_webhook
from health_async.testing.abdm._hiu import example_document
from health_async.testing.webhooks._send import sign

from ..conftest import Serve
from .test_abdm_asgi import LINKED, SECRET, call, envelope

BOUND = 0.05  # seconds: a callback past it is cut
SLACK = 1.0  # seconds a bounded wait may overrun its bound on a busy machine (still far below any hang)

#: The guide's own example: a valid document (pushes are validated before they leave).
BUNDLE = json.dumps(example_document("OPConsultation")).encode()


def resigned(body: bytes, seconds: int = 1) -> str:
    """The signature of the service's redelivery of ``body``: signed anew, so it is not a replay."""
    return sign(body, SECRET, timestamp=int(time.time()) + seconds)


async def test_a_hanging_data_fetch_is_cut_at_its_bound_and_its_redelivery_runs(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    cancelled: list[bool] = []

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        calls.append(request.transaction_id)
        if len(calls) == 1:
            try:
                await asyncio.Event().wait()  # hangs
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
        return {cid: BUNDLE for cid in request.care_contexts}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch, callback_timeout=BOUND)
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
        assert await asyncio.wait_for(app.join(), BOUND + SLACK) is True  # join() without a timeout ends
    assert cancelled == [True] and app.pending == 0 and server.calls("hip_data_push") == 0
    assert "abha.hip_data_fetch: on_data_fetch did not finish within its bound of 0.05 s" in caplog.text
    assert data["transaction_id"] not in caplog.text and "shyam" not in caplog.text
    # nothing was pushed: the key was released, so the service's redelivery runs and pushes
    again = await call(app, body, signature=resigned(body))
    assert again.body == b"accepted"
    await app.join()
    assert len(calls) == 2 and list(server.abdm.received(data["transaction_id"])) == ["visit-1"]
    await app.aclose()


async def test_a_hanging_on_event_is_cut_and_the_webhook_answered_within_the_bound(
    serve: Serve, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    bound = 0.1
    calls = 0

    async def on_event(event: webhooks.WebhookEvent) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.Event().wait()  # hangs: the service's webhook would time out

    handler = webhooks.abdm_handler(SECRET, client=client, on_event=on_event, event_timeout=bound)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    body = json.loads(envelope("abha.link_care_context", LINKED))
    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        started = loop.time()
        status = await asyncio.wait_for(send_webhook(url, body, SECRET), bound + SLACK)
        took = loop.time() - started
    assert status == 500 and bound <= took < bound + SLACK  # answered, and not before the bound
    assert "abha.link_care_context: on_event did not finish within its bound of 0.1 s" in caplog.text
    assert "shyam" not in caplog.text and "c61f74f9" not in caplog.text
    # the 500 forgot the replay key: the service's redelivery (the same signed request) runs on_event again
    assert await send_webhook(url, body, SECRET) == 200 and calls == 2
    await handler.aclose()


async def test_a_data_request_whose_on_event_hangs_starts_nothing(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    async def on_event(event: webhooks.WebhookEvent) -> None:
        await asyncio.Event().wait()

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        raise AssertionError("a data request whose on_event failed must not be answered")

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event, on_data_fetch=on_data_fetch, event_timeout=BOUND)
    body = envelope("abha.hip_data_fetch", server.abdm.data_request(["visit-1"], oid="oid-1"))
    answer = await asyncio.wait_for(call(app, body, signature=sign(body, SECRET)), BOUND + SLACK)
    assert answer.status == 500 and app.pending == 0
    await app.aclose()


async def test_hanging_share_and_discovery_callbacks_are_cut_and_forgotten(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    shares: list[str | None] = []
    searches: list[str | None] = []

    async def on_profile_share(share: ProfileShare) -> int:
        shares.append(share.request_id)
        await asyncio.Event().wait()
        return 1

    async def on_discover(request: CareContextDiscover) -> None:
        searches.append(request.request_id)
        await asyncio.Event().wait()

    async def on_link_otp(mobile: str, otp: str, request: object) -> None:
        raise AssertionError("not reached")

    app = webhooks.abdm_asgi(
        SECRET,
        client=client,
        on_profile_share=on_profile_share,
        on_discover=on_discover,
        on_link_otp=on_link_otp,
        callback_timeout=BOUND,
    )
    share = envelope("abha.hip_profile_share", {"abha_address": "shyam@abdm", "hip_id": "HIP-1", "req_id": "s-1"})
    search = envelope("abha.care_context_discover", {"request_id": "r-1", "txn_id": "t-1", "hip_id": "HIP-1"})
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        for body in (share, search):
            assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
        assert await asyncio.wait_for(app.join(), BOUND + SLACK) is True
    assert "on_profile_share did not finish within its bound of 0.05 s" in caplog.text
    assert "on_discover did not finish within its bound of 0.05 s" in caplog.text
    assert server.calls("on_discover") == 0  # nothing answered for either
    for body in (share, search):  # failed before anything reached the service: the redelivery runs again
        assert (await call(app, body, signature=resigned(body))).body == b"accepted"
    await asyncio.wait_for(app.join(), BOUND + SLACK)  # cut again
    await app.aclose()
    assert shares == ["s-1", "s-1"] and searches == ["r-1", "r-1"] and app.pending == 0


async def test_join_with_a_timeout_returns_and_aclose_leaves_no_task(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    tasks: list[asyncio.Task[Any]] = []

    async def slow(request: HealthDataRequest) -> dict[str, bytes]:
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        await asyncio.Event().wait()  # within its (default, 60 s) bound for the whole test
        return {}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=slow)
    body = envelope("abha.hip_data_fetch", server.abdm.data_request(["visit-1"], oid="oid-1"))
    assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await asyncio.wait_for(app.join(timeout=BOUND), BOUND + SLACK) is False
    assert loop.time() - started >= BOUND and app.pending == 1 and not tasks[0].done()  # left running
    await app.aclose()
    assert app.pending == 0 and tasks[0].cancelled()
    assert await app.join(timeout=BOUND) is True  # nothing left: at once


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "5", None])
async def test_bounds_are_checked_when_the_receiver_is_built(client: ha.HealthClient, bad: Any) -> None:
    for make in (webhooks.abdm_handler, webhooks.abdm_asgi):
        with pytest.raises(ha.InvalidRequest, match="callback_timeout must be a positive number of seconds"):
            make(SECRET, client=client, callback_timeout=bad)
        with pytest.raises(ha.InvalidRequest, match="event_timeout must be a positive number of seconds"):
            make(SECRET, client=client, event_timeout=bad)
    app = webhooks.abdm_asgi(SECRET, client=client)
    if bad is not None:  # join(None) waits for everything, as before
        with pytest.raises(ha.InvalidRequest, match="timeout must be a positive number of seconds"):
            await app.join(timeout=bad)
    with pytest.raises(ha.InvalidArgumentType, match="consents must be a ConsentBook"):
        webhooks.abdm_handler(SECRET, client=client, consents={"consent-9": "GRANTED"})  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ consents


def consent_update(consent_id: str, status: str) -> bytes:
    data = {
        "status": status,
        "notification": {"consentRequestId": "req-1", "status": status, "consentArtefacts": {"id": consent_id}},
    }
    return envelope("abha.consent_update", data, transaction_id="wh-consent")


async def test_a_consent_revoked_by_a_webhook_through_the_receiver_is_not_pushed_for(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    book = ConsentBook()
    book.grant("consent-9")
    book.grant("consent-10")
    seen: list[str | None] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        grant = book.get("consent-9")
        seen.append(None if grant is None else grant.status)  # recorded before on_event runs

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        return {cid: BUNDLE for cid in request.care_contexts}

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event, on_data_fetch=on_data_fetch, consents=book)
    revoke = consent_update("consent-9", "REVOKED")
    assert (await call(app, revoke, signature=sign(revoke, SECRET))).status == 200
    assert seen == ["REVOKED"]
    revoked = {**server.abdm.data_request(["visit-1"], oid="oid-1"), "consent_id": "consent-9"}
    granted = {**server.abdm.data_request(["visit-1"], oid="oid-1"), "consent_id": "consent-10"}
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        for data in (revoked, granted):
            body = envelope("abha.hip_data_fetch", data, transaction_id=data["transaction_id"])
            assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
        await app.join()
    assert server.abdm.pages(revoked["transaction_id"]) == []  # nothing reached the service
    assert list(server.abdm.received(granted["transaction_id"])) == ["visit-1"]  # the same path, consent current
    assert "refused before loading its records: consent_revoked" in caplog.text  # the loader not called
    await app.aclose()


async def test_the_data_request_carries_the_webhooks_time(server: FakeHealthServer, client: ha.HealthClient) -> None:
    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        return {cid: BUNDLE for cid in request.care_contexts}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch)
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    now = int(time.time())
    # signed now, but the event happened 21 minutes ago: past ABDM's 20-minute window to answer it
    body = json.dumps({"service": "abdm", "event": "abha.hip_data_fetch", "event_time": now - 21 * 60,
                       "transaction_id": "wh-txn-1", "timestamp": now, "data": data}).encode()  # fmt: skip
    assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
    await app.join()
    assert server.abdm.pages(data["transaction_id"]) == []
    await app.aclose()
