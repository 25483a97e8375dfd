"""``client.abha``: ABHA (health account) registration with Aadhaar."""

from __future__ import annotations

from .. import _constants as C
from .._aadhaar import normalize_aadhaar
from .._config import NOT_GIVEN, NotGiven, optional_header_value
from .._convert import structure
from .._retry import RetryPolicy
from ..models import AadhaarInit
from ._base import Resource

__all__ = ["Abha"]


class Abha(Resource):
    """ABHA registration (``/abdm/na/v1/registration``)."""

    async def aadhaar_init(
        self,
        aadhaar_number: str,
        *,
        user_id: str | NotGiven | None = NOT_GIVEN,
        partner_user_id: str | NotGiven | None = NOT_GIVEN,
        partner_hip_id: str | NotGiven | None = NOT_GIVEN,
        validate: bool = True,
        encrypt: bool | None = None,
        retry: RetryPolicy | NotGiven = NOT_GIVEN,
        timeout: float | NotGiven | None = NOT_GIVEN,
    ) -> AadhaarInit:
        """``POST /abdm/na/v1/registration/aadhaar/init``: send an OTP to the mobile linked to the Aadhaar number.

        The number is checked before anything is sent: spaces and hyphens are stripped, then it must be 12
        digits, not start with 0 or 1, and end in a valid Verhoeff check digit. ``validate=False`` skips the
        digit rules for sandbox test numbers (separators are still stripped and only digits allowed).

        ``user_id`` (``X-Pt-Id``), ``partner_user_id`` (``X-Partner-Pt-Id``) and ``partner_hip_id``
        (``X-Hip-Id``) default to the client's; pass ``None`` to leave a header out (a brand-new user has no OID).
        ``encrypt`` defaults to the client's ``encrypt`` setting.

        Not idempotent: each call sends an SMS, so it is retried only when the request cannot have reached the
        server (see :class:`RetryPolicy`).

        Raises:
            InvalidAadhaarNumber: the number breaks a rule (the message names the rule, never the number).
            AbhaError: the service refused; ``source_code`` holds e.g. ``"ABDM-1022"``.
        """
        number = normalize_aadhaar(aadhaar_number, validate=validate)
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
        data = await self._session.request(
            "POST",
            C.PATH_AADHAAR_INIT,
            operation="aadhaar_init",
            headers=headers,
            json={"aadhaar_number": number},
            idempotent=False,
            encrypt=client.encrypt if encrypt is None else encrypt,
            retry=retry,
            timeout=timeout,
        )
        return structure(data, AadhaarInit)
