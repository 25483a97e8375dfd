"""health_async.jwe: the RFC vector, the vendor's examples, joserfc both ways, every tampering, the stream."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import pickle
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwe as jose_jwe
from joserfc.jwe import JWERegistry
from joserfc.jwk import OctKey

import health_async as ha
from health_async import jwe
from health_async._files import FileSource
from health_async._jwe_stream import encrypted_upload_body

VENDOR = json.loads((Path(__file__).resolve().parent.parent / "data" / "jwe_vendor_examples.json").read_text())
VENDOR_KEY = jwe.derive_key(VENDOR["key_string"])
KEY_STRING = "0123456789abcdef"
KEY = jwe.derive_key(KEY_STRING)
FAILED = "could not decrypt the payload"
RAW_KEY = (KEY_STRING * 2).encode()
MAC_KEY, AES_KEY = RAW_KEY[:16], RAW_KEY[16:]  # equal halves: the service's key rule
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def vendor(example: str) -> dict[str, Any]:
    envelope: dict[str, Any] = VENDOR["examples"][example]["envelope"]
    return envelope


# ----------------------------------------------------------------------------------------------- vectors


def test_rfc7518_appendix_b1_vector() -> None:
    """AES_128_CBC_HMAC_SHA_256 test case of RFC 7518 Appendix B.1."""
    key = jwe.JweKey(bytes(range(32)))
    plaintext = (
        b"A cipher system must not be required to be secret, and it must be able to fall into the hands of the "
        b"enemy without inconvenience"
    )
    iv = bytes.fromhex("1af38c2dc2b96ffdd86694092341bc04")
    aad = b"The second principle of Auguste Kerckhoffs"
    expected_ciphertext = bytes.fromhex(
        "c80edfa32ddf39d5ef00c0b468834279a2e46a1b8049f792f76bfe54b903a9c9a94ac9b47ad2655c5f10f9aef71427e2"
        "fc6f9b3f399a221489f16362c703233609d45ac69864e3321cf82935ac4096c86e133314c54019e8ca7980dfa4b9cf1b"
        "384c486f3a54c51078158ee5d79de59fbd34d848b3d69550a67646344427ade54b8851ffb598f7f80074b9473c82e2db"
    )
    expected_tag = bytes.fromhex("652c3fa36b0a7c5b3219fab3a30bc1c4")
    for _ in range(3):  # the key's AES contexts are reused from one message to the next
        ciphertext, tag = jwe._seal(plaintext, key, aad, iv)
        assert bytes(ciphertext) == expected_ciphertext
        assert tag == expected_tag
    text = base64.urlsafe_b64encode(expected_ciphertext).rstrip(b"=").decode()
    # The step-by-step paths of large payloads, here with tiny steps so the vector spans several of them.
    for step in (48, 96, 4800):
        for helper in (False, True):
            assert jwe._seal_steps(memoryview(plaintext), key, aad, iv, step=step, helper=helper) == (text, tag)
            pieces, opened_tag = jwe._open_steps(text, key, aad, iv, step=step // 3 * 4, helper=helper)
            assert opened_tag == expected_tag
            assert b"".join(pieces) == plaintext + bytes((16,)) * 16  # 128 bytes: a whole block of padding
            assert jwe._join_unpadded(pieces) == plaintext


@pytest.mark.parametrize("example", ["E06", "E11"])
def test_vendor_standard_examples_decrypt(example: str) -> None:
    assert jwe.decrypt(vendor(example), VENDOR_KEY) == VENDOR["examples"][example]["decrypts_to"].encode()


def test_vendor_legacy_example_only_with_the_opt_in() -> None:
    with pytest.raises(ha.EncryptionError):
        jwe.decrypt(vendor("E04"), VENDOR_KEY)
    plaintext = jwe.decrypt(vendor("E04"), VENDOR_KEY, allow_legacy=True)
    assert orjson.loads(plaintext)["name"] == "Rakesh"


def test_legacy_form_does_not_authenticate_the_iv() -> None:
    """Why it is opt-in: E07 carries a wrong IV, yet its legacy tag verifies and the first block is garbage."""
    plaintext = jwe.decrypt(vendor("E07"), VENDOR_KEY, allow_legacy=True)
    assert plaintext[16:].startswith(b'e":"Rakesh"')
    with pytest.raises(ha.EncryptionError):
        jwe.decrypt(vendor("E07"), VENDOR_KEY)


@pytest.mark.parametrize("example", ["E01", "E02", "E03", "E05", "E08", "E09", "E10"])
def test_vendor_truncated_and_dummy_examples_are_refused(example: str) -> None:
    with pytest.raises(ha.EncryptionError, match=FAILED):
        jwe.decrypt(vendor(example), VENDOR_KEY, allow_legacy=True)


# ----------------------------------------------------------------------------------------------- interop


def _oct(key_string: str) -> OctKey:
    return OctKey.import_key((key_string * 2).encode())


def test_joserfc_decrypts_what_we_encrypt() -> None:
    env = jwe.encrypt(b'{"aadhaar_number":"234567890124"}', KEY, kid="client-key-1")
    assert set(env) == {"protected", "iv", "ciphertext", "tag", "kid"}
    data = jose_jwe.decrypt_compact(jwe.to_compact(env), _oct(KEY_STRING))
    assert data.plaintext == b'{"aadhaar_number":"234567890124"}'
    assert data.protected == {"alg": "dir", "enc": "A128CBC-HS256"}


def test_joserfc_decrypts_a_large_payload_we_encrypt_step_by_step() -> None:
    payload = os.urandom(jwe._STEPS_MIN * 2 + 7)  # over the threshold: the step-by-step encryption
    registry = JWERegistry()
    registry.max_ciphertext_length = 8 * 1024 * 1024  # joserfc refuses over 64 K characters by default
    data = jose_jwe.decrypt_compact(jwe.to_compact(jwe.encrypt(payload, KEY)), _oct(KEY_STRING), registry=registry)
    assert data.plaintext == payload


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 1000])
def test_we_decrypt_what_joserfc_encrypts(size: int) -> None:
    payload = os.urandom(size)
    token = jose_jwe.encrypt_compact({"alg": "dir", "enc": "A128CBC-HS256"}, payload, _oct(KEY_STRING))
    assert jwe.decrypt(jwe.from_compact(token), KEY) == payload


def test_a_protected_header_with_spaces_is_authenticated_verbatim() -> None:
    spaced = base64.urlsafe_b64encode(b'{"alg": "dir", "enc": "A128CBC-HS256"}').rstrip(b"=").decode()
    env = jwe.encrypt(b"x", KEY, protected=spaced)
    assert env["protected"] == spaced
    assert jwe.decrypt(env, KEY) == b"x"
    assert jose_jwe.decrypt_compact(jwe.to_compact(env), _oct(KEY_STRING)).plaintext == b"x"


def test_response_envelope_without_protected_uses_the_standard_header() -> None:
    env = jwe.encrypt(b'{"ok":true}', KEY)
    del env["protected"]
    assert jwe.decrypt(env, KEY) == b'{"ok":true}'
    assert jwe.is_envelope(env)


# ----------------------------------------------------------------------------------------------- tampering


def _flip(value: str, index: int = 0) -> str:
    raw = bytearray(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    raw[index] ^= 1
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def _tampered() -> dict[str, Any]:
    """Envelopes altered after encryption: the tag no longer matches (the rules of their own are tested below)."""
    env = jwe.encrypt(b'{"aadhaar_number":"234567890124"}', KEY)
    return {
        "flipped protected": {**env, "protected": _flip(env["protected"], 5)},
        "flipped iv": {**env, "iv": _flip(env["iv"])},
        "flipped ciphertext": {**env, "ciphertext": _flip(env["ciphertext"], 3)},
        "flipped last block": {**env, "ciphertext": _flip(env["ciphertext"], -1)},
        "flipped tag": {**env, "tag": _flip(env["tag"], 15)},
        "truncated tag": {**env, "tag": env["tag"][:-2]},
        "padding inside": {**env, "ciphertext": env["ciphertext"][:4] + "=" + env["ciphertext"][5:]},
        "impossible length": {**env, "ciphertext": env["ciphertext"] + "A"},
        "not json header": {**env, "protected": "bm90IGpzb24"},
        "missing iv": {k: v for k, v in env.items() if k != "iv"},
        "missing tag": {k: v for k, v in env.items() if k != "tag"},
        "missing ciphertext": {k: v for k, v in env.items() if k != "ciphertext"},
        "numeric iv": {**env, "iv": 12},
        "short iv": {**env, "iv": env["iv"][:11]},
        "empty ciphertext": {**env, "ciphertext": ""},
        "swapped iv and tag": {**env, "iv": env["tag"], "tag": env["iv"]},
    }


@pytest.mark.parametrize("case", list(_tampered()))
def test_every_tampering_fails_the_same_way(case: str) -> None:
    with pytest.raises(ha.EncryptionError) as info:
        jwe.decrypt(_tampered()[case], KEY)
    assert str(info.value) == jwe._FAILED
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("envelope", [None, [], "x", {"ciphertext": "a"}])
def test_non_envelopes_fail_the_same_way(envelope: Any) -> None:
    with pytest.raises(ha.EncryptionError, match=FAILED):
        jwe.decrypt(envelope, KEY)


def test_wrong_key_and_bad_padding_are_indistinguishable() -> None:
    env = jwe.encrypt(b"secret", KEY)
    with pytest.raises(ha.EncryptionError) as wrong_key:
        jwe.decrypt(env, jwe.derive_key("fedcba9876543210"))
    # A valid tag over a ciphertext whose padding is bad: still the same error (MAC checked first, then padding).
    iv = os.urandom(16)
    bad = Cipher(KEY._aes, modes.CBC(iv)).encryptor().update(b"\x00" * 16)
    tag = jwe._tag(KEY._mac, jwe.DEFAULT_PROTECTED.encode(), iv, bad)
    forged = {"iv": jwe._b64url(iv), "ciphertext": jwe._b64url(bad), "tag": jwe._b64url(tag)}
    with pytest.raises(ha.EncryptionError) as bad_padding:
        jwe.decrypt(forged, KEY)
    assert str(wrong_key.value) == str(bad_padding.value)


# ----------------------------------------------------------------------------------------------- forged envelopes
# Each envelope below carries a VALID tag, computed here with the raw primitives (the standard library's HMAC and
# a fresh AES-CBC context), so the MAC cannot be what refuses it: only the rule the test names can. Each test also
# decrypts the same envelope without the defect, to show that the tag and everything else are right.


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _lenient(text: str) -> bytes:
    """What a lenient decoder makes of a text: whitespace, '=', '+' and '/', unused bits all tolerated."""
    cleaned = re.sub(r"[\s=]", "", text).replace("-", "+").replace("_", "/")
    return base64.b64decode(cleaned + "=" * (-len(cleaned) % 4))


def _cbc(iv: bytes, plaintext: bytes, aes_key: bytes = AES_KEY) -> bytes:
    pad = 16 - len(plaintext) % 16
    encryptor = Cipher(algorithms.AES(aes_key), modes.CBC(iv)).encryptor()
    return encryptor.update(plaintext + bytes((pad,)) * pad) + encryptor.finalize()


def _forge(protected: str, iv: bytes, ciphertext: bytes, **texts: str) -> dict[str, str]:
    """An envelope whose tag is valid over exactly ``protected`` (as AAD), ``iv`` and ``ciphertext``."""
    aad = protected.encode()
    tag = hmac.new(MAC_KEY, aad + iv + ciphertext + (len(aad) * 8).to_bytes(8, "big"), hashlib.sha256).digest()
    envelope = {"protected": protected, "iv": _b64u(iv), "ciphertext": _b64u(ciphertext), "tag": _b64u(tag[:16])}
    return {**envelope, **texts}


def _header(obj: object) -> str:
    return _b64u(json.dumps(obj, separators=(",", ":")).encode())


PLAINTEXT = b'{"aadhaar_number":"234567890124"}'  # 33 bytes: three blocks once padded


def test_forged_envelopes_decrypt_when_nothing_is_wrong() -> None:
    """The control for every forged envelope below: the forging itself is right."""
    iv = os.urandom(16)
    assert jwe.decrypt(_forge(jwe.DEFAULT_PROTECTED, iv, _cbc(iv, PLAINTEXT)), KEY) == PLAINTEXT
    spaced = _b64u(b'{"alg": "dir", "enc": "A128CBC-HS256", "kid": "k"}')  # verbatim AAD, extra members allowed
    assert jwe.decrypt(_forge(spaced, iv, _cbc(iv, PLAINTEXT)), KEY) == PLAINTEXT


@pytest.mark.parametrize("length", [12, 8, 15, 17, 24])
def test_an_iv_that_is_not_16_bytes_is_refused_even_with_a_valid_tag(length: int) -> None:
    iv = os.urandom(length)
    # Encrypted under the IV zero-extended to a block: a decryptor that skipped the length check would decrypt it.
    block_iv = iv.rjust(16, b"\0")[-16:]
    with pytest.raises(ha.EncryptionError, match=FAILED):
        jwe.decrypt(_forge(jwe.DEFAULT_PROTECTED, iv, _cbc(block_iv, PLAINTEXT)), KEY)


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "dir", "enc": "A128CBC-HS256", "zip": "DEF"},
        {"alg": "dir", "enc": "A128CBC-HS256", "crit": ["exp"], "exp": 1},
        {"alg": "A128KW", "enc": "A128CBC-HS256"},
        {"alg": "dir", "enc": "A256GCM"},
        {"enc": "A128CBC-HS256"},
        {"alg": "dir"},
        ["dir", "A128CBC-HS256"],
    ],
    ids=["zip", "crit", "other alg", "other enc", "no alg", "no enc", "not an object"],
)
@pytest.mark.parametrize("size", [33, 400 * 1024], ids=["small", "large"])
def test_a_header_outside_dir_a128cbc_hs256_is_refused_even_with_a_valid_tag(header: Any, size: int) -> None:
    iv, plaintext = os.urandom(16), os.urandom(size)
    with pytest.raises(ha.EncryptionError, match=FAILED):
        jwe.decrypt(_forge(_header(header), iv, _cbc(iv, plaintext)), KEY)


@pytest.mark.parametrize("header", [{"alg": "dir", "enc": "A128CBC-HS256", "zip": "DEF"}, {"alg": "A128KW"}])
def test_the_legacy_form_still_checks_the_header(header: Any) -> None:
    """The legacy tag does not cover the header, so the header rules are all that stands in its way."""
    iv = os.urandom(16)
    ciphertext = _cbc(iv, PLAINTEXT, aes_key=RAW_KEY[:16])  # legacy: halves swapped (equal for this key)
    tag = hmac.new(RAW_KEY[16:], ciphertext, hashlib.sha256).digest()
    legacy = {"iv": _b64u(iv), "ciphertext": _b64u(ciphertext), "tag": _b64u(tag)}
    assert jwe.decrypt(legacy, KEY, allow_legacy=True) == PLAINTEXT
    standard = _header({"alg": "dir", "enc": "A128CBC-HS256"})
    assert jwe.decrypt({**legacy, "protected": standard}, KEY, allow_legacy=True) == PLAINTEXT
    with pytest.raises(ha.EncryptionError, match=FAILED):
        jwe.decrypt({**legacy, "protected": _header(header)}, KEY, allow_legacy=True)


def _non_canonical(text: str) -> dict[str, str]:
    """Other texts a lenient decoder reads as the same bytes as the canonical ``text``."""
    rem = len(text) % 4
    assert rem in (2, 3) and ("-" in text or "_" in text)  # every kind applies
    last = B64URL.index(text[-1])
    assert last % (16 if rem == 2 else 4) == 0  # canonical: the unused bits are zero
    variants = {
        "unused bits set": text[:-1] + B64URL[last + 1],
        "padding": text + "=" * (4 - rem),
        # 64 characters of whitespace: the length stays a possible one, and a whole number of blocks
        "whitespace inside": text[:8] + " \t\r\n" * 16 + text[8:],
        "whitespace at the end": text + " " * 64,
        "plus and slash": text.replace("-", "+").replace("_", "/"),
    }
    assert all(_lenient(variant) == _lenient(text) for variant in variants.values())
    return variants


def _forge_for_canonical_tests() -> dict[str, str]:
    """A valid envelope whose four members each have a '-' or '_' and unused bits (deterministic search)."""
    rng = random.Random(7516)
    protected = _header({"alg": "dir", "enc": "A128CBC-HS256", "x": "~~"})  # '...In5-In0': a '-', 2 unused bits
    for _ in range(10_000):
        iv = rng.randbytes(16)
        envelope = _forge(protected, iv, _cbc(iv, PLAINTEXT[:20]))  # 32 bytes of ciphertext: 43 characters
        if all(len(text) % 4 and ("-" in text or "_" in text) for text in envelope.values()):
            return envelope
    raise AssertionError("no such envelope found")


CANONICAL = _forge_for_canonical_tests()


@pytest.mark.parametrize("member", ["protected", "iv", "ciphertext", "tag"])
@pytest.mark.parametrize("kind", list(_non_canonical(CANONICAL["iv"])))
def test_only_canonical_base64url_is_accepted(member: str, kind: str) -> None:
    assert jwe.decrypt(CANONICAL, KEY) == PLAINTEXT[:20]
    variant = _non_canonical(CANONICAL[member])[kind]
    forged = dict(CANONICAL)
    if member == "protected":  # the tag covers the protected text as received: forge it over the variant
        forged = _forge(variant, _lenient(CANONICAL["iv"]), _lenient(CANONICAL["ciphertext"]))
    forged[member] = variant
    with pytest.raises(ha.EncryptionError) as info:
        jwe.decrypt(forged, KEY)
    assert str(info.value) == jwe._FAILED


@pytest.mark.parametrize("helper", [False, True], ids=["one core", "helper thread"])
def test_only_canonical_base64url_is_accepted_in_large_ciphertexts(helper: bool, monkeypatch: Any) -> None:
    monkeypatch.setattr(jwe, "_use_helper", lambda: helper)
    payload = os.urandom(jwe._STEPS_MIN + 1000)  # 263,152 bytes of ciphertext: 350,870 characters, 4 unused bits
    env = jwe.encrypt(payload, KEY)
    text = env["ciphertext"]
    assert len(text) % 4 == 2 and jwe.decrypt(env, KEY) == payload
    middle = text.index("-", jwe._STEP_CHARS + 10)  # in the second step
    last = B64URL.index(text[-1])
    variants = {
        "plus in a middle step": text[:middle] + "+" + text[middle + 1 :],
        "unused bits set": text[:-1] + B64URL[last + 1],
        "padding": text + "==",
        "newline at a step boundary": text[: jwe._STEP_CHARS] + "\n" + text[jwe._STEP_CHARS :],
    }
    for variant in variants.values():
        assert _lenient(variant) == _lenient(text)
        with pytest.raises(ha.EncryptionError, match=FAILED):
            jwe.decrypt({**env, "ciphertext": variant}, KEY)


# ----------------------------------------------------------------------------------------------- keys


def test_key_rules() -> None:
    assert jwe.derive_key(KEY) is KEY
    raw = jwe.derive_key(bytes(range(32)))
    assert jwe.decrypt(jwe.encrypt(b"x", raw), bytes(range(32))) == b"x"
    assert jwe.decrypt(jwe.encrypt(b"x", KEY_STRING), KEY) == b"x"
    for bad in ("short", "seventeen-chars!!", "ééééééééé", b"x" * 16):
        with pytest.raises(ValueError, match="bytes") as info:
            jwe.derive_key(bad)
        assert str(bad) not in str(info.value)
    with pytest.raises(TypeError):
        jwe.derive_key(1234)  # type: ignore[arg-type]


def test_a_key_string_with_a_lone_surrogate_is_an_invalid_request(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = "abcdefghijklmn\udcff"  # what os.environ gives for the bytes b"abcdefghijklmn\xff"
    env = jwe.encrypt(b"x", KEY)
    for call in (
        lambda: jwe.derive_key(bad),
        lambda: jwe.decrypt(env, bad),
        lambda: jwe.encrypt(b"x", bad),
        lambda: ha.HealthClient(base_url="https://api.test.example", token="t", encryption_key=bad),
    ):
        with pytest.raises(ha.InvalidRequest, match="encryption key string must be valid Unicode") as info:
            call()
        assert "abcdefghijklmn" not in str(info.value) and info.value.__cause__ is None
    monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", "https://api.test.example")
    monkeypatch.setenv("HEALTH_ASYNC_TOKEN", "t")
    monkeypatch.setenv("HEALTH_ASYNC_ENCRYPTION_KEY", bad)
    with pytest.raises(ha.InvalidRequest, match="encryption key string"):
        ha.HealthClient.from_env()


@pytest.mark.parametrize("plaintext", ["hello", None, 12, ["a"]])
async def test_plaintext_that_is_not_bytes_like_is_an_invalid_argument_type(plaintext: Any) -> None:
    with pytest.raises(ha.InvalidArgumentType, match=f"plaintext must be bytes-like.*{type(plaintext).__name__}"):
        jwe.encrypt(plaintext, KEY)
    with pytest.raises(ha.InvalidArgumentType, match="plaintext must be bytes-like"):
        await jwe.encrypt_async(plaintext, KEY)


async def test_any_bytes_like_plaintext_is_encrypted_as_its_bytes() -> None:
    import array

    strided = memoryview(b"abcdefgh")[::2]  # not contiguous: copied
    assert jwe.decrypt(jwe.encrypt(strided, KEY), KEY) == b"aceg"
    assert jwe.decrypt(await jwe.encrypt_async(strided, KEY), KEY) == b"aceg"
    ints = array.array("i", [1, 2, 3])
    assert jwe.decrypt(jwe.encrypt(ints, KEY), KEY) == ints.tobytes()  # type: ignore[arg-type]
    grid = memoryview(bytes(range(12))).cast("B", (3, 4))  # contiguous, two dimensions
    assert jwe.decrypt(jwe.encrypt(grid, KEY), KEY) == bytes(range(12))
    released = memoryview(b"abc")
    released.release()
    with pytest.raises(ha.InvalidRequest, match="released"):
        jwe.encrypt(released, KEY)


def test_key_never_shown() -> None:
    key = jwe.derive_key(KEY_STRING)
    assert repr(key) == "JweKey(<hidden>)" and KEY_STRING not in str(key)
    with pytest.raises(TypeError):
        pickle.dumps(key)
    client = ha.HealthClient(base_url="https://api.test.example", token="t", encryption_key=KEY_STRING)
    assert KEY_STRING not in repr(client)


def test_fresh_iv_per_message_and_kid_checked() -> None:
    assert jwe.encrypt(b"x", KEY)["iv"] != jwe.encrypt(b"x", KEY)["iv"]
    with pytest.raises(ValueError, match="kid"):
        jwe.encrypt(b"x", KEY, kid="a\nb")
    with pytest.raises(ValueError, match="protected"):
        jwe.encrypt(b"x", KEY, protected="eyJhbGciOiJSU0EifQ")


def test_compact_round_trip_and_malformed_compact() -> None:
    env = jwe.encrypt(b"payload", KEY)
    assert jwe.from_compact(jwe.to_compact(env)) == {k: env[k] for k in ("protected", "iv", "ciphertext", "tag")}
    for bad in (
        "a.b.c.d.e",  # an encrypted key: not dir
        "a..b.c",  # four parts
        "a..b.c.d.e",  # six parts (a dot inside the ciphertext)
        "a..b.c..d",  # six parts, an empty one
        "",
        "a....",
        ".." + "b.c.d",  # no protected header
        "a...c.d",  # no iv
        "a..b..d",  # no ciphertext
        "a..b.c.",  # no tag
        "a..b.c",
        "abc",
        ".",
        5,
        None,
        b"a..b.c.d",
    ):
        with pytest.raises(ha.EncryptionError):
            jwe.from_compact(bad)  # type: ignore[arg-type]
    assert jwe.from_compact("p..i.c.t") == {"protected": "p", "iv": "i", "ciphertext": "c", "tag": "t"}
    big = jwe.encrypt(b"x" * (1 << 20), KEY)  # the parts are found from both ends of a large token
    assert jwe.from_compact(jwe.to_compact(big)) == {k: big[k] for k in ("protected", "iv", "ciphertext", "tag")}
    with pytest.raises(ha.EncryptionError):
        jwe.to_compact({"iv": "a"})


# ----------------------------------------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300) | st.sampled_from([b"", b"a" * 15, b"a" * 16, b"a" * 17]))
def test_round_trip(payload: bytes) -> None:
    env = jwe.encrypt(payload, KEY, kid="k")
    assert jwe.decrypt(env, KEY) == payload
    assert jwe.decrypt(jwe.from_compact(jwe.to_compact(env)), KEY) == payload


_text = st.text(alphabet=st.characters(codec="ascii"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["protected", "iv", "ciphertext", "tag", "kid", "x"]), _text | st.integers())
    | st.builds(lambda e, k, v: {**e, k: v}, st.just(jwe.encrypt(b"x", KEY)), st.sampled_from(["iv", "tag"]), _text)
)
def test_fuzz_decrypt_only_raises_encryption_error(envelope: dict[str, Any]) -> None:
    try:
        jwe.decrypt(envelope, KEY, allow_legacy=True)
    except ha.EncryptionError:
        pass


@pytest.mark.parametrize("helper", [False, True], ids=["one core", "helper thread"])
@pytest.mark.parametrize("size", [384 * 1024 - 17, 384 * 1024, 1024 * 1024 + 5, 3 * 1024 * 1024])
def test_large_payloads_round_trip_and_tampering_anywhere_is_caught(size: int, helper: bool, monkeypatch: Any) -> None:
    """Large payloads are handled step by step (the MAC on a helper thread with two cores): same results, same error."""
    monkeypatch.setattr(jwe, "_use_helper", lambda: helper)
    payload = os.urandom(size)
    env = jwe.encrypt(payload, KEY)
    assert len(env["ciphertext"]) >= jwe._STEPS_MIN
    assert jwe.decrypt(env, KEY) == payload
    text = env["ciphertext"]
    for index in (0, len(text) // 2, len(text) - 30):
        tampered = {**env, "ciphertext": text[:index] + ("A" if text[index] != "A" else "B") + text[index + 1 :]}
        with pytest.raises(ha.EncryptionError, match=FAILED):
            jwe.decrypt(tampered, KEY)
    for bad in (text[:100] + "+" + text[101:], text + "==", text[:-1]):
        with pytest.raises(ha.EncryptionError, match=FAILED):
            jwe.decrypt({**env, "ciphertext": bad}, KEY)
    with pytest.raises(ha.EncryptionError, match=FAILED):
        jwe.decrypt(env, jwe.derive_key("fedcba9876543210"))


@pytest.mark.parametrize(("cpus", "helper_used"), [({0}, False), ({0, 1}, True)], ids=["one core", "two cores"])
def test_the_helper_thread_is_used_only_with_a_second_core(cpus: set[int], helper_used: bool, monkeypatch: Any) -> None:
    """On one core the helper thread would only add hand-over costs: it is not even started."""
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: cpus)
    monkeypatch.setattr(jwe, "_mac_worker", None)
    monkeypatch.setattr(jwe, "_helper_resting_until", 0.0)
    monkeypatch.setattr(jwe, "_judge_overlap", lambda wall, cpu: None)  # this machine may be busy
    handed: list[object] = []
    real_mac_thread = jwe._mac_thread

    def counting_mac_thread() -> Any:
        handed.append(1)
        return real_mac_thread()

    monkeypatch.setattr(jwe, "_mac_thread", counting_mac_thread)
    payload = os.urandom(jwe._STEPS_MIN * 2)
    assert jwe.decrypt(jwe.encrypt(payload, KEY), KEY) == payload
    assert bool(handed) is helper_used
    assert jwe.decrypt(jwe.encrypt(b"small", KEY), KEY) == b"small"  # small payloads never use it
    assert len(handed) == (2 if helper_used else 0)


def test_the_helper_rests_after_a_run_where_the_threads_took_turns(monkeypatch: Any) -> None:
    """Affinity shows no busy core nor CPU quota: a helper run that did not overlap switches the helper off a while."""
    monkeypatch.setattr(jwe, "_cores", lambda: 2)
    monkeypatch.setattr(jwe, "_helper_resting_until", 0.0)
    assert jwe._use_helper()
    jwe._judge_overlap(wall=1.0, cpu=1.8)  # the two threads ran together most of the time: keep the helper
    assert jwe._use_helper()
    jwe._judge_overlap(wall=1.0, cpu=1.05)  # they took turns on one core
    assert not jwe._use_helper()
    assert jwe._helper_resting_until - time.monotonic() > jwe._HELPER_REST - 5  # for about _HELPER_REST seconds
    monkeypatch.setattr(jwe, "_HELPER_REST", 0.0)
    jwe._judge_overlap(wall=1.0, cpu=1.05)
    assert jwe._use_helper()  # tried again once the rest is over


def _reference_ciphertext(iv: bytes, plaintext: bytes) -> str:
    return _b64u(_cbc(iv, plaintext))


def test_reused_aes_contexts_give_the_same_bytes_as_fresh_ones() -> None:
    """Each key keeps AES-CBC contexts between messages: every message must still match a fresh context's output."""
    key = jwe.derive_key(KEY_STRING)
    rng = random.Random(7518)
    for size in [0, 1, 15, 16, 17, 31, 32, 33, 1000, 4096, jwe._STEPS_MIN + 5, 3, 100, jwe._STEPS_MIN * 2]:
        plaintext = rng.randbytes(size)
        env = jwe.encrypt(plaintext, key)
        assert env["ciphertext"] == _reference_ciphertext(_lenient(env["iv"]), plaintext)
        assert jwe.decrypt(env, key) == plaintext
    assert 1 <= len(key._cbc._encryptors) <= jwe._POOL_SIZE and 1 <= len(key._cbc._decryptors) <= jwe._POOL_SIZE


