"""HealthClient end to end over a mocked transport: headers, bodies, errors, retries, auth, lifecycle."""

from __future__ import annotations

import asyncio
import re
import traceback
from typing import Any

import aiohttp
import pytest
from aioresponses import CallbackResult, aioresponses
from yarl import URL

import health_async as ha
from health_async._aadhaar import verhoeff_digit

from ..conftest import BASE, FAST_RETRY

DOC_URL = f"{BASE}/mr/api/v1/docs/doc-1"
INIT_URL = f"{BASE}/abdm/na/v1/registration/aadhaar/init"
PROFILE_URL = f"{BASE}/profiles/v1/emr-user/oid-1"
DOC_BODY = {
    "document_id": "doc-1",
    "document_type": "lr",
    "tags": ["a"],
    "document_date_epoch": 1700000000,
    "files": [{"asset_url": "https://files.example/x.pdf", "file_type": "PDF"}],
}
AADHAAR = "23456789012" + verhoeff_digit("23456789012")


def client(**kwargs: Any) -> ha.HealthClient:
    kwargs.setdefault("token", "tok-123")
    kwargs.setdefault("client_id", "cid")
    kwargs.setdefault("user_id", "oid-1")
    kwargs.setdefault("retry", FAST_RETRY)
    return ha.HealthClient(base_url=BASE, **kwargs)


def sent(m: aioresponses, method: str, url: str) -> list[Any]:
    return m.requests.get((method, URL(url)), [])


def sent_headers(m: aioresponses, method: str, url: str, index: int = 0) -> dict[str, str]:
    return dict(sent(m, method, url)[index].kwargs["headers"])


# ------------------------------------------------------------------------ headers and bodies


async def test_describe_sends_token_client_id_and_user_header(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, payload=DOC_BODY)
    async with client() as c:
        doc = await c.documents.describe("doc-1")
    assert isinstance(doc, ha.Document)
    assert doc.document_type == "lr"
    headers = sent_headers(mocked, "GET", DOC_URL)
    assert headers["Authorization"] == "Bearer tok-123"
    assert headers["client-id"] == "cid"
    assert headers["X-Pt-Id"] == "oid-1"
    assert headers["User-Agent"].startswith("health_async/")


async def test_per_call_user_id_overrides_the_default(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, payload=DOC_BODY)
    async with client() as c:
        await c.documents.describe("doc-1", user_id="other-oid")
    assert sent_headers(mocked, "GET", DOC_URL)["X-Pt-Id"] == "other-oid"


async def test_describe_without_any_user_id_is_refused_before_sending(mocked: aioresponses) -> None:
    async with client(user_id=None) as c:
        with pytest.raises(ValueError, match="user id"):
            await c.documents.describe("doc-1")
    assert not mocked.requests


async def test_unsafe_ids_are_refused_before_sending(mocked: aioresponses) -> None:
    async with client() as c:
        for bad in ("../profiles", "a/b", "a?x=1", "a#b", "a b", "", "x\r\ny", ".."):
            with pytest.raises(ValueError, match="document_id"):
                await c.documents.describe(bad)
            with pytest.raises(ValueError, match="oid"):
                await c.profiles.get(bad)
    assert not mocked.requests


async def test_aadhaar_init_body_and_optional_partner_headers(mocked: aioresponses) -> None:
    mocked.post(INIT_URL, payload={"hint": "OTP sent to ******1234", "txn_id": "txn-1"})
    mocked.post(INIT_URL, payload={"hint": None, "txn_id": "txn-2"})
    async with client(partner_user_id="p-1") as c:
        first = await c.abha.aadhaar_init(f"{AADHAAR[:4]} {AADHAAR[4:8]}-{AADHAAR[8:]}")
        second = await c.abha.aadhaar_init(AADHAAR, user_id=None, partner_hip_id="hip-9")
    assert (first.txn_id, second.txn_id) == ("txn-1", "txn-2")
    calls = sent(mocked, "POST", INIT_URL)
    assert calls[0].kwargs["data"] == b'{"aadhaar_number":"%s"}' % AADHAAR.encode()
    h0, h1 = dict(calls[0].kwargs["headers"]), dict(calls[1].kwargs["headers"])
    assert h0["Content-Type"] == "application/json"
    assert (h0["X-Pt-Id"], h0["X-Partner-Pt-Id"]) == ("oid-1", "p-1") and "X-Hip-Id" not in h0
    assert "X-Pt-Id" not in h1 and h1["X-Hip-Id"] == "hip-9" and h1["X-Partner-Pt-Id"] == "p-1"


