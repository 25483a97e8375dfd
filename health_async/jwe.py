"""End-to-end payload encryption: JWE (RFC 7516) with ``alg=dir`` and ``enc=A128CBC-HS256`` (RFC 7518 5.2).

Written by hand on the ``cryptography`` primitives (AES-CBC) and the standard library's HMAC, with ``pybase64``
for base64: no JOSE library at run time.

The scheme, exactly as RFC 7518 section 5.2 defines it:

* the 32-byte key is split: MAC key = first 16 bytes, AES key = last 16 bytes;
* AES-128-CBC with PKCS#7 padding under a fresh random 16-byte IV per message;
* tag = first 16 bytes of HMAC-SHA256(MAC key, AAD || IV || ciphertext || AL), where AAD is the ASCII of the
  ``protected`` member exactly as received (never re-serialised) and AL is its length in bits as a 64-bit
  big-endian integer;
* every envelope member is base64url without padding.

The key rule of the service: the key string written twice, as UTF-8 bytes, so it must be 16 bytes long
(:func:`derive_key`); a 32-byte raw key is accepted too.

Guarantees: decryption checks the tag in constant time before it touches the padding, and every failure (wrong
key, any flipped bit, truncated tag, bad base64url, unexpected ``alg``/``enc``, missing member, bad padding)
raises the same :class:`~health_async.errors.EncryptionError` with the same message, so an attacker learns
nothing that could serve as a padding oracle. Keys never appear in a repr, an error message or a log record.

Limits: the service's only algorithms are ``dir`` + ``A128CBC-HS256``; no compression (``zip``) and no
critical header parameters (``crit``). An envelope without ``protected`` (the service's responses) is read with
the standard header ``{"alg":"dir","enc":"A128CBC-HS256"}`` in its compact serialisation as AAD. The legacy
response form of an early revision of the service's documentation (a 32-byte tag, the full HMAC-SHA256 of the
ciphertext alone) is accepted only with ``allow_legacy=True``: it is weaker, as it does not authenticate the
IV (nor any header), so a tampered IV changes the first plaintext block undetected.

Large payloads: :func:`encrypt_async` and :func:`decrypt_async` move the work to a thread above
:data:`THREAD_THRESHOLD` bytes so the event loop keeps running. :func:`encrypt` and :func:`decrypt` handle
payloads of 512 KB (characters) or more step by step, computing the HMAC on one helper thread
(``health_async-jwe-mac``; hashlib releases the GIL) while this thread encrypts, or decodes and decrypts, the next
step, so the passes overlap instead of adding up; decryption still compares the tag before it looks at the
padding or returns anything.
"""

from __future__ import annotations

import asyncio
import binascii
import hashlib
import hmac
import os
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import orjson
import pybase64
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from .errors import EncryptionError

__all__ = [
    "DEFAULT_PROTECTED",
    "THREAD_THRESHOLD",
    "JweKey",
    "decrypt",
    "decrypt_async",
    "derive_key",
    "encrypt",
    "encrypt_async",
    "from_compact",
    "is_envelope",
    "to_compact",
]

ALG: Final = "dir"
ENC: Final = "A128CBC-HS256"

#: ``protected`` of every envelope this module writes: base64url of ``{"alg":"dir","enc":"A128CBC-HS256"}``.
DEFAULT_PROTECTED: Final = pybase64.urlsafe_b64encode(b'{"alg":"dir","enc":"A128CBC-HS256"}').rstrip(b"=").decode()

#: Payloads at least this large are encrypted or decrypted in a worker thread by the ``*_async`` functions.
THREAD_THRESHOLD: Final = 64 * 1024

#: Plaintexts (bytes) or ciphertexts (base64url characters) this large are processed with the MAC on a helper thread.
_PIPELINE_MIN: Final = 512 * 1024
#: Characters per step of that pipeline (a multiple of 4: each step decodes on its own; 192 KiB of ciphertext).
_PIPELINE_STEP: Final = 4 * 64 * 1024
_mac_worker: ThreadPoolExecutor | None = None
_mac_worker_lock = threading.Lock()

_FAILED: Final = "could not decrypt the payload (wrong key, or the envelope is malformed or was altered)"


class JweKey:
    """A validated 32-byte A128CBC-HS256 key. Its bytes never appear in its repr or in any message."""

    __slots__ = ("_aes", "_legacy_aes", "_legacy_mac", "_mac")

    def __init__(self, raw: bytes) -> None:
        """Prefer :func:`derive_key`, which also accepts the service's 16-character key strings."""
        if not isinstance(raw, bytes) or len(raw) != 32:
            raise ValueError("a JweKey needs exactly 32 raw bytes")
        self._mac = raw[:16]
        self._aes = algorithms.AES(raw[16:])
        # The legacy response form keyed the halves the other way round: AES key first, MAC key second.
        self._legacy_aes = algorithms.AES(raw[:16])
        self._legacy_mac = raw[16:]

    def __repr__(self) -> str:
        return "JweKey(<hidden>)"

    def __reduce__(self) -> Any:
        raise TypeError("a JweKey cannot be pickled (it would write the key out)")


