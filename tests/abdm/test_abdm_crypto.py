"""ABDM's ECDH encryption against the vendor's own implementation (``abdm-ecdh``), both ways, both key encodings."""

from __future__ import annotations

import base64
import logging
import os

import abdm_ecdh
import attrs
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat
from hypothesis import given, settings
from hypothesis import strategies as st

from health_async import abdm_crypto
from health_async.abdm_crypto import KeyMaterial, N
from health_async.errors import EncryptionError, InvalidArgumentType, InvalidRequest

BUNDLE = '{"resourceType": "Bundle", "entry": [{"resource": {"resourceType": "Observation", "value": "13.5"}}]}'


def _vendor_public(material: abdm_ecdh.KeyMaterial, x509: bool) -> str:
    return str(material.x509_public_key if x509 else material.public_key)


@pytest.mark.parametrize("their_x509", [False, True], ids=["their point", "their x509"])
@pytest.mark.parametrize("our_x509", [False, True], ids=["our point", "our x509"])
def test_ours_opens_with_theirs_and_theirs_with_ours(our_x509: bool, their_x509: bool) -> None:
    ours, theirs = KeyMaterial.generate(), abdm_ecdh.generate_key_material()
    our_public = ours.x509_public_key if our_x509 else ours.public_key
    # we are the HIP (sender), they the HIU (requester)
    sent = ours.encrypt(BUNDLE, peer_public_key=_vendor_public(theirs, their_x509), peer_nonce=theirs.nonce)
    opened = abdm_ecdh.decrypt(sent, ours.nonce, theirs.nonce, theirs.private_key, our_public)
    assert opened.decrypted_data == BUNDLE
    # they are the sender, we the requester
    theirs_sent = abdm_ecdh.encrypt(BUNDLE, theirs.nonce, ours.nonce, theirs.private_key, our_public)
    got = ours.decrypt(
        theirs_sent.encrypted_data, peer_public_key=_vendor_public(theirs, their_x509), peer_nonce=theirs.nonce
    )
    assert got == BUNDLE.encode()


