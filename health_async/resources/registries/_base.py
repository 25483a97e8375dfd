"""The plumbing ``client.hpr`` and ``client.hfr`` share: the partner headers, the per-call options and one POST
helper (sent once, or as a read), as the ABHA resources have."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from ..._abha_input import AbhaHeaders
from ..._config import NOT_GIVEN
from ..._retry import RetryPolicy
from .._base import Resource

__all__ = ["RegistryBase", "RegistryOptions"]


class RegistryOptions(AbhaHeaders, total=False):
    """Every per-call option of a ``client.hpr`` / ``client.hfr`` method: the partner headers (``user_id``,
    ``partner_user_id``, ``partner_hip_id``), ``encrypt``, and these."""

    #: This call's :class:`~health_async.RetryPolicy` (OTP, verify, create, onboard and link calls are never
    #: repeated once they may have reached the service, whatever it says).
    retry: RetryPolicy
    #: Seconds for the whole call, or ``None`` for no limit.
    timeout: float | None


class RegistryBase(Resource):
    """What ``client.hpr`` and ``client.hfr`` build on."""

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
        **options: Unpack[RegistryOptions],
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
