"""``client.hpr``: the Healthcare Professionals Registry (HPR, ABDM milestone 4), one method per operation of
``/abdm/nhpr/v1/hpr/aadhaar/...``.

A professional's HPR ID as a guided flow (:meth:`Hpr.register`: the steps, the rules and the resumable state are
:mod:`health_async.resources.registries._registration`'s)::

    reg = await client.hpr.register("2345 6789 0124")          # OTP to the Aadhaar-linked mobile
    await reg.verify_otp(otp)
    if await reg.verify_mobile("98765 43210") is HprRegistrationStep.VERIFY_MOBILE_OTP:
        await reg.verify_mobile_otp(mobile_otp)                # another number: its own OTP
    if await reg.check_exist() is HprRegistrationStep.CREATE:  # else DONE: reg.hpr_id is theirs already
        await reg.create((await reg.suggest())[0], password=password, email="asha@example.org",
                         hp_category_code=1, hp_sub_category_code=1)

or one call per operation, in the documented order (abdm-connect/flows/m4.mdx)::

    sent = await client.hpr.aadhaar_init("2345 6789 0124")                 # OTP to the Aadhaar-linked mobile
    step = await client.hpr.aadhaar_verify(sent.txn_id, "123456")
    check = await client.hpr.demo_verify(step.txn_id, "98765 43210")       # is it the Aadhaar-linked mobile?
    if not check.verified:                                                 # another number: its own OTP
        sent = await client.hpr.mobile_init(step.txn_id, "98765 43210")
        step = await client.hpr.mobile_verify(sent.txn_id, "654321")
    info = await client.hpr.check_exist(step.txn_id)
    if not info.exists:                                                    # else: done, skip the creation
        ids = await client.hpr.suggest(step.txn_id)
        account = await client.hpr.create(
            step.txn_id, ids.hpr_ids[0], password=password, email="asha@example.org",
            hp_category_code=1, hp_sub_category_code=1,
        )

**Checked before sending** (an :class:`~health_async.errors.InvalidRequest` subclass naming the rule, never the
value; nothing is sent): Aadhaar numbers (12 digits and the Verhoeff check digit), OTPs, mobile numbers,
transaction ids, HPR IDs, e-mail, the password (:mod:`health_async._registry_input`).

**Never repeated.** The calls that send an OTP (``aadhaar_init``, ``mobile_init``), check one (``aadhaar_verify``,
``mobile_verify``), check the mobile against the Aadhaar (``demo_verify``: a step of the transaction) or create
the account (``create``) go through :meth:`Resource._send_once`: retried only when they cannot have reached the
service; when their outcome is unknown they raise :class:`~health_async.errors.OutcomeUnknown`. ``check_exist``,
``check_available`` and ``suggest`` are reads, retried as any read.

**Errors.** The registry answers refusals with the ABHA error body (``GenericError``): they are
:class:`~health_async.errors.AbhaError` (a wrong OTP :class:`~health_async.errors.OtpMismatch`, a rate limit
:class:`~health_async.errors.AbhaRateLimited`, a block :class:`~health_async.errors.AbhaBlocked`).

**Secrets.** The Aadhaar number, the OTPs and the password are never logged, and never part of a ``repr`` or an
error message; the answers hide the transaction ids, names, mobile numbers and HPR IDs from their ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Unpack

from ... import _routes as R
from ..._aadhaar import normalize_aadhaar
from ..._abha_input import normalize_otp, normalize_txn_id
from ..._checks import checked
from ..._mobile import normalize_mobile
from ..._registry_input import check_password, normalize_hpr_id
from ...errors import InvalidRequest
from ...models.registries._hpr import (
    HprAccount,
    HprMobileCheck,
    HprOtpSent,
    HprProfile,
    HprStep,
    HprSuggestions,
    parse_hpr_available,
    parse_hpr_suggestions,
)
from .._flow import Clock
from . import _registration
from ._base import RegistryBase, RegistryOptions
from ._registration import HprRegistration

__all__ = ["Hpr"]

_EMAIL: Final = re.compile(r"[^@\s\x00-\x1f\x7f]{1,64}@[^@\s\x00-\x1f\x7f]{1,189}\.[^@\s\x00-\x1f\x7f.]{1,63}")
_PINCODE: Final = re.compile(r"[1-9][0-9]{5}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def _text(name: str, value: str, limit: int = 200) -> str:
    text = value.strip()
    if not text:
        raise InvalidRequest(f"{name} must not be empty")
    if len(text) > limit or _CONTROL.search(text):
        raise InvalidRequest(f"{name} must be at most {limit} characters, no control characters")
    return text


def _code(name: str, value: int) -> int:
    if value < 0:
        raise InvalidRequest(f"{name} must not be negative")
    return value


class Hpr(RegistryBase):
    """The professional registry (``/abdm/nhpr/v1/hpr/aadhaar/...``): a doctor's or nurse's HPR ID.

    Every method takes the same optional keywords: ``user_id`` (``X-Pt-Id``), ``partner_user_id``
    (``X-Partner-Pt-Id``) and ``partner_hip_id`` (``X-Hip-Id``) default to the client's (``None`` leaves a header
    out); ``encrypt`` defaults to the client's; ``retry`` and ``timeout`` override the client's for this call.
    """

    # -------------------------------------------------------------------- the guided flow

    @checked
    async def register(
        self,
        aadhaar_number: str,
        *,
        validate: bool = True,
        clock: Clock | None = None,
        **options: Unpack[RegistryOptions],
    ) -> HprRegistration:
        """Start a professional's guided HPR registration: send the OTP to the Aadhaar-linked mobile
        (:meth:`aadhaar_init`, once) and return the flow at ``VERIFY_OTP`` (an
        :class:`~health_async.resources.HprRegistration`; its steps, in the order of abdm-connect/flows/m4.mdx:
        ``verify_otp`` -> ``verify_mobile`` [-> ``verify_mobile_otp``] -> ``check_exist`` -> ``create``, or
        ``DONE`` at ``check_exist`` when the professional already holds an HPR ID).

        The Aadhaar number is checked as by :meth:`aadhaar_init` (``validate=False`` skips the digit rules) and
        kept nowhere. The partner headers and ``encrypt`` given here are kept by the flow (and its state) for
        each later step; ``retry`` and ``timeout`` apply to this call. ``clock``: the flow's wall clock (epoch
        seconds), for the sealed state's expiry.

        Raises what :meth:`aadhaar_init` raises; after :class:`~health_async.errors.OutcomeUnknown` there is no
        flow (no transaction came back): start again.
        """
        return await _registration.register(self, aadhaar_number, validate=validate, clock=clock, **options)

    @checked
    def resume(
        self, state: Mapping[str, Any] | str, *, seal: bytes | None = None, clock: Clock | None = None
    ) -> HprRegistration:
        """Rebuild a registration from its ``to_state()`` (nothing is sent): the dict, or with ``seal=key`` the
        sealed ``str`` (:meth:`HprRegistration.to_state <health_async.resources.HprRegistration.to_state>`), on
        any worker: one step per HTTP request of a web backend.

        Raises:
            InvalidRequest: not such a state (the field is named, never its value).
            FlowStateInvalid: a sealed state that does not open with ``seal`` (changed, another key or flow).
            FlowStateExpired: a sealed state past its expiry.
        """
        return _registration.resume(self, state, seal=seal, clock=clock)

    # -------------------------------------------------------------------- Aadhaar and mobile checks

    @checked
    async def aadhaar_init(
        self, aadhaar_number: str, *, validate: bool = True, **options: Unpack[RegistryOptions]
    ) -> HprOtpSent:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/init`` (``{"aadhaar"}``): send an OTP to the mobile linked to the
        Aadhaar number.

        The number is checked before anything is sent: spaces and hyphens stripped, 12 digits, not starting with 0
        or 1, a valid Verhoeff check digit; ``validate=False`` skips the digit rules (sandbox test numbers). It is
        never logged nor shown in an error.

        Sends an SMS: never repeated once it may have reached the service.

        Raises:
            InvalidAadhaarNumber: the number breaks a rule (the message names the rule); nothing sent.
            AbhaRateLimited, AbhaBlocked: ABDM's rate limits (``ABDM-1022``, ``ABDM-1100``, ``ABDM-1027``).
            AbhaError: any other refusal of the registry.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        number = normalize_aadhaar(aadhaar_number, validate=validate)
        return await self._send(
            R.PATH_HPR_AADHAAR_INIT,
            "hpr_aadhaar_init",
            {"aadhaar": number},
            HprOtpSent,
            "HPR Aadhaar OTP",
            once=True,
            **options,
        )

    @checked
    async def aadhaar_verify(self, txn_id: str, otp: str, **options: Unpack[RegistryOptions]) -> HprStep:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/verify`` (``{"otp", "txn_id"}``): check the Aadhaar OTP. Next:
        :meth:`demo_verify` with the professional's mobile number.

        Raises:
            InvalidOtp: not six digits; nothing sent.
            OtpMismatch: wrong OTP; the step is unchanged, ask again.
            AbhaError: an unknown or finished transaction, any other refusal.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body = {"otp": normalize_otp(otp), "txn_id": normalize_txn_id(txn_id)}
        return await self._send(
            R.PATH_HPR_AADHAAR_VERIFY, "hpr_aadhaar_verify", body, HprStep, "HPR Aadhaar verify", once=True, **options
        )

    @checked
    async def demo_verify(self, txn_id: str, mobile: str, **options: Unpack[RegistryOptions]) -> HprMobileCheck:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/demo/verify`` (``{"mobile_num", "txn_id"}``): whether ``mobile`` (an
        Indian mobile number, sent as 10 digits) is the one linked to the Aadhaar number. When the answer's
        ``verified`` is not true, confirm the number with :meth:`mobile_init` and :meth:`mobile_verify`.

        A step of the transaction: never repeated (judgement call: it is not a read of the vendor's list).

        Raises:
            InvalidMobileNumber: nothing sent.
            AbhaError: an unknown transaction, a call at the wrong step, any other refusal.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body = {"mobile_num": normalize_mobile(mobile), "txn_id": normalize_txn_id(txn_id)}
        return await self._send(
            R.PATH_HPR_DEMO_VERIFY, "hpr_demo_verify", body, HprMobileCheck, "HPR mobile check", once=True, **options
        )

    @checked
    async def mobile_init(self, txn_id: str, mobile: str, **options: Unpack[RegistryOptions]) -> HprOtpSent:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/mobile/init`` (``{"mobile_num", "txn_id"}``): send an OTP to
        ``mobile`` (a number other than the Aadhaar-linked one). Next: :meth:`mobile_verify`.

        The vendor answers this one without the ``{data, success}`` envelope of the others; both forms are read.
        Sends an SMS: never repeated.

        Raises:
            InvalidMobileNumber: nothing sent.
            AbhaRateLimited: too many OTPs; AbhaError: any other refusal.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body = {"mobile_num": normalize_mobile(mobile), "txn_id": normalize_txn_id(txn_id)}
        return await self._send(
            R.PATH_HPR_MOBILE_INIT, "hpr_mobile_init", body, HprOtpSent, "HPR mobile OTP", once=True, **options
        )

    @checked
    async def mobile_verify(self, txn_id: str, otp: str, **options: Unpack[RegistryOptions]) -> HprStep:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/mobile/verify`` (``{"otp", "txnId"}``: the vendor spells this one's
        transaction id ``txnId``): check the OTP sent by :meth:`mobile_init`.

        Raises the same as :meth:`aadhaar_verify`.
        """
        body = {"otp": normalize_otp(otp), "txnId": normalize_txn_id(txn_id)}
        return await self._send(
            R.PATH_HPR_MOBILE_VERIFY, "hpr_mobile_verify", body, HprStep, "HPR mobile verify", once=True, **options
        )

    # -------------------------------------------------------------------- the HPR ID

    @checked
    async def check_exist(
        self, txn_id: str, *, mobile: str | None = None, **options: Unpack[RegistryOptions]
    ) -> HprProfile:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/check/exist`` (``{"txn_id", "mobile_num"}``): the professional's
        details and whether they already hold an HPR ID (:attr:`~health_async.models.HprProfile.exists`: then
        skip the creation). ``mobile`` is sent when given. A read (retried as one).

        Raises:
            InvalidMobileNumber: nothing sent.
            AbhaError: an unknown transaction, any other refusal.
        """
        return await self._send(
            R.PATH_HPR_CHECK_EXIST,
            "hpr_check_exist",
            self._txn_body(txn_id, mobile),
            HprProfile,
            "HPR info",
            once=False,
            **options,
        )

    @checked
    async def check_available(self, hpr_id: str, **options: Unpack[RegistryOptions]) -> bool:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/check/available`` (``{"hprId"}``): True when the HPR ID is still free.
        A read (retried as one). After :meth:`create` raised ``OutcomeUnknown``, ask this first: an ID no longer
        free most likely was created.

        Raises:
            InvalidRequest: a malformed HPR ID; nothing sent.
            AbhaError: a refusal.
        """
        body = {"hprId": normalize_hpr_id(hpr_id)}
        data = await self._post(R.PATH_HPR_CHECK_AVAILABLE, "hpr_check_available", body, once=False, **options)
        return parse_hpr_available(data)

    @checked
    async def suggest(
        self, txn_id: str, *, mobile: str | None = None, **options: Unpack[RegistryOptions]
    ) -> HprSuggestions:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/suggest`` (``{"txn_id", "mobile_num"}``): HPR IDs still free, built
        from the professional's details. ``mobile`` is sent when given. A read (retried as one).

        Raises:
            InvalidMobileNumber: nothing sent.
            AbhaError: an unknown transaction, any other refusal.
        """
        data = await self._post(
            R.PATH_HPR_SUGGEST, "hpr_suggest", self._txn_body(txn_id, mobile), once=False, **options
        )
        return parse_hpr_suggestions(data)

    @checked
    async def create(
        self,
        txn_id: str,
        hpr_id: str,
        *,
        password: str,
        email: str,
        hp_category_code: int,
        hp_sub_category_code: int,
        first_name: str | None = None,
        middle_name: str | None = None,
        last_name: str | None = None,
        pincode: str | None = None,
        profile_photo: str | None = None,
        role: int | None = None,
        council: bool | None = None,
        domain_name: str | None = None,
        id_type: str | None = None,
        notify_user: bool | None = None,
        source_type: str | None = None,
        **options: Unpack[RegistryOptions],
    ) -> HprAccount:
        """``POST /abdm/nhpr/v1/hpr/aadhaar/create`` (``NhprEKACreateHPRID``): create the HPR ID ``hpr_id`` (one of
        :meth:`suggest`'s, or your own) for the verified professional of ``txn_id``.

        Sent under the vendor's names: ``txnId``, ``hprId``, ``password``, ``email``, ``hp_category_code``,
        ``hp_sub_category_code`` always; ``first_name``, ``middle_name``, ``last_name``, ``pincode``,
        ``profile_photo`` (base64), ``role``, ``council``, ``domain_name``, ``id_type``, ``notify_user`` and
        ``source_type`` when given. Judgement call: the schema marks no field required; the ones required here are
        those an account cannot be made without (the transaction, the ID, its password and e-mail, the
        professional's category), the names come from the Aadhaar KYC when not given.

        ``password`` is the account's password: checked (non-empty, at most 128 characters, no control
        characters) but never logged, never in an error message, never in a ``repr``.

        Creates an account: never repeated. After :class:`~health_async.errors.OutcomeUnknown`, ask
        :meth:`check_available` (or :meth:`check_exist`) before trying again.

        Raises:
            InvalidRequest: a field breaks its rule (named, never shown); nothing sent.
            AbhaError: the HPR ID is taken, the transaction unknown or not verified, any other refusal.
            OutcomeUnknown: the request may have reached the service; it was not repeated.
        """
        body: dict[str, Any] = {
            "txnId": normalize_txn_id(txn_id),
            "hprId": normalize_hpr_id(hpr_id),
            "password": check_password(password),
            "email": _email(email),
            "hp_category_code": _code("hp_category_code", hp_category_code),
            "hp_sub_category_code": _code("hp_sub_category_code", hp_sub_category_code),
        }
        for key, text in (
            ("first_name", first_name),
            ("middle_name", middle_name),
            ("last_name", last_name),
            ("domain_name", domain_name),
            ("id_type", id_type),
            ("source_type", source_type),
        ):
            if text is not None:
                body[key] = _text(key, text)
        if pincode is not None:
            if not _PINCODE.fullmatch(pincode):
                raise InvalidRequest("pincode must be an Indian PIN code: 6 digits, not starting with 0")
            body["pincode"] = pincode
        if profile_photo is not None:
            if not profile_photo or _CONTROL.search(profile_photo):
                raise InvalidRequest("profile_photo must be non-empty base64 text")
            body["profile_photo"] = profile_photo
        if role is not None:
            body["role"] = _code("role", role)
        if council is not None:
            body["council"] = council
        if notify_user is not None:
            body["notify_user"] = notify_user
        return await self._send(
            R.PATH_HPR_CREATE, "hpr_create", body, HprAccount, "HPR ID creation", once=True, **options
        )

    # -------------------------------------------------------------------- machinery

    @staticmethod
    def _txn_body(txn_id: str, mobile: str | None) -> dict[str, str]:
        body = {"txn_id": normalize_txn_id(txn_id)}
        if mobile is not None:
            body["mobile_num"] = normalize_mobile(mobile)
        return body


def _email(value: str) -> str:
    text = value.strip()
    if not _EMAIL.fullmatch(text):
        raise InvalidRequest("email must be an e-mail address (name@domain.tld)")
    return text
