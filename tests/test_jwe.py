"""health_async.jwe: the RFC vector, the vendor's examples, joserfc both ways, every tampering, the stream."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pickle
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwe as jose_jwe
from joserfc.jwe import JWERegistry
from joserfc.jwk import OctKey

import health_async as ha
from health_async import jwe
from health_async._files import FileSource
from health_async._jwe_stream import encrypted_upload_body

VENDOR = json.loads((Path(__file__).parent / "data" / "jwe_vendor_examples.json").read_text())
VENDOR_KEY = jwe.derive_key(VENDOR["key_string"])
KEY_STRING = "0123456789abcdef"
KEY = jwe.derive_key(KEY_STRING)
FAILED = "could not decrypt the payload"


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
    ciphertext, tag = jwe._seal(plaintext, key, aad, iv)
    assert bytes(ciphertext) == expected_ciphertext
    assert tag == bytes.fromhex("652c3fa36b0a7c5b3219fab3a30bc1c4")


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
    payload = os.urandom(jwe._PIPELINE_MIN * 2 + 7)  # over the threshold: the pipelined encryption
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
    env = jwe.encrypt(b'{"aadhaar_number":"234567890124"}', KEY)
    other_alg = base64.urlsafe_b64encode(b'{"alg":"A128KW","enc":"A128CBC-HS256"}').rstrip(b"=").decode()
    other_enc = base64.urlsafe_b64encode(b'{"alg":"dir","enc":"A256GCM"}').rstrip(b"=").decode()
    with_zip = base64.urlsafe_b64encode(b'{"alg":"dir","enc":"A128CBC-HS256","zip":"DEF"}').rstrip(b"=").decode()
    return {
        "flipped protected": {**env, "protected": _flip(env["protected"], 5)},
        "flipped iv": {**env, "iv": _flip(env["iv"])},
        "flipped ciphertext": {**env, "ciphertext": _flip(env["ciphertext"], 3)},
        "flipped last block": {**env, "ciphertext": _flip(env["ciphertext"], -1)},
        "flipped tag": {**env, "tag": _flip(env["tag"], 15)},
        "truncated tag": {**env, "tag": env["tag"][:-2]},
        "tag padded": {**env, "tag": env["tag"] + "=="},
        "padding inside": {**env, "ciphertext": env["ciphertext"][:4] + "=" + env["ciphertext"][5:]},
        "plus in base64": {**env, "iv": "+" + env["iv"][1:]},
        "whitespace in base64": {**env, "ciphertext": env["ciphertext"][:4] + " " + env["ciphertext"][4:]},
        "impossible length": {**env, "ciphertext": env["ciphertext"] + "A"},
        "other alg": {**env, "protected": other_alg},
        "other enc": {**env, "protected": other_enc},
        "zip": {**env, "protected": with_zip},
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
    for bad in ("a.b.c.d.e", "a..b.c", "a..b.c.d.e", "", "a....", 5):
        with pytest.raises(ha.EncryptionError):
            jwe.from_compact(bad)  # type: ignore[arg-type]
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


@pytest.mark.parametrize("size", [384 * 1024 - 17, 384 * 1024, 1024 * 1024 + 5, 3 * 1024 * 1024])
def test_large_payloads_round_trip_and_tampering_anywhere_is_caught(size: int) -> None:
    """Large ciphertexts are opened step by step with the MAC on a helper thread: same results, same error."""
    payload = os.urandom(size)
    env = jwe.encrypt(payload, KEY)
    assert len(env["ciphertext"]) >= jwe._PIPELINE_MIN or size < 384 * 1024
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

    payload = os.urandom(jwe._PIPELINE_MIN * 2)
    env = jwe.encrypt(payload, KEY)
    assert jwe.decrypt(env, KEY) == payload  # the parent's helper thread now exists
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_decrypt_in_child, args=(env, len(payload)))
    child.start()
    child.join(30)
    assert child.exitcode == 0


def _decrypt_in_child(env: dict[str, str], size: int) -> None:
    assert len(jwe.decrypt(env, KEY)) == size
