"""``health-async fhir validate | show | from-result``: ABDM FHIR documents from the shell.

* ``fhir validate FILE...`` (``-``: stdin): :func:`health_async.fhir.validate` on each file. Text by default: one
  line per problem, ``FILE: severity path rule message``, on stdout (a rule of the guide's profiles ends with the
  profile element it comes from, ``[StructureDefinition-OPConsultRecord|6.5.0#Composition.section]``);
  ``--json``: one object per file, ``{"file", "ok", "record_type", "ig_version", "problems": [{"severity", "path",
  "rule", "message"}]}`` (``ig_version``: the guide's version whose rules applied; a problem of the guide's
  profiles adds its ``"source"``). The summary,
  ``N files, N valid``, goes to stderr in both modes (as every bulk command's). Exit 0 when no file has an error
  (warnings allowed), 1 when any has one or could not be read, 2 for bad usage.
* ``fhir show FILE`` (``-``: stdin): :func:`health_async.fhir.read`, written for a person (record type, date,
  the version of the NRCeS guide it is judged against (:func:`judged_against`), title, patient, facility, authors,
  observations, medications, conditions, allergies, procedures, immunizations, attachments); ``--json``: the same
  as one JSON object.
* ``fhir from-result DOCUMENT_ID --patient-name ... --abha-address ... --facility-id ... --facility-name ...
  --conclusion ...``:
  the document's processing result (``client.documents.result``; ``--wait``: ``wait_for_result``) built into a
  DiagnosticReportRecord bundle (``health_async.fhir.from_processing_result``, through :func:`build_lab_bundle`),
  validated, then written to ``--out FILE`` (atomically, mode 0600) or to stdout as one JSON line. A bundle with
  an error is not written (its problems on stderr, exit 1).

Judgement call (a file ``validate`` cannot read): it fails alone, as a file of ``upload FILE...`` does: a result
of its own (text ``FILE: cannot read: the input file does not exist``; JSON with ``"ok": false`` and an
``"error"``), counted in the summary, exit 1; every other file is still checked. Only ``-`` with stdin closed, or
``-`` given twice, is bad usage (exit 2, nothing checked). ``show`` reads one file: one it cannot read, that is
empty, or that is not a JSON object with a ``resourceType``, is bad input (one line on stderr, exit 2). An empty
file given to ``validate`` is a file with an error (``json.invalid``, "empty"), exit 1. Both commands skip a
leading UTF-8 byte order mark, as :func:`health_async.fhir.read` and :func:`health_async.fhir.validate` do.

Judgement call (``show`` and the ABHA address): nothing is masked. The file is the user's, the output goes where
they asked (stdout, their terminal) and already holds the name and birth date; masking the ABHA number and address
beside them would protect nothing. Nothing of the record ever goes to stderr: diagnostics name the rule or the
reason, never a value nor the file's name. Text for a terminal has its control characters replaced by ``?`` (a
record cannot move the cursor, clear the screen or forge a line).

Personal data on the command line: ``from-result``'s ``--patient-name`` and ``--abha-address`` are visible to
``ps`` and kept in the shell's history; a script should pass them from variables it does not log.

How ``from-result`` gets its client (as ``webhooks``'s account subcommands): ``cli.run`` decides per command
whether to build one, and ``fhir`` is in :data:`NO_CLIENT` because ``validate`` and ``show`` work offline without
any account; ``from-result`` builds its own from the same connection flags and environment
(:func:`~health_async._cli._output.make_client`, the one every command uses).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from ... import _json, fhir
from ...fhir._recognise import recognise
from ...models import ProcessingResult, ProcessingStatus
from .._output import Command, InputError, display_path, emit, make_client, open_input, write_json

__all__ = ["NO_CLIENT", "add_commands", "build_lab_bundle", "record_json", "summary_lines"]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset({"fhir"})

#: Characters a terminal acts on (C0, DEL, C1): shown as ``?`` in text output.
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_PREFIX: Final = "health-async fhir"


def _say(command: str, text: str) -> None:
    sys.stderr.write(f"{_PREFIX} {command}: {text}\n")
    sys.stderr.flush()


def _clean(value: object) -> str:
    """A value for a line of text: ``-`` for nothing, control characters as ``?``."""
    if value is None or value == "":
        return "-"
    return _CONTROL.sub("?", _text(value))


def _text(value: object) -> str:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------------------------------------ reading files


def _read_all(source: str) -> bytes:
    """The bytes of ``source`` (a path, or ``-``: stdin); :class:`InputError` with a reason that does not name it."""
    stream = open_input(source)
    try:
        data = stream.read()
    except OSError as exc:
        raise InputError(f"the input file cannot be read ({exc.strerror or type(exc).__name__})") from None
    finally:
        if source != "-":
            stream.close()
    return data.encode("utf-8") if isinstance(data, str) else data


def _blank(data: bytes) -> bool:
    """True for a file with no JSON text: empty, or a byte order mark and whitespace only (as ``fhir.read`` and
    ``fhir.validate`` see it)."""
    return not data.removeprefix(b"\xef\xbb\xbf").strip(b" \t\n\r")


def _check_sources(files: Sequence[str]) -> None:
    """Bad usage found before anything is read: ``-`` twice (stdin is read once), ``-`` with stdin closed."""
    if sum(1 for f in files if f == "-") > 1:
        raise InputError("'-' (stdin) can be given once")
    if "-" in files and sys.stdin is None:
        raise InputError("stdin is closed: there is no input to read (give a file, or pipe the input in)")


# ------------------------------------------------------------------------------------------------ validate


def _problem_json(problem: fhir.Problem) -> dict[str, str]:
    out = {"severity": problem.severity, "path": problem.path, "rule": problem.rule, "message": problem.message}
    if problem.source:
        out["source"] = problem.source
    return out


def _problem_line(name: str, problem: fhir.Problem) -> str:
    parts = (problem.severity, problem.path, problem.rule, problem.message)
    line = f"{_clean(name)}: " + " ".join(_clean(part) for part in parts)
    return f"{line} [{_clean(problem.source)}]" if problem.source else line


async def cmd_validate(args: argparse.Namespace) -> int:
    """``fhir validate FILE...``: a report per file; exit 1 if any file has an error or cannot be read."""
    _check_sources(args.files)
    valid = unreadable = 0
    for source in args.files:
        name = display_path(source)
        try:
            data = _read_all(source)
        except InputError as exc:
            unreadable += 1
            if args.json:
                error = {"type": "InputError", "message": str(exc)}
                emit(
                    {"file": name, "ok": False, "record_type": None, "ig_version": None, "problems": [], "error": error}
                )
            else:
                print(f"{_clean(name)}: cannot read: {exc}")
                sys.stdout.flush()
            continue
        report = fhir.validate(data)
        if report.ok:
            valid += 1
        if args.json:
            record_type = report.record_type.value if report.record_type is not None else None
            problems = [_problem_json(p) for p in report.problems]
            emit(
                {
                    "file": name,
                    "ok": report.ok,
                    "record_type": record_type,
                    "ig_version": report.ig_version,
                    "problems": problems,
                }
            )
        elif report.problems:
            print("\n".join(_problem_line(name, p) for p in report.problems))
            sys.stdout.flush()
    total = len(args.files)
    tail = f", {unreadable} unreadable" if unreadable else ""
    sys.stderr.write(f"{total} file{'s' if total != 1 else ''}, {valid} valid{tail}\n")
    sys.stderr.flush()
    return 0 if valid == total else 1


# ------------------------------------------------------------------------------------------------ show


def _plain(value: Any) -> Any:
    """A value of the record as JSON-ready data: dates as ISO text, the rest as it is."""
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value


def _party_json(party: fhir.Party | None) -> dict[str, Any] | None:
    if party is None:
        return None
    return {"resource_type": party.resource_type, "name": party.name, "identifier": party.identifier}


def _observation_json(obs: fhir.ObservationValue) -> dict[str, Any]:
    return {
        "name": obs.name,
        "code": obs.code,
        "value": _plain(obs.value),
        "unit": obs.unit,
        "low": obs.low,
        "high": obs.high,
        "interpretation": obs.interpretation,
        "date": _plain(obs.date),
        "components": [_observation_json(c) for c in obs.components],
    }


def _entry_json(entry: fhir.ClinicalEntry) -> dict[str, Any]:
    return {"name": entry.name, "code": entry.code, "status": entry.status, "date": _plain(entry.date)}


def judged_against(record: fhir.FhirRecord) -> tuple[str | None, str | None]:
    """``(ig_version, declared)``: the version of the NRCeS guide whose profile rules
    :func:`health_async.fhir.validate` applies to the record (``None``: none, the file is not a document of one of
    the guide's record types), and the version its record profile URL names (``None``: none, the document was
    recognised by its type and sections and its version chosen as ``validate`` chooses it).

    Judgement call: ``show`` runs ``validate`` for this line (offline, a few milliseconds) rather than guess from
    the profile URL alone: a URL may name a version without rules here (then the newest older one applies), and a
    document with no version is judged by what it meets."""
    version = fhir.validate(record.raw).ig_version if isinstance(record.raw, dict) else None
    _, declared = recognise(record.raw)
    return version, declared


def _judged_line(version: str | None, declared: str | None) -> str:
    if version is None:
        return "Judged against: no version of the NRCeS guide (not a document of one of its record types)"
    if declared is None:
        return f"Judged against: NRCeS guide {version} (recognised, no version declared)"
    if declared == version:
        return f"Judged against: NRCeS guide {version} (its profile URL)"
    return f"Judged against: NRCeS guide {version} (its profile URL names {_clean(declared)}, which has no rules here)"


def record_json(record: fhir.FhirRecord) -> dict[str, Any]:
    """What ``fhir show --json`` prints: the record's typed view as plain data (never the raw resources, nor an
    attachment's bytes: its content type, title, size and URL); ``ig_version`` and ``ig_version_declared``: the
    guide's version the document is judged against and the one its profile URL names (:func:`judged_against`)."""
    patient = record.patient
    version, declared = judged_against(record)
    return {
        "record_type": record.record_type.value if record.record_type is not None else None,
        "ig_version": version,
        "ig_version_declared": declared,
        "date": _plain(record.date),
        "title": record.title,
        "patient": None
        if patient is None
        else {
            "name": patient.name,
            "gender": patient.gender,
            "birth_date": _plain(patient.birth_date),
            "abha_number": patient.abha_number,
            "abha_address": patient.abha_address,
        },
        "facility": _party_json(record.facility),
        "authors": [_party_json(a) for a in record.authors],
        "observations": [_observation_json(o) for o in record.observations],
        "medications": [
            {
                "resource_type": m.resource_type,
                "name": m.name,
                "code": m.code,
                "dosage": m.dosage,
                "status": m.status,
                "date": _plain(m.date),
            }
            for m in record.medications
        ],
        "conditions": [_entry_json(e) for e in record.conditions],
        "allergies": [_entry_json(e) for e in record.allergies],
        "procedures": [_entry_json(e) for e in record.procedures],
        "immunizations": [_entry_json(e) for e in record.immunizations],
        "attachments": [
            {
                "source": a.source,
                "content_type": a.content_type,
                "title": a.title,
                "size": a.size,
                "url": a.url,
                "creation": _plain(a.creation),
            }
            for a in record.attachments
        ],
    }


