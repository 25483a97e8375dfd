"""RetryPolicy: what is retried and how long the waits are (pure, no I/O)."""

from __future__ import annotations

import pytest

from health_async import RetryPolicy
from health_async import errors as E


def api(status: int, headers: dict[str, str] | None = None) -> E.ApiError:
    return E.error_from_response(status, headers or {}, "", operation="describe")


@pytest.mark.parametrize(
    ("exc", "idempotent", "expected"),
    [
        (api(500), True, True),
        (api(502), True, True),
        (api(503), True, True),
        (api(504), True, True),
        (api(429), True, True),
        (api(408), True, True),
        (api(400), True, False),
        (api(401), True, False),
        (api(404), True, False),
        (E.TransportError("reset", sent=True), True, True),
        (E.RequestTimeout("slow"), True, True),
        # not idempotent: only what certainly never reached the server
        (api(500), False, False),
        (api(503), False, False),
        (api(429), False, False),
        (E.TransportError("reset", sent=True), False, False),
        (E.RequestTimeout("slow"), False, False),
        (E.TransportError("refused", sent=False), False, True),
        (E.RequestTimeout("connect", sent=False), False, True),
        (E.ResponseValidationError("bad"), True, False),
        (ValueError("x"), True, False),
    ],
)
def test_should_retry(exc: BaseException, idempotent: bool, expected: bool) -> None:
    assert RetryPolicy().should_retry(exc, idempotent=idempotent) is expected


def test_non_idempotent_opt_in_retries_server_errors() -> None:
    policy = RetryPolicy(retry_non_idempotent=True)
    assert policy.should_retry(api(500), idempotent=False)
    assert policy.should_retry(E.TransportError("reset"), idempotent=False)
    assert not policy.should_retry(api(400), idempotent=False)


def test_exponential_backoff_with_jitter_bounds() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0, jitter=0.25)
    assert policy.delay(1, api(500), rand=lambda: 0.0) == 0.5
    assert policy.delay(2, api(500), rand=lambda: 0.0) == 1.0
    assert policy.delay(3, api(500), rand=lambda: 0.0) == 2.0
    assert policy.delay(10, api(500), rand=lambda: 0.0) == 4.0  # capped
    assert policy.delay(2, api(500), rand=lambda: 1.0) == 0.75  # jitter removes up to 25 %


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(retry_after_cap=10.0)
    assert policy.delay(1, api(429, {"Retry-After": "3"})) == 3.0
    assert policy.delay(1, api(503, {"Retry-After": "3600"})) == 10.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0},
        {"base_delay": -1},
        {"max_delay": -1},
        {"deadline": 0},
        {"jitter": 1.5},
        {"retry_after_cap": -1},
    ],
)
def test_invalid_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_never_makes_one_attempt_and_policy_is_frozen() -> None:
    assert RetryPolicy.never().attempts == 1
    with pytest.raises(AttributeError):
        RetryPolicy().attempts = 3  # type: ignore[misc]


def test_tls_verification_failures_are_never_retried() -> None:
    policy = RetryPolicy(retry_non_idempotent=True)
    error = E.TLSVerificationError("bad certificate", sent=False)
    assert isinstance(error, E.TransportError)
    assert not policy.should_retry(error, idempotent=True)
    assert policy.should_retry(E.TransportError("refused", sent=False), idempotent=False)
