"""The KYC upgrade and the user-session flows of ``client.abha``, on the ABHA flow machinery
(:mod:`health_async.resources.abha._flows`).

KYC upgrade (an ABHA address created with a mobile OTP is not KYC-verified; the vendor's ``phr/profile.mdx``)::

    kyc = await client.abha.kyc("aadhaar", "2345 6789 0124", user_id=oid)   # OTP to the Aadhaar-linked mobile
    await kyc.verify_otp("123456")                                          # kyc.resend_otp() for another one
    assert kyc.next_step is FlowStep.DONE and kyc.result.status is KycStatus.VERIFIED

User session with the ABHA Gateway (``session/*.mdx``: it expires, and the service then answers HTTP 491)::

    status = await client.abha.session_status(user_id=oid)                 # check first, as the vendor asks
    if not status.logged_in:
        session = await client.abha.session("nisha.sharma@abdm", user_id=oid)   # mobile OTP
        await session.verify_otp("123456")
        token = session.token                                               # an AbhaSessionToken: a secret

**Inputs.** ``kyc/init`` takes ``method`` (:class:`~health_async.models.KycMethod`: ``abha-number`` or
``aadhaar``) and ``identifier`` (the 14-digit ABHA number or the 12-digit Aadhaar number), and optionally the
user's ABHA token (``user_token``, wire ``user_x_token``: the ``token`` of a login or of a session); the user is
named by ``X-Pt-Id`` as in every call. ``session/init`` takes the ABHA address (``InitRequestType4``: the session is
tied to it; the OTP goes to its mobile). ``session/status`` needs ``X-Pt-Id`` (its page says so): refused locally
without one.

**The flows** are :class:`~health_async.resources.KycUpgrade` and :class:`~health_async.resources.AbhaSession`:
``next_step``, calls out of step refused with nothing sent, one call at a time, resend limits and intervals
(``ResendTooSoon``; the session has no resend), ``BLOCKED`` after ``AbhaRateLimited`` / ``AbhaBlocked``,
``to_state()`` / ``to_state(seal=key)`` and ``client.abha.resume(state)``, exactly as the registration flows.

**Never repeated.** ``kyc_init``, ``kyc_resend``, ``kyc_verify``, ``session_init`` and ``session_verify`` send or
check an OTP: sent once (:meth:`Resource._send_once`), never retried once they may have reached the service,
whatever the retry policy says; an unknown outcome is :class:`~health_async.errors.OutcomeUnknown`.
``session_status`` is a read, retried as one except on HTTP 500 (ABDM answers its rate limits with a 500).

**Errors** as every ABHA call: a wrong OTP is :class:`~health_async.errors.OtpMismatch` (the step is unchanged:
ask again), ``ABDM-1022`` / ``ABDM-1100`` :class:`~health_async.errors.AbhaRateLimited`, ``ABDM-1027``
:class:`~health_async.errors.AbhaBlocked`, any other ABHA error body an :class:`~health_async.errors.AbhaError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Unpack, cast

from ... import _routes as R
from ..._aadhaar import normalize_aadhaar
from ..._abha_input import AbhaHeaders, normalize_abha_address, normalize_abha_number, normalize_otp, normalize_txn_id
from ..._checks import checked
from ..._config import NOT_GIVEN, pick
from ..._wire import structure
from ...errors import InvalidRequest
from ...models.abha._kyc import AbhaSessionToken, KycMethod, KycResult, SessionStatus
from ...models.abha._registration import OtpSent
from ..abdm._errors import not_on_500, typed_refusals
from . import _flows as _abha_flow
from ._base import AbhaBase, AbhaOptions
from ._flows import AbhaSession, KycUpgrade, normalize_user_token

__all__ = ["AbhaKycMixin"]


def _method(value: KycMethod | str) -> KycMethod:
    if isinstance(value, KycMethod):
        return value
    try:
        return KycMethod(value)
    except ValueError:
        raise InvalidRequest(f"method must be one of {', '.join(m.value for m in KycMethod)}") from None


class AbhaKycMixin(AbhaBase):
    """Part of :class:`~health_async.resources.Abha` (see the module): the KYC upgrade (``/abdm/v1/profile/kyc``)
    and the user session (``/abdm/v1/session``)."""

    # -------------------------------------------------------------------- KYC upgrade

    @checked
    async def kyc_init(
        self,
        method: KycMethod | str,
        identifier: str,
        *,
        user_token: str | None = None,
        validate: bool = True,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent:
        """``POST /abdm/v1/profile/kyc/init``: start the KYC upgrade of the user's ABHA; an OTP goes to the
        mobile of the identifier (the Aadhaar-linked one for ``aadhaar``).

        ``method`` (a :class:`~health_async.models.KycMethod` or its wire value) says what ``identifier`` is, and
        it is checked as such before anything is sent: a 14-digit ABHA number (hyphens and spaces stripped), or
        an Aadhaar number (12 digits, Verhoeff check digit; ``validate=False`` skips the digit rules for sandbox
        numbers). ``user_token`` (wire ``user_x_token``) is the user's ABHA token, when the app holds one.

        Sends an SMS: never repeated (see the module docstring). Next: :meth:`kyc_verify`.

        Raises:
            InvalidRequest, InvalidAadhaarNumber: nothing sent (the message names the rule, never the value).
            AbhaRateLimited, AbhaBlocked: ABDM's rate limit or block; AbhaError: any other refusal.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        how = _method(method)
        if how is KycMethod.AADHAAR:
            number = normalize_aadhaar(identifier, validate=validate)
        else:
            number = normalize_abha_number(identifier)
        body: dict[str, Any] = {"method": how.value, "identifier": number}
        if user_token is not None:
            body["user_x_token"] = normalize_user_token(user_token)
        data = await self._once(R.PATH_KYC_INIT, "kyc_init", body, checks_otp=False, **options)
        return structure(data, OtpSent)

    @checked
    async def kyc_resend(self, txn_id: str, **options: Unpack[AbhaOptions]) -> OtpSent:
        """``POST /abdm/v1/profile/kyc/resend``: send the KYC OTP of ``txn_id`` again. Sends an SMS: never
        repeated. Too many sends in one transaction: :class:`~health_async.errors.AbhaRateLimited`
        (``ABDM-1100``)."""
        body = {"txn_id": normalize_txn_id(txn_id)}
        data = await self._once(R.PATH_KYC_RESEND, "kyc_resend", body, checks_otp=False, **options)
        return structure(data, OtpSent)

    @checked
    async def kyc_verify(
        self,
        txn_id: str,
        otp: str,
        *,
        user_token: str | None = None,
        **options: Unpack[AbhaOptions],
    ) -> KycResult:
        """``POST /abdm/v1/profile/kyc/verify``: check the KYC OTP; on success the KYC is complete (a
        :class:`~health_async.models.KycResult`, status ``VERIFIED``). ``user_token`` as :meth:`kyc_init`.

        Raises:
            InvalidOtp, InvalidRequest: nothing sent.
            OtpMismatch: wrong OTP; the step is unchanged, ask again.
            AbhaRateLimited: too many wrong OTPs (``ABDM-1100``): start again in 30 minutes.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body = {"txn_id": normalize_txn_id(txn_id), "otp": normalize_otp(otp)}
        if user_token is not None:
            body["user_x_token"] = normalize_user_token(user_token)
        data = await self._once(R.PATH_KYC_VERIFY, "kyc_verify", body, checks_otp=True, **options)
        return structure(data, KycResult)

    # -------------------------------------------------------------------- user session

    @checked
    async def session_init(self, abha_address: str, **options: Unpack[AbhaOptions]) -> OtpSent:
        """``POST /abdm/v1/session/init``: start a user session with the ABHA Gateway for ``abha_address``
        (checked as an existing ABHA address); a mobile OTP goes to its mobile. Sends an SMS: never repeated.
        Next: :meth:`session_verify`.

        Raises:
            InvalidAbhaAddress: nothing sent. AbhaError: e.g. ``ABDM-1012`` (no such address).
            AbhaRateLimited, AbhaBlocked; OutcomeUnknown: the request may have reached the service.
        """
        body = {"abha_address": normalize_abha_address(abha_address)}
        data = await self._once(R.PATH_SESSION_INIT, "session_init", body, checks_otp=False, **options)
        return structure(data, OtpSent)

    @checked
    async def session_verify(self, txn_id: str, otp: str, **options: Unpack[AbhaOptions]) -> AbhaSessionToken:
        """``POST /abdm/v1/session/verify``: check the session OTP; returns the user's session token (an
        :class:`~health_async.models.AbhaSessionToken`: secrets, hidden from ``repr``). Raises as
        :meth:`kyc_verify`."""
        body = {"txn_id": normalize_txn_id(txn_id), "otp": normalize_otp(otp)}
        data = await self._once(R.PATH_SESSION_VERIFY, "session_verify", body, checks_otp=True, **options)
        return structure(data, AbhaSessionToken)

    @checked
    async def session_status(self, **options: Unpack[AbhaOptions]) -> SessionStatus:
        """``GET /abdm/v1/session/status``: whether the user (``X-Pt-Id``) has a live ABHA Gateway session, and
        whether their ABHA is KYC-verified (:class:`~health_async.models.SessionStatus`). Check it before
        starting a session: while ``logged_in`` is true the existing token stays usable.

        ``X-Pt-Id`` is required by the service: :class:`~health_async.errors.InvalidRequest` (nothing sent)
        without a ``user_id`` here or on the client. A read, retried as one, except on HTTP 500 (judgement call:
        ABDM answers its rate limits with a 500, and a retry would extend them).

        Raises:
            AbhaRateLimited, AbhaBlocked, AbhaError: ABDM's refusal.
        """
        self._required_user_id(options.get("user_id", NOT_GIVEN))
        policy = not_on_500(pick(options.get("retry", NOT_GIVEN), self._session.config.retry))
        read = self._session.request(
            "GET",
            R.PATH_SESSION_STATUS,
            operation="session_status",
            headers=self._headers(options),
            idempotent=True,
            retry=policy,
            timeout=options.get("timeout", NOT_GIVEN),
        )
        return structure(await typed_refusals(read, "session_status"), SessionStatus)

    # -------------------------------------------------------------------- guided flows

    @checked
    async def kyc(
        self,
        method: KycMethod | str,
        identifier: str,
        *,
        user_token: str | None = None,
        validate: bool = True,
        resend_interval: float | None = None,
        max_resends: int | None = None,
        clock: Callable[[], float] | None = None,
        **options: Unpack[AbhaHeaders],
    ) -> KycUpgrade:
        """Start a guided KYC upgrade: sends the OTP once (:meth:`kyc_init`, same checks); the flow's
        ``next_step`` is ``VERIFY_OTP``. Then ``verify_otp(otp)`` (``resend_otp()`` for another OTP) -> ``DONE``,
        with ``result`` (a :class:`~health_async.models.KycResult`, status ``VERIFIED``).

        ``resend_interval`` (default 60 s) and ``max_resends`` (default 2) bound ``resend_otp``, refused locally
        with ``ResendTooSoon``; ``clock`` (epoch seconds) is for tests; the header options and ``encrypt`` apply to
        every call of the flow and are kept in its state. ``user_token`` is kept in memory, and in the state only
        when sealed (see :class:`~health_async.resources.KycUpgrade`).

        Raises as :meth:`kyc_init`; on ``OutcomeUnknown`` there is no flow: ask the person whether an SMS came,
        and start again after ``resend_interval``.
        """
        return await _abha_flow.kyc_upgrade(
            cast("_abha_flow.AbhaCalls", self),  # this mixin only ever lives in Abha
            method,
            identifier,
            user_token=user_token,
            validate=validate,
            resend_interval=resend_interval,
            max_resends=max_resends,
            clock=clock,
            **options,
        )

    @checked
    async def session(
        self,
        abha_address: str,
        *,
        clock: Callable[[], float] | None = None,
        **options: Unpack[AbhaHeaders],
    ) -> AbhaSession:
        """Start a guided user session with the ABHA Gateway for ``abha_address``: sends the mobile OTP once
        (:meth:`session_init`); then ``verify_otp(otp)`` -> ``DONE``, with ``token`` (an
        :class:`~health_async.models.AbhaSessionToken`). ``await session.status()`` reads the user's session at
        any step. The service has no resend: start a new session instead. Options as :meth:`kyc`.

        Judgement call: the session is started from the ABHA address, as ``session/init`` defines it (its
        ``abha_address``); the OTP goes to the mobile of that address.
        """
        return await _abha_flow.user_session(cast("_abha_flow.AbhaCalls", self), abha_address, clock=clock, **options)

    # -------------------------------------------------------------------- plumbing

    async def _once(
        self,
        path: str,
        operation: str,
        body: Mapping[str, Any],
        *,
        checks_otp: bool,
        **options: Unpack[AbhaOptions],
    ) -> Any:
        """``_post(..., once=True)`` with ABHA error bodies typed
        (:func:`~health_async.resources.abdm._errors.typed_refusals`): a definite refusal (a wrong OTP, a rate limit,
        a block) is raised as such, never as an unknown outcome."""
        return await typed_refusals(
            self._post(path, operation, body, once=True, **options), operation, checks_otp=checks_otp
        )
