"""The library's JSON, in one place: msgspec's C encoder and decoder.

msgspec is a runtime dependency for the typed fast decode of document descriptions (see
:mod:`health_async._convert`); it encodes and decodes plain JSON as fast as any library, so it does that too and
the package needs no second JSON library. ``dumps`` gives compact UTF-8 bytes (keys in insertion order);
``loads`` takes ``bytes`` or ``str``; a malformed document raises :class:`JSONDecodeError` (a ``ValueError``).
"""

from __future__ import annotations

from msgspec import DecodeError as JSONDecodeError
from msgspec.json import decode as loads
from msgspec.json import encode as dumps

__all__ = ["JSONDecodeError", "dumps", "loads"]
