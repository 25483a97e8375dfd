"""``client.patients``: the patient directory (``/profiles/v1/patient``).

Every call sends the client's ``client-id`` header (the service requires it) and is refused with
:class:`~health_async.errors.InvalidRequest` before anything is sent when the client has none.

Input is checked before sending; a refusal is an :class:`~health_async.errors.InvalidRequest` (a ``ValueError``;
:class:`~health_async.errors.InvalidMobileNumber` for a mobile number, :class:`~health_async.errors.InvalidAbhaAddress`
for an ABHA address) whose message names the rule, never the value (names, numbers and dates are personal data).

Idempotency (judgement calls):

* ``create`` is **not** idempotent: a repeat makes a second patient. It is sent once (retried only when it cannot
  have reached the service, e.g. connection refused, whatever the retry policy says) and raises
  :class:`~health_async.errors.OutcomeUnknown` when it may have taken effect; look the patient up with
  :meth:`Patients.by_mobile` (or :meth:`Patients.by_username`) before creating again.
* ``update`` (PATCH) sets the given fields to the given values: sending it twice leaves the same profile as once,
  so it is retried on transient failures like a read.
* ``archive`` (DELETE) only archives: archiving twice leaves the patient archived, so it is retried likewise. (The
  fake service answers 200 to a repeat; the live service's answer to archiving an archived profile is not
  documented.)
"""

from __future__ import annotations

import builtins
import datetime as dt
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Final

from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, check_finite, path_segment
from ..._mobile import normalize_mobile
from ..._retry import RetryPolicy
from ..._routes import (
    PATH_PATIENT,
    PATH_PATIENT_BY_MOBILE,
    PATH_PATIENT_BY_USERNAME,
    PATH_PATIENT_CREATE,
    PATH_PATIENT_LIST,
    PATH_PATIENT_SEARCH,
)
from ..._wire import structure
from ...errors import InvalidAbhaAddress, InvalidArgumentType, InvalidRequest, NotFoundError, PaginationError
from ...models import BLOOD_GROUPS, GENDERS, BloodGroup, Gender, Patient, PatientCreated, PatientPage
from ...models.patients._patients import structure_patients
from .._base import Resource

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "LIST_FIELDS",
    "MAX_PAGE_SIZE",
    "MAX_SEARCH_LIMIT",
    "SEARCH_FIELDS",
    "Patients",
]


#: The service's default and largest ``pageSize`` of the minified list.
DEFAULT_PAGE_SIZE: Final = 500
MAX_PAGE_SIZE: Final = 2000
#: The service fetches at most 50 search results.
MAX_SEARCH_LIMIT: Final = 50
MAX_SEARCH_PREFIX: Final = 64

#: Optional fields the minified list can add (``fields=``), Python name -> wire name. Always included:
#: ``oid``, ``full_name``, ``mobile``, ``username``.
LIST_FIELDS: Final[Mapping[str, str]] = {
    "abha": "abha",
    "created_at": "c_ate",
    "date_of_birth": "dob",
    "gender": "gen",
    "updated_at": "u_ate",
}
#: Optional fields search can add (``fields=``).
SEARCH_FIELDS: Final[Mapping[str, str]] = {**LIST_FIELDS, "dob_from_age": "is_age"}

_MAX_NAME: Final = 128
_MAX_USERNAME: Final = 128
_MAX_EMAIL: Final = 254
_MAX_SALUTATION: Final = 16
_MAX_EXTRAS_KEY: Final = 16
_OLDEST_DOB: Final = dt.date(1900, 1, 1)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s.]+$")
_ABHA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}@[A-Za-z]{2,16}$")
_SEARCH_MOBILE = re.compile(r"^\+91\d+$")
_SCALARS = (str, int, float, bool, type(None))


