"""The in-memory replay store against a plain reference model, and the replay it once let through."""

from __future__ import annotations

import math
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from health_async import webhooks
from health_async.errors import InvalidArgumentType, InvalidRequest
from health_async.testing.webhooks._send import sign
from health_async.webhooks import EventKind, WebhookEvent

from ..conftest import Serve
from .test_webhooks import PII, SECRET, SMART_REPORT, post

T = TypeVar("T")


def now_(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that must finish without suspending (the in-memory store never awaits, which is
    what makes its check-and-insert atomic under asyncio)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("the in-memory store suspended")


class Reference:
    """What InMemorySeenStore promises, as plainly as it can be said: a dict of key -> expiry, and of key -> the
    token of the claim holding it while in progress; on every add or claim the entries expired at the clock's time
    go first (an entry is live up to and including its expiry), then, when full, the entry closest to expiry (ties:
    the smallest key). Only the token holding a key finishes or releases it (issue 42)."""

    def __init__(self, max_entries: int) -> None:
        self.max = max_entries
        self.entries: dict[str, float] = {}
        self.tokens: dict[str, str] = {}

    def add(self, key: str, expires_at: float, now: float) -> bool:
        self.entries = {k: e for k, e in self.entries.items() if not e < now}
        self.tokens = {k: t for k, t in self.tokens.items() if k in self.entries}
        if key in self.entries:
            return False
        while len(self.entries) >= self.max:
            evicted = min(self.entries, key=lambda k: (self.entries[k], k))
            del self.entries[evicted]
            self.tokens.pop(evicted, None)
        self.entries[key] = expires_at
        return True

    def claim(self, key: str, expires_at: float, token: str, now: float) -> webhooks.Claim:
        if self.add(key, expires_at, now):
            self.tokens[key] = token
            return webhooks.Claim.NEW
        return webhooks.Claim.IN_PROGRESS if key in self.tokens else webhooks.Claim.DONE

    def finish(self, key: str, token: str) -> None:
        if self.tokens.get(key) == token:
            del self.tokens[key]

    def release(self, key: str, token: str) -> None:
        if self.tokens.get(key) == token:
            del self.tokens[key], self.entries[key]

    def discard(self, key: str) -> None:
        self.entries.pop(key, None)
        self.tokens.pop(key, None)


KEYS = st.sampled_from("abcdef")
TOKENS = st.sampled_from("xyz")  # a few, so that a token often is not the one holding the key


class StoreMatchesReference(RuleBasedStateMachine):
    """Random adds, discards, claims, finishes and releases (by the holder's token or another's) and clock advances:
    the store answers as the reference does and holds exactly the reference's entries after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0
        self.store = webhooks.InMemorySeenStore(clock=lambda: self.now)
        self.model = Reference(webhooks.DEFAULT_MAX_SEEN)

    @initialize(max_entries=st.integers(min_value=1, max_value=5))
    def capped(self, max_entries: int) -> None:
        self.store = webhooks.InMemorySeenStore(max_entries=max_entries, clock=lambda: self.now)
        self.model = Reference(max_entries)

    @rule(key=KEYS, ttl=st.integers(min_value=-3, max_value=12))
    def add(self, key: str, ttl: int) -> None:
        expires_at = self.now + ttl  # an expiry already past is possible (a custom caller's), and kept until swept
        assert now_(self.store.add(key, expires_at)) == self.model.add(key, expires_at, self.now)

    @rule(key=KEYS)
    def discard(self, key: str) -> None:
        now_(self.store.discard(key))
        self.model.discard(key)

    @rule(key=KEYS, ttl=st.integers(min_value=-3, max_value=12), token=TOKENS)
    def claim(self, key: str, ttl: int, token: str) -> None:
        expires_at = self.now + ttl
        got = now_(self.store.claim(key, expires_at, token=token))
        assert got is self.model.claim(key, expires_at, token, self.now)

    @rule(key=KEYS, token=TOKENS)
    def finish(self, key: str, token: str) -> None:
        now_(self.store.finish(key, token=token))
        self.model.finish(key, token)

    @rule(key=KEYS, token=TOKENS)
    def release(self, key: str, token: str) -> None:
        now_(self.store.release(key, token=token))
        self.model.release(key, token)

    @rule(seconds=st.sampled_from([0.0, 0.5, 1.0, 3.0, 7.0]))
    def advance(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def same_entries(self) -> None:
        assert len(self.store) == len(self.model.entries)
        assert self.store._expiry == self.model.entries
        assert self.store._tokens == self.model.tokens
        assert len(self.store._heap) <= 2 * self.store._max + 1  # stale heap entries stay bounded


StoreMatchesReference.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_store_matches_the_reference_model = StoreMatchesReference.TestCase


def test_a_stale_entry_at_the_heaps_top_never_takes_a_live_entry_with_it() -> None:
    now = [1000.0]
    store = webhooks.InMemorySeenStore(clock=lambda: now[0])
    assert now_(store.add("failed", 1010.0))
    now_(store.discard("failed"))  # its callback failed: forgotten, its heap entry (1010, failed) is stale
    assert now_(store.add("live", 1100.0))
    now[0] = 1050.0  # past the stale entry's expiry, long before the live one's
    assert now_(store.add("other", 1100.0))
    assert not now_(store.add("live", 1100.0))  # still a replay
    assert len(store) == 2


async def test_a_failed_callback_never_lets_a_replay_of_another_webhook_through(serve: Serve) -> None:
    """The reported case, end to end: a webhook whose callback failed once is forgotten; once its time is past,
    the store's sweep must not also drop another webhook that is still inside the tolerance window."""
    tolerance = 300
    t = int(time.time())
    store_now = [float(t)]
    store = webhooks.InMemorySeenStore(clock=lambda: store_now[0])
    calls: list[WebhookEvent] = []
    failed_once: list[bool] = []

    async def callback(event: WebhookEvent) -> None:
        calls.append(event)
        if not failed_once:
            failed_once.append(True)
            raise RuntimeError("database down")

    handler = webhooks.aiohttp_handler(SECRET, callback, seen_store=store, tolerance=tolerance)
    url = f"{await serve({('POST', '/hook'): handler})}/hook"
    early = sign(PII, SECRET, timestamp=t - 100)  # kept until t + 200
    later = sign(SMART_REPORT, SECRET, timestamp=t)  # kept until t + 300
    third = sign(PII, SECRET, timestamp=t - 50)
    async with aiohttp.ClientSession() as session:
        assert (await post(session, url, PII, early))[0] == 500  # the callback fails: forgotten
        assert await post(session, url, SMART_REPORT, later) == (200, "ok")
        store_now[0] = t + 250.0  # the failed one's expiry is past, the accepted one's is not
        assert await post(session, url, PII, third) == (200, "ok")  # an add: the store sweeps
        assert await post(session, url, SMART_REPORT, later) == (200, "duplicate webhook ignored")
    # the accepted webhook's callback ran once: the replay did not run it again
    assert [e.kind for e in calls] == [EventKind.PII, EventKind.SMART_REPORT, EventKind.PII]


@pytest.mark.parametrize("expires_at", [math.nan, math.inf, -math.inf, True, "1000", None])
def test_an_expiry_that_is_not_finite_seconds_is_refused(expires_at: Any) -> None:
    store = webhooks.InMemorySeenStore(max_entries=1, clock=lambda: 0.0)
    with pytest.raises(InvalidRequest, match="expires_at"):
        now_(store.add("k", expires_at))
    assert len(store) == 0
    assert now_(store.add("k", 10**400))  # an int is exact, however large
    assert now_(store.add("j", 5.0))  # full: evicts "k", never loops


@pytest.mark.parametrize("reading", [math.nan, math.inf, -math.inf])
def test_a_clock_that_gives_no_finite_time_fails_closed(reading: float) -> None:
    now = [0.0]
    store = webhooks.InMemorySeenStore(clock=lambda: now[0])
    assert now_(store.add("k", 10.0))
    now[0] = reading
    with pytest.raises(InvalidRequest, match="clock"):  # the handler answers 500: nothing runs unchecked
        now_(store.add("k", 10.0))
    now[0] = 5.0
    assert not now_(store.add("k", 10.0))  # nothing was evicted by the broken reading


def test_a_key_that_is_not_a_str_is_a_typed_error() -> None:
    store = webhooks.InMemorySeenStore(clock=lambda: 0.0)
    with pytest.raises(InvalidArgumentType, match="key must be a str"):
        now_(store.add(b"k", 10.0))  # type: ignore[arg-type]
