"""Hardening, round 2: each test names a class of failure and fails without its fix (against loopback servers)."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

import health_async as ha
from health_async import cli, webhooks
from health_async.errors import AbhaRateLimited, PaginationError
from health_async.models import FileEntry
from health_async.testing import FakeHealthServer, sign_webhook

from ..conftest import FAST_RETRY, Handler, Serve

DOC = {"document_id": "d", "document_type": "lr"}


def make(url: str, **kwargs: Any) -> ha.HealthClient:
    kwargs.setdefault("retry", FAST_RETRY)
    kwargs.setdefault("token", "t")
    kwargs.setdefault("user_id", "u")
    return ha.HealthClient(base_url=url, client_id="c", **kwargs)


def json_handler(body: Any = DOC, status: int = 200) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")

    return handler


# ------------------------------------------------------------------------------------------ transport defaults


async def test_a_redirect_is_never_followed_so_body_and_headers_stay_home(serve: Serve) -> None:
    elsewhere: list[web.Request] = []

    async def other_host(request: web.Request) -> web.Response:
        elsewhere.append(request)
        return web.json_response({"hint": "forged", "txn_id": "forged"})

    other = await serve({("*", "/{tail:.*}"): other_host})

    async def redirect(request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": f"{other}/abdm/na/v1/registration/aadhaar/init"})

    routes = {("POST", "/abdm/na/v1/registration/aadhaar/init"): redirect, ("GET", "/mr/api/v1/docs/{id}"): redirect}
    url = await serve(routes)
    async with make(url) as client:
        with pytest.raises(ha.ApiError) as info:
            await client.abha.aadhaar_init("2345 6789 0124")
        assert info.value.status == 307 and "redirect" in str(info.value)
        with pytest.raises(ha.ApiError):
            await client.documents.describe("doc")
    assert elsewhere == []  # neither the Aadhaar number nor the bearer token went to the other origin


async def test_the_size_cap_holds_for_the_decoded_bytes_of_a_gzip_body(serve: Serve) -> None:
    bomb = gzip.compress(b"{" + b" " * (8 * 1024 * 1024) + b"}")  # 8 MB of JSON in ~8 KB

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): handler})
    assert len(bomb) < 64 * 1024
    async with make(url, max_response_size=1024 * 1024) as client:
        with pytest.raises(ha.ResponseTooLarge):
            await client.documents.describe("doc")


async def test_a_body_nested_too_deeply_is_a_typed_error_on_every_path(serve: Serve) -> None:
    # msgspec raises RecursionError for deep nesting; it must reach nobody as that (a hostile or broken proxy)
    deep = b"[" * 100_000 + b"]" * 100_000
    nested = b'{"document_id": "d", "tags": ' + deep + b"}"

    async def describe(request: web.Request) -> web.Response:
        body = nested if request.match_info["id"] == "in-a-field" else deep
        return web.Response(body=body, content_type="application/json")

    async def failing(request: web.Request) -> web.Response:
        return web.Response(status=404, body=deep, content_type="application/json")

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe, ("GET", "/mr/api/v1/docs/{id}/result"): failing})
    async with make(url) as client:
        for doc_id in ("whole", "in-a-field"):
            with pytest.raises(ha.ResponseValidationError):
                await client.documents.describe(doc_id)
        with pytest.raises(ha.DocumentNotFound):  # the error body is unreadable, the status still maps
            await client.documents.result("d")
    signed = sign_webhook(deep, "secret", timestamp=int(time.time()))
    with pytest.raises(ha.WebhookSignatureError, match="not valid JSON"):
        webhooks.verify(deep, signed, "secret")


async def test_a_caller_session_with_raise_for_status_keeps_typed_errors_and_refresh(serve: Serve) -> None:
    tokens = iter(["old", "new"])
    calls: list[str] = []

    async def provider() -> str:
        token = next(tokens)
        calls.append(token)
        return token

    async def describe(request: web.Request) -> web.Response:
        if request.headers["Authorization"] == "Bearer old":
            return web.json_response({"message": "expired"}, status=401)
        if request.match_info["id"] == "missing":
            return web.Response(status=404, text="No such document.")
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe})
    async with aiohttp.ClientSession(raise_for_status=True, auto_decompress=False) as http:
        async with make(url, token=None, token_provider=provider, session=http) as client:
            assert (await client.documents.describe("doc")).document_id == "d"  # 401 -> refresh -> retried
            with pytest.raises(ha.DocumentNotFound):
                await client.documents.describe("missing")
    assert calls == ["old", "new"]


async def test_a_closed_caller_session_gives_a_typed_error(serve: Serve) -> None:
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): json_handler()})
    http = aiohttp.ClientSession()
    await http.close()
    client = make(url, session=http)
    with pytest.raises(ha.ClientClosedError, match="session= is closed"):
        await client.documents.describe("doc")
    with pytest.raises(ha.ClientClosedError, match="session= is closed"):
        async with client:
            pass


async def test_a_caller_session_with_a_base_url_is_refused_when_built() -> None:
    async with aiohttp.ClientSession(base_url="http://127.0.0.1:9") as http:
        with pytest.raises(ha.InvalidRequest, match="base_url"):
            make("http://127.0.0.1:9", session=http)


async def test_a_proxy_carries_plain_http_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake server plays the proxy: a proxy receives the request with the target's absolute URL and answers it.
    # The target (127.0.0.2:9, loopback) is never connected to.
    async with FakeHealthServer() as proxy:
        user = proxy.data.user_ids[0]
        doc_id = proxy.data.document_ids(user)[0]
        kwargs: dict[str, Any] = {"token": proxy.token, "user_id": user, "retry": FAST_RETRY}
        async with ha.HealthClient(base_url="http://127.0.0.2:9", proxy=proxy.url, **kwargs) as client:
            assert (await client.documents.describe(doc_id)).document_id == doc_id
        assert proxy.calls("describe") == 1
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "")
        async with ha.HealthClient(base_url="http://127.0.0.2:9", trust_env=True, **kwargs) as client:
            await client.documents.describe(doc_id)
        assert proxy.calls("describe") == 2
        # without trust_env the environment is ignored (aiohttp's convention): the target itself is tried
        async with ha.HealthClient(base_url="http://127.0.0.2:9", connect_timeout=0.5, **kwargs) as client:
            with pytest.raises(ha.TransportError):
                await client.documents.describe(doc_id)
        assert proxy.calls("describe") == 2


# ------------------------------------------------------------------------------------------ time bounds


async def test_a_call_never_waits_in_the_shared_pause_past_its_timeout(serve: Serve) -> None:
    served: list[str] = []

    async def describe(request: web.Request) -> web.Response:
        served.append(request.match_info["id"])
        if request.match_info["id"] == "first":
            return web.Response(status=429, headers={"Retry-After": "60"})
        return web.json_response(DOC)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe})
    async with make(url, retry=ha.RetryPolicy.never()) as client:
        with pytest.raises(ha.RateLimitError):
            await client.documents.describe("first")  # pauses the whole client for 60 s
        started = time.monotonic()
        with pytest.raises(ha.RequestTimeout) as info:
            await client.documents.describe("second", timeout=3)
        assert time.monotonic() - started < 2.5  # failed at once: waiting could not end within 3 s
        assert info.value.sent is False and "Retry-After" in str(info.value)
        with pytest.raises(ha.RequestTimeout):  # the policy's Retry-After cap bounds the wait as well
            await client.documents.describe("third", retry=ha.RetryPolicy(retry_after_cap=1))
    assert served == ["first"]


async def test_retries_end_within_the_call_timeout(serve: Serve) -> None:
    async def describe(request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        return web.Response(status=503)

    url = await serve({("GET", "/mr/api/v1/docs/{id}"): describe})
    policy = ha.RetryPolicy(attempts=10, base_delay=0.1, max_delay=0.1, jitter=0)
    async with make(url, retry=policy) as client:
        started = time.monotonic()
        with pytest.raises(ha.HealthError):
            await client.documents.describe("doc", timeout=1.0)
        assert time.monotonic() - started < 2.5  # ten attempts would take ~4 s; the budget is 1 s


async def test_a_per_call_timeout_keeps_the_connect_timeout(monkeypatch: pytest.MonkeyPatch, serve: Serve) -> None:
    url = await serve({("POST", "/mr/api/v2/docs"): json_handler({"document_id": "new"})})
    stalls = [True]

    real = aiohttp.TCPConnector._create_connection

    async def stalled(self: aiohttp.TCPConnector, *args: Any, **kwargs: Any) -> Any:
        if stalls and stalls.pop():
            await asyncio.sleep(30)  # a SYN that is never answered
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "_create_connection", stalled)
    async with make(url, connect_timeout=0.2) as client:
        started = time.monotonic()
        # not idempotent, yet retried: a stalled connect is known not to have sent anything
        result = await client.documents.upload(b"%PDF-1.7 x", filename="r.pdf", timeout=10)
        assert result.document_id == "new"
        assert time.monotonic() - started < 5  # the 0.2 s connect timeout held under timeout=10


async def test_a_connect_stall_within_the_budget_is_not_maybe_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    async def stalled(self: aiohttp.TCPConnector, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(30)

    monkeypatch.setattr(aiohttp.TCPConnector, "_create_connection", stalled)
    async with make("http://127.0.0.1:9", connect_timeout=None, retry=ha.RetryPolicy.never()) as client:
        with pytest.raises(ha.RequestTimeout) as info:
            await client.documents.describe("doc", timeout=0.3)
    assert info.value.sent is False


async def test_rate_limit_holds_in_every_one_second_window_the_first_included() -> None:
    from health_async._limits import Limits

    limits = Limits(100, rate=5)
    admitted: list[float] = []

    async def one() -> None:
        assert await limits.admit()
        admitted.append(time.monotonic())  # the moment the request leaves
        limits.sent()

    await asyncio.gather(*(one() for _ in range(12)))
    assert len(admitted) == 12
    for start in admitted:  # every window that starts at a request (a token bucket let 10 through in the first)
        assert sum(1 for t in admitted if start <= t < start + 0.999) <= 5


# ------------------------------------------------------------------------------------------ failures shared


async def test_a_failed_login_is_shared_by_every_waiting_caller() -> None:
    async with FakeHealthServer() as server:
        user = server.data.user_ids[0]
        doc_id = server.data.document_ids(user)[0]
        creds = ha.ClientCredentials(server.client_id, "wrong-secret")
        async with ha.HealthClient(base_url=server.url, auth=creds, user_id=user, retry=FAST_RETRY) as client:
            results = await asyncio.gather(
                *(client.documents.describe(doc_id) for _ in range(32)), return_exceptions=True
            )
        assert all(isinstance(r, ha.AuthenticationError) for r in results)
        assert server.calls("login") == 1
        assert server.calls("describe") == 0


async def test_a_provider_returning_the_same_token_is_not_called_per_concurrent_401() -> None:
    calls = 0

    async with FakeHealthServer() as server:

        async def provider() -> str:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.01)
            return server.token

        user = server.data.user_ids[0]
        doc_id = server.data.document_ids(user)[0]
        async with ha.HealthClient(base_url=server.url, token_provider=provider, user_id=user, retry=FAST_RETRY) as c:
            await c.documents.describe(doc_id)  # the first token
            server.reject_static_token(times=16)  # the next 16 requests get a 401
            await asyncio.gather(*(c.documents.describe(doc_id) for _ in range(16)), return_exceptions=True)
    assert calls == 2  # one fetch at start, one refresh shared by all 16 callers


# ------------------------------------------------------------------------------------------ bulk edges


async def test_bulk_helpers_refuse_a_closed_client_and_single_values_at_once() -> None:
    client = make("http://127.0.0.1:9")
    for single in ("doc-1", b"doc-1", Path("a.pdf")):
        with pytest.raises(ha.InvalidRequest, match="iterable"):
            client.documents.describe_many(single)  # type: ignore[arg-type]
        with pytest.raises(ha.InvalidRequest, match="iterable"):
            client.documents.upload_many(single)  # type: ignore[arg-type]
    await client.aclose()
    with pytest.raises(ha.ClientClosedError):
        client.documents.describe_many(["a", "b"])
    with pytest.raises(ha.ClientClosedError):
        client.documents.upload_many([b"x"])


async def test_concurrency_beyond_the_connection_limit_or_the_input_costs_nothing(serve: Serve) -> None:
    url = await serve({("GET", "/mr/api/v1/docs/{id}"): json_handler()})
    async with make(url, max_connections=4) as client:
        async for _ in client.documents.describe_many([f"d{i}" for i in range(20)], concurrency=1000):
            assert len(client._session.tasks) <= 4  # workers: capped by max_connections
        async for _ in client.documents.describe_many(["a", "b"], concurrency=64):
            assert len(client._session.tasks) <= 2  # and by the input's length


async def test_leaving_upload_many_early_reports_the_uploads_already_sent(serve: Serve) -> None:
    received: list[int] = []

    async def upload(request: web.Request) -> web.Response:
        received.append(1)
        await request.read()
        await asyncio.sleep(0.2 if len(received) > 1 else 0)
        return web.json_response({"document_id": f"doc-{len(received)}"})

    url = await serve({("POST", "/mr/api/v2/docs"): upload})
    async with make(url) as client:
        stream = client.documents.upload_many([b"%PDF-1 a", b"%PDF-1 b", b"%PDF-1 c", b"%PDF-1 d"], concurrency=4)
        async with stream:
            async for _ in stream:
                break  # the first finished; three are on the wire
        reported = 1 + len(stream.left_behind)
    assert reported == len(received) == 4
    assert all(o.ok for o in stream.left_behind)


async def test_a_repeated_page_token_stops_paging_with_a_typed_error(serve: Serve) -> None:
    async def listing(request: web.Request) -> web.Response:
        token = {"": "t1", "t1": "t2", "t2": "t1"}[request.query.get("offset", "")]
        return web.json_response({"items": [], "next_token": token})

    url = await serve({("GET", "/mr/api/v1/docs"): listing})
    async with make(url) as client:
        with pytest.raises(PaginationError):
            _ = [page async for page in client.documents.pages()]


@pytest.mark.parametrize("listing", ["documents", "cases"])
async def test_empty_pages_without_end_stop_with_a_typed_error(serve: Serve, listing: str) -> None:
    """A service answering empty pages forever, each with a fresh token, used to be followed forever."""
    served: list[str] = []

    async def pages(request: web.Request) -> web.Response:
        served.append(request.query.get("offset", ""))
        key = "items" if listing == "documents" else "cases"
        return web.json_response({key: [], "next_token": f"t{len(served)}"})

    path = "/mr/api/v1/docs" if listing == "documents" else "/mr/api/v1/cases"
    url = await serve({("GET", path): pages})
    async with make(url) as client:
        resource = client.documents if listing == "documents" else client.cases
        with pytest.raises(PaginationError, match="100 empty pages in a row"):
            _ = [page async for page in resource.pages(user_id="u-1")]
    assert len(served) == 100


async def test_an_empty_page_between_full_ones_is_followed(serve: Serve) -> None:
    """Empty pages that end (a listing catching up) are followed to the items after them."""
    item = {"record": {"item": {"document_id": "d-1", "document_type": "lr"}}}

    async def listing(request: web.Request) -> web.Response:
        n = int(request.query.get("offset", "t0")[1:])
        if n == 120:
            return web.json_response({"items": [item], "next_token": None})
        items = [item] if n % 50 == 0 else []  # 49 empty pages in a row, twice, between full ones
        return web.json_response({"items": items, "next_token": f"t{n + 1}"})

    url = await serve({("GET", "/mr/api/v1/docs"): listing})
    async with make(url) as client:
        found = [d.document_id async for d in client.documents.list(user_id="u-1")]
    assert len(found) == 4  # t0, t50, t100, t120


# ------------------------------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    "base_url",
    ["https://api.example:99999", "https://api.example:port", "https://api.example:0", "https://a b.example"],
)
def test_bad_configuration_is_refused_when_the_client_is_built(base_url: str) -> None:
    with pytest.raises(ha.InvalidRequest):
        ha.HealthClient(base_url=base_url, token="t")


def test_retry_never_touches_an_abdm_lock_out() -> None:
    error = AbhaRateLimited("x", status=500, operation="aadhaar_init")
    assert not ha.RetryPolicy(retry_non_idempotent=True).should_retry(error, idempotent=True)


def test_reprs_show_no_presigned_signature() -> None:
    entry = FileEntry("https://bucket.s3.amazonaws.com/a/b.pdf?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIA")
    assert "deadbeef" not in repr(entry) and "AKIA" not in repr(entry)
    assert "bucket.s3.amazonaws.com/a/b.pdf" in repr(entry)


# ------------------------------------------------------------------------------------------ CLI input


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict[str, Any]], str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, [orjson.loads(line) for line in out.splitlines() if line], err


@pytest.mark.parametrize("kind", ["missing", "directory", "unreadable"])
def test_an_input_file_that_cannot_be_read_is_one_line_and_exit_2(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEALTH_ASYNC_TOKEN", "t")
    monkeypatch.setenv("HEALTH_ASYNC_USER_ID", "u")
    monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", "http://127.0.0.1:9")
    path = tmp_path / "ids.txt"
    if kind == "directory":
        path.mkdir()
    elif kind == "unreadable":
        path.write_text("a\n")
        path.chmod(0)
        monkeypatch.setattr("builtins.open", _refuse_open(path))  # root reads anything: refuse as the OS would
    code, lines, err = run_cli(capsys, "describe-many", str(path))
    assert code == 2 and lines == []
    assert err.count("\n") == 1 and err.startswith("health-async: ") and "Traceback" not in err


def _refuse_open(path: Path) -> Callable[..., Any]:
    import builtins

    real = builtins.open

    def fake(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied")
        return real(file, *args, **kwargs)

    return fake


def test_bad_lines_fail_alone_and_the_batch_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ..conftest import ServerThread

    with ServerThread() as server:
        user = server.data.user_ids[0]
        ids = server.data.document_ids(user)[:3]
        path = tmp_path / "ids.txt"
        lines_in = [ids[0].encode(), b"\xff\xfe bad", b"x" * 5000, b"   ", ids[1].encode(), ids[2].encode()]
        path.write_bytes(b"\n".join(lines_in) + b"\n")
        flags = ["--base-url", server.url, "--token", server.token, "--user-id", user]
        limits = ["--rate-limit", "1000", "--max-connections", "8"]
        code, lines, err = run_cli(capsys, "describe-many", str(path), *flags, *limits)
    assert code == 1
    errors = sorted((line["line"], line["error"]["message"]) for line in lines if "line" in line)
    assert errors == [
        (2, "line 2: not valid UTF-8"),
        (3, "line 3: longer than 256 characters"),
        (4, "line 4: empty line"),
    ]
    assert sorted(line["document_id"] for line in lines if "document" in line) == sorted(ids)
    assert err == "describe finished: 3 done, 3 failed\n"


async def test_upload_outcome_unknown_is_counted_in_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    from health_async._cli._output import Tally

    tally = Tally("upload", idempotent=False)
    tally.add(None)
    tally.add(ha.TransportError("reset", sent=True))
    tally.add(ha.InvalidRequest("empty"))
    tally.summary(interrupted=True)
    assert capsys.readouterr().err == "upload interrupted: 1 done, 1 failed, 1 sent with an unknown outcome\n"
