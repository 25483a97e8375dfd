"""``health-async abha register --aadhaar | --mobile``, ``health-async abha login`` and ``health-async abha kyc``:
walk a person through an ABHA registration, login or KYC upgrade, one question at a time, with the guided flows of
``client.abha``. (The one-call commands after registration, ``abha profile | card | qr | search | pincode``, are
:mod:`health_async._cli.abha.account`'s, registered here.)

* Aadhaar numbers, mobile numbers, ABHA numbers and OTPs are typed without echo (:func:`getpass.getpass`); ABHA
  addresses, names and the other profile details are echoed.
* Every step says what happened (the masked number the OTP went to) and what to type next; an empty answer to an
  OTP question asks for a resend (refused locally, with the wait, when too soon or too many).
* A wrong OTP is asked again; a bad answer says which rule it breaks (never repeating it).
* The result is one JSON line on stdout (address, masked ABHA number, OID, created or logged in); never the
  tokens. Messages go to stderr.
* Exit status: 0 done; 1 an error (one line: its type and message), or input that ended (end of file: "input
  ended", nothing more sent); 2 stdin is not a terminal (one line saying to use ``--json --state FILE``, nothing
  asked or sent: see :func:`~health_async._cli._prompt.refuse_without_terminal`); 130 cancelled with Ctrl-C (no
  traceback, nothing more sent).
* ``X-Pt-Id`` is sent only when ``--user-id OID`` is given on the command itself: never from ``HEALTH_ASYNC_USER_ID``
  (that is the OID of the records work; an ABHA registration or login is for a person who may have no OID yet, and
  must not be tied to, nor reveal, whatever OID is configured). See :func:`abha_headers`.
* ``abha kyc [--method aadhaar|abha-number] [--no-validate]`` upgrades an existing ABHA (one made with a mobile
  OTP) to KYC-verified: the Aadhaar (default) or ABHA number and the OTP are typed without echo; the result is
  ``{"kyc_verified": true, "status": "verified"}``. Its user is known to the service by the OID, so here
  ``X-Pt-Id`` is ``--user-id``, else ``HEALTH_ASYNC_USER_ID`` (judgement call: unlike a registration, a KYC
  upgrade is always of an existing user), and one of them is needed (refused before anything is asked or sent),
  unless a ``--json`` start input gives the user's ABHA token. See :func:`_kyc_headers`.

Answers are read through a prompt function (:data:`PROMPT`, default :func:`default_prompt`): tests pass their own
to :func:`run_register` / :func:`run_login` / :func:`run_kyc` or replace :data:`PROMPT`.

Scriptable mode: ``--json --state FILE``
----------------------------------------

For a script or another program driving the flow (a kiosk, a chat bot), ``abha register --aadhaar|--mobile``,
``abha login`` and ``abha kyc`` take ``--json --state FILE``: the command never prompts (no getpass, no prompt
text) and does **one step per run**. Every run reads at most one line of JSON from stdin and writes exactly one
line of JSON to stdout; the flow between runs is kept in ``FILE``, sealed (encrypted and authenticated, see
``AbhaFlow.to_state(seal=key)``) with the key in ``HEALTH_ASYNC_STATE_KEY``: URL-safe base64 of 16, 24 or 32
random bytes, e.g. ``python -c "import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())"``.
A missing or bad key is refused (exit 2) before anything is read or sent. The state file is written atomically
(a temporary file in the same folder, then ``os.replace``) with mode 0600, and expires 30 minutes after its last
step (about an ABDM transaction's life).

* **First run** (``FILE`` does not exist): the start input, one JSON object: ``{"aadhaar": "..."}``
  (``register --aadhaar``; ``--no-validate`` as usual), ``{"mobile": "..."}`` (``register --mobile``),
  ``{"identifier": "...", "method": "mobile"}`` (``login``; ``method`` is one of ``phr_address``, ``mobile``,
  ``abha_number``, ``aadhaar_number``, default ``--method``, itself default ``phr_address``; both given must
  agree), ``{"identifier": "...", "method": "aadhaar", "user_token": "..."}`` (``kyc``; ``method`` is
  ``aadhaar`` or ``abha-number``, default ``--method``, itself default ``aadhaar``, both given must agree;
  ``user_token``, optional, is the user's ABHA token when the script holds one: kept only in the sealed
  ``FILE``). The OTP is sent, ``FILE`` written, and the step line printed.
* **Later runs** (``FILE`` exists): the answer to the current step, one JSON object:

  ======================  ==================================================================================
  step                    answer
  ======================  ==================================================================================
  ``verify_otp``          ``{"otp": "123456", "mobile": "..."}`` (``mobile``: in an Aadhaar registration only,
                          and needed there: the number the ABHA is linked to), or ``{"resend": true}``; a
                          KYC upgrade has this step only
  ``verify_mobile_otp``   ``{"otp": "..."}`` (sent to that other mobile), or ``{"resend": true}``
  ``select_account``      ``{"abha_address": "..."}``: one of ``accounts`` (may be left out when there is one)
  ``create_address``      ``{"abha_address": "new.name@abdm"}``; a mobile registration adds ``"profile":
                          {"first_name", "gender" (M, F, O), "date_of_birth" (YYYY-MM-DD), "pincode", and
                          optionally "middle_name", "last_name", "address"}``. When the step line lists
                          ``accounts`` (a mobile shared with existing ABHA addresses), one of those addresses
                          logs into it instead of creating one.
  ======================  ==================================================================================

* **Step line** (stdout, exit status 3, :data:`EXIT_WAITING`: run again with the answer): ``{"step": ...}``
  with, at an OTP step, ``"hint"`` (where the OTP went, the mobile masked by the service) and ``"resend_in"``
  (seconds until ``{"resend": true}`` is allowed; ``null``: no resend, as in a login or when none are left); at
  ``select_account`` / ``create_address``, ``"accounts"`` (the existing ABHA addresses) when there are some; on
  arriving at ``create_address`` in an Aadhaar registration or login, ``"suggestions"`` (free addresses).
* **Done** (exit 0): ``{"step": "done", "abha_address", "abha_number" (masked), "created", "kyc_verified",
  "oid"}`` (``kyc``: ``{"step": "done", "kyc_verified": true, "status": "verified"}``), the result of the
  interactive mode, never the tokens; ``FILE`` is deleted.
* **No answer** (stdin empty, or a blank line) at a later run: the step line again, exit 3, nothing sent. At the
  first run there is nothing to wait for: an error (exit 1, ``{"step": null, "error": ...}``), nothing sent.
* **Errors** (exit 1): one line ``{"step": <the current step, null before there is a flow>, "error": {"type",
  "message"[, "status"]}}`` plus the fields of the step line. A malformed line or a refused answer (a wrong OTP,
  ``ResendTooSoon``, an address taken, a lost answer: ``OutcomeUnknown``) keeps the flow: ``FILE`` is saved
  again (a failed step may have moved it) and the same step can be answered again. A flow that cannot go on
  (``blocked``: ABDM's rate limit or block, with ``"blocked_until"``; ``log_in``: a lost create that most likely
  took effect, with ``"abha_address"``) and an expired ``FILE`` are deleted: start again. A ``FILE`` that does not
  open (changed, another key: ``FlowStateInvalid``) or holds another command's flow is left as it is.
* Exit status 2: bad usage (``--json`` without ``--state``, ``--state`` without ``--json``) or a bad key; 130:
  Ctrl-C (the flow, as far as it got, is saved).
* Nothing written (stdout, stderr, ``FILE`` in clear) holds an OTP, an Aadhaar or mobile number, a token or the
  key; error messages are the library's (which name the rule, never the value), with any number of this run's
  input blotted out besides.
* Judgement calls: the flow's ``X-Pt-Id`` is that of the first run's ``--user-id`` (``kyc``: else its
  ``HEALTH_ASYNC_USER_ID``; kept in the state), later runs' ``--user-id`` is not used; two runs at once on one
  ``FILE`` are not locked against each other (run the steps one after another).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import enum
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, TypeVar

import attrs

from ... import _constants as C
from ..._aadhaar import normalize_aadhaar
from ..._abha_input import AbhaHeaders, normalize_abha_address, normalize_abha_number
from ..._mobile import normalize_mobile
from ...errors import (
    AbhaError,
    AbhaRateLimited,
    AccountLikelyCreated,
    FlowStateExpired,
    HealthError,
    InvalidFlowStep,
    InvalidRequest,
    OtpMismatch,
    OutcomeUnknown,
    ResendTooSoon,
)
from ...models import AbhaAccount, FlowStep, KycMethod, KycResult, LoginMethod, NewAbhaProfile
from ...resources import AadhaarRegistration, AbhaFlow, AbhaLogin, KycUpgrade, MobileRegistration
from .._output import Command, emit
from .._prompt import Conversation as _Conversation
from .._prompt import GiveUp as _GiveUp
from .._prompt import Prompt, checkpoint, default_prompt, refuse_without_terminal
from .._state import ENV_STATE_KEY, EXIT_WAITING
from .._state import Secrets as _Secrets
from .._state import StateChanged as _StateChanged
from .._state import error_line as _error
from .._state import fields as _fields
from .._state import file_error as _file_error
from .._state import optional_text as _optional_text
from .._state import read_answer as _read_answer
from .._state import remove as _remove
from .._state import run_json as _run_json
from .._state import save as _save
from .._state import save_or_say as _save_or_say
from .._state import text as _text
from . import account as abha_account

if TYPE_CHECKING:
    from ..._client import HealthClient

__all__ = [
    "ENV_STATE_KEY",
    "EXIT_WAITING",
    "NO_CLIENT",
    "PROMPT",
    "Prompt",
    "abha_headers",
    "add_commands",
    "default_prompt",
    "run_json",
    "run_kyc",
    "run_login",
    "run_register",
]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset()


_E = TypeVar("_E", bound=enum.Enum)

#: The prompt the commands use when none is given.
PROMPT: Prompt = default_prompt


def abha_headers(args: argparse.Namespace) -> AbhaHeaders:
    """The headers of every ABHA call of a command: ``X-Pt-Id`` only from ``--user-id`` given on the command line.

    ``user_id`` is always passed (``None`` when the flag is absent), so the client's default ``user_id`` (from
    ``HEALTH_ASYNC_USER_ID`` when built by ``cli.run``) is never applied: an ABHA registration or login is for a
    possibly new person, not for the patient whose OID the environment holds for records work.
    """
    return {"user_id": getattr(args, "user_id", None)}


# ------------------------------------------------------------------------------------------------ the steps


async def _otp_step(flow: AbhaFlow, talk: _Conversation, mobile: str | None) -> None:
    mobile_step = flow.next_step is FlowStep.VERIFY_MOBILE_OTP
    what = "OTP sent to the new mobile number" if mobile_step else "OTP"
    answer = talk.ask(f"{what} (typing is not shown; Enter alone sends a new one): ", secret=True)
    await checkpoint()
    if not answer:
        try:
            await flow.resend_otp()
        except ResendTooSoon as exc:
            if exc.retry_after is None:
                talk.strike("  No more resends (ABDM locks the transaction after a few OTPs): type the OTP you got.")
            else:
                talk.strike(f"  Too soon for a new OTP: wait {exc.retry_after:.0f} s, or type the one you got.")
            return
        except InvalidFlowStep:
            talk.strike("  A login cannot resend its OTP: type the one you got, or start again in a minute.")
            return
        except OutcomeUnknown:
            talk.strike("  The resend may or may not have gone out: type the newest OTP you received.")
            return
        talk.say(f"  A new OTP was sent. {flow.hint or ''}".rstrip())
        return
    try:
        if mobile_step:
            await flow.verify_mobile_otp(answer)
        else:
            await flow.verify_otp(answer, mobile=mobile)
    except OtpMismatch:
        talk.strike("  That OTP is not right; type it again (ABDM locks the transaction after a few wrong OTPs).")
        return
    except InvalidRequest as exc:
        talk.strike(f"  {exc}")
        return
    except OutcomeUnknown:
        talk.strike("  The answer was lost on the way; type the OTP again.")
        return
    talk.idle = 0
    if flow.next_step is FlowStep.VERIFY_MOBILE_OTP:
        talk.say("This mobile number is not the one linked to the Aadhaar: an OTP was sent to it to confirm it.")
        if flow.hint:
            talk.say(f"  {flow.hint}")


def _list_accounts(flow: AbhaFlow, talk: _Conversation) -> None:
    for i, account in enumerate(flow.accounts, start=1):
        kyc = " (KYC verified)" if account.kyc_verified else ""
        talk.say(f"  {i}) {account.abha_address}{kyc}")


def _pick(flow: AbhaFlow, answer: str) -> str:
    count = len(flow.accounts)
    if not answer.isdigit() or not 1 <= int(answer) <= count:
        raise InvalidRequest(f"type a number from 1 to {count}")
    return flow.accounts[int(answer) - 1].abha_address or ""


async def _select_step(flow: AbhaFlow, talk: _Conversation) -> None:
    if isinstance(flow, AadhaarRegistration):
        talk.say("This Aadhaar already holds ABHA addresses: log into one instead of creating a duplicate.")
    else:
        talk.say("ABHA addresses found:")
    _list_accounts(flow, talk)
    count = len(flow.accounts)
    address = talk.ask_valid(f"Which one [1-{count}] (Enter: 1): ", lambda a: _pick(flow, a or "1"))
    await checkpoint()
    await flow.choose(address)


def _name(answer: str) -> str:
    if not answer:
        raise InvalidRequest("a first name is needed")
    return answer


def _gender(answer: str) -> str:
    if answer.upper() not in ("M", "F", "O"):
        raise InvalidRequest("type M, F or O")
    return answer.upper()


def _date(answer: str) -> dt.date:
    try:
        return dt.date.fromisoformat(answer)
    except ValueError:
        raise InvalidRequest("the date of birth must be YYYY-MM-DD") from None


def _profile(talk: _Conversation) -> NewAbhaProfile:
    """The person's details, each checked as typed; the rules of the whole profile are checked at the end."""
    talk.say("Your details for the new ABHA (a mobile registration has no Aadhaar KYC):")
    while True:
        first = talk.ask_valid("  First name: ", _name)
        last = talk.ask("  Last name (Enter: none): ") or None
        gender: Any = talk.ask_valid("  Gender (M, F or O): ", _gender)
        born = talk.ask_valid("  Date of birth (YYYY-MM-DD): ", _date)
        pincode = talk.ask("  PIN code: ")
        try:
            profile = NewAbhaProfile(
                first_name=first, last_name=last, gender=gender, date_of_birth=born, pincode=pincode
            )
        except InvalidRequest as exc:
            talk.strike(f"  {exc}; please type the details again")
            continue
        talk.idle = 0
        return profile


