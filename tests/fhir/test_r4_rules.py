"""``health_async.fhir.validate``: the structure rules FHIR R4 itself states (issue 43).

Each case breaks one R4 rule in one of the guide's examples and expects an error at its path, with its rule: a
resource type R4 does not have; a reference to a resource of a type R4's ``targetProfile`` does not allow; the
primitive formats (calendar days, ``id``, ``base64Binary``, the integer ranges, ``code`` and ``uri`` whitespace);
``ele-1`` (no empty object, array or string); the Bundle invariants (``bdl-*``) and those of contained resources
(``dom-*``, ``ref-1``). Where the oracle (``fhir.resources``' R4B models, see ``test_validate.py``) refuses the
variant too, it is asked; R4B does not check reference targets, ``ele-1`` of objects and arrays, nor any invariant.

Every published example (both guide versions) and every golden bundle of the builders has no error under them.
"""

from __future__ import annotations

import copy
import functools
import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from health_async.fhir import validate

DATA = pathlib.Path(__file__).parents[1] / "data"
ALL_EXAMPLES = sorted((DATA / "fhir" / "examples").glob("*.json")) + sorted(
    (DATA / "fhir" / "examples-6.5.0").glob("*.json")
)
GOLDEN = sorted((DATA / "fhir_build").glob("*.json"))
OP = "Bundle-OPConsultNote-example-05.json"  # 0 Composition, 1 Practitioner, 3 Patient, 4 Encounter, ...
LAB = "Bundle-DiagnosticReport-Lab-example-03.json"  # 1 Patient/1, 4 DiagnosticReport, 5 Observation, 10 DocRef


@functools.cache
def _raw(name: str) -> bytes:
    return (DATA / "fhir" / "examples" / name).read_bytes()


def example(name: str = OP) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_raw(name))
    return copy.deepcopy(data)


