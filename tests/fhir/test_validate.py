"""``health_async.fhir.validate``: the guide's examples pass; one-change broken variants are caught at the right path
with the right rule; the structure checks agree with an independent FHIR implementation (the oracle).

The oracle is ``fhir.resources`` 8.x, its ``R4B`` models (pydantic 2). Judgement call: R4B (4.3.0) is R4 with a few
changes outside the resource types used here; ``fhir.resources`` 6.x is plain R4 but needs pydantic 1, which would
pin the whole test environment to an end-of-life pydantic. The oracle is only asked about what both agree on.
"""

from __future__ import annotations

import copy
import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from health_async.fhir import Problem, RecordType, ValidationReport, validate

EXAMPLES = pathlib.Path(__file__).parents[1] / "data" / "fhir" / "examples"
FILES = {
    RecordType.DIAGNOSTIC_REPORT: "Bundle-DiagnosticReport-Lab-example-03.json",
    RecordType.DISCHARGE_SUMMARY: "Bundle-DischargeSummary-example-04.json",
    RecordType.HEALTH_DOCUMENT: "Bundle-HealthDocumentRecord-example-01.json",
    RecordType.IMMUNIZATION: "Bundle-ImmunizationRecord-example-07.json",
    RecordType.OP_CONSULT: "Bundle-OPConsultNote-example-05.json",
    RecordType.PRESCRIPTION: "Bundle-Prescription-example-06.json",
    RecordType.WELLNESS: "Bundle-WellnessRecord-example-01.json",
}
_CACHE: dict[str, dict[str, Any]] = {}


def example(record_type: RecordType) -> dict[str, Any]:
    name = FILES[record_type]
    if name not in _CACHE:
        _CACHE[name] = json.loads((EXAMPLES / name).read_text(encoding="utf-8"))
    return copy.deepcopy(_CACHE[name])


@pytest.mark.parametrize("record_type", list(FILES))
def test_every_published_example_validates_without_errors(record_type: RecordType) -> None:
    report = validate((EXAMPLES / FILES[record_type]).read_bytes())
    assert report.errors == ()
    assert report.ok
    assert report.record_type is record_type


def test_dict_text_and_bytes_give_the_same_report() -> None:
    data = example(RecordType.PRESCRIPTION)
    text = json.dumps(data)
    assert validate(data) == validate(text) == validate(text.encode())


@pytest.mark.parametrize("junk", [b"\xff\xfe", b"not json", "[1, 2]", b"", "null", {"resourceType": "Patient"}])
def test_never_raises_and_reports_what_is_not_a_bundle(junk: Any) -> None:
    report = validate(junk)
    assert isinstance(report, ValidationReport)
    assert not report.ok
    assert len(report.problems) == 1
    assert report.record_type is None


def _find(data: dict[str, Any], kind: str) -> int:
    return next(i for i, e in enumerate(data["entry"]) if e["resource"]["resourceType"] == kind)


def _swap_first(d: dict[str, Any]) -> None:
    d["entry"][0], d["entry"][1] = d["entry"][1], d["entry"][0]


def _dangling(d: dict[str, Any]) -> None:
    d["entry"][0]["resource"]["author"][0]["reference"] = "urn:uuid:00000000-0000-0000-0000-000000000000"


def _type_code(d: dict[str, Any]) -> None:
    d["entry"][0]["resource"]["type"]["coding"][0]["code"] = "000000"


def _value_type(d: dict[str, Any]) -> None:
    d["entry"][0]["resource"]["status"] = 1


def _no_subject(d: dict[str, Any]) -> None:
    del d["entry"][0]["resource"]["subject"]


def _duplicate_url(d: dict[str, Any]) -> None:
    d["entry"][2]["fullUrl"] = d["entry"][1]["fullUrl"]


def _bad_date(d: dict[str, Any]) -> None:
    d["entry"][0]["resource"]["date"] = "2017-13-45"


def _wrong_section_resource(d: dict[str, Any]) -> None:
    # the Allergies section (section[1]) now points at the Patient
    d["entry"][0]["resource"]["section"][1]["entry"][0]["reference"] = d["entry"][0]["resource"]["subject"]["reference"]


def _not_document(d: dict[str, Any]) -> None:
    d["type"] = "collection"


def _no_timestamp(d: dict[str, Any]) -> None:
    del d["timestamp"]


def _unknown_element(d: dict[str, Any]) -> None:
    d["entry"][1]["resource"]["nickname"] = "x"


def _array_for_single(d: dict[str, Any]) -> None:
    d["entry"][0]["resource"]["title"] = ["a"]


