"""What the ingest job's journal and output cost: ``IngestJob.describe`` beside ``describe_many`` in the same run.

    .venv/bin/python benchmarks/ingest_bench.py                 # 20 000 ids, 5 rounds
    .venv/bin/python benchmarks/ingest_bench.py --ids 5000 --repeats 3

The built-in FakeHealthServer runs in a separate process on 127.0.0.1 (recording off), pinned to core 1 and the
client (with the journal's thread) to core 0 where the machine has two cores: the server's CPU is not the
client's, and the journal's work is paid on the client's own core, as it would be on a machine talking to the
real service. One client, the same concurrency, measured in alternation ``--repeats`` times:

* ``describe_many``: the library's bulk helper, results consumed and dropped (the baseline);
* ``+ lines``: the same, each result turned into its JSON line and written to a file (no fsync, no journal):
  what any bulk job that keeps its results pays;
* ``ingest``: ``IngestJob.describe`` with a fresh journal and output: the same lines, plus the journal (SQLite,
  WAL, synchronous=FULL), the batched fsyncs and the input scan.

Prints requests per second and client CPU per document (medians), and the ingest's cost against both; the
target is at most 10 % more CPU per document than ``describe_many`` (the journal and output's whole cost, the
JSON lines included).

``--floor`` adds two ablations that show where that budget goes: the same two runs with the document decode
(``describe_many``'s fast decode) and the output line (``document_json``) replaced by constants, patched in for
the case only. ``ingest, floor`` against ``describe_many, floor`` is the journal's own cost (scan, feed, commit,
fsync, lines written) with nothing parsed or encoded; ``ingest, floor`` against the real ``describe_many`` is the
best any output line could do: a line, even the body copied as sent, and a check of the body can only add to it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import free_port, pin

from health_async import HealthClient
from health_async._cli._output import emit
from health_async._plain import document_json
from health_async.ingest import IngestJob, _work
from health_async.models import Document
from health_async.resources.records import documents

Case = Callable[[HealthClient, list[str], int, Path], Awaitable[None]]

USER = "bench-user"


def _serve(port: int, ids: int, ready: Any) -> None:
    from health_async.testing import FakeHealthServer

    pin(1)  # the server on its own core: its CPU is not the client's, and it does not move onto the client's

    async def main() -> None:
        server = FakeHealthServer(port=port, users=1, documents_per_user=200, record=False)
        seeded = server.data.documents[server.data.user_ids[0]]
        bodies = list(seeded.values())
        server.data.documents[USER] = {f"doc-{i:06d}": bodies[i % len(bodies)] for i in range(ids)}
        await server.start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


async def describe_many(client: HealthClient, ids: list[str], concurrency: int, _: Path) -> None:
    async for _result in client.documents.describe_many(ids, concurrency=concurrency):
        pass


async def with_lines(client: HealthClient, ids: list[str], concurrency: int, work: Path) -> None:
    with open(work / f"lines-{time.monotonic_ns()}.jsonl", "w") as out:  # noqa: ASYNC230 - as a naive job would
        async for result in client.documents.describe_many(ids, concurrency=concurrency):
            emit(result, out)


async def ingest(client: HealthClient, ids: list[str], concurrency: int, work: Path) -> None:
    tag = time.monotonic_ns()
    job = IngestJob.describe(
        work / "ids.txt", out=work / f"out-{tag}.jsonl", journal=work / f"j-{tag}.db", client=client,
        concurrency=concurrency, progress=False,
    )  # fmt: skip
    summary = await job.run()
    assert summary.status.done == len(ids), summary


@contextlib.contextmanager
def _free(document: Document) -> Iterator[None]:
    """The decode and the line made free: every answer is ``document``, every line its JSON made once."""
    line = document_json(document)

    def decoded(_body: object) -> Document:
        return document

    def encoded(_doc: object) -> object:
        return line

    with (
        mock.patch.object(documents, "document_from_bytes", decoded),
        mock.patch.object(_work, "document_json", encoded),
    ):
        yield


def floor(case: Case) -> Case:
    """``case`` with the document decode and the output line replaced by constants (``--floor``)."""

    async def run(client: HealthClient, ids: list[str], concurrency: int, work: Path) -> None:
        document = await client.documents.describe(ids[0])
        with _free(document):
            await case(client, ids, concurrency, work)

    return run


def _clear(work: Path) -> None:
    """Remove what a case wrote (outside its timing), the ids file excepted: every case and round starts on the
    same disk. Left in place, each round added about 130 MB of output (20 000 ids), and the ingest's fsyncs and
    writes cost more CPU in the later rounds (measured with a stub engine: the commit 3.5 -> 8-9 us a document
    after some 200 MB, intermittently): the journal's figure then depended on the round, not the code."""
    for path in work.iterdir():
        if path.name != "ids.txt":
            path.unlink()


