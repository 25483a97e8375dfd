"""The plumbing every ``client.abha`` method shares: the partner headers and one POST helper (sent once, or as a
read). :class:`~health_async.resources.Abha` is built from this base and one mixin per concern: registration and
login (``abha.py``), the profile, card, QR, search and pincode (``_abha_profile.py``), the KYC and session flows
(``_abha_kyc.py``), Scan & Share (``_scan_share.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from ..._abha_input import AbhaHeaders
from ..._config import NOT_GIVEN
from ..._retry import RetryPolicy
from .._base import Resource

__all__ = ["AbhaBase", "AbhaOptions"]


class AbhaOptions(AbhaHeaders, total=False):
    """Every per-call option of a ``client.abha`` endpoint method."""

    #: This call's :class:`~health_async.RetryPolicy` (OTP, verify and create calls are never repeated once
    #: they may have reached the service, whatever it says).
    retry: RetryPolicy
    #: Seconds for the whole call, or ``None`` for no limit.
    timeout: float | None


class AbhaBase(Resource):
    """What every ``client.abha`` mixin builds on (see the module)."""

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
        **options: Unpack[AbhaOptions],
    ) -> Any:
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
