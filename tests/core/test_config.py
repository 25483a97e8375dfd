"""Input checks: path segments, header values, base URLs."""

from __future__ import annotations

import pytest

from health_async._config import check_header_value, normalize_base_url, path_segment
from health_async.errors import InvalidRequest


@pytest.mark.parametrize(
    "value",
    [
        "",
        ".",
        "..",
        "a/b",
        "../admin",
        "a\\b",
        "a?b",
        "a#b",
        "a b",
        "a\tb",
        "a\r\nX-Evil: 1",
        "a\x00",
        "\x7f",
    ],
)
def test_unsafe_path_segments_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="document_id") as info:
        path_segment("document_id", value)
    if len(value) > 2:
        assert value not in str(info.value)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("doc-000123", "doc-000123"),
        ("a%2Fb", "a%252Fb"),
        ("a:b@c", "a%3Ab%40c"),
        ("é", "%C3%A9"),
        ("3f2b8c1e-1111-4a4a-9b9b-123456789abc", "3f2b8c1e-1111-4a4a-9b9b-123456789abc"),
    ],
)
def test_safe_values_are_encoded_into_one_segment(value: str, encoded: str) -> None:
    assert path_segment("oid", value) == encoded
    assert "/" not in path_segment("oid", value)


def test_path_segment_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        path_segment("oid", 123)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["s3cr3t\r\nX-Injected: 1", "s3cr3t\n", "s3\x00cr3t", ""])
def test_header_values_with_control_characters_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="token") as info:
        check_header_value("token", value)
    assert "s3cr3t" not in str(info.value) and "Injected" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://api.eka.care", True),
        ("https://api.eka.care/", True),
        ("http://127.0.0.1:8080", True),
        ("http://localhost:1", True),
        ("http://[::1]:80", True),
        ("http://api.eka.care", False),
        ("http://10.0.0.5", False),
        ("ftp://api.eka.care", False),
        ("https://user:pw@api.eka.care", False),
        ("https://api.eka.care?x=1", False),
        ("", False),
        ("api.eka.care", False),
    ],
)
def test_base_url_rules(url: str, ok: bool) -> None:
    if ok:
        assert not normalize_base_url(url).endswith("/")
    else:
        with pytest.raises(ValueError, match="base_url"):
            normalize_base_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://[bad",  # urlsplit: unclosed IPv6 bracket
        "https://[not-an-ip]/x",  # urlsplit: a bracketed host that is no IP address
        "https://ex\uff03ample.com/x",  # urlsplit: a fullwidth '#', unsafe under NFKC
        "https://ex\u00e9.com/x",  # non-ASCII: yarl (encoded=True) cannot send it
        "https://h\udcff.com/x",  # a lone surrogate
        "https://a..b/x",  # an empty label: the resolver's idna codec fails
        "https://.",
        "https://" + "a" * 64 + ".com/x",  # a label over 63 characters
        "https://" + ".".join(["a" * 63] * 4) + "/x",  # 255 characters in all
    ],
)
def test_base_url_host_must_be_an_ip_or_an_encodable_name(url: str) -> None:
    with pytest.raises(InvalidRequest, match=r"^base_url ") as info:
        normalize_base_url(url)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    with pytest.raises(InvalidRequest, match=r"^proxy "):
        normalize_base_url(url, allow_insecure_http=True, name="proxy")


@pytest.mark.parametrize(
    "url",
    [
        "https://xn--ex-bma.com",  # an international name, in its IDNA form
        "https://" + ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61]),  # 253 characters
        "https://api.eka.care./",  # a fully qualified name (trailing dot)
        "https://[2001:db8::1]:8443",
        "https://192.0.2.1",
        "https://under_score.example",
    ],
)
def test_base_url_hosts_that_are_fine(url: str) -> None:
    assert normalize_base_url(url) == url.rstrip("/")


def test_insecure_http_needs_an_explicit_flag() -> None:
    assert normalize_base_url("http://api.example", allow_insecure_http=True) == "http://api.example"
