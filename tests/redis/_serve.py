"""What every hospital worker of tests/redis shares: serve one ``webhooks.abdm_handler`` on 127.0.0.1 until killed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from health_async.webhooks import AbdmHandler


async def serve_until_killed(handler: AbdmHandler, port_file: str) -> None:
    """Serve ``handler`` at ``POST /abdm`` on a free port of 127.0.0.1, write the port to ``port_file`` (the parent
    waits for it) and serve until the process is killed; then close the handler and the app."""
    app = web.Application()
    app.router.add_post("/abdm", handler.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    await asyncio.to_thread(Path(port_file).write_text, str(port))
    try:
        await asyncio.Event().wait()  # until killed
    finally:
        await handler.aclose()
        await runner.cleanup()
