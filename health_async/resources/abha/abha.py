"""``client.abha``: ABHA (health account) registration and login, one method per endpoint (milestone 1).

Registration with Aadhaar::

    init = await client.abha.aadhaar_init("2345 6789 0124")               # OTP to the Aadhaar-linked mobile
    step = await client.abha.aadhaar_verify(init.txn_id, "123456", mobile="98765 43210")
    if step.skip_state is SkipState.CONFIRM_MOBILE_OTP:                   # not the Aadhaar-linked mobile
        step = await client.abha.aadhaar_mobile_verify(step.txn_id, "654321")
    if step.abha_profiles:                                                # already has ABHA addresses
        step = await client.abha.auto_login(step.txn_id, step.abha_profiles[0].abha_address)
    else:
        step = await client.abha.aadhaar_create(step.txn_id, "nisha.sharma@abdm")
    assert step.done and step.token

Registration with a mobile number: ``mobile_init`` -> ``mobile_verify`` -> ``mobile_create`` (with a
:class:`NewAbhaProfile`). Login: ``login_init`` (by ABHA address, ABHA number, mobile or Aadhaar) ->
``login_verify`` -> ``login_phr`` (``abha_select``) or ``auto_login`` (``abha_create`` with profiles).

**Checked before sending** (an :class:`~health_async.errors.InvalidRequest` subclass naming the rule, never the
value; nothing is sent): OTPs (:func:`normalize_otp`), mobile numbers (:func:`~health_async._mobile.normalize_mobile`),
Aadhaar numbers, ABHA addresses (:func:`normalize_abha_address`), ABHA numbers and transaction ids.

**Never repeated.** Every call that sends an OTP (``aadhaar_init``, the resends, ``mobile_init``, ``login_init``),
checks one (the verifies) or creates or logs in (``aadhaar_create``, ``mobile_create``, ``auto_login``,
``login_phr``) goes through :meth:`Resource._send_once`: retried only when it cannot have reached the service, and
when its outcome is unknown (a timeout or reset after sending, a 5XX without the ABHA error body) it raises
:class:`~health_async.errors.OutcomeUnknown` instead. ``address_exists``, ``suggest_addresses`` and
``login_methods`` are reads, retried as any read.

**Errors.** Every documented refusal is an :class:`~health_async.errors.AbhaError`: a wrong OTP is an
:class:`~health_async.errors.OtpMismatch` (the step is unchanged: ask again), too many requests or OTPs an
:class:`~health_async.errors.AbhaRateLimited` (wait 30 minutes), a block an :class:`~health_async.errors.AbhaBlocked`
(24 hours). ABDM answers the last two with HTTP 500; they are never retried.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, Unpack

from ... import _routes as R
from ..._aadhaar import normalize_aadhaar
from ..._abha_input import (
    ABHA_ADDRESS_SUFFIXES,
    OTP_LENGTH,
    AbhaHeaders,
    normalize_abha_address,
    normalize_abha_number,
    normalize_otp,
    normalize_txn_id,
)
from ..._checks import checked
from ..._config import NOT_GIVEN
from ..._mobile import normalize_mobile
from ..._routes import (
    PATH_AADHAAR_CREATE,
    PATH_AADHAAR_MOBILE_RESEND,
    PATH_AADHAAR_MOBILE_VERIFY,
    PATH_AADHAAR_RESEND,
    PATH_AADHAAR_VERIFY,
    PATH_AUTO_LOGIN,
    PATH_LOGIN_INIT,
    PATH_LOGIN_METHODS,
    PATH_LOGIN_PHR,
    PATH_LOGIN_VERIFY,
    PATH_MOBILE_CREATE,
    PATH_MOBILE_INIT,
    PATH_MOBILE_RESEND,
    PATH_MOBILE_VERIFY,
    PATH_PHR_CHECK,
    PATH_SUGGEST,
)
from ..._wire import structure
from ...errors import InvalidRequest
from ...models import AadhaarInit, AbhaStep, LoginMethod, LoginMethods, NewAbhaProfile, OtpSent, OtpSystem
from ...models.abha._registration import parse_exists, parse_suggestions
from . import _flows as _abha_flow
from ._base import AbhaBase, AbhaOptions
from ._flows import AadhaarRegistration, AbhaFlow, AbhaLogin, MobileRegistration
from ._kyc import AbhaKycMixin
from ._profile import AbhaProfileMixin
from ._scan_share import ScanShareMixin

__all__ = [
    "ABHA_ADDRESS_SUFFIXES",
    "OTP_LENGTH",
    "Abha",
    "normalize_abha_address",
    "normalize_abha_number",
    "normalize_otp",
    "normalize_txn_id",
]


def _login_identifier(method: LoginMethod, identifier: str) -> str:
    if method is LoginMethod.PHR_ADDRESS:
        return normalize_abha_address(identifier)
    if method is LoginMethod.MOBILE:
        if not isinstance(identifier, str):
            raise InvalidRequest("identifier must be a str")
        return normalize_mobile(identifier, name="identifier")
    if method is LoginMethod.AADHAAR_NUMBER:
        return normalize_aadhaar(identifier)
    if method is LoginMethod.ABHA_NUMBER:
        return normalize_abha_number(identifier)
    if not isinstance(identifier, str) or not identifier.isascii() or not identifier.isdigit():
        raise InvalidRequest("identifier must be the index (digits) of a search answer for method 'search'")
    return identifier


def _enum(cls: Any, value: Any, name: str) -> Any:
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        known = ", ".join(m.value for m in cls)
        raise InvalidRequest(f"{name} must be one of {known}") from None


# ------------------------------------------------------------------------------------------------ the resource


class Abha(AbhaProfileMixin, AbhaKycMixin, ScanShareMixin, AbhaBase):
    """ABHA registration and login (``/abdm/na/v1/registration``, ``/abdm/na/v1/profile/login``).

    Every method takes the same optional keywords: ``user_id`` (``X-Pt-Id``), ``partner_user_id``
    (``X-Partner-Pt-Id``) and ``partner_hip_id`` (``X-Hip-Id``) default to the client's (``None`` leaves a header
    out: a brand-new user has no OID); ``encrypt`` (calls with a body) defaults to the client's ``encrypt``;
    ``retry`` and ``timeout`` override the client's for this call.
    """

    # -------------------------------------------------------------------- registration with Aadhaar

    @checked
    async def aadhaar_init(
        self,
        aadhaar_number: str,
        *,
        validate: bool = True,
        **options: Unpack[AbhaOptions],
    ) -> AadhaarInit:
        """``POST /abdm/na/v1/registration/aadhaar/init``: send an OTP to the mobile linked to the Aadhaar number.

        The number is checked before anything is sent: spaces and hyphens are stripped, then it must be 12
        digits, not start with 0 or 1, and end in a valid Verhoeff check digit. ``validate=False`` skips the
        digit rules for sandbox test numbers (separators are still stripped and only digits allowed).

        ``user_id`` (``X-Pt-Id``), ``partner_user_id`` (``X-Partner-Pt-Id``) and ``partner_hip_id``
        (``X-Hip-Id``) default to the client's; pass ``None`` to leave a header out (a brand-new user has no OID).
        ``encrypt`` defaults to the client's ``encrypt`` setting.

        Sends an SMS: never repeated once it may have reached the service (see the module docstring).

        Raises:
            InvalidAadhaarNumber: the number breaks a rule (the message names the rule, never the number).
            AbhaRateLimited: ``ABDM-1022`` / ``ABDM-1100``; AbhaBlocked: ``ABDM-1027``.
            AbhaError: any other refusal; ``source_code`` holds e.g. ``"ABDM-1006"``.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        number = normalize_aadhaar(aadhaar_number, validate=validate)
        data = await self._post(
            R.PATH_AADHAAR_INIT,
            "aadhaar_init",
            {"aadhaar_number": number},
            once=True,
            **options,
        )
        return structure(data, AadhaarInit)

    @checked
    async def aadhaar_resend(
        self,
        txn_id: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent:
        """``POST .../registration/aadhaar/resend``: send the Aadhaar OTP of ``txn_id`` again.

        Sends an SMS: never repeated. Too many sends in one transaction: :class:`AbhaRateLimited` (``ABDM-1100``).
        """
        data = await self._post(
            PATH_AADHAAR_RESEND,
            "aadhaar_resend",
            {"txn_id": normalize_txn_id(txn_id)},
            once=True,
            **options,
        )
        return structure(data, OtpSent)

    @checked
    async def aadhaar_verify(
        self,
        txn_id: str,
        otp: str,
        *,
        mobile: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST .../registration/aadhaar/verify``: check the Aadhaar OTP; ``mobile`` is the number the ABHA will
        be linked to (sent as 10 digits).

        The answer's :attr:`~AbhaStep.skip_state`: ``ABHA_CREATE`` when ``mobile`` is the Aadhaar-linked one (with
        :attr:`~AbhaStep.abha_profiles` when the person already has ABHA addresses: ``auto_login``), or
        ``CONFIRM_MOBILE_OTP`` when it is another number: an OTP went to it, call :meth:`aadhaar_mobile_verify`.

        Raises:
            InvalidOtp, InvalidMobileNumber: nothing sent.
            OtpMismatch: wrong OTP; the step is unchanged, ask again.
            AbhaRateLimited: too many wrong OTPs (``ABDM-1100``): start again in 30 minutes.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body = {
            "txn_id": normalize_txn_id(txn_id),
            "otp": normalize_otp(otp),
            "mobile": normalize_mobile(mobile),
        }
        data = await self._post(
            PATH_AADHAAR_VERIFY,
            "aadhaar_verify",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    @checked
    async def aadhaar_mobile_verify(
        self,
        txn_id: str,
        otp: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST .../registration/aadhaar/mobile/verify``: check the OTP sent to the mobile number given to
        :meth:`aadhaar_verify` (after ``CONFIRM_MOBILE_OTP``). Next: ``ABHA_CREATE``.

        Raises the same as :meth:`aadhaar_verify`.
        """
        body = {"txn_id": normalize_txn_id(txn_id), "otp": normalize_otp(otp)}
        data = await self._post(
            PATH_AADHAAR_MOBILE_VERIFY,
            "aadhaar_mobile_verify",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    @checked
    async def aadhaar_mobile_resend(
        self,
        txn_id: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent:
        """``POST .../registration/aadhaar/mobile/resend``: send the mobile OTP of ``txn_id`` again (after
        ``CONFIRM_MOBILE_OTP``). Sends an SMS: never repeated."""
        data = await self._post(
            PATH_AADHAAR_MOBILE_RESEND,
            "aadhaar_mobile_resend",
            {"txn_id": normalize_txn_id(txn_id)},
            once=True,
            **options,
        )
        return structure(data, OtpSent)

    @checked
    async def aadhaar_create(
        self,
        txn_id: str,
        abha_address: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST .../registration/aadhaar/create-phr``: create the ABHA address ``abha_address`` (checked as a
        *new* address, see :func:`normalize_abha_address`). Next: ``ABHA_END`` with the user's tokens.

        Creates an account: never repeated. After :class:`OutcomeUnknown`, ask :meth:`address_exists` before
        trying again. An address already taken is an :class:`AbhaError` (``ABDM-1101``).
        """
        body = {"txn_id": normalize_txn_id(txn_id), "abha_address": normalize_abha_address(abha_address, new=True)}
        data = await self._post(
            PATH_AADHAAR_CREATE,
            "aadhaar_create",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    @checked
    async def auto_login(
        self,
        txn_id: str,
        abha_address: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST .../registration/aadhaar/auto-login``: log into an existing ABHA address of the person, one of
        the :attr:`~AbhaStep.abha_profiles` of an ``ABHA_CREATE`` answer, instead of creating a duplicate.
        Next: ``ABHA_END``. Never repeated (it opens a session)."""
        body = {"txn_id": normalize_txn_id(txn_id), "abha_address": normalize_abha_address(abha_address)}
        data = await self._post(
            PATH_AUTO_LOGIN,
            "auto_login",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    # -------------------------------------------------------------------- registration with a mobile number

    @checked
    async def mobile_init(
        self,
        mobile: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent:
        """``POST .../registration/mobile/init``: send an OTP to ``mobile`` (an Indian mobile number, sent as 10
        digits) to create an ABHA address without Aadhaar KYC. Sends an SMS: never repeated.

        Raises:
            InvalidMobileNumber: nothing sent.
        """
        data = await self._post(
            PATH_MOBILE_INIT,
            "mobile_init",
            {"mobile_number": normalize_mobile(mobile)},
            once=True,
            **options,
        )
        return structure(data, OtpSent)

    @checked
    async def mobile_resend(
        self,
        txn_id: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent:
        """``POST .../registration/mobile/resend``: send the mobile OTP of ``txn_id`` again. Never repeated."""
        data = await self._post(
            PATH_MOBILE_RESEND,
            "mobile_resend",
            {"txn_id": normalize_txn_id(txn_id)},
            once=True,
            **options,
        )
        return structure(data, OtpSent)

    @checked
    async def mobile_verify(
        self,
        txn_id: str,
        otp: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST .../registration/mobile/verify``: check the mobile OTP. Next: ``ABHA_CREATE`` (with
        :attr:`~AbhaStep.abha_profiles` when ABHA addresses already use this mobile number).

        Raises the same as :meth:`aadhaar_verify`.
        """
        body = {"txn_id": normalize_txn_id(txn_id), "otp": normalize_otp(otp)}
        data = await self._post(
            PATH_MOBILE_VERIFY,
            "mobile_verify",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    @checked
    async def mobile_create(
        self,
        txn_id: str,
        abha_address: str,
        profile: NewAbhaProfile,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST .../registration/mobile/create-phr``: create the ABHA address ``abha_address`` (checked as a new
        address) with the person's details. Next: ``ABHA_END`` with the user's tokens (the answer has no txn id).

        Creates an account: never repeated; after :class:`OutcomeUnknown` ask :meth:`address_exists` first.
        """
        if not isinstance(profile, NewAbhaProfile):
            raise InvalidRequest("profile must be a NewAbhaProfile")
        body = {
            "txn_id": normalize_txn_id(txn_id),
            "abha_address": normalize_abha_address(abha_address, new=True),
            "profile": profile.to_wire(),
        }
        data = await self._post(
            PATH_MOBILE_CREATE,
            "mobile_create",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    # -------------------------------------------------------------------- helpers (reads)

    @checked
    async def address_exists(
        self,
        abha_address: str,
        **options: Unpack[AbhaOptions],
    ) -> bool:
        """``POST .../registration/phr/check``: True when the ABHA address is already taken.

        A read (retried as one). The address is checked with the rules of an existing address (a check may be
        about an old, short one); use ``normalize_abha_address(a, new=True)`` to check a candidate for creation.
        """
        data = await self._post(
            PATH_PHR_CHECK,
            "address_exists",
            {"abha_address": normalize_abha_address(abha_address)},
            once=False,
            **options,
        )
        return parse_exists(data)

    @checked
    async def suggest_addresses(
        self,
        txn_id: str,
        *,
        first_name: str | None = None,
        middle_name: str | None = None,
        last_name: str | None = None,
        date_of_birth: dt.date | None = None,
        **options: Unpack[AbhaOptions],
    ) -> tuple[str, ...]:
        """``GET .../registration/suggest``: ABHA addresses still free, built from the person's details (those
        of the transaction, and the names and date of birth given here). A read (retried as one).

        Judgement call: the names go in the query string, as the service defines it; they are never logged (the
        log names the route, not the URL).
        """
        params = [("transactionId", normalize_txn_id(txn_id))]
        for key, value, name in (
            ("fn", first_name, "first_name"),
            ("mn", middle_name, "middle_name"),
            ("ln", last_name, "last_name"),
        ):
            if value is not None:
                if not isinstance(value, str) or not value.strip():
                    raise InvalidRequest(f"{name} must be a non-empty str")
                params.append((key, value.strip()))
        if date_of_birth is not None:
            if not isinstance(date_of_birth, dt.date) or isinstance(date_of_birth, dt.datetime):
                raise InvalidRequest("date_of_birth must be a datetime.date")
            params.append(("dob", date_of_birth.isoformat()))
        data = await self._session.request(
            "GET",
            PATH_SUGGEST,
            operation="suggest_addresses",
            params=params,
            headers=self._headers(options),
            idempotent=True,
            retry=options.get("retry", NOT_GIVEN),
            timeout=options.get("timeout", NOT_GIVEN),
        )
        return parse_suggestions(data)

    # -------------------------------------------------------------------- login

    @checked
    async def login_methods(
        self,
        abha_address: str,
        **options: Unpack[AbhaOptions],
    ) -> LoginMethods:
        """``POST /abdm/na/v1/profile/login/methods``: how the ABHA address can log in. A read (retried as one)."""
        data = await self._post(
            PATH_LOGIN_METHODS,
            "login_methods",
            {"abha_address": normalize_abha_address(abha_address)},
            once=False,
            **options,
        )
        return structure(data, LoginMethods)

    @checked
    async def login_init(
        self,
        method: LoginMethod | str,
        identifier: str,
        *,
        otp_system: OtpSystem | str | None = None,
        txn_id: str | None = None,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent:
        """``POST /abdm/na/v1/profile/login/init``: send a login OTP for ``identifier``.

        ``method`` (a :class:`LoginMethod` or its wire value) says what ``identifier`` is, and it is checked as
        such: an ABHA address, a 14-digit ABHA number, an Indian mobile number, an Aadhaar number, or (``search``)
        the index of a search answer, which also needs that answer's ``txn_id``.

        ``otp_system``: who sends the OTP. Judgement call: it defaults to ``aadhaar`` for an Aadhaar number and to
        ``abdm`` otherwise (the schema gives no default and the Aadhaar route needs UIDAI's OTP).

        Sends an SMS: never repeated. Next: :meth:`login_verify`.
        """
        how: LoginMethod = _enum(LoginMethod, method, "method")
        system: OtpSystem
        if otp_system is None:
            system = OtpSystem.AADHAAR if how is LoginMethod.AADHAAR_NUMBER else OtpSystem.ABDM
        else:
            system = _enum(OtpSystem, otp_system, "otp_system")
        body: dict[str, Any] = {
            "method": how.value,
            "identifier": _login_identifier(how, identifier),
            "otp_system": system.value,
        }
        if txn_id is not None:
            body["txn_id"] = normalize_txn_id(txn_id)
        elif how is LoginMethod.SEARCH:
            raise InvalidRequest("method 'search' needs the txn_id of the search answer")
        data = await self._post(
            PATH_LOGIN_INIT,
            "login_init",
            body,
            once=True,
            **options,
        )
        return structure(data, OtpSent)

    @checked
    async def login_verify(
        self,
        txn_id: str,
        otp: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST /abdm/na/v1/profile/login/verify``: check the login OTP.

        Next, by method: ``ABHA_END`` (ABHA address: logged in), ``ABHA_SELECT`` (mobile or ABHA number: pick one
        of :attr:`~AbhaStep.abha_profiles` and call :meth:`login_phr`), ``ABHA_CREATE`` (Aadhaar: with profiles,
        :meth:`auto_login` into one; without, the person has no ABHA yet).

        Raises the same as :meth:`aadhaar_verify`.
        """
        body = {"txn_id": normalize_txn_id(txn_id), "otp": normalize_otp(otp)}
        data = await self._post(
            PATH_LOGIN_VERIFY,
            "login_verify",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    @checked
    async def login_phr(
        self,
        txn_id: str,
        phr_address: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep:
        """``POST /abdm/na/v1/profile/login/phr``: log into ``phr_address``, one of the
        :attr:`~AbhaStep.abha_profiles` of an ``ABHA_SELECT`` answer. Next: ``ABHA_END``. Never repeated."""
        body = {"txn_id": normalize_txn_id(txn_id), "phr_address": normalize_abha_address(phr_address)}
        data = await self._post(
            PATH_LOGIN_PHR,
            "login_phr",
            body,
            once=True,
            **options,
        )
        return structure(data, AbhaStep)

    # -------------------------------------------------------------------- guided flows (resources/abha/_flows.py)

    @checked
    async def register_with_aadhaar(
        self,
        aadhaar_number: str,
        *,
        validate: bool = True,
        resend_interval: float | None = None,
        max_resends: int | None = None,
        clock: Callable[[], float] | None = None,
        **options: Unpack[AbhaHeaders],
    ) -> AadhaarRegistration:
        """Start a guided Aadhaar registration: sends the OTP once (``aadhaar_init``); the flow's ``next_step``
        is ``VERIFY_OTP``. Then ``verify_otp(otp, mobile=...)``, ``verify_mobile_otp`` when asked, and
        ``create(abha_address)`` or ``choose()`` (the Aadhaar already holds ABHA addresses: never a duplicate).

        ``resend_interval`` (default 60 s: ABDM's OTP resend interval) and ``max_resends`` (default 2: ABDM locks a
        transaction after a few OTPs, ``ABDM-1100``) bound ``resend_otp``, refused locally with ``ResendTooSoon``.
        ``clock`` (epoch seconds; default ``time.time``) is for tests. The header options and ``encrypt`` apply to
        every call of the flow (and are kept in its state). See :mod:`health_async.resources.abha._flows`.

        Raises as :meth:`aadhaar_init`; on ``OutcomeUnknown`` there is no flow: ask the person whether an SMS came,
        and start again after ``resend_interval``.
        """
        return await _abha_flow.register_with_aadhaar(
            self,
            aadhaar_number,
            validate=validate,
            resend_interval=resend_interval,
            max_resends=max_resends,
            clock=clock,
            **options,
        )

    @checked
    async def register_with_mobile(
        self,
        mobile: str,
        *,
        resend_interval: float | None = None,
        max_resends: int | None = None,
        clock: Callable[[], float] | None = None,
        **options: Unpack[AbhaHeaders],
    ) -> MobileRegistration:
        """Start a guided mobile registration (no KYC): sends the OTP once (``mobile_init``); then
        ``verify_otp(otp)`` and ``create(abha_address, profile=NewAbhaProfile(...))``. Options as
        :meth:`register_with_aadhaar`."""
        return await _abha_flow.register_with_mobile(
            self,
            mobile,
            resend_interval=resend_interval,
            max_resends=max_resends,
            clock=clock,
            **options,
        )

    @checked
    async def login(
        self,
        method: LoginMethod | str,
        identifier: str,
        *,
        otp_system: OtpSystem | str | None = None,
        clock: Callable[[], float] | None = None,
        **options: Unpack[AbhaHeaders],
    ) -> AbhaLogin:
        """Start a guided login (``method``: ``phr_address``, ``mobile``, ``abha_number`` or ``aadhaar_number``):
        sends the OTP once (``login_init``); then ``verify_otp(otp)``, and ``choose(abha_address)`` when the flow
        asks (``SELECT_ACCOUNT``). The service has no login resend: start a new login instead."""
        return await _abha_flow.login(
            self,
            method,
            identifier,
            otp_system=otp_system,
            clock=clock,
            **options,
        )

    @checked
    def resume(
        self,
        state: Mapping[str, Any] | str,
        *,
        seal: bytes | None = None,
        clock: Callable[[], float] | None = None,
    ) -> AbhaFlow:
        """Rebuild a guided flow from its ``to_state()`` dict, in this or any other process; nothing is sent.
        :class:`~health_async.errors.InvalidRequest` (naming the field) when ``state`` is not one.

        A sealed state (``flow.to_state(seal=key)``, a ``str``) needs the same ``seal=key``;
        :class:`~health_async.errors.FlowStateInvalid` when it does not open (changed, truncated, another key),
        :class:`~health_async.errors.FlowStateExpired` past its ``max_age`` (on ``clock``, wall-clock seconds)."""
        return _abha_flow.resume(self, state, seal=seal, clock=clock)