def test_our_keys_are_written_as_the_vendor_writes_them() -> None:
    ours, theirs = KeyMaterial.generate(), abdm_ecdh.generate_key_material()
    ours_der, theirs_der = base64.b64decode(ours.x509_public_key), base64.b64decode(theirs.x509_public_key)
    assert ours_der[:-65] == theirs_der[:-65]  # the same explicit-parameter SubjectPublicKeyInfo
    assert ours_der[-65:] == base64.b64decode(ours.public_key) and ours_der[-65] == 4
    assert len(base64.b64decode(ours.nonce)) == 32
    # our private key, given to the vendor's package, works there too (Java BigInteger bytes)
    other = abdm_ecdh.generate_key_material()
    sent = abdm_ecdh.encrypt("x", ours.nonce, other.nonce, ours.private_key, other.public_key)
    opened = abdm_ecdh.decrypt(sent.encrypted_data, ours.nonce, other.nonce, other.private_key, ours.public_key)
    assert opened.decrypted_data == "x"


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=2**128, max_value=N - 2**128))
def test_a_foreign_private_key_gives_the_vendors_result(scalar: int) -> None:
    # any scalar another library could hold: through the equal X25519 scalar, the same shared secret
    peer = abdm_ecdh.generate_key_material()
    raw = scalar.to_bytes((scalar.bit_length() + 8) // 8, "big")
    foreign = abdm_ecdh.KeyMaterial(base64.b64encode(raw).decode(), "", "", base64.b64encode(bytes(32)).decode())
    ours = KeyMaterial.from_private_key(foreign.private_key, foreign.nonce)
    assert KeyMaterial.from_private_key(scalar, foreign.nonce).public_key == ours.public_key
    sent = ours.encrypt("foreign", peer_public_key=peer.public_key, peer_nonce=peer.nonce)
    expected = abdm_ecdh.encrypt("foreign", foreign.nonce, peer.nonce, foreign.private_key, peer.public_key)
    assert sent == expected.encrypted_data  # byte for byte the vendor's ciphertext


def test_a_tiny_foreign_scalar_is_refused_rather_than_used_with_python_arithmetic() -> None:
    for scalar in (8, 2**100, 8 * 12345, N - 8):
        with pytest.raises(InvalidRequest, match="generate a new key"):
            KeyMaterial.from_private_key(scalar)


def test_a_key_kept_and_loaded_again_is_the_same_key() -> None:
    ours, peer = KeyMaterial.generate(), abdm_ecdh.generate_key_material()
    again = KeyMaterial.from_private_key(ours.private_key, ours.nonce)
    assert (again.public_key, again.x509_public_key, again.nonce) == (ours.public_key, ours.x509_public_key, ours.nonce)
    one = ours.encrypt("same", peer_public_key=peer.public_key, peer_nonce=peer.nonce)
    assert again.encrypt("same", peer_public_key=peer.public_key, peer_nonce=peer.nonce) == one


def test_wrong_keys_and_changed_data_are_typed_errors_that_show_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ours, theirs, stranger = KeyMaterial.generate(), KeyMaterial.generate(), KeyMaterial.generate()
    sent = ours.encrypt(BUNDLE, peer_public_key=theirs.public_key, peer_nonce=theirs.nonce)
    with pytest.raises(EncryptionError) as info:
        stranger.decrypt(sent, peer_public_key=ours.public_key, peer_nonce=ours.nonce)
    changed = base64.b64encode(bytes([base64.b64decode(sent)[0] ^ 1]) + base64.b64decode(sent)[1:]).decode()
    with pytest.raises(EncryptionError):
        theirs.decrypt(changed, peer_public_key=ours.public_key, peer_nonce=ours.nonce)
    assert theirs.decrypt(sent, peer_public_key=ours.public_key, peer_nonce=ours.nonce) == BUNDLE.encode()
    for shown in (str(info.value), repr(ours), caplog.text):
        assert ours.private_key not in shown and "Observation" not in shown and sent not in shown
    assert "private_key=<hidden>" in repr(ours)


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"peer_public_key": "not base64!"}, "not base64"),
        ({"peer_public_key": base64.b64encode(b"\x04" + bytes(64)).decode()}, "not a point"),
        ({"peer_public_key": base64.b64encode(bytes(40)).decode()}, "X.509 key of ABDM's curve"),
        ({"peer_nonce": base64.b64encode(bytes(16)).decode()}, "32 bytes"),
        ({"peer_public_key": 7}, "must be a base64 str"),
    ],
)
def test_bad_keys_and_nonces_are_refused_naming_the_rule(kwargs: dict[str, object], rule: str) -> None:
    ours, theirs = KeyMaterial.generate(), KeyMaterial.generate()
    options: dict[str, object] = {"peer_public_key": theirs.public_key, "peer_nonce": theirs.nonce, **kwargs}
    with pytest.raises(InvalidRequest, match=rule):
        ours.encrypt("x", **options)  # type: ignore[arg-type]


def test_a_private_key_out_of_range_is_refused() -> None:
    for bad in (0, -5, 2**255, base64.b64encode(bytes(32)).decode()):
        with pytest.raises(InvalidRequest):
            KeyMaterial.from_private_key(bad)


def test_the_module_functions_are_the_two_sides() -> None:
    hip, hiu = KeyMaterial.generate(), KeyMaterial.generate()
    sent = abdm_crypto.encrypt(BUNDLE, hip, requester_public_key=hiu.x509_public_key, requester_nonce=hiu.nonce)
    assert abdm_crypto.decrypt(sent, hiu, sender_public_key=hip.public_key, sender_nonce=hip.nonce) == BUNDLE.encode()


def test_json_escaped_base64_from_a_sender_still_opens() -> None:
    ours, theirs = KeyMaterial.generate(), KeyMaterial.generate()
    sent = ours.encrypt(BUNDLE * 20, peer_public_key=theirs.public_key, peer_nonce=theirs.nonce)
    escaped = sent.replace("+", "\\u002B").replace("/", "\\u002F").replace("=", "\\u003D")
    public = ours.public_key.replace("+", "\\u002B").replace("/", "\\u002F").replace("=", "\\u003D")
    assert theirs.decrypt(escaped, peer_public_key=public, peer_nonce=ours.nonce) == (BUNDLE * 20).encode()


