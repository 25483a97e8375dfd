"""The one request chokepoint: every call of the client goes through :meth:`Session.request`.

It joins the base URL, adds the bearer token, ``client-id`` and the call's own headers, serialises (and, when
asked, encrypts) the body, applies the client-wide limits, maps every aiohttp failure and every error status to
our error tree, decrypts encrypted responses, and retries according to the :class:`RetryPolicy`.

One retry loop: a single :class:`tenacity.AsyncRetrying`. The first attempt runs outside it, because tenacity
costs ~60 µs per call even when nothing fails, more than half of a whole request at bulk rates; when that
attempt fails, tenacity takes over and sees the failure as its attempt 1 (replayed), so counting, waits,
the deadline and logging all stay in tenacity.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
import attrs
import orjson
import tenacity
from yarl import URL

from . import _constants as C
from ._config import NOT_GIVEN, NotGiven, pick
from ._files import StreamBody
from ._limits import Limits
from ._logging import logger
from ._retry import RetryPolicy, retry_reason
from ._version import __version__
from .errors import (
    ApiError,
    ClientClosedError,
    EncryptionError,
    HealthError,
    RequestTimeout,
    ResponseTooLarge,
    ResponseValidationError,
    TLSVerificationError,
    TransportError,
    error_from_response,
)

if TYPE_CHECKING:
    from ._auth import Auth
    from .jwe import JweKey

__all__ = ["ClientConfig", "Session"]

USER_AGENT = f"health_async/{__version__} aiohttp/{aiohttp.__version__}"


@attrs.frozen(repr=False)
class ClientConfig:
    """Everything a :class:`Session` needs, normalised once by ``HealthClient``."""

    base_url: str
    client_id: str | None
    retry: RetryPolicy
    timeout: float | None
    connect_timeout: float | None
    max_connections: int
    rate_limit: float | None
    max_response_size: int
    encryption_key: JweKey | None = None
    key_id: str | None = None

    def __repr__(self) -> str:
        return f"ClientConfig(base_url={self.base_url!r})"


class Session:
    """Owns (or borrows) the aiohttp session; sends requests; maps failures. One per ``HealthClient``."""

    def __init__(self, config: ClientConfig, auth: Auth, http: aiohttp.ClientSession | None = None) -> None:
        self.config = config
        self.auth = auth
        self._http = http
        self._owns_http = http is None
        self._closed = False
        self._limits: Limits | None = None
        self._timeout = _client_timeout(config.timeout, config.connect_timeout)
        self._base_headers: dict[str, str] = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        base = URL(config.base_url, encoded=True)
        self._base_url, self._base_path = base, base.raw_path.rstrip("/")
        if config.client_id is not None:
            self._base_headers[C.H_CLIENT_ID] = config.client_id
        self.tasks: set[asyncio.Task[Any]] = set()

    # ---------------------------------------------------------------- lifecycle

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` ran."""
        return self._closed

    @property
    def limits(self) -> Limits:
        """The client-wide limits, created on first use inside the running loop."""
        if self._limits is None:
            self._limits = Limits(self.config.max_connections, self.config.rate_limit)
        return self._limits

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ClientClosedError("the HealthClient is closed; create a new one")
        if self._http is None:
            connector = aiohttp.TCPConnector(limit=self.config.max_connections, limit_per_host=0)
            self._http = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._http

    async def open(self) -> None:
        """Create the aiohttp session now (inside the running loop) instead of on the first request."""
        self._open()
        _ = self.limits

    async def aclose(self) -> None:
        """Cancel helper tasks, then close the aiohttp session if we created it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        tasks = [t for t in self.tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._owns_http and self._http is not None:
            await self._http.close()
        self._http = None

    # ---------------------------------------------------------------- the chokepoint

    async def request(
        self,
        method: str,
        path: str,
        *,
        operation: str,
        route: str | None = None,
        params: list[tuple[str, str]] | None = None,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        body: StreamBody | Callable[[], StreamBody] | None = None,
        idempotent: bool,
        encrypt: bool = False,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> Any:
        """Send one logical request (with retries) and return the decoded JSON of the success response.

        ``path`` is already encoded; ``route`` is its template for logs (no identifiers). ``json`` is sent as
        a JSON body (encrypted into a JWE envelope when ``encrypt``); ``body`` is a streamed body or a factory
        of one (called per attempt). Raises only :class:`HealthError` subclasses (and CancelledError).
        """
        if self._closed:
            raise ClientClosedError("the HealthClient is closed; create a new one")
        if encrypt and self.config.encryption_key is None:
            raise ValueError("encrypt=True needs an encryption_key on the HealthClient")
        req = _Request(
            method=method,
            url=self._url(path),
            route=route or path,
            operation=operation,
            params=params,
            headers=headers or {},
            json=json,
            body=body,
            idempotent=idempotent,
            encrypt=encrypt,
            timeout=self._timeout if isinstance(timeout, NotGiven) else _client_timeout(timeout, None),
        )
        policy = pick(retry, self.config.retry)
        started = time.monotonic()
        try:
            return await self._attempt(req, 1)
        except HealthError as exc:
            if policy.attempts <= 1 or not policy.should_retry(exc, idempotent=req.idempotent):
                raise
            first_failure: HealthError | None = exc
        attempt = 1

        async def call() -> Any:
            nonlocal first_failure, attempt
            if first_failure is not None:
                failure, first_failure = first_failure, None
                raise failure
            attempt += 1
            return await self._attempt(req, attempt)

        def stop(state: tenacity.RetryCallState) -> bool:
            if state.attempt_number >= policy.attempts:
                return True
            deadline = policy.deadline
            return deadline is not None and time.monotonic() - started + state.upcoming_sleep > deadline

        def wait(state: tenacity.RetryCallState) -> float:
            assert state.outcome is not None
            return policy.delay(state.attempt_number, state.outcome.exception())

        def before_sleep(state: tenacity.RetryCallState) -> None:
            assert state.outcome is not None
            logger.info(
                "retrying %s %s in %.2fs after attempt %d: %s",
                req.method,
                req.route,
                state.upcoming_sleep,
                state.attempt_number,
                retry_reason(state.outcome.exception() or Exception()),
            )

        retrying = tenacity.AsyncRetrying(
            stop=stop,
            wait=wait,
            retry=tenacity.retry_if_exception(lambda e: policy.should_retry(e, idempotent=req.idempotent)),
            before_sleep=before_sleep,
            reraise=True,
        )
        return await retrying(call)

    async def auth_request(self, path: str, *, operation: str, json: Any, headers: Mapping[str, str]) -> Any:
        """A token call: no bearer token of ours, no limits (so it cannot deadlock behind them), no retries."""
        req = _Request(
            method="POST",
            url=self._url(path),
            route=path,
            operation=operation,
            params=None,
            headers=headers,
            json=json,
            body=None,
            idempotent=False,
            encrypt=False,
            timeout=self._timeout,
        )
        status, resp_headers, raw = await self._send(self._open(), req, None)
        if status >= 400:
            raise await self._error(req, status, resp_headers, raw)
        data = self._decode(req, status, raw)
        return await self._decrypt(data, req.operation) if _looks_encrypted(data) else data

    # ---------------------------------------------------------------- one attempt

    async def _attempt(self, req: _Request, attempt: int) -> Any:
        http = self._open()
        limits = self.limits
        token = self.auth.current() or await self.auth.token(self)
        for auth_try in (0, 1):
            if limits.must_wait:
                await limits.admit()
            async with limits.slot:
                begun = time.monotonic()
                status, headers, raw = await self._send(http, req, token)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "%s %s -> %d (%s, attempt %d, %.1f ms, request id %s)",
                    req.method,
                    req.route,
                    status,
                    req.operation,
                    attempt,
                    (time.monotonic() - begun) * 1000,
                    headers.get("x-request-id", "-"),
                )
            if status == 401 and auth_try == 0 and self.auth.can_refresh:
                token = await self.auth.refresh(self, token)
                continue
            break
        if status >= 400:
            raise await self._error(req, status, headers, raw)
        data = self._decode(req, status, raw)
        return await self._decrypt(data, req.operation) if _looks_encrypted(data) else data

    async def _send(
        self, http: aiohttp.ClientSession, req: _Request, token: str | None
    ) -> tuple[int, Mapping[str, str], bytes]:
        if token is None:  # token calls bring their own headers
            headers = {**self._base_headers, **req.headers}
        else:
            headers = {**self._base_headers, C.H_AUTHORIZATION: f"Bearer {token}", **req.headers}
        data: Any = None
        if req.json is not None:
            payload = orjson.dumps(req.json)
            if req.encrypt:
                payload = await self._encrypt(payload)
                headers[C.H_ENCRYPTION] = "JWE"
            data = payload
            headers["Content-Type"] = "application/json"
        elif req.body is not None:
            stream = req.body() if callable(req.body) else req.body
            headers.update(stream.headers)
            headers["Content-Type"] = stream.content_type
            headers["Content-Length"] = str(stream.size)
            data = stream.factory()
        try:
            async with http.request(
                req.method, req.url, params=req.params, headers=headers, data=data, timeout=req.timeout
            ) as resp:
                return resp.status, resp.headers, await _read_capped(resp, self.config.max_response_size, req)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise self._transport_error(exc, req) from exc
        except RuntimeError as exc:  # aiohttp: "Session is closed" when aclose() raced this request
            if self._closed:
                raise ClientClosedError("the HealthClient was closed during the request") from exc
            raise

    def _transport_error(self, exc: BaseException, req: _Request) -> HealthError:
        op = req.operation
        if self._closed:
            return ClientClosedError(f"{op}: the HealthClient was closed during the request")
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return RequestTimeout(f"{op}: timed out connecting to the service", sent=False)
        if isinstance(exc, asyncio.TimeoutError):
            return RequestTimeout(f"{op}: the request timed out")
        if isinstance(exc, aiohttp.ClientConnectorCertificateError):
            return TLSVerificationError(f"{op}: TLS certificate verification failed for {req.url.host}", sent=False)
        if isinstance(exc, aiohttp.ClientConnectorError):
            return TransportError(f"{op}: cannot connect to {req.url.host}: {type(exc).__name__}", sent=False)
        if isinstance(exc, aiohttp.ClientPayloadError):
            return TransportError(f"{op}: the response body was cut off")
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return TransportError(f"{op}: the server closed the connection")
        return TransportError(f"{op}: request failed: {type(exc).__name__}")

    async def _error(self, req: _Request, status: int, headers: Mapping[str, str], raw: bytes) -> ApiError:
        """The typed error of an error response; a 429/503 ``Retry-After`` also pauses the whole client."""
        error = error_from_response(status, headers, await self._error_body(raw), operation=req.operation)
        if error.retry_after is not None and status in (429, 503):
            self.limits.pause(min(error.retry_after, self.config.retry.retry_after_cap))
        return error

    @staticmethod
    def _decode(req: _Request, status: int, raw: bytes) -> Any:
        """A success body as JSON (``None`` for 204)."""
        if status == 204 or (not raw and req.method == "DELETE"):
            return None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ResponseValidationError(
                f"{req.operation}: the service answered HTTP {status} with a body that is not JSON"
            ) from None

    async def _error_body(self, raw: bytes) -> Any:
        if not raw:
            return ""
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw.decode("utf-8", "replace")
        if _looks_encrypted(data) and self.config.encryption_key is not None:
            try:
                data = await self._decrypt(data, "error")
            except HealthError:
                pass
        return data

    # ---------------------------------------------------------------- encryption

    async def _encrypt(self, plaintext: bytes) -> bytes:
        from . import jwe

        assert self.config.encryption_key is not None
        envelope = await jwe.encrypt_async(plaintext, self.config.encryption_key, kid=self.config.key_id)
        return orjson.dumps(envelope)

    async def _decrypt(self, envelope: dict[str, Any], operation: str) -> Any:
        """The JSON inside an encrypted body; a body that only looked encrypted is returned as it is."""
        from . import jwe

        if not jwe.is_envelope(envelope):
            return envelope
        key = self.config.encryption_key
        if key is None:
            raise EncryptionError(f"{operation}: the response is encrypted but the client has no encryption_key")
        plaintext = await jwe.decrypt_async(envelope, key)
        try:
            return orjson.loads(plaintext)
        except orjson.JSONDecodeError:
            raise ResponseValidationError(f"{operation}: the decrypted response is not JSON") from None

    def _url(self, path: str) -> URL:
        """The base URL with ``path`` (already encoded) appended: built, not parsed (parsing a new URL string
        per request is a measurable share of a describe)."""
        return self._base_url.with_path(self._base_path + path, encoded=True)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Start a helper task owned by this client: cancelled (and awaited) by :meth:`aclose`."""
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task


