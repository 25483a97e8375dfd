"""``health-async abha register --aadhaar | --mobile`` and ``health-async abha login``: walk a person through an
ABHA registration or login, one question at a time, with the guided flows of ``client.abha``.

* Aadhaar numbers, mobile numbers, ABHA numbers and OTPs are typed without echo (:func:`getpass.getpass`); ABHA
  addresses, names and the other profile details are echoed.
* Every step says what happened (the masked number the OTP went to) and what to type next; an empty answer to an
  OTP question asks for a resend (refused locally, with the wait, when too soon or too many).
* A wrong OTP is asked again; a bad answer says which rule it breaks (never repeating it).
* The result is one JSON line on stdout (address, masked ABHA number, OID, created or logged in); never the
  tokens. Messages go to stderr.
* Exit status: 0 done; 1 an error (one line: its type and message), or input that ended (end of file on a
  non-interactive stdin: "input ended", nothing more sent); 130 cancelled with Ctrl-C (no traceback, nothing more
  sent).
* ``X-Pt-Id`` is sent only when ``--user-id OID`` is given on the command itself: never from ``HEALTH_ASYNC_USER_ID``
  (that is the OID of the records work; an ABHA registration or login is for a person who may have no OID yet, and
  must not be tied to, nor reveal, whatever OID is configured). See :func:`abha_headers`.

Answers are read through a prompt function (:data:`PROMPT`, default :func:`default_prompt`): tests pass their own
to :func:`run_register` / :func:`run_login` or replace :data:`PROMPT`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import sys
from collections.abc import Awaitable, Callable
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

import attrs

from .. import _constants as C
from .._aadhaar import normalize_aadhaar
from .._abha_input import AbhaHeaders, normalize_abha_address, normalize_abha_number
from .._mobile import normalize_mobile
from ..errors import (
    AbhaError,
    AbhaRateLimited,
    AccountLikelyCreated,
    HealthError,
    InvalidFlowStep,
    InvalidRequest,
    OtpMismatch,
    OutcomeUnknown,
    ResendTooSoon,
)
from ..models import AbhaAccount, FlowStep, LoginMethod, NewAbhaProfile
from ..resources import AadhaarRegistration, AbhaFlow, AbhaLogin, MobileRegistration
from ._output import Command, emit

if TYPE_CHECKING:
    from .._client import HealthClient

__all__ = [
    "NO_CLIENT",
    "PROMPT",
    "Prompt",
    "abha_headers",
    "add_commands",
    "default_prompt",
    "run_login",
    "run_register",
]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset()

#: Answers that do not move the flow on (bad input, a refused resend, a wrong OTP) before the command gives up.
MAX_IDLE_ANSWERS = 8

_T = TypeVar("_T")


class Prompt(Protocol):
    """Ask ``question`` and return the answer; ``secret=True`` reads it without echo. Raises ``KeyboardInterrupt``
    (Ctrl-C) or ``EOFError`` (end of input) to cancel."""

    def __call__(self, question: str, *, secret: bool = False) -> str: ...


def default_prompt(question: str, *, secret: bool = False) -> str:
    """The terminal prompt: :func:`getpass.getpass` (no echo) for secrets, a line of stdin otherwise; the question
    is written to stderr."""
    if secret:
        return getpass.getpass(question, stream=sys.stderr)
    sys.stderr.write(question)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\r\n")


#: The prompt the commands use when none is given.
PROMPT: Prompt = default_prompt


def abha_headers(args: argparse.Namespace) -> AbhaHeaders:
    """The headers of every ABHA call of a command: ``X-Pt-Id`` only from ``--user-id`` given on the command line.

    ``user_id`` is always passed (``None`` when the flag is absent), so the client's default ``user_id`` (from
    ``HEALTH_ASYNC_USER_ID`` when built by ``cli.run``) is never applied: an ABHA registration or login is for a
    possibly new person, not for the patient whose OID the environment holds for records work.
    """
    return {"user_id": getattr(args, "user_id", None)}


class _GiveUp(Exception):
    """Too many answers that did not move the flow on."""


class _Conversation:
    def __init__(self, prompt: Prompt, err: IO[str], label: str) -> None:
        self.prompt = prompt
        self.err = err
        self.label = label
        self.idle = 0

    def say(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    def ask(self, question: str, *, secret: bool = False) -> str:
        return self.prompt(question, secret=secret).strip()

    def strike(self, text: str) -> None:
        """An answer that did not move the flow on: say why; give up after :data:`MAX_IDLE_ANSWERS`."""
        self.say(text)
        self.idle += 1
        if self.idle >= MAX_IDLE_ANSWERS:
            raise _GiveUp(f"{self.idle} answers in a row did not move on; start again")

    def ask_valid(self, question: str, check: Callable[[str], _T], *, secret: bool = False) -> _T:
        while True:
            answer = self.ask(question, secret=secret)
            try:
                value = check(answer)
            except InvalidRequest as exc:
                self.strike(f"  {exc}")
                continue
            self.idle = 0
            return value


# ------------------------------------------------------------------------------------------------ the steps


async def _otp_step(flow: AbhaFlow, talk: _Conversation, mobile: str | None) -> None:
    mobile_step = flow.next_step is FlowStep.VERIFY_MOBILE_OTP
    what = "OTP sent to the new mobile number" if mobile_step else "OTP"
    answer = talk.ask(f"{what} (typing is not shown; Enter alone sends a new one): ", secret=True)
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
) -> AbhaAccount:
    """Walk the flow to its end, one question at a time."""
    answers = _Answers()
    while True:
        step = flow.next_step
        if step is FlowStep.DONE:
            assert flow.account is not None
            return flow.account
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


def _failure(exc: BaseException) -> str:
    if isinstance(exc, AccountLikelyCreated):
        return (
            f"{type(exc).__name__}: the lost create most likely took effect: log in with that address "
            "('health-async abha login'); nothing more was sent"
        )
    if isinstance(exc, OutcomeUnknown):
        return f"{type(exc).__name__}: {exc} (ask the person whether an SMS arrived; start again in a minute)"
    return f"{type(exc).__name__}: {exc}"


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
        account = await _drive(client, flow, talk, headers, ask_mobile=ask_mobile)
    except KeyboardInterrupt:
        talk.say(f"\n{label}: cancelled; nothing more was sent.")
        return 130
    except EOFError:  # stdin ended (a script, a closed pipe): an error of the input, not the person's Ctrl-C
        talk.say(f"\n{label}: input ended before the flow did; nothing more was sent.")
        return 1
    except _GiveUp as exc:
        talk.say(f"{label}: {exc}")
        return 1
    except HealthError as exc:
        talk.say(f"{label}: {_failure(exc)}")
        return 1
    done = "created, and you are logged in" if account.created else "logged in"
    talk.say(f"Done: ABHA address {account.abha_address} {done}.")
    emit(_result(account))
    return 0


async def run_register(
    client: HealthClient, args: argparse.Namespace, *, prompt: Prompt | None = None, err: IO[str] | None = None
) -> int:
    """``abha register --aadhaar`` / ``--mobile``: the interactive registration; returns the exit status."""
    talk = _Conversation(prompt or PROMPT, err or sys.stderr, "abha register")
    validate = not getattr(args, "no_validate", False)
    headers = abha_headers(args)

    async def start() -> AbhaFlow:
        if args.mobile:
            mobile = talk.ask_valid("Mobile number (typing is not shown): ", normalize_mobile, secret=True)
            return await client.abha.register_with_mobile(mobile, **headers)
        number = talk.ask_valid(
            "Aadhaar number (typing is not shown): ", lambda n: normalize_aadhaar(n, validate=validate), secret=True
        )
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
    method = LoginMethod(getattr(args, "method", None) or LoginMethod.PHR_ADDRESS.value)
    question, check, secret = _IDENTIFIERS[method]
    headers = abha_headers(args)

    async def start() -> AbhaFlow:
        identifier = talk.ask_valid(question, check, secret=secret)
        return await client.abha.login(method, identifier, **headers)

    return await _converse("abha login", client, talk, start, headers, ask_mobile=False)


async def _abha(client: Any, args: argparse.Namespace) -> int:
    if args.abha_command == "register":
        return await run_register(client, args)
    return await run_login(client, args)


#: The epilog of ``abha register`` / ``abha login``: the shared ``--user-id`` flag says "env ...", not so here.
_PT_ID_EPILOG = (
    "X-Pt-Id is sent only when --user-id OID is given on this command: "
    f"{C.ENV_USER_ID} is not used (an ABHA is for a person who may have no OID yet)."
)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``abha`` (``register``, ``login``) to ``sub``; return ``{"abha": handler}``."""
    parser = sub.add_parser(
        "abha",
        help="ABHA registration and login, step by step (interactive)",
        description="Walk a person through an ABHA registration or login. Numbers and OTPs are typed without echo; "
        "the result is one JSON line (never the tokens). Ctrl-C stops cleanly (exit 130).",
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
        default=LoginMethod.PHR_ADDRESS.value,
        help="what identifies the person (default phr_address: the ABHA address)",
    )
    return {"abha": _abha}
