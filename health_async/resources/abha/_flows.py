"""Guided ABHA flows: registration with Aadhaar, registration with a mobile number, and login, each a small state
machine over the endpoint methods of :class:`~health_async.resources.abha.abha.Abha`.

A flow knows what comes next (:attr:`AbhaFlow.next_step`, a :class:`~health_async.models.FlowStep`) and follows
the service's ``skip_state`` exactly as the vendor's milestone-1 charts say:

========================  ==========================================================================================
flow                      steps
========================  ==========================================================================================
Aadhaar registration      ``VERIFY_OTP`` (``aadhaar_verify``) -> ``VERIFY_MOBILE_OTP`` when the mobile given is not
                          the Aadhaar-linked one (``aadhaar_mobile_verify``) -> ``CREATE_ADDRESS``
                          (``aadhaar_create``), or ``SELECT_ACCOUNT`` (``auto_login``) when the answer lists the
                          person's existing ``abha_profiles``: never a duplicate -> ``DONE``
mobile registration       ``VERIFY_OTP`` (``mobile_verify``) -> ``CREATE_ADDRESS`` (``mobile_create``; when the
                          mobile already holds ABHA addresses, ``choose`` = ``auto_login`` is offered too) -> ``DONE``
login                     ``VERIFY_OTP`` (``login_verify``) -> ``DONE`` (by ABHA address), ``SELECT_ACCOUNT``
                          (``login_phr``: mobile, ABHA number) or (``auto_login``: Aadhaar, ``abha_create`` with
                          profiles) -> ``DONE``
KYC upgrade               ``VERIFY_OTP`` (``kyc_verify``; ``resend_otp``: ``kyc_resend``) -> ``DONE`` (its ``result``)
user session              ``VERIFY_OTP`` (``session_verify``; no resend) -> ``DONE`` (its ``token``)
========================  ==========================================================================================

Rules every flow keeps:

* **Nothing sent out of step.** A call that does not fit :attr:`~AbhaFlow.next_step` raises
  :class:`~health_async.errors.InvalidFlowStep` naming the step the flow expects; so does a second call on the same
  flow object while one is in flight (a double click would send a second OTP). Bad input is refused before
  anything is sent, as by the endpoint methods.
* **Never a duplicate OTP, never a block.** A wrong OTP (:class:`~health_async.errors.OtpMismatch`) leaves the flow
  at its step: ask again. :meth:`~AbhaFlow.resend_otp` is refused locally with
  :class:`~health_async.errors.ResendTooSoon` (nothing sent) sooner than ``resend_interval`` after the last send
  (default 60 s: ABDM's OTP resend interval, the countdown of its own screens) or after ``max_resends`` resends of
  the same OTP (default 2: ABDM locks a transaction after a few OTPs, ``ABDM-1100``, for 30 minutes).
  :class:`~health_async.errors.AbhaRateLimited` / :class:`~health_async.errors.AbhaBlocked` from any call propagate
  (with ``try_again_after``) and move the flow to the terminal ``BLOCKED`` step (``blocked_until`` says when to
  start a new flow).
* **Outcome unknown** (:class:`~health_async.errors.OutcomeUnknown`: the request may have reached the service):

  - from the OTP send that starts a flow: there is no flow (no transaction id came back). Ask the person whether
    an SMS arrived; either way start a new flow, after ``resend_interval`` (the OTP of the lost answer cannot be
    used without its transaction).
  - from :meth:`~AbhaFlow.resend_otp`: the flow stays at its step, counts the resend as sent, and
    :attr:`~AbhaFlow.send_outcome_unknown` is True. Ask the person: type the newest OTP that arrived (the one
    before still works if no new one came), or ask for another resend when allowed.
  - from a verify or :meth:`~AbhaFlow.choose`: the flow stays at its step; calling it again is safe (an OTP check
    or a login creates nothing). If the service answers that the transaction has moved on, start a new flow.
  - from :meth:`~AbhaFlow.create`: the flow records it. Before it ever sends a create again it asks
    ``address_exists`` about that address: if the address now exists the account was most likely created, and
    :class:`AccountLikelyCreated` is raised (step ``LOG_IN``: log in with the address) instead of a second
    create; if it does not, the create is sent (and logged as such).
* **State kept server-side.** :meth:`~AbhaFlow.to_state` is a plain JSON-able dict, without OTPs or tokens, from
  which ``client.abha.resume(state)`` rebuilds the flow on any worker: one step per HTTP request of a backend.

Timestamps use an injectable ``clock`` (default :func:`time.time`: wall-clock seconds, because the state moves
between processes and machines; a monotonic clock would mean nothing on another worker).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, TypeVar, Unpack, overload

from ..._abha_input import AbhaHeaders, normalize_abha_address, normalize_txn_id
from ..._config import finite
from ..._logging import logger
from ...errors import (
    AbhaRateLimited,
    AccountLikelyCreated,
    InvalidFlowStep,
    InvalidRequest,
    OutcomeUnknown,
    ResendTooSoon,
    ResponseValidationError,
)
from ...models.abha._kyc import AbhaSessionToken, KycMethod, KycResult, SessionStatus
from ...models.abha._registration import (
    AadhaarInit,
    AbhaAccount,
    AbhaProfileSummary,
    AbhaStep,
    FlowStep,
    LoginMethod,
    NewAbhaProfile,
    OtpSent,
    OtpSystem,
    SkipState,
)
from .._flow import DEFAULT_STATE_MAX_AGE, Clock, GuidedFlow, call_options, flow_options, headers_field, open_state
from .._flow import field as _field
from .._flow import secrets_of as _secrets_of
from .._flow import time_field as _time
from ._base import AbhaOptions

if TYPE_CHECKING:
    import datetime as dt

__all__ = [
    "DEFAULT_MAX_RESENDS",
    "DEFAULT_RESEND_INTERVAL",
    "STATE_VERSION",
    "AadhaarRegistration",
    "AbhaFlow",
    "AbhaLogin",
    "AbhaSession",
    "Clock",
    "KycUpgrade",
    "MobileRegistration",
    "kyc_upgrade",
    "login",
    "register_with_aadhaar",
    "register_with_mobile",
    "resume",
    "user_session",
]

#: Seconds between two OTP sends of a flow: ABDM's OTP resend interval (its own screens count down 60 s).
DEFAULT_RESEND_INTERVAL: Final = 60.0
#: Resends of one OTP: ABDM allows only a few OTPs per transaction before ``ABDM-1100`` (30-minute lock-out).
DEFAULT_MAX_RESENDS: Final = 2
#: Version of the :meth:`AbhaFlow.to_state` layout.
STATE_VERSION: Final = 1
#: What a sealed flow state is for: a blob sealed for anything else never opens as one.
_SEAL_PURPOSE: Final = b"health_async.abha_flow_state"

_CHOOSE_VIA: Final = frozenset({"auto_login", "login_phr"})


# ------------------------------------------------------------------------------------------------ the flows

_EXPECTED: Final[dict[FlowStep, str]] = {
    FlowStep.VERIFY_OTP: "verify_otp (or resend_otp)",
    FlowStep.VERIFY_MOBILE_OTP: "verify_mobile_otp (or resend_otp)",
    FlowStep.CREATE_ADDRESS: "create (suggest_addresses helps)",
    FlowStep.SELECT_ACCOUNT: "choose, with one of the flow's accounts",
    FlowStep.DONE: "nothing more: the flow is finished (see its account)",
    FlowStep.LOG_IN: "nothing more: the address most likely exists; log in with it (client.abha.login)",
    FlowStep.BLOCKED: "nothing more: ABDM refused (rate limit or block); start a new flow after blocked_until",
}


def _check_limits(resend_interval: float | None, max_resends: int | None) -> tuple[float, int]:
    interval = finite(DEFAULT_RESEND_INTERVAL if resend_interval is None else resend_interval)
    count = DEFAULT_MAX_RESENDS if max_resends is None else max_resends
    if interval is None:
        raise InvalidRequest("resend_interval must be a finite number of seconds")
    if interval < 0:
        raise InvalidRequest("resend_interval must not be negative")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidRequest("max_resends must be an int >= 0")
    return interval, count


class AbhaCalls(Protocol):
    """The endpoint methods of :class:`~health_async.resources.Abha` that the flows call, declared here so that this
    module does not import the resource that imports it (``Abha`` satisfies it; mypy checks each place it is passed).
    """

    async def aadhaar_init(
        self,
        aadhaar_number: str,
        *,
        validate: bool = True,
        **options: Unpack[AbhaOptions],
    ) -> AadhaarInit: ...

    async def kyc_init(
        self,
        method: KycMethod | str,
        identifier: str,
        *,
        user_token: str | None = None,
        validate: bool = True,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent: ...

    async def login(
        self,
        method: LoginMethod | str,
        identifier: str,
        *,
        otp_system: OtpSystem | str | None = None,
        clock: Callable[[], float] | None = None,
        **options: Unpack[AbhaHeaders],
    ) -> AbhaLogin: ...

    async def login_init(
        self,
        method: LoginMethod | str,
        identifier: str,
        *,
        otp_system: OtpSystem | str | None = None,
        txn_id: str | None = None,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent: ...

    async def mobile_init(
        self,
        mobile: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent: ...

    def resume(
        self,
        state: Mapping[str, Any] | str,
        *,
        seal: bytes | None = None,
        clock: Callable[[], float] | None = None,
    ) -> AbhaFlow: ...

    async def session_init(self, abha_address: str, **options: Unpack[AbhaOptions]) -> OtpSent: ...

    async def aadhaar_create(
        self,
        txn_id: str,
        abha_address: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def aadhaar_mobile_resend(
        self,
        txn_id: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent: ...

    async def aadhaar_mobile_verify(
        self,
        txn_id: str,
        otp: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def aadhaar_resend(
        self,
        txn_id: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent: ...

    async def aadhaar_verify(
        self,
        txn_id: str,
        otp: str,
        *,
        mobile: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def address_exists(
        self,
        abha_address: str,
        **options: Unpack[AbhaOptions],
    ) -> bool: ...

    async def auto_login(
        self,
        txn_id: str,
        abha_address: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def kyc_resend(self, txn_id: str, **options: Unpack[AbhaOptions]) -> OtpSent: ...

    async def kyc_verify(
        self,
        txn_id: str,
        otp: str,
        *,
        user_token: str | None = None,
        **options: Unpack[AbhaOptions],
    ) -> KycResult: ...

    async def login_phr(
        self,
        txn_id: str,
        phr_address: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def login_verify(
        self,
        txn_id: str,
        otp: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def mobile_create(
        self,
        txn_id: str,
        abha_address: str,
        profile: NewAbhaProfile,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def mobile_resend(
        self,
        txn_id: str,
        **options: Unpack[AbhaOptions],
    ) -> OtpSent: ...

    async def mobile_verify(
        self,
        txn_id: str,
        otp: str,
        **options: Unpack[AbhaOptions],
    ) -> AbhaStep: ...

    async def session_status(self, **options: Unpack[AbhaOptions]) -> SessionStatus: ...

    async def session_verify(self, txn_id: str, otp: str, **options: Unpack[AbhaOptions]) -> AbhaSessionToken: ...

    async def suggest_addresses(
        self,
        txn_id: str,
        *,
        first_name: str | None = None,
        middle_name: str | None = None,
        last_name: str | None = None,
        date_of_birth: dt.date | None = None,
        **options: Unpack[AbhaOptions],
    ) -> tuple[str, ...]: ...


class AbhaFlow(GuidedFlow[FlowStep]):
    """A guided ABHA flow (base of :class:`AadhaarRegistration`, :class:`MobileRegistration`, :class:`AbhaLogin`).

    Start one with ``client.abha.register_with_aadhaar``, ``register_with_mobile`` or ``login``; continue one
    elsewhere with ``client.abha.resume(state)``. Every method first checks :attr:`next_step` (and raises
    :class:`~health_async.errors.InvalidFlowStep`, nothing sent, when the call does not fit). ``repr`` shows the
    step only. The machinery shared with the other guided flows is :class:`~health_async.resources._flow.GuidedFlow`.
    """

    #: What each step expects, for the message of a call out of step.
    _expected: ClassVar[Mapping[FlowStep, str]] = _EXPECTED
    _seal_purpose: ClassVar[bytes] = _SEAL_PURPOSE
    _log_name: ClassVar[str] = "abha flow"
    #: Why :meth:`resend_otp` is refused when the flow has no resend (:meth:`_can_resend` is False).
    _no_resend: ClassVar[str] = (
        "resend_otp: a login has no OTP resend (the service offers none); at VERIFY_OTP call verify_otp, "
        "or start a new login after the resend interval"
    )

    def __init__(
        self,
        abha: AbhaCalls,
        *,
        txn_id: str,
        step: FlowStep,
        clock: Clock | None = None,
        resend_interval: float | None = None,
        max_resends: int | None = None,
        hint: str | None = None,
        sent_at: float | None = None,
        resends: int = 0,
        accounts: tuple[AbhaProfileSummary, ...] = (),
        choose_via: str | None = None,
        login_method: LoginMethod | None = None,
        pending_create: str | None = None,
        send_outcome_unknown: bool = False,
        blocked_until: float | None = None,
        headers: Mapping[str, str | None] | None = None,
        encrypt: bool | None = None,
        revision: int = 0,
    ) -> None:
        """Not called directly: use the ``client.abha`` methods (or :func:`resume`)."""
        super().__init__(step=step, clock=clock or time.time, blocked_until=blocked_until, revision=revision)
        self._abha = abha
        self._resend_interval, self._max_resends = _check_limits(resend_interval, max_resends)
        self._txn_id = txn_id
        self._hint = hint
        self._sent_at = sent_at
        self._resends = resends
        self._accounts = accounts
        self._choose_via = choose_via
        self._login_method = login_method
        self._pending_create = pending_create
        self._send_outcome_unknown = send_outcome_unknown
        self._headers: dict[str, str | None] = dict(headers or {})
        self._encrypt = encrypt
        self._account: AbhaAccount | None = None

    # -------------------------------------------------------------------- what the caller reads

    @property
    def hint(self) -> str | None:
        """The service's text saying where the last OTP went, the mobile number masked (``******3210``)."""
        return self._hint

    @property
    def accounts(self) -> tuple[AbhaProfileSummary, ...]:
        """The person's existing ABHA addresses to :meth:`choose` from (``SELECT_ACCOUNT``; in a mobile
        registration also at ``CREATE_ADDRESS``); empty otherwise."""
        return self._accounts

    @property
    def account(self) -> AbhaAccount | None:
        """The :class:`~health_async.models.AbhaAccount` once ``DONE`` (in this process: a resumed flow and the
        state never hold the tokens)."""
        return self._account

    @property
    def send_outcome_unknown(self) -> bool:
        """True after a resend whose outcome is unknown (see the module docstring: ask the person)."""
        return self._send_outcome_unknown

    @property
    def create_outcome_unknown(self) -> bool:
        """True after a create whose outcome is unknown: the next :meth:`create` asks ``address_exists`` first."""
        return self._pending_create is not None

    @property
    def resends_left(self) -> int:
        """Resends of the current OTP still allowed (0 when the flow is not waiting for an OTP)."""
        if self._step not in (FlowStep.VERIFY_OTP, FlowStep.VERIFY_MOBILE_OTP) or not self._can_resend():
            return 0
        return max(0, self._max_resends - self._resends)

    def resend_available_in(self) -> float | None:
        """Seconds until :meth:`resend_otp` is allowed (0.0: now), or ``None`` when it will not be (no resends
        left, or the flow is not waiting for an OTP)."""
        if self.resends_left == 0:
            return None
        if self._sent_at is None:
            return 0.0
        return max(0.0, self._sent_at + self._resend_interval - self._clock())

    # -------------------------------------------------------------------- the steps

    async def verify_otp(self, otp: str, *, mobile: str | None = None) -> FlowStep:
        """Check the OTP that was sent (``VERIFY_OTP``); returns the new :attr:`next_step`.

        ``mobile`` (Aadhaar registration only, and required there) is the number the ABHA will be linked to;
        when it is not the Aadhaar-linked one an OTP goes to it and the next step is ``VERIFY_MOBILE_OTP``.

        Raises:
            InvalidFlowStep: not at ``VERIFY_OTP``; nothing sent.
            InvalidOtp, InvalidMobileNumber: nothing sent.
            OtpMismatch: wrong OTP: the flow stays at ``VERIFY_OTP``, ask again.
            AbhaRateLimited: the flow is now ``BLOCKED``.
            OutcomeUnknown: the flow stays at its step; calling again is safe.
        """
        self._expect("verify_otp", FlowStep.VERIFY_OTP)
        call = self._verify_call(otp, mobile)
        answer = await self._run(call)
        return self._verified(answer)

    async def verify_mobile_otp(self, otp: str) -> FlowStep:
        """Check the OTP sent to the mobile number given to :meth:`verify_otp` (``VERIFY_MOBILE_OTP``, Aadhaar
        registration); returns the new :attr:`next_step`. Raises as :meth:`verify_otp`."""
        self._expect("verify_mobile_otp", FlowStep.VERIFY_MOBILE_OTP)
        txn_id = self._txn_id
        answer = await self._run(lambda: self._abha.aadhaar_mobile_verify(txn_id, otp, **self._options()))
        return self._advance(answer, created=False)

    async def resend_otp(self) -> None:
        """Send the current OTP again (``VERIFY_OTP``, ``VERIFY_MOBILE_OTP``); :attr:`hint` says where it went.

        Refused locally, nothing sent, with :class:`~health_async.errors.ResendTooSoon`: sooner than
        ``resend_interval`` seconds after the last send (``retry_after`` says how long to wait), or after
        ``max_resends`` resends of this OTP (``retry_after`` is ``None``: start a new flow later if no OTP
        arrives). A login has no resend (the service offers none): :class:`InvalidFlowStep`.

        Raises:
            AbhaRateLimited: the flow is now ``BLOCKED``.
            OutcomeUnknown: counted as sent; :attr:`send_outcome_unknown` is True (ask the person).
        """
        self._expect("resend_otp", FlowStep.VERIFY_OTP, FlowStep.VERIFY_MOBILE_OTP)
        if not self._can_resend():
            raise InvalidFlowStep(self._no_resend)
        if self._resends >= self._max_resends:
            raise ResendTooSoon(
                f"resend_otp: no more resends ({self._max_resends} already): ABDM locks the transaction after a few "
                "OTPs; nothing sent",
                retry_after=None,
            )
        wait = 0.0 if self._sent_at is None else self._sent_at + self._resend_interval - self._clock()
        if wait > 0:
            raise ResendTooSoon(
                f"resend_otp: too soon, wait {math.ceil(wait)} s (ABDM's OTP resend interval); nothing sent",
                retry_after=wait,
            )
        call = self._resend_call()
        self._busy_check("resend_otp")
        self._busy = True
        try:
            sent = await call()
        except AbhaRateLimited as exc:
            self._block(exc)
            raise
        except (OutcomeUnknown, asyncio.CancelledError):
            # cancelled while in flight: the OTP may have gone out too (re-raised, never swallowed)
            self._note_send(hint=self._hint, unknown=True)
            raise
        finally:
            self._busy = False
        self._txn_id = sent.txn_id
        self._note_send(hint=sent.hint, unknown=False)

    async def suggest_addresses(
        self,
        *,
        first_name: str | None = None,
        middle_name: str | None = None,
        last_name: str | None = None,
        date_of_birth: dt.date | None = None,
    ) -> tuple[str, ...]:
        """ABHA addresses still free, from the person's details (those of the transaction, and the names and date
        of birth given here: give them in a mobile registration, which has no Aadhaar KYC). ``CREATE_ADDRESS``."""
        self._expect("suggest_addresses", FlowStep.CREATE_ADDRESS)
        txn_id = self._txn_id
        options = {k: v for k, v in self._options().items() if k != "encrypt"}
        return await self._run(
            lambda: self._abha.suggest_addresses(
                txn_id,
                first_name=first_name,
                middle_name=middle_name,
                last_name=last_name,
                date_of_birth=date_of_birth,
                **options,
            )
        )

    async def create(self, abha_address: str, *, profile: NewAbhaProfile | None = None) -> AbhaAccount:
        """Create the ABHA address ``abha_address`` (``CREATE_ADDRESS``; checked as a new address); returns the
        :class:`~health_async.models.AbhaAccount` (the flow is ``DONE``). A mobile registration needs the person's
        ``profile`` (a :class:`~health_async.models.NewAbhaProfile`); the others take none (Aadhaar KYC).

        An address already taken is an :class:`~health_async.errors.AbhaError` (``ABDM-1101``): the flow stays at
        ``CREATE_ADDRESS``, pick another.

        Raises:
            OutcomeUnknown: the create may have taken effect; the flow records it, and the next ``create`` asks
                ``address_exists`` before sending anything.
            AccountLikelyCreated: (on a later ``create``) the earlier create most likely took effect: the address
                exists. Nothing sent; the flow is at ``LOG_IN``.
            AbhaRateLimited: the flow is now ``BLOCKED``.
        """
        self._expect("create", FlowStep.CREATE_ADDRESS)
        address = normalize_abha_address(abha_address, new=True)
        self._check_profile(profile)
        self._busy_check("create")
        if self._pending_create is not None:
            await self._check_pending_create()
        txn_id = self._txn_id
        try:
            answer = await self._run(lambda: self._create_call(txn_id, address, profile))
        except (OutcomeUnknown, asyncio.CancelledError):
            # cancelled while in flight: the account may have been created too (re-raised, never swallowed)
            self._pending_create = address
            self._revision += 1
            raise
        self._advance(answer, created=True, abha_address=address)
        if self._account is None:  # pragma: no cover - _advance raised for any other answer
            raise ResponseValidationError("create: the service did not end the flow")
        return self._account

    async def choose(self, abha_address: str | None = None) -> AbhaAccount:
        """Log into one of the person's existing ABHA addresses (:attr:`accounts`): ``SELECT_ACCOUNT`` (or, in a
        mobile registration whose mobile already holds addresses, ``CREATE_ADDRESS``). ``abha_address`` may be
        left out when there is exactly one. Sends ``auto_login`` (Aadhaar, ``abha_create`` with profiles) or
        ``login_phr`` (``abha_select``); returns the :class:`~health_async.models.AbhaAccount`.

        Raises:
            InvalidRequest: the address is not one of :attr:`accounts`; nothing sent.
            AbhaRateLimited: the flow is now ``BLOCKED``. OutcomeUnknown: the step is unchanged; choosing again
                is safe (a login creates nothing).
        """
        steps = [FlowStep.SELECT_ACCOUNT]
        if self._accounts and self._choose_via is not None:
            steps.append(FlowStep.CREATE_ADDRESS)
        self._expect("choose", *steps)
        address = self._chosen(abha_address)
        txn_id = self._txn_id
        if self._choose_via == "login_phr":
            answer = await self._run(lambda: self._abha.login_phr(txn_id, address, **self._options()))
        else:
            answer = await self._run(lambda: self._abha.auto_login(txn_id, address, **self._options()))
        self._advance(answer, created=False, abha_address=address)
        if self._account is None:  # pragma: no cover - _advance raised for any other answer
            raise ResponseValidationError("choose: the service did not end the flow")
        return self._account

    # -------------------------------------------------------------------- state

    @overload
    def to_state(self) -> dict[str, Any]: ...
    @overload
    def to_state(self, *, seal: bytes, max_age: float = DEFAULT_STATE_MAX_AGE) -> str: ...

    def to_state(self, *, seal: bytes | None = None, max_age: float = DEFAULT_STATE_MAX_AGE) -> dict[str, Any] | str:
        """The flow as a plain JSON-able dict, for the backend to keep **server-side** between requests (a
        session store, a database row); rebuild it with ``client.abha.resume(state)`` on any worker.

        With ``seal=key`` (16, 24 or 32 secret bytes, e.g. ``os.urandom(32)`` kept in the backend's secrets), the
        same dict comes back **sealed**: a cookie-safe ``str``, encrypted and authenticated (AES-GCM), that
        expires ``max_age`` seconds from now (default 30 minutes, about an ABDM transaction's life; the flow's
        clock). Rebuild it with ``client.abha.resume(state, seal=key)``; a changed, truncated or foreign one is
        :class:`~health_async.errors.FlowStateInvalid`, an expired one
        :class:`~health_async.errors.FlowStateExpired`. One key (no key list): to rotate, keep resuming with the
        old key until ``max_age`` has passed. The sealed form still lets whoever holds it continue the flow
        until it expires, like a session cookie: send it only over HTTPS, ``HttpOnly``, ``Secure``.

        It holds: ``version`` (layout, 1), ``kind`` (``aadhaar_registration``, ``mobile_registration``, ``login``,
        ``kyc``, ``session``), ``step`` (a :class:`~health_async.models.FlowStep` value), ``revision`` (incremented at
        every change: compare-and-set it to refuse a stale concurrent update), ``txn_id`` (the service's transaction
        id), ``hint`` (where the last OTP went, the mobile number masked by the service), ``otp_sent_at`` (clock time of
        the last OTP send of the current step, epoch seconds), ``resends`` (resends of the current OTP),
        ``resend_interval`` and ``max_resends`` (the flow's limits), ``send_outcome_unknown``, ``pending_create`` (the
        ABHA address of a create whose outcome is unknown, or ``None``), ``blocked_until``, ``accounts`` (the existing
        ABHA addresses offered, with holder name and KYC flag), ``choose_via`` (``auto_login`` / ``login_phr``),
        ``login_method``, and ``headers`` / ``encrypt`` (the per-flow options given when it started: OIDs and partner
        ids); a KYC adds ``kyc_method`` and ``user_token_given``.

        The dict never holds an OTP, a token, the Aadhaar number or the unmasked mobile number. Only the sealed form
        adds ``secrets``: the user's token a KYC was started with, a session's token and refresh token (so that they
        survive the trip, encrypted; a plain state given ``secrets`` is refused). It is still **sensitive**: the
        ``txn_id`` lets whoever holds it continue the person's registration or login, and the accounts name the person.
        Keep the plain dict server-side (never in a cookie, URL or client-visible form field), or seal it; tie it to the
        person's session, and drop it when the flow ends.
        """
        return super().to_state() if seal is None else super().to_state(seal=seal, max_age=max_age)

    def _sealed_only(self) -> dict[str, Any]:
        secrets = self._secrets()
        return {"secrets": secrets} if secrets else {}

    def _state(self) -> dict[str, Any]:
        return {
            **self._state_head(STATE_VERSION),
            "txn_id": self._txn_id,
            "hint": self._hint,
            "otp_sent_at": self._sent_at,
            "resends": self._resends,
            "resend_interval": self._resend_interval,
            "max_resends": self._max_resends,
            "send_outcome_unknown": self._send_outcome_unknown,
            "pending_create": self._pending_create,
            "blocked_until": self._blocked_until,
            "accounts": [
                {"abha_address": a.abha_address, "name": a.name, "kyc_verified": a.kyc_verified} for a in self._accounts
            ],
            "choose_via": self._choose_via,
            "login_method": None if self._login_method is None else self._login_method.value,
            "headers": dict(self._headers),
            "encrypt": self._encrypt,
            **self._extra_state(),
        }

    # -------------------------------------------------------------------- machinery

    def _blocked_step(self) -> FlowStep:
        return FlowStep.BLOCKED

    def _expected_now(self) -> str:
        if self._step is FlowStep.CREATE_ADDRESS and self._accounts and self._choose_via is not None:
            return "create (suggest_addresses helps), or choose one of the flow's accounts"
        return self._expected[self._step]

    def _options(self) -> dict[str, Any]:
        return call_options(self._headers, self._encrypt)

    def _can_resend(self) -> bool:
        return True

    def _verify_call(self, otp: str, mobile: str | None) -> Callable[[], Awaitable[object]]:
        raise NotImplementedError

    def _verified(self, answer: object) -> FlowStep:
        """The step after a successful :meth:`verify_otp` answer (the registrations and login: its
        ``skip_state``)."""
        if not isinstance(answer, AbhaStep):  # pragma: no cover - their verify calls answer an AbhaStep
            raise ResponseValidationError("verify_otp: the answer does not fit this flow")
        return self._advance(answer, created=False)

    def _extra_state(self) -> dict[str, Any]:
        """What a flow kind adds to :meth:`to_state` (never a secret)."""
        return {}

    def _secrets(self) -> dict[str, str]:
        """The flow's secrets (tokens), put in the state only when it is sealed."""
        return {}

    @classmethod
    def _resume_options(cls, state: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:  # noqa: ARG003
        """The constructor's keywords of a flow kind, read from its state (and the secrets of a sealed one)."""
        return {}

    def _resend_call(self) -> Callable[[], Awaitable[OtpSent]]:
        raise NotImplementedError

    def _create_call(
        self,
        txn_id: str,
        address: str,
        profile: NewAbhaProfile | None,  # noqa: ARG002 - a mobile registration's create needs it
    ) -> Awaitable[AbhaStep]:
        return self._abha.aadhaar_create(txn_id, address, **self._options())

    def _check_profile(self, profile: NewAbhaProfile | None) -> None:
        if profile is not None:
            raise InvalidRequest("profile is only for a mobile registration (Aadhaar KYC supplies the details)")

    def _note_send(self, *, hint: str | None, unknown: bool) -> None:
        self._sent_at = self._clock()
        self._resends += 1
        self._hint = hint
        self._send_outcome_unknown = unknown
        self._revision += 1

    def _advance(self, answer: AbhaStep, *, created: bool, abha_address: str | None = None) -> FlowStep:
        """Follow the answer's ``skip_state`` (the vendor's charts)."""
        state = answer.skip_state
        if state is SkipState.ABHA_END:
            self._account = AbhaAccount.from_step(answer, created=created, abha_address=abha_address)
            self._pending_create = None
            step = FlowStep.DONE
        elif state is SkipState.CONFIRM_MOBILE_OTP and isinstance(self, AadhaarRegistration):
            self._sent_at, self._resends, self._hint = self._clock(), 0, answer.hint
            self._send_outcome_unknown = False
            step = FlowStep.VERIFY_MOBILE_OTP
        elif state is SkipState.ABHA_SELECT:
            self._accounts, self._choose_via = answer.abha_profiles, "login_phr"
            step = FlowStep.SELECT_ACCOUNT
        elif state is SkipState.ABHA_CREATE:
            self._accounts = answer.abha_profiles
            self._choose_via = "auto_login" if answer.abha_profiles else None
            # The person already has ABHA addresses: log into one, never create a duplicate. A mobile number is
            # often shared by a family, so a mobile registration may still create its own address.
            if answer.abha_profiles and not isinstance(self, MobileRegistration):
                step = FlowStep.SELECT_ACCOUNT
            else:
                step = FlowStep.CREATE_ADDRESS
        else:
            raise ResponseValidationError(
                f"the service answered a next step (skip_state {state.value}) that does not fit this flow at "
                f"{self._step.name}; the flow stays there"
            )
        if answer.txn_id:
            self._txn_id = answer.txn_id
        self._set_step(step)
        return step

    async def _check_pending_create(self) -> None:
        pending = self._pending_create
        assert pending is not None
        exists = await self._run(lambda: self._abha.address_exists(pending, **self._options()))
        if exists:
            logger.info("abha flow %s: the create with an unknown outcome took effect (the address exists)", self.kind)
            self._set_step(FlowStep.LOG_IN)
            raise AccountLikelyCreated(
                "create: the earlier create whose answer was lost most likely took effect (address_exists: the "
                "address exists now); nothing sent. Log in with that address (client.abha.login('phr_address', "
                "exc.abha_address))",
                abha_address=pending,
                operation="create",
            )
        logger.info("abha flow %s: the create with an unknown outcome did not take effect; creating now", self.kind)
        self._pending_create = None
        self._revision += 1

    def _chosen(self, abha_address: str | None) -> str:
        offered = [a.abha_address for a in self._accounts if a.abha_address]
        if abha_address is None:
            if len(offered) != 1:
                raise InvalidRequest(f"choose needs an abha_address: {len(offered)} accounts to choose from")
            return normalize_abha_address(offered[0])
        address = normalize_abha_address(abha_address)
        if not offered:
            return address
        key = address.lower().partition("@")[0]
        for candidate in offered:
            if candidate.strip().lower().partition("@")[0] == key:
                return normalize_abha_address(candidate)
        raise InvalidRequest("abha_address must be one of the flow's accounts; nothing sent")


class AadhaarRegistration(AbhaFlow):
    """Registration with Aadhaar OTP: ``verify_otp(otp, mobile=...)`` -> [``verify_mobile_otp``] ->
    ``create(abha_address)``, or ``choose()`` when the Aadhaar already holds ABHA addresses."""

    kind: ClassVar[str] = "aadhaar_registration"

    def _verify_call(self, otp: str, mobile: str | None) -> Callable[[], Awaitable[AbhaStep]]:
        if mobile is None:
            raise InvalidRequest("verify_otp needs mobile=: the mobile number the ABHA will be linked to")
        txn_id = self._txn_id
        return lambda: self._abha.aadhaar_verify(txn_id, otp, mobile=mobile, **self._options())

    def _resend_call(self) -> Callable[[], Awaitable[OtpSent]]:
        txn_id = self._txn_id
        if self._step is FlowStep.VERIFY_MOBILE_OTP:
            return lambda: self._abha.aadhaar_mobile_resend(txn_id, **self._options())
        return lambda: self._abha.aadhaar_resend(txn_id, **self._options())


class MobileRegistration(AbhaFlow):
    """Registration with a mobile OTP (no KYC): ``verify_otp(otp)`` -> ``create(abha_address, profile=...)``
    (or ``choose()`` one of the addresses the mobile already holds)."""

    kind: ClassVar[str] = "mobile_registration"

    def _verify_call(self, otp: str, mobile: str | None) -> Callable[[], Awaitable[AbhaStep]]:
        if mobile is not None:
            raise InvalidRequest("mobile= is only for an Aadhaar registration")
        txn_id = self._txn_id
        return lambda: self._abha.mobile_verify(txn_id, otp, **self._options())

    def _resend_call(self) -> Callable[[], Awaitable[OtpSent]]:
        txn_id = self._txn_id
        return lambda: self._abha.mobile_resend(txn_id, **self._options())

    def _check_profile(self, profile: NewAbhaProfile | None) -> None:
        if not isinstance(profile, NewAbhaProfile):
            raise InvalidRequest("create needs profile=NewAbhaProfile(...) in a mobile registration (no KYC)")

    def _create_call(self, txn_id: str, address: str, profile: NewAbhaProfile | None) -> Awaitable[AbhaStep]:
        assert profile is not None
        return self._abha.mobile_create(txn_id, address, profile, **self._options())


class AbhaLogin(AbhaFlow):
    """Login: ``verify_otp(otp)`` -> ``DONE`` (by ABHA address) or ``choose(abha_address)`` (mobile, ABHA
    number, Aadhaar). An Aadhaar whose person has no ABHA yet answers ``CREATE_ADDRESS``: ``create`` makes one
    with the Aadhaar KYC of the login (judgement call: the service accepts ``aadhaar/create-phr`` there)."""

    kind: ClassVar[str] = "login"

    @property
    def login_method(self) -> LoginMethod | None:
        """How the person identified themselves."""
        return self._login_method

    def _can_resend(self) -> bool:
        return False

    def _verify_call(self, otp: str, mobile: str | None) -> Callable[[], Awaitable[AbhaStep]]:
        if mobile is not None:
            raise InvalidRequest("mobile= is only for an Aadhaar registration")
        txn_id = self._txn_id
        return lambda: self._abha.login_verify(txn_id, otp, **self._options())


_MAX_TOKEN: Final = 8192
_TOKEN_UNSAFE: Final = re.compile(r"[\x00-\x20\x7f]")


def normalize_user_token(token: str, name: str = "user_token") -> str:
    """A user's ABHA token as sent (``user_x_token``): a non-empty str of at most 8192 characters without
    whitespace or control characters (surrounding whitespace stripped). :class:`InvalidRequest` names the rule,
    never the token."""
    if not isinstance(token, str):
        raise InvalidRequest(f"{name} must be a str")
    value = token.strip()
    if not value:
        raise InvalidRequest(f"{name} must not be empty")
    if len(value) > _MAX_TOKEN or _TOKEN_UNSAFE.search(value):
        raise InvalidRequest(f"{name} must be at most {_MAX_TOKEN} characters, no whitespace or control characters")
    return value


class KycUpgrade(AbhaFlow):
    """The KYC upgrade of an ABHA address created with a mobile OTP: ``kyc/init`` sent the OTP (``VERIFY_OTP``)
    -> ``verify_otp(otp)`` (``kyc/verify``; ``resend_otp()``: ``kyc/resend``) -> ``DONE``, :attr:`result`.

    ``user_token`` (wire ``user_x_token``, the user's ABHA token) is kept in memory, and in the state only when it
    is sealed (``to_state(seal=key)``). A flow resumed from a plain state that was started with one needs it
    again: ``verify_otp(otp, user_token=...)`` (refused locally otherwise, nothing sent).
    """

    kind: ClassVar[str] = "kyc"
    _expected: ClassVar[Mapping[FlowStep, str]] = {
        **_EXPECTED,
        FlowStep.DONE: "nothing more: the KYC is done (see its result)",
    }

    def __init__(
        self,
        abha: AbhaCalls,
        *,
        kyc_method: KycMethod | None = None,
        user_token: str | None = None,
        user_token_given: bool = False,
        **kwargs: Any,
    ) -> None:
        """Not called directly: use ``client.abha.kyc`` (or :func:`resume`)."""
        super().__init__(abha, **kwargs)
        self._kyc_method = kyc_method
        self._user_token = user_token
        self._user_token_given = user_token_given or user_token is not None
        self._result: KycResult | None = None

    @property
    def kyc_method(self) -> KycMethod | None:
        """How the person proves their identity (ABHA number or Aadhaar)."""
        return self._kyc_method

    @property
    def result(self) -> KycResult | None:
        """The :class:`~health_async.models.KycResult` once ``DONE`` (its ``status`` is ``VERIFIED``), in this
        process; ``None`` before (and in a flow resumed at ``DONE``: the state keeps the step, not the answer)."""
        return self._result

    async def verify_otp(self, otp: str, *, mobile: str | None = None, user_token: str | None = None) -> FlowStep:
        """Check the KYC OTP (``VERIFY_OTP``, ``kyc/verify``); returns the new :attr:`next_step` (``DONE``).

        ``user_token``: the user's ABHA token, when the flow was started with one and resumed from a plain state
        (which never holds it). Raises as :meth:`AbhaFlow.verify_otp`; ``InvalidRequest`` (nothing sent) when the
        flow needs the token and has none.
        """
        self._expect("verify_otp", FlowStep.VERIFY_OTP)  # first: a call refused changes nothing
        if user_token is not None:
            self._user_token = normalize_user_token(user_token)
            self._user_token_given = True
        return await super().verify_otp(otp, mobile=mobile)

    def _verify_call(self, otp: str, mobile: str | None) -> Callable[[], Awaitable[KycResult]]:
        if mobile is not None:
            raise InvalidRequest("mobile= is only for an Aadhaar registration")
        if self._user_token_given and self._user_token is None:
            raise InvalidRequest(
                "verify_otp needs user_token=: the KYC was started with the user's token, and a plain to_state() "
                "never keeps it (seal the state to keep it); nothing sent"
            )
        txn_id, token = self._txn_id, self._user_token
        return lambda: self._abha.kyc_verify(txn_id, otp, user_token=token, **self._options())

    def _verified(self, answer: object) -> FlowStep:
        if not isinstance(answer, KycResult):  # pragma: no cover - kyc_verify answers a KycResult
            raise ResponseValidationError("verify_otp: the answer does not fit a KYC")
        self._result = answer
        self._set_step(FlowStep.DONE)
        return FlowStep.DONE

    def _resend_call(self) -> Callable[[], Awaitable[OtpSent]]:
        txn_id = self._txn_id
        return lambda: self._abha.kyc_resend(txn_id, **self._options())

    def _extra_state(self) -> dict[str, Any]:
        method = None if self._kyc_method is None else self._kyc_method.value
        return {"kyc_method": method, "user_token_given": self._user_token_given}

    def _secrets(self) -> dict[str, str]:
        return {} if self._user_token is None else {"user_token": self._user_token}

    @classmethod
    def _resume_options(cls, state: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
        method = _field(state, "kyc_method", str, optional=True)
        try:
            kyc_method = None if method is None else KycMethod(method)
        except ValueError:
            raise InvalidRequest("state.kyc_method must be a KycMethod value or null") from None
        token = secrets.get("user_token")
        return {
            "kyc_method": kyc_method,
            "user_token": None if token is None else normalize_user_token(token, "state.secrets.user_token"),
            "user_token_given": bool(_field(state, "user_token_given", bool, optional=True)),
        }


class AbhaSession(AbhaFlow):
    """A user session with the ABHA Gateway: ``session/init`` sent a mobile OTP (``VERIFY_OTP``) ->
    ``verify_otp(otp)`` (``session/verify``) -> ``DONE``, :attr:`token`. :meth:`status` reads the user's session
    at any step. The service has no resend: start a new session instead.

    How the token is kept: in memory on this object only (never in its ``repr``, a log line or an error); in the
    state only when it is sealed (``to_state(seal=key)``: encrypted and authenticated with the key, expiring with
    it); a plain ``to_state()`` never holds it, so a flow resumed from one has no :attr:`token`.
    """

    kind: ClassVar[str] = "session"
    _expected: ClassVar[Mapping[FlowStep, str]] = {
        **_EXPECTED,
        FlowStep.DONE: "nothing more: the session is open (see its token)",
    }
    _no_resend: ClassVar[str] = (
        "resend_otp: a user session has no OTP resend (the service offers none); at VERIFY_OTP call verify_otp, "
        "or start a new session after the resend interval"
    )

    def __init__(self, abha: AbhaCalls, *, token: AbhaSessionToken | None = None, **kwargs: Any) -> None:
        """Not called directly: use ``client.abha.session`` (or :func:`resume`)."""
        super().__init__(abha, **kwargs)
        self._token = token

    @property
    def token(self) -> AbhaSessionToken | None:
        """The session's :class:`~health_async.models.AbhaSessionToken` once ``DONE`` (the user's secret); ``None``
        before, and in a flow resumed from a plain state."""
        return self._token

    async def status(self) -> SessionStatus:
        """``GET /abdm/v1/session/status`` for the flow's user (``X-Pt-Id``: the flow's ``user_id``, else the
        client's): whether the user's session is live, and the KYC flag. Allowed at any step; it changes nothing
        in the flow (a read, retried as ``client.abha.session_status`` is). Raises as that method."""
        headers = {k: v for k, v in self._options().items() if k != "encrypt"}
        return await self._abha.session_status(**headers)

    def _can_resend(self) -> bool:
        return False

    def _verify_call(self, otp: str, mobile: str | None) -> Callable[[], Awaitable[AbhaSessionToken]]:
        if mobile is not None:
            raise InvalidRequest("mobile= is only for an Aadhaar registration")
        txn_id = self._txn_id
        return lambda: self._abha.session_verify(txn_id, otp, **self._options())

    def _verified(self, answer: object) -> FlowStep:
        if not isinstance(answer, AbhaSessionToken):  # pragma: no cover - session_verify answers a token
            raise ResponseValidationError("verify_otp: the answer does not fit a session")
        self._token = answer
        self._set_step(FlowStep.DONE)
        return FlowStep.DONE

    def _secrets(self) -> dict[str, str]:
        token = self._token
        if token is None:
            return {}
        secrets = {"token": token.token}
        if token.refresh_token is not None:
            secrets["refresh_token"] = token.refresh_token
        return secrets

    @classmethod
    def _resume_options(cls, state: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:  # noqa: ARG003
        token = secrets.get("token")
        if token is None:
            return {}
        refresh = secrets.get("refresh_token")
        return {
            "token": AbhaSessionToken(
                token=normalize_user_token(token, "state.secrets.token"),
                refresh_token=None if refresh is None else normalize_user_token(refresh, "state.secrets.refresh_token"),
            )
        }


_KINDS: Final[dict[str, type[AbhaFlow]]] = {
    cls.kind: cls for cls in (AadhaarRegistration, MobileRegistration, AbhaLogin, KycUpgrade, AbhaSession)
}


# ------------------------------------------------------------------------------------------------ starting


class _OtpAnswer(Protocol):
    """What a flow's first call answers: the transaction, and where the OTP went."""

    @property
    def txn_id(self) -> str: ...

    @property
    def hint(self) -> str | None: ...


_Flow = TypeVar("_Flow", bound="AbhaFlow")


def _otp_sent(
    cls: type[_Flow],
    abha: AbhaCalls,
    sent: _OtpAnswer,
    clock: Clock | None,
    headers: Mapping[str, Any],
    encrypt: bool | None,
    **extra: Any,
) -> _Flow:
    """A flow just started: its OTP went out now (``sent``), so it is at ``VERIFY_OTP``; ``extra``: the flow's own
    arguments (resend limits, the login or KYC method)."""
    return cls(
        abha,
        txn_id=sent.txn_id,
        step=FlowStep.VERIFY_OTP,
        clock=clock,
        hint=sent.hint,
        sent_at=(clock or time.time)(),
        headers=headers,
        encrypt=encrypt,
        **extra,
    )


async def register_with_aadhaar(
    abha: AbhaCalls,
    aadhaar_number: str,
    *,
    validate: bool = True,
    resend_interval: float | None = None,
    max_resends: int | None = None,
    clock: Clock | None = None,
    **options: Unpack[AbhaHeaders],
) -> AadhaarRegistration:
    """Start an Aadhaar registration: send the OTP (``aadhaar_init``, once) and return the flow at
    ``VERIFY_OTP``. See ``Abha.register_with_aadhaar``."""
    interval, count = _check_limits(resend_interval, max_resends)
    headers, encrypt = flow_options(options)
    init = await abha.aadhaar_init(aadhaar_number, validate=validate, encrypt=encrypt, **headers)
    return _otp_sent(
        AadhaarRegistration, abha, init, clock, headers, encrypt, resend_interval=interval, max_resends=count
    )


async def register_with_mobile(
    abha: AbhaCalls,
    mobile: str,
    *,
    resend_interval: float | None = None,
    max_resends: int | None = None,
    clock: Clock | None = None,
    **options: Unpack[AbhaHeaders],
) -> MobileRegistration:
    """Start a mobile registration: send the OTP (``mobile_init``, once); the flow is at ``VERIFY_OTP``."""
    interval, count = _check_limits(resend_interval, max_resends)
    headers, encrypt = flow_options(options)
    sent = await abha.mobile_init(mobile, encrypt=encrypt, **headers)
    return _otp_sent(
        MobileRegistration, abha, sent, clock, headers, encrypt, resend_interval=interval, max_resends=count
    )


async def login(
    abha: AbhaCalls,
    method: LoginMethod | str,
    identifier: str,
    *,
    otp_system: OtpSystem | str | None = None,
    clock: Clock | None = None,
    **options: Unpack[AbhaHeaders],
) -> AbhaLogin:
    """Start a login: send the OTP (``login_init``, once); the flow is at ``VERIFY_OTP``."""
    try:
        how = method if isinstance(method, LoginMethod) else LoginMethod(method)
    except ValueError:
        known = ", ".join(m.value for m in LoginMethod if m is not LoginMethod.SEARCH)
        raise InvalidRequest(f"method must be one of {known}") from None
    if how is LoginMethod.SEARCH:
        raise InvalidRequest("method 'search' is not a guided login (it needs a search answer); use login_init")
    headers, encrypt = flow_options(options)
    sent = await abha.login_init(how, identifier, otp_system=otp_system, encrypt=encrypt, **headers)
    return _otp_sent(AbhaLogin, abha, sent, clock, headers, encrypt, login_method=how)


async def kyc_upgrade(
    abha: AbhaCalls,
    method: KycMethod | str,
    identifier: str,
    *,
    user_token: str | None = None,
    validate: bool = True,
    resend_interval: float | None = None,
    max_resends: int | None = None,
    clock: Clock | None = None,
    **options: Unpack[AbhaHeaders],
) -> KycUpgrade:
    """Start a KYC upgrade: send the OTP (``kyc_init``, once); the flow is at ``VERIFY_OTP``."""
    interval, count = _check_limits(resend_interval, max_resends)
    headers, encrypt = flow_options(options)
    token = None if user_token is None else normalize_user_token(user_token)
    sent = await abha.kyc_init(method, identifier, user_token=token, validate=validate, encrypt=encrypt, **headers)
    return _otp_sent(
        KycUpgrade,
        abha,
        sent,
        clock,
        headers,
        encrypt,
        kyc_method=KycMethod(method),
        user_token=token,
        resend_interval=interval,
        max_resends=count,
    )


async def user_session(
    abha: AbhaCalls,
    abha_address: str,
    *,
    clock: Clock | None = None,
    **options: Unpack[AbhaHeaders],
) -> AbhaSession:
    """Start a user session: send the mobile OTP (``session_init``, once); the flow is at ``VERIFY_OTP``."""
    headers, encrypt = flow_options(options)
    sent = await abha.session_init(abha_address, encrypt=encrypt, **headers)
    return _otp_sent(AbhaSession, abha, sent, clock, headers, encrypt)


# ------------------------------------------------------------------------------------------------ resuming


def _accounts(value: Any) -> tuple[AbhaProfileSummary, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidRequest("state.accounts must be a list")
    out = []
    for item in value:
        if not isinstance(item, Mapping):
            raise InvalidRequest("state.accounts[] must be objects")
        address, name, kyc = item.get("abha_address"), item.get("name"), item.get("kyc_verified")
        if not isinstance(address, str) or not (name is None or isinstance(name, str)):
            raise InvalidRequest("state.accounts[] must have an abha_address and an optional name")
        if not (kyc is None or isinstance(kyc, bool)):
            raise InvalidRequest("state.accounts[].kyc_verified must be a bool or null")
        out.append(AbhaProfileSummary(abha_address=address, name=name, kyc_verified=kyc))
    return tuple(out)


def resume(
    abha: AbhaCalls, state: Mapping[str, Any] | str, *, seal: bytes | None = None, clock: Clock | None = None
) -> AbhaFlow:
    """Rebuild a flow from :meth:`AbhaFlow.to_state` (nothing is sent): its dict, or with ``seal=key`` its sealed
    ``str``. Raises :class:`~health_async.errors.InvalidRequest` naming the field when the state is not one (never
    its value); :class:`~health_async.errors.FlowStateInvalid` / :class:`~health_async.errors.FlowStateExpired`
    for a sealed one that does not open or has expired."""
    now = (clock or time.time)() if seal is not None else 0.0
    state, sealed = open_state(state, seal, purpose=_SEAL_PURPOSE, now=now, version=STATE_VERSION)
    kind = state.get("kind")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InvalidRequest(f"state.kind must be one of {', '.join(_KINDS)}")
    try:
        step = FlowStep(state.get("step"))
    except ValueError:
        raise InvalidRequest("state.step must be a FlowStep value") from None
    txn_id = _field(state, "txn_id", str)
    normalize_txn_id(txn_id)
    choose_via = _field(state, "choose_via", str, optional=True)
    if choose_via is not None and choose_via not in _CHOOSE_VIA:
        raise InvalidRequest("state.choose_via must be auto_login, login_phr or null")
    method = _field(state, "login_method", str, optional=True)
    try:
        login_method = None if method is None else LoginMethod(method)
    except ValueError:
        raise InvalidRequest("state.login_method must be a LoginMethod value or null") from None
    pending = _field(state, "pending_create", str, optional=True)
    if pending is not None:
        normalize_abha_address(pending)
    headers = headers_field(state)
    resends = _field(state, "resends", int)
    if resends < 0:
        raise InvalidRequest("state.resends must be >= 0")
    revision = _field(state, "revision", int, optional=True) or 0
    return cls(
        abha,
        txn_id=txn_id,
        step=step,
        clock=clock,
        resend_interval=_time(state, "resend_interval"),
        max_resends=_field(state, "max_resends", int, optional=True),
        hint=_field(state, "hint", str, optional=True),
        sent_at=_time(state, "otp_sent_at"),
        resends=resends,
        accounts=_accounts(state.get("accounts")),
        choose_via=choose_via,
        login_method=login_method,
        pending_create=pending,
        send_outcome_unknown=bool(_field(state, "send_outcome_unknown", bool, optional=True)),
        blocked_until=_time(state, "blocked_until"),
        headers=headers,
        encrypt=_field(state, "encrypt", bool, optional=True),
        revision=revision,
        **cls._resume_options(state, _secrets_of(state, sealed=sealed)),
    )