async def _suggestions(flow: AbhaFlow, profile: NewAbhaProfile | None) -> tuple[str, ...]:
    try:
        if profile is None:
            return await flow.suggest_addresses()
        return await flow.suggest_addresses(
            first_name=profile.first_name, last_name=profile.last_name, date_of_birth=profile.date_of_birth
        )
    except AbhaRateLimited:
        raise
    except HealthError:  # suggestions are a help, not a step: go on without them
        return ()


@attrs.define
class _Answers:
    """What the person typed that later steps need again (kept in memory only)."""

    mobile: str | None = None
    profile: NewAbhaProfile | None = None
    offered: bool = False  # the existing addresses of a shared mobile were offered


async def _create_step(
    client: HealthClient, flow: AbhaFlow, talk: _Conversation, answers: _Answers, headers: AbhaHeaders
) -> None:
    if flow.accounts and not answers.offered:  # a mobile already holding ABHA addresses (often a family's)
        talk.say("ABHA addresses already use this mobile number:")
        _list_accounts(flow, talk)
        answer = talk.ask("Type a number to log in with one of them, or Enter to create a new address: ")
        await checkpoint()
        if answer:
            try:
                address = _pick(flow, answer)
            except InvalidRequest as exc:
                talk.strike(f"  {exc}")
                return
            await flow.choose(address)
            return
        answers.offered = True
    if isinstance(flow, MobileRegistration) and answers.profile is None:
        answers.profile = _profile(talk)
    suggestions = await _suggestions(flow, answers.profile)
    if suggestions:
        talk.say("Free ABHA addresses: " + ", ".join(suggestions))
    default = f" (Enter: {suggestions[0]})" if suggestions else ""
    answer = talk.ask(f"New ABHA address, e.g. name.surname@abdm{default}: ") or (suggestions[0] if suggestions else "")
    await checkpoint()
    try:
        address = normalize_abha_address(answer, new=True)
    except InvalidRequest as exc:
        talk.strike(f"  {exc}")
        return
    if not flow.create_outcome_unknown and await client.abha.address_exists(address, **headers):
        talk.strike("  That ABHA address is taken; choose another.")
        return
    try:
        await flow.create(address, profile=answers.profile)
    except AccountLikelyCreated:
        raise
    except OutcomeUnknown:
        talk.strike("  The answer was lost: it may have been created. Type the address again to check and go on.")
    except AbhaError as exc:
        if exc.source_code != "ABDM-1101" or isinstance(exc, AbhaRateLimited):
            raise
        talk.strike("  That ABHA address is taken; choose another.")


