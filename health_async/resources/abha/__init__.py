"""``client`` namespaces of the ABHA (health account): registration, login, profile, KYC, Scan & Share, user sessions.

The public names of this domain's resource modules; the resources themselves are also in
:mod:`health_async.resources`."""

from .abha import (
    ABHA_ADDRESS_SUFFIXES,
    OTP_LENGTH,
    Abha,
    normalize_abha_address,
    normalize_abha_number,
    normalize_otp,
    normalize_txn_id,
)

__all__ = [
    "ABHA_ADDRESS_SUFFIXES",
    "Abha",
    "OTP_LENGTH",
    "normalize_abha_address",
    "normalize_abha_number",
    "normalize_otp",
    "normalize_txn_id",
]