def derive_key(key: str | bytes | bytearray | memoryview | JweKey) -> JweKey:
    """The :class:`JweKey` for the service's key string, a 32-byte raw key, or an existing ``JweKey``.

    A ``str`` is the shared key string: the key is its UTF-8 bytes written twice, so it must be 16 bytes.
    Raises ``ValueError`` (the key is never shown) or ``TypeError``.
    """
    if isinstance(key, JweKey):
        return key
    if isinstance(key, str):
        raw = key.encode("utf-8")
        if len(raw) != 16:
            raise ValueError(
                f"the encryption key string must be 16 bytes in UTF-8 (it is written twice to make the 32-byte "
                f"A128CBC-HS256 key); this one is {len(raw)} bytes"
            )
        return JweKey(raw * 2)
    if isinstance(key, bytes | bytearray | memoryview):
        raw = bytes(key)
        if len(raw) != 32:
            raise ValueError(f"a raw encryption key must be 32 bytes; this one is {len(raw)} bytes")
        return JweKey(raw)
    raise TypeError(f"an encryption key must be a str, bytes or JweKey, not {type(key).__name__}")


def _b64url(data: bytes | bytearray | memoryview) -> str:
    encoded = pybase64.urlsafe_b64encode(data)
    unpadded = len(encoded) - (-len(data) % 3)  # drop the '=' without another copy of the whole text
    return str(memoryview(encoded)[:unpadded], "ascii")


def _b64url_decode(value: object) -> bytes:
    """Strict base64url without padding: any other character, padding or impossible length fails."""
    # Padding is refused: a trailing '=' here; one inside is a non-alphabet character to the validating decoder.
    # '+' and '/' must be looked for: the decoder only warns about them (they will be errors in a future version).
    if type(value) is not str or value[-1:] == "=" or "+" in value or "/" in value:
        raise ValueError
    rem = len(value) % 4
    if rem == 1:
        raise ValueError
    return pybase64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)


def _check_header(protected: str) -> None:
    header = orjson.loads(_b64url_decode(protected))
    if (
        type(header) is not dict
        or header.get("alg") != ALG
        or header.get("enc") != ENC
        or "zip" in header
        or "crit" in header
    ):
        raise ValueError


class _TagMac:
    """The A128CBC-HS256 tag, fed incrementally: HMAC-SHA256 over AAD || IV || ciphertext || AL, first 16 bytes."""

    __slots__ = ("_aad_bits", "_mac", "update")

    def __init__(self, mac_key: bytes, aad: bytes, iv: bytes) -> None:
        self._mac = hmac.new(mac_key, aad, hashlib.sha256)
        self._mac.update(iv)
        self._aad_bits = (len(aad) * 8).to_bytes(8, "big")
        self.update = self._mac.update  # ciphertext, in order (thread-safe to call from the helper thread)

    def tag(self) -> bytes:
        self._mac.update(self._aad_bits)
        return self._mac.digest()[:16]


def _tag(mac_key: bytes, aad: bytes, iv: bytes, ciphertext: bytes | bytearray | memoryview) -> bytes:
    mac = _TagMac(mac_key, aad, iv)
    mac.update(ciphertext)
    return mac.tag()


def _seal(plaintext: bytes | bytearray | memoryview, k: JweKey, aad: bytes, iv: bytes) -> tuple[memoryview, bytes]:
    """AES-128-CBC + PKCS#7 under ``iv``, then the tag over ``aad``: RFC 7518 5.2.2.1 (one copy, no more)."""
    view = memoryview(plaintext).cast("B")
    pad = 16 - view.nbytes % 16
    out = bytearray(view.nbytes + pad + 15)  # update_into needs one block of slack
    encryptor = Cipher(k._aes, modes.CBC(iv)).encryptor()
    n = encryptor.update_into(view, out)
    n += encryptor.update_into(bytes((pad,)) * pad, memoryview(out)[n:])
    encryptor.finalize()
    ciphertext = memoryview(out)[:n]
    return ciphertext, _tag(k._mac, aad, iv, ciphertext)


