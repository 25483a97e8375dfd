"""``health-async fhir validate | show | from-result``, run in-process (``cli.main``) as tests/cli/test_cli.py does;
``from-result`` against the fake server in a thread, with a stub builder in place of the library's."""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from health_async import cli, fhir
from health_async._cli.fhir import commands as fhir_cli
from health_async.models import ProcessingResult, ProcessingStatus
from health_async.testing import FakeHealthServer
from health_async.testing.records._results import completed_result

from ..conftest import ServerThread

DATA = Path(__file__).parents[1] / "data"
EXAMPLES = DATA / "fhir" / "examples"
LAB = EXAMPLES / "Bundle-DiagnosticReport-Lab-example-03.json"
WELLNESS = DATA / "fhir_read" / "Bundle-WellnessRecord-example-01.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def lab() -> dict[str, Any]:
    return copy.deepcopy(json.loads(LAB.read_text(encoding="utf-8")))


def write(path: Path, bundle: Any) -> str:
    path.write_text(json.dumps(bundle), encoding="utf-8")
    return str(path)


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_help_of_every_fhir_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0 and "fhir" in capsys.readouterr().out
    for command in ("validate", "show", "from-result"):
        with pytest.raises(SystemExit) as info:
            cli.main(["fhir", command, "--help"])
        assert info.value.code == 0
        assert "usage: health-async fhir " + command in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ validate


def test_validate_the_published_examples_exit_0_with_a_summary_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in EXAMPLES.glob("*.json"))
    code, out, err = run(capsys, "fhir", "validate", *files)
    assert code == 0
    assert out == ""  # no problem, no line: the examples have neither errors nor warnings
    assert err == "7 files, 7 valid\n"


def test_validate_text_is_one_line_per_problem_and_exit_1_on_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = lab()
    broken["type"] = "collection"
    bad = write(tmp_path / "bad.json", broken)
    code, out, err = run(capsys, "fhir", "validate", str(LAB), bad)
    assert code == 1
    assert out == f"{bad}: error Bundle.type document.type a document Bundle has type 'document'\n"
    assert err == "2 files, 1 valid\n"


