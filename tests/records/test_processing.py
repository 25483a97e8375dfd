"""Processing results: the models, the polling schedule, waiting (alone, after upload, in bulk), the fake, the CLI."""

from __future__ import annotations

import asyncio
import base64
import io
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from health_async import HealthClient, cli
from health_async._wire import structure
from health_async.errors import (
    AuthenticationError,
    ClientClosedError,
    DocumentNotFound,
    InvalidRequest,
    ProcessingFailed,
    ProcessingTimeout,
    RateLimitError,
    ResponseValidationError,
    ServerError,
)
from health_async.models import ProcessingError, ProcessingResult, ProcessingStatus, UploadOutcome
from health_async.resources.records import _polling
from health_async.resources.records._polling import PollPolicy, poll_until_final
from health_async.testing import FakeHealthServer, Fault

from ..conftest import FAST_RETRY, ServerThread

#: Polls every few milliseconds: waits against the loopback fake take no noticeable time.
QUICK = PollPolicy(first_poll=0.005, max_poll=0.01)


# ------------------------------------------------------------------------------------------ helpers


class FakeTime:
    """A clock and a sleep that advances it instantly: hours of polling in microseconds."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def eventually(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def status_body(status: str, **extra: Any) -> dict[str, Any]:
    return {"status": status, "error": [], **extra}


def fetcher(
    answers: Callable[[int], ProcessingResult | BaseException], budgets: list[float | None] | None = None
) -> Callable[[float | None], Awaitable[ProcessingResult]]:
    """A fetch whose n-th call (0-based) returns or raises ``answers(n)``."""
    calls = [0]

    async def fetch(budget: float | None) -> ProcessingResult:
        if budgets is not None:
            budgets.append(budget)
        n = calls[0]
        calls[0] += 1
        answer = answers(n)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return fetch


def result_of(status: str, **extra: Any) -> ProcessingResult:
    return structure_result(status_body(status, **extra), "doc-1")


COMPLETED_BODY: dict[str, Any] = {
    "status": "completed",
    "error": [],
    "data": {
        "fhir": base64.b64encode(
            orjson.dumps({"resourceType": "Bundle", "entry": [{"resource": {"name": [{"text": "Asha Sharma"}]}}]})
        ).decode(),
        "output": {
            "data": [
                {
                    "test_name": "Haemoglobin",
                    "data": {
                        "value": 13.5,
                        "unit": "g/dL",
                        "unit_processed": "g/dL",
                        "normal_range_report": '{"low": 13.0, "high": 17.0}',
                        "normal_range_eka": {"low": 12.5, "high": 17.5},
                        "unit_eka_id": "un-1",
                        "display_range": "13.0-17.0",
                    },
                    "normalised_data": {"value": 135, "unit": "g/L", "normal_range_report": '{"low":130,"high":170}'},
                    "confidence": 0.93,
                    "test_eka_id": "lb-1",
                    "loinc_id": "718-7",
                },
                {"test_name": "HIV", "data": {"value": "Non-reactive", "normal_range_report": "not json"}},
            ],
            "pii": {"file.pdf": [{"PageNum": 1, "Patient": {"Name": "Asha Sharma", "Gender": "female"}}]},
        },
    },
}


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(documents_per_user=5) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], retry=FAST_RETRY
    ) as c:
        yield c


# ------------------------------------------------------------------------------------------ models


@pytest.mark.parametrize(
    ("wire", "status"),
    [
        ("queued", ProcessingStatus.QUEUED),
        ("inprogress", ProcessingStatus.IN_PROGRESS),
        ("IN_PROGRESS", ProcessingStatus.IN_PROGRESS),
        ("completed", ProcessingStatus.COMPLETED),
        ("deleted", ProcessingStatus.DELETED),
        ("error", ProcessingStatus.ERROR),
        ("parsing", ProcessingStatus.UNKNOWN),
        (None, ProcessingStatus.UNKNOWN),
        (7, ProcessingStatus.UNKNOWN),
    ],
)
def test_status_from_the_wire_never_fails(wire: Any, status: ProcessingStatus) -> None:
    result = structure_result({"status": wire} if not isinstance(wire, int) else {}, "d")
    if isinstance(wire, int):  # a non-string status is a shape error of the body, not a status
        assert ProcessingStatus.from_wire(wire) is status
        return
    assert result.status is status
    assert result.is_final == (status in {ProcessingStatus.COMPLETED, ProcessingStatus.DELETED, ProcessingStatus.ERROR})


def test_completed_result_parses_tests_ranges_and_fhir() -> None:
    result = structure_result(COMPLETED_BODY, "doc-1")
    assert result.status is ProcessingStatus.COMPLETED and result.document_id == "doc-1"
    hb, hiv = result.tests
    assert (hb.name, hb.value, hb.unit, hb.number, hb.loinc_id, hb.test_eka_id) == (
        "Haemoglobin",
        "13.5",
        "g/dL",
        13.5,
        "718-7",
        "lb-1",
    )
    assert hb.range_report is not None and (hb.range_report.low, hb.range_report.high) == (13.0, 17.0)
    assert hb.range_eka is not None and hb.range_eka.high == 17.5
    assert (hb.normalised_value, hb.normalised_unit, hb.normalised_number) == ("135", "g/L", 135.0)
    assert hb.confidence == 0.93 and hb.range is hb.range_report and hb.range_report.contains(13.5)
    # values stay text, as the smart report keeps them; an unstructured range is None, not an error
    assert (hiv.value, hiv.number, hiv.range_report) == ("Non-reactive", None, None)
    assert result.fhir is not None and result.fhir["resourceType"] == "Bundle"
    assert result.pii is not None and "file.pdf" in result.pii


def test_personal_data_never_in_repr() -> None:
    result = structure_result(COMPLETED_BODY, "doc-1")
    _ = result.tests, result.fhir  # parsed and cached: still hidden
    text = repr(result) + str(result)
    assert "Asha" not in text and "Bundle" not in text and "pii" not in text and "Haemoglobin" not in text
    assert "COMPLETED" in text


def test_tests_empty_until_completed_and_errors_parsed() -> None:
    assert result_of("inprogress", data=COMPLETED_BODY["data"]).tests == ()
    failed = structure_result({"status": "error", "error": [{"code": 422, "message": "unreadable"}]}, "d")
    assert failed.errors == (ProcessingError(422, "unreadable"),) and failed.tests == () and failed.fhir is None


def test_malformed_parts_raise_validation_errors_naming_the_field_not_the_value() -> None:
    bad_tests = {
        "status": "completed",
        "data": {"output": {"data": [{"test_name": "Hb", "data": {"value": ["SECRET"]}}]}},
    }
    result = structure_result(bad_tests, "d")  # parsed lazily: the call itself succeeds
    with pytest.raises(ResponseValidationError, match=r"data\.value") as info:
        _ = result.tests
    assert "SECRET" not in str(info.value)
    with pytest.raises(ResponseValidationError, match=r"data\.fhir"):
        _ = structure_result({"status": "completed", "data": {"fhir": "bm90IGpzb24="}}, "d").fhir
    with pytest.raises(ResponseValidationError, match="ProcessingResult"):
        structure_result({"status": "completed", "data": "SECRET"}, "d")


def test_poll_settings_checked_before_anything_is_sent() -> None:
    too_big = 10**400  # valid JSON, too large for a float: a typed error, not an OverflowError
    for bad in (
        {"first_poll": 0},
        {"max_poll": -1},
        {"first_poll": 5, "max_poll": 1},
        {"jitter": 2},
        {"first_poll": too_big},
        {"multiplier": too_big},
        {"multiplier": float("nan")},
    ):
        with pytest.raises(InvalidRequest):
            PollPolicy(**bad)
    assert PollPolicy.of(first_poll=60).max_poll == 60  # a long first poll raises the cap with it
    with pytest.raises(InvalidRequest):
        _polling.check_timeout(0)


# ------------------------------------------------------------------------------------------ the schedule


@pytest.mark.parametrize("seed", range(5))
async def test_a_ten_minute_wait_polls_at_most_30_times_and_respects_the_deadline(seed: int) -> None:
    t = FakeTime()
    start = t.now
    budgets: list[float | None] = []
    calls: list[float] = []

    def answer(n: int) -> ProcessingResult:
        calls.append(t.now)
        return result_of("inprogress")

    with pytest.raises(ProcessingTimeout) as info:
        await poll_until_final(
            fetcher(answer, budgets),
            "doc-1",
            timeout=600.0,
            policy=PollPolicy(),
            request_timeout=30.0,
            clock=t.clock,
            sleep=t.sleep,
            rand=random.Random(seed).random,
        )
    assert 20 <= len(calls) <= 30
    assert info.value.last_status is ProcessingStatus.IN_PROGRESS and info.value.document_id == "doc-1"
    assert isinstance(info.value, TimeoutError)
    assert t.now - start <= 600.0  # never outlives the deadline
    assert 0.8 <= calls[0] - start <= 1.2  # the first poll after about a second
    assert max(t.sleeps) <= 30 * 1.2  # growing to a cap of about 30 s
    for at, budget in zip(calls, budgets, strict=True):  # each poll's own timeout cut to the time left
        assert budget is not None and at + budget <= start + 600.0 + 1e-9


async def test_jitter_spreads_the_first_polls_of_many_waits() -> None:
    t = FakeTime()
    first_polls: list[float] = []

    rng = random.Random(7)  # deterministic stand-in for the module-level random every wait shares

    async def one_wait() -> None:
        started = t.now
        seen = [False]

        def answer(n: int) -> ProcessingResult:
            if not seen[0]:
                first_polls.append(t.now - started)
                seen[0] = True
            return result_of("completed")

        await poll_until_final(
            fetcher(answer),
            "d",
            timeout=60,
            policy=PollPolicy(),
            request_timeout=None,
            clock=t.clock,
            sleep=t.sleep,
            rand=rng.random,
        )

    # each wait sleeps on its own fake timeline; only the first delay matters here
    for _ in range(500):
        await one_wait()
    assert all(0.8 <= d <= 1.2 for d in first_polls)
    # spread over the whole +-20 % window, not one synchronised burst: every 50 ms slice gets its share
    slices = [0] * 8
    for d in first_polls:
        slices[min(7, int((d - 0.8) / 0.05))] += 1
    assert all(25 <= n <= 100 for n in slices), slices


async def test_retry_after_lengthens_the_next_poll_instead_of_failing_the_wait() -> None:
    t = FakeTime()
    limited = RateLimitError("rate limited", status=429, headers={"Retry-After": "45"})

    def answer(n: int) -> ProcessingResult | BaseException:
        answers: list[ProcessingResult | BaseException] = [limited, result_of("inprogress"), result_of("completed")]
        return answers[n]

    result = await poll_until_final(
        fetcher(answer), "d", timeout=600, policy=PollPolicy(), request_timeout=None, clock=t.clock, sleep=t.sleep
    )
    assert result.status is ProcessingStatus.COMPLETED
    assert t.sleeps[1] >= 45


async def test_transient_failures_keep_waiting_other_failures_end_it() -> None:
    t = FakeTime()
    flaky = ServerError("server error", status=502)

    def answer(n: int) -> ProcessingResult | BaseException:
        return flaky if n < 3 else result_of("completed")

    result = await poll_until_final(
        fetcher(answer), "d", timeout=600, policy=PollPolicy(), request_timeout=None, clock=t.clock, sleep=t.sleep
    )
    assert result.status is ProcessingStatus.COMPLETED
    denied = AuthenticationError("not authorised", status=401)
    with pytest.raises(AuthenticationError):
        await poll_until_final(
            fetcher(lambda n: denied),
            "d",
            timeout=600,
            policy=PollPolicy(),
            request_timeout=None,
            clock=t.clock,
            sleep=t.sleep,
        )
    # failing until the deadline: the timeout is chained to the last failure
    with pytest.raises(ProcessingTimeout) as info:
        await poll_until_final(
            fetcher(lambda n: flaky),
            "d",
            timeout=60,
            policy=PollPolicy(),
            request_timeout=None,
            clock=t.clock,
            sleep=t.sleep,
        )
    assert info.value.__cause__ is flaky and info.value.last_status is None


async def test_an_unknown_status_keeps_polling_until_the_deadline() -> None:
    t = FakeTime()
    start = t.now
    polls: list[int] = []

    def answer(n: int) -> ProcessingResult:
        polls.append(n)
        return result_of("reticulating")

    with pytest.raises(ProcessingTimeout) as info:
        await poll_until_final(
            fetcher(answer), "d", timeout=120, policy=PollPolicy(), request_timeout=None, clock=t.clock, sleep=t.sleep
        )
    assert info.value.last_status is ProcessingStatus.UNKNOWN and len(polls) > 5
    assert 110 <= t.now - start <= 120


# ------------------------------------------------------------------------------------------ against the fake


async def test_result_advances_queued_inprogress_completed(client: HealthClient, server: FakeHealthServer) -> None:
    document_id = server.data.document_ids(server.data.user_ids[0])[0]
    seen = [(await client.documents.result(document_id)).status for _ in range(3)]
    assert seen == [ProcessingStatus.QUEUED, ProcessingStatus.IN_PROGRESS, ProcessingStatus.COMPLETED]
    done = await client.documents.result(document_id)
    assert done.tests and all(t.name and t.value and t.loinc_id for t in done.tests)
    assert done.fhir is not None and done.fhir["resourceType"] == "Bundle"
    request = next(r for r in server.requests if r.route == "result")
    assert request.path == f"/mr/api/v1/docs/{document_id}/result"
    assert request.headers["X-Pt-Id"] == server.data.user_ids[0]


async def test_wait_for_result_returns_the_completed_result(client: HealthClient, server: FakeHealthServer) -> None:
    document_id = server.data.document_ids(server.data.user_ids[0])[1]
    server.records.configure(polls=4)
    result = await client.documents.wait_for_result(document_id, poll=QUICK)
    assert result.status is ProcessingStatus.COMPLETED and result.tests
    assert server.records.polls(document_id) == 5


async def test_upload_wait_attaches_the_result_and_content_ending_in_error_fails(
    client: HealthClient, server: FakeHealthServer
) -> None:
    up = await client.documents.upload(b"%PDF-1.7 fine report", wait=True, poll=QUICK)
    assert up.processing is not None and up.processing.status is ProcessingStatus.COMPLETED and up.processing.tests
    assert up.processing.document_id == up.document_id
    with pytest.raises(ProcessingFailed) as info:
        await client.documents.upload(b"%PDF-1.7 broken error", wait=True, poll=QUICK)
    assert info.value.document_id and info.value.errors and info.value.errors[0].code == 422
    assert "broken" not in str(info.value)
    plain = await client.documents.upload(b"%PDF-1.7 no wait")
    assert plain.processing is None


async def test_encrypted_upload_ending_in_error_fails_too(server: FakeHealthServer) -> None:
    async with HealthClient(
        base_url=server.url,
        token=server.token,
        user_id=server.data.user_ids[0],
        encryption_key=server.encryption_key,
        key_id=server.key_id,
    ) as c:
        with pytest.raises(ProcessingFailed):
            await c.documents.upload(b"%PDF encrypted error", encrypt=True, wait=True, poll=QUICK)


async def test_an_encrypted_request_without_a_key_id_is_refused_before_sending(server: FakeHealthServer) -> None:
    # the service finds the shared key by the envelope's kid: an envelope without one cannot be read there
    async with HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], encryption_key=server.encryption_key
    ) as c:
        with pytest.raises(InvalidRequest, match="key_id"):
            await c.documents.upload(b"%PDF", encrypt=True)
        with pytest.raises(InvalidRequest, match="key_id"):
            await c.abha.aadhaar_init(server.data.valid_aadhaar[0], encrypt=True)
    assert server.requests == []


async def test_upload_wait_without_user_id_sends_nothing(server: FakeHealthServer) -> None:
    async with HealthClient(base_url=server.url, token=server.token) as c:
        with pytest.raises(InvalidRequest, match="user id"):
            await c.documents.upload(b"%PDF", wait=True)
    assert server.calls("upload") == 0


async def test_deleted_and_unknown_documents_raise_document_not_found(
    client: HealthClient, server: FakeHealthServer
) -> None:
    document_id = server.data.document_ids(server.data.user_ids[0])[2]
    server.records.delete(document_id)
    server.records.configure(polls=0)
    with pytest.raises(DocumentNotFound):
        await client.documents.wait_for_result(document_id, poll=QUICK)
    with pytest.raises(DocumentNotFound):
        await client.documents.wait_for_result("no-such-document", poll=QUICK)
    with pytest.raises(DocumentNotFound):
        await client.documents.result("no-such-document")
    server.records.fail(server.data.document_ids(server.data.user_ids[0])[3])
    with pytest.raises(ProcessingFailed):
        await client.documents.wait_for_result(server.data.document_ids(server.data.user_ids[0])[3], poll=QUICK)


async def test_a_real_wait_ends_at_its_deadline(client: HealthClient, server: FakeHealthServer) -> None:
    server.records.configure(polls=10**6)
    document_id = server.data.document_ids(server.data.user_ids[0])[0]
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ProcessingTimeout) as info:
        await client.documents.wait_for_result(document_id, timeout=0.3, first_poll=0.02, max_poll=0.05)
    assert loop.time() - started <= 0.3 + 0.05
    assert info.value.last_status is ProcessingStatus.IN_PROGRESS


async def test_rate_limits_after_the_clients_retries_lengthen_the_poll(
    client: HealthClient, server: FakeHealthServer
) -> None:
    document_id = server.data.document_ids(server.data.user_ids[0])[0]
    server.records.configure(polls=0)
    server.inject("result", Fault(status=429, retry_after=20, times=FAST_RETRY.attempts))  # outlasts the retries
    t = FakeTime()

    async def fetch(budget: float | None) -> ProcessingResult:
        return await client.documents.result(document_id, timeout=budget)

    result = await poll_until_final(
        fetch, document_id, timeout=600, policy=PollPolicy(), request_timeout=30, clock=t.clock, sleep=t.sleep
    )
    assert result.status is ProcessingStatus.COMPLETED
    assert t.sleeps[1] >= 20 and server.calls("result") == FAST_RETRY.attempts + 1


async def test_cancelling_a_wait_leaves_nothing_behind(client: HealthClient, server: FakeHealthServer) -> None:
    server.records.configure(polls=10**6)
    document_id = server.data.document_ids(server.data.user_ids[0])[0]
    before = asyncio.all_tasks()
    # cancelled while sleeping between polls
    task = asyncio.create_task(client.documents.wait_for_result(document_id, first_poll=0.01, max_poll=10))
    await asyncio.sleep(0.1)
    assert server.records.polls(document_id) >= 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # cancelled in the middle of a poll
    server.inject("result", Fault(latency=5))
    task = asyncio.create_task(client.documents.wait_for_result(document_id, poll=QUICK))
    await eventually(lambda: server.calls("result") > server.records.polls(document_id))  # a poll is in flight
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(50):  # the server's handler of the abandoned request is cancelled when the connection goes
        if asyncio.all_tasks() <= before:
            break
        await asyncio.sleep(0.01)
    assert asyncio.all_tasks() <= before
    assert not client._session.tasks


async def test_upload_many_wait_gives_each_file_its_result(client: HealthClient, server: FakeHealthServer) -> None:
    files = [b"%PDF one", b"%PDF two error", b"%PDF three", b""]
    uploads: list[tuple[int, int]] = []
    finished: list[int] = []
    outcomes: list[UploadOutcome] = []
    async with client.documents.upload_many(
        files,
        wait=True,
        poll=QUICK,
        ordered=True,
        progress=lambda done, failed, total: finished.append(done),
        upload_progress=lambda done, failed, total: uploads.append((done, failed)),
    ) as stream:
        async for outcome in stream:
            outcomes.append(outcome)
    one, two, three, empty = outcomes
    for ok in (one, three):
        assert ok.ok and ok.processing is not None and ok.processing.tests
        assert ok.result is not None and ok.result.processing is ok.processing
    assert isinstance(two.error, ProcessingFailed) and two.result is not None and two.processing is None
    assert isinstance(empty.error, InvalidRequest) and empty.result is None
    assert finished[-1] == 4 and uploads[-1] == (4, 1)
    assert server.calls("upload") == 3


async def test_leaving_a_waiting_batch_early_reports_the_uploaded_files(
    client: HealthClient, server: FakeHealthServer
) -> None:
    server.records.configure(polls=10**6)  # never completes
    stream = client.documents.upload_many([b"%PDF a", b"%PDF b"], wait=True, poll=QUICK)
    waiting = asyncio.ensure_future(anext(stream))
    await eventually(lambda: server.calls("result") >= 2)  # both files uploaded and being waited for
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await stream.aclose()
    assert len(stream.left_behind) == 2 and all(o.result is not None for o in stream.left_behind)
    assert not client._session.tasks


@pytest.mark.parametrize("leave", ["cancel", "break"])
async def test_leaving_while_an_upload_waits_for_a_wait_place_still_reports_it(
    client: HealthClient, server: FakeHealthServer, leave: str
) -> None:
    # One wait place, processing that never finishes: the feeder takes an uploaded file's outcome, then waits for
    # the place; leaving then must report that outcome too (it used to be dropped with the feeder).
    server.records.configure(polls=10**6)
    files = [b"%PDF a", b"%PDF b", b"%PDF c"]
    stream = client.documents.upload_many(
        files, wait=True, poll=QUICK, wait_concurrency=1, concurrency=3, wait_timeout=0.3 if leave == "break" else 60
    )
    yielded: list[UploadOutcome] = []
    if leave == "cancel":  # cancelled while waiting for the first file's processing
        waiting = asyncio.ensure_future(anext(stream))
        await eventually(lambda: server.calls("upload") == 3 and server.calls("result") >= 2)
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    else:  # the first file's wait times out; break while the next is waited for and the third waits for a place
        yielded.append(await anext(stream))
        polls = server.calls("result")
        await eventually(lambda: server.calls("upload") == 3 and server.calls("result") > polls)
        assert isinstance(yielded[0].error, ProcessingTimeout)
    await stream.aclose()
    reported = yielded + stream.left_behind
    ids = [o.result.document_id for o in reported if o.result is not None]
    assert len(ids) == len(reported) == server.calls("upload") == 3
    assert len(set(ids)) == 3 and {o.source for o in reported} == set(files)  # each once
    assert not client._session.tasks


async def test_closing_the_client_during_the_waits_reports_the_uploads_waited_for(server: FakeHealthServer) -> None:
    server.records.configure(polls=10**6)  # never completes
    client = HealthClient(base_url=server.url, token=server.token, user_id=server.data.user_ids[0], retry=FAST_RETRY)
    stream = client.documents.upload_many([b"", b"%PDF a", b"%PDF b"], wait=True, poll=QUICK, ordered=True)
    first = await anext(stream)  # the empty file: no upload, nothing to wait for
    assert isinstance(first.error, InvalidRequest)
    await eventually(lambda: server.calls("upload") == 2 and server.calls("result") >= 2)
    await client.aclose()  # cancels the waits while the consumer is away from the stream
    with pytest.raises(ClientClosedError):
        await anext(stream)
    await stream.aclose()
    assert len(stream.left_behind) == 2 and {o.source for o in stream.left_behind} == {b"%PDF a", b"%PDF b"}
    assert all(o.result is not None and o.processing is None for o in stream.left_behind)


# ------------------------------------------------------------------------------------------ CLI


@pytest.fixture
def cli_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=5) as srv:
        for name, value in {
            "BASE_URL": srv.url,
            "TOKEN": srv.token,
            "CLIENT_ID": srv.client_id,
            "USER_ID": srv.data.user_ids[0],
        }.items():
            monkeypatch.setenv(f"HEALTH_ASYNC_{name}", value)
        # the CLI polls on the default schedule; make it quick
        monkeypatch.setattr(PollPolicy, "of", classmethod(lambda cls, policy=None, **kw: QUICK))
        yield srv


def test_cli_result_prints_json(cli_server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    document_id = cli_server.data.document_ids(cli_server.data.user_ids[0])[0]
    assert cli.main(["result", document_id]) == 0
    first = orjson.loads(capsys.readouterr().out)
    assert first["status"] == "QUEUED" and first["tests"] == []
    assert cli.main(["result", document_id, "--wait", "--fhir"]) == 0
    done = orjson.loads(capsys.readouterr().out)
    assert done["status"] == "COMPLETED" and done["tests"][0]["loinc_id"] and done["fhir"]["resourceType"] == "Bundle"
    assert cli.main(["result", "no-such-document"]) == 1
    assert orjson.loads(capsys.readouterr().out)["error"]["type"] == "DocumentNotFound"


def test_cli_upload_wait_prints_the_tests_as_a_table(
    cli_server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good, bad = tmp_path / "good.pdf", tmp_path / "bad.pdf"
    good.write_bytes(b"%PDF good")
    bad.write_bytes(b"%PDF bad error")
    code = cli.main(["upload", str(good), str(bad), "--wait"])
    out, err = capsys.readouterr()
    assert code == 1
    good_part, bad_part = out.split("\n\n")[:2]
    assert "good.pdf" in good_part and "completed" in good_part
    assert "test" in good_part.splitlines()[1] and "loinc" in good_part.splitlines()[1]
    assert len(good_part.splitlines()) >= 4  # heading, table header, tests
    assert "bad.pdf" in bad_part and "FAILED  ProcessingFailed" in bad_part
    assert "1 done, 1 failed" in err


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_cli_upload_many_wait_counts_processed_and_uploaded(
    cli_server: FakeHealthServer,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("a.pdf", "b.pdf", "c.jpg"):
        (tmp_path / name).write_bytes(b"%PDF " + name.encode())
    (tmp_path / ".hidden").write_bytes(b"skip me")
    bar = _Tty()
    monkeypatch.setattr("sys.stderr", bar)
    code = cli.main(["upload-many", str(tmp_path), "--wait"])
    out = capsys.readouterr().out
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 3
    assert all(line["processing"]["status"] == "COMPLETED" and line["processing"]["tests"] for line in lines)
    assert "uploaded 3/3" in bar.getvalue() and "processed [" in bar.getvalue() and "3/3" in bar.getvalue()
    assert cli_server.calls("upload") == 3


def structure_result(data: object, document_id: str | None = None) -> ProcessingResult:
    return structure(data, ProcessingResult, document_id=document_id)
