"""Professional registry (HPR) models: the answers of ``client.hpr`` (``/abdm/nhpr/v1/hpr/aadhaar/...``).

Wire names are registration.yml's (``txn_id`` in some answers, ``txnId`` in others, ``hprId`` beside
``hpr_id_number``); each model reads the ``data`` of the answer's envelope (:func:`._answer.unwrap`, done by the
``parse_*`` functions and the resource). Unknown keys are ignored; a missing optional field is ``None`` (or ``()``).

Personal data is left out of every ``repr``: transaction ids, OTP hints, mobile numbers, names, dates of birth,
addresses, e-mail, photos, tokens, and the HPR ID and number themselves (a professional's identifier, kept as an
ABHA address is). What a ``repr`` shows is the flags (``verified``, ``new``) and counts.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterator
from typing import Any, ClassVar

import attrs

from ..._wire import empty_is_none, non_empty, structure, wire
from ...errors import ResponseValidationError
from ._answer import unwrap

__all__ = [
    "HprAccount",
    "HprMobileCheck",
    "HprOtpSent",
    "HprProfile",
    "HprRegistrationStep",
    "HprStep",
    "HprSuggestions",
    "parse_hpr_available",
    "parse_hpr_suggestions",
]


class HprRegistrationStep(enum.Enum):
    """What a guided HPR registration (``client.hpr.register``) expects next: its ``next_step``, in the order of
    abdm-connect/flows/m4.mdx. The value is what the flow's state (``to_state()``) stores."""

    #: An OTP went to the Aadhaar-linked mobile: ``verify_otp(otp)``.
    VERIFY_OTP = "verify_otp"
    #: The Aadhaar is verified: ``verify_mobile(mobile)``, the professional's mobile number.
    VERIFY_MOBILE = "verify_mobile"
    #: The mobile given is not the Aadhaar-linked one: an OTP went to it, ``verify_mobile_otp(otp)``.
    VERIFY_MOBILE_OTP = "verify_mobile_otp"
    #: The person is verified: ``check_exist()`` asks whether they already hold an HPR ID.
    CHECK_EXIST = "check_exist"
    #: They hold none: ``create(hpr_id, password=..., ...)`` (``suggest()`` offers free IDs).
    CREATE = "create"
    #: Finished: the flow's ``hpr_id`` is the professional's (created now, or held already: ``existed``).
    DONE = "done"
    #: ABDM refused with a rate limit or a block (``AbhaRateLimited`` / ``AbhaBlocked``): start a new flow after
    #: the flow's ``blocked_until``.
    BLOCKED = "blocked"


@attrs.frozen
class HprOtpSent:
    """An OTP went out (``hpr/aadhaar/init``: to the Aadhaar-linked mobile; ``hpr/aadhaar/mobile/init``: to the
    mobile number given). Pass :attr:`txn_id` to the next call (wire ``NhprEkaAadhaarResponse``)."""

    __wire_lenient__: ClassVar[bool] = True  # an OTP already went out: a side field must not lose the txn id

    #: Transaction id for the next call. Hidden from ``repr``.
    txn_id: str = wire("txn_id", "txnId", parse=non_empty, pii=True)
    #: Text saying where the OTP went. Hidden from ``repr``.
    hint: str | None = wire(default=None, pii=True)
    #: The mobile number the OTP went to, as the service shows it (usually masked). Hidden from ``repr``.
    mobile_num: str | None = wire(default=None, pii=True)


@attrs.frozen
class HprStep:
    """An OTP of the transaction was checked (``hpr/aadhaar/verify``, ``hpr/aadhaar/mobile/verify``): continue
    with :attr:`txn_id` (wire ``NhprEkaAadhaarResponse``)."""

    __wire_lenient__: ClassVar[bool] = True  # the OTP is spent: a side field must not lose the txn id

    #: Transaction id for the next call. Hidden from ``repr``.
    txn_id: str = wire("txn_id", "txnId", parse=non_empty, pii=True)
    #: The service's text about the step. Hidden from ``repr``.
    hint: str | None = wire(default=None, pii=True)
    #: The Aadhaar-linked mobile number, as the service shows it (usually masked). Hidden from ``repr``.
    mobile_num: str | None = wire(default=None, pii=True)