@pytest.mark.parametrize("helper", [False, True], ids=["one core", "helper thread"])
def test_a_failed_decryption_does_not_disturb_the_next_ones(helper: bool, monkeypatch: Any) -> None:
    """A call that stops half-way (bad base64url in a middle step) must not hand back a context in an unknown state."""
    monkeypatch.setattr(jwe, "_use_helper", lambda: helper)
    key = jwe.derive_key(KEY_STRING)
    big = os.urandom(jwe._STEPS_MIN * 2)
    env = jwe.encrypt(big, key)
    cut = jwe._STEP_CHARS * 2 + 5
    for bad in ("!", "+", "="):
        with pytest.raises(ha.EncryptionError, match=FAILED):
            jwe.decrypt({**env, "ciphertext": env["ciphertext"][:cut] + bad + env["ciphertext"][cut + 1 :]}, key)
        with pytest.raises(ha.EncryptionError, match=FAILED):
            jwe.decrypt({**env, "tag": _flip(env["tag"])}, key)  # decrypted in full, then refused by the tag
        for plaintext in (b"x" * 40, big):
            assert jwe.decrypt(jwe.encrypt(plaintext, key), key) == plaintext
            assert jwe.decrypt(jose_encrypt(plaintext), key) == plaintext


def jose_encrypt(plaintext: bytes) -> dict[str, str]:
    registry = JWERegistry()
    registry.max_ciphertext_length = 8 * 1024 * 1024
    header = {"alg": "dir", "enc": "A128CBC-HS256"}
    return jwe.from_compact(jose_jwe.encrypt_compact(header, plaintext, _oct(KEY_STRING), registry=registry))


