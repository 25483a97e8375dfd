"""What every resource shares: the client's session, its per-user defaults, and the send-once rule."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Unpack

import attrs

from .. import _constants as C
from .._abha_input import AbhaHeaders
from .._config import NOT_GIVEN, NotGiven, optional_header_value, pick
from .._retry import RetryPolicy, settled
from ..errors import ApiError, InvalidRequest, OutcomeUnknown, PaginationError, TransportError

if TYPE_CHECKING:
    from .._client import HealthClient
    from .._session import Session


class _TokenPage(Protocol):
    @property
    def items(self) -> tuple[Any, ...]: ...

    @property
    def next_token(self) -> str | None: ...


#: Empty pages in a row, each with a new token, after which a token listing stops (:class:`PaginationError`).
MAX_EMPTY_PAGES = 100


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

    def _partner_headers(
        self,
        user_id: str | NotGiven | None = NOT_GIVEN,
        partner_user_id: str | NotGiven | None = NOT_GIVEN,
        partner_hip_id: str | NotGiven | None = NOT_GIVEN,
    ) -> dict[str, str]:
        """``X-Pt-Id``, ``X-Partner-Pt-Id`` and ``X-Hip-Id`` (the ABHA and ABDM calls' optional headers): each the
        call's value, the client's default when not given, none when ``None``; checked like every header value."""
        client = self._client
        headers: dict[str, str] = {}
        for name, given, default in (
            (C.H_PT_ID, user_id, client.user_id),
            (C.H_PARTNER_PT_ID, partner_user_id, client.partner_user_id),
            (C.H_HIP_ID, partner_hip_id, client.partner_hip_id),
        ):
            value = default if isinstance(given, NotGiven) else optional_header_value(name, given)
            if value is not None:
                headers[name] = value
        return headers

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
        service already gave raises :class:`PaginationError` (following it would loop forever), and so does a run of
        :data:`MAX_EMPTY_PAGES` empty pages each with a new token.

        Judgement call, the empty run: a service may answer an empty page with a token while a listing catches up,
        so one empty page is followed; but one that never stops doing so (a fresh token each time) would be
        followed forever, one request after another, and a caller awaiting the first item would hang. A hundred
        in a row is far beyond a catch-up and stops within seconds.
        """
        headers = {C.H_PT_ID: self._required_user_id(user_id)}
        if updated_after is not None and (
            not isinstance(updated_after, int) or isinstance(updated_after, bool) or updated_after < 0
        ):
            raise InvalidRequest("updated_after must be a non-negative int (epoch seconds)")
        token = start_token
        seen: set[str] = set()  # page tokens given so far (a few bytes per page)
        empty = 0  # empty pages in a row
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
            empty = 0 if page.items else empty + 1
            if empty >= MAX_EMPTY_PAGES:
                raise PaginationError(
                    f"{operation}: {empty} empty pages in a row, each with a new token; stopped instead of following "
                    "them without end"
                )
            seen.add(next_token)
            token = next_token

    async def _send_once(
        self, method: str, path: str, *, operation: str, retry: RetryPolicy | NotGiven = NOT_GIVEN, **kwargs: Any
    ) -> Any:
        """A request whose repetition would do harm (an OTP sent or checked twice, a patient or account created
        twice, a document declared twice).

        Sent with ``idempotent=False``, so it is retried only when it cannot have reached the service, whatever
        the policy's :attr:`~health_async.RetryPolicy.retry_non_idempotent` says (no client-wide switch makes such
        a call repeated). When it fails in a way that leaves its effect unknown it raises
        :class:`~health_async.errors.OutcomeUnknown`, chained to the original error, instead of the transport or
        server error: the caller must check, or ask the person, before trying again. Unknown are:

        * a timeout or reset after the request left;
        * a 5XX without the service's own error body;
        * a 502, 503 or 504 (a gateway or an upstream answered, with or without a JSON body of its own: the service
          behind it may have acted), unless its body is an ABHA error body whose code the vendor documents as a
          refusal (``_retry.DOCUMENTED_REFUSAL_CODES``);
        * an ABHA error body at a 5XX whose code does not settle it (see :func:`~health_async._retry.settled`).

        Definite, raised as they are: a 4XX (including 429) and an ABHA error body with a code that settles it
        (a wrong OTP, a rate limit or block, "address exists", ... even though ABDM sends them with HTTP 500).
        """
        policy = pick(retry, self._session.config.retry)
        if policy.retry_non_idempotent:
            policy = attrs.evolve(policy, retry_non_idempotent=False)
        try:
            return await self._session.request(
                method, path, operation=operation, idempotent=False, retry=policy, **kwargs
            )
        except TransportError as exc:
            if not exc.sent:
                raise
            raise OutcomeUnknown(
                f"{operation}: the request may have reached the service ({type(exc).__name__}); it was not repeated. "
                "Check whether it took effect before trying again",
                operation=operation,
            ) from exc
        except ApiError as exc:
            if settled(exc):
                raise
            raise OutcomeUnknown(
                f"{operation}: the service answered HTTP {exc.status} without saying whether the request took "
                "effect; it was not repeated. Check before trying again",
                operation=operation,
            ) from exc


class PartnerOptions(AbhaHeaders, total=False):
    """The per-call options of a :class:`PartnerResource` method (``client.abha``, ``client.hpr``,
    ``client.hfr``): the partner headers (``user_id``, ``partner_user_id``, ``partner_hip_id``), ``encrypt``, and
    these."""

    #: This call's :class:`~health_async.RetryPolicy` (a call sent once, e.g. an OTP, verify or create, is never
    #: repeated once it may have reached the service, whatever it says).
    retry: RetryPolicy
    #: Seconds for the whole call, or ``None`` for no limit.
    timeout: float | None


class PartnerResource(Resource):
    """A resource whose calls carry the partner headers and ``encrypt`` (``client.abha``, ``client.hpr``,
    ``client.hfr``): one header builder and one POST helper for all of them."""

    def _headers(self, options: AbhaHeaders) -> dict[str, str]:
        return self._partner_headers(
            options.get("user_id", NOT_GIVEN),
            options.get("partner_user_id", NOT_GIVEN),
            options.get("partner_hip_id", NOT_GIVEN),
        )

    async def _post(
        self,
        path: str,
        operation: str,
        body: Mapping[str, Any],
        *,
        once: bool,
        **options: Unpack[PartnerOptions],
    ) -> Any:
        """POST ``body``: through the send-once rule (``once``) or as a read (idempotent, retried)."""
        encrypt = options.get("encrypt")
        kwargs: dict[str, Any] = {
            "headers": self._headers(options),
            "json": dict(body),
            "encrypt": self._client.encrypt if encrypt is None else encrypt,
            "retry": options.get("retry", NOT_GIVEN),
            "timeout": options.get("timeout", NOT_GIVEN),
        }
        if once:
            return await self._send_once("POST", path, operation=operation, **kwargs)
        return await self._session.request("POST", path, operation=operation, idempotent=True, **kwargs)