def _range(low: float | None, high: float | None) -> str:
    if low is None and high is None:
        return ""
    if high is None:
        return f"(>= {_clean(low)})"
    if low is None:
        return f"(<= {_clean(high)})"
    return f"({_clean(low)}-{_clean(high)})"


def _observation_line(obs: fhir.ObservationValue) -> str:
    """``name value unit (low-high) flag``: what is missing is left out, but the name and the value (``-``)."""
    value = "" if obs.components and obs.value is None else _clean(obs.value)
    parts = [_clean(obs.name), value, _clean(obs.unit) if obs.unit else "", _range(obs.low, obs.high)]
    if obs.interpretation:
        parts.append(_clean(obs.interpretation))
    return " ".join(part for part in parts if part)


def _party_line(party: fhir.Party) -> str:
    text = _clean(party.name)
    extra = [x for x in (party.resource_type, party.identifier) if x]
    return text + (f" ({', '.join(_clean(x) for x in extra)})" if extra else "")


def _entry_line(entry: fhir.ClinicalEntry) -> str:
    extra = [_clean(x) for x in (entry.status, entry.date) if x]
    return _clean(entry.name) + (f" ({', '.join(extra)})" if extra else "")


def _size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    return f"{size} byte{'s' if size != 1 else ''}"


def _section(title: str, lines: Iterable[str]) -> list[str]:
    items = list(lines)
    return [f"{title} ({len(items)}):", *("  " + line for line in items)] if items else []


