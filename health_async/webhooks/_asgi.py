"""ABDM's receiver as an ASGI 3 app (FastAPI, Starlette): :func:`abdm_asgi`."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .._logging import logger

if TYPE_CHECKING:
    from .._client import HealthClient
    from ..resources.abdm._guard import ConsentStore
from ._abdm import DataFetchCallback, ProfileShareCallback, _abdm_receiver_args, _AbdmReceiver, _LinkingArgs
from ._link_otp import LinkOtpStore
from ._receiving import (
    DEFAULT_CALLBACK_TIMEOUT,
    DEFAULT_CLAIM_LEASE,
    DEFAULT_EVENT_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE,
    WebhookCallback,
    _Answer,
    _Incoming,
    _read_capped,
)
from ._seen import SeenStore
from ._signature import DEFAULT_TOLERANCE, SIGNATURE_HEADER, WebhookSecret
from ._user_linking import DEFAULT_MAX_OTP_TRIES, DEFAULT_OTP_TTL, DiscoverCallback, LinkedCallback, LinkOtpSender

__all__ = ["AbdmAsgiApp", "abdm_asgi"]

# The ASGI 3 types, spelled as Starlette's (``starlette.types``), so that mypy takes the app where they are asked.
_Scope: TypeAlias = MutableMapping[str, Any]


_Message: TypeAlias = MutableMapping[str, Any]


_Receive: TypeAlias = Callable[[], Awaitable[_Message]]


_Send: TypeAlias = Callable[[_Message], Awaitable[None]]


_SIGNATURE_HEADER_KEY: Final = SIGNATURE_HEADER.lower().encode("ascii")


_MAX_CONTENT_LENGTH_DIGITS: Final = 18


class _ClientGone(Exception):
    """The ASGI server said ``http.disconnect`` before the whole body arrived."""


class AbdmAsgiApp(_AbdmReceiver):
    """An ASGI 3 application for ABDM's webhooks; make one with :func:`abdm_asgi`.

    The same receiver as :class:`AbdmHandler` (the same checks, answers, ``on_event``, background pushes and
    redelivery rule; the code is shared), called as ``await app(scope, receive, send)``, with :attr:`pending`,
    :meth:`join` and :meth:`aclose`. An ASGI server may run the lifespan shutdown (:meth:`aclose`) while
    requests are still in flight: a data request or profile share among them, or arriving after it, is answered
    503 and starts nothing, so no push outlives the shutdown; see :meth:`aclose`.
    """

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Serve one ASGI connection: an ``http`` request, or the ``lifespan`` (shutdown runs :meth:`aclose`).

        Raises:
            ValueError: any other scope type (``websocket``...), as the ASGI specification asks.
        """
        kind = scope.get("type")
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            raise ValueError("the ABDM webhook app serves only http requests (and the lifespan)")
        try:
            answer = await self._respond(_from_asgi(scope, receive))
        except _ClientGone:
            logger.debug("webhook request ended: the sender went away before its body arrived")
            return
        await _send_asgi(send, answer)

    async def _lifespan(self, receive: _Receive, send: _Send) -> None:
        while True:
            message = await receive()
            kind = message.get("type")
            if kind == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif kind == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _from_asgi(scope: _Scope, receive: _Receive) -> _Incoming:
    """The neutral request of an ASGI ``http`` scope; its body read from ``http.request`` messages."""
    declared: int | None = None
    signature: str | None = None
    seen_length = seen_signature = False
    for raw_name, value in scope.get("headers") or ():
        name = bytes(raw_name).lower()  # lowercase already, as ASGI asks; cheap to be sure
        if name == b"content-length" and not seen_length:
            seen_length = True
            declared = _content_length(bytes(value))
        elif name == _SIGNATURE_HEADER_KEY and not seen_signature:
            seen_signature = True
            signature = bytes(value).decode("latin-1")  # HTTP's header charset; a valid value is ASCII
    ended = False

    async def next_chunk() -> bytes | None:
        nonlocal ended
        while not ended:
            message = await receive()
            kind = message.get("type")
            if kind == "http.disconnect":
                raise _ClientGone
            if kind == "http.request":
                ended = not message.get("more_body", False)
                return bytes(message.get("body", b""))
        return None

    async def read(limit: int) -> bytes | None:
        return await _read_capped(next_chunk, limit)

    return _Incoming(str(scope.get("method", "")), declared, read, signature)


