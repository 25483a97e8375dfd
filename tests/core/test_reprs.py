"""No person's data in any model's ``repr``: every public attrs class is built with a recognisable sentinel in each
field that holds a person's data or the id of a person or a transaction, and none of the sentinels may appear in its
``repr`` (nor in the ``repr`` of any model it contains).

Which fields count (judgement call, the same one the models' docstrings state):

* **hidden**: names, addresses, mobile numbers, e-mail, dates of birth, gender, age, ABHA numbers and addresses,
  health ids, the service's id of a patient (``oid``, ``uuid``, ``patient_id``), the hospital's id of a patient
  (``partner_patient_id``, a UHID), the id of whoever created or changed something (``created_by``), transaction ids
  (``txn_id``, ``transaction_id``, the link's ``link_ref_number``), care contexts' display texts (they say what the
  visit was), OTP hints and destinations;
* **shown**: the ids of records and of ABDM's artefacts, chosen by the service or by a hospital for a record rather
  than a person (document, case, care context, consent, subscription, request and event ids), the ids and names of
  facilities (``hip_id``, ``hip_name``, ``hip_address``), names of tests and things (a lab value's ``name``), and a
  PIN code looked up (``PincodeDetails`` describes a place, not a person). A care-context id on its own names a visit
  only inside the hospital's own system, and it is what a developer needs to find a record; a request id is one
  message's, not a person's.
"""

from __future__ import annotations

import datetime as dt
import enum
import itertools
import re
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest

import health_async.errors as errors
import health_async.models as models
import health_async.webhooks as webhooks

#: Field names that hold a person's data or the id of a person or of a transaction.
PERSONAL = re.compile(
    r"(^|_)(oid|uuid|patient|name|names|address|addresses|mobile|phone|email|username|abha|health_id|hpr_id|txn_id"
    r"|transaction_id|link_ref_number|ref_num|birth|dob|gender|age|salutation|blood_group|pincode|destination"
    r"|hint|display|display_name|created_by|updated_by|patient_reference|identifier|value"
    # and, while at it, health data, a person's whereabouts and secrets
    r"|content|bundle|pii|tests_data|fhir_data|latitude|longitude|token|token_number|refresh_token|signing_key)($|_)"
)

#: Fields whose name matches :data:`PERSONAL` and that do not hold a person's data, each with why.
NOT_PERSONAL: Mapping[tuple[str, str], str] = {
    ("ReportItem", "name"): "the name of a lab test",
    ("ReportItem", "value"): "a lab value without the person",
    ("ReportItem", "display_result"): "a lab value without the person",
    ("ExtractedTest", "name"): "the name of a lab test",
    ("ExtractedTest", "value"): "a lab value without the person",
    ("ExtractedTest", "display_range"): "a reference range",
    ("ExtractedTest", "normalised_value"): "a lab value without the person",
    ("ShareToken", "hip_name"): "a facility's name",
    ("ShareToken", "hip_address"): "a facility's address",
    ("ConsentHip", "hip_name"): "a facility's name",
    ("CareContextProvider", "hip_name"): "a facility's name",
    ("FacilityOnboarded", "hip_name"): "a facility's name",
    ("Provider", "name"): "a facility's name",
    ("Facility", "facility_name"): "a facility's name, public in the registry",
    ("RequestParty", "name"): "a facility's name (HIU or HIP)",
    ("RequestHiType", "display"): "the name of a kind of record",
    ("PincodeDetails", "pincode"): "a place looked up, not a person's address",
    ("PincodeDetails", "state_name"): "a place looked up",
    ("PincodeDetails", "district_name"): "a place looked up",
    ("PatientIdentifier", "type"): "the kind of identifier (MOBILE, ...), not its value",
    ("WebhookEvent", "document_classification"): "the kind of a document",
    ("CasePage", "next_token"): "a page cursor",
    ("DocumentPage", "next_token"): "a page cursor",
}

_counter = itertools.count(1)
#: A personal value's text, by field name, where the field's own check needs a particular form.
_SHAPED: Mapping[str, str] = {"pincode": "567891", "mobile": "9876501234", "abha_number": "91-4817-5520-3391"}
_SENTINEL_DATE = dt.date(1937, 3, 19)
_SENTINEL_INT = 48173
_SENTINEL_FLOAT = 12.3456789


def _sentinel(name: str) -> str:
    # letters only: name fields refuse digits
    n = next(_counter)
    return _SHAPED.get(name) or "Zqx" + "".join(chr(ord("a") + int(d)) for d in str(n)) + "xqZ"


def _is_personal(cls: type, field: attrs.Attribute[Any]) -> bool:
    name = field.name.lstrip("_")
    return bool(PERSONAL.search(name)) and (cls.__name__, name) not in NOT_PERSONAL


