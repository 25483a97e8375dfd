"""Reading a job's input: a file of document ids, a directory of files, a file listing file paths, or care contexts
to link (CSV or JSON Lines: :mod:`health_async.ingest._links`).

:func:`read_input` gives the items as ``(key, error, payload)`` triples (``payload``: what a link item sends;
``None`` for the others): ``error`` is ``None`` for a good item, else the
reason the item is refused (a line that is not UTF-8, an id line longer than 256 characters, a directory that
cannot be listed); such an item fails alone. Lines are read by :func:`health_async._items.read_lines`, the
rules the command line uses too: ``#`` comments are skipped; blank lines are skipped and counted
(:attr:`InputItems.blank`, shown in the job's summary), since an output line is keyed by an id and a blank line
has none. The 256-character limit is for ids (describe); the paths of an upload list have none (the OS refuses
a path that is too long when the file is opened, and that item fails alone).

Checks that make the whole input unusable (missing, unreadable, a directory where a file is needed) raise
:class:`~health_async.errors.InvalidRequest` before anything is read or sent; the message names the rule, never
the path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from typing import Protocol

from .._items import MAX_ID_LENGTH, read_lines
from ..errors import InvalidRequest
from ._links import check_link_input, link_rows

__all__ = ["InputItems", "Items", "check_input", "input_mark", "read_input"]


def check_input(op: str, path: str) -> None:
    """Refuse an input that cannot be read at all (raises :class:`InvalidRequest`)."""
    what = {"describe": "ids file", "link": "care contexts file"}.get(op, "input")
    if not isinstance(path, str | os.PathLike) or not os.fspath(path):
        raise InvalidRequest(f"the {what} must be a path")
    if not os.path.exists(path):
        raise InvalidRequest(f"the {what} does not exist")
    if os.path.isdir(path):
        if op != "upload":
            raise InvalidRequest(f"the {what} is a directory")
        if not os.access(path, os.R_OK | os.X_OK):
            raise InvalidRequest("the input directory is not readable")
        return
    if not os.path.isfile(path):
        raise InvalidRequest(f"the {what} is not a regular file")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError:
        raise InvalidRequest(f"the {what} is not readable") from None
    if op == "link":
        check_link_input(path)


def input_mark(path: str) -> str | None:
    """A fingerprint of a file input (path, size, mtime): an unchanged input is not scanned again. ``None`` for
    a directory (its files may change without its own mtime changing): always scanned."""
    if os.path.isdir(path):
        return None
    st = os.stat(path)
    return f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"


class InputItems:
    """The items of a job's input as ``(key, error)`` pairs, read lazily when iterated (once).

    After the iteration, :attr:`blank` holds the number of blank lines skipped (0 for a directory).
    """

    def __init__(self, op: str, path: str) -> None:
        self.op = op
        self.path = path
        #: Blank lines of the input skipped so far (never sent, never an output line).
        self.blank = 0

    def __iter__(self) -> Iterator[tuple[str, str | None, bytes | None]]:
        if self.op == "upload" and os.path.isdir(self.path):
            return ((key, error, None) for key, error in _walk(self.path))
        return ((key, error, None) for key, error in self._lines(as_paths=self.op == "upload"))

    def _lines(self, *, as_paths: bool) -> Iterator[tuple[str, str | None]]:
        self.blank = 0
        with open(self.path, "rb") as f:
            for line in read_lines(f, max_length=None if as_paths else MAX_ID_LENGTH):
                if line.problem is None:
                    yield path_item(os.path.abspath(line.text)) if as_paths else (line.text, None)
                elif line.blank:
                    self.blank += 1
                else:
                    # the item fails alone; its key shows the line (undecodable bytes escaped, a long line cut)
                    # so that the user can find it
                    yield bad_line_key(line.text), f"line {line.number} of the input is {line.problem}"


class Items(Protocol):
    """What :func:`read_input` gives: the items (iterated once), and the blank lines skipped once iterated."""

    blank: int

    def __iter__(self) -> Iterator[tuple[str, str | None, bytes | None]]: ...


def read_input(op: str, path: str) -> Items:
    """The input's items, in order: ids for describe; absolute file paths for upload; care contexts for link."""
    if op == "link":
        return link_rows(path)
    return InputItems(op, path)


#: Characters of a bad line kept in its key when the line is longer than :data:`MAX_ID_LENGTH`.
_SHOWN = 64


def bad_line_key(text: str) -> str:
    """The key of a bad line: the line itself (escaped) when short; when longer than :data:`MAX_ID_LENGTH`, its
    first characters, its length and a digest of the whole line, so that two different long lines never share a
    key (the same line twice is a repeat, as for any key)."""
    if len(text) <= MAX_ID_LENGTH:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:_SHOWN]}... ({len(text)} characters, sha256 {digest})"


def path_item(path: str) -> tuple[str, str | None]:
    """A file of an upload input as an item: its path, or, when the name holds bytes that are not UTF-8 (Python
    keeps them as surrogates, which neither the journal nor an output line can hold), the path with those bytes
    escaped (``\\xff``) and the reason, so that the file fails alone and the user can find it."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        escaped = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return escaped, "the file name is not valid UTF-8: rename the file"
    return path, None


def _walk(top: str) -> Iterator[tuple[str, str | None]]:
    errors: list[OSError] = []
    for root, dirs, files in os.walk(os.path.abspath(top), onerror=errors.append):
        dirs.sort()
        while errors:
            err = errors.pop(0)
            yield os.path.abspath(err.filename or root), "a directory of the input cannot be listed"
        for name in sorted(files):
            yield path_item(os.path.join(root, name))
    for err in errors:
        yield os.path.abspath(err.filename or top), "a directory of the input cannot be listed"
