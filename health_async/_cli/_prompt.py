"""The interactive commands' way of asking a person questions (``abha register | login | kyc``, ``abdm discover``,
``abdm consents approve | revoke``): a :class:`Prompt` function (secrets read without echo), and a
:class:`Conversation` that says things on stderr, checks each answer as typed and gives up after
:data:`MAX_IDLE_ANSWERS` answers that did not move on."""

from __future__ import annotations

import asyncio
import getpass
import sys
from collections.abc import Callable
from typing import IO, Protocol, TypeVar

from ..errors import InvalidRequest

__all__ = [
    "EXIT_NO_TERMINAL",
    "MAX_IDLE_ANSWERS",
    "Conversation",
    "GiveUp",
    "Prompt",
    "checkpoint",
    "default_prompt",
    "refuse_without_terminal",
]

#: The exit status of an interactive command run with a stdin that is not a terminal: bad usage (nothing asked or
#: sent).
EXIT_NO_TERMINAL = 2

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


def _is_terminal(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # a closed stdin
        return False


def refuse_without_terminal(prompt: Prompt, err: IO[str], label: str, instead: str) -> int | None:
    """:data:`EXIT_NO_TERMINAL`, after one line on ``err`` saying what to do ``instead``, when ``prompt`` is the
    terminal's (:func:`default_prompt`) and stdin is not a terminal (a pipe, a file, ``/dev/null``); ``None``
    otherwise. Nothing is asked or sent then.

    Judgement call: without a terminal, :func:`getpass.getpass` reads the secret from stdin all the same, after a
    ``GetPassWarning`` naming the path of Python's ``getpass.py``, and would echo it where stdin is a terminal's
    other end; a script that pipes answers into the interactive mode also breaks on the first change of its
    questions. So the interactive mode refuses and names the mode made for scripts."""
    if prompt is not default_prompt or _is_terminal(sys.stdin):
        return None
    err.write(
        f"{label}: stdin is not a terminal, and this command asks its questions on one (numbers, OTPs and PINs "
        f"without echo); nothing was asked or sent. {instead}\n"
    )
    err.flush()
    return EXIT_NO_TERMINAL


class GiveUp(Exception):
    """Too many answers that did not move the flow on."""


class Conversation:
    """One command's questions and messages: ``say`` (to ``err``), ``ask`` (stripped), ``ask_valid`` (asked again
    while ``check`` raises :class:`~health_async.errors.InvalidRequest`, whose message names the rule), ``strike``
    (an answer that did not move on: :class:`GiveUp` after :data:`MAX_IDLE_ANSWERS` in a row)."""

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
            raise GiveUp(f"{self.idle} answers in a row did not move on; start again")

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


async def checkpoint() -> None:
    """Let a Ctrl-C pressed while a prompt waited take effect, before anything is sent with the answer.

    Under :func:`asyncio.run` a first Ctrl-C does not interrupt a blocking prompt: it cancels the main task, which
    notices only at its next suspension point, and that may be the request the answer was for. Awaiting this right
    after a question lets the pending cancellation raise :class:`asyncio.CancelledError` here instead."""
    await asyncio.sleep(0)
