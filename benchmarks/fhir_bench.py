"""validate() of a 40-resource OP consultation and a 30-observation lab report, beside the oracle's parse.

One run, one core (pinned): µs per bundle, median of N rounds, for ``health_async.fhir.validate`` (from bytes) and
for ``fhir.resources`` (R4B models, the tests' oracle) parsing the same bytes; the ratio is validate / parse.
Target (issue 37): validate at most half the oracle's parse time.

The two bundles are made here from the guide's published examples (``tests/data/fhir/examples``), replicated to
size: the OP consultation's clinical resources copied (new full URLs, referenced from their sections) up to 40
entries; the lab report's Observation copied up to 30 results. The examples' base64 PDF attachments are dropped
(each ``attachment.data`` replaced by 8 characters) so the figures measure structure, not one 400 KB string.

Then the largest of the guide's 6.5.0 examples (``tests/data/fhir/examples-6.5.0``), as published (attachments
and all): validate against the oracle's parse, which is where the profile rules generated from the guide's packages
(issue 43) show; target: no slower than before them (about 0.30 of the parse).

Then the builders (``health_async.fhir.op_consult`` and ``lab_report``): µs per bundle to build a 40-resource OP
consultation and a 30-observation lab report from typed inputs, to build plus ``bundle_bytes``, and to build plus
validate (of the built dict). Target (issue 37): build plus validate of the lab report within 1 ms.

    python benchmarks/fhir_bench.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import pin

from health_async import fhir
from health_async.fhir import validate

EXAMPLES = Path(__file__).resolve().parent.parent / "tests" / "data" / "fhir" / "examples"
EXAMPLES_650 = EXAMPLES.parent / "examples-6.5.0"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text(encoding="utf-8"))
    for entry in data["entry"]:
        res = entry["resource"]
        for content in res.get("content", ()):
            content["attachment"]["data"] = "SGVsbG8="  # the guide's DocumentReference needs data (6.5.0)
        for form in res.get("presentedForm", ()):
            form["data"] = "SGVsbG8="
        if res["resourceType"] == "Binary":
            res["data"] = "SGVsbG8="
    return data


def op_consultation(size: int = 40) -> bytes:
    data = _load("Bundle-OPConsultNote-example-05.json")
    comp = data["entry"][0]["resource"]
    sections = {e["reference"]: s for s in comp["section"] for e in s.get("entry", ())}
    clinical = [e for e in data["entry"] if e["fullUrl"] in sections]
    n = 0
    while len(data["entry"]) < size:
        src = clinical[n % len(clinical)]
        new = copy.deepcopy(src)
        new["fullUrl"] = f"urn:uuid:00000000-0000-4000-8000-{n:012d}"
        new["resource"]["id"] = f"copy-{n}"
        data["entry"].append(new)
        sections[src["fullUrl"]]["entry"].append({"reference": new["fullUrl"]})
        n += 1
    return json.dumps(data).encode()


def lab_report(observations: int = 30) -> bytes:
    data = _load("Bundle-DiagnosticReport-Lab-example-03.json")
    report = next(e["resource"] for e in data["entry"] if e["resource"]["resourceType"] == "DiagnosticReport")
    obs = [e for e in data["entry"] if e["resource"]["resourceType"] == "Observation"]
    n = 0
    while sum(e["resource"]["resourceType"] == "Observation" for e in data["entry"]) < observations:
        new = copy.deepcopy(obs[n % len(obs)])
        new["fullUrl"] = f"urn:uuid:00000000-0000-4000-9000-{n:012d}"
        new["resource"]["id"] = f"obs-{n}"
        data["entry"].append(new)
        report["result"].append({"reference": new["fullUrl"]})
        n += 1
    return json.dumps(data).encode()


def _median_us(fn: Any, arg: bytes, rounds: int, inner: int) -> float:
    fn(arg)
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(inner):
            fn(arg)
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=5)
    args = parser.parse_args()
    pin(0)
    from fhir.resources.R4B.bundle import Bundle

    print(f"{'bundle':<34}{'entries':>8}{'validate µs':>13}{'oracle µs':>11}{'ratio':>7}")
    largest = max(EXAMPLES_650.glob("*.json"), key=lambda path: path.stat().st_size)
    for label, raw in (
        ("OP consultation (40 resources)", op_consultation()),
        ("lab report (30 observations)", lab_report()),
        (f"6.5.0 {largest.name.split('-')[1]} ({largest.stat().st_size // 1000} kB)", largest.read_bytes()),
    ):
        report = validate(raw)
        assert report.ok, report.errors
        Bundle.model_validate_json(raw)
        ours = _median_us(validate, raw, args.rounds, args.inner)
        theirs = _median_us(Bundle.model_validate_json, raw, args.rounds, args.inner)
        print(f"{label:<34}{len(json.loads(raw)['entry']):>8}{ours:>13.0f}{theirs:>11.0f}{ours / theirs:>7.2f}")
    build_lines(args.rounds, args.inner)


def _build_inputs() -> tuple[Any, Any]:
    import datetime as dt

    when = dt.datetime(2024, 7, 10, 15, 44, 1, tzinfo=fhir.INDIA)
    who: dict[str, Any] = {
        "patient": fhir.Patient("A. Patient", gender="female", abha_number="91-0000-0000-0000"),
        "practitioner": fhir.Practitioner("Dr. A", license_number="1"),
        "date": when,
    }
    conditions = [
        fhir.Condition(f"complaint {i}", code=fhir.Coding.snomed("297142003", "Foot swelling")) for i in range(10)
    ]
    meds = [fhir.Medication(f"medicine {i}", dosage="1 tablet twice a day") for i in range(10)]

    def op() -> dict[str, Any]:  # 5 + 35 = 40 resources
        return fhir.op_consult(
            care_context_id="bench-op",
            organization=fhir.Organization("H", facility_id="IN0000"),
            **who,
            chief_complaints=conditions,
            allergies=[fhir.Allergy("dust")],
            medical_history=conditions[:5],
            investigation_advice=[fhir.Investigation(f"test {i}") for i in range(5)],
            medications=meds,
            procedures=[fhir.Procedure("procedure", date=when)] * 3,
            follow_up=[fhir.FollowUp(when)],
        )

    observations = [
        fhir.Observation(
            f"test {i}",
            value=10.5 + i,
            unit="mg/dL",
            low=5,
            high=50,
            interpretation="normal",
            code=fhir.Coding.loinc("718-7", "Hemoglobin [Mass/volume] in Blood"),
        )
        for i in range(30)
    ]

    def lab() -> dict[str, Any]:
        return fhir.lab_report(
            care_context_id="bench-lab",
            organization=fhir.Organization("L", facility_id="IN0001"),
            **who,
            observations=observations,
            conclusion="Within range",
        )

    return op, lab


def _median_call_us(fn: Any, rounds: int, inner: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times) * 1e6


def build_lines(rounds: int, inner: int) -> None:
    """The builders' lines: build, build + bytes, build + validate (µs per bundle)."""
    op, lab = _build_inputs()
    print(f"\n{'built bundle':<34}{'entries':>8}{'build µs':>10}{'+bytes µs':>11}{'+validate µs':>14}")
    for label, make in (("OP consultation (40 resources)", op), ("lab report (30 observations)", lab)):
        bundle = make()
        report = validate(bundle)
        assert report.ok, report.errors  # the builders write what the guide's profile rules require
        build = _median_call_us(make, rounds, inner)
        to_bytes = _median_call_us(lambda: fhir.bundle_bytes(make()), rounds, inner)  # noqa: B023
        checked = _median_call_us(lambda: validate(make()), rounds, inner)  # noqa: B023
        print(f"{label:<34}{len(bundle['entry']):>8}{build:>10.0f}{to_bytes:>11.0f}{checked:>14.0f}")


if __name__ == "__main__":
    main()