def test_one_key_used_from_many_threads_at_once() -> None:
    """Contexts are never shared by two calls: concurrent messages under one key all come out right."""
    key = jwe.derive_key(KEY_STRING)
    failures: list[str] = []
    start = threading.Barrier(8)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        for _ in range(40):
            plaintext = rng.randbytes(rng.choice([5, 16, 700, 5000, 70_000]))
            env = jwe.encrypt(plaintext, key)
            if env["ciphertext"] != _reference_ciphertext(_lenient(env["iv"]), plaintext):
                failures.append("encrypt")
            if jwe.decrypt(env, key) != plaintext:
                failures.append("decrypt")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


async def test_async_variants_small_and_threaded() -> None:
    for size in (10, jwe.THREAD_THRESHOLD + 1):
        payload = os.urandom(size)
        env = await jwe.encrypt_async(payload, KEY, kid="k")
        assert await jwe.decrypt_async(env, KEY) == payload
    with pytest.raises(ha.EncryptionError):
        await jwe.decrypt_async({"iv": "x"}, KEY)


# ----------------------------------------------------------------------------------------------- streaming upload


async def _stream(source: FileSource) -> tuple[int, bytes, dict[str, Any]]:
    size, factory = encrypted_upload_body(source, KEY, kid="client-key-1")
    body = b"".join([c async for c in factory()])
    return size, body, orjson.loads(body)


