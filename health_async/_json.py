"""The library's JSON, in one place: msgspec's C encoder and decoder.

msgspec is a runtime dependency for the typed fast decode of document descriptions (see
:mod:`health_async._wire`); it encodes and decodes plain JSON as fast as any library, so it does that too and
the package needs no second JSON library. ``dumps`` gives compact UTF-8 bytes (keys in insertion order);
``loads`` takes ``bytes`` or ``str``; a malformed document raises :class:`JSONDecodeError` (a ``ValueError``),
and so do one nested too deeply and one whose strings are not UTF-8 (msgspec raises ``RecursionError`` and
``UnicodeDecodeError`` there: a hostile body must escape as neither).

JSON has no NaN nor infinity: msgspec writes a non-finite float as ``null``, silently, and its decoder refuses the
tokens (``NaN``, ``1e400``). :func:`dumps_finite` is the encoding for what must arrive as it was given (a FHIR
bundle): it refuses them with :class:`NonFiniteNumber` instead.
"""

from __future__ import annotations

import math
from typing import Any

from msgspec import DecodeError as JSONDecodeError
from msgspec.json import decode as _decode
from msgspec.json import encode as dumps

__all__ = ["JSONDecodeError", "NonFiniteNumber", "dumps", "dumps_finite", "loads"]


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode a JSON document; :class:`JSONDecodeError` if it is not JSON or is nested too deeply."""
    try:
        return _decode(data)
    except RecursionError:
        raise JSONDecodeError("JSON nested too deeply") from None
    except UnicodeDecodeError:  # msgspec raises it, not DecodeError, for a string that is not UTF-8
        raise JSONDecodeError("JSON text that is not UTF-8") from None


class NonFiniteNumber(ValueError):
    """A value holds a number JSON cannot carry (NaN, infinity): raised by :func:`dumps_finite` (the message names
    neither the value nor where it is)."""


def dumps_finite(value: Any) -> bytes:
    """:func:`dumps`, refusing a non-finite float (NaN, ``+inf``, ``-inf``; msgspec would write ``null``) anywhere in
    ``value``'s dicts, lists, tuples and sets with :class:`NonFiniteNumber`. The encoding's own errors (a value of
    another type: ``TypeError``; text that is not valid Unicode: ``ValueError``) pass as they are.

    Cost: one scan of the encoded bytes; the value is walked only when they hold ``null`` (what a non-finite float
    becomes), so a document without a null pays nothing more."""
    raw = dumps(value)
    if b"null" in raw and _holds_non_finite(value):
        raise NonFiniteNumber("a number JSON cannot carry (NaN or infinity)")
    return raw


def _holds_non_finite(value: Any) -> bool:
    """Whether a float that is NaN or infinite is in ``value`` (walked iteratively: no recursion limit)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
    return False