async def _drive(
    client: HealthClient, flow: AbhaFlow, talk: _Conversation, headers: AbhaHeaders, *, ask_mobile: bool
) -> None:
    """Walk the flow to its end (``DONE``), one question at a time."""
    answers = _Answers()
    while True:
        step = flow.next_step
        if step is FlowStep.DONE:
            return
        if step is FlowStep.VERIFY_OTP and ask_mobile and answers.mobile is None:
            answers.mobile = talk.ask_valid(
                "Mobile number to link to the ABHA (typing is not shown): ", normalize_mobile, secret=True
            )
        if step in (FlowStep.VERIFY_OTP, FlowStep.VERIFY_MOBILE_OTP):
            await _otp_step(flow, talk, answers.mobile)
        elif step is FlowStep.SELECT_ACCOUNT:
            await _select_step(flow, talk)
        elif step is FlowStep.CREATE_ADDRESS:
            if isinstance(flow, AbhaLogin) and not flow.accounts:
                talk.say("No ABHA address holds this Aadhaar yet: create one now (with its Aadhaar KYC).")
            await _create_step(client, flow, talk, answers, headers)
        else:  # pragma: no cover - BLOCKED and LOG_IN arrive with their exception
            raise InvalidFlowStep(f"the flow stopped at {step.name}")


