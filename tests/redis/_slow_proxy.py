"""A TCP proxy on 127.0.0.1 that holds every chunk ``delay`` seconds before passing it on, both ways: a Redis that
answers slowly (a far or loaded server), so a command can be caught in flight. It also tells when a chunk holding a
given marker (a key's name) has been passed on to the server: from then the command has reached Redis, and its
reply is still ``delay`` seconds away from the client."""

from __future__ import annotations

import asyncio
import contextlib


class SlowProxy:
    def __init__(self, port: int, delay: float = 0.0) -> None:
        self.upstream_port = port
        self.delay = delay
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._watches: list[tuple[bytes, asyncio.Event]] = []

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}/0"

    def watch(self, marker: bytes) -> asyncio.Event:
        """An event set once a client-to-server chunk holding ``marker`` has been written to the server."""
        event = asyncio.Event()
        self._watches.append((marker, event))
        return event

    async def __aenter__(self) -> SlowProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        for reader, writer, upstream in (
            (client_reader, server_writer, True),
            (server_reader, client_writer, False),
        ):
            task = asyncio.ensure_future(self._pump(reader, writer, upstream))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
        """Pass ``reader``'s chunks to ``writer``, each ``delay`` seconds after it arrived, in order; at the end (or
        a reset), pass what is held, then close."""
        loop = asyncio.get_running_loop()
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            try:
                while chunk := await reader.read(65536):
                    held.put_nowait((loop.time() + self.delay, chunk))
            except OSError:
                pass
            held.put_nowait((loop.time() + self.delay, b""))

        reading = asyncio.ensure_future(read())
        try:
            while True:
                at, chunk = await held.get()
                await asyncio.sleep(max(0.0, at - loop.time()))
                if not chunk:
                    break
                writer.write(chunk)
                await writer.drain()
                if upstream:
                    for marker, event in self._watches:
                        if marker in chunk:
                            event.set()
        except OSError:
            pass
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await reading
            writer.close()
