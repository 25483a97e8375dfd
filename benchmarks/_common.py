"""What the benchmarks share: realistic bodies, a fast describe server in its own process, core pinning, free
ports and medians. Imported by the scripts beside it (``python benchmarks/<name>.py`` puts this folder first on
``sys.path``); not part of the package."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import socket
import statistics
import sys
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from health_async.testing._data import make_document

__all__ = ["free_port", "make_bodies", "pin", "spread", "start_describe_server"]


def make_bodies(count: int = 256, seed: int = 1) -> list[bytes]:
    """Realistic document descriptions (the fake server's generator): 2-4 KB, live spellings mixed in."""
    rng = random.Random(seed)
    return [orjson.dumps(make_document(rng, f"doc-{n}", date=1614556800 + n)) for n in range(count)]


def pin(core: int) -> bool:
    """Pin this process (and the threads it starts later) to one core; False where not possible."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return False
    try:
        os.sched_setaffinity(0, {core})
    except OSError:
        return False
    return True


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def spread(values: list[float], digits: int = 2) -> dict[str, float]:
    """Median, lowest and highest of ``values``, rounded."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def _describe_server(port: int, ready: Any, core: int | None, use_uvloop: bool) -> None:
    """The server process: the fastest aiohttp.web describe handler we can write, one of 256 bodies per id."""
    from aiohttp import web

    if core is not None:
        pin(core)
    bodies = make_bodies()

    async def describe(request: web.Request) -> web.Response:
        return web.Response(body=bodies[hash(request.match_info["id"]) % len(bodies)], content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/mr/api/v1/docs/{id}", describe)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()
        ready.set()
        await asyncio.Event().wait()

    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            uvloop.run(main())
            return
    asyncio.run(main())


def start_describe_server(*, core: int | None = None, use_uvloop: bool = False) -> tuple[BaseProcess, str]:
    """Start :func:`_describe_server` in a new (spawned) process, pinned to ``core`` if given; ``(process, url)``."""
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(target=_describe_server, args=(port, ready, core, use_uvloop), daemon=True)
    server.start()
    if not ready.wait(30):
        raise SystemExit("the benchmark server did not start")
    return server, f"http://127.0.0.1:{port}"