# ------------------------------------------------------------------------------------------------ commands


def _result(account: AbhaAccount) -> dict[str, Any]:
    return {
        "abha_address": account.abha_address,
        "abha_number": account.masked_abha_number,
        "created": account.created,
        "kyc_verified": account.kyc_verified,
        "oid": account.oid,
    }


def _kyc_result(result: KycResult) -> dict[str, Any]:
    """The result of a KYC upgrade: its status only (the answer's transaction id is not for the user)."""
    return {"kyc_verified": result.kyc_verified, "status": result.status.value}


def _done(flow: AbhaFlow) -> dict[str, Any] | None:
    """The result line of a flow at ``DONE`` in this process (``None``: no result here)."""
    if isinstance(flow, KycUpgrade):
        return None if flow.result is None else _kyc_result(flow.result)
    return None if flow.account is None else _result(flow.account)


def _done_message(flow: AbhaFlow) -> str:
    """What the interactive mode says at the end (an ABHA address, never a number)."""
    if isinstance(flow, KycUpgrade):
        return "Done: the ABHA is now KYC-verified."
    account = flow.account
    assert account is not None
    done = "created, and you are logged in" if account.created else "logged in"
    return f"Done: ABHA address {account.abha_address} {done}."


def _failure(exc: BaseException) -> str:
    if isinstance(exc, AccountLikelyCreated):
        return (
            f"{type(exc).__name__}: the lost create most likely took effect: log in with that address "
            "('health-async abha login'); nothing more was sent"
        )
    if isinstance(exc, OutcomeUnknown):
        return f"{type(exc).__name__}: {exc} (ask the person whether an SMS arrived; start again in a minute)"
    return f"{type(exc).__name__}: {exc}"


def _refuse_without_terminal(talk: _Conversation, command: str) -> int | None:
    """Exit status 2 (nothing asked or sent) when stdin is not a terminal: the interactive mode needs one; a
    script runs the flow with ``--json --state FILE``."""
    return refuse_without_terminal(
        talk.prompt,
        talk.err,
        f"health-async abha {command}",
        f"From a script, run one step per run with --json --state FILE and one JSON line on stdin (see "
        f"'health-async abha {command} --help').",
    )


async def _converse(
    label: str,
    client: HealthClient,
    talk: _Conversation,
    start: Callable[[], Awaitable[AbhaFlow]],
    headers: AbhaHeaders,
    *,
    ask_mobile: bool,
) -> int:
    try:
        flow = await start()
        talk.say(f"An OTP was sent. {flow.hint or ''}".rstrip())
        await _drive(client, flow, talk, headers, ask_mobile=ask_mobile)
    except KeyboardInterrupt:
        talk.say(f"\n{label}: cancelled; nothing more was sent.")
        return 130
    except asyncio.CancelledError:  # a Ctrl-C while a prompt waited, taken at the checkpoint after it (130)
        talk.say(f"\n{label}: cancelled; nothing more was sent.")
        raise
    except EOFError:  # stdin ended (a script, a closed pipe): an error of the input, not the person's Ctrl-C
        talk.say(f"\n{label}: input ended before the flow did; nothing more was sent.")
        return 1
    except _GiveUp as exc:
        talk.say(f"{label}: {exc}")
        return 1
    except HealthError as exc:
        talk.say(f"{label}: {_failure(exc)}")
        return 1
    result = _done(flow)
    assert result is not None  # a flow of this process at DONE holds its result
    talk.say(_done_message(flow))
    emit(result)
    return 0


async def run_register(
    client: HealthClient, args: argparse.Namespace, *, prompt: Prompt | None = None, err: IO[str] | None = None
) -> int:
    """``abha register --aadhaar`` / ``--mobile``: the interactive registration; returns the exit status."""
    talk = _Conversation(prompt or PROMPT, err or sys.stderr, "abha register")
    if (refused := _refuse_without_terminal(talk, "register")) is not None:
        return refused
    validate = not getattr(args, "no_validate", False)
    headers = abha_headers(args)

    async def start() -> AbhaFlow:
        if args.mobile:
            mobile = talk.ask_valid("Mobile number (typing is not shown): ", normalize_mobile, secret=True)
            await checkpoint()
            return await client.abha.register_with_mobile(mobile, **headers)
        number = talk.ask_valid(
            "Aadhaar number (typing is not shown): ", lambda n: normalize_aadhaar(n, validate=validate), secret=True
        )
        await checkpoint()
        return await client.abha.register_with_aadhaar(number, validate=validate, **headers)

    return await _converse("abha register", client, talk, start, headers, ask_mobile=not args.mobile)


