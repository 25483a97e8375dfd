"""Every model parsed from the vendor's own examples, the live variants, and bodies that do not fit."""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import random
from typing import Any

import attrs
import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import health_async as ha
from health_async._plain import _document_json_by_item, document_json, unstructure
from health_async._wire import fast_decoder, structure, wire
from health_async.errors import ResponseValidationError
from health_async.models import (
    AadhaarInit,
    AbhaProfile,
    Coordinate,
    Document,
    DocumentPage,
    FileType,
    HipKey,
    NewAbhaProfile,
    PinOtpSent,
    Profile,
    ReportItem,
    ResultFlag,
    SmartReport,
    UploadResult,
)
from health_async.models.records._documents import decode_document, structure_document
from health_async.testing._data import make_document

# The describe example of vendor/records.yaml (getDocument), verbatim.
VENDOR_DOCUMENT: dict[str, Any] = {
    "source": "androidp",
    "document_date_epoch": 1614556800,
    "document_type": "lr",
    "tags": ["covid"],
    "files": [
        {
            "asset_url": "https://sample-lab-report.s3.ap-south-1.amazonaws.com/161494290947153/2df9e795-d368-4ceb-be9d-b44281703827/0cb1277e-1c4d-42cc-acd1-9630497e4f9d.jpeg",
            "file_type": "IMG",
        },
        {
            "asset_url": "https://sample-lab-report.s3.ap-south-1.amazonaws.com/161494290947153/2df9e795-d368-4ceb-be9d-b44281703827/0cb1277e-1c4d-42cc-acd1-9630497e4f9d.pdf",
            "file_type": "PDF",
        },
    ],
}

# A smart report item as the interface names it (svc_id / unit_svc_id) and as the live service does (eka_id ...).
ITEM_INTERFACE: dict[str, Any] = {
    "name": "Haemoglobin",
    "value": "13.2",
    "unit": "g/dL",
    "unit_svc_id": "unit-1",
    "range": "13.0-17.0",
    "result": "Normal",
    "result_id": "sm-8146614980",
    "display_result": "Normal",
    "id": 7,
    "vital_id": "lb-1",
    "page_num": 1,
    "file_index": 0,
    "coordinates": [{"x": 0.1, "y": 0.25}, {"x": 1, "y": 2}],
    "svc_id": "item-1",
    "is_result_editable": True,
    "date": 1614556800,
}
ITEM_LIVE = {k: v for k, v in ITEM_INTERFACE.items() if k not in ("svc_id", "unit_svc_id")} | {
    "eka_id": "item-1",
    "unit_eka_id": "unit-1",
    "result_id": "sm-1420480405",
}

# The EmrUserProfile example of vendor/patient_directory.yml.
VENDOR_PROFILE = {
    "oid": "175074536120088",
    "bid": "77088166996724",
    "ps": "S",
    "c_ate": 1750745358,
    "u_ate": 1750745358,
    "gen": "M",
    "dob": "2000-01-02",
    "is_age": True,
    "fn": "Eka",
    "ln": "User",
    "fln": "Eka User",
    "bg": "B+",
    "mobile": "+911201201201",
    "email": "eka.user@example.com",
    "s": "Mr.",
}


