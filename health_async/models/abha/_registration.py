"""ABHA (health account) models: OTP sends, the step answers of registration and login, profiles, login methods,
and the profile a mobile registration sends.

Wire names are the attribute names except where a field declares its own with ``wire(...)``
(:mod:`health_async._wire`); unknown keys are ignored and missing optional fields are ``None`` (or ``()``).

Secrets and personal data are left out of every ``repr``: transaction ids, OTP hints, the user's ABHA tokens,
names, dates of birth, mobile numbers, ABHA numbers and addresses, postal addresses and photos. What a ``repr``
shows is the step, the KYC flag, the eka ids without their token, and counts.

"""

from __future__ import annotations

import datetime as dt
import enum
import re
import time
from collections.abc import Callable
from typing import Any, ClassVar, Final

import attrs

from ..._wire import Invalid, WireEnum, empty_is_none, non_empty, rule_for, wire
from ...errors import InvalidRequest, ResponseValidationError
from ..patients._patients import GENDERS, Gender

__all__ = [
    "AadhaarInit",
    "AbhaAccount",
    "AbhaProfile",
    "AbhaProfileSummary",
    "AbhaStep",
    "EkaIds",
    "FlowStep",
    "LoginMethod",
    "LoginMethods",
    "NewAbhaProfile",
    "OtpSent",
    "OtpSystem",
    "SkipState",
]


class SkipState(WireEnum):
    """What the service says comes next (wire ``skip_state``). ``UNKNOWN`` stands for a value this version does
    not know (and for a missing one): never an error."""

    #: Done: the ABHA address exists and the user is logged in (``token`` / ``refresh_token`` are set).
    ABHA_END = "abha_end"
    #: The mobile number given to ``aadhaar_verify`` is not the Aadhaar-linked one: an OTP went to it; call
    #: ``aadhaar_mobile_verify``.
    CONFIRM_MOBILE_OTP = "confirm_mobile_otp"
    #: Several ABHA addresses match: pick one of :attr:`AbhaStep.abha_profiles` and call ``login_phr``.
    ABHA_SELECT = "abha_select"
    #: Create an ABHA address (``aadhaar_create`` / ``mobile_create``); when :attr:`AbhaStep.abha_profiles` is not
    #: empty the person already has ABHA addresses: ``auto_login`` into one of them instead of a duplicate.
    ABHA_CREATE = "abha_create"
    UNKNOWN = "unknown"


class LoginMethod(enum.Enum):
    """How ``login_init`` identifies the person (wire ``method``)."""

    #: An ABHA address (``name@abdm``); the identifier is the address.
    PHR_ADDRESS = "phr_address"
    #: A 14-digit ABHA number (``12-3456-7890-1234``; hyphens and spaces are stripped).
    ABHA_NUMBER = "abha_number"
    #: An Indian mobile number.
    MOBILE = "mobile"
    #: A 12-digit Aadhaar number.
    AADHAAR_NUMBER = "aadhaar_number"
    #: An index of a previous search answer; needs that answer's ``txn_id``.
    SEARCH = "search"


class OtpSystem(enum.Enum):
    """Who sends the login OTP (wire ``otp_system``): ABDM (to the ABHA's mobile) or UIDAI (Aadhaar-linked mobile)."""

    ABDM = "abdm"
    AADHAAR = "aadhaar"


@attrs.frozen
class AadhaarInit:
    """Result of starting Aadhaar registration: an OTP went to the mobile number linked to the Aadhaar number."""

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id or a token: see health_async._wire

    #: Transaction id to pass to the next registration steps; hidden from ``repr``.
    txn_id: str = wire(pii=True)
    #: Text saying where the OTP went, the mobile number masked (hidden from ``repr``).
    hint: str | None = wire(default=None, pii=True)