def summary_lines(record: fhir.FhirRecord) -> list[str]:
    """What ``fhir show`` prints: the record for a person, one fact per line; empty sections left out."""
    kind = record.record_type.value if record.record_type is not None else "unknown record type"
    lines = [f"{kind}, {_clean(record.date)}" if record.date is not None else kind]
    lines.append(_judged_line(*judged_against(record)))
    if record.title:
        lines.append(f"Title: {_clean(record.title)}")
    patient = record.patient
    if patient is not None:
        facts = [_clean(patient.name)]
        if patient.gender:
            facts.append(_clean(patient.gender))
        if patient.birth_date is not None:
            facts.append(f"born {_clean(patient.birth_date)}")
        lines.append("Patient: " + ", ".join(facts))
        if patient.abha_number:
            lines.append(f"  ABHA number: {_clean(patient.abha_number)}")
        if patient.abha_address:
            lines.append(f"  ABHA address: {_clean(patient.abha_address)}")
    if record.facility is not None:
        lines.append(f"Facility: {_party_line(record.facility)}")
    lines += _section("Authors", (_party_line(a) for a in record.authors))
    observations: list[str] = []
    for obs in record.observations:
        observations.append(_observation_line(obs))
        observations += ["  " + _observation_line(c) for c in obs.components]
    if observations:
        lines += [f"Observations ({len(record.observations)}):", *("  " + line for line in observations)]
    lines += _section(
        "Medications",
        (
            _clean(m.name)
            + (f": {_clean(m.dosage)}" if m.dosage else "")
            + (f" ({_clean(m.status)})" if m.status else "")
            for m in record.medications
        ),
    )
    lines += _section("Conditions", map(_entry_line, record.conditions))
    lines += _section("Allergies", map(_entry_line, record.allergies))
    lines += _section("Procedures", map(_entry_line, record.procedures))
    lines += _section("Immunizations", map(_entry_line, record.immunizations))
    lines += _section(
        "Attachments",
        (
            f"{_clean(a.content_type)}, {_size(a.size)}" + (f": {_clean(a.title)}" if a.title else "")
            for a in record.attachments
        ),
    )
    return lines


