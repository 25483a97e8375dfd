"""Against the fake server: faults survived, non-idempotent calls never duplicated, nothing left, nothing leaked."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

import health_async as ha
from health_async._wire import structure
from health_async.models import DescribeResult
from health_async.testing import FakeHealthServer, Fault

NO_WAIT = ha.RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0.05, deadline=20)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=200) as srv:
        yield srv


def client_for(server: FakeHealthServer, **kwargs: Any) -> ha.HealthClient:
    options: dict[str, Any] = {
        "token": server.token,
        "client_id": server.client_id,
        "user_id": server.data.user_ids[0],
        "encryption_key": server.encryption_key,
        "key_id": server.key_id,
        "retry": NO_WAIT,
    }
    options.update(kwargs)
    return ha.HealthClient(base_url=server.url, **options)


def library_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if "health_async" in repr(t.get_coro())]


@pytest.mark.parametrize(("count", "debug"), [(2000, False), (300, True)], ids=["2000-ids", "300-ids-debug-loop"])
async def test_describe_many_survives_every_fault_in_bounded_time(
    server: FakeHealthServer, count: int, debug: bool
) -> None:
    """5XX at 20%, a 429 with Retry-After, resets, cut bodies, invalid JSON with 200, an HTML 502, slow answers.

    Once with many ids, once with asyncio's debug mode (four times slower) to catch never-awaited coroutines and
    unclosed resources; pytest turns every warning into an error.
    """
    asyncio.get_running_loop().set_debug(debug)
    server.inject("describe", Fault(status=429, retry_after=0.05, times=1))
    server.inject("describe", Fault(status=503, rate=0.2))
    server.inject("describe", Fault(drop=True, rate=0.02))
    server.inject("describe", Fault(truncate=True, rate=0.02))
    server.inject("describe", Fault(status=200, body=b"<html>not json</html>", rate=0.01))
    server.inject("describe", Fault(status=502, body="<html>Bad gateway</html>", content_type="text/html", rate=0.01))
    server.inject("describe", Fault(latency=0.05, rate=0.02))  # slow, within the timeout
    server.inject("describe", Fault(latency=1.5, times=2))  # slower than the client's timeout: retried
    doc_ids = server.data.document_ids(server.data.user_ids[0])
    ids = list(itertools.islice(itertools.cycle(doc_ids), count))
    results: list[DescribeResult] = []
    # The timeout leaves room for a loaded machine (asyncio debug mode alone is four times slower).
    async with client_for(server, timeout=1.0) as client:

        async def run() -> None:
            async for r in client.documents.describe_many(ids, concurrency=32):
                results.append(r)

        await asyncio.wait_for(run(), timeout=60)  # nothing hangs
    assert len(results) == len(ids)
    assert sorted(r.document_id for r in results) == sorted(ids)
    for r in results:
        assert (r.document is None) != (r.error is None)
        if r.error is not None:
            assert isinstance(r.error, ha.HealthError)
    failures = {type(r.error) for r in results if r.error is not None}
    assert failures <= {ha.ServerError, ha.ResponseValidationError, ha.TransportError, ha.RequestTimeout}
    assert sum(r.ok for r in results) > 0.9 * count  # retries absorbed almost everything
    assert server.calls("describe") > len(ids)  # ...and there were retries to absorb
    assert library_tasks() == []
    gc.collect()  # an unclosed session, connector or response would warn here (warnings are errors)


@pytest.mark.parametrize(
    "fault",
    [
        Fault(
            status=500, times=1, body={"code": 500, "error": "Too many requests", "source_error": {"code": "ABDM-1022"}}
        ),
        Fault(status=503, times=1, retry_after=0.01),
        Fault(status=502, times=1),
        Fault(drop=True, times=1),
        Fault(latency=0.5, times=1),
    ],
    ids=["500-abdm", "503-retry-after", "502", "reset", "timeout"],
)
async def test_aadhaar_init_reaches_the_server_exactly_once(server: FakeHealthServer, fault: Fault) -> None:
    server.inject("aadhaar_init", fault)
    async with client_for(server, timeout=0.2) as client:
        with pytest.raises(ha.HealthError):
            await client.abha.aadhaar_init(server.data.valid_aadhaar[0])
    assert server.calls("aadhaar_init") == 1


async def test_an_otp_step_is_never_retried_even_when_the_caller_opts_in(server: FakeHealthServer) -> None:
    """retry_non_idempotent is for uploads: no switch makes an OTP send repeated once it may have reached ABDM."""
    server.inject("aadhaar_init", Fault(status=503, times=1))
    opt_in = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_non_idempotent=True)
    async with client_for(server) as client:
        with pytest.raises(ha.OutcomeUnknown, match="HTTP 503"):
            await client.abha.aadhaar_init(server.data.valid_aadhaar[0], retry=opt_in)
    assert server.calls("aadhaar_init") == 1


def _abha_body(code: str) -> dict[str, object]:
    return {"code": 500, "error": "Something went wrong", "source_error": {"code": code, "message": "x"}}


@pytest.mark.parametrize(
    ("status", "body", "unknown"),
    [
        (502, None, True),  # a gateway, no body
        (504, {"message": "upstream timed out"}, True),  # a gateway's own body
        (503, _abha_body("ABDM-9999"), True),  # the service's "unknown exception"
        (500, _abha_body("ABDM-1007"), True),  # the service's own timeout
        (500, _abha_body("ABDM-1022"), False),  # a rate limit: definite, even at HTTP 500
        (503, _abha_body("ABDM-1027"), False),  # a block: definite at any 5XX
        (400, {"message": "bad"}, False),  # a 4XX is a refusal
    ],
)
async def test_unknown_outcomes_are_the_same_for_every_call_sent_once(
    server: FakeHealthServer, status: int, body: object, unknown: bool
) -> None:
    """An OTP send and a patient creation alike: a 502/503/504, or a code that does not settle it, is unknown."""
    async with client_for(server) as client:
        for operation, call in (
            ("aadhaar_init", lambda: client.abha.aadhaar_init(server.data.valid_aadhaar[0])),
            ("mobile_init", lambda: client.abha.mobile_init("9876543210")),
        ):
            server.inject(operation, Fault(status=status, body=body, times=1))
            with pytest.raises(ha.HealthError) as info:
                await call()
            assert isinstance(info.value, ha.OutcomeUnknown) is unknown, (operation, type(info.value))
            assert server.calls(operation) == 1


async def test_upload_is_not_duplicated(server: FakeHealthServer) -> None:
    async with client_for(server) as client:
        server.inject("upload", Fault(status=502, times=1))
        with pytest.raises(ha.ServerError):
            await client.documents.upload(b"%PDF report")
        server.inject("upload", Fault(status=500, times=1))
        with pytest.raises(ha.ServerError):
            await client.documents.upload(b"%PDF report", encrypt=True)
    assert server.calls("upload") == 2


async def test_refused_connection_is_retried_even_for_aadhaar_init() -> None:
    """A connection that never opened cannot have sent an OTP: that one failure is safe to retry."""
    server = FakeHealthServer(users=1, documents_per_user=1)
    await server.start()
    url = server.url
    await server.close()  # nothing listens there now
    async with ha.HealthClient(base_url=url, token="t", retry=NO_WAIT) as client:
        with pytest.raises(ha.TransportError) as info:
            await client.abha.aadhaar_init(server.data.valid_aadhaar[0])
    assert info.value.sent is False


async def test_expired_token_is_refreshed_once_for_many_callers(server: FakeHealthServer) -> None:
    creds = ha.ClientCredentials(server.client_id, server.client_secret)
    user = server.data.user_ids[0]
    async with ha.HealthClient(base_url=server.url, auth=creds, user_id=user, retry=NO_WAIT) as client:
        ids = server.data.document_ids(user)[:50]
        assert all([r.ok async for r in client.documents.describe_many(ids)])
        assert server.calls("login") == 1
        server.expire_tokens()
        assert all([r.ok async for r in client.documents.describe_many(ids, concurrency=16)])
    assert server.calls("login") == 1 and server.calls("refresh") == 1


# ----------------------------------------------------------------------------------------------- secrets


async def test_no_secret_or_personal_data_in_logs_errors_or_reprs(
    server: FakeHealthServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    user = server.data.user_ids[0]
    profile = structure(orjson.loads(server.data.profiles[user]), ha.Profile)
    assert profile.mobile and profile.email and profile.first_name and profile.full_name
    valid = server.data.valid_aadhaar[0]
    failing = next(iter(server.data.failing_aadhaar))
    secrets = [server.token, server.client_secret, server.encryption_key, valid, failing, valid[-8:]]
    personal = [profile.mobile, profile.mobile[3:], profile.email, profile.first_name, profile.full_name]
    ids = [user, *server.data.document_ids(user)[:3]]
    texts: list[str] = []
    creds = ha.ClientCredentials(server.client_id, server.client_secret)
    server.inject("describe", Fault(status=503, times=2))
    async with client_for(server, auth=creds, token=None) as client:
        texts.append(repr(client))
        calls: list[Any] = [
            lambda: client.documents.describe(ids[1]),
            lambda: client.documents.describe("missing-doc"),
            lambda: client.profiles.get(user),
            lambda: client.profiles.get("000"),
            lambda: client.documents.upload(b"%PDF private health data", encrypt=True),
            lambda: client.documents.upload(b"%PDF private health data"),
            lambda: client.abha.aadhaar_init(valid),
            lambda: client.abha.aadhaar_init(valid, encrypt=True),
            lambda: client.abha.aadhaar_init(failing),
            lambda: client.abha.aadhaar_init(valid[:-1] + str((int(valid[-1]) + 1) % 10)),
        ]
        for call in calls:
            try:
                result = await call()
                texts.append(repr(result))
            except ha.HealthError as exc:
                texts += [str(exc), repr(exc)]
        async for r in client.documents.describe_many([*ids[1:], "missing"]):
            texts.append(repr(r.error))
        async for item in client.documents.list():
            texts.append(repr(item))
    logged = [record.getMessage() for record in caplog.records]
    assert logged, "requests are logged at DEBUG"
    assert any("/mr/api/v1/docs/{id}" in line for line in logged)
    assert any("retrying" in line for line in logged)
    for text in texts:
        for secret in secrets + personal:
            assert secret not in text, f"leaked into {text[:80]!r}"
    for line in logged:
        for secret in secrets + personal + ids:
            assert secret not in line, f"leaked into log line {line!r}"
