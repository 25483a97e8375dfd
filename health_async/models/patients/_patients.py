"""People: the patient directory's models (``/profiles/v1/patient/...``) and the EMR user's profile
(``/profiles/v1/emr-user/{oid}``), which carry the same personal fields under the same wire names.

The wire's short names (``fn``, ``mn``, ``ln``, ``fln``, ``gen``, ``dob``, ``ccd``, ``bg``/``bloodgroup``, ``c_ate``,
``arc``...) are declared beside the readable fields (:mod:`health_async._wire`); unknown keys are ignored and every
field but :attr:`Patient.oid` may be missing (``None``). Accepted spellings beside the documented ones:
``bloodgroup`` for ``bg`` (the request spelling), ``mob`` for ``mobile`` (the by-mobile query's spelling); an
``oid`` sent as a number is taken as its decimal string.

Personal data (names, mobile number, e-mail, date of birth, gender, username, ABHA address, extras) is left out
of every ``repr``, and so is the OID (a person's id): only the workspace, the status, the timestamps and the
archived flag are shown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from ..._wire import non_empty, rule_for, structure, structure_many, wire
from ...errors import ResponseValidationError

__all__ = ["BLOOD_GROUPS", "GENDERS", "BloodGroup", "Gender", "Patient", "PatientCreated", "PatientPage", "Profile"]

#: Gender codes the service accepts (``M``, ``F``, ``O``).
Gender = Literal["M", "F", "O"]
#: Blood groups the service accepts.
BloodGroup = Literal["A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"]

GENDERS: Final[frozenset[str]] = frozenset({"M", "F", "O"})
BLOOD_GROUPS: Final[frozenset[str]] = frozenset({"A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"})


# The personal fields a patient and an EMR user's profile share: each declared once (wire names, live spellings,
# personal data out of repr) and used by both models, so a change to one is a change to both.
_STATUS: Final = wire("ps", default=None)
_CREATED_AT: Final = wire("c_ate", default=None)
_UPDATED_AT: Final = wire("u_ate", default=None)
_GENDER: Final = wire("gen", default=None, pii=True)
_DATE_OF_BIRTH: Final = wire("dob", default=None, pii=True)
_DOB_FROM_AGE: Final = wire("is_age", default=None, pii=True)
_SALUTATION: Final = wire("s", default=None, pii=True)
_FIRST_NAME: Final = wire("fn", default=None, pii=True)
_LAST_NAME: Final = wire("ln", default=None, pii=True)
_FULL_NAME: Final = wire("fln", default=None, pii=True)
_BLOOD_GROUP: Final = wire("bg", "bloodgroup", default=None, pii=True)
_MOBILE: Final = wire("mobile", "mob", default=None, pii=True)
_EMAIL: Final = wire(default=None, pii=True)


@attrs.frozen
class Patient:
    """A patient of the directory: a full profile (``get``, ``by_username``) or the fields a list, search or
    by-mobile answer carries (the others are ``None``).

    Values are as the service stores them: names and e-mail in lowercase (the service lowercases them), the
    mobile number usually without its country code, which is in :attr:`country_code` (the search answer may
    mask digits, e.g. ``98765XXXXX``).
    """

    #: The patient's id: pass it to ``get``, ``update``, ``archive`` or record calls as ``user_id``. Hidden from
    #: ``repr`` (a person's id).
    oid: str = wire(parse=non_empty, pii=True)
    #: Workspace id.
    workspace_id: str | None = wire("wid", default=None)
    #: Profile status short code (e.g. ``"P"``).
    status: str | None = _STATUS
    #: Creation time, epoch seconds.
    created_at: int | None = _CREATED_AT
    #: Last update time, epoch seconds.
    updated_at: int | None = _UPDATED_AT
    #: True when archived (only sent when archived profiles were asked for).
    archived: bool | None = wire("arc", default=None)
    #: Gender code, ``"M"``, ``"F"`` or ``"O"``.
    gender: str | None = _GENDER
    date_of_birth: dt.date | None = _DATE_OF_BIRTH
    #: True when :attr:`date_of_birth` was derived from a stated age.
    dob_from_age: bool | None = _DOB_FROM_AGE
    #: Salutation, e.g. ``"Dr"``.
    salutation: str | None = _SALUTATION
    first_name: str | None = _FIRST_NAME
    middle_name: str | None = wire("mn", default=None, pii=True)
    last_name: str | None = _LAST_NAME
    full_name: str | None = _FULL_NAME
    blood_group: str | None = _BLOOD_GROUP
    #: As stored, usually the national number without :attr:`country_code`.
    mobile: str | None = _MOBILE
    #: Country calling code of :attr:`mobile`, e.g. ``"+91"``.
    country_code: str | None = wire("ccd", default=None, pii=True)
    email: str | None = _EMAIL
    #: UHID / partner id / username, unique in the workspace.
    username: str | None = wire(default=None, pii=True)
    #: ABHA address, e.g. ``name@abdm``.
    abha: str | None = wire(default=None, pii=True)
    #: The free-form ``extras`` object given at creation or update.
    extras: Mapping[str, Any] | None = wire(default=None, pii=True)


@attrs.frozen
class PatientCreated:
    """The answer to ``patients.create`` (HTTP 201): the new patient's OID (hidden from ``repr``)."""

    oid: str = wire(parse=non_empty, pii=True)


