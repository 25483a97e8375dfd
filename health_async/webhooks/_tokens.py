"""Scan & Share tokens: :class:`TokenCounter`, the token number of each patient at a counter, per day."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Final

from ..errors import InvalidRequest
from ..models.abdm._events import ProfileShare

__all__ = ["IST", "TokenCounter"]

#: India Standard Time (UTC+05:30): the day of a :class:`TokenCounter` by default.
IST: Final = dt.timezone(dt.timedelta(hours=5, minutes=30), "IST")


_TOKEN_TEXT: Final = re.compile(r"[^\x00-\x1f\x7f]+")  # no control characters


_Identity = tuple[str, str]


class TokenCounter:
    """Hands out a counter's tokens in arrival order, one per person per counter per day: an in-memory
    ``on_profile_share`` callback for :func:`health_async.webhooks.abdm_handler`::

        counter = TokenCounter(prefix="A-")
        handler = webhooks.abdm_handler(secret, client=client, on_profile_share=counter)

    ``await counter(share)`` (or :meth:`token_for`) gives the :class:`~health_async.models.ProfileShare` its token:
    ``f"{prefix}{n}"``, ``n`` counting from ``first`` at each counter (the share's ``hip_id`` and ``hip_code``)
    each day.

    **A repeated scan** is recognised, and gets the token it got before, when the same person scans the same
    counter again the same day. The same person is the same ABHA address (compared without case or surrounding
    space) or the same ABHA number (digits only): a person with two ABHA addresses and one ABHA number is one
    person. The same share delivered again (the same request id) gets its token again too, even without either.
    Judgement calls: the Eka user id (``oid``) is not a person (a family may share one app account), so it is not
    compared; a share carrying neither an ABHA address, an ABHA number nor a request id seen before gets a new
    token; another counter, or the next day, gives a new token.

    **The day** is the calendar day in ``tz`` (default :data:`IST`); at its change every counter starts again from
    ``first`` and the day's memory is dropped (so it holds one day of shares at most). ``clock`` gives the current
    time (an aware datetime; default now), for tests.

    In this process only, and lost on restart: a hospital running several processes, or wanting tokens to survive
    a restart, keeps the count in its database instead (this class is the rule written small). Safe under asyncio
    (nothing is awaited between reading and writing the count). Holds no personal data in its ``repr``.

    Raises :class:`~health_async.errors.InvalidRequest` for a ``prefix`` that is not a str of at most 16
    characters without control characters, a ``first`` that is not a non-negative int, or a ``tz`` that is not a
    ``datetime.tzinfo``.
    """

    def __init__(
        self,
        *,
        prefix: str = "",
        first: int = 1,
        tz: dt.tzinfo = IST,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        if not isinstance(prefix, str) or len(prefix) > 16 or (prefix and not _TOKEN_TEXT.fullmatch(prefix)):
            raise InvalidRequest("prefix must be a str of at most 16 characters without control characters")
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise InvalidRequest("first must be a non-negative int")
        if not isinstance(tz, dt.tzinfo):
            raise InvalidRequest("tz must be a datetime.tzinfo")
        if clock is not None and not callable(clock):
            raise InvalidRequest("clock must be a function returning an aware datetime")
        self._prefix, self._first, self._tz = prefix, first, tz
        self._clock: Callable[[], dt.datetime] = clock or (lambda: dt.datetime.now(dt.UTC))
        self._day: dt.date | None = None
        self._next: dict[tuple[str, str], int] = {}  # (hip_id, counter id) -> the next number
        self._given: dict[tuple[str, str, _Identity], str] = {}  # (hip_id, counter id, who) -> their token

    def __repr__(self) -> str:
        return f"TokenCounter(day={self._day}, counters={len(self._next)})"

    async def __call__(self, share: ProfileShare) -> str:
        """The share's token (see the class): usable as ``on_profile_share``."""
        return self.token_for(share)

    def token_for(self, share: ProfileShare) -> str:
        """The token of ``share``: the one its person got at its counter today, else the counter's next one."""
        if not isinstance(share, ProfileShare):
            raise InvalidRequest("share must be a ProfileShare (the payload of an abha.hip_profile_share event)")
        self._roll()
        place = (share.hip_id or "", share.hip_code or "")
        who = _identities(share)
        for identity in who:
            token = self._given.get((*place, identity))
            if token is not None:
                break
        else:
            number = self._next.get(place, self._first)
            self._next[place] = number + 1
            token = f"{self._prefix}{number}"
        for identity in who:
            self._given.setdefault((*place, identity), token)
        return token

    def issued(self, counter_id: str | None = None, *, hip_id: str | None = None) -> int:
        """Tokens handed out today at one counter (``hip_code``; ``None``: shares without one) of ``hip_id``
        (``None``: shares without one)."""
        self._roll()
        return self._next.get((hip_id or "", counter_id or ""), self._first) - self._first

    def _roll(self) -> None:
        now = self._clock()
        if now.tzinfo is None:
            raise InvalidRequest("clock must return a timezone-aware datetime")
        day = now.astimezone(self._tz).date()
        if day != self._day:
            self._day = day
            self._next.clear()
            self._given.clear()


def _identities(share: ProfileShare) -> list[_Identity]:
    """What recognises the person (and the delivery) of a share: its ABHA address, its ABHA number, its request."""
    found: list[_Identity] = []
    if share.abha_address and share.abha_address.strip():
        found.append(("address", share.abha_address.strip().casefold()))
    digits = "".join(c for c in share.abha_number or "" if c.isdigit())
    if digits:
        found.append(("number", digits))
    if share.request_id:
        found.append(("request", share.request_id))
    return found