def test_vendor_document_example() -> None:
    doc = structure_document(VENDOR_DOCUMENT, "2df9e795")
    assert doc.document_id == "2df9e795"
    assert doc.source == "androidp"
    assert doc.document_type == "lr"
    assert doc.tags == ("covid",)
    assert doc.document_date == dt.datetime(2021, 3, 1, tzinfo=dt.UTC)
    assert [f.file_type for f in doc.files] == [FileType.IMG, FileType.PDF]
    assert doc.files[1].asset_url is not None and doc.files[1].asset_url.endswith(".pdf")
    assert doc.smart_report is None  # the example has none


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (1_614_556_800, dt.datetime(2021, 3, 1, tzinfo=dt.UTC)),  # seconds
        (1_614_556_800_250, dt.datetime(2021, 3, 1, 0, 0, 0, 250_000, tzinfo=dt.UTC)),  # milliseconds
        (-86_400, dt.datetime(1969, 12, 31, tzinfo=dt.UTC)),  # before 1970: seconds
        (100_000_000_000, dt.datetime(5138, 11, 16, 9, 46, 40, tzinfo=dt.UTC)),  # the last value read as seconds
        (253_402_300_799_999, dt.datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=dt.UTC)),
        (253_402_300_800_000, None),  # past datetime's range (it raised ValueError)
        (10**16, None),  # ValueError: year 318857 is out of range
        (10**20, None),  # OSError: value too large
        (-(10**14), None),  # ValueError: year -3166904 is out of range
        (None, None),
    ],
)
def test_epoch_properties_read_seconds_or_milliseconds_and_never_raise(
    epoch: int | None, expected: dt.datetime | None
) -> None:
    """Document.document_date and Case.occurred follow one rule (seconds, or milliseconds above 10**11), and a
    value out of datetime's range reads as None: the service's value stays as sent."""
    body = json.dumps({"document_id": "d1", "document_date_epoch": epoch}).encode()
    fast = decode_document(body)
    if epoch is None or abs(epoch) < 2**63:
        assert fast is not None  # the fast decode still takes it (the field keeps its plain int type)
    for doc in (fast or structure_document(json.loads(body)), structure_document(json.loads(body))):
        assert doc.document_date_epoch == epoch
        assert doc.document_date == expected
    case = structure({"id": "C1", "item": {"occurred_at": epoch}}, ha.Case)
    assert case.occurred_at == epoch
    assert case.occurred == expected


def test_document_id_in_body_wins_over_the_requested_one() -> None:
    assert structure_document({"document_id": "from-body"}, "asked").document_id == "from-body"


def test_schema_spelling_dt_is_accepted() -> None:
    assert structure_document({"dt": "ps"}).document_type == "ps"
    assert structure_document({"dt": "ps", "document_type": "lr"}).document_type == "lr"


def test_unknown_keys_are_ignored_and_missing_fields_are_none() -> None:
    doc = structure_document({"patient_name": "x", "user_tags": [], "files": [{"masked_file": "u"}]})
    assert doc == Document(files=(ha.FileEntry(),))
    assert doc.source is None and doc.document_date is None and doc.tags == ()
    assert doc.files[0].file_type is FileType.UNKNOWN


@pytest.mark.parametrize("item", [ITEM_INTERFACE, ITEM_LIVE], ids=["interface", "live"])
def test_smart_report_both_spellings(item: dict[str, Any]) -> None:
    doc = structure_document({**VENDOR_DOCUMENT, "smart_report": {"verified": [item], "unverified": [item]}})
    report = doc.smart_report
    assert isinstance(report, SmartReport)
    assert len(report.items) == 2
    parsed = report.verified[0]
    assert parsed.svc_id == "item-1" and parsed.unit_svc_id == "unit-1"
    assert parsed.coordinates[1] == ha.Coordinate(x=1.0, y=2.0)
    assert parsed.page_num == 1 and parsed.is_result_editable is True


def test_result_flags() -> None:
    assert ResultFlag.from_id("sm-8146614980") is ResultFlag.NORMAL
    assert ResultFlag.from_id("sm-4067205096") is ResultFlag.CRITICALLY_HIGH
    assert ResultFlag.from_id("sm-0000000000") is ResultFlag.UNKNOWN
    assert ResultFlag.from_id(None) is ResultFlag.UNKNOWN
    assert ResultFlag.CRITICALLY_LOW.label == "critically low"
    assert ResultFlag.HIGH.is_abnormal and not ResultFlag.NORMAL.is_abnormal
    assert len({m.value for m in ResultFlag}) == 12


def test_unknown_result_id_does_not_break_parsing() -> None:
    item = structure({"verified": [{"result_id": "sm-new-code"}]}, SmartReport).verified[0]
    assert item.result_id == "sm-new-code"
    assert item.flag is ResultFlag.UNKNOWN


