"""The ingest job: the single writer of the journal and the output; engines only do the items."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import IO, TYPE_CHECKING, Any, Literal

import attrs

from .. import _telemetry
from .._progress import Progress
from ..errors import InvalidRequest, redacted
from ..resources.records.documents import task_params
from . import _export
from ._engine import ClientFactory, Engine, LocalEngine
from ._export import ExportFormat
from ._input import check_input, input_mark, read_input
from ._journal import UNKNOWN, IngestStatus, Journal, ScanResult, check_path
from ._links import LinkRow
from ._work import JobSpec, WorkItem, WorkResult

if TYPE_CHECKING:
    from .._client import HealthClient

__all__ = ["IngestJob", "IngestProgress", "IngestSummary"]

Op = Literal["describe", "upload", "link"]

#: Items fetched from the journal at a time to feed the engine.
_PAGE = 512


@attrs.frozen
class IngestSummary:
    """What a run did, and where the job stands (:attr:`status`)."""

    status: IngestStatus
    #: Items finished by this run (done, failed or of unknown outcome).
    processed: int = 0
    #: Output lines of an earlier, killed run adopted at start (their items were not requested again).
    adopted: int = 0
    #: Repeated keys of the input, skipped (each key is processed once).
    duplicates: int = 0
    #: Items refused at reading (a line that is not UTF-8, an id longer than 256 characters, a directory that
    #: cannot be listed): failed alone.
    invalid: int = 0
    #: True when the run was cancelled (Ctrl-C) before the end; the next run resumes.
    interrupted: bool = False
    elapsed: float = 0.0
    #: Blank lines of the input, skipped and counted (never sent: an output line is keyed by an id, and a blank
    #: line has none). Like :attr:`duplicates`, counted by the run that scans the input (an unchanged input is
    #: not scanned again on resume).
    blank: int = 0

    @property
    def ok(self) -> bool:
        """Every item is done: none failed, none of unknown outcome, none pending."""
        s = self.status
        return s.failed == 0 and s.unknown == 0 and s.pending == 0

    def text(self) -> str:
        """One line for people: ``done 10, failed 2 (1 retryable), unknown outcome 0, pending 0``."""
        s = self.status
        line = (
            f"done {s.done}, failed {s.failed} ({s.retryable} retryable), unknown outcome {s.unknown}, "
            f"pending {s.pending}"
        )
        if self.duplicates:
            line += f"; {self.duplicates} repeated input line(s) skipped"
        if self.blank:
            line += f"; {self.blank} blank input line(s) skipped"
        if s.op == "link":
            line += f"; webhooks recorded: linked {s.linked}, errored {s.errored}, waiting {s.waiting}"
        if self.interrupted:
            line += "; interrupted: run the same command again to resume"
        return line


class IngestProgress(Progress):
    """The CLI's progress bar (rate, ETA) with the unknown-outcome count, fed one :class:`WorkResult` at a time."""

    def __init__(self, label: str, *, total: int, enabled: bool | None = None, stream: IO[str] | None = None) -> None:
        super().__init__(label, enabled=enabled, stream=stream)
        self.total = total
        self.done = self.failed = 0
        self.unknown = 0  # shown on the bar

    def add(self, result: WorkResult) -> None:
        """Count one finished item and redraw (at most ten times a second)."""
        self.done += 1
        if result.unknown:
            self.unknown = (self.unknown or 0) + 1
        elif not result.ok:
            self.failed += 1
        self(self.done, self.failed, self.total)