def _seal_pipelined(view: memoryview, k: JweKey, aad: bytes, iv: bytes) -> tuple[str, bytes]:
    """:func:`_seal` and base64url step by step, the HMAC of each step on the helper thread: ``(text, tag)``."""
    mac = _TagMac(k._mac, aad, iv)
    encryptor = Cipher(k._aes, modes.CBC(iv)).encryptor()
    worker = _mac_thread()
    step = _PIPELINE_STEP // 4 * 3  # a multiple of 48: each step's ciphertext is whole blocks and whole base64
    whole = view.nbytes - view.nbytes % step
    encoded: list[bytes] = []
    pending = None
    try:
        for start in range(0, whole, step):
            ciphertext = encryptor.update(view[start : start + step])
            pending = worker.submit(mac.update, ciphertext)  # one worker: the updates run in order
            encoded.append(pybase64.urlsafe_b64encode(ciphertext))
        pad = 16 - view.nbytes % 16
        ciphertext = encryptor.update(bytes(view[whole:]) + bytes((pad,)) * pad) + encryptor.finalize()
        pending = worker.submit(mac.update, ciphertext)
        encoded.append(pybase64.urlsafe_b64encode(ciphertext).rstrip(b"="))
    finally:
        if pending is not None:
            pending.result()
    return b"".join(encoded).decode("ascii"), mac.tag()


def encrypt(
    plaintext: bytes | bytearray | memoryview,
    key: str | bytes | JweKey,
    *,
    kid: str | None = None,
    protected: str | None = None,
) -> dict[str, str]:
    """Encrypt ``plaintext`` into a JWE JSON envelope: ``protected``, ``iv``, ``ciphertext``, ``tag`` [, ``kid``].

    ``protected`` defaults to :data:`DEFAULT_PROTECTED`; another value must still name ``dir`` and
    ``A128CBC-HS256``. A fresh random IV is drawn for every call.
    """
    k = derive_key(key)
    if protected is None:
        protected = DEFAULT_PROTECTED
    else:
        try:
            _check_header(protected)
        except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
            raise ValueError("protected must be the base64url of a dir / A128CBC-HS256 JWE header") from None
    if kid is not None and (type(kid) is not str or not kid.isprintable()):
        raise ValueError("kid must be a printable str")
    iv = os.urandom(16)
    view = memoryview(plaintext).cast("B")
    if view.nbytes >= _PIPELINE_MIN:
        text, tag = _seal_pipelined(view, k, protected.encode("ascii"), iv)
    else:
        ciphertext, tag = _seal(view, k, protected.encode("ascii"), iv)
        text = _b64url(ciphertext)
    envelope = {"protected": protected, "iv": _b64url(iv), "ciphertext": text, "tag": _b64url(tag)}
    if kid is not None:
        envelope["kid"] = kid
    return envelope


def _decoded_length(text: str) -> int:
    rem = len(text) % 4
    if rem == 1:
        raise ValueError
    return len(text) // 4 * 3 + (rem and rem - 1)


def _mac_thread() -> ThreadPoolExecutor:
    global _mac_worker
    with _mac_worker_lock:
        if _mac_worker is None:
            _mac_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="health_async-jwe-mac")
        return _mac_worker


def _forget_mac_thread() -> None:
    # A forked child has the executor object but not its thread: work handed to it would never run.
    global _mac_worker, _mac_worker_lock
    _mac_worker = None
    _mac_worker_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_mac_thread)


def _open_pipelined(text: str, k: JweKey, aad: bytes, iv: bytes) -> tuple[bytes, bytes]:
    """Decode, MAC and decrypt a large ciphertext step by step: ``(padded plaintext, expected tag)``.

    The HMAC of each step runs on one helper thread (hashlib releases the GIL) while this thread decodes and
    decrypts the next, so the three passes overlap instead of adding up. The plaintext is only decrypted
    speculatively here: the caller compares the tag before it looks at the padding or returns anything.
    """
    mac = _TagMac(k._mac, aad, iv)
    decryptor = Cipher(k._aes, modes.CBC(iv)).decryptor()
    worker = _mac_thread()
    pieces: list[bytes] = []
    pending = None
    try:
        for start in range(0, len(text), _PIPELINE_STEP):
            raw = _b64url_decode(text[start : start + _PIPELINE_STEP])
            pending = worker.submit(mac.update, raw)  # one worker: the updates run in order
            pieces.append(decryptor.update(raw))
        pieces.append(decryptor.finalize())
    finally:
        if pending is not None:
            pending.result()  # never leave the helper thread working on a MAC we abandon
    return b"".join(pieces), mac.tag()


