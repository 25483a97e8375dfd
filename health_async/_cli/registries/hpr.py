"""``health-async hpr register``: walk a healthcare professional through the HPR ID registration of
abdm-connect/flows/m4.mdx, one question at a time, with the guided flow of ``client.hpr.register``.

* The Aadhaar number, the OTPs, the mobile number and the password are typed without echo
  (:func:`getpass.getpass`); the HPR ID, e-mail, names, codes and PIN code are echoed. The password is asked twice
  and never written anywhere (nor kept in a state file: only the ``create`` step sends it, once).
* Every step says what happened (the masked number the OTP went to) and what to type next; a wrong OTP or a bad
  answer is asked again, naming the rule it breaks (never repeating the answer).
* When the professional already holds an HPR ID, the flow ends at ``check/exist`` with it (nothing created).
* The result is one JSON line on stdout, ``{"hpr_id", "created"}`` (``created``: false when it was held already);
  messages go to stderr.
* Exit status: 0 done; 1 an error (one line: its type and message), or input that ended; 2 stdin is not a terminal
  (nothing asked or sent: use ``--json --state FILE``); 130 Ctrl-C (nothing more sent).
* ``X-Pt-Id`` is sent only when ``--user-id OID`` is given on the command itself, never from
  ``HEALTH_ASYNC_USER_ID`` (the OID of the records work, a patient's: judgement call, as ``abha register``).

Scriptable mode: ``--json --state FILE``
----------------------------------------

As ``abha register --json`` (:mod:`health_async._cli.abha.register`, whose rules apply: the key in
``HEALTH_ASYNC_STATE_KEY``, the sealed state file written atomically with mode 0600, one step per run, one JSON line
in on stdin and one out, exit 3 while waiting for the next answer, 0 done with the file deleted, 1 an error with
the flow kept, 2 bad usage or key, 130 Ctrl-C):

* **First run**: ``{"aadhaar": "..."}`` (``--no-validate`` as usual): the OTP is sent, ``FILE`` written.
* **Later runs**, the answer to the current step:

  ======================  ==================================================================================
  step                    answer
  ======================  ==================================================================================
  ``verify_otp``          ``{"otp": "123456"}`` (sent to the Aadhaar-linked mobile)
  ``verify_mobile``       ``{"mobile": "..."}``: the professional's mobile number (another than the Aadhaar-linked
                          one gets its own OTP: the next step is ``verify_mobile_otp``)
  ``verify_mobile_otp``   ``{"otp": "..."}``
  ``create``              ``{"hpr_id", "password", "email", "hp_category_code", "hp_sub_category_code"}`` and
                          optionally ``"first_name"``, ``"middle_name"``, ``"last_name"``, ``"pincode"`` (the codes
                          are numbers; the names default to the Aadhaar KYC's)
  ======================  ==================================================================================

  ``check_exist`` needs no answer: a run that arrives there (or starts there) asks the registry at once, and ends
  (``done``, the HPR ID held already) or stops at ``create``.
* **Step line** (exit 3): ``{"step": ...}`` with ``"hint"`` at an OTP step (where the OTP went, the mobile masked by
  the service), ``"suggestions"`` (free HPR IDs) at ``create``, ``"create_outcome_unknown": true`` after a lost
  create (the next create answer is checked with ``check/exist`` before anything is sent).
* **Done** (exit 0): ``{"step": "done", "hpr_id", "created"}``.
* Nothing written (stdout, stderr, ``FILE`` in clear) holds the password, an OTP, the Aadhaar or mobile number; error
  messages are the library's, with any of this run's input blotted out besides.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import attrs

from ..._aadhaar import normalize_aadhaar
from ..._abha_input import AbhaHeaders, normalize_otp
from ..._mobile import normalize_mobile
from ..._registry_input import check_password, normalize_hpr_id
from ...errors import (
    AbhaError,
    AbhaRateLimited,
    FlowStateExpired,
    HealthError,
    InvalidRequest,
    OtpMismatch,
    OutcomeUnknown,
)
from ...models import HprRegistrationStep
from ...resources import HprRegistration
from .._output import emit
from .._prompt import Conversation, GiveUp, Prompt, checkpoint, default_prompt, refuse_without_terminal
from .._state import (
    ENV_STATE_KEY,
    EXIT_WAITING,
    Secrets,
    StateChanged,
    error_line,
    fields,
    file_error,
    optional_text,
    read_answer,
    remove,
    save,
    save_or_say,
    text,
)
from .._state import run_json as run_json_mode

if TYPE_CHECKING:
    from ..._client import HealthClient

__all__ = ["PROMPT", "add_parser", "run_json", "run_register"]

Step = HprRegistrationStep

#: The prompt the command uses when none is given (tests replace it, or pass their own to :func:`run_register`).
PROMPT: Prompt = default_prompt

_LABEL: Final = "hpr register"
#: The registry's answer code for an HPR ID already taken (the fake's; the vendor's files list none).
_TAKEN: Final = "HPR-1101"


def _headers(args: argparse.Namespace) -> AbhaHeaders:
    """``X-Pt-Id`` only from ``--user-id`` on the command (``None`` leaves the header out: never the client's)."""
    return {"user_id": getattr(args, "user_id", None)}


# ------------------------------------------------------------------------------------------------ interactive


@attrs.define
class _Details:
    """What the person typed for the creation (in memory only), kept when a create has to be sent again."""

    hpr_id: str | None = None
    email: str | None = None
    category: int | None = None
    sub_category: int | None = None
    first_name: str | None = None
    last_name: str | None = None
    pincode: str | None = None
    password: str | None = attrs.field(default=None, repr=False)


def _code(answer: str) -> int:
    if not answer.isdigit():
        raise InvalidRequest("type the registry's code: a whole number (e.g. 1)")
    return int(answer)


def _email(answer: str) -> str:
    if "@" not in answer or answer.startswith("@") or answer.endswith("@"):
        raise InvalidRequest("an e-mail address is needed (name@domain.tld)")
    return answer


def _pincode(answer: str) -> str | None:
    if answer and not (len(answer) == 6 and answer.isdigit() and answer[0] != "0"):
        raise InvalidRequest("a PIN code is 6 digits, not starting with 0 (Enter: none)")
    return answer or None


async def _otp(flow: HprRegistration, talk: Conversation) -> None:
    mobile_step = flow.next_step is Step.VERIFY_MOBILE_OTP
    what = "OTP sent to that mobile number" if mobile_step else "OTP"
    otp = talk.ask_valid(f"{what} (typing is not shown): ", normalize_otp, secret=True)
    await checkpoint()
    try:
        if mobile_step:
            await flow.verify_mobile_otp(otp)
        else:
            await flow.verify_otp(otp)
    except OtpMismatch:
        talk.strike("  That OTP is not right; type it again (ABDM locks the transaction after a few wrong OTPs).")
        return
    except OutcomeUnknown:
        talk.strike("  The answer was lost on the way; type the OTP again.")
        return
    talk.idle = 0


async def _mobile(flow: HprRegistration, talk: Conversation) -> None:
    mobile = talk.ask_valid("Your mobile number (typing is not shown): ", normalize_mobile, secret=True)
    await checkpoint()
    try:
        step = await flow.verify_mobile(mobile)
    except OutcomeUnknown:
        talk.strike("  The answer was lost on the way; type the mobile number again.")
        return
    talk.idle = 0
    if step is Step.VERIFY_MOBILE_OTP:
        talk.say("This mobile number is not the one linked to the Aadhaar: an OTP was sent to it to confirm it.")
        if flow.hint:
            talk.say(f"  {flow.hint}")


async def _suggestions(flow: HprRegistration) -> tuple[str, ...]:
    try:
        return await flow.suggest()
    except AbhaRateLimited:
        raise
    except HealthError:  # suggestions are a help, not a step: go on without them
        return ()


def _password(talk: Conversation) -> str:
    while True:
        first = talk.ask_valid("Password for the HPR ID (typing is not shown): ", check_password, secret=True)
        again = talk.ask("The same password again: ", secret=True)
        if first == again:
            talk.idle = 0
            return first
        talk.strike("  The two passwords differ; type them again.")


async def _details(flow: HprRegistration, talk: Conversation, details: _Details) -> None:
    if details.hpr_id is None:
        free = await _suggestions(flow)
        if free:
            talk.say("Free HPR IDs: " + ", ".join(free))
        default = f" (Enter: {free[0]})" if free else ""
        details.hpr_id = talk.ask_valid(
            f"New HPR ID, e.g. name.surname{default}: ", lambda a: normalize_hpr_id(a or (free[0] if free else ""))
        )
    if details.email is None:
        details.email = talk.ask_valid("E-mail: ", _email)
        details.category = talk.ask_valid("Category code (the registry's, e.g. 1 doctor, 2 nurse): ", _code)
        details.sub_category = talk.ask_valid("Sub-category code (the registry's, e.g. 1): ", _code)
        details.first_name = talk.ask("First name (Enter: the Aadhaar's): ") or None
        details.last_name = talk.ask("Last name (Enter: the Aadhaar's): ") or None
        details.pincode = talk.ask_valid("PIN code (Enter: none): ", _pincode)
    if details.password is None:
        details.password = _password(talk)


async def _create(flow: HprRegistration, talk: Conversation, details: _Details) -> None:
    await _details(flow, talk, details)
    await checkpoint()
    assert details.hpr_id and details.email and details.password is not None
    assert details.category is not None and details.sub_category is not None
    try:
        await flow.create(
            details.hpr_id,
            password=details.password,
            email=details.email,
            hp_category_code=details.category,
            hp_sub_category_code=details.sub_category,
            first_name=details.first_name,
            last_name=details.last_name,
            pincode=details.pincode,
        )
    except OutcomeUnknown:
        talk.strike("  The answer was lost: the HPR ID may have been created. Checking with the registry first.")
    except InvalidRequest as exc:
        talk.strike(f"  {exc}; please type the details again")
        details.hpr_id = details.email = details.password = None
    except AbhaError as exc:
        if exc.source_code != _TAKEN or isinstance(exc, AbhaRateLimited):
            raise
        talk.strike("  That HPR ID is taken; choose another.")
        details.hpr_id = None


async def _drive(flow: HprRegistration, talk: Conversation) -> None:
    """Walk the flow to its end (``DONE``), one question at a time."""
    details = _Details()
    while flow.next_step is not Step.DONE:
        step = flow.next_step
        if step in (Step.VERIFY_OTP, Step.VERIFY_MOBILE_OTP):
            await _otp(flow, talk)
        elif step is Step.VERIFY_MOBILE:
            await _mobile(flow, talk)
        elif step is Step.CHECK_EXIST:
            if await flow.check_exist() is Step.DONE:
                talk.say("This professional already holds an HPR ID: nothing to create.")
        elif step is Step.CREATE:
            await _create(flow, talk, details)
        else:  # pragma: no cover - BLOCKED arrives with its exception
            raise InvalidRequest(f"the flow stopped at {step.name}")


def _result(flow: HprRegistration) -> dict[str, Any]:
    return {"hpr_id": flow.hpr_id, "created": not flow.existed}


async def run_register(
    client: HealthClient, args: argparse.Namespace, *, prompt: Prompt | None = None, err: IO[str] | None = None
) -> int:
    """``hpr register``: the interactive registration; returns the exit status."""
    talk = Conversation(prompt or PROMPT, err or sys.stderr, _LABEL)
    refused = refuse_without_terminal(
        talk.prompt,
        talk.err,
        f"health-async {_LABEL}",
        f"From a script, run one step per run with --json --state FILE and one JSON line on stdin (see "
        f"'health-async {_LABEL} --help').",
    )
    if refused is not None:
        return refused
    validate = not getattr(args, "no_validate", False)
    try:
        number = talk.ask_valid(
            "Aadhaar number (typing is not shown): ", lambda n: normalize_aadhaar(n, validate=validate), secret=True
        )
        await checkpoint()
        flow = await client.hpr.register(number, validate=validate, **_headers(args))
        talk.say(f"An OTP was sent. {flow.hint or ''}".rstrip())
        await _drive(flow, talk)
    except KeyboardInterrupt:
        talk.say(f"\n{_LABEL}: cancelled; nothing more was sent.")
        return 130
    except asyncio.CancelledError:  # a Ctrl-C while a prompt waited, taken at the checkpoint after it (130)
        talk.say(f"\n{_LABEL}: cancelled; nothing more was sent.")
        raise
    except EOFError:
        talk.say(f"\n{_LABEL}: input ended before the flow did; nothing more was sent.")
        return 1
    except GiveUp as exc:
        talk.say(f"{_LABEL}: {exc}")
        return 1
    except HealthError as exc:
        talk.say(f"{_LABEL}: {type(exc).__name__}: {exc}")
        return 1
    held = "already held" if flow.existed else "created"
    talk.say(f"Done: HPR ID {flow.hpr_id} {held}.")
    emit(_result(flow))
    return 0


# ------------------------------------------------------------------------------------------------ --json

_CREATE_FIELDS: Final = (
    "hpr_id",
    "password",
    "email",
    "hp_category_code",
    "hp_sub_category_code",
    "first_name",
    "middle_name",
    "last_name",
    "pincode",
)


def _number(answer: Mapping[str, Any], name: str) -> int:
    value = answer.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f'"{name}" is needed: a whole number (the registry\'s code)')
    return value