@attrs.frozen
class HprMobileCheck:
    """Whether the mobile number given is the one linked to the Aadhaar number (``hpr/aadhaar/demo/verify``, wire
    ``NhprEkaVerifiedResponse``). When :attr:`verified` is not true, confirm that number with its own OTP:
    ``mobile_init`` then ``mobile_verify``."""

    __wire_lenient__: ClassVar[bool] = True  # carries the txn id

    #: True when the mobile number is the Aadhaar-linked one.
    verified: bool | None = None
    #: Transaction id for the next call (wire ``txnId``). Hidden from ``repr``.
    txn_id: str | None = wire("txnId", "txn_id", parse=empty_is_none, default=None, pii=True, strict=True)
    #: The person's HPR ID when they already hold one (wire ``hpr.hprId``). Hidden from ``repr``.
    hpr_id: str | None = wire("hpr.hprId", parse=empty_is_none, default=None, pii=True)
    #: HPR IDs the service suggests (wire ``suggested_hpr_ids``). Hidden from ``repr`` but for their number.
    suggested_hpr_ids: tuple[str, ...] = attrs.field(default=(), repr=lambda v: f"<{len(v)}>")
    #: Why the check failed, in the service's words.
    reason: str | None = None
    #: The service's code for a failed check.
    error_code: str | None = None
    #: UIDAI's token of the check. Hidden from ``repr``.
    uidai_token: str | None = wire(default=None, pii=True)


@attrs.frozen
class HprProfile:
    """The professional's details after the Aadhaar checks, and whether they already hold an HPR ID
    (``hpr/aadhaar/check/exist``, wire ``NhprEKAIsHPRIDExistsResponse``): :attr:`exists` says whether to skip the
    creation (abdm-connect/flows/m4.mdx: "HPR ID exists? Yes: done, skip creation")."""

    __wire_lenient__: ClassVar[bool] = True  # carries the txn id and a token

    #: True when the person has no HPR ID yet (wire ``new``).
    new: bool | None = None
    #: The person's HPR ID, when they hold one (wire ``hpr_id``). Hidden from ``repr``.
    hpr_id: str | None = wire(parse=empty_is_none, default=None, pii=True)
    #: The 14-digit HPR ID number, when they hold one. Hidden from ``repr``.
    hpr_id_number: str | None = wire(parse=empty_is_none, default=None, pii=True)
    #: Transaction id for the next call (``suggest``, ``create``). Hidden from ``repr``.
    txn_id: str | None = wire(parse=empty_is_none, default=None, pii=True, strict=True)
    #: A token of the service for this person. Hidden from ``repr``.
    token: str | None = wire(parse=empty_is_none, default=None, pii=True)
    name: str | None = wire(default=None, pii=True)
    first_name: str | None = wire(default=None, pii=True)
    middle_name: str | None = wire(default=None, pii=True)
    last_name: str | None = wire(default=None, pii=True)
    gender: str | None = wire(default=None, pii=True)
    day_of_birth: str | None = wire(default=None, pii=True)
    month_of_birth: str | None = wire(default=None, pii=True)
    year_of_birth: str | None = wire(default=None, pii=True)
    #: Postal address.
    address: str | None = wire(default=None, pii=True)
    pincode: str | None = wire(default=None, pii=True)
    state_code: str | None = wire(default=None, pii=True)
    state_name: str | None = wire(default=None, pii=True)
    district_code: str | None = wire(default=None, pii=True)
    district_name: str | None = wire(default=None, pii=True)
    mobile: str | None = wire(default=None, pii=True)
    #: Base64 photo.
    profile_photo: str | None = wire(default=None, pii=True)
    #: The professional's category (doctor, nurse, ...) and sub-category, as the registry numbers them.
    category_id: int | None = None
    sub_category_id: int | None = None

    @property
    def exists(self) -> bool:
        """True when the person already holds an HPR ID: the answer says ``new: false``, or (no ``new`` flag)
        names an HPR ID. Judgement call: ``new`` is the registry's own word and wins over a stray id."""
        if self.new is not None:
            return not self.new
        return bool(self.hpr_id or self.hpr_id_number)

    @property
    def date_of_birth(self) -> dt.date | None:
        """The date of birth when day, month and year are all given and form a date, else ``None``."""
        return _date(self.year_of_birth, self.month_of_birth, self.day_of_birth)


