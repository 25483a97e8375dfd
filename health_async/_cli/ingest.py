"""``health-async ingest``: resumable describe and upload jobs with a journal, and their status.

::

    health-async ingest describe IDS_FILE --out docs.jsonl [--journal ingest.db] [--concurrency 64] [--rate-limit R]
    health-async ingest upload DIR_OR_LIST --out uploads.jsonl [--journal ...] [--wait] [--tasks smart]
    health-async ingest upload DIR_OR_LIST --out uploads.jsonl --reconcilable     (unknown outcomes settled by asking)
    health-async ingest reconcile --journal uploads.db
    health-async ingest link CSV_OR_JSONL --out links.jsonl [--journal ...] [--hip-id H] [--relink-unknown]
    health-async ingest ... --engine ray [--ray-address auto] [--workers N]
    health-async ingest status --journal ingest.db
    health-async ingest export --journal ingest.db --to results.parquet|results.csv [--format csv|parquet]

A journal belongs to one input file: a run with another input is refused (exit 2; see ``IngestJob``).

The job builds its own client(s) (from the connection flags and the environment), so ``ingest`` is in
:data:`NO_CLIENT`. Exit status: 0 when every item is done, 1 when any failed or is of unknown outcome, 2 for a
bad input or journal (one line on stderr), 130 on Ctrl-C and 143 on SIGTERM (after the results received are
committed; run the same command again to resume). A summary goes to stderr at the end, on Ctrl-C and on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import InvalidRequest
from ._output import Command, client_overrides, in_flight, positive_number, write_json

if TYPE_CHECKING:
    from .._client import HealthClient
    from .._limits import SharedLimiter

__all__ = ["NO_CLIENT", "EnvClientFactory", "add_commands"]

#: Commands of this module that run without a HealthClient built by ``cli.run`` (they get ``None``).
NO_CLIENT: frozenset[str] = frozenset({"ingest"})


class EnvClientFactory:
    """A picklable client factory: ``HealthClient.from_env(**overrides, limiter=limiter)`` where it is called
    (in this process, or in each Ray actor, whose environment then supplies the credentials). The repr shows no
    setting: a token given as a flag is among them."""

    def __init__(self, **overrides: Any) -> None:
        self._overrides = overrides

    def __repr__(self) -> str:
        return "EnvClientFactory()"

    def __call__(self, limiter: SharedLimiter | None) -> HealthClient:
        from .._client import HealthClient

        return HealthClient.from_env(**self._overrides, limiter=limiter)


def _factory(args: argparse.Namespace) -> EnvClientFactory:
    overrides = client_overrides(args)
    overrides.pop("rate_limit", None)  # the job's rate (below), one for every client of the run, not each client's
    # enough connections for the workers (the client's default pool may be smaller than --concurrency);
    # --rate-limit is the job's (one rate for every client of the run), not each client's
    overrides["max_connections"] = getattr(args, "max_connections", None) or max(args.concurrency, 1)
    return EnvClientFactory(**overrides)


def _tasks(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return ("smart",)
    return tuple(t.strip() for v in values for t in v.split(",") if t.strip())


async def cmd_ingest(client: Any, args: argparse.Namespace, *, err: IO[str] | None = None) -> int:  # noqa: ARG001
    """Run ``ingest describe|upload|link|reconcile|status|export``."""
    from ..ingest import IngestJob

    stream = err or sys.stderr
    if args.ingest_command == "export":
        if args.format is None and Path(args.to).suffix.lower() not in (".csv", ".parquet"):
            raise InvalidRequest("export writes .csv or .parquet: give --to a name with that suffix, or --format")
        documents, items = await IngestJob.export(args.journal, args.to, format=args.format)
        if (await IngestJob.status(args.journal)).op == "link":
            stream.write(f"exported {documents} links\n")
        else:
            stream.write(f"exported {documents} documents and {items} report items\n")
        return 0
    if args.ingest_command == "reconcile":
        summary = await IngestJob.reconcile(args.journal, client_factory=_factory(args), concurrency=args.concurrency)
        stream.write(f"ingest reconcile: {summary.text()}\n")
        stream.flush()
        return 0 if summary.status.unknown == 0 else 1
    if args.ingest_command == "status":
        status = await IngestJob.status(args.journal)
        if args.json:
            data = {
                "op": status.op,
                "total": status.total,
                "done": status.done,
                "failed": status.failed,
                "retryable": status.retryable,
                "pending": status.pending,
                "unknown_outcome": status.unknown,
                "unknown_keys": list(status.unknown_keys),
            }
            if status.op == "link":
                data.update(
                    linked=status.linked,
                    errored=status.errored,
                    waiting=status.waiting,
                    errored_keys=list(status.errored_keys),
                )
            write_json(data, sys.stdout)
        else:
            out = sys.stdout
            out.write(f"{status.op or 'ingest'}: {status.total} items\n")
            out.write(f"done {status.done}\n")
            out.write(f"failed {status.failed} ({status.retryable} retryable: --retry-failed)\n")
            out.write(f"pending {status.pending}\n")
            flag = "--relink-unknown" if status.op == "link" else "--reupload-unknown"
            out.write(f"unknown outcome {status.unknown}" + (f" ({flag})\n" if status.unknown else "\n"))
            for key in status.unknown_keys:
                out.write(f"  {key}\n")
            if status.op == "link":
                out.write(f"linked {status.linked} (webhook LINKED)\n")
                out.write(f"errored {status.errored} (webhook ERRORED)\n")
                for key in status.errored_keys:
                    out.write(f"  {key}\n")
                out.write(f"waiting {status.waiting} (sent, no webhook recorded yet)\n")
        sys.stdout.flush()
        return 0 if status.pending == 0 and status.failed == 0 and status.unknown == 0 else 1

    options: dict[str, Any] = {
        "out": args.out,
        "journal": args.journal,
        "client_factory": _factory(args),
        "engine": args.engine,
        "concurrency": args.concurrency,
        "rate_limit": getattr(args, "rate_limit", None),
        "user_id": args.user_id,
        "retry_failed": args.retry_failed,
        "progress": False if args.quiet else None,
        "ray_address": args.ray_address,
        "workers": args.workers,
        "batch_size": args.batch_size,
    }
    if args.ingest_command == "upload":
        options.update(
            tasks=_tasks(args.tasks),
            wait=args.wait,
            reupload_unknown=args.reupload_unknown,
            reconcilable=args.reconcilable,
        )
        job = IngestJob.upload(args.source, **options)
    elif args.ingest_command == "link":
        options.update(hip_id=args.hip_id, relink_unknown=args.relink_unknown)
        job = IngestJob.link(args.source, **options)
    else:
        job = IngestJob.describe(args.source, **options)
    with _stop_on_sigterm() as terminated:
        try:
            summary = await job.run()
        except asyncio.CancelledError:
            if job.summary is not None:
                stream.write(f"ingest {job.op}: {job.summary.text()}\n")
                stream.flush()
            if terminated:
                _uncancel()
                return 143  # 128 + SIGTERM, as a shell reports a process it terminated
            raise
    stream.write(f"ingest {job.op}: {summary.text()}\n")
    stream.flush()
    return 0 if summary.ok else 1


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[list[bool]]:
    """While the job runs, SIGTERM (a redeploy, ``systemctl stop``, ``kill``) stops it as Ctrl-C does: the results
    received are committed, the summary is printed, and the next run resumes; without this, SIGTERM's default
    action would end the process at once (safe, by the journal, but the batch not yet committed would be asked
    again). Yields a flag that is true once SIGTERM arrived. Not where the loop cannot take signal handlers
    (Windows, a thread other than the main one): SIGTERM then keeps its default action."""
    terminated: list[bool] = []
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_sigterm() -> None:
        if not terminated and task is not None:
            terminated.append(True)
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError, ValueError):
        yield terminated
        return
    try:
        yield terminated
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _uncancel() -> None:
    """Take back our own cancellation (SIGTERM's), so that the command returns its exit status."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def add_commands(sub: Any, common: argparse.ArgumentParser) -> dict[str, Command]:
    """Add ``ingest`` and its subcommands to ``sub``; return the handler by command name."""
    p = sub.add_parser(
        "ingest",
        help="resumable bulk describe/upload/link with a crash-safe journal",
        description="Describe many ids or upload many files with a SQLite journal: kill it at any moment and run "
        "the same command again to resume; the output ends with exactly one JSON line per input item.",
    )
    isub = p.add_subparsers(dest="ingest_command", required=True, metavar="SUBCOMMAND")

    run = argparse.ArgumentParser(add_help=False)
    run.add_argument("--out", required=True, help="JSON Lines output file (appended to across resumed runs)")
    run.add_argument("--journal", help="SQLite journal file (default: OUT.ingest.db)")
    if "--rate-limit" not in {flag for action in common._actions for flag in action.option_strings}:
        run.add_argument(
            "--rate-limit", type=positive_number, metavar="R", help="requests per second for the whole job"
        )
    run.add_argument("--retry-failed", action="store_true", help="redo failed items whose error is retryable")
    run.add_argument("--engine", choices=("local", "ray"), default="local", help="where the work runs")
    run.add_argument("--ray-address", help="Ray cluster address (e.g. auto); default: a local Ray")
    run.add_argument("--workers", type=int, default=2, help="Ray actors (default 2)")
    run.add_argument("--quiet", action="store_true", help="no progress bar even on a terminal")
    run.add_argument(
        "--batch-size",
        type=int,
        default=256,
        metavar="N",
        help="results per output write, fsync and journal commit (default 256; at most 8 N wait while one commits)",
    )

    d = isub.add_parser(
        "describe",
        parents=[common, run],
        help="describe every id of a file",
        description="Describe every document id of IDS_FILE (one per line; blank lines and # comments skipped).",
    )
    d.add_argument("source", metavar="IDS_FILE", help="file of document ids, one per line")
    d.add_argument("--concurrency", type=in_flight, default=64, help="requests in flight (default 64)")

    u = isub.add_parser(
        "upload",
        parents=[common, run],
        help="upload every file of a directory or a list",
        description="Upload every file under DIR (recursively, sorted) or every path listed in a file. An upload "
        "interrupted in flight is of unknown outcome: never sent again unless --reupload-unknown.",
    )
    u.add_argument("source", metavar="DIR_OR_LIST", help="a directory, or a file listing paths one per line")
    u.add_argument("--concurrency", type=in_flight, default=8, help="uploads in flight (default 8)")
    u.add_argument("--tasks", action="append", metavar="TASK", help="smart (default), pii, classification")
    u.add_argument("--wait", action="store_true", help="wait for each document's processing result")
    u.add_argument(
        "--reupload-unknown", action="store_true", help="send again uploads whose outcome is unknown (may duplicate)"
    )
    u.add_argument(
        "--reconcilable",
        action="store_true",
        help="each file through presigned storage under an id of its own, so an unknown outcome is settled by asking "
        "(the processing tasks do not run there); chosen at the job's first run",
    )

    r = isub.add_parser(
        "reconcile",
        parents=[common],
        help="settle a reconcilable upload job's unknown outcomes by asking the service (uploads nothing)",
        description="Each upload of unknown outcome is looked for by its own document id: found, it is done (its "
        "line written); not stored, it becomes pending (the next run uploads it under the same id).",
    )
    r.add_argument("--journal", required=True, help="the job's journal file")
    r.add_argument("--concurrency", type=in_flight, default=16, help="requests in flight (default 16)")

    k = isub.add_parser(
        "link",
        parents=[common, run],
        help="link every care context of a CSV or JSON Lines file to its patient's ABHA (ABDM)",
        description="Link each care context (columns care_context_id, display, hi_type; the patient as "
        "abha_address, oid or partner_user_id; optional data: a FHIR bundle) with a journal: each is sent at "
        "most once. A link of unknown outcome is checked at the next run (a recorded webhook, or the patient's "
        "linked list: needs the row's oid and --hip-id) before it is sent again.",
    )
    k.add_argument("source", metavar="CSV_OR_JSONL", help="care contexts: .csv with a header row, or .jsonl")
    k.add_argument("--concurrency", type=in_flight, default=16, help="links in flight (default 16)")
    k.add_argument("--hip-id", help="your facility's HIP id, to check unknown outcomes (default: the client's)")
    k.add_argument(
        "--relink-unknown", action="store_true", help="send again links of unknown outcome that cannot be checked"
    )

    s = isub.add_parser("status", help="done / failed / pending / unknown outcome of a journal")
    s.add_argument("--journal", required=True, help="the job's journal file")
    s.add_argument("--json", action="store_true", help="one JSON object instead of text")

    e = isub.add_parser("export", help="a journal's results as two tables: documents and report items")
    e.add_argument("--journal", required=True, help="the job's journal file")
    e.add_argument(
        "--to",
        required=True,
        help="results.csv or results.parquet (report items go beside: results.items.csv; a link job's journal "
        "gives one table of links)",
    )
    e.add_argument("--format", choices=("csv", "parquet"), help="the format, whatever the suffix of --to")
    return {"ingest": cmd_ingest}
