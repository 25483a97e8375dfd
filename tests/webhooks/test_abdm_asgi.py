"""``webhooks.abdm_asgi``: ABDM's webhook receiver as a plain ASGI 3 app, driven here with hand-built scope,
``receive`` and ``send`` (no ASGI framework or server), the pushes checked on the fake server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import HealthDataRequest, LinkStatus
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hiu import example_document
from health_async.testing.webhooks._send import sign

OP_NOTE = example_document("OPConsultation")  # a valid document: pushes are validated

SECRET = "abdm-asgi-secret"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
Message = MutableMapping[str, Any]  # as ASGI (and Starlette) types a message


def envelope(event: str, data: dict[str, Any], transaction_id: str = "wh-txn-1") -> bytes:
    now = int(time.time())
    payload = {"service": "abdm", "event": event, "event_time": now, "transaction_id": transaction_id,
               "timestamp": now, "business_id": "b-1", "client_id": "c-1", "data": data}  # fmt: skip
    return json.dumps(payload).encode()


LINKED = {"abha_address": "shyam@abdm", "hip_id": "HIP-1", "care_context_id": "c61f74f9", "status": "LINKED",
          "error": None, "retry_count": 0, "oid": "oid-1", "partner_patient_id": "p-1"}  # fmt: skip


@dataclass
class Exchange:
    """One request through the app: what it answered, and how many body messages it read."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    sent: list[Message] = field(default_factory=list)
    chunks_read: int = 0


async def call(
    app: webhooks.AbdmAsgiApp,
    body: bytes = b"",
    *,
    method: str = "POST",
    signature: str | None = None,
    chunks: Sequence[bytes] | None = None,
    content_length: int | None = None,
    disconnect_after: int | None = None,
) -> Exchange:
    """Send one ``http`` request to ``app``: ``body`` in one ``http.request`` message (or ``chunks``, with
    ``more_body``), the headers as an ASGI server gives them (lowercase bytes). ``content_length`` is declared
    when given (by default: for a one-message body); ``disconnect_after`` chunks, ``http.disconnect`` follows.
    Asking for more than the body (and no disconnect) fails the test: the app must stop reading at the end."""
    parts = list(chunks) if chunks is not None else [body]
    if content_length is None and chunks is None:
        content_length = len(body)
    headers = [(b"host", b"hip.example"), (b"content-type", b"application/json")]
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    if signature is not None:
        headers.append((b"eka-webhook-signature", signature.encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "https",
             "path": "/", "raw_path": b"/", "root_path": "/webhooks/abdm", "query_string": b"", "headers": headers,
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}  # fmt: skip
    exchange = Exchange()

    async def receive() -> Message:
        if disconnect_after is not None and exchange.chunks_read >= disconnect_after:
            return {"type": "http.disconnect"}
        assert exchange.chunks_read < len(parts), "the app asked for more than the whole body"
        index = exchange.chunks_read
        exchange.chunks_read += 1
        return {"type": "http.request", "body": parts[index], "more_body": index < len(parts) - 1}

    async def send(message: Message) -> None:
        exchange.sent.append(message)

    await app(scope, receive, send)
    if exchange.sent:
        start, end = exchange.sent
        assert start["type"] == "http.response.start" and end["type"] == "http.response.body"
        exchange.status = start["status"]
        exchange.headers = {k.decode(): v.decode() for k, v in start["headers"]}
        exchange.body = end["body"]
        assert int(exchange.headers["content-length"]) == len(exchange.body)
    return exchange


async def test_a_signed_link_event_reaches_on_event_and_gets_200(client: ha.HealthClient) -> None:
    events: list[webhooks.WebhookEvent] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event)

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event)
    body = envelope("abha.link_care_context", LINKED)
    answer = await call(app, body, signature=sign(body, SECRET))
    assert (answer.status, answer.body) == (200, b"ok")
    assert answer.headers["content-type"].startswith("text/plain")
    assert [e.kind for e in events] == [webhooks.EventKind.LINK_CARE_CONTEXT]
    result = events[0].link_result()
    assert result.status is LinkStatus.LINKED and result.care_context_id == "c61f74f9"