async def cmd_show(args: argparse.Namespace) -> int:
    """``fhir show FILE``: the record for a person (``--json``: one object); exit 2 for a file that is none."""
    _check_sources([args.file])
    data = _read_all(args.file)
    if _blank(data):
        _say("show", "the file is empty")
        return 2
    try:
        record = fhir.read(data)
    except ValueError:  # fhir.read's InvalidRequest: its reason is for a program, this line for a person
        _say("show", "the file is not JSON")
        return 2
    raw = record.raw
    if not isinstance(raw, dict) or not isinstance(raw.get("resourceType"), str):
        _say("show", "the file is not a FHIR resource (a JSON object with a resourceType)")
        return 2
    if args.json:
        emit(record_json(record))
    else:
        sys.stdout.write("\n".join(summary_lines(record)) + "\n")
        sys.stdout.flush()
    return 0


# ------------------------------------------------------------------------------------------------ from-result


def build_lab_bundle(
    result: ProcessingResult,
    *,
    patient: dict[str, Any],
    organization: dict[str, Any],
    care_context_id: str,
    conclusion: str,
    original_file: bytes | None = None,
    content_type: str = "application/pdf",
) -> dict[str, Any]:
    """The one place that calls the library's FHIR builder: ``result`` as a DiagnosticReportRecord bundle.

    ``conclusion``: the report's conclusion, as the lab wrote it (the guide's DiagnosticReportLab requires one and a
    processing result has none).

    ``patient`` and ``organization`` are the keywords of ``fhir.Patient`` and ``fhir.Organization`` (only those
    the user gave: the builder's own defaults apply to the rest). A value the builder refuses is its ``TypeError``
    or ``ValueError``, naming the field, never the value.
    """
    build = fhir.from_processing_result  # looked up at call time: the tests stand a recording builder in
    bundle = build(
        result,
        patient=fhir.Patient(**patient),
        organization=fhir.Organization(**organization),
        care_context_id=care_context_id,
        conclusion=conclusion,
        original_file=original_file,
        content_type=content_type,
    )
    if not isinstance(bundle, dict):
        raise TypeError("the FHIR builder did not return a bundle (a dict)")
    return bundle


