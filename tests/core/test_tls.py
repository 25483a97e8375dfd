"""TLS certificates are verified by default: a self-signed loopback server is refused, trusted explicitly it works."""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import health_async as ha


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path, list[str]]]:
    cert_path, key_path = self_signed(tmp_path)
    seen: list[str] = []

    async def describe(request: web.Request) -> web.Response:
        seen.append(request.match_info["id"])
        return web.json_response({"document_id": request.match_info["id"]})

    app = web.Application()
    app.router.add_get("/mr/api/v1/docs/{id}", describe)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    yield f"https://127.0.0.1:{port}", cert_path, seen
    await runner.cleanup()


async def test_self_signed_certificate_is_refused_and_not_retried(
    tls_server: tuple[str, Path, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    url, _, seen = tls_server
    caplog.set_level(logging.INFO, logger="health_async")
    retry = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0)
    async with ha.HealthClient(base_url=url, token="secret-token", user_id="u", retry=retry) as c:
        with pytest.raises(ha.TLSVerificationError, match="TLS certificate verification failed") as info:
            await c.documents.describe("doc-1")
        with pytest.raises(ha.TransportError):  # it is a TransportError too
            await c.abha.aadhaar_init("234567890124")
    assert info.value.sent is False and info.value.__cause__ is not None
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]  # a bad certificate does not heal
    assert "secret-token" not in str(info.value)
    assert seen == []  # the request never reached the handler


async def test_a_certificate_the_caller_trusts_works(tls_server: tuple[str, Path, list[str]]) -> None:
    url, cert_path, seen = tls_server
    trusted = ssl.create_default_context(cafile=str(cert_path))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trusted)) as session:
        async with ha.HealthClient(base_url=url, token="t", user_id="u", session=session) as client:
            doc = await client.documents.describe("doc-1")
    assert doc.document_id == "doc-1" and seen == ["doc-1"]
