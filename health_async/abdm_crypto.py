"""ABDM's health-data encryption (HIE-CM's ECDH scheme), done locally with ``cryptography``'s constant-time X25519.

ABDM encrypts the FHIR bundles a hospital (HIP) sends to a requester (HIU) with:

* ECDH on **Curve25519 in short Weierstrass form** (as Java/BouncyCastle uses it): public keys are 65-byte
  uncompressed points ``04 || x || y`` (base64), or the same point in an X.509 ``SubjectPublicKeyInfo`` with the
  curve's explicit parameters; a private key is the scalar as Java's ``BigInteger.toByteArray()`` (base64). A
  peer's key is also accepted as a raw 32-byte X25519 key (RFC 7748's ``u``, base64: what X25519 libraries such
  as ``cryptography`` write; the same key, for the same shared secret); ours are always written in the two ABDM
  forms;
* HKDF-SHA256 of the shared secret (the Weierstrass ``x`` of the shared point, 32 bytes big-endian) with the salt
  ``(sender_nonce XOR requester_nonce)[:20]`` and no info, to a 32-byte key;
* AES-256-GCM with the IV ``(sender_nonce XOR requester_nonce)[-12:]``, no associated data; the ciphertext with its
  16-byte tag, base64. Nonces are 32 random bytes, base64 (ABDM's data-push documentation: "a 32-byte random
  nonce"): a nonce of any other length, ours or the peer's, is refused with
  :class:`~health_async.errors.InvalidRequest` (judgement call: the vendor's ``abdm-ecdh`` also takes two equal
  lengths of 20 bytes or more, but makes and documents 32).

This is byte for byte what the vendor's ``abdm-ecdh`` package does (tests run both directions, both key encodings,
against it). Unlike that package, no curve arithmetic on a secret is done in Python: the Weierstrass and Montgomery
forms are one curve, mapped by ``x = u + A/3`` and ``y = v`` (``A = 486662``; RFC 7748 section 4.1 gives the
Montgomery curve, and draft-ietf-lwig-curve-representations, appendix E.2, the map to "Wei25519"), so every
shared secret is ``cryptography``'s X25519 of our scalar with the peer's ``u = x - A/3``, and the answer's ``u``
mapped back to ``x``. Only public values are computed in Python (a public key's ``y`` from its ``u``; parsing).

Keys made here (:meth:`KeyMaterial.generate`) are X25519 scalars: 32 random bytes, clamped (RFC 7748), written out
in the ABDM form. The public point's ``y`` is one of the two square roots (X25519 gives ``u`` only): ECDH uses
``x`` alone, so either root names the same key for every party.

**A foreign private key** (made by another ABDM library: any integer in ``[1, n-1]``) is used through an equal
X25519 scalar when one exists: a clamped ``d'`` with ``d' = +-d (mod n)`` gives the same shared ``x`` for every
public key of the prime-order group (all honest keys). Of ``d`` and ``-d`` one always has such a ``d'``, except
when ``d`` is ``8m`` modulo ``n`` with ``|m|`` below about ``2**124.4`` (the two candidates' offsets sum to
``2**252 - n``): a scalar that small is a weak key anyway (about ``2**64`` work to find), and is refused with
:class:`~health_async.errors.InvalidRequest` ("generate a new key with KeyMaterial.generate()") rather than used
through secret-dependent arithmetic in Python (judgement call). A random key lands there with a probability of
about ``2**-124``. The reduction itself is a few modular operations on the scalar, once, when the key is loaded.

GCM must never see one (key, IV) pair twice: a key material and a peer's key material make one pair, so encrypt
**one** plaintext per pair of nonces (:meth:`KeyMaterial.generate` gives a fresh nonce each time; ABDM's own flow
sends each key material once). :meth:`KeyMaterial.encrypt` enforces it: a second, different plaintext under the
same key material to the same AES-GCM key and IV (the same peer key, in any of its encodings, and nonce) is
refused with :class:`~health_async.errors.InvalidRequest`. Nothing here logs, and no repr shows a private key.
"""

