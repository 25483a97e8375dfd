"""Reading a job's input: a file of document ids, a directory of files, or a file listing file paths.

Readers yield ``(key, error)``: ``error`` is ``None`` for a good item, else the reason the item is refused
(a line that is not UTF-8, a directory that cannot be listed); such an item fails alone. Blank lines and
``#`` comments are skipped. Checks that make the whole input unusable (missing, unreadable, a directory where a
file is needed) raise :class:`~health_async.errors.InvalidRequest` before anything is read or sent; the message
names the rule, never the path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..errors import InvalidRequest

__all__ = ["check_input", "input_mark", "read_input"]


def check_input(op: str, path: str) -> None:
    """Refuse an input that cannot be read at all (raises :class:`InvalidRequest`)."""
    what = "ids file" if op == "describe" else "input"
    if not isinstance(path, str | os.PathLike) or not os.fspath(path):
        raise InvalidRequest(f"the {what} must be a path")
    if not os.path.exists(path):
        raise InvalidRequest(f"the {what} does not exist")
    if os.path.isdir(path):
        if op == "describe":
            raise InvalidRequest("the ids file is a directory")
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


def input_mark(path: str) -> str | None:
    """A fingerprint of a file input (path, size, mtime): an unchanged input is not scanned again. ``None`` for
    a directory (its files may change without its own mtime changing): always scanned."""
    if os.path.isdir(path):
        return None
    st = os.stat(path)
    return f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"


def read_input(op: str, path: str) -> Iterator[tuple[str, str | None]]:
    """The input's items, in order: ids for describe; absolute file paths for upload."""
    if op == "upload" and os.path.isdir(path):
        return _walk(path)
    return _lines(path, as_paths=op == "upload")


def _lines(path: str, *, as_paths: bool) -> Iterator[tuple[str, str | None]]:
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            data = raw.strip()
            if not data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                # the item fails alone; its key shows the undecodable bytes escaped, so the user can find it
                yield data.decode("utf-8", "backslashreplace"), f"line {number} of the input is not valid UTF-8"
                continue
            if text.startswith("#"):
                continue
            yield (os.path.abspath(text) if as_paths else text), None


def _walk(top: str) -> Iterator[tuple[str, str | None]]:
    errors: list[OSError] = []
    for root, dirs, files in os.walk(os.path.abspath(top), onerror=errors.append):
        dirs.sort()
        while errors:
            err = errors.pop(0)
            yield os.path.abspath(err.filename or root), "a directory of the input cannot be listed"
        for name in sorted(files):
            yield os.path.join(root, name), None
    for err in errors:
        yield os.path.abspath(err.filename or top), "a directory of the input cannot be listed"
