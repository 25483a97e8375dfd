"""Indian mobile numbers: normalised and checked before sending; never echoed in a message."""

from __future__ import annotations

import re

from .errors import InvalidArgumentType, InvalidMobileNumber

__all__ = ["mask_mobile", "normalize_mobile"]

_SEPARATORS = re.compile(r"[\s\-().]")


def normalize_mobile(value: str, *, name: str = "mobile") -> str:
    """The 10-digit national number of an Indian mobile, or :class:`InvalidMobileNumber` naming the rule.

    Accepted forms: ``9876543210``, ``+91 98765 43210``, ``+91-9876543210``, ``91 9876543210``, ``09876543210``
    (spaces, hyphens, dots and brackets are stripped). Rules (TRAI numbering plan): 10 digits after the ``+91`` /
    ``91`` / ``0`` prefix, the first digit 6, 7, 8 or 9. The message names the rule, never the number.
    """
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{name} must be a str, not {type(value).__name__}")
    digits = _SEPARATORS.sub("", value)
    if digits.startswith("+"):
        if not digits.startswith("+91"):
            raise InvalidMobileNumber(f"{name} must be an Indian mobile number (+91)")
        digits = digits[3:]
    elif len(digits) == 12 and digits.startswith("91"):
        digits = digits[2:]
    elif len(digits) == 11 and digits.startswith("0"):
        digits = digits[1:]
    if not digits.isascii() or not digits.isdigit():
        raise InvalidMobileNumber(f"{name} must contain only digits (with an optional +91 prefix)")
    if len(digits) != 10:
        raise InvalidMobileNumber(f"{name} must have 10 digits after the +91 prefix")
    if digits[0] not in "6789":
        raise InvalidMobileNumber(f"{name} must start with 6, 7, 8 or 9 (Indian mobile ranges)")
    return digits


def mask_mobile(value: str) -> str:
    """``XXXXXX3210``: the last four digits only, for display."""
    digits = "".join(ch for ch in value if ch.isdigit())
    return "X" * max(0, len(digits[-10:]) - 4) + digits[-4:]