@attrs.frozen
class HprAccount:
    """The HPR ID just created (``hpr/aadhaar/create``, wire ``NhprEKACreateHPRIDResponse``)."""

    __wire_lenient__: ClassVar[bool] = True  # an account was created: a side field must not lose the answer

    #: The new HPR ID (wire ``hprId``). Hidden from ``repr``.
    hpr_id: str | None = wire("hprId", "hpr_id", parse=empty_is_none, default=None, pii=True)
    #: The 14-digit HPR ID number. Hidden from ``repr``.
    hpr_id_number: str | None = wire(parse=empty_is_none, default=None, pii=True)
    #: True when the account is new (as the service says it).
    new: bool | None = None
    #: How the account can log in, as the service names them.
    auth_methods: tuple[str, ...] = ()
    name: str | None = wire(default=None, pii=True)
    first_name: str | None = wire(default=None, pii=True)
    middle_name: str | None = wire(default=None, pii=True)
    last_name: str | None = wire(default=None, pii=True)
    email: str | None = wire(default=None, pii=True)
    mobile: str | None = wire(default=None, pii=True)
    gender: str | None = wire(default=None, pii=True)
    day_of_birth: str | None = wire(default=None, pii=True)
    month_of_birth: str | None = wire(default=None, pii=True)
    year_of_birth: str | None = wire(default=None, pii=True)
    state_code: str | None = wire(default=None, pii=True)
    state_name: str | None = wire(default=None, pii=True)
    district_code: str | None = wire(default=None, pii=True)
    district_name: str | None = wire(default=None, pii=True)
    #: Base64 photo of the KYC.
    kyc_photo: str | None = wire(default=None, pii=True)
    category_id: int | None = None
    sub_category_id: int | None = None
    #: The registry's categories, as sent (no schema given).
    categories: Any = wire(default=None, repr=False, eq=False, hash=False)

    @property
    def date_of_birth(self) -> dt.date | None:
        """The date of birth when day, month and year are all given and form a date, else ``None``."""
        return _date(self.year_of_birth, self.month_of_birth, self.day_of_birth)


@attrs.frozen
class HprSuggestions:
    """HPR IDs still free for the person (``hpr/aadhaar/suggest``: wire ``{"data": [...]}``); pick one for
    ``create``. Hidden from ``repr`` but for their number."""

    hpr_ids: tuple[str, ...] = attrs.field(default=(), repr=lambda v: f"<{len(v)}>")

    def __iter__(self) -> Iterator[str]:
        return iter(self.hpr_ids)

    def __len__(self) -> int:
        return len(self.hpr_ids)


def _date(year: str | None, month: str | None, day: str | None) -> dt.date | None:
    try:
        return dt.date(int(year or ""), int(month or ""), int(day or ""))
    except (ValueError, OverflowError):
        return None


def parse_hpr_suggestions(data: Any) -> HprSuggestions:
    """The suggestions of a ``suggest`` answer (``{"data": [...]}``; ``null`` counts as none);
    :class:`~health_async.errors.ResponseValidationError` when it is not a list of strings."""
    ids = unwrap(data, "HPR ID suggestions")
    return structure({"hpr_ids": ids}, HprSuggestions)


def parse_hpr_available(data: Any) -> bool:
    """The ``available`` flag of a ``check/available`` answer (``NhprDoesHprExistResponse``; also read from the
    string ``"true"``/``"false"``); :class:`~health_async.errors.ResponseValidationError` when there is none."""
    inner = unwrap(data, "HPR ID availability")
    value = inner.get("available") if type(inner) is dict else None
    if type(value) is str and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if type(value) is not bool:
        raise ResponseValidationError("the response does not fit HPR ID availability: field available is missing")
    return value
