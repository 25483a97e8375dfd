"""What every command shares: JSON-lines output, the progress bar, reading ids from a file."""

from __future__ import annotations

import argparse
import codecs
import math
import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import IO, Any, Final

import attrs

from .. import _json
from .._bulk import BulkStream
from .._client import HealthClient
from .._items import MAX_ID_LENGTH, error_json, outcome_unknown, read_lines
from .._plain import document_json, unstructure
from .._progress import Progress
from ..errors import HealthError
from ..models import DescribeResult, Document, UploadOutcome

__all__ = [
    "MAX_ID_LENGTH",
    "BadLine",
    "Command",
    "InputError",
    "Progress",
    "Tally",
    "display_path",
    "drain",
    "emit",
    "error_json",
    "write_json",
    "in_flight",
    "open_input",
    "port",
    "positive_count",
    "positive_number",
    "read_ids",
]

#: A subcommand: ``await command(client, args)`` returns the exit status (0 ok, 1 an item failed, 2 bad usage).
Command = Callable[[Any, argparse.Namespace], Awaitable[int]]


# ------------------------------------------------------------------------ argument types

#: The most requests in flight a command takes (``--concurrency``, ``--max-connections``): each is a task and a
#: connection; a hundred million would exhaust the machine's memory before anything is sent.
MAX_IN_FLIGHT = 10_000


def port(text: str) -> int:
    """``--port``: 0 to 65535 (0 picks a free one)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("the port is a number from 0 to 65535") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError("the port is a number from 0 to 65535")
    return number


def positive_count(text: str) -> int:
    """A whole number >= 1 (``--documents``)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number >= 1") from None
    if number < 1:
        raise argparse.ArgumentTypeError("must be a whole number >= 1")
    return number


def in_flight(text: str) -> int:
    """``--concurrency`` / ``--max-connections``: 1 to :data:`MAX_IN_FLIGHT`."""
    number = positive_count(text)
    if number > MAX_IN_FLIGHT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_IN_FLIGHT}")
    return number


def positive_number(text: str) -> float:
    """A finite number > 0 (``--rate-limit``, ``--timeout``)."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number > 0") from None
    if not 0 < number < math.inf:
        raise argparse.ArgumentTypeError("must be a finite number > 0")
    return number


# ------------------------------------------------------------------------ output helpers


def emit(obj: Any, out: IO[str] | None = None) -> None:
    """Write one JSON line to stdout: a model, a bulk result (with its error as JSON), or plain data."""
    if isinstance(obj, DescribeResult):
        obj = {"document_id": obj.document_id, **_outcome("document", obj.document, obj.error)}
    elif isinstance(obj, UploadOutcome):
        outcome = _outcome("document_id", obj.result.document_id if obj.result else None, obj.error)
        obj = {"file": display_path(obj.source), **outcome}
    elif isinstance(obj, BadLine):
        obj = obj.as_json()
    else:
        obj = unstructure(obj)
    write_json(obj, out or sys.stdout)


def write_json(obj: Any, stream: IO[str]) -> None:
    """Write ``obj`` to ``stream`` as one JSON line, flushed. Non-ASCII text is written as it is where the stream
    is Unicode (UTF-8, the JSON standard's encoding), and as ``\\uXXXX`` escapes where it is not (a Windows file
    redirect in cp1252, ``PYTHONIOENCODING=ascii``): the line is then still valid JSON holding the same text,
    where writing it raw would fail half-way through the output."""
    text = _json.dumps(obj).decode()
    if not text.isascii() and not _unicode(stream):
        text = _NON_ASCII.sub(_escaped, text)
    stream.write(text + "\n")
    stream.flush()


#: A character outside ASCII: in JSON that msgspec wrote, only ever inside a string, where an escape stands for it.
_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")


def _escaped(match: re.Match[str]) -> str:
    """JSON's escape of one character: ``\\uXXXX``, a surrogate pair beyond the Basic Multilingual Plane."""
    units = match.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))


def _unicode(stream: IO[str]) -> bool:
    """Whether ``stream`` encodes every character (a UTF encoding); a stream that does not say is assumed to."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


def report_error(error: HealthError, hint: str, *, as_json: bool, **ident: str) -> int:
    """A command's failure and what to do next: with ``--json`` a JSON line (``ident``, the error, the hint), else
    one line on stderr. Returns the exit status, 1."""
    if as_json:
        emit({**ident, "error": error_json(error), "hint": hint})
    else:
        print(f"health-async: {type(error).__name__}: {error}; {hint}", file=sys.stderr)
    return 1


def _outcome(name: str, value: Any, error: HealthError | None) -> dict[str, Any]:
    if error is not None:
        return {"error": error_json(error)}
    return {name: document_json(value) if isinstance(value, Document) else unstructure(value)}


# ------------------------------------------------------------------------ inputs


class InputError(Exception):
    """An input file that cannot be read at all (missing, a directory, no permission): exit status 2."""


@attrs.frozen
class BadLine:
    """A line of an ids file that is not an id: it fails alone, with its own error line."""

    line: int
    reason: str

    def as_json(self) -> dict[str, Any]:
        """The error line written for it."""
        return {"line": self.line, "error": {"type": "InvalidRequest", "message": f"line {self.line}: {self.reason}"}}


def open_input(source: str) -> IO[bytes] | IO[str]:
    """Open an input file for reading (``-``: stdin), or raise :class:`InputError` with a one-line reason that
    does not repeat the file's name (it can be personal data; the user has it)."""
    if source == "-":
        if sys.stdin is None:  # the process was started with its stdin closed (``<&-``)
            raise InputError("stdin is closed: there is no input to read (give a file, or pipe the input in)")
        return getattr(sys.stdin, "buffer", sys.stdin)
    try:
        return open(source, "rb")
    except IsADirectoryError:
        raise InputError("the input file is a directory") from None
    except FileNotFoundError:
        raise InputError("the input file does not exist") from None
    except PermissionError:
        raise InputError("the input file is not readable (permission denied)") from None
    except OSError as exc:
        raise InputError(f"the input file cannot be read ({exc.strerror or type(exc).__name__})") from None


