"""Issue 45: OpenTelemetry traces and metrics that carry no id, address or number.

The SDK's providers are handed in by patching ``_telemetry._global_providers`` (never set globally: OpenTelemetry
allows that once per process, and other tests must not record). Every span, event, attribute and metric data point
of every kind of operation is searched for sentinel values: ids, addresses, numbers, tokens, file names, bodies."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from yarl import URL

import health_async as ha
from health_async import _telemetry, webhooks
from health_async.models import CareContext, HealthDataRequest, HiType
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abdm._hiu import example_document
from health_async.testing.webhooks._send import sign
from health_async.webhooks import WebhookEvent

from ..conftest import Serve

NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
BUNDLE = example_document("OPConsultation")
SECRET = "whsec-sentinel-7c1e"
ABHA_ADDRESS = "sentinelpatient@sbx"
FILE_NAME = "sentinel-discharge-summary-4411.pdf"
CARE_CONTEXT = "visit-sentinel-9931"
WEBHOOK_TXN = "txn-sentinel-5521"


@dataclass
class Otel:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self) -> list[tuple[str, dict[str, Any], Any]]:
        """Every metric data point: (metric name, attributes, the point)."""
        data = self.reader.get_metrics_data()
        found: list[tuple[str, dict[str, Any], Any]] = []
        if data is None:
            return found
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    for point in metric.data.data_points:
                        found.append((metric.name, dict(point.attributes or {}), point))
        return found

    def recorded_text(self) -> str:
        """Everything recorded, as text: span names, kinds, statuses, attributes, events; metric names and points."""
        parts: list[str] = []
        for span in self.finished():
            parts += [span.name, str(span.status.description), repr(dict(span.attributes or {}))]
            for event in span.events:
                parts += [event.name, repr(dict(event.attributes or {}))]
            for link in span.links:
                parts.append(repr(dict(link.attributes or {})))
        for name, attributes, point in self.points():
            parts += [name, repr(attributes), repr(point)]
        return "\n".join(parts)


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(_telemetry, "_global_providers", lambda: (tracer_provider, meter_provider))
    monkeypatch.setattr(_telemetry, "_default", None)
    yield Otel(exporter, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(documents_per_user=3) as srv:
        yield srv


def make_client(server: FakeHealthServer, **options: Any) -> ha.HealthClient:
    settings: dict[str, Any] = {
        "base_url": server.url,
        "token": server.token,
        "client_id": server.client_id,
        "user_id": server.data.user_ids[0],
        "encryption_key": server.encryption_key,
        "key_id": server.key_id,
        "retry": NO_WAIT,
        **options,
    }
    return ha.HealthClient(**settings)


async def document_ids(client: ha.HealthClient) -> list[str]:
    return [doc.document_id async for doc in client.documents.list()]


def by_name(otel: Otel, name: str) -> list[ReadableSpan]:
    return [span for span in otel.finished() if span.name == name]


def children(otel: Otel, parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        span for span in otel.finished() if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]


# ------------------------------------------------------------------------------------------- one call


async def test_a_plain_call_is_an_operation_span_with_one_client_span_and_a_duration(
    otel: Otel, server: FakeHealthServer
) -> None:
    async with make_client(server) as client:
        [doc_id, *_] = await document_ids(client)
        otel.spans.clear()
        await client.documents.describe(doc_id)
    [operation] = by_name(otel, "describe")
    assert operation.kind is SpanKind.INTERNAL and operation.status.status_code is StatusCode.UNSET
    [attempt] = children(otel, operation)
    assert attempt.kind is SpanKind.CLIENT and attempt.name == "GET /mr/api/v1/docs/{id}"
    assert dict(attempt.attributes or {}) == {
        "http.request.method": "GET",
        "server.address": "127.0.0.1",
        "server.port": URL(server.url).port,
        "url.template": "/mr/api/v1/docs/{id}",
        "http.response.status_code": 200,
    }
    durations = [a for name, a, _ in otel.points() if name == "http.client.request.duration"]
    assert {"url.template": "/mr/api/v1/docs/{id}", "http.response.status_code": 200}.items() <= durations[-1].items()
    assert "url.full" not in otel.recorded_text()


async def test_a_retried_call_counts_its_resends(otel: Otel, server: FakeHealthServer) -> None:
    async with make_client(server) as client:
        [doc_id, *_] = await document_ids(client)
        server.inject("describe", Fault(status=503, times=1))
        await client.documents.describe(doc_id)
    [operation] = by_name(otel, "describe")
    first, second = sorted(children(otel, operation), key=lambda s: s.start_time or 0)
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["http.response.status_code"] == 503 and first.attributes["error.type"] == "503"
    assert first.status.status_code is StatusCode.ERROR and "http.request.resend_count" not in first.attributes
    assert second.attributes["http.request.resend_count"] == 1 and "error.type" not in second.attributes
    assert operation.status.status_code is StatusCode.UNSET
    assert [e.name for e in operation.events] == ["health_async.retry"]
    retries = [(a, p.value) for name, a, p in otel.points() if name == "health_async.client.retries"]
    assert retries == [({"health_async.operation": "describe", "error.type": "ServerError"}, 1)]


async def test_a_failed_call_names_the_error_class_and_is_an_error(otel: Otel, server: FakeHealthServer) -> None:
    async with make_client(server, retry=ha.RetryPolicy.never()) as client:
        with pytest.raises(ha.DocumentNotFound):
            await client.documents.describe("no-such-document-sentinel")
    [operation] = by_name(otel, "describe")
    assert operation.status.status_code is StatusCode.ERROR
    assert operation.attributes is not None and operation.attributes["error.type"] == "DocumentNotFound"
    [attempt] = children(otel, operation)
    assert attempt.attributes is not None and attempt.attributes["error.type"] == "404"
    assert "no-such-document-sentinel" not in otel.recorded_text()


async def test_a_transport_failure_names_the_library_error(otel: Otel) -> None:
    async with ha.HealthClient(
        base_url="http://127.0.0.1:9", token="t", user_id="u", retry=ha.RetryPolicy.never()
    ) as client:
        with pytest.raises(ha.TransportError):
            await client.documents.describe("doc-sentinel")
    [operation] = by_name(otel, "describe")
    [attempt] = children(otel, operation)
    assert attempt.attributes is not None and attempt.attributes["error.type"] == "TransportError"
    assert "http.response.status_code" not in attempt.attributes
    assert operation.attributes is not None and operation.attributes["error.type"] == "TransportError"


async def test_a_retry_after_pause_is_a_wait_event(otel: Otel, server: FakeHealthServer) -> None:
    retry = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0.2)
    async with make_client(server, retry=retry) as client:
        [doc_id, *_] = await document_ids(client)
        server.inject("describe", Fault(status=429, times=1, retry_after=1))
        await client.documents.describe(doc_id)  # paused the client: its own retry waited (a retry event)
        server.inject("describe", Fault(status=429, times=1, retry_after=1))
        first = asyncio.ensure_future(client.documents.describe(doc_id))
        for _ in range(5000):  # until the first one's 429 came (it began the pause)
            if server.calls("describe") >= 3:
                break
            await asyncio.sleep(0.001)
        await client.documents.describe(doc_id)  # sent during the pause the first one's 429 began: waits
        await first
    waits = [e for s in by_name(otel, "describe") for e in s.events if e.name == "health_async.wait"]
    assert waits and waits[0].attributes is not None
    assert waits[0].attributes["health_async.wait.reason"] == "retry_after"
    assert float(waits[0].attributes["health_async.wait.duration"]) > 0  # type: ignore[arg-type]
    reasons = {
        a["health_async.wait.reason"] for name, a, _ in otel.points() if name == "health_async.client.wait.duration"
    }
    assert "retry_after" in reasons


async def test_a_rate_limited_call_is_a_wait_event(otel: Otel, server: FakeHealthServer) -> None:
    async with make_client(server, rate_limit=1) as client:  # one request a second
        [doc_id, *_] = await document_ids(client)
        await client.documents.describe(doc_id)  # waits for the list's second to pass
    events = [e for s in by_name(otel, "describe") for e in s.events if e.name == "health_async.wait"]
    assert any(e.attributes is not None and e.attributes["health_async.wait.reason"] == "rate_limit" for e in events)


async def test_telemetry_false_records_nothing(otel: Otel, server: FakeHealthServer) -> None:
    async with make_client(server, telemetry=False) as client:
        [doc_id, *_] = await document_ids(client)
        await client.documents.describe(doc_id)
        async for _ in client.documents.describe_many([doc_id]):
            pass
    assert otel.finished() == [] and otel.points() == []


def test_telemetry_takes_only_a_bool_or_none() -> None:
    with pytest.raises(ha.InvalidArgumentType):
        ha.HealthClient(token="t", telemetry="yes")  # type: ignore[arg-type]


def test_telemetry_true_needs_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_telemetry, "_available", False)
    with pytest.raises(ha.InvalidRequest, match="otel"):
        ha.HealthClient(token="t", telemetry=True)
    assert ha.HealthClient(token="t")._session.telemetry is None  # the default: off without the API


def test_without_an_sdk_no_span_is_built(server: FakeHealthServer) -> None:
    telemetry = _telemetry.Telemetry()
    assert telemetry.live() is False  # the API's own proxy providers: the session takes its plain way


# ------------------------------------------------------------------------------------------- bulk, webhooks


async def test_a_bulk_describe_is_one_span_with_its_items_counted(otel: Otel, server: FakeHealthServer) -> None:
    async with make_client(server) as client:
        ids = await document_ids(client)
        otel.spans.clear()
        results = [r async for r in client.documents.describe_many([*ids, "missing-sentinel"], concurrency=2)]
    assert len(results) == len(ids) + 1
    [run] = by_name(otel, "describe_many")
    assert run.attributes is not None
    assert (run.attributes["health_async.bulk.items"], run.attributes["health_async.bulk.ok"]) == (
        len(ids) + 1,
        len(ids),
    )
    assert run.attributes["health_async.bulk.failed"] == 1
    assert len(children(otel, run)) == len(ids) + 1  # every describe is a child of the run
    counted = {a["health_async.outcome"]: p.value for name, a, p in otel.points() if name == "health_async.bulk.items"}
    assert counted == {"ok": len(ids), "failed": 1}


async def test_in_a_bulk_run_an_item_answered_at_once_is_one_client_span(otel: Otel, server: FakeHealthServer) -> None:
    """Judgement call (see ``_telemetry.Call``): inside a bulk run, an item whose first attempt succeeded without
    waiting is ONE span, its CLIENT span carrying the operation's name; a retried or failed item keeps its
    operation span with one CLIENT child per attempt."""
    async with make_client(server) as client:
        ids = await document_ids(client)
        otel.spans.clear()
        server.inject("describe", Fault(status=503, times=1))  # the first item sent is retried once
        results = [r async for r in client.documents.describe_many([*ids, "missing-sentinel"], concurrency=1)]
    assert [r.error is None for r in results] == [True] * len(ids) + [False]
    [run] = by_name(otel, "describe_many")
    items = children(otel, run)
    assert len(items) == len(ids) + 1
    single = [span for span in items if span.kind is SpanKind.CLIENT]
    assert len(single) == len(ids) - 1
    for span in single:
        assert span.name == "GET /mr/api/v1/docs/{id}" and span.status.status_code is StatusCode.UNSET
        assert dict(span.attributes or {}) == {
            "http.request.method": "GET",
            "server.address": "127.0.0.1",
            "server.port": URL(server.url).port,
            "url.template": "/mr/api/v1/docs/{id}",
            "http.response.status_code": 200,
            "health_async.operation": "describe",
        }
        assert children(otel, span) == []
    retried, failed = sorted(
        (span for span in items if span.kind is SpanKind.INTERNAL),
        key=lambda s: s.status.status_code is StatusCode.ERROR,
    )
    assert retried.name == failed.name == "describe"
    assert (retried.attributes or {})["health_async.attempts"] == 2
    assert [e.name for e in retried.events] == ["health_async.retry"]
    first, second = sorted(children(otel, retried), key=lambda s: s.start_time or 0)
    assert (first.attributes or {})["http.response.status_code"] == 503 and first.status.status_code is StatusCode.ERROR
    assert (second.attributes or {})["http.request.resend_count"] == 1
    assert retried.start_time is not None and first.start_time is not None and second.end_time is not None
    assert retried.start_time <= first.start_time and second.end_time <= (retried.end_time or 0)
    assert (failed.attributes or {})["error.type"] == "DocumentNotFound"
    [attempt] = children(otel, failed)
    assert attempt.kind is SpanKind.CLIENT and (attempt.attributes or {})["error.type"] == "404"
    durations = [a for name, a, _ in otel.points() if name == "http.client.request.duration"]
    assert {a.get("http.response.status_code") for a in durations} == {200, 503, 404}


async def test_a_cancelled_call_ends_its_spans(otel: Otel, server: FakeHealthServer) -> None:
    async with make_client(server) as client:
        [doc_id, *_] = await document_ids(client)
        otel.spans.clear()
        server.inject("describe", Fault(latency=5))
        task = asyncio.ensure_future(client.documents.describe(doc_id))
        for _ in range(5000):  # until the request reached the server
            if server.calls("describe") >= 1:
                break
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    [operation] = by_name(otel, "describe")
    assert (operation.attributes or {})["error.type"] == "CancelledError"
    [attempt] = children(otel, operation)
    assert (attempt.attributes or {})["error.type"] == "CancelledError" and attempt.end_time is not None


PII = json.dumps(
    {
        "event": "rec.pii",
        "service": "rec",
        "event_time": 1759234802,
        "timestamp": 1759234802,
        "client_id": "client-sentinel",
        "transaction_id": WEBHOOK_TXN,
        "data": {"document_id": "doc-webhook-sentinel", "patient_oid": "oid-webhook-sentinel", "mobile": "9876501234"},
    }
).encode()


async def _post(session: aiohttp.ClientSession, url: str, header: str, method: str = "POST") -> int:
    async with session.request(method, url, data=PII, headers={webhooks.SIGNATURE_HEADER: header}) as response:
        return response.status


def deliveries(otel: Otel) -> list[tuple[str | None, str, str | None]]:
    found = []
    for span in otel.finished():
        if span.kind is SpanKind.SERVER:
            a = span.attributes or {}
            found.append(
                (
                    a.get("health_async.webhook.event"),
                    a["health_async.webhook.outcome"],
                    a.get("health_async.webhook.reason"),
                )
            )
    return found  # type: ignore[return-value]


async def test_every_webhook_outcome_is_a_server_span(otel: Otel, serve: Serve) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    calls = 0

    async def callback(event: WebhookEvent) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            started.set()
            await release.wait()
            raise RuntimeError("database down")

    handler = webhooks.aiohttp_handler(SECRET, callback)
    url = f"{await serve({('POST', '/hook'): handler, ('GET', '/hook'): handler})}/hook"
    header = sign(PII, SECRET)
    async with aiohttp.ClientSession() as session:
        first = asyncio.ensure_future(_post(session, url, header))
        await started.wait()
        assert await _post(session, url, header) == 503  # in progress
        release.set()
        assert await first == 500  # the callback failed
        assert await _post(session, url, header) == 200  # accepted
        assert await _post(session, url, header) == 200  # duplicate
        assert await _post(session, url, "t=1,v1=00") == 400  # refused: signature
        assert await _post(session, url, header, "GET") == 405  # refused: method
    assert sorted(deliveries(otel), key=str) == sorted(
        [
            ("rec.pii", "in_progress", None),
            ("rec.pii", "failed", "callback"),
            ("rec.pii", "accepted", None),
            ("rec.pii", "duplicate", None),
            (None, "refused", "signature"),
            (None, "refused", "method_not_allowed"),
        ],
        key=str,
    )
    counted = {
        (a["health_async.webhook.outcome"], a.get("health_async.webhook.reason")): p.value
        for name, a, p in otel.points()
        if name == "health_async.webhook.deliveries"
    }
    assert counted[("accepted", None)] == 1 and counted[("refused", "signature")] == 1
    text = otel.recorded_text()
    for value in (WEBHOOK_TXN, "doc-webhook-sentinel", "oid-webhook-sentinel", "9876501234", "client-sentinel", SECRET):
        assert value not in text


# ------------------------------------------------------------------------------------------- nothing personal


async def test_nothing_personal_is_ever_recorded(otel: Otel, server: FakeHealthServer, tmp_path: Path) -> None:
    pdf = tmp_path / FILE_NAME
    pdf.write_bytes(b"%PDF-1.4\n% sentinel\n%%EOF\n")
    sentinels: set[str] = {FILE_NAME, ABHA_ADDRESS, CARE_CONTEXT, server.token, SECRET}
    async with make_client(server) as client:
        ids = await document_ids(client)
        sentinels.update(ids)
        sentinels.add(server.data.user_ids[0])
        await client.documents.describe(ids[0])
        async for _ in client.documents.describe_many(ids):
            pass
        uploaded = await client.documents.upload(pdf)
        sentinels.update(v for v in (getattr(uploaded, "document_id", None),) if isinstance(v, str))
        aadhaar = server.data.valid_aadhaar[0]
        sentinels.add(aadhaar)
        init = await client.abha.aadhaar_init(aadhaar)
        sentinels.add(init.txn_id)
        await client.abdm.link_care_contexts(
            [CareContext(CARE_CONTEXT, "OP visit", HiType.OP_CONSULTATION)], abha_address=ABHA_ADDRESS
        )
        data = server.abdm.data_request([CARE_CONTEXT, "visit-sentinel-2"], oid=server.data.user_ids[0])
        request = HealthDataRequest.from_event(data)
        sentinels.add(request.transaction_id)
        result = await client.abdm.push_health_data(
            request, {CARE_CONTEXT: BUNDLE, "visit-sentinel-2": {**BUNDLE, "id": "2"}}
        )
        assert result.pushed == (CARE_CONTEXT, "visit-sentinel-2")
    names = {span.name for span in otel.finished()}
    assert {
        "describe",
        "list",
        "upload",
        "describe_many",
        "aadhaar_init",
        "care_contexts_link",
        "hip_data_push",
    } <= names
    pages = by_name(otel, "abdm.push_health_data.page")
    assert sorted(int((p.attributes or {})["health_async.page"]) for p in pages) == [1, 2]  # type: ignore[arg-type]
    text = otel.recorded_text()
    assert "url.full" not in text and "?" not in text  # no URL, no query string
    leaked = sorted(value for value in sentinels if value and value in text)
    assert leaked == []


# ------------------------------------------------------------------------------------------- without the package


def test_without_opentelemetry_nothing_imports_it_and_the_demo_runs(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ImportError("blocked: " + name)
                return None

        sys.meta_path.insert(0, Blocker())
        import health_async
        from health_async import _demo, _telemetry
        assert _telemetry.available() is False
        assert health_async.HealthClient(token="t")._session.telemetry is None
        sys.argv = ["health-async", "demo"]
        from health_async.cli import main
        code = main(["demo"])
        assert not [m for m in sys.modules if m.split(".")[0] == "opentelemetry"], "imported"
        print("OK", code)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK 0" in done.stdout
