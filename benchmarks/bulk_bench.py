"""Bulk describe: the library beside a hand-written raw aiohttp loop, the model conversion beside msgspec, and the
session layer's own cost, all measured in the same run.

    .venv/bin/python benchmarks/bulk_bench.py                 # full run (several minutes)
    .venv/bin/python benchmarks/bulk_bench.py --quick         # concurrency 64 only, fewer repeats
    .venv/bin/python benchmarks/bulk_bench.py --json out.json # also write every figure as JSON

Four parts, each printed as medians over ``--repeats`` with the spread (min-max):

* **convert**: one 3 KB document whose smart report has 7 items, per call, in CPU time of this thread (so
  other processes on a busy machine do not count): ``orjson.loads`` alone; a msgspec decode of the same bytes
  into equivalent typed classes (the reference of the target); our full model as ``describe`` builds it (the
  fast decode of the bytes); both then read every field the throughput part reads of every report item, so they
  do the same work; and, for information, the tolerant path a body takes when it does not fit the fast decode
  (``orjson.loads`` + the rules of :mod:`health_async._wire`).
* **session**: ``Session.request`` against a stub aiohttp session that answers at once with the same body,
  beside a raw loop doing what a caller would (same headers, ``async with session.get``, ``orjson.loads``)
  against the same stub. The difference is the session layer's own cost per request: everything except the
  socket and the parsing. ``describe`` through the stub adds the document's conversion.
* **throughput**: a fast aiohttp server in another process (pinned to core 1 when the machine has two or more;
  the client to core 0), answering every describe with one of 256 realistic 2-4 KB bodies. Per event loop and
  concurrency, in alternation: ``raw`` (aiohttp GET + ``orjson.loads``, same headers, a fixed pool of workers);
  ``many`` (``describe_many``, the documents not looked at); ``+report`` (``describe_many``, every item of
  every smart report read: since the models are decoded whole, this differs from ``many`` only by the reads);
  ``direct`` (``describe`` called from ``concurrency`` tasks). Ratios are taken per repeat
  (each run beside the raw run next to it), then the median.
* **telemetry**: OpenTelemetry's cost (issue 45). ``describe`` through the stub session with ``telemetry=False``
  beside ``telemetry=None`` with the API installed and no SDK configured (the default of an application that
  does not use OpenTelemetry: the difference is the client's overhead per request, target <= 2 us); then
  ``describe_many`` against the real server with telemetry off beside an SDK recording every span and metric
  (no exporter: a ``TracerProvider`` without processor, a ``MeterProvider`` with a reader never collected),
  handed in the way the tests do (no global provider is set). Target: >= 0.90 of the throughput without.
* **memory**: RSS growth of ``describe_many`` over many ids from an async generator.
* **ladder** (``--ladder``): the client's CPU per request layer by layer at concurrency 64, from the raw loop
  through the raw loop with prebuilt URLs and the session's aiohttp arguments, ``Session.request`` alone and
  ``describe``, to ``describe_many``: what each layer costs against a real server.

Targets (checked at the end): ``+report`` >= 0.90, ``many`` >= 0.95 and ``direct`` >= 0.90 of ``raw`` at
concurrency 64; the full model <= 15 us and <= 1.5x the msgspec decode; the session layer <= 10 us a request.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import resource
import sys
import time
import timeit
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import make_bodies, pin, spread, start_describe_server

import health_async as ha
from health_async.models.records._documents import decode_document, structure_document

T = TypeVar("T")
HEADERS = {"X-Pt-Id": "oid-1", "Authorization": "Bearer bench-token", "Accept": "application/json"}
CLIENT_CORE, SERVER_CORE = 0, 1


def seven_item_body() -> bytes:
    """A 3 KB document of the set whose smart report has 7 items (the convert and session parts use it)."""
    for body in make_bodies():
        report = orjson.loads(body)["smart_report"]
        if len(report["verified"]) + len(report["unverified"]) == 7:
            return body
    raise RuntimeError("no 7-item document in the set")


def fmt(s: dict[str, float], digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


# ----------------------------------------------------------------------------- convert


try:  # the reference decode: classes equivalent to ours (both live spellings as fields); a bench-only tool
    import msgspec
except ImportError:  # pragma: no cover
    msgspec = None  # type: ignore[assignment]
else:

    class MCoordinate(msgspec.Struct, frozen=True):
        x: float
        y: float

    class MItem(msgspec.Struct, frozen=True):
        name: str | None = None
        value: str | None = None
        unit: str | None = None
        unit_svc_id: str | None = None
        unit_eka_id: str | None = None
        range: str | None = None
        result: str | None = None
        result_id: str | None = None
        display_result: str | None = None
        id: int | None = None
        vital_id: str | None = None
        page_num: int | None = None
        file_index: int | None = None
        coordinates: tuple[MCoordinate, ...] = ()
        svc_id: str | None = None
        eka_id: str | None = None
        is_result_editable: bool | None = None
        date: int | None = None

    class MReport(msgspec.Struct, frozen=True):
        verified: tuple[MItem, ...] = ()
        unverified: tuple[MItem, ...] = ()

    class MFile(msgspec.Struct, frozen=True):
        asset_url: str | None = None
        file_type: str | None = None

    class MDocument(msgspec.Struct, frozen=True):
        document_id: str | None = None
        source: str | None = None
        document_date_epoch: int | None = None
        document_type: str | None = None
        dt: str | None = None
        tags: tuple[str, ...] = ()
        files: tuple[MFile, ...] = ()
        smart_report: MReport | None = None


def _msgspec_decoder() -> Callable[[bytes], Any] | None:
    """A msgspec decoder into the classes above, if msgspec is installed."""
    if msgspec is None:
        return None  # type: ignore[unreachable]
    return msgspec.json.Decoder(MDocument).decode


def bench_convert(repeats: int) -> dict[str, Any]:
    body = seven_item_body()

    def loads() -> None:
        orjson.loads(body)

    def tolerant() -> None:  # the path a body takes when the strict fast decode does not fit it
        structure_document(orjson.loads(body))

    def full() -> None:  # what describe does with the bytes, then every field of every item read
        doc = decode_document(body)
        assert doc is not None
        report = doc.smart_report
        assert report is not None
        for item in report.items:
            _ = (item.name, item.value, item.unit, item.svc_id, item.coordinates)

    cases: dict[str, Callable[[], Any]] = {"orjson.loads": loads, "tolerant path": tolerant, "full model": full}
    decode = _msgspec_decoder()
    if decode is not None:

        def reference() -> None:  # the same bytes into msgspec Structs, then the same fields read: the same work
            doc = decode(body)
            report = doc.smart_report
            for item in report.verified + report.unverified:
                _ = (item.name, item.value, item.unit, item.svc_id, item.coordinates)

        cases["msgspec"] = reference
    number = 2000
    runs: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):  # alternate, so drift hits all alike; CPU time of this thread, best of 3 per repeat
        for name, fn in cases.items():
            best = min(timeit.repeat(fn, number=number, repeat=3, timer=time.thread_time))
            runs[name].append(best / number * 1e6)
    out: dict[str, Any] = {"body_bytes": len(body), "us": {name: spread(v) for name, v in runs.items()}}
    if decode is not None:
        out["full_over_msgspec"] = spread([f / m for f, m in zip(runs["full model"], runs["msgspec"], strict=True)])
    return out


# ----------------------------------------------------------------------------- session layer


class _StubResponse:
    status = 200

    def __init__(self, body: bytes) -> None:
        from multidict import CIMultiDict, CIMultiDictProxy

        self._body = body
        self.content_length = len(body)
        self.headers = CIMultiDictProxy(CIMultiDict({"Content-Type": "application/json"}))

    async def read(self) -> bytes:
        return self._body

    def raise_for_status(self) -> None:
        pass


class _StubContext:
    def __init__(self, response: _StubResponse) -> None:
        self._response = response

    async def __aenter__(self) -> _StubResponse:
        return self._response

    async def __aexit__(self, *exc: object) -> None:
        return None


class StubHttp:
    """Stands for an ``aiohttp.ClientSession`` that answers every request at once with the same body."""

    closed = False

    def __init__(self, body: bytes) -> None:
        self._context = _StubContext(_StubResponse(body))

    def request(self, method: str, url: Any, **kwargs: Any) -> _StubContext:  # noqa: ARG002
        return self._context

    def get(self, url: Any, **kwargs: Any) -> _StubContext:  # noqa: ARG002
        return self._context

    async def close(self) -> None:
        pass


async def _stub_raw(http: StubHttp, n: int) -> float:
    started = time.thread_time()
    for i in range(n):
        async with http.get(f"http://127.0.0.1:9/mr/api/v1/docs/doc-{i}", headers=HEADERS) as resp:
            resp.raise_for_status()
            orjson.loads(await resp.read())
    return (time.thread_time() - started) / n * 1e6


_PT_HEADERS = {"X-Pt-Id": "oid-1"}


def _session_describe(session: Any, i: int) -> Awaitable[Any]:
    """A describe through ``Session.request`` alone: the body decoded as plain JSON, no model."""
    return session.request(  # type: ignore[no-any-return]
        "GET",
        f"/mr/api/v1/docs/doc-{i}",
        route="/mr/api/v1/docs/{id}",
        operation="describe",
        headers=_PT_HEADERS,
        idempotent=True,
    )


async def _stub_ours(http: StubHttp, n: int, what: str, telemetry: bool | None = False) -> float:
    async with ha.HealthClient(
        base_url="http://127.0.0.1:9", token="bench-token", user_id="oid-1", telemetry=telemetry
    ) as client:
        session = client._session
        if session._http is not None:
            await session._http.close()
        session._http, session._owns_http = http, False  # type: ignore[assignment]
        started = time.thread_time()
        if what == "request":
            for i in range(n):
                await _session_describe(session, i)
        else:
            for i in range(n):
                await client.documents.describe(f"doc-{i}")
        return (time.thread_time() - started) / n * 1e6


def bench_session(repeats: int) -> dict[str, Any]:
    http = StubHttp(seven_item_body())
    n = 4000
    runs: dict[str, list[float]] = {"raw": [], "request": [], "describe": []}

    async def one_round() -> None:
        runs["raw"].append(await _stub_raw(http, n))
        runs["request"].append(await _stub_ours(http, n, "request"))
        runs["describe"].append(await _stub_ours(http, n, "describe"))

    asyncio.run(_stub_ours(http, 500, "describe"))  # warm-up
    for _ in range(repeats):
        asyncio.run(one_round())
    cost = [r - w for r, w in zip(runs["request"], runs["raw"], strict=True)]
    return {"us": {name: spread(v) for name, v in runs.items()}, "session_cost_us": spread(cost)}


# ----------------------------------------------------------------------------- throughput


def _rate(n: int, started: float, cpu: float) -> tuple[float, float]:
    """Requests per second (wall clock) and the client's CPU microseconds per request."""
    return n / (time.perf_counter() - started), (time.process_time() - cpu) / n * 1e6


