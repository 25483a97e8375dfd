"""End-to-end payload encryption: JWE (RFC 7516) with ``alg=dir`` and ``enc=A128CBC-HS256`` (RFC 7518 5.2).

Written by hand on the ``cryptography`` primitives (AES-CBC) and the standard library's SHA-256, with ``pybase64``
for base64: no JOSE library at run time.

The scheme, exactly as RFC 7518 section 5.2 defines it:

* the 32-byte key is split: MAC key = first 16 bytes, AES key = last 16 bytes;
* AES-128-CBC with PKCS#7 padding under a fresh random 16-byte IV per message;
* tag = first 16 bytes of HMAC-SHA256(MAC key, AAD || IV || ciphertext || AL), where AAD is the ASCII of the
  ``protected`` member exactly as received (never re-serialised) and AL is its length in bits as a 64-bit
  big-endian integer;
* every envelope member is base64url without padding.

The key rule of the service: the key string written twice, as UTF-8 bytes, so it must be 16 bytes long
(:func:`derive_key`); a 32-byte raw key is accepted too. **That rule makes the two halves equal: the MAC key and
the AES key are the same 16 bytes.** RFC 7518 assumes independent halves (its security argument relies on that
key separation), and the secret is then 16 bytes, not 32. It is the service's rule, so it is followed; a 32-byte
raw key with independent halves works with any standard A128CBC-HS256 peer.

Strictness. Decryption checks the tag in constant time before it touches the padding, and every failure (wrong
key, any flipped bit, truncated tag, an IV that is not 16 bytes, unexpected ``alg``/``enc``, a ``zip`` or ``crit``
header, missing member, bad padding, non-canonical base64url) raises the same
:class:`~health_async.errors.EncryptionError` with the same message, so an attacker learns nothing that could
serve as a padding oracle. Only canonical base64url is accepted: the alphabet ``A-Z a-z 0-9 - _``, no padding
``=``, no whitespace, no ``+`` or ``/``, and zero unused bits in the last character, so each byte string has
exactly one accepted text (an envelope that decodes to the same bytes from another text is refused). Keys never
appear in a repr, an error message or a log record.

Limits: the service's only algorithms are ``dir`` + ``A128CBC-HS256``; no compression (``zip``) and no
critical header parameters (``crit``). An envelope without ``protected`` (the service's responses) is read with
the standard header ``{"alg":"dir","enc":"A128CBC-HS256"}`` in its compact serialisation as AAD. The legacy
response form of an early revision of the service's documentation (a 32-byte tag, the full HMAC-SHA256 of the
ciphertext alone, the key halves swapped) is accepted only with ``allow_legacy=True``: it is weaker, as it does not
authenticate the IV (nor any header), so a tampered IV changes the first plaintext block undetected. Its header
is still checked like any other (``dir``, ``A128CBC-HS256``, no ``zip``, no ``crit``).

Speed. Each :class:`JweKey` keeps a few AES-CBC contexts open between messages (creating one costs more than
encrypting a kilobyte): CBC only carries the previous ciphertext block from one block to the next, so a context
that last produced (or consumed) block ``C`` serves a message under a fresh IV once the first block is adjusted by
``C xor IV``; a context is used by one call at a time and dropped if a call fails half-way. The HMAC starts from
the key's precomputed inner and outer SHA-256 states. So derive a key once and pass the :class:`JweKey` (as
:class:`~health_async.HealthClient` does): a key string is derived anew, without any of that, on every call.

Payloads of 256 KiB or more are handled in one pass over the data, step by step (each step encrypted or decoded,
MACed and encoded while it is in the CPU cache). When this process may run on two cores or more
(``os.sched_getaffinity``), the HMAC (and, encrypting, the base64url) of each step runs on one helper thread
(``health_async-jwe-mac``; hashlib and ``cryptography`` release the GIL) while this thread works on the next step.
On one core the helper would only add hand-over costs, so it is not used; nor, for a while, after a run in which
the two threads did not actually run at the same time (a busy second core, a CPU quota). Decryption still
compares the tag before it looks at the padding or returns anything. :func:`encrypt_async` and
:func:`decrypt_async` move the work to a thread above :data:`THREAD_THRESHOLD` bytes so the event loop keeps
running.
"""

