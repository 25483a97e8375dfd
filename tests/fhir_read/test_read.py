"""``health_async.fhir.read``: the guide's published examples read by value, the rules a producer's variations rely
on (references, record types, ABHA ids, values, dosage, attachments, dates), nothing personal in a repr, and
hypothesis-fuzzed bundles that never make it raise."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from health_async import InvalidRequest
from health_async.fhir import (
    Attachment,
    Dosage,
    FhirRecord,
    RecordType,
    read,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "fhir_read"
DATA_650 = Path(__file__).resolve().parent.parent / "data" / "fhir" / "examples-6.5.0"
IST = dt.timezone(dt.timedelta(hours=5, minutes=30))


def example(name: str) -> bytes:
    return (DATA / f"Bundle-{name}.json").read_bytes()


def example_650(name: str) -> bytes:
    """One of the guide's 6.5.0 examples (``tests/data/fhir/examples-6.5.0``, verbatim)."""
    return (DATA_650 / f"Bundle-{name}.json").read_bytes()


def bundle(*resources: dict[str, Any], urls: bool = True) -> dict[str, Any]:
    """A document Bundle of these resources, each entry's fullUrl a urn:uuid (as v6 of the guide writes them)."""
    entries = []
    for position, resource in enumerate(resources):
        entry: dict[str, Any] = {"resource": resource}
        if urls:
            entry["fullUrl"] = f"urn:uuid:{position:08d}-0000-0000-0000-000000000000"
        entries.append(entry)
    return {"resourceType": "Bundle", "type": "document", "entry": entries}


def urn(position: int) -> str:
    return f"urn:uuid:{position:08d}-0000-0000-0000-000000000000"


# --------------------------------------------------------------------------------- the guide's examples, by value

RECORD_TYPES = [
    ("OPConsultNote-example-05", RecordType.OP_CONSULT, "Consultation Report"),
    ("Prescription-example-06", RecordType.PRESCRIPTION, "Prescription record"),
    ("DiagnosticReport-Lab-example-03", RecordType.DIAGNOSTIC_REPORT, "Diagnostic Report- Lab"),
    ("DischargeSummary-example-04", RecordType.DISCHARGE_SUMMARY, "Discharge Summary"),
    ("ImmunizationRecord-example-07", RecordType.IMMUNIZATION, "Immunization record"),
    ("WellnessRecord-example-01", RecordType.WELLNESS, "Wellness Record"),
    ("HealthDocumentRecord-example-01", RecordType.HEALTH_DOCUMENT, "Health Document"),
]


@pytest.mark.parametrize(("name", "record_type", "title"), RECORD_TYPES)
def test_every_example_has_its_record_type_title_and_patient(name: str, record_type: RecordType, title: str) -> None:
    record = read(example(name))
    assert record.record_type is record_type
    assert record.title == title
    assert record.patient is not None
    assert record.patient.name == "ABC"
    assert record.patient.birth_date == dt.date(1981, 1, 12)
    assert record.patient.abha_number == "22-7225-4829-5255"
    assert record.patient.abha_address is None
    assert [author.resource_type for author in record.authors] == ["Practitioner"]


@pytest.mark.parametrize(("name", "record_type", "title"), RECORD_TYPES)
def test_the_record_type_comes_from_the_type_code_alone(name: str, record_type: RecordType, title: str) -> None:
    """Without any profile (a producer that sets none), the SNOMED code, or for wellness the title, still tells."""
    decoded = json.loads(example(name), strict=False)
    decoded.pop("meta", None)
    decoded["entry"][0]["resource"].pop("meta", None)
    assert read(decoded).record_type is record_type


def test_prescription_example_medications_and_binary() -> None:
    record = read(example("Prescription-example-06"))
    assert record.date == dt.datetime(2017, 5, 27, 11, 46, 9, tzinfo=IST)
    assert [(m.resource_type, m.name, m.code, m.dosage, m.status, m.date) for m in record.medications] == [
        (
            "MedicationRequest",
            "Azithromycin (as azithromycin dihydrate) 250 mg oral capsule",
            "324252006",
            "One tablet at once",
            "active",
            dt.date(2020, 7, 9),
        ),
        (
            "MedicationRequest",
            "Paracetemol 500mg Oral Tab",
            None,
            "Take two tablets orally with or after meal once a day",
            "active",
            dt.date(2020, 7, 9),
        ),
    ]
    assert [(c.name, c.code) for c in record.conditions] == [("Abdominal pain", "21522001")]
    (binary,) = record.attachments
    assert (binary.source, binary.content_type, binary.title, binary.size) == ("Binary", "application/pdf", None, 48)
    data = binary.data()
    assert data is not None and len(data) == 48 and data.startswith(b"%PDF-")


def test_lab_example_observations_ranges_and_attachments() -> None:
    record = read(example("DiagnosticReport-Lab-example-03"))
    assert [(o.name, o.code, o.value, o.unit, o.low, o.high) for o in record.observations] == [
        ("Cholesterol [Mass or moles/Vol]", "35200-5", 6.3, "mmol/l", None, 4.5),
        ("Triglyceride [Mass or moles/Vol]", "35217-9", 1.3, "mmol/l", None, 2.0),
    ]
    assert record.facility is not None and record.facility.name == "XYZ Lab Pvt.Ltd."
    assert record.facility.identifier == "4567878"
    assert [(a.source, a.title, a.content_type, a.size) for a in record.attachments] == [
        ("DiagnosticReport", "Diagnostic Report", "application/pdf", 48),
        ("DocumentReference", "Laboratory report", "application/pdf", 48),
    ]
    assert record.attachments[1].creation == dt.datetime(2019, 5, 29, 14, 58, 58, 181000, tzinfo=IST)


