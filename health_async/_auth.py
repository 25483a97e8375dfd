"""Bearer tokens: a static token, an async provider, or built-in client credentials (login + refresh).

All three share one rule: a 401 answer triggers *one* refresh for all concurrent callers (single flight),
then the call is repeated once. Refresh calls bypass the client's in-flight and rate limits and never wait
for a token themselves, so a refresh cannot deadlock however many callers are queued behind it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol, TypeVar

import attrs

from . import _constants as C
from . import _routes as R
from ._config import check_header_value
from .errors import (
    AuthenticationError,
    ClientClosedError,
    InvalidArgumentType,
    InvalidRequest,
    ResponseValidationError,
)

__all__ = ["ClientCredentials", "TokenProvider"]

_T = TypeVar("_T")


class Session(Protocol):
    """What the token machinery needs of the client's session (:class:`health_async._session.Session`), named here
    so that this module does not import the session, which sits above it (the session holds an :class:`Auth`)."""

    @property
    def closed(self) -> bool:
        """Whether the client is closed (or closing)."""

    def spawn(self, coro: Coroutine[Any, Any, _T]) -> asyncio.Task[_T]:
        """A task owned by the client, cancelled when it closes."""

    async def auth_request(self, path: str, *, operation: str, json: Any, headers: Mapping[str, str]) -> Any:
        """A token call: no bearer token, no limits, no retries."""


#: An async callable returning a bearer token (without the ``Bearer`` prefix).
TokenProvider = Callable[[], Awaitable[str]]


@attrs.frozen(repr=False)
class ClientCredentials:
    """Client id and secret for the service's login endpoint; the client logs in and refreshes by itself.

    Access tokens live 30 minutes; the client refreshes one shortly before it expires, and after a 401.
    The secret never appears in a repr or an error.
    """

    client_id: str = attrs.field(validator=lambda _, a, v: check_header_value(a.name, v))
    client_secret: str = attrs.field(validator=lambda _, a, v: check_header_value(a.name, v))

    def __repr__(self) -> str:
        return f"ClientCredentials(client_id={self.client_id!r}, client_secret='***')"


class Auth:
    """Hands out the current token and refreshes it, single flight for successes *and* failures.

    One fetch (login, refresh or provider call) runs at a time, as a task owned by the client; every caller that
    needs a new token while it runs awaits that same task, so 32 concurrent callers with a bad secret cause one
    login call and all see its error. A caller whose request got a 401 passes the :attr:`generation` of the token
    it sent: if a fetch has completed since, it takes that result instead of starting another, even when the fetch
    returned the same token string (a ``token_provider`` that hands out the same token is not called once per
    concurrent 401).
    """

    def __init__(self) -> None:
        self._token: str | None = None
        self._fetching: asyncio.Task[str] | None = None
        #: Incremented by every completed fetch; lets a 401 tell whether its token is already replaced.
        self.generation = 0
        self.refreshes = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def can_refresh(self) -> bool:
        """Whether a 401 is worth a refresh (a static token cannot be refreshed)."""
        return True

    def current(self) -> str | None:
        """The token when it can be used as is, else None (then await :meth:`token`)."""
        token = self._token
        return None if token is None or self._stale() else token

    async def token(self, session: Session) -> str:
        """The token to send now."""
        token = self._token
        if token is None or self._stale():
            token = await self.refresh(session, self.generation)
        return token

    def _stale(self) -> bool:
        return False

    async def refresh(self, session: Session, seen_generation: int) -> str:
        """A token newer than generation ``seen_generation``; concurrent callers share one fetch and its outcome.
        While a fetch is in flight every caller waits for it, whatever generation it saw: the token at hand may be
        the very one a newer 401 just refused."""
        task = self._fetching
        if task is None:
            if self.generation != seen_generation and self._token is not None and not self._stale():
                return self._token  # somebody else fetched a new one since this caller's token was handed out
            task = self._fetching = session.spawn(self._run_fetch(session))
            task.add_done_callback(_retrieve)  # its error reaches the waiters; none left must not warn
        # shielded: one waiter being cancelled must not cancel the fetch the others wait on
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if task.cancelled() and session.closed and (me is None or not me.cancelling()):
                # the fetch was cancelled by aclose(), not this caller: the call ends as any call on a closed client
                raise ClientClosedError("the HealthClient was closed while its token was being fetched") from None
            raise

    async def _run_fetch(self, session: Session) -> str:
        try:
            token = check_header_value("token", await self._fetch(session))
            self._token = token
            self.generation += 1
            self.refreshes += 1
            return token
        finally:
            self._fetching = None

    async def _fetch(self, session: Session) -> str:
        raise NotImplementedError


class StaticToken(Auth):
    """A fixed token: a 401 is final."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = check_header_value("token", token)

    @property
    def can_refresh(self) -> bool:
        return False

    async def _fetch(self, session: Session) -> str:  # noqa: ARG002
        assert self._token is not None
        return self._token


