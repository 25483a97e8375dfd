"""``client.profiles``: EMR user profiles."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ... import _routes as R
from ..._checks import checked
from ..._config import NOT_GIVEN, NotGiven, path_segment
from ..._retry import RetryPolicy
from ..._wire import structure
from ...errors import InvalidRequest, NotFoundError, ProfileNotFound
from ...models import BloodGroup, Gender, Profile
from .._base import Resource
from .directory import patient_fields

__all__ = ["Profiles"]


class Profiles(Resource):
    """EMR user profiles (``/profiles/v1/emr-user``)."""

    @checked
    async def get(
        self,
        oid: str,
        *,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> Profile:
        """``GET /profiles/v1/emr-user/{oid}``: the profile of the EMR user ``oid``.

        Sends the client's ``client-id`` header, which this operation requires.

        Raises:
            ProfileNotFound: no profile for ``oid``.
            InvalidRequest: (a ``ValueError``) ``oid`` is not a single path segment, or the client has no
                ``client_id``.
        """
        segment = path_segment("oid", oid)
        self._require_client_id("profiles.get")
        data = await self._session.request(
            "GET",
            f"/profiles/v1/emr-user/{segment}",
            route=R.PATH_PROFILE,
            operation="profile",
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, Profile)

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
        extras: Mapping[str, Any] | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> None:
        """``PATCH /profiles/v1/emr-user/{oid}``: change the fields given of an EMR user's profile (``None`` =
        leave unchanged). Users may update their own profile, admins any profile of their workspace.

        The rules of :meth:`~health_async.resources.Patients.create` apply to each field: names as
        ``first_name`` (with ``middle_name``/``last_name``) or ``full_name`` (the service splits it), ``dob`` a
        :class:`datetime.date` not in the future, ``gender`` ``"M"``/``"F"``/``"O"``, ``mobile`` an Indian number
        sent in E.164 (``+91XXXXXXXXXX``), ``blood_group`` (sent as ``bg``), ``extras`` a JSON object. At least
        one field is needed.

        Idempotent (the same fields set twice give the same profile), so it is retried on transient failures.

        Raises:
            ProfileNotFound: no profile for ``oid``.
            InvalidRequest: a field breaks a rule (named, never shown), no field was given, or the client has no
                ``client_id``.
        """
        segment = path_segment("oid", oid)
        self._require_client_id("profiles.update")
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
            blood_group_key="bg",
            extras=extras,
        )
        if not body:
            raise InvalidRequest("profiles.update needs at least one field to change")
        try:
            await self._session.request(
                "PATCH",
                f"/profiles/v1/emr-user/{segment}",
                route=R.PATH_PROFILE,
                operation="profile_update",
                json=body,
                idempotent=True,
                retry=retry,
                timeout=timeout,
            )
        except NotFoundError as exc:
            raise ProfileNotFound(
                f"profile_update: no profile for that user id (HTTP {exc.status})",
                status=exc.status,
                body=exc.body,
                headers=exc.headers,
                operation=exc.operation,
            ) from exc

    def _require_client_id(self, operation: str) -> None:
        if self._client.client_id is None:
            raise InvalidRequest(f"{operation} needs the client-id header: pass client_id= to HealthClient")