def test_wellness_example_panel_is_nested_and_values_are_typed() -> None:
    record = read(example("WellnessRecord-example-01"))
    by_code = {o.code: o for o in record.observations}
    assert len(record.observations) == 19
    pressure = by_code["85354-9"]
    assert pressure.value is None and pressure.interpretation == "Below low normal"
    assert pressure.date == dt.date(2020, 9, 29)
    assert [(c.name, c.code, c.value, c.unit, c.interpretation) for c in pressure.components] == [
        ("Systolic blood pressure", "8480-6", 107, "mmHg", "Normal"),
        ("Diastolic blood pressure", "8462-4", 60, "mmHg", "Below low normal"),
    ]
    saturation = by_code["2708-6"]
    assert (saturation.value, saturation.unit, saturation.low, saturation.high) == (95, "%", 90, 99)
    assert saturation.date == dt.datetime(2020, 9, 29, 9, 30, 10, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert by_code["81663-7"].value == "Vegan"  # a valueCodeableConcept: its text
    assert by_code["8867-4"].value == 44 and by_code["8867-4"].unit == "beats/minute"
    assert record.patient is not None and record.patient.gender == "female"


def test_op_consult_example_clinical_entries() -> None:
    record = read(example("OPConsultNote-example-05"))
    assert [(c.name, c.code, c.status) for c in record.conditions] == [
        ("Foot swelling", "297142003", "active"),
        ("Diabetes mellitus type 1", "46635009", "recurrence"),
        ("Diabetes mellitus type 2", "44054006", "recurrence"),
    ]
    (allergy,) = record.allergies
    assert (allergy.name, allergy.code, allergy.status) == ("NKA", "716186003", "active")
    (procedure,) = record.procedures
    assert (procedure.name, procedure.date) == ("Assessment of diabetic foot ulcer", dt.date(2019, 5, 12))
    assert [(m.resource_type, m.name) for m in record.medications] == [
        ("MedicationRequest", "Neomycin 5 microgram/mg cutaneous ointment"),
        ("MedicationStatement", "Telmisartan 20 mg oral tablet"),
    ]
    assert record.facility is not None and record.facility.name == "UVW Hospital"


def test_immunization_example() -> None:
    (shot,) = read(example("ImmunizationRecord-example-07")).immunizations
    assert (shot.name, shot.code, shot.status, shot.date) == (
        "COVID-19 antigen vaccine",
        "1119305005",
        "completed",
        dt.date(2021, 2, 21),
    )


def raw_controls(data: bytes) -> set[int]:
    """The raw control characters (bytes below 0x20) inside the JSON strings of ``data``."""
    found: set[int] = set()
    inside = escaped = False
    for byte in data:
        if not inside:
            inside = byte == 0x22
        elif escaped:
            escaped = False
        elif byte == 0x5C:
            escaped = True
        elif byte == 0x22:
            inside = False
        elif byte < 0x20:
            found.add(byte)
    return found


@pytest.mark.parametrize(
    ("name", "record_type"),
    [
        ("Prescription-example-06", RecordType.PRESCRIPTION),
        ("DiagnosticReport-Lab-example-03", RecordType.DIAGNOSTIC_REPORT),
    ],
)
def test_examples_with_raw_control_characters_are_read(name: str, record_type: RecordType) -> None:
    """Two of the guide's files (of the seven here, and none of 2.0.1's or 6.5.0's) hold raw tabs and newlines
    inside their narratives' strings: not strict JSON (msgspec refuses them), still read, and read whole."""
    data = example(name)
    assert raw_controls(data) == {0x09, 0x0A}
    with pytest.raises(ValueError):
        json.loads(data)
    expected = json.loads(data, strict=False)
    for source in (data, data.decode("utf-8"), bytearray(data), BOM + data):
        record = read(source)
        assert record.record_type is record_type
        assert record.raw == expected
        assert record.patient is not None and record.patient.name == "ABC"
        assert "\n" in record.resources["Composition"][0]["text"]["div"]  # kept as written


def test_every_control_character_inside_a_string_is_read_as_written() -> None:
    """All 32 (U+0000 to U+001F) raw inside strings, in bytes and in text, with or without a byte order mark."""
    controls = "".join(map(chr, range(0x20)))
    patient = {"resourceType": "Patient", "name": [{"text": "A@@B"}]}
    observation = {"resourceType": "Observation", "code": {"text": "note"}, "valueString": "@@"}
    text = json.dumps(bundle(patient, observation)).replace("@@", controls)
    assert raw_controls(text.encode()) == set(range(0x20))
    for source in (text, text.encode(), BOM + text.encode(), "\ufeff" + text):
        record = read(source)
        assert record.patient is not None and record.patient.name == f"A{controls}B"
        (note,) = record.observations
        assert note.value == controls


@pytest.mark.parametrize(
    ("junk", "reason"),
    [
        (b'{"name": "Asha\x01 Sharma', "it ends before its JSON value does (truncated)"),
        ('{"name": "Asha\n', "it ends before its JSON value does (truncated)"),
        (b'{"name": "Asha\tSharma"} Asha', "something follows its JSON value (at byte"),
        (b'{"name": "Asha\nSharma", "x": [1,]}', "it is malformed (at byte 32)"),
        (b'{\x01"name": "Asha"}', "it is malformed (at byte 1)"),  # outside a string: the fault
        (b'{"name": "Asha\x01\xff"}', "it is not UTF-8"),
    ],
    ids=["truncated-bytes", "truncated-str", "trailing", "malformed", "control-outside", "not-utf8"],
)
def test_raw_control_characters_do_not_hide_what_is_wrong(junk: str | bytes, reason: str) -> None:
    """Text with raw control characters inside strings that is not JSON for another reason is the library's error,
    saying that reason (not the control character, which the reader accepts), without the content."""
    with pytest.raises(InvalidRequest) as info:
        read(junk)
    assert str(info.value).startswith(f"the FHIR input is not JSON: {reason}")
    assert "Asha" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_unknown_stays_raw() -> None:
    record = read(example("DiagnosticReport-Lab-example-03"))
    assert [s["id"] for s in record.resources["Specimen"]] == ["1"]
    assert record.raw["resourceType"] == "Bundle"
    assert record.resolve("ServiceRequest/1") is record.resources["ServiceRequest"][0]
    assert record.resolve("http://example.org/fhir/Specimen/1/_history/2") is record.resources["Specimen"][0]
    assert record.resolve("Specimen/none") is None


# ------------------------------------------------------------------------------------------------------- dosage


def test_op_consult_6_5_0_dosage_is_read_from_its_coded_parts() -> None:
    """The 6.5.0 OP consult example's MedicationRequest has no dosage text: only a route and an additional
    instruction. Read as ``None`` before."""
    record = read(example_650("OPConsultNote-example-05"))
    request = next(m for m in record.medications if m.resource_type == "MedicationRequest")
    assert request.name == "Neomycin 5 mg/g cutaneous ointment"
    assert request.dosage == "Topical route, Twice a day"
    (dosage,) = request.dosages
    assert (dosage.text, dosage.route, dosage.additional_instructions) == (None, "Topical route", ("Twice a day",))
    assert (dosage.frequency, dosage.timing, dosage.method, dosage.as_needed, dosage.dose) == (None,) * 5
    statement = next(m for m in record.medications if m.resource_type == "MedicationStatement")
    assert (statement.dosage, statement.dosages) == (None, ())


def test_prescription_6_5_0_text_wins_and_the_parts_are_typed() -> None:
    record = read(example_650("Prescription-example-06"))
    azithromycin, paracetamol = record.medications
    assert azithromycin.dosage == "One tablet at once"  # the text, when there is one
    (dosage,) = azithromycin.dosages
    assert dosage.text == "One tablet at once"
    assert (dosage.frequency, dosage.period, dosage.period_unit) == (1, 1, "d")
    assert (dosage.route, dosage.method, dosage.additional_instructions) == (
        "Oral Route",
        "Swallow",
        ("With or after food",),
    )
    assert dosage.summary == "1 time(s) per 1 day, Oral Route, Swallow, With or after food"
    assert paracetamol.dosage == "Take two tablets orally with or after meal once a day"
    assert [(d.text, d.summary) for d in paracetamol.dosages] == [
        ("Take two tablets orally with or after meal once a day", None)
    ]


@pytest.mark.parametrize(
    ("dosage", "summary"),
    [
        (
            {
                "doseAndRate": [{"doseQuantity": {"value": 1.0, "unit": "tablet"}}],
                "timing": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}},
                "route": {"coding": [{"code": "26643006", "display": "oral"}]},
                "method": {"text": "swallow"},
            },
            "1 tablet, 1 time(s) per 1 day, oral, swallow",
        ),
        ({"timing": {"repeat": {"frequency": 3, "period": 2, "periodUnit": "wk"}}}, "3 time(s) per 2 weeks"),
        ({"timing": {"repeat": {"period": 8, "periodUnit": "h"}}}, "every 8 hours"),
        ({"timing": {"repeat": {"frequency": 2}}}, "2 time(s)"),
        ({"timing": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "cycle"}}}, "1 time(s) per 1 cycle"),
        (
            {"timing": {"code": {"coding": [{"code": "BID"}]}, "repeat": {"frequency": 2, "period": 1}}},
            "BID",  # the coded timing names it: the repeat is not written twice
        ),
        ({"doseAndRate": [{"doseQuantity": {"value": 5, "code": "mL"}}]}, "5 mL"),
        ({"asNeededBoolean": True}, "as needed"),
        ({"asNeededBoolean": False, "route": {"text": "oral"}}, "oral"),
        ({"asNeededCodeableConcept": {"coding": [{"display": "Pain"}]}}, "as needed for Pain"),
        ({"additionalInstruction": [{"text": "after food"}, {"coding": [{"code": "X"}]}, {}]}, "after food, X"),
        ({"timing": {"repeat": {"frequency": "2", "period": [], "periodUnit": 7}}, "route": "oral"}, "2 time(s)"),
        ({"sequence": 1}, None),
    ],
    ids=[
        "all",
        "weeks",
        "every",
        "frequency-only",
        "unknown-unit",
        "timing-code",
        "dose-code",
        "prn",
        "not-prn",
        "prn-for",
        "instructions",
        "wrong-types",
        "nothing",
    ],
)
def test_a_dosage_without_text_is_summarised_from_its_parts(dosage: dict[str, Any], summary: str | None) -> None:
    request = {"resourceType": "MedicationRequest", "medicationCodeableConcept": {"text": "M"}}
    (medication,) = read(bundle({**request, "dosageInstruction": [dosage]})).medications
    (read_dosage,) = medication.dosages
    assert read_dosage.summary == summary
    assert medication.dosage == summary
    assert read_dosage.raw == dosage
    assert repr(read_dosage) == "Dosage()"  # health data: nothing of it in a repr


