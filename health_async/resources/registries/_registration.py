"""A professional's HPR registration as a guided flow (``client.hpr.register(aadhaar_number)``), on the machinery
every guided flow shares (:class:`~health_async.resources._flow.GuidedFlow`), in the order of
abdm-connect/flows/m4.mdx: "Get Aadhaar OTP -> Verify Aadhaar OTP -> Verify Mobile", then "Get HPR Info -> HPR ID
exists? Yes: done, skip creation; No: Suggest IDs -> Create HPR".

=====================  ============================================================================================
step                   what it expects
=====================  ============================================================================================
``VERIFY_OTP``         ``verify_otp(otp)``: the OTP sent to the Aadhaar-linked mobile (``aadhaar/verify``)
``VERIFY_MOBILE``      ``verify_mobile(mobile)`` (``demo/verify``): the Aadhaar-linked mobile -> ``CHECK_EXIST``;
                       another number gets its own OTP at once (``mobile/init``) -> ``VERIFY_MOBILE_OTP``
``VERIFY_MOBILE_OTP``  ``verify_mobile_otp(otp)`` (``mobile/verify``) -> ``CHECK_EXIST``
``CHECK_EXIST``        ``check_exist()`` (``check/exist``, a read): the professional holds an HPR ID -> ``DONE``
                       (:attr:`HprRegistration.existed`), else -> ``CREATE``
``CREATE``             ``create(hpr_id, password=..., email=..., hp_category_code=..., hp_sub_category_code=...)``
                       -> ``DONE``; ``suggest()`` (a read) offers free HPR IDs, ``check_available(hpr_id)`` asks
                       about one
``DONE``               nothing: :attr:`HprRegistration.hpr_id` is the professional's HPR ID
``BLOCKED``            nothing: ABDM refused with a rate limit or a block; a new flow after ``blocked_until``
=====================  ============================================================================================

Every method sends at most what its step needs, so a web backend can run one step per HTTP request, keeping the
flow between requests with :meth:`HprRegistration.to_state` and ``client.hpr.resume(state)``.

Rules (those of every guided flow, :mod:`health_async.resources._flow`):

* **Nothing sent out of step**, nor while another call of the same flow is in flight:
  :class:`~health_async.errors.InvalidFlowStep`. Bad input is refused before anything is sent, by the rules of the
  ``client.hpr`` methods (:class:`~health_async.errors.InvalidRequest` subclasses naming the rule, never the value).
* **OTPs and changes sent once.** A wrong OTP (:class:`~health_async.errors.OtpMismatch`) leaves the flow at its
  step: ask again. :class:`~health_async.errors.AbhaRateLimited` / :class:`~health_async.errors.AbhaBlocked` move it
  to ``BLOCKED``. Any other refusal leaves the step as it was.
* **Outcome unknown** (:class:`~health_async.errors.OutcomeUnknown`: the request may have reached the service):

  - from the Aadhaar OTP that starts the flow: there is no flow (no transaction came back); start again.
  - from a verify: the flow stays at its step; calling it again is safe (an OTP check creates nothing; if the
    service says the transaction moved on, start a new flow).
  - from ``verify_mobile``, whose second request (``mobile/init``, the OTP to another number) may be the lost
    one: the flow stays at ``VERIFY_MOBILE``; calling it again asks ``demo/verify`` again (and, for another
    number, sends a new OTP). If the service answers that the transaction has moved on (an OTP went out with the
    lost answer), start a new flow.
  - from ``create``: **never retried**. The flow records it (:attr:`HprRegistration.create_outcome_unknown`, kept
    in the state); the next ``create`` first asks ``check/exist`` (a read): when the professional now holds an HPR
    ID the lost create took effect, nothing more is sent and the flow is ``DONE`` with that ID (``create`` returns
    an :class:`~health_async.models.HprAccount` built from ``check/exist``'s answer, ``new`` left ``None``:
    judgement call, the registry's answer names the account, so it is returned rather than raised as an error);
    when not, the create is sent.

**State.** :meth:`HprRegistration.to_state` is a plain JSON-able dict: ``version`` (1), ``kind``
(``hpr_registration``), ``step`` (a :class:`~health_async.models.HprRegistrationStep` value), ``revision``
(incremented at every change), ``txn_id`` (the registry's transaction), ``hint`` (where the last OTP went, the
mobile masked by the service), ``existed``, ``create_outcome_unknown``, ``blocked_until``, ``headers`` /
``encrypt`` (the options the flow was started with). It **never** holds the Aadhaar number, an OTP, the mobile
number or the password (the password is an argument of ``create`` only, sent once and forgotten). The sealed form
(``to_state(seal=key)``, :mod:`health_async._seal`, under this family's own purpose) adds ``secrets.hpr_id`` once
``DONE`` (the professional's identifier: personal data, never in a plain state), so a flow resumed from it knows its
:attr:`~HprRegistration.hpr_id`. The ``txn_id`` lets whoever holds the state continue the registration: keep the
plain dict server-side, or seal it.

Judgement call: m4.mdx also charts a "Mobile Login (alternative entry)": Get Mobile OTP -> Verify Mobile OTP ->
Check if HPR is available. registration.yml has no operation that sends a mobile OTP outside an Aadhaar
transaction (``mobile/init`` takes the Aadhaar transaction's ``txn_id``), so there is no such entry here; the one
step of it that exists on its own is ``client.hpr.check_available``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping
from typing import Any, ClassVar, Final, Protocol, Unpack, overload

from ..._abha_input import normalize_txn_id
from ..._logging import logger
from ..._registry_input import normalize_hpr_id
from ...errors import InvalidRequest, OutcomeUnknown
from ...models.registries._hpr import (
    HprAccount,
    HprMobileCheck,
    HprOtpSent,
    HprProfile,
    HprRegistrationStep,
    HprStep,
    HprSuggestions,
)
from .._flow import (
    DEFAULT_STATE_MAX_AGE,
    Clock,
    GuidedFlow,
    call_options,
    field,
    flow_options,
    headers_field,
    open_state,
    secrets_of,
    time_field,
)
from ._base import RegistryOptions

__all__ = ["STATE_VERSION", "HprCalls", "HprRegistration", "register", "resume"]

#: Version of the :meth:`HprRegistration.to_state` layout.
STATE_VERSION: Final = 1
#: What a sealed HPR registration state is for: no other flow's sealed state opens as one, nor the reverse.
_SEAL_PURPOSE: Final = b"health_async.hpr_flow_state"

Step = HprRegistrationStep

_EXPECTED: Final[dict[HprRegistrationStep, str]] = {
    Step.VERIFY_OTP: "verify_otp, with the OTP sent to the Aadhaar-linked mobile",
    Step.VERIFY_MOBILE: "verify_mobile, with the professional's mobile number",
    Step.VERIFY_MOBILE_OTP: "verify_mobile_otp, with the OTP sent to that mobile number",
    Step.CHECK_EXIST: "check_exist",
    Step.CREATE: "create (suggest and check_available help)",
    Step.DONE: "nothing more: the flow is finished (see its hpr_id)",
    Step.BLOCKED: "nothing more: ABDM refused (rate limit or block); start a new flow after blocked_until",
}


class HprCalls(Protocol):
    """The calls of :class:`~health_async.resources.Hpr` the flow makes, declared here so that this module does not
    import the resource that imports it (``Hpr`` satisfies it; mypy checks each place it is passed)."""

    async def aadhaar_init(
        self, aadhaar_number: str, *, validate: bool = True, **options: Unpack[RegistryOptions]
    ) -> HprOtpSent: ...

    async def aadhaar_verify(self, txn_id: str, otp: str, **options: Unpack[RegistryOptions]) -> HprStep: ...

    async def demo_verify(self, txn_id: str, mobile: str, **options: Unpack[RegistryOptions]) -> HprMobileCheck: ...

    async def mobile_init(self, txn_id: str, mobile: str, **options: Unpack[RegistryOptions]) -> HprOtpSent: ...

    async def mobile_verify(self, txn_id: str, otp: str, **options: Unpack[RegistryOptions]) -> HprStep: ...

    async def check_exist(
        self, txn_id: str, *, mobile: str | None = None, **options: Unpack[RegistryOptions]
    ) -> HprProfile: ...

    async def check_available(self, hpr_id: str, **options: Unpack[RegistryOptions]) -> bool: ...

    async def suggest(
        self, txn_id: str, *, mobile: str | None = None, **options: Unpack[RegistryOptions]
    ) -> HprSuggestions: ...

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
        **options: Unpack[RegistryOptions],
    ) -> HprAccount: ...


class HprRegistration(GuidedFlow[HprRegistrationStep]):
    """A professional's guided HPR registration (see the module): ``verify_otp`` -> ``verify_mobile`` [->
    ``verify_mobile_otp``] -> ``check_exist`` -> ``create`` (unless they hold an HPR ID already). Every method
    first checks :attr:`next_step` (and raises :class:`~health_async.errors.InvalidFlowStep`, nothing sent, when
    the call does not fit). ``repr`` shows the step only."""

    kind: ClassVar[str] = "hpr_registration"
    _expected: ClassVar[Mapping[HprRegistrationStep, str]] = _EXPECTED
    _seal_purpose: ClassVar[bytes] = _SEAL_PURPOSE
    _log_name: ClassVar[str] = "hpr flow"

    def __init__(
        self,
        hpr: HprCalls,
        *,
        txn_id: str,
        step: HprRegistrationStep,
        hint: str | None = None,
        hpr_id: str | None = None,
        existed: bool = False,
        create_outcome_unknown: bool = False,
        headers: Mapping[str, str | None] | None = None,
        encrypt: bool | None = None,
        clock: Clock | None = None,
        blocked_until: float | None = None,
        revision: int = 0,
    ) -> None:
        """Not called directly: use ``client.hpr.register`` (or ``client.hpr.resume``)."""
        super().__init__(step=step, clock=clock or time.time, blocked_until=blocked_until, revision=revision)
        self._hpr = hpr
        self._txn_id = txn_id
        self._hint = hint
        self._hpr_id = hpr_id
        self._existed = existed
        self._create_outcome_unknown = create_outcome_unknown
        self._headers: dict[str, str | None] = dict(headers or {})
        self._encrypt = encrypt
        self._profile: HprProfile | None = None
        self._account: HprAccount | None = None

    # -------------------------------------------------------------------- what the caller reads

    @property
    def hint(self) -> str | None:
        """The service's text saying where the last OTP went, the mobile number masked (``******3210``)."""
        return self._hint

    @property
    def hpr_id(self) -> str | None:
        """The professional's HPR ID once ``DONE`` (created now, or held already: :attr:`existed`); ``None`` before,
        and in a flow resumed at ``DONE`` from a plain state (only a sealed one keeps it)."""
        return self._hpr_id

    @property
    def existed(self) -> bool:
        """True when the flow ended at ``check/exist``: the professional already held an HPR ID (no creation)."""
        return self._existed

    @property
    def profile(self) -> HprProfile | None:
        """The professional's details from ``check/exist`` (names, the registry's category), in this process only:
        a resumed flow has ``None`` (the state keeps no personal details)."""
        return self._profile

    @property
    def account(self) -> HprAccount | None:
        """The :class:`~health_async.models.HprAccount` once ``create`` answered, in this process only."""
        return self._account

    @property
    def create_outcome_unknown(self) -> bool:
        """True after a ``create`` whose outcome is unknown: the next ``create`` asks ``check/exist`` first."""
        return self._create_outcome_unknown

    # -------------------------------------------------------------------- the steps

    async def verify_otp(self, otp: str) -> HprRegistrationStep:
        """Check the Aadhaar OTP (``VERIFY_OTP``, ``aadhaar/verify``, sent once); returns the new :attr:`next_step`
        (``VERIFY_MOBILE``).

        Raises:
            InvalidFlowStep: not at ``VERIFY_OTP``; nothing sent.
            InvalidOtp: not 6 digits; nothing sent.
            OtpMismatch: wrong OTP: the flow stays at ``VERIFY_OTP``, ask again.
            AbhaRateLimited, AbhaBlocked: the flow is now ``BLOCKED``.
            OutcomeUnknown: the flow stays at its step; calling again is safe.
        """
        self._expect("verify_otp", Step.VERIFY_OTP)
        txn_id = self._txn_id
        answer = await self._run(lambda: self._hpr.aadhaar_verify(txn_id, otp, **self._options()))
        self._follow(answer.txn_id, answer.hint)
        self._set_step(Step.VERIFY_MOBILE)
        return Step.VERIFY_MOBILE

    async def verify_mobile(self, mobile: str) -> HprRegistrationStep:
        """Give the professional's mobile number (``VERIFY_MOBILE``): ``demo/verify`` asks whether it is the
        Aadhaar-linked one (-> ``CHECK_EXIST``); when it is not, an OTP goes to it at once (``mobile/init``) ->
        ``VERIFY_MOBILE_OTP``. Both are sent once. The number is not kept (nor in the state).

        Raises:
            InvalidFlowStep: not at ``VERIFY_MOBILE``; nothing sent.
            InvalidMobileNumber: nothing sent.
            AbhaRateLimited, AbhaBlocked: the flow is now ``BLOCKED``.
            OutcomeUnknown: the flow stays at ``VERIFY_MOBILE``; call it again (see the module).
        """
        self._expect("verify_mobile", Step.VERIFY_MOBILE)
        txn_id = self._txn_id
        check = await self._run(lambda: self._hpr.demo_verify(txn_id, mobile, **self._options()))
        if check.verified is True:
            self._follow(check.txn_id, self._hint)
            self._set_step(Step.CHECK_EXIST)
            return Step.CHECK_EXIST
        txn_id = check.txn_id or txn_id
        sent = await self._run(lambda: self._hpr.mobile_init(txn_id, mobile, **self._options()))
        self._follow(sent.txn_id, sent.hint)
        self._set_step(Step.VERIFY_MOBILE_OTP)
        return Step.VERIFY_MOBILE_OTP

    async def verify_mobile_otp(self, otp: str) -> HprRegistrationStep:
        """Check the OTP sent to the mobile number given to :meth:`verify_mobile` (``VERIFY_MOBILE_OTP``,
        ``mobile/verify``); returns the new :attr:`next_step` (``CHECK_EXIST``). Raises as :meth:`verify_otp`."""
        self._expect("verify_mobile_otp", Step.VERIFY_MOBILE_OTP)
        txn_id = self._txn_id
        answer = await self._run(lambda: self._hpr.mobile_verify(txn_id, otp, **self._options()))
        self._follow(answer.txn_id, answer.hint)
        self._set_step(Step.CHECK_EXIST)
        return Step.CHECK_EXIST

    async def check_exist(self) -> HprRegistrationStep:
        """Whether the verified professional already holds an HPR ID (``CHECK_EXIST``, ``check/exist``, a read):
        yes -> ``DONE`` (:attr:`hpr_id`, :attr:`existed`: nothing is created), no -> ``CREATE``. Their details are
        :attr:`profile`. Returns the new :attr:`next_step`.

        Raises:
            InvalidFlowStep: not at ``CHECK_EXIST``; nothing sent.
            AbhaError: a refusal; the step is unchanged (asking again is safe).
        """
        self._expect("check_exist", Step.CHECK_EXIST)
        profile = await self._read_profile()
        if profile.exists:
            self._end(profile, existed=True)
            return Step.DONE
        self._set_step(Step.CREATE)
        return Step.CREATE

    async def suggest(self) -> tuple[str, ...]:
        """HPR IDs still free for the professional (``CREATE``, ``suggest``, a read); changes nothing."""
        self._expect("suggest", Step.CREATE)
        txn_id = self._txn_id
        found = await self._run(lambda: self._hpr.suggest(txn_id, **self._options()))
        return found.hpr_ids

    async def check_available(self, hpr_id: str) -> bool:
        """True when ``hpr_id`` is still free (``CREATE``, ``check/available``, a read); changes nothing."""
        self._expect("check_available", Step.CREATE)
        return await self._run(lambda: self._hpr.check_available(hpr_id, **self._options()))

    async def create(
        self,
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
    ) -> HprAccount:
        """Create the HPR ID ``hpr_id`` (``CREATE``, ``aadhaar/create``, sent once and never repeated); returns the
        :class:`~health_async.models.HprAccount` (the flow is ``DONE``, :attr:`hpr_id` set).

        ``password`` (the account's), ``email`` and the registry's category codes are required; the names default
        to the Aadhaar KYC's; every field is checked before anything is sent, as by ``client.hpr.create``. The
        password is sent once and kept nowhere (neither the flow nor its state; never in a ``repr``, a log line or
        an error).

        An HPR ID already taken is an :class:`~health_async.errors.AbhaError` (the flow stays at ``CREATE``: pick
        another).

        Raises:
            OutcomeUnknown: the create may have taken effect; it is not repeated. The flow records it
                (:attr:`create_outcome_unknown`) and the next ``create`` asks ``check/exist`` before sending
                anything (see the module).
            AbhaRateLimited: the flow is now ``BLOCKED``.
        """
        self._expect("create", Step.CREATE)
        self._busy_check("create")
        if self._create_outcome_unknown:
            profile = await self._read_profile()
            if profile.exists:
                logger.info("hpr flow: the create with an unknown outcome took effect (check/exist holds it)")
                self._end(profile, existed=False)
                self._account = HprAccount(
                    hpr_id=profile.hpr_id,
                    hpr_id_number=profile.hpr_id_number,
                    name=profile.name,
                    first_name=profile.first_name,
                    middle_name=profile.middle_name,
                    last_name=profile.last_name,
                    mobile=profile.mobile,
                    category_id=profile.category_id,
                    sub_category_id=profile.sub_category_id,
                )
                return self._account
            logger.info("hpr flow: the create with an unknown outcome did not take effect; creating now")
            self._create_outcome_unknown = False
            self._revision += 1
        txn_id = self._txn_id

        def call() -> Awaitable[HprAccount]:
            return self._hpr.create(
                txn_id,
                hpr_id,
                password=password,
                email=email,
                hp_category_code=hp_category_code,
                hp_sub_category_code=hp_sub_category_code,
                first_name=first_name,
                middle_name=middle_name,
                last_name=last_name,
                pincode=pincode,
                **self._options(),
            )

        try:
            account = await self._run(call)
        except (OutcomeUnknown, asyncio.CancelledError):
            # cancelled while in flight: the account may have been created too (re-raised, never swallowed)
            self._create_outcome_unknown = True
            self._revision += 1
            raise
        self._account = account
        self._existed = False
        self._hpr_id = account.hpr_id or normalize_hpr_id(hpr_id)
        self._create_outcome_unknown = False
        self._set_step(Step.DONE)
        return account

    # -------------------------------------------------------------------- state

    @overload
    def to_state(self) -> dict[str, Any]: ...
    @overload
    def to_state(self, *, seal: bytes, max_age: float = DEFAULT_STATE_MAX_AGE) -> str: ...

    def to_state(self, *, seal: bytes | None = None, max_age: float = DEFAULT_STATE_MAX_AGE) -> dict[str, Any] | str:
        """The flow as a plain JSON-able dict (the layout is in the module docstring: no Aadhaar number, OTP,
        mobile number or password), for the backend to keep **server-side**; rebuild it with
        ``client.hpr.resume(state)``.

        With ``seal=key`` (16, 24 or 32 secret bytes), the same dict (plus the HPR ID once ``DONE``) sealed: a
        cookie-safe ``str``, encrypted and authenticated (AES-GCM), that expires ``max_age`` seconds from now
        (default 30 minutes; the flow's clock). Rebuild it with ``client.hpr.resume(state, seal=key)``; a changed,
        truncated or foreign one is :class:`~health_async.errors.FlowStateInvalid`, an expired one
        :class:`~health_async.errors.FlowStateExpired`.
        """
        return super().to_state() if seal is None else super().to_state(seal=seal, max_age=max_age)

    def _state(self) -> dict[str, Any]:
        return {
            **self._state_head(STATE_VERSION),
            "txn_id": self._txn_id,
            "hint": self._hint,
            "existed": self._existed,
            "create_outcome_unknown": self._create_outcome_unknown,
            "blocked_until": self._blocked_until,
            "headers": dict(self._headers),
            "encrypt": self._encrypt,
        }

    def _sealed_only(self) -> dict[str, Any]:
        return {} if self._hpr_id is None else {"secrets": {"hpr_id": self._hpr_id}}

    # -------------------------------------------------------------------- machinery

    def _blocked_step(self) -> HprRegistrationStep:
        return Step.BLOCKED

    def _options(self) -> dict[str, Any]:
        return call_options(self._headers, self._encrypt)

    def _follow(self, txn_id: str | None, hint: str | None) -> None:
        """The transaction (and OTP hint) an answer carries on with; none given: the flow's goes on."""
        if txn_id:
            self._txn_id = txn_id
        self._hint = hint

    async def _read_profile(self) -> HprProfile:
        txn_id = self._txn_id
        profile = await self._run(lambda: self._hpr.check_exist(txn_id, **self._options()))
        self._profile = profile
        self._follow(profile.txn_id, self._hint)
        return profile

    def _end(self, profile: HprProfile, *, existed: bool) -> None:
        self._hpr_id = profile.hpr_id or profile.hpr_id_number
        self._existed = existed
        self._create_outcome_unknown = False
        self._set_step(Step.DONE)


