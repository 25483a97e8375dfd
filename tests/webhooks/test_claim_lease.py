"""Issue 42 follow-up, in memory: a claim in progress is held by a lease. A holder that never finishes (its worker
died) leaves the key claimable again once the lease lapses; a holder still running keeps it by renewing it (the
receivers' heartbeat), and its callback never runs twice; ``finish`` keeps the key done until it expires."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from health_async import webhooks
from health_async.errors import InvalidRequest
from health_async.testing.webhooks._send import sign
from health_async.webhooks import Claim, WebhookEvent

from ..conftest import Serve
from .test_webhooks import SECRET, SMART_REPORT

KEY = "ab" * 32


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_claim_whose_holder_never_finishes_is_claimable_again_after_its_lease() -> None:
    clock = Clock()
    store = webhooks.InMemorySeenStore(clock=clock)
    assert isinstance(store, webhooks.LeasingSeenStore)
    assert await store.claim(KEY, 1000 + 86400, token="dead", lease=1030) is Claim.NEW
    clock.now = 1030  # the lease's last moment: still held
    assert await store.claim(KEY, 1000 + 86400, token="redelivery", lease=1060) is Claim.IN_PROGRESS
    clock.now = 1030.5  # lapsed: the next delivery takes it, as a worker killed mid-delivery never comes back
    assert await store.renew(KEY, token="dead", until=1060) is False
    await store.finish(KEY, token="dead")  # too late: nothing happens
    assert await store.claim(KEY, 1000 + 86400, token="redelivery", lease=1060) is Claim.NEW
    await store.finish(KEY, token="redelivery")
    clock.now = 1000 + 86400  # done: kept until it expires, past its lease
    assert await store.claim(KEY, 1000 + 86400 + 60, token="replay", lease=clock.now + 30) is Claim.DONE


async def test_a_running_holders_renewals_keep_its_claim() -> None:
    clock = Clock()
    store = webhooks.InMemorySeenStore(clock=clock)
    assert await store.claim(KEY, 2000, token="running", lease=1030) is Claim.NEW
    for now in range(1020, 1990, 20):  # a heartbeat every 20 s, each extending the lease 30 s
        clock.now = now
        assert await store.renew(KEY, token="running", until=now + 30) is True
        assert await store.claim(KEY, 2000, token="redelivery", lease=now + 30) is Claim.IN_PROGRESS
    clock.now = 1999
    assert await store.renew(KEY, token="running", until=2029) is True  # capped at expires_at
    clock.now = 2000.5
    assert await store.claim(KEY, 2100, token="later", lease=2030) is Claim.NEW  # expired whatever its lease
    with pytest.raises(InvalidRequest):
        await store.renew(KEY, token="later", until=float("inf"))
    with pytest.raises(InvalidRequest):
        await store.claim("cd" * 32, 2100, token="t", lease=float("nan"))


async def test_a_callback_longer_than_its_lease_keeps_its_claim_by_heartbeat_and_runs_once(serve: Serve) -> None:
    renewed = asyncio.Event()
    go = asyncio.Event()
    calls: list[WebhookEvent] = []

    class Counting(webhooks.InMemorySeenStore):
        renewals = 0

        async def renew(self, key: str, *, token: str, until: float) -> bool:
            held = await super().renew(key, token=token, until=until)
            self.renewals += held
            if self.renewals >= 6:  # two whole leases went by: only the renewals kept the claim
                renewed.set()
            return held

    async def callback(event: WebhookEvent) -> None:
        calls.append(event)
        await go.wait()

    store = Counting()
    handler = webhooks.aiohttp_handler(SECRET, callback, seen_store=store, claim_lease=0.06)
    url = await serve({("POST", "/hook"): handler}) + "/hook"
    header = sign(SMART_REPORT, SECRET)

    async def post() -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=SMART_REPORT, headers={webhooks.SIGNATURE_HEADER: header}) as answer,
        ):
            return answer.status, await answer.text()

    first = asyncio.ensure_future(post())
    await renewed.wait()
    assert await post() == (503, "webhook already being processed, retry later")
    go.set()
    assert await first == (200, "ok")
    assert await post() == (200, "duplicate webhook ignored")
    assert len(calls) == 1


def test_a_lease_that_is_not_positive_seconds_is_refused() -> None:
    async def callback(event: WebhookEvent) -> None:
        pass

    for lease in (0, -1.0, float("inf"), True, "30"):
        with pytest.raises(InvalidRequest):
            webhooks.aiohttp_handler(SECRET, callback, claim_lease=lease)  # type: ignore[arg-type]


async def test_a_store_without_renew_is_claimed_as_before_without_a_lease(serve: Serve) -> None:
    claimed: list[dict[str, object]] = []

    class Plain:
        """A third-party store of the protocol before leases: claim takes no lease, and there is no renew."""

        def __init__(self) -> None:
            self.inner = webhooks.InMemorySeenStore()

        async def claim(self, key: str, expires_at: float, *, token: str) -> Claim:
            claimed.append({"key": key, "token": token})
            return await self.inner.claim(key, expires_at, token=token)

        async def finish(self, key: str, *, token: str) -> None:
            await self.inner.finish(key, token=token)

        async def release(self, key: str, *, token: str) -> None:
            await self.inner.release(key, token=token)

    class Overridden(webhooks.InMemorySeenStore):
        """A subclass overriding claim with the signature before leases (it inherits renew)."""

        async def claim(self, key: str, expires_at: float, *, token: str) -> Claim:  # type: ignore[override]
            claimed.append({"key": key, "token": token})
            return await super().claim(key, expires_at, token=token)

    async def callback(event: WebhookEvent) -> None:
        pass

    for store in (Plain(), Overridden()):
        url = await serve({("POST", "/hook"): webhooks.aiohttp_handler(SECRET, callback, seen_store=store)})
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                url + "/hook", data=SMART_REPORT, headers={webhooks.SIGNATURE_HEADER: sign(SMART_REPORT, SECRET)}
            ) as answer,
        ):
            assert (answer.status, await answer.text()) == (200, "ok")
    assert len(claimed) == 2
