"""The base of the fake server's domain modules: each adds its routes and state to one FakeHealthServer.

A domain receives its server (:class:`Server`, what it needs of a :class:`~health_async.testing.FakeHealthServer`)
and never imports ``_server``: the server imports the domain modules, not the other way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from aiohttp import web

    from ._common import Handler, RecordedRequest
    from ._data import FakeData

__all__ = ["Domain", "Server"]


class Server(Protocol):
    """What a domain module uses of the server it belongs to (a ``FakeHealthServer``)."""

    host: str
    client_id: str
    page_size: int
    record: bool
    data: FakeData
    requests: list[RecordedRequest]
    _counts: dict[str, int]

    def _route(self, name: str, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """Wrap ``handler`` with counting, fault injection, recording and the token check of route ``name``."""
        ...

    def _json(self, request: web.Request, payload: Any, status: int = 200) -> web.Response:
        """``payload`` as JSON (encrypted when the request or the server asks for it)."""
        ...

    async def _read_json(self, request: web.Request, rec: RecordedRequest) -> Any:
        """The request's JSON (decrypted if need be), or ``_common.BAD``."""
        ...

    async def _fault(self, route: str, request: web.Request) -> web.StreamResponse | None:
        """The answer of a fault injected on ``route`` that fires now, or None."""
        ...

    def _otp_sent(self, otp: str, purpose: str, mobile: str | None = None) -> None:
        """The fake "sent" ``otp`` for ``purpose`` (to ``mobile``): what shows it to a person trying the fake."""
        ...


class Domain:
    """One part of the fake service (records lifecycle, presigned storage, ABHA, patients).

    ``add_routes`` registers its handlers through ``server._route(name, handler)`` so that counting, fault
    injection, recording and the token check apply as on the core routes; ``start``/``close`` run with the
    server (for a second listening socket, say); ``reset`` runs with :meth:`FakeHealthServer.reset`.
    """

    #: Route names this domain adds (usable with ``server.inject``).
    ROUTES: tuple[str, ...] = ()

    def __init__(self, server: Server) -> None:
        self.server = server

    def add_routes(self, app: web.Application) -> None:
        """Register this domain's routes on ``app``."""

    async def start(self) -> None:
        """Called once the main server listens."""

    async def close(self) -> None:
        """Called when the main server stops."""

    def reset(self) -> None:
        """Forget per-test state that :meth:`FakeHealthServer.reset` should clear."""