def _content_length(value: bytes) -> int | None:
    """The declared length; None when it is not a number (the streamed cap still holds)."""
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text) if len(text) <= _MAX_CONTENT_LENGTH_DIGITS else sys.maxsize


async def _send_asgi(send: _Send, answer: _Answer) -> None:
    body = answer.text.encode("utf-8")
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode("ascii"))]
    headers += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers]
    if answer.close:
        headers.append((b"connection", b"close"))  # the ASGI way to ask the server not to keep the connection
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def abdm_asgi(
    secret: WebhookSecret | Sequence[WebhookSecret],
    *,
    client: HealthClient,
    on_event: WebhookCallback | None = None,
    on_data_fetch: DataFetchCallback | None = None,
    on_profile_share: ProfileShareCallback | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_body_size: int = DEFAULT_MAX_BODY_SIZE,
    seen_store: SeenStore | None = None,
    on_discover: DiscoverCallback | None = None,
    on_link_otp: LinkOtpSender | None = None,
    on_linked: LinkedCallback | None = None,
    link_store: LinkOtpStore | None = None,
    otp_ttl: float = DEFAULT_OTP_TTL,
    max_otp_tries: int = DEFAULT_MAX_OTP_TRIES,
    callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
    event_timeout: float = DEFAULT_EVENT_TIMEOUT,
    consents: ConsentStore | None = None,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
) -> AbdmAsgiApp:
    """:func:`abdm_handler` as a plain ASGI 3 application (FastAPI, Starlette, Litestar, Quart, any ASGI server),
    with no dependency on any of them: the same arguments, checks, answers and background pushes (and a patient's
    own search answered, given ``on_discover`` and ``on_link_otp``), the same bounds (``callback_timeout``,
    ``event_timeout``, ``claim_lease``), ``consents`` kept current, and the same de-duplication in ``seen_store``
    (shared by several workers, each request is answered once across them).

    FastAPI (Starlette alike)::

        from contextlib import asynccontextmanager
        from fastapi import FastAPI
        from health_async import webhooks

        abdm = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=load_bundles, on_event=log_event)

        @asynccontextmanager
        async def lifespan(app):
            yield
            await abdm.aclose()        # a mounted app gets no lifespan of its own: close it with yours

        app = FastAPI(lifespan=lifespan)
        app.mount("/webhooks/abdm", abdm)

    (For Starlette: ``Starlette(routes=[Mount("/webhooks/abdm", app=abdm)], lifespan=lifespan)``.) A mount
    serves ``/webhooks/abdm/`` and below: give the service the URL with the trailing slash, as Starlette
    answers ``/webhooks/abdm`` with a 307 redirect to it. For the exact path, add it as a route instead,
    ``app.add_route("/webhooks/abdm", abdm)`` (``Route("/webhooks/abdm", abdm)``): Starlette calls an object
    that is not a function as an ASGI app.

    It answers ``http`` requests as :meth:`AbdmHandler.handle` does (405 with ``Allow: POST`` for another
    method; 413 from ``Content-Length`` before reading, or once the ``http.request`` chunks pass
    ``max_body_size``, with ``Connection: close``; 400, 500, 200 as there). A sender that disconnects while its
    body is read gets nothing, and nothing runs. Served at the top (``uvicorn module:abdm``) it also takes the
    ``lifespan``: startup completes at once, shutdown runs :meth:`~AbdmAsgiApp.aclose` (pushes under way are
    cancelled; a data request or profile share during or after it is answered 503 and starts nothing) and then
    completes. Any other scope type raises ``ValueError``. Cancellation propagates.

    Design: the returned :class:`AbdmAsgiApp` is a class of its own rather than :class:`AbdmHandler` made
    callable, so each keeps only its framework's surface; both are built on one shared receiver (the checks and
    the ABDM logic exist once), and both have :attr:`~AbdmAsgiApp.pending`, :meth:`~AbdmAsgiApp.join` and
    :meth:`~AbdmAsgiApp.aclose`.
    """
    linking = _LinkingArgs(on_discover, on_link_otp, on_linked, link_store, otp_ttl, max_otp_tries)
    return AbdmAsgiApp(
        *_abdm_receiver_args(
            secret,
            client,
            on_event,
            on_data_fetch,
            on_profile_share,
            tolerance,
            max_body_size,
            seen_store,
            linking,
            callback_timeout,
            event_timeout,
            consents,
            claim_lease,
        )
    )
