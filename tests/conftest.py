"""Shared fixtures: a clean environment, fast retry policies, a mocked transport and a loopback server."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import aioresponses.core as aioresponses_core
import pytest
from aiohttp import web
from aioresponses import aioresponses
from hypothesis import settings

from health_async import RetryPolicy
from health_async.testing import FakeHealthServer

BASE = "https://api.test.example"

# Property-based tests explore the same examples on every run: the suite stays deterministic.
# HYPOTHESIS_PROFILE=explore searches new examples (a longer fuzz run for developers).
settings.register_profile("deterministic", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", max_examples=2000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

#: Retries without waiting, so retry sequences take no wall time.
FAST_RETRY = RetryPolicy(attempts=4, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's HEALTH_ASYNC_* settings."""
    for name in list(os.environ):
        if name.startswith("HEALTH_ASYNC_"):
            monkeypatch.delenv(name)


class _CompatResponse(aiohttp.ClientResponse):
    """aioresponses 0.7.9 predates aiohttp 3.14, whose ClientResponse requires ``stream_writer``; supply a
    stand-in so the mocked transport keeps working on the aiohttp our users install."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("stream_writer", types.SimpleNamespace(output_size=0))
        super().__init__(*args, **kwargs)


_NEEDS_COMPAT = "stream_writer" in inspect.signature(aiohttp.ClientResponse.__init__).parameters


@pytest.fixture
def mocked(monkeypatch: pytest.MonkeyPatch) -> Iterator[aioresponses]:
    """aioresponses, letting loopback through so the fake server still works beside it."""
    if _NEEDS_COMPAT:
        monkeypatch.setattr(aioresponses_core, "ClientResponse", _CompatResponse)
    with aioresponses(passthrough=["http://127.0.0.1"]) as m:
        yield m


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: What the ``serve`` fixture gives: start a loopback server with these routes, get its URL.
Serve = Callable[[Mapping[tuple[str, str], Handler]], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a tiny aiohttp.web app on 127.0.0.1 with the given routes; returns its base URL."""
    runners: list[web.AppRunner] = []

    async def start(routes: Mapping[tuple[str, str], Handler]) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for (method, path), handler in routes.items():
            app.router.add_route(method, path, handler)
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


class ServerThread:
    """A FakeHealthServer on its own event loop in a thread, so the CLI's ``asyncio.run`` can be tested as is."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.server: FakeHealthServer | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = FakeHealthServer(**self.kwargs)
        self.loop.run_until_complete(self.server.start())
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.server.close())
        self.loop.close()

    def __enter__(self) -> FakeHealthServer:
        self.thread.start()
        assert self.ready.wait(10)
        assert self.server is not None
        return self.server

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


pytest_plugins = ["pytester"]


def non_utf8_name(directory: Path, name: bytes) -> str:
    """A path whose file name is not UTF-8 (a surrogate in the str); skips where the file system refuses one."""
    path = os.fsdecode(os.fsencode(directory) + b"/" + name)
    try:
        open(path, "wb").close()
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses a file name that is not UTF-8")
    os.unlink(path)
    return path