def test_dosage_parts_are_typed_and_several_dosages_are_joined() -> None:
    statement = {
        "resourceType": "MedicationStatement",
        "dosage": [
            {
                "doseAndRate": [{"doseQuantity": {"value": "2", "unit": "puff"}}],
                "timing": {"repeat": {"frequency": 4, "period": 1, "periodUnit": "d"}},
                "asNeededCodeableConcept": {"text": "wheezing"},
            },
            {"text": "  "},
            {"text": "rinse the mouth after"},
        ],
    }
    (medication,) = read(bundle(statement)).medications
    first, blank, last = medication.dosages
    assert last.text == "rinse the mouth after" and last.summary is None
    assert first == Dosage(
        dose=2,
        dose_unit="puff",
        frequency=4,
        period=1,
        period_unit="d",
        as_needed=True,
        as_needed_for="wheezing",
        summary="2 puff, 4 time(s) per 1 day, as needed for wheezing",
    )
    assert (blank.text, blank.summary) == (None, None)
    assert medication.dosage == "2 puff, 4 time(s) per 1 day, as needed for wheezing; rinse the mouth after"


# ------------------------------------------------------------------------------------------ a producer's variations


def test_urn_references_contained_and_referenced_medication() -> None:
    patient = {
        "resourceType": "Patient",
        "name": [{"given": ["Asha"], "family": "Rao"}],
        "identifier": [
            {"system": "https://healthid.abdm.gov.in", "value": "asha.rao@abdm"},
            {"type": {"coding": [{"code": "HIN"}]}, "value": "91-1234-5678-9012"},
            {"type": {"coding": [{"code": "MR"}]}, "system": "https://hospital.example/mrn", "value": "12345678901234"},
        ],
    }
    composition = {
        "resourceType": "Composition",
        "type": {"coding": [{"system": "http://snomed.info/sct", "code": "440545006"}]},
        "subject": {"reference": urn(2)},
        "author": [{"reference": urn(3)}, {"reference": "Practitioner/elsewhere", "display": "Dr. Far"}],
        "custodian": {"reference": urn(4)},
        "date": "2024-03-01",
    }
    request = {
        "resourceType": "MedicationRequest",
        "medicationReference": {"reference": urn(5)},
        "dosageInstruction": [{"timing": {"repeat": {"frequency": 2, "period": 1, "periodUnit": "d"}}}],
    }
    statement = {
        "resourceType": "MedicationStatement",
        "contained": [{"resourceType": "Medication", "id": "m", "code": {"text": "Metformin 500 mg"}}],
        "medicationReference": {"reference": "#m"},
        "dosage": [{"text": "1-0-1"}, {"text": "after food"}],
    }
    record = read(
        bundle(
            composition,
            request,
            patient,
            {"resourceType": "Practitioner", "name": [{"text": "Dr. Near"}], "identifier": [{"value": "HPR-1"}]},
            {"resourceType": "Organization", "name": "Clinic"},
            {"resourceType": "Medication", "code": {"coding": [{"code": "861007", "display": "Metformin"}]}},
            statement,
        )
    )
    assert record.record_type is RecordType.PRESCRIPTION
    assert record.patient is not None
    assert (record.patient.name, record.patient.abha_number, record.patient.abha_address) == (
        "Asha Rao",
        "91-1234-5678-9012",
        "asha.rao@abdm",
    )
    assert [(a.resource_type, a.name, a.identifier) for a in record.authors] == [
        ("Practitioner", "Dr. Near", "HPR-1"),
        ("Practitioner", "Dr. Far", None),
    ]
    assert record.facility is not None and record.facility.name == "Clinic"
    assert [(m.name, m.code, m.dosage) for m in record.medications] == [
        ("Metformin", "861007", "2 time(s) per 1 day"),
        ("Metformin 500 mg", None, "1-0-1; after food"),
    ]
    assert record.date == dt.date(2024, 3, 1)