_IDENTIFIERS: dict[LoginMethod, tuple[str, Callable[[str], str], bool]] = {
    LoginMethod.PHR_ADDRESS: ("ABHA address (name@abdm): ", normalize_abha_address, False),
    LoginMethod.MOBILE: ("Mobile number (typing is not shown): ", normalize_mobile, True),
    LoginMethod.ABHA_NUMBER: ("ABHA number (typing is not shown): ", normalize_abha_number, True),
    LoginMethod.AADHAAR_NUMBER: ("Aadhaar number (typing is not shown): ", normalize_aadhaar, True),
}


async def run_login(
    client: HealthClient, args: argparse.Namespace, *, prompt: Prompt | None = None, err: IO[str] | None = None
) -> int:
    """``abha login [--method ...]``: the interactive login; returns the exit status."""
    talk = _Conversation(prompt or PROMPT, err or sys.stderr, "abha login")
    if (refused := _refuse_without_terminal(talk, "login")) is not None:
        return refused
    method = LoginMethod(getattr(args, "method", None) or LoginMethod.PHR_ADDRESS.value)
    question, check, secret = _IDENTIFIERS[method]
    headers = abha_headers(args)

    async def start() -> AbhaFlow:
        identifier = talk.ask_valid(question, check, secret=secret)
        await checkpoint()
        return await client.abha.login(method, identifier, **headers)

    return await _converse("abha login", client, talk, start, headers, ask_mobile=False)


_KYC_QUESTIONS: Final[dict[KycMethod, str]] = {
    KycMethod.AADHAAR: "Aadhaar number (typing is not shown): ",
    KycMethod.ABHA_NUMBER: "ABHA number (typing is not shown): ",
}


def _kyc_identifier(method: KycMethod, raw: str, *, validate: bool) -> str:
    """The identifier of a KYC upgrade, checked as ``method`` says (``client.abha.kyc_init``'s rules)."""
    if method is KycMethod.AADHAAR:
        return normalize_aadhaar(raw, validate=validate)
    return normalize_abha_number(raw)


def _kyc_headers(client: HealthClient, args: argparse.Namespace, *, user_token: str | None = None) -> AbhaHeaders:
    """``X-Pt-Id`` of a KYC upgrade: the OID of ``--user-id``, else the client's (``HEALTH_ASYNC_USER_ID``).

    Unlike a registration, a KYC upgrade is of an existing ABHA user, whom the service knows by that OID (or by the
    user's ABHA token). The OID is passed explicitly so that a ``--json`` flow keeps it in its state. Raises
    :class:`InvalidRequest` (nothing sent) when there is neither an OID nor a user token.
    """
    oid = getattr(args, "user_id", None) or client.user_id
    if oid is None and user_token is None:
        raise InvalidRequest(
            f"abha kyc needs the user's OID (X-Pt-Id): --user-id OID or {C.ENV_USER_ID}; nothing was sent"
        )
    return {"user_id": oid}


async def run_kyc(
    client: HealthClient, args: argparse.Namespace, *, prompt: Prompt | None = None, err: IO[str] | None = None
) -> int:
    """``abha kyc [--method aadhaar|abha-number]``: the interactive KYC upgrade of the user's ABHA (the number
    and the OTP typed without echo); returns the exit status."""
    talk = _Conversation(prompt or PROMPT, err or sys.stderr, "abha kyc")
    if (refused := _refuse_without_terminal(talk, "kyc")) is not None:
        return refused
    method = KycMethod(getattr(args, "method", None) or KycMethod.AADHAAR.value)
    validate = not getattr(args, "no_validate", False)

    async def start() -> AbhaFlow:
        headers = _kyc_headers(client, args)  # before anything is asked
        identifier = talk.ask_valid(
            _KYC_QUESTIONS[method], lambda n: _kyc_identifier(method, n, validate=validate), secret=True
        )
        await checkpoint()
        return await client.abha.kyc(method, identifier, validate=validate, **headers)

    return await _converse("abha kyc", client, talk, start, {}, ask_mobile=False)


# ------------------------------------------------------------------------------------------------ --json


_START_INPUT: Final = {
    "aadhaar": '{"aadhaar": "..."}',
    "mobile": '{"mobile": "..."}',
    "login": '{"identifier": "...", "method": "..."} (method optional)',
    "kyc": '{"identifier": "...", "method": "...", "user_token": "..."} (method and user_token optional)',
}


def _start_kind(args: argparse.Namespace) -> str:
    """The command's key in :data:`_START_INPUT`."""
    if args.abha_command == "register":
        return "mobile" if args.mobile else "aadhaar"
    return str(args.abha_command)


def _method_of(flag: str | None, given: str | None, methods: Sequence[_E], default: _E) -> _E:
    """The method of a start input (``given``) or of ``--method`` (``flag``), else ``default``; both given must
    agree."""
    chosen = flag if given is None else given
    if chosen is None:
        return default
    method = next((m for m in methods if m.value == chosen), None)
    if method is None:
        raise InvalidRequest('"method" must be one of ' + ", ".join(str(m.value) for m in methods))
    if given is not None and flag is not None and flag != method.value:
        raise InvalidRequest('"method" and --method differ: give one of them')
    return method


def _login_method(args: argparse.Namespace, given: str | None) -> LoginMethod:
    return _method_of(getattr(args, "method", None), given, list(_IDENTIFIERS), LoginMethod.PHR_ADDRESS)