async def test_invalid_aadhaar_is_refused_before_sending(mocked: aioresponses) -> None:
    async with client() as c:
        for bad in ("123456789012", "2345 6789 0120" if AADHAAR[-1] != "0" else "2345 6789 0121", "abcd", ""):
            with pytest.raises(ha.InvalidAadhaarNumber) as info:
                await c.abha.aadhaar_init(bad)
            assert bad.replace(" ", "") not in str(info.value) or not bad
    assert not mocked.requests


async def test_profile_needs_client_id_and_maps_not_found(mocked: aioresponses) -> None:
    mocked.get(PROFILE_URL, status=404, payload={"message": "Profile not found", "code": "profile_not_found"})
    async with client() as c:
        with pytest.raises(ha.ProfileNotFound) as info:
            await c.profiles.get("oid-1")
    assert info.value.status == 404 and info.value.body["code"] == "profile_not_found"
    async with client(client_id=None) as c:
        with pytest.raises(ValueError, match="client-id"):
            await c.profiles.get("oid-1")


# ------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (404, "No such document.", ha.DocumentNotFound),
        (403, {"message": "Forbidden"}, ha.AuthenticationError),
        (400, "bad", ha.ApiError),
    ],
)
async def test_error_statuses_become_typed_errors(
    mocked: aioresponses, status: int, body: Any, error: type[ha.ApiError]
) -> None:
    if isinstance(body, str):
        mocked.get(DOC_URL, status=status, body=body)
    else:
        mocked.get(DOC_URL, status=status, payload=body)
    async with client() as c:
        with pytest.raises(error) as info:
            await c.documents.describe("doc-1")
    assert info.value.status == status and info.value.body == body


async def test_invalid_json_on_success_is_a_validation_error(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, status=200, body="<html>oops</html>")
    async with client() as c:
        with pytest.raises(ha.ResponseValidationError):
            await c.documents.describe("doc-1")


async def test_transport_failures_never_leak_aiohttp_types(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, exception=aiohttp.ServerDisconnectedError(), repeat=True)
    async with client() as c:
        with pytest.raises(ha.TransportError) as info:
            await c.documents.describe("doc-1")
    assert not isinstance(info.value, aiohttp.ClientError)
    assert isinstance(info.value.__cause__, aiohttp.ServerDisconnectedError)
    assert len(sent(mocked, "GET", DOC_URL)) == FAST_RETRY.attempts


async def test_timeouts_are_request_timeouts(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, exception=TimeoutError(), repeat=True)
    async with client(retry=ha.RetryPolicy.never()) as c:
        with pytest.raises(ha.RequestTimeout):
            await c.documents.describe("doc-1")


async def test_a_transport_error_naming_the_url_is_not_kept_as_the_cause(mocked: aioresponses) -> None:
    # aiohttp's ConnectionTimeoutError names the whole URL: its path and query (ids, a mobile number in a search,
    # a presigned signature) must not reach tracebacks and logs through __cause__
    url = f"{BASE}/mr/api/v1/docs/doc-SECRET-ID"
    mocked.get(url, exception=aiohttp.ConnectionTimeoutError(f"Connection timeout to host {url}"), repeat=True)
    async with client(retry=ha.RetryPolicy.never()) as c:
        with pytest.raises(ha.RequestTimeout) as info:
            await c.documents.describe("doc-SECRET-ID")
    shown = "".join(traceback.format_exception(info.value))
    assert "Connection timeout to host" not in shown and url not in shown
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "timed out connecting" in str(info.value)


# ------------------------------------------------------------------------ retries


async def test_reads_retry_5xx_then_succeed(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, status=503)
    mocked.get(DOC_URL, status=500)
    mocked.get(DOC_URL, payload=DOC_BODY)
    async with client() as c:
        doc = await c.documents.describe("doc-1")
    assert doc.document_id == "doc-1"
    assert len(sent(mocked, "GET", DOC_URL)) == 3