def _two_choice_types(d: dict[str, Any]) -> None:
    i = _find(d, "Condition")
    d["entry"][i]["resource"]["onsetString"] = "x"
    d["entry"][i]["resource"]["onsetDateTime"] = "2020-01-01"


def _patient_without_identifier(d: dict[str, Any]) -> None:
    del d["entry"][_find(d, "Patient")]["resource"]["identifier"]


def _subject_not_patient(d: dict[str, Any]) -> None:
    i = _find(d, "Practitioner")
    d["entry"][0]["resource"]["subject"]["reference"] = d["entry"][i]["fullUrl"]


OP = RecordType.OP_CONSULT
CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("order", _swap_first, "Bundle.entry[0].resource", "r4.bdl-11"),
    ("dangling reference", _dangling, "Bundle.entry[0].resource.author[0].reference", "document.reference-resolved"),
    ("wrong type code", _type_code, "Bundle.entry[0].resource.type.coding[0].code", "profile.fixed"),
    ("wrong value type", _value_type, "Bundle.entry[0].resource.status", "structure.type"),
    ("missing subject", _no_subject, "Bundle.entry[0].resource.subject", "document.subject"),
    ("duplicate full URL", _duplicate_url, "Bundle.entry[2].fullUrl", "document.full-url-unique"),
    ("bad date", _bad_date, "Bundle.entry[0].resource.date", "structure.format"),
    (
        "section holds wrong type",
        _wrong_section_resource,
        "Bundle.entry[0].resource.section[1].entry[0]",
        "profile.target",
    ),
    ("not a document", _not_document, "Bundle.type", "document.type"),
    ("no timestamp", _no_timestamp, "Bundle.timestamp", "r4.bdl-10"),
    ("unknown element", _unknown_element, "Bundle.entry[1].resource.nickname", "structure.unknown-element"),
    ("array for 0..1", _array_for_single, "Bundle.entry[0].resource.title", "structure.cardinality"),
    ("two types for a choice", _two_choice_types, "", "structure.choice"),
    ("patient identifier", _patient_without_identifier, "Bundle.entry[3].resource.identifier", "profile.cardinality"),
    ("subject not a patient", _subject_not_patient, "Bundle.entry[0].resource.subject", "document.subject"),
]


@pytest.mark.parametrize(("name", "change", "path", "rule"), CASES, ids=[c[0] for c in CASES])
def test_a_broken_variant_is_caught_at_its_path(name: str, change: Any, path: str, rule: str) -> None:
    data = example(OP)
    change(data)
    report = validate(data)
    assert not report.ok
    hits = [p for p in report.errors if p.rule == rule]
    assert hits, report.problems
    if path:
        assert path in {p.path for p in hits}


def test_missing_required_element_names_the_element() -> None:
    data = example(OP)
    del data["entry"][0]["resource"]["status"]
    report = validate(data)
    assert (
        Problem(
            "error", "Bundle.entry[0].resource.status", "structure.required", "Composition.status is required (min 1)"
        )
        in report.problems
    )


def test_required_choice_group_is_satisfied_by_any_member() -> None:
    data = example(RecordType.PRESCRIPTION)
    i = _find(data, "MedicationRequest")
    assert "medicationCodeableConcept" in data["entry"][i]["resource"]
    del data["entry"][i]["resource"]["medicationCodeableConcept"]
    report = validate(data)
    assert [p.path for p in report.errors] == [f"Bundle.entry[{i}].resource.medication[x]"]


def test_diagnostic_report_needs_result_or_presented_form() -> None:
    data = example(RecordType.DIAGNOSTIC_REPORT)
    i = _find(data, "DiagnosticReport")
    data["entry"][i]["resource"].pop("result", None)
    data["entry"][i]["resource"].pop("presentedForm", None)
    hits = [p for p in validate(data).errors if p.rule == "profile.cardinality"]
    assert [p.path for p in hits] == [f"Bundle.entry[{i}].resource.result"]
    assert hits[0].source.endswith("#DiagnosticReport.result")


def test_no_message_carries_a_value_of_the_bundle() -> None:
    data = example(OP)
    secret = "SECRET-VALUE-1234"
    data["entry"][0]["resource"]["date"] = secret
    data["entry"][1]["resource"][secret] = secret
    data["entry"][0]["resource"]["author"][0]["reference"] = secret
    report = validate(data)
    assert len(report.errors) >= 3
    assert all(secret not in p.message for p in report.problems)


# The oracle: an independent FHIR implementation.
fhir_bundle = pytest.importorskip("fhir.resources.R4B.bundle")