async def _start_kyc(
    client: HealthClient, args: argparse.Namespace, answer: Mapping[str, Any], secrets: _Secrets
) -> KycUpgrade:
    """Start a KYC upgrade from the first run's input (checked before anything is sent)."""
    _fields(answer, "the start of a KYC upgrade", ["identifier", "method", "user_token"])
    given = _optional_text(answer, "method")
    method = _method_of(getattr(args, "method", None), given, list(KycMethod), KycMethod.AADHAAR)
    token = _optional_text(answer, "user_token")
    secrets.add(token)
    raw = _text(answer, "identifier")
    secrets.add(raw)
    validate = not getattr(args, "no_validate", False)
    identifier = _kyc_identifier(method, raw, validate=validate)
    secrets.add(identifier)
    headers = _kyc_headers(client, args, user_token=token)
    return await client.abha.kyc(method, identifier, user_token=token, validate=validate, **headers)


async def _start(
    client: HealthClient, args: argparse.Namespace, answer: Mapping[str, Any], secrets: _Secrets
) -> AbhaFlow:
    """Start the command's flow from the first run's input (checked before anything is sent)."""
    if args.abha_command == "kyc":
        return await _start_kyc(client, args, answer, secrets)
    headers = abha_headers(args)
    if args.abha_command == "register" and args.mobile:
        _fields(answer, "the start of a mobile registration", ["mobile"])
        raw = _text(answer, "mobile")
        secrets.add(raw)
        mobile = normalize_mobile(raw)
        secrets.add(mobile)
        return await client.abha.register_with_mobile(mobile, **headers)
    if args.abha_command == "register":
        _fields(answer, "the start of an Aadhaar registration", ["aadhaar"])
        validate = not getattr(args, "no_validate", False)
        raw = _text(answer, "aadhaar")
        secrets.add(raw)
        number = normalize_aadhaar(raw, validate=validate)
        secrets.add(number)
        return await client.abha.register_with_aadhaar(number, validate=validate, **headers)
    _fields(answer, "the start of a login", ["identifier", "method"])
    method = _login_method(args, _optional_text(answer, "method"))
    _question, check, secret = _IDENTIFIERS[method]
    raw = _text(answer, "identifier")
    if secret:
        secrets.add(raw)
    identifier = check(raw)
    if secret:
        secrets.add(identifier)
    return await client.abha.login(method, identifier, **headers)


_PROFILE_FIELDS: Final = ("first_name", "middle_name", "last_name", "gender", "date_of_birth", "pincode", "address")


def _profile_of(value: Any) -> NewAbhaProfile | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequest('"profile" must be a JSON object')
    _fields(value, '"profile"', _PROFILE_FIELDS)
    fields = dict(value)
    born = fields.get("date_of_birth")
    if not isinstance(born, str):
        raise InvalidRequest('"profile" needs "date_of_birth" as "YYYY-MM-DD"')
    fields["date_of_birth"] = _date(born)
    if isinstance(fields.get("gender"), str):
        fields["gender"] = _gender(fields["gender"])
    try:
        return NewAbhaProfile(**fields)
    except InvalidRequest:
        raise
    except TypeError:  # a required field left out, or not a string
        raise InvalidRequest(
            '"profile" needs "first_name", "gender", "date_of_birth" and "pincode" (strings)'
        ) from None


def _offered(flow: AbhaFlow, address: str) -> bool:
    """Whether ``address`` is one of the flow's existing accounts (name compared without case and suffix)."""
    key = address.strip().lower().partition("@")[0]
    return any((a.abha_address or "").strip().lower().partition("@")[0] == key for a in flow.accounts)


async def _create_answer(flow: AbhaFlow, answer: Mapping[str, Any], where: str) -> None:
    _fields(answer, where, ["abha_address", "profile"])
    address = _text(answer, "abha_address")
    if flow.accounts and _offered(flow, address):  # a mobile shared with existing ABHA addresses: log into one
        await flow.choose(address)
        return
    profile = _profile_of(answer.get("profile"))
    if isinstance(flow, MobileRegistration) and profile is None:
        raise InvalidRequest(
            'a mobile registration (no Aadhaar KYC) needs "profile": {"first_name", "gender", "date_of_birth", '
            '"pincode"}'
        )
    await flow.create(address, profile=profile)


async def _answer(flow: AbhaFlow, answer: Mapping[str, Any], secrets: _Secrets) -> tuple[str, ...]:
    """Do the flow's current step with ``answer``; returns the free addresses to show when the step arrived at
    ``CREATE_ADDRESS`` (an Aadhaar registration or login: the KYC gives the names)."""
    step = flow.next_step
    where = f"the answer at {step.value}"
    if step in (FlowStep.VERIFY_OTP, FlowStep.VERIFY_MOBILE_OTP):
        needs_mobile = step is FlowStep.VERIFY_OTP and isinstance(flow, AadhaarRegistration)
        _fields(answer, where, ["otp", "mobile", "resend"] if needs_mobile else ["otp", "resend"])
        if "resend" in answer:
            if answer["resend"] is not True or len(answer) != 1:
                raise InvalidRequest('a resend is {"resend": true}, alone')
            await flow.resend_otp()
            return ()
        otp = _text(answer, "otp")
        secrets.add(otp)
        if step is FlowStep.VERIFY_MOBILE_OTP:
            await flow.verify_mobile_otp(otp)
        else:
            mobile = _optional_text(answer, "mobile")
            if mobile is not None:
                secrets.add(mobile)
                mobile = normalize_mobile(mobile)
                secrets.add(mobile)
            elif needs_mobile:
                raise InvalidRequest(
                    '"mobile" is needed with the OTP of an Aadhaar registration: the mobile number to link the ABHA to'
                )
            await flow.verify_otp(otp, mobile=mobile)
    elif step is FlowStep.SELECT_ACCOUNT:
        _fields(answer, where, ["abha_address"])
        await flow.choose(_optional_text(answer, "abha_address"))
    elif step is FlowStep.CREATE_ADDRESS:
        await _create_answer(flow, answer, where)
    else:  # pragma: no cover - the ended steps never get here (see _next_run)
        raise InvalidFlowStep(f"the flow is at {step.value}: nothing more to answer")
    if step is not FlowStep.CREATE_ADDRESS and flow.next_step is FlowStep.CREATE_ADDRESS:
        if not isinstance(flow, MobileRegistration):  # a mobile registration's suggestions need the profile
            return await _suggestions(flow, None)
    return ()


