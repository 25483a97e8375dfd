"""What every resource shares: the client's session, its per-user defaults, and the send-once rule."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .. import _constants as C
from .._config import NotGiven, optional_header_value
from .._retry import RetryPolicy
from ..errors import InvalidRequest, OutcomeUnknown, PaginationError, ServerError, TransportError

if TYPE_CHECKING:
    from .._client import HealthClient
    from .._session import Session


class _TokenPage(Protocol):
    @property
    def next_token(self) -> str | None: ...


P = TypeVar("P", bound=_TokenPage)


class Resource:
    """Base of ``client.documents``, ``client.abha``, ``client.profiles``, ``client.patients``, ..."""

    def __init__(self, client: HealthClient) -> None:
        self._client = client

    @property
    def _session(self) -> Session:
        return self._client._session

    def _user_id(self, user_id: str | NotGiven | None) -> str | None:
        """The OID for ``X-Pt-Id``: the call's (``None`` = send none), else the client's default."""
        if isinstance(user_id, NotGiven):
            return self._client.user_id
        return optional_header_value("user_id", user_id)

    def _required_user_id(self, user_id: str | NotGiven | None) -> str:
        """The OID for ``X-Pt-Id`` where the call needs one; :class:`InvalidRequest` (nothing sent) without."""
        user = self._user_id(user_id)
        if user is None:
            raise InvalidRequest("this call needs a user id (X-Pt-Id): pass user_id= here or to HealthClient")
        return user

    async def _token_pages(
        self,
        path: str,
        *,
        operation: str,
        parse: Callable[[Any], P],
        user_id: str | NotGiven | None,
        updated_after: int | None,
        start_token: str | None,
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> AsyncIterator[P]:
        """Pages of a ``next_token``-paged listing (``offset=<token>``, ``u_at__gt=<epoch>``), fetched lazily.

        Checked before anything is sent: the user id, ``updated_after`` (a non-negative int). A token the
        service already gave raises :class:`PaginationError` (following it would loop forever).
        """
        headers = {C.H_PT_ID: self._required_user_id(user_id)}
        if updated_after is not None and (
            not isinstance(updated_after, int) or isinstance(updated_after, bool) or updated_after < 0
        ):
            raise InvalidRequest("updated_after must be a non-negative int (epoch seconds)")
        token = start_token
        seen: set[str] = set()  # page tokens given so far (a few bytes per page)
        while True:
            params: list[tuple[str, str]] = []
            if token:
                params.append(("offset", token))
            if updated_after is not None:
                params.append(("u_at__gt", str(updated_after)))
            data = await self._session.request(
                "GET",
                path,
                operation=operation,
                params=params,
                headers=headers,
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
            page = parse(data)
            yield page
            next_token = page.next_token
            if next_token is None:
                return
            if next_token == token or next_token in seen:
                raise PaginationError(f"{operation}: the service repeated a page token it already gave (a loop)")
            seen.add(next_token)
            token = next_token

    async def _send_once(self, method: str, path: str, *, operation: str, **kwargs: Any) -> Any:
        """A request whose repetition would do harm (an OTP sent twice, a patient or account created twice).

        Sent with ``idempotent=False``, so it is retried only when it cannot have reached the service (see
        :class:`~health_async.RetryPolicy`). When it fails in a way that leaves its effect unknown (a timeout or
        reset after sending, a 5XX without the service's own error body) it raises
        :class:`~health_async.errors.OutcomeUnknown`, chained to the original error, instead of the transport or
        server error: the caller must check, or ask the person, before trying again. A documented error answer
        (an ABHA error body, a 4XX) is a definite "no" and is raised as it is.
        """
        try:
            return await self._session.request(method, path, operation=operation, idempotent=False, **kwargs)
        except TransportError as exc:
            if not exc.sent:
                raise
            raise OutcomeUnknown(
                f"{operation}: the request may have reached the service ({type(exc).__name__}); it was not repeated. "
                "Check whether it took effect before trying again",
                operation=operation,
            ) from exc
        except ServerError as exc:
            raise OutcomeUnknown(
                f"{operation}: the service answered HTTP {exc.status} without saying whether the request took "
                "effect; it was not repeated. Check before trying again",
                operation=operation,
            ) from exc