# ------------------------------------------------------------------------------------------------ starting


async def register(
    hpr: HprCalls,
    aadhaar_number: str,
    *,
    validate: bool = True,
    clock: Clock | None = None,
    **options: Unpack[RegistryOptions],
) -> HprRegistration:
    """Start a registration: send the Aadhaar OTP (``aadhaar/init``, once); the flow is at ``VERIFY_OTP``. See
    ``Hpr.register``. ``retry`` and ``timeout`` apply to this first call only; the partner headers and ``encrypt``
    are kept by the flow (and its state) for every later call."""
    headers, encrypt = flow_options({k: v for k, v in options.items() if k not in ("retry", "timeout")})
    sent = await hpr.aadhaar_init(aadhaar_number, validate=validate, **options)
    return HprRegistration(
        hpr, txn_id=sent.txn_id, step=Step.VERIFY_OTP, hint=sent.hint, headers=headers, encrypt=encrypt, clock=clock
    )


# ------------------------------------------------------------------------------------------------ resuming


def resume(
    hpr: HprCalls, state: Mapping[str, Any] | str, *, seal: bytes | None = None, clock: Clock | None = None
) -> HprRegistration:
    """Rebuild a flow from :meth:`HprRegistration.to_state` (nothing is sent): its dict, or with ``seal=key`` its
    sealed ``str``. Raises :class:`~health_async.errors.InvalidRequest` naming the field when the state is not one
    (never its value); :class:`~health_async.errors.FlowStateInvalid` / :class:`~health_async.errors.FlowStateExpired`
    for a sealed one that does not open or has expired."""
    now = (clock or time.time)() if seal is not None else 0.0
    state, sealed = open_state(state, seal, purpose=_SEAL_PURPOSE, now=now, version=STATE_VERSION)
    if state.get("kind") != HprRegistration.kind:
        raise InvalidRequest(f"state.kind must be {HprRegistration.kind}")
    try:
        step = Step(state.get("step"))
    except ValueError:
        raise InvalidRequest("state.step must be an HprRegistrationStep value") from None
    txn_id = field(state, "txn_id", str)
    normalize_txn_id(txn_id)
    hpr_id = secrets_of(state, sealed=sealed).get("hpr_id")
    return HprRegistration(
        hpr,
        txn_id=txn_id,
        step=step,
        hint=field(state, "hint", str, optional=True),
        hpr_id=hpr_id,
        existed=bool(field(state, "existed", bool, optional=True)),
        create_outcome_unknown=bool(field(state, "create_outcome_unknown", bool, optional=True)),
        headers=headers_field(state),
        encrypt=field(state, "encrypt", bool, optional=True),
        clock=clock,
        blocked_until=time_field(state, "blocked_until"),
        revision=field(state, "revision", int, optional=True) or 0,
    )
