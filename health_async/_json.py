"""The library's JSON, in one place: msgspec's C encoder and decoder.

msgspec is a runtime dependency for the typed fast decode of document descriptions (see
:mod:`health_async._wire`); it encodes and decodes plain JSON as fast as any library, so it does that too and
the package needs no second JSON library. ``dumps`` gives compact UTF-8 bytes (keys in insertion order);
``loads`` takes ``bytes`` or ``str``; a malformed document raises :class:`JSONDecodeError` (a ``ValueError``),
and so do one nested too deeply and one whose strings are not UTF-8 (msgspec raises ``RecursionError`` and
``UnicodeDecodeError`` there: a hostile body must escape as neither).
"""

from __future__ import annotations

from typing import Any

from msgspec import DecodeError as JSONDecodeError
from msgspec.json import decode as _decode
from msgspec.json import encode as dumps

__all__ = ["JSONDecodeError", "dumps", "loads"]


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode a JSON document; :class:`JSONDecodeError` if it is not JSON or is nested too deeply."""
    try:
        return _decode(data)
    except RecursionError:
        raise JSONDecodeError("JSON nested too deeply") from None
    except UnicodeDecodeError:  # msgspec raises it, not DecodeError, for a string that is not UTF-8
        raise JSONDecodeError("JSON text that is not UTF-8") from None
