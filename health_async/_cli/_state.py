"""The ``--json --state FILE`` mode every guided command shares (``abha register | login | kyc``, ``hpr register``):
the key that seals the state file, one JSON answer read from stdin, the state file written atomically (mode 0600)
and never over another run's, and error lines with this run's secrets blotted out. Each command keeps its own steps,
answers and step lines; the rules of the mode are written in :mod:`health_async._cli.abha.register`."""

from __future__ import annotations

import binascii
import contextlib
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any, Final

import pybase64

from .. import _json
from ..errors import InvalidRequest
from ._output import emit, error_json

__all__ = [
    "CHANGED",
    "ENV_STATE_KEY",
    "EXIT_WAITING",
    "MAX_INPUT_LINE",
    "Secrets",
    "StateChanged",
    "UsageError",
    "error_line",
    "fields",
    "file_error",
    "load",
    "optional_text",
    "read_answer",
    "remove",
    "run_json",
    "save",
    "save_or_say",
    "state_key",
    "text",
    "unchanged",
]

#: Exit status of ``--json`` when the flow waits for the next answer: run the command again with it.
EXIT_WAITING: Final = 3
#: The environment variable holding the key that seals ``--state`` files (URL-safe base64 of 16, 24 or 32 bytes).
ENV_STATE_KEY: Final = "HEALTH_ASYNC_STATE_KEY"
#: A command's first ``--json`` run (no state file yet): ``(path, key, stdin, secrets)`` -> the exit status.
FirstRun = Callable[[Path, bytes, "IO[str] | IO[bytes]", "Secrets"], Awaitable[int]]
#: A later run: ``(path, key, the file's sealed state, stdin, secrets)`` -> the exit status.
NextRun = Callable[[Path, bytes, str, "IO[str] | IO[bytes]", "Secrets"], Awaitable[int]]

#: The longest line of JSON ``--json`` reads from stdin.
MAX_INPUT_LINE: Final = 64 * 1024


class UsageError(Exception):
    """Bad usage or configuration of ``--json`` (exit status 2)."""


def state_key(environ: Mapping[str, str] | None = None) -> bytes:
    """The key sealing the ``--state`` files, from :data:`ENV_STATE_KEY`. Raises :class:`UsageError` (never showing
    the key) when it is missing or not URL-safe base64 of 16, 24 or 32 bytes."""
    text = (os.environ if environ is None else environ).get(ENV_STATE_KEY, "").strip()
    how = "URL-safe base64 of 16, 24 or 32 random bytes"
    if not text:
        raise UsageError(f"{ENV_STATE_KEY} is not set: --json seals its state file with that key ({how})")
    try:
        key = pybase64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise UsageError(f"{ENV_STATE_KEY} is not URL-safe base64 (it must be {how})") from None
    if len(key) not in (16, 24, 32):
        raise UsageError(f"{ENV_STATE_KEY} holds {len(key)} bytes; it must be {how}")
    return key


class Secrets:
    """What this run was given that no output may show (numbers, OTPs): blotted out of error messages."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def add(self, *values: str | None) -> None:
        for value in values:
            if value is None:
                continue
            for form in (value.strip(), "".join(c for c in value if c.isdigit())):
                if len(form) >= 4:
                    self.values.add(form)

    def scrub(self, text: str) -> str:
        for value in sorted(self.values, key=len, reverse=True):
            text = text.replace(value, "***")
        return text


def error_line(exc: BaseException, secrets: Secrets) -> dict[str, Any]:
    out = error_json(exc)
    out["message"] = secrets.scrub(out["message"])
    source_code = getattr(exc, "source_code", None)
    if isinstance(source_code, str):
        out["source_code"] = source_code
    return out


def read_answer(stream: IO[str] | IO[bytes] | None) -> dict[str, Any] | None:
    """One JSON object from one line of ``stream``; ``None`` when there is none (end of input, a blank line).

    A byte stream (stdin's, as :func:`run_json` reads it) is decoded as UTF-8, whatever the locale: JSON between
    programs is UTF-8 (RFC 8259), and stdin decoded in the locale's encoding (cp1252 on a Windows pipe, Latin-1
    in such a locale) turned a name in Devanagari into other letters, sent as the person's name."""
    if stream is None:
        return None
    try:
        read = stream.readline(4 * (MAX_INPUT_LINE + 2))  # bytes: up to 4 a character
        line = read.decode("utf-8") if isinstance(read, bytes) else read
    except UnicodeDecodeError:
        raise InvalidRequest("the input line is not UTF-8") from None
    if len(line.rstrip("\r\n")) > MAX_INPUT_LINE:
        raise InvalidRequest(f"the input line is longer than {MAX_INPUT_LINE} characters")
    if not line.strip():
        return None
    try:
        value = _json.loads(line)
    except ValueError:
        raise InvalidRequest("the input line is not JSON (one JSON object on one line)") from None
    if not isinstance(value, dict):
        raise InvalidRequest("the input line must be a JSON object")
    return value