def _step_line(flow: AbhaFlow, suggestions: Iterable[str] = ()) -> dict[str, Any]:
    """The line saying where the flow is and what it waits for."""
    step = flow.next_step
    line: dict[str, Any] = {"step": step.value}
    if step in (FlowStep.VERIFY_OTP, FlowStep.VERIFY_MOBILE_OTP):
        wait = flow.resend_available_in()
        line["hint"] = flow.hint
        line["resend_in"] = None if wait is None else round(wait, 1)
    elif step in (FlowStep.SELECT_ACCOUNT, FlowStep.CREATE_ADDRESS) and flow.accounts:
        line["accounts"] = [a.abha_address for a in flow.accounts]
    elif step is FlowStep.BLOCKED:
        line["blocked_until"] = flow.blocked_until
    free = list(suggestions)
    if free:
        line["suggestions"] = free
    return line


_ENDED: Final = frozenset({FlowStep.DONE, FlowStep.LOG_IN, FlowStep.BLOCKED})


def _finish(
    flow: AbhaFlow,
    path: Path,
    key: bytes,
    secrets: _Secrets,
    *,
    loaded: str | None,
    error: BaseException | None = None,
    suggestions: Iterable[str] = (),
) -> int:
    """After a step: the result (done: the state file deleted), or the state saved and the step line, with the
    step's error if any; returns the exit status. ``loaded``: the state file as this run read it."""
    step = flow.next_step
    done = _done(flow) if step is FlowStep.DONE and error is None else None
    if done is not None:
        _remove(path, loaded)
        emit({"step": step.value, **done})
        return 0
    line = _step_line(flow, suggestions)
    if step in _ENDED:  # the flow cannot go on (blocked, a create that most likely took effect): start again
        _remove(path, loaded)
        if isinstance(error, AccountLikelyCreated):
            line["abha_address"] = error.abha_address
        if error is None:
            error = InvalidFlowStep(f"the flow has ended at {step.value}: start a new one")
    elif not _save_or_say(path, flow.to_state(seal=key), loaded, line):
        return 1
    if error is not None:
        problem = _error(error, secrets)
        if step is FlowStep.CREATE_ADDRESS and problem.get("source_code") == "ABDM-1101":  # the service says little
            problem["message"] = f"that ABHA address is taken: choose another ({problem['message']})"
        emit({**line, "error": problem})
        return 1
    emit(line)
    return EXIT_WAITING


_FLOW_OF: Final[dict[tuple[str, bool], type[AbhaFlow]]] = {
    ("register", False): AadhaarRegistration,
    ("register", True): MobileRegistration,
    ("login", False): AbhaLogin,
    ("kyc", False): KycUpgrade,
}


async def _first_run(
    client: HealthClient,
    args: argparse.Namespace,
    path: Path,
    key: bytes,
    stdin: IO[str] | IO[bytes] | None,
    secrets: _Secrets,
) -> int:
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK | os.X_OK):
        folder = OSError(0, "its folder does not exist or is not writable")
        emit({"step": None, "error": _file_error(folder, "cannot be written; nothing sent")})
        return 1
    try:
        answer = _read_answer(stdin)
        if answer is None:
            expected = _START_INPUT[_start_kind(args)]
            raise InvalidRequest(f"no start input: the first run reads one JSON line, {expected}")
        flow = await _start(client, args, answer, secrets)
    except HealthError as exc:  # nothing was started: no state
        emit({"step": None, "error": _error(exc, secrets)})
        return 1
    return _finish(flow, path, key, secrets, loaded=None)


async def _next_run(
    client: HealthClient,
    args: argparse.Namespace,
    path: Path,
    key: bytes,
    sealed: str,
    stdin: IO[str] | IO[bytes] | None,
    secrets: _Secrets,
) -> int:
    try:
        flow = client.abha.resume(sealed, seal=key)
    except FlowStateExpired as exc:  # start again: the file is of no more use
        _remove(path, sealed)
        emit({"step": None, "error": _error(exc, secrets)})
        return 1
    except InvalidRequest as exc:  # FlowStateInvalid (changed, another key), a state of another version: kept
        problem = _error(exc, secrets)
        problem["message"] += (
            f"; to start over, delete the state file (nothing of it can be used) and run the first step again "
            f"with {_START_INPUT[_start_kind(args)]}"
        )
        emit({"step": None, "error": problem})
        return 1
    expected = _FLOW_OF[(args.abha_command, bool(getattr(args, "mobile", False)))]
    if type(flow) is not expected:
        mismatch = InvalidRequest(f"the state file holds a {flow.kind} flow, not one of this command; left as it is")
        emit({"step": None, "error": _error(mismatch, secrets)})
        return 1
    if flow.next_step in _ENDED:
        return _finish(flow, path, key, secrets, loaded=sealed)
    try:
        answer = _read_answer(stdin)
    except InvalidRequest as exc:
        return _finish(flow, path, key, secrets, loaded=sealed, error=exc)
    if answer is None:  # nothing to do: say again what the flow waits for
        emit(_step_line(flow))
        return EXIT_WAITING
    try:
        suggestions = await _answer(flow, answer, secrets)
    except HealthError as exc:
        return _finish(flow, path, key, secrets, loaded=sealed, error=exc)
    except (KeyboardInterrupt, asyncio.CancelledError):  # keep the flow as far as it got
        if flow.next_step not in _ENDED:
            with contextlib.suppress(OSError, HealthError, _StateChanged):
                _save(path, flow.to_state(seal=key), sealed)
        raise
    return _finish(flow, path, key, secrets, loaded=sealed, suggestions=suggestions)


