"""``client.cases``: Cases that group a user's documents (``/mr/api/v1/cases``)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, check_finite, check_header_value, path_segment
from ..._constants import H_PT_ID
from ..._retry import RetryPolicy
from ..._routes import PATH_CASE, PATH_CASES
from ..._wire import MILLISECONDS_ABOVE, epoch_datetime, structure
from ...errors import ApiError, InvalidRequest, NotFoundError, ResponseValidationError
from ...models import Case, CasePage, HiType
from .._base import Resource
from ._presigned import epoch_seconds

__all__ = ["Cases"]

_HI_TYPES: Final = frozenset(t.value for t in HiType)


class Cases(Resource):
    """Cases that group a user's documents (``/mr/api/v1/cases``).

    Every call needs the user's id (``X-Pt-Id``): ``user_id=`` here, or the client's default. Link documents to a
    case with ``client.documents.update(document_id, cases=[...])`` or ``create(..., cases=[...])``.
    """

    @checked
    async def pages(
        self,
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        updated_after: int | None = None,
        start_token: str | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[CasePage]:
        """``GET /mr/api/v1/cases`` page by page (ordered by ``updated_at``), following ``next_token`` lazily.

        ``updated_after`` (epoch seconds) is sent as ``u_at__gt`` for incremental sync: deleted cases are listed
        too (status ``"D"``, :attr:`Case.deleted`), so a sync learns of deletions. ``start_token`` resumes from a
        ``next_token`` saved earlier.

        Raises:
            PaginationError: the service repeated a page token (paging would loop).
            InvalidRequest: no user id, or a bad ``updated_after``; nothing is sent.
        """
        async for page in self._token_pages(
            PATH_CASES,
            operation="cases_list",
            parse=lambda data: structure(data, CasePage),
            user_id=user_id,
            updated_after=updated_after,
            start_token=start_token,
            retry=retry,
            timeout=timeout,
        ):
            yield page

    @checked
    async def list(
        self,
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        updated_after: int | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[Case]:
        """Every case of a user, as an async iterator over :class:`Case` (pages fetched lazily; see :meth:`pages`)::

        async for case in client.cases.list():
            if not case.deleted:
                print(case.case_id, case.hi_type)
        """
        async for page in self.pages(user_id=user_id, updated_after=updated_after, retry=retry, timeout=timeout):
            for case in page.items:
                yield case

    @checked
    async def create(
        self,
        *,
        display_name: str,
        occurred_at: dt.datetime | dt.date | int,
        case_id: str | None = None,
        hi_type: HiType | str | None = None,
        case_type: str | None = None,
        partner_meta: Mapping[str, Any] | None = None,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> str:
        """``POST /mr/api/v1/cases``: create a case; returns its id.

        ``display_name`` (e.g. ``"Leg Injury"``) and ``occurred_at`` (an aware ``datetime``, a ``date`` taken at
        midnight UTC, or epoch seconds) are required. An ``int`` follows the library's rule for epochs: above
        ``100_000_000_000`` it is milliseconds, sent as whole seconds; a time the service cannot be sent as
        seconds (before the year 1, or after 5138, which would read back as milliseconds) is refused. ``case_id``
        is the case's id, chosen by the caller; left out, a random UUID is used. ``hi_type`` is a :class:`HiType`
        (or its string value), ``case_type`` the partner's own code (wire ``type``, e.g. ``"OP"``),
        ``partner_meta`` any JSON object.

        Retried as an idempotent call, because the id is chosen here: a repeat cannot create a second case. A
        repeat after a lost answer meets ``409 Case already exists``: when the id was generated here (a random
        UUID nobody else has) that 409 can only be this call's own earlier attempt, and it is success; when you
        gave the id, the 409 is raised (:class:`~health_async.errors.ApiError`, ``status == 409``).

        Raises:
            ApiError: 409 when a case with the given ``case_id`` already exists.
            InvalidRequest: a missing or bad value, or no user id; nothing is sent.
        """
        chosen = case_id is not None
        cid = _id("case_id", case_id) if case_id is not None else str(uuid.uuid4())
        body: dict[str, Any] = {"id": cid, "display_name": _name(display_name)}
        body["occurred_at"] = _occurred_at(occurred_at)
        _optional(body, hi_type=hi_type, case_type=case_type, partner_meta=partner_meta)
        headers = {H_PT_ID: self._required_user_id(user_id)}
        try:
            data = await self._session.request(
                "POST",
                PATH_CASES,
                operation="case_create",
                json=body,
                headers=headers,
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
        except ApiError as exc:
            if exc.status == 409 and not chosen:
                return cid
            raise
        if isinstance(data, dict) and isinstance(data.get("id"), str) and data["id"]:
            return str(data["id"])
        if data is None or isinstance(data, dict):
            return cid  # an answer without the id: the case has the id that was sent
        raise ResponseValidationError("case_create: the response does not fit {id}: expected a JSON object")

    @checked
    async def update(
        self,
        case_id: str,
        *,
        display_name: str | None = None,
        occurred_at: dt.datetime | dt.date | int | None = None,
        hi_type: HiType | str | None = None,
        case_type: str | None = None,
        partner_meta: Mapping[str, Any] | None = None,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``PATCH /mr/api/v1/cases/{id}``: change a case; only the fields given are sent (at least one).

        Values as in :meth:`create`; ``partner_meta`` replaces the stored object. Retried as an idempotent call:
        every field sets a value, so the same PATCH twice leaves the case as once.

        Raises:
            NotFoundError: no such case (404).
            InvalidRequest: no field given, a bad value or id, no user id; nothing is sent.
        """
        segment = path_segment("case_id", case_id)
        body: dict[str, Any] = {}
        if display_name is not None:
            body["display_name"] = _name(display_name)
        if occurred_at is not None:
            body["occurred_at"] = _occurred_at(occurred_at)
        _optional(body, hi_type=hi_type, case_type=case_type, partner_meta=partner_meta)
        if not body:
            raise InvalidRequest(
                "update needs at least one of display_name, occurred_at, hi_type, case_type, partner_meta"
            )
        headers = {H_PT_ID: self._required_user_id(user_id)}
        try:
            await self._session.request(
                "PATCH",
                f"{PATH_CASES}/{segment}",
                route=PATH_CASE,
                operation="case_update",
                json=body,
                headers=headers,
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
        except ResponseValidationError:
            pass  # a 2XX whose body is not JSON: updated (the body is not used)

    @checked
    async def delete(
        self,
        case_id: str,
        *,
        missing_ok: bool = False,
        user_id: str | NotGiven | None = NOT_GIVEN,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``DELETE /mr/api/v1/cases/{id}``: delete a case (it stays listed with status ``"D"``).

        Idempotent, so retried on transient failures; if an attempt deleted the case but its answer was lost, the
        retry meets a 404: ``missing_ok=True`` treats "not there" as done.

        Raises:
            NotFoundError: no such case (404), unless ``missing_ok``.
            InvalidRequest: a bad id or no user id; nothing is sent.
        """
        segment = path_segment("case_id", case_id)
        headers = {H_PT_ID: self._required_user_id(user_id)}
        try:
            await self._session.request(
                "DELETE",
                f"{PATH_CASES}/{segment}",
                route=PATH_CASE,
                operation="case_delete",
                headers=headers,
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
        except NotFoundError:
            if not missing_ok:
                raise
        except ResponseValidationError:
            pass


def _id(name: str, value: str) -> str:
    path_segment(name, value)  # the id is used in paths later: the same rule now
    return value


def _occurred_at(value: dt.datetime | dt.date | int) -> int:
    """Epoch seconds for the wire, by the rule the model reads them back with (:func:`epoch_datetime`): an ``int``
    above :data:`MILLISECONDS_ABOVE` is milliseconds (sent as whole seconds); a time out of ``datetime``'s range,
    or one whose seconds would read back as milliseconds, is refused before anything is sent."""
    seconds = epoch_seconds("occurred_at", value)
    if isinstance(value, int) and seconds > MILLISECONDS_ABOVE:
        seconds //= 1000
    if seconds > MILLISECONDS_ABOVE or epoch_datetime(seconds) is None:
        raise InvalidRequest(
            "occurred_at is out of range: give a time between the years 1 and 5138 (epoch seconds, or milliseconds)"
        )
    return seconds


def _name(value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("display_name must be a non-empty str")
    if len(value) > 256:
        raise InvalidRequest("display_name must be at most 256 characters")
    return value


def _optional(
    body: dict[str, Any],
    *,
    hi_type: HiType | str | None,
    case_type: str | None,
    partner_meta: Mapping[str, Any] | None,
) -> None:
    if hi_type is not None:
        if not isinstance(hi_type, str) or hi_type not in _HI_TYPES:
            raise InvalidRequest(f"hi_type must be one of {sorted(_HI_TYPES)}")
        body["hi_type"] = str(hi_type)
    if case_type is not None:
        try:
            body["type"] = check_header_value("case_type", case_type)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(str(exc)) from None
    if partner_meta is not None:
        if not isinstance(partner_meta, Mapping) or not all(isinstance(k, str) for k in partner_meta):
            raise InvalidRequest("partner_meta must be a mapping with string keys")
        meta = dict(partner_meta)
        if not _plain_json(meta):
            raise InvalidRequest("partner_meta must hold only JSON values (str, int, float, bool, None, lists, dicts)")
        body["partner_meta"] = meta


def _plain_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is made of JSON's own types only (an encoder would also take a set, a tuple, a date, ...,
    and send something the caller may not expect); at most 32 levels deep. A non-finite number raises
    :class:`InvalidRequest` ("partner_meta numbers must be finite", as ``extras``)."""
    if value is None or isinstance(value, str | bool | int | float):
        check_finite(value, "partner_meta")  # NaN and infinities would be sent as null
        return True
    if depth >= 32:
        return False
    if isinstance(value, list):
        return all(_plain_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v, depth + 1) for k, v in value.items())
    return False
