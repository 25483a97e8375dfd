"""Sealed blobs: a small payload encrypted and authenticated with the caller's key, with an expiry, as cookie-safe
text. Used by the guided flows' ``to_state(seal=key)`` / ``resume(state, seal=key)``.

Format (judgement call; versioned by its first byte), URL-safe base64 without padding of::

    version (1 byte, 2) | nonce (12 bytes) | AES-GCM( issued_at (8 bytes) | expires_at (8 bytes) | payload )

The times are IEEE 754 doubles, big-endian seconds since the epoch, exactly the clock's ``now`` and
``now + max_age``: the expiry is exact to the sub-second (``max_age=1.5`` opens until 1.5 s later, not 1 s).
Version 1 wrote whole seconds (``int``, rounded down) and is still opened (judgement call: a state sealed by the
previous release, in a cookie during an upgrade, keeps working; its rounded-down expiry is only earlier).

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

VERSION: Final = 2
_NONCE: Final = 12
_TIMES: Final = struct.Struct(">dd")
#: The times of each version this module opens: version 1 wrote whole seconds.
_TIMES_OF: Final = {1: struct.Struct(">qq"), VERSION: _TIMES}
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
    if not _is_seconds(now) or not _finite(now) or not -(2**62) < now + max_age < 2**62:
        raise InvalidRequest("the flow's clock must give finite seconds")
    head = bytes((VERSION,))
    nonce = os.urandom(_NONCE)
    plain = _TIMES.pack(float(now), float(now) + float(max_age)) + payload
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
    times = _TIMES_OF.get(head[0]) if head else None
    if times is None or len(nonce) != _NONCE:
        raise FlowStateInvalid("the sealed state is not one this library made (unknown version)")
    try:
        plain = aead.decrypt(nonce, body, head + purpose)
    except (InvalidTag, ValueError):
        raise FlowStateInvalid(
            "the sealed state does not open with this key: changed, truncated, or sealed with another key"
        ) from None
    if len(plain) < times.size:  # pragma: no cover - only a blob sealed with our key and purpose gets here
        raise FlowStateInvalid("the sealed state is not one this library made (too short)")
    _, expires_at = times.unpack_from(plain)
    if not _is_seconds(now):
        raise InvalidRequest("the flow's clock must give finite seconds")
    if not _finite(now):
        # nan, inf or -inf: no time at all, so not one before the expiry (-inf would compare below every expiry)
        raise FlowStateExpired("the flow's clock gave no finite time: the sealed state is refused as expired")
    if not now < expires_at:
        raise FlowStateExpired("the sealed state has expired: start the flow again")
    return plain[times.size :]


def _is_seconds(value: object) -> bool:
    """A clock's reading is a number (a bool, a str or ``None`` is a broken clock: ``InvalidRequest``)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: int | float) -> bool:
    """Finite seconds: ``nan`` and the infinities are not (sealing refuses them, opening fails closed). An int
    is, however large (``math.isfinite`` would overflow on one)."""
    return isinstance(value, int) or math.isfinite(value)
