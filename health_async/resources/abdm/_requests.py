"""The patient's request inbox: the consent, subscription and authorization requests made to their ABHA
(``abdm-connect/patient-requests/*.mdx``; shapes ``ListsResponse`` and ``DetailsResponse`` of ``registration.yml``).

Both calls are reads: retried by the client's policy like every idempotent call. The patient is the call's
``oid`` (sent as ``X-Pt-Id`` and as the ``oid`` query the operations document), else the client's ``user_id``.

Judgement call: ``GET /abdm/v1/requests`` does not page (``ListsResponse`` is three plain arrays, with no token,
count or page parameter), so :meth:`RequestsMixin.requests` returns the whole answer at once rather than a lazy
iterator.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, check_header_value
from ..._retry import RetryPolicy
from ..._wire import structure
from ...errors import InvalidRequest
from ...models.abdm._requests import PatientRequests, RequestDetails, RequestKind, RequestStatus
from ._base import AbdmBase

__all__ = ["MAX_REQUEST_ID", "RequestsMixin"]

#: The longest request id accepted (consent and subscription ids are UUIDs).
MAX_REQUEST_ID: Final = 256
_STATUSES: Final = frozenset(s.value for s in RequestStatus if s is not RequestStatus.UNKNOWN)
#: ``type`` of the list: a kind, or every kind.
_LIST_KINDS: Final = frozenset({*(k.value for k in RequestKind if k is not RequestKind.UNKNOWN), "all"})
#: ``type`` of one request: the details operation documents only these two.
_DETAIL_KINDS: Final = frozenset({RequestKind.CONSENT.value, RequestKind.SUBSCRIPTION.value})


def _choice(name: str, value: object, allowed: frozenset[str]) -> str:
    text = value.value if isinstance(value, RequestKind | RequestStatus) else value
    if not isinstance(text, str) or text not in allowed:
        raise InvalidRequest(f"{name} must be one of {', '.join(sorted(allowed))}")
    return text


def _request_id(value: str) -> str:
    if not value or not value.strip():
        raise InvalidRequest("request_id must not be empty")
    if len(value) > MAX_REQUEST_ID or any(c.isspace() or not c.isprintable() for c in value):
        raise InvalidRequest(f"request_id must be at most {MAX_REQUEST_ID} characters, no whitespace")
    return value


class RequestsMixin(AbdmBase):
    """Part of :class:`~health_async.resources.Abdm` (see the module)."""

    def _patient(self, oid: str | None, params: list[tuple[str, str]]) -> dict[str, str]:
        if oid is not None:
            params.append(("oid", check_header_value("oid", oid)))
        return self._headers(oid)

    @checked
    async def requests(
        self,
        status: RequestStatus | str = RequestStatus.REQUESTED,
        kind: RequestKind | str = "all",
        *,
        oid: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> PatientRequests:
        """``GET /abdm/v1/requests``: the patient's requests of one ``status`` (default ``requested``: the ones
        waiting for an answer; judgement call, the operation requires a status) and one ``kind``
        (``consent``, ``subscription``, ``authorization``, or ``all``, the default), for the patient ``oid`` or
        the client's ``user_id``.

        The answer holds one tuple per kind; every item's :attr:`~health_async.models.PatientRequest.kind` says
        which. Read with the client's retry policy.

        Raises:
            InvalidRequest: a status or kind that is not documented, or a bad ``oid``; nothing sent.
            ResponseValidationError: an answer that is not a JSON object.
        """
        params = [
            ("status", _choice("status", status, _STATUSES)),
            ("type", _choice("kind", kind, _LIST_KINDS)),
        ]
        headers = self._patient(oid, params)
        data = await self._session.request(
            "GET",
            R.PATH_REQUESTS,
            operation="abdm_requests",
            params=params,
            headers=headers,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return parse_requests(data)

    @checked
    async def request(
        self,
        request_id: str,
        *,
        kind: RequestKind | str | None = None,
        status: RequestStatus | str | None = None,
        oid: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> RequestDetails:
        """``GET /abdm/v1/request?id=``: one consent or subscription request in full (providers and their care
        contexts, health-information types, period, purpose, status), for the patient ``oid`` or the client's
        ``user_id``. ``kind`` (``consent`` or ``subscription``) and ``status`` are sent when given (the
        operation takes them as optional filters). Read with the client's retry policy.

        Raises:
            InvalidRequest: an empty or malformed ``request_id``, an undocumented kind or status; nothing sent.
            NotFoundError: no such request (404).
            ResponseValidationError: an answer that is not a JSON object.
        """
        params = [("id", _request_id(request_id))]
        if kind is not None:
            params.append(("type", _choice("kind", kind, _DETAIL_KINDS)))
        if status is not None:
            params.append(("status", _choice("status", status, _STATUSES)))
        headers = self._patient(oid, params)
        data = await self._session.request(
            "GET",
            R.PATH_REQUEST,
            operation="abdm_request",
            params=params,
            headers=headers,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        details = structure(data, RequestDetails)
        return details if details.id else attrs.evolve(details, id=request_id)


def parse_requests(data: Any) -> PatientRequests:
    """A ``ListsResponse`` as :class:`PatientRequests`, each item's kind filled from the list that holds it."""
    parsed = structure(data, PatientRequests)
    return PatientRequests(
        consents=tuple(attrs.evolve(r, kind=RequestKind.CONSENT) for r in parsed.consents),
        subscriptions=tuple(attrs.evolve(r, kind=RequestKind.SUBSCRIPTION) for r in parsed.subscriptions),
        authorizations=tuple(attrs.evolve(r, kind=RequestKind.AUTHORIZATION) for r in parsed.authorizations),
    )