from __future__ import annotations

import asyncio
import binascii
import hashlib
import hmac
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

import pybase64
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from . import _json
from .errors import EncryptionError, InvalidArgumentType, InvalidRequest

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
_DEFAULT_AAD: Final = DEFAULT_PROTECTED.encode("ascii")

#: Payloads at least this large are encrypted or decrypted in a worker thread by the ``*_async`` functions.
THREAD_THRESHOLD: Final = 64 * 1024

#: Plaintexts (bytes) or ciphertexts (base64url characters) this large are processed step by step.
_STEPS_MIN: Final = 256 * 1024
#: Plaintext bytes per step: a multiple of 48, so each step's ciphertext is whole AES blocks and whole base64.
_STEP: Final = 48 * 1024 * 2
#: Base64url characters per step when decrypting: the same amount of ciphertext (a multiple of 64 characters).
_STEP_CHARS: Final = _STEP // 3 * 4
#: AES-CBC contexts kept open per key and direction (more concurrent calls simply create more, then drop them).
_POOL_SIZE: Final = 4

_mac_worker: ThreadPoolExecutor | None = None
_mac_worker_lock = threading.Lock()

_FAILED: Final = "could not decrypt the payload (wrong key, or the envelope is malformed or was altered)"

_URLSAFE: Final = b"-_"
_B64URL_ALPHABET: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
#: Characters that may end a canonical base64url text of length ``4k + r``: its unused low bits must be zero.
_LAST_CHAR: Final = {
    0: _B64URL_ALPHABET,
    2: _B64URL_ALPHABET[::16],  # 2 characters carry 1 byte: 4 unused bits
    3: _B64URL_ALPHABET[::4],  # 3 characters carry 2 bytes: 2 unused bits
}
_B64_PAD: Final = {0: "", 2: "==", 3: "="}
#: HMAC's inner and outer pads (RFC 2104) as translation tables: ``key_block.translate(_IPAD)`` is key xor 0x36...
_IPAD: Final = bytes(x ^ 0x36 for x in range(256))
_OPAD: Final = bytes(x ^ 0x5C for x in range(256))
#: PKCS#7 padding blocks by length.
_PADDING: Final = tuple(bytes((n,)) * n for n in range(17))


class _Cbc:
    """AES-128-CBC contexts for one AES key, kept open between messages, each with its next chaining block.

    A CBC context only carries the last ciphertext block ``C`` from one block to the next, so a context left in
    state ``C`` encrypts a message under ``iv`` when the first plaintext block is xored with ``C ^ iv``, and
    decrypts one when the first output block is xored with ``C ^ iv``. ``list.pop`` and ``list.append`` are atomic:
    each context serves one call at a time, and a call that fails half-way simply never gives its context back.
    """

    __slots__ = ("_aes", "_decryptors", "_encryptors")

    def __init__(self, aes: algorithms.AES) -> None:
        self._aes = aes
        self._encryptors: list[tuple[Any, int]] = []
        self._decryptors: list[tuple[Any, int]] = []

    def encryptor(self) -> tuple[Any, int]:
        try:
            return self._encryptors.pop()
        except IndexError:
            return Cipher(self._aes, modes.CBC(bytes(16))).encryptor(), 0

    def decryptor(self) -> tuple[Any, int]:
        try:
            return self._decryptors.pop()
        except IndexError:
            return Cipher(self._aes, modes.CBC(bytes(16))).decryptor(), 0

    def give_back_encryptor(self, context: Any, last_block: bytes | memoryview) -> None:
        if len(self._encryptors) < _POOL_SIZE:
            self._encryptors.append((context, int.from_bytes(last_block, "big")))

    def give_back_decryptor(self, context: Any, last_block: bytes | memoryview) -> None:
        if len(self._decryptors) < _POOL_SIZE:
            self._decryptors.append((context, int.from_bytes(last_block, "big")))


