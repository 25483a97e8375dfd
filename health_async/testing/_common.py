"""What the fake server and its domain modules share: the request record, the handler type, the "dropped" answer
and the processing marker.

A leaf module: it imports nothing from the rest of ``health_async.testing`` (nor of the client), so the server
(``_server.py``) and the domain modules (``_records``, ``_storage``, ``_abha``, ``_patients``) all import it and
none of them imports the server.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
from aiohttp import web

__all__ = ["BAD", "ERROR_MARKER", "Dropped", "ErrorMarker", "Handler", "RecordedRequest", "drop"]


@attrs.define
class RecordedRequest:
    """One request as the server received it (recorded before any fault or check)."""

    route: str
    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    #: Bytes of the request body (for an upload: of the file(s) received).
    body_size: int = 0
    #: The JSON body, if any (for an encrypted request, the envelope).
    json: Any = None
    #: For an encrypted request, the decrypted JSON (for an encrypted upload, ``{"file": <size>}``).
    plaintext: Any = None
    #: The status answered (``None`` for a dropped connection).
    status: int | None = None
    #: When the request arrived (:func:`time.monotonic`, the fake's process): to watch the rate a client (or several
    #: worker processes sharing one account) really sends at, see :meth:`FakeHealthServer.busiest_window`.
    arrived_at: float = attrs.field(factory=time.monotonic)


#: A route handler of the fake: the request and its record in, the answer out.
Handler = Callable[[web.Request, RecordedRequest], Awaitable[web.StreamResponse]]


class Dropped(web.Response):
    """Returned after the connection was closed on purpose: nothing is sent."""


def drop(request: web.Request) -> Dropped:
    """Close the connection at once, without an answer (unlike ``close()``, which would still flush one)."""
    if request.transport is not None:
        request.transport.abort()
    return Dropped(status=499)


class _Marker:
    pass


#: What ``FakeHealthServer._read_json`` returns for a body it cannot read.
BAD: Final[Any] = _Marker()

#: The fake's processing marker: an uploaded file whose content ends in these bytes has its processing end in
#: ``error`` (``testing/records/_results.py``). One rule for every upload route: the direct upload (``_server.py``) and
#: the
#: presigned storage host (``_storage.py``) both check it with :class:`ErrorMarker`.
ERROR_MARKER: Final = b"error"


class ErrorMarker:
    """Whether a file ends in :data:`ERROR_MARKER`: give it the whole content, or :meth:`update` it chunk by chunk
    as the file is read (only the last few bytes are kept); then ask :attr:`found`."""

    __slots__ = ("_tail",)

    def __init__(self, content: bytes = b"") -> None:
        self._tail = b""
        self.update(content)

    def update(self, chunk: bytes) -> None:
        """The next bytes of the file."""
        keep = len(ERROR_MARKER)
        self._tail = (self._tail + chunk[-keep:])[-keep:]

    @property
    def found(self) -> bool:
        """True when the bytes so far end in :data:`ERROR_MARKER`."""
        return self._tail == ERROR_MARKER
