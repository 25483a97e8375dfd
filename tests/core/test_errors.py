"""The pure status-to-error mapping, table-driven, and the error tree's promises."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from health_async import errors as E


@pytest.mark.parametrize(
    ("status", "operation", "body", "expected"),
    [
        (404, "describe", "No such document.", E.DocumentNotFound),
        (404, "profile", {"message": "Profile not found", "code": "profile_not_found"}, E.ProfileNotFound),
        (404, "profile", "", E.ProfileNotFound),
        (404, "list", "", E.NotFoundError),
        (401, "describe", "", E.AuthenticationError),
        (403, "upload", {"message": "Forbidden"}, E.AuthenticationError),
        (429, "describe", "", E.RateLimitError),
        (500, "describe", "", E.ServerError),
        (502, "describe", "<html>Bad gateway</html>", E.ServerError),
        (503, "profile", "", E.ServerError),
        (400, "upload", "Invalid form data.", E.ApiError),
        (409, "upload", "", E.ApiError),
        (
            500,
            "aadhaar_init",
            {
                "code": 500,
                "error": "Too many requests",
                "source_error": {"code": "ABDM-1022", "message": "x"},
            },
            E.AbhaRateLimited,  # an ABDM rate limit, answered with HTTP 500: its own type, never retried
        ),
        (
            400,
            "aadhaar_init",
            {"code": 400, "error": "Invalid", "source_error": {"code": "ABDM-1006", "message": "bad"}},
            E.AbhaError,
        ),
        (502, "aadhaar_init", "<html>gateway</html>", E.ServerError),
    ],
)
def test_error_from_response_maps_status_and_operation(
    status: int, operation: str, body: Any, expected: type[E.ApiError]
) -> None:
    error = E.error_from_response(status, {"X-Request-Id": "req-1"}, body, operation=operation)
    assert type(error) is expected
    assert error.status == status
    assert error.body == body
    assert error.request_id == "req-1"
    assert operation in str(error)
    assert str(status) in str(error)


def test_abha_error_fields_and_rate_limit_flag() -> None:
    body = {
        "code": 500,
        "error": "Too many requests",
        "source_error": {"code": "ABDM-1022", "message": "slow"},
    }
    error = E.error_from_response(500, {}, body, operation="aadhaar_init")
    assert isinstance(error, E.AbhaError)
    assert (error.code, error.error, error.source_code) == (500, "Too many requests", "ABDM-1022")
    assert error.is_rate_limited
    assert "ABDM-1022" in str(error)
    other = E.error_from_response(
        400,
        {},
        {"code": 400, "error": "x", "source_error": {"code": "ABDM-1006", "message": ""}},
        operation="aadhaar_init",
    )
    assert isinstance(other, E.AbhaError) and not other.is_rate_limited


def test_the_services_own_message_is_kept_bounded_clean_and_redacted() -> None:
    # "Something went wrong" alone told users nothing: ABDM's own words are kept beside it
    body = {
        "code": 500,
        "error": "Something went wrong",
        "source_error": {"code": "ABDM-1053", "message": "Data already exists"},
    }
    error = E.error_from_response(500, {}, body, operation="aadhaar_init")
    assert str(error) == "aadhaar_init: HTTP 500 ABDM-1053: Something went wrong (Data already exists)"
    # the same words twice are said once; a body without ``error`` text shows ABDM's
    same = {**body, "error": "Data already exists"}
    assert str(E.error_from_response(500, {}, same, operation="aadhaar_init")).count("Data already exists") == 1
    bare = {**body, "error": ""}
    assert str(E.error_from_response(500, {}, bare, operation="aadhaar_init")).endswith(": Data already exists")
    # the service's text is bounded, has no control character and no mobile number or address
    hostile = "Linked to 98123 45678\n\x1b[2Jfake log line\r" + "z" * 500
    error = E.error_from_response(500, {}, {**body, "source_error": {"code": "ABDM-1000", "message": hostile}},
                                  operation="aadhaar_init")  # fmt: skip
    text = str(error)
    assert "45678" not in text and "\n" not in text and "\x1b" not in text and "\r" not in text
    assert "fake log line" in text and len(text) < 250


def test_a_source_code_that_is_not_a_code_is_shown_redacted_and_cut() -> None:
    # the service's own text where a code belongs ends up in str(exc): what looks personal is redacted there
    body = {"code": 400, "error": "x", "source_error": {"code": "Mobile 98123 45678 of a@b.in " + "y" * 80}}
    error = E.error_from_response(400, {}, body, operation="aadhaar_init")
    assert isinstance(error, E.AbhaError)
    assert error.source_code is not None and error.source_code.startswith("Mobile [redacted] of [redacted]")
    assert len(error.source_code) == 40
    assert "45678" not in str(error) and "a@b.in" not in str(error) and "y" * 41 not in str(error)
    padded = E.error_from_response(
        400, {}, {**body, "source_error": {"code": " ABDM-1006: "}}, operation="aadhaar_init"
    )
    assert isinstance(padded, E.AbhaError) and padded.source_code == "ABDM-1006"


def test_body_is_never_part_of_the_message_or_repr() -> None:
    body = {"mobile": "+919876543210", "message": "secret detail"}
    error = E.error_from_response(400, {}, body, operation="profile")
    assert "9876543210" not in str(error) and "9876543210" not in repr(error)
    assert "secret detail" not in str(error)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", 7.0),
        (" 12 ", 12.0),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # a date in the past: no wait
        ("Wednesday, 21-Oct-15 07:28:10 GMT", 10.0),  # obsolete RFC 850 form
        ("Wed Oct 21 07:28:10 2015", 10.0),  # obsolete asctime form
        # strict: anything but digits or an HTTP date is treated as absent
        ("0.5", None),
        ("-3", None),
        ("+5", None),
        ("1e3", None),
        ("٣", None),  # a non-ASCII digit
        ("soon", None),
        ("", None),
        ("nan", None),
        ("inf", None),
        ("21 Oct 2015 07:28:10", None),  # a loose date
        ("Wed, 21 Oct 2015 07:28:10 +0000", None),
    ],
)
def test_parse_retry_after(header: str, expected: float | None) -> None:
    now = 1445412480.0  # 2015-10-21 07:28:00 GMT
    assert E.parse_retry_after(header, now=now) == expected


def test_retry_after_is_read_on_any_api_error_case_insensitively() -> None:
    assert E.error_from_response(429, {"retry-after": "3"}, "", operation="describe").retry_after == 3.0
    assert E.error_from_response(503, {"Retry-After": "2"}, "", operation="describe").retry_after == 2.0
    assert E.error_from_response(500, {}, "", operation="describe").retry_after is None


def test_tree_and_multiple_inheritance() -> None:
    assert issubclass(E.DocumentNotFound, E.NotFoundError) and issubclass(E.NotFoundError, E.ApiError)
    assert issubclass(E.ApiError, E.HealthError) and issubclass(E.TransportError, E.HealthError)
    assert issubclass(E.RequestTimeout, E.TransportError) and issubclass(E.RequestTimeout, asyncio.TimeoutError)
    assert issubclass(E.InvalidAadhaarNumber, ValueError) and issubclass(E.FileTooLarge, ValueError)
    assert issubclass(E.ClientClosedError, RuntimeError)
    for name in ("ResponseValidationError", "EncryptionError", "ResponseTooLarge"):
        assert issubclass(getattr(E, name), E.HealthError)


def test_transport_error_sent_flag_defaults_to_maybe_sent() -> None:
    assert E.TransportError("x").sent is True
    assert E.TransportError("x", sent=False).sent is False
