"""What every resource shares: the client's session and its per-user defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._config import NotGiven, optional_header_value

if TYPE_CHECKING:
    from .._client import HealthClient
    from .._session import Session


class Resource:
    """Base of ``client.documents``, ``client.abha`` and ``client.profiles``."""

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