@attrs.frozen
class OtpSent:
    """An OTP went out (resend, mobile init, login init). Pass :attr:`txn_id` to the next call."""

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id or a token: see health_async._wire

    #: Transaction id for the next call. Hidden from ``repr``.
    txn_id: str = wire(parse=non_empty, pii=True)
    #: Text saying where the OTP went, the mobile number masked. Hidden from ``repr``.
    hint: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class EkaIds:
    """The service's ids of the person once an ABHA step ends (wire ``eka``)."""

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id or a token: see health_async._wire

    #: The person's OID: pass it as ``user_id`` to later calls (wire ``oid``). Hidden from ``repr``.
    oid: str | None = wire(parse=empty_is_none, default=None, pii=True)
    #: The person's uuid. Hidden from ``repr``.
    uuid: str | None = wire(parse=empty_is_none, default=None, pii=True)
    #: A short-lived authentication token. Hidden from ``repr``.
    min_token: str | None = wire(parse=empty_is_none, default=None, pii=True)


@attrs.frozen
class AbhaProfileSummary:
    """An existing ABHA address of the person (an entry of wire ``abha_profiles``), to pick for ``auto_login`` or
    ``login_phr``."""

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id or a token: see health_async._wire

    #: The ABHA address (``name@abdm``). Hidden from ``repr``.
    abha_address: str | None = attrs.field(default=None, repr=False)
    #: The holder's name. Hidden from ``repr``.
    name: str | None = attrs.field(default=None, repr=False)
    #: True when the ABHA is KYC-verified (wire ``kyc_verified``, sent as the string ``"true"``/``"false"``).
    kyc_verified: bool | None = None


@attrs.frozen
class AbhaProfile:
    """An ABHA profile (wire ``profile``). Every field may be missing (``None``); personal fields are hidden from
    ``repr``."""

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id or a token: see health_async._wire

    #: Primary ABHA address.
    abha_address: str | None = attrs.field(default=None, repr=False)
    #: Every ABHA address of the person.
    abha_addresses: tuple[str, ...] = attrs.field(default=(), repr=False)
    #: The 14-digit ABHA number, ``12-3456-7890-1234`` (absent for a mobile-only ABHA).
    abha_number: str | None = attrs.field(default=None, repr=False)
    first_name: str | None = attrs.field(default=None, repr=False)
    middle_name: str | None = attrs.field(default=None, repr=False)
    last_name: str | None = attrs.field(default=None, repr=False)
    full_name: str | None = attrs.field(default=None, repr=False)
    #: ``"M"``, ``"F"`` or ``"O"``.
    gender: str | None = attrs.field(default=None, repr=False)
    day_of_birth: int | None = attrs.field(default=None, repr=False)
    month_of_birth: int | None = attrs.field(default=None, repr=False)
    year_of_birth: int | None = attrs.field(default=None, repr=False)
    mobile: str | None = attrs.field(default=None, repr=False)
    #: Postal address.
    address: str | None = attrs.field(default=None, repr=False)
    pincode: str | None = attrs.field(default=None, repr=False)
    state_code: str | None = attrs.field(default=None, repr=False)
    state_name: str | None = attrs.field(default=None, repr=False)
    district_code: str | None = attrs.field(default=None, repr=False)
    district_name: str | None = attrs.field(default=None, repr=False)
    sub_district_code: str | None = attrs.field(default=None, repr=False)
    sub_district_name: str | None = attrs.field(default=None, repr=False)
    town_code: str | None = attrs.field(default=None, repr=False)
    town_name: str | None = attrs.field(default=None, repr=False)
    village_code: str | None = attrs.field(default=None, repr=False)
    village_name: str | None = attrs.field(default=None, repr=False)
    ward_code: str | None = attrs.field(default=None, repr=False)
    ward_name: str | None = attrs.field(default=None, repr=False)
    #: Base64 photo.
    profile_photo: str | None = attrs.field(default=None, repr=False)
    #: True when the ABHA is KYC-verified (Aadhaar); ``None`` when not said.
    kyc_verified: bool | None = None

    @property
    def date_of_birth(self) -> dt.date | None:
        """The date of birth when day, month and year are all given and form a date, else ``None``."""
        if self.year_of_birth is None or self.month_of_birth is None or self.day_of_birth is None:
            return None
        try:
            return dt.date(self.year_of_birth, self.month_of_birth, self.day_of_birth)
        except (ValueError, OverflowError):  # a year past a C int is valid JSON too
            return None


