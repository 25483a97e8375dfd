"""The ABHA error body of ABDM's newer operations (KYC, user sessions, discover-and-link, consents), typed once.

``errors.error_from_response`` makes an ABHA error body an :class:`~health_async.errors.AbhaError`
(:class:`~health_async.errors.OtpMismatch`, :class:`~health_async.errors.AbhaRateLimited`,
:class:`~health_async.errors.AbhaBlocked`) only for the operations named in ``errors.ABHA_OPERATIONS`` /
``OTP_CHECK_OPERATIONS``, which do not name these yet. Until they do, an answer of theirs is mapped here as it is
for the ABHA operation of the same nature (an OTP check or not), under its own operation name; once they do, the
error arrives mapped and this is inert. Also here: the retry policy of their reads, which never repeats an HTTP 500
(ABDM answers its rate limits with a 500, and a retry would extend them).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final, TypeVar

import attrs

from ..._retry import RetryPolicy, settled
from ...errors import AbhaError, ApiError, OutcomeUnknown, error_from_response

__all__ = ["abha_refusal", "not_on_500", "typed_refusals"]

T = TypeVar("T")

_LIKE: Final = {True: "login_verify", False: "login_init"}

#: What to do about a refusal, by operation and ABDM code: added to its message.
_ADVICE: Final = {
    ("consent_pin_set", "ABDM-1053"): "a consent PIN is already set: change it with change_pin, or reset_pin when "
    "it is forgotten",
}


def abha_refusal(exc: ApiError, operation: str, *, checks_otp: bool) -> AbhaError | None:
    """The :class:`AbhaError` an error answer stands for (``None``: not an ABHA error body)."""
    if isinstance(exc, AbhaError):
        return exc
    like = _LIKE[checks_otp]
    mapped = error_from_response(exc.status, exc.headers, exc.body, operation=like)
    if not isinstance(mapped, AbhaError):
        return None
    advice = _ADVICE.get((operation, mapped.source_code or ""))
    return type(mapped)(
        operation + str(mapped).removeprefix(like) + (f"; {advice}" if advice else ""),
        code=mapped.code,
        error=mapped.error,
        source_error=mapped.source_error,
        status=exc.status,
        body=exc.body,
        headers=exc.headers,
        operation=operation,
    )


async def typed_refusals(call: Awaitable[T], operation: str, *, checks_otp: bool = False) -> T:
    """``await call`` with its ABHA error answer typed (:func:`abha_refusal`): a definite refusal (a wrong OTP, a
    rate limit, a block), even at HTTP 500, is raised as such, never as an unknown outcome."""
    try:
        return await call
    except OutcomeUnknown as exc:
        cause = exc.__cause__
        if isinstance(cause, ApiError) and not isinstance(cause, AbhaError):
            mapped = abha_refusal(cause, operation, checks_otp=checks_otp)
            if mapped is not None and settled(mapped):
                raise mapped from None
        raise
    except ApiError as exc:
        mapped = abha_refusal(exc, operation, checks_otp=checks_otp)
        if mapped is None or mapped is exc:
            raise
        raise mapped from None


def not_on_500(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` for a read of these operations: never repeated on HTTP 500 (see the module)."""
    # (attrs' plugin cannot read the frozenset converter's type)
    return attrs.evolve(policy, retry_statuses=policy.retry_statuses - {500})  # type: ignore[arg-type]