async def bench(
    url: str, ids: list[str], concurrency: int, repeats: int, with_floor: bool
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    cases: dict[str, Case] = {"describe_many": describe_many, "+ lines": with_lines, "ingest": ingest}
    if with_floor:
        cases |= {"describe_many, floor": floor(describe_many), "ingest, floor": floor(ingest)}
    rates: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}  # client CPU per request (all its threads), us
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "ids.txt").write_text("\n".join(ids) + "\n")
        async with HealthClient(base_url=url, token="fake-token", user_id=USER, max_connections=concurrency) as client:
            await describe_many(client, ids[:500], concurrency, work)  # warm up connections and code paths
            names = list(cases)
            for round_ in range(repeats):
                # rotate the order every round: the first case of a round runs on a colder machine
                for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                    case = cases[name]
                    started, cpu_started = time.perf_counter(), time.process_time()
                    await case(client, ids, concurrency, work)
                    rates[name].append(len(ids) / (time.perf_counter() - started))
                    cpu[name].append((time.process_time() - cpu_started) / len(ids) * 1e6)
                    _clear(work)
    return rates, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--floor", action="store_true", help="also run the ablations with decode and line free")
    args = parser.parse_args()
    port = free_port()
    ready = multiprocessing.Event()
    pinned = pin(0)  # the client and every thread it starts (the journal's) on core 0, the server on core 1
    proc = multiprocessing.Process(target=_serve, args=(port, args.ids, ready), daemon=True)
    proc.start()
    try:
        if not ready.wait(60):
            raise SystemExit("the fake server did not start")
        ids = [f"doc-{i:06d}" for i in range(args.ids)]
        rates, cpu = asyncio.run(bench(f"http://127.0.0.1:{port}", ids, args.concurrency, args.repeats, args.floor))
    finally:
        proc.terminate()
        proc.join(5)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    base, lines = medians["describe_many"], medians["+ lines"]
    print(f"{args.ids} ids, concurrency {args.concurrency}, {args.repeats} rounds (medians, requests/s)")
    print(f"  client pinned to core 0, server to core 1: {pinned}")
    for name, value in medians.items():
        spread = ", ".join(f"{v:,.0f}" for v in rates[name])
        print(f"  {name:<20} {value:>9,.0f}/s   ({spread})   client CPU {cpu_medians[name]:.0f} us/request")
    cost = 1 - medians["ingest"] / base
    print(f"  ingest vs describe_many: {cost:+.1%} fewer documents a second")
    print(f"  ingest vs + lines:       {1 - medians['ingest'] / lines:+.1%} fewer (journal, fsync, scan only)")
    # the target's measure: how much more CPU a document costs in an ingest than in describe_many (ratio - 1)
    cpu_cost = cpu_medians["ingest"] / cpu_medians["describe_many"] - 1
    lines_cost = cpu_medians["+ lines"] / cpu_medians["describe_many"] - 1
    print(f"  client CPU per document, ingest against describe_many: {cpu_cost:+.1%} (target <= +10%)")
    print(f"  client CPU per document, + lines against describe_many: {lines_cost:+.1%} (the JSON lines alone)")
    # in absolute terms: what the journal (durability, resume) adds to a job writing the same lines, and the whole
    journal_us = cpu_medians["ingest"] - cpu_medians["+ lines"]
    whole_us = cpu_medians["ingest"] - cpu_medians["describe_many"]
    print(f"  client CPU per document, absolute: ingest - + lines = {journal_us:+.1f} us (the journal), "
          f"ingest - describe_many = {whole_us:+.1f} us (journal and lines)")  # fmt: skip
    # the same difference taken within each round (the two cases ran back to back, on the same machine load),
    # then its median: steadier than the difference of the two medians on a shared machine
    paired = [ing - lines_ for ing, lines_ in zip(cpu["ingest"], cpu["+ lines"], strict=True)]
    spread = ", ".join(f"{v:.1f}" for v in paired)
    print(f"  the journal, round by round (ingest - + lines): median {statistics.median(paired):+.1f} us ({spread})")
    if args.floor:
        journal = cpu_medians["ingest, floor"] / cpu_medians["describe_many, floor"] - 1
        best = cpu_medians["ingest, floor"] / cpu_medians["describe_many"] - 1
        decode = cpu_medians["describe_many"] - cpu_medians["describe_many, floor"]
        line = cpu_medians["ingest"] - cpu_medians["ingest, floor"] - decode
        print(f"  floor: the journal alone (decode and line free on both sides): {journal:+.1%}")
        print(f"  floor: ingest with a free line and no decode against describe_many: {best:+.1%} (target <= +10%)")
        print(f"  in the run: the decode {decode:.0f} us a document, the line and its result {line:.0f} us")
    summary = {"medians": medians, "cost": cost, "cpu_us": cpu_medians, "cpu_cost": cpu_cost}
    summary["journal_us_paired"] = statistics.median(paired)
    print(orjson.dumps(summary).decode())


if __name__ == "__main__":
    main()