@attrs.frozen
class PatientPage:
    """One page of ``GET /profiles/v1/patient/minified/`` (``patients.pages``)."""

    #: The patients of this page.
    patients: tuple[Patient, ...] = wire("profiles", default=())
    #: The page number the service says this is, if it said.
    page_no: int | None = wire("currPageMeta.currPageNo", default=None)
    #: The page size the service applied, if it said.
    page_size: int | None = wire("currPageMeta.pageSize", default=None)
    #: The next page number the service gave; ``None`` when it said ``-1`` or nothing.
    next_page: int | None = wire("currPageMeta.nextPage", parse=lambda v, label: _next_page(v, label), default=None)
    #: True when the service said this is the last page (``nextPage == -1``), False when it gave a next page,
    #: ``None`` when it did not say (then only an empty or a short page ends the listing).
    is_last: bool | None = wire("currPageMeta.nextPage", parse=lambda v, label: _is_last(v, label), default=None)


_PAGE_NUMBER: Final = rule_for(int | None)


def _next_page(value: Any, label: str) -> int | None:
    page: int | None = _PAGE_NUMBER(value, label)
    return page if page is not None and page >= 0 else None


def _is_last(value: Any, label: str) -> bool | None:
    page: int | None = _PAGE_NUMBER(value, label)
    return None if page is None else page < 0


@attrs.frozen
class Profile:
    """An EMR user's profile (``GET /profiles/v1/emr-user/{oid}``). Personal fields are hidden from ``repr``."""

    #: The user id (hidden from ``repr``).
    oid: str | None = wire(pii=True, default=None)
    business_id: str | None = wire("bid", default=None)
    #: Status short code.
    status: str | None = _STATUS
    #: Creation timestamp as sent.
    created_at: int | None = _CREATED_AT
    #: Update timestamp as sent.
    updated_at: int | None = _UPDATED_AT
    #: Gender short code.
    gender: str | None = _GENDER
    #: ``YYYY-MM-DD`` on the wire.
    date_of_birth: dt.date | None = _DATE_OF_BIRTH
    #: Whether the date of birth was derived from a stated age.
    dob_from_age: bool | None = _DOB_FROM_AGE
    first_name: str | None = _FIRST_NAME
    last_name: str | None = _LAST_NAME
    full_name: str | None = _FULL_NAME
    blood_group: str | None = _BLOOD_GROUP
    #: With the country prefix.
    mobile: str | None = _MOBILE
    email: str | None = _EMAIL
    salutation: str | None = _SALUTATION


#: Keys under which a wrapped answer may carry its list of patients.
_WRAPPERS: Final = ("profiles", "patients", "data", "results")


def structure_patients(data: Any, what: str) -> tuple[Patient, ...]:
    """Patients from an answer that may be a JSON array of them, one object (by-mobile's documented shape), or an
    object wrapping the array (``{"profiles": [...]}``); ``None``, ``{}`` and ``[]`` give ``()``.

    ``what`` names the answer in the error (``"search"``, ...). Raises
    :class:`~health_async.errors.ResponseValidationError`.
    """
    if data is None or (type(data) is dict and not data):
        return ()
    if type(data) is dict:
        for key in _WRAPPERS:
            inner = data.get(key)
            if type(inner) is list and "oid" not in data:
                data = inner
                break
        else:
            return (structure(data, Patient),)
    if type(data) is not list:
        raise ResponseValidationError(f"the {what} answer does not fit Patient: expected a JSON array or object")
    return structure_many(data, Patient, what)
