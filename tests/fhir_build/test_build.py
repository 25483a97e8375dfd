"""The builders (``health_async.fhir.op_consult``, ``lab_report``, ...): what they write is what ABDM expects.

Every built bundle is checked three ways: byte for byte against its golden file (``tests/data/fhir_build``),
by the library's own :func:`~health_async.fhir.validate` (no error), and by an independent FHIR implementation,
``fhir.resources`` 8.x (R4B models), as the oracle.

Regenerate the golden files after an intended change, then read the diff:

    HEALTH_ASYNC_REGENERATE_FHIR_BUILD=1 python -m pytest -q tests/fhir_build/
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from health_async import fhir
from health_async._wire import structure
from health_async.errors import InvalidRequest
from health_async.models import ProcessingResult
from health_async.models.records._documents import SmartReport
from health_async.testing._data import FakeData
from health_async.testing.records._results import completed_result

from . import _inputs
from ._inputs import DOCTOR, HOSPITAL, LAB, PATIENT, PDF, RECORDS, WHEN

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "fhir_build"
REGENERATE = os.environ.get("HEALTH_ASYNC_REGENERATE_FHIR_BUILD") == "1"
RECORD_TYPE = {
    "op_consult": fhir.RecordType.OP_CONSULT,
    "prescription": fhir.RecordType.PRESCRIPTION,
    "lab_report": fhir.RecordType.DIAGNOSTIC_REPORT,
    "imaging_report": fhir.RecordType.DIAGNOSTIC_REPORT,
    "discharge_summary": fhir.RecordType.DISCHARGE_SUMMARY,
    "immunization_record": fhir.RecordType.IMMUNIZATION,
    "wellness_record": fhir.RecordType.WELLNESS,
    "health_document": fhir.RecordType.HEALTH_DOCUMENT,
    "invoice_record": fhir.RecordType.INVOICE,
}
fhir_bundle = pytest.importorskip("fhir.resources.R4B.bundle")

#: What the guide's 6.5.0 profiles fix (StructureDefinition-<record>.json of ``ndhm.in`` 6.5.0, read by hand): the
#: Composition type's SNOMED CT code (None: text only) and the codes of the sections each profile names.
TYPE_650 = {
    fhir.RecordType.OP_CONSULT: "371530004",
    fhir.RecordType.PRESCRIPTION: "440545006",
    fhir.RecordType.DIAGNOSTIC_REPORT: "721981007",  # not fixed; the guide's examples' code
    fhir.RecordType.DISCHARGE_SUMMARY: "373942005",
    fhir.RecordType.IMMUNIZATION: "41000179103",
    fhir.RecordType.WELLNESS: None,
    fhir.RecordType.HEALTH_DOCUMENT: "419891008",
    fhir.RecordType.INVOICE: None,
}
SECTIONS_650 = {
    fhir.RecordType.OP_CONSULT: {
        "422843007", "425044008", "722446000", "371529009", "422432008", "721963009", "721912009", "390906007",
        "371525003", "306206005", "404684003", "371530004",
    },
    fhir.RecordType.DISCHARGE_SUMMARY: {
        "422843007", "425044008", "722446000", "1003642006", "422432008", "721981007", "1003606003", "1003640003",
        "734163000", "373942005",
    },
    fhir.RecordType.PRESCRIPTION: {"440545006"},
    fhir.RecordType.DIAGNOSTIC_REPORT: {"721981007"},  # required, not fixed
    fhir.RecordType.IMMUNIZATION: {"41000179103"},
    fhir.RecordType.HEALTH_DOCUMENT: {"419891008"},
    fhir.RecordType.WELLNESS: set(),
    fhir.RecordType.INVOICE: set(),
}  # fmt: skip


def _golden_bytes(bundle: dict[str, Any]) -> bytes:
    # Indented for a readable diff; the bytes a builder sends are fhir.bundle_bytes (compared below too).
    return json.dumps(bundle, indent=1, ensure_ascii=False).encode() + b"\n"


@pytest.mark.parametrize("name", list(RECORDS))
def test_golden_bundle_byte_for_byte(name: str) -> None:
    path = GOLDEN / f"{name}.json"
    built = _golden_bytes(RECORDS[name]())
    if REGENERATE:
        path.write_bytes(built)
    assert path.exists(), f"no golden file: run with HEALTH_ASYNC_REGENERATE_FHIR_BUILD=1 ({path.name})"
    assert built == path.read_bytes()


@pytest.mark.parametrize("name", list(RECORDS))
def test_every_built_bundle_validates_and_the_oracle_parses_it(name: str) -> None:
    bundle = RECORDS[name]()
    report = fhir.validate(fhir.bundle_bytes(bundle))
    assert report.ok, report.errors
    assert report.record_type is RECORD_TYPE[name]
    # The warnings allowed: the OP consultation's 6.5.0 sections (Referral, and FollowUp's 6.5.0 code 390906007)
    # that rules read from an older package do not name (open slicing); none once the rules are 6.5.0's.
    # And Invoice/ChargeItem/Media, while the R4 structure tables do not describe them (structure.unchecked-type).
    unchecked = [p for p in report.warnings if p.rule == "structure.unchecked-type"]
    assert all(p.message.split()[2] in ("Invoice", "ChargeItem", "Media") for p in unchecked)
    warnings = [p for p in report.warnings if p not in unchecked]
    assert all(p.rule == "OPConsultRecord.section" for p in warnings)
    assert len(warnings) <= (2 if name == "op_consult" else 0)
    fhir_bundle.Bundle.model_validate(bundle)
    fhir_bundle.Bundle.model_validate_json(fhir.bundle_bytes(bundle))


def _references(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        out = [obj["reference"]] if isinstance(obj.get("reference"), str) else []
        return out + [r for v in obj.values() for r in _references(v)]
    if isinstance(obj, list):
        return [r for v in obj for r in _references(v)]
    return []


@pytest.mark.parametrize("name", list(RECORDS))
def test_the_document_as_it_must_be_sent(name: str) -> None:
    bundle = RECORDS[name]()
    record = RECORD_TYPE[name]
    assert bundle["type"] == "document"
    assert bundle["meta"]["profile"] == [fhir.NRCES_PROFILE_BASE + "DocumentBundle"]
    assert bundle["timestamp"].endswith("+05:30") and bundle["identifier"]["value"].startswith("urn:uuid:")
    entries = bundle["entry"]
    comp = entries[0]["resource"]
    assert comp["resourceType"] == "Composition" and comp["meta"]["profile"] == [record.profile]
    assert comp["identifier"]["value"] == entries[0]["fullUrl"]
    urls = [e["fullUrl"] for e in entries]
    assert len(set(urls)) == len(urls)
    for entry in entries:
        res = entry["resource"]
        assert entry["fullUrl"] == "urn:uuid:" + str(uuid.UUID(res["id"]))
        assert res["meta"]["profile"][0].startswith(fhir.NRCES_PROFILE_BASE), res["resourceType"]
    assert set(_references(bundle)) <= set(urls)
    fixed = TYPE_650[record]
    codes = [c["code"] for c in comp["type"].get("coding", [])]
    assert codes == ([fixed] if fixed else [])
    listed = SECTIONS_650[record]
    for section in comp["section"]:
        assert section["entry"]
        for coding in section.get("code", {}).get("coding", []):
            assert coding["code"] in listed


def test_the_op_consult_can_have_every_section_the_guide_names() -> None:
    comp = _inputs.op_consult()["entry"][0]["resource"]
    codes = [s["code"]["coding"][0]["code"] for s in comp["section"]]
    other = "404684003"  # OtherObservations: no input of the builder's fills it
    assert sorted(codes) == sorted(SECTIONS_650[fhir.RecordType.OP_CONSULT] - {other})
    assert codes[-1] == "371530004"  # documents last
    assert comp["encounter"]["reference"].startswith("urn:uuid:")


def test_the_same_input_gives_the_same_bytes_and_ids_follow_namespace_and_care_context() -> None:
    a, b = fhir.bundle_bytes(_inputs.op_consult()), fhir.bundle_bytes(_inputs.op_consult())
    assert a == b
    first = _inputs.lab_report()
    other_ns = fhir.lab_report(
        care_context_id="LAB-2024-0001",
        patient=PATIENT,
        organization=LAB,
        date=WHEN,
        observations=_inputs.lab_observations(),
        conclusion="Raised fasting glucose",
        namespace=uuid.uuid5(uuid.NAMESPACE_URL, "https://hospital.example.org"),
    )
    other_cc = fhir.lab_report(
        care_context_id="LAB-2024-0002",
        patient=PATIENT,
        organization=LAB,
        date=WHEN,
        observations=_inputs.lab_observations(),
        conclusion="Raised fasting glucose",
    )
    ids = {e["resource"]["id"] for e in first["entry"]}
    assert not ids & {e["resource"]["id"] for e in other_ns["entry"]}
    assert not ids & {e["resource"]["id"] for e in other_cc["entry"]}
    patient_id = str(uuid.uuid5(fhir.DEFAULT_NAMESPACE, "LAB-2024-0001/patient/0"))
    assert first["entry"][1]["fullUrl"] == "urn:uuid:" + patient_id


def test_times_are_written_in_india_and_nothing_reads_the_clock() -> None:
    utc = dt.datetime(2024, 7, 10, 10, 14, 1, tzinfo=dt.UTC)
    bundle = fhir.health_document(
        care_context_id="c", patient=PATIENT, organization=HOSPITAL, date=utc, documents=[fhir.Document(PDF)]
    )
    assert bundle["timestamp"] == "2024-07-10T15:44:01+05:30"
    assert bundle["entry"][0]["resource"]["date"] == "2024-07-10T15:44:01+05:30"
    day = fhir.health_document(
        care_context_id="c",
        patient=PATIENT,
        organization=HOSPITAL,
        date=dt.date(2024, 7, 10),
        documents=[fhir.Document(PDF)],
        timestamp=dt.datetime(2024, 7, 11, 9, 0),  # naive: taken as IST
    )
    assert day["timestamp"] == "2024-07-11T09:00:00+05:30"
    assert day["entry"][0]["resource"]["date"] == "2024-07-10"


def _codings(obj: Any) -> list[tuple[str, str]]:
    if isinstance(obj, dict):
        own = [(c["system"], c["code"]) for c in obj.get("coding", []) if isinstance(c, dict)]
        return own + [x for k, v in obj.items() if k != "coding" for x in _codings(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _codings(v)]
    return []


def test_without_a_callers_code_no_clinical_code_is_written() -> None:
    bundle = fhir.op_consult(
        care_context_id="c",
        patient=PATIENT,
        organization=HOSPITAL,
        practitioner=DOCTOR,
        date=WHEN,
        chief_complaints=[fhir.Condition("Headache")],
        allergies=[fhir.Allergy("Dust")],
        medications=[fhir.Medication("Paracetamol 500 mg")],
        investigation_advice=[fhir.Investigation("CBC")],
        physical_examination=[fhir.Observation("Pulse", value=80, unit="/min", interpretation="high")],
    )
    guide = {TYPE_650[fhir.RecordType.OP_CONSULT], *SECTIONS_650[fhir.RecordType.OP_CONSULT]}
    for system, code in _codings(bundle):
        if system == "http://snomed.info/sct":
            assert code in guide  # only the guide's document and section codes
        elif system.startswith("https://nrces.in/ndhm/fhir/r4/CodeSystem/"):
            assert code == "ABHA"  # the guide's identifier type (Patient.identifier.type 1..1 in 6.5.0)
        else:
            assert system.startswith("http://terminology.hl7.org/CodeSystem/"), system  # HL7's structural codes
    obs = next(e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "Observation")
    assert obs["code"] == {"text": "Pulse"} and obs["valueQuantity"] == {"value": 80, "unit": "/min"}


def test_read_gives_back_what_was_built() -> None:
    record = fhir.read(_inputs.lab_report())
    assert record.record_type is fhir.RecordType.DIAGNOSTIC_REPORT
    hb, glucose, hbsag = record.observations
    assert (hb.name, hb.code, hb.value, hb.unit, hb.low, hb.high) == ("Haemoglobin", "718-7", 13.2, "g/dL", 12, 16)
    assert glucose.interpretation == "high" and hbsag.value == "Non-reactive"
    assert len(record.attachments) == 1


SECRETS = ["Asha", "91-1111", "asha.sharma", "MRN-000123", "9800000000", "1985", "Haemoglobin", "13.2", "718-7", "Rao"]


def test_no_repr_shows_a_persons_data_or_a_value() -> None:
    shown = " ".join(
        repr(x)
        for x in (
            PATIENT,
            DOCTOR,
            *_inputs.lab_observations(),
            fhir.Coding.loinc("718-7", "Hemoglobin [Mass/volume] in Blood"),
            fhir.Condition("Haemoglobin low", code=fhir.Coding.snomed("718-7", "Hemoglobin")),
            fhir.Medication("Haemoglobin tonic", dosage="13.2 ml"),
            fhir.Document(b"Asha Sharma 13.2", title="Haemoglobin"),
            fhir.Immunization("Haemoglobin", date=dt.date(1985, 1, 1), lot_number="Asha"),
        )
    )
    for secret in SECRETS:
        assert secret not in shown


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: fhir.Patient("Asha Sharma"), ValueError, "Patient needs an identifier"),
        (lambda: fhir.Patient("Asha Sharma", abha_number="91-1111", gender="f"), ValueError, "Patient.gender"),
        (lambda: fhir.Observation("Haemoglobin", value=True), TypeError, "Observation.value"),
        (lambda: fhir.Observation("Haemoglobin", value=float("nan")), ValueError, "Observation.value"),
        (lambda: fhir.Immunization("Asha", date=dt.date(2024, 1, 1), dose_number=0), ValueError, "dose_number"),
        (lambda: fhir.Encounter(kind="Asha"), ValueError, "Encounter.kind"),
        (
            lambda: fhir.lab_report(care_context_id="c", patient=PATIENT, organization=LAB, date=WHEN, observations=[]),
            ValueError,
            "observations or a file",
        ),
        (
            lambda: fhir.op_consult(care_context_id="c", patient=PATIENT, organization=HOSPITAL, date=WHEN),
            ValueError,
            "at least one entry",
        ),
        (
            lambda: fhir.prescription(
                care_context_id="c",
                patient=PATIENT,
                organization=HOSPITAL,
                date=WHEN,
                medications=["Asha"],  # type: ignore[list-item]
            ),
            TypeError,
            "medications",
        ),
    ],
)
def test_wrong_inputs_are_refused_naming_the_field_not_the_value(make: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        make()
    assert "Asha" not in str(caught.value) and "91-1111" not in str(caught.value)


# ---------------------------------------------------------------------------------------- from_processing_result


def _fake_result(document_id: str = "doc-7") -> ProcessingResult:
    body = completed_result({"document_date_epoch": 1_720_604_641}, document_id)
    raw = json.loads(json.dumps(body))  # as it comes off the wire
    return structure(raw, ProcessingResult, document_id=document_id)


#: LOINC's displays of the fake result's codes (its long common names), all but 2160-0's.
LOINC_DISPLAYS = {
    "1558-6": "Fasting glucose [Mass/volume] in Serum or Plasma",
    "4548-4": "Hemoglobin A1c/Hemoglobin.total in Blood",
    "718-7": "Hemoglobin [Mass/volume] in Blood",
}


def test_from_processing_result_makes_a_lab_report_of_the_fakes_result() -> None:
    result = _fake_result()
    bundle = fhir.from_processing_result(
        result,
        care_context_id="doc-7",
        patient=PATIENT,
        organization=LAB,
        conclusion="Raised fasting glucose",
        loinc_displays=LOINC_DISPLAYS,
        practitioner=DOCTOR,
        original_file=PDF,
    )
    assert fhir.validate(bundle).ok
    fhir_bundle.Bundle.model_validate(bundle)
    obs = [e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "Observation"]
    assert len(obs) == len(result.tests) >= 3
    assert {t.loinc_id for t in result.tests} > set(LOINC_DISPLAYS)
    for o, test in zip(obs, result.tests, strict=True):
        assert o["code"]["text"] == test.name
        assert test.loinc_id is not None
        if test.loinc_id in LOINC_DISPLAYS:  # the code with LOINC's display, as the caller gave it
            coding = {"system": "http://loinc.org", "code": test.loinc_id, "display": LOINC_DISPLAYS[test.loinc_id]}
            assert o["code"]["coding"] == [coding]
        else:  # no display known: the test's name as text, no coding (one without a display would not validate)
            assert "coding" not in o["code"]
        assert o["valueQuantity"] == {"value": test.number, "unit": test.unit_processed}
        assert test.range is not None
        assert o["referenceRange"] == [
            {
                "low": {"value": test.range.low, "unit": test.unit_processed},
                "high": {"value": test.range.high, "unit": test.unit_processed},
                "text": test.display_range,
            }
        ]
        assert "interpretation" not in o  # the result carries no flag: none is computed
    report = next(e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "DiagnosticReport")
    assert report["conclusion"] == "Raised fasting glucose"
    assert report["presentedForm"][0]["contentType"] == "application/pdf"
    assert report["effectiveDateTime"] == "2024-07-10T15:14:01+05:30"  # the result's DocumentDate, in India
    again = fhir.from_processing_result(
        _fake_result(),
        care_context_id="doc-7",
        patient=PATIENT,
        organization=LAB,
        conclusion="Raised fasting glucose",
        loinc_displays=LOINC_DISPLAYS,
        practitioner=DOCTOR,
        original_file=PDF,
    )
    assert fhir.bundle_bytes(again) == fhir.bundle_bytes(bundle)


def test_from_a_smart_report_only_verified_items_with_their_flags() -> None:
    data = FakeData.generate(seed=3, users=1, documents_per_user=20)
    reports = [
        structure(json.loads(raw)["smart_report"], SmartReport)
        for docs in data.documents.values()
        for raw in docs.values()
    ]
    smart = next(r for r in reports if r.verified and r.unverified)
    assert smart.verified and smart.unverified
    bundle = fhir.from_processing_result(
        smart, care_context_id="c", patient=PATIENT, organization=LAB, conclusion="Seen", date=WHEN
    )
    assert fhir.validate(bundle).ok
    obs = [e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "Observation"]
    assert [o["code"]["text"] for o in obs] == [i.name for i in smart.verified]
    for o, item in zip(obs, smart.verified, strict=True):
        assert o["interpretation"][0]["text"] == item.flag.label
    everything = fhir.from_processing_result(
        smart,
        care_context_id="c",
        patient=PATIENT,
        organization=LAB,
        conclusion="Seen",
        date=WHEN,
        include_unverified=True,
    )
    assert sum(e["resource"]["resourceType"] == "Observation" for e in everything["entry"]) == len(smart.items)


def test_from_processing_result_without_a_date_or_tests_says_so() -> None:
    result = structure({"status": "queued"}, ProcessingResult, document_id="d")
    with pytest.raises(ValueError, match="no date"):
        fhir.from_processing_result(result, care_context_id="c", patient=PATIENT, organization=LAB)
    with pytest.raises(ValueError, match="no test"):
        fhir.from_processing_result(result, care_context_id="c", patient=PATIENT, organization=LAB, date=WHEN)


def test_a_large_lab_report_and_op_consult_stay_valid() -> None:
    rng = random.Random(1)
    observations = [
        fhir.Observation(f"Test {i}", value=round(rng.uniform(0, 100), 2), unit="mg/dL", low=10, high=90)
        for i in range(30)
    ]
    bundle = fhir.lab_report(
        care_context_id="big",
        patient=PATIENT,
        organization=LAB,
        date=WHEN,
        observations=observations,
        conclusion="Seen",
    )
    assert fhir.validate(bundle).ok
    assert len(_inputs.op_consult(n_extra=22)["entry"]) == 40
    assert fhir.validate(_inputs.op_consult(n_extra=23)).ok


# ---------------------------------------------------------------------------------------- mistakes refused (issue 43)


def _lab(observations: Any) -> dict[str, Any]:
    return fhir.lab_report(
        care_context_id="c", patient=PATIENT, organization=LAB, date=WHEN, observations=observations, conclusion="Seen"
    )


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: fhir.Observation("Haemoglobin", unit="g/dL"), "Observation.unit"),
        (lambda: fhir.Observation("Haemoglobin", value=""), "Observation.value"),
        (lambda: fhir.Observation("Haemoglobin", value="  "), "Observation.value"),
        (lambda: fhir.Observation("Haemoglobin", value=13.2, unit="g/dL", low=16, high=12), "Observation.low"),
        (lambda: fhir.Observation("Haemoglobin", data_absent_reason="Asha"), "Observation.data_absent_reason"),
        (lambda: fhir.Observation("Haemoglobin", value=1, data_absent_reason="error"), "data_absent_reason"),
        (lambda: _lab(fhir.Observation("Haemoglobin", value=13.2)), "observations"),
        (lambda: _lab(13.2), "observations"),
        (lambda: fhir.Patient("Asha Sharma", abha_number="91-1111-2222"), "Patient.abha_number"),
        (lambda: fhir.Patient("Asha Sharma", abha_number="91-1111-2222-333x"), "Patient.abha_number"),
        (lambda: fhir.Patient("Asha Sharma", abha_number="asha@abdm"), "Patient.abha_number"),
    ],
)
def test_mistakes_are_refused_before_a_bundle_exists_naming_the_field(make: Any, field: str) -> None:
    with pytest.raises(InvalidRequest, match=field) as caught:
        make()
    text = str(caught.value)
    assert "Asha" not in text and "13.2" not in text and "91-1111" not in text and "g/dL" not in text


HB = [fhir.Observation("Haemoglobin", value=13.2, unit="g/dL")]
SCAN = fhir.Document(_inputs.JPEG, content_type="image/jpeg")
BASE: dict[str, Any] = {"patient": PATIENT, "date": WHEN, "care_context_id": "c"}


@pytest.mark.parametrize(
    ("make", "field"),
    [
        # what the guide's profiles require and only the caller knows (issue 43)
        (lambda: fhir.lab_report(**BASE, organization=LAB, observations=HB), "conclusion is required"),
        (lambda: fhir.lab_report(**BASE, organization=LAB, observations=HB, conclusion=" "), "conclusion"),
        (
            lambda: fhir.imaging_report(**BASE, organization=LAB, file=fhir.Document(PDF), images=[SCAN]),
            "text is required",
        ),
        (
            lambda: fhir.imaging_report(**BASE, organization=LAB, file=fhir.Document(PDF), text="No lesion"),
            "images is required",
        ),
        (
            lambda: fhir.discharge_summary(**BASE, organization=HOSPITAL, investigations=HB),
            "investigations_conclusion is required",
        ),
        (
            lambda: fhir.from_processing_result(_fake_result(), care_context_id="c", patient=PATIENT, organization=LAB),
            "conclusion is required",
        ),
        # a code without its display (required by the guide's profiles on every coding)
        (
            lambda: fhir.Observation("Haemoglobin", value=13.2, code=fhir.Coding.loinc("718-7")),
            "Observation.code.display",
        ),
        (lambda: fhir.Medication("Telmisartan", code=fhir.Coding.snomed("134463001")), "Medication.code.display"),
        (lambda: fhir.Investigation("Lipids", code=fhir.Coding.snomed("252150008")), "Investigation.code.display"),
        (
            lambda: fhir.Immunization("Hep B", date=WHEN, code=fhir.Coding.snomed("871822003")),
            "Immunization.code.display",
        ),
        (
            lambda: fhir.lab_report(
                **BASE, organization=LAB, observations=HB, conclusion="Seen", code=fhir.Coding.loinc("24323-8")
            ),
            "code.display",
        ),
    ],
)
def test_what_the_guide_requires_and_only_the_caller_knows_is_required(make: Any, field: str) -> None:
    with pytest.raises(InvalidRequest, match=field) as caught:
        make()
    assert "718-7" not in str(caught.value) and "Asha" not in str(caught.value)


def test_an_imaging_reports_images_are_media_the_report_links() -> None:
    bundle = _inputs.imaging_report()
    assert fhir.validate(bundle).ok
    report = next(e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "DiagnosticReport")
    [media] = [e for e in bundle["entry"] if e["resource"]["resourceType"] == "Media"]
    assert report["media"] == [{"link": {"reference": media["fullUrl"]}}]
    assert report["conclusion"] == "No active lung lesion. Heart size normal."
    assert media["resource"]["content"]["contentType"] == "image/jpeg"
    assert media["resource"]["subject"] == report["subject"]


def test_one_observation_where_a_list_is_expected_is_a_type_error_too() -> None:
    with pytest.raises(TypeError, match=r"observations must be a list of fhir.Observation, not one"):
        _lab(fhir.Observation("Haemoglobin", value=13.2))


def test_a_unit_without_a_value_is_written_with_its_data_absent_reason() -> None:
    obs = fhir.Observation("Haemoglobin", unit="g/dL", low=12, high=16, data_absent_reason="not-performed")
    bundle = _lab([obs])
    assert fhir.validate(bundle).ok
    res = next(e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "Observation")
    assert "valueQuantity" not in res and "valueString" not in res
    assert res["dataAbsentReason"] == {
        "coding": [
            {
                "system": "http://terminology.hl7.org/CodeSystem/data-absent-reason",
                "code": "not-performed",
                "display": "Not Performed",
            }
        ]
    }
    fhir_bundle.Bundle.model_validate(bundle)


def test_an_abha_number_is_written_in_the_guides_hyphenated_form() -> None:
    patient = fhir.Patient("Asha Sharma", abha_number="91 1111 2222 3333")
    assert patient.abha_number == "91-1111-2222-3333"
    assert fhir.Patient("Asha Sharma", abha_number="91111122223333").abha_number == "91-1111-2222-3333"


@pytest.mark.parametrize(("given", "code"), [("H", "H"), ("l", "L"), ("N", "N"), ("high", "H"), ("HH", "HH")])
def test_interpretation_codes_are_coded_as_their_names_are(given: str, code: str) -> None:
    bundle = _lab([fhir.Observation("Fasting Blood Glucose", value=126, unit="mg/dL", interpretation=given)])
    res = next(e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == "Observation")
    (interpretation,) = res["interpretation"]
    assert interpretation["coding"][0]["system"] == "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation"
    assert interpretation["coding"][0]["code"] == code and interpretation["text"] == given


# ---------------------------------------------------------------------------------------- invoice (issue 43)


def test_the_invoice_has_its_line_items_charge_items_and_price_components() -> None:
    bundle = _inputs.invoice_record()
    comp = bundle["entry"][0]["resource"]
    assert comp["type"] == {"text": "Invoice Record"}  # fixed by InvoiceRecord 6.5.0
    ((entry,),) = [s["entry"] for s in comp["section"]]
    assert entry["type"] == "Invoice"
    resources = {e["fullUrl"]: e["resource"] for e in bundle["entry"]}
    invoice = resources[entry["reference"]]
    assert invoice["totalNet"] == {"value": 542, "currency": "INR"} and invoice["identifier"] == [{"value": "CA/5842"}]
    first, second = invoice["lineItem"]
    charge = resources[first["chargeItemReference"]["reference"]]
    assert charge["resourceType"] == "ChargeItem" and charge["quantity"] == {"value": 10, "unit": "Tablet"}
    assert charge["code"]["coding"][0]["code"] == "05"  # ndhm-billing-codes: Medicines
    assert charge["productCodeableConcept"]["coding"][0]["code"] == "1172863005"
    assert [(p["type"], p["code"]["coding"][0]["code"]) for p in first["priceComponent"]] == [
        ("informational", "00"),
        ("base", "01"),
        ("tax", "03"),
        ("tax", "04"),
    ]
    assert resources[second["chargeItemReference"]["reference"]]["productCodeableConcept"] == {"text": "Consultation"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"invoice_type": "Asha"}, "invoice_type"),
        ({"invoice_number": " "}, "invoice_number"),
        ({"items": []}, "items"),
        ({"items": fhir.InvoiceItem("Asha", category="others", prices=[fhir.PriceComponent("rate", 1)])}, "items"),
        ({"total_net": -1}, "total_net"),
        ({"total_gross": float("nan")}, "total_gross"),
        ({"currency": "rupees"}, "currency"),
    ],
)
def test_invoice_mistakes_are_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    inputs: dict[str, Any] = {
        "care_context_id": "c",
        "patient": PATIENT,
        "organization": HOSPITAL,
        "date": WHEN,
        "invoice_number": "CA/1",
        "invoice_type": "pharmacy",
        "items": [fhir.InvoiceItem("Tablet", category="medicines", prices=[fhir.PriceComponent("rate", 1)])],
        "total_net": 1,
        "total_gross": 1,
    }
    with pytest.raises(InvalidRequest, match=field) as caught:
        fhir.invoice_record(**{**inputs, **change})
    assert "Asha" not in str(caught.value)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: fhir.PriceComponent("gst", 1), "PriceComponent.kind"),
        (lambda: fhir.PriceComponent("rate", True), "PriceComponent.amount"),
        (lambda: fhir.InvoiceItem("Asha", category="food", prices=[fhir.PriceComponent("rate", 1)]), "category"),
        (lambda: fhir.InvoiceItem("Asha", category="others", prices=[]), "InvoiceItem.prices"),
        (lambda: fhir.InvoiceItem("Asha", category="others", prices=fhir.PriceComponent("rate", 1)), "prices"),
        (
            lambda: fhir.InvoiceItem("Asha", category="others", quantity=0, prices=[fhir.PriceComponent("rate", 1)]),
            "InvoiceItem.quantity",
        ),
    ],
)
def test_invoice_inputs_refuse_mistakes_naming_the_field(make: Any, field: str) -> None:
    with pytest.raises(InvalidRequest, match=field) as caught:
        make()
    assert "Asha" not in str(caught.value)


def test_a_record_can_name_the_invoice_builder() -> None:
    record = fhir.Record(fhir.invoice_record, **_inputs.invoice_inputs())
    assert repr(record) == "Record(invoice_record)"
    assert record.build("INV-2024-0001") == _inputs.invoice_record()


# ---------------------------------------------------------------------------------------- what the guide's records list


def _resources(bundle: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e["resource"] for e in bundle["entry"] if e["resource"]["resourceType"] == kind]


def test_a_blood_pressure_is_one_observation_with_systolic_and_diastolic_components() -> None:
    bundle = _inputs.wellness_record()
    (bp,) = [o for o in _resources(bundle, "Observation") if o["code"].get("text") == "Blood pressure"]
    assert bp["code"]["coding"][0]["code"] == "85354-9" and "valueQuantity" not in bp
    assert bp["meta"]["profile"][1].endswith("/ObservationVitalSigns")
    assert [(c["code"]["coding"][0]["code"], c["valueQuantity"]) for c in bp["component"]] == [
        ("8480-6", {"value": 120, "unit": "mm[Hg]"}),
        ("8462-4", {"value": 80, "unit": "mm[Hg]"}),
    ]
    assert bp["interpretation"][0]["coding"][0]["code"] == "N"


def test_a_component_has_no_components_nor_date_of_its_own() -> None:
    part = fhir.Observation("Systolic", value=120, unit="mm[Hg]", date=WHEN)
    with pytest.raises(InvalidRequest, match=r"Observation\.components"):
        fhir.Observation("Blood pressure", components=[part])
    with pytest.raises(TypeError, match=r"Observation\.components"):
        fhir.Observation("Blood pressure", components=["Asha"])


def test_the_lab_report_references_its_specimen() -> None:
    bundle = _inputs.lab_report()
    (specimen,) = _resources(bundle, "Specimen")
    (report,) = _resources(bundle, "DiagnosticReport")
    assert report["specimen"] == [{"reference": "urn:uuid:" + specimen["id"]}]
    assert specimen["type"]["coding"][0]["code"] == "119364003"
    assert specimen["receivedTime"] == "2024-07-10T09:15:00+05:30"
    assert specimen["collection"] == {"collectedDateTime": "2024-07-10T08:30:00+05:30"}
    with pytest.raises(InvalidRequest, match=r"Specimen\.code"):
        fhir.Specimen("Serum", code=fhir.Coding.loinc("1-8"), collected=WHEN, received=WHEN)


def test_the_op_consults_medication_history_is_in_its_medications_section() -> None:
    bundle = _inputs.op_consult()
    (statement,) = _resources(bundle, "MedicationStatement")
    assert statement["status"] == "active" and statement["dateAsserted"] == "2024-07-01"
    comp = bundle["entry"][0]["resource"]
    (meds,) = [s for s in comp["section"] if s["code"]["coding"][0]["code"] == "721912009"]
    assert meds["entry"][0]["reference"] == "urn:uuid:" + statement["id"]
    assert [r["resourceType"] for r in (_resources(bundle, "MedicationRequest"))] == ["MedicationRequest"]


def test_the_immunization_record_carries_the_vaccines_due() -> None:
    bundle = _inputs.immunization_record()
    (rec,) = _resources(bundle, "ImmunizationRecommendation")
    (due,) = rec["recommendation"]
    assert due["forecastStatus"]["coding"][0]["code"] == "due" and due["doseNumberPositiveInt"] == 3
    assert due["dateCriterion"] == [
        {"code": {"coding": [{"system": "http://loinc.org", "code": "30980-7", "display": "Date vaccine due"}]},
         "value": "2025-01-10"}
    ]  # fmt: skip
    assert len(due["supportingImmunization"]) == 2
    section = bundle["entry"][0]["resource"]["section"][0]
    assert [e["type"] for e in section["entry"]] == [
        "Immunization",
        "Immunization",
        "ImmunizationRecommendation",
        "DocumentReference",
    ]