async def _answer(flow: HprRegistration, answer: Mapping[str, Any], secrets: Secrets) -> None:
    """Do the flow's current step with ``answer`` (checked before anything is sent)."""
    step = flow.next_step
    where = f"the answer at {step.value}"
    if step in (Step.VERIFY_OTP, Step.VERIFY_MOBILE_OTP):
        fields(answer, where, ["otp"])
        otp = text(answer, "otp")
        secrets.add(otp)
        await (flow.verify_otp(otp) if step is Step.VERIFY_OTP else flow.verify_mobile_otp(otp))
    elif step is Step.VERIFY_MOBILE:
        fields(answer, where, ["mobile"])
        raw = text(answer, "mobile")
        secrets.add(raw)
        mobile = normalize_mobile(raw)
        secrets.add(mobile)
        await flow.verify_mobile(mobile)
    elif step is Step.CREATE:
        fields(answer, where, _CREATE_FIELDS)
        password = text(answer, "password")
        secrets.add(password)
        await flow.create(
            text(answer, "hpr_id"),
            password=password,
            email=text(answer, "email"),
            hp_category_code=_number(answer, "hp_category_code"),
            hp_sub_category_code=_number(answer, "hp_sub_category_code"),
            first_name=optional_text(answer, "first_name"),
            middle_name=optional_text(answer, "middle_name"),
            last_name=optional_text(answer, "last_name"),
            pincode=optional_text(answer, "pincode"),
        )
    else:  # pragma: no cover - check_exist and the ended steps never get here (see _next_run)
        raise InvalidRequest(f"the flow is at {step.value}: nothing to answer")


