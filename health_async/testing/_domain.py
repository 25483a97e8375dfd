"""The base of the fake server's domain modules: each adds its routes and state to one FakeHealthServer."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

    from ._server import FakeHealthServer

__all__ = ["Domain"]


class Domain:
    """One part of the fake service (records lifecycle, presigned storage, ABHA, patients).

    ``add_routes`` registers its handlers through ``server._route(name, handler)`` so that counting, fault
    injection, recording and the token check apply as on the core routes; ``start``/``close`` run with the
    server (for a second listening socket, say); ``reset`` runs with :meth:`FakeHealthServer.reset`.
    """

    #: Route names this domain adds (usable with ``server.inject``).
    ROUTES: tuple[str, ...] = ()

    def __init__(self, server: FakeHealthServer) -> None:
        self.server = server

    def add_routes(self, app: web.Application) -> None:
        """Register this domain's routes on ``app``."""

    async def start(self) -> None:
        """Called once the main server listens."""

    async def close(self) -> None:
        """Called when the main server stops."""

    def reset(self) -> None:
        """Forget per-test state that :meth:`FakeHealthServer.reset` should clear."""