@pytest.mark.parametrize("size", [1, 2, 3, 767 * 1024, 768 * 1024, 768 * 1024 + 1, 3 * 1024 * 1024 + 2])
async def test_streamed_upload_envelope(size: int, tmp_path: Path) -> None:
    data = os.urandom(size)
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    for source in (FileSource.from_input(data), FileSource.from_input(path)):
        announced, body, env = await _stream(source)
        assert len(body) == announced
        assert env["kid"] == "client-key-1"
        plaintext = jwe.decrypt(env, KEY)
        assert plaintext.startswith(b'{"file":"')
        assert base64.b64decode(orjson.loads(plaintext)["file"], validate=True) == data


async def test_each_streamed_attempt_has_a_new_iv() -> None:
    _, factory = encrypted_upload_body(FileSource.from_input(b"%PDF-1.7"), KEY)
    first = orjson.loads(b"".join([c async for c in factory()]))
    second = orjson.loads(b"".join([c async for c in factory()]))
    assert first["iv"] != second["iv"]
    assert jwe.decrypt(first, KEY) == jwe.decrypt(second, KEY)


async def test_stream_yields_while_the_loop_keeps_running() -> None:
    """The CPU work of a big chunk runs in a thread: a ticker on the loop keeps ticking during the stream."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        await _stream(FileSource.from_input(os.urandom(3 * 768 * 1024)))
    finally:
        task.cancel()
    assert ticks >= 3


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Python 3.12+ warns about fork() with threads
def test_a_forked_child_still_decrypts_large_payloads() -> None:
    """The helper thread does not survive fork(): the child must get its own, not wait forever on the parent's."""
    import multiprocessing

    payload = os.urandom(jwe._STEPS_MIN * 2)
    env = jwe.encrypt(payload, KEY)
    assert jwe.decrypt(env, KEY) == payload  # the parent's helper thread now exists
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_decrypt_in_child, args=(env, len(payload)))
    child.start()
    child.join(30)
    assert child.exitcode == 0


def _decrypt_in_child(env: dict[str, str], size: int) -> None:
    assert len(jwe.decrypt(env, KEY)) == size