async def _step_line(flow: HprRegistration, *, suggest: bool) -> dict[str, Any]:
    """The line saying where the flow is and what it waits for (at ``create``, with free HPR IDs when asked)."""
    step = flow.next_step
    line: dict[str, Any] = {"step": step.value}
    if step in (Step.VERIFY_OTP, Step.VERIFY_MOBILE_OTP):
        line["hint"] = flow.hint
    elif step is Step.CREATE:
        if suggest:
            free = await _suggestions(flow)
            if free:
                line["suggestions"] = list(free)
        if flow.create_outcome_unknown:
            line["create_outcome_unknown"] = True
    elif step is Step.BLOCKED:
        line["blocked_until"] = flow.blocked_until
    return line


_ENDED: Final = frozenset({Step.DONE, Step.BLOCKED})


async def _finish(
    flow: HprRegistration,
    path: Path,
    key: bytes,
    secrets: Secrets,
    *,
    loaded: str | None,
    error: BaseException | None = None,
    suggest: bool = False,
) -> int:
    """After a step: the result (done: the file deleted), or the state saved and the step line (with the step's
    error if any); returns the exit status."""
    step = flow.next_step
    if step is Step.DONE and error is None and flow.hpr_id is not None:
        remove(path, loaded)
        emit({"step": step.value, **_result(flow)})
        return 0
    line = await _step_line(flow, suggest=suggest and error is None)
    if step in _ENDED:
        remove(path, loaded)
        if error is None:
            error = InvalidRequest(f"the flow has ended at {step.value}: start a new one")
    elif not save_or_say(path, flow.to_state(seal=key), loaded, line):
        return 1
    if error is not None:
        problem = error_line(error, secrets)
        if step is Step.CREATE and problem.get("source_code") == _TAKEN:
            problem["message"] = f"that HPR ID is taken: choose another ({problem['message']})"
        emit({**line, "error": problem})
        return 1
    emit(line)
    return EXIT_WAITING