from __future__ import annotations

import binascii
import hashlib
import os
import re
from typing import Final

import attrs
import pybase64
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import EncryptionError, InvalidArgumentType, InvalidRequest

__all__ = ["KeyMaterial", "checksum", "checksum_matches", "decrypt", "encrypt"]

#: The field prime, the group order and Curve25519's Montgomery ``A``.
P: Final = 2**255 - 19
N: Final = 2**252 + 27742317777372353535851937790883648493
A: Final = 486662
#: ``A/3 mod p``: Weierstrass ``x`` = Montgomery ``u`` + this.
_SHIFT: Final = A * pow(3, P - 2, P) % P
#: Weierstrass coefficients and generator (BouncyCastle's Curve25519).
_WA: Final = (3 - A * A) * pow(3, P - 2, P) % P
_WB: Final = (2 * A**3 - 9 * A) * pow(27, P - 2, P) % P
_GX: Final = (9 + _SHIFT) % P
_GY: Final = 0x20AE19A1B8A086B4E01EDD2C7748D14C923D4D7E6D7C61B229E9C5A27ECED3D9
_NONCE_SIZE: Final = 32
#: A raw X25519 public key (RFC 7748), as ``cryptography``'s ``public_bytes_raw()`` writes it.
_RAW_KEY_SIZE: Final = 32
_HEX_MD5: Final = re.compile(r"[0-9a-fA-F]{32}")
#: What a line-wrapped base64 may hold besides its alphabet: ASCII whitespace, dropped.
_NO_WHITESPACE: Final = str.maketrans("", "", " \t\n\r\v\f")


def _der(tag: int, value: bytes) -> bytes:
    size = len(value)
    if size < 0x80:
        return bytes((tag, size)) + value
    raw = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(raw))) + raw + value