@attrs.frozen
class AbhaStep:
    """The answer of a registration or login step: where the flow is now (:attr:`skip_state`) and what it carries.

    Always continue with the :attr:`txn_id` of the latest answer (when it has one). When :attr:`skip_state` is
    :attr:`SkipState.ABHA_END` the user is logged in: :attr:`token` and :attr:`refresh_token` are the user's ABHA
    tokens (secrets: store them as such) and :attr:`eka` holds the OID.
    """

    __wire_lenient__: ClassVar[bool] = True  # carries a txn id or a token: see health_async._wire

    skip_state: SkipState = SkipState.UNKNOWN
    #: Transaction id for the next call (absent after a mobile ``create``). Hidden from ``repr``.
    txn_id: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)
    #: Text saying where an OTP went, the mobile number masked. Hidden from ``repr``.
    hint: str | None = attrs.field(default=None, repr=False)
    #: The person's existing ABHA addresses (for ``abha_select``, and ``abha_create`` -> ``auto_login``).
    abha_profiles: tuple[AbhaProfileSummary, ...] = ()
    #: The ABHA profile (KYC details after an Aadhaar verify, the account after create or login).
    profile: AbhaProfile | None = None
    #: The service's ids of the person (wire ``eka``), once known.
    eka: EkaIds | None = None
    #: The user's ABHA token, issued by ABDM. Hidden from ``repr``.
    token: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)
    #: The user's ABHA refresh token. Hidden from ``repr``.
    refresh_token: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)
    #: The service's ``success`` flag (mobile ``create`` only).
    success: bool | None = None

    @property
    def done(self) -> bool:
        """True when the flow has ended (``skip_state`` is ``ABHA_END``)."""
        return self.skip_state is SkipState.ABHA_END

    @property
    def oid(self) -> str | None:
        """The person's OID (``eka.oid``), when given."""
        return None if self.eka is None else self.eka.oid


@attrs.frozen
class LoginMethods:
    """How an ABHA address can log in (``login_methods``)."""

    #: Methods the address can use, as the service names them (e.g. ``"MOBILE_OTP"``, ``"AADHAAR_OTP"``).
    auth_methods: tuple[str, ...] = ()
    #: Methods blocked for this address.
    blocked_methods: tuple[str, ...] = ()
    #: Account status, e.g. ``"ACTIVE"``.
    status: str | None = None
    abha_address: str | None = attrs.field(default=None, repr=False)
    abha_number: str | None = attrs.field(default=None, repr=False)
    #: The holder's name (``fullname`` on the wire, ``full_name`` in some answers).
    full_name: str | None = wire("fullname", "full_name", default=None, pii=True)
    #: The (usually masked) mobile number.
    mobile: str | None = attrs.field(default=None, repr=False)


# ------------------------------------------------------------------------------------------- request models

