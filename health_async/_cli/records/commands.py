"""``health-async`` subcommands of the records lifecycle: ``result``, ``upload-many``, ``delete``; the
extracted-tests table.

``result ID`` prints the processing result as JSON (``--wait`` waits until it is final; ``--fhir`` adds the FHIR
bundle, left out by default because it names the patient). ``upload-many DIR`` uploads every file of a directory
(JSON lines out); with ``--wait`` it also waits for each file's processing, and its progress bar counts processed
files as well as uploaded ones. ``delete ID`` asks for confirmation on the terminal unless ``--yes``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ..._plain import unstructure
from ...errors import HealthError
from ...models import ProcessingResult, UploadOutcome
from .._output import Command, Progress, Tally, display_path, drain, emit, error_json

__all__ = ["NO_CLIENT", "add_commands", "format_tests", "outcome_table", "run_uploads"]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset()


# ------------------------------------------------------------------------ output


def format_tests(result: ProcessingResult) -> list[str]:
    """The extracted tests as the lines of a plain-text table (test, value, unit, range, normalised, LOINC)."""
    rows = [("test", "value", "unit", "range", "normalised", "loinc")]
    for t in result.tests:
        normalised = " ".join(x for x in (t.normalised_value, t.normalised_unit) if x) or "-"
        rows.append(
            (t.name or "-", t.value or "-", t.unit or "-", t.display_range or "-", normalised, t.loinc_id or "-")
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def outcome_table(outcome: UploadOutcome, out: IO[str] | None = None) -> None:
    """Write one upload-and-wait outcome for people: a heading line, then its tests table (or its error)."""
    stream = out or sys.stdout
    document_id = outcome.result.document_id if outcome.result is not None else None
    head = display_path(outcome.source) + (f"  (document {document_id})" if document_id else "")
    if outcome.error is not None:
        lines = [f"{head}  FAILED  {type(outcome.error).__name__}: {outcome.error}"]
    elif outcome.processing is None:
        lines = [f"{head}  uploaded"]
    else:
        tests = outcome.processing.tests
        lines = [f"{head}  {outcome.processing.status.name.lower()}, {len(tests)} test(s)"]
        if tests:
            lines += ["  " + line for line in format_tests(outcome.processing)]
    stream.write("\n".join(lines) + "\n\n")
    stream.flush()


def _outcome_json(outcome: UploadOutcome) -> dict[str, Any]:
    out: dict[str, Any] = {"file": display_path(outcome.source)}
    if outcome.result is not None:
        out["document_id"] = outcome.result.document_id
    if outcome.processing is not None:
        out["processing"] = unstructure(outcome.processing)
    if outcome.error is not None:
        out["error"] = error_json(outcome.error)
    return out


# ------------------------------------------------------------------------ commands


async def cmd_result(client: Any, args: argparse.Namespace) -> int:
    """``result ID``: the processing result as JSON; exit 1 if it failed (``--wait``) or is ``ERROR``."""
    try:
        if args.wait:
            result = await client.documents.wait_for_result(args.id, timeout=args.wait_timeout)
        else:
            result = await client.documents.result(args.id)
    except HealthError as exc:
        emit({"document_id": args.id, "error": error_json(exc)})
        return 1
    out = unstructure(result)
    if args.fhir:
        out["fhir"] = result.fhir
    emit(out)
    return 1 if result.status.name == "ERROR" else 0


def _files_of(directory: str) -> Iterator[Path]:
    """Every entry under ``directory`` that is not a directory (recursively, sorted, hidden files and directories
    skipped). A vanished file (a broken link), a special file or one whose name is not UTF-8 is listed too: its
    upload fails alone, with an error line naming it, and every other file still goes."""
    root = Path(directory)
    if not root.is_dir():
        raise ValueError("upload-many needs a directory")
    for path in sorted(root.rglob("*")):
        if not path.is_dir() and not any(part.startswith(".") for part in path.relative_to(root).parts):
            yield path


async def run_uploads(client: Any, files: list[Any], args: argparse.Namespace, *, label: str, table: bool) -> int:
    """Upload ``files`` (with ``args.wait``: and wait for their processing); write each outcome as a table
    (``table``) or a JSON line; a summary on stderr. With ``--wait`` the progress bar counts processed files and
    its label the uploaded ones. Exit status 1 if any file failed."""
    progress = Progress(label, enabled=False if args.quiet else None)

    def on_upload(done: int, failed: int, total: int | None) -> None:
        progress.label = f"{label}: uploaded {done}/{total if total is not None else '?'} ({failed} failed), processed"

    def write(outcome: UploadOutcome) -> None:
        if table:
            outcome_table(outcome)
        else:
            emit(_outcome_json(outcome))

    stream = client.documents.upload_many(
        files,
        tasks=args.task or ["smart"],
        document_type=args.document_type,
        encrypt=True if args.encrypt else None,
        concurrency=args.concurrency,
        ordered=True,
        progress=progress,
        upload_progress=on_upload if args.wait else None,
        wait=args.wait,
        wait_timeout=args.wait_timeout,
    )
    return await drain(stream, Tally(label, idempotent=False), progress, write)


async def cmd_delete(client: Any, args: argparse.Namespace, *, ask: Callable[[str], str] | None = None) -> int:
    """``delete ID``: delete a document, after a confirmation typed on the terminal unless ``--yes``."""
    if not args.yes:
        if ask is None and not sys.stdin.isatty():
            print("health-async: delete needs --yes when stdin is not a terminal", file=sys.stderr)
            return 2
        try:
            answer = (ask or input)("Delete this document? It cannot be undone. Type 'yes' to delete: ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        if answer.strip().lower() != "yes":
            print("health-async: not deleted", file=sys.stderr)
            return 1
    await client.documents.delete(args.id)
    emit({"document_id": args.id, "deleted": True})
    return 0


async def cmd_upload_many(client: Any, args: argparse.Namespace) -> int:
    """``upload-many DIR``: upload every file of DIR; JSON lines out; with ``--wait``, each with its result."""
    return await run_uploads(client, list(_files_of(args.directory)), args, label="upload-many", table=False)


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add this module's subparsers to ``sub``; return their handlers by command name."""
    p = sub.add_parser(
        "result",
        parents=[common],
        help="a document's processing result (JSON)",
        description="Print the processing status and extracted tests of document ID as JSON. Exits 1 when "
        "processing failed.",
    )
    p.add_argument("id", help="document id")
    p.add_argument("--wait", action="store_true", help="poll until processing is final")
    p.add_argument("--wait-timeout", type=float, default=600.0, help="seconds to wait at most (default 600)")
    p.add_argument("--fhir", action="store_true", help="include the FHIR bundle (personal data)")

    p = sub.add_parser(
        "upload-many",
        parents=[common],
        help="upload every file of a directory (JSON lines out)",
        description="Upload every file under DIR (hidden ones skipped); one JSON line per file; with --wait, also "
        "wait for each file's processing. Exits 1 if any file failed.",
    )
    p.add_argument("directory", metavar="DIR", help="directory of files to upload")
    p.add_argument("--wait", action="store_true", help="also wait for each file's processing result")
    p.add_argument("--wait-timeout", type=float, default=600.0, help="seconds to wait per file (default 600)")
    p.add_argument("--task", action="append", help="processing task, repeatable: smart (default), pii, classification")
    p.add_argument("--document-type", help="document type code sent as dt, e.g. lr")
    p.add_argument("--encrypt", action="store_true", help="send JWE-encrypted")
    p.add_argument("--concurrency", type=int, default=4, help="uploads in flight (default 4)")
    p.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")

    p = sub.add_parser(
        "delete",
        parents=[common],
        help="delete a document (asks for confirmation unless --yes)",
        description="Delete document ID. Asks for confirmation on the terminal unless --yes. Exits 1 when not "
        "deleted (declined, or no such document).",
    )
    p.add_argument("id", help="document id")
    p.add_argument("--yes", action="store_true", help="delete without asking")
    return {"result": cmd_result, "upload-many": cmd_upload_many, "delete": cmd_delete}