class Patients(Resource):
    """The patient directory (``/profiles/v1/patient``): create, read, list, search, update and archive patients."""

    @checked
    async def create(
        self,
        *,
        first_name: str | None = None,
        middle_name: str | None = None,
        last_name: str | None = None,
        full_name: str | None = None,
        dob: dt.date,
        gender: Gender,
        mobile: str | None = None,
        email: str | None = None,
        salutation: str | None = None,
        blood_group: BloodGroup | None = None,
        username: str | None = None,
        abha: str | None = None,
        extras: Mapping[str, Any] | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> PatientCreated:
        """``POST /profiles/v1/patient/``: add a patient to the directory; returns the new OID.

        Give ``first_name`` (with optional ``middle_name`` and ``last_name``) or ``full_name``, not both; ``dob`` (a
        :class:`datetime.date`, not in the future) and ``gender`` (``"M"``, ``"F"`` or ``"O"``) are required.
        ``mobile`` is an Indian mobile number in any common form (``98765 43210``, ``+91-9876543210``...); it is
        sent as ``+91XXXXXXXXXX`` as the service documents. ``username`` is the UHID / partner id, unique in the
        workspace. ``extras`` is a JSON object under the service's rules: keys of at most 16 characters, not
        starting with ``_`` (the service would drop them), values scalars, lists of scalars, or objects of those
        (one level). The service stores names and e-mail in lowercase.

        **Not idempotent**: a repeat creates a second patient. Retried only when the request certainly did not
        reach the service (a ``retry_non_idempotent`` policy is ignored here). When it may have reached it (a
        timeout or reset after sending, a 5XX) it raises :class:`~health_async.errors.OutcomeUnknown`: check with
        :meth:`by_mobile` (or :meth:`by_username`) before creating again.

        Raises:
            InvalidRequest: a field breaks a rule (the message names it), or the client has no ``client_id``.
            OutcomeUnknown: the patient may or may not have been created.
            ApiError: the service refused (a 4XX, e.g. 400 ``{"error": {"code", "message"}}``): a definite no.
        """
        self._require_client_id("patients.create")
        body = patient_fields(
            first_name=first_name,
            middle_name=middle_name,
            last_name=last_name,
            full_name=full_name,
            dob=dob,
            gender=gender,
            mobile=mobile,
            email=email,
            salutation=salutation,
            blood_group=blood_group,
            blood_group_key="bloodgroup",
            username=username,
            abha=abha,
            extras=extras,
        )
        if "dob" not in body:
            raise InvalidRequest("dob is required to create a patient")
        if "gen" not in body:
            raise InvalidRequest("gender is required to create a patient")
        if "fn" not in body and "fln" not in body:
            raise InvalidRequest("a patient needs a name: first_name (optionally middle_name, last_name) or full_name")
        data = await self._send_once(
            "POST",
            PATH_PATIENT_CREATE,
            operation="patient_create",
            route=PATH_PATIENT_CREATE,
            json=body,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, PatientCreated)

    @checked
    async def get(
        self,
        oid: str,
        *,
        include_archived: bool = False,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> Patient:
        """``GET /profiles/v1/patient/{oid}``: a patient's full profile.

        An archived patient is found only with ``include_archived=True`` (sent as ``arc=true``).

        Raises:
            NotFoundError: no such patient (or it is archived).
            InvalidRequest: ``oid`` is not a single path segment, or the client has no ``client_id``.
        """
        segment = path_segment("oid", oid)
        self._require_client_id("patients.get")
        data = await self._session.request(
            "GET",
            f"/profiles/v1/patient/{segment}",
            route=PATH_PATIENT,
            operation="patient_get",
            params=[("arc", "true")] if include_archived else None,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, Patient)

    @checked
    def pages(
        self,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        start_page: int = 1,
        include_archived: bool = False,
        created_after: int | None = None,
        fields: Iterable[str] = (),
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[PatientPage]:
        """``GET /profiles/v1/patient/minified/`` page by page (``pageNo`` from ``start_page``), fetched lazily.

        Stops after a page the service marks last (``nextPage == -1``), at an empty page, or, when the service
        gives no next page number, at a short page (fewer patients than the page size). Follows ``nextPage`` when
        given. Empty pages are not yielded. ``start_page`` resumes a listing (pages are numbered from 1).

        ``page_size`` is 1..2000 (the service's maximum; default 500, the service's default). ``fields`` adds
        optional fields by their Python names (:data:`LIST_FIELDS`: ``abha``, ``created_at``, ``date_of_birth``,
        ``gender``, ``updated_at``); ``created_after`` (epoch seconds) is sent as ``from``; ``include_archived`` as
        ``arc=true``. Arguments are checked when this is called; nothing is sent before the iteration starts.

        Raises (from the iteration):
            PaginationError: the service answered the same page again, or pointed back to an earlier page
                (following it would loop).
        """
        self._require_client_id("patients.list")
        params = _list_params(page_size, start_page, include_archived, created_after, fields)
        return self._pages(params, page_size, start_page, retry, timeout)

    async def _pages(
        self,
        params: builtins.list[tuple[str, str]],
        page_size: int,
        page_no: int,
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> AsyncIterator[PatientPage]:
        # every page seen, by a fingerprint of its oids (an int each: memory stays small over a long listing): a
        # service that ignores pageNo and alternates A, B, A, ... is caught, not only one repeating the last page
        seen: set[int] = set()
        while True:
            data = await self._session.request(
                "GET",
                PATH_PATIENT_LIST,
                route=PATH_PATIENT_LIST,
                operation="patient_list",
                params=[("pageNo", str(page_no)), *params],
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
            page = structure(data, PatientPage)
            if not page.patients:
                return
            fingerprint = hash(tuple(p.oid for p in page.patients))
            if fingerprint in seen:
                raise PaginationError(
                    f"patient_list: page {page_no} repeats an earlier page; stopped instead of looping"
                )
            seen.add(fingerprint)
            yield page
            if page.is_last:
                return
            if page.next_page is not None:
                if page.next_page <= page_no:
                    raise PaginationError(
                        f"patient_list: page {page_no} points back to page {page.next_page}; stopped instead of looping"
                    )
                page_no = page.next_page
            elif len(page.patients) < (page.page_size or page_size):
                return
            else:
                page_no += 1

    @checked
    def list(
        self,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        start_page: int = 1,
        include_archived: bool = False,
        created_after: int | None = None,
        fields: Iterable[str] = (),
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AsyncIterator[Patient]:
        """Every patient of the workspace, as an async iterator over :class:`~health_async.models.Patient`.

        Pages are fetched lazily, one at a time, so memory stays O(``page_size``) whatever the directory's size;
        see :meth:`pages` for the arguments and the stop rules. Each item carries ``oid``, ``full_name``,
        ``mobile`` and ``username`` (plus ``fields``), so it feeds straight into per-patient pipelines::

            async for patient in client.patients.list(page_size=100):
                async for doc in client.documents.list(user_id=patient.oid):
                    ...
        """
        pages = self.pages(
            page_size=page_size,
            start_page=start_page,
            include_archived=include_archived,
            created_after=created_after,
            fields=fields,
            retry=retry,
            timeout=timeout,
        )
        return _items(pages)

    @checked
    async def search(
        self,
        prefix: str,
        limit: int = 10,
        *,
        fields: Iterable[str] = (),
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[Patient, ...]:
        """``GET /profiles/v1/patient/search``: patients whose username, mobile number or full name starts with
        ``prefix`` (at most ``limit``, 1..50).

        ``prefix`` is 1..64 characters after trimming spaces; a ``+91`` in front of digits is dropped, since the
        directory stores mobile numbers without the country code. ``fields`` adds optional fields by Python name
        (:data:`SEARCH_FIELDS`). The service may mask digits of the mobile numbers it returns.
        """
        self._require_client_id("patients.search")
        params = [("prefix", _search_prefix(prefix)), ("limit", str(_bounded_int("limit", limit, 1, MAX_SEARCH_LIMIT)))]
        select = _select(fields, SEARCH_FIELDS)
        if select:
            params.append(("select", select))
        data = await self._session.request(
            "GET",
            PATH_PATIENT_SEARCH,
            route=PATH_PATIENT_SEARCH,
            operation="patient_search",
            params=params,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return structure_patients(data, "search")

    @checked
    async def by_mobile(
        self,
        mobile: str,
        *,
        full_profile: bool = False,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[Patient, ...]:
        """``GET /profiles/v1/patient/by-mobile/``: the patients registered with a mobile number (a family can
        share one), ``()`` when there are none.

        ``mobile`` is an Indian mobile number in any common form, sent as ``+91XXXXXXXXXX`` (the documented
        ``mob`` format). The answer has ``oid``, ``username``, ``full_name``, ``gender``, ``date_of_birth``,
        ``abha``, ``country_code`` and ``status``; ``full_profile=True`` asks for every field.

        Use it to check whether a :meth:`create` that raised :class:`~health_async.errors.OutcomeUnknown` took
        effect. A 404 with the service's ``profile_not_found`` code means "none" (``()``); any other 404 (a wrong
        base URL, say) is raised, so a misconfiguration never reads as "no such patient".
        """
        self._require_client_id("patients.by_mobile")
        params = [("mob", e164_mobile(mobile))]
        if full_profile:
            params.append(("full_profile", "true"))
        data = await self._lookup(
            PATH_PATIENT_BY_MOBILE, PATH_PATIENT_BY_MOBILE, "patient_by_mobile", params, retry, timeout
        )
        return structure_patients(data, "by-mobile")

    @checked
    async def by_username(
        self,
        username: str,
        *,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> tuple[Patient, ...]:
        """``GET /profiles/v1/patient/{username}/username/?flatten=true``: the full profile(s) with this username
        (UHID / partner id), ``()`` when there are none. Usernames are unique in a workspace, so there is at most
        one; the service answers an array, kept as a tuple.

        ``username`` must be a single path segment (no ``/``, ``?``, ``#``, spaces). A 404 is handled as in
        :meth:`by_mobile`.
        """
        segment = path_segment("username", username)
        self._require_client_id("patients.by_username")
        data = await self._lookup(
            f"/profiles/v1/patient/{segment}/username/",
            PATH_PATIENT_BY_USERNAME,
            "patient_by_username",
            [("flatten", "true")],
            retry,
            timeout,
        )
        return structure_patients(data, "by-username")

    @checked
    async def update(
        self,
        oid: str,
        *,
        first_name: str | None = None,
        middle_name: str | None = None,
        last_name: str | None = None,
        full_name: str | None = None,
        dob: dt.date | None = None,
        gender: Gender | None = None,
        mobile: str | None = None,
        email: str | None = None,
        salutation: str | None = None,
        blood_group: BloodGroup | None = None,
        username: str | None = None,
        abha: str | None = None,
        extras: Mapping[str, Any] | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``PATCH /profiles/v1/patient/{oid}``: change the fields given (``None`` = leave unchanged; a field
        cannot be cleared). At least one field is needed. The rules of :meth:`create` apply to each field; to
        change the name give ``first_name`` (with ``middle_name``/``last_name``) or ``full_name``. Send
        ``username`` only when it changes (it must stay unique in the workspace).

        Idempotent (the same fields set twice give the same profile), so it is retried on transient failures.

        Raises:
            NotFoundError: no such patient.
            InvalidRequest: a field breaks a rule, no field was given, or the client has no ``client_id``.
        """
        segment = path_segment("oid", oid)
        self._require_client_id("patients.update")
        body = patient_fields(
            first_name=first_name,
            middle_name=middle_name,
            last_name=last_name,
            full_name=full_name,
            dob=dob,
            gender=gender,
            mobile=mobile,
            email=email,
            salutation=salutation,
            blood_group=blood_group,
            blood_group_key="bloodgroup",
            username=username,
            abha=abha,
            extras=extras,
        )
        if not body:
            raise InvalidRequest("update needs at least one field to change")
        await self._session.request(
            "PATCH",
            f"/profiles/v1/patient/{segment}",
            route=PATH_PATIENT,
            operation="patient_update",
            json=body,
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )

    @checked
    async def archive(
        self,
        oid: str,
        *,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``DELETE /profiles/v1/patient/{oid}``: archive a patient (not a permanent deletion; ``get`` with
        ``include_archived=True`` still finds it).

        Idempotent (archiving twice leaves it archived), so it is retried on transient failures.

        Raises:
            NotFoundError: no such patient.
        """
        segment = path_segment("oid", oid)
        self._require_client_id("patients.archive")
        await self._session.request(
            "DELETE",
            f"/profiles/v1/patient/{segment}",
            route=PATH_PATIENT,
            operation="patient_archive",
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )

    # ------------------------------------------------------------------------ helpers

    async def _lookup(
        self,
        path: str,
        route: str,
        operation: str,
        params: builtins.list[tuple[str, str]],
        retry: RetryPolicy | NotGiven,
        timeout: float | NotGiven | None,
    ) -> Any:
        try:
            return await self._session.request(
                "GET",
                path,
                route=route,
                operation=operation,
                params=params,
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
        except NotFoundError as exc:
            if isinstance(exc.body, Mapping) and exc.body.get("code") == "profile_not_found":
                return None
            raise

    def _require_client_id(self, operation: str) -> None:
        if self._client.client_id is None:
            raise InvalidRequest(f"{operation} needs the client-id header: pass client_id= to HealthClient")


async def _items(pages: AsyncIterator[PatientPage]) -> AsyncIterator[Patient]:
    async for page in pages:
        for patient in page.patients:
            yield patient


# ---------------------------------------------------------------------------- input rules (shared with profiles)


def _text(field: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must be a str")
    text = value.strip()
    if not text:
        raise InvalidRequest(f"{field} must not be empty")
    if len(text) > limit:
        raise InvalidRequest(f"{field} must be at most {limit} characters")
    if _CONTROL.search(text):
        raise InvalidRequest(f"{field} must not contain control characters")
    return text


def check_dob(value: object, field: str = "dob") -> str:
    """A date of birth as ``YYYY-MM-DD``: a :class:`datetime.date` (not a ``datetime``, not a string), not in the
    future (today anywhere on Earth counts: a newborn registered at once), not before 1900."""
    if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
        raise InvalidRequest(f"{field} must be a datetime.date")
    latest = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=14)).date()
    if value > latest:
        raise InvalidRequest(f"{field} must not be in the future")
    if value < _OLDEST_DOB:
        raise InvalidRequest(f"{field} must not be before 1900-01-01")
    return value.isoformat()


def check_gender(value: object, field: str = "gender") -> str:
    """One of the service's gender codes, ``M``, ``F`` or ``O``."""
    if not isinstance(value, str) or value not in GENDERS:
        raise InvalidRequest(f"{field} must be one of 'M', 'F', 'O'")
    return value


def check_blood_group(value: object, field: str = "blood_group") -> str:
    """One of ``A+ A- B+ B- AB+ AB- O+ O-``."""
    if not isinstance(value, str) or value not in BLOOD_GROUPS:
        raise InvalidRequest(f"{field} must be one of {', '.join(sorted(BLOOD_GROUPS))}")
    return value


def e164_mobile(value: str, field: str = "mobile") -> str:
    """An Indian mobile number in the form the profile endpoints document, ``+91XXXXXXXXXX``."""
    return "+91" + normalize_mobile(value, name=field)


def check_email(value: object, field: str = "email") -> str:
    """A plausible e-mail address (one ``@``, a dot in the domain, no spaces, at most 254 characters)."""
    text = _text(field, value, _MAX_EMAIL)
    if not _EMAIL.match(text):
        raise InvalidRequest(f"{field} must be an e-mail address like name@example.com")
    return text


def check_abha(value: object, field: str = "abha") -> str:
    """An ABHA address: ``name@abdm`` (``@sbx`` in the sandbox)."""
    if not isinstance(value, str) or not _ABHA.match(value.strip()):
        raise InvalidAbhaAddress(f"{field} must be an ABHA address like name@abdm")
    return value.strip()


def check_extras(value: object, field: str = "extras") -> dict[str, Any]:
    """The service's ``extras`` rules: a JSON object; keys 1..16 characters, not starting with ``_`` (the service
    ignores those: refused rather than lost silently); values JSON scalars, lists of scalars (no nested lists, no
    objects in lists) or objects of those (one level of nesting). Non-finite numbers are refused."""
    if not isinstance(value, Mapping):
        raise InvalidRequest(f"{field} must be a mapping (a JSON object)")
    return _extras_object(value, field, nested=False)


def _extras_object(value: Mapping[Any, Any], field: str, *, nested: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidRequest(f"{field} keys must be non-empty strings")
        if len(key) > _MAX_EXTRAS_KEY:
            raise InvalidRequest(f"{field} keys must be at most {_MAX_EXTRAS_KEY} characters")
        if key.startswith("_"):
            raise InvalidRequest(f"{field} keys must not start with '_' (the service ignores them)")
        if isinstance(item, Mapping):
            if nested:
                raise InvalidRequest(f"{field} allows only one level of nested objects")
            out[key] = _extras_object(item, field, nested=True)
        elif isinstance(item, builtins.list | tuple):
            for element in item:
                if isinstance(element, builtins.list | tuple):
                    raise InvalidRequest(f"{field} must not contain nested lists")
                if isinstance(element, Mapping):
                    raise InvalidRequest(f"{field} must not contain objects inside lists")
                _scalar(element, field)
            out[key] = builtins.list(item)
        else:
            out[key] = _scalar(item, field)
    return out


def _scalar(value: object, field: str) -> object:
    if not isinstance(value, _SCALARS):
        raise InvalidRequest(f"{field} values must be JSON strings, numbers, booleans or null")
    check_finite(value, field)
    return value


def patient_fields(
    *,
    first_name: str | None = None,
    middle_name: str | None = None,
    last_name: str | None = None,
    full_name: str | None = None,
    dob: dt.date | None = None,
    gender: str | None = None,
    mobile: str | None = None,
    email: str | None = None,
    salutation: str | None = None,
    blood_group: str | None = None,
    blood_group_key: str = "bloodgroup",
    username: str | None = None,
    abha: str | None = None,
    extras: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The wire body of the fields given (``None`` = not given), each checked; shared by patient create/update
    and the EMR user profile update (whose blood group key is ``bg``)."""
    if full_name is not None and (first_name is not None or middle_name is not None or last_name is not None):
        raise InvalidRequest("give first_name (optionally middle_name, last_name) or full_name, not both")
    if first_name is None and (middle_name is not None or last_name is not None):
        raise InvalidRequest("middle_name and last_name need first_name (or give full_name instead)")
    body: dict[str, Any] = {}
    for key, name, value in (
        ("fn", "first_name", first_name),
        ("mn", "middle_name", middle_name),
        ("ln", "last_name", last_name),
        ("fln", "full_name", full_name),
    ):
        if value is not None:
            body[key] = _text(name, value, _MAX_NAME)
    if salutation is not None:
        body["s"] = _text("salutation", salutation, _MAX_SALUTATION)
    if dob is not None:
        body["dob"] = check_dob(dob)
    if gender is not None:
        body["gen"] = check_gender(gender)
    if blood_group is not None:
        body[blood_group_key] = check_blood_group(blood_group)
    if mobile is not None:
        body["mobile"] = e164_mobile(mobile)
    if email is not None:
        body["email"] = check_email(email)
    if username is not None:
        body["username"] = _text("username", username, _MAX_USERNAME)
    if abha is not None:
        body["abha"] = check_abha(abha)
    if extras is not None:
        body["extras"] = check_extras(extras)
    return body


def _bounded_int(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidRequest(f"{name} must be an int")
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high}")
    return value


def _select(fields: Iterable[str], allowed: Mapping[str, str]) -> str:
    if isinstance(fields, str):
        fields = (fields,)
    names: builtins.list[str] = []
    for i, name in enumerate(fields):  # before dict.fromkeys: an unhashable item would be a raw TypeError
        if not isinstance(name, str):
            raise InvalidArgumentType(f"fields[{i}] must be a str, not {type(name).__name__}")
        names.append(name)
    wire = []
    for name in dict.fromkeys(names):
        if name not in allowed:
            raise InvalidRequest(f"fields may only name {', '.join(sorted(allowed))}")
        wire.append(allowed[name])
    return ",".join(wire)


def _list_params(
    page_size: int, start_page: int, include_archived: bool, created_after: int | None, fields: Iterable[str]
) -> builtins.list[tuple[str, str]]:
    params = [("pageSize", str(_bounded_int("page_size", page_size, 1, MAX_PAGE_SIZE)))]
    _bounded_int("start_page", start_page, 1, 10**9)
    select = _select(fields, LIST_FIELDS)
    if select:
        params.append(("select", select))
    if created_after is not None:
        params.append(("from", str(_bounded_int("created_after", created_after, 0, 10**11))))
    if include_archived:
        params.append(("arc", "true"))
    return params


def _search_prefix(prefix: object) -> str:
    if not isinstance(prefix, str):
        raise InvalidRequest("prefix must be a str")
    text = prefix.strip()
    if _SEARCH_MOBILE.match(text):
        text = text[3:]
    if not text:
        raise InvalidRequest("prefix must not be empty")
    if len(text) > MAX_SEARCH_PREFIX:
        raise InvalidRequest(f"prefix must be at most {MAX_SEARCH_PREFIX} characters")
    if _CONTROL.search(text):
        raise InvalidRequest("prefix must not contain control characters")
    return text
