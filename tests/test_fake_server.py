"""FakeHealthServer spoken to with plain aiohttp: routes, tokens, paging, uploads, encryption, faults, recording."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from health_async import jwe
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
    async with http.post(refresh_url, json={"refresh_token": tokens["refresh_token"]}) as resp:
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
    init_env = jwe.encrypt(orjson.dumps({"aadhaar_number": number}), key)
    async with http.post(f"{server.url}/abdm/na/v1/registration/aadhaar/init", json=init_env, headers=headers) as r:
        init = orjson.loads(jwe.decrypt(await r.json(), key))
    assert init["txn_id"] and init["hint"].startswith("OTP sent")
    assert server.requests[-1].plaintext == {"aadhaar_number": number}
    bad = {**init_env, "tag": init_env["iv"]}
    async with http.post(f"{server.url}/abdm/na/v1/registration/aadhaar/init", json=bad, headers=headers) as r:
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
