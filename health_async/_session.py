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
import io
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

import aiohttp
import attrs
import tenacity
from aiohttp import hdrs
from yarl import URL

from . import _constants as C
from . import _json
from ._config import NOT_GIVEN, NotGiven, check_seconds
from ._files import StreamBody
from ._limits import Limits, Overdue, within
from ._logging import logger
from ._retry import RetryPolicy, retry_reason
from ._tasks import keep
from ._telemetry import template_of
from ._version import __version__
from .errors import (
    ApiError,
    ClientClosedError,
    ClientLoopError,
    EncryptionError,
    HealthError,
    InvalidRequest,
    RequestTimeout,
    ResponseTooLarge,
    ResponseValidationError,
    TLSVerificationError,
    TransportError,
    error_from_response,
)

if TYPE_CHECKING:
    from ._auth import Auth
    from ._limits import SharedLimiter
    from ._telemetry import Call, Telemetry
    from .jwe import JweKey

__all__ = ["ClientConfig", "Session"]

T = TypeVar("T")

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
    limiter: SharedLimiter | None = None
    proxy: str | None = None
    trust_env: bool = False

    def __repr__(self) -> str:
        return f"ClientConfig(base_url={self.base_url!r})"


class Session:
    """Owns (or borrows) the aiohttp session; sends requests; maps failures. One per ``HealthClient``."""

    def __init__(
        self,
        config: ClientConfig,
        auth: Auth,
        http: aiohttp.ClientSession | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.config = config
        #: OpenTelemetry's instruments (``None``: off or not installed); see :mod:`health_async._telemetry`.
        self.telemetry = telemetry
        self.auth = auth
        self._http = http
        self._owns_http = http is None
        self._closed = False
        self._limits: Limits | None = None
        self._timeout = _client_timeout(config.timeout, config.connect_timeout)
        #: The aiohttp timeout of an attempt that has the whole default budget left (built once, not per request).
        self._budget_timeout = (
            None if config.timeout is None else _budget_timeout(config.timeout, config.connect_timeout)
        )
        #: The aiohttp timeout of a first attempt with the default budget (the plain way's, see :meth:`request`).
        self._first_timeout = self._budget_timeout or self._timeout
        self._bearer: tuple[str | None, dict[str, str]] = (None, {})  # (token, base headers with it), rebuilt on change
        self._base_headers: dict[str, str] = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        base = URL(config.base_url, encoded=True)
        self._base_url, self._base_path = base, base.raw_path.rstrip("/")
        if config.client_id is not None:
            self._base_headers[C.H_CLIENT_ID] = config.client_id
        self.tasks: set[asyncio.Task[Any]] = set()
        #: The event loop the client first ran on: its own (see :meth:`_bind_loop`).
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---------------------------------------------------------------- lifecycle

    def _bind_loop(self) -> None:
        """Bind the client to the running loop on its first use; :class:`ClientLoopError` on any other after.

        aiohttp's connections, the limits' waiters and the token's single flight all belong to the loop they were
        made on; used from another they fail with aiohttp's ``RuntimeError('Event loop is closed')``, or, when
        that loop still runs in another thread, wait on futures nobody will set. Checked where every call enters
        (:meth:`request`, :meth:`auth_request`, :meth:`spawn`, :meth:`open`): one C call and a comparison
        (:meth:`request`, the hot path, makes that comparison itself before calling this)."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is None:
            self._loop = loop
        else:
            raise ClientLoopError(
                "this HealthClient belongs to another event loop (the one it first ran on): create the client "
                "inside the loop that uses it, e.g. in each asyncio.run(), and close it there"
            )

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` ran."""
        return self._closed

    @property
    def limits(self) -> Limits:
        """The client-wide limits, created on first use inside the running loop."""
        if self._limits is None:
            self._limits = Limits(self._in_flight_bound(), self.config.rate_limit, self.config.limiter)
        return self._limits

    def _in_flight_bound(self) -> int:
        """``max_connections``, capped by a caller-owned session's connector limits: the requests admitted must
        be the ones on the wire, else those queued inside aiohttp's connector would leave after a pause began
        (the pause and the rate are checked when a request is admitted)."""
        bound = self.config.max_connections
        http = self._http
        connector = None if self._owns_http or http is None else http.connector
        if connector is not None:
            for cap in (connector.limit, connector.limit_per_host):
                if cap:
                    bound = min(bound, cap)
        return bound

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ClientClosedError("the HealthClient is closed; create a new one")
        http = self._http
        if http is None:
            connector = aiohttp.TCPConnector(limit=self.config.max_connections, limit_per_host=0)
            traces = []
            # the client's own rate counts a request when its headers really go out. Judgement call: a shared
            # limiter's reports are stamped when the answer comes (later than sent: its count errs on the safe side,
            # which keeps its rate as the service counts arrivals across processes, whose send-to-arrival delays vary)
            if self.config.rate_limit is not None:
                trace = aiohttp.TraceConfig()
                trace.on_request_headers_sent.append(self._on_headers_sent)
                traces.append(trace)
            http = self._http = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, trust_env=self.config.trust_env, trace_configs=traces
            )
        elif http.closed:
            raise ClientClosedError("the aiohttp session passed as session= is closed")
        return http

    async def open(self) -> None:
        """Create the aiohttp session now (inside the running loop) instead of on the first request."""
        self._bind_loop()
        self._open()
        _ = self.limits

    async def aclose(self) -> None:
        """Cancel helper tasks, then close the aiohttp session if we created it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        owner = self._loop
        if owner is not None and owner is not asyncio.get_running_loop():
            await self._close_from_elsewhere(owner)
            return
        await self._shutdown()

    async def _close_from_elsewhere(self, owner: asyncio.AbstractEventLoop) -> None:
        """:meth:`aclose` run on another loop than the client's. Judgement call: when the client's loop still runs
        (in another thread), the closing is done there and waited for; when it has stopped or closed, nothing of
        it can run any more: the session is dropped (its sockets are the OS's to close) and a warning says so."""
        if owner.is_running() and not owner.is_closed():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._shutdown(), owner))
            return
        self._http = None
        self.tasks.clear()
        logger.warning(
            "HealthClient closed on another event loop than its own, which is no longer running: its connections "
            "could not be closed (close a client in the loop that used it)"
        )

    async def _shutdown(self) -> None:
        tasks = [t for t in self.tasks if not t.done()]
        for task in tasks:
            task.cancel()
        try:
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:  # even when this is cancelled meanwhile: a later aclose() returns at once, so it is now or never
            http, self._http = self._http, None
            if self._owns_http and http is not None:
                await http.close()

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
        url: URL | None = None,
        decode: Callable[[bytes], Any] | None = None,
        receive: Callable[[aiohttp.ClientResponse, _Request], Awaitable[Any]] | None = None,
        restart: Callable[[], bool] | None = None,
        call: Call | None = None,
    ) -> Any:
        """Send one logical request (with retries) and return the decoded JSON of the success response.

        ``path`` is already encoded; ``route`` is its template for logs (no identifiers). ``json`` is sent as
        a JSON body (encrypted into a JWE envelope when ``encrypt``); ``body`` is a streamed body or a factory
        of one (called per attempt). Raises only :class:`HealthError` subclasses (and CancelledError).

        ``url`` sends to another origin instead (a presigned storage form): then *nothing of ours* goes with it,
        no bearer token, no ``client-id``, no partner header, only ``headers`` as given and the ``User-Agent``;
        a 401 there is final. Redirects are never followed, to any origin (see :meth:`_exchange`).

        ``decode`` is a fast typed decoder for a 200's bytes (``describe``'s): what it returns is returned as it
        is, unless it returns ``None``, which means "not for me" (an envelope, a body it does not fit): the body is
        then decoded (and decrypted) as JSON like any other, for the caller's tolerant converter.

        ``receive`` takes a 200's body itself, streamed (the ABHA card: a file, not JSON): it is handed the open
        response and what it returns is returned; another 2XX is a :class:`ResponseValidationError` (no body to
        take). ``restart`` is asked before each retry whether the receiver can start over (``False``: no retry).

        Two ways through, one behaviour. The *plain* way is taken by a call of the service's API without a body
        whose token is at hand, with a connection slot free, no pause, no rate limit and the client's default time
        budget: its first attempt runs right here, in this one coroutine, building nothing it does not send. A
        shared limiter (``limiter=``) is asked here too, with the same :meth:`Limits.admit`, deadlines, report of
        the admission (sent or unsent, once) and failure as on the general way: one that admits at once costs a
        call little (issue 44: ``benchmarks/redis_bench.py``), and one that waits is waited for here, bounded by
        the budget (a pause that begins meanwhile is waited for too). Every other call, and whatever that first
        attempt meets besides a 2XX (a transport failure, an error status, a 401 to refresh, a retry, DEBUG
        logging), takes the general way (:meth:`_attempt`, :meth:`_conclude`, :meth:`_retry`), which the plain way
        hands over to with what it already has: nothing is sent twice. At bulk rates the plain way is about a tenth
        of a describe's CPU cheaper (``benchmarks/bulk_bench.py --ladder``).

        Telemetry: when the client's :class:`~health_async._telemetry.Telemetry` is live (an OpenTelemetry SDK is
        configured), the call is recorded as a :class:`~health_async._telemetry.Call` (``call``, made by
        :meth:`_recorded`, which calls this again with it): each attempt is recorded on either way, each wait and
        retry on the general way (the plain way has none). Without an SDK this costs one attribute test and a type
        check per call.
        """
        telemetry = self.telemetry
        if telemetry is not None and call is None and telemetry.live():
            return await self._recorded(
                telemetry, method, path, operation, route, params, headers, json, body, idempotent, encrypt, retry,
                timeout, url, decode, receive, restart,
            )  # fmt: skip
        if self._closed:
            raise ClientClosedError("the HealthClient is closed; create a new one")
        if self._loop is not asyncio.get_running_loop():
            self._bind_loop()
        started = time.monotonic()
        limits = self._limits
        http = self._http
        token = self.auth.current()
        if (
            token is not None
            and limits is not None
            and http is not None
            and body is None
            and json is None
            and url is None
            and receive is None
            and not encrypt
            and timeout is NOT_GIVEN
            # a shared limiter is asked here only for a call not recorded (a recorded one shows its wait as an event)
            and (limits.free_at <= started or (call is None and limits.shared_at <= started))
            and not http.closed
            and limits.enter()
        ):
            # The plain way: the general way's first attempt, less what this call does not need (see above). The
            # slot taken just above is given back by the ``finally`` below whatever happens: nothing runs between.
            failure: HealthError | None = None
            template = None if call is None else template_of(route, path)
            generation = self.auth.generation
            target = self._base_url.with_path(self._base_path + path, encoded=True)
            report = False  # the shared limiter's admission: reported sent or unsent once, as the general way does
            try:
                try:
                    first_timeout = self._first_timeout
                    if limits.free_at > started:  # a shared limiter to ask, and nothing else (Limits.shared_at)
                        report = await self._admit_shared(limits, operation, retry, started)
                        first_timeout = self._timeout_until(self._deadline_of(started), operation)
                    if call is not None:
                        call.begin_attempt(method, target, template)
                    try:
                        async with self._exchange(
                            http, method, target, params, self._headers(token, headers), None, first_timeout, None
                        ) as resp:
                            if report:  # stamped when the answer comes, as the general way does without a trace
                                report = False
                                limits.sent()
                            status = resp.status
                            answer = resp.headers
                            raw = await _read_capped(resp, self.config.max_response_size, operation)
                    except _SEND_ERRORS as exc:
                        error = self._failure(exc, operation, target, http)
                        if call is not None:
                            call.end_attempt(
                                None, exc if error is None else _public(error) if isinstance(error, _Overdue) else error
                            )
                        if error is None:
                            raise
                        raise error from _cause(exc, target)
                    except BaseException as exc:  # cancelled, or a bug: the attempt still ends
                        if call is not None:
                            call.end_attempt(None, exc)
                        raise
                except BaseException as exc:
                    if report:
                        limits.sent() if _may_have_left(exc) else limits.unsent()
                    raise
                finally:
                    limits.leave()
                if call is not None:
                    call.end_attempt(status)
                if 200 <= status < 300 and not logger.isEnabledFor(logging.DEBUG):
                    value = self._success(method, operation, status, raw, decode)
                    return await self._decrypt(value, operation) if _looks_encrypted(value) else value
            except HealthError as exc:
                failure = exc
            # handed over to the general way, with what the plain attempt already has
            req = self._request_of(
                method, target, route, path, operation, params, headers, None, None, idempotent, False, False, retry,
                timeout, started, decode, None,
            )  # fmt: skip
            req.first_timeout = None  # the plain attempt used the whole budget's timeout; a retry computes what is left
            if call is not None:
                req.call = call
                req.template = template
            if failure is None:
                try:
                    return await self._conclude(req, 1, status, answer, raw, token, generation, started, False)
                except HealthError as exc:
                    failure = exc
            return await self._retry(req, failure, restart)
        if encrypt:
            self.check_encryption()
        req = self._request_of(
            method, self._url(path) if url is None else url, route, path, operation, params, headers, json, body,
            idempotent, encrypt, url is not None, retry, timeout, started, decode, receive,
        )  # fmt: skip
        if call is not None:
            req.call = call
            req.template = template_of(route, path) if url is None else route
        try:
            return await self._attempt(req, 1)
        except HealthError as exc:
            failure = exc
        return await self._retry(req, failure, restart)

    async def _recorded(
        self,
        telemetry: Telemetry,
        method: str,
        path: str,
        operation: str,
        route: str | None,
        params: list[tuple[str, str]] | None,
        headers: Mapping[str, str] | None,
        json: Any,
        body: StreamBody | Callable[[], StreamBody] | None,
        idempotent: bool,
        encrypt: bool,
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
        url: URL | None,
        decode: Callable[[bytes], Any] | None,
        receive: Callable[[aiohttp.ClientResponse, _Request], Awaitable[Any]] | None,
        restart: Callable[[], bool] | None,
    ) -> Any:
        """:meth:`request`, recorded: the operation's span around it (current while it runs), ended with the error
        that leaves, if any."""
        call = telemetry.call(operation)
        error: BaseException | None = None
        try:
            return await self.request(
                method, path, operation=operation, route=route, params=params, headers=headers, json=json,
                body=body, idempotent=idempotent, encrypt=encrypt, retry=retry, timeout=timeout, url=url,
                decode=decode, receive=receive, restart=restart, call=call,
            )  # fmt: skip
        except BaseException as exc:
            error = exc
            raise
        finally:
            call.end(error)

    def _request_of(
        self,
        method: str,
        url: URL,
        route: str | None,
        path: str,
        operation: str,
        params: list[tuple[str, str]] | None,
        headers: Mapping[str, str] | None,
        json: Any,
        body: StreamBody | Callable[[], StreamBody] | None,
        idempotent: bool,
        encrypt: bool,
        foreign: bool,
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
        started: float,
        decode: Callable[[bytes], Any] | None,
        receive: Callable[[aiohttp.ClientResponse, _Request], Awaitable[Any]] | None,
    ) -> _Request:
        """The general way's view of a call (its budget counted from ``started``, when the call began)."""
        config = self.config
        if timeout is NOT_GIVEN:
            budget, first_timeout = config.timeout, self._budget_timeout
        else:
            budget, first_timeout = check_seconds("timeout", timeout), None
        req = _Request(
            method,
            url,
            route or path,
            operation,
            params,
            headers or _NO_HEADERS,
            None if json is None else json_body(json, f"{operation}: the request body"),
            body,
            idempotent,
            encrypt,
            foreign,
            None if budget is None else started + budget,
            config.retry if retry is NOT_GIVEN else retry,
            started,
        )
        req.first_timeout = first_timeout
        req.decode = decode
        req.receive = receive
        return req

    async def _retry(self, req: _Request, failure: HealthError, restart: Callable[[], bool] | None) -> Any:
        """After a failed first attempt: the attempts the call's policy allows, or ``failure`` raised. Every
        failure of a call leaves through here: the private :class:`_Overdue` (which only marks a timeout that is
        final) leaves as the public :class:`RequestTimeout` it is."""
        try:
            return await self._retrying(req, failure, restart)
        except _Overdue as exc:
            raise _public(exc) from None

    async def _retrying(self, req: _Request, failure: HealthError, restart: Callable[[], bool] | None) -> Any:
        policy = req.policy
        if policy.attempts <= 1 or not _retryable(policy, failure, req.idempotent, restart):
            raise failure
        first_failure: HealthError | None = failure
        attempt = 1

        async def call() -> Any:
            nonlocal first_failure, attempt
            if first_failure is not None:
                replayed, first_failure = first_failure, None
                raise replayed
            attempt += 1
            return await self._attempt(req, attempt)

        def stop(state: tenacity.RetryCallState) -> bool:
            if state.attempt_number >= policy.attempts:
                return True
            now = time.monotonic()
            if req.deadline is not None and now + state.upcoming_sleep >= req.deadline:
                return True  # the call's own time budget: no sleep that leaves no time for the attempt
            deadline = policy.deadline
            return deadline is not None and now - req.started + state.upcoming_sleep > deadline

        def wait(state: tenacity.RetryCallState) -> float:
            assert state.outcome is not None
            return policy.delay(state.attempt_number, state.outcome.exception())

        def before_sleep(state: tenacity.RetryCallState) -> None:
            assert state.outcome is not None
            if req.call is not None:
                req.call.retrying(state.outcome.exception(), state.upcoming_sleep, state.attempt_number)
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
            retry=tenacity.retry_if_exception(lambda e: _retryable(policy, e, req.idempotent, restart)),
            before_sleep=before_sleep,
            reraise=True,
        )
        return await retrying(call)

    async def auth_request(self, path: str, *, operation: str, json: Any, headers: Mapping[str, str]) -> Any:
        """A token call: no bearer token of ours, no limits (so it cannot deadlock behind them), no retries."""
        self._bind_loop()
        timeout = self.config.timeout
        started = time.monotonic()
        req = _Request(
            method="POST",
            url=self._url(path),
            route=path,
            operation=operation,
            params=None,
            headers=headers,
            payload=json_body(json, f"{operation}: the request body"),
            body=None,
            idempotent=False,
            encrypt=False,
            foreign=False,
            deadline=None if timeout is None else started + timeout,
            policy=_NO_RETRY,
            started=started,
        )
        try:
            status, resp_headers, raw = await self._send(self._open(), req, None, await self._prepare(req))
        except _Overdue as exc:
            raise _public(exc) from None
        if status >= 300:
            raise await self._error(req, status, resp_headers, raw)
        data = self._decode(req.method, operation, status, raw)
        return await self._decrypt(data, operation) if _looks_encrypted(data) else data

    # ---------------------------------------------------------------- one attempt, the general way

    async def _attempt(self, req: _Request, attempt: int, refreshed: bool = False) -> Any:
        """One attempt: the body, a slot, the pause and the rates, the send, then :meth:`_conclude`. ``refreshed``:
        the token was just refreshed after a 401 of this attempt (another 401 is final).

        Every limit taken here is given back in the scope that took it, by a ``finally`` that begins right after
        it is taken: the slot (:meth:`Limits.leave`), and the rate charge and the shared limiter's admission, which
        are reported exactly once, sent or unsent (:meth:`_stamp`). The body is prepared before any of them, so a
        preparation that raises, is cancelled or outlasts the call's budget holds nothing."""
        http = self._http
        if http is None or self._closed or http.closed:
            http = self._open()
        limits = self._limits or self.limits
        auth = self.auth
        if req.foreign:
            token = None
        else:
            token = auth.current()
            if token is None:
                req.first_timeout = None  # time passes while the token is fetched: compute what is left
                token = await self._within(req, auth.token(self), "the access token")
        generation = auth.generation  # of the token about to be sent (read after any fetch above)
        body = None if req.payload is None and req.body is None else await self._prepare(req)
        origin = req.origin
        # Limits hold at the moment of sending: the request takes its slot (its connection) first, and only then
        # is checked against the pause and charged to the rate (see Limits), so requests that waited for a
        # connection are held back by a pause that began meanwhile. A request to a paused storage host waits
        # before it takes a slot: it holds none, and never blocks the API.
        call = req.call
        if origin is not None and limits.paused_for(origin) > 0:
            req.first_timeout = None
            waiting = time.monotonic()
            await self._admit(limits, req, pause_only=True)
            if call is not None:
                call.waited("retry_after", time.monotonic() - waiting)
        if not limits.enter():
            req.first_timeout = None  # time passes while waiting for a slot: compute what is left
            waiting = time.monotonic()
            await self._within(req, limits.wait_slot(), "a connection slot (max_connections)")
            if call is not None:
                call.waited("connection_slot", time.monotonic() - waiting)
        try:  # the slot, taken just above
            if limits.must_wait if origin is None else limits.must_wait_for(origin):
                req.first_timeout = None
                if call is None:
                    req.rated = await self._admit(limits, req)
                else:
                    req.rated = await self._admit_recorded(limits, req, call)
            left = True  # for the rate: whether the request may have reached the service
            try:  # the rate charge and the shared admission, taken just above (when req.rated)
                begun = time.monotonic()
                if call is None:
                    status, headers, raw = await self._send(http, req, token, body)
                else:
                    call.begin_attempt(req.method, req.url, req.template)
                    try:
                        status, headers, raw = await self._send(http, req, token, body)
                    except BaseException as exc:
                        call.end_attempt(None, _public(exc) if isinstance(exc, _Overdue) else exc)
                        raise
                    call.end_attempt(status)
            except BaseException as exc:
                left = _may_have_left(exc)
                raise
            finally:
                if req.rated:  # not reported by the send itself (its headers going out, or its answer coming)
                    self._stamp(req, left)
        finally:
            limits.leave()
        return await self._conclude(req, attempt, status, headers, raw, token, generation, begun, refreshed)

    async def _prepare(self, req: _Request) -> _Body:
        """The body of one attempt and the headers that describe it, made before any limit is taken: the JSON
        (encrypted into a JWE envelope when asked, in a worker thread for a large one) or a fresh stream.

        The encryption counts in the call's time budget: past its deadline the call fails as not sent
        (:class:`RequestTimeout`, ``sent=False``), and the prebuilt first timeout no longer stands for what is
        left. Judgement call: the worker thread cannot be stopped; it finishes in the background and its
        envelope is dropped."""
        payload = req.payload
        if payload is not None:
            headers = {"Content-Type": "application/json"}
            if req.encrypt:
                req.first_timeout = None  # time passes while encrypting: compute what is left
                payload = await self._within(req, self._encrypt(payload), "the request body's encryption")
                headers[C.H_ENCRYPTION] = "JWE"
            if len(payload) <= _LARGE_BODY:
                return payload, headers
            # a large body as a file-like object: aiohttp warns (ResourceWarning) for bytes over 1 MiB, which is an
            # error in an application run with -W error; its encoding took time too: compute what is left
            req.first_timeout = None
            return io.BytesIO(payload), headers
        assert req.body is not None
        stream = req.body() if callable(req.body) else req.body
        headers = dict(stream.headers)
        headers["Content-Type"] = stream.content_type
        headers["Content-Length"] = str(stream.size)
        return stream.factory(), headers  # an async generator: nothing opened until aiohttp reads it

    async def _conclude(
        self,
        req: _Request,
        attempt: int,
        status: int,
        headers: Mapping[str, str],
        raw: bytes,
        token: str | None,
        generation: int,
        begun: float,
        refreshed: bool,
    ) -> Any:
        """What an attempt's answer means: logged at DEBUG; a 401 refreshes the token once and sends again; an
        error status raises; a success is decoded."""
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
        if status == 401 and not refreshed and token is not None and self.auth.can_refresh:
            await self._within(req, self.auth.refresh(self, generation), "a new access token")
            req.first_timeout = None
            return await self._attempt(req, attempt, refreshed=True)
        if status >= 300:  # a redirect is never followed: it is an error, not the service's answer
            raise await self._error(req, status, headers, raw)
        if req.receive is not None:
            return req.received
        value = self._success(req.method, req.operation, status, raw, req.decode)
        return await self._decrypt(value, req.operation) if _looks_encrypted(value) else value

    def _success(
        self, method: str, operation: str, status: int, raw: bytes, decode: Callable[[bytes], Any] | None
    ) -> Any:
        """A 2XX body: the fast decoder's value when it takes the body, else its JSON (an envelope, if it is one,
        is then decrypted by the caller: a decoder's value is a model, never an envelope)."""
        if decode is not None and status == 200:
            value = decode(raw)
            if value is not None:
                return value
        return self._decode(method, operation, status, raw)

    async def _within(self, req: _Request, wait: Awaitable[T], what: str) -> T:
        """``wait`` (for a slot, a token), bounded by the call's deadline: past it, :class:`_Overdue` (not sent)
        instead of waiting in vain. The waits bounded so are cancel-safe: a slot handed over as the deadline
        passes is passed on, and a token fetch goes on for the other callers (it is shared and shielded)."""
        try:
            return await within(wait, req.deadline, what)
        except Overdue:
            raise _Overdue(
                f"{req.operation}: not sent: waiting for {what} outlasted this call's time budget", sent=False
            ) from None

    async def _admit(self, limits: Limits, req: _Request, *, pause_only: bool = False) -> bool:
        """Wait for the pause and the rates, no longer than the call's budget, its policy's deadline and its
        ``retry_after_cap`` allow: past those, fail at once (nothing was sent) instead of waiting in vain.
        Returns whether the request was charged to the rate (then :meth:`_send` reports it sent or not)."""
        pause_deadline = time.monotonic() + req.policy.retry_after_cap
        if req.deadline is not None and req.deadline < pause_deadline:
            pause_deadline = req.deadline
        try:
            if pause_only:
                await limits.wait_pause(pause_deadline, req.origin)
                return False
            return await limits.admit(req.deadline, pause_deadline, req.origin)
        except Overdue as exc:
            raise _overdue(req.operation, exc) from None

    async def _admit_shared(
        self, limits: Limits, operation: str, retry: RetryPolicy | NotGiven, started: float
    ) -> bool:
        """:meth:`_admit` for the plain way of a call with the default budget that only the shared limiter may
        hold back (no rate limit, no pause when it began: :attr:`Limits.shared_at`), without building the general
        way's request: the same :meth:`Limits.admit`, deadlines and failure. Returns whether to report it."""
        deadline = self._deadline_of(started)
        policy = self.config.retry if retry is NOT_GIVEN else retry
        pause_deadline = time.monotonic() + policy.retry_after_cap
        if deadline is not None and deadline < pause_deadline:
            pause_deadline = deadline
        try:
            return await limits.admit(deadline, pause_deadline)
        except Overdue as exc:
            raise _overdue(operation, exc) from None

    def _deadline_of(self, started: float) -> float | None:
        """The deadline of a call with the client's default time budget that began at ``started``."""
        budget = self.config.timeout
        return None if budget is None else started + budget

    async def _admit_recorded(self, limits: Limits, req: _Request, call: Call) -> bool:
        """:meth:`_admit`, its waits recorded: the ``Retry-After`` pause first (``retry_after``), then the rates
        (``rate_limit``: the client's own, ``shared_limit``: the shared limiter, asked after it); a pause that begins
        while waiting for them counts as theirs. Waits under a millisecond are not worth an event."""
        waiting = time.monotonic()
        if limits.paused_for(req.origin) > 0:
            await self._admit(limits, req, pause_only=True)
            paused = time.monotonic()
            call.waited("retry_after", paused - waiting)
            waiting = paused
        rated = await self._admit(limits, req)
        waited = time.monotonic() - waiting
        if waited >= 0.001:
            shared = limits.shared is not None and req.origin is None
            call.waited("rate_limit" if limits.rate is not None or not shared else "shared_limit", waited)
        return rated

    def _attempt_timeout(self, req: _Request) -> aiohttp.ClientTimeout:
        """This attempt's aiohttp timeout: what is left of the call's budget, with the connect timeout kept and
        always shorter than the total, so a stalled connect is reported as such (``sent=False``, safe to retry)."""
        deadline = req.deadline
        if deadline is None:
            return self._timeout
        first = req.first_timeout
        if first is not None:
            # The first send of a call with the default budget, nothing awaited since the call began: what is left
            # is the whole budget less microseconds, so the prebuilt timeout stands for it (once only).
            req.first_timeout = None
            return first
        return self._timeout_until(deadline, req.operation)

    def _timeout_until(self, deadline: float | None, operation: str) -> aiohttp.ClientTimeout:
        """The aiohttp timeout of an attempt that must end by ``deadline`` (see :meth:`_attempt_timeout`)."""
        if deadline is None:
            return self._timeout
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Overdue(f"{operation}: not sent: the call's time budget ran out", sent=False)
        connect = self.config.connect_timeout
        if connect is None or connect >= remaining:
            connect = remaining * 0.9
        return aiohttp.ClientTimeout(total=remaining, connect=connect)

    def _headers(self, token: str, extra: Mapping[str, str] | None) -> dict[str, str]:
        """A call's headers to the service's API: ours with the bearer token (built once per token), then its own."""
        seen, bearer = self._bearer
        if seen != token:
            bearer = {**self._base_headers, C.H_AUTHORIZATION: f"Bearer {token}"}
            self._bearer = (token, bearer)
        return {**bearer, **extra} if extra else dict(bearer)

    def _exchange(
        self,
        http: aiohttp.ClientSession,
        method: str,
        url: URL,
        params: list[tuple[str, str]] | None,
        headers: dict[str, str],
        data: Any,
        timeout: aiohttp.ClientTimeout,
        trace: _Request | None,
    ) -> Any:
        """The one aiohttp call every request goes through (an ``async with`` of the response)."""
        return http.request(
            method,
            url,
            params=params,
            headers=headers,
            data=data,
            timeout=timeout,
            allow_redirects=False,  # never: another origin must not get our body, headers or trust
            raise_for_status=False,  # whatever a caller-owned session says: statuses are mapped here
            auto_decompress=True,  # likewise; the size cap applies to the decoded bytes (_read_capped)
            proxy=self.config.proxy,
            trace_request_ctx=trace,
        )

    async def _send(
        self, http: aiohttp.ClientSession, req: _Request, token: str | None, body: _Body | None
    ) -> tuple[int, Mapping[str, str], bytes]:
        """Send one attempt, its ``body`` prepared (:meth:`_prepare`); a request charged to the rate is reported
        sent here when its headers go out (the client's own session) or its answer comes (a caller's session). Any
        other report is its caller's (:meth:`_attempt`)."""
        if req.foreign:  # another origin: nothing of ours goes there
            headers = {"User-Agent": USER_AGENT, **req.headers}
        elif token is None:  # token calls bring their own headers
            headers = {**self._base_headers, **req.headers}
        else:
            headers = self._headers(token, req.headers)
        data: Any = None
        if body is not None:
            data, described = body
            headers.update(described)
        try:
            async with self._exchange(
                http,
                req.method,
                req.url,
                req.params,
                headers,
                data,
                self._attempt_timeout(req),
                req if req.rated else None,
            ) as resp:
                if req.rated:  # a caller's session (no trace of ours): stamped when the answer comes, later than sent
                    self._stamp(req, True)
                if req.receive is not None and resp.status < 300:
                    if resp.status != 200:
                        raise ResponseValidationError(
                            f"{req.operation}: the service answered HTTP {resp.status} without a body"
                        )
                    req.received = await req.receive(resp, req)
                    return resp.status, resp.headers, b""
                return (
                    resp.status,
                    resp.headers,
                    await _read_capped(resp, self.config.max_response_size, req.operation),
                )
        except _SEND_ERRORS as exc:
            error = self._failure(exc, req.operation, req.url, http)
            if error is None:
                raise
            raise error from _cause(exc, req.url)

    def _stamp(self, req: _Request, sent: bool) -> None:
        """Report a request charged to the rate as sent (now) or as never sent (once per attempt)."""
        req.rated = False
        limits = self._limits
        if limits is not None:
            limits.sent(None, req.origin) if sent else limits.unsent(req.origin)

    async def _on_headers_sent(self, _: Any, context: Any, __: Any) -> None:
        """aiohttp's trace signal of the client's own session: the request's headers went out, now."""
        req = context.trace_request_ctx
        if type(req) is _Request and req.rated:
            self._stamp(req, True)

    def _failure(self, exc: BaseException, operation: str, url: URL, http: aiohttp.ClientSession) -> HealthError | None:
        """Our error for an exception of the send (one of ``_SEND_ERRORS``); ``None``: not the transport's, a bug
        to re-raise as it is."""
        if isinstance(exc, RuntimeError):  # aiohttp: "Session is closed" when aclose() (ours or the owner's) raced us
            if self._closed or http.closed:
                return ClientClosedError(f"{operation}: the HTTP session was closed during the request")
            return None
        if self._closed:
            return ClientClosedError(f"{operation}: the HealthClient was closed during the request")
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return RequestTimeout(f"{operation}: timed out connecting to the service", sent=False)
        if isinstance(exc, asyncio.TimeoutError):
            return RequestTimeout(f"{operation}: the request timed out")
        if isinstance(exc, aiohttp.ClientConnectorCertificateError):
            return TLSVerificationError(f"{operation}: TLS certificate verification failed for {url.host}", sent=False)
        if isinstance(exc, aiohttp.ClientConnectorError):
            return TransportError(f"{operation}: cannot connect to {url.host}: {type(exc).__name__}", sent=False)
        if isinstance(exc, aiohttp.ClientPayloadError):
            return TransportError(f"{operation}: the response body was cut off")
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return TransportError(f"{operation}: the server closed the connection")
        return TransportError(f"{operation}: request failed: {type(exc).__name__}")

    async def _error(self, req: _Request, status: int, headers: Mapping[str, str], raw: bytes) -> ApiError:
        """The typed error of an error response; a 429/503 ``Retry-After`` also pauses the whole client."""
        error = error_from_response(status, headers, await self._error_body(raw), operation=req.operation)
        if error.retry_after is not None and status in (429, 503):
            # the origin that asked: a presigned storage host's pause never holds back the API
            self.limits.pause(min(error.retry_after, self.config.retry.retry_after_cap), req.origin)
        return error

    async def read_json(self, operation: str, raw: bytes | memoryview) -> Any:
        """A 200's body that a deferring ``decode`` kept as it is (``decode=memoryview``: ``describe_many`` decodes
        in its consumer), read as :meth:`request` reads one: its JSON, decrypted when it is an envelope."""
        data = self._decode("GET", operation, 200, raw)
        return await self._decrypt(data, operation) if _looks_encrypted(data) else data

    @staticmethod
    def _decode(method: str, operation: str, status: int, raw: bytes | memoryview) -> Any:
        """A success body as JSON (``None`` for 204, and for an empty 202: "Accepted", as ABDM's calls answer)."""
        if status == 204 or (not raw and (status == 202 or method in _EMPTY_OK)):
            return None
        try:
            return _json.loads(raw)
        except _json.JSONDecodeError:
            raise ResponseValidationError(
                f"{operation}: the service answered HTTP {status} with a body that is not JSON"
            ) from None

    async def _error_body(self, raw: bytes) -> Any:
        if not raw:
            return ""
        try:
            data = _json.loads(raw)
        except _json.JSONDecodeError:
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
        return _json.dumps(envelope)

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
            return _json.loads(plaintext)
        except _json.JSONDecodeError:
            raise ResponseValidationError(f"{operation}: the decrypted response is not JSON") from None

    def check_encryption(self) -> None:
        """Refuse, before anything is sent, an encrypted request this client cannot make: it needs the shared key
        (``encryption_key``) and its id (``key_id``), the ``kid`` every request envelope carries: the service finds
        the key by it (service interface, 2.8). Responses are read with the key alone."""
        if self.config.encryption_key is None:
            raise InvalidRequest("encrypt=True needs an encryption_key on the HealthClient")
        if self.config.key_id is None:
            raise InvalidRequest("encrypt=True needs a key_id on the HealthClient: the kid of the shared key")

    def _url(self, path: str) -> URL:
        """The base URL with ``path`` (already encoded) appended: built, not parsed (parsing a new URL string
        per request is a measurable share of a describe)."""
        return self._base_url.with_path(self._base_path + path, encoded=True)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Start a helper task owned by this client: cancelled (and awaited) by :meth:`aclose`. On a closed client
        nothing starts (``coro`` is closed): :class:`ClientClosedError`, so no task outlives the client."""
        if self._closed:
            coro.close()
            raise ClientClosedError("the HealthClient is closed; create a new one")
        try:
            self._bind_loop()
        except ClientLoopError:
            coro.close()
            raise
        return keep(self.tasks, coro)


class _Request:
    """One logical request, as the chokepoint sees it (a plain slotted class: built on every call)."""

    __slots__ = (
        "body",
        "call",
        "deadline",
        "decode",
        "encrypt",
        "first_timeout",
        "foreign",
        "headers",
        "idempotent",
        "method",
        "operation",
        "origin",
        "params",
        "payload",
        "policy",
        "rated",
        "receive",
        "received",
        "route",
        "started",
        "template",
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
        payload: bytes | None,
        body: StreamBody | Callable[[], StreamBody] | None,
        idempotent: bool,
        encrypt: bool,
        foreign: bool,
        deadline: float | None,
        policy: RetryPolicy,
        started: float,
    ) -> None:
        self.method = method
        self.url = url
        self.route = route
        self.operation = operation
        self.params = params
        self.headers = headers
        #: The JSON body, encoded once before the first send (:func:`json_body`), or None.
        self.payload = payload
        self.body = body
        self.idempotent = idempotent
        self.encrypt = encrypt
        self.foreign = foreign
        #: ``time.monotonic()`` instant by which the whole call must end (None: no limit).
        self.deadline = deadline
        self.policy = policy
        #: ``time.monotonic()`` instant the call began (its policy's ``deadline`` counts from there).
        self.started = started
        #: The prebuilt aiohttp timeout the first send may use (see :meth:`Session._attempt_timeout`), or None.
        self.first_timeout: aiohttp.ClientTimeout | None = None
        #: The fast typed decoder of a 200's bytes, or None (see :meth:`Session.request`).
        self.decode: Callable[[bytes], Any] | None = None
        #: The origin of a request to another host (its pauses are its own); None for the service's API.
        self.origin: URL | None = url.origin() if foreign else None
        #: Charged to the rate and not yet reported sent (see :meth:`Session._stamp`).
        self.rated = False
        #: The receiver of a 200's streamed body, or None (see :meth:`Session.request`); what it returned.
        self.receive: Callable[[aiohttp.ClientResponse, _Request], Awaitable[Any]] | None = None
        self.received: Any = None
        #: The call's telemetry (see :meth:`Session._recorded`), or None; the route template as given (None when
        #: the caller gave none: the path is then never recorded, it may hold ids).
        self.call: Call | None = None
        self.template: str | None = None


#: Bytes above which a JSON body is handed to aiohttp as a file-like object (aiohttp's own warning threshold).
_LARGE_BODY: Final = 1 << 20

#: An attempt's body as :meth:`Session._prepare` makes it: what aiohttp sends, and the headers that describe it.
_Body = tuple[Any, dict[str, str]]

#: Methods whose success may come with an empty body (the service answers PATCH and DELETE with 200 and nothing).
_EMPTY_OK = frozenset({"DELETE", "PATCH"})


class _Overdue(RequestTimeout):
    """Not sent because the call's time budget would not allow it: final, never retried. Private: it leaves the
    session as a plain :class:`RequestTimeout` (:func:`_public`), so no private name shows in a user's traceback
    or log."""


def _public(exc: _Overdue) -> RequestTimeout:
    return RequestTimeout(str(exc), sent=False)


def _overdue(operation: str, exc: Overdue) -> _Overdue:
    """The failure of a call whose wait for admission (``exc``) would outlast its time budget: not sent, final."""
    return _Overdue(
        f"{operation}: not sent: waiting for {exc.reason} ({exc.wait:.1f} s) would outlast this call's "
        "time budget (timeout, RetryPolicy deadline or retry_after_cap)",
        sent=False,
    )


def _may_have_left(exc: BaseException) -> bool:
    """Whether an attempt that raised ``exc`` may have reached the service (for the rate: reported sent, not
    unsent). Only a transport error that says so (``sent=False``: a refused connection, an overdue call) did not;
    a cancellation may have come after the request left, so it counts as sent (the safe side for a rate)."""
    return not isinstance(exc, TransportError) or exc.sent


def _retryable(
    policy: RetryPolicy, exc: BaseException, idempotent: bool, restart: Callable[[], bool] | None = None
) -> bool:
    """Whether another attempt is worth it; ``restart`` (a streamed body's receiver) must be able to start over."""
    return (
        not isinstance(exc, _Overdue)
        and policy.should_retry(exc, idempotent=idempotent)
        and (restart is None or restart())
    )


def _client_timeout(total: float | None, connect: float | None) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=total, connect=connect)