class _Writer:
    """Collects results on the loop; commits them in batches in the journal's thread (one batch at a time)."""

    def __init__(self, journal: Journal, *, batch_size: int, interval: float) -> None:
        self._journal = journal
        self._size = batch_size
        self._interval = interval
        self._limit = 8 * batch_size
        self._batch: list[WorkResult] = []
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def offer(self, result: WorkResult) -> bool:
        """Take ``result`` now if there is room (the common case: no coroutine per result); ``False``: :meth:`put`."""
        if len(self._batch) >= self._limit or self._task.done():
            return False
        self._batch.append(result)
        self._wake.set()
        return True

    async def put(self, result: WorkResult) -> None:
        """Take ``result`` once there is room (the flusher is behind); raises the flusher's error if it stopped."""
        while len(self._batch) >= self._limit and not self._task.done():
            self._room.clear()
            waiter = asyncio.ensure_future(self._room.wait())
            try:
                await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
        if self._task.done():
            await self._task  # raises the flusher's error (a full disk, say)
            raise RuntimeError("the ingest writer stopped")
        self._batch.append(result)
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            if not self._closing and len(self._batch) < self._size and self._interval > 0:
                await asyncio.sleep(self._interval)  # let a batch gather: one fsync for many lines
            batch, self._batch = self._batch, []
            self._wake.clear()
            if batch:
                await self._journal.call(self._journal.commit, batch)
            self._room.set()
            if self._closing and not self._batch:
                return

    async def close(self) -> None:
        """Commit what is left. The flusher is waited for to its end however often this is cancelled (the journal
        must not be closed under it); a cancellation is then re-raised, never swallowed."""
        self._closing = True
        self._wake.set()
        cancelled = await _to_its_end(self._task)
        try:
            await self._task  # done: its error, if it stopped on one (a full disk, say)
        finally:
            if cancelled:
                raise asyncio.CancelledError