def _xor16(block: bytes | memoryview, value: int) -> bytes:
    return (int.from_bytes(block, "big") ^ value).to_bytes(16, "big")


class JweKey:
    """A validated 32-byte A128CBC-HS256 key. Its bytes never appear in its repr or in any message."""

    __slots__ = ("_aes", "_cbc", "_inner", "_legacy_aes", "_legacy_cbc", "_legacy_mac", "_mac", "_outer")

    def __init__(self, raw: bytes) -> None:
        """Prefer :func:`derive_key`, which also accepts the service's 16-character key strings."""
        if not isinstance(raw, bytes) or len(raw) != 32:
            raise InvalidRequest("a JweKey needs exactly 32 raw bytes")
        self._mac = raw[:16]
        self._aes = algorithms.AES(raw[16:])
        self._cbc = _Cbc(self._aes)
        # HMAC (RFC 2104) with the key's inner and outer SHA-256 states computed once: each tag copies them.
        block = self._mac.ljust(64, b"\0")
        self._inner = hashlib.sha256(block.translate(_IPAD))
        self._outer = hashlib.sha256(block.translate(_OPAD))
        # The legacy response form keyed the halves the other way round: AES key first, MAC key second.
        self._legacy_aes = algorithms.AES(raw[:16])
        self._legacy_cbc = _Cbc(self._legacy_aes)
        self._legacy_mac = raw[16:]

    def __repr__(self) -> str:
        return "JweKey(<hidden>)"

    def __reduce__(self) -> Any:
        raise TypeError("a JweKey cannot be pickled (it would write the key out)")

    def _mac_start(self, aad: bytes, iv: bytes) -> Any:
        mac = self._inner.copy()
        mac.update(aad)
        mac.update(iv)
        return mac

    def _mac_end(self, mac: Any, aad_len: int) -> bytes:
        mac.update((aad_len * 8).to_bytes(8, "big"))
        outer = self._outer.copy()
        outer.update(mac.digest())
        return outer.digest()[:16]


def derive_key(key: str | bytes | bytearray | memoryview | JweKey) -> JweKey:
    """The :class:`JweKey` for the service's key string, a 32-byte raw key, or an existing ``JweKey``.

    A ``str`` is the shared key string: the key is its UTF-8 bytes written twice, so it must be 16 bytes (and the
    MAC and AES halves are then equal: see the module documentation). Raises ``ValueError`` (the key is never
    shown) or ``TypeError``.
    """
    if isinstance(key, JweKey):
        return key
    if isinstance(key, str):
        try:
            raw = key.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, as os.environ gives for undecodable bytes
            raise InvalidRequest(
                "the encryption key string must be valid Unicode text (it holds a lone surrogate: bytes that were "
                "not UTF-8?)"
            ) from None
        if len(raw) != 16:
            raise InvalidRequest(
                f"the encryption key string must be 16 bytes in UTF-8 (it is written twice to make the 32-byte "
                f"A128CBC-HS256 key); this one is {len(raw)} bytes"
            )
        return JweKey(raw * 2)
    if isinstance(key, bytes | bytearray | memoryview):
        raw = bytes(key)
        if len(raw) != 32:
            raise InvalidRequest(f"a raw encryption key must be 32 bytes; this one is {len(raw)} bytes")
        return JweKey(raw)
    raise InvalidArgumentType(f"an encryption key must be a str, bytes or JweKey, not {type(key).__name__}")


def _plaintext_view(plaintext: object) -> memoryview:
    """``plaintext`` as a flat byte view. Any bytes-like object is accepted; one that is not C-contiguous (or whose
    format cannot be cast to bytes) is copied. Raises ``InvalidArgumentType`` for anything else (a ``str``:
    encode it first; ``None``)."""
    try:
        view = memoryview(plaintext)  # type: ignore[arg-type]  # checked here: a TypeError is the answer
    except TypeError:
        raise InvalidArgumentType(
            f"plaintext must be bytes-like (bytes, bytearray, memoryview), not {type(plaintext).__name__}"
        ) from None
    except ValueError:  # a released memoryview
        raise InvalidRequest("plaintext is a released memoryview") from None
    try:
        return view.cast("B")
    except TypeError:  # not C-contiguous (a strided slice), or a format that cannot be cast: a copy, in C order
        return memoryview(view.tobytes())


