"""Against a real aiohttp server on 127.0.0.1: streamed uploads, timeouts, refused connections, leaks."""

from __future__ import annotations

import asyncio
import io
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import health_async as ha

from ..conftest import FAST_RETRY, Handler, Serve

DOC = {"document_id": "d", "document_type": "lr"}


def client(url: str, **kwargs: Any) -> ha.HealthClient:
    kwargs.setdefault("retry", FAST_RETRY)
    return ha.HealthClient(base_url=url, token="t", client_id="c", user_id="u", **kwargs)


def upload_recorder(seen: list[dict[str, Any]]) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        reader = await request.multipart()
        parts = []
        async for part in reader:
            assert isinstance(part, aiohttp.BodyPartReader)
            parts.append((part.name, part.filename, part.headers.get("Content-Type"), await part.read()))
        seen.append(
            {
                "tasks": request.query.getall("task"),
                "dt": request.query.get("dt"),
                "content_length": request.content_length,
                "chunked": request.headers.get("Transfer-Encoding"),
                "parts": parts,
                "pt_id": request.headers.get("X-Pt-Id"),
            }
        )
        return web.json_response({"document_id": "new-doc"})

    return handler


@pytest.mark.parametrize("kind", ["path", "bytes", "fileobj"])
async def test_upload_streams_a_multipart_file(serve: Serve, tmp_path: Path, kind: str) -> None:
    seen: list[dict[str, Any]] = []
    url = await serve({("POST", "/mr/api/v2/docs"): upload_recorder(seen)})
    content = bytes(range(256)) * 4000 + b"tail"  # ~1 MB, more than one read chunk
    path = tmp_path / "report.pdf"
    path.write_bytes(content)
    source: Any = {"path": path, "bytes": content, "fileobj": io.BytesIO(content)}[kind]
    async with client(url) as c:
        result = await c.documents.upload(
            source, tasks=["pii", "smart"], document_type="lr", filename=None if kind == "path" else "report.pdf"
        )
    assert result.document_id == "new-doc"
    (req,) = seen
    assert req["tasks"] == ["pii", "smart"] and req["dt"] == "lr" and req["pt_id"] == "u"
    assert req["chunked"] is None and req["content_length"] > len(content)
    ((name, filename, ctype, body),) = req["parts"]
    assert (name, filename, ctype) == ("file", "report.pdf", "application/pdf")
    assert body == content


async def test_upload_input_errors_are_raised_before_sending(serve: Serve, tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    url = await serve({("POST", "/mr/api/v2/docs"): upload_recorder(seen)})
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 2048)
    async with client(url, max_upload_size=1024) as c:
        with pytest.raises(ha.FileTooLarge):
            await c.documents.upload(big)
        with pytest.raises(ha.InvalidRequest, match="does not exist"):
            await c.documents.upload(tmp_path / "missing.pdf")
        with pytest.raises(ValueError, match="task"):
            await c.documents.upload(b"x", tasks=["Bad Task"])
        with pytest.raises(ValueError, match="at least one task"):
            await c.documents.upload(b"x", tasks=[])
        with pytest.raises(ValueError, match="empty"):
            await c.documents.upload(b"")
        with pytest.raises(TypeError):
            await c.documents.upload(12345)  # type: ignore[arg-type]
    assert seen == []


async def test_upload_is_not_retried_after_a_server_error(serve: Serve) -> None:
    calls = 0

    async def failing(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        await request.read()
        return web.Response(status=503)

    url = await serve({("POST", "/mr/api/v2/docs"): failing})
    async with client(url) as c:
        with pytest.raises(ha.ServerError):
            await c.documents.upload(b"%PDF-1.7 data", filename="a.pdf")
    assert calls == 1


async def test_timeout_is_a_request_timeout_and_nothing_leaks(serve: Serve) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): slow})
    async with client(url, timeout=0.2, retry=ha.RetryPolicy(attempts=2, base_delay=0, jitter=0)) as c:
        with pytest.raises(ha.RequestTimeout):
            await c.documents.describe("x")
        connector = c._session._http.connector  # type: ignore[union-attr]
        assert connector is not None and len(connector._acquired) == 0