async def test_reads_give_up_after_the_attempts(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, status=502, repeat=True)
    async with client(retry=ha.RetryPolicy(attempts=3, base_delay=0, jitter=0)) as c:
        with pytest.raises(ha.ServerError):
            await c.documents.describe("doc-1")
    assert len(sent(mocked, "GET", DOC_URL)) == 3


async def test_client_errors_are_not_retried(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, status=404, body="No such document.", repeat=True)
    async with client() as c:
        with pytest.raises(ha.DocumentNotFound):
            await c.documents.describe("doc-1")
    assert len(sent(mocked, "GET", DOC_URL)) == 1


@pytest.mark.parametrize("status", [500, 503])
async def test_aadhaar_init_is_never_retried_on_a_server_error(mocked: aioresponses, status: int) -> None:
    body = {"code": status, "error": "Too many requests", "source_error": {"code": "ABDM-1022", "message": ""}}
    mocked.post(INIT_URL, status=status, payload=body, repeat=True)
    async with client() as c:
        with pytest.raises(ha.AbhaError) as info:
            await c.abha.aadhaar_init(AADHAAR)
    assert info.value.is_rate_limited
    assert len(sent(mocked, "POST", INIT_URL)) == 1


async def test_aadhaar_init_is_not_retried_after_a_reset(mocked: aioresponses) -> None:
    mocked.post(INIT_URL, exception=aiohttp.ServerDisconnectedError(), repeat=True)
    async with client() as c:
        with pytest.raises(ha.OutcomeUnknown) as info:  # the OTP may have gone out: the caller must ask
            await c.abha.aadhaar_init(AADHAAR)
    assert isinstance(info.value.__cause__, ha.TransportError)
    assert len(sent(mocked, "POST", INIT_URL)) == 1


async def test_aadhaar_init_is_retried_when_the_connection_never_opened(mocked: aioresponses) -> None:
    refused = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("h", 443, True, True, None, None, None), ConnectionRefusedError()
    )
    mocked.post(INIT_URL, exception=refused)
    mocked.post(INIT_URL, payload={"hint": "sent", "txn_id": "t"})
    async with client() as c:
        result = await c.abha.aadhaar_init(AADHAAR)
    assert result.txn_id == "t"
    assert len(sent(mocked, "POST", INIT_URL)) == 2


async def test_non_idempotent_retries_are_opt_in_for_uploads_only(mocked: aioresponses) -> None:
    upload = re.compile(rf"^{re.escape(BASE)}/mr/api/v2/docs\\?")
    mocked.post(upload, status=503)
    mocked.post(upload, payload={"document_id": "d-1"})
    policy = ha.RetryPolicy(attempts=3, base_delay=0, jitter=0, retry_non_idempotent=True)
    async with client() as c:
        result = await c.documents.upload(b"%PDF-1.4 report", retry=policy)
        assert result.document_id == "d-1"
        # an OTP send is never repeated once it may have reached the service, whatever the policy says
        mocked.post(INIT_URL, status=503)
        mocked.post(INIT_URL, payload={"hint": "sent", "txn_id": "t"})
        with pytest.raises(ha.OutcomeUnknown):
            await c.abha.aadhaar_init(AADHAAR, retry=policy)
    assert len(sent(mocked, "POST", INIT_URL)) == 1


async def test_retry_after_is_waited_and_pauses_the_whole_client(mocked: aioresponses) -> None:
    sent_at: list[float] = []

    def record(url: URL, **kwargs: Any) -> None:
        sent_at.append(asyncio.get_running_loop().time())

    mocked.get(DOC_URL, status=429, headers={"Retry-After": "1"}, callback=record)
    mocked.get(DOC_URL, payload=DOC_BODY, callback=record)
    async with client(retry=ha.RetryPolicy(attempts=2, base_delay=0, jitter=0)) as c:
        await c.documents.describe("doc-1")
        assert c._session.limits.paused_for() == 0  # the pause is over once the retry went through
    assert sent_at[1] - sent_at[0] >= 1.0  # a lower bound only: waiting never ends early


async def test_a_429_pauses_other_calls_of_the_same_client(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, status=429, headers={"Retry-After": "30"})
    async with client(retry=ha.RetryPolicy.never()) as c:
        with pytest.raises(ha.RateLimitError) as info:
            await c.documents.describe("doc-1")
        assert info.value.retry_after == 30.0
        assert 25 < c._session.limits.paused_for() <= 30