def _budget_timeout(total: float, connect: float | None) -> aiohttp.ClientTimeout:
    """What :meth:`Session._attempt_timeout` gives with ``total`` seconds left (the connect timeout kept shorter)."""
    if connect is None or connect >= total:
        connect = total * 0.9
    return aiohttp.ClientTimeout(total=total, connect=connect)


_NO_RETRY: Final = RetryPolicy.never()
#: What sending can raise besides our own errors: mapped by :meth:`Session._failure`.
_SEND_ERRORS: Final = (TimeoutError, aiohttp.ClientError, OSError, RuntimeError)
_NO_HEADERS: Final[Mapping[str, str]] = {}


def _read_capped(resp: aiohttp.ClientResponse, cap: int, operation: str) -> Awaitable[bytes]:
    """The body, refused with :class:`ResponseTooLarge` past ``cap`` bytes: at once when ``Content-Length``
    says so, else while reading. A plain function so the common case costs no extra coroutine."""
    length = resp.content_length
    if length is None or hdrs.CONTENT_ENCODING in resp.headers:
        # Content-Length counts the *encoded* bytes: a small gzip body can inflate to hundreds of MB, so an
        # encoded body is read (decoded) step by step, the cap applying to what it decodes to
        return _read_chunked(resp, cap, operation)
    if length > cap:
        raise ResponseTooLarge(f"{operation}: the response is {length} bytes, over the {cap}-byte limit")
    return resp.read()


