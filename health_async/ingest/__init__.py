"""Resumable ingestion that survives crashes: describe many documents, upload many files, or link many care contexts
to ABHAs (ABDM), with a journal.

``health_async.ingest`` is a subpackage apart from the client (``import health_async`` never imports it)::

    from health_async.ingest import IngestJob

    job = IngestJob.describe("ids.txt", out="docs.jsonl", journal="ingest.db", concurrency=64)
    summary = await job.run()        # kill it at any moment; run it again: it resumes
    print(summary.text())            # done 9998, failed 2 (2 retryable), unknown outcome 0, pending 0

The same from the command line: ``health-async ingest describe ids.txt --out docs.jsonl``,
``health-async ingest upload DIR --out uploads.jsonl``, ``health-async ingest link visits.csv --out links.jsonl``,
``health-async ingest status --journal ...``. The link job (:meth:`IngestJob.link`), its input, its keys and how
an unknown outcome is settled: :mod:`health_async.ingest._links`; :class:`LinkRecorder` records the
``abha.link_care_context`` webhooks against its journal.

Output
------
JSON Lines, exactly one line per input item once a run completes: ``{"key", "index", "document"}`` (describe),
``{"key", "index", "upload": {"document_id"}}`` (upload; with ``"processing"`` when waiting), or ``{"key",
"index", "error": {"type", "message", "retryable"[, "status"][, "outcome": "unknown"]}}``. ``key`` is the id or
the absolute file path; ``index`` the item's position among the input's items (blank lines, ``#`` comments
and repeated keys not counted). Lines come in completion order, not input order.

Journal and the order of writes (why a ``kill -9`` loses nothing and duplicates nothing)
-----------------------------------------------------------------------------------------
The journal is a SQLite file (WAL, ``synchronous=FULL``) holding every item's state (``pending``,
``inflight``, ``done``, ``failed``, ``unknown``) and the byte offset of the output up to which it vouches for
it. One thread owns the connection and the output file; the event loop only hands it batches, so a commit or
an ``fsync`` never stalls the workers. For each batch of results, in that thread:

1. the successes' lines are written to the output, which is flushed and ``fsync``-ed;
2. then, in one transaction, their keys are committed as ``done`` (failures as ``failed``/``unknown``, with
   their error line kept in the journal) together with the output's new byte offset.

At start, the output is read from the last committed offset: complete result lines there were written by a
batch whose commit a crash prevented: they are *adopted* (their keys marked done, not requested again); the
first thing that is not such a line (a partial last line, an earlier run's failure tail) and all after it is
cut off. So every item has at most one result line, and an item is requested again only if the crash came
before its line reached the disk (the items in flight and the batch not yet written).

Failures reach the output only at the end: when a run finishes with nothing pending, the lines of every failed
and unknown-outcome item are written after the committed offset as a *tail* (not committed). The next run
cuts the tail and writes it anew at its end, so ``--retry-failed`` (which redoes only failures whose error is
retryable: transport errors, 5XX, 429) and ``--reupload-unknown`` supersede old error lines without ever
leaving two lines for one item. Between a crash and the next complete run, failed items have no line yet.

Uploads are not idempotent
--------------------------
Each upload is committed as ``inflight`` before it is handed to any engine. An upload found in flight after a
crash (or cancelled by Ctrl-C), with no line in the output, may or may not have created a document: it becomes
``unknown`` and is *not* sent again, unless ``--reupload-unknown`` (``reupload_unknown=True``). The same for an
upload that failed after it may have reached the service (timeout or reset after sending, 5XX without an
answer). Judgement call: the job leaves them to the user. It could look for them in the document list, but an
uploaded file carries no key of ours the listing would show (no client-side id, the title and dates are the
service's), so a match by time or type could claim a document that another upload made, or miss one still being
processed; resending on a guess would create duplicates of health records. ``health-async ingest status`` lists
them; they get an ``OutcomeUnknown`` error line in the tail until resolved, so "one line per item" holds at the
end of every complete run. A kill between the in-flight commit and the send also makes an unknown (never a
duplicate): the job errs on the side of not sending twice.

Input
-----
A missing, unreadable or wrong-kind input raises :class:`~health_async.errors.InvalidRequest` before anything
is sent (the CLI prints one line and exits 2). Blank lines and ``#`` comments are skipped; a repeated key is
processed once and counted (:attr:`IngestSummary.duplicates`); a line that is not UTF-8, or a subdirectory that
cannot be listed, fails that item alone (its key shows the bytes escaped). An unchanged input file (same size
and mtime) is not scanned again on resume; a changed one adds its new items (items are never removed). The
scan keeps a set of the input's keys in memory (memory O(number of items), once per scan).

Engines
-------
``engine="local"`` (:class:`LocalEngine`: one :class:`~health_async.HealthClient`, ``concurrency`` workers),
``engine="ray"`` (``health_async.ingest._ray.RayEngine``, imported only then), or any :class:`Engine`.
"""

from typing import Any

from ..errors import RayEngineError
from ._engine import ClientFactory, ClientRecipe, Engine, LocalEngine, RateLimiter
from ._job import IngestJob, IngestProgress, IngestSummary
from ._journal import IngestStatus
from ._links import LinkRecorder
from ._work import JobSpec, WorkItem, WorkResult, process

__all__ = [
    "ClientFactory",
    "ClientRecipe",
    "Engine",
    "IngestJob",
    "IngestProgress",
    "IngestStatus",
    "IngestSummary",
    "JobSpec",
    "LinkRecorder",
    "LocalEngine",
    "RateLimiter",
    "RayEngine",
    "RayEngineError",
    "WorkItem",
    "WorkResult",
    "process",
]


def __getattr__(name: str) -> Any:
    # RayEngine is imported only when asked for: the ingest package (and the local engine) never imports ray.
    if name == "RayEngine":
        from ._ray import RayEngine

        return RayEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
