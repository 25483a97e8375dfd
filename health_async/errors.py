"""Every exception ``health_async`` raises, and the one function that maps a response to one.

The tree::

    HealthError                       base of everything this library raises
    ├── ApiError                      the service answered with an error status (status, body, headers)
    │   ├── NotFoundError             404
    │   │   ├── DocumentNotFound      404 from describe
    │   │   └── ProfileNotFound       404 / ``profile_not_found`` from the profile operation
    │   ├── AbhaError                 ABHA error body ``{code, error, source_error}`` (any ``client.abha`` call)
    │   │   ├── OtpMismatch           the OTP was wrong (ABDM-1035, MIS-1013); the flow stays at its step
    │   │   ├── ConsentPinMismatch    the consent PIN was wrong (a 400 to a PIN check); nothing approved or revoked
    │   │   └── AbhaRateLimited       ABDM-1022 / ABDM-1100 (HTTP 500!): ``try_again_after`` seconds; never retried
    │   │       └── AbhaBlocked       ABDM-1027: blocked for 24 hours
    │   ├── AuthenticationError       401, 403
    │   ├── RateLimitError            429 (``retry_after`` in seconds, or None)
    │   └── ServerError               5XX
    ├── TransportError                the request failed below HTTP (connection refused, reset, DNS, TLS)
    │   └── RequestTimeout            the request took longer than its timeout (also an asyncio.TimeoutError)
    ├── ResponseValidationError       a 2XX body that does not fit the expected model, or is not JSON
    ├── ResponseTooLarge              a response body over the configured cap
    ├── EncryptionError               JWE failure; deliberately without detail (no padding oracle)
    │   └── HealthDataUnreadable      an ABDM data push entry that does not open (names its care context)
    │       └── HealthDataChecksumMismatch  its plain text does not have the checksum sent with it
    ├── OutcomeUnknown                a call that is not idempotent may or may not have taken effect
    │   ├── AccountLikelyCreated      an ABHA create whose answer was lost, and the address now exists
    │   ├── ConsentOutcomeUnknown     an approve, deny or revoke of a consent that may have taken effect
    │   └── ShareOutcomeUnknown       a Scan & Share that may have reached the service (``request_id``)
    ├── ProcessingFailed              the service could not process a document (status ERROR; ``errors``)
    ├── ProcessingTimeout             waiting for processing reached its deadline (also a TimeoutError)
    ├── ScanShareTimeout              no token from the facility before the deadline (also a TimeoutError)
    ├── ScanShareFailed               the Scan & Share failed (status ``failed``)
    ├── UploadFailed                  a presigned upload was refused for one file (``code``, ``file_index``)
    ├── WebhookSignatureError         a webhook whose signature, timestamp or body does not verify
    ├── RayEngineError                the Ray ingest engine cannot go on (also a RuntimeError)
    ├── IngestOutputError             an ingest job's output or journal could not be written (also an OSError)
    ├── ResponseValidationError
    │   └── PaginationError           the service repeated a page token it already gave (paging would loop)
    ├── ClientClosedError             a call on a closed client (also a RuntimeError)
    │   └── ClientLoopError           a call on another event loop than the client's
    └── InvalidRequest                input refused before anything was sent (also a ValueError)
        ├── BundleInvalid             a FHIR bundle with validation errors (``care_context_id``, ``problems``)
        ├── FileTooLarge              an upload over the size limit
        ├── InvalidAadhaarNumber      an Aadhaar number breaking a rule
        ├── InvalidMobileNumber       a mobile number breaking a rule
        ├── InvalidOtp                an OTP that is not the service's shape (digits, length)
        ├── InvalidConsentPin         a consent PIN that is not ABDM's shape (4 digits)
        ├── InvalidAbhaAddress        an ABHA address breaking ABDM's format
        ├── InvalidFlowStep           a flow call that does not fit the flow's current step
        └── ResendTooSoon             an OTP resend refused locally (``retry_after`` seconds)

Messages never contain a token, a key, an Aadhaar or mobile number, or a response body: the body is kept on
:attr:`ApiError.body` for the caller to inspect, and is left out of ``str()`` and ``repr()``.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from collections.abc import Mapping
from enum import Enum
from typing import Any

__all__ = [
    "ScanShareFailed",
    "ScanShareTimeout",
    "ShareOutcomeUnknown",
    "AbhaBlocked",
    "AccountLikelyCreated",
    "AbhaError",
    "AbhaSessionExpired",
    "AbhaRateLimited",
    "ApiError",
    "AuthenticationError",
    "BundleInvalid",
    "ClientClosedError",
    "ClientLoopError",
    "ConsentOutcomeUnknown",
    "ConsentPinMismatch",
    "DocumentNotFound",
    "EncryptionError",
    "FileTooLarge",
    "FlowStateExpired",
    "FlowStateInvalid",
    "HealthDataChecksumMismatch",
    "HealthDataUnreadable",
    "HealthError",
    "InvalidAadhaarNumber",
    "InvalidAbhaAddress",
    "InvalidArgumentType",
    "InvalidConsentPin",
    "InvalidFlowStep",
    "InvalidMobileNumber",
    "InvalidOtp",
    "InvalidRequest",
    "NotFoundError",
    "OtpMismatch",
    "OutcomeUnknown",
    "PaginationError",
    "ProcessingFailed",
    "ProcessingTimeout",
    "ProfileNotFound",
    "RateLimitError",
    "IngestOutputError",
    "RayEngineError",
    "RequestTimeout",
    "ResendTooSoon",
    "ResponseTooLarge",
    "ResponseValidationError",
    "ServerError",
    "TLSVerificationError",
    "TransportError",
    "UploadFailed",
    "WebhookSignatureError",
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


class AbhaSessionExpired(ApiError):
    """491: the patient's ABHA gateway session has expired (ABDM's session pages: "APIs requiring ABHA Gateway
    authentication will return a 491"). Open a new one (``client.abha.session(...)``, a mobile OTP) and call
    again. Never retried: it does not heal by waiting, and your partner token is not the cause."""


class RateLimitError(ApiError):
    """429: too many requests. :attr:`retry_after` holds the server's requested pause, if any."""


