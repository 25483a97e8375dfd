"""The refusals the fake's ABHA and ABDM domains answer with, written once: the service's ``GenericError`` body
(``{code, error, source_error: {code, message}}``), the refusals several domains give alike (a bad body, an unknown
transaction, an OTP lock-out), the OTP check they all make, and the route wrapper that reads a JSON body and
answers a :class:`Refusal` raised by its handler.

A leaf of ``health_async.testing`` besides :mod:`._common` and :mod:`._domain` (the server's shape): every domain
module may import it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from . import _routes as R

if TYPE_CHECKING:
    from ._common import Handler, RecordedRequest
    from ._domain import Server

__all__ = ["Refusal", "answer", "bad_body", "check_otp", "json_route", "no_txn", "otp_lock"]


class Refusal(Exception):
    """A refusal of the service: HTTP ``status``, ``error``, and ``source_error`` (``source_code``, ``message``:
    ``error`` when not given)."""

    def __init__(self, status: int, error: str, source_code: str, message: str | None = None) -> None:
        super().__init__(source_code)
        self.status, self.error, self.source_code, self.message = status, error, source_code, message or error


def bad_body() -> Refusal:
    """A body that does not fit the operation: 400 ``ABDM-1006``."""
    return Refusal(400, "Bad Request, invalid request", "ABDM-1006", "Bad Request, invalid request Body")


def no_txn() -> Refusal:
    """A transaction id the fake does not know: 500 ``MIS-1026``."""
    return Refusal(500, "Transaction not found for UUID.", "MIS-1026", "Transaction is not found for UUID.")


def otp_lock() -> Refusal:
    """Too many OTPs sent or wrong in one transaction: 500 ``ABDM-1100`` (locked for 30 minutes)."""
    return Refusal(
        500,
        "Something went wrong",
        "ABDM-1100",
        "You have requested multiple OTPs Or Exceeded maximum number of attempts for OTP match in this "
        "transaction. Please try again in 30 minutes.",
    )


class OtpTransaction(Protocol):
    """What :func:`check_otp` reads and moves of a domain's transaction."""

    step: str
    otp: str
    wrong: int


def check_otp(txn: OtpTransaction, body: dict[str, Any], max_attempts: int, mismatch_code: str = "ABDM-1035") -> None:
    """Check the ``otp`` of ``body`` against ``txn``: not six digits 400 ``ABDM-1006``; after ``max_attempts``
    wrong ones the transaction is ``locked`` (:func:`otp_lock`); a wrong one is counted and refused with
    ``mismatch_code`` (``MIS-1013``: UIDAI's answer to a wrong Aadhaar OTP; else ABDM's ``ABDM-1035``)."""
    otp = body.get("otp")
    if not isinstance(otp, str) or len(otp) != R.OTP_LENGTH or not otp.isdigit():
        raise bad_body()
    if txn.wrong >= max_attempts:
        txn.step = "locked"
        raise otp_lock()
    if otp != txn.otp:
        txn.wrong += 1
        if mismatch_code == "MIS-1013":
            raise Refusal(
                400,
                "The OTP that you have entered is incorrect. Please try again.",
                "MIS-1013",
                "OTP(One Time Password) is invalid, Please enter the correct OTP.",
            )
        raise Refusal(400, "OTP doesn't match", "ABDM-1035", "OTP does not matched")


def answer(server: Server, request: web.Request, refusal: Refusal) -> web.Response:
    """``refusal`` as the service's ``GenericError`` answer."""
    payload = {
        "code": refusal.status,
        "error": refusal.error,
        "source_error": {"code": refusal.source_code, "message": refusal.message},
    }
    return server._json(request, payload, refusal.status)


def json_route(
    server: Server, handler: Callable[[web.Request, Any], Any | Awaitable[Any]], *, read_body: bool = True
) -> Handler:
    """A route of ``handler(request, body)``: the body read as a JSON object (else 400 ``ABDM-1006``; ``None``
    without ``read_body``), the handler's answer (it may be awaitable) as JSON, ``None`` as 204, a
    :class:`Refusal` as :func:`answer`."""

    async def handle(request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        try:
            body: Any = None
            if read_body:
                body = await server._read_json(request, rec)
                if not isinstance(body, dict):
                    raise bad_body()
            result = handler(request, body)
            if inspect.isawaitable(result):
                result = await result
        except Refusal as refusal:
            return answer(server, request, refusal)
        if result is None:
            return web.Response(status=204)
        return server._json(request, result)

    return handle
