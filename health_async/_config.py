"""Input checks shared by the client and the resources: header values, path segments, base URLs, and the
``NOT_GIVEN`` sentinel for per-call overrides."""

from __future__ import annotations

import enum
import ipaddress
import math
import re
from typing import Final, Literal, TypeVar
from urllib.parse import quote, urlsplit

from .errors import InvalidArgumentType, InvalidRequest

__all__ = ["NOT_GIVEN", "NotGiven", "check_header_value", "normalize_base_url", "path_segment"]

T = TypeVar("T")


class NotGiven(enum.Enum):
    """Sentinel type: the argument was left out, so the client's default applies (``None`` can then mean
    "disable", as in ``timeout=None``)."""

    NOT_GIVEN = "NOT_GIVEN"

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Final = NotGiven.NOT_GIVEN
NotGivenType = Literal[NotGiven.NOT_GIVEN]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_header_value(name: str, value: str) -> str:
    """Refuse a header value that could split or smuggle headers. The message never shows the value."""
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{name} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidRequest(f"{name} must not be empty")
    if _CONTROL.search(value):
        raise InvalidRequest(f"{name} must not contain control characters (CR, LF, NUL, ...)")
    return value


def optional_header_value(name: str, value: str | None) -> str | None:
    """:func:`check_header_value` for optional values: None stays None (the header is then not sent)."""
    return None if value is None else check_header_value(name, value)


def check_seconds(name: str, value: float | None) -> float | None:
    """A time limit in seconds: a finite number > 0, or ``None`` for no limit; else a typed error naming ``name``
    (``nan`` would disable the limit silently, ``inf`` overflows the event loop's timer)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentType(f"{name} must be a number of seconds or None, not {type(value).__name__}")
    seconds = finite(value)
    if seconds is None or seconds <= 0:
        raise InvalidRequest(f"{name} must be a finite number of seconds > 0, or None for no limit")
    return seconds


def check_rate(value: float) -> float:
    """A ``rate_limit``: a finite number > 0 of requests per second, else :class:`InvalidRequest` (``nan`` would
    let everything through, ``inf`` overflows the slot arithmetic). The one rule of the client's own rate, the
    ingest's :class:`~health_async.ingest.RateLimiter` and ``LocalEngine(rate_limit=)``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InvalidRequest("rate_limit must be a finite number > 0 of requests per second")
    return value


def finite(value: object) -> float | None:
    """``value`` as a finite float; ``None`` for anything else: not a number (a ``bool`` is not one), ``nan``,
    an infinity, or an ``int`` too large for a float (``10**400``: no ``OverflowError`` escapes)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def check_finite(value: object, field: str) -> None:
    """Refuse a non-finite float in a JSON value the caller gives (NaN, an infinity: JSON has neither; an encoder
    would send ``null`` or a non-standard token). Used by patients' ``extras`` and cases' ``partner_meta``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequest(f"{field} numbers must be finite")


#: The longest id accepted in a path: the service's ids are UUIDs and OIDs; a longer value is a mistake.
MAX_SEGMENT = 256

_UNSAFE_SEGMENT = re.compile(r"[\x00-\x20\x7f/\\?#]")
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*")  # unreserved: needs no encoding (the common case)


def path_segment(name: str, value: str) -> str:
    """Percent-encode ``value`` into exactly one URL path segment, or refuse it.

    Refused with :class:`~health_async.errors.InvalidRequest`, a ``ValueError`` (the value is not shown):
    empty values, values longer than :data:`MAX_SEGMENT` characters, ``.`` and ``..``, and any value
    containing ``/``, ``\\``, ``?``, ``#``, whitespace or control characters (non-strings raise ``TypeError``).
    Ids of this service are opaque tokens (UUIDs, OIDs) that never contain these; encoding them instead would
    let a server or proxy that decodes ``%2F`` route the request elsewhere. Everything else (``%``, ``:``,
    ``@``, non-ASCII, ...) is percent-encoded, so the request can only ever reach the one intended path.
    """
    if type(value) is str and len(value) <= MAX_SEGMENT and _PLAIN_SEGMENT.fullmatch(value):
        return value
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{name} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidRequest(f"{name} must not be empty")
    if len(value) > MAX_SEGMENT:
        raise InvalidRequest(f"{name} must be at most {MAX_SEGMENT} characters (ids are UUIDs and OIDs)")
    if value in (".", "..") or _UNSAFE_SEGMENT.search(value):
        raise InvalidRequest(
            f"{name} must be a single path segment: no '/', '\\', '?', '#', '..', spaces or control characters"
        )
    try:
        return quote(value, safe="")
    except UnicodeEncodeError:  # a lone surrogate (a name decoded with surrogateescape): no URL can carry it
        raise InvalidRequest(f"{name} must be valid Unicode text") from None


def normalize_base_url(url: str, *, allow_insecure_http: bool = False, name: str = "base_url") -> str:
    """Check and normalise a base URL (no trailing slash). Plain ``http://`` is allowed only to a loopback
    host unless ``allow_insecure_http`` is set: tokens and health data must not cross a network in clear.

    Refused with :class:`~health_async.errors.InvalidRequest` (a ``ValueError``) when the client is built, not at
    the first request: a scheme other than http(s), no host or one that is neither an IP address nor an ASCII
    (IDNA-encodable) host name, an invalid port, credentials, a query or fragment. The message never shows the URL.
    """
    if not isinstance(url, str) or not url:
        raise InvalidRequest(f"{name} must be a non-empty URL string")
    if _CONTROL.search(url) or any(ch.isspace() for ch in url):
        raise InvalidRequest(f"{name} must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed '[', a bracketed host that is no IP address, characters unsafe under NFKC
        raise InvalidRequest(f"{name} is not a valid URL (its host part cannot be read)") from None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequest(f"{name} must be an http(s) URL with a host, like https://api.eka.care")
    try:  # an IP literal, or a name the resolver can encode: ASCII labels of 1 to 63 characters, 253 in all
        ipaddress.ip_address(host)
    except ValueError:
        try:
            host_ok = host.isascii() and len(host.rstrip(".")) <= 253 and bool(host.encode("idna"))
        except UnicodeError:
            host_ok = False
        if not host_ok:
            raise InvalidRequest(
                f"{name} has an invalid host name: it must be an IP address, or ASCII labels of 1 to 63 characters "
                "(253 in all; write an international name in its xn-- form)"
            ) from None
    try:
        port = parts.port
    except ValueError:
        raise InvalidRequest(f"{name} has an invalid port (it must be a number from 1 to 65535)") from None
    if port == 0:
        raise InvalidRequest(f"{name} has an invalid port (it must be a number from 1 to 65535)")
    if name == "base_url" and (parts.query or parts.fragment or parts.username or parts.password):
        raise InvalidRequest(f"{name} must not contain credentials, a query or a fragment")
    if parts.scheme == "http" and not allow_insecure_http and not _is_loopback(host):
        raise InvalidRequest(
            f"{name} uses plain http:// to a non-loopback host; tokens and health data would travel "
            "unencrypted. Use https://, or pass allow_insecure_http=True if you really mean it."
        )
    return url.rstrip("/")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def pick(value: T | NotGiven, default: T) -> T:
    """The per-call value if given, else the client's default."""
    return default if isinstance(value, NotGiven) else value