async def test_deadline_stops_retrying_before_a_wait_that_would_pass_it(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, status=503, headers={"Retry-After": "30"}, repeat=True)
    policy = ha.RetryPolicy(attempts=5, deadline=1.0)
    async with client(retry=policy) as c:
        with pytest.raises(ha.ServerError) as info:
            await c.documents.describe("doc-1")
    assert info.value.retry_after == 30.0
    assert len(sent(mocked, "GET", DOC_URL)) == 1


# ------------------------------------------------------------------------ auth


async def test_token_provider_is_called_once_and_again_after_401(mocked: aioresponses) -> None:
    tokens = iter(["old", "new"])
    calls = 0

    async def provider() -> str:
        nonlocal calls
        calls += 1
        return next(tokens)

    mocked.get(DOC_URL, payload=DOC_BODY)
    mocked.get(DOC_URL, status=401)
    mocked.get(DOC_URL, payload=DOC_BODY)
    async with ha.HealthClient(base_url=BASE, token_provider=provider, user_id="u", retry=FAST_RETRY) as c:
        await c.documents.describe("doc-1")
        await c.documents.describe("doc-1")
    assert calls == 2
    auths = [dict(r.kwargs["headers"])["Authorization"] for r in sent(mocked, "GET", DOC_URL)]
    assert auths == ["Bearer old", "Bearer old", "Bearer new"]


async def test_concurrent_401s_share_one_refresh(mocked: aioresponses) -> None:
    calls = 0

    async def provider() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return f"t{calls}"

    def respond(url: URL, headers: dict[str, str], **kwargs: Any) -> CallbackResult:
        if headers["Authorization"] == "Bearer t1":
            return CallbackResult(status=401)
        return CallbackResult(payload=DOC_BODY)

    mocked.get(DOC_URL, callback=respond, repeat=True)
    async with ha.HealthClient(base_url=BASE, token_provider=provider, user_id="u", retry=FAST_RETRY) as c:
        docs = await asyncio.gather(*(c.documents.describe("doc-1") for _ in range(20)))
    assert len(docs) == 20
    assert calls == 2  # first token, then exactly one refresh for all 20 callers


async def test_static_token_401_is_final(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, status=401, repeat=True)
    async with client() as c:
        with pytest.raises(ha.AuthenticationError):
            await c.documents.describe("doc-1")
    assert len(sent(mocked, "GET", DOC_URL)) == 1


async def test_second_401_after_refresh_is_raised(mocked: aioresponses) -> None:
    async def provider() -> str:
        return "t"

    mocked.get(DOC_URL, status=401, repeat=True)
    async with ha.HealthClient(base_url=BASE, token_provider=provider, user_id="u", retry=FAST_RETRY) as c:
        with pytest.raises(ha.AuthenticationError):
            await c.documents.describe("doc-1")
    assert len(sent(mocked, "GET", DOC_URL)) == 2


async def test_client_credentials_login_refresh_and_relogin(mocked: aioresponses) -> None:
    login = f"{BASE}/connect-auth/v1/account/login"
    refresh = f"{BASE}/connect-auth/v1/account/refresh-token"
    mocked.post(login, payload={"access_token": "a1", "expires_in": 1800, "refresh_token": "r1"})
    mocked.post(refresh, payload={"access_token": "a2", "expires_in": 1800, "refresh_token": "r2"})
    mocked.get(DOC_URL, status=401)
    mocked.get(DOC_URL, payload=DOC_BODY)
    creds = ha.ClientCredentials("cid", "s3cret")
    async with ha.HealthClient(base_url=BASE, auth=creds, user_id="u", retry=FAST_RETRY) as c:
        await c.documents.describe("doc-1")
    login_call = sent(mocked, "POST", login)[0]
    assert login_call.kwargs["data"] == b'{"client_id":"cid","client_secret":"s3cret"}'
    refresh_call = sent(mocked, "POST", refresh)[0]
    assert refresh_call.kwargs["data"] == b'{"refresh_token":"r1"}'
    assert dict(refresh_call.kwargs["headers"])["Authorization"] == "Bearer a1"
    auths = [dict(r.kwargs["headers"])["Authorization"] for r in sent(mocked, "GET", DOC_URL)]
    assert auths == ["Bearer a1", "Bearer a2"]
    assert "s3cret" not in repr(creds)