def test_an_mr_number_is_not_an_abha_number() -> None:
    patient = {
        "resourceType": "Patient",
        "identifier": [{"system": "https://hospital.example", "value": "12345678901234"}],
    }
    record = read(bundle(patient))
    assert record.patient is not None and record.patient.abha_number is None


@pytest.mark.parametrize(
    ("observation", "value", "unit"),
    [
        ({"valueQuantity": {"value": "6.3", "code": "mmol/L"}}, 6.3, "mmol/L"),  # a number as a string, UCUM code
        ({"valueString": "trace"}, "trace", None),
        ({"valueBoolean": True}, True, None),
        ({"valueInteger": 7}, 7, None),
        ({"valueCodeableConcept": {"coding": [{"code": "260385009", "display": "Negative"}]}}, "Negative", None),
        ({"valueRange": {"low": {"value": 4.5, "unit": "g/dL"}, "high": {"value": 6}}}, "4.5-6", "g/dL"),
        ({"valueRatio": {"numerator": {"value": 1}, "denominator": {"value": 128}}}, "1/128", None),
        ({"valueDateTime": "2024-01-02T03:04:05Z"}, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC), None),
        ({"valueQuantity": {"value": "high"}}, None, None),
        ({}, None, None),
    ],
)
def test_observation_values(observation: dict[str, Any], value: object, unit: str | None) -> None:
    (read_back,) = read(bundle({"resourceType": "Observation", **observation})).observations
    assert read_back.value == value and type(read_back.value) is type(value)
    assert read_back.unit == unit


