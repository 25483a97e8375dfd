"""Parsing hooks of the patient directory models, registered on the one converter of :mod:`health_async._convert`.

Same rules as there: unknown keys are ignored, a missing optional field is ``None``, anything that does not fit
raises :class:`~health_async.errors.ResponseValidationError` naming the model and the field, never the value.
Hand-written (one ``dict.get`` per field): a minified list page carries up to 2000 patients.

Accepted spellings beside the documented ones: ``bloodgroup`` for ``bg`` (the request spelling), ``mob`` for
``mobile`` (the by-mobile query's spelling). An ``oid`` sent as a number is taken as its decimal string.

Importing this module registers the hooks; :mod:`health_async.resources.patients` imports it.
"""

from __future__ import annotations

from typing import Any, Final

from ._convert import _bool, _date, _dict, _int, _Invalid, _list, _str, _validation_error, converter
from .errors import ResponseValidationError
from .models import Patient, PatientCreated, PatientPage

__all__ = ["structure_patients"]


def _oid(value: Any) -> str:
    oid = _str(value, "oid")
    if not oid:
        raise _Invalid("oid")
    return oid


def _extras(value: Any) -> dict[str, Any] | None:
    return None if value is None else _dict(value, "extras")


def _patient(data: Any, _: Any = None) -> Patient:
    d = _dict(data, "patient")
    get = d.get
    blood_group = get("bg")
    if blood_group is None:
        blood_group = get("bloodgroup")
    mobile = get("mobile")
    if mobile is None:
        mobile = get("mob")
    return Patient(
        oid=_oid(get("oid")),
        workspace_id=_str(get("wid"), "wid"),
        status=_str(get("ps"), "ps"),
        created_at=_int(get("c_ate"), "c_ate"),
        updated_at=_int(get("u_ate"), "u_ate"),
        archived=_bool(get("arc"), "arc"),
        gender=_str(get("gen"), "gen"),
        date_of_birth=_date(get("dob"), "dob"),
        dob_from_age=_bool(get("is_age"), "is_age"),
        salutation=_str(get("s"), "s"),
        first_name=_str(get("fn"), "fn"),
        middle_name=_str(get("mn"), "mn"),
        last_name=_str(get("ln"), "ln"),
        full_name=_str(get("fln"), "fln"),
        blood_group=_str(blood_group, "bg"),
        mobile=_str(mobile, "mobile"),
        country_code=_str(get("ccd"), "ccd"),
        email=_str(get("email"), "email"),
        username=_str(get("username"), "username"),
        abha=_str(get("abha"), "abha"),
        extras=_extras(get("extras")),
    )


def _created(data: Any, _: Any = None) -> PatientCreated:
    return PatientCreated(oid=_oid(_dict(data, "created").get("oid")))


def _page(data: Any, _: Any = None) -> PatientPage:
    d = _dict(data, "page")
    patients = tuple(map(_patient, _list(d.get("profiles"), "profiles")))
    meta = d.get("currPageMeta")
    if meta is None:
        return PatientPage(patients=patients)
    meta = _dict(meta, "currPageMeta")
    next_page = _int(meta.get("nextPage"), "nextPage")
    return PatientPage(
        patients=patients,
        page_no=_int(meta.get("currPageNo"), "currPageNo"),
        page_size=_int(meta.get("pageSize"), "pageSize"),
        next_page=next_page if next_page is not None and next_page >= 0 else None,
        is_last=None if next_page is None else next_page < 0,
    )


for _cls, _hook in ((Patient, _patient), (PatientCreated, _created), (PatientPage, _page)):
    converter.register_structure_hook(_cls, _hook)

#: Keys under which a wrapped answer may carry its list of patients.
_WRAPPERS: Final = ("profiles", "patients", "data", "results")


def structure_patients(data: Any, what: str) -> tuple[Patient, ...]:
    """Patients from an answer that may be a JSON array of them, one object (by-mobile's documented shape), or an
    object wrapping the array (``{"profiles": [...]}``); ``None``, ``{}`` and ``[]`` give ``()``.

    ``what`` names the answer in the error (``"search"``, ...). Raises :class:`ResponseValidationError`.
    """
    if data is None or (type(data) is dict and not data):
        return ()
    try:
        if type(data) is dict:
            for key in _WRAPPERS:
                inner = data.get(key)
                if type(inner) is list and "oid" not in data:
                    data = inner
                    break
            else:
                return (_patient(data),)
        if type(data) is not list:
            raise ResponseValidationError(f"the {what} answer does not fit Patient: expected a JSON array or object")
        return tuple(map(_patient, data))
    except ResponseValidationError:
        raise
    except Exception as exc:
        raise _validation_error("Patient", exc) from exc