def test_validate_warnings_alone_are_valid(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bundle = lab()
    bundle["entry"].append({"fullUrl": "Media/1", "resource": {"resourceType": "Media", "id": "1"}})
    path = write(tmp_path / "media.json", bundle)
    code, out, err = run(capsys, "fhir", "validate", path)
    assert code == 0, out
    assert out.startswith(f"{path}: warning Bundle.entry[11].resource structure.unchecked-type ")
    assert err == "1 file, 1 valid\n"


def test_validate_json_is_one_object_per_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = lab()
    del broken["entry"][1]["resource"]["resourceType"]
    bad = write(tmp_path / "bad.json", broken)
    code, out, err = run(capsys, "fhir", "validate", "--json", str(LAB), bad)
    good_line, bad_line = (orjson.loads(line) for line in out.splitlines())
    assert code == 1 and err == "2 files, 1 valid\n"
    assert good_line == {
        "file": str(LAB),
        "ok": True,
        "record_type": "DiagnosticReportRecord",
        "ig_version": "6.5.0",
        "problems": [],
    }
    report = fhir.validate(broken)
    assert bad_line["file"] == bad and bad_line["ok"] is False
    assert bad_line["record_type"] == "DiagnosticReportRecord"
    assert bad_line["problems"] == [
        {"severity": p.severity, "path": p.path, "rule": p.rule, "message": p.message}
        | ({"source": p.source} if p.source else {})
        for p in report.problems
    ]
    assert {"severity": "error", "path": "Bundle.entry[1].resource", "rule": "structure.resource-type"}.items() <= (
        bad_line["problems"][0].items()
    )


BOM = b"\xef\xbb\xbf"


def test_a_leading_bom_is_skipped_by_validate_and_show(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As an editor on Windows saves the file: validate refused it as "not JSON text" while show read it."""
    path = tmp_path / "bom.json"
    path.write_bytes(BOM + LAB.read_bytes())
    code, out, err = run(capsys, "fhir", "validate", str(path))
    assert (code, out, err) == (0, "", "1 file, 1 valid\n")
    code, out, _ = run(capsys, "fhir", "show", str(path))
    assert code == 0 and out.startswith("DiagnosticReportRecord, ")
    _stdin(monkeypatch, BOM + LAB.read_bytes())
    code, out, err = run(capsys, "fhir", "validate", "-")
    assert (code, out, err) == (0, "", "1 file, 1 valid\n")


@pytest.mark.parametrize("content", [b"", b" \n", BOM], ids=["empty", "whitespace", "bom-only"])
def test_validate_reports_an_empty_file_as_empty_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes
) -> None:
    """Read, so not "unreadable": a file with one error, which says the file is empty (exit 1, as any error)."""
    path = tmp_path / "empty.json"
    path.write_bytes(content)
    code, out, err = run(capsys, "fhir", "validate", str(path), str(LAB))
    assert code == 1 and err == "2 files, 1 valid\n"
    assert out == f"{path}: error Bundle json.invalid empty: there is no JSON text\n"
    code, out, _ = run(capsys, "fhir", "validate", "--json", str(path))
    assert code == 1
    assert orjson.loads(out)["problems"] == [
        {"severity": "error", "path": "Bundle", "rule": "json.invalid", "message": "empty: there is no JSON text"}
    ]


def test_validate_reads_stdin_as_dash(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, LAB.read_bytes())
    code, out, err = run(capsys, "fhir", "validate", "--json", "-")
    assert code == 0 and orjson.loads(out)["file"] == "-" and err == "1 file, 1 valid\n"
    _stdin(monkeypatch, b"\xff not json")
    code, out, _ = run(capsys, "fhir", "validate", "-")
    assert code == 1 and out == "-: error Bundle json.invalid not UTF-8 JSON text\n"


def test_validate_an_unreadable_file_fails_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The judgement call: like a file of ``upload FILE...``, a missing file is a failed result of its own (exit 1),
    and every other file is still checked; stderr names no file."""
    missing, folder = str(tmp_path / "asha-sharma.json"), str(tmp_path)
    code, out, err = run(capsys, "fhir", "validate", missing, str(LAB), folder)
    assert code == 1
    assert out.splitlines() == [
        f"{missing}: cannot read: the input file does not exist",
        f"{folder}: cannot read: the input file is a directory",
    ]
    assert err == "3 files, 1 valid, 2 unreadable\n"
    code, out, _ = run(capsys, "fhir", "validate", "--json", missing)
    assert code == 1
    assert orjson.loads(out) == {
        "file": missing,
        "ok": False,
        "record_type": None,
        "ig_version": None,
        "problems": [],
        "error": {"type": "InputError", "message": "the input file does not exist"},
    }


def test_validate_usage_errors_exit_2_before_reading(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "fhir", "validate", "-", str(LAB), "-")
    assert (code, out) == (2, "") and err == "health-async: '-' (stdin) can be given once\n"
    monkeypatch.setattr("sys.stdin", None)
    code, out, err = run(capsys, "fhir", "validate", str(LAB), "-")
    assert (code, out) == (2, "") and "stdin is closed" in err
    with pytest.raises(SystemExit) as info:
        cli.main(["fhir", "validate"])  # no FILE: argparse's usage error
    assert info.value.code == 2


def test_validate_text_cannot_be_steered_by_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An element name is the file's own text: a terminal escape or a newline in it is shown as ``?``, so a file
    cannot clear the screen or forge a line of the report."""
    bundle = lab()
    bundle["\x1b[2J\nfake.json: ok"] = 1
    code, out, _ = run(capsys, "fhir", "validate", write(tmp_path / "b.json", bundle))
    assert code == 1 and len(out.splitlines()) == 1 and "\x1b" not in out
    assert "Bundle.?[2J?fake.json: ok structure.unknown-element" in out


# ------------------------------------------------------------------------------------------------ show


def test_show_is_a_summary_for_a_person(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "fhir", "show", str(LAB))
    assert code == 0 and err == ""
    assert out.splitlines() == [
        "DiagnosticReportRecord, 2017-05-27T11:46:09+05:30",
        "Judged against: NRCeS guide 6.5.0 (recognised, no version declared)",
        "Title: Diagnostic Report- Lab",
        "Patient: ABC, male, born 1981-01-12",
        "  ABHA number: 22-7225-4829-5255",  # not masked: the judgement call of the module
        "Facility: XYZ Lab Pvt.Ltd. (Organization, 4567878)",
        "Authors (1):",
        "  Dr. DEF (Practitioner, 21-1521-3828-3227)",
        "Observations (2):",
        "  Cholesterol [Mass or moles/Vol] 6.3 mmol/l (<= 4.5)",
        "  Triglyceride [Mass or moles/Vol] 1.3 mmol/l (<= 2.0)",
        "Attachments (2):",
        "  application/pdf, 80793 bytes: Diagnostic Report",
        "  application/pdf, 80793 bytes: Laboratory report",
    ]


EXAMPLES_650 = DATA / "fhir" / "examples-6.5.0"


def _with_profile(bundle: dict[str, Any], suffix: str) -> dict[str, Any]:
    composition = bundle["entry"][0]["resource"]
    composition["meta"]["profile"] = [p + suffix for p in composition["meta"]["profile"]]
    return bundle


@pytest.mark.parametrize(
    ("source", "suffix", "line", "version", "declared"),
    [
        # the guide's 6.5.0 example, as published: no version in its profile URL, judged by what it meets
        (EXAMPLES_650 / LAB.name, "", "NRCeS guide 6.5.0 (recognised, no version declared)", "6.5.0", None),
        # the guide's 2.0.1 example meets 6.5.0's rules too: the newest is the one it is judged against
        (LAB, "", "NRCeS guide 6.5.0 (recognised, no version declared)", "6.5.0", None),
        # a versioned profile URL decides
        (LAB, "|2.0.1", "NRCeS guide 2.0.1 (its profile URL)", "2.0.1", "2.0.1"),
        (EXAMPLES_650 / LAB.name, "|6.5.0", "NRCeS guide 6.5.0 (its profile URL)", "6.5.0", "6.5.0"),
        (
            LAB,
            "|9.0.0",
            "NRCeS guide 6.5.0 (its profile URL names 9.0.0, which has no rules here)",
            "6.5.0",
            "9.0.0",
        ),
    ],
)
def test_show_says_which_version_of_the_guide_the_document_is_judged_against(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    source: Path,
    suffix: str,
    line: str,
    version: str,
    declared: str | None,
) -> None:
    bundle = _with_profile(json.loads(source.read_text(encoding="utf-8")), suffix)
    file = write(tmp_path / "doc.json", bundle)
    code, out, _ = run(capsys, "fhir", "show", file)
    assert code == 0
    assert out.splitlines()[1] == f"Judged against: {line}"
    assert fhir.validate(bundle).ig_version == version  # what validate applies, show says
    code, out, _ = run(capsys, "fhir", "show", "--json", file)
    shown = orjson.loads(out)
    assert (shown["ig_version"], shown["ig_version_declared"]) == (version, declared)


def test_show_of_what_is_no_document_judges_it_against_no_version(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    patient = next(e["resource"] for e in lab()["entry"] if e["resource"]["resourceType"] == "Patient")
    file = write(tmp_path / "patient.json", patient)
    code, out, _ = run(capsys, "fhir", "show", file)
    assert code == 0
    assert "Judged against: no version of the NRCeS guide (not a document of one of its record types)" in out
    code, out, _ = run(capsys, "fhir", "show", "--json", file)
    assert orjson.loads(out)["ig_version"] is None


def test_show_panels_ranges_and_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "fhir", "show", str(WELLNESS))  # raw control characters in its narratives: read
    lines = out.splitlines()
    assert code == 0 and lines[0] == "WellnessRecord, 2020-07-09T15:32:26.605000+05:30"
    assert "Observations (19):" in lines
    assert "  Oxygen saturation in Arterial blood 95 % (90-99) Normal (applies to non-numeric results)" in lines
    panel = lines.index("  Blood pressure panel with all children optional Below low normal")
    assert lines[panel + 1 : panel + 3] == [
        "    Systolic blood pressure 107 mmHg Normal",
        "    Diastolic blood pressure 60 mmHg Below low normal",
    ]


def test_show_medications_conditions_allergies_procedures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "fhir", "show", str(DATA / "fhir_read" / "Bundle-OPConsultNote-example-05.json"))
    assert code == 0
    text = out.split("Medications (2):\n", 1)[1]
    assert text.splitlines()[:10] == [
        # no dosage text: the summary of its coded parts, the route's display and the additional instruction's
        "  Neomycin 5 microgram/mg cutaneous ointment: Topical route, Twice a day (active)",
        "  Telmisartan 20 mg oral tablet (completed)",
        "Conditions (3):",
        "  Foot swelling (active)",
        "  Diabetes mellitus type 1 (recurrence)",
        "  Diabetes mellitus type 2 (recurrence)",
        "Allergies (1):",
        "  NKA (active, 2020-07-09T15:37:31-06:00)",
        "Procedures (1):",
        "  Assessment of diabetic foot ulcer (completed, 2019-05-12)",
    ]
    code, out, _ = run(capsys, "fhir", "show", str(DATA / "fhir_read" / "Bundle-Prescription-example-06.json"))
    assert "  Paracetemol 500mg Oral Tab: Take two tablets orally with or after meal once a day (active)" in out


def test_show_json_is_the_same_record_as_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "fhir", "show", "--json", str(WELLNESS))
    assert code == 0 and len(out.splitlines()) == 1
    shown = orjson.loads(out)
    assert shown == json.loads(json.dumps(fhir_cli.record_json(fhir.read(WELLNESS.read_bytes()))))
    assert shown["record_type"] == "WellnessRecord"
    assert shown["patient"] == {
        "name": "ABC",
        "gender": "female",
        "birth_date": "1981-01-12",
        "abha_number": "22-7225-4829-5255",
        "abha_address": None,
    }
    panel = next(o for o in shown["observations"] if o["components"])
    assert [(c["name"], c["value"], c["unit"]) for c in panel["components"]] == [
        ("Systolic blood pressure", 107, "mmHg"),
        ("Diastolic blood pressure", 60, "mmHg"),
    ]
    assert shown["attachments"] == [
        {
            "source": "DocumentReference",
            "content_type": "application/pdf",
            "title": "Laboratory report",
            "size": 48,
            "url": None,
            "creation": "2019-05-29T14:58:58.181000+05:30",
        }
    ]
    assert set(shown) == {
        "record_type", "ig_version", "ig_version_declared", "date", "title", "patient", "facility", "authors",
        "observations", "medications",
        "conditions", "allergies", "procedures", "immunizations", "attachments",
    }  # fmt: skip


def test_show_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _stdin(monkeypatch, LAB.read_bytes())
    code, out, _ = run(capsys, "fhir", "show", "-")
    assert code == 0 and out.startswith("DiagnosticReportRecord, ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"Asha Sharma 1990-02-03", "the file is not JSON"),
        (b'{"name": "Asha Sharma"', "the file is not JSON"),
        (b"", "the file is empty"),
        (b"\xef\xbb\xbf \n", "the file is empty"),
        (b'["Asha Sharma"]', "the file is not a FHIR resource (a JSON object with a resourceType)"),
        (b'{"name": "Asha Sharma"}', "the file is not a FHIR resource (a JSON object with a resourceType)"),
        (None, None),
    ],
    ids=["not-json", "truncated", "empty", "bom-and-whitespace", "array", "no-resource-type", "missing"],
)
def test_show_what_is_not_a_record_is_one_line_exit_2_without_its_content(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes | None, message: str | None
) -> None:
    path = tmp_path / "asha.json"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, "fhir", "show", str(path))
    assert code == 2 and out == ""
    if message is not None:
        assert err == f"health-async fhir show: {message}\n"
    else:
        assert err == "health-async: the input file does not exist\n"
    assert "Asha" not in err and "asha" not in err  # neither the content nor the file's name


def test_show_escapes_what_a_terminal_would_act_on(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bundle = lab()
    bundle["entry"][1]["resource"]["name"] = [{"text": "Evil\x1b]0;owned\x07\nTitle: forged\u009b"}]
    path = write(tmp_path / "b.json", bundle)
    code, out, _ = run(capsys, "fhir", "show", path)
    assert code == 0
    assert "Patient: Evil?]0;owned??Title: forged?, male, born 1981-01-12" in out.splitlines()
    code, out, _ = run(capsys, "fhir", "show", "--json", path)  # JSON escapes them itself, and keeps the text
    assert orjson.loads(out)["patient"]["name"] == "Evil\x1b]0;owned\x07\nTitle: forged\u009b"


def test_show_on_a_stdout_that_is_not_unicode(tmp_path: Path) -> None:
    """A Windows redirect in cp1252, ``PYTHONIOENCODING=ascii``: a name in Devanagari is written as backslash
    escapes in text, as JSON escapes with ``--json``; never an error half-way through."""
    bundle = lab()
    bundle["entry"][1]["resource"]["name"] = [{"text": "आशा शर्मा"}]
    path = write(tmp_path / "b.json", bundle)
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    text = subprocess.run(
        [sys.executable, "-m", "health_async", "fhir", "show", path], capture_output=True, env=env, timeout=60
    )
    assert text.returncode == 0, text.stderr
    assert b"Patient: \\u0906\\u0936\\u093e \\u0936\\u0930\\u094d\\u092e\\u093e, male" in text.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "health_async", "fhir", "show", "--json", path], capture_output=True, env=env, timeout=60
    )
    assert as_json.returncode == 0 and as_json.stdout.isascii()
    assert orjson.loads(as_json.stdout)["patient"]["name"] == "आशा शर्मा"


def test_show_with_stdout_closed_does_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "health_async", "fhir", "show", str(LAB)],
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),  # started as with `>&-`
        timeout=60,
    )
    assert done.returncode == 2 and b"stdout is closed" in done.stderr


# ------------------------------------------------------------------------------------------------ from-result


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=3) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        srv.records.configure(polls=0)  # completed at the first look
        yield srv


class StubBuilder:
    """Stands in for ``fhir.from_processing_result`` (and ``fhir.Patient``, ``fhir.Organization``) with the
    expected signature; records what it was given and returns ``bundle``."""

    def __init__(self, bundle: dict[str, Any]) -> None:
        self.bundle = bundle
        self.calls: list[tuple[Any, dict[str, Any]]] = []

    @staticmethod
    def patient(**fields: Any) -> dict[str, Any]:
        return {"Patient": fields}

    @staticmethod
    def organization(**fields: Any) -> dict[str, Any]:
        return {"Organization": fields}

    def __call__(
        self,
        result: ProcessingResult,
        *,
        patient: Any,
        organization: Any,
        practitioner: Any = None,
        care_context_id: str,
        conclusion: str,
        original_file: bytes | None = None,
        content_type: str = "application/pdf",
    ) -> dict[str, Any]:
        self.calls.append(
            (
                result,
                {
                    "patient": patient,
                    "organization": organization,
                    "practitioner": practitioner,
                    "care_context_id": care_context_id,
                    "conclusion": conclusion,
                    "original_file": original_file,
                    "content_type": content_type,
                },
            )
        )
        return copy.deepcopy(self.bundle)


@pytest.fixture
def builder(monkeypatch: pytest.MonkeyPatch) -> StubBuilder:
    stub = StubBuilder(lab())
    monkeypatch.setattr(fhir, "from_processing_result", stub, raising=False)
    monkeypatch.setattr(fhir, "Patient", stub.patient, raising=False)
    monkeypatch.setattr(fhir, "Organization", stub.organization, raising=False)
    return stub


ARGS: tuple[str, ...] = ("--patient-name", "Asha Sharma", "--abha-address", "asha@sbx", "--facility-id", "IN2710000123")
ARGS += ("--facility-name", "Fake PathLabs", "--conclusion", "Raised fasting glucose")


def _doc(server: FakeHealthServer) -> str:
    return server.data.document_ids(server.data.user_ids[0])[0]


def test_from_result_fetches_the_result_builds_validates_and_writes_0600(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc_id, out_file = _doc(server), tmp_path / "bundle.json"
    code, out, err = run(capsys, "fhir", "from-result", doc_id, *ARGS, "--out", str(out_file))
    assert code == 0, err
    assert server.calls("result") == 1
    [(result, kwargs)] = builder.calls
    assert isinstance(result, ProcessingResult) and result.document_id == doc_id
    assert result.status is ProcessingStatus.COMPLETED
    user = server.data.user_ids[0]
    expected = completed_result(orjson.loads(server.data.documents[user][doc_id]), doc_id)
    assert [t.name for t in result.tests] == [t["test_name"] for t in expected["data"]["output"]["data"]]
    assert kwargs == {
        "patient": {"Patient": {"name": "Asha Sharma", "abha_address": "asha@sbx"}},
        "organization": {"Organization": {"name": "Fake PathLabs", "facility_id": "IN2710000123"}},
        "practitioner": None,
        "care_context_id": doc_id,  # the default: the document's id
        "conclusion": "Raised fasting glucose",
        "original_file": None,
        "content_type": "application/pdf",
    }
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o600
    assert orjson.loads(out_file.read_bytes()) == builder.bundle
    assert orjson.loads(out) == {"document_id": doc_id, "file": str(out_file), "bytes": out_file.stat().st_size}
    assert err == "" and "Asha" not in out
    assert [p.name for p in tmp_path.iterdir()] == ["bundle.json"]  # no temporary file left


def test_from_result_every_patient_field_and_an_existing_file_becomes_0600(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file, original = tmp_path / "bundle.json", tmp_path / "report.pdf"
    out_file.write_text("old")
    out_file.chmod(0o644)
    original.write_bytes(b"%PDF-1.7 the report")
    extra: tuple[str, ...] = ("--gender", "female", "--birth-date", "1990-02-03", "--abha-number", "91-1234-5678-9012")
    extra += ("--hospital-id", "MRN-7", "--care-context-id", "visit-9", "--original", str(original))
    code, _, err = run(capsys, "fhir", "from-result", _doc(server), *ARGS, *extra, "--out", str(out_file))
    assert code == 0, err
    [(_, kwargs)] = builder.calls
    assert kwargs["patient"] == {
        "Patient": {
            "name": "Asha Sharma",
            "abha_address": "asha@sbx",
            "gender": "female",
            "birth_date": dt.date(1990, 2, 3),
            "abha_number": "91-1234-5678-9012",
            "hospital_id": "MRN-7",
        }
    }
    assert kwargs["care_context_id"] == "visit-9" and kwargs["original_file"] == b"%PDF-1.7 the report"
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o600 and orjson.loads(out_file.read_bytes()) == builder.bundle


def test_from_result_to_stdout_is_the_bundle_as_one_line(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "fhir", "from-result", _doc(server), *ARGS)
    assert code == 0 and len(out.splitlines()) == 1
    assert orjson.loads(out) == builder.bundle


def test_from_result_an_invalid_bundle_is_not_written(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    builder.bundle["type"] = "collection"
    out_file = tmp_path / "bundle.json"
    code, out, err = run(capsys, "fhir", "from-result", _doc(server), *ARGS, "--out", str(out_file))
    assert code == 1 and out == "" and not out_file.exists() and list(tmp_path.iterdir()) == []
    assert err.splitlines() == [
        "health-async fhir from-result: error Bundle.type document.type a document Bundle has type 'document'",
        "health-async fhir from-result: the bundle has 1 error(s): not written",
    ]
    code, out, err = run(capsys, "fhir", "from-result", _doc(server), *ARGS)  # nor to stdout
    assert code == 1 and out == ""
    assert "ABC" not in err and "Asha" not in err


def test_from_result_not_yet_processed_exits_1_and_wait_waits(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    server.records.configure(polls=2)
    doc_id = _doc(server)
    code, out, err = run(capsys, "fhir", "from-result", doc_id, *ARGS)
    assert code == 1 and out == "" and builder.calls == []
    assert (
        err == "health-async fhir from-result: the document's processing is not completed (status queued); try --wait\n"
    )
    code, out, err = run(capsys, "fhir", "from-result", doc_id, *ARGS, "--wait", "--wait-timeout", "30")
    assert code == 0, err
    assert len(builder.calls) == 1 and orjson.loads(out) == builder.bundle


def test_from_result_an_unknown_document_is_exit_1(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "fhir", "from-result", "no-such-doc", *ARGS)
    assert code == 1 and out == "" and builder.calls == []
    assert err.startswith("health-async: DocumentNotFound: ")


def test_from_result_with_the_real_builder_writes_a_lab_report_that_validates(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc_id, out_file = _doc(server), tmp_path / "lab.json"
    extra = ("--gender", "female", "--birth-date", "1990-02-03")
    code, _, err = run(capsys, "fhir", "from-result", doc_id, *ARGS, *extra, "--out", str(out_file))
    assert code == 0, err
    bundle = orjson.loads(out_file.read_bytes())
    report = fhir.validate(bundle)
    assert report.ok and report.record_type is fhir.RecordType.DIAGNOSTIC_REPORT
    record = fhir.read(bundle)
    user = server.data.user_ids[0]
    expected = completed_result(orjson.loads(server.data.documents[user][doc_id]), doc_id)
    assert [o.name for o in record.observations] == [t["test_name"] for t in expected["data"]["output"]["data"]]
    assert record.patient is not None and record.patient.name == "Asha Sharma"
    code, _, err = run(capsys, "fhir", "validate", str(out_file))  # the command agrees
    assert code == 0 and "1 file, 1 valid" in err


def test_from_result_a_value_the_builder_refuses_is_exit_1_without_the_value(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys,
        "fhir",
        "from-result",
        _doc(server),
        *ARGS[:4],
        "--facility-id",
        "IN1",
        "--facility-name",
        " ",
        *ARGS[-2:],
    )
    assert code == 1 and out == ""
    assert "cannot build the record" in err and "Asha" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--birth-date", "1990-02-30"],
        ["--birth-date", "03/02/1990"],
        ["--gender", "F"],
    ],
    ids=["no-such-day", "not-iso", "gender"],
)
def test_from_result_bad_patient_details_are_usage_errors(
    builder: StubBuilder, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["fhir", "from-result", "doc-1", *ARGS, *argv])
    assert info.value.code == 2 and builder.calls == []
    assert "Traceback" not in capsys.readouterr().err


def test_from_result_a_missing_original_is_exit_2_before_anything_is_sent(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "fhir", "from-result", _doc(server), *ARGS, "--original", str(tmp_path / "x.pdf"))
    assert (code, out) == (2, "") and err == "health-async: the input file does not exist\n"
    assert server.calls("result") == 0 and builder.calls == []


def test_from_result_a_file_that_cannot_be_written_is_exit_1_without_its_name(
    server: FakeHealthServer, builder: StubBuilder, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "asha-sharma" / "bundle.json"  # its folder does not exist
    code, out, err = run(capsys, "fhir", "from-result", _doc(server), *ARGS, "--out", str(target))
    assert code == 1 and out == ""
    assert err == "health-async fhir from-result: the file could not be written (No such file or directory)\n"


def test_validate_names_the_guides_version_and_the_profile_element_of_a_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = lab()
    del broken["entry"][0]["resource"]["type"]["coding"]  # DiagnosticReportRecord: Composition.type.coding 1..1
    bad = write(tmp_path / "bad.json", broken)
    code, out, _ = run(capsys, "fhir", "validate", bad)
    source = "StructureDefinition-DiagnosticReportRecord|6.5.0#Composition.type.coding"
    assert code == 1 and f"{bad}: error Bundle.entry[0].resource.type.coding profile.cardinality" in out
    assert out.rstrip().endswith(f"[{source}]")
    code, out, _ = run(capsys, "fhir", "validate", "--json", bad)
    line = orjson.loads(out)
    assert line["ig_version"] == "6.5.0" and line["problems"][-1]["source"] == source
