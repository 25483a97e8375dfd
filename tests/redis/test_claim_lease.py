"""Issue 42 follow-up against a real Redis and real worker processes: a claim in progress is held by a lease, so
a worker killed with SIGKILL mid-callback (it can release nothing) does not leave its webhook "in progress" until
it expires: once the lease has lapsed, a redelivery to another worker runs the callback. And a first attempt that
runs longer than the lease keeps its claim by renewing it (a heartbeat): the redelivery meanwhile is answered 503
and the callback never runs twice."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from health_async.redis import RedisSeenStore
from health_async.testing.webhooks._send import sign
from health_async.webhooks import Claim

from .conftest import RedisServer
from .test_seen_store import BODY, SECRET

ROOT = Path(__file__).resolve().parent.parent.parent

#: The workers' lease, short for the test: the killed worker's key is free this long after its last renewal.
KILLED_LEASE = 0.5
#: The heartbeat test's lease: renewed every third of it, with room for a slow machine between beats.
SLOW_LEASE = 1.0
#: Bounds on waiting for a child process (not timed assertions: only so that a broken test ends).
PATIENCE = 20.0


class Workers:
    """Worker processes of ``tests.redis._lease_worker``, all killed at the end."""

    def __init__(self, redis_url: str, name: str, directory: Path) -> None:
        self.redis_url, self.name, self.directory = redis_url, name, directory
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, label: str, mode: str, lease: float) -> str:
        args = [self.redis_url, self.name, SECRET, str(lease), mode, label, str(self.directory)]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        process = subprocess.Popen([sys.executable, "-m", "tests.redis._lease_worker", *args], cwd=ROOT, env=env)
        self.processes[label] = process
        port_file = self.directory / f"{label}.port"
        deadline = time.monotonic() + PATIENCE
        while not (port_file.exists() and port_file.read_text()):
            assert process.poll() is None, "a worker died at start"
            assert time.monotonic() < deadline, "a worker did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{port_file.read_text()}/hook"

    def ran(self, label: str) -> bool:
        return (self.directory / f"{label}.started").exists()

    def kill(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def workers(redis_server: RedisServer, name: str, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(redis_server.url, name, tmp_path)
    try:
        yield started
    finally:
        started.kill()


async def _post(url: str, header: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=BODY, headers={"Eka-Webhook-Signature": header}) as answer,
    ):
        return answer.status, await answer.text()


async def _until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` is true (a child process is working), at most :data:`PATIENCE` seconds."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.02)


async def test_a_worker_killed_mid_callback_frees_the_webhook_once_its_lease_lapses(workers: Workers) -> None:
    first = workers.start("first", "hang", KILLED_LEASE)
    second = workers.start("second", "quick", KILLED_LEASE)
    header = sign(BODY, SECRET)
    delivery = asyncio.ensure_future(_post(first, header))
    await _until(lambda: workers.ran("first"))
    os.kill(workers.processes["first"].pid, 9)  # SIGKILL mid-callback: nothing is released, nothing finished
    workers.processes["first"].wait(timeout=10)
    with pytest.raises(aiohttp.ClientError):
        await delivery
    # the service redelivers (503 "in progress" while the dead worker's lease runs; no timing asserted)
    answers: list[tuple[int, str]] = []
    deadline = time.monotonic() + PATIENCE
    while not answers or answers[-1][0] == 503:
        assert time.monotonic() < deadline, f"the webhook stayed in progress: {answers[-3:]}"
        if answers:
            await asyncio.sleep(0.05)
        answers.append(await _post(second, header))
    assert answers[-1] == (200, "ok") and workers.ran("second")
    assert set(answers[:-1]) <= {(503, "webhook already being processed, retry later")}
    assert await _post(second, header) == (200, "duplicate webhook ignored")


async def test_a_first_attempt_longer_than_its_lease_keeps_it_by_heartbeat_and_runs_once(
    workers: Workers, redis_client: aioredis.Redis, name: str
) -> None:
    first = workers.start("first", "slow", SLOW_LEASE)
    second = workers.start("second", "quick", SLOW_LEASE)
    header = sign(BODY, SECRET)
    entry = f"{{{name}}}:seen:{header.split('v1=')[1]}"
    delivery = asyncio.ensure_future(_post(first, header))
    await _until(lambda: workers.ran("first"))
    # the first worker renews its lease: wait for 4 renewals (the time to live going up), past one whole lease
    renewals, last = 0, await redis_client.pttl(entry)
    deadline = time.monotonic() + PATIENCE
    while renewals < 4:
        assert time.monotonic() < deadline and last > 0, "the lease was not renewed"
        await asyncio.sleep(0.02)
        ttl = await redis_client.pttl(entry)
        renewals, last = renewals + (ttl > last), ttl
    assert last <= SLOW_LEASE * 1000  # held by the lease, not until the webhook expires
    assert await _post(second, header) == (503, "webhook already being processed, retry later")
    (workers.directory / "go").write_text("1")
    assert await delivery == (200, "ok")
    assert await _post(second, header) == (200, "duplicate webhook ignored")
    assert not workers.ran("second")
    assert await redis_client.pttl(entry) > SLOW_LEASE * 1000  # done: kept until the webhook expires


async def test_the_store_holds_a_claim_by_its_lease_renews_it_and_keeps_it_done_until_it_expires(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    key = "ef" * 32
    entry = f"{{{name}}}:seen:{key}"
    async with RedisSeenStore(redis_server.url, name=name) as store:
        now = time.time()
        assert await store.claim(key, now + 600, token="a", lease=now + 30) is Claim.NEW
        assert 0 < await redis_client.pttl(entry) <= 30_000
        assert await store.claim(key, now + 600, token="b", lease=now + 30) is Claim.IN_PROGRESS
        assert await store.renew(key, token="b", until=now + 60) is False  # not its claim
        assert await store.renew(key, token="a", until=now + 60) is True
        assert 30_000 < await redis_client.pttl(entry) <= 60_000
        assert await store.renew(key, token="a", until=now + 6000) is True
        assert await redis_client.pttl(entry) <= 600_000  # never past expires_at
        await store.finish(key, token="a")
        assert await redis_client.get(entry) == b"1"
        assert 60_000 < await redis_client.pttl(entry) <= 600_000
        assert await store.renew(key, token="a", until=now + 60) is False  # done: nothing to renew
        # a lease that lapses (the holder died): the key is free again
        other = "fe" * 32
        assert await store.claim(other, time.time() + 600, token="a", lease=time.time() + 0.05) is Claim.NEW
        while await redis_client.exists(f"{{{name}}}:seen:{other}"):  # noqa: ASYNC110 - the server's expiry
            await asyncio.sleep(0.02)
        assert await store.renew(other, token="a", until=time.time() + 60) is False
        await store.finish(other, token="a")  # too late: nothing happens
        assert await store.claim(other, time.time() + 600, token="b", lease=time.time() + 30) is Claim.NEW