def read_ids(source: str | IO[bytes] | IO[str]) -> Iterator[str | BadLine]:
    """Ids one per line from a file, an open stream or ``-`` (stdin), read lazily; ``#`` comments skipped.

    A line that is not an id (empty, not UTF-8, longer than :data:`MAX_ID_LENGTH`) comes out as a
    :class:`BadLine`, so that it fails alone and the rest of the batch still runs. The rules are
    :func:`health_async._items.read_lines`' (shared with ``health-async ingest``, which skips and counts blank
    lines instead: its output has no line for an item without an id).
    """
    stream = open_input(source) if isinstance(source, str) else source
    try:
        lines: Iterable[bytes | str] = stream
        for line in read_lines(lines):
            if line.problem is None:
                yield line.text
            else:
                yield BadLine(line.number, line.problem)
    finally:
        if stream is not sys.stdin and stream is not getattr(sys.stdin, "buffer", None):
            stream.close()


def display_path(value: object) -> str:
    """A path for output lines: undecodable bytes of a file name shown as escapes instead of breaking JSON."""
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else "<data>"
    if isinstance(text, bytes):
        return text.decode("utf-8", "backslashreplace")
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


#: Labels of the bulk commands whose operation is a read (safe to repeat): no unknown outcome there.


class Tally:
    """Counts for the summary line on stderr: done, failed, and sent with an unknown outcome.

    ``idempotent``: whether the command's operation is safe to repeat (a describe). Only a call that is not (an
    upload) can have an unknown outcome (:func:`health_async._items.outcome_unknown`); for a read, such an error
    is a failure.
    """

    def __init__(self, label: str, *, idempotent: bool) -> None:
        self.label = label
        self.idempotent = idempotent
        self.done = self.failed = self.unknown = 0

    def add(self, error: BaseException | None) -> None:
        """Count one finished item."""
        if error is None:
            self.done += 1
        elif not self.idempotent and outcome_unknown(error):
            self.unknown += 1
        else:
            self.failed += 1

    def summary(self, *, interrupted: bool = False, stream: IO[str] | None = None) -> None:
        """Write the summary line to stderr."""
        out = stream or sys.stderr
        state = "interrupted" if interrupted else "finished"
        unknown = f", {self.unknown} sent with an unknown outcome" if self.unknown else ""
        out.write(f"{self.label} {state}: {self.done} done, {self.failed} failed{unknown}\n")
        out.flush()


async def drain(
    stream: BulkStream[Any], tally: Tally, progress: Progress, write: Callable[[Any], None] | None = None
) -> int:
    """Write every result of a bulk ``stream`` (``write``, default :func:`emit`), counting it in ``tally``.

    At the end, and when interrupted (Ctrl-C), a summary on stderr: done, failed, and sent with an unknown outcome.
    Results that finished after an interruption (uploads already sent: ``BulkStream.left_behind``) are written too,
    so every upload the service saw is on stdout. Returns the exit status: 1 if any item failed, else 0.
    """
    write = write or emit
    interrupted = True
    try:
        async with stream:
            async for result in stream:
                tally.add(result.error)
                write(result)
        interrupted = False
    finally:
        for result in stream.left_behind:
            tally.add(result.error)
            write(result)
        progress.close()
        tally.summary(interrupted=interrupted)
    return 1 if tally.failed or tally.unknown else 0


#: The connection flags (``common``), as ``HealthClient.from_env`` keywords.
CONNECTION_FLAGS: Final = (
    "base_url",
    "token",
    "client_id",
    "user_id",
    "key_id",
    "timeout",
    "rate_limit",
    "max_connections",
)


def client_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``HealthClient.from_env`` keywords the connection flags given set (the environment fills the rest)."""
    overrides: dict[str, Any] = {
        name: getattr(args, name) for name in CONNECTION_FLAGS if getattr(args, name, None) is not None
    }
    if getattr(args, "insecure_http", False):
        overrides["allow_insecure_http"] = True
    return overrides


def make_client(args: argparse.Namespace) -> HealthClient:
    """A client from the connection flags, falling back to the environment: the one every command uses."""
    return HealthClient.from_env(**client_overrides(args))