def _java_bytes(value: int) -> bytes:
    """A non-negative integer as Java's ``BigInteger.toByteArray()`` and DER write it: big-endian, minimal, with a
    leading zero byte when the high bit is set."""
    return value.to_bytes((value.bit_length() + 8) // 8, "big")


def _der_int(value: int) -> bytes:
    return _der(0x02, _java_bytes(value))


def _point(x: int, y: int) -> bytes:
    return b"\x04" + x.to_bytes(32, "big") + y.to_bytes(32, "big")


# The X.509 SubjectPublicKeyInfo prefix of a key (explicit curve parameters, as BouncyCastle writes them): the
# algorithm identifier is the same for every key, and the point follows as a BIT STRING.
_ALGORITHM: Final = _der(
    0x30,
    _der(0x06, bytes.fromhex("2a8648ce3d0201"))  # 1.2.840.10045.2.1 ecPublicKey
    + _der(
        0x30,
        _der_int(1)
        + _der(0x30, _der(0x06, bytes.fromhex("2a8648ce3d0101")) + _der_int(P))  # prime field
        + _der(0x30, _der(0x04, _WA.to_bytes(32, "big")) + _der(0x04, _WB.to_bytes(32, "big")))
        + _der(0x04, _point(_GX, _GY))
        + _der_int(N)
        + _der_int(8),
    ),
)
_X509_PREFIX: Final = _der(0x30, _ALGORITHM + _der(0x03, b"\0" + bytes(65)))[:-65]


def _b64decode(name: str, value: object) -> bytes:
    """Standard base64, as the vendor's ``abdm-ecdh`` reads it (Python's ``base64.b64decode``): line-wrapped
    (MIME: ``\\n`` or ``\\r\\n`` every 76 characters, as Java's ``Base64.getMimeEncoder`` and Python's
    ``base64.encodebytes`` write) and JSON-escaped (``\\u002B``, ``\\u002F``, ``\\u003D``) forms included; it
    refuses what that package refuses (wrong padding, non-ASCII text). Judgement call: only ASCII whitespace is
    dropped; any other character outside the alphabet, and anything after the padding, is refused, where that
    package silently skips or truncates it: such text is not base64 someone meant to send."""
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{name} must be a base64 str, not {type(value).__name__}")
    text = value
    if "\\" in text:  # JSON-escaped forms some senders leave in: \u002B, \u002F, \u003D
        text = text.replace("\\u002B", "+").replace("\\u002F", "/").replace("\\u003D", "=")
    try:
        return pybase64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        pass
    unwrapped = text.translate(_NO_WHITESPACE)  # only when the fast, strict reading failed
    if unwrapped != text:
        try:
            return pybase64.b64decode(unwrapped, validate=True)
        except (binascii.Error, ValueError):
            pass
    raise InvalidRequest(f"{name} is not base64")


def _b64(raw: bytes) -> str:
    return pybase64.b64encode(raw).decode("ascii")


def _read_tlv(data: bytes, at: int) -> tuple[int, bytes, int]:
    """(tag, value, next position) of the DER element at ``at``."""
    if at + 2 > len(data):
        raise ValueError("truncated")
    tag, size, at = data[at], data[at + 1], at + 2
    if size & 0x80:
        count = size & 0x7F
        size, at = int.from_bytes(data[at : at + count], "big"), at + count
    if at + size > len(data):
        raise ValueError("truncated")
    return tag, data[at : at + size], at + size


def _x509_point(raw: bytes) -> bytes:
    """The point of an X.509 SubjectPublicKeyInfo of ABDM's curve (explicit parameters naming its prime and
    coefficients, as BouncyCastle and ``abdm-ecdh`` write them)."""
    try:
        tag, spki, _ = _read_tlv(raw, 0)
        algorithm_tag, algorithm, at = _read_tlv(spki, 0)
        bits_tag, bits, _ = _read_tlv(spki, at)
    except ValueError:
        algorithm = b""
        tag = algorithm_tag = bits_tag = 0
        bits = b""
    curve = (P.to_bytes(32, "big"), _WA.to_bytes(32, "big"), _WB.to_bytes(32, "big"))
    if (tag, algorithm_tag, bits_tag) != (0x30, 0x30, 0x03) or not all(c in algorithm for c in curve):
        raise InvalidRequest(
            "the peer's public key must be a 65-byte uncompressed point or an X.509 key of ABDM's curve "
            "(Curve25519 in Weierstrass form, explicit parameters), or a raw 32-byte X25519 key"
        )
    return bits[1:]  # after the unused-bits byte


def _peer_u(public_key: str) -> bytes:
    """The Montgomery ``u`` (32 bytes, little-endian, for X25519) of a peer's key: 65-byte point, X.509, or a raw
    32-byte X25519 key."""
    raw = _b64decode("the peer's public key", public_key)
    if len(raw) == _RAW_KEY_SIZE:
        return _raw_u(raw)
    point = raw if len(raw) == 65 else _x509_point(raw)
    if len(point) != 65 or point[0] != 4:
        raise InvalidRequest("the peer's public key must be an uncompressed point (04 || x || y)")
    x, y = int.from_bytes(point[1:33], "big"), int.from_bytes(point[33:], "big")
    if x >= P or y >= P or (y * y - (x * x * x + _WA * x + _WB)) % P:
        raise InvalidRequest("the peer's public key is not a point of ABDM's curve")
    return ((x - _SHIFT) % P).to_bytes(32, "little")


def _raw_u(raw: bytes) -> bytes:
    """A raw X25519 public key (RFC 7748: ``u``, 32 bytes little-endian), checked as strictly as a Weierstrass point
    is: canonical (``u < p``, so the unused top bit is clear) and on the curve itself, not on its twist (a ``u``
    with no ``v``, whose Weierstrass point would not exist; ``cryptography`` would use it all the same).
    Judgement call: RFC 7748 lets a receiver mask the top bit and take any ``u``, but no ABDM peer can hold such
    a key, and the other two encodings refuse it."""
    u = int.from_bytes(raw, "little")
    if u >= P:
        raise InvalidRequest("the peer's raw X25519 public key is not canonical (u must be below 2**255 - 19)")
    w = (u * u * u + A * u * u + u) % P  # v**2 on the Montgomery curve v**2 = u**3 + A*u**2 + u
    if w and pow(w, (P - 1) // 2, P) != 1:
        raise InvalidRequest("the peer's public key is not a point of ABDM's curve (a point of its twist)")
    return raw


def _clamped(scalar: bytes) -> int:
    value = bytearray(scalar)
    value[0] &= 248
    value[31] &= 127
    value[31] |= 64
    return int.from_bytes(value, "little")


def _x25519_scalar(d: int) -> int | None:
    """A clamped scalar equal to ``+-d`` modulo ``n`` (see the module), or None."""
    for target in (d % N, -d % N):
        k = (target - 2**254) * pow(8, -1, N) % N
        if k < 2**251:
            return 2**254 + 8 * k
    return None


@attrs.frozen(repr=False, eq=False)
class KeyMaterial:
    """One party's key material for ABDM's encryption: a private key, its public key (two encodings) and a nonce.

    Share :attr:`x509_public_key` (or :attr:`public_key`) and :attr:`nonce` with the other party; keep
    :attr:`private_key` secret (it never appears in a repr). Make one with :meth:`generate`, or rebuild one with
    :meth:`from_private_key`.
    """

    #: The private scalar, base64 of its Java ``BigInteger.toByteArray()`` (secret).
    private_key: str
    #: The public key, base64 of the 65-byte uncompressed point.
    public_key: str
    #: The public key, base64 of an X.509 SubjectPublicKeyInfo with the curve's explicit parameters.
    x509_public_key: str
    #: 32 random bytes, base64.
    nonce: str
    _key: X25519PrivateKey
    #: What :meth:`encrypt` sent: SHA-256 of (AES key || IV) -> SHA-256 of the plaintext (see there).
    _sent: dict[bytes, bytes] = attrs.field(init=False, factory=dict)

    def __repr__(self) -> str:
        return f"KeyMaterial(public_key={self.public_key[:12]}..., private_key=<hidden>)"

    @classmethod
    def generate(cls) -> KeyMaterial:
        """Fresh key material: an X25519 scalar (clamped random bytes) and a fresh 32-byte nonce."""
        return cls._of(_clamped(os.urandom(32)), os.urandom(_NONCE_SIZE))

    @classmethod
    def from_private_key(cls, private_key: str | int, nonce: str | None = None) -> KeyMaterial:
        """Key material from a private key kept earlier: base64 (ABDM's form) or the integer; with ``nonce``
        (base64 of 32 bytes), or a fresh one. A foreign key with no equal X25519 scalar is refused (see the
        module), as is a nonce of another length (:class:`~health_async.errors.InvalidRequest`)."""
        if isinstance(private_key, bool) or not isinstance(private_key, str | int):
            raise InvalidArgumentType(f"private_key must be a base64 str or an int, not {type(private_key).__name__}")
        d = private_key if isinstance(private_key, int) else int.from_bytes(_b64decode("private_key", private_key))
        if not 0 < d < 2**255:
            raise InvalidRequest("private_key is not a Curve25519 private key")
        scalar = d if _clamped(d.to_bytes(32, "little")) == d else _x25519_scalar(d)
        if scalar is None:
            raise InvalidRequest(
                "this private key has no constant-time X25519 equivalent: "
                "generate a new key with KeyMaterial.generate()"
            )
        raw_nonce = os.urandom(_NONCE_SIZE) if nonce is None else _b64decode("nonce", nonce)
        if len(raw_nonce) != _NONCE_SIZE:
            raise InvalidRequest(f"nonce must be {_NONCE_SIZE} bytes (base64), as ABDM's scheme uses")
        return cls._of(scalar, raw_nonce, shown=d)

    @classmethod
    def _of(cls, scalar: int, nonce: bytes, *, shown: int | None = None) -> KeyMaterial:
        key = X25519PrivateKey.from_private_bytes(scalar.to_bytes(32, "little"))
        u = int.from_bytes(key.public_key().public_bytes_raw(), "little")
        v = _sqrt((u * u * u + A * u * u + u) % P)  # public: y of the public point
        point = _point((u + _SHIFT) % P, v)
        return cls(
            private_key=_b64(_java_bytes(scalar if shown is None else shown)),
            public_key=_b64(point),
            x509_public_key=_b64(_X509_PREFIX + point),
            nonce=_b64(nonce),
            key=key,
        )

    def _aes(self, peer_public_key: str, peer_nonce: str) -> tuple[AESGCM, bytes, bytes]:
        """The AES-GCM cipher, the IV, and a name of the (key, IV) pair (a hash: the key itself is kept nowhere)."""
        mine, theirs = _b64decode("nonce", self.nonce), _b64decode("the peer's nonce", peer_nonce)
        if len(mine) != _NONCE_SIZE:  # only a KeyMaterial built or changed by hand (attrs.evolve) gets here
            raise InvalidRequest(f"this key material's nonce must be {_NONCE_SIZE} bytes")
        if len(theirs) != _NONCE_SIZE:
            raise InvalidRequest(f"the peer's nonce must be {_NONCE_SIZE} bytes, like ours")
        mixed = bytes(a ^ b for a, b in zip(mine, theirs, strict=True))
        peer = X25519PublicKey.from_public_bytes(_peer_u(peer_public_key))
        try:
            shared_u = self._key.exchange(peer)
        except ValueError:  # a small-order point: no shared secret
            raise InvalidRequest("the peer's public key gives no shared secret (a point of small order)") from None
        shared_x = ((int.from_bytes(shared_u, "little") + _SHIFT) % P).to_bytes(32, "big")
        key = HKDF(algorithm=SHA256(), length=32, salt=mixed[:20], info=b"").derive(shared_x)
        iv = mixed[-12:]
        return AESGCM(key), iv, hashlib.sha256(key + iv).digest()

    def encrypt(self, plaintext: bytes | str, *, peer_public_key: str, peer_nonce: str) -> str:
        """``plaintext`` (a str is UTF-8) encrypted to the peer, base64: what ABDM's ``encryptedData`` holds.

        One key material, one message: the AES-GCM key and IV follow from the two keys and the two nonces, so a
        second plaintext under them would reuse both (which discloses the XOR of the plaintexts and lets the tag
        be forged). Encrypting a **different** plaintext with this key material to a peer key and nonce it already
        encrypted to raises :class:`~health_async.errors.InvalidRequest`; use fresh key material
        (:meth:`generate`) for each message. The same peer key written another way (point, X.509, raw) is the
        same peer. Judgement call: encrypting the **same** plaintext again is allowed (a retry): it gives the
        very same ciphertext, so it discloses nothing new. The record is this object's: key material rebuilt
        with :meth:`from_private_key` and the same nonce starts a new one (keep one object per message).
        """
        if isinstance(plaintext, str):
            try:
                plaintext = plaintext.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate
                raise InvalidRequest("plaintext is a str that is not valid UTF-8 text (a lone surrogate)") from None
        if not isinstance(plaintext, bytes | bytearray | memoryview):
            raise InvalidArgumentType(f"plaintext must be bytes or str, not {type(plaintext).__name__}")
        data = bytes(plaintext)
        aes, iv, pair = self._aes(peer_public_key, peer_nonce)
        digest = hashlib.sha256(data).digest()
        if self._sent.setdefault(pair, digest) != digest:  # setdefault: one step, also between threads
            raise InvalidRequest(
                "this key material already encrypted another plaintext to this peer key and nonce: AES-GCM would "
                "reuse its key and IV; use fresh key material (KeyMaterial.generate()) for each message"
            )
        return _b64(aes.encrypt(iv, data, None))

    def decrypt(self, encrypted: str, *, peer_public_key: str, peer_nonce: str) -> bytes:
        """The plaintext of what the peer encrypted to us. :class:`~health_async.errors.EncryptionError` when it
        does not open (another key, a changed byte); the message never shows the data."""
        data = _b64decode("encrypted", encrypted)
        aes, iv, _ = self._aes(peer_public_key, peer_nonce)
        try:
            return aes.decrypt(iv, data, None)
        except InvalidTag:
            raise EncryptionError("the encrypted data does not open with these keys and nonces") from None


def _sqrt(value: int) -> int:
    """A square root modulo ``p`` (``p = 5 mod 8``) of a public value."""
    root = pow(value, (P + 3) // 8, P)
    if root * root % P != value:
        root = root * pow(2, (P - 1) // 4, P) % P
    if root * root % P != value:  # pragma: no cover - u of a real public key always has one
        raise EncryptionError("not a point of the curve")
    return root


def encrypt(plaintext: bytes | str, sender: KeyMaterial, *, requester_public_key: str, requester_nonce: str) -> str:
    """``sender.encrypt(...)``: the HIP's side (a function, like the vendor's package)."""
    if not isinstance(sender, KeyMaterial):
        raise InvalidArgumentType(f"sender must be a KeyMaterial, not {type(sender).__name__}")
    return sender.encrypt(plaintext, peer_public_key=requester_public_key, peer_nonce=requester_nonce)


def decrypt(encrypted: str, requester: KeyMaterial, *, sender_public_key: str, sender_nonce: str) -> bytes:
    """``requester.decrypt(...)``: the HIU's side."""
    if not isinstance(requester, KeyMaterial):
        raise InvalidArgumentType(f"requester must be a KeyMaterial, not {type(requester).__name__}")
    return requester.decrypt(encrypted, peer_public_key=sender_public_key, peer_nonce=sender_nonce)


# ---------------------------------------------------------------------------- entry checksums


def _plain_bytes(plain: object) -> bytes:
    if not isinstance(plain, bytes | bytearray | memoryview):
        raise InvalidArgumentType(f"plain must be bytes (the UTF-8 text), not {type(plain).__name__}")
    return plain if isinstance(plain, bytes) else bytes(plain)


def checksum(plain: bytes | bytearray | memoryview) -> str:
    """The checksum of an entry: MD5 of the plain (not encrypted) FHIR text, hex. ABDM's HIP specification (v0.5,
    data transfer): "checksum is Md5 checksum of the data content, before encryption"; the vendor's
    ``RecordsEntry.checksum``: "Checksum of the non encrypted plain text fhir data". Hex is what ABDM's reference
    implementations write (judgement call: the spelling is not documented)."""
    return hashlib.md5(_plain_bytes(plain), usedforsecurity=False).hexdigest()


def checksum_matches(sent: str, plain: bytes | bytearray | memoryview) -> bool:
    """Whether ``sent`` is the MD5 of ``plain``: hex (either case: what ABDM's reference HIPs and this library's
    HIP side write) or base64 of the 16-byte digest (what some HIPs write; judgement call: both are accepted, as
    ABDM documents only "MD5 checksum of the content, before encryption")."""
    if not isinstance(sent, str):
        raise InvalidArgumentType(f"sent must be a str, not {type(sent).__name__}")
    digest = hashlib.md5(_plain_bytes(plain), usedforsecurity=False).digest()
    text = sent.strip()
    if _HEX_MD5.fullmatch(text):
        return bytes.fromhex(text) == digest
    try:
        return pybase64.b64decode(text, validate=True) == digest
    except ValueError:
        return False