# ----------------------------------------------------------------------------------------------- base64url


def _b64url(data: bytes | bytearray | memoryview) -> str:
    """Base64url without padding, as a str."""
    text = pybase64.b64encode_as_string(data, altchars=_URLSAFE)
    return text[: len(text) - (-len(data) % 3)] if len(data) % 3 else text


def _b64url_decode(value: object) -> bytes:
    """Canonical base64url only: one text per byte string, anything else raises ``ValueError``.

    Refused: any character outside ``A-Z a-z 0-9 - _`` (whitespace, ``=``, ``+``, ``/``), an impossible length,
    and non-zero unused bits in the last character (a text that would decode to the same bytes as another).
    """
    # '+' and '/' must be looked for: with altchars the decoder only warns about them. A final '=' is looked for
    # by the last-character rule; one inside is a non-alphabet character to the validating decoder.
    if type(value) is not str or "+" in value or "/" in value:
        raise ValueError
    rem = len(value) & 3
    if rem == 1 or value[-1:] not in _LAST_CHAR[rem] or not value:
        raise ValueError
    return pybase64.b64decode(value + _B64_PAD[rem] if rem else value, altchars=_URLSAFE, validate=True)


def _decoded_length(text: str) -> int:
    rem = len(text) & 3
    if rem == 1:
        raise ValueError
    return len(text) // 4 * 3 + (rem and rem - 1)


def _check_header(protected: str) -> None:
    if protected == DEFAULT_PROTECTED:
        return
    header = _json.loads(_b64url_decode(protected))
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
    """The tag with the standard library's HMAC (an independent check of :class:`JweKey`'s own)."""
    mac = _TagMac(mac_key, aad, iv)
    mac.update(ciphertext)
    return mac.tag()


# ----------------------------------------------------------------------------------------------- the helper thread


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


def _cores() -> int:
    """CPUs this process may run on (its affinity where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


#: A helper run whose two threads used less CPU time than this many times the wall-clock time did not really run
#: in parallel (the second core was busy, or a CPU quota throttles the process): the helper then rests a while.
_MIN_OVERLAP: Final = 1.2
_HELPER_REST: Final = 30.0
_helper_resting_until = 0.0


def _use_helper() -> bool:
    """Whether large payloads hand the MAC to the helper thread: only with a second core to run it on.

    The affinity says which CPUs this process may use, not whether they are free, nor any CPU quota: when the
    last helper run shows the threads took turns instead of running together, the helper rests for
    :data:`_HELPER_REST` seconds (the one-core path is then faster), then is tried again.
    """
    return _cores() >= 2 and time.monotonic() >= _helper_resting_until


def _check_overlap(wall_start: float, cpu_start: float) -> None:
    """After a helper run: if both threads together used barely more CPU time than the wall clock, rest it."""
    _judge_overlap(time.perf_counter() - wall_start, time.process_time() - cpu_start)


def _judge_overlap(wall: float, cpu: float) -> None:
    global _helper_resting_until
    if cpu < wall * _MIN_OVERLAP:
        _helper_resting_until = time.monotonic() + _HELPER_REST


def _settle(futures: list[Future[Any]]) -> None:
    """Wait for every step handed to the helper (never leave it working on buffers we abandon)."""
    for future in futures:
        future.exception()


# ----------------------------------------------------------------------------------------------- encryption


def _seal(plaintext: bytes | bytearray | memoryview, k: JweKey, aad: bytes, iv: bytes) -> tuple[bytes, bytes]:
    """AES-128-CBC + PKCS#7 under ``iv``, then the tag over ``aad``: RFC 7518 5.2.2.1 in one go."""
    view = memoryview(plaintext).cast("B")
    n = view.nbytes
    pad = _PADDING[16 - n % 16]
    context, chain = k._cbc.encryptor()
    if n >= 16:
        ciphertext = context.update(b"".join((_xor16(view[:16], chain ^ int.from_bytes(iv, "big")), view[16:], pad)))
    else:
        ciphertext = context.update(_xor16(bytes(view) + pad, chain ^ int.from_bytes(iv, "big")))
    k._cbc.give_back_encryptor(context, ciphertext[-16:])
    mac = k._mac_start(aad, iv)
    mac.update(ciphertext)
    return ciphertext, k._mac_end(mac, len(aad))