def test_malformed_report_fails_the_document_naming_the_field() -> None:
    body = {"smart_report": {"verified": [{"coordinates": [{"x": "left"}]}]}}
    with pytest.raises(ha.ResponseValidationError, match="field x") as info:
        structure_document(body)
    assert "left" not in str(info.value)
    assert decode_document(orjson.dumps(body)) is None  # the fast path leaves it to the tolerant one


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "JSON object"),
        ("text", "JSON object"),
        ({"document_type": 5.5}, "document_type"),
        ({"tags": "covid"}, "tags"),
        ({"tags": [{"a": 1}]}, "tags"),
        ({"files": {}}, "files"),
        ({"files": ["x"]}, "files"),
        ({"smart_report": []}, "smart_report"),
        ({"document_date_epoch": "yesterday"}, "document_date_epoch"),
    ],
)
def test_documents_that_do_not_fit(body: Any, field: str) -> None:
    with pytest.raises(ha.ResponseValidationError, match=field) as info:
        structure_document(body)
    assert isinstance(info.value, ha.HealthError)


def test_numbers_sent_as_strings_or_floats_are_accepted() -> None:
    doc = structure_document({"document_date_epoch": "1614556800"})
    assert doc.document_date_epoch == 1614556800
    assert structure({"id": 3.0, "page_num": "2"}, ReportItem).id == 3


def test_vendor_profile_example() -> None:
    prof = structure(VENDOR_PROFILE, Profile)
    assert prof.oid == "175074536120088"
    assert prof.business_id == "77088166996724"
    assert prof.status == "S"
    assert prof.created_at == 1750745358
    assert prof.gender == "M"
    assert prof.date_of_birth == dt.date(2000, 1, 2)
    assert prof.dob_from_age is True
    assert (prof.first_name, prof.last_name, prof.full_name) == ("Eka", "User", "Eka User")
    assert prof.blood_group == "B+"
    assert prof.mobile == "+911201201201"
    assert prof.email == "eka.user@example.com"
    assert prof.salutation == "Mr."


def test_profile_repr_has_no_personal_data() -> None:
    text = repr(structure(VENDOR_PROFILE, Profile))
    for secret in ("1201201201", "eka.user@example.com", "Eka", "2000", "B+", "Mr.", "175074536120088"):
        assert secret not in text  # the OID is a person's id: hidden too (tests/core/test_reprs.py)
    assert "77088166996724" in text  # the business is not a person


@pytest.mark.parametrize("body", [{"dob": "02/01/2000"}, {"is_age": "yes"}, {"fn": ["E"]}, {"c_ate": "soon"}, [], None])
def test_profiles_that_do_not_fit(body: Any) -> None:
    with pytest.raises(ha.ResponseValidationError, match="Profile"):
        structure(body, Profile)


def test_profile_datetime_dob_and_missing_fields() -> None:
    prof = structure({"oid": "1", "dob": "2000-01-02T00:00:00Z"}, Profile)
    assert prof.date_of_birth == dt.date(2000, 1, 2)
    assert prof.first_name is None and prof.mobile is None


def test_aadhaar_init_vendor_example_and_null_hint() -> None:
    init = structure(
        {"hint": "OTP sent successfully to your mobile number ******90973", "txn_id": "5d060cad-a93b-4edf"},
        AadhaarInit,
    )
    assert init.txn_id == "5d060cad-a93b-4edf"
    assert init.hint is not None and init.hint.endswith("90973")
    assert "90973" not in repr(init)
    assert structure({"hint": None, "txn_id": "t"}, AadhaarInit).hint is None


def test_aadhaar_init_without_txn_id_does_not_fit() -> None:
    with pytest.raises(ha.ResponseValidationError, match="txn_id is missing"):
        structure({"hint": "sent"}, AadhaarInit)


def test_upload_result() -> None:
    assert structure({"document_id": "8570e23d"}, UploadResult) == UploadResult("8570e23d")
    with pytest.raises(ha.ResponseValidationError):
        structure({"message": "Forbidden"}, UploadResult)


def test_document_page_flattens_records() -> None:
    body = {
        "items": [
            {
                "record": {
                    "item": {
                        "document_id": "df04c7e6",
                        "upload_date": 1722929975,
                        "document_type": "lr",
                        "patient_id": "161494290947153",
                        "metadata": {
                            "title": "CBC",
                            "tags": ["a"],
                            "auto_tags": ["TYPE_TAG_SMART"],
                            "document_date": 5,
                        },
                    }
                }
            },
            {"record": {"item": {"document_id": "second"}}},
        ],
        "next_token": "20",
        "source_refreshed_at": None,
    }
    page = structure(body, DocumentPage)
    assert [i.document_id for i in page.items] == ["df04c7e6", "second"]
    first = page.items[0]
    assert (first.upload_date, first.title, first.tags, first.auto_tags) == (
        1722929975,
        "CBC",
        ("a",),
        ("TYPE_TAG_SMART",),
    )
    assert page.next_token == "20"
    assert structure({"items": [], "next_token": ""}, DocumentPage).next_token is None
    with pytest.raises(ha.ResponseValidationError, match="document_id"):
        structure({"items": [{"record": {"item": {}}}]}, DocumentPage)


