"""Parsing hooks of the ABHA models, registered on the one converter of :mod:`health_async._convert`.

Same rules as every model: unknown keys are ignored, a missing optional field is ``None`` (or ``()``), anything
else that does not fit raises :class:`~health_async.errors.ResponseValidationError` naming the field, never the
value. Tolerated live variants: ``kyc_verified`` as a boolean or as the string ``"true"``/``"false"``; an unknown
or missing ``skip_state`` is :attr:`SkipState.UNKNOWN`; ``abha_profiles`` / ``suggestions`` may be ``null``.

Importing this module registers the hooks (``health_async.resources.abha`` does).
"""

from __future__ import annotations

from typing import Any

from ._convert import _bool, _dict, _int, _Invalid, _objects, _str, _strs, _validation_error, converter
from .models._abha import (
    AbhaProfile,
    AbhaProfileSummary,
    AbhaStep,
    EkaIds,
    LoginMethods,
    OtpSent,
    SkipState,
)

__all__ = ["parse_exists", "parse_suggestions"]


def _kyc(value: Any, field: str) -> bool | None:
    if value is None or value == "":
        return None
    if type(value) is bool:
        return value
    if type(value) is str:
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
    raise _Invalid(field)


def _required_str(value: Any, field: str) -> str:
    text = _str(value, field)
    if not text:
        raise _Invalid(field)
    return text


def _otp_sent(data: Any, _: Any = None) -> OtpSent:
    d = _dict(data, "otp answer")
    return OtpSent(txn_id=_required_str(d.get("txn_id"), "txn_id"), hint=_str(d.get("hint"), "hint"))


def _eka(data: Any, _: Any = None) -> EkaIds:
    d = _dict(data, "eka")
    return EkaIds(
        oid=_str(d.get("oid"), "eka.oid") or None,
        uuid=_str(d.get("uuid"), "eka.uuid") or None,
        min_token=_str(d.get("min_token"), "eka.min_token") or None,
    )


def _summary(data: Any, _: Any = None) -> AbhaProfileSummary:
    d = _dict(data, "abha_profiles[]")
    return AbhaProfileSummary(
        abha_address=_str(d.get("abha_address"), "abha_profiles[].abha_address"),
        name=_str(d.get("name"), "abha_profiles[].name"),
        kyc_verified=_kyc(d.get("kyc_verified"), "abha_profiles[].kyc_verified"),
    )


_PROFILE_STRINGS = (
    "abha_address",
    "abha_number",
    "first_name",
    "middle_name",
    "last_name",
    "full_name",
    "gender",
    "mobile",
    "address",
    "pincode",
    "state_code",
    "state_name",
    "district_code",
    "district_name",
    "sub_district_code",
    "sub_district_name",
    "town_code",
    "town_name",
    "village_code",
    "village_name",
    "ward_code",
    "ward_name",
    "profile_photo",
)


def _profile(data: Any, _: Any = None) -> AbhaProfile:
    d = _dict(data, "profile")
    get = d.get
    strings = {name: _str(get(name), f"profile.{name}") for name in _PROFILE_STRINGS}
    return AbhaProfile(
        abha_addresses=_strs(get("abha_addresses"), "profile.abha_addresses"),
        day_of_birth=_int(get("day_of_birth"), "profile.day_of_birth"),
        month_of_birth=_int(get("month_of_birth"), "profile.month_of_birth"),
        year_of_birth=_int(get("year_of_birth"), "profile.year_of_birth"),
        kyc_verified=_kyc(get("kyc_verified"), "profile.kyc_verified"),
        **strings,
    )


def _step(data: Any, _: Any = None) -> AbhaStep:
    d = _dict(data, "step")
    get = d.get
    profile = get("profile")
    eka = get("eka")
    return AbhaStep(
        skip_state=SkipState.from_wire(get("skip_state")),
        txn_id=_str(get("txn_id"), "txn_id") or None,
        hint=_str(get("hint"), "hint"),
        abha_profiles=tuple(_summary(p) for p in _objects(get("abha_profiles"), "abha_profiles")),
        profile=None if profile is None else _profile(profile),
        eka=None if eka is None else _eka(eka),
        token=_str(get("token"), "token") or None,
        refresh_token=_str(get("refresh_token"), "refresh_token") or None,
        success=_bool(get("success"), "success"),
    )


def _login_methods(data: Any, _: Any = None) -> LoginMethods:
    d = _dict(data, "login methods")
    get = d.get
    return LoginMethods(
        auth_methods=_strs(get("auth_methods"), "auth_methods"),
        blocked_methods=_strs(get("blocked_methods"), "blocked_methods"),
        status=_str(get("status"), "status"),
        abha_address=_str(get("abha_address"), "abha_address"),
        abha_number=_str(get("abha_number"), "abha_number"),
        full_name=_str(get("fullname", get("full_name")), "fullname"),
        mobile=_str(get("mobile"), "mobile"),
    )


def parse_exists(data: Any) -> bool:
    """The ``exists`` flag of a ``phr/check`` answer (the schema also spells it ``exist``);
    :class:`ResponseValidationError` when there is none."""
    value = data.get("exists", data.get("exist")) if type(data) is dict else None
    if type(value) is not bool:
        raise _validation_error("address check", _Invalid("exists"))
    return value


def parse_suggestions(data: Any) -> tuple[str, ...]:
    """The ``suggestions`` of a ``suggest`` answer (``null`` counts as none); :class:`ResponseValidationError`
    when it is not a list of strings."""
    try:
        return _strs(_dict(data, "suggest").get("suggestions"), "suggestions")
    except _Invalid as exc:
        raise _validation_error("address suggestions", exc) from None


for _cls, _hook in (
    (OtpSent, _otp_sent),
    (EkaIds, _eka),
    (AbhaProfileSummary, _summary),
    (AbhaProfile, _profile),
    (AbhaStep, _step),
    (LoginMethods, _login_methods),
):
    converter.register_structure_hook(_cls, _hook)
