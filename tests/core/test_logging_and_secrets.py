"""Logging: what is recorded, and that no secret or personal data ever is (nor in reprs and errors)."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest
from aioresponses import aioresponses

import health_async as ha
from health_async._aadhaar import verhoeff_digit
from health_async._logging import logger, setup_from_env

from ..conftest import BASE

TOKEN = "tok-SECRET-4242"
SECRET = "client-SECRET-9191"
AADHAAR = "98765432101" + verhoeff_digit("98765432101")
MOBILE = "+919812345678"
DOC_ID = "doc-PRIVATE-77"
OID = "oid-PRIVATE-55"
PROFILE = {"oid": OID, "fn": "Asha", "ln": "Rao", "mobile": MOBILE, "email": "asha@example.com", "dob": "1990-01-02"}
INIT_URL = f"{BASE}/abdm/na/v1/registration/aadhaar/init"
DOC_URL = f"{BASE}/mr/api/v1/docs/{DOC_ID}"
PROFILE_URL = f"{BASE}/profiles/v1/emr-user/{OID}"
UPLOAD_URL = f"{BASE}/mr/api/v2/docs?task=smart"
#: never anywhere: not in logs, errors, or any repr
PERSONAL = (TOKEN, SECRET, AADHAAR, AADHAAR[-8:], MOBILE, "9812345678", "Asha", "asha@example.com", "1990-01-02")
#: identifiers: fine in a result's repr (it is the caller's own object), never in logs or error messages
IDS = (DOC_ID, OID)


def assert_clean(text: str, forbidden: tuple[str, ...] = PERSONAL + IDS) -> None:
    for secret in forbidden:
        assert secret not in text, f"{secret!r} leaked"


async def exercise(mocked: aioresponses, fail: bool) -> list[BaseException]:
    status = 500 if fail else 200
    abha_error = {"code": 500, "error": "Too many requests", "source_error": {"code": "ABDM-1022", "message": MOBILE}}
    mocked.get(DOC_URL, status=404 if fail else 200, payload={"document_id": DOC_ID, "document_type": "lr"})
    mocked.get(PROFILE_URL, status=404 if fail else 200, payload=PROFILE if not fail else {"code": "profile_not_found"})
    mocked.post(
        INIT_URL,
        status=status,
        payload=abha_error if fail else {"hint": "OTP sent to mobile ending ******5678", "txn_id": "t"},
    )
    mocked.post(
        UPLOAD_URL, status=403 if fail else 200, payload={"message": "Forbidden"} if fail else {"document_id": DOC_ID}
    )
    errors: list[BaseException] = []
    async with ha.HealthClient(
        base_url=BASE, token=TOKEN, client_id="cid", user_id=OID, retry=ha.RetryPolicy.never()
    ) as client:
        for call in (
            lambda: client.documents.describe(DOC_ID),
            lambda: client.profiles.get(OID),
            lambda: client.abha.aadhaar_init(AADHAAR),
            lambda: client.documents.upload(b"%PDF secret health data", filename="r.pdf"),
        ):
            try:
                result: Any = await call()
                assert_clean(repr(result), PERSONAL)
            except ha.HealthError as exc:
                errors.append(exc)
    return errors


@pytest.mark.parametrize("fail", [False, True])
async def test_no_secret_in_any_log_record_error_or_repr(
    mocked: aioresponses, caplog: pytest.LogCaptureFixture, fail: bool
) -> None:
    caplog.set_level(logging.DEBUG)
    errors = await exercise(mocked, fail)
    assert len(errors) == (4 if fail else 0)
    assert caplog.records, "requests are logged at DEBUG"
    for record in caplog.records:
        assert_clean(record.getMessage())
    for error in errors:
        assert_clean(str(error))
        assert_clean(repr(error))


async def test_request_records_carry_the_path_template_status_and_attempt(
    mocked: aioresponses, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    mocked.get(DOC_URL, status=503)
    mocked.get(DOC_URL, payload={"document_id": DOC_ID})
    policy = ha.RetryPolicy(attempts=2, base_delay=0, jitter=0)
    async with ha.HealthClient(base_url=BASE, token=TOKEN, user_id=OID, retry=policy) as client:
        await client.documents.describe(DOC_ID)
    messages = [r.getMessage() for r in caplog.records if r.name == "health_async"]
    assert any("GET /mr/api/v1/docs/{id} -> 503" in m and "attempt 1" in m for m in messages)
    assert any("GET /mr/api/v1/docs/{id} -> 200" in m and "attempt 2" in m for m in messages)
    retries = [r for r in caplog.records if r.levelno == logging.INFO and "retrying" in r.getMessage()]
    assert len(retries) == 1 and "HTTP 503" in retries[0].getMessage()


def test_health_async_log_env_enables_the_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    handlers, level = list(logger.handlers), logger.level
    try:
        monkeypatch.setenv("HEALTH_ASYNC_LOG", "debug")
        setup_from_env()
        setup_from_env()  # idempotent: one handler
        assert logger.level == logging.DEBUG
        assert len([h for h in logger.handlers if h not in handlers]) == 1
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)


def test_credentials_and_keys_stay_out_of_reprs() -> None:
    creds = ha.ClientCredentials("cid", SECRET)
    client = ha.HealthClient(base_url=BASE, auth=creds)
    assert_clean(repr(creds))
    assert_clean(repr(client))
    assert_clean(repr(client._session.auth))


async def test_transport_errors_do_not_echo_the_token(mocked: aioresponses) -> None:
    mocked.get(DOC_URL, exception=aiohttp.ClientOSError(104, "reset"))
    async with ha.HealthClient(base_url=BASE, token=TOKEN, user_id=OID, retry=ha.RetryPolicy.never()) as client:
        with pytest.raises(ha.TransportError) as info:
            await client.documents.describe(DOC_ID)
    assert_clean(str(info.value))