async def test_a_bad_signature_is_400_and_calls_nothing(
    client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[str] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event)
    body = envelope("abha.link_care_context", LINKED)
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        forged = await call(app, body, signature=sign(body, "another secret"))
        unsigned = await call(app, body)
        tampered = await call(app, body.replace(b"LINKED", b"ERRORED"), signature=sign(body, SECRET))
    assert [forged.status, unsigned.status, tampered.status] == [400, 400, 400]
    assert forged.body == b"webhook refused" and events == []
    assert "no v1 signature matches" in caplog.text and "missing Eka-Webhook-Signature" in caplog.text
    assert SECRET not in caplog.text and "shyam" not in caplog.text and "c61f74f9" not in caplog.text


async def test_a_replay_is_200_duplicate_without_calling_on_event(client: ha.HealthClient) -> None:
    events: list[str] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event)
    body = envelope("abha.consent_update", {"status": "GRANTED"})
    signature = sign(body, SECRET)
    first = await call(app, body, signature=signature)
    again = await call(app, body, signature=signature)
    assert (first.status, first.body) == (200, b"ok")
    assert (again.status, again.body) == (200, b"duplicate webhook ignored")
    assert events == ["abha.consent_update"]


async def test_a_failing_on_event_is_500_and_its_redelivery_runs(client: ha.HealthClient) -> None:
    calls = 0

    async def on_event(event: webhooks.WebhookEvent) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the queue is down")

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event)
    body = envelope("abha.created", {})
    signature = sign(body, SECRET)
    assert (await call(app, body, signature=signature)).status == 500
    assert (await call(app, body, signature=signature)).status == 200  # the key was forgotten: not a replay
    assert calls == 2


async def test_a_declared_body_over_the_limit_is_413_without_reading_it(client: ha.HealthClient) -> None:
    events: list[str] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event, max_body_size=100)
    body = envelope("abha.link_care_context", LINKED)
    assert len(body) > 100
    answer = await call(app, body, signature=sign(body, SECRET))
    assert (answer.status, answer.body) == (413, b"webhook body too large")
    assert answer.headers["connection"] == "close" and answer.chunks_read == 0 and events == []


async def test_a_streamed_body_over_the_limit_is_413_once_past_it(client: ha.HealthClient) -> None:
    events: list[str] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event, max_body_size=100)
    body = envelope("abha.link_care_context", LINKED)
    chunks = [body[i : i + 40] for i in range(0, len(body), 40)]
    assert len(chunks) > 3
    answer = await call(app, signature=sign(body, SECRET), chunks=chunks)  # no Content-Length: chunked
    assert answer.status == 413 and answer.headers["connection"] == "close"
    assert answer.chunks_read == 3 and events == []  # 120 bytes > 100: the rest is never read
    # the same body under a larger cap, in the same chunks, is read whole and accepted
    roomy = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event)
    accepted = await call(roomy, signature=sign(body, SECRET), chunks=chunks)
    assert accepted.status == 200 and accepted.chunks_read == len(chunks) and events == ["abha.link_care_context"]


async def test_get_is_405_with_allow_post(client: ha.HealthClient) -> None:
    app = webhooks.abdm_asgi(SECRET, client=client)
    answer = await call(app, method="GET")
    assert (answer.status, answer.headers["allow"], answer.body) == (405, "POST", b"method not allowed")
    assert answer.chunks_read == 0


async def test_a_disconnect_while_reading_ends_quietly(client: ha.HealthClient) -> None:
    events: list[str] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event)
    body = envelope("abha.created", {})
    answer = await call(app, signature=sign(body, SECRET), chunks=[body[:10], body[10:]], disconnect_after=1)
    assert answer.sent == [] and answer.chunks_read == 1 and events == []


