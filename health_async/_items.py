"""The rules about items that the command line and the ingest engine share, in one place.

Both ``health-async describe-many`` (``_cli._output.read_ids``) and ``health_async.ingest``
(``ingest._input``) read *ids files*, count failures of *unknown outcome*, and write errors as JSON. Each side
used to carry its own copy of these rules, and the copies drifted apart; this module is the single version.
It imports neither ``_cli`` nor ``ingest`` (both import it), only :mod:`health_async.errors`.

Reading an ids file (:func:`read_lines`), line by line, lazily:

* lines are numbered from 1; surrounding whitespace is stripped, and a UTF-8 byte-order mark at the start of the
  file is dropped;
* a line that is not UTF-8 is a bad line (:data:`NOT_UTF8`); it is shown with its bytes escaped;
* a line starting with ``#`` (after stripping) is a comment: skipped, never counted as an item;
* a line longer than :data:`MAX_ID_LENGTH` characters is a bad line (:data:`TOO_LONG`): the service's ids are
  UUIDs and OIDs, so such a line is not an id (a mangled file, two columns pasted together). The limit is for
  ids only: the readers of *file paths* (ingest's upload lists) pass ``max_length=None``, since a path may
  legitimately be longer, and the OS refuses one that is too long when the file is opened (that item fails alone);
* a blank line is never sent. What becomes of it is the caller's policy, and the two callers differ on purpose:

  - the command line reports it as a bad item with its own ``{"line": N, "error": ...}`` line (an earlier
    issue: "an empty line fails that item only, with its own error line"); its output is keyed by line number,
    so a blank line can have a line of its own;
  - ingest output is keyed by the item's id, and a blank line has no id to key a line with; so ingest skips
    blank lines but *counts* them, and its summary says so ("; 3 blank input line(s) skipped"), as it does for
    repeated lines. Nothing is dropped silently.

A bad line is never sent and fails alone; the rest of the input still runs.

Unknown outcome (:func:`outcome_unknown`): one rule for both sides; see its docstring. Whether it applies at all
is decided where the operation is known: only a call that is not idempotent (an upload) can have an unknown
*outcome*; a describe that fails the same way is simply failed (and worth trying again).

Errors as JSON (:func:`error_json`): type, message and, for API errors, the status; never the body.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from .errors import ApiError, OutcomeUnknown, ServerError, TransportError

__all__ = [
    "EMPTY",
    "MAX_ID_LENGTH",
    "NOT_UTF8",
    "TOO_LONG",
    "InputLine",
    "error_json",
    "outcome_unknown",
    "read_lines",
]

#: Longer lines of an ids file are not ids (the service's ids are UUIDs and OIDs): a bad line, never sent.
MAX_ID_LENGTH = 256

#: Why a line is not an item (:attr:`InputLine.problem`).
EMPTY = "empty line"
NOT_UTF8 = "not valid UTF-8"
TOO_LONG = f"longer than {MAX_ID_LENGTH} characters"


class InputLine(NamedTuple):
    """One line of an ids file that is not a comment (comments are skipped by :func:`read_lines`)."""

    #: 1-based line number in the file.
    number: int
    #: The stripped line: the id (or path) for a good line; for a bad one, the line as it can be shown (the
    #: bytes of a line that is not UTF-8 escaped as ``\\xff``); ``""`` for a blank line.
    text: str
    #: ``None`` for a good line; else why it is not an item: :data:`EMPTY`, :data:`NOT_UTF8` or :data:`TOO_LONG`
    #: (or ``longer than N characters`` for another ``max_length``).
    problem: str | None = None

    @property
    def blank(self) -> bool:
        """An empty (or whitespace-only) line."""
        return self.problem == EMPTY


_BOM = "\ufeff"
_BOM_BYTES = _BOM.encode("utf-8")


def read_lines(lines: Iterable[bytes | str], *, max_length: int | None = MAX_ID_LENGTH) -> Iterator[InputLine]:
    """The lines of an ids file (bytes, or text already decoded), read lazily, ``#`` comments skipped.

    Yields a good line (``problem`` ``None``), a blank line (:data:`EMPTY`) or a bad one (:data:`NOT_UTF8`, or
    longer than ``max_length`` characters; ``None``: no limit). See the module's docstring for the rules.
    """
    too_long = TOO_LONG if max_length == MAX_ID_LENGTH else f"longer than {max_length} characters"
    for number, raw in enumerate(lines, start=1):
        if number == 1:  # a byte-order mark (files saved by some Windows editors) is not part of the first id
            raw = raw.removeprefix(_BOM_BYTES) if isinstance(raw, bytes) else raw.removeprefix(_BOM)
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                yield InputLine(number, raw.strip().decode("utf-8", "backslashreplace"), NOT_UTF8)
                continue
        else:
            text = raw.strip()
        if not text:
            yield InputLine(number, "", EMPTY)
        elif text.startswith("#"):
            continue
        elif max_length is not None and len(text) > max_length:
            yield InputLine(number, text, too_long)
        else:
            yield InputLine(number, text)


def outcome_unknown(error: BaseException | None) -> bool:
    """Whether a failed call that is **not idempotent** (an upload) may nevertheless have taken effect.

    True for:

    * :class:`~health_async.errors.OutcomeUnknown`: raised by calls sent once (``Resource._send_once``: the
      presigned upload's declaring POST, ABHA and patient creations) when they failed after they may have
      reached the service;
    * a :class:`~health_async.errors.TransportError` with ``sent`` true (a reset or timeout after the request
      left): the service may have received it and acted;
    * a :class:`~health_async.errors.ServerError` (any 5XX). The service, or a gateway in front of it, answered,
      but a 5XX does not say whether the upload was stored: a 502/504 from a gateway often means the backend
      did the work and the answer was lost. ``_send_once`` turns exactly this case into ``OutcomeUnknown``; the
      direct upload route does not go through it (it is sent with ``idempotent=False`` and raises the
      ``ServerError`` as it is), so the rule must count it here, or an upload the service stored would be
      reported as a plain failure and resent by a retry: a duplicate document.

    False for everything else: no error, a transport error before sending (``sent`` false: connection refused,
    DNS, TLS), and definite refusals (4XX, 429, bad input, an ABHA error body, which ABDM answers even with HTTP
    500 but which is an :class:`~health_async.errors.AbhaError`, not a ``ServerError``).

    It answers for non-idempotent calls only: the caller decides whether the operation is one (a describe that
    fails this way is failed, and simply retryable).
    """
    if isinstance(error, OutcomeUnknown | ServerError):
        return True
    return isinstance(error, TransportError) and error.sent


def error_json(error: BaseException) -> dict[str, Any]:
    """An error as JSON: its type, message and, for API errors, the status. Never the body."""
    out: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    if isinstance(error, ApiError):
        out["status"] = error.status
    return out
