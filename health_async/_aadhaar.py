"""Aadhaar number checks, done before anything is sent.

An Aadhaar number is 12 digits, never starting with 0 or 1, whose last digit is a Verhoeff check digit. Users
type it with spaces or hyphens (``2345 6789 0124``); those are stripped first. Error messages name the rule that
failed and never echo the number; :func:`mask_aadhaar` gives the only form that may be shown (``XXXX XXXX 0124``).
"""

from __future__ import annotations

from .errors import InvalidAadhaarNumber

__all__ = ["mask_aadhaar", "normalize_aadhaar", "verhoeff_check", "verhoeff_digit"]

# Verhoeff's dihedral-group multiplication table, permutation table and inverses.
_D = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    (1, 2, 3, 4, 0, 6, 7, 8, 9, 5),
    (2, 3, 4, 0, 1, 7, 8, 9, 5, 6),
    (3, 4, 0, 1, 2, 8, 9, 5, 6, 7),
    (4, 0, 1, 2, 3, 9, 5, 6, 7, 8),
    (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
    (6, 5, 9, 8, 7, 1, 0, 4, 3, 2),
    (7, 6, 5, 9, 8, 2, 1, 0, 4, 3),
    (8, 7, 6, 5, 9, 3, 2, 1, 0, 4),
    (9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
)
_P = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    (1, 5, 7, 6, 2, 8, 3, 0, 9, 4),
    (5, 8, 0, 3, 7, 9, 6, 1, 4, 2),
    (8, 9, 1, 6, 0, 4, 3, 5, 2, 7),
    (9, 4, 5, 3, 1, 2, 6, 8, 7, 0),
    (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
    (2, 7, 9, 3, 8, 0, 6, 4, 1, 5),
    (7, 0, 4, 6, 9, 1, 3, 2, 5, 8),
)
_INV = (0, 4, 3, 2, 1, 5, 6, 7, 8, 9)
_ASCII_DIGITS = frozenset("0123456789")


def _checksum(digits: str, offset: int) -> int:
    c = 0
    for i, ch in enumerate(reversed(digits)):
        c = _D[c][_P[(i + offset) % 8][ord(ch) - 48]]
    return c


def verhoeff_check(digits: str) -> bool:
    """True when the last digit of ``digits`` (ASCII digits only) is the Verhoeff check digit of the rest."""
    return bool(digits) and set(digits) <= _ASCII_DIGITS and _checksum(digits, 0) == 0


def verhoeff_digit(digits: str) -> str:
    """The Verhoeff check digit to append to ``digits`` (ASCII digits only)."""
    if not digits or not set(digits) <= _ASCII_DIGITS:
        raise ValueError("verhoeff_digit needs a non-empty string of ASCII digits")
    return str(_INV[_checksum(digits, 1)])


def normalize_aadhaar(number: str, *, validate: bool = True) -> str:
    """Strip spaces and hyphens from ``number`` and check it; return the 12 digits.

    With ``validate=False`` (for sandbox test numbers, which often fail the check digit) only the shape is
    checked: 12 ASCII digits. Every failure raises :class:`~health_async.errors.InvalidAadhaarNumber` naming the
    rule that failed, never the number.
    """
    if not isinstance(number, str):
        raise InvalidAadhaarNumber(f"an Aadhaar number must be a str, not {type(number).__name__}")
    digits = number.replace(" ", "").replace("-", "")
    if not digits:
        raise InvalidAadhaarNumber("the Aadhaar number is empty")
    if not set(digits) <= _ASCII_DIGITS:
        raise InvalidAadhaarNumber("an Aadhaar number may contain only digits, spaces and hyphens")
    if len(digits) != 12:
        raise InvalidAadhaarNumber(f"an Aadhaar number has 12 digits, this one has {len(digits)}")
    if validate:
        if digits[0] in "01":
            raise InvalidAadhaarNumber("an Aadhaar number never starts with 0 or 1")
        if _checksum(digits, 0) != 0:
            raise InvalidAadhaarNumber(
                "the Aadhaar number fails its Verhoeff check digit (a typo?); pass validate=False for sandbox numbers"
            )
    return digits


def mask_aadhaar(number: str) -> str:
    """The display form ``XXXX XXXX 1234``: only the last four digits shown, and none of a malformed input."""
    digits = "".join(ch for ch in str(number) if ch in _ASCII_DIGITS)
    return "XXXX XXXX " + (digits[-4:] if len(digits) == 12 else "XXXX")