async def _read_chunked(resp: aiohttp.ClientResponse, cap: int, operation: str) -> bytes:
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(64 * 1024):
        buf += chunk
        if len(buf) > cap:
            raise ResponseTooLarge(f"{operation}: the response is over the {cap}-byte limit")
    return bytes(buf)


def json_body(value: Any, what: str) -> bytes:
    """``value`` as the JSON bytes that are sent, encoded once before anything is: a value JSON cannot carry (an
    object of another type, a string with a lone surrogate) is :class:`InvalidRequest` naming ``what`` (the call's
    body, a bundle), never the value."""
    try:
        return _json.dumps(value)
    except (TypeError, ValueError, OverflowError):  # UnicodeEncodeError is a ValueError
        raise InvalidRequest(
            f"{what} cannot be sent as JSON (a value of another type, or text that is not valid Unicode)"
        ) from None


def _cause(exc: BaseException, url: URL) -> BaseException | None:
    """The transport's exception, kept as our error's ``__cause__`` for debugging, unless its text carries the
    request's path or query (aiohttp's ``ConnectionTimeoutError`` names the whole URL): ids, a mobile number in a
    search, a presigned link's signature would then reach every traceback and log of the error."""
    tail = (url.raw_path_qs, url.path_qs)
    if url.raw_path_qs in ("", "/"):
        return exc
    text = f"{exc} {exc!r} " + " ".join(str(arg) for arg in exc.args)
    return None if any(part in text for part in tail) else exc


def _looks_encrypted(data: Any) -> bool:
    """Cheap first test for an encrypted body; :func:`health_async.jwe.is_envelope` has the last word."""
    return type(data) is dict and "ciphertext" in data