@pytest.mark.parametrize("size", [0, 4, 8, 16, 20, 31, 33, 64])
def test_a_kept_nonce_of_another_length_than_32_bytes_is_refused_when_loaded(size: int) -> None:
    ours = KeyMaterial.generate()
    nonce = base64.b64encode(bytes(range(size))).decode()
    with pytest.raises(InvalidRequest, match="nonce must be 32 bytes") as info:
        KeyMaterial.from_private_key(ours.private_key, nonce)
    assert ours.private_key not in str(info.value) and (not nonce or nonce not in str(info.value))


def test_a_nonce_changed_by_hand_is_refused_rather_than_passed_to_aes_gcm() -> None:
    ours, theirs = KeyMaterial.generate(), KeyMaterial.generate()
    short = attrs.evolve(ours, nonce=base64.b64encode(bytes(4)).decode())
    with pytest.raises(InvalidRequest, match="nonce must be 32 bytes"):
        short.encrypt("x", peer_public_key=theirs.public_key, peer_nonce=base64.b64encode(bytes(4)).decode())
    with pytest.raises(InvalidRequest, match="nonce must be 32 bytes"):
        short.decrypt(base64.b64encode(bytes(40)).decode(), peer_public_key=theirs.public_key, peer_nonce="")


def test_the_helpers_refuse_wrong_types_with_typed_errors() -> None:
    hip, hiu = KeyMaterial.generate(), KeyMaterial.generate()
    with pytest.raises(InvalidArgumentType, match="plain must be bytes"):
        abdm_crypto.checksum("text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType, match="plain must be bytes"):
        abdm_crypto.checksum(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType, match="sent must be a str"):
        abdm_crypto.checksum_matches(None, b"")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType, match="plain must be bytes"):
        abdm_crypto.checksum_matches("0" * 32, "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType, match="requester must be a KeyMaterial"):
        abdm_crypto.decrypt("AAAA", None, sender_public_key=hip.public_key, sender_nonce=hip.nonce)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType, match="sender must be a KeyMaterial"):
        abdm_crypto.encrypt("x", "key", requester_public_key=hiu.public_key, requester_nonce=hiu.nonce)  # type: ignore[arg-type]


def test_the_checksums_take_any_bytes_like_plain_text() -> None:
    plain = BUNDLE.encode()
    expected = abdm_crypto.checksum(plain)
    assert abdm_crypto.checksum(bytearray(plain)) == expected
    assert abdm_crypto.checksum(memoryview(plain * 2)[::2]) == abdm_crypto.checksum(bytes(memoryview(plain * 2)[::2]))
    assert abdm_crypto.checksum_matches(expected.upper(), memoryview(plain))


def test_a_str_plaintext_that_is_not_utf8_is_refused() -> None:
    hip, hiu = KeyMaterial.generate(), KeyMaterial.generate()
    with pytest.raises(InvalidRequest, match="plaintext") as info:
        abdm_crypto.encrypt("ok \ud800", hip, requester_public_key=hiu.public_key, requester_nonce=hiu.nonce)
    assert not isinstance(info.value, UnicodeError) and "\ud800" not in str(info.value)


# ------------------------------------------------------------------ line-wrapped (MIME) base64, as the vendor reads it


