"""What a registry call (``client.hpr``, ``client.hfr``) takes from its caller, checked before anything is sent: HPR
IDs, HFR IDs, clinic ids and the HPR account's password. OTPs, transaction ids, mobile and Aadhaar numbers are
checked with the ABHA rules (:mod:`health_async._abha_input`, :mod:`health_async._mobile`,
:mod:`health_async._aadhaar`): the registries use the same Aadhaar OTPs and transaction ids.

A leaf module (it imports only the errors). Every message names the rule broken, never the value (an HPR ID
identifies a person; a password is a secret).

Judgement calls: registration.yml gives every field as a plain ``string`` with no format. The rules here refuse
only what cannot be right (empty, whitespace or control characters inside, absurd lengths, characters no
identifier of these registries uses), so a valid id is never refused; the registry keeps the last word on its own
format and answers the rest with its refusal.
"""

from __future__ import annotations

import re
from typing import Final

from .errors import InvalidArgumentType, InvalidRequest

__all__ = ["MAX_PASSWORD", "check_password", "normalize_clinic_id", "normalize_hfr_id", "normalize_hpr_id"]

_HPR_ID: Final = re.compile(r"[A-Za-z0-9._@-]{1,100}")
_HFR_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNSAFE: Final = re.compile(r"[\x00-\x20\x7f-\x9f]")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: The longest password sent (ABDM's own forms stop far below it).
MAX_PASSWORD: Final = 128


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{name} must be a str, not {type(value).__name__}")
    return value.strip()


def normalize_hpr_id(value: str, *, name: str = "hpr_id") -> str:
    """An HPR ID (``asha.verma`` or with the registry's suffix, ``asha.verma@hpr.abdm``), surrounding whitespace
    stripped: 1 to 100 ASCII letters, digits, ``.``, ``_``, ``-`` and ``@``. :class:`InvalidRequest` otherwise."""
    text = _text(value, name)
    if not text:
        raise InvalidRequest(f"{name} must not be empty")
    if not _HPR_ID.fullmatch(text):
        raise InvalidRequest(f"{name} must be at most 100 ASCII letters, digits, '.', '_', '-' or '@'")
    return text


def normalize_hfr_id(value: str, *, name: str = "hfr_id") -> str:
    """An HFR ID (``IN2910000123``), surrounding whitespace stripped: 1 to 64 ASCII letters, digits, ``_`` and
    ``-`` (it is sent as one path segment of ``hfr/search/{hfrId}``). :class:`InvalidRequest` otherwise."""
    text = _text(value, name)
    if not text:
        raise InvalidRequest(f"{name} must not be empty")
    if not _HFR_ID.fullmatch(text):
        raise InvalidRequest(f"{name} must be at most 64 ASCII letters, digits, '_' or '-'")
    return text


def normalize_clinic_id(value: str, *, name: str = "clinic_id") -> str:
    """Your clinic's id (the service's, for the ABDM bridge): surrounding whitespace stripped, then 1 to 256
    characters with no whitespace or control characters. :class:`InvalidRequest` otherwise."""
    text = _text(value, name)
    if not text:
        raise InvalidRequest(f"{name} must not be empty")
    if len(text) > 256 or _UNSAFE.search(text):
        raise InvalidRequest(f"{name} must be at most 256 characters, no whitespace or control characters")
    return text


def check_password(value: str, *, name: str = "password") -> str:
    """The HPR account's password, as given (never stripped: a space may be part of it): a non-empty ``str`` of
    at most :data:`MAX_PASSWORD` characters without control characters. The message never shows it.

    Judgement call: ABDM's strength rule (length, letter cases, digits, symbols) is not in the vendor's files and
    is not repeated here; the registry refuses a weak password itself, before the account is created."""
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{name} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidRequest(f"{name} must not be empty")
    if len(value) > MAX_PASSWORD or _CONTROL.search(value):
        raise InvalidRequest(f"{name} must be at most {MAX_PASSWORD} characters, no control characters")
    return value
