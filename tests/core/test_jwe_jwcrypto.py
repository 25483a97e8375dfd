"""health_async.jwe against jwcrypto, both ways: the other side's own implementation of RFC 7516 / RFC 7518.

What this proves: an envelope we write (``dir`` + ``A128CBC-HS256``, compact or flattened JSON) is decrypted by
jwcrypto to exactly the plaintext we sealed, whatever its size (small, non-ASCII, several MiB through the
step-by-step path, the ``*_async`` thread path), with the service's key (equal halves) and with a key of independent
halves; a token jwcrypto writes is decrypted by ours to exactly its plaintext, at the AES block boundaries and
at 1 MiB; one byte flipped in the IV, ciphertext or tag is refused by each side with its typed error; and a
mismatched key or a key of the wrong size is refused by both. The JOSE header jwcrypto reads from our envelopes is
checked too: ``kid`` is an envelope member of ours, outside the protected header, unless the caller puts it there.

jwcrypto cannot return an empty plaintext (its ``decrypt`` treats ``b""`` as "nothing decrypted"): that case is
pinned by its own test, which shows jwcrypto verified our tag and then refused, as it refuses its own empty tokens.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from jwcrypto.common import (  # type: ignore[import-untyped]
    InvalidCEKeyLength,
    InvalidJWEData,
    json_encode,
)
from jwcrypto.jwe import JWE  # type: ignore[import-untyped]
from jwcrypto.jwk import JWK, JWKSet  # type: ignore[import-untyped]

import health_async as ha
from health_async import jwe

KEY_STRING = "0123456789abcdef"
#: The raw 32-byte key behind each of our keys: the service's rule (the key string twice: equal MAC and AES
#: halves) and a standard key with independent halves.
RAW_KEYS = {
    "service key string": (KEY_STRING * 2).encode(),
    "independent halves": bytes(range(32)),
}
OTHER_RAW_KEY = bytes(range(32, 64))
HEADER = {"alg": "dir", "enc": "A128CBC-HS256"}

PAYLOADS = {
    "json": b'{"aadhaar_number":"234567890124"}',
    "one byte": b"\x00",
    "non-ascii utf-8": "नमस्ते, Grüße, 漢字 🙂".encode(),
    "non-utf-8 bytes": bytes(range(128, 256)),
    "3 MiB + 7": os.urandom(3 * 1024 * 1024 + 7),  # over jwe._STEPS_MIN: the step-by-step encryption
}


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwk(raw: bytes, kid: str | None = None) -> Any:
    """The jwcrypto ``oct`` key for the 32 raw bytes that ``jwe.derive_key`` splits into MAC and AES keys."""
    params = {"kty": "oct", "k": _b64u(raw)}
    if kid is not None:
        params["kid"] = kid
    return JWK(**params)


def _our_key(name: str) -> str | bytes:
    """What a user of ours passes: the service's key string, or the raw 32 bytes."""
    return KEY_STRING if name == "service key string" else RAW_KEYS[name]


def _serialize(env: dict[str, str], form: str) -> str:
    """Our envelope as a token for jwcrypto: the compact form, or the envelope itself as flattened JSON."""
    return jwe.to_compact(env) if form == "compact" else json.dumps(env)


def _jwcrypto_open(token: str, key: Any) -> tuple[bytes, dict[str, Any]]:
    """jwcrypto's plaintext and the JOSE header it read."""
    obj = JWE()
    obj.deserialize(token, key)
    plaintext: bytes = obj.payload
    header: dict[str, Any] = obj.jose_header
    return plaintext, header


def _jwcrypto_seal(payload: bytes, raw: bytes, header: dict[str, str] = HEADER) -> Any:
    return JWE(payload, json_encode(header), recipient=_jwk(raw))


def _to_envelope(obj: Any, form: str) -> dict[str, Any]:
    """A jwcrypto token as the envelope our ``decrypt`` takes: ``from_compact``, or the flattened JSON as it is."""
    if form == "compact":
        return jwe.from_compact(obj.serialize(compact=True))
    envelope: dict[str, Any] = json.loads(obj.serialize())
    return envelope


