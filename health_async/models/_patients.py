"""Patient directory models (``/profiles/v1/patient/...``).

Built from the service's JSON by the hooks in :mod:`health_async._convert_patients`: the wire's short names
(``fn``, ``mn``, ``ln``, ``fln``, ``gen``, ``dob``, ``ccd``, ``bg``/``bloodgroup``, ``c_ate``, ``arc``...) never leave
the converter; unknown keys are ignored and every field but :attr:`Patient.oid` may be missing (``None``).

Personal data (names, mobile number, e-mail, date of birth, gender, username, ABHA address, extras) is left out
of every ``repr``: only the OID, the workspace, the status, the timestamps and the archived flag are shown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

__all__ = ["BLOOD_GROUPS", "GENDERS", "BloodGroup", "Gender", "Patient", "PatientCreated", "PatientPage"]

#: Gender codes the service accepts (``M``, ``F``, ``O``).
Gender = Literal["M", "F", "O"]
#: Blood groups the service accepts.
BloodGroup = Literal["A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"]

GENDERS: Final[frozenset[str]] = frozenset({"M", "F", "O"})
BLOOD_GROUPS: Final[frozenset[str]] = frozenset({"A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"})


@attrs.frozen
class Patient:
    """A patient of the directory: a full profile (``get``, ``by_username``) or the fields a list, search or
    by-mobile answer carries (the others are ``None``).

    Values are as the service stores them: names and e-mail in lowercase (the service lowercases them), the
    mobile number usually without its country code, which is in :attr:`country_code` (the search answer may
    mask digits, e.g. ``98765XXXXX``).
    """

    #: The patient's id (wire ``oid``): pass it to ``get``, ``update``, ``archive`` or record calls as ``user_id``.
    oid: str
    #: Workspace id (wire ``wid``).
    workspace_id: str | None = None
    #: Profile status short code (wire ``ps``, e.g. ``"P"``).
    status: str | None = None
    #: Creation time, epoch seconds (wire ``c_ate``).
    created_at: int | None = None
    #: Last update time, epoch seconds (wire ``u_ate``).
    updated_at: int | None = None
    #: True when archived (wire ``arc``; only sent when archived profiles were asked for).
    archived: bool | None = None
    #: Gender code, ``"M"``, ``"F"`` or ``"O"`` (wire ``gen``).
    gender: str | None = attrs.field(default=None, repr=False)
    #: Wire ``dob``.
    date_of_birth: dt.date | None = attrs.field(default=None, repr=False)
    #: True when :attr:`date_of_birth` was derived from a stated age (wire ``is_age``).
    dob_from_age: bool | None = attrs.field(default=None, repr=False)
    #: Wire ``s`` (salutation, e.g. ``"Dr"``).
    salutation: str | None = attrs.field(default=None, repr=False)
    #: Wire ``fn``.
    first_name: str | None = attrs.field(default=None, repr=False)
    #: Wire ``mn``.
    middle_name: str | None = attrs.field(default=None, repr=False)
    #: Wire ``ln``.
    last_name: str | None = attrs.field(default=None, repr=False)
    #: Wire ``fln``.
    full_name: str | None = attrs.field(default=None, repr=False)
    #: Wire ``bg`` (``bloodgroup`` in requests).
    blood_group: str | None = attrs.field(default=None, repr=False)
    #: Wire ``mobile``: as stored, usually the national number without :attr:`country_code`.
    mobile: str | None = attrs.field(default=None, repr=False)
    #: Country calling code of :attr:`mobile`, e.g. ``"+91"`` (wire ``ccd``).
    country_code: str | None = attrs.field(default=None, repr=False)
    email: str | None = attrs.field(default=None, repr=False)
    #: UHID / partner id / username, unique in the workspace (wire ``username``).
    username: str | None = attrs.field(default=None, repr=False)
    #: ABHA address, e.g. ``name@abdm`` (wire ``abha``).
    abha: str | None = attrs.field(default=None, repr=False)
    #: The free-form ``extras`` object given at creation or update.
    extras: Mapping[str, Any] | None = attrs.field(default=None, repr=False)


@attrs.frozen
class PatientCreated:
    """The answer to ``patients.create`` (HTTP 201): the new patient's OID."""

    oid: str


@attrs.frozen
class PatientPage:
    """One page of ``GET /profiles/v1/patient/minified/`` (``patients.pages``)."""

    #: The patients of this page (wire ``profiles``).
    patients: tuple[Patient, ...] = ()
    #: The page number the service says this is (wire ``currPageMeta.currPageNo``), if it said.
    page_no: int | None = None
    #: The page size the service applied (wire ``currPageMeta.pageSize``), if it said.
    page_size: int | None = None
    #: The next page number the service gave (wire ``currPageMeta.nextPage``); ``None`` when it said ``-1`` or
    #: nothing.
    next_page: int | None = None
    #: True when the service said this is the last page (``nextPage == -1``), False when it gave a next page,
    #: ``None`` when it did not say (then only an empty or a short page ends the listing).
    is_last: bool | None = None