def _seal_steps(
    view: memoryview, k: JweKey, aad: bytes, iv: bytes, *, step: int = _STEP, helper: bool = False
) -> tuple[str, bytes]:
    """Encrypt, MAC and base64url ``view`` step by step in one pass: ``(ciphertext text, tag)``.

    ``step`` is a multiple of 48 bytes, so every step but the last is whole AES blocks and whole base64 groups.
    With ``helper``, the MAC and the base64url of each step run on the helper thread while this thread encrypts
    the next; without it, each step is MACed and encoded by this thread while it is still in the CPU cache.
    """
    n = view.nbytes
    whole = n - n % step
    tail = b"".join((view[whole:], _PADDING[16 - n % 16]))  # at least one block
    mac = k._mac_start(aad, iv)
    context, chain = k._cbc.encryptor()
    fix = chain ^ int.from_bytes(iv, "big")
    if not whole:
        tail = _xor16(tail[:16], fix) + tail[16:]
    pieces: list[str]
    if helper:
        worker, wall_start, cpu_start = _mac_thread(), time.perf_counter(), time.process_time()
        futures: list[Future[str]] = []

        def mac_and_encode(ciphertext: bytes) -> str:
            mac.update(ciphertext)
            return pybase64.b64encode_as_string(ciphertext, altchars=_URLSAFE)

        try:
            for start in range(0, whole, step):
                if start:
                    ciphertext = context.update(view[start : start + step])
                else:
                    ciphertext = context.update(_xor16(view[:16], fix)) + context.update(view[16:step])
                futures.append(worker.submit(mac_and_encode, ciphertext))  # one worker: the steps run in order
            ciphertext = context.update(tail)
            futures.append(worker.submit(mac_and_encode, ciphertext))
            pieces = [future.result() for future in futures]
        finally:
            _settle(futures)
        _check_overlap(wall_start, cpu_start)
        last = ciphertext[-16:]
    else:
        pieces = []
        out = memoryview(bytearray(step + 32))  # the last step and padding, and the slack update_into needs
        update_into, update, encode = context.update_into, mac.update, pybase64.b64encode_as_string
        for start in range(0, whole, step):
            if start:
                done = update_into(view[start : start + step], out)
            else:
                done = update_into(_xor16(view[:16], fix), out)
                done += update_into(view[16:step], out[done:])
            update(out[:done])
            pieces.append(encode(out[:done], altchars=_URLSAFE))
        done = update_into(tail, out)
        update(out[:done])
        pieces.append(encode(out[:done], altchars=_URLSAFE))
        last = bytes(out[done - 16 : done])
    k._cbc.give_back_encryptor(context, last)
    if len(tail) % 3:  # only the last piece can end in padding: drop it
        pieces[-1] = pieces[-1][: len(tail) % 3 - 3]
    return "".join(pieces), k._mac_end(mac, len(aad))


