"""Aadhaar number rules: which rule failed is named, the number never is."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import health_async as ha
from health_async._aadhaar import mask_aadhaar, normalize_aadhaar, verhoeff_check, verhoeff_digit

VALID = "234567890124"  # 23456789012 + its Verhoeff digit


def test_known_verhoeff_values() -> None:
    # Classic published examples: 236 -> 3, 12345 -> 1, 142857 -> 0.
    assert verhoeff_digit("236") == "3"
    assert verhoeff_digit("12345") == "1"
    assert verhoeff_digit("142857") == "0"
    assert verhoeff_check("2363") and not verhoeff_check("2364")
    assert verhoeff_digit("23456789012") == "4"


@given(st.text(alphabet="0123456789", min_size=1, max_size=20))
def test_appending_the_digit_always_checks(digits: str) -> None:
    assert verhoeff_check(digits + verhoeff_digit(digits))


@given(st.text(alphabet="0123456789", min_size=11, max_size=11), st.integers(0, 11), st.integers(1, 9))
def test_any_single_digit_typo_is_caught(body: str, pos: int, delta: int) -> None:
    number = body + verhoeff_digit(body)
    typo = number[:pos] + str((int(number[pos]) + delta) % 10) + number[pos + 1 :]
    assert not verhoeff_check(typo)


@pytest.mark.parametrize("typed", [VALID, "2345 6789 0124", "2345-6789-0124", " 2345 6789-0124 "])
def test_spaces_and_hyphens_are_stripped(typed: str) -> None:
    assert normalize_aadhaar(typed) == VALID


@pytest.mark.parametrize(
    ("number", "rule"),
    [
        ("", "empty"),
        ("2345 6789 012a", "only digits"),
        ("\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19\uff10\uff11\uff12\uff14", "only digits"),  # full-width
        ("23456789012", "12 digits"),
        ("2345678901245", "12 digits"),
        ("134567890124", "never starts with 0 or 1"),
        ("034567890124", "never starts with 0 or 1"),
        ("234567890125", "Verhoeff"),
    ],
)
def test_each_rule_is_named_and_the_number_never_echoed(number: str, rule: str) -> None:
    with pytest.raises(ha.InvalidAadhaarNumber, match=rule) as info:
        normalize_aadhaar(number)
    assert isinstance(info.value, ValueError)
    digits = "".join(c for c in number if c.isdigit())
    if len(digits) >= 4:
        assert digits[-4:] not in str(info.value)


def test_non_string_is_refused() -> None:
    with pytest.raises(ha.InvalidAadhaarNumber, match="str"):
        normalize_aadhaar(234567890124)  # type: ignore[arg-type]


def test_opt_out_keeps_the_shape_check_only() -> None:
    assert normalize_aadhaar("1234 5678 9012", validate=False) == "123456789012"
    with pytest.raises(ha.InvalidAadhaarNumber, match="12 digits"):
        normalize_aadhaar("1234", validate=False)


def test_mask() -> None:
    assert mask_aadhaar("2345 6789 0124") == "XXXX XXXX 0124"
    assert mask_aadhaar("12") == "XXXX XXXX XXXX"
    assert mask_aadhaar("23456-78901") == "XXXX XXXX XXXX"
