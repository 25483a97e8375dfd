"""FakeHealthServer spoken to with plain aiohttp: routes, tokens, paging, uploads, encryption, faults, recording."""

from __future__ import annotations

import ast
import asyncio
import base64
import hashlib
import importlib.util
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

import health_async.testing
from health_async import jwe
from health_async._aadhaar import verhoeff_check
from health_async.testing import FakeHealthServer, Fault


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(documents_per_user=45, page_size=20) as srv:
        yield srv


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def auth(server: FakeHealthServer, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}", "X-Pt-Id": server.data.user_ids[0], **extra}


async def test_seeded_data_is_deterministic() -> None:
    a = FakeHealthServer(seed=7, documents_per_user=3)
    b = FakeHealthServer(seed=7, documents_per_user=3)
    c = FakeHealthServer(seed=8, documents_per_user=3)
    assert a.data.user_ids == b.data.user_ids != c.data.user_ids
    assert a.data.documents == b.data.documents
    assert a.data.valid_aadhaar == b.data.valid_aadhaar


async def test_describe(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    doc_id = server.data.document_ids(server.data.user_ids[0])[0]
    async with http.get(f"{server.url}/mr/api/v1/docs/{doc_id}", headers=auth(server)) as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body["document_id"] == doc_id and body["smart_report"] and len(body["files"]) == 2
    async with http.get(f"{server.url}/mr/api/v1/docs/nope", headers=auth(server)) as resp:
        assert resp.status == 404 and await resp.text() == "No such document."
    other_user = server.data.user_ids[1]
    async with http.get(f"{server.url}/mr/api/v1/docs/{doc_id}", headers=auth(server, **{"X-Pt-Id": other_user})) as r:
        assert r.status == 404  # documents belong to their user
    async with http.get(f"{server.url}/mr/api/v1/docs/{doc_id}", headers={"Authorization": "Bearer x"}) as resp:
        assert resp.status == 401


async def test_tokens_login_refresh_and_expiry(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    url = f"{server.url}/profiles/v1/emr-user/{server.data.user_ids[0]}"
    login = {"client_id": server.client_id, "client_secret": server.client_secret}
    async with http.post(f"{server.url}/connect-auth/v1/account/login", json={**login, "client_secret": "x"}) as r:
        assert r.status == 401
    async with http.post(f"{server.url}/connect-auth/v1/account/login", json=login) as resp:
        tokens = await resp.json()
    assert tokens["expires_in"] == 1800
    headers = {"Authorization": f"Bearer {tokens['access_token']}", "client-id": server.client_id}
    async with http.get(url, headers=headers) as resp:
        assert resp.status == 200
    server.expire_tokens()
    async with http.get(url, headers=headers) as resp:
        assert resp.status == 401
    refresh_url = f"{server.url}/connect-auth/v1/account/refresh-token"
    async with http.post(refresh_url, json={"refresh_token": tokens["refresh_token"]}, headers=headers) as resp:
        fresh = await resp.json()
    async with http.get(url, headers={**headers, "Authorization": f"Bearer {fresh['access_token']}"}) as resp:
        assert resp.status == 200
    async with http.post(refresh_url, json={"refresh_token": tokens["refresh_token"]}, headers=headers) as resp:
        assert resp.status == 401  # a refresh token is used once
    server.reject_static_token(times=1)
    static = {"Authorization": f"Bearer {server.token}", "client-id": server.client_id}
    async with http.get(url, headers=static) as first, http.get(url, headers=static) as second:
        assert (first.status, second.status) == (401, 200)


async def test_list_pages_and_incremental_sync(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    url = f"{server.url}/mr/api/v1/docs"
    headers = auth(server, Accept="application/json")
    seen: list[str] = []
    params: dict[str, str] = {}
    for _ in range(5):
        async with http.get(url, headers=headers, params=params) as resp:
            page = await resp.json()
        seen += [i["record"]["item"]["document_id"] for i in page["items"]]
        if "next_token" not in page:
            break
        params = {"offset": page["next_token"]}
    assert seen == server.data.document_ids(server.data.user_ids[0])
    cutoff = server.data.list_items[server.data.user_ids[0]][40]["upload_date"]
    async with http.get(url, headers=headers, params={"u_at__gt": str(cutoff)}) as resp:
        assert len((await resp.json())["items"]) == 4
    async with http.get(url, headers=auth(server, Accept="*/*")) as resp:
        assert resp.status == 406


@pytest.mark.parametrize("accept", ["application/x-protobuf, application/json;q=0.5", "application/json, */*", ""])
async def test_list_wants_accept_to_be_exactly_application_json(
    server: FakeHealthServer, http: aiohttp.ClientSession, accept: str
) -> None:
    """records.yaml: ``accept`` is required, an enum of the one value ``application/json`` (not a substring)."""
    async with http.get(f"{server.url}/mr/api/v1/docs", headers=auth(server, Accept=accept)) as resp:
        assert resp.status == 406


async def test_refresh_requires_authorization_and_client_id(
    server: FakeHealthServer, http: aiohttp.ClientSession
) -> None:
    """authorization.yml: refresh-token requires ``Authorization: Bearer <access_token>`` and ``Client-Id``."""
    login = {"client_id": server.client_id, "client_secret": server.client_secret}
    async with http.post(f"{server.url}/connect-auth/v1/account/login", json=login) as resp:
        tokens = await resp.json()
    refresh_url = f"{server.url}/connect-auth/v1/account/refresh-token"
    body = {"refresh_token": tokens["refresh_token"]}
    bearer = f"Bearer {tokens['access_token']}"
    refused = [
        ({"Client-Id": server.client_id}, 401),  # no Authorization
        ({"Authorization": tokens["access_token"], "Client-Id": server.client_id}, 401),  # not a bearer token
        ({"Authorization": bearer}, 400),  # no Client-Id
        ({"Authorization": bearer, "Client-Id": "another-client"}, 401),
    ]
    for headers, status in refused:
        async with http.post(refresh_url, json=body, headers=headers) as resp:
            assert resp.status == status, headers
            assert (await resp.json())["code"] == status  # OpenapiGenericError {code, error}
    server.expire_tokens()  # an expired access token still names the caller
    async with http.post(refresh_url, json=body, headers={"Authorization": bearer, "Client-Id": server.client_id}) as r:
        assert r.status == 200 and (await r.json())["refresh_token"] != tokens["refresh_token"]


async def test_a_presigned_batch_keeps_the_first_ten_tags(
    server: FakeHealthServer, http: aiohttp.ClientSession
) -> None:
    """records.yaml (``tg``): more than 10 tags are not refused: only the first 10 are considered."""
    tags = [f"tag{i}" for i in range(12)]
    content = b"%PDF-1.4 fake"
    entry = {"dt": "lr", "tg": tags, "files": [{"contentType": "application/pdf", "file_size": len(content)}]}
    async with http.post(f"{server.url}/mr/api/v1/docs", json={"batch_request": [entry]}, headers=auth(server)) as r:
        assert r.status == 200
        (answer,) = (await r.json())["batch_response"]
    assert "error_details" not in answer
    (form,) = answer["forms"]
    data = aiohttp.FormData()
    for name, value in form["fields"].items():
        data.add_field(name, value)
    data.add_field("file", content, content_type="application/pdf", filename="a.pdf")
    async with http.post(form["url"], data=data) as resp:
        assert resp.status == 204
    stored = orjson.loads(server.data.documents[server.data.user_ids[0]][answer["document_id"]])
    assert stored["tags"] == tags[:10]


async def test_upload_multipart_then_describe(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    form = aiohttp.FormData()
    form.add_field("file", b"%PDF-1.7 hello", filename="r.pdf", content_type="application/pdf")
    url = f"{server.url}/mr/api/v2/docs"
    async with http.post(url, data=form, headers=auth(server), params=[("task", "smart"), ("task", "pii")]) as resp:
        assert resp.status == 200
        document_id = (await resp.json())["document_id"]
    async with http.get(f"{server.url}/mr/api/v1/docs/{document_id}", headers=auth(server)) as resp:
        doc = await resp.json()
    assert doc["upload"] == {
        "size": 14,
        "sha256": hashlib.sha256(b"%PDF-1.7 hello").hexdigest(),
        "ends_in_error": False,
    }
    rec = server.requests[0]
    assert (rec.route, rec.body_size, rec.query) == ("upload", 14, [("task", "smart"), ("task", "pii")])
    form = aiohttp.FormData()
    form.add_field("file", b"x", filename="r.pdf")
    async with http.post(url, data=form, headers=auth(server)) as resp:
        assert resp.status == 400 and await resp.text() == "Invalid form data."


async def test_encrypted_upload_aadhaar_init_and_responses(
    server: FakeHealthServer, http: aiohttp.ClientSession
) -> None:
    key = jwe.derive_key(server.encryption_key)
    headers = auth(server, **{"X-Encryption": "JWE"})
    file_env = jwe.encrypt(orjson.dumps({"file": base64.b64encode(b"%PDF scan").decode()}), key, kid=server.key_id)
    async with http.post(f"{server.url}/mr/api/v2/docs?task=smart", json=file_env, headers=headers) as resp:
        answer = await resp.json()
    assert "document_id" in orjson.loads(jwe.decrypt(answer, key))
    assert "protected" not in answer and "kid" not in answer  # like the service's responses
    number = server.data.valid_aadhaar[0]
    init_env = jwe.encrypt(orjson.dumps({"aadhaar_number": number}), key, kid=server.key_id)
    async with http.post(f"{server.url}/abdm/na/v1/registration/aadhaar/init", json=init_env, headers=headers) as r:
        init = orjson.loads(jwe.decrypt(await r.json(), key))
    assert init["txn_id"] and init["hint"].startswith("OTP sent")
    assert server.requests[-1].plaintext == {"aadhaar_number": number}
    bad = {**init_env, "tag": init_env["iv"]}
    async with http.post(f"{server.url}/abdm/na/v1/registration/aadhaar/init", json=bad, headers=headers) as r:
        assert r.status == 400
    # the service finds the shared key by the envelope's kid: none, or another, is refused
    for kid in (None, "not-the-key"):
        env = jwe.encrypt(orjson.dumps({"aadhaar_number": number}), key, kid=kid)
        async with http.post(f"{server.url}/abdm/na/v1/registration/aadhaar/init", json=env, headers=headers) as r:
            assert r.status == 400


async def test_aadhaar_errors_use_the_documented_body(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    url = f"{server.url}/abdm/na/v1/registration/aadhaar/init"
    for number, (status, _) in server.data.failing_aadhaar.items():
        async with http.post(url, json={"aadhaar_number": number}, headers=auth(server)) as resp:
            body = await resp.json()
        assert resp.status == status
        assert set(body) == {"code", "error", "source_error"} and body["source_error"]["code"].startswith("ABDM-")


async def test_profile_needs_client_id(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    oid = server.data.user_ids[0]
    url = f"{server.url}/profiles/v1/emr-user/{oid}"
    async with http.get(url, headers=auth(server)) as resp:
        assert resp.status == 400
    async with http.get(url, headers=auth(server, **{"client-id": server.client_id})) as resp:
        assert (await resp.json())["oid"] == oid
    async with http.get(
        f"{server.url}/profiles/v1/emr-user/0", headers=auth(server, **{"client-id": "fake-client"})
    ) as r:
        assert r.status == 404 and (await r.json())["code"] == "profile_not_found"


async def _describe_status(server: FakeHealthServer, http: aiohttp.ClientSession) -> tuple[int, dict[str, str], bytes]:
    doc_id = server.data.document_ids(server.data.user_ids[0])[0]
    async with http.get(f"{server.url}/mr/api/v1/docs/{doc_id}", headers=auth(server)) as resp:
        return resp.status, dict(resp.headers), await resp.read()


async def test_fault_status_times_and_retry_after(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    server.inject("describe", Fault(status=503, times=2, retry_after=1.5))
    results = [await _describe_status(server, http) for _ in range(3)]
    assert [r[0] for r in results] == [503, 503, 200]
    assert results[0][1]["Retry-After"] == "1.5"
    assert server.calls("describe") == 3


async def test_fault_rate_is_seeded(http: aiohttp.ClientSession) -> None:
    counts = []
    for _ in range(2):
        async with FakeHealthServer(seed=3, documents_per_user=2) as server:
            server.inject("*", Fault(status=500, rate=0.3))
            statuses = [(await _describe_status(server, http))[0] for _ in range(40)]
            counts.append(statuses.count(500))
    assert counts[0] == counts[1] and 3 <= counts[0] <= 25


async def test_fault_bodies_latency_drop_and_truncate(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    server.inject("describe", Fault(status=200, body=b"<html>oops", times=1))
    server.inject("describe", Fault(status=502, body="<html>Bad gateway</html>", content_type="text/html", times=1))
    assert (await _describe_status(server, http))[2] == b"<html>oops"
    status, headers, _ = await _describe_status(server, http)
    assert status == 502 and headers["Content-Type"].startswith("text/html")

    server.inject("describe", Fault(latency=0.05, times=1))
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert (await _describe_status(server, http))[0] == 200
    assert loop.time() - started >= 0.04

    # aiohttp itself repeats an idempotent GET once on a dropped connection: the server sees the drop, then 200.
    server.reset()
    server.inject("describe", Fault(drop=True, times=1))
    assert (await _describe_status(server, http))[0] == 200
    assert [r.status for r in server.requests] == [None, 200]
    # A POST is not repeated: the caller sees the disconnection.
    server.inject("aadhaar_init", Fault(drop=True, times=1))
    url = f"{server.url}/abdm/na/v1/registration/aadhaar/init"
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await http.post(url, json={"aadhaar_number": server.data.valid_aadhaar[0]}, headers=auth(server))
    server.inject("describe", Fault(truncate=True, times=1))
    with pytest.raises(aiohttp.ClientPayloadError):
        await _describe_status(server, http)
    assert server.requests[-1].status == 200 and server.requests[-2].status is None
    assert (await _describe_status(server, http))[0] == 200  # and it recovers


async def test_inject_checks_the_route_and_reset_clears(server: FakeHealthServer, http: aiohttp.ClientSession) -> None:
    with pytest.raises(ValueError, match="unknown route"):
        server.inject("descibe", Fault(status=500))
    server.inject("describe", Fault(status=500))
    assert (await _describe_status(server, http))[0] == 500
    server.reset()
    assert server.requests == [] and server.calls("describe") == 0
    assert (await _describe_status(server, http))[0] == 200


async def test_recording_can_be_turned_off(http: aiohttp.ClientSession) -> None:
    async with FakeHealthServer(record=False, documents_per_user=1) as server:
        await _describe_status(server, http)
        assert server.requests == [] and server.calls("describe") == 1


def test_url_before_start_is_an_error() -> None:
    server: Any = FakeHealthServer(documents_per_user=1)
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url


# ---------------------------------------------------------------------------------------------- independence
# The fake is the other side, not a mirror: it describes the service from the vendor's files (testing/_routes.py)
# and imports none of the client's routes, models or parsing, so a wrong path or field in either fails a test.

TESTING_DIR = Path(health_async.testing.__file__).parent
#: What every module of the fake may import of the client: the JSON codec and the public encryption modules (the
#: fake encrypts as the service does; the ABDM pushes it checks with abdm_crypto, tests/abdm/test_abdm.py checks again
#: with the vendor's own abdm-ecdh).
ALLOWED_EVERYWHERE = frozenset({"health_async._json", "health_async.jwe", "health_async.abdm_crypto"})
#: More, for one module: the errors a public testing API raises to its user (``send_webhook``, ``sign_webhook``:
#: InvalidRequest); the public client the ``health_client`` fixture hands out (``HealthClient``, ``RetryPolicy``).
ALLOWED_IN = {"webhooks/_send.py": {"health_async.errors"}, "pytest_plugin.py": {"health_async"}}


def _module_name(path: Path) -> str:
    parts = path.relative_to(TESTING_DIR).with_suffix("").parts
    return ".".join(["health_async.testing", *parts[: -1 if parts[-1] == "__init__" else None]])


def _package(path: Path) -> str:
    """The package a relative import in ``path`` starts from."""
    return _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _imports(path: Path, *, type_checking: bool) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every import in the file: module level, in functions and classes, and (with
    ``type_checking``) under ``if TYPE_CHECKING:``; relative imports resolved, ``from pkg import sub`` as ``pkg.sub``
    when ``sub`` is a module. Also literal ``importlib.import_module("...")`` and ``__import__("...")`` calls."""
    package = _package(path) if path.is_relative_to(TESTING_DIR) else "health_async.testing"

    def visit(node: ast.AST) -> Iterator[tuple[int, str]]:
        if isinstance(node, ast.If) and not type_checking:
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            ):
                for branch in node.orelse:
                    yield from visit(branch)
                return
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                yield node.lineno, sub if _is_module(sub) else module
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))


def test_the_fake_imports_none_of_the_client() -> None:
    files = sorted(TESTING_DIR.rglob("*.py"))
    names = {f.relative_to(TESTING_DIR).as_posix() for f in files}
    assert {"_server.py", "_routes.py", "abha/_registration.py", "pytest_plugin.py"} <= names
    bad = []
    for path in files:
        allowed = ALLOWED_EVERYWHERE | ALLOWED_IN.get(path.relative_to(TESTING_DIR).as_posix(), set())
        for line, module in _imports(path, type_checking=True):
            if module.split(".")[0] != "health_async" or module.startswith("health_async.testing"):
                continue
            if module not in allowed:
                bad.append(f"{path.name}:{line} imports {module}")
    assert not bad, "the fake must not import the client's internals:\n" + "\n".join(bad)


def test_the_import_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    sample = tmp_path / "_sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "from .. import _constants as C, _json\n"
        "if TYPE_CHECKING:\n"
        "    from ..models import Document\n"
        "def f():\n"
        "    from ..resources import abha\n"
        "    import health_async._config\n"
        "    from . import _server\n",
        encoding="utf-8",
    )
    found = {m for _, m in _imports(sample, type_checking=True)}
    assert {"health_async._constants", "health_async._json", "health_async.models"} <= found
    assert {"health_async.resources.abha", "health_async._config", "health_async.testing._server"} <= found
    assert "health_async.models" not in {m for _, m in _imports(sample, type_checking=False)}


def test_the_fake_has_no_import_circles() -> None:
    """No module of the fake imports back (even inside a function) one that imports it; ``if TYPE_CHECKING:``
    imports do not count."""
    graph: dict[str, set[str]] = {}
    for path in TESTING_DIR.rglob("*.py"):
        graph[_module_name(path)] = {
            m for _, m in _imports(path, type_checking=False) if m.startswith("health_async.testing.")
        }

    def cycle_from(start: str, node: str, seen: list[str]) -> list[str] | None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return [*seen, nxt]
            if nxt not in seen:
                found = cycle_from(start, nxt, [*seen, nxt])
                if found:
                    return found
        return None

    for module in sorted(graph):
        cycle = cycle_from(module, module, [module])
        assert cycle is None, " -> ".join(cycle or [])


def test_seeded_aadhaar_numbers_pass_the_clients_check() -> None:
    data = FakeHealthServer(documents_per_user=1).data
    numbers = [*data.valid_aadhaar, *data.failing_aadhaar]
    assert len(numbers) == 8 and all(len(n) == 12 and n[0] not in "01" and verhoeff_check(n) for n in numbers)


async def test_send_webhook_sends_a_large_body_cleanly() -> None:
    """A 20 MB event under -W error: aiohttp's large-bytes ResourceWarning must not fire."""
    from aiohttp import web

    from health_async.testing import send_webhook

    sizes: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        sizes.append(len(await request.read()))
        return web.Response(status=204)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/hook", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        status = await send_webhook(f"http://127.0.0.1:{port}/hook", {"event": "x", "data": "a" * 20_000_000}, "s")
    finally:
        await runner.cleanup()
    assert status == 204 and sizes and sizes[0] > 20_000_000
