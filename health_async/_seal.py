"""Sealed blobs: a small payload encrypted and authenticated with the caller's key, with an expiry, as cookie-safe
text. Used by the guided flows' ``to_state(seal=key)`` / ``resume(state, seal=key)``.

Format (judgement call; versioned by its first byte), URL-safe base64 without padding of::

    version (1 byte, 1) | nonce (12 bytes) | AES-GCM( issued_at (8 bytes, big-endian seconds)
                                                      | expires_at (8 bytes) | payload )

AES-GCM (``cryptography``'s AEAD) with a random 96-bit nonce, a 128/192/256-bit key, and associated data naming
the purpose and the version byte: a blob sealed for something else, or edited anywhere (version, nonce,
ciphertext, tag), never opens. The times are inside the ciphertext, so they are authenticated too and do not
tell an onlooker when the flow began. One key, no key list: to rotate, keep opening with the old key until the
longest expiry has passed (a judgement call: a key list is easy to add later; a wrong guess at one is not easy
to take back).
"""

from __future__ import annotations

import binascii
import math
import os
import struct
from typing import Final

import pybase64
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import FlowStateExpired, FlowStateInvalid, InvalidArgumentType, InvalidRequest

__all__ = ["open_sealed", "seal"]

VERSION: Final = 1
_NONCE: Final = 12
_TIMES: Final = struct.Struct(">qq")
_KEY_SIZES: Final = (16, 24, 32)


def _aead(key: object) -> AESGCM:
    if not isinstance(key, bytes | bytearray | memoryview):
        raise InvalidArgumentType(f"seal must be bytes (a 16, 24 or 32-byte secret key), not {type(key).__name__}")
    size = memoryview(key).nbytes  # bytes, not items: a view of 4-byte ints is not a 16-byte key because len() is 4
    if size not in _KEY_SIZES:
        raise InvalidRequest(f"seal must be a 16, 24 or 32-byte secret key; this one is {size} bytes")
    return AESGCM(memoryview(key).tobytes())


def seal(payload: bytes, key: bytes, *, purpose: bytes, now: float, max_age: float) -> str:
    """``payload`` sealed with ``key`` for ``purpose``, opening until ``now + max_age`` (seconds)."""
    aead = _aead(key)
    if not isinstance(max_age, int | float) or isinstance(max_age, bool) or not 0 < max_age < 10**9:
        raise InvalidRequest("max_age must be a number of seconds > 0")
    if not _is_seconds(now) or not math.isfinite(now) or not -(2**62) < now + max_age < 2**62:
        raise InvalidRequest("the flow's clock must give finite seconds")
    head = bytes((VERSION,))
    nonce = os.urandom(_NONCE)
    plain = _TIMES.pack(int(now), int(now + max_age)) + payload
    sealed = head + nonce + aead.encrypt(nonce, plain, head + purpose)
    return pybase64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")


def open_sealed(token: str, key: bytes, *, purpose: bytes, now: float) -> bytes:
    """The payload of a blob :func:`seal` made with ``key`` for ``purpose``.

    Raises:
        FlowStateInvalid: not such a blob, another key or purpose, or changed anywhere (the message says no more,
            and never shows the blob or the key).
        FlowStateExpired: a true blob past its expiry.
    """
    aead = _aead(key)
    if not isinstance(token, str):
        raise InvalidArgumentType(f"a sealed state must be a str, not {type(token).__name__}")
    try:
        raw = pybase64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise FlowStateInvalid("the sealed state is not one this library made (not URL-safe base64)") from None
    if pybase64.urlsafe_b64encode(raw).rstrip(b"=") != token.encode("ascii"):
        # one blob, one spelling: '=' padding or other unused low bits of the last character are a changed token
        raise FlowStateInvalid("the sealed state is not one this library made (not its own spelling)")
    head, nonce, body = raw[:1], raw[1 : 1 + _NONCE], raw[1 + _NONCE :]
    if head != bytes((VERSION,)) or len(nonce) != _NONCE:
        raise FlowStateInvalid("the sealed state is not one this library made (unknown version)")
    try:
        plain = aead.decrypt(nonce, body, head + purpose)
    except (InvalidTag, ValueError):
        raise FlowStateInvalid(
            "the sealed state does not open with this key: changed, truncated, or sealed with another key"
        ) from None
    _, expires_at = _TIMES.unpack_from(plain)
    if not _is_seconds(now):
        raise InvalidRequest("the flow's clock must give finite seconds")
    if not now < expires_at:  # so a clock giving NaN fails closed
        raise FlowStateExpired("the sealed state has expired: start the flow again")
    return plain[_TIMES.size :]


def _is_seconds(value: object) -> bool:
    """A clock's reading is a number (a bool, a str or ``None`` is a broken clock). ``nan`` and the infinities
    pass here: opening then fails closed at the expiry check, sealing refuses them."""
    return isinstance(value, int | float) and not isinstance(value, bool)