def test_models_are_frozen_and_hashable() -> None:
    doc = structure_document({**VENDOR_DOCUMENT, "smart_report": {"verified": [ITEM_LIVE]}})
    with pytest.raises(AttributeError):
        doc.source = "x"  # type: ignore[misc]
    assert hash(doc) == hash(structure_document({**VENDOR_DOCUMENT, "smart_report": {"verified": [ITEM_LIVE]}}))


def test_unstructure_gives_readable_json() -> None:
    doc = structure_document({**VENDOR_DOCUMENT, "smart_report": {"verified": [ITEM_LIVE]}}, "d1")
    out = orjson.loads(orjson.dumps(unstructure(doc)))
    assert out["document_id"] == "d1"
    assert out["files"][0]["file_type"] == "IMG"
    assert out["smart_report"]["verified"][0]["flag"] == "HIGH"
    assert out["smart_report"]["verified"][0]["svc_id"] == "item-1"
    prof = unstructure(structure(VENDOR_PROFILE, Profile))
    assert prof["date_of_birth"] == "2000-01-02" and prof["first_name"] == "Eka"


def _plain_reference(doc: ha.Document) -> Any:
    """A document's plain form written the long way: every field as msgspec makes plain data, and each report
    item's flag name beside its code (the definition document_json encodes in one C pass)."""
    out = msgspec.to_builtins(doc)
    if out["smart_report"] is not None:
        for kind in ("verified", "unverified"):
            for plain, item in zip(out["smart_report"][kind], getattr(doc.smart_report, kind), strict=True):
                plain["flag"] = item.flag.name
    return orjson.loads(orjson.dumps(out))  # as JSON (tuples are arrays)


def test_document_json_is_every_field_and_each_items_flag() -> None:
    rng = random.Random(11)
    docs = [structure_document(make_document(rng, f"d{n}", date=1614556800 + n)) for n in range(40)]
    odd = {**ITEM_INTERFACE, "result_id": "sm-not-documented", "coordinates": []}
    docs += [
        structure_document({**VENDOR_DOCUMENT, "smart_report": {"verified": [odd], "unverified": [ITEM_LIVE]}}, "d"),
        structure_document({**VENDOR_DOCUMENT, "smart_report": {}}, "d"),
        structure_document({**VENDOR_DOCUMENT, "dt": "lr"}, "d"),  # no report at all
        ha.Document(),
    ]
    for doc in docs:
        line = bytes(document_json(doc))
        assert orjson.loads(line) == _plain_reference(doc) == unstructure(doc)
        wrapped = orjson.loads(msgspec.json.encode({"index": 3, "document": document_json(doc)}))
        assert wrapped == {"index": 3, "document": orjson.loads(line)}  # embeds where a line is written
    item = orjson.loads(bytes(document_json(docs[-4])))["smart_report"]["verified"][0]
    assert item["flag"] == "UNKNOWN" and item["result_id"] == "sm-not-documented"