async def test_a_data_request_is_answered_at_once_then_pushed_and_opens_on_the_server(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[tuple[str, ...]] = []
    release = asyncio.Event()

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, dict[str, Any]]:
        asked.append(request.care_contexts)
        await release.wait()  # the webhook's answer must not wait for this
        return {cid: {**OP_NOTE, "id": cid} for cid in request.care_contexts}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch)
    data = server.abdm.data_request(["visit-1", "visit-2"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        answer = await asyncio.wait_for(call(app, body, signature=sign(body, SECRET)), 5)
        assert (answer.status, answer.body) == (200, b"accepted")
        assert app.pending == 1 and server.calls("hip_data_push") == 0
        release.set()
        await app.join()
    assert app.pending == 0 and asked == [("visit-1", "visit-2")]
    received = server.abdm.received(data["transaction_id"])  # decrypted with the HIU key, checksums checked
    assert {cid: json.loads(raw) for cid, raw in received.items()} == {
        "visit-1": {**OP_NOTE, "id": "visit-1"},
        "visit-2": {**OP_NOTE, "id": "visit-2"},
    }
    assert "2 care context(s) pushed" in caplog.text
    assert "shyam" not in caplog.text and "Bundle" not in caplog.text and SECRET not in caplog.text


async def test_a_redelivered_data_request_is_not_pushed_twice(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    fetched = 0

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        nonlocal fetched
        fetched += 1
        return {cid: json.dumps(OP_NOTE).encode() for cid in request.care_contexts}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch)
    data = server.abdm.data_request(["visit-1", "visit-2"], oid="oid-1")
    body = envelope("abha.hip_data_fetch", data)
    assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
    await app.join()
    assert server.calls("hip_data_push") == 2  # one page per bundle
    # the service delivers the same request again, re-signed a second later: not a replay, still ignored
    again = await call(app, body, signature=sign(body, SECRET, timestamp=int(time.time()) + 1))
    assert (again.status, again.body) == (200, b"duplicate data request ignored")
    await app.join()
    assert fetched == 1 and server.calls("hip_data_push") == 2
    assert sorted(server.abdm.received(data["transaction_id"])) == ["visit-1", "visit-2"]


async def test_lifespan_shutdown_cancels_the_pending_work_and_completes(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def blocks(request: HealthDataRequest) -> dict[str, bytes]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return {}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=blocks)
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()

    async def send(message: Message) -> None:
        await outbox.put(message)

    lifespan = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send))
    await inbox.put({"type": "lifespan.startup"})
    assert await asyncio.wait_for(outbox.get(), 5) == {"type": "lifespan.startup.complete"}

    body = envelope("abha.hip_data_fetch", server.abdm.data_request(["visit-1"]))
    assert (await call(app, body, signature=sign(body, SECRET))).status == 200
    await asyncio.wait_for(started.wait(), 5)
    assert app.pending == 1 and not lifespan.done()

    await inbox.put({"type": "lifespan.shutdown"})
    assert await asyncio.wait_for(outbox.get(), 5) == {"type": "lifespan.shutdown.complete"}
    await asyncio.wait_for(lifespan, 5)
    assert cancelled == [True] and app.pending == 0 and server.calls("hip_data_push") == 0


async def test_other_scope_types_are_refused_and_arguments_checked(client: ha.HealthClient) -> None:
    app = webhooks.abdm_asgi(SECRET, client=client)

    async def receive() -> Message:
        raise AssertionError("a websocket must not be read")

    async def send(message: Message) -> None:
        raise AssertionError("a websocket must not be answered")

    with pytest.raises(ValueError, match="only http"):
        await app({"type": "websocket", "path": "/"}, receive, send)
    assert repr(app) == "AbdmAsgiApp(pending=0)"
    with pytest.raises(ha.InvalidRequest, match="on_data_fetch"):
        webhooks.abdm_asgi(SECRET, client=client, on_data_fetch="not a function")  # type: ignore[arg-type]
    with pytest.raises(ha.InvalidRequest, match="max_body_size"):
        webhooks.abdm_asgi(SECRET, client=client, max_body_size=0)


def _live_tasks_since(before: set[asyncio.Task[Any]]) -> list[str]:
    """The tasks started since ``before`` that are still running (this test's own task aside), by coroutine."""
    mine = asyncio.current_task()
    return [t.get_coro().__qualname__ for t in asyncio.all_tasks() - before if t is not mine and not t.done()]  # type: ignore[union-attr]


