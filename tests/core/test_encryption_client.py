"""Encryption wired through the client, end to end against a loopback server that speaks JWE."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

import health_async as ha
from health_async import jwe

from ..conftest import FAST_RETRY, Serve

KEY_STRING = "fakekey-16-bytes"
KEY = jwe.derive_key(KEY_STRING)
VALID_AADHAAR = "234567890124"


def sealed(payload: Any, *, with_protected: bool = False) -> web.Response:
    """An encrypted JSON response as the service sends it: no ``protected``, no ``kid``."""
    env = jwe.encrypt(orjson.dumps(payload), KEY)
    if not with_protected:
        del env["protected"]
    return web.Response(body=orjson.dumps(env), content_type="application/json")


class JweServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def aadhaar_init(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append({"headers": dict(request.headers), "body": body})
        if request.headers.get("X-Encryption") == "JWE":
            plaintext = orjson.loads(jwe.decrypt(orjson.loads(body), KEY))
            return sealed({"hint": "OTP sent to ******0973", "txn_id": f"txn-{plaintext['aadhaar_number'][-4:]}"})
        return web.json_response({"hint": "sent", "txn_id": "plain"})

    async def upload(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.requests.append({"headers": dict(request.headers), "body": body, "query": list(request.query.items())})
        assert request.content_length == len(body)
        plaintext = orjson.loads(jwe.decrypt(orjson.loads(body), KEY))
        data = base64.b64decode(plaintext["file"], validate=True)
        return web.json_response({"document_id": f"doc-{len(data)}"})

    async def describe(self, request: web.Request) -> web.Response:
        return sealed({"document_id": request.match_info["id"], "document_type": "lr", "tags": ["x"]})


@pytest.fixture
async def jwe_server(serve: Serve) -> tuple[JweServer, str]:
    server = JweServer()
    url = await serve(
        {
            ("POST", "/abdm/na/v1/registration/aadhaar/init"): server.aadhaar_init,
            ("POST", "/mr/api/v2/docs"): server.upload,
            ("GET", "/mr/api/v1/docs/{id}"): server.describe,
        }
    )
    return server, url


def make_client(url: str, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {"encryption_key": KEY_STRING, "key_id": "client-key-1", "retry": FAST_RETRY}
    options.update(kwargs)
    return ha.HealthClient(base_url=url, token="tok", user_id="oid-1", **options)


async def test_encrypted_aadhaar_init(jwe_server: tuple[JweServer, str]) -> None:
    server, url = jwe_server
    async with make_client(url) as client:
        init = await client.abha.aadhaar_init("2345 6789 0124", encrypt=True)
    assert init.txn_id == "txn-0124"  # the server decrypted our envelope, we decrypted its answer
    sent = server.requests[0]
    assert sent["headers"]["X-Encryption"] == "JWE"
    assert sent["headers"]["Content-Type"] == "application/json"
    envelope = orjson.loads(sent["body"])
    assert set(envelope) == {"protected", "iv", "ciphertext", "tag", "kid"}
    assert envelope["kid"] == "client-key-1"
    assert VALID_AADHAAR.encode() not in sent["body"]


async def test_client_wide_encrypt_and_per_call_opt_out(jwe_server: tuple[JweServer, str]) -> None:
    server, url = jwe_server
    async with make_client(url, encrypt=True) as client:
        assert (await client.abha.aadhaar_init(VALID_AADHAAR)).txn_id == "txn-0124"
        assert (await client.abha.aadhaar_init(VALID_AADHAAR, encrypt=False)).txn_id == "plain"
    assert [r["headers"].get("X-Encryption") for r in server.requests] == ["JWE", None]


@pytest.mark.parametrize("size", [1, 4096, 768 * 1024 + 7, 2 * 1024 * 1024])
async def test_encrypted_upload_streams_a_file(jwe_server: tuple[JweServer, str], tmp_path: Path, size: int) -> None:
    server, url = jwe_server
    path = tmp_path / "report.pdf"
    path.write_bytes(os.urandom(size))
    async with make_client(url) as client:
        result = await client.documents.upload(path, tasks=["smart", "pii"], encrypt=True)
    assert result.document_id == f"doc-{size}"
    sent = server.requests[0]
    assert sent["headers"]["X-Encryption"] == "JWE"
    assert sent["headers"]["Content-Type"] == "application/json"
    assert sent["query"] == [("task", "smart"), ("task", "pii")]


async def test_encrypted_responses_are_decrypted_transparently(jwe_server: tuple[JweServer, str]) -> None:
    _, url = jwe_server
    async with make_client(url) as client:
        doc = await client.documents.describe("doc-1")
    assert (doc.document_id, doc.document_type, doc.tags) == ("doc-1", "lr", ("x",))


async def test_describe_many_decrypts_each_body_as_describe_does(jwe_server: tuple[JweServer, str]) -> None:
    # describe_many keeps each 200's bytes for its consumer, which reads an envelope the general way
    _, url = jwe_server
    async with make_client(url) as client:
        results = [r async for r in client.documents.describe_many([f"doc-{i}" for i in range(6)], concurrency=3)]
        assert {r.document_id: r.document for r in results} == {
            f"doc-{i}": await client.documents.describe(f"doc-{i}") for i in range(6)
        }
    async with make_client(url, encryption_key="another-16-bytes") as client:
        failed = [r async for r in client.documents.describe_many(["doc-1", "doc-2"])]
    assert all(isinstance(r.error, ha.EncryptionError) and r.document is None for r in failed)


async def test_encrypted_response_without_a_key_is_an_encryption_error(jwe_server: tuple[JweServer, str]) -> None:
    _, url = jwe_server
    async with ha.HealthClient(base_url=url, token="tok", user_id="oid-1", retry=FAST_RETRY) as client:
        with pytest.raises(ha.EncryptionError, match="encryption_key"):
            await client.documents.describe("doc-1")


async def test_encrypted_response_under_another_key_is_an_encryption_error(jwe_server: tuple[JweServer, str]) -> None:
    _, url = jwe_server
    async with make_client(url, encryption_key="another-16-bytes") as client:
        with pytest.raises(ha.EncryptionError) as info:
            await client.documents.describe("doc-1")
    assert "another-16-bytes" not in str(info.value) and KEY_STRING not in str(info.value)


async def test_encrypt_without_a_key_is_refused_before_sending(jwe_server: tuple[JweServer, str]) -> None:
    server, url = jwe_server
    async with ha.HealthClient(base_url=url, token="tok", user_id="oid-1") as client:
        with pytest.raises(ValueError, match="encryption_key"):
            await client.abha.aadhaar_init(VALID_AADHAAR, encrypt=True)
        with pytest.raises(ValueError, match="encryption_key"):
            await client.documents.upload(b"x", encrypt=True)
    assert server.requests == []


def test_bad_key_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="16 bytes") as info:
        ha.HealthClient(base_url="https://api.test.example", token="t", encryption_key="too-short")
    assert "too-short" not in str(info.value)
