"""What every guided flow shares: the ABHA flows (:mod:`health_async.resources.abha._flows`: registration, login, KYC,
user session) and ABDM's discover-and-link (:mod:`health_async.resources.abdm._discover_flow`).

:class:`GuidedFlow` is a small state machine over one enum of steps. It keeps the rules those flows have in common:

* a call that does not fit the current step is refused locally, nothing sent
  (:class:`~health_async.errors.InvalidFlowStep` naming the step the flow expects), and so is a second call on the
  same flow object while one is in flight (a double click would send a second OTP);
* one request at a time (:meth:`GuidedFlow._run`); :class:`~health_async.errors.AbhaRateLimited` /
  :class:`~health_async.errors.AbhaBlocked` from any of them end the flow at its ``BLOCKED`` step, with
  :attr:`GuidedFlow.blocked_until` saying when a new one may start;
* ``to_state()``: a plain JSON-able dict, and ``to_state(seal=key)``: the same sealed with :mod:`health_async._seal`
  (under the flow family's own purpose, so that a state of one family never opens as another), with what only a
  sealed state may carry added (:meth:`GuidedFlow._sealed_only`); :func:`open_state` and the field readers rebuild
  one, naming the field of a bad state, never its value.

What the families that take per-call options (the partner headers and ``encrypt``: the ABHA flows, the HPR
registration of :mod:`health_async.resources.registries._registration`) share is here too: :func:`flow_options`
splits what a flow is started with, :func:`call_options` puts them back together for each call,
:func:`headers_field` reads those headers back from a state.

Each family adds its steps, its calls and its state layout; the constructors and ``resume`` functions stay with
the family.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Final, Generic, TypeVar, overload

from .. import _json, _seal
from .._config import finite
from .._logging import logger
from ..errors import AbhaRateLimited, FlowStateInvalid, InvalidFlowStep, InvalidRequest

__all__ = [
    "DEFAULT_STATE_MAX_AGE",
    "HEADER_OPTIONS",
    "Clock",
    "GuidedFlow",
    "call_options",
    "field",
    "flow_options",
    "headers_field",
    "open_state",
    "secrets_of",
    "time_field",
]

#: Seconds a sealed state opens (``to_state(seal=key)``): about the life of an ABDM transaction.
DEFAULT_STATE_MAX_AGE: Final = 1800.0

#: The per-call options a flow keeps in its state (the partner headers: ``X-Pt-Id``, ``X-Partner-Pt-Id``, ``X-Hip-Id``).
HEADER_OPTIONS: Final = ("user_id", "partner_user_id", "partner_hip_id")

#: A clock: seconds since the epoch (wall-clock, so that a state makes sense on another worker).
Clock = Callable[[], float]
StepT = TypeVar("StepT", bound=enum.Enum)
_T = TypeVar("_T")


class GuidedFlow(Generic[StepT]):
    """The base of every guided flow (see the module). ``repr`` shows the step only."""

    #: The flow's kind, as stored in its state.
    kind: ClassVar[str] = ""
    #: What each step expects, for the message of a call out of step.
    _expected: ClassVar[Mapping[Any, str]] = {}
    #: What the family's sealed states are for (a blob sealed for anything else never opens as one).
    _seal_purpose: ClassVar[bytes] = b""
    #: How the family's step changes are logged (``"<name> <kind>: A -> B"``, at debug level).
    _log_name: ClassVar[str] = "flow"

    def __init__(self, *, step: StepT, clock: Clock, blocked_until: float | None = None, revision: int = 0) -> None:
        self._step = step
        self._clock: Clock = clock
        self._blocked_until = blocked_until
        self._revision = revision
        self._busy = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(next_step={self._step.name})"

    @property
    def next_step(self) -> StepT:
        """What the flow expects next."""
        return self._step

    @property
    def blocked_until(self) -> float | None:
        """When ``BLOCKED``: the clock time (epoch seconds) after which a new flow may be started."""
        return self._blocked_until

    # -------------------------------------------------------------------- state

    @overload
    def to_state(self) -> dict[str, Any]: ...
    @overload
    def to_state(self, *, seal: bytes, max_age: float = DEFAULT_STATE_MAX_AGE) -> str: ...

    def to_state(self, *, seal: bytes | None = None, max_age: float = DEFAULT_STATE_MAX_AGE) -> dict[str, Any] | str:
        """The flow as a plain JSON-able dict (keep it server-side), or with ``seal=key`` (16, 24 or 32 secret
        bytes) as a sealed ``str`` that expires ``max_age`` seconds from now on the flow's clock. Each family
        documents its layout."""
        state = self._state()
        if seal is None:
            return state
        state.update(self._sealed_only())
        return _seal.seal(_json.dumps(state), seal, purpose=self._seal_purpose, now=self._clock(), max_age=max_age)

    def _state(self) -> dict[str, Any]:
        """The plain state (never a secret)."""
        raise NotImplementedError

    def _state_head(self, version: int) -> dict[str, Any]:
        """What every family's plain state starts with: ``version`` (the family's layout), ``kind``, ``step`` and
        ``revision``; :meth:`_state` adds the family's fields after it."""
        return {"version": version, "kind": self.kind, "step": self._step.value, "revision": self._revision}

    def _sealed_only(self) -> dict[str, Any]:
        """What a sealed state adds to the plain one (a secret, personal data); a plain state never holds it."""
        return {}

    # -------------------------------------------------------------------- machinery

    def _blocked_step(self) -> StepT:
        """The family's terminal step after a rate limit or a block."""
        raise NotImplementedError

    def _expected_now(self) -> str:
        """What the current step expects, for the message of a call out of step."""
        return self._expected[self._step]

    def _expect(self, operation: str, *steps: StepT) -> None:
        """Refuse, nothing sent, a call that does not fit the current step, or one made while another is in flight."""
        if self._step not in steps:
            raise InvalidFlowStep(
                f"{operation} does not fit this flow now: it is at {self._step.name} and expects "
                f"{self._expected_now()}; nothing sent"
            )
        self._busy_check(operation)

    def _busy_check(self, operation: str) -> None:
        if self._busy:
            raise InvalidFlowStep(f"{operation}: another call of this flow is still in flight; nothing sent")

    async def _run(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """Run one request of the flow: one at a time; a rate limit or block ends the flow (``BLOCKED``)."""
        self._busy_check("call")
        self._busy = True
        try:
            return await call()
        except AbhaRateLimited as exc:
            self._block(exc)
            raise
        finally:
            self._busy = False

    def _set_step(self, step: StepT) -> None:
        if step is not self._step:
            logger.debug("%s %s: %s -> %s", self._log_name, self.kind, self._step.name, step.name)
        self._step = step
        self._revision += 1

    def _block(self, exc: AbhaRateLimited) -> None:
        self._blocked_until = self._clock() + exc.try_again_after
        self._set_step(self._blocked_step())


# ------------------------------------------------------------------------------------------------ resuming


def open_state(
    state: Mapping[str, Any] | str, seal: bytes | None, *, purpose: bytes, now: float, version: int
) -> tuple[Mapping[str, Any], bool]:
    """The dict of a ``to_state()`` (plain, or sealed with ``seal``, opened at ``now``), its ``version`` checked;
    and whether it was sealed. Raises :class:`~health_async.errors.InvalidRequest` naming what is wrong (never a
    value); :class:`~health_async.errors.FlowStateInvalid` / :class:`~health_async.errors.FlowStateExpired` for a
    sealed one that does not open or has expired."""
    if seal is not None:
        if not isinstance(state, str):
            raise InvalidRequest("with seal=, state must be the str of to_state(seal=key)")
        plain = _seal.open_sealed(state, seal, purpose=purpose, now=now)
        try:
            state = _json.loads(plain)
        except ValueError:  # pragma: no cover - authenticated: only this library's own JSON opens
            raise FlowStateInvalid("the sealed state does not hold a flow state") from None
    elif isinstance(state, str):
        raise InvalidRequest("a sealed state (a str) needs seal=key, the key it was sealed with")
    if not isinstance(state, Mapping):
        raise InvalidRequest("state must be the dict of a flow's to_state()")
    if state.get("version") != version:
        raise InvalidRequest(f"state.version must be {version} (a state of another library version?)")
    return state, seal is not None


def field(state: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    """``state[name]`` when it is of ``kind`` (``None`` allowed when ``optional``); :class:`InvalidRequest` naming
    the field otherwise (a ``bool`` is not an ``int`` here)."""
    value = state.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise InvalidRequest(f"state.{name} has the wrong type")
    if not isinstance(value, kind):
        raise InvalidRequest(f"state.{name} is missing or has the wrong type")
    return value


def time_field(state: Mapping[str, Any], name: str) -> float | None:
    """An optional finite number of seconds, as a float."""
    value = field(state, name, (int, float), optional=True)
    if value is None:
        return None
    number = finite(value)
    if number is None:
        raise InvalidRequest(f"state.{name} must be a finite number")
    return number


def secrets_of(state: Mapping[str, Any], *, sealed: bool) -> dict[str, str]:
    """The ``secrets`` (name -> str) of a sealed state; a plain state never holds any: one that does is refused."""
    value = state.get("secrets")
    if value is None:
        return {}
    if not sealed:
        raise InvalidRequest("state.secrets is only ever in a sealed state (to_state(seal=key)), never a plain one")
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidRequest("state.secrets must map names to str")
    return dict(value)


def flow_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], bool | None]:
    """The per-call options a flow is started with, split: the partner headers given (kept in the flow and its
    state, ``None`` included: it leaves a header out) and ``encrypt`` (kept apart)."""
    headers = {k: v for k, v in options.items() if k != "encrypt"}
    encrypt = options.get("encrypt")
    return headers, encrypt if isinstance(encrypt, bool) else None


def call_options(headers: Mapping[str, str | None], encrypt: bool | None) -> dict[str, Any]:
    """The per-call options a flow sends each of its calls with: the partner headers it keeps and ``encrypt`` (what
    :func:`flow_options` split, put back together)."""
    options: dict[str, Any] = dict(headers)
    options["encrypt"] = encrypt
    return options


def headers_field(state: Mapping[str, Any]) -> dict[str, str | None]:
    """``state.headers``: only :data:`HEADER_OPTIONS`, each a str or ``None``; :class:`InvalidRequest` otherwise."""
    headers = field(state, "headers", Mapping, optional=True) or {}
    for key, value in headers.items():
        if key not in HEADER_OPTIONS or not (value is None or isinstance(value, str)):
            raise InvalidRequest(f"state.headers may hold only {', '.join(HEADER_OPTIONS)} (str or null)")
    return dict(headers)