def _decrypt(envelope: Mapping[str, Any], k: JweKey, allow_legacy: bool) -> bytes:
    protected = envelope.get("protected", DEFAULT_PROTECTED)
    text = envelope["ciphertext"]
    if type(protected) is not str or type(text) is not str:
        raise ValueError
    iv = _b64url_decode(envelope["iv"])
    tag = _b64url_decode(envelope["tag"])
    size = _decoded_length(text)
    if len(iv) != 16 or not size or size % 16:
        raise ValueError
    padded: bytes | None = None
    if len(tag) == 16:
        _check_header(protected)
        aad = protected.encode("ascii")
        if len(text) >= _PIPELINE_MIN:
            padded, expected = _open_pipelined(text, k, aad, iv)
        else:
            ciphertext = _b64url_decode(text)
            expected = _tag(k._mac, aad, iv, ciphertext)
        if not hmac.compare_digest(tag, expected):
            raise ValueError
        aes = k._aes
    elif len(tag) == 32 and allow_legacy:
        ciphertext = _b64url_decode(text)
        if not hmac.compare_digest(tag, hmac.digest(k._legacy_mac, ciphertext, "sha256")):
            raise ValueError
        aes = k._legacy_aes
    else:
        raise ValueError
    if padded is None:
        decryptor = Cipher(aes, modes.CBC(iv)).decryptor()
        padded = decryptor.update(ciphertext) + decryptor.finalize()
    # Only now, with the tag verified, is the padding looked at.
    pad = padded[-1]
    if not 1 <= pad <= 16 or padded[-pad:] != bytes((pad,)) * pad:
        raise ValueError
    return padded[:-pad]


def decrypt(envelope: Mapping[str, Any], key: str | bytes | JweKey, *, allow_legacy: bool = False) -> bytes:
    """Check and decrypt a JWE JSON envelope; return the plaintext bytes.

    An envelope without ``protected`` is read as ``dir`` / ``A128CBC-HS256`` (the service's responses carry
    none). ``allow_legacy=True`` also accepts the weaker legacy form (see the module documentation).

    Raises :class:`~health_async.errors.EncryptionError`, always with the same message, for every failure.
    """
    k = derive_key(key)
    try:
        if not isinstance(envelope, Mapping):
            raise TypeError
        return _decrypt(envelope, k, allow_legacy)
    except (ValueError, TypeError, KeyError, UnicodeError, binascii.Error, orjson.JSONDecodeError):
        raise EncryptionError(_FAILED) from None


async def encrypt_async(
    plaintext: bytes | bytearray | memoryview, key: str | bytes | JweKey, *, kid: str | None = None
) -> dict[str, str]:
    """:func:`encrypt`, in a worker thread when the payload is :data:`THREAD_THRESHOLD` bytes or more."""
    if len(plaintext) < THREAD_THRESHOLD:
        return encrypt(plaintext, key, kid=kid)
    return await asyncio.to_thread(encrypt, plaintext, key, kid=kid)


async def decrypt_async(envelope: Mapping[str, Any], key: str | bytes | JweKey, *, allow_legacy: bool = False) -> bytes:
    """:func:`decrypt`, in a worker thread when the ciphertext is :data:`THREAD_THRESHOLD` characters or more."""
    ciphertext = envelope.get("ciphertext") if isinstance(envelope, Mapping) else None
    if not isinstance(ciphertext, str) or len(ciphertext) < THREAD_THRESHOLD:
        return decrypt(envelope, key, allow_legacy=allow_legacy)
    return await asyncio.to_thread(decrypt, envelope, key, allow_legacy=allow_legacy)


def is_envelope(obj: object) -> bool:
    """True for a JSON object that looks like an encrypted envelope (``ciphertext``, ``iv`` and ``tag`` strings)."""
    return (
        type(obj) is dict
        and type(obj.get("ciphertext")) is str
        and type(obj.get("iv")) is str
        and type(obj.get("tag")) is str
    )


def to_compact(envelope: Mapping[str, Any]) -> str:
    """The compact serialisation ``protected..iv.ciphertext.tag`` (empty encrypted-key part, as ``dir`` has).

    A missing ``protected`` becomes :data:`DEFAULT_PROTECTED`.
    """
    try:
        parts = [
            envelope.get("protected", DEFAULT_PROTECTED),
            "",
            envelope["iv"],
            envelope["ciphertext"],
            envelope["tag"],
        ]
    except (KeyError, AttributeError, TypeError):
        raise EncryptionError("not a JWE envelope: it needs iv, ciphertext and tag") from None
    if not all(type(p) is str and "." not in p for p in parts):
        raise EncryptionError("not a JWE envelope: its members must be base64url strings")
    return ".".join(parts)


def from_compact(token: str) -> dict[str, str]:
    """The JSON envelope of a compact serialisation (five parts, the encrypted-key part empty)."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 5 or parts[1] != "" or not all(parts[i] for i in (0, 2, 3, 4)):
        raise EncryptionError("not a dir JWE compact serialisation (protected..iv.ciphertext.tag)")
    return {"protected": parts[0], "iv": parts[2], "ciphertext": parts[3], "tag": parts[4]}