async def _through_check(flow: HprRegistration) -> None:
    """``check_exist`` needs no answer: done at once when the flow is there."""
    if flow.next_step is Step.CHECK_EXIST:
        await flow.check_exist()


async def _first_run(
    client: HealthClient,
    args: argparse.Namespace,
    path: Path,
    key: bytes,
    stdin: IO[str] | IO[bytes] | None,
    secrets: Secrets,
) -> int:
    if not path.parent.is_dir():
        folder = OSError(0, "its folder does not exist")
        emit({"step": None, "error": file_error(folder, "cannot be written; nothing sent")})
        return 1
    try:
        answer = read_answer(stdin)
        if answer is None:
            raise InvalidRequest('no start input: the first run reads one JSON line, {"aadhaar": "..."}')
        fields(answer, "the start of an HPR registration", ["aadhaar"])
        raw = text(answer, "aadhaar")
        secrets.add(raw)
        validate = not getattr(args, "no_validate", False)
        number = normalize_aadhaar(raw, validate=validate)
        secrets.add(number)
        flow = await client.hpr.register(number, validate=validate, **_headers(args))
    except HealthError as exc:  # nothing was started: no state
        emit({"step": None, "error": error_line(exc, secrets)})
        return 1
    return await _finish(flow, path, key, secrets, loaded=None)