def test_document_json_finds_each_item_by_its_first_key_never_inside_a_string() -> None:
    """document_json writes the document in one pass and puts each item's flag at the item's first key: text that
    spells that key inside a value is escaped JSON, never taken for an item; the item-by-item way agrees."""
    start = '{"coordinates":[{"x":1,"y":2}]}'
    tricky = {**ITEM_INTERFACE, "name": start, "unit": '"},{"coordinates":', "result_id": "sm-not-documented"}
    doc = structure_document(
        {**VENDOR_DOCUMENT, "tags": [start], "smart_report": {"verified": [tricky], "unverified": [ITEM_LIVE]}}, "d"
    )
    line = orjson.loads(bytes(document_json(doc)))
    assert line == _plain_reference(doc)
    assert line["smart_report"]["verified"][0]["name"] == start and line["tags"] == [start]
    assert [i["flag"] for k in ("verified", "unverified") for i in line["smart_report"][k]] == [
        "UNKNOWN",
        ha.ResultFlag.from_id(ITEM_LIVE["result_id"]).name,
    ]
    # the flag is each item's first key (readers that key by name do not care; ones that compare text do)
    assert all(next(iter(i)) == "flag" for k in ("verified", "unverified") for i in line["smart_report"][k])
    rng = random.Random(5)
    for n in range(20):
        doc = structure_document(make_document(rng, f"d{n}", date=1614556800 + n))
        assert doc.smart_report is not None
        by_item = orjson.loads(bytes(_document_json_by_item(doc, doc.smart_report)))
        assert by_item == orjson.loads(bytes(document_json(doc))) == _plain_reference(doc)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=20,
)
_keys = st.sampled_from(
    [
        "document_type",
        "dt",
        "tags",
        "files",
        "smart_report",
        "verified",
        "unverified",
        "coordinates",
        "x",
        "y",
        "dob",
        "fn",
        "txn_id",
        "items",
        "record",
        "item",
        "document_id",
        "next_token",
        "id",
        "date",
        "file_type",
    ]
)
_shaped = st.dictionaries(_keys, _json | st.dictionaries(_keys, _json, max_size=4), max_size=6)


@settings(max_examples=300, deadline=None)
@given(body=_json | _shaped)
def test_any_json_parses_or_raises_response_validation_error(body: Any) -> None:
    for cls in (Profile, AadhaarInit, UploadResult, DocumentPage, SmartReport):
        try:
            structure(body, cls)
        except ha.ResponseValidationError:
            pass
    try:
        doc = structure_document(body)
        _ = doc.smart_report
    except ha.ResponseValidationError:
        pass


# ----------------------------------------------------------------------------- fast path and tolerant path agree


_ITEM_KEYS = (*(field.name for field in attrs.fields(ReportItem)), "eka_id", "unit_eka_id")
_item_values = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=3)
_points = st.lists(
    st.dictionaries(st.sampled_from(["x", "y"]), st.floats(allow_nan=False) | st.integers(0, 3) | st.text(max_size=1)),
    max_size=3,
)
_items = st.dictionaries(
    st.sampled_from(_ITEM_KEYS),
    _item_values | _points | st.lists(_item_values, max_size=2),
    max_size=10,
)
_documents = st.dictionaries(
    st.sampled_from(["document_id", "source", "document_date_epoch", "document_type", "dt", "tags", "files"]),
    _item_values | st.lists(_item_values | st.dictionaries(st.sampled_from(["asset_url", "file_type"]), _item_values)),
    max_size=7,
)
_reports = st.fixed_dictionaries(
    {}, optional={"verified": st.lists(_items, max_size=2), "unverified": st.lists(_items, max_size=2) | _item_values}
)


def _types(value: Any) -> Any:
    """The value's shape with types (1 == 1.0, so equality alone would not tell a float from an int)."""
    if isinstance(value, msgspec.Struct):
        return (type(value), tuple(_types(v) for v in msgspec.structs.astuple(value)))
    if isinstance(value, tuple):
        return tuple(_types(v) for v in value)
    return type(value)


@settings(max_examples=400, deadline=None)
@given(
    body=_documents,
    report=st.none() | _reports | st.just({"verified": [ITEM_INTERFACE, ITEM_LIVE]}),
)
def test_fast_decode_gives_what_the_tolerant_path_gives(body: dict[str, Any], report: Any) -> None:
    if report is not None:
        body = {**body, "smart_report": report}
    fast = decode_document(orjson.dumps(body), "asked")
    try:
        tolerant: Any = structure_document(body, "asked")
    except ha.ResponseValidationError:
        tolerant = None
    if fast is not None:  # whatever the fast path takes, it reads as the tolerant path does
        assert fast == tolerant and _types(fast) == _types(tolerant)
        assert fast.document_id == "asked" or body.get("document_id") == fast.document_id