async def _to_its_end(task: asyncio.Future[Any]) -> bool:
    """Wait for ``task`` to end without ever cancelling it, however often this caller is cancelled meanwhile;
    whether it was (the caller then re-raises the cancellation, once its own cleanup is done)."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            cancelled = True
    return cancelled


class IngestJob:
    """A resumable ingest job: describe many document ids, upload many files, or link many care contexts, with a
    journal that survives crashes. Build one with :meth:`describe`, :meth:`upload` or :meth:`link`, then
    ``summary = await job.run()``.

    Running the same job again (same output, same journal) resumes: items already done are not requested again,
    and the output ends with exactly one line per input item. See :mod:`health_async.ingest` for the design.

    Args:
        op: ``"describe"``, ``"upload"`` or ``"link"``.
        source: the ids file (describe), a directory or a file listing paths (upload), or the care contexts as CSV
            or JSON Lines (link).
        out: the JSON Lines output file.
        journal: the SQLite journal (default: ``<out>.ingest.db``).
        client: a :class:`~health_async.HealthClient` to use as is (local engine only; never closed by the job).
        client_factory: builds the client(s) as ``factory(limiter)``; default ``HealthClient.from_env``.
        engine: ``"local"`` (one client in this process), ``"ray"`` (Ray actors; needs ``ray``), or an
            :class:`Engine` instance.
        concurrency: requests in flight (per worker for Ray).
        rate_limit: requests per second for the whole job.
        tasks: upload processing tasks (default ``("smart",)``).
        wait: after each upload, wait for its processing result (``client.documents.wait``).
        user_id: the OID sent as ``X-Pt-Id`` (default: the client's).
        retry_failed: also redo failed items whose error is retryable (transport errors, 5XX, 429).
        reupload_unknown: also resend uploads whose outcome is unknown (they may then exist twice); for a link
            job, also resend links of unknown outcome that cannot be checked (``relink_unknown`` is the same).
        hip_id: link: your facility's HIP id, to check links of unknown outcome (default: the client's
            ``partner_hip_id``).
        reconcilable: upload: every file goes through presigned storage under a document id of its own
            (``uuid5`` of the job's namespace, kept in the journal, and the file's key), so that an upload of
            unknown outcome is settled by asking (``describe``) at the next run: found, done; not stored, uploaded
            again under the same id (never a second document). The processing ``tasks`` do not run on that route.
            Chosen for a job once, at its first run.
        progress: show a progress bar on stderr (``None``: when stderr is a terminal).
        ray_address, workers: for ``engine="ray"``.
        batch_size, flush_interval: how results are grouped into one output write + fsync + journal commit.
    """

    def __init__(
        self,
        op: Op,
        source: str | os.PathLike[str],
        *,
        out: str | os.PathLike[str],
        journal: str | os.PathLike[str] | None = None,
        client: HealthClient | None = None,
        client_factory: ClientFactory | None = None,
        engine: Literal["local", "ray"] | Engine = "local",
        concurrency: int = 64,
        rate_limit: float | None = None,
        tasks: Iterable[str] = ("smart",),
        wait: bool = False,
        user_id: str | None = None,
        retry_failed: bool = False,
        reupload_unknown: bool = False,
        relink_unknown: bool = False,
        hip_id: str | None = None,
        reconcilable: bool = False,
        progress: bool | None = None,
        progress_stream: IO[str] | None = None,
        ray_address: str | None = None,
        workers: int = 2,
        batch_size: int = 256,
        flush_interval: float | None = None,
    ) -> None:
        if op not in ("describe", "upload", "link"):
            raise InvalidRequest("op must be 'describe', 'upload' or 'link'")
        source, out = check_path("source", source), check_path("out", out)
        journal = check_path("journal", journal) if journal is not None else None
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise InvalidRequest("concurrency must be a positive int")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidRequest("batch_size must be a positive int")
        if rate_limit is not None and not (isinstance(rate_limit, int | float) and rate_limit > 0):
            raise InvalidRequest("rate_limit must be > 0 requests per second")
        if isinstance(engine, str) and engine not in ("local", "ray"):
            raise InvalidRequest("engine must be 'local', 'ray' or an Engine")
        if not isinstance(engine, str) and not isinstance(engine, Engine):
            raise InvalidRequest("engine must be 'local', 'ray' or an Engine")
        if client is not None and engine == "ray":
            raise InvalidRequest("engine='ray' builds a client in each actor: give a client_factory, not a client")
        task_tuple = (tasks,) if isinstance(tasks, str) else tuple(tasks)
        if op == "upload":
            task_params(task_tuple)  # an unknown task fails here, before anything is read or sent
        if reconcilable and op != "upload":
            raise InvalidRequest("reconcilable is for upload jobs")
        if reconcilable and (wait or task_tuple != ("smart",)):
            raise InvalidRequest(
                "a reconcilable upload goes through presigned storage, where the processing tasks do not run: "
                "give no tasks and no wait"
            )
        if user_id is not None and (not isinstance(user_id, str) or not user_id.strip()):
            raise InvalidRequest("user_id must be a non-empty string")
        if hip_id is not None and (not isinstance(hip_id, str) or not hip_id.strip()):
            raise InvalidRequest("hip_id must be a non-empty string")
        reupload_unknown = bool(reupload_unknown or relink_unknown)
        self.op: Op = op
        self.source = source
        self._source_path = os.path.abspath(self.source)  # kept in the journal (ingest reconcile reads it)
        self.out = out
        self.journal_path = journal if journal is not None else self.out + ".ingest.db"
        self.spec = JobSpec(
            op=op,
            concurrency=concurrency,
            tasks=task_tuple,
            wait=wait,
            user_id=user_id,
            hip_id=hip_id,
            relink_unknown=reupload_unknown,
            reconcilable=bool(reconcilable),
        )
        self._client = client
        self._factory = client_factory
        self._engine = engine
        self.rate_limit = rate_limit
        self.retry_failed = retry_failed
        self.reupload_unknown = reupload_unknown
        self._progress = progress
        self._progress_stream = progress_stream
        self.ray_address = ray_address
        self.workers = workers
        self.batch_size = batch_size
        # uploads are slow and must reach the output fast (a crash would leave them of unknown outcome)
        self.flush_interval = flush_interval if flush_interval is not None else (0.05 if op == "describe" else 0.0)
        #: The latest summary: set when :meth:`run` ends, also by cancellation.
        self.summary: IngestSummary | None = None
        self._running = False

    def __repr__(self) -> str:
        return f"IngestJob(op={self.op!r}, concurrency={self.spec.concurrency})"

    @classmethod
    def describe(cls, ids_file: str | os.PathLike[str], *, out: str | os.PathLike[str], **options: Any) -> IngestJob:
        """A job describing every id of ``ids_file`` (one per line) into ``out``: ``{"key", "index",
        "document"}`` lines, or ``{"key", "index", "error"}``. Options as for :class:`IngestJob`."""
        return cls("describe", ids_file, out=out, **options)

    @classmethod
    def upload(cls, source: str | os.PathLike[str], *, out: str | os.PathLike[str], **options: Any) -> IngestJob:
        """A job uploading every file of directory ``source`` (recursively, in sorted order), or every path
        listed in file ``source``, into ``out``: ``{"key", "index", "upload": {"document_id"}}`` lines (with
        ``"processing"`` when ``wait``), or ``{"key", "index", "error"}``. Options as for :class:`IngestJob`."""
        return cls("upload", source, out=out, **options)

    @classmethod
    def link(cls, source: str | os.PathLike[str], *, out: str | os.PathLike[str], **options: Any) -> IngestJob:
        """A job linking every care context of ``source`` (CSV or JSON Lines: see
        :mod:`health_async.ingest._links` for the columns) to its patient's ABHA, one request each, into ``out``:
        ``{"key", "index", "link": {"care_context_id", "status"}}`` lines (``status``: ``sent``, or ``listed`` /
        ``webhook`` for a link of unknown outcome found made), or ``{"key", "index", "error"}``. Each link is
        sent at most once unless its outcome is unknown and cannot be checked and ``relink_unknown`` is given.
        Record the ``abha.link_care_context`` webhooks with :class:`~health_async.ingest.LinkRecorder`. Options
        as for :class:`IngestJob` (``hip_id``, ``relink_unknown``)."""
        return cls("link", source, out=out, **options)

    @staticmethod
    async def export(
        journal: str | os.PathLike[str], to: str | os.PathLike[str], *, format: ExportFormat | None = None
    ) -> tuple[int, int]:
        """Write the job's results as two flat tables (see :mod:`health_async.ingest._export` for the columns and
        their types): ``to`` (one row per item: document id, type, date, files, status or error) and, beside it,
        ``<stem>.items.<suffix>`` (one row per smart-report item). CSV with the standard library; Parquet with
        ``pyarrow`` (``pip install 'health_async[parquet]'``). The format comes from the suffix or ``format``.
        Streams in constant memory; reads the journal without changing it. Returns (document rows, item rows).

        Cancelling it (Ctrl-C) stops the export's thread and waits for it: nothing is published, no ``.partial``
        file is left, and the cancellation propagates.

        Judgement call: a static method on the journal's path, like :meth:`status`: an export needs no client."""
        return await _export.export_in_thread(journal, to, format=format)

    @classmethod
    async def reconcile(
        cls,
        journal: str | os.PathLike[str],
        *,
        client: HealthClient | None = None,
        client_factory: ClientFactory | None = None,
        concurrency: int = 16,
        progress: bool | None = False,
    ) -> IngestSummary:
        """Settle the uploads of unknown outcome of a reconcilable upload job's journal by asking the service, and
        upload nothing: each is looked for by its own document id (``describe``); found, it is done (its line
        written to the job's output); not stored, it becomes pending (the next run uploads it, under the same id).
        A reconcilable job's runs do this by themselves; this is the same without a run.
        :class:`~health_async.errors.InvalidRequest` for a journal of another kind of job, or one whose uploads
        carry no id of ours (not reconcilable: there is nothing to ask about)."""
        meta = Journal(journal)
        try:
            await meta.call(meta.open_readonly)
            op, out, mode, source = [
                await meta.call(meta.meta, name) for name in ("op", "out", "reconcilable", "source")
            ]
        finally:
            await meta.call(meta.close)
            meta.shutdown()
        if op != "upload" or mode != "1" or out is None or source is None:
            raise InvalidRequest(
                "only a reconcilable upload job's journal can be reconciled (its uploads carry ids of ours); for "
                "another job, check the document list and rerun with --reupload-unknown"
            )
        job = cls(
            "upload",
            source,
            out=out,
            journal=journal,
            client=client,
            client_factory=client_factory,
            concurrency=concurrency,
            reconcilable=True,
            progress=progress,
        )
        job.spec = attrs.evolve(job.spec, reconcile_only=True)
        return await job.run()

    @staticmethod
    async def status(journal: str | os.PathLike[str]) -> IngestStatus:
        """Counts of a job's journal: done, failed (retryable), pending, unknown outcome (with their keys).

        Read-only: safe while a run is going on (items it has in flight count as unknown until they end)."""
        j = Journal(journal)
        try:
            await j.call(j.open_readonly)
            if await j.call(j.meta, "op") is None:
                raise InvalidRequest("the file is not an ingest journal")
            return await j.call(j.status)
        finally:
            await j.call(j.close)
            j.shutdown()

    def _make_engine(self) -> Engine:
        if not isinstance(self._engine, str):
            return self._engine
        if self._engine == "ray":
            try:
                from ._ray import RayEngine
            except ImportError as exc:
                raise InvalidRequest("engine='ray' needs the ray package: pip install 'ray>=2'") from exc
            return RayEngine(self._factory, address=self.ray_address, workers=self.workers, rate_limit=self.rate_limit)
        return LocalEngine(self._client, client_factory=self._factory, rate_limit=self.rate_limit)

    async def run(self) -> IngestSummary:
        """Run (or resume) the job; return its summary.

        Cancellation (Ctrl-C) stops the workers, commits the results already received, sets :attr:`summary`
        and is re-raised; the next run resumes. Raises :class:`~health_async.errors.InvalidRequest` before
        anything is sent for a missing or unreadable input, a journal that belongs to another job or output, or an
        output that is in use by another run.
        """
        if self._running:
            raise RuntimeError("this IngestJob is already running")
        self._running = True
        # one span around the run (telemetry: the client's when given, else on when OpenTelemetry is installed)
        telemetry = self._client._session.telemetry if self._client is not None else _telemetry.default()
        try:
            attributes = {"health_async.operation": "ingest", "health_async.ingest.op": self.op}
            with _telemetry.span(telemetry, "ingest", attributes):
                return await self._run()
        finally:
            self._running = False

    async def _run(self) -> IngestSummary:
        if not self.spec.reconcile_only:
            check_input(self.op, self.source)
        engine = self._make_engine()
        journal = Journal(self.journal_path)
        started = time.monotonic()
        scan = ScanResult(0, 0, 0)
        adopted = processed = blank = 0
        interrupted = recovered = False
        progress: IngestProgress | None = None
        status: IngestStatus | None = None
        try:
            await journal.call(journal.open)
            await journal.call(journal.bind, self.op, self.out)
            if not self.spec.reconcile_only:
                await self._settle_source(journal)
            if self.op == "upload":
                await self._settle_mode(journal)
            if not self.spec.reconcile_only:
                items = read_input(self.op, self.source)
                scan = await journal.call(journal.scan, items, input_mark(self.source))
                blank = items.blank  # read in the journal's thread, which has finished with it
            adopted = await journal.call(journal.recover)
            recovered = True
            if self.op == "link":
                processed += await self._settle_by_webhook(journal)
            todo = await journal.call(
                journal.count_todo, self.retry_failed, self._unknown_todo, self.spec.reconcile_only
            )
            progress = IngestProgress(self.op, total=todo, enabled=self._progress, stream=self._progress_stream)
            if todo:
                results = engine.run(self.spec, self._feed(journal))  # before the writer: it may raise
                writer = _Writer(journal, batch_size=self.batch_size, interval=self.flush_interval)
                try:
                    async for result in results:
                        if not writer.offer(result):
                            await writer.put(result)
                        processed += 1
                        progress.add(result)
                finally:
                    try:
                        aclose = getattr(results, "aclose", None)
                        if aclose is not None:
                            await aclose()
                    finally:
                        await writer.close()
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            if progress is not None:
                progress.close()
            # The wrap-up runs to its end however often this run is cancelled meanwhile (a second Ctrl-C): the
            # journal is finished, read, closed and its thread stopped, and the summary set; then the cancellation
            # is re-raised.
            wrap_up = asyncio.ensure_future(self._wrap_up(journal, recovered))
            cancelled = await _to_its_end(wrap_up)
            try:
                status = wrap_up.result()  # its error, if it failed (a journal that cannot be written)
                if status is not None:
                    self.summary = IngestSummary(
                        status=status,
                        processed=processed,
                        adopted=adopted,
                        duplicates=scan.duplicates,
                        invalid=scan.invalid,
                        blank=blank,
                        interrupted=interrupted or cancelled,
                        elapsed=time.monotonic() - started,
                    )
            finally:
                if cancelled:
                    raise asyncio.CancelledError
        assert self.summary is not None
        return self.summary

    async def _wrap_up(self, journal: Journal, recovered: bool) -> IngestStatus | None:
        """After the work: uploads left in flight and the failure tail (once recovered: before, lines after the
        committed offset are not yet accounted for), the status; then the journal closed and its thread stopped."""
        status = None
        try:
            if journal._db is not None:
                if recovered:
                    await journal.call(self._finish, journal)
                status = await journal.call(journal.status)
        finally:
            await journal.call(journal.close)
            journal.shutdown()  # its thread is idle now: returns at once
        return status

    @staticmethod
    def _finish(journal: Journal) -> None:
        # in the journal's thread: uploads cancelled mid-flight have no result: unknown outcome; then, if nothing
        # is left to do, the failure tail (one line for each failed or unknown item)
        if journal._out is None:
            return
        journal.resolve_inflight()
        journal.write_tail()

    @property
    def _unknown_todo(self) -> bool:
        """Whether items of unknown outcome are done again: with ``reupload_unknown``; always for links and
        reconcilable uploads, which are checked before they are sent again."""
        return self.reupload_unknown or self.op == "link" or self.spec.reconcilable

    async def _settle_source(self, journal: Journal) -> None:
        """A journal belongs to one input: refuse (:class:`InvalidRequest`, nothing read or sent) a run with another
        one, whose items would otherwise be added to the first input's, silently making one job of two.

        Judgement call: refused rather than warned about, since a warning on stderr is easily missed and the merge
        cannot be undone; the same input file, changed (lines added), is still the job's input and is scanned
        again. A journal of an earlier version, which did not record its input, is known by its last scan's mark
        (which starts with the input's path); one never scanned takes this run's."""
        recorded = await journal.call(journal.meta, "source")
        if recorded is None:
            mark = await journal.call(journal.meta, "input")
            if mark is not None:
                recorded = mark.rsplit("|", 2)[0]
        if recorded is not None and recorded != self._source_path:
            raise InvalidRequest(
                "the journal was made from another input file: give that one, or another journal (--journal) for "
                "this input; one journal is one job"
            )
        await journal.call(journal.settle_meta, "source", self._source_path)

    async def _settle_mode(self, journal: Journal) -> None:
        """An upload job is reconcilable or not from its first run on (its uploads carry ids of ours, or not);
        a reconcilable one gets its namespace. A journal written before this existed is not reconcilable."""
        status = await journal.call(journal.status)
        first = "1" if self.spec.reconcilable else "0"
        if await journal.call(journal.meta, "reconcilable") is None and status.total:
            first = "0"  # an earlier version's job: its uploads carry no id of ours
        mode = await journal.call(journal.settle_meta, "reconcilable", first)
        if (mode == "1") != self.spec.reconcilable:
            raise InvalidRequest(
                "this journal's job was started "
                + ("with --reconcilable: give it again" if mode == "1" else "without --reconcilable: run it so")
            )
        await journal.call(journal.settle_meta, "source", self._source_path)
        if self.spec.reconcilable:
            namespace = await journal.call(journal.settle_meta, "namespace", str(uuid.uuid4()))
            self.spec = attrs.evolve(self.spec, namespace=namespace)

    async def _settle_by_webhook(self, journal: Journal) -> int:
        """Links of unknown outcome whose webhook was recorded: ``LINKED`` is done (no request), ``ERRORED`` is a
        retryable failure (it was not linked). Committed before the engine starts; returns how many."""
        results = []
        for key, index, payload, status, error in await journal.call(journal.settled_by_webhook):
            if status == "LINKED":
                cid = LinkRow.from_payload(payload).care_context.care_context_id if payload else None
                line: dict[str, Any] = {"index": index, "link": {"care_context_id": cid, "status": "webhook"}}
                results.append(WorkResult(key, line, ok=True, retryable=False))
            else:
                message = "ABDM reported the link ERRORED" + (f": {redacted(error)}" if error else "")
                line = {"index": index, "error": {"type": "LinkErrored", "message": message, "retryable": True}}
                results.append(WorkResult(key, line, ok=False, retryable=True))
        if results:
            await journal.call(journal.commit, results)
        return len(results)

    async def _feed(self, journal: Journal) -> AsyncIterator[WorkItem]:
        """The items to do, read page by page from the journal. An upload is committed as in flight before it is
        handed to the engine; links in groups of ``concurrency`` (one transaction, one fsync, per group: a crash
        turns at most that many into unknown outcomes, each then checked)."""
        after = 0
        reconcile_only = self.spec.reconcile_only
        marks = self.op != "describe" and not reconcile_only
        step = self.spec.concurrency if self.op == "link" else 1
        while True:
            page = await journal.call(journal.todo, after, _PAGE, self.retry_failed, self._unknown_todo, reconcile_only)
            if not page:
                return
            after = page[-1].rowid
            for start in range(0, len(page), step):
                chunk = page[start : start + step]
                if marks:
                    await journal.call(journal.mark_inflight, [row.key for row in chunk])
                for row in chunk:
                    recheck = (self.op == "link" or self.spec.reconcilable) and row.state == UNKNOWN
                    yield WorkItem(key=row.key, index=row.idx, payload=row.payload, recheck=recheck)