@pytest.mark.parametrize("path", ALL_EXAMPLES + GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_example_and_golden_bundle_has_no_error(path: pathlib.Path) -> None:
    report = validate(path.read_bytes())
    assert list(report.errors) == []  # the builders' goldens too: R4's rules and the guide's profile rules
    # no R4 rule broken even as a warning (the warnings: R4 resource types without a table, such as the 6.5.0
    # guide's ChargeItem and Invoice, and the profiles' open sections)
    assert [p for p in report.warnings if p.rule.startswith("r4.")] == []


def _set(*keys: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        for key in keys[:-1]:
            d = d[key]
        d[keys[-1]] = value

    return change


def _pop(*keys: Any) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        for key in keys[:-1]:
            d = d[key]
        del d[keys[-1]]

    return change


def _attachment(value: Any, key: str = "data") -> Callable[[dict[str, Any]], None]:
    return _set("entry", 10, "resource", "content", 0, "attachment", key, value=value)


_DATA_PATH = "Bundle.entry[10].resource.content[0].attachment.data"
_SIZE_PATH = "Bundle.entry[10].resource.content[0].attachment.size"

#: (name, example, change, path, rule, the oracle refuses it too)
CASES: list[tuple[str, str, Callable[[dict[str, Any]], None], str, str, bool]] = [
    # resource types and reference targets
    (
        "unknown resource type",
        OP,
        _set("entry", 1, "resource", "resourceType", value="Observatoin"),
        "Bundle.entry[1].resource",
        "structure.unknown-resource-type",
        True,
    ),
    (
        "Observation.subject a Practitioner",
        LAB,
        _set("entry", 5, "resource", "subject", "reference", value="Practitioner/1"),
        "Bundle.entry[5].resource.subject",
        "structure.reference-target",
        False,
    ),
    (
        "DiagnosticReport.result the Patient",
        LAB,
        _set("entry", 4, "resource", "result", 0, "reference", value="Patient/1"),
        "Bundle.entry[4].resource.result[0]",
        "structure.reference-target",
        False,
    ),
    # calendar days
    *(
        (
            f"date {day}",
            OP,
            _set("entry", 0, "resource", "date", value=day),
            "Bundle.entry[0].resource.date",
            "structure.format",
            True,
        )
        for day in ("2024-02-30", "2023-02-29", "1900-02-29", "2024-04-31", "2023-02-29T10:00:00+05:30")
    ),
    (
        "instant 2021-02-29",
        OP,
        _set("entry", 0, "resource", "meta", "lastUpdated", value="2021-02-29T10:00:00Z"),
        "Bundle.entry[0].resource.meta.lastUpdated",
        "structure.format",
        True,
    ),
    # id, base64Binary, integers, code and uri
    *(
        (
            f"id {label}",
            OP,
            _set("entry", 1, "resource", "id", value=rid),
            "Bundle.entry[1].resource.id",
            "structure.format",
            oracle,
        )
        for label, rid, oracle in (
            ("with a space", "a b", True),
            ("with a slash", "a/b", True),
            ("of 65", "a" * 65, False),
        )
    ),
    *(
        (f"base64Binary {label}", LAB, _attachment(data), _DATA_PATH, "structure.format", oracle)
        for label, data, oracle in (
            ("DUMMY", "DUMMY", True),
            ("padding inside", "SG=sbG8=", True),
            ("three padding", "S===", True),
            ("a '-'", "SGV-bG8=", True),
            ("whitespace inside a group", "SG Vs bG8=", False),
        )
    ),
    ("unsignedInt -1", LAB, _attachment(-1, "size"), _SIZE_PATH, "structure.format", True),
    ("unsignedInt 2**31", LAB, _attachment(2**31, "size"), _SIZE_PATH, "structure.format", True),
    (
        "code with a trailing space",
        OP,
        _set("entry", 0, "resource", "status", value="final "),
        "Bundle.entry[0].resource.status",
        "structure.format",
        True,
    ),
    (
        "code with two spaces inside",
        OP,
        _set("entry", 0, "resource", "language", value="en  IN"),
        "Bundle.entry[0].resource.language",
        "structure.format",
        True,
    ),
    (
        "uri with a space",
        OP,
        _set("entry", 0, "resource", "type", "coding", 0, "system", value="http://snomed.info/ sct"),
        "Bundle.entry[0].resource.type.coding[0].system",
        "structure.format",
        False,
    ),
    # ele-1
    (
        "empty object",
        OP,
        _set("entry", 4, "resource", "class", value={}),
        "Bundle.entry[4].resource.class",
        "r4.ele-1",
        False,
    ),
    (
        "object with only an id",
        OP,
        _set("entry", 4, "resource", "class", value={"id": "c1"}),
        "Bundle.entry[4].resource.class",
        "r4.ele-1",
        False,
    ),
    (
        "empty array",
        OP,
        _set("entry", 0, "resource", "author", value=[]),
        "Bundle.entry[0].resource.author",
        "r4.ele-1",
        False,
    ),
    (
        "empty string",
        OP,
        _set("entry", 0, "resource", "title", value=""),
        "Bundle.entry[0].resource.title",
        "r4.ele-1",
        True,
    ),
    (
        "empty uri",
        OP,
        _set("entry", 0, "resource", "type", "coding", 0, "system", value=""),
        "Bundle.entry[0].resource.type.coding[0].system",
        "r4.ele-1",
        False,
    ),
    (
        "empty primitive extension",
        OP,
        _set("entry", 0, "resource", "_status", value={}),
        "Bundle.entry[0].resource._status",
        "r4.ele-1",
        False,
    ),
    # the Bundle's invariants
    ("entry without a resource", OP, _pop("entry", 6, "resource"), "Bundle.entry[6].resource", "r4.bdl-5", False),
    ("total in a document", OP, _set("total", value=3), "Bundle.total", "r4.bdl-1", False),
    (
        "search in a document",
        OP,
        _set("entry", 2, "search", value={"mode": "match"}),
        "Bundle.entry[2].search",
        "r4.bdl-2",
        False,
    ),
    (
        "request in a document",
        OP,
        _set("entry", 2, "request", value={"method": "PUT", "url": "Organization/1"}),
        "Bundle.entry[2].request",
        "r4.bdl-3",
        False,
    ),
    (
        "response in a document",
        OP,
        _set("entry", 2, "response", value={"status": "200"}),
        "Bundle.entry[2].response",
        "r4.bdl-4",
        False,
    ),
    (
        "same fullUrl and versionId",
        OP,
        _set("entry", 9, "fullUrl", value="Condition/2"),  # Condition/2 and Condition/3: no versionId either
        "Bundle.entry[9].fullUrl",
        "r4.bdl-7",
        False,
    ),
    (
        "version specific fullUrl",
        OP,
        _set("entry", 2, "fullUrl", value="https://hip.example/fhir/Organization/1/_history/2"),
        "Bundle.entry[2].fullUrl",
        "r4.bdl-8",
        False,
    ),
    ("identifier without a system", OP, _pop("identifier", "system"), "Bundle.identifier", "r4.bdl-9", False),
    ("identifier without a value", OP, _pop("identifier", "value"), "Bundle.identifier", "r4.bdl-9", False),
    ("no timestamp", OP, _pop("timestamp"), "Bundle.timestamp", "r4.bdl-10", False),
]


def _swap(d: dict[str, Any]) -> None:
    d["entry"][0], d["entry"][1] = d["entry"][1], d["entry"][0]


CASES.append(("Composition not first", OP, _swap, "Bundle.entry[0].resource", "r4.bdl-11", False))


@pytest.mark.parametrize(("name", "source", "change", "path", "rule", "oracle"), CASES, ids=[c[0] for c in CASES])
def test_a_broken_r4_rule_is_an_error_at_its_path(
    name: str, source: str, change: Callable[[dict[str, Any]], None], path: str, rule: str, oracle: bool
) -> None:
    data = example(source)
    assert validate(data).ok
    change(data)
    report = validate(data)
    assert (path, rule) in {(p.path, p.rule) for p in report.errors}, report.problems
    assert all(p.severity == "error" for p in report.problems if p.rule == rule)


ORACLE = [c for c in CASES if c[5]]


@pytest.mark.parametrize(("name", "source", "change", "path", "rule", "oracle"), ORACLE, ids=[c[0] for c in ORACLE])
def test_the_oracle_refuses_it_too(
    name: str, source: str, change: Callable[[dict[str, Any]], None], path: str, rule: str, oracle: bool
) -> None:
    fhir_bundle = pytest.importorskip("fhir.resources.R4B.bundle")
    data = example(source)
    fhir_bundle.Bundle.model_validate(copy.deepcopy(data))
    change(data)
    with pytest.raises((ValueError, KeyError)):  # pydantic's ValidationError is a ValueError; an unknown type, KeyError
        fhir_bundle.Bundle.model_validate(data)


@pytest.mark.parametrize(
    ("label", "change"),
    [
        ("leap day of a leap year", _set("entry", 0, "resource", "date", value="2024-02-29")),
        ("leap day of 2000", _set("entry", 0, "resource", "date", value="2000-02-29T23:59:60+05:30")),
        ("31 December", _set("entry", 0, "resource", "date", value="2023-12-31")),
        ("a year and month", _set("entry", 0, "resource", "date", value="2023-02")),
        ("base64 with line breaks between groups", _attachment("SGVs\nbG8=\n")),
        ("base64 of one byte", _attachment("SA==")),
        ("unsignedInt 0", _attachment(0, "size")),
        ("unsignedInt at its maximum", _attachment(2**31 - 1, "size")),
        ("id of 64", _set("entry", 1, "resource", "id", value="A-" + "b." * 31)),
        ("an R4 resource type without a table", lambda d: None),
        ("an external reference", _set("entry", 5, "resource", "subject", "reference", value="https://x.org/Group/9")),
    ],
)
def test_what_r4_allows_passes(label: str, change: Callable[[dict[str, Any]], None]) -> None:
    name = LAB if "base64" in label or "unsignedInt" in label or "external" in label else OP
    data = example(name)
    if "R4 resource type" in label:  # a warning (structure.unchecked-type), not an error
        data["entry"].append({"fullUrl": "Basic/x", "resource": {"resourceType": "Basic", "id": "x"}})
    change(data)
    report = validate(data)
    errors = [(p.path, p.rule) for p in report.errors if p.rule.startswith(("structure.", "r4."))]
    assert errors == []


def test_an_external_reference_is_no_error_but_an_unresolved_one_stays_the_document_rules() -> None:
    data = example(LAB)
    data["entry"][5]["resource"]["subject"]["reference"] = "Practitioner/nowhere"
    report = validate(data)
    assert [(p.path, p.rule) for p in report.errors] == [
        ("Bundle.entry[5].resource.subject.reference", "document.reference-resolved")
    ]


def test_a_resource_of_no_r4_type_is_one_error_not_one_per_reference_to_it() -> None:
    data = example(OP)
    data["entry"][1]["resource"]["resourceType"] = "Observatoin"  # the Practitioner, which many elements point at
    report = validate(data)
    r4 = ("structure.", "r4.", "document.")  # the guide's profile.target names each reference, by its own rule
    assert [(p.path, p.rule) for p in report.errors if p.rule.startswith(r4)] == [
        ("Bundle.entry[1].resource", "structure.unknown-resource-type")
    ]
    assert [p for p in report.warnings if p.rule.startswith(r4)] == []


def test_two_versions_of_one_full_url_are_r4_but_not_a_document() -> None:
    """bdl-7 allows one fullUrl twice with different meta.versionId; a document's references could not tell them
    apart: ``document.full-url-unique``, not ``r4.bdl-7``."""
    data = example(OP)
    data["entry"][2]["fullUrl"] = data["entry"][1]["fullUrl"]  # the Practitioner has versionId 1, this one none
    rules = {p.rule for p in validate(data).errors}
    assert "document.full-url-unique" in rules and "r4.bdl-7" not in rules


def _contained(data: dict[str, Any], resource: dict[str, Any], ref: str = "#org") -> None:
    enc = data["entry"][4]["resource"]
    enc["contained"] = [resource]
    enc["serviceProvider"] = {"reference": ref}


_ORG = {"resourceType": "Organization", "id": "org", "name": "x"}


def test_a_contained_resource_referred_to_passes() -> None:
    data = example(OP)
    _contained(data, dict(_ORG))
    assert validate(data).errors == ()


@pytest.mark.parametrize(
    ("label", "resource", "ref", "path", "rule"),
    [
        ("nested contained", {**_ORG, "contained": [dict(_ORG)]}, "#org", ".contained[0].contained", "r4.dom-2"),
        ("not referred to", _ORG, "Organization/1", ".contained[0]", "r4.dom-3"),
        ("versionId", {**_ORG, "meta": {"versionId": "1"}}, "#org", ".contained[0].meta", "r4.dom-4"),
        (
            "lastUpdated",
            {**_ORG, "meta": {"lastUpdated": "2024-01-01T00:00:00Z"}},
            "#org",
            ".contained[0].meta",
            "r4.dom-4",
        ),
        (
            "security label",
            {**_ORG, "meta": {"security": [{"code": "R"}]}},
            "#org",
            ".contained[0].meta.security",
            "r4.dom-5",
        ),
        ("local reference to nothing", _ORG, "#other", ".serviceProvider.reference", "r4.ref-1"),
        (
            "contained of a type the element does not allow",
            {"resourceType": "Patient", "id": "org"},
            "#org",
            ".serviceProvider",
            "structure.reference-target",
        ),
    ],
)
def test_contained_resources_follow_r4(label: str, resource: dict[str, Any], ref: str, path: str, rule: str) -> None:
    data = example(OP)
    _contained(data, copy.deepcopy(resource), ref)
    report = validate(data)
    assert (f"Bundle.entry[4].resource{path}", rule) in {(p.path, p.rule) for p in report.errors}, report.problems


def test_a_local_reference_without_any_contained_resource_is_ref_1() -> None:
    data = example(OP)
    data["entry"][4]["resource"]["serviceProvider"] = {"reference": "#org"}
    report = validate(data)
    assert [(p.path, p.rule) for p in report.errors] == [
        ("Bundle.entry[4].resource.serviceProvider.reference", "r4.ref-1")
    ]


def test_a_contained_resource_that_points_at_its_container_passes_dom_3() -> None:
    data = example(OP)
    enc = data["entry"][4]["resource"]
    enc["contained"] = [{**_ORG, "partOf": {"reference": "#"}}]  # no reference to it; it refers to its container
    # (an Organization's partOf is an Organization: R4 allows '#' here, the target is not checked for '#')
    report = validate(data)
    assert report.errors == ()


def test_no_message_carries_a_value_of_the_bundle() -> None:
    secret = "2024-02-30"
    data = example(OP)
    data["entry"][0]["resource"]["date"] = secret
    data["entry"][1]["resource"]["id"] = "SECRET 1234"
    data["entry"][4]["resource"]["serviceProvider"] = {"reference": "#SECRET"}
    report = validate(data)
    assert len(report.errors) >= 3
    assert all("SECRET" not in p.message and secret not in p.message for p in report.problems)


def test_a_primitive_extension_is_checked_not_a_failure_of_the_validator() -> None:
    """R4's JSON puts a primitive's extensions beside it (``_status``): walked as an Element (on main it was the
    validator's own ``internal`` failure)."""
    data = example(OP)
    comp = data["entry"][0]["resource"]
    comp["_status"] = {"extension": [{"url": "https://example.org/x", "valueString": "y"}]}
    assert validate(data).problems == ()
    comp["_status"]["nickname"] = "x"
    assert [(p.path, p.rule) for p in validate(data).errors] == [
        ("Bundle.entry[0].resource._status.nickname", "structure.unknown-element")
    ]