def test_the_usual_bodies_take_the_fast_path() -> None:
    for items in ([ITEM_INTERFACE], [ITEM_LIVE]):  # one spelling per producer, either one
        body = {**VENDOR_DOCUMENT, "smart_report": {"verified": items, "unverified": items}}
        fast = decode_document(orjson.dumps(body))
        assert fast is not None and fast == structure_document(body)
    rng = random.Random(3)
    bodies = [orjson.dumps(make_document(rng, f"d{n}", date=1614556800 + n)) for n in range(50)]
    assert all(decode_document(b) is not None for b in bodies)  # the fake server's live-like bodies


def test_an_envelope_is_never_taken_for_an_empty_document() -> None:
    envelope = {"protected": "e30", "iv": "AA", "ciphertext": "AA", "tag": "AA"}
    assert decode_document(orjson.dumps(envelope)) is None
    assert decode_document(b'{"error": "denied"}') is None  # nothing of a document: not an empty one either


def test_live_spellings_on_the_fast_path() -> None:
    live_only = {**ITEM_INTERFACE, "eka_id": "live", "unit_eka_id": "u"}
    del live_only["svc_id"], live_only["unit_svc_id"]
    doc = decode_document(orjson.dumps({"dt": "lr", "smart_report": {"verified": [live_only]}}))
    assert doc is not None and doc.document_type == "lr"
    (item,) = doc.smart_report.verified if doc.smart_report else ()
    assert (item.svc_id, item.unit_svc_id) == ("live", "u")
    assert "eka" not in repr(doc.smart_report) and "eka_id" not in attrs.asdict(item)  # no slot of its own
    assert item == structure({"verified": [live_only]}, SmartReport).verified[0]
    # both spellings in one body: read as a repeated key is, the last one in the object wins, on both paths alike
    both = {**ITEM_INTERFACE, "eka_id": "live", "unit_eka_id": "live-unit"}  # the live spellings come last
    reverse = {"eka_id": "live", "unit_eka_id": "live-unit", **ITEM_INTERFACE}  # the documented ones come last
    nulled = {**ITEM_INTERFACE, "eka_id": None}  # null counts, as for a repeated key
    body = {"dt": "lr", "document_type": "ps", "smart_report": {"verified": [both, reverse, nulled, live_only]}}
    fast = decode_document(orjson.dumps(body))
    assert fast is not None and fast == structure_document(body) and fast.document_type == "ps"
    first, second, third, fourth = fast.smart_report.verified  # type: ignore[union-attr]
    assert (first.svc_id, first.unit_svc_id) == ("live", "live-unit")
    assert (second.svc_id, second.unit_svc_id) == ("item-1", "unit-1")
    assert (third.svc_id, third.unit_svc_id) == (None, "unit-1")
    assert (fourth.svc_id, fourth.unit_svc_id) == ("live", "u")
    # white space around the colon is msgspec's to skip: the alias reads it all the same
    spaced = b'{"smart_report": {"verified": [{"name": "x", "eka_id" : "live"}]}}'
    fast = decode_document(spaced)
    assert fast is not None and fast == structure_document(orjson.loads(spaced))
    assert fast.smart_report is not None and fast.smart_report.verified[0].svc_id == "live"
    # the alias is the documented field's slot, never a field of its own
    assert item.eka_id == item.svc_id and "eka_id" not in attrs.fields_dict(ReportItem)  # type: ignore[attr-defined]
    assert b"eka_id" not in msgspec.json.encode(item) and "eka_id" not in msgspec.to_builtins(item)


@attrs.frozen
class _Renamed:
    code: str | None = wire("code", "live_code", one_key=True, default=None)


@attrs.frozen
class _Fallback:
    code: str | None = wire("code", "old_code", default=None)


def test_spellings_of_one_key_read_as_a_repeated_key_and_fallbacks_in_order() -> None:
    # one key spelled two ways: the last in the object wins (null too), on the tolerant path and the fast one
    decode = fast_decoder(_Renamed)
    for body, expected in (
        ({"live_code": "a"}, "a"),
        ({"code": "a", "live_code": "b"}, "b"),
        ({"live_code": "b", "code": "a"}, "a"),
        ({"code": "a", "live_code": None}, None),
    ):
        assert structure(body, _Renamed).code == expected
        fast = decode(orjson.dumps(body))
        assert fast is None if expected is None else fast == _Renamed(expected)
    # fallbacks: the first present and not null wins, whatever the order; they cannot be fast-decoded aliases
    assert structure({"old_code": "b", "code": "a"}, _Fallback).code == "a"
    assert structure({"code": None, "old_code": "b"}, _Fallback).code == "b"
    with pytest.raises(TypeError, match="one_key"):
        fast_decoder(_Fallback)
    with pytest.raises(TypeError, match="dotted"):
        wire("a.b", "c", one_key=True)


