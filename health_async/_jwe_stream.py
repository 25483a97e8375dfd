"""The encrypted upload body, produced chunk by chunk while it is sent: peak memory does not grow with the file.

The plaintext is ``{"file":"<standard padded base64 of the file>"}`` (the service's ``{"file": base64}``, written
without spaces); the body is the JSON envelope ``{"protected":..,"iv":..[,"kid":..],"ciphertext":..,"tag":..}``,
with ``ciphertext`` before ``tag`` because the tag is known only once the last block is encrypted. Every size is
computed up front, so the request carries an exact ``Content-Length`` (no chunked encoding).

Per file chunk (192 KiB, a multiple of 3 so the base64 needs no carry): base64 it, AES-CBC-encrypt it (the
encryptor buffers partial blocks), feed the ciphertext to the HMAC, base64url it with a carry of ``len % 3``
bytes. That work runs in a worker thread, one chunk at a time, so the event loop keeps serving other requests.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable

import pybase64
from cryptography.hazmat.primitives.ciphers import Cipher, modes

from . import _json
from ._files import FileSource
from .jwe import DEFAULT_PROTECTED, JweKey, _TagMac

__all__ = ["encrypted_upload_body", "plaintext_size"]

_OPEN = b'{"file":"'
_CLOSE = b'"}'
_B64URL_TAIL = {0: 0, 1: 2, 2: 3}

#: File bytes read, encoded and encrypted per step: a multiple of 3 (base64 needs no carry) and small, so the
#: few buffers alive at once (file chunk, its base64, its ciphertext, that in base64url) stay around 1 MB.
STREAM_CHUNK = 3 * 64 * 1024


def plaintext_size(file_size: int) -> int:
    """Bytes of ``{"file":"<base64>"}`` for a file of ``file_size`` bytes."""
    return len(_OPEN) + 4 * ((file_size + 2) // 3) + len(_CLOSE)


def _b64url_len(n: int) -> int:
    return 4 * (n // 3) + _B64URL_TAIL[n % 3]


def encrypted_upload_body(
    source: FileSource, key: JweKey, *, kid: str | None = None
) -> tuple[int, Callable[[], AsyncIterator[bytes]]]:
    """The exact size of the encrypted upload body for ``source`` and a factory streaming it.

    Each call of the factory starts from the beginning with a new IV (a retry sends a fresh envelope).
    """
    if kid is not None and (type(kid) is not str or not kid.isprintable()):
        raise ValueError("key_id must be a printable str")
    ciphertext_size = (plaintext_size(source.size) // 16 + 1) * 16
    protected = DEFAULT_PROTECTED.encode("ascii")
    kid_part = b',"kid":' + _json.dumps(kid) if kid is not None else b""

    def head(iv_b64: bytes) -> bytes:
        return b'{"protected":"' + protected + b'","iv":"' + iv_b64 + b'"' + kid_part + b',"ciphertext":"'

    tail_size = len(b'","tag":"') + _b64url_len(16) + len(b'"}')
    size = len(head(b"x" * _b64url_len(16))) + _b64url_len(ciphertext_size) + tail_size

    async def body() -> AsyncIterator[bytes]:
        iv = os.urandom(16)
        encryptor = Cipher(key._aes, modes.CBC(iv)).encryptor()
        mac = _TagMac(key._mac, protected, iv)
        carry = b""  # ciphertext bytes not yet base64url-encoded (fewer than 3)

        def seal(plain: bytes, last: bool = False) -> list[bytes]:
            """Encrypt, MAC and base64url one piece of plaintext, without copying the piece's ciphertext."""
            nonlocal carry
            ciphertext = encryptor.update(plain)
            if last:
                ciphertext += encryptor.finalize()
            mac.update(ciphertext)
            view, out = memoryview(ciphertext), []
            if carry:
                take = min((3 - len(carry)) % 3, len(view))
                carry += bytes(view[:take])
                view = view[take:]
                if len(carry) == 3:
                    out.append(pybase64.urlsafe_b64encode(carry))
                    carry = b""
            cut = len(view) - len(view) % 3
            if cut:
                out.append(pybase64.urlsafe_b64encode(view[:cut]))
            carry += bytes(view[cut:])
            if last and carry:
                out.append(pybase64.urlsafe_b64encode(carry).rstrip(b"="))
            return out

        yield head(pybase64.urlsafe_b64encode(iv).rstrip(b"="))
        seal(_OPEN)  # shorter than a block: buffered by the encryptor, nothing to send yet
        pending = b""  # file bytes not yet base64-encoded (only if a read came back short of a multiple of 3)
        async for chunk in source.chunks(STREAM_CHUNK):
            data = pending + chunk if pending else chunk
            cut = len(data) - len(data) % 3
            pending = bytes(data[cut:])
            for piece in await asyncio.to_thread(seal, pybase64.b64encode(memoryview(data)[:cut])):
                yield piece
        pad = 16 - plaintext_size(source.size) % 16
        for piece in seal(pybase64.b64encode(pending) + _CLOSE + bytes((pad,)) * pad, last=True):
            yield piece
        yield b'","tag":"' + pybase64.urlsafe_b64encode(mac.tag()).rstrip(b"=") + b'"}'

    return size, body