def test_observation_range_interpretation_and_dates() -> None:
    observation = {
        "resourceType": "Observation",
        "code": {"text": "Hb"},
        "valueQuantity": {"value": 9},
        "referenceRange": [{"low": {"value": 12}, "high": {"value": "16"}}],
        "interpretation": [{"coding": [{"code": "L"}]}],
        "issued": "2024-05-06T07:08:09.123+05:30",
    }
    (hb,) = read(bundle(observation)).observations
    assert (hb.low, hb.high, hb.interpretation) == (12, 16, "L")
    assert hb.date == dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=IST)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-06", dt.date(2024, 5, 6)),
        ("2024-05", "2024-05"),  # a partial date stays text
        ("2024", "2024"),
        ("2024-13-45", "2024-13-45"),  # not a date: kept as written
        ("yesterday", "yesterday"),
        ("2024-05-06T10:00:00Z", dt.datetime(2024, 5, 6, 10, tzinfo=dt.UTC)),
    ],
)
def test_dates_parse_or_stay_text(text: str, expected: object) -> None:
    assert read(bundle({"resourceType": "Composition", "date": text})).date == expected


def test_wellness_by_profile_and_unknown_type() -> None:
    profiled = {
        "resourceType": "Composition",
        "meta": {"profile": ["https://nrces.in/ndhm/fhir/r4/StructureDefinition/WellnessRecord|6.5.0"]},
    }
    assert read(bundle(profiled)).record_type is RecordType.WELLNESS
    assert read(bundle({"resourceType": "Composition", "type": {"coding": [{"code": "11488-4"}]}})).record_type is None


def test_attachment_sizes_and_url_only() -> None:
    payload = b"hello, world!"
    reference = {
        "resourceType": "DocumentReference",
        "content": [
            {"attachment": {"contentType": "text/plain", "data": base64.b64encode(payload).decode(), "title": "note"}},
            {"attachment": {"contentType": "application/pdf", "url": "https://files.example/x.pdf", "size": 2048}},
            {"attachment": {"contentType": "text/plain", "data": "not base64!"}},
        ],
    }
    inline, remote, broken = read(bundle(reference)).attachments
    assert (inline.size, inline.data(), inline.title) == (len(payload), payload, "note")
    assert (remote.size, remote.url, remote.data()) == (2048, "https://files.example/x.pdf", None)
    assert broken.size is None
    with pytest.raises(ValueError):
        broken.data()


def test_no_health_data_in_any_repr() -> None:
    record = read(example("WellnessRecord-example-01"))
    shown = " ".join(
        repr(item)
        for item in (
            record,
            record.patient,
            *record.authors,
            record.facility,
            *record.observations,
            *record.attachments,
        )
    )
    shown += repr(read(example("OPConsultNote-example-05")))
    for secret in ("ABC", "22-7225-4829-5255", "1981", "female", "Dr. DEF", "UVW", "107", "Vegan", "Blood pressure"):
        assert secret not in shown
    assert repr(record).startswith("FhirRecord(record_type='WellnessRecord', observations=19,")


def test_what_is_not_a_bundle() -> None:
    assert read("[1, 2]").raw == [1, 2]
    assert read("null").patient is None
    single = read({"resourceType": "Patient", "name": [{"text": "Solo"}]})
    assert single.patient is not None and single.patient.name == "Solo"
    with pytest.raises(ValueError):
        read("{not json")
    with pytest.raises(TypeError):
        read(42)  # type: ignore[arg-type]


BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("name", ["Prescription-example-06", "DiagnosticReport-Lab-example-03"])
def test_a_leading_bom_is_skipped_in_bytes_and_in_text(name: str) -> None:
    data = example(name)
    expected = read(data).record_type
    assert expected is not None
    assert read(BOM + data).record_type is expected
    assert read((BOM + data).decode("utf-8")).record_type is expected  # U+FEFF first: refused before the fix
    assert read(bytearray(BOM + data)).record_type is expected