def test_odd_values_leave_the_fast_path_and_are_converted_or_named() -> None:
    odd = {"verified": [{**ITEM_LIVE, "eka_id": 42, "id": "7", "coordinates": [{"x": 1, "y": 0.5}]}]}
    assert decode_document(orjson.dumps({"smart_report": odd})) is None
    parsed = structure(odd, SmartReport).verified[0]
    assert parsed.svc_id == "42" and parsed.id == 7
    assert parsed.coordinates == (ha.Coordinate(1.0, 0.5),) and type(parsed.coordinates[0].x) is float
    doc = structure_document({"document_id": 12, "dt": "lr", "tags": ["a"], "files": [{"file_type": "DOCX"}]})
    assert doc.document_id == "12" and doc.files[0].file_type is FileType.UNKNOWN
    for body, field in (
        ({"verified": [{**ITEM_INTERFACE, "page_num": "two"}]}, "page_num"),
        ({"verified": [{**ITEM_INTERFACE, "coordinates": [{"x": 0.1}]}]}, "field y"),
        ({"verified": [{**ITEM_INTERFACE, "is_result_editable": "yes"}]}, "is_result_editable"),
        ({"unverified": {"name": "x"}}, "unverified"),
    ):
        with pytest.raises(ha.ResponseValidationError, match=field) as info:
            structure_document({"smart_report": body})
        assert "two" not in str(info.value) and "yes" not in str(info.value)  # the field, never the value


def test_models_built_either_way_are_the_same_frozen_models() -> None:
    fast_doc = decode_document(orjson.dumps({"smart_report": {"verified": [ITEM_INTERFACE]}}))
    assert fast_doc is not None and fast_doc.smart_report is not None
    fast = fast_doc.smart_report.verified[0]
    checked = structure({"verified": [ITEM_INTERFACE]}, SmartReport).verified[0]
    by_init = ReportItem(**attrs.asdict(checked, recurse=False))
    assert fast == checked == by_init and hash(fast) == hash(by_init) and repr(fast) == repr(by_init)
    with pytest.raises(AttributeError):
        fast.value = "1"  # type: ignore[misc]
    assert attrs.evolve(fast, value="1").value == "1"


def test_every_model_is_one_attrs_family() -> None:
    """Users copy models with attrs.evolve and walk them with attrs.fields / attrs.asdict, documents included."""
    doc = structure_document({**VENDOR_DOCUMENT, "smart_report": {"verified": [ITEM_LIVE]}})
    for name in ha.models.__all__:
        model = getattr(ha.models, name)
        if isinstance(model, type) and not issubclass(model, enum.Enum) and name not in ("Gender", "BloodGroup"):
            assert attrs.has(model), name
            assert "__slots__" in model.__dict__, name  # slotted
    plain = attrs.asdict(doc)
    item = plain["smart_report"]["verified"][0]
    assert item["svc_id"] == ITEM_LIVE["eka_id"] and "eka_id" not in item  # the live spelling has no slot
    assert set(item["coordinates"][0]) == {"x", "y"}
    assert attrs.evolve(doc, document_type="x").smart_report == doc.smart_report
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        doc.source = "x"  # type: ignore[misc]


def test_coordinate_unpacks_and_unstructures_as_an_object() -> None:
    point = ha.Coordinate(0.5, 0.25)
    x, y = point
    assert (x, y) == (point.x, point.y) == (0.5, 0.25)
    assert repr(point) == "Coordinate(x=0.5, y=0.25)"
    assert structure({"x": 1, "y": 2.5}, ha.Coordinate) == ha.Coordinate(1.0, 2.5)
    assert structure({"x": "1", "y": 2.5}, ha.Coordinate) == ha.Coordinate(1.0, 2.5)  # a number sent as text
    with pytest.raises(ha.ResponseValidationError, match="field x"):
        structure({"x": "left", "y": 2.5}, ha.Coordinate)
    assert unstructure(point) == {"x": 0.5, "y": 0.25}
    doc = structure_document({"smart_report": {"verified": [ITEM_INTERFACE]}})
    out = orjson.loads(orjson.dumps(unstructure(doc)))
    assert out["smart_report"]["verified"][0]["coordinates"] == [{"x": 0.1, "y": 0.25}, {"x": 1.0, "y": 2.0}]


