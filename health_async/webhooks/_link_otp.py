"""The pending links of a patient's own search: the :class:`LinkOtpStore` protocol, the bounded
:class:`InMemoryLinkOtpStore`, and the OTP itself (:func:`new_otp`).

Between the discovery and the link confirmation the ABDM receivers keep two kinds of entry, each a
:class:`PendingLink` under a key they choose: the patient a discovery offered (no OTP), so that a link request can
only name what was offered; and the care contexts a link request chose, with the OTP sent for them. The store
keeps **only a hash of the OTP**, checks it in constant time, counts the wrong tries, and forgets the entry on its
first right use, once the tries are spent, or when it expires.

An entry may count its wrong tries on another (``put(..., tries_key=...)``): every link request of one discovery
counts on the discovery's offer, so that the tries are bounded per discovery, not per link request. Once they are
spent the offer is *locked*: it stays (so ``get`` still finds it) until it expires, but no entry can count on it
any more (``put`` refuses, ``consume`` answers ``LOCKED``).

Protocol change (issue 42): ``put`` takes ``tries_key=`` and returns the entry's *version* (a fresh token, or
``None`` when refused), and ``discard`` takes ``only=``, that version: a request deletes only what it put itself,
never an entry another request put under the same key meanwhile. A store written for the earlier protocol (``put``
returning ``None``) has every link request refused; add the two parameters. Each method stays one atomic step on
the server: in Redis, one Lua script each (``put``: check the counting entry is there and not locked, extend its
``PX`` to cover the new entry's, ``DEL`` + ``HSET`` + ``PEXPIRE`` the new one with its version; ``consume``: read
the entry and its counting entry, compare, ``HINCRBY`` the tries there, and on the last ``DEL`` the entry and mark
the counting one locked; ``discard``: ``DEL`` only when the stored version is ``only``). In a Redis Cluster the two
keys of one discovery must share a slot (a hash tag).

Judgement call (the hash): HMAC-SHA256 under a 32-byte key drawn with :mod:`secrets` when the store is made, and
known only to it. A 6-digit OTP has a million values: a plain hash is reversed at once by trying them all, whereas
an HMAC under a key that is not stored beside the hashes tells nothing; a slow hash (scrypt) would add nothing
against that and cost every check. A store shared by several workers (Redis) must share one key, kept in the
workers' configuration, never in Redis.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

import attrs

from ..errors import InvalidRequest
from ..models.abdm._hospital import CareContext

__all__ = [
    "DEFAULT_MAX_LINKS",
    "OTP_DIGITS",
    "InMemoryLinkOtpStore",
    "LinkOtpStore",
    "OtpCheck",
    "OtpOutcome",
    "PendingLink",
    "new_otp",
]

#: Most pending links an :class:`InMemoryLinkOtpStore` holds by default.
DEFAULT_MAX_LINKS: Final = 10_000
#: The OTP's length: six digits, as ABDM's own OTPs.
OTP_DIGITS: Final = 6


def new_otp() -> str:
    """A fresh OTP: :data:`OTP_DIGITS` decimal digits from :mod:`secrets` (leading zeros kept)."""
    return f"{secrets.randbelow(10**OTP_DIGITS):0{OTP_DIGITS}d}"


@attrs.frozen
class PendingLink:
    """What the receivers keep between the steps of a patient's own search (see the module). Only the ids of the
    exchange and the number of care contexts appear in a ``repr``."""

    #: The facility searched (the webhook's ``hip_id``).
    hip_id: str | None
    #: Your reference of the patient (the discovery answer's ``ref_num``).
    reference: str = attrs.field(repr=False)
    #: The patient as the PHR app shows it.
    display: str = attrs.field(repr=False)
    #: The care contexts offered (a discovery) or chosen (a link request).
    care_contexts: tuple[CareContext, ...] = attrs.field(repr=lambda v: f"<{len(v)}>")
    #: Where the OTP goes.
    mobile: str | None = attrs.field(default=None, repr=False)
    #: The patient's verified ABHA address (from the discovery).
    abha_address: str | None = attrs.field(default=None, repr=False)
    #: The patient's id in the service (hidden from ``repr``).
    oid: str | None = attrs.field(default=None, repr=False)
    #: The hospital's own id of the patient (hidden from ``repr``).
    partner_patient_id: str | None = attrs.field(default=None, repr=False)


class OtpOutcome(enum.Enum):
    """What :meth:`LinkOtpStore.consume` found."""

    #: The OTP is right: the entry is returned and forgotten (one use).
    MATCHED = "matched"
    #: The OTP is wrong; tries are left.
    WRONG = "wrong"
    #: The OTP is wrong and was the last try allowed (the entry is forgotten and its counting entry locked), or
    #: the entry's counting entry was locked already (the entry is forgotten, the OTP not checked).
    LOCKED = "locked"
    #: The entry had expired (forgotten now).
    EXPIRED = "expired"
    #: No entry under the key (never made, used, locked or evicted), one without an OTP, or one whose counting
    #: entry (``tries_key``) is gone.
    UNKNOWN = "unknown"


@attrs.frozen
class OtpCheck:
    """The outcome of one :meth:`LinkOtpStore.consume`: the link when :attr:`outcome` is ``MATCHED``."""

    outcome: OtpOutcome
    link: PendingLink | None = None


@runtime_checkable
class LinkOtpStore(Protocol):
    """Where the ABDM receivers keep pending links and their OTPs (see the module).

    ``async`` on purpose, as :class:`~health_async.webhooks.SeenStore`: a store several workers share (Redis: the
    entry a hash with ``PX`` expiry, the check a Lua script holding the HMAC comparison's result and the ``HINCRBY``
    of the tries, so that two deliveries cannot both use one OTP) does I/O. Each method must be atomic for one key.
    """

    async def put(
        self, key: str, link: PendingLink, *, otp: str | None, ttl: float, tries_key: str | None = None
    ) -> str | None:
        """Keep ``link`` under ``key`` for ``ttl`` seconds with a hash of ``otp`` (``None``: no OTP), replacing
        what was there (its tries included), and return the entry's version: a fresh, unguessable token that
        :meth:`discard` takes as ``only=``. Never keep ``otp`` itself.

        With ``tries_key``, the entry's wrong tries are counted on the entry under ``tries_key`` (shared by every
        entry naming it), which is made to live at least as long as this one; when there is no live entry there,
        or it is locked, nothing is kept and ``None`` is returned."""
        ...

    async def get(self, key: str) -> PendingLink | None:
        """The link under ``key`` (locked or not), or ``None`` when there is none or it has expired."""
        ...

    async def consume(self, key: str, otp: str, *, max_tries: int) -> OtpCheck:
        """Check ``otp`` against the hash under ``key`` in constant time: right, forget the entry and return it;
        wrong, count the try on the entry (or its ``tries_key``'s), and at the ``max_tries``-th forget the entry
        and lock the counting one; see :class:`OtpOutcome`."""
        ...

    async def discard(self, key: str, *, only: str | None = None) -> None:
        """Forget ``key`` (nothing happens when it is not there); with ``only``, only when the entry there is the
        version :meth:`put` returned (not one put since)."""
        ...


@attrs.define
class _Entry:
    link: PendingLink
    digest: bytes | None
    expires_at: float
    version: str
    tries_key: str | None = None
    tries: int = 0
    locked: bool = False


class InMemoryLinkOtpStore:
    """The default :class:`LinkOtpStore`: a dict in this process only, bounded in time and size.

    An entry lives ``ttl`` seconds by ``clock``; expired entries are dropped as they are met, and when
    ``max_entries`` are held the oldest is dropped to make room (judgement call: a flood of discoveries then
    ends the oldest pending link, whose patient can start again, rather than refusing new ones).

    Args:
        max_entries: most entries held (default :data:`DEFAULT_MAX_LINKS`).
        clock: the current time in seconds, for tests; default :func:`time.monotonic`.
    """

    def __init__(self, *, max_entries: int = DEFAULT_MAX_LINKS, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise InvalidRequest("max_entries must be a positive number of entries")
        if not callable(clock):
            raise InvalidRequest("clock must be a function returning the time in seconds")
        self._max, self._clock = max_entries, clock
        self._key = secrets.token_bytes(32)  # never leaves this object
        self._entries: dict[str, _Entry] = {}  # oldest first

    def __repr__(self) -> str:
        return f"InMemoryLinkOtpStore(entries={len(self._entries)})"

    def __len__(self) -> int:
        """Entries held, expired ones not yet dropped included."""
        return len(self._entries)

    def _digest(self, otp: str) -> bytes:
        return hmac.new(self._key, otp.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()

    def _live(self, key: str) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at <= self._clock():
            del self._entries[key]
            return None
        return entry

    async def put(
        self, key: str, link: PendingLink, *, otp: str | None, ttl: float, tries_key: str | None = None
    ) -> str | None:
        """Keep ``link`` (with the HMAC of ``otp`` only) for ``ttl`` seconds; see :meth:`LinkOtpStore.put`."""
        expires_at = self._clock() + ttl
        if tries_key is not None:
            counter = self._live(tries_key)
            if counter is None or counter.locked or tries_key == key:
                return None
            counter.expires_at = max(counter.expires_at, expires_at)
            self._entries[tries_key] = self._entries.pop(tries_key)  # in use: the newest, the last evicted
        self._entries.pop(key, None)  # a replaced entry becomes the newest
        while len(self._entries) >= self._max:
            del self._entries[next(iter(self._entries))]
        digest = None if otp is None else self._digest(otp)
        version = secrets.token_urlsafe(12)
        self._entries[key] = _Entry(link, digest, expires_at, version, tries_key)
        return version

    async def get(self, key: str) -> PendingLink | None:
        """The live link under ``key``, or ``None``."""
        entry = self._live(key)
        return None if entry is None else entry.link

    async def consume(self, key: str, otp: str, *, max_tries: int) -> OtpCheck:
        """See :meth:`LinkOtpStore.consume`."""
        entry = self._entries.get(key)
        if entry is None or entry.digest is None:
            return OtpCheck(OtpOutcome.UNKNOWN)
        if entry.expires_at <= self._clock():
            del self._entries[key]
            return OtpCheck(OtpOutcome.EXPIRED)
        counter = entry if entry.tries_key is None else self._live(entry.tries_key)
        if counter is None or counter.locked:
            del self._entries[key]
            return OtpCheck(OtpOutcome.UNKNOWN if counter is None else OtpOutcome.LOCKED)
        if hmac.compare_digest(entry.digest, self._digest(otp)):
            del self._entries[key]
            return OtpCheck(OtpOutcome.MATCHED, entry.link)
        counter.tries += 1
        if counter.tries >= max_tries:
            del self._entries[key]
            counter.locked = True  # the entry itself is gone; a counting entry stays, locked, until it expires
            return OtpCheck(OtpOutcome.LOCKED)
        return OtpCheck(OtpOutcome.WRONG)

    async def discard(self, key: str, *, only: str | None = None) -> None:
        """Forget ``key`` (with ``only``: only that version of it)."""
        entry = self._entries.get(key)
        if entry is not None and (only is None or hmac.compare_digest(entry.version, only)):
            del self._entries[key]