async def _next_run(
    client: HealthClient,
    path: Path,
    key: bytes,
    sealed: str,
    stdin: IO[str] | IO[bytes] | None,
    secrets: Secrets,
) -> int:
    try:
        flow = client.hpr.resume(sealed, seal=key)
    except FlowStateExpired as exc:
        remove(path, sealed)
        emit({"step": None, "error": error_line(exc, secrets)})
        return 1
    except InvalidRequest as exc:  # FlowStateInvalid (changed, another key or flow), another version: kept
        problem = error_line(exc, secrets)
        problem["message"] += '; to start over, delete the state file and run the first step again {"aadhaar": "..."}'
        emit({"step": None, "error": problem})
        return 1
    if flow.next_step in _ENDED:
        return await _finish(flow, path, key, secrets, loaded=sealed)
    try:
        if flow.next_step is Step.CHECK_EXIST:  # a run that stopped before it: no answer needed
            await _through_check(flow)
            return await _finish(flow, path, key, secrets, loaded=sealed, suggest=True)
        answer = read_answer(stdin)
        if answer is None:  # nothing to do: say again what the flow waits for
            emit(await _step_line(flow, suggest=False))
            return EXIT_WAITING
        before = flow.next_step
        await _answer(flow, answer, secrets)
        await _through_check(flow)
    except HealthError as exc:
        return await _finish(flow, path, key, secrets, loaded=sealed, error=exc)
    except (KeyboardInterrupt, asyncio.CancelledError):  # keep the flow as far as it got
        if flow.next_step not in _ENDED:
            with contextlib.suppress(OSError, HealthError, StateChanged):
                save(path, flow.to_state(seal=key), sealed)
        raise
    return await _finish(flow, path, key, secrets, loaded=sealed, suggest=before is not Step.CREATE)


async def run_json(client: HealthClient, args: argparse.Namespace, *, stdin: IO[str] | IO[bytes] | None = None) -> int:
    """``hpr register --json --state FILE``: one step of the flow per run, JSON in and out (see the module);
    returns the exit status (0 done, 3 waiting for the next answer, 1 an error, 2 bad usage or key, 130 Ctrl-C)."""
    return await run_json_mode(
        f"health-async {_LABEL}",
        args,
        lambda path, key, stream, secrets: _first_run(client, args, path, key, stream, secrets),
        lambda path, key, sealed, stream, secrets: _next_run(client, path, key, sealed, stream, secrets),
        stdin=stdin,
    )


async def _hpr(client: Any, args: argparse.Namespace) -> int:
    if getattr(args, "json", False) or getattr(args, "state", None) is not None:
        return await run_json(client, args)
    return await run_register(client, args)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> Any:
    """Add ``hpr`` (``register``) to ``sub``; return its handler."""
    parser = sub.add_parser(
        "hpr",
        help="a healthcare professional's HPR ID, step by step (interactive, or scripted with --json)",
        description="The Healthcare Professionals Registry (ABDM milestone 4): walk a doctor or nurse through their "
        "HPR ID with their Aadhaar. Numbers, OTPs and the password are typed without echo; the result is one JSON "
        "line. With --json --state FILE: no prompts, one step per run, JSON lines in and out (exit 3: waiting for "
        "the next answer).",
    )
    hsub = parser.add_subparsers(dest="hpr_command", required=True, metavar="SUBCOMMAND")
    p = hsub.add_parser(
        "register",
        parents=[common],
        help="create (or find) a professional's HPR ID with an Aadhaar OTP",
        description="Aadhaar OTP, then the professional's mobile (its own OTP when it is not the Aadhaar-linked "
        "one), then: the HPR ID they hold already, or a new one (HPR ID, e-mail, the registry's category codes, "
        "password). --json start input: "
        '{"aadhaar": "..."}; then {"otp"}, {"mobile"}, {"otp"}, {"hpr_id", "password", "email", '
        '"hp_category_code", "hp_sub_category_code"}.',
        epilog="X-Pt-Id is sent only when --user-id OID is given on this command (never from the environment).",
    )
    p.add_argument("--no-validate", action="store_true", help="skip the Aadhaar digit rules (sandbox numbers)")
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
    return _hpr