@pytest.mark.parametrize("record_type", list(FILES))
def test_what_validate_accepts_the_oracle_parses(record_type: RecordType) -> None:
    data = example(record_type)
    assert validate(data).ok
    fhir_bundle.Bundle.model_validate(data)


ORACLE_CASES = [
    c
    for c in CASES
    if c[3] in {"structure.type", "structure.format", "structure.unknown-element", "structure.cardinality"}
]


@pytest.mark.parametrize(("name", "change", "path", "rule"), ORACLE_CASES, ids=[c[0] for c in ORACLE_CASES])
def test_structure_errors_are_refused_by_the_oracle_too(name: str, change: Any, path: str, rule: str) -> None:
    data = example(OP)
    change(data)
    assert not validate(data).ok
    with pytest.raises(ValueError):  # pydantic's ValidationError is a ValueError
        fhir_bundle.Bundle.model_validate(data)


# ------------------------------------------------------------------------------- empty input, BOM, finite decimals


BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("record_type", [RecordType.PRESCRIPTION, RecordType.DIAGNOSTIC_REPORT])
def test_a_leading_bom_is_skipped_in_bytes_and_in_text(record_type: RecordType) -> None:
    """As ``fhir.read`` and ``health-async fhir show`` take it: an editor's BOM is no part of the JSON."""
    data = (EXAMPLES / FILES[record_type]).read_bytes()
    plain = validate(data)
    assert plain.ok
    assert validate(BOM + data) == plain
    assert validate((BOM + data).decode("utf-8")) == plain  # the str starts with U+FEFF


@pytest.mark.parametrize("empty", [b"", "", b"  \n\t", " \r\n", BOM, "\ufeff", BOM + b"\n", "\ufeff "])
def test_empty_input_is_reported_as_empty(empty: str | bytes) -> None:
    report = validate(empty)
    assert [(p.path, p.rule) for p in report.problems] == [("Bundle", "json.invalid")]
    assert "empty" in report.problems[0].message


@pytest.mark.parametrize("junk", [b"{", '{"resourceType": "Bundle"', b"\n{\n", BOM + b"[", "\ufeff\ufeff{}"])
def test_truncated_input_is_not_json(junk: str | bytes) -> None:
    report = validate(junk)
    assert [(p.rule, p.message) for p in report.problems] == [("json.invalid", "not JSON text")]


def test_a_json_value_that_is_not_an_object_says_so() -> None:
    for junk in ("[1, 2]", b"null", "1e400", b"NaN"):
        (problem,) = validate(junk).problems
        assert (problem.rule, problem.message) == ("document.bundle", "not a JSON object: expected a Bundle resource")


_QUANTITY = "Bundle.entry[5].resource.valueQuantity.value"


def _lab_with(value: Any) -> dict[str, Any]:
    data = example(RecordType.DIAGNOSTIC_REPORT)
    assert data["entry"][5]["resource"]["resourceType"] == "Observation"
    data["entry"][5]["resource"]["valueQuantity"]["value"] = value
    return data


@pytest.mark.parametrize(
    ("decoded", "literal"),
    [(float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity"), (float("inf"), "1e400")],
    ids=["nan", "inf", "-inf", "1e400"],
)
def test_a_decimal_is_finite_in_a_dict_and_in_json_text(decoded: float, literal: str) -> None:
    """Python's ``json`` decodes ``NaN``/``Infinity`` (not JSON) and ``1e400`` (out of a double's range, to inf):
    each is an error at its path, as ``float("nan")`` in a dict is; the message holds no value."""
    assert validate(_lab_with(6.3)).ok
    text = json.dumps(_lab_with("@@@")).replace('"@@@"', literal)
    for given in (_lab_with(decoded), text, text.encode()):
        report = validate(given)
        assert [(p.path, p.rule) for p in report.errors] == [(_QUANTITY, "structure.format")]
        assert "finite" in report.errors[0].message
        assert report.record_type is RecordType.DIAGNOSTIC_REPORT


def test_a_non_finite_number_in_an_unchecked_resource_is_still_an_error() -> None:
    data = example(RecordType.DIAGNOSTIC_REPORT)
    data["entry"].append({"fullUrl": "urn:uuid:x", "resource": {"resourceType": "Media", "x": [{"y": float("nan")}]}})
    report = validate(data)
    n = len(data["entry"]) - 1
    assert [(p.path, p.rule) for p in report.errors] == [(f"Bundle.entry[{n}].resource.x[0].y", "structure.format")]
    assert [p.rule for p in report.warnings] == ["structure.unchecked-type"]