def fields(answer: Mapping[str, Any], where: str, allowed: Iterable[str]) -> None:
    names = sorted(allowed)
    if any(name not in names for name in answer):  # the unknown names are not repeated: they are input
        raise InvalidRequest(f"{where} takes only " + ", ".join(f'"{n}"' for n in names))


def optional_text(answer: Mapping[str, Any], name: str) -> str | None:
    value = answer.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f'"{name}" must be a string')
    return value


def text(answer: Mapping[str, Any], name: str) -> str:
    value = optional_text(answer, name)
    if value is None:
        raise InvalidRequest(f'"{name}" is needed')
    return value


class StateChanged(Exception):
    """Another run saved (or removed) the state file after this run read it."""


def unchanged(path: Path, loaded: str | None) -> bool:
    """Whether ``path`` still holds what this run read (``None``: no file) when it began."""
    try:
        return load(path) == loaded
    except OSError:
        return False


def save(path: Path, sealed: str, loaded: str | None) -> None:
    """Write the sealed state to ``path`` atomically (a temporary file beside it, then ``os.replace``), mode 0600
    (:func:`tempfile.mkstemp` creates it so, readable and writable by its owner only, before anything is written),
    unless another run changed the file since this one read it (``loaded``): then :class:`StateChanged`, and that
    run's state stays. Judgement call: two runs on one state each send their step; without this check the last to
    save silently undid the other's (measured: a flow stuck until its file was deleted). The check and the
    replacement are not one atomic step: runs that end within the same milliseconds are not told apart."""
    if not unchanged(path, loaded):
        raise StateChanged
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(sealed + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def load(path: Path) -> str | None:
    """The sealed state in ``path``, or ``None`` when there is no such file (a first run)."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except FileNotFoundError:
        return None
    return data.decode("utf-8", "replace").strip()


def remove(path: Path, loaded: str | None) -> None:
    """Remove the state file, unless another run saved it since this one read it (``loaded``)."""
    if unchanged(path, loaded):
        with contextlib.suppress(OSError):
            path.unlink()


def file_error(exc: OSError, what: str) -> dict[str, Any]:
    """An error of the state file, without its name (the user has it)."""
    return {"type": type(exc).__name__, "message": f"the state file {what} ({exc.strerror or type(exc).__name__})"}


CHANGED: Final = (
    "another run of this flow saved its state file meanwhile: that run's state is kept and this step's is dropped; "
    "run again to see where the flow is"
)


async def run_json(
    label: str,
    args: Any,
    first_run: FirstRun,
    next_run: NextRun,
    *,
    stdin: IO[str] | IO[bytes] | None = None,
) -> int:
    """One run of a guided command's ``--json --state FILE`` mode, around the command's own steps: refuses
    ``--state`` without ``--json`` (a line on stderr, 2) and ``--json`` without ``--state`` or a good key (a
    ``UsageError`` line, 2); reads the state file (a line naming the file's error, 1), then hands over to
    ``first_run`` (no file yet) or ``next_run`` (the sealed state read); Ctrl-C is 130. ``label`` starts the
    stderr line (``health-async abha register``)."""
    if not getattr(args, "json", False):
        sys.stderr.write(f"{label}: --state FILE goes with --json (the interactive mode keeps no state)\n")
        return 2
    try:
        if not getattr(args, "state", None):
            raise UsageError("--json needs --state FILE: where the flow is kept between runs")
        key = state_key()
    except UsageError as exc:
        emit({"step": None, "error": {"type": "UsageError", "message": str(exc)}})
        return 2
    path = Path(args.state)
    stream: IO[str] | IO[bytes] = getattr(sys.stdin, "buffer", sys.stdin) if stdin is None else stdin
    secrets = Secrets()
    try:
        sealed = load(path)
    except OSError as exc:
        emit({"step": None, "error": file_error(exc, "cannot be read")})
        return 1
    try:
        if sealed is None:
            return await first_run(path, key, stream, secrets)
        return await next_run(path, key, sealed, stream, secrets)
    except KeyboardInterrupt:
        return 130


def save_or_say(path: Path, sealed: str, loaded: str | None, line: Mapping[str, Any]) -> bool:
    """Save a step's state (:func:`save`); True when it is kept. When it is not (another run changed the file, or
    it cannot be written), emits ``line`` (the step line) with the error and returns False: the command exits 1."""
    try:
        save(path, sealed, loaded)
    except StateChanged:
        emit({**line, "error": {"type": "StateChanged", "message": CHANGED}})
        return False
    except OSError as exc:
        emit({**line, "error": file_error(exc, "could not be written: the flow cannot go on; start again")})
        return False
    return True