class ServerError(ApiError):
    """A 5XX answer: the service failed."""


class AbhaError(ApiError):
    """An ABHA (``client.abha``) failure carrying the documented error body ``{code, error, source_error}``.

    Attributes:
        code: the body's integer ``code`` (usually the HTTP status).
        error: the body's ``error`` text.
        source_error: the upstream system's ``{"code": ..., "message": ...}``, e.g. ``ABDM-1022``.

    ABDM answers rate-limit refusals (``ABDM-1022``, ``ABDM-1027``, ``ABDM-1100``) with HTTP 500; they are raised
    as :class:`AbhaRateLimited` / :class:`AbhaBlocked`, and :attr:`is_rate_limited` tells them apart too. A wrong
    OTP is an :class:`OtpMismatch`.
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
        """The upstream error code, such as ``"ABDM-1006"``, or None.

        ABDM sometimes pads the code (``"ABDM-9999: "``): the code itself is returned, without the padding.
        """
        return _abha_code(self.source_error.get("code"))

    @property
    def is_rate_limited(self) -> bool:
        """True when ABDM refused because of too many requests or OTPs, or blocked the person."""
        return self.source_code in self.RATE_LIMIT_CODES


class OtpMismatch(AbhaError):
    """The OTP did not match (``ABDM-1035``, ``MIS-1013``, answered to an OTP-checking call). Nothing advanced:
    the flow stays at the same step and the patient may type the OTP again (ABDM locks the transaction out with
    ``ABDM-1100`` after too many wrong attempts)."""


class AbhaRateLimited(AbhaError):
    """ABDM refused because of too many requests or OTPs (``ABDM-1022``, ``ABDM-1100``), answered with HTTP 500.

    ``ABDM-1100`` reads "You have requested multiple OTPs Or Exceeded maximum number of attempts for OTP match in
    this transaction. Please try again in 30 minutes." Never retried (a retry would extend the lock-out).
    :attr:`try_again_after` is how many seconds the patient should wait before trying again.
    """

    #: Seconds to wait before the patient tries again (ABDM says 30 minutes).
    try_again_after: float = 30 * 60.0


class AbhaBlocked(AbhaRateLimited):
    """ABDM blocked the patient: "You are blocked. Please try again after 24 hours." (``ABDM-1027``, HTTP 500).
    Never retried."""

    #: Seconds to wait before the patient tries again (24 hours).
    try_again_after: float = 24 * 3600.0


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


class PaginationError(ResponseValidationError):
    """The service gave a page token it had already given: following it would loop forever."""


class OutcomeUnknown(HealthError):
    """A call that is not idempotent (an OTP send, an account or patient creation, an upload) failed in a way that
    leaves its effect unknown: the request may have reached the service (a timeout or a reset after sending, a 5XX
    from a gateway). It is never retried blindly; check (for example ``address_exists``, ``patients.by_mobile``)
    or ask the person before trying again. The original failure is ``__cause__``.

    Attributes:
        operation: the library operation that failed.
    """

    def __init__(self, message: str, *, operation: str = "") -> None:
        super().__init__(message)
        self.operation = operation


class AccountLikelyCreated(OutcomeUnknown):
    """A ``create`` whose answer was lost most likely took effect: ``address_exists`` now says the address
    exists. Nothing more was sent (never a blind second create); the flow is at ``FlowStep.LOG_IN``. Log in with
    :attr:`abha_address` (``client.abha.login("phr_address", exc.abha_address)``) to get the account's tokens.

    Attributes:
        abha_address: the address of the lost create (not part of the message).
    """

    def __init__(self, message: str, *, abha_address: str, operation: str = "") -> None:
        super().__init__(message, operation=operation)
        self.abha_address = abha_address


class RayEngineError(HealthError, RuntimeError):
    """The Ray engine cannot go on: every worker was lost, the workers did not start in time, or a worker
    failed in a way that is not an item's own failure (a bug). The Ray failure is ``__cause__``."""


