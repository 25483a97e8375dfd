"""The consent PIN's input rule and the guided PIN reset of ``client.abdm.consents``.

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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from .._abha_input import normalize_otp, normalize_txn_id
from ..errors import InvalidConsentPin, InvalidRequest
from ..models._consents import PinOtpSent, PinResetStep
from ._flow import Clock, GuidedFlow, field, open_state, time_field

if TYPE_CHECKING:
    from .abdm_consents import Consents

__all__ = ["PIN_LENGTH", "STATE_VERSION", "ConsentPinReset", "normalize_consent_pin", "resume"]

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
        consents: Consents,
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
            "version": STATE_VERSION,
            "kind": self.kind,
            "step": self._step.value,
            "revision": self._revision,
            "txn_id": self._txn_id,
            "blocked_until": self._blocked_until,
            "headers": dict(self._headers),
        }

    def _blocked_step(self) -> PinResetStep:
        return PinResetStep.BLOCKED


def resume(
    consents: Consents,
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