def _write_private(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then ``os.replace``), mode 0600:
    :func:`tempfile.mkstemp` creates the file readable and writable by its owner only before anything is written,
    and the replacement keeps that mode even over an existing file."""
    target = Path(path)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _patient_fields(args: argparse.Namespace) -> dict[str, Any]:
    fields = {
        "name": args.patient_name,
        "abha_address": args.abha_address,
        "gender": args.gender,
        "birth_date": args.birth_date,
        "abha_number": args.abha_number,
        "hospital_id": args.hospital_id,
    }
    return {name: value for name, value in fields.items() if value is not None}


async def cmd_from_result(args: argparse.Namespace) -> int:
    """``fhir from-result DOCUMENT_ID``: the lab report bundle of a processed document, validated, to ``--out``
    (mode 0600) or stdout. Exit 1 when the document is not processed, the builder fails or the bundle is invalid."""
    original: bytes | None = None
    if args.original is not None:
        original = _read_all(args.original)  # a missing file: bad usage (exit 2), before anything is sent
    async with make_client(args) as client:
        if args.wait:
            result = await client.documents.wait_for_result(args.document_id, timeout=args.wait_timeout)
        else:
            result = await client.documents.result(args.document_id)
    if result.status is not ProcessingStatus.COMPLETED:
        status = result.raw_status or result.status.name.lower()
        _say("from-result", f"the document's processing is not completed (status {_clean(status)}); try --wait")
        return 1
    try:
        bundle = build_lab_bundle(
            result,
            patient=_patient_fields(args),
            organization={"name": args.facility_name, "facility_id": args.facility_id},
            care_context_id=args.care_context_id or args.document_id,
            conclusion=args.conclusion,
            original_file=original,
            content_type=args.content_type,
        )
    except (TypeError, ValueError) as exc:  # the builder's refusal names the field, never the value
        _say("from-result", f"cannot build the record: {_clean(str(exc))}")
        return 1
    report = fhir.validate(bundle)
    for problem in report.problems:  # paths, rules and expectations only: never a value of the bundle
        _say(
            "from-result", " ".join(_clean(x) for x in (problem.severity, problem.path, problem.rule, problem.message))
        )
    if not report.ok:
        _say("from-result", f"the bundle has {len(report.errors)} error(s): not written")
        return 1
    data = _json.dumps(bundle)
    if args.out is None or args.out == "-":
        write_json(bundle, sys.stdout)
        return 0
    try:
        _write_private(args.out, data + b"\n")
    except OSError as exc:  # named by neither its path nor its content
        _say("from-result", f"the file could not be written ({exc.strerror or type(exc).__name__})")
        return 1
    emit({"document_id": args.document_id, "file": display_path(args.out), "bytes": len(data) + 1})
    return 0


# ------------------------------------------------------------------------------------------------ parser


async def _fhir(client: Any, args: argparse.Namespace) -> int:  # noqa: ARG001 - cli.run gives none
    if args.fhir_command == "validate":
        return await cmd_validate(args)
    if args.fhir_command == "show":
        return await cmd_show(args)
    return await cmd_from_result(args)


def _date(text: str) -> dt.date:
    """``--birth-date``: ``YYYY-MM-DD``, a day of the calendar."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise argparse.ArgumentTypeError("a date is YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a date of the calendar") from None


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``fhir`` (``validate``, ``show``, ``from-result``) to ``sub``; return ``{"fhir": handler}``. Only
    ``from-result`` takes the connection flags (``common``)."""
    parser = sub.add_parser(
        "fhir",
        help="ABDM FHIR documents: validate, show, build from a processed document",
        description="ABDM FHIR documents (the seven NRCeS record types): validate files offline, show one for a "
        "person, or build the lab report bundle of a processed document.",
    )
    fsub = parser.add_subparsers(dest="fhir_command", required=True, metavar="SUBCOMMAND")
    p = fsub.add_parser(
        "validate",
        help="check FHIR document bundles offline (exit 1 if any has an error)",
        description="Validate each FILE ('-': stdin) against FHIR R4 and the NRCeS profiles. Text: one line per "
        "problem, 'FILE: severity path rule message'; --json: one object per file. The summary goes to stderr. "
        "Exits 0 when no file has an error (warnings allowed), 1 when any has one or cannot be read.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="bundle files (JSON); '-' reads stdin")
    p.add_argument("--json", action="store_true", help="one JSON object per file instead of text lines")

    p = fsub.add_parser(
        "show",
        help="a readable summary of a FHIR record (personal data)",
        description="Show the record of FILE ('-': stdin) for a person: type, date, title, patient, facility, "
        "authors, observations, medications, conditions, allergies, procedures, immunizations, attachments. "
        "Nothing is masked: it is the record as written. Exits 2 when FILE is not a FHIR resource.",
    )
    p.add_argument("file", metavar="FILE", help="a bundle file (JSON); '-' reads stdin")
    p.add_argument("--json", action="store_true", help="the same as one JSON object")

    p = fsub.add_parser(
        "from-result",
        parents=[common],
        help="the DiagnosticReportRecord bundle of a processed document",
        description="Fetch document DOCUMENT_ID's processing result and build its lab report bundle "
        "(DiagnosticReportRecord) for the patient and facility given; validate it, then write it to --out (mode "
        "0600) or stdout. Exits 1 when processing is not completed, or the bundle has an error (not written).",
        epilog="The patient's details are personal data: visible to 'ps' and kept in the shell's history.",
    )
    p.add_argument("document_id", metavar="DOCUMENT_ID", help="the processed document")
    p.add_argument("--patient-name", required=True, help="the patient's name")
    p.add_argument("--abha-address", required=True, help="the patient's ABHA address, e.g. name@abdm")
    p.add_argument("--abha-number", help="the patient's 14-digit ABHA number")
    p.add_argument("--gender", choices=("male", "female", "other", "unknown"), help="the patient's gender")
    p.add_argument("--birth-date", type=_date, metavar="YYYY-MM-DD", help="the patient's birth date")
    p.add_argument("--hospital-id", help="the patient's id at the facility (MRN)")
    p.add_argument("--facility-id", required=True, help="the facility's HFR id")
    p.add_argument("--facility-name", required=True, help="the facility's name")
    p.add_argument(
        "--conclusion", required=True, help="the report's conclusion, as the lab wrote it (the guide requires one)"
    )
    p.add_argument("--care-context-id", help="the care context the bundle is for (default: DOCUMENT_ID)")
    p.add_argument("--original", metavar="FILE", help="attach the original report file to the bundle")
    p.add_argument("--content-type", default="application/pdf", help="of --original (default application/pdf)")
    p.add_argument("--out", metavar="FILE", help="write the bundle here, mode 0600 (default: stdout)")
    p.add_argument("--wait", action="store_true", help="poll until processing is final")
    p.add_argument("--wait-timeout", type=float, default=600.0, help="seconds to wait at most (default 600)")
    return {"fhir": _fhir}