async def test_refused_connection_is_a_transport_error_marked_unsent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with client(f"http://127.0.0.1:{port}", retry=ha.RetryPolicy.never()) as c:
        with pytest.raises(ha.TransportError) as info:
            await c.documents.describe("x")
    assert info.value.sent is False


async def test_failed_responses_are_released_before_retrying(serve: Serve) -> None:
    calls: dict[str, int] = {}

    async def flaky(request: web.Request) -> web.Response:
        doc_id = request.match_info["id"]
        calls[doc_id] = calls.get(doc_id, 0) + 1
        if calls[doc_id] < 3:  # every document fails twice, then succeeds
            return web.Response(status=502, text="<html>bad gateway</html>", content_type="text/html")
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): flaky})
    async with client(url, max_connections=2) as c:
        docs = await asyncio.gather(*(c.documents.describe(f"d{i}") for i in range(10)))
        connector = c._session._http.connector  # type: ignore[union-attr]
        assert connector is not None and len(connector._acquired) == 0
    assert len(docs) == 10 and sum(calls.values()) == 30


async def test_oversized_response_is_refused(serve: Serve) -> None:
    async def huge(request: web.Request) -> web.Response:
        return web.json_response({"document_id": "x" * 5000})

    async def endless(request: web.Request) -> web.StreamResponse:
        # No Content-Length (chunked): the cap must hold while reading, without buffering it all first.
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        try:
            for _ in range(1000):
                await response.write(b" " * 65536)
        except (ConnectionResetError, RuntimeError):
            pass  # the client stopped reading, as it should
        return response

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): huge, ("GET", "/stream/{id}"): endless})
    async with client(url, max_response_size=1000) as c:
        with pytest.raises(ha.ResponseTooLarge):
            await c.documents.describe("x")
    async with client(url, max_response_size=200_000) as c:
        with pytest.raises(ha.ResponseTooLarge, match="over the 200000-byte limit"):
            await c._session.request("GET", "/stream/x", operation="describe", idempotent=True)


async def test_cancellation_propagates_and_releases_the_connection(serve: Serve) -> None:
    started = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        started.set()
        await asyncio.sleep(5)
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): slow})
    async with client(url) as c:
        task = asyncio.create_task(c.documents.describe("x"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert c._session.limits.in_flight == 0


async def test_ids_reach_the_server_as_exactly_one_encoded_segment(serve: Serve) -> None:
    seen: list[str] = []

    async def describe(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe})
    async with client(url) as c:
        await c.documents.describe("a:b@c%2F")
        await c.documents.describe("é")
    assert seen == ["/mr/api/v1/docs/a%3Ab%40c%252F", "/mr/api/v1/docs/%C3%A9"]


async def test_unreadable_and_non_file_upload_paths_are_refused(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []
    url = await serve({("POST", "/mr/api/v2/docs"): upload_recorder(seen)})
    locked = tmp_path / "locked.pdf"
    locked.write_bytes(b"%PDF")
    async with client(url) as c:
        with pytest.raises(ha.InvalidRequest, match=r"^file: the upload path is a directory"):
            await c.documents.upload(tmp_path)
        # Permission bits do not stop root, so the check is exercised through os.access itself.
        monkeypatch.setattr("health_async._files.os.access", lambda *_: False)
        with pytest.raises(ha.InvalidRequest, match=r"^file: the upload file is not readable"):
            await c.documents.upload(locked)
    assert seen == []


async def test_a_large_json_body_is_sent_without_a_warning(serve: Serve) -> None:
    """aiohttp warns (ResourceWarning) for a bytes body over 1 MiB: under -W error that would fail the call."""
    got: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        got.append(len(await request.read()))
        return web.json_response({"ok": True})

    url = await serve({("POST", "/big"): handler})
    async with ha.HealthClient(base_url=url, token="t", user_id="u") as client:
        answer = await client._session.request(
            "POST", "/big", operation="big", json={"bundle": "x" * 3_000_000}, idempotent=True
        )
    assert answer == {"ok": True} and got and got[0] > 3_000_000