def _flip(text: str, index: int) -> str:
    """``text`` (base64url) with one bit of its ``index``-th byte flipped."""
    raw = bytearray(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    raw[index] ^= 1
    return _b64u(bytes(raw))


# ----------------------------------------------------------------------------------------------- ours -> jwcrypto


@pytest.mark.parametrize("form", ["compact", "json"])
@pytest.mark.parametrize("key_name", list(RAW_KEYS))
@pytest.mark.parametrize("payload_name", list(PAYLOADS))
def test_jwcrypto_decrypts_what_we_encrypt(payload_name: str, key_name: str, form: str) -> None:
    payload = PAYLOADS[payload_name]
    env = jwe.encrypt(payload, _our_key(key_name), kid="client-key-1")
    assert set(env) == {"protected", "iv", "ciphertext", "tag", "kid"}
    plaintext, header = _jwcrypto_open(_serialize(env, form), _jwk(RAW_KEYS[key_name]))
    assert plaintext == payload
    # Our kid is an envelope member, outside the protected header: jwcrypto reads only alg and enc (the flattened
    # JSON form's extra "kid" member is ignored, the compact form has no place for it).
    assert header == HEADER


def test_a_kid_in_our_protected_header_is_what_jwcrypto_sees_and_picks_the_key_by() -> None:
    protected = _b64u(json.dumps({**HEADER, "kid": "client-key-1"}).encode())
    env = jwe.encrypt(PAYLOADS["json"], KEY_STRING, protected=protected)
    assert env["protected"] == protected
    keys = JWKSet()
    keys.add(_jwk(OTHER_RAW_KEY, kid="other-key"))
    keys.add(_jwk(RAW_KEYS["service key string"], kid="client-key-1"))
    plaintext, header = _jwcrypto_open(jwe.to_compact(env), keys)
    assert plaintext == PAYLOADS["json"]
    assert header == {**HEADER, "kid": "client-key-1"}


async def test_jwcrypto_decrypts_what_encrypt_async_produces_in_its_thread() -> None:
    payload = os.urandom(jwe.THREAD_THRESHOLD * 5 + 3)  # over the threshold: encrypted in a worker thread
    env = await jwe.encrypt_async(payload, KEY_STRING, kid="client-key-1")
    assert _jwcrypto_open(jwe.to_compact(env), _jwk(RAW_KEYS["service key string"]))[0] == payload


@pytest.mark.parametrize("form", ["compact", "json"])
def test_jwcrypto_refuses_an_empty_plaintext_only_after_verifying_our_tag(form: str) -> None:
    """jwcrypto 1.6's ``JWE.decrypt`` ends with ``if not self.plaintext: raise``: ``b""`` counts as a failure.

    Its log shows the tag verified and the plaintext is ``b""``; it refuses its own empty tokens the same way, so
    this is jwcrypto's limit, not a fault of our envelope (which joserfc and ours decrypt: tests/core/test_jwe.py).
    """
    key = _jwk(RAW_KEYS["service key string"])
    ours = _serialize(jwe.encrypt(b"", KEY_STRING), form)
    theirs = _jwcrypto_seal(b"", RAW_KEYS["service key string"]).serialize(compact=form == "compact")
    for token in (ours, theirs):
        obj = JWE()
        with pytest.raises(InvalidJWEData, match="No recipient matched"):
            obj.deserialize(token, key)
        assert obj.decryptlog == ["Success"]
        assert obj.plaintext == b""


# ----------------------------------------------------------------------------------------------- jwcrypto -> ours


@pytest.mark.parametrize("form", ["compact", "json"])
@pytest.mark.parametrize("key_name", list(RAW_KEYS))
@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 1024 * 1024])
def test_we_decrypt_what_jwcrypto_encrypts(size: int, key_name: str, form: str) -> None:
    payload = os.urandom(size)
    env = _to_envelope(_jwcrypto_seal(payload, RAW_KEYS[key_name]), form)
    assert jwe.decrypt(env, _our_key(key_name)) == payload