def encrypt(
    plaintext: bytes | bytearray | memoryview,
    key: str | bytes | JweKey,
    *,
    kid: str | None = None,
    protected: str | None = None,
) -> dict[str, str]:
    """Encrypt ``plaintext`` into a JWE JSON envelope: ``protected``, ``iv``, ``ciphertext``, ``tag`` [, ``kid``].

    ``protected`` defaults to :data:`DEFAULT_PROTECTED`; another value must still be canonical base64url of a
    header naming ``dir`` and ``A128CBC-HS256``, without ``zip`` or ``crit``. A fresh random IV is drawn for every
    call. ``plaintext`` may be any bytes-like object (one that is not contiguous is copied); anything else (a
    ``str``, ``None``) raises :class:`~health_async.errors.InvalidArgumentType`.
    """
    k = derive_key(key)
    if protected is None:
        protected, aad = DEFAULT_PROTECTED, _DEFAULT_AAD
    else:
        try:
            _check_header(protected)
        except (ValueError, TypeError, binascii.Error, _json.JSONDecodeError):
            raise InvalidRequest(
                "protected must be the canonical base64url of a dir / A128CBC-HS256 JWE header"
            ) from None
        aad = protected.encode("ascii")
    if kid is not None and (type(kid) is not str or not kid.isprintable()):
        raise InvalidRequest("kid must be a printable str")
    view = _plaintext_view(plaintext)
    iv = os.urandom(16)
    if view.nbytes >= _STEPS_MIN:
        text, tag = _seal_steps(view, k, aad, iv, helper=_use_helper())
    else:
        ciphertext, tag = _seal(view, k, aad, iv)
        text = _b64url(ciphertext)
    envelope = {"protected": protected, "iv": _b64url(iv), "ciphertext": text, "tag": _b64url(tag)}
    if kid is not None:
        envelope["kid"] = kid
    return envelope


# ----------------------------------------------------------------------------------------------- decryption


def _open_steps(
    text: str, k: JweKey, aad: bytes, iv: bytes, *, step: int = _STEP_CHARS, helper: bool = False
) -> tuple[list[bytes], bytes]:
    """Decode, MAC and decrypt ``text`` step by step in one pass: ``(padded plaintext in pieces, expected tag)``.

    ``step`` is a multiple of 64 characters (whole base64 groups, whole AES blocks). With ``helper``, the MAC of
    each step runs on the helper thread while this thread decodes and decrypts the next. The plaintext is
    decrypted speculatively (into pieces nobody else sees): the caller compares the tag before it looks at the
    padding or returns anything (:func:`_join_unpadded`).
    """
    size = _decoded_length(text)
    mac = k._mac_start(aad, iv)
    context, chain = k._cbc.decryptor()
    update = context.update
    pieces: list[bytes] = []
    raw = b""
    if helper:
        worker, wall_start, cpu_start = _mac_thread(), time.perf_counter(), time.process_time()
        futures: list[Future[None]] = []
        try:
            for start in range(0, len(text), step):
                raw = _b64url_decode(text[start : start + step])
                futures.append(worker.submit(mac.update, raw))  # one worker: the steps run in order
                pieces.append(update(raw))
            for future in futures:
                future.result()
        finally:
            _settle(futures)
        _check_overlap(wall_start, cpu_start)
    else:
        mac_update = mac.update
        for start in range(0, len(text), step):
            raw = _b64url_decode(text[start : start + step])
            mac_update(raw)
            pieces.append(update(raw))
    if sum(map(len, pieces)) != size or len(pieces[0]) < 16:
        raise ValueError
    k._cbc.give_back_decryptor(context, raw[-16:])
    pieces[0] = _xor16(pieces[0][:16], chain ^ int.from_bytes(iv, "big")) + pieces[0][16:]
    return pieces, k._mac_end(mac, len(aad))


def _join_unpadded(pieces: list[bytes]) -> bytes:
    """The plaintext: the pieces without the padding (``ValueError`` if bad: call only once the tag is verified)."""
    last = pieces[-1]
    keep = _unpad(last, len(last))
    return b"".join([*pieces[:-1], memoryview(last)[:keep]])


def _unpad(padded: bytes | bytearray | memoryview, size: int) -> int:
    """The plaintext length of ``padded[:size]``; ``ValueError`` for bad padding (look only after the tag!)."""
    pad = padded[size - 1]
    if not 1 <= pad <= 16 or padded[size - pad : size] != _PADDING[pad]:
        raise ValueError
    return size - pad


