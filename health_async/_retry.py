"""Retry policy: what is retried, how long to wait, when to give up. Pure decisions, tested without I/O.

The loop itself lives in ``_session.py`` and is a single :class:`tenacity.AsyncRetrying` built from the policy.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

import attrs

from . import _constants as C
from .errors import AbhaError, ApiError, RateLimitError, TLSVerificationError, TransportError

__all__ = ["DOCUMENTED_REFUSAL_CODES", "GATEWAY_STATUSES", "UNSETTLING_ABDM_CODES", "RetryPolicy", "settled"]


def _non_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"RetryPolicy.{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class RetryPolicy:
    """How a client retries failed requests. Frozen; pass one to ``HealthClient(retry=...)`` or per call.

    **What is retried.** A failure is retried when it is transient: a transport error (connection refused or
    reset, DNS, a timeout, a body cut mid-way), HTTP 429, or a status in :attr:`retry_statuses` (by default
    408, 500, 502, 503, 504). A TLS certificate that fails verification (:class:`TLSVerificationError`) is
    never retried: it does not heal by waiting. Nor is an ABHA error answer (:class:`AbhaError`, whatever its
    HTTP status): it is ABDM's final word, and ABDM counts every attempt towards its lock-outs.

    **Idempotency rule.** Describe, list and profile are reads and retry on every transient failure.
    Upload and aadhaar init are *not idempotent*: a repeated upload can create a duplicate document, and a
    repeated aadhaar init sends another SMS (ABDM answers its own rate limits with HTTP 500, so retrying a 500
    can lock the user out for 24 hours). They are retried **only when the request cannot have reached the
    server** (connection refused, DNS failure, connect timeout). :attr:`retry_non_idempotent` opts the direct
    upload into retries; calls sent once (OTP steps, account and patient creations, presigned declarations) are
    never repeated whatever it says.

    **How long to wait.** A ``Retry-After`` header (seconds or HTTP date) is honoured, capped at
    :attr:`retry_after_cap`. Otherwise the wait is exponential with jitter:
    ``min(base_delay * 2**(n-1), max_delay) * (1 - jitter * random())`` before attempt ``n+1``.

    **When to give up.** After :attr:`attempts` attempts in all (1 means never retry), or when the next wait
    would end after :attr:`deadline` seconds from the first attempt. The last error is raised as it was.
    """

    attempts: int = attrs.field(default=C.DEFAULT_RETRY_ATTEMPTS)
    """Total attempts including the first; ``1`` disables retries."""
    base_delay: float = attrs.field(default=C.DEFAULT_RETRY_BASE_DELAY, validator=_non_negative)
    """Wait before the second attempt, doubled for each further one (seconds)."""
    max_delay: float = attrs.field(default=C.DEFAULT_RETRY_MAX_DELAY, validator=_non_negative)
    """Upper bound of the exponential wait (seconds)."""
    deadline: float | None = attrs.field(default=60.0)
    """Give up when the next wait would end later than this many seconds after the first attempt began."""
    retry_after_cap: float = attrs.field(default=C.DEFAULT_RETRY_AFTER_CAP, validator=_non_negative)
    """Longest server-requested ``Retry-After`` wait honoured (seconds); longer requests are cut to this."""
    jitter: float = attrs.field(default=0.25)
    """Fraction of the exponential wait removed at random, to spread retries of many workers."""
    retry_statuses: frozenset[int] = attrs.field(default=frozenset({408, 500, 502, 503, 504}), converter=frozenset)
    """Statuses retried besides 429."""
    retry_non_idempotent: bool = False
    """Opt the direct upload in to retries on every transient failure (may duplicate a document). Never applies to
    OTP steps, account or patient creations or presigned declarations."""

    @attempts.validator
    def _check_attempts(self, _: attrs.Attribute[int], value: int) -> None:
        if value < 1:
            raise ValueError(f"RetryPolicy.attempts must be >= 1, got {value!r}")

    @deadline.validator
    def _check_deadline(self, _: attrs.Attribute[float | None], value: float | None) -> None:
        if value is not None and value <= 0:
            raise ValueError(f"RetryPolicy.deadline must be > 0 or None, got {value!r}")

    @jitter.validator
    def _check_jitter(self, _: attrs.Attribute[float], value: float) -> None:
        if not 0 <= value <= 1:
            raise ValueError(f"RetryPolicy.jitter must be within [0, 1], got {value!r}")

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that makes exactly one attempt."""
        return cls(attempts=1)

    def should_retry(self, exc: BaseException, *, idempotent: bool) -> bool:
        """Whether ``exc``, raised by one attempt of a request, is worth another attempt."""
        if isinstance(exc, TLSVerificationError | AbhaError):
            # Neither heals by waiting a little. An ABHA error body is the service's final answer (ABDM sends
            # "transaction not found", "address exists" and its own rate limits as HTTP 500): retrying it counts
            # as another attempt towards the ABDM-1100 lock-out, or extends a lock-out already on.
            return False
        if isinstance(exc, TransportError):
            return idempotent or self.retry_non_idempotent or not exc.sent
        if not (idempotent or self.retry_non_idempotent):
            return False
        if isinstance(exc, RateLimitError):
            return True
        return isinstance(exc, ApiError) and exc.status in self.retry_statuses

    def delay(self, attempt: int, exc: BaseException | None, *, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based) before the next one."""
        retry_after: float | None = exc.retry_after if isinstance(exc, ApiError) else None
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        backoff: float = min(self.base_delay * 2 ** (attempt - 1), self.max_delay)
        return backoff * (1 - self.jitter * rand())


def retry_reason(exc: BaseException) -> str:
    """A short, identifier-free reason for the retry log."""
    return f"HTTP {exc.status}" if isinstance(exc, ApiError) else type(exc).__name__


# ---------------------------------------------------------------------------------------------------------------
# what an error answer says about a call that is not idempotent (pure: the resources' send-once rule asks it)

#: The statuses a gateway or an upstream answers for the service it stands in front of: a JSON body at one of them
#: may be the gateway's own, shaped like anything, even like the service's error body.
GATEWAY_STATUSES: Final = frozenset({502, 503, 504})

#: ABDM codes that do not say whether a request took effect (from the vendor's ``abha-errors.mdx``): a timeout
#: (``ABDM-1007`` "Connection failed due to timeout", ``ABDM-1048`` "Timeout"), an unknown exception
#: (``ABDM-9999``), a dependency (``ABDM-1019``, ``ABDM-1024``) or a HIP (``ABDM-1402``) that did not answer.
UNSETTLING_ABDM_CODES: Final = frozenset({"ABDM-1007", "ABDM-1019", "ABDM-1024", "ABDM-1048", "ABDM-1402", "ABDM-9999"})

#: Every code of the vendor's error table (``abha-errors.mdx``, the same as ``abdm-connect/errors.mdx``), less
#: :data:`UNSETTLING_ABDM_CODES`: the service's documented word that it refused (a wrong OTP, a rate limit or a
#: block, an address or a mobile number taken, an invalid transaction, a service of its own down, ...).
DOCUMENTED_REFUSAL_CODES: Final = (
    frozenset(f"ABDM-{n}" for n in (*range(1000, 1055), *range(1061, 1065)))
    | frozenset(f"ABDM-{n}" for n in (1100, 1101, 1102, 1108, 1109, 1110, 1111, 1112, 1113, 1114, 1115))
    | frozenset(f"ABDM-{n}" for n in (1200, 1201, 1202, 1205, 1401, 1402, 9999))
    | frozenset({"MIS-1013", "MIS-1026", "EKA-1001", "EKA-1002"})
) - UNSETTLING_ABDM_CODES


def settled(exc: ApiError) -> bool:
    """Whether an error answer says for sure that a call did not take effect (so a call sent once raises it as it
    is, instead of :class:`~health_async.errors.OutcomeUnknown`):

    * any 4XX: a refusal;
    * a 500: only the service's own ABHA error body (:class:`~health_async.errors.AbhaError`) with a code that is
      its definite word (any code but :data:`UNSETTLING_ABDM_CODES`: ABDM answers its refusals with HTTP 500);
    * a 502, 503 or 504 (:data:`GATEWAY_STATUSES`): only an ABHA error body whose code the vendor documents as a
      refusal (:data:`DOCUMENTED_REFUSAL_CODES`). Judgement call: a gateway or an upstream answering for a service
      that may have acted can send a JSON body of its own, even one shaped like the service's; only a code the
      vendor documents is taken as the service's word;
    * any other 5XX: as a 500.
    """
    status = exc.status
    if status < 500:
        return True
    if not isinstance(exc, AbhaError):
        return False
    code = exc.source_code
    if code is None or code in UNSETTLING_ABDM_CODES:
        return False
    return status not in GATEWAY_STATUSES or code in DOCUMENTED_REFUSAL_CODES