def _wrapped(b64: str, newline: str = "\n") -> str:
    """``b64`` as MIME writes it (``base64.encodebytes``: a line break every 76 characters and at the end)."""
    return base64.encodebytes(base64.b64decode(b64)).decode().replace("\n", newline)


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_line_wrapped_keys_nonces_and_content_are_read_both_ways(newline: str) -> None:
    ours, theirs = KeyMaterial.generate(), abdm_ecdh.generate_key_material()
    assert "\n" in _wrapped(ours.x509_public_key, newline).rstrip()  # wrapped inside, not only at the end
    # they send to us, everything line-wrapped: their content, their nonce, their key in all its forms
    sent = abdm_ecdh.encrypt(BUNDLE * 20, theirs.nonce, ours.nonce, theirs.private_key, ours.public_key)
    content = _wrapped(sent.encrypted_data, newline)
    assert len(content.splitlines()) > 2
    for public in (theirs.public_key, theirs.x509_public_key):
        got = ours.decrypt(
            content, peer_public_key=_wrapped(public, newline), peer_nonce=_wrapped(theirs.nonce, newline)
        )
        assert got == (BUNDLE * 20).encode()
    # a kept private key and nonce, wrapped, load as the same key material
    again = KeyMaterial.from_private_key(_wrapped(ours.private_key, newline), _wrapped(ours.nonce, newline))
    assert (again.public_key, again.nonce) == (ours.public_key, ours.nonce)
    # we send to them, and they read our values wrapped the same way (their package drops the line breaks)
    mine = ours.encrypt(BUNDLE * 20, peer_public_key=theirs.x509_public_key, peer_nonce=theirs.nonce)
    opened = abdm_ecdh.decrypt(
        _wrapped(mine, newline),
        _wrapped(ours.nonce, newline),
        _wrapped(theirs.nonce, newline),
        _wrapped(theirs.private_key, newline),
        _wrapped(ours.x509_public_key, newline),
    )
    assert opened.decrypted_data == BUNDLE * 20


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET + "=\n\r \t*-_.é\x00", max_size=40))
def test_base64_we_accept_is_read_as_the_vendor_reads_it_and_what_it_refuses_we_refuse(text: str) -> None:
    try:
        theirs: bytes | None = base64.b64decode(text)  # what abdm-ecdh does with every base64 input
    except ValueError:  # binascii.Error is a ValueError
        theirs = None
    try:
        ours: bytes | None = abdm_crypto._b64decode("value", text)
    except InvalidRequest:
        ours = None
    if ours is not None:
        assert ours == theirs  # never another reading of the same text
    if theirs is None:
        assert ours is None  # what the vendor refuses, we refuse


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(["\n", "\r\n"]))
def test_any_mime_wrapped_value_reads_as_its_bytes(raw: bytes, newline: str) -> None:
    assert abdm_crypto._b64decode("value", base64.encodebytes(raw).decode().replace("\n", newline)) == raw


@pytest.mark.parametrize(
    "text",
    ["YWJj\n*ZGVm", "YQ==YQ==", "YQ==\n\nYQ==", "YWJjZA", "YW Jj\u00e9", "YWJj-_8="],
    ids=["junk", "after padding", "after padding, wrapped", "no padding", "non-ascii", "url-safe"],
)
def test_text_that_is_not_wrapped_base64_is_still_refused(text: str) -> None:
    ours = KeyMaterial.generate()
    with pytest.raises(InvalidRequest, match="not base64"):
        ours.decrypt(text, peer_public_key=ours.public_key, peer_nonce=ours.nonce)


# ------------------------------------------------------------------------------- a raw 32-byte X25519 public key