async def test_decrypt_async_opens_a_large_jwcrypto_token_in_its_thread() -> None:
    payload = os.urandom(1024 * 1024 + 1)
    env = _to_envelope(_jwcrypto_seal(payload, RAW_KEYS["service key string"]), "compact")
    assert len(env["ciphertext"]) >= jwe.THREAD_THRESHOLD
    assert await jwe.decrypt_async(env, KEY_STRING) == payload


def test_we_decrypt_a_jwcrypto_token_with_a_kid_in_its_protected_header() -> None:
    obj = _jwcrypto_seal(PAYLOADS["json"], RAW_KEYS["service key string"], {**HEADER, "kid": "client-key-1"})
    env = _to_envelope(obj, "compact")
    assert json.loads(base64.urlsafe_b64decode(env["protected"] + "==="))["kid"] == "client-key-1"
    assert jwe.decrypt(env, KEY_STRING) == PAYLOADS["json"]


# ----------------------------------------------------------------------------------------------- tampering

FLIPS = [("iv", 0), ("iv", 15), ("ciphertext", 0), ("ciphertext", -1), ("tag", 0), ("tag", 15)]


@pytest.mark.parametrize("form", ["compact", "json"])
@pytest.mark.parametrize(("member", "index"), FLIPS)
def test_a_flipped_byte_in_a_jwcrypto_token_is_refused_by_ours(member: str, index: int, form: str) -> None:
    env = _to_envelope(_jwcrypto_seal(PAYLOADS["json"], RAW_KEYS["service key string"]), form)
    assert jwe.decrypt(env, KEY_STRING) == PAYLOADS["json"]  # the control: untouched, it decrypts
    env[member] = _flip(env[member], index)
    with pytest.raises(ha.EncryptionError) as info:
        jwe.decrypt(env, KEY_STRING)
    assert str(info.value) == jwe._FAILED


@pytest.mark.parametrize(("member", "index"), FLIPS)
def test_a_flipped_byte_in_our_envelope_is_refused_by_jwcrypto(member: str, index: int) -> None:
    env = jwe.encrypt(PAYLOADS["json"], KEY_STRING)
    env[member] = _flip(env[member], index)
    with pytest.raises(InvalidJWEData):
        _jwcrypto_open(jwe.to_compact(env), _jwk(RAW_KEYS["service key string"]))


# ----------------------------------------------------------------------------------------------- keys


def test_a_mismatched_key_is_refused_both_ways() -> None:
    ours = jwe.encrypt(PAYLOADS["json"], KEY_STRING)
    with pytest.raises(InvalidJWEData):
        _jwcrypto_open(jwe.to_compact(ours), _jwk(OTHER_RAW_KEY))
    theirs = _to_envelope(_jwcrypto_seal(PAYLOADS["json"], OTHER_RAW_KEY), "compact")
    with pytest.raises(ha.EncryptionError) as info:
        jwe.decrypt(theirs, KEY_STRING)
    assert str(info.value) == jwe._FAILED


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(KEY_STRING.encode(), id="the 16-byte key string itself"),
        pytest.param(bytes(range(24)), id="24 bytes"),
        pytest.param(bytes(range(64)), id="64 bytes"),
    ],
)
def test_a_key_of_the_wrong_size_is_refused_by_both(raw: bytes) -> None:
    # jwcrypto: A128CBC-HS256 with dir needs exactly 256 bits, to encrypt and to decrypt.
    with pytest.raises(InvalidCEKeyLength):
        _jwcrypto_seal(PAYLOADS["json"], raw)
    with pytest.raises(InvalidJWEData, match="length"):
        _jwcrypto_open(jwe.to_compact(jwe.encrypt(PAYLOADS["json"], KEY_STRING)), _jwk(raw))
    # Ours: refused before any cryptography, without showing the key (a str key string of 16 bytes is the
    # service's rule; 16 raw bytes are not a key).
    good = _to_envelope(_jwcrypto_seal(PAYLOADS["json"], RAW_KEYS["service key string"]), "compact")
    with pytest.raises(ha.InvalidRequest, match="32 bytes") as on_decrypt:
        jwe.decrypt(good, raw)
    with pytest.raises(ha.InvalidRequest, match="32 bytes"):
        jwe.encrypt(PAYLOADS["json"], raw)
    assert repr(raw) not in str(on_decrypt.value)