async def test_bad_tokens_are_refused() -> None:
    with pytest.raises(ValueError, match="token"):
        ha.HealthClient(base_url=BASE, token="abc\r\nX-Evil: 1")
    with pytest.raises(ValueError, match="exactly one"):
        ha.HealthClient(base_url=BASE)
    with pytest.raises(ValueError, match="user_id"):
        ha.HealthClient(base_url=BASE, token="t", user_id="u\n")


# ------------------------------------------------------------------------ lifecycle and configuration


async def test_closed_client_raises_clearly() -> None:
    c = client()
    await c.aclose()
    await c.aclose()  # idempotent
    with pytest.raises(ha.ClientClosedError, match="closed"):
        await c.documents.describe("doc-1")
    assert c.closed and "closed" in repr(c)


async def test_caller_owned_session_is_never_closed(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, payload=DOC_BODY)
    async with aiohttp.ClientSession() as session:
        async with client(session=session) as c:
            await c.documents.describe("doc-1")
        assert not session.closed


async def test_owned_session_is_closed_with_the_client(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, payload=DOC_BODY)
    c = client()
    await c.documents.describe("doc-1")  # opened lazily, without async with
    http = c._session._http
    assert http is not None and not http.closed
    await c.aclose()
    assert http.closed


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("HEALTH_ASYNC_TOKEN", "t")
    monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", "cid")
    monkeypatch.setenv("HEALTH_ASYNC_USER_ID", "oid")
    c = ha.HealthClient.from_env(partner_hip_id="hip")
    assert (c.base_url, c.client_id, c.user_id, c.partner_hip_id) == ("http://127.0.0.1:9", "cid", "oid", "hip")
    monkeypatch.delenv("HEALTH_ASYNC_TOKEN")
    with pytest.raises(ValueError, match="HEALTH_ASYNC_TOKEN"):
        ha.HealthClient.from_env()


@pytest.mark.parametrize(
    ("value", "trusted"),
    [
        ("1", True),
        ("true", True),
        ("Yes", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("off", False),
        ("", False),
    ],
)
def test_from_env_reads_trust_env_strictly(monkeypatch: pytest.MonkeyPatch, value: str, trusted: bool) -> None:
    monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("HEALTH_ASYNC_TOKEN", "t")
    monkeypatch.setenv("HEALTH_ASYNC_TRUST_ENV", value)
    assert ha.HealthClient.from_env()._session.config.trust_env is trusted


@pytest.mark.parametrize("value", ["ture", "maybe", "2"])
def test_a_misspelt_trust_env_is_refused_not_read_as_no(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """A typo used to mean "no proxy" silently: requests then went straight out, past the proxy asked for."""
    monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("HEALTH_ASYNC_TOKEN", "t")
    monkeypatch.setenv("HEALTH_ASYNC_TRUST_ENV", value)
    with pytest.raises(ha.InvalidRequest, match="HEALTH_ASYNC_TRUST_ENV must be 1 or 0"):
        ha.HealthClient.from_env()


def test_repr_shows_no_secret() -> None:
    c = ha.HealthClient(base_url=BASE, token="super-secret-token", client_id="cid")
    assert "super-secret-token" not in repr(c)
    assert "super-secret-token" not in repr(c._session.config)


@pytest.mark.parametrize(
    "kwargs",
    [{"timeout": 0}, {"max_connections": 0}, {"rate_limit": 0}, {"max_upload_size": 0}, {"encrypt": True}],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ha.HealthClient(base_url=BASE, token="t", **kwargs)


async def test_a_base_url_with_a_path_prefix_is_kept(mocked: aioresponses) -> None:
    mocked.get(f"{BASE}/gateway/health/mr/api/v1/docs/doc-1", payload=DOC_BODY)
    async with ha.HealthClient(base_url=f"{BASE}/gateway/health/", token="t", user_id="oid-1") as c:
        doc = await c.documents.describe("doc-1")
    assert doc.document_id == "doc-1"


async def test_an_id_that_is_not_valid_unicode_is_refused_before_sending(mocked: aioresponses) -> None:
    async with client() as c:
        for call in (c.documents.describe("doc-\udcff"), c.patients.get("p-\ud800"), c.cases.delete("c\udcff")):
            with pytest.raises(ha.InvalidRequest, match="valid Unicode"):
                await call
    assert not mocked.requests
