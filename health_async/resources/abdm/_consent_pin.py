"""The consent PIN of ``client.abdm.consents``: its input rule, the PIN calls (:class:`ConsentPinMixin`, the base
of :class:`~health_async.resources.Consents`, with the request plumbing every consent call shares: sent once or
read, error answers typed) and the guided PIN reset (:class:`ConsentPinReset`).

**The PIN.** ABDM's consent PIN is **4 digits**: the vendor's ``SetRequest`` / ``VerifyRequestType4`` examples are
``"1234"``, and ABDM's consent manager (the PHR apps' "consent PIN" screens) takes four digits. It is checked
before anything is sent (:func:`normalize_consent_pin`: a ``str`` of exactly 4 ASCII digits, surrounding
whitespace stripped; an ``int`` is refused, it would lose leading zeros). A PIN is a secret: it never appears in a
``repr``, a log line, an error message or a flow state, and no call that carries one is ever retried.

**The reset** (``pin/forgot/init`` -> OTP -> ``pin/forgot/verify`` -> ``pin/reset``)::

    reset = await client.abdm.consents.reset_pin()   # an OTP goes to the patient's mobile
    await reset.verify_otp("123456")                 # next_step: SET_PIN
    await reset.set_pin("4821")                      # next_step: DONE

It is a :class:`~health_async.resources._flow.GuidedFlow`, with the conventions of the ABHA flows:
:attr:`~ConsentPinReset.next_step` (a :class:`~health_async.models.PinResetStep`); a call out of step, or a
second call while one is in flight, raises :class:`~health_async.errors.InvalidFlowStep` with nothing sent; every
request is sent once (an OTP is never sent or checked twice by the library); a wrong OTP
(:class:`~health_async.errors.OtpMismatch`) leaves the flow at ``VERIFY_OTP``;
:class:`~health_async.errors.AbhaRateLimited` / ``AbhaBlocked`` end it at ``BLOCKED``
(:attr:`~ConsentPinReset.blocked_until`). The service has no OTP resend for this flow: start a new reset.
:meth:`~ConsentPinReset.to_state` is a plain JSON-able dict without the OTP or the PIN (``to_state(seal=key)``
seals it); ``client.abdm.consents.resume_pin_reset(state)`` rebuilds the flow on any worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from ... import _routes as R
from ..._abha_input import normalize_otp, normalize_txn_id
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, pick
from ..._retry import RetryPolicy, settled
from ..._wire import structure
from ...errors import (
    AbhaError,
    ApiError,
    ConsentPinMismatch,
    InvalidConsentPin,
    InvalidRequest,
    OutcomeUnknown,
    ResponseValidationError,
)
from ...models.abdm._consents import PinOtpSent, PinResetStep, PinScope, parse_pin_exists
from .._flow import Clock, GuidedFlow, field, open_state, time_field
from ._base import AbdmBase
from ._errors import abha_refusal, not_on_500

__all__ = ["PIN_LENGTH", "STATE_VERSION", "ConsentPinMixin", "ConsentPinReset", "normalize_consent_pin", "resume"]

#: Digits of ABDM's consent PIN.
PIN_LENGTH: Final = 4
#: Version of the :meth:`ConsentPinReset.to_state` layout.
STATE_VERSION: Final = 1
_SEAL_PURPOSE: Final = b"health_async.consent_pin_reset_state"
_HEADER_OPTIONS: Final = ("oid", "partner_user_id")

_EXPECTED: Final[dict[PinResetStep, str]] = {
    PinResetStep.VERIFY_OTP: "verify_otp",
    PinResetStep.SET_PIN: "set_pin",
    PinResetStep.DONE: "nothing more: the new PIN is set",
    PinResetStep.BLOCKED: "nothing more: ABDM refused (rate limit or block); start a new reset after blocked_until",
}


def normalize_consent_pin(pin: str, name: str = "pin") -> str:
    """The consent PIN as sent: surrounding whitespace stripped, then exactly :data:`PIN_LENGTH` (4) ASCII digits.

    Raises :class:`~health_async.errors.InvalidConsentPin` naming ``name`` and the rule, never the PIN.
    """
    if not isinstance(pin, str):
        raise InvalidConsentPin(f"{name} must be a str (an int would lose leading zeros)")
    value = pin.strip()
    if not value:
        raise InvalidConsentPin(f"{name} must not be empty")
    if not value.isascii() or not value.isdigit():
        raise InvalidConsentPin(f"{name} must contain only digits")
    if len(value) != PIN_LENGTH:
        raise InvalidConsentPin(f"{name} must have {PIN_LENGTH} digits (ABDM's consent PIN)")
    return value


class ConsentPinReset(GuidedFlow[PinResetStep]):
    """A guided consent PIN reset (see the module). Start one with ``client.abdm.consents.reset_pin()``; continue
    one elsewhere with ``client.abdm.consents.resume_pin_reset(state)``. ``repr`` shows the step only."""

    kind: ClassVar[str] = "consent_pin_reset"
    _expected: ClassVar[Mapping[PinResetStep, str]] = _EXPECTED
    _seal_purpose: ClassVar[bytes] = _SEAL_PURPOSE
    _log_name: ClassVar[str] = "consent pin"

    def __init__(
        self,
        consents: ConsentPinMixin,
        *,
        txn_id: str,
        step: PinResetStep,
        headers: Mapping[str, str | None] | None = None,
        sent: PinOtpSent | None = None,
        blocked_until: float | None = None,
        clock: Clock | None = None,
        revision: int = 0,
    ) -> None:
        """Not called directly: use ``client.abdm.consents.reset_pin()`` (or ``resume_pin_reset``)."""
        super().__init__(step=step, clock=clock or time.time, blocked_until=blocked_until, revision=revision)
        self._consents = consents
        self._txn_id = txn_id
        self._headers: dict[str, str | None] = dict(headers or {})
        self._sent = sent

    @property
    def otp_sent(self) -> PinOtpSent | None:
        """Where the OTP went and for how long it is valid (:class:`~health_async.models.PinOtpSent`, the
        destination hidden from ``repr``); in the process that started the reset only (not in the state)."""
        return self._sent

    async def verify_otp(self, otp: str) -> PinResetStep:
        """``POST /abdm/v1/consents/pin/forgot/verify``: check the OTP (6 digits, checked before sending); returns
        the new :attr:`next_step` (``SET_PIN``). Sent once.

        Raises:
            InvalidFlowStep: not at ``VERIFY_OTP``, or another call in flight; nothing sent.
            InvalidOtp: nothing sent.
            OtpMismatch: wrong OTP: the flow stays at ``VERIFY_OTP``, ask again.
            AbhaRateLimited, AbhaBlocked: the flow is now ``BLOCKED``.
            OutcomeUnknown: the flow stays at ``VERIFY_OTP``; calling again is safe (an OTP check changes
                nothing), though a lost success may then be answered as a transaction that moved on: start a new
                reset then.
        """
        self._expect("verify_otp", PinResetStep.VERIFY_OTP)
        code = normalize_otp(otp)
        txn_id = self._txn_id
        await self._run(lambda: self._consents._forgot_verify(txn_id, code, **self._headers))
        self._set_step(PinResetStep.SET_PIN)
        return self._step

    async def set_pin(self, new_pin: str) -> PinResetStep:
        """``POST /abdm/v1/consents/pin/reset``: set the new consent PIN (4 digits, checked before sending);
        returns :attr:`next_step` (``DONE``). Sent once.

        Raises:
            InvalidFlowStep: not at ``SET_PIN`` (verify the OTP first), or another call in flight; nothing sent.
            InvalidConsentPin: nothing sent.
            AbhaRateLimited, AbhaBlocked: the flow is now ``BLOCKED``.
            OutcomeUnknown: the flow stays at ``SET_PIN``; calling ``set_pin`` again with the **same** PIN is safe
                (it sets the same value).
        """
        self._expect("set_pin", PinResetStep.SET_PIN)
        pin = normalize_consent_pin(new_pin, "new_pin")
        await self._run(lambda: self._consents._reset(pin, **self._headers))
        self._set_step(PinResetStep.DONE)
        return self._step

    def _state(self) -> dict[str, Any]:
        """``version`` (1), ``kind`` (``consent_pin_reset``), ``step`` (a :class:`~health_async.models.PinResetStep`
        value), ``revision`` (incremented at every change), ``txn_id``, ``blocked_until`` and ``headers`` (``oid`` /
        ``partner_user_id`` given when it started). Never an OTP or a PIN (a sealed state adds nothing). Still
        sensitive: at ``SET_PIN`` whoever holds it (and the client's credentials) can set the patient's PIN; keep
        it server-side or sealed, and drop it when the flow ends."""
        return {
            **self._state_head(STATE_VERSION),
            "txn_id": self._txn_id,
            "blocked_until": self._blocked_until,
            "headers": dict(self._headers),
        }

    def _blocked_step(self) -> PinResetStep:
        return PinResetStep.BLOCKED


def resume(
    consents: ConsentPinMixin,
    state: Mapping[str, Any] | str,
    *,
    seal: bytes | None = None,
    clock: Clock | None = None,
) -> ConsentPinReset:
    """Rebuild a reset from :meth:`ConsentPinReset.to_state` (nothing is sent). :class:`InvalidRequest` naming the
    field when the state is not one (never its value); :class:`~health_async.errors.FlowStateInvalid` /
    :class:`~health_async.errors.FlowStateExpired` for a sealed one that does not open or has expired."""
    now = (clock or time.time)()
    plain, _ = open_state(state, seal, purpose=_SEAL_PURPOSE, now=now, version=STATE_VERSION)
    if plain.get("kind") != ConsentPinReset.kind:
        raise InvalidRequest(f"state.kind must be {ConsentPinReset.kind}")
    try:
        step = PinResetStep(plain.get("step"))
    except ValueError:
        raise InvalidRequest("state.step must be a PinResetStep value") from None
    txn_id = normalize_txn_id(field(plain, "txn_id", str))
    headers = field(plain, "headers", Mapping, optional=True) or {}
    for key, value in headers.items():
        if key not in _HEADER_OPTIONS or not (value is None or isinstance(value, str)):
            raise InvalidRequest(f"state.headers may hold only {', '.join(_HEADER_OPTIONS)} (str or null)")
    return ConsentPinReset(
        consents,
        txn_id=txn_id,
        step=step,
        headers=headers,
        blocked_until=time_field(plain, "blocked_until"),
        clock=clock,
        revision=field(plain, "revision", int, optional=True) or 0,
    )


# ------------------------------------------------------------------------------------------------ error answers


def _refusal(exc: ApiError, operation: str, *, checks_otp: bool, checks_pin: bool) -> ApiError:
    """The typed error an error answer stands for: the service's error body as an :class:`AbhaError` (or a
    subclass), a 400 to a PIN check as :class:`ConsentPinMismatch`; anything else as it is."""
    mapped: ApiError = abha_refusal(exc, operation, checks_otp=checks_otp) or exc
    if checks_pin and isinstance(mapped, AbhaError) and mapped.status == 400 and not mapped.is_rate_limited:
        code = f" {mapped.source_code}" if mapped.source_code else ""
        return ConsentPinMismatch(
            f"{operation}: the consent PIN does not match (HTTP 400{code}); nothing was changed: ask for it again",
            code=mapped.code,
            error=mapped.error,
            source_error=mapped.source_error,
            status=mapped.status,
            body=mapped.body,
            headers=mapped.headers,
            operation=operation,
        )
    return mapped


class ConsentPinMixin(AbdmBase):
    """The consent PIN and the request plumbing of :class:`~health_async.resources.Consents` (its base: see
    :mod:`health_async.resources.abdm.consents` for the rules every call keeps)."""

    # -------------------------------------------------------------------- the consent PIN

    @checked
    async def pin_exists(
        self,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> bool:
        """``GET /abdm/v1/consents/pin/exists``: whether the patient has set a consent PIN (``ExistResponse``). A
        read, retried as one except on HTTP 500."""
        data = await self._call(
            "GET",
            R.PATH_PIN_EXISTS,
            "consent_pin_exists",
            once=False,
            headers=self._headers(oid, partner_user_id),
            retry=retry,
            timeout=timeout,
        )
        return parse_pin_exists(data)

    @checked
    async def set_pin(
        self,
        pin: str,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/consents/pin/set``: set the patient's first consent PIN (4 digits, checked before
        sending). Sent once. A PIN already set is refused by the service (an
        :class:`~health_async.errors.AbhaError`): use :meth:`change_pin`, or :meth:`reset_pin` when it is
        forgotten. On ``OutcomeUnknown`` ask :meth:`pin_exists` before setting again."""
        code = normalize_consent_pin(pin)
        await self._call(
            "POST",
            R.PATH_PIN_SET,
            "consent_pin_set",
            once=True,
            headers=self._headers(oid, partner_user_id),
            json={"pin": code},
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def verify_pin(
        self,
        pin: str,
        *,
        scope: PinScope | str | None = None,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/consents/pin/verify``: check the patient's consent PIN (4 digits, checked before
        sending), for ``scope`` (a :class:`~health_async.models.PinScope` or its value; none sent when ``None``).
        :meth:`approve` and :meth:`revoke` do this themselves. Sent once (each wrong PIN counts toward ABDM's
        block).

        Raises:
            InvalidConsentPin, InvalidRequest: nothing sent.
            ConsentPinMismatch: wrong PIN. AbhaRateLimited, AbhaBlocked: too many wrong PINs.
        """
        code = normalize_consent_pin(pin)
        if scope is None or isinstance(scope, PinScope):
            chosen = scope
        else:
            try:
                chosen = PinScope(scope)
            except ValueError:
                raise InvalidRequest(f"scope must be one of {', '.join(s.value for s in PinScope)}") from None
        body: dict[str, str] = {"pin": code}
        if chosen is not None:
            body["scope"] = chosen.value
        await self._call(
            "POST",
            R.PATH_PIN_VERIFY,
            "consent_pin_verify",
            once=True,
            checks_pin=True,
            headers=self._headers(oid, partner_user_id),
            json=body,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def change_pin(
        self,
        old_pin: str,
        new_pin: str,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``POST /abdm/v1/consents/pin/change``: replace the consent PIN (``ChangeRequest``: ``old``, ``new``; 4
        digits each, and different: judgement call, a change to the same PIN is refused locally). Sent once.

        Raises:
            InvalidConsentPin, InvalidRequest: nothing sent.
            ConsentPinMismatch: ``old_pin`` is wrong; nothing changed.
            OutcomeUnknown: the change may have taken effect: :meth:`verify_pin` with the new PIN tells.
        """
        old = normalize_consent_pin(old_pin, "old_pin")
        new = normalize_consent_pin(new_pin, "new_pin")
        if old == new:
            raise InvalidRequest("new_pin must differ from old_pin")
        await self._call(
            "POST",
            R.PATH_PIN_CHANGE,
            "consent_pin_change",
            once=True,
            checks_pin=True,
            headers=self._headers(oid, partner_user_id),
            json={"old": old, "new": new},
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def reset_pin(
        self,
        *,
        oid: str | None = None,
        partner_user_id: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> ConsentPinReset:
        """Start a guided reset of a forgotten consent PIN: ``POST /abdm/v1/consents/pin/forgot/init`` sends an
        OTP to the patient's mobile (once); the flow (a
        :class:`~health_async.resources.abdm._consent_pin.ConsentPinReset`) is at ``VERIFY_OTP``. Then
        ``verify_otp(otp)`` (``pin/forgot/verify``) -> ``SET_PIN``, ``set_pin(new_pin)`` (``pin/reset``) -> ``DONE``.
        Its ``otp_sent`` says where the OTP went (hidden from ``repr``) and for how long it is valid.

        ``oid`` / ``partner_user_id`` apply to every call of the flow and are kept in its state; ``clock`` (epoch
        seconds) is for tests.

        Raises:
            AbhaRateLimited, AbhaBlocked, AbhaError: the service refused.
            OutcomeUnknown: an OTP may have been sent; there is no flow: start a new one (the OTP of a lost answer
                cannot be used without its transaction).
        """
        headers = {"oid": oid, "partner_user_id": partner_user_id}
        data = await self._call(
            "POST",
            R.PATH_PIN_FORGOT_INIT,
            "consent_pin_forgot_init",
            once=True,
            headers=self._headers(oid, partner_user_id),
        )
        sent = PinOtpSent() if data is None else structure(data, PinOtpSent)
        if not sent.txn_id:
            raise ResponseValidationError("consent_pin_forgot_init: the service answered without a transaction id")
        return ConsentPinReset(
            self, txn_id=sent.txn_id, step=PinResetStep.VERIFY_OTP, headers=headers, sent=sent, clock=clock
        )

    @checked
    def resume_pin_reset(
        self, state: Mapping[str, Any] | str, *, seal: bytes | None = None, clock: Callable[[], float] | None = None
    ) -> ConsentPinReset:
        """Rebuild a PIN reset from its ``to_state()`` (nothing is sent); with ``seal=key`` from its sealed
        ``str``. Raises :class:`~health_async.errors.InvalidRequest` naming the field of a state that is not one;
        :class:`~health_async.errors.FlowStateInvalid` / ``FlowStateExpired`` for a sealed one."""
        return resume(self, state, seal=seal, clock=clock)

    # -------------------------------------------------------------------- plumbing

    async def _forgot_verify(
        self, txn_id: str, otp: str, *, oid: str | None = None, partner_user_id: str | None = None
    ) -> None:
        """``POST /abdm/v1/consents/pin/forgot/verify`` (the reset flow's step; its input checked there)."""
        await self._call(
            "POST",
            R.PATH_PIN_FORGOT_VERIFY,
            "consent_pin_forgot_verify",
            once=True,
            checks_otp=True,
            headers=self._headers(oid, partner_user_id),
            json={"txn_id": txn_id, "otp": otp},
        )

    async def _reset(self, pin: str, *, oid: str | None = None, partner_user_id: str | None = None) -> None:
        """``POST /abdm/v1/consents/pin/reset`` (the reset flow's last step; the PIN checked there)."""
        await self._call(
            "POST",
            R.PATH_PIN_RESET,
            "consent_pin_reset",
            once=True,
            headers=self._headers(oid, partner_user_id),
            json={"pin": pin},
        )

    async def _pin_check(
        self,
        pin: str,
        scope: PinScope,
        operation: str,
        headers: dict[str, str],
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> None:
        """The PIN check before ``operation``; an unknown outcome says that ``operation`` was not sent."""
        try:
            await self._call(
                "POST",
                R.PATH_PIN_VERIFY,
                "consent_pin_verify",
                once=True,
                checks_pin=True,
                headers=headers,
                json={"pin": pin, "scope": scope.value},
                retry=retry,
                timeout=timeout,
            )
        except OutcomeUnknown as exc:
            raise OutcomeUnknown(
                f"{operation}: the consent PIN check may or may not have been answered; {operation} was NOT sent. "
                "Calling it again is safe",
                operation="consent_pin_verify",
            ) from (exc.__cause__ or exc)

    async def _call(
        self,
        method: str,
        path: str,
        operation: str,
        *,
        once: bool,
        checks_otp: bool = False,
        checks_pin: bool = False,
        unknown: Callable[[], OutcomeUnknown] | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
        **kwargs: Any,
    ) -> Any:
        """One request: sent once (``once``), or read (retried, except on HTTP 500); its error answer typed (see
        :func:`_refusal`: a definite refusal is raised as such, never as an unknown outcome); an unknown outcome
        raised as ``unknown()`` when given."""
        try:
            if once:
                return await self._send_once(method, path, operation=operation, retry=retry, timeout=timeout, **kwargs)
            policy = not_on_500(pick(retry, self._session.config.retry))
            return await self._session.request(
                method, path, operation=operation, idempotent=True, retry=policy, timeout=timeout, **kwargs
            )
        except OutcomeUnknown as exc:
            cause = exc.__cause__
            if isinstance(cause, ApiError):
                mapped = _refusal(cause, operation, checks_otp=checks_otp, checks_pin=checks_pin)
                if isinstance(mapped, AbhaError) and settled(mapped):
                    raise mapped from None
            if unknown is None:
                raise
            raise unknown() from (cause or exc)
        except ApiError as exc:
            mapped = _refusal(exc, operation, checks_otp=checks_otp, checks_pin=checks_pin)
            if mapped is exc:
                raise
            raise mapped from None
