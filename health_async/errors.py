"""Every exception ``health_async`` raises, and the one function that maps a response to one.

The tree::

    HealthError                       base of everything this library raises
    ├── ApiError                      the service answered with an error status (status, body, headers)
    │   ├── NotFoundError             404
    │   │   ├── DocumentNotFound      404 from describe
    │   │   └── ProfileNotFound       404 / ``profile_not_found`` from the profile operation
    │   ├── AbhaError                 ABHA error body ``{code, error, source_error}`` (aadhaar init)
    │   ├── AuthenticationError       401, 403
    │   ├── RateLimitError            429 (``retry_after`` in seconds, or None)
    │   └── ServerError               5XX
    ├── TransportError                the request failed below HTTP (connection refused, reset, DNS, TLS)
    │   └── RequestTimeout            the request took longer than its timeout (also an asyncio.TimeoutError)
    ├── ResponseValidationError       a 2XX body that does not fit the expected model, or is not JSON
    ├── ResponseTooLarge              a response body over the configured cap
    ├── EncryptionError               JWE failure; deliberately without detail (no padding oracle)
    ├── ClientClosedError             a call on a closed client (also a RuntimeError)
    ├── FileTooLarge                  an upload over the size limit, refused before sending (also a ValueError)
    └── InvalidAadhaarNumber          a number breaking a rule, refused before sending (also a ValueError)

Messages never contain a token, a key, an Aadhaar or mobile number, or a response body: the body is kept on
:attr:`ApiError.body` for the caller to inspect, and is left out of ``str()`` and ``repr()``.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AbhaError",
    "ApiError",
    "AuthenticationError",
    "ClientClosedError",
    "DocumentNotFound",
    "EncryptionError",
    "FileTooLarge",
    "HealthError",
    "InvalidAadhaarNumber",
    "InvalidRequest",
    "NotFoundError",
    "ProfileNotFound",
    "RateLimitError",
    "RequestTimeout",
    "ResponseTooLarge",
    "ResponseValidationError",
    "ServerError",
    "TLSVerificationError",
    "TransportError",
    "error_from_response",
    "parse_retry_after",
]


class HealthError(Exception):
    """Base class of every exception raised by ``health_async``."""


class ApiError(HealthError):
    """The service answered with a status that is not a success.

    Attributes:
        status: the HTTP status code.
        body: the decoded JSON body when there was one, else the text (possibly empty). Never part of ``str()``.
        headers: the response headers (case-insensitive mapping).
        operation: the library operation that failed (``"describe"``, ``"upload"``, ...).
        request_id: the server's request id header, if it sent one.
        retry_after: seconds from a ``Retry-After`` header (429, 503, ...), or None.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        operation: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.headers: Mapping[str, str] = headers if headers is not None else {}
        self.operation = operation
        self.request_id: str | None = _request_id(self.headers)
        self.retry_after: float | None = parse_retry_after(_header(self.headers, "Retry-After"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, operation={self.operation!r})"


class NotFoundError(ApiError):
    """404: the named thing does not exist."""


class DocumentNotFound(NotFoundError):
    """404 from describe: no document with that id (for that user)."""


class ProfileNotFound(NotFoundError):
    """No EMR user profile for that OID (``code == "profile_not_found"``)."""


class AuthenticationError(ApiError):
    """401 or 403: the token is missing, expired (after one refresh) or not allowed to do this."""


class RateLimitError(ApiError):
    """429: too many requests. :attr:`retry_after` holds the server's requested pause, if any."""


class ServerError(ApiError):
    """A 5XX answer: the service failed."""


class AbhaError(ApiError):
    """An ABHA (aadhaar init) failure carrying the documented error body.

    Attributes:
        code: the body's integer ``code`` (usually the HTTP status).
        error: the body's ``error`` text.
        source_error: the upstream system's ``{"code": ..., "message": ...}``, e.g. ``ABDM-1022``.

    ABDM answers rate-limit refusals (``ABDM-1022``, ``ABDM-1027``, ``ABDM-1100``) with HTTP 500;
    :attr:`is_rate_limited` tells them apart.
    """

    RATE_LIMIT_CODES = frozenset({"ABDM-1022", "ABDM-1027", "ABDM-1100"})

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        error: str | None = None,
        source_error: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.code = code
        self.error = error
        self.source_error: Mapping[str, Any] = source_error if source_error is not None else {}

    @property
    def source_code(self) -> str | None:
        """The upstream error code, such as ``"ABDM-1006"``, or None."""
        value = self.source_error.get("code")
        return value if isinstance(value, str) else None

    @property
    def is_rate_limited(self) -> bool:
        """True when ABDM refused because of too many requests or OTPs."""
        return self.source_code in self.RATE_LIMIT_CODES


class TransportError(HealthError):
    """The request failed below HTTP: connection refused or reset, DNS, TLS, a body cut mid-way.

    Attributes:
        sent: False when the request certainly never reached the server (connecting failed), True when it may
            have. Non-idempotent operations are only retried when ``sent`` is False.
    """

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class RequestTimeout(TransportError, asyncio.TimeoutError):
    """The request did not complete within its timeout."""


class TLSVerificationError(TransportError):
    """The server's TLS certificate could not be verified. Nothing was sent, and it is never retried: a wrong or
    self-signed certificate does not heal by waiting."""


class ResponseValidationError(HealthError):
    """A successful response whose body does not fit the expected model (or is not JSON)."""


class ResponseTooLarge(HealthError):
    """A response body larger than the client's ``max_response_size``."""


class EncryptionError(HealthError):
    """A JWE envelope could not be produced or opened.

    Decryption failures all carry the same message on purpose: telling a bad tag from bad padding would
    give an attacker a padding oracle.
    """


class ClientClosedError(HealthError, RuntimeError):
    """The client was used after :meth:`HealthClient.aclose`."""


class InvalidRequest(HealthError, ValueError):
    """The call's input was refused before anything was sent (a bad id, an unreadable or empty file, ...).

    Also a ``ValueError``. Bulk helpers report it in the failing item's result instead of stopping the batch.
    """


class FileTooLarge(InvalidRequest):
    """An upload larger than the size limit; nothing was sent."""


class InvalidAadhaarNumber(InvalidRequest):
    """An Aadhaar number that breaks a rule; nothing was sent. The message names the rule, never the number."""


# --------------------------------------------------------------------------------------------------------------
# the one place that turns an HTTP error response into an exception (pure: tested table-driven, no I/O)

_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid", "x-correlation-id")


def _request_id(headers: Mapping[str, str]) -> str | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in _REQUEST_ID_HEADERS:
        if name in lowered:
            return lowered[name]
    return None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date. None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        seconds = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN / inf
        return None
    return max(0.0, seconds)


def _is_abha_body(body: Any) -> bool:
    return isinstance(body, Mapping) and "error" in body and isinstance(body.get("source_error"), Mapping)


def error_from_response(status: int, headers: Mapping[str, str], body: Any, *, operation: str = "") -> ApiError:
    """Map an error response to the most specific :class:`ApiError`.

    ``body`` is the decoded JSON when the response was JSON, else its text. The message names the operation,
    the status and (for ABHA and profile errors) the service's error code, never the body itself.
    """
    where = f"{operation}: " if operation else ""
    common: dict[str, Any] = {"status": status, "body": body, "headers": headers, "operation": operation}

    if operation == "aadhaar_init" and _is_abha_body(body):
        source = body["source_error"]
        code = body.get("code")
        source_code = source.get("code")
        text = body.get("error")
        message = f"{where}HTTP {status}"
        if isinstance(source_code, str):
            message += f" {source_code}"
        if isinstance(text, str) and text:
            message += f": {text}"
        return AbhaError(
            message,
            code=code if isinstance(code, int) else None,
            error=text if isinstance(text, str) else None,
            source_error=source,
            **common,
        )

    if operation == "profile" and (
        status == 404 or (isinstance(body, Mapping) and body.get("code") == "profile_not_found")
    ):
        return ProfileNotFound(f"{where}no profile for that user id (HTTP {status})", **common)
    if status == 404:
        cls = DocumentNotFound if operation == "describe" else NotFoundError
        what = "no such document" if operation == "describe" else "not found"
        return cls(f"{where}{what} (HTTP 404)", **common)
    if status in (401, 403):
        return AuthenticationError(f"{where}not authorised (HTTP {status})", **common)
    if status == 429:
        return RateLimitError(f"{where}rate limited (HTTP 429)", **common)
    if status >= 500:
        return ServerError(f"{where}server error (HTTP {status})", **common)
    return ApiError(f"{where}request failed (HTTP {status})", **common)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for k, v in headers.items():
        if k.lower() == lowered:
            return v
    return None
