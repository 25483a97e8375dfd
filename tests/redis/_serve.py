"""What every web worker of tests/redis shares: serve one webhook receiver on 127.0.0.1 until killed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web


async def serve_until_killed(
    route: str,
    handle: Callable[[web.Request], Awaitable[web.StreamResponse]],
    port_file: str | Path,
    *,
    aclose: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Serve ``handle`` at ``POST route`` on a free port of 127.0.0.1, write the port to ``port_file`` (the parent
    waits for it) and serve until the process is killed; then ``aclose()`` (the receiver's, if it has one) and close
    the app."""
    app = web.Application()
    app.router.add_post(route, handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    await asyncio.to_thread(Path(port_file).write_text, str(port))
    try:
        await asyncio.Event().wait()  # until killed
    finally:
        if aclose is not None:
            await aclose()
        await runner.cleanup()