@pytest.mark.parametrize("empty", [b"", "", b" \n\t\r", "  ", BOM, "\ufeff", BOM + b"\n", bytearray()])
def test_empty_input_is_the_librarys_error_saying_empty(empty: str | bytes) -> None:
    with pytest.raises(InvalidRequest, match=r"^the FHIR input is empty: there is no JSON text$") as info:
        read(empty)
    assert isinstance(info.value, ValueError)  # as before: code that caught ValueError still does
    assert info.value.__cause__ is None and info.value.__context__ is None


@pytest.mark.parametrize(
    ("junk", "reason"),
    [
        (b'{"resourceType": "Patient", "name": [{"text": "Asha Sharma"', "it ends before its JSON value does"),
        ('{"resourceType": "Patient", "name": "Asha', "it ends before its JSON value does"),
        (BOM + b'{"name": "Asha Sharma"} Asha', "something follows its JSON value (at byte 28)"),
        (b"Asha Sharma", "it is malformed (at byte 0)"),
        ("\ufeff\ufeff{}", "it is malformed (at byte 3)"),
        (b'{"name": "Asha\xff"}', "it is not UTF-8"),
        (b"[" * 100_000, "it is nested too deeply"),
        ('{"size": 1' + "0" * 5000 + "}", "it holds a number too large to decode"),
    ],
    ids=["truncated-bytes", "truncated-str", "trailing", "malformed", "two-boms", "not-utf8", "deep", "huge-int"],
)
def test_what_is_not_json_is_the_librarys_error_without_the_content(junk: str | bytes, reason: str) -> None:
    """Never msgspec's DecodeError (nor json's, whose ``doc`` holds the whole input) as the error or its context."""
    with pytest.raises(InvalidRequest) as info:
        read(junk)
    assert str(info.value).startswith(f"the FHIR input is not JSON: {reason}")
    assert "Asha" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400])
def test_non_finite_numbers_are_read_as_absent_in_text_and_in_a_dict(literal: str) -> None:
    """Tolerant: ``NaN``/``Infinity`` (not JSON) and numbers beyond a double's range decode (leniently) and are
    read as absent, where a value, a range, a size or a dosage is expected; never a crash."""
    observation = {
        "resourceType": "Observation",
        "valueQuantity": {"value": "@@@", "unit": "mg"},
        "referenceRange": [{"low": {"value": "@@@"}, "high": {"value": "@@@"}}],
        "component": [{"valueRange": {"low": {"value": "@@@"}}}, {"valueInteger": "@@@"}],
    }
    media = {"resourceType": "Media", "content": {"contentType": "text/plain", "size": "@@@", "data": "YWJj"}}
    text = json.dumps(bundle(observation, media)).replace('"@@@"', literal)
    decoded = json.loads(text)  # float("nan"), float("inf") or an int of 401 digits, in a dict
    for source in (text, text.encode(), decoded):
        record = read(source)
        (obs,) = record.observations
        assert (obs.value, obs.unit, obs.low, obs.high) == (None, "mg", None, None)
        assert [c.value for c in obs.components] == [None, None]
        assert record.attachments[0].size == 3  # the declared size is absent: computed from the data


# ---------------------------------------------------------------------------------------------------- tolerance

_KEYS = [
    "resourceType", "entry", "resource", "fullUrl", "reference", "meta", "profile", "type", "coding", "code",
    "system", "display", "text", "title", "date", "subject", "author", "custodian", "name", "given", "family",
    "identifier", "value", "gender", "birthDate", "valueQuantity", "valueString", "valueBoolean", "valueInteger",
    "valueCodeableConcept", "valueRange", "valueRatio", "valueDateTime", "valuePeriod", "referenceRange", "low",
    "high", "interpretation", "effectiveDateTime", "effectivePeriod", "issued", "component", "unit", "start",
    "medicationCodeableConcept", "medicationReference", "dosageInstruction", "dosage", "timing", "repeat",
    "frequency", "period", "periodUnit", "content", "attachment", "presentedForm", "data", "size", "url",
    "contentType", "contained", "id", "clinicalStatus", "status", "vaccineCode", "serviceProvider", "timestamp",
    "numerator", "denominator", "authoredOn", "creation", "onsetDateTime", "performedPeriod",
    "doseAndRate", "doseQuantity", "route", "method", "asNeededBoolean", "asNeededCodeableConcept",
    "additionalInstruction",
]  # fmt: skip
_TYPES = [
    "Bundle", "Composition", "Patient", "Observation", "MedicationRequest", "MedicationStatement", "Medication",
    "Condition", "AllergyIntolerance", "Procedure", "Immunization", "DocumentReference", "DiagnosticReport",
    "Binary", "Media", "Encounter", "Organization", "Practitioner", "Frobnicator",
]  # fmt: skip
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            *_TYPES,
            "urn:uuid:0",
            "Patient/1",
            "#m",
            "2024-05-06",
            "2024-13-99T99:00",
            "6.3",
            "1e999",
            "YWJj",
            "a@abdm",
            "22-7225-4829-5255",
            "http://snomed.info/sct",
            "440545006",
            "",
            " ",
            "=",
            "Wellness  Record",
        ]
    ),
    st.text(max_size=8),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6),
    ),
    max_leaves=40,
)
_resources = st.fixed_dictionaries(
    {"resourceType": st.sampled_from(_TYPES)},
    optional={"id": _scalars, "meta": _json},
).flatmap(lambda head: st.dictionaries(st.sampled_from(_KEYS), _json, max_size=8).map(lambda body: {**body, **head}))
_bundles = st.fixed_dictionaries(
    {"resourceType": st.just("Bundle")},
    optional={
        "entry": st.one_of(
            st.lists(
                st.one_of(
                    st.fixed_dictionaries({"resource": _resources}, optional={"fullUrl": _scalars}),
                    _json,
                ),
                max_size=6,
            ),
            _json,
        ),
        "meta": _json,
        "timestamp": _scalars,
    },
)