def _x25519_peer() -> tuple[str, str, str]:
    """A peer holding a ``cryptography`` X25519 key: its raw public key (base64), its private key as the vendor's
    package takes it (the clamped scalar as Java BigInteger bytes, base64), and a nonce."""
    key = X25519PrivateKey.generate()
    raw_public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    scalar = bytearray(key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()))
    scalar[0] &= 248
    scalar[31] = (scalar[31] & 127) | 64
    d = int.from_bytes(scalar, "little")
    java = d.to_bytes((d.bit_length() + 8) // 8, "big")
    nonce = base64.b64encode(os.urandom(32)).decode()
    return base64.b64encode(raw_public).decode(), base64.b64encode(java).decode(), nonce


def test_a_raw_x25519_public_key_is_the_peer_both_ways() -> None:
    raw_public, their_private, their_nonce = _x25519_peer()
    assert len(base64.b64decode(raw_public)) == 32
    ours = KeyMaterial.generate()
    # they (the vendor's package, with the X25519 key's scalar) send to us; we know them by their raw key
    sent = abdm_ecdh.encrypt(BUNDLE, their_nonce, ours.nonce, their_private, ours.x509_public_key)
    got = ours.decrypt(sent.encrypted_data, peer_public_key=raw_public, peer_nonce=their_nonce)
    assert got == BUNDLE.encode()
    # we send to their raw key, and they open it
    mine = ours.encrypt(BUNDLE, peer_public_key=raw_public, peer_nonce=their_nonce)
    opened = abdm_ecdh.decrypt(mine, ours.nonce, their_nonce, their_private, ours.public_key)
    assert opened.decrypted_data == BUNDLE
    # the raw key is the same peer as its ABDM point: the very same ciphertext
    point = KeyMaterial.from_private_key(their_private).public_key
    assert ours.encrypt(BUNDLE, peer_public_key=point, peer_nonce=their_nonce) == mine
    assert ours.encrypt(BUNDLE, peer_public_key=_wrapped(raw_public), peer_nonce=their_nonce) == mine


def _raw(u: int) -> str:
    return base64.b64encode(u.to_bytes(32, "little")).decode()


def _twist_u() -> int:
    u = 2
    while pow((u**3 + abdm_crypto.A * u * u + u) % abdm_crypto.P, (abdm_crypto.P - 1) // 2, abdm_crypto.P) == 1:
        u += 1
    return u


@pytest.mark.parametrize(
    ("u", "rule"),
    [
        (abdm_crypto.P, "not canonical"),
        (2**256 - 1, "not canonical"),
        (9 + 2**255, "not canonical"),  # the base point with the unused top bit set
        (_twist_u(), "twist"),
        (0, "small order"),
    ],
    ids=["p", "all ones", "top bit set", "twist", "zero"],
)
def test_a_raw_key_that_is_no_point_of_the_curve_is_refused(u: int, rule: str) -> None:
    ours, theirs = KeyMaterial.generate(), KeyMaterial.generate()
    with pytest.raises(InvalidRequest, match=rule):
        ours.encrypt("x", peer_public_key=_raw(u), peer_nonce=theirs.nonce)


# ----------------------------------------------------------------------------------- one key material, one message


def test_a_second_plaintext_under_the_same_key_and_iv_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    hip, hiu = KeyMaterial.generate(), abdm_ecdh.generate_key_material()
    first = hip.encrypt(BUNDLE, peer_public_key=hiu.public_key, peer_nonce=hiu.nonce)
    # the same plaintext again (a retry) is allowed: the very same ciphertext, nothing new disclosed
    assert hip.encrypt(BUNDLE.encode(), peer_public_key=hiu.x509_public_key, peer_nonce=hiu.nonce) == first
    for public in (hiu.public_key, hiu.x509_public_key, _wrapped(hiu.x509_public_key)):  # any spelling: one peer
        with pytest.raises(InvalidRequest, match="already encrypted another plaintext") as info:
            hip.encrypt("Observation: HIV positive", peer_public_key=public, peer_nonce=_wrapped(hiu.nonce))
        assert "HIV" not in str(info.value) and hip.private_key not in str(info.value)
    with pytest.raises(InvalidRequest, match="fresh key material"):
        abdm_crypto.encrypt("other", hip, requester_public_key=hiu.public_key, requester_nonce=hiu.nonce)
    assert "HIV" not in caplog.text
    # the first message still opens, and was the only one sent under that key and IV
    opened = abdm_ecdh.decrypt(first, hip.nonce, hiu.nonce, hiu.private_key, hip.public_key)
    assert opened.decrypted_data == BUNDLE
    # another peer nonce or another peer is another key and IV: allowed
    other = abdm_ecdh.generate_key_material()
    hip.encrypt("other", peer_public_key=hiu.public_key, peer_nonce=other.nonce)
    hip.encrypt("other", peer_public_key=other.public_key, peer_nonce=hiu.nonce)
    # decrypting is never limited
    assert (
        hip.decrypt(
            abdm_ecdh.encrypt("a", hiu.nonce, hip.nonce, hiu.private_key, hip.public_key).encrypted_data,
            peer_public_key=hiu.public_key,
            peer_nonce=hiu.nonce,
        )
        == b"a"
    )


def test_fresh_key_material_per_message_is_never_refused() -> None:
    hiu = abdm_ecdh.generate_key_material()
    for text in ("one", "two", "three"):
        sender = KeyMaterial.generate()
        sent = sender.encrypt(text, peer_public_key=hiu.x509_public_key, peer_nonce=hiu.nonce)
        assert (
            abdm_ecdh.decrypt(sent, sender.nonce, hiu.nonce, hiu.private_key, sender.public_key).decrypted_data == text
        )
