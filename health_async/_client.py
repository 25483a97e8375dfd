"""``HealthClient``: configuration, lifecycle and the resource namespaces."""

from __future__ import annotations

import os
from functools import cached_property
from types import TracebackType
from typing import TYPE_CHECKING, Any

import aiohttp

from . import _constants as C
from . import _telemetry
from ._auth import ClientCredentials, TokenProvider, make_auth
from ._config import check_header_value, check_rate, check_seconds, normalize_base_url, optional_header_value
from ._limits import SharedLimiter
from ._logging import setup_from_env
from ._retry import RetryPolicy
from ._session import ClientConfig, Session
from .errors import InvalidArgumentType, InvalidRequest

if TYPE_CHECKING:
    from .jwe import JweKey
    from .resources import Abdm, Abha, Cases, Documents, Hfr, Hpr, Patients, Profiles, WebhookSubscriptions

__all__ = ["HealthClient"]


class HealthClient:
    """Async client of the Health Records, ABHA registration and Profile service.

    Create one per application and share it: it holds a connection pool. Use it as an async context manager,
    or call :meth:`aclose` when done::

        async with HealthClient(token="...", client_id="...", user_id="oid") as client:
            doc = await client.documents.describe("doc-id")

    Args:
        base_url: :data:`PRODUCTION_URL` (default), :data:`DEVELOPMENT_URL`, or any URL. Plain ``http://`` is
            refused except to loopback unless ``allow_insecure_http=True``.
        token: a static bearer token. Exactly one of ``token``, ``token_provider`` and ``auth`` is required.
        token_provider: an async callable returning a token; called on first use and after a 401.
        auth: :class:`ClientCredentials` to log in and refresh automatically.
        client_id: sent as the ``client-id`` header on every call (the profile operation requires it). Defaults
            to the credentials' client id when ``auth`` is given.
        user_id: default OID for ``X-Pt-Id`` (describe, list, upload, aadhaar init).
        partner_user_id, partner_hip_id: defaults for ``X-Partner-Pt-Id`` / ``X-Hip-Id`` on every ``client.abha``,
            ``client.hpr`` and ``client.hfr`` call.
        retry: the :class:`RetryPolicy` (default ``RetryPolicy()``); ``RetryPolicy.never()`` disables retries.
        timeout: seconds for a whole request, ``None`` for no limit. connect_timeout: seconds to connect.
        max_connections: requests in flight at once across all calls of this client (and pool size).
        rate_limit: optional requests per second across all calls of this client.
        max_upload_size: the direct upload route's limit (the live service takes 10 MB there); a larger PDF (up to
            25 MB) goes through the presigned route, anything else larger is refused before sending.
        max_response_size: response bodies larger than this are refused with :class:`ResponseTooLarge`.
        encryption_key: the shared JWE key (16-character string, or 32 raw bytes) for payload encryption.
        key_id: the ``kid`` sent in request envelopes.
        encrypt: encrypt aadhaar init and upload requests by default (per call: ``encrypt=``).
        allow_insecure_http: allow plain ``http://`` to a non-loopback host.
        session: a caller-owned :class:`aiohttp.ClientSession`; used as is and never closed by the client.
        proxy: an HTTP(S) proxy URL for every request (``http://user:pass@proxy:3128``); HTTPS to the service is
            tunnelled through it (CONNECT), so the proxy sees neither tokens nor health data.
        trust_env: read proxies from ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY`` (and ``.netrc``), as aiohttp
            does with ``trust_env=True``. Off by default, as in aiohttp: an environment variable should not
            silently route health data elsewhere (httpx trusts the environment by default; we chose aiohttp's
            explicit opt-in). ``HEALTH_ASYNC_PROXY`` / ``HEALTH_ASYNC_TRUST_ENV=1`` set them for ``from_env`` and
            the CLI. Ignored with a caller-owned ``session`` (set ``trust_env`` on it).
        limiter: a :class:`SharedLimiter` shared with other clients (other processes, Ray actors): one
            account-wide rate and ``Retry-After`` pause, asked before every request besides this client's own.
        telemetry: OpenTelemetry traces and metrics (the ``otel`` extra; see the telemetry guide). ``None``
            (default): on when ``opentelemetry-api`` is installed, as natively instrumented libraries do: the API
            records nothing until the application configures an SDK, and until then the client skips building
            spans altogether (a type check per call). ``False``: off, nothing is asked of OpenTelemetry.
            ``True``: on, and :class:`InvalidRequest` when ``opentelemetry-api`` is not installed. The global
            tracer and meter providers are used. No id, address, number, token, file name, body or query string
            is ever recorded: operation names, route templates, statuses, error class names and durations only.
    """

    def __init__(
        self,
        *,
        base_url: str = C.PRODUCTION_URL,
        token: str | None = None,
        token_provider: TokenProvider | None = None,
        auth: ClientCredentials | None = None,
        client_id: str | None = None,
        user_id: str | None = None,
        partner_user_id: str | None = None,
        partner_hip_id: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = C.DEFAULT_TIMEOUT,
        connect_timeout: float | None = C.DEFAULT_CONNECT_TIMEOUT,
        max_connections: int = C.DEFAULT_MAX_CONNECTIONS,
        rate_limit: float | None = None,
        max_upload_size: int = C.DEFAULT_MAX_UPLOAD_SIZE,
        max_response_size: int = C.DEFAULT_MAX_RESPONSE_SIZE,
        encryption_key: str | bytes | JweKey | None = None,
        key_id: str | None = None,
        encrypt: bool = False,
        allow_insecure_http: bool = False,
        session: aiohttp.ClientSession | None = None,
        limiter: SharedLimiter | None = None,
        proxy: str | None = None,
        trust_env: bool = False,
        telemetry: bool | None = None,
    ) -> None:
        setup_from_env()
        auth_impl = make_auth(token, token_provider, auth)
        if client_id is None and auth is not None:
            client_id = auth.client_id
        self.base_url = normalize_base_url(base_url, allow_insecure_http=allow_insecure_http)
        self.client_id = optional_header_value("client_id", client_id)
        self.user_id = optional_header_value("user_id", user_id)
        self.partner_user_id = optional_header_value("partner_user_id", partner_user_id)
        self.partner_hip_id = optional_header_value("partner_hip_id", partner_hip_id)
        timeout = check_seconds("timeout", timeout)
        connect_timeout = check_seconds("connect_timeout", connect_timeout)
        if max_connections < 1:
            raise InvalidRequest("max_connections must be >= 1")
        if rate_limit is not None:
            check_rate(rate_limit)
        if max_upload_size < 1 or max_response_size < 1:
            raise InvalidRequest("max_upload_size and max_response_size must be >= 1 byte")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidArgumentType("retry must be a RetryPolicy")
        if limiter is not None and not isinstance(limiter, SharedLimiter):
            raise InvalidArgumentType("limiter must have async acquire() and pause(seconds) (a SharedLimiter)")
        if session is not None and not isinstance(session, aiohttp.ClientSession):
            raise InvalidArgumentType("session must be an aiohttp.ClientSession")
        if proxy is not None:
            proxy = normalize_base_url(proxy, allow_insecure_http=True, name="proxy")
        if session is not None and session._base_url is not None:
            raise InvalidRequest("a session= with a base_url cannot be used: the client builds absolute URLs")
        key = None
        if encryption_key is not None:
            from . import jwe

            key = jwe.derive_key(encryption_key)
        elif encrypt:
            raise InvalidRequest("encrypt=True needs an encryption_key")
        if key_id is not None:
            check_header_value("key_id", key_id)
        self.encrypt = encrypt
        self.max_upload_size = max_upload_size
        config = ClientConfig(
            base_url=self.base_url,
            client_id=self.client_id,
            retry=retry or RetryPolicy(),
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
            rate_limit=rate_limit,
            max_response_size=max_response_size,
            encryption_key=key,
            key_id=key_id,
            limiter=limiter,
            proxy=proxy,
            trust_env=bool(trust_env),
        )
        self._session = Session(config, auth_impl, session, _telemetry.resolve(telemetry))

    @classmethod
    def from_env(cls, **overrides: Any) -> HealthClient:
        """A client configured from ``HEALTH_ASYNC_*`` environment variables; keyword arguments win.

        Reads ``HEALTH_ASYNC_BASE_URL`` (default production), ``_TOKEN`` (or ``_CLIENT_ID`` with
        ``_CLIENT_SECRET`` for client credentials), ``_CLIENT_ID``, ``_USER_ID``, ``_ENCRYPTION_KEY``, ``_KEY_ID``,
        ``_PROXY`` and ``_TRUST_ENV``.
        """
        env = os.environ
        kwargs: dict[str, Any] = {}
        for key, name in (
            ("base_url", C.ENV_BASE_URL),
            ("client_id", C.ENV_CLIENT_ID),
            ("user_id", C.ENV_USER_ID),
            ("encryption_key", C.ENV_ENCRYPTION_KEY),
            ("key_id", C.ENV_KEY_ID),
            ("proxy", C.ENV_PROXY),
        ):
            if env.get(name):
                kwargs[key] = env[name]
        trust = env.get(C.ENV_TRUST_ENV, "").strip().lower()
        if trust in ("1", "true", "yes", "on"):
            kwargs["trust_env"] = True
        elif trust not in ("", "0", "false", "no", "off"):  # a typo must not silently mean "no proxy"
            raise InvalidRequest(f"{C.ENV_TRUST_ENV} must be 1 or 0 (true/false, yes/no, on/off)")
        if not ({"token", "token_provider", "auth"} & overrides.keys()):
            if env.get(C.ENV_TOKEN):
                kwargs["token"] = env[C.ENV_TOKEN]
            elif env.get(C.ENV_CLIENT_ID) and env.get(C.ENV_CLIENT_SECRET):
                kwargs["auth"] = ClientCredentials(env[C.ENV_CLIENT_ID], env[C.ENV_CLIENT_SECRET])
            else:
                raise InvalidRequest(
                    f"set {C.ENV_TOKEN}, or {C.ENV_CLIENT_ID} and {C.ENV_CLIENT_SECRET}, to authenticate"
                )
        kwargs.update(overrides)
        return cls(**kwargs)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"HealthClient(base_url={self.base_url!r}, {state})"

    # ---------------------------------------------------------------- resources

    @cached_property
    def documents(self) -> Documents:
        """Describe, upload and list documents: :class:`~health_async.resources.Documents`."""
        from .resources import Documents

        return Documents(self)

    @cached_property
    def abha(self) -> Abha:
        """ABHA registration: :class:`~health_async.resources.Abha`."""
        from .resources import Abha

        return Abha(self)

    @cached_property
    def profiles(self) -> Profiles:
        """EMR user profiles: :class:`~health_async.resources.Profiles`."""
        from .resources import Profiles

        return Profiles(self)

    @cached_property
    def patients(self) -> Patients:
        """The patient directory: :class:`~health_async.resources.Patients`."""
        from .resources import Patients

        return Patients(self)

    @cached_property
    def abdm(self) -> Abdm:
        """ABDM's exchange, hospital side (care contexts, health-data pushes): :class:`~health_async.resources.Abdm`."""
        from .resources import Abdm

        return Abdm(self)

    @cached_property
    def hpr(self) -> Hpr:
        """The professional registry (HPR IDs, ABDM milestone 4): :class:`~health_async.resources.Hpr`."""
        from .resources import Hpr

        return Hpr(self)

    @cached_property
    def hfr(self) -> Hfr:
        """The facility registry (HFR IDs, ABDM milestone 4): :class:`~health_async.resources.Hfr`."""
        from .resources import Hfr

        return Hfr(self)

    @cached_property
    def webhook_subscriptions(self) -> WebhookSubscriptions:
        """Where the service sends its webhooks: :class:`~health_async.resources.WebhookSubscriptions`."""
        from .resources import WebhookSubscriptions

        return WebhookSubscriptions(self)

    @cached_property
    def cases(self) -> Cases:
        """Cases that group a user's documents: :class:`~health_async.resources.Cases`."""
        from .resources import Cases

        return Cases(self)

    # ---------------------------------------------------------------- lifecycle

    @property
    def closed(self) -> bool:
        """True once the client was closed; every call then raises :class:`ClientClosedError`."""
        return self._session.closed

    async def __aenter__(self) -> HealthClient:
        await self._session.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the client's helper tasks and close its connection pool (a caller-owned session stays
        open). Safe to call more than once."""
        await self._session.aclose()