def test_document_id_is_filled_when_the_body_has_none() -> None:
    assert structure_document({"dt": "lr"}, "asked").document_id == "asked"
    assert structure_document({"document_id": None}, "asked").document_id == "asked"
    fast = decode_document(b'{"document_id": null, "source": "x"}', "asked")
    assert fast is not None and fast.document_id == "asked"


def test_reprs_hide_link_signatures_and_leave_out_the_report() -> None:
    url = "https://bucket.example/a/b.pdf?X-Amz-Signature=deadbeef"
    doc = structure_document({"files": [{"asset_url": url, "file_type": "PDF"}], "smart_report": {}}, "d1")
    assert "deadbeef" not in repr(doc) and "deadbeef" not in repr(doc.files[0])
    assert "deadbeef" not in str(doc.files[0].__rich_repr__())
    assert "smart_report" not in repr(doc) and "b.pdf" in repr(doc)


def test_an_answer_with_a_txn_id_is_never_lost_to_a_side_field(caplog: pytest.LogCaptureFixture) -> None:
    """ABHA step answers carry a txn id or a token (an OTP went out, an account may exist): an optional field that
    does not fit is read as not sent, with a debug log naming it; the txn id itself is still required."""
    body = {
        "txn_id": "txn-1",
        "skip_state": "confirm_otp",
        "success": "yes",
        "abha_profiles": [{"abha_address": "a@abdm", "kyc_verified": "maybe"}],
        "profile": {"first_name": "x", "year_of_birth": "nineteen", "kyc_verified": "true"},
    }
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        step = structure(body, ha.AbhaStep)
    assert step.txn_id == "txn-1" and step.success is None
    assert step.abha_profiles[0].kyc_verified is None and step.abha_profiles[0].abha_address == "a@abdm"
    assert step.profile is not None and step.profile.year_of_birth is None and step.profile.kyc_verified is True
    logged = caplog.text
    assert "AbhaStep: field success" in logged and "AbhaProfile: field year_of_birth" in logged
    assert "yes" not in logged and "nineteen" not in logged  # the field, never the value
    with pytest.raises(ha.ResponseValidationError, match="txn_id"):
        structure({"txn_id": 5.5, "hint": "x"}, ha.OtpSent)
    # a model without a txn id or token stays strict: a bad optional field fails the answer
    with pytest.raises(ha.ResponseValidationError, match="arc"):
        structure({"oid": "p1", "arc": "maybe"}, ha.Patient)


@pytest.mark.parametrize(
    ("model", "data", "field"),
    [
        (ReportItem, {"id": "--1"}, "id"),
        (ReportItem, {"id": "9" * 5000}, "id"),
        (Coordinate, {"x": 10**400, "y": 1}, "x"),
    ],
    ids=["int-double-minus", "int-5000-digits", "float-overflow"],
)
def test_a_number_that_does_not_fit_names_its_field(model: type, data: dict[str, Any], field: str) -> None:
    with pytest.raises(ResponseValidationError, match=f"field {field} "):
        structure(data, model)


def test_lenient_models_read_a_misfit_as_not_sent_and_properties_never_raise() -> None:
    assert structure({"txn_id": "t", "expiry_in_minutes": "--1"}, PinOtpSent).expiry_in_minutes is None
    assert structure({"dh_public_key": []}, HipKey) == HipKey()  # a nested name under another shape
    profile = structure({"day_of_birth": 1, "month_of_birth": 1, "year_of_birth": 2**31}, AbhaProfile)
    assert profile.date_of_birth is None
    with pytest.raises(ResponseValidationError, match="field gender"):
        structure({"first_name": "A", "gender": []}, NewAbhaProfile)  # a Literal given a list: no TypeError