def _open(ciphertext: bytes, cbc: _Cbc, iv: bytes) -> bytes:
    """Decrypt an authenticated ``ciphertext`` in one go and strip its padding."""
    context, chain = cbc.decryptor()
    padded: bytes = context.update(ciphertext)
    cbc.give_back_decryptor(context, ciphertext[-16:])
    first = _xor16(padded[:16], chain ^ int.from_bytes(iv, "big"))
    if len(padded) == 16:
        return first[: _unpad(first, 16)]
    return first + padded[16 : _unpad(padded, len(padded))]


def _decrypt(envelope: Mapping[str, Any], k: JweKey, allow_legacy: bool) -> bytes:
    protected = envelope.get("protected", DEFAULT_PROTECTED)
    text = envelope["ciphertext"]
    if type(protected) is not str or type(text) is not str:
        raise ValueError
    iv = _b64url_decode(envelope["iv"])
    tag = _b64url_decode(envelope["tag"])
    size = _decoded_length(text)
    # The IV length must be checked here: the CBC contexts only ever see it as a number to xor.
    if len(iv) != 16 or not size or size & 15:
        raise ValueError
    _check_header(protected)
    if len(tag) == 16:
        aad = _DEFAULT_AAD if protected == DEFAULT_PROTECTED else protected.encode("ascii")
        if len(text) >= _STEPS_MIN:
            pieces, expected = _open_steps(text, k, aad, iv, helper=_use_helper())
            if not hmac.compare_digest(tag, expected):
                raise ValueError
            return _join_unpadded(pieces)  # only now, with the tag verified, is the padding looked at
        ciphertext = _b64url_decode(text)
        mac = k._mac_start(aad, iv)
        mac.update(ciphertext)
        if not hmac.compare_digest(tag, k._mac_end(mac, len(aad))):
            raise ValueError
        return _open(ciphertext, k._cbc, iv)
    if len(tag) == 32 and allow_legacy:
        ciphertext = _b64url_decode(text)
        if not hmac.compare_digest(tag, hmac.digest(k._legacy_mac, ciphertext, "sha256")):
            raise ValueError
        return _open(ciphertext, k._legacy_cbc, iv)
    raise ValueError


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
    except (ValueError, TypeError, KeyError, UnicodeError, binascii.Error, _json.JSONDecodeError):
        raise EncryptionError(_FAILED) from None


async def encrypt_async(
    plaintext: bytes | bytearray | memoryview, key: str | bytes | JweKey, *, kid: str | None = None
) -> dict[str, str]:
    """:func:`encrypt`, in a worker thread when the payload is :data:`THREAD_THRESHOLD` bytes or more."""
    view = _plaintext_view(plaintext)
    if view.nbytes < THREAD_THRESHOLD:
        return encrypt(view, key, kid=kid)
    return await asyncio.to_thread(encrypt, view, key, kid=kid)


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
    """The JSON envelope of a compact serialisation (five parts, the encrypted-key part empty).

    The four dots are found with ``str.find`` / ``str.rfind`` (a ``memchr``) from both ends, and the ciphertext
    is checked for a stray dot the same way: ``str.split`` walks a large token one character at a time (about
    0.9 ms for a 1 MiB payload here, two thirds of the decrypt that follows), this costs the one copy of the
    ciphertext that the returned ``dict`` must hold.
    """
    if not isinstance(token, str):
        raise EncryptionError(_NOT_COMPACT)
    first = token.find(".")
    second = token.find(".", first + 1) if first > 0 else -1
    third = token.find(".", second + 1) if second == first + 1 else -1
    last = token.rfind(".")
    if (
        third <= second + 1  # the encrypted-key part must be empty; protected and iv must not be
        or last <= third + 1  # a ciphertext
        or last == len(token) - 1  # a tag
        or token.find(".", third + 1, last) != -1  # nothing more than five parts
    ):
        raise EncryptionError(_NOT_COMPACT)
    return {
        "protected": token[:first],
        "iv": token[second + 1 : third],
        "ciphertext": token[third + 1 : last],
        "tag": token[last + 1 :],
    }


_NOT_COMPACT: Final = "not a dir JWE compact serialisation (protected..iv.ciphertext.tag)"