class ProviderAuth(Auth):
    """A caller's async ``token_provider``: called on first use and again after a 401, never per request."""

    def __init__(self, provider: TokenProvider) -> None:
        super().__init__()
        if not callable(provider):
            raise InvalidArgumentType("token_provider must be an async callable returning a token string")
        self._provider = provider

    async def _fetch(self, session: Session) -> str:  # noqa: ARG002
        token = await self._provider()
        if not isinstance(token, str) or not token:
            raise AuthenticationError("token_provider returned no token", status=401, operation="token_provider")
        return token


class CredentialsAuth(Auth):
    """Login with client credentials, then refresh with the refresh token; log in again if that fails."""

    def __init__(self, credentials: ClientCredentials, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._credentials = credentials
        self._refresh_token: str | None = None
        self._expires_at = 0.0
        self._clock = clock

    def _stale(self) -> bool:
        return self._clock() >= self._expires_at - C.TOKEN_REFRESH_MARGIN

    async def _fetch(self, session: Session) -> str:
        if self._refresh_token is not None and self._token is not None:
            try:
                return await self._call(
                    session,
                    R.PATH_REFRESH,
                    "token_refresh",
                    {"refresh_token": self._refresh_token},
                    {C.H_AUTHORIZATION: f"Bearer {self._token}", C.H_CLIENT_ID: self._credentials.client_id},
                )
            except (AuthenticationError, ResponseValidationError):
                self._refresh_token = None  # fall through to a fresh login
        return await self._call(
            session,
            R.PATH_LOGIN,
            "token_login",
            {"client_id": self._credentials.client_id, "client_secret": self._credentials.client_secret},
            {},
        )

    async def _call(
        self, session: Session, path: str, operation: str, body: dict[str, str], headers: dict[str, str]
    ) -> str:
        data = await session.auth_request(path, operation=operation, json=body, headers=headers)
        access, refresh, expires_in = _token_fields(data, operation)
        self._refresh_token = refresh or self._refresh_token
        self._expires_at = self._clock() + expires_in
        return access


def _retrieve(task: asyncio.Task[str]) -> None:
    if not task.cancelled():
        task.exception()


def _token_fields(data: Any, operation: str) -> tuple[str, str | None, float]:
    if not isinstance(data, dict) or not isinstance(data.get("access_token"), str) or not data["access_token"]:
        raise ResponseValidationError(f"{operation}: the token response has no access_token")
    refresh = data.get("refresh_token")
    expires_in = data.get("expires_in")
    seconds = float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else 1800.0
    return data["access_token"], refresh if isinstance(refresh, str) else None, seconds


def make_auth(token: str | None, token_provider: TokenProvider | None, auth: ClientCredentials | None) -> Auth:
    """Exactly one of the three ways to authenticate."""
    given = [x for x in (token, token_provider, auth) if x is not None]
    if len(given) != 1:
        raise InvalidRequest("pass exactly one of token=, token_provider= or auth=ClientCredentials(...)")
    if token is not None:
        return StaticToken(token)
    if token_provider is not None:
        return ProviderAuth(token_provider)
    assert auth is not None
    if not isinstance(auth, ClientCredentials):
        raise InvalidArgumentType("auth= takes a ClientCredentials(client_id, client_secret)")
    return CredentialsAuth(auth)
