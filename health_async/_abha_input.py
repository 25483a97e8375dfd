"""What an ABHA call takes from its caller, checked before anything is sent: OTPs, transaction ids, ABHA addresses
and numbers, and the partner headers of ``client.abha`` calls.

A leaf module (it imports only the errors): the resource (:mod:`health_async.resources.abha.abha`), its guided flows
(:mod:`health_async.resources.abha._flows`) and the command line all check input with these same rules.
"""

from __future__ import annotations

import re
from typing import Final, TypedDict

from .errors import InvalidAbhaAddress, InvalidOtp, InvalidRequest

__all__ = [
    "ABHA_ADDRESS_SUFFIXES",
    "OTP_LENGTH",
    "AbhaHeaders",
    "normalize_abha_address",
    "normalize_abha_number",
    "normalize_otp",
    "normalize_txn_id",
]

#: Digits of an OTP: UIDAI's Aadhaar OTP and ABDM's mobile OTPs are 6 digits.
OTP_LENGTH: Final = 6
#: The ABHA address suffixes: ``@abdm`` in production, ``@sbx`` in the ABDM sandbox.
ABHA_ADDRESS_SUFFIXES: Final = frozenset({"abdm", "sbx"})
_ADDRESS_CHARS: Final = re.compile(r"[A-Za-z0-9._]+")
_MAX_TXN_ID: Final = 256
_TXN_UNSAFE: Final = re.compile(r"[\x00-\x20\x7f]")
_SEPARATORS: Final = re.compile(r"[\s-]")


def normalize_otp(otp: str) -> str:
    """The OTP as sent: surrounding whitespace stripped, then exactly :data:`OTP_LENGTH` (6) ASCII digits.

    Raises :class:`~health_async.errors.InvalidOtp` naming the rule, never showing the OTP. An ``int`` is refused
    (it would lose leading zeros).
    """
    if not isinstance(otp, str):
        raise InvalidOtp("otp must be a str (an int would lose leading zeros)")
    value = otp.strip()
    if not value:
        raise InvalidOtp("otp must not be empty")
    if not value.isascii() or not value.isdigit():
        raise InvalidOtp("otp must contain only digits")
    if len(value) != OTP_LENGTH:
        raise InvalidOtp(f"otp must have {OTP_LENGTH} digits")
    return value


def normalize_txn_id(txn_id: str) -> str:
    """A transaction id as received: a non-empty str of at most 256 characters without whitespace or control
    characters (it is sent in bodies and query strings). :class:`~health_async.errors.InvalidRequest` otherwise."""
    if not isinstance(txn_id, str):
        raise InvalidRequest("txn_id must be a str (the txn_id of the previous answer)")
    if not txn_id:
        raise InvalidRequest("txn_id must not be empty")
    if len(txn_id) > _MAX_TXN_ID or _TXN_UNSAFE.search(txn_id):
        raise InvalidRequest(f"txn_id must be at most {_MAX_TXN_ID} characters, no whitespace or control characters")
    return txn_id


def normalize_abha_address(address: str, *, new: bool = False) -> str:
    """An ABHA address, checked against ABDM's format; surrounding whitespace stripped, otherwise sent as given.

    Rules (:class:`~health_async.errors.InvalidAbhaAddress` names the one broken, never the address):

    * an optional suffix ``@abdm`` (production) or ``@sbx`` (sandbox), nothing else after ``@``;
    * before it, only ASCII letters, digits, ``.`` and ``_``, not starting or ending with ``.`` or ``_``;
    * for a **new** address (``new=True``: ``aadhaar_create``, ``mobile_create``): 8 to 18 characters before the
      suffix, with at most one ``.`` and at most one ``_``.

    Source: ABDM's ABHA address policy as printed in its PHR test sheet ("minimum length 8, letters, digits and
    dot, a dot cannot come first or last") and ABDM's creation screens (8-18 characters, one dot and/or one
    underscore, not at the ends); the vendor's examples (``shyam.eka@abdm``, ``nisha@abdm``) carry the suffix.

    Judgement call: the length and count rules apply only to new addresses. ABDM's own sheet prints a minimum of 4
    for other groups and the vendor's examples include ``sudo@abdm`` and ``shyam@abdm``: an existing address
    (login, auto-login, a check) shorter than 8 is left for the service to judge, not refused here.
    """
    if not isinstance(address, str):
        raise InvalidAbhaAddress("abha_address must be a str")
    value = address.strip()
    if not value:
        raise InvalidAbhaAddress("abha_address must not be empty")
    local, at, suffix = value.partition("@")
    if at and suffix.lower() not in ABHA_ADDRESS_SUFFIXES:
        raise InvalidAbhaAddress("abha_address may only end in @abdm or @sbx")
    if not local:
        raise InvalidAbhaAddress("abha_address must have a name before the @ suffix")
    if not _ADDRESS_CHARS.fullmatch(local):
        raise InvalidAbhaAddress("abha_address may contain only letters, digits, '.' and '_' (before the @ suffix)")
    if local[0] in "._" or local[-1] in "._":
        raise InvalidAbhaAddress("abha_address must not start or end with '.' or '_'")
    if new:
        if not 8 <= len(local) <= 18:
            raise InvalidAbhaAddress("a new abha_address must have 8 to 18 characters before the @ suffix")
        if local.count(".") > 1 or local.count("_") > 1:
            raise InvalidAbhaAddress("a new abha_address may contain at most one '.' and at most one '_'")
    elif len(local) > 64:
        raise InvalidAbhaAddress("abha_address must have at most 64 characters before the @ suffix")
    return value


def normalize_abha_number(number: str) -> str:
    """A 14-digit ABHA number as sent (``12-3456-7890-1234`` -> ``12345678901234``); spaces and hyphens are
    stripped. :class:`~health_async.errors.InvalidRequest` naming the rule, never the number."""
    if not isinstance(number, str):
        raise InvalidRequest("abha_number must be a str")
    digits = _SEPARATORS.sub("", number)
    if not digits.isascii() or not digits.isdigit():
        raise InvalidRequest("abha_number must contain only digits (and hyphens)")
    if len(digits) != 14:
        raise InvalidRequest("abha_number must have 14 digits")
    return digits


class AbhaHeaders(TypedDict, total=False):
    """The partner headers and encryption of ``client.abha`` calls (each defaults to the client's setting)."""

    #: ``X-Pt-Id``: the OID of the service user (``None`` leaves it out: a brand-new user has no OID).
    user_id: str | None
    #: ``X-Partner-Pt-Id``: the partner's user id.
    partner_user_id: str | None
    #: ``X-Hip-Id``: the partner's HIP id.
    partner_hip_id: str | None
    #: Send the body as a JWE envelope (calls with a body; default: the client's ``encrypt``).
    encrypt: bool | None