def _touch(record: FhirRecord) -> None:
    """Use every part of the record, as a caller would."""
    repr(record)
    for attachment in record.attachments:
        assert isinstance(attachment, Attachment)
        try:
            attachment.data()
        except ValueError:
            pass
    for observation in record.observations:
        repr(observation.components)
    for medication in record.medications:
        assert all(isinstance(dosage.summary, (str, type(None))) for dosage in medication.dosages)


@given(_bundles)
def test_fuzzed_bundles_never_raise(decoded: dict[str, Any]) -> None:
    _touch(read(decoded))
    _touch(read(json.dumps(decoded, allow_nan=False) if _finite(decoded) else json.dumps({"x": 1})))


@given(_json)
def test_any_json_value_never_raises(decoded: Any) -> None:
    if _finite(decoded):
        _touch(read(json.dumps(decoded)))


def _finite(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------- the guide's 6.5.0 examples, by value

JULY_2020 = dt.datetime(2020, 7, 9, 15, 32, 26, 605000, tzinfo=IST)
MAY_2017 = dt.datetime(2017, 5, 27, 11, 46, 9, tzinfo=IST)
AUGUST_2023 = dt.datetime(2023, 8, 22, 17, 37, 0, 605000, tzinfo=IST)
RECORDS_650 = [
    ("OPConsultNote-example-05", RecordType.OP_CONSULT, "Consultation Report", JULY_2020),
    ("Prescription-example-06", RecordType.PRESCRIPTION, "Prescription record", MAY_2017),
    ("DiagnosticReport-Lab-example-03", RecordType.DIAGNOSTIC_REPORT, "Diagnostic Report- Lab", MAY_2017),
    (
        "DiagnosticReport-Imaging-DCM-example-01",
        RecordType.DIAGNOSTIC_REPORT,
        "Diagnostic Report- Imaging DICOM",
        MAY_2017,
    ),
    ("DischargeSummary-example-04", RecordType.DISCHARGE_SUMMARY, "Discharge Summary", JULY_2020),
    ("ImmunizationRecord-example-07", RecordType.IMMUNIZATION, "Immunization record", JULY_2020),
    ("WellnessRecord-example-01", RecordType.WELLNESS, "Wellness Record", JULY_2020),
    ("HealthDocumentRecord-example-01", RecordType.HEALTH_DOCUMENT, "Health Document", JULY_2020),
    ("InvoiceRecord-example-01", RecordType.INVOICE, "Pharmacy Invoice Record", AUGUST_2023),
]


def test_every_6_5_0_example_is_tested() -> None:
    assert sorted(path.name for path in DATA_650.glob("Bundle-*.json")) == sorted(
        f"Bundle-{name}.json" for name, *_ in RECORDS_650
    )


@pytest.mark.parametrize(("name", "record_type", "title", "date"), RECORDS_650, ids=[r[0] for r in RECORDS_650])
def test_every_6_5_0_example_has_its_type_title_date_patient_and_author(
    name: str, record_type: RecordType, title: str, date: dt.datetime
) -> None:
    data = example_650(name)
    assert not raw_controls(data)  # 6.5.0's files are strict JSON
    record = read(data)
    assert (record.record_type, record.title, record.date) == (record_type, title, date)
    assert record.patient is not None
    assert (record.patient.name, record.patient.birth_date, record.patient.abha_number) == (
        "ABC",
        dt.date(1981, 1, 12),
        "22-7225-4829-5255",
    )
    assert record.patient.gender == ("female" if record_type is RecordType.WELLNESS else "male")
    (author,) = record.authors
    assert (author.resource_type, author.identifier) == ("Practitioner", "21-1521-3828-3227")
    assert author.name in ("Dr. DEF", "DEF")


def test_op_consult_6_5_0() -> None:
    record = read(example_650("OPConsultNote-example-05"))
    assert [(c.name, c.code, c.status) for c in record.conditions] == [
        ("Foot swelling", "297142003", "active"),
        ("Diabetes mellitus type 1", "46635009", "recurrence"),
        ("Diabetes mellitus type 2", "44054006", "recurrence"),
    ]
    assert [(a.name, a.code) for a in record.allergies] == [("NKA", "716186003")]
    assert [(p.name, p.date) for p in record.procedures] == [
        ("Assessment of diabetic foot ulcer", dt.date(2019, 5, 12))
    ]
    assert [(m.resource_type, m.name, m.code, m.status) for m in record.medications] == [
        ("MedicationRequest", "Neomycin 5 mg/g cutaneous ointment", "353231006", "active"),
        ("MedicationStatement", "Telmisartan 20 mg oral tablet", "134463001", "completed"),
    ]
    assert record.facility is not None and (record.facility.name, record.facility.identifier) == (
        "UVW Hospital",
        "4567823",
    )


def test_lab_and_imaging_6_5_0() -> None:
    lab = read(example_650("DiagnosticReport-Lab-example-03"))
    assert [(o.name, o.code, o.value, o.unit) for o in lab.observations] == [
        ("Cholesterol [Mass/volume] in Serum or Plasma", "2093-3", 156, "mg/dL"),
        ("Triglyceride [Mass/volume] in Serum or Plasma", "2571-8", 146, "mg/dL"),
        ("Cholesterol in HDL [Mass/volume] in Serum or Plasma", "2085-9", 45, "mg/dL"),
    ]
    assert lab.facility is not None and lab.facility.name == "XYZ Lab Pvt.Ltd."
    imaging = read(example_650("DiagnosticReport-Imaging-DCM-example-01"))
    assert [(a.source, a.content_type, a.title) for a in imaging.attachments] == [
        ("DiagnosticReport", "application/pdf", "Diagnostic Report"),
        ("Media", "image/jpeg", "Computed tomography (CT) of head and neck"),
        ("DocumentReference", "application/pdf", "Laboratory report"),
    ]
    jpeg = imaging.attachments[1].data()
    assert jpeg is not None and jpeg.startswith(b"\xff\xd8") and len(jpeg) == imaging.attachments[1].size


def test_discharge_summary_immunization_and_health_document_6_5_0() -> None:
    discharge = read(example_650("DischargeSummary-example-04"))
    assert [(p.name, p.code, p.date) for p in discharge.procedures] == [
        ("Placement of stent in coronary artery", "36969009", dt.date(2019, 5, 12)),
        ("Coronary artery bypass grafting", "232717009", dt.date(2020, 7, 5)),
    ]
    assert [c.code for c in discharge.conditions] == ["440700005", "22298006"]
    assert [(m.name, m.dosage) for m in discharge.medications] == [
        ("Nitroglycerin 5 mg buccal tablet", "One tablet at once")
    ]
    assert len(discharge.observations) == 3
    (shot,) = read(example_650("ImmunizationRecord-example-07")).immunizations
    assert (shot.name, shot.code, shot.status, shot.date) == (
        "COVID-19 antigen vaccine",
        "1119305005",
        "completed",
        dt.date(2021, 2, 21),
    )
    (document,) = read(example_650("HealthDocumentRecord-example-01")).attachments
    assert (document.source, document.content_type, document.title) == (
        "DocumentReference",
        "application/pdf",
        "Laboratory report",
    )
    pdf = document.data()
    assert pdf is not None and pdf.startswith(b"%PDF-") and len(pdf) == document.size


def test_wellness_6_5_0() -> None:
    record = read(example_650("WellnessRecord-example-01"))
    assert len(record.observations) == 19
    by_code = {o.code: o for o in record.observations}
    assert (by_code["8867-4"].name, by_code["8867-4"].value, by_code["8867-4"].unit) == (
        "Heart rate",
        44,
        "beats/minute",
    )
    assert (by_code["61008-9"].value, by_code["61008-9"].unit) == (36.5, "Cel")


def test_invoice_6_5_0_line_items() -> None:
    """Each line: the ChargeItem's product (a Medication), its quantity, and the line's base price."""
    record = read(example_650("InvoiceRecord-example-01"))
    assert [(i.sequence, i.name, i.code, i.quantity, i.unit, i.price, i.currency) for i in record.invoice_lines] == [
        (1, "Paracetamol 1 g oral tablet", "1172863005", 1, "Tablet", 80, "INR"),
        (2, "Sulfalene 2 g oral tablet", "324409009", 10, "Tablet", 120, "INR"),
        (3, "Aspirin 650 mg gastro-resistant oral tablet", "765676008", 15, "Tablet", 30, "INR"),
        (4, "Carbomer-980 2 mg/g eye gel", "330814003", 1, "Eye Gel", 350, "INR"),
    ]
    assert repr(record).endswith("attachments=0, invoice_lines=4)")
    assert repr(record.invoice_lines[0]) == "InvoiceLine()"


def test_invoice_lines_without_a_charge_item_or_a_base_price() -> None:
    invoice = {
        "resourceType": "Invoice",
        "lineItem": [
            {"sequence": 1, "chargeItemCodeableConcept": {"text": "Consultation"}},
            {"sequence": "x", "chargeItemReference": {"reference": "ChargeItem/none"}, "priceComponent": [{}]},
            {
                "chargeItemReference": {"reference": "urn:uuid:00000001-0000-0000-0000-000000000000"},
                "priceComponent": [
                    {"type": "tax", "amount": {"value": 5}},
                    {"type": "base", "amount": {"value": "9.5"}},
                ],
            },
            "not a line",
        ],
    }
    charge = {"resourceType": "ChargeItem", "productCodeableConcept": {"coding": [{"code": "P1"}]}, "quantity": 3}
    record = read(bundle(invoice, charge))
    assert [(i.sequence, i.name, i.code, i.quantity, i.price) for i in record.invoice_lines] == [
        (1, "Consultation", None, None, None),
        (None, None, None, None, None),
        (None, "P1", "P1", None, 9.5),
    ]
