"""ABDM's discover-and-link for a patient's app as a guided flow, on the machinery the ABHA flows use
(:class:`~health_async.resources._flow.GuidedFlow`): ``client.abdm.discover_and_link(hip_id)`` starts it,
``client.abdm.resume(state)`` continues it elsewhere.

=======================  ===========================================================================================
step                     what it expects
=======================  ===========================================================================================
``SELECT_CARE_CONTEXT``  several records or patients matched (or ``auto_link=False``): :attr:`DiscoverAndLink.choices`
                         lists them; ``link(care_context_id, patient_id=None)`` sends ``link/init`` (an OTP to the
                         patient) -> ``VERIFY_OTP``
``VERIFY_OTP``           ``confirm(otp)`` sends ``link/confirm`` -> ``DONE`` (:attr:`DiscoverAndLink.linked`)
``DONE``                 nothing: the record is linked
``NOTHING_FOUND``        nothing: the facility holds no record of the person that is not linked already
``BLOCKED``              nothing: ABDM refused with a rate limit or a block; a new flow after ``blocked_until``
=======================  ===========================================================================================

Rules (the ABHA flows' conventions):

* **Nothing sent out of step**, nor while another call of the same flow is in flight:
  :class:`~health_async.errors.InvalidFlowStep`. Bad input (an OTP that is not 6 digits, a care context that is not
  one of the choices) is refused before anything is sent.
* **OTP steps sent once.** ``link/init`` and ``link/confirm`` are never repeated once they may have reached the
  service. A wrong OTP (:class:`~health_async.errors.OtpMismatch`) leaves the flow at ``VERIFY_OTP``: ask again.
  :class:`~health_async.errors.AbhaRateLimited` / :class:`~health_async.errors.AbhaBlocked` move it to ``BLOCKED``.
* **Outcome unknown** (:class:`~health_async.errors.OutcomeUnknown`):

  - from ``link``: the flow stays at ``SELECT_CARE_CONTEXT`` and :attr:`~DiscoverAndLink.send_outcome_unknown` is
    True. An OTP may have gone out, but without the answer's transaction it cannot be confirmed: ask the person;
    ``link`` again sends another OTP (the service may refuse it if the transaction has moved on: start a new flow).
  - from ``confirm``: the flow stays at ``VERIFY_OTP``; confirming again is safe (the link exists once at most),
    and if the service answers that the transaction has moved on, the first confirm most likely linked the record:
    a new flow's discovery no longer lists it.

* **One record per flow** (judgement call: ``link/init`` takes one ``cc_ref_id``, and each link is its own OTP).

**State.** :meth:`DiscoverAndLink.to_state` is a plain JSON-able dict without an OTP, without names and without what
the records are: ``version`` (1), ``kind`` (``discover_and_link``), ``step`` (a
:class:`~health_async.models.LinkStep` value), ``revision`` (incremented at every change: compare-and-set it to
refuse a stale concurrent update), ``hip_id``, ``txn_id`` (the service's transaction: the discovery's, then the
link's), ``oid`` / ``partner_user_id`` (the user, resolved when the flow started), ``choices`` (per patient its
``patient_id``, the facility's reference, and the ids of its records), ``patient_id`` / ``care_context_id`` (the
record being linked), ``send_outcome_unknown``, ``blocked_until``. The sealed form (``to_state(seal=key)``) adds the
``display`` of each patient and record (the patient's name, what each record is: personal and health data), so a
flow resumed from it shows them again; from a plain state they are ``None``. A plain state that holds them is
refused. The ``txn_id`` lets whoever holds the state continue the link: keep it server-side, or seal it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, Protocol, overload

import attrs

from ..._abha_input import normalize_otp, normalize_txn_id
from ..._checks import checked
from ..._config import optional_header_value, path_segment
from ...errors import InvalidRequest, OutcomeUnknown
from ...models.abdm._discover import (
    DiscoveredCareContext,
    DiscoveredPatient,
    Discovery,
    LinkConfirmed,
    LinkOtpSent,
    LinkStep,
)
from .._flow import DEFAULT_STATE_MAX_AGE, Clock, GuidedFlow, field, open_state, time_field

__all__ = ["STATE_VERSION", "DiscoverAndLink", "discover_and_link", "resume"]

#: Version of the :meth:`DiscoverAndLink.to_state` layout.
STATE_VERSION: Final = 1
#: What a sealed discover-and-link state is for: an ABHA flow's sealed state never opens as one, nor the reverse.
_SEAL_PURPOSE: Final = b"health_async.discover_flow_state"

_EXPECTED: Final[dict[LinkStep, str]] = {
    LinkStep.SELECT_CARE_CONTEXT: "link, with one of the flow's choices",
    LinkStep.VERIFY_OTP: "confirm, with the OTP the facility sent",
    LinkStep.DONE: "nothing more: the record is linked (see linked)",
    LinkStep.NOTHING_FOUND: "nothing more: the facility holds no record of the person that is not linked already",
    LinkStep.BLOCKED: "nothing more: ABDM refused (rate limit or block); start a new flow after blocked_until",
}


class DiscoverCalls(Protocol):
    """The calls of ``client.abdm`` (its discover mixin) that the flow makes, declared here so that this module does
    not import the mixin that imports it (``Abdm`` satisfies it; mypy checks each place it is passed)."""

    async def _discover(
        self, hip_id: str, ref_id: str | None, *, oid: str | None, partner_user_id: str | None
    ) -> Discovery: ...

    async def discover_and_link(
        self,
        hip_id: str,
        *,
        ref_id: str | None = None,
        auto_link: bool = True,
        oid: str | None = None,
        partner_user_id: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> DiscoverAndLink: ...

    def resume(
        self,
        state: Mapping[str, Any] | str,
        *,
        seal: bytes | None = None,
        clock: Callable[[], float] | None = None,
    ) -> DiscoverAndLink: ...

    async def _link_confirm(
        self, txn_id: str, otp: str, *, oid: str | None, partner_user_id: str | None
    ) -> LinkConfirmed: ...

    async def _link_init(
        self, txn_id: str, patient_ref_id: str | None, cc_ref_id: str, *, oid: str | None, partner_user_id: str | None
    ) -> LinkOtpSent: ...


class DiscoverAndLink(GuidedFlow[LinkStep]):
    """A guided discover-and-link at one facility (see the module): ``link(care_context_id)`` when several records
    matched, then ``confirm(otp)``. Every method first checks :attr:`next_step` (and raises
    :class:`~health_async.errors.InvalidFlowStep`, nothing sent, when the call does not fit). ``repr`` shows the
    step only."""

    kind: ClassVar[str] = "discover_and_link"
    _expected: ClassVar[Mapping[LinkStep, str]] = _EXPECTED
    _seal_purpose: ClassVar[bytes] = _SEAL_PURPOSE
    _log_name: ClassVar[str] = "abdm flow"

    def __init__(
        self,
        abdm: DiscoverCalls,
        *,
        hip_id: str,
        txn_id: str,
        step: LinkStep,
        choices: tuple[DiscoveredPatient, ...] = (),
        oid: str | None = None,
        partner_user_id: str | None = None,
        patient_id: str | None = None,
        care_context_id: str | None = None,
        send_outcome_unknown: bool = False,
        clock: Clock | None = None,
        blocked_until: float | None = None,
        revision: int = 0,
    ) -> None:
        """Not called directly: use ``client.abdm.discover_and_link`` (or ``client.abdm.resume``)."""
        super().__init__(step=step, clock=clock or time.time, blocked_until=blocked_until, revision=revision)
        self._abdm = abdm
        self._hip_id = hip_id
        self._txn_id = txn_id
        self._choices = choices
        self._oid = oid
        self._partner_user_id = partner_user_id
        self._patient_id = patient_id
        self._care_context_id = care_context_id
        self._send_outcome_unknown = send_outcome_unknown
        self._linked: LinkConfirmed | None = None
        if step is LinkStep.DONE and care_context_id is not None:
            self._linked = LinkConfirmed(care_context_id=care_context_id)

    # -------------------------------------------------------------------- what the caller reads

    @property
    def hip_id(self) -> str:
        """The facility (its ABDM id)."""
        return self._hip_id

    @property
    def choices(self) -> tuple[DiscoveredPatient, ...]:
        """The matching patients, each with its records not yet linked
        (:class:`~health_async.models.DiscoveredPatient`, :class:`~health_async.models.DiscoveredCareContext`).
        The names and what each record is (``display``) are ``None`` in a flow resumed from a plain state."""
        return self._choices

    @property
    def care_context_id(self) -> str | None:
        """The record being linked (from ``VERIFY_OTP`` on), else ``None``."""
        return self._care_context_id

    @property
    def linked(self) -> LinkConfirmed | None:
        """The :class:`~health_async.models.LinkConfirmed` once ``DONE`` (in a resumed flow: its care context id
        only)."""
        return self._linked

    @property
    def send_outcome_unknown(self) -> bool:
        """True after a ``link`` whose outcome is unknown (see the module: an OTP may have gone out)."""
        return self._send_outcome_unknown

    # -------------------------------------------------------------------- the steps

    @checked
    async def link(self, care_context_id: str, *, patient_id: str | None = None) -> LinkStep:
        """Link the record ``care_context_id``, one of :attr:`choices` (``SELECT_CARE_CONTEXT``): ``POST
        .../discover/link/init``, sent once; the facility sends an OTP to the patient's mobile. Returns the new
        :attr:`next_step` (``VERIFY_OTP``). ``patient_id`` is needed only when two of the matching patients hold
        the same care context id.

        Raises:
            InvalidFlowStep: not at ``SELECT_CARE_CONTEXT``, or another call in flight; nothing sent.
            InvalidRequest: not one of the choices, or held by several patients without ``patient_id``; nothing
                sent.
            AbhaRateLimited, AbhaBlocked: the flow is now ``BLOCKED``. AbhaError: another refusal; the step is
                unchanged.
            OutcomeUnknown: the step is unchanged and :attr:`send_outcome_unknown` is True (see the module); so
                it is when the call is cancelled while in flight (the cancellation propagates).
        """
        self._expect("link", LinkStep.SELECT_CARE_CONTEXT)
        patient, chosen = self._pick(care_context_id, patient_id)
        txn_id, patient_ref = self._txn_id, patient.patient_id
        try:
            sent = await self._run(
                lambda: self._abdm._link_init(
                    txn_id, patient_ref, chosen, oid=self._oid, partner_user_id=self._partner_user_id
                )
            )
        except (OutcomeUnknown, asyncio.CancelledError):
            # cancelled while in flight: the request may have gone out too (re-raised, never swallowed)
            self._send_outcome_unknown = True
            self._revision += 1
            raise
        self._txn_id = sent.txn_id or txn_id  # no txn id in the answer: the discovery's goes on (judgement call)
        self._patient_id, self._care_context_id = patient_ref, chosen
        self._send_outcome_unknown = False
        self._set_step(LinkStep.VERIFY_OTP)
        return LinkStep.VERIFY_OTP

    @checked
    async def confirm(self, otp: str) -> LinkConfirmed:
        """Confirm the link with the OTP the facility sent (``VERIFY_OTP``): ``POST .../discover/link/confirm``,
        sent once. Returns the :class:`~health_async.models.LinkConfirmed` (the flow is ``DONE``).

        ``otp``: 6 digits (surrounding whitespace stripped; the rule of every ABDM OTP here, judgement call: the
        facility makes this one), checked before anything is sent.

        Raises:
            InvalidFlowStep: not at ``VERIFY_OTP``, or another call in flight; nothing sent.
            InvalidOtp: not 6 digits; nothing sent.
            OtpMismatch: wrong OTP: the flow stays at ``VERIFY_OTP``, ask again.
            AbhaRateLimited, AbhaBlocked: too many wrong OTPs (``ABDM-1100``) or a block: the flow is ``BLOCKED``.
            OutcomeUnknown: the flow stays at ``VERIFY_OTP``; confirming again is safe (see the module).
        """
        self._expect("confirm", LinkStep.VERIFY_OTP)
        code = normalize_otp(otp)
        txn_id = self._txn_id
        answer = await self._run(
            lambda: self._abdm._link_confirm(txn_id, code, oid=self._oid, partner_user_id=self._partner_user_id)
        )
        if answer.care_context_id is None:
            answer = attrs.evolve(answer, care_context_id=self._care_context_id)
        self._linked = answer
        self._set_step(LinkStep.DONE)
        return answer

    # -------------------------------------------------------------------- state

    @overload
    def to_state(self) -> dict[str, Any]: ...
    @overload
    def to_state(self, *, seal: bytes, max_age: float = DEFAULT_STATE_MAX_AGE) -> str: ...

    def to_state(self, *, seal: bytes | None = None, max_age: float = DEFAULT_STATE_MAX_AGE) -> dict[str, Any] | str:
        """The flow as a plain JSON-able dict (the layout is in the module docstring: no OTP, no names, not what
        the records are), for the backend to keep **server-side**; rebuild it with ``client.abdm.resume(state)``.

        With ``seal=key`` (16, 24 or 32 secret bytes), the same dict with the patients' and records' ``display``
        added, sealed: a cookie-safe ``str``, encrypted and authenticated (AES-GCM), that expires ``max_age``
        seconds from now (default 30 minutes; the flow's clock). Rebuild it with ``client.abdm.resume(state,
        seal=key)``; a changed, truncated or foreign one is :class:`~health_async.errors.FlowStateInvalid`, an
        expired one :class:`~health_async.errors.FlowStateExpired`.
        """
        return super().to_state() if seal is None else super().to_state(seal=seal, max_age=max_age)

    def _state(self) -> dict[str, Any]:
        return {
            **self._state_head(STATE_VERSION),
            "hip_id": self._hip_id,
            "txn_id": self._txn_id,
            "oid": self._oid,
            "partner_user_id": self._partner_user_id,
            "choices": self._choices_state(displays=False),
            "patient_id": self._patient_id,
            "care_context_id": self._care_context_id,
            "send_outcome_unknown": self._send_outcome_unknown,
            "blocked_until": self._blocked_until,
        }

    def _sealed_only(self) -> dict[str, Any]:
        return {"choices": self._choices_state(displays=True)}

    def _choices_state(self, *, displays: bool) -> list[dict[str, Any]]:
        out = []
        for patient in self._choices:
            if displays:
                item: dict[str, Any] = {
                    "patient_id": patient.patient_id,
                    "display": patient.display,
                    "care_contexts": [
                        {"care_context_id": c.care_context_id, "display": c.display} for c in patient.care_contexts
                    ],
                }
            else:
                item = {
                    "patient_id": patient.patient_id,
                    "care_contexts": [{"care_context_id": c.care_context_id} for c in patient.care_contexts],
                }
            out.append(item)
        return out

    # -------------------------------------------------------------------- machinery

    def _blocked_step(self) -> LinkStep:
        return LinkStep.BLOCKED

    def _pick(self, care_context_id: str, patient_id: str | None) -> tuple[DiscoveredPatient, str]:
        if not care_context_id:
            raise InvalidRequest("care_context_id must not be empty (one of the flow's choices)")
        matches = [
            patient
            for patient in self._choices
            if (patient_id is None or patient.patient_id == patient_id)
            and any(c.care_context_id == care_context_id for c in patient.care_contexts)
        ]
        if not matches:
            raise InvalidRequest(
                "care_context_id must be one of the flow's choices (of that patient, when patient_id is given); "
                "nothing sent"
            )
        if len(matches) > 1:
            raise InvalidRequest(
                f"care_context_id is held by {len(matches)} of the flow's patients: give patient_id= too; nothing sent"
            )
        return matches[0], care_context_id


# ------------------------------------------------------------------------------------------------ starting


async def discover_and_link(
    abdm: DiscoverCalls,
    hip_id: str,
    *,
    ref_id: str | None,
    auto_link: bool,
    oid: str | None,
    partner_user_id: str | None,
    clock: Clock | None = None,
) -> DiscoverAndLink:
    """Discover (a read), then the flow at ``SELECT_CARE_CONTEXT``, ``NOTHING_FOUND``, or with exactly one record
    and ``auto_link``, linked at once (``VERIFY_OTP``). Its inputs are checked already (``client.abdm``'s method),
    except the user: one of ``oid`` / ``partner_user_id`` (resolved) is needed. See
    ``DiscoverMixin.discover_and_link``."""
    if oid is None and partner_user_id is None:
        raise InvalidRequest(
            "discover_and_link needs the user: oid= (or the client's user_id) or partner_user_id=; nothing sent"
        )
    found = await abdm._discover(hip_id, ref_id, oid=oid, partner_user_id=partner_user_id)
    choices = tuple(patient for patient in found.patients if patient.care_contexts)
    flow = DiscoverAndLink(
        abdm,
        hip_id=hip_id,
        txn_id=found.txn_id,
        step=LinkStep.SELECT_CARE_CONTEXT if choices else LinkStep.NOTHING_FOUND,
        choices=choices,
        oid=oid,
        partner_user_id=partner_user_id,
        clock=clock,
    )
    if auto_link and len(choices) == 1 and len(choices[0].care_contexts) == 1:
        await flow.link(choices[0].care_contexts[0].care_context_id)
    return flow


# ------------------------------------------------------------------------------------------------ resuming


def _text(state: Mapping[str, Any], name: str) -> str | None:
    value: str | None = field(state, name, str, optional=True)
    return value


def _choices(value: Any, *, sealed: bool) -> tuple[DiscoveredPatient, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidRequest("state.choices must be a list")
    patients = []
    for item in value:
        if not isinstance(item, Mapping):
            raise InvalidRequest("state.choices[] must be objects")
        if "display" in item and not sealed:
            raise InvalidRequest("state.choices[].display is only ever in a sealed state (to_state(seal=key))")
        patient_id, display, records = item.get("patient_id"), item.get("display"), item.get("care_contexts")
        if not (patient_id is None or isinstance(patient_id, str)) or not (display is None or isinstance(display, str)):
            raise InvalidRequest("state.choices[] must have a patient_id and a display, each a str or null")
        if not isinstance(records, list | tuple) or not records:
            raise InvalidRequest("state.choices[].care_contexts must be a non-empty list")
        care_contexts = []
        for record in records:
            if not isinstance(record, Mapping):
                raise InvalidRequest("state.choices[].care_contexts[] must be objects")
            if "display" in record and not sealed:
                raise InvalidRequest(
                    "state.choices[].care_contexts[].display is only ever in a sealed state (to_state(seal=key))"
                )
            cid, what = record.get("care_context_id"), record.get("display")
            if not isinstance(cid, str) or not cid or not (what is None or isinstance(what, str)):
                raise InvalidRequest("state.choices[].care_contexts[] must have a care_context_id (a non-empty str)")
            care_contexts.append(DiscoveredCareContext(care_context_id=cid, display=what))
        patients.append(DiscoveredPatient(patient_id=patient_id, display=display, care_contexts=tuple(care_contexts)))
    return tuple(patients)


def resume(
    abdm: DiscoverCalls, state: Mapping[str, Any] | str, *, seal: bytes | None = None, clock: Clock | None = None
) -> DiscoverAndLink:
    """Rebuild a flow from :meth:`DiscoverAndLink.to_state` (nothing is sent). See ``DiscoverMixin.resume``."""
    now = (clock or time.time)() if seal is not None else 0.0
    state, sealed = open_state(state, seal, purpose=_SEAL_PURPOSE, now=now, version=STATE_VERSION)
    if state.get("kind") != DiscoverAndLink.kind:
        raise InvalidRequest(
            f"state.kind must be {DiscoverAndLink.kind} (an ABHA flow's state goes to client.abha.resume)"
        )
    try:
        step = LinkStep(state.get("step"))
    except ValueError:
        raise InvalidRequest("state.step must be a LinkStep value") from None
    hip_id = field(state, "hip_id", str)
    path_segment("state.hip_id", hip_id)
    txn_id = field(state, "txn_id", str)
    normalize_txn_id(txn_id)
    oid = optional_header_value("state.oid", _text(state, "oid"))
    partner_user_id = optional_header_value("state.partner_user_id", _text(state, "partner_user_id"))
    if oid is None and partner_user_id is None:
        raise InvalidRequest("state.oid or state.partner_user_id must name the user")
    choices = _choices(state.get("choices"), sealed=sealed)
    patient_id, care_context_id = _text(state, "patient_id"), _text(state, "care_context_id")
    if step is LinkStep.SELECT_CARE_CONTEXT and not choices:
        raise InvalidRequest("state.choices must not be empty at select_care_context")
    if step in (LinkStep.VERIFY_OTP, LinkStep.DONE) and not care_context_id:
        raise InvalidRequest("state.care_context_id must name the record being linked at verify_otp and done")
    revision = field(state, "revision", int, optional=True) or 0
    return DiscoverAndLink(
        abdm,
        hip_id=hip_id,
        txn_id=txn_id,
        step=step,
        choices=choices,
        oid=oid,
        partner_user_id=partner_user_id,
        patient_id=patient_id,
        care_context_id=care_context_id,
        send_outcome_unknown=bool(field(state, "send_outcome_unknown", bool, optional=True)),
        clock=clock,
        blocked_until=time_field(state, "blocked_until"),
        revision=revision,
    )