class _Request:
    """One logical request, as the chokepoint sees it (a plain slotted class: built on every call)."""

    __slots__ = (
        "body",
        "encrypt",
        "headers",
        "idempotent",
        "json",
        "method",
        "operation",
        "params",
        "route",
        "timeout",
        "url",
    )

    def __init__(
        self,
        method: str,
        url: URL,
        route: str,
        operation: str,
        params: list[tuple[str, str]] | None,
        headers: Mapping[str, str],
        json: Any,
        body: StreamBody | Callable[[], StreamBody] | None,
        idempotent: bool,
        encrypt: bool,
        timeout: aiohttp.ClientTimeout,
    ) -> None:
        self.method = method
        self.url = url
        self.route = route
        self.operation = operation
        self.params = params
        self.headers = headers
        self.json = json
        self.body = body
        self.idempotent = idempotent
        self.encrypt = encrypt
        self.timeout = timeout


def _client_timeout(total: float | None, connect: float | None) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=total, connect=connect)


def _read_capped(resp: aiohttp.ClientResponse, cap: int, req: _Request) -> Awaitable[bytes]:
    """The body, refused with :class:`ResponseTooLarge` past ``cap`` bytes: at once when ``Content-Length``
    says so, else while reading. A plain function so the common case costs no extra coroutine."""
    length = resp.content_length
    if length is None:
        return _read_chunked(resp, cap, req.operation)
    if length > cap:
        raise ResponseTooLarge(f"{req.operation}: the response is {length} bytes, over the {cap}-byte limit")
    return resp.read()


async def _read_chunked(resp: aiohttp.ClientResponse, cap: int, operation: str) -> bytes:
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(64 * 1024):
        buf += chunk
        if len(buf) > cap:
            raise ResponseTooLarge(f"{operation}: the response is over the {cap}-byte limit")
    return bytes(buf)


def _looks_encrypted(data: Any) -> bool:
    """Cheap first test for an encrypted body; :func:`health_async.jwe.is_envelope` has the last word."""
    return type(data) is dict and "ciphertext" in data