async def raw_loop(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """The baseline: a fixed pool of ``concurrency`` workers doing aiohttp GET + orjson.loads."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        ids = iter(range(n))

        async def worker() -> None:
            for i in ids:
                async with session.get(f"{url}/mr/api/v1/docs/doc-{i}", headers=HEADERS) as resp:
                    resp.raise_for_status()
                    orjson.loads(await resp.read())

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return _rate(n, started, cpu)


async def _from_tasks(n: int, concurrency: int, one: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    """``one(i)`` for ids ``0..n-1`` from ``concurrency`` tasks sharing one iterator: rate and CPU per request.
    (The baseline ``raw_loop`` is written out as a user would write it instead; this adds one coroutine per request
    to the variants, never to the baseline.)"""
    ids = iter(range(n))

    async def worker() -> None:
        for i in ids:
            await one(i)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return _rate(n, started, cpu)


async def raw_prebuilt(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """The raw loop doing what the session does with aiohttp: URLs built from a parsed base (never parsed per
    request), the same keyword arguments, no ``raise_for_status``. For the ``--ladder``: how much of the gap is
    aiohttp's own use, and how much is ours."""
    from yarl import URL

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        base, timeout = URL(url), aiohttp.ClientTimeout(total=30, connect=27)

        async def one(i: int) -> None:
            async with session.request(
                "GET",
                base.with_path(f"/mr/api/v1/docs/doc-{i}", encoded=True),
                headers=HEADERS,
                timeout=timeout,
                allow_redirects=False,
                raise_for_status=False,
                auto_decompress=True,
                proxy=None,
            ) as resp:
                orjson.loads(await resp.read())

        return await _from_tasks(n, concurrency, one)


async def ours_request(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """``Session.request`` alone (the chokepoint: token, headers, limits, retries, error mapping; the body decoded
    as plain JSON), from ``concurrency`` tasks. For the ``--ladder``."""
    async with _client(url, concurrency) as client:
        session = client._session
        return await _from_tasks(n, concurrency, lambda i: _session_describe(session, i))


def _read_report(document: ha.Document) -> None:
    report = document.smart_report
    assert report is not None
    for item in report.items:
        _ = (item.name, item.value, item.unit, item.svc_id, item.coordinates)


def _client(url: str, concurrency: int, telemetry: bool | None = False) -> ha.HealthClient:
    return ha.HealthClient(
        base_url=url, token="bench-token", user_id="oid-1", max_connections=concurrency, telemetry=telemetry
    )


async def ours_many(
    url: str, n: int, concurrency: int, *, read_report: bool = False, telemetry: bool | None = False
) -> tuple[float, float]:
    async with _client(url, concurrency, telemetry) as client:
        started, cpu = time.perf_counter(), time.process_time()
        count = 0
        async for r in client.documents.describe_many((f"doc-{i}" for i in range(n)), concurrency=concurrency):
            if r.document is None:
                raise RuntimeError(f"benchmark request failed: {r.error!r}")
            if read_report:
                _read_report(r.document)
            count += 1
        assert count == n
        return _rate(n, started, cpu)


async def ours_direct(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """``describe`` called from ``concurrency`` tasks sharing one iterator of ids (documents not looked at)."""
    async with _client(url, concurrency) as client:
        describe = client.documents.describe
        return await _from_tasks(n, concurrency, lambda i: describe(f"doc-{i}"))


def run_in_loop(make: Callable[[], Coroutine[Any, Any, T]], use_uvloop: bool) -> T:
    if use_uvloop:
        import uvloop

        result: T = uvloop.run(make())
        return result
    return asyncio.run(make())


def bench_ladder(url: str, repeats: int, per_run: int, concurrency: int = 64) -> dict[str, Any]:
    """Where the CPU per request goes, step by step from the raw loop to ``describe_many`` (asyncio loop): each
    step adds one layer, so the differences of the medians are what each layer costs against a real server."""
    cases: dict[str, Callable[[], Coroutine[Any, Any, tuple[float, float]]]] = {
        "raw": functools.partial(raw_loop, url, per_run, concurrency),
        "raw, prebuilt URL": functools.partial(raw_prebuilt, url, per_run, concurrency),
        "Session.request": functools.partial(ours_request, url, per_run, concurrency),
        "describe": functools.partial(ours_direct, url, per_run, concurrency),
        "describe_many": functools.partial(ours_many, url, per_run, concurrency),
    }
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, make in cases.items():
            cpus[name].append(asyncio.run(make())[1])
    out = {name: spread(v, 1) for name, v in cpus.items()}
    print(f"\nladder, concurrency {concurrency}, client CPU us per request, median [min-max] of {repeats}:")
    previous = None
    for name, s in out.items():
        step = "" if previous is None else f"   step {s['median'] - previous:+.1f}"
        print(f"  {name:18} {fmt(s, 1)}{step}")
        previous = s["median"]
    return out


def bench_throughput(
    url: str, loops: list[tuple[str, bool]], concurrencies: list[int], repeats: int, per_run: int
) -> list[dict[str, Any]]:
    """Rates and their ratios to raw; also the client's CPU per request and ``cpu_raw / cpu_ours``, the ratio the
    rates reach once the client's core is the bottleneck (steady on a busy machine, where rates are not)."""
    rows = []
    print(
        f"\n{'loop':8} {'conc':>5} {'raw/s':>7}   {'many':<19} {'+report':<19} {'direct':<19}"
        "   ratio to raw of req/s (then of CPU per request), median [min-max]"
    )
    for loop_name, use_uvloop in loops:
        for concurrency in concurrencies:
            n = per_run // 4 if concurrency == 1 else per_run
            cases: dict[str, Callable[[], Coroutine[Any, Any, tuple[float, float]]]] = {
                "raw": functools.partial(raw_loop, url, n, concurrency),
                "many": functools.partial(ours_many, url, n, concurrency),
                "+report": functools.partial(ours_many, url, n, concurrency, read_report=True),
                "direct": functools.partial(ours_direct, url, n, concurrency),
            }
            rates: dict[str, list[float]] = {name: [] for name in cases}
            cpus: dict[str, list[float]] = {name: [] for name in cases}
            ratios: dict[str, list[float]] = {name: [] for name in cases if name != "raw"}
            cpu_ratios: dict[str, list[float]] = {name: [] for name in cases if name != "raw"}
            for _ in range(repeats):  # alternate: drift on a noisy machine hits all alike
                for name, make in cases.items():
                    rate, cpu = run_in_loop(make, use_uvloop)
                    rates[name].append(rate)
                    cpus[name].append(cpu)
                    if name != "raw":
                        ratios[name].append(rate / rates["raw"][-1])
                        cpu_ratios[name].append(cpus["raw"][-1] / cpu)
            row: dict[str, Any] = {
                "loop": loop_name,
                "concurrency": concurrency,
                "rate": {name: spread(v, 0) for name, v in rates.items()},
                "cpu_us_per_request": {name: spread(v, 1) for name, v in cpus.items()},
                "ratio": {name: spread(v, 3) for name, v in ratios.items()},
                "cpu_ratio": {name: spread(v, 3) for name, v in cpu_ratios.items()},
            }
            rows.append(row)
            r, c = row["ratio"], row["cpu_ratio"]
            print(
                f"{loop_name:8} {concurrency:>5} {row['rate']['raw']['median']:>7.0f}   "
                + "  ".join(f"{fmt(r[k]):<19}" for k in ("many", "+report", "direct"))
            )
            print(
                f"{'':8} {'cpu':>5} {row['cpu_us_per_request']['raw']['median']:>5.0f}us   "
                + "  ".join(f"{fmt(c[k]):<19}" for k in ("many", "+report", "direct"))
            )
    return rows


# ----------------------------------------------------------------------------- memory


def bench_telemetry(url: str, repeats: int, per_run: int, concurrency: int = 64) -> dict[str, Any]:
    """OpenTelemetry's cost: the no-SDK overhead per request (stub session), and bulk describe's throughput with an
    SDK recording (real server), each beside its baseline in the same run, interleaved; medians (see the module's
    documentation)."""
    from health_async import _telemetry

    if not _telemetry.available():
        print("\ntelemetry: opentelemetry-api not installed (pip install -e '.[otel]'): skipped")
        return {}
    http = StubHttp(seven_item_body())
    n = 4000
    stub: dict[str, list[float]] = {"off": [], "api_no_sdk": []}

    async def stub_round() -> None:
        stub["off"].append(await _stub_ours(http, n, "describe", False))
        stub["api_no_sdk"].append(await _stub_ours(http, n, "describe", None))

    asyncio.run(_stub_ours(http, 500, "describe", None))  # warm-up
    for _ in range(max(repeats, 5)):
        asyncio.run(stub_round())
    overhead = [a - o for a, o in zip(stub["api_no_sdk"], stub["off"], strict=True)]

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    tracer_provider, meter_provider = TracerProvider(), MeterProvider(metric_readers=[InMemoryMetricReader()])
    plain_providers = _telemetry._global_providers
    rates: dict[str, list[float]] = {"off": [], "sdk": []}
    ratios: list[float] = []
    try:
        for _ in range(repeats):
            off, _cpu = asyncio.run(ours_many(url, per_run, concurrency, telemetry=False))
            _telemetry._global_providers = lambda: (tracer_provider, meter_provider)
            try:
                sdk, _cpu = asyncio.run(ours_many(url, per_run, concurrency, telemetry=True))
            finally:
                _telemetry._global_providers = plain_providers
            rates["off"].append(off)
            rates["sdk"].append(sdk)
            ratios.append(sdk / off)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()
    result: dict[str, Any] = {
        "no_sdk_us": {name: spread(v) for name, v in stub.items()},
        "no_sdk_overhead_us": spread(overhead),
        "bulk_rps": {name: spread(v) for name, v in rates.items()},
        "bulk_sdk_over_off": spread(ratios),
    }
    print("\ntelemetry (issue 45):")
    print(f"  describe, stub session, us of CPU: off {fmt(result['no_sdk_us']['off'])}")
    print(f"    API installed, no SDK: {fmt(result['no_sdk_us']['api_no_sdk'])}")
    print(f"    overhead without an SDK: {fmt(result['no_sdk_overhead_us'])} us a request (target <= 2)")
    print(f"  describe_many at concurrency {concurrency}, requests/s: off {fmt(result['bulk_rps']['off'], 0)}")
    print(f"    SDK recording: {fmt(result['bulk_rps']['sdk'], 0)}")
    print(f"    with / without: {fmt(result['bulk_sdk_over_off'], 3)} (target >= 0.90)")
    return result


def rss_mb() -> float:
    """Current resident set size (Linux ``/proc``; the peak-RSS counter would remember earlier phases)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


async def memory_growth(url: str, total: int, concurrency: int = 64) -> tuple[float, int]:
    """RSS growth (MB, the most seen while running) of describe_many over ``total`` ids from an async generator."""

    async def ids(count: int) -> AsyncIterator[str]:
        for i in range(count):
            yield f"doc-{i}"

    async with _client(url, concurrency) as client:
        async for _ in client.documents.describe_many(ids(5000), concurrency=concurrency):
            pass  # warm-up: pools, caches and the allocator reach their steady state
        before = peak = rss_mb()
        done = 0
        async for r in client.documents.describe_many(ids(total), concurrency=concurrency):
            done += r.ok
            if done % 1000 == 0:
                peak = max(peak, rss_mb())
    return peak - before, done


# ----------------------------------------------------------------------------- main


def verdicts(result: dict[str, Any]) -> list[tuple[str, float, bool]]:
    out = []
    convert = result["convert"]
    full = convert["us"]["full model"]["median"]
    out.append(("full model <= 15 us (CPU time)", full, full <= 15))
    if "full_over_msgspec" in convert:
        ratio = convert["full_over_msgspec"]["median"]
        out.append(("full model <= 1.5x msgspec decode", ratio, ratio <= 1.5))
    cost = result["session"]["session_cost_us"]["median"]
    out.append(("session layer <= 10 us a request", cost, cost <= 10))
    for row in result.get("throughput", []):
        if row["concurrency"] != 64:
            continue
        for name, target in (("+report", 0.90), ("many", 0.95), ("direct", 0.90)):
            for kind in ("ratio", "cpu_ratio"):
                value = row[kind][name]["median"]
                what = "req/s" if kind == "ratio" else "CPU/request"
                out.append((f"{name} >= {target:.2f} of raw at 64, {what} ({row['loop']})", value, value >= target))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="concurrency 64 only, fewer requests and repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file as JSON")
    parser.add_argument(
        "--ladder", action="store_true", help="also the CPU per request layer by layer, raw loop to describe_many"
    )
    parser.add_argument(
        "--skip", default="", help="comma-separated parts to skip: convert,session,throughput,telemetry,memory"
    )
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    per_run = 2000 if args.quick else 4000
    memory_ids = 20_000 if args.quick else 100_000
    concurrencies = [64] if args.quick else [1, 16, 64, 256]
    skip = set(filter(None, args.skip.split(",")))

    pinned = pin(CLIENT_CORE)
    result: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "pinned": pinned,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "repeats": repeats,
    }
    print(f"client pinned to core {CLIENT_CORE}: {pinned}; load average {result['load_average']}")

    if "convert" not in skip:
        result["convert"] = convert = bench_convert(repeats)
        print(f"\nconvert, one {convert['body_bytes']}-byte document with 7 report items, us of CPU per call:")
        for name, s in convert["us"].items():
            print(f"  {name:14} {fmt(s)}")
        if "full_over_msgspec" in convert:
            print(f"  full model / msgspec: {fmt(convert['full_over_msgspec'])}")
        else:
            print("  (msgspec not installed: pip install msgspec for the reference decode)")

    if "session" not in skip:
        result["session"] = session = bench_session(repeats)
        print("\nsession layer against a stub aiohttp session, us of CPU per request:")
        for name, s in session["us"].items():
            print(f"  {name:14} {fmt(s)}")
        print(f"  session cost   {fmt(session['session_cost_us'])}  (request - raw)")

    if args.ladder or not {"throughput", "telemetry", "memory"} <= skip:
        server, url = start_describe_server(core=SERVER_CORE, use_uvloop=True)
        try:
            import uvloop  # noqa: F401

            loops = [("asyncio", False), ("uvloop", True)]
        except ImportError:
            loops = [("asyncio", False)]
            print("uvloop not installed: default loop only (pip install -e '.[bench]')")
        try:
            if "throughput" not in skip:
                result["throughput"] = bench_throughput(url, loops, concurrencies, repeats, per_run)
            if "telemetry" not in skip:
                result["telemetry"] = bench_telemetry(url, repeats, per_run)
            if args.ladder:
                result["ladder"] = bench_ladder(url, max(repeats, 7), per_run * 2)
            if "memory" not in skip:
                growth, done = run_in_loop(lambda: memory_growth(url, memory_ids), False)
                result["memory"] = {"ids": done, "rss_growth_mb": round(growth, 1)}
                print(f"\nmemory: describe_many over {done} ids from an async generator grew RSS by {growth:.1f} MB")
        finally:
            server.kill()
            server.join()

    if "convert" in result and "session" in result:
        print()
        result["verdicts"] = []
        for name, value, ok in verdicts(result):
            print(f"target {name}: {value:.3f} {'PASS' if ok else 'MISS'}")
            result["verdicts"].append({"target": name, "value": value, "pass": ok})
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwritten: {args.json}")


if __name__ == "__main__":
    main()
