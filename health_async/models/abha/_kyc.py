"""The KYC upgrade and user-session flows of an ABHA: their inputs and answers (``registration.yml``:
``KycGenerateKycOtpRequest``, ``KycVerifyKycOtpResponse``, ``VerifyResponseType4``, ``AuthLoggedInStatusResponse``).

The OTP sends of both flows (``kyc/init``, ``kyc/resend``, ``session/init``) answer ``{txn_id}`` and are read as
:class:`~health_async.models.OtpSent`. Secrets and personal data are left out of every ``repr``: the transaction
id, the session token and its refresh token, the HPR id.
"""

from __future__ import annotations

import enum
from typing import ClassVar

import attrs

from ..._wire import empty_is_none, local, non_empty, wire

__all__ = ["AbhaSessionToken", "KycMethod", "KycResult", "KycStatus", "SessionStatus"]


class KycMethod(enum.Enum):
    """What the person proves their identity with for the KYC upgrade (wire ``method`` of ``kyc/init``)."""

    #: The 14-digit ABHA number (``identifier``): the OTP goes to the mobile of that ABHA number.
    ABHA_NUMBER = "abha-number"
    #: The 12-digit Aadhaar number (``identifier``): UIDAI's OTP goes to the Aadhaar-linked mobile.
    AADHAAR = "aadhaar"


class KycStatus(enum.Enum):
    """The KYC status of an ABHA profile (the service's ``kyc_verified`` flag, typed)."""

    #: KYC-verified (Aadhaar): the ABHA address is tied to the person's 14-digit ABHA number.
    VERIFIED = "verified"
    #: Not KYC-verified (an ABHA address created with a mobile OTP): run the KYC upgrade.
    NOT_VERIFIED = "not_verified"
    #: The service did not say.
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, kyc_verified: bool | None) -> KycStatus:
        """The status for the service's ``kyc_verified`` flag (``None``: :attr:`UNKNOWN`)."""
        if kyc_verified is None:
            return cls.UNKNOWN
        return cls.VERIFIED if kyc_verified else cls.NOT_VERIFIED


@attrs.frozen
class KycResult:
    """The answer of ``kyc/verify`` (``KycVerifyKycOtpResponse``): the KYC is complete.

    Judgement call: the answer carries only a transaction id; its success is the service's word that the KYC is
    done ("Verify OTP to complete KYC"), so :attr:`status` is :attr:`KycStatus.VERIFIED` (the client fills it).
    ``repr`` shows the status only.
    """

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id: see health_async._wire

    #: The profile's KYC status after the upgrade: :attr:`KycStatus.VERIFIED`.
    status: KycStatus = local(default=KycStatus.VERIFIED)
    #: The transaction id of the answer, if any. Hidden from ``repr``.
    txn_id: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)

    @property
    def kyc_verified(self) -> bool:
        """True when :attr:`status` is :attr:`KycStatus.VERIFIED`."""
        return self.status is KycStatus.VERIFIED


@attrs.frozen
class AbhaSessionToken:
    """The answer of ``session/verify`` (``VerifyResponseType4``): the user's ABHA Gateway session.

    Both tokens are the person's credentials (secrets): hidden from ``repr``, never logged; keep them as a
    password is kept. The session expires after a while (the service then answers HTTP 491): check
    ``client.abha.session_status()`` and start a new session when it says ``logged_in`` is false.
    """

    __wire_lenient__: ClassVar[bool] = True  # carries a token: see health_async._wire

    #: The user's session (access) token. A secret, hidden from ``repr``.
    token: str = wire(parse=non_empty, pii=True)
    #: The token that obtains a new access token, or ``None``. A secret, hidden from ``repr``.
    refresh_token: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)


@attrs.frozen
class SessionStatus:
    """The answer of ``GET /abdm/v1/session/status`` (``AuthLoggedInStatusResponse``): the user's ABHA Gateway
    session and KYC flag. ``repr`` shows :attr:`logged_in` and :attr:`kyc_verified`; the HPR id is hidden."""

    #: True while the user has a live ABHA Gateway session (keep using its token); False: start a new one.
    logged_in: bool | None = None
    #: True when the user's ABHA is KYC-verified; ``None`` when not said.
    kyc_verified: bool | None = None
    #: The user's Health Professional Registry id, if any. Hidden from ``repr``.
    hpr_id: str | None = wire(parse=empty_is_none, default=None, pii=True)

    @property
    def kyc_status(self) -> KycStatus:
        """:attr:`kyc_verified` as a :class:`KycStatus`."""
        return KycStatus.of(self.kyc_verified)