_PINCODE: Final = re.compile(r"[1-9][0-9]{5}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_MAX_NAME: Final = 100


def _name(required: bool) -> Callable[[Any, Any, Any], None]:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None and not required:
            return
        if not isinstance(value, str):
            raise InvalidRequest(f"profile.{attribute.name} must be a str")
        if not value.strip():
            raise InvalidRequest(f"profile.{attribute.name} must not be empty")
        if len(value) > _MAX_NAME or _CONTROL.search(value):
            raise InvalidRequest(
                f"profile.{attribute.name} must be at most {_MAX_NAME} characters, no control characters"
            )

    return check


def _gender(_: object, __: attrs.Attribute[str], value: str) -> None:
    if value not in GENDERS:
        raise InvalidRequest('profile.gender must be "M", "F" or "O"')


#: India Standard Time: ABHA's calendar (a date of birth is a date in India).
IST: Final = dt.timezone(dt.timedelta(hours=5, minutes=30), "IST")
#: The clock the date-of-birth check reads (``time.time``; tests set an instant).
_now: Callable[[], float] = time.time


def today_in_india() -> dt.date:
    """Today's date in India, whatever the machine's time zone."""
    return dt.datetime.fromtimestamp(_now(), IST).date()


def _dob(_: object, __: attrs.Attribute[dt.date], value: dt.date) -> None:
    """Judgement call: "not in the future" is judged by India's calendar, not the machine's. A server on UTC used
    to refuse a child born in India today, from midnight IST until 05:30 (its own date was still yesterday)."""
    if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
        raise InvalidRequest("profile.date_of_birth must be a datetime.date")
    if value.year < 1900 or value > today_in_india():
        raise InvalidRequest("profile.date_of_birth must be after 1900 and not in the future (in India)")


def _pincode(_: object, __: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not _PINCODE.fullmatch(value):
        raise InvalidRequest("profile.pincode must be an Indian PIN code: 6 digits, not starting with 0")


def _address(_: object, __: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or len(value) > 500 or _CONTROL.search(value)):
        raise InvalidRequest("profile.address must be a str of at most 500 characters, no control characters")


@attrs.frozen
class NewAbhaProfile:
    """The person's details for ``mobile_create`` (wire ``profile``; mobile registration has no Aadhaar KYC).

    Checked when built, nothing sent yet: :class:`~health_async.errors.InvalidRequest` names the field and the
    rule, never the value. Names: non-empty, at most 100 characters; ``gender``: ``"M"``, ``"F"`` or ``"O"``;
    ``date_of_birth``: a ``datetime.date`` after 1900, not in the future in India (sent as day, month and year);
    ``pincode``: an Indian PIN code (6 digits, not starting with 0).
    """

    first_name: str = attrs.field(validator=_name(True), repr=False)
    gender: Gender = attrs.field(validator=_gender, repr=False)
    date_of_birth: dt.date = attrs.field(validator=_dob, repr=False)
    pincode: str = attrs.field(validator=_pincode, repr=False)
    middle_name: str | None = attrs.field(default=None, validator=_name(False), repr=False)
    last_name: str | None = attrs.field(default=None, validator=_name(False), repr=False)
    address: str | None = attrs.field(default=None, validator=_address, repr=False)

    def to_wire(self) -> dict[str, object]:
        """The wire ``profile`` object (``DetailsRequestType2``)."""
        dob = self.date_of_birth
        return {
            "first_name": self.first_name.strip(),
            "middle_name": None if self.middle_name is None else self.middle_name.strip(),
            "last_name": None if self.last_name is None else self.last_name.strip(),
            "gender": self.gender,
            "day_of_birth": dob.day,
            "month_of_birth": dob.month,
            "year_of_birth": dob.year,
            "pincode": self.pincode,
            "address": self.address,
        }


# ------------------------------------------------------------------------------------------- guided flows


class FlowStep(enum.Enum):
    """What a guided ABHA flow (``client.abha.register_with_aadhaar``, ``register_with_mobile``, ``login``) expects
    next: its ``next_step``. The value is what the flow's state (``to_state()``) stores."""

    #: Type the OTP that was sent: ``verify_otp(otp)`` (``resend_otp()`` for another one).
    VERIFY_OTP = "verify_otp"
    #: Aadhaar registration with a mobile number other than the Aadhaar-linked one: an OTP went to that number;
    #: ``verify_mobile_otp(otp)`` (``resend_otp()`` for another one).
    VERIFY_MOBILE_OTP = "verify_mobile_otp"
    #: Pick a new ABHA address and ``create(abha_address)`` (``suggest_addresses()`` helps). In a mobile
    #: registration whose mobile already holds ABHA addresses (:attr:`accounts <AbhaFlow.accounts>`),
    #: ``choose(abha_address)`` logs into one of them instead.
    CREATE_ADDRESS = "create_address"
    #: The person already has ABHA addresses: ``choose(abha_address)`` logs into one (never a duplicate).
    SELECT_ACCOUNT = "select_account"
    #: Finished: the person holds the ABHA address and is logged in (the flow's ``account``).
    DONE = "done"
    #: A ``create`` whose answer was lost most likely took effect (``address_exists`` says the address now
    #: exists): nothing more is sent; log in with that address (``client.abha.login("phr_address", ...)``).
    LOG_IN = "log_in"
    #: ABDM refused with a rate limit or a block (``AbhaRateLimited`` / ``AbhaBlocked``): the transaction is
    #: over; start a new flow after the flow's ``blocked_until``.
    BLOCKED = "blocked"


def _mask_abha_number(number: str | None) -> str | None:
    if number is None:
        return None
    digits = "".join(ch for ch in number if ch.isdigit())
    return "xx-xxxx-xxxx-" + digits[-4:] if len(digits) >= 4 else "xx-xxxx-xxxx-xxxx"


@attrs.frozen
class AbhaAccount:
    """The end of a guided flow: the ABHA address the person now holds and is logged into.

    ``repr`` shows only :attr:`created` and :attr:`kyc_verified`; the OID, the address, the ABHA number, the
    profile and the tokens are hidden (the tokens are the person's credentials: keep them as secrets).
    """

    #: The ABHA address (``name@abdm``), as the service returned it (or as sent when the answer has none).
    abha_address: str | None = attrs.field(default=None, repr=False)
    #: True when this flow created the address; False when it logged into an existing one.
    created: bool = False
    #: True when the ABHA is KYC-verified (Aadhaar); ``None`` when the service did not say.
    kyc_verified: bool | None = None
    #: The person's OID: pass it as ``user_id`` to later calls. Hidden from ``repr``.
    oid: str | None = attrs.field(default=None, repr=False)
    #: The 14-digit ABHA number (``12-3456-7890-1234``); ``None`` for a mobile-only ABHA.
    abha_number: str | None = attrs.field(default=None, repr=False)
    #: The ABHA profile of the answer.
    profile: AbhaProfile | None = attrs.field(default=None, repr=False)
    #: The service's ids of the person (``eka``), its ``min_token`` included.
    eka: EkaIds | None = attrs.field(default=None, repr=False)
    #: The person's ABHA token (issued by ABDM). A secret.
    token: str | None = attrs.field(default=None, repr=False)
    #: The person's ABHA refresh token. A secret.
    refresh_token: str | None = attrs.field(default=None, repr=False)

    @property
    def masked_abha_number(self) -> str | None:
        """The ABHA number for display, ``xx-xxxx-xxxx-1234``, or ``None``."""
        return _mask_abha_number(self.abha_number)

    @classmethod
    def from_step(cls, step: AbhaStep, *, created: bool, abha_address: str | None = None) -> AbhaAccount:
        """The account of a final (``ABHA_END``) step answer; ``abha_address`` is used when the answer's profile
        does not name one."""
        profile = step.profile
        return cls(
            abha_address=(profile.abha_address if profile is not None and profile.abha_address else abha_address),
            created=created,
            kyc_verified=None if profile is None else profile.kyc_verified,
            oid=step.oid,
            abha_number=None if profile is None else profile.abha_number,
            profile=profile,
            eka=step.eka,
            token=step.token,
            refresh_token=step.refresh_token,
        )


def parse_exists(data: Any) -> bool:
    """The ``exists`` flag of a ``phr/check`` answer (the schema also spells it ``exist``);
    :class:`~health_async.errors.ResponseValidationError` when there is none."""
    value = data.get("exists", data.get("exist")) if type(data) is dict else None
    if type(value) is not bool:
        raise ResponseValidationError("the response does not fit address check: field exists has the wrong shape")
    return value


_SUGGESTIONS: Final = rule_for(tuple[str, ...])


def parse_suggestions(data: Any) -> tuple[str, ...]:
    """The ``suggestions`` of a ``suggest`` answer (``null`` counts as none);
    :class:`~health_async.errors.ResponseValidationError` when it is not a list of strings."""
    if type(data) is not dict:
        raise ResponseValidationError("the response does not fit address suggestions: expected a JSON object")
    try:
        return _SUGGESTIONS(data.get("suggestions"), "suggestions")  # type: ignore[no-any-return]
    except Invalid:
        raise ResponseValidationError(
            "the response does not fit address suggestions: field suggestions has the wrong shape"
        ) from None