class IngestOutputError(HealthError, OSError):
    """An ingest job could not write its output or its journal durably (a full disk, a file-size limit, an I/O
    error, a short write). The output was cut back to the last committed line (or the journal's transaction rolled
    back) and nothing of that batch was marked done: the next run of the job redoes it. The ``OSError`` (or
    SQLite's error) is ``__cause__``; the message names its reason, never an item."""


class ProcessingFailed(HealthError):
    """The service could not process a document (its result has status ``ERROR``).

    Attributes:
        document_id: the document.
        errors: the service's :class:`~health_async.models.ProcessingError` entries (codes and messages).
    """

    def __init__(self, message: str, *, document_id: str, errors: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.document_id = document_id
        self.errors = errors


class ProcessingTimeout(HealthError, TimeoutError):
    """Waiting for a document's processing reached its deadline; the document may still finish later.

    Attributes:
        document_id: the document.
        last_status: the :class:`~health_async.models.ProcessingStatus` last seen, or None if never polled.
    """

    def __init__(self, message: str, *, document_id: str, last_status: Any = None) -> None:
        super().__init__(message)
        self.document_id = document_id
        self.last_status = last_status


class UploadFailed(HealthError):
    """A presigned upload could not store a file, or the service refused a batch entry.

    Attributes:
        code: the service's error code (from ``error_details``), or None for a storage failure.
        file_index: which file of the document (0-based), or None when the whole entry was refused.
        document_id: the document the service created for the batch entry, when it got that far (its other
            files may be stored: delete it, or upload the failed file again), else None.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        file_index: int | None = None,
        document_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.file_index = file_index
        self.document_id = document_id


class WebhookSignatureError(HealthError, ValueError):
    """A webhook whose signature header is missing or malformed, whose signature matches no secret, whose
    timestamp is outside the tolerance, or whose body is not the JSON it should be. Answer it with 400."""


class ResponseTooLarge(HealthError):
    """A response body larger than the client's ``max_response_size``."""


class EncryptionError(HealthError):
    """A JWE envelope could not be produced or opened.

    Decryption failures all carry the same message on purpose: telling a bad tag from bad padding would
    give an attacker a padding oracle.
    """


class ClientClosedError(HealthError, RuntimeError):
    """The client was used after :meth:`HealthClient.aclose`."""


class ClientLoopError(ClientClosedError):
    """The client was used on an event loop other than the one it first ran on.

    A :class:`~health_async.HealthClient` (its connections, its limits, its token) belongs to one event loop:
    create it inside the loop that uses it (in each ``asyncio.run``, each test's loop, each thread's loop), and
    close it there. A :class:`ClientClosedError`, because the remedy is the same: a new client, here; code that
    stops a batch on a closed client stops on this too, rather than failing every item alike."""


class InvalidRequest(HealthError, ValueError):
    """The call's input was refused before anything was sent (a bad id, an unreadable or empty file, ...).

    Also a ``ValueError``. Bulk helpers report it in the failing item's result instead of stopping the batch.
    """


class BundleInvalid(InvalidRequest):
    """A FHIR bundle refused before anything was sent: :func:`health_async.fhir.validate` found errors in it
    (``client.abdm.push_health_data`` and ``client.abdm.link_care_contexts(..., data=...)`` validate each bundle
    unless given ``validate=False``). The message names the care context and each error's path and rule, never a
    value of the bundle.

    Attributes:
        care_context_id: the care context whose bundle was refused.
        problems: the :class:`~health_async.fhir.Problem` entries of its validation report (errors and warnings;
            ``severity`` tells them apart).
    """

    def __init__(self, message: str, *, care_context_id: str, problems: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.care_context_id = care_context_id
        self.problems = problems


class FileTooLarge(InvalidRequest):
    """An upload larger than the size limit; nothing was sent."""


class InvalidArgumentType(InvalidRequest, TypeError):
    """An argument of the wrong type (``None`` for an id, an ``int`` for a ``str``, a single value where many are
    expected); nothing was sent. The message names the parameter and the type, never the value.

    An :class:`InvalidRequest` (so a ``ValueError``) like every refused argument, and still a ``TypeError`` for
    code written before that caught it.
    """


class InvalidAadhaarNumber(InvalidRequest):
    """An Aadhaar number that breaks a rule; nothing was sent. The message names the rule, never the number."""


class InvalidMobileNumber(InvalidRequest):
    """A mobile number that breaks a rule; nothing was sent. The message names the rule, never the number."""


class InvalidOtp(InvalidRequest):
    """An OTP that is not of the service's shape; nothing was sent. The message never shows the OTP."""


class InvalidAbhaAddress(InvalidRequest):
    """An ABHA address that breaks ABDM's format; nothing was sent. The message names the rule, not the address."""


class InvalidFlowStep(InvalidRequest):
    """A call of a guided flow that does not fit its current step; nothing was sent. The message names the step
    the flow expects."""


class FlowStateInvalid(InvalidRequest):
    """A sealed flow state (``to_state(seal=key)``) that does not open: changed, truncated, made with another key
    or not made by this library. The message never shows the state or the key."""


class FlowStateExpired(FlowStateInvalid):
    """A true sealed flow state past its ``max_age``: start the flow again."""


class ResendTooSoon(InvalidRequest):
    """An OTP resend refused locally, nothing sent: too soon after the last send, or too many resends.

    Attributes:
        retry_after: seconds until a resend will be allowed, or None when no more resends are allowed.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ScanShareTimeout(HealthError, TimeoutError):
    """The facility gave no answer to a Scan & Share before the deadline (also a ``TimeoutError``). The share was
    made: its token may still come; ask ``client.abha.share_status`` with :attr:`request_id`.

    Attributes:
        request_id: the share's request id.
        last_status: the :class:`~health_async.models.ShareStatus` last seen (``None`` when no poll answered);
            typed as its base ``Enum`` here, as this module imports no model.
    """

    def __init__(self, message: str, *, request_id: str, last_status: Enum | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.last_status = last_status


class ScanShareFailed(HealthError):
    """The share's status is ``failed``: it did not reach the facility, or the facility refused it.

    Attributes:
        request_id: the share's request id.
    """

    def __init__(self, message: str, *, request_id: str) -> None:
        super().__init__(message)
        self.request_id = request_id


class ShareOutcomeUnknown(OutcomeUnknown):
    """The share may have reached the service (a timeout or reset after sending, a 5XX without the service's
    word); it was not repeated. Ask ``client.abha.share_status`` with :attr:`request_id` before sharing
    again. The original failure is ``__cause__``.

    Attributes:
        request_id: the request id the share was sent with.
    """

    def __init__(self, message: str, *, request_id: str, operation: str = "") -> None:
        super().__init__(message, operation=operation)
        self.request_id = request_id


class HealthDataUnreadable(EncryptionError):
    """A care context's health data pushed to you as an HIU (``abha.hiu_data_push``) does not open: another key
    (not the key material registered with ``client.abdm.set_hiu_keys``), a changed byte, a sender key that is not
    a key of ABDM's curve, or a plain text that is not a FHIR bundle (a JSON object). The message names the care
    context's reference, never its data.

    Attributes:
        care_context_id: the care context's reference (``None`` when the entry carried none).
    """

    def __init__(self, message: str, *, care_context_id: str | None) -> None:
        super().__init__(message)
        self.care_context_id = care_context_id


class HealthDataChecksumMismatch(HealthDataUnreadable):
    """A care context's pushed health data opened, but its plain text does not have the checksum sent with it
    (or none was sent): it was changed or cut on the way, and is not given."""


class ConsentPinMismatch(AbhaError):
    """The consent PIN did not match: the service answered a PIN check (``/abdm/v1/consents/pin/verify``, or the
    old PIN of ``pin/change``) with HTTP 400 and its error body. Nothing was approved, revoked or changed; the
    patient may type the PIN again (ABDM blocks after too many wrong PINs: :class:`AbhaRateLimited`). The message
    never holds the PIN."""


class ConsentOutcomeUnknown(OutcomeUnknown):
    """An approve, deny or revoke of a consent may or may not have taken effect (a timeout or reset after sending,
    a 5XX without the service's word); it was not repeated. Check the consent first, with
    ``client.abdm.consents.details(exc.consent_id)`` (or its status in ``client.abdm.consents.list()`` /
    ``client.abdm.request(exc.consent_id)``), before sending it again. The original failure is ``__cause__``.

    Attributes:
        consent_id: the consent the call was about (``None`` for a revoke given only artefact ids).
        artefact_ids: the consent artefacts a revoke was about (empty otherwise).
    """

    def __init__(
        self,
        message: str,
        *,
        consent_id: str | None,
        artefact_ids: tuple[str, ...] = (),
        operation: str = "",
    ) -> None:
        super().__init__(message, operation=operation)
        self.consent_id = consent_id
        self.artefact_ids = artefact_ids


class InvalidConsentPin(InvalidRequest):
    """A consent PIN that is not ABDM's shape (4 digits), refused before anything was sent. The message names the
    rule, never the PIN."""


# --------------------------------------------------------------------------------------------------------------
# the one place that turns an HTTP error response into an exception (pure: tested table-driven, no I/O)

#: Operations on one document: their 404 is a :class:`DocumentNotFound`.
DOCUMENT_OPERATIONS = frozenset({"describe", "result", "update", "delete"})

_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid", "x-correlation-id")


def _request_id(headers: Mapping[str, str]) -> str | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in _REQUEST_ID_HEADERS:
        if name in lowered:
            return lowered[name]
    return None


_HTTP_DATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    r"\d{2}:\d{2}:\d{2} GMT"  # IMF-fixdate (RFC 9110 5.6.7), the form servers must send
    r"|(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), \d{2}-[A-Z][a-z]{2}-\d{2} "
    r"\d{2}:\d{2}:\d{2} GMT"  # obsolete RFC 850 form
    r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}"  # obsolete asctime form
)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header, strictly as RFC 9110 defines it: ASCII digits
    (delta-seconds) or an HTTP date. Anything else (``-5``, ``1e3``, ``3.5``, ``nan``, a loose date) is treated
    as absent: ``None``. A date in the past gives 0."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    if not _HTTP_DATE.fullmatch(value):
        return None
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    try:
        seconds = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
    except (OverflowError, ValueError):
        return None
    return max(0.0, float(seconds))


def _is_abha_body(body: Any) -> bool:
    return isinstance(body, Mapping) and "error" in body and isinstance(body.get("source_error"), Mapping)


#: The operations of ``client.abha``: an ABHA error body from any of them is an :class:`AbhaError` (or subclass).
ABHA_OPERATIONS = frozenset(
    {
        "aadhaar_init",
        "aadhaar_resend",
        "aadhaar_verify",
        "aadhaar_mobile_verify",
        "aadhaar_mobile_resend",
        "aadhaar_create",
        "auto_login",
        "mobile_init",
        "mobile_resend",
        "mobile_verify",
        "mobile_create",
        "address_exists",
        "suggest_addresses",
        "login_methods",
        "login_init",
        "login_verify",
        "login_phr",
    }
)
#: The operations of ``client.hpr`` and ``client.hfr`` (milestone 4): they answer refusals with the same
#: ``GenericError`` body, so an error body from any of them is an :class:`AbhaError` (or subclass) too.
REGISTRY_OPERATIONS = frozenset(
    {
        "hpr_aadhaar_init",
        "hpr_aadhaar_verify",
        "hpr_demo_verify",
        "hpr_mobile_init",
        "hpr_mobile_verify",
        "hpr_check_exist",
        "hpr_check_available",
        "hpr_suggest",
        "hpr_create",
        "hfr_search",
        "hfr_onboard",
        "hfr_link",
    }
)
#: The ABHA and HPR operations that check an OTP: only there do ``ABDM-1035`` / ``MIS-1013`` mean a wrong OTP
#: (``ABDM-1035`` also means "Invalid HIP ID" elsewhere, per the service's error table).
OTP_CHECK_OPERATIONS = frozenset(
    {
        "aadhaar_verify",
        "aadhaar_mobile_verify",
        "mobile_verify",
        "login_verify",
        "hpr_aadhaar_verify",
        "hpr_mobile_verify",
    }
)
_OTP_MISMATCH_CODES = frozenset({"ABDM-1035", "MIS-1013"})
_ABHA_CODE = re.compile(r"[A-Z]{2,10}-\d{1,6}")
# What the service's ``error`` text may carry about the person ("... claimed by the mobile number: 98...")
_PERSONAL = re.compile(r"\S*@\S+|\+?\d[\d\s-]{4,}\d")
# Control characters (a newline would forge a log line; an escape sequence would rewrite a terminal)
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def redacted(text: str, limit: int = 200) -> str:
    """The service's free text, fit for a message: control characters made spaces, what looks personal (an e-mail
    or ABHA address, a run of digits such as a mobile or Aadhaar number) replaced by ``[redacted]``, cut to
    ``limit`` characters. Judgement call: a name in the text is not recognised; the text is shown because it is
    what tells the user what went wrong."""
    return _PERSONAL.sub("[redacted]", _CONTROL_CHARS.sub(" ", text)).strip()[:limit]


def _abha_code(value: Any) -> str | None:
    """``"ABDM-9999: "`` -> ``"ABDM-9999"``: ABDM pads its codes, so compare on the code, not the raw string.

    A code of another shape is kept for messages with what looks personal redacted (a mobile number, an e-mail
    address) and cut to 40 characters: it is the service's text, and it ends up in ``str(exc)``."""
    if not isinstance(value, str):
        return None
    match = _ABHA_CODE.match(value.strip())
    if match:
        return match.group(0)
    return redacted(value.strip(), 40) or None


def _abha_error(status: int, body: Mapping[str, Any], operation: str, where: str, common: dict[str, Any]) -> AbhaError:
    source = body["source_error"]
    code = body.get("code")
    text = body.get("error")
    source_code = _abha_code(source.get("code"))
    cls: type[AbhaError] = AbhaError
    if source_code in ("ABDM-1022", "ABDM-1100"):
        cls = AbhaRateLimited
    elif source_code == "ABDM-1027":
        cls = AbhaBlocked
    elif source_code in _OTP_MISMATCH_CODES and operation in OTP_CHECK_OPERATIONS:
        cls = OtpMismatch
    message = f"{where}HTTP {status}"
    if source_code is not None:
        message += f" {source_code}"
    if isinstance(text, str) and text:
        message += f": {redacted(text)}"
    # ABDM's own words ("Data already exists"): the body's ``error`` is often only "Something went wrong"
    said = source.get("message")
    said = redacted(said, 120) if isinstance(said, str) else ""
    if said and said != (redacted(text) if isinstance(text, str) else ""):
        message += f" ({said})" if isinstance(text, str) and text else f": {said}"
    if issubclass(cls, AbhaBlocked):
        message += " (try again after 24 hours; not retried)"
    elif issubclass(cls, AbhaRateLimited):
        message += " (try again in 30 minutes; not retried)"
    return cls(
        message,
        code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        error=text if isinstance(text, str) else None,
        source_error=source,
        **common,
    )


def error_from_response(status: int, headers: Mapping[str, str], body: Any, *, operation: str = "") -> ApiError:
    """Map an error response to the most specific :class:`ApiError`.

    ``body`` is the decoded JSON when the response was JSON, else its text. The message names the operation,
    the status and (for ABHA and profile errors) the service's error code, never the body itself.
    """
    where = f"{operation}: " if operation else ""
    common: dict[str, Any] = {"status": status, "body": body, "headers": headers, "operation": operation}

    if status == 491:  # before the ABHA body: whatever it says, the patient must log in again
        return AbhaSessionExpired(
            f"{where}the patient's ABHA gateway session has expired (HTTP 491): open a new one "
            "(client.abha.session) and call again",
            **common,
        )

    if (operation in ABHA_OPERATIONS or operation in REGISTRY_OPERATIONS) and _is_abha_body(body):
        return _abha_error(status, body, operation, where, common)

    if operation == "profile" and (
        status == 404 or (isinstance(body, Mapping) and body.get("code") == "profile_not_found")
    ):
        return ProfileNotFound(f"{where}no profile for that user id (HTTP {status})", **common)
    if status == 404:
        cls = DocumentNotFound if operation in DOCUMENT_OPERATIONS else NotFoundError
        what = "no such document" if operation in DOCUMENT_OPERATIONS else "not found"
        return cls(f"{where}{what} (HTTP 404)", **common)
    if 300 <= status < 400:
        return ApiError(f"{where}the service answered a redirect (HTTP {status}), never followed", **common)
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