async def test_a_data_request_in_flight_during_aclose_is_503_and_leaves_no_task(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    before = asyncio.all_tasks()
    inside, gate, fetching = asyncio.Event(), asyncio.Event(), asyncio.Event()
    fetched: list[str] = []
    store = webhooks.InMemorySeenStore()

    async def on_event(event: webhooks.WebhookEvent) -> None:  # e.g. writes the event to a database
        inside.set()
        await gate.wait()

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        fetched.append(request.transaction_id)
        fetching.set()
        await asyncio.Event().wait()  # would never end: nothing may start it after the close
        return {}

    app = webhooks.abdm_asgi(SECRET, client=client, on_event=on_event, on_data_fetch=on_data_fetch, seen_store=store)
    body = envelope("abha.hip_data_fetch", server.abdm.data_request(["visit-1"], oid="oid-1"))
    signature = sign(body, SECRET)
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        request = asyncio.create_task(call(app, body, signature=signature))
        await asyncio.wait_for(inside.wait(), 5)  # the request is inside on_event
        await asyncio.wait_for(app.aclose(), 5)
        gate.set()
        answer = await asyncio.wait_for(request, 5)
        await asyncio.sleep(0.01)  # a task spawned by the answer would have started by now
    assert (answer.status, answer.body) == (503, b"webhook receiver closed")
    assert app.pending == 0 and fetched == [] and _live_tasks_since(before) == []
    assert "abha.hip_data_fetch refused with 503" in caplog.text and "shyam" not in caplog.text
    # its replay key was forgotten: the same signed request, taken by the next process (same store), runs
    reopened = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch, seen_store=store)
    assert (await call(reopened, body, signature=signature)).body == b"accepted"
    await asyncio.wait_for(fetching.wait(), 5)
    assert reopened.pending == 1 and len(fetched) == 1
    await asyncio.wait_for(reopened.aclose(), 5)
    assert reopened.pending == 0 and _live_tasks_since(before) == []


async def test_after_aclose_a_data_request_or_share_is_503_without_on_event_or_work(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[str] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event.event)

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, bytes]:
        raise AssertionError("no data request may be answered once closed")

    async def on_profile_share(share: Any) -> str:
        raise AssertionError("no profile share may be answered once closed")

    app = webhooks.abdm_asgi(
        SECRET, client=client, on_event=on_event, on_data_fetch=on_data_fetch, on_profile_share=on_profile_share
    )
    await app.aclose()
    before = asyncio.all_tasks()
    fetch = envelope("abha.hip_data_fetch", server.abdm.data_request(["visit-1"], oid="oid-1"))
    share = envelope("abha.hip_profile_share", {"abha_address": "shyam@abdm", "hip_id": "HIP-1", "req_id": "r-1"})
    with caplog.at_level(logging.WARNING, logger="health_async"):
        for body in (fetch, share):
            answer = await call(app, body, signature=sign(body, SECRET))
            assert (answer.status, answer.body) == (503, b"webhook receiver closed")
        await asyncio.sleep(0.01)
    assert events == [] and app.pending == 0 and _live_tasks_since(before) == []
    assert "abha.hip_data_fetch refused with 503" in caplog.text
    assert "abha.hip_profile_share refused with 503" in caplog.text and "shyam" not in caplog.text
    # an event that starts no background work is still taken: on_event runs in the request itself
    linked = envelope("abha.link_care_context", LINKED, transaction_id="wh-txn-2")
    assert (await call(app, linked, signature=sign(linked, SECRET))).status == 200
    assert events == ["abha.link_care_context"]


async def test_a_cancelled_aclose_cancels_what_is_left_and_propagates(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    started, first_cancel = asyncio.Event(), asyncio.Event()

    async def stubborn(request: HealthDataRequest) -> dict[str, bytes]:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            first_cancel.set()
            await asyncio.Event().wait()  # slow to wind down: ended only by a second cancellation
        return {}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=stubborn)
    body = envelope("abha.hip_data_fetch", server.abdm.data_request(["visit-1"], oid="oid-1"))
    assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
    await asyncio.wait_for(started.wait(), 5)
    (work,) = app._tasks  # the background task itself, to see how it ended
    closing = asyncio.create_task(app.aclose())
    await asyncio.wait_for(first_cancel.wait(), 5)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    await asyncio.wait_for(asyncio.gather(work, return_exceptions=True), 5)
    assert work.cancelled() and app.pending == 0