class Built:
    """An instance and the sentinels put into it (its own and its nested models')."""

    def __init__(self) -> None:
        #: (the text looked for, the field it was put in)
        self.sentinels: list[tuple[str, str]] = []


def _value(tp: Any, personal: bool, name: str, built: Built) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        return _value(rest[0], personal, name, built)
    if origin is typing.Literal:
        return args[0]
    if origin in (tuple, list):
        item = _value(args[0], personal, name, built)
        return (item,) if origin is tuple else [item]
    if origin in (dict, Mapping) or tp in (dict, Mapping) or origin is typing.Mapping:
        return {"k": _value(str, personal, name, built)}
    if tp is str or tp is Any or tp is object:
        if not personal:
            return "plain"
        text = _sentinel(name)
        built.sentinels.append((text, name))
        return text
    if tp is bool:
        return True
    if tp is int:
        if personal:
            built.sentinels.append((str(_SENTINEL_INT), name))
            return _SENTINEL_INT
        return 1
    if tp is float:
        if personal:
            built.sentinels.append((str(_SENTINEL_FLOAT)[:7], name))
            return _SENTINEL_FLOAT
        return 0.5
    if tp is dt.datetime:
        return dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    if tp is dt.date:
        if personal:
            built.sentinels.append((str(_SENTINEL_DATE.year), name))
            return _SENTINEL_DATE
        return dt.date(2024, 1, 2)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(iter(tp))
    if isinstance(tp, type) and attrs.has(tp):
        return _build(tp, built)
    if tp is errors.HealthError:
        return errors.HealthError("failed")
    raise AssertionError(f"no value for {tp!r} ({name})")


#: Names the models import only for type checking.
_TYPE_CHECKING_NAMES = {"FileInput": str, "HealthError": errors.HealthError}


def _build(cls: type, built: Built) -> Any:
    hints = typing.get_type_hints(cls, localns=_TYPE_CHECKING_NAMES)
    kwargs = {}
    for field in attrs.fields(cls):
        if not field.init:
            continue
        personal = _is_personal(cls, field)
        kwargs[field.alias] = _value(hints[field.name], personal, field.name.lstrip("_"), built)
    return cls(**kwargs)


def _public_models() -> Iterator[type]:
    for module in (models, webhooks):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and attrs.has(obj):
                yield obj


MODELS = sorted(_public_models(), key=lambda cls: cls.__name__)


def test_the_walk_covers_the_public_models() -> None:
    # a model added to __all__ is walked without anyone remembering to list it here
    names = {cls.__name__ for cls in MODELS}
    assert {"HealthDataRequest", "Patient", "AbhaProfile", "WebhookEvent", "LinkResult"} <= names
    assert len(MODELS) > 80
    with_personal_fields = [cls for cls in MODELS if _build(cls, built := Built()) is not None and built.sentinels]
    assert len(with_personal_fields) > 45  # the field-name rule still finds what it is meant to


@pytest.mark.parametrize("cls", MODELS, ids=lambda cls: cls.__name__)
def test_no_persons_data_in_repr(cls: type) -> None:
    built = Built()
    instance = _build(cls, built)
    shown = [repr(instance)]
    rich = getattr(instance, "__rich_repr__", None)
    if rich is not None:  # rich's pretty printer asks this instead of __repr__
        shown.append(str(list(rich())))
    leaked = sorted({field for text, field in built.sentinels if any(text in s for s in shown)})
    assert not leaked, f"{cls.__name__}: the repr shows {leaked}"


def test_health_data_request_shows_what_a_developer_needs() -> None:
    # the fixed leak of the issue, and what stays useful: the care contexts and the facility
    request = models.HealthDataRequest(
        transaction_id="txn-SECRET-1",
        care_contexts=("cc-1",),
        key=models.HiuKey(public_key="pk", nonce="n"),
        hi_types=("Prescription",),
        abha_address="asha@sbx",
        oid="oid-SECRET-2",
        partner_patient_id="uhid-SECRET-3",
        hip_id="hip-9",
    )
    text = repr(request)
    assert "SECRET" not in text and "asha" not in text
    assert "cc-1" in text and "hip-9" in text and "Prescription" in text


def test_a_field_named_personal_but_not_is_listed_with_a_reason() -> None:
    # the exceptions name fields that exist: a renamed field is not silently exempted
    for (cls_name, field), reason in NOT_PERSONAL.items():
        cls = next(c for c in MODELS if c.__name__ == cls_name)
        assert field in {f.name.lstrip("_") for f in attrs.fields(cls)}, (cls_name, field)
        assert reason