async def run_json(client: HealthClient, args: argparse.Namespace, *, stdin: IO[str] | IO[bytes] | None = None) -> int:
    """``abha register|login|kyc --json --state FILE``: one step of the flow per run, JSON in and out (see the module
    docstring); returns the exit status (0 done, :data:`EXIT_WAITING` waiting for the next answer, 1 an error,
    2 bad usage or key, 130 Ctrl-C)."""
    return await _run_json(
        f"health-async abha {args.abha_command}",
        args,
        lambda path, key, stream, secrets: _first_run(client, args, path, key, stream, secrets),
        lambda path, key, sealed, stream, secrets: _next_run(client, args, path, key, sealed, stream, secrets),
        stdin=stdin,
    )


async def _abha(client: Any, args: argparse.Namespace) -> int:
    account: Command | None = getattr(args, "abha_run", None)  # profile, card, qr, search, pincode
    if account is not None:
        return await account(client, args)
    if getattr(args, "json", False) or getattr(args, "state", None) is not None:
        return await run_json(client, args)
    if args.abha_command == "register":
        return await run_register(client, args)
    if args.abha_command == "kyc":
        return await run_kyc(client, args)
    return await run_login(client, args)


#: The epilog of ``abha register`` / ``abha login``: the shared ``--user-id`` flag says "env ...", not so here.
_PT_ID_EPILOG = (
    "X-Pt-Id is sent only when --user-id OID is given on this command: "
    f"{C.ENV_USER_ID} is not used (an ABHA is for a person who may have no OID yet)."
)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``abha`` (``register``, ``login``, ``kyc``, and :mod:`.abha_account`'s ``profile``, ``card``, ``qr``,
    ``search``, ``pincode``) to ``sub``; return ``{"abha": handler}``."""
    parser = sub.add_parser(
        "abha",
        help="ABHA registration, login and KYC step by step (interactive, or scripted with --json); the profile, "
        "card, QR, search, pincode",
        description="Walk a person through an ABHA registration, login or KYC upgrade. Numbers and OTPs are typed "
        "without echo; the result is one JSON line (never the tokens). Ctrl-C stops cleanly (exit 130). With --json "
        "--state FILE: no prompts, one step per run, JSON lines in and out (exit 3: waiting for the next answer). "
        "After registration: the profile (read, update, delete), the ABHA card and QR code, a search by mobile "
        "number and pincode details.",
    )
    asub = parser.add_subparsers(dest="abha_command", required=True, metavar="SUBCOMMAND")
    p = asub.add_parser(
        "register",
        parents=[common],
        help="create an ABHA address with an Aadhaar or a mobile OTP",
        description="Create an ABHA address: with --aadhaar (KYC-verified, an ABHA number too) or --mobile (no KYC). "
        "When the Aadhaar already holds ABHA addresses, logs into one instead of creating a duplicate.",
        epilog=_PT_ID_EPILOG,
    )
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--aadhaar", action="store_true", help="register with an Aadhaar OTP")
    how.add_argument("--mobile", action="store_true", help="register with a mobile OTP (no KYC)")
    p.add_argument("--no-validate", action="store_true", help="skip the Aadhaar digit rules (sandbox numbers)")
    _add_json_flags(p)
    p = asub.add_parser(
        "login",
        parents=[common],
        help="log into an ABHA address with an OTP",
        description="Log in with an OTP sent for an ABHA address (default), a mobile, an ABHA or an Aadhaar number.",
        epilog=_PT_ID_EPILOG,
    )
    p.add_argument(
        "--method",
        choices=[m.value for m in _IDENTIFIERS],
        default=None,  # phr_address; None tells --json that the flag was not given (see _login_method)
        help="what identifies the person (default phr_address: the ABHA address)",
    )
    _add_json_flags(p)
    p = asub.add_parser(
        "kyc",
        parents=[common],
        help="KYC-verify an ABHA (made with a mobile OTP) with an Aadhaar or ABHA number OTP",
        description="Upgrade the user's ABHA to KYC-verified: an OTP goes to the mobile of the Aadhaar (default) or "
        "ABHA number, typed without echo; Enter alone asks for a new one. The result is one JSON line, "
        '{"kyc_verified": true, "status": "verified"}. With --json --state FILE: the start input is '
        + _START_INPUT["kyc"]
        + ' ("user_token": the user\'s ABHA token, when the script holds one), then {"otp": "..."} or '
        '{"resend": true}; the OTP is sent once and never repeated.',
        epilog=f"X-Pt-Id (whose ABHA): the OID of --user-id, else of {C.ENV_USER_ID}; one of them is needed unless "
        "the --json start input gives the user's token.",
    )
    p.add_argument(
        "--method",
        choices=[m.value for m in KycMethod],
        default=None,  # aadhaar; None tells --json that the flag was not given
        help="what the person proves their identity with (default aadhaar)",
    )
    p.add_argument("--no-validate", action="store_true", help="skip the Aadhaar digit rules (sandbox numbers)")
    _add_json_flags(p)
    abha_account.add_commands(asub, common)
    return {"abha": _abha}


def _add_json_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help="no prompts: one step per run, one JSON line in (stdin) and out; exit 3 while waiting for an answer",
    )
    p.add_argument(
        "--state",
        metavar="FILE",
        help=f"with --json: where the flow is kept between runs (sealed with the key in {ENV_STATE_KEY}; mode 0600)",
    )
