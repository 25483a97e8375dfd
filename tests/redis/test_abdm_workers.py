"""One redelivered data request is pushed once across two worker processes (issue 38): each worker is its own
process with its own ``webhooks.abdm_handler``, sharing only a real Redis server (``RedisSeenStore``); the service
delivers an ``abha.hip_data_fetch`` to one worker and its redelivery, re-signed, to the other; the fake server
counts what arrived."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from health_async.testing import FakeHealthServer
from health_async.testing.webhooks._send import sign

from .conftest import RedisServer

ROOT = Path(__file__).resolve().parent.parent.parent
SECRET = "whsec-redis-workers"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def _start(server: FakeHealthServer, redis_url: str, name: str, port_file: Path) -> subprocess.Popen[bytes]:
    args = [server.url, server.token, server.client_id, redis_url, name, SECRET, str(port_file)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "tests.redis._abdm_worker", *args], cwd=ROOT, env=env)


@pytest.fixture
def workers(server: FakeHealthServer, redis_server: RedisServer, name: str, tmp_path: Path) -> Iterator[list[str]]:
    files = [tmp_path / f"worker-{i}.port" for i in range(2)]
    processes = [_start(server, redis_server.url, name, f) for f in files]
    try:
        deadline = time.monotonic() + 20
        while not all(f.exists() and f.read_text() for f in files):
            assert all(p.poll() is None for p in processes), "a worker died at start"
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        yield [f"http://127.0.0.1:{f.read_text()}/abdm" for f in files]
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=10)


async def _deliver(url: str, body: bytes, timestamp: int) -> tuple[int, str]:
    headers = {"Content-Type": "application/json", "Eka-Webhook-Signature": sign(body, SECRET, timestamp=timestamp)}
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=headers) as answer:
        return answer.status, await answer.text()


async def _pushes(server: FakeHealthServer, count: int) -> None:
    deadline = time.monotonic() + 10
    while server.calls("hip_data_push") < count and time.monotonic() < deadline:  # noqa: ASYNC110 - another process
        await asyncio.sleep(0.02)


async def test_a_redelivered_data_request_is_pushed_once_across_two_worker_processes(
    server: FakeHealthServer, workers: list[str]
) -> None:
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    now = int(time.time())
    event = {"service": "abdm", "event": "abha.hip_data_fetch", "event_time": now, "timestamp": now,
             "transaction_id": "wh-1", "data": data}  # fmt: skip
    body = json.dumps(event).encode()
    assert await _deliver(workers[0], body, now) == (200, "accepted")
    await _pushes(server, 1)
    assert server.calls("hip_data_push") == 1
    # the service's redelivery, signed anew (so not a replay of the same signature), lands on the other worker
    assert await _deliver(workers[1], body, now + 1) == (200, "duplicate data request ignored")
    await asyncio.sleep(0.3)  # time for a second push, were one to start
    assert server.calls("hip_data_push") == 1
    assert list(server.abdm.received(data["transaction_id"])) == ["visit-1"]
    # another request is still answered, by either worker
    other = server.abdm.data_request(["visit-2"], oid="oid-1")
    body = json.dumps({**event, "transaction_id": "wh-2", "data": other}).encode()
    assert await _deliver(workers[1], body, now) == (200, "accepted")
    await _pushes(server, 2)
    assert server.calls("hip_data_push") == 2
