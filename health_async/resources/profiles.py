"""``client.profiles``: EMR user profiles."""

from __future__ import annotations

from .. import _constants as C
from .._config import NOT_GIVEN, NotGiven, path_segment
from .._convert import structure
from .._retry import RetryPolicy
from ..models import Profile
from ._base import Resource

__all__ = ["Profiles"]


class Profiles(Resource):
    """EMR user profiles (``/profiles/v1/emr-user``)."""

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
            ValueError: ``oid`` is not a single path segment, or the client has no ``client_id``.
        """
        segment = path_segment("oid", oid)
        if self._client.client_id is None:
            raise ValueError("profiles.get needs the client-id header: pass client_id= to HealthClient")
        data = await self._session.request(
            "GET",
            f"/profiles/v1/emr-user/{segment}",
            route=C.PATH_PROFILE,
            operation="profile",
            idempotent=True,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, Profile)
