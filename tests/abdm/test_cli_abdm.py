"""``health-async abdm link|linked`` against the fake server, and ``health-async webhooks serve`` in-process on
127.0.0.1 (and once as a process, for its signals)."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from health_async import HealthClient, _json, cli, webhooks
from health_async._cli.webhooks import commands as webhooks_cli
from health_async.ingest import IngestJob
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abdm._hiu import example_document
from health_async.testing.webhooks._send import send_webhook, sign

from ..conftest import Serve, ServerThread

OID = "oid-patient-1"
ABHA = "shyam.kumar@sbx"
SECRET = "whsec-test-0123456789"
BUNDLE = example_document("OPConsultation")  # the guide's own example: linked data is validated


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread() as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        yield srv


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def link_args(care_context_id: str, *patient: str) -> list[str]:
    return [
        "abdm",
        "link",
        "--care-context-id",
        care_context_id,
        "--display",
        "OP visit, 3 March 2024",
        "--hi-type",
        "OPConsultation",
        *patient,
    ]


# ------------------------------------------------------------------------ abdm link / linked


@pytest.mark.parametrize(
    "command",
    [["abdm", "link"], ["abdm", "linked"], ["abdm", "onboard"], ["abdm", "providers"], ["webhooks", "serve"]],
)
def test_help(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main([*command, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: health-async " + " ".join(command))


def test_link_records_the_link_and_prints_neither_the_bundle_nor_the_abha_address(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bundle = tmp_path / "visit.json"
    bundle.write_bytes(orjson.dumps(BUNDLE))
    code, out, err = run(capsys, *link_args("V-1", "--abha-address", ABHA), "--data", str(bundle))
    assert code == 0, err
    assert out.count("\n") == 1
    assert "V-1" in out and "sent" in out and "abha.link_care_context" in out
    link = server.abdm.links[ABHA]["V-1"]
    assert (link["display"], link["hi_type"], link["data"]) == ("OP visit, 3 March 2024", "OPConsultation", BUNDLE)
    for secret in ("shyam", "Composition", "OP visit"):
        assert secret not in out + err


def test_link_json_prints_one_object(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *link_args("V-2", "--oid", OID), "--json")
    assert code == 0
    assert orjson.loads(out) == {
        "care_context_id": "V-2",
        "hi_type": "OPConsultation",
        "with_data": False,
        "sent": True,
        "outcome_event": "abha.link_care_context",
    }
    assert "V-2" in server.abdm.links[OID]
    assert server.calls("care_contexts_link") == 1


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"--hi-type": "XRay"}, "hi_type must be one of"),
        ({"--care-context-id": "x" * 256}, "care_context_id must be at most 255"),
        ({"--display": "line\nbreak"}, "display must be a non-empty line"),
        ({"--abha-address": "shyam@gmail.com"}, "abha_address may only end in"),
        ({"--data": "not-json"}, "data is not JSON"),
        ({"--data": "array"}, "data must be a JSON object"),
        ({"--data": "not-a-document"}, "(care context 'V-3'): its FHIR bundle is not valid"),
    ],
)
def test_a_value_the_library_refuses_is_one_line_exit_2_and_nothing_sent(
    server: FakeHealthServer,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    change: dict[str, str],
    rule: str,
) -> None:
    files = {
        "not-json": b"{'resourceType': Composition",
        "array": b'["Composition"]',
        "not-a-document": b'{"resourceType": "Bundle", "id": "Composition", "type": "collection"}',
    }
    argv = link_args("V-3", "--abha-address", ABHA)
    for flag, value in change.items():
        if flag == "--data":
            path = tmp_path / "bundle.json"
            path.write_bytes(files[value])
            argv += [flag, str(path)]
        else:
            argv[argv.index(flag) + 1] = value
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("health-async: ") and rule in err
    assert "Composition" not in err and "shyam" not in err
    assert server.calls("care_contexts_link") == 0
    assert server.abdm.links == {}


def test_link_needs_a_patient_and_a_readable_bundle(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, *link_args("V-4"))
    assert (code, out) == (2, "")
    assert "--abha-address, --oid or --partner-user-id" in err
    code, out, err = run(capsys, *link_args("V-4", "--oid", OID), "--data", str(tmp_path / "missing.json"))
    assert (code, out) == (2, "")
    assert err == "health-async: the input file does not exist\n"
    assert server.calls("care_contexts_link") == 0


def test_a_link_of_unknown_outcome_says_so_with_a_hint_and_is_not_retried(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.inject("care_contexts_link", Fault(status=503, times=1))
    code, out, _ = run(capsys, *link_args("V-5", "--oid", OID), "--json")
    assert code == 1
    line = orjson.loads(out)
    assert line["care_context_id"] == "V-5" and "abdm linked" in line["hint"]
    assert server.calls("care_contexts_link") == 1


def test_linked_lists_the_linked_ids_and_shows_display_only_when_asked(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    for cid in ("V-10", "V-11"):
        assert run(capsys, *link_args(cid, "--oid", OID))[0] == 0
    code, out, _ = run(capsys, "abdm", "linked", "--hip-id", "HIP-1", "--oid", OID)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["care_context_id", "status", "created_at"]
    assert [line.split()[0] for line in lines[1:]] == ["V-10", "V-11"]
    assert "OP visit" not in out

    code, out, _ = run(capsys, "abdm", "linked", "--hip-id", "HIP-1", "--oid", OID, "--json")
    assert code == 0
    items = [orjson.loads(line) for line in out.splitlines()]
    assert items == [{"care_context_id": cid, "status": "unknown", "created_at": None} for cid in ("V-10", "V-11")]

    code, out, _ = run(capsys, "abdm", "linked", "--hip-id", "HIP-1", "--oid", OID, "--json", "--show-display")
    assert [orjson.loads(line)["display"] for line in out.splitlines()] == ["OP visit, 3 March 2024"] * 2
    code, out, _ = run(capsys, "abdm", "linked", "--hip-id", "HIP-1", "--oid", OID, "--show-display")
    assert out.splitlines()[0].split() == ["care_context_id", "status", "created_at", "display"]
    assert "OP visit, 3 March 2024" in out


def test_linked_with_nothing_linked_prints_nothing(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "abdm", "linked", "--hip-id", "HIP-1", "--oid", "nobody")
    assert (code, out) == (0, "")
    assert "no care contexts linked" in err


# ------------------------------------------------------------------------ abdm onboard / providers


def test_onboard_prints_the_services_answer_as_one_json_object(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "abdm", "onboard", "--hip-id", "IN2910000101", "--name", "Apollo Clinic", "--clinic-id", "c-1"
    )
    assert (code, err) == (0, "")
    assert orjson.loads(out) == {
        "hip_id": "IN2910000101",
        "hip_name": "Apollo Clinic",
        "hip_code": "HC-1",
        "scan_share_url": "https://phr.example/share?hip_id=IN2910000101",
    }
    assert server.requests[-1].json == {"hip_id": "IN2910000101", "name": "Apollo Clinic", "clinic_id": "c-1"}
    assert server.requests[-1].route == "hip_onboard"


def test_onboard_refused_by_the_library_is_exit_2_and_nothing_sent(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "abdm", "onboard", "--hip-id", "IN2910000101", "--name", "two\nlines")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "name must be at most" in err
    assert server.calls("hip_onboard") == 0


def test_an_onboarding_of_unknown_outcome_says_so_and_is_not_retried(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.inject("hip_onboard", Fault(status=503, times=1))
    code, out, _ = run(capsys, "abdm", "onboard", "--hip-id", "IN2910000101", "--name", "Apollo Clinic")
    assert code == 1
    line = orjson.loads(out)
    assert line["hip_id"] == "IN2910000101" and line["error"]["type"] == "OutcomeUnknown"
    assert "not sent again" in line["hint"]
    assert server.calls("hip_onboard") == 1


def test_providers_lists_the_facilities_a_user_has_links_at_as_json_lines(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "abdm", "providers", "--oid", OID)
    assert (code, out) == (0, "")
    assert err == "no linked providers\n"
    assert run(capsys, *link_args("V-20", "--oid", OID))[0] == 0  # linked at the fake's default facility, HIP-1
    code, out, _ = run(capsys, "abdm", "providers", "--oid", OID)
    assert code == 0
    assert [orjson.loads(line) for line in out.splitlines()] == [{"hip_id": "HIP-1", "hip_name": None}]
    assert run(capsys, "abdm", "onboard", "--hip-id", "HIP-1", "--name", "Apollo Clinic")[0] == 0
    code, out, _ = run(capsys, "abdm", "providers", "--oid", OID)
    assert [orjson.loads(line) for line in out.splitlines()] == [{"hip_id": "HIP-1", "hip_name": "Apollo Clinic"}]
    request = server.requests[-1]
    assert request.route == "care_contexts_providers" and ("oid", OID) in request.query


# ------------------------------------------------------------------------ webhooks serve


class Running:
    """``webhooks serve`` running in this loop: its URL, what it printed, and how to stop it."""

    def __init__(self, task: asyncio.Task[int], stop: asyncio.Event, url: str, out: io.StringIO) -> None:
        self.task, self.stop, self.url, self.out = task, stop, url, out

    def lines(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.out.getvalue().splitlines()]

    async def close(self) -> int:
        self.stop.set()
        return await asyncio.wait_for(self.task, 10)


Start = Callable[..., Awaitable[Running]]


@pytest.fixture
async def start_serve() -> AsyncIterator[Start]:
    started: list[Running] = []

    async def start(*flags: str) -> Running:
        args = cli.build_parser().parse_args(["webhooks", "serve", "--port", "0", *flags])
        stop, out = asyncio.Event(), io.StringIO()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            webhooks_cli.serve(args, stop=stop, on_ready=ready.set_result, out=out, err=io.StringIO())
        )
        url = await asyncio.wait_for(asyncio.shield(ready), 10)
        running = Running(task, stop, url, out)
        started.append(running)
        return running

    yield start
    for running in started:
        if not running.task.done():
            await running.close()


def link_event(status: str = "LINKED") -> dict[str, Any]:
    return {
        "event": "abha.link_care_context",
        "service": "abdm",
        "event_time": 1717000000,
        "transaction_id": "txn-1",
        "data": {"care_context_id": "V-1", "status": status, "abha_address": ABHA, "hip_id": "HIP-1"},
    }


async def test_serve_prints_a_verified_event_without_its_data(start_serve: Start) -> None:
    running = await start_serve("--secret", SECRET)
    assert running.url.startswith("http://127.0.0.1:") and running.url.endswith("/webhooks")
    assert await send_webhook(running.url, link_event(), SECRET) == 200
    [line] = running.lines()
    assert line["event"] == line["kind"] == "abha.link_care_context"
    assert (line["service"], line["link_status"], line["care_context_id"]) == ("abdm", "LINKED", "V-1")
    assert line["event_time"].startswith("2024-05-29T") and line["signed_at"]
    assert "data" not in line
    assert ABHA not in running.out.getvalue() and "txn-1" not in running.out.getvalue()
    assert await running.close() == 0


async def test_serve_shows_data_only_with_show_data(start_serve: Start) -> None:
    running = await start_serve("--secret", SECRET, "--show-data")
    assert await send_webhook(running.url, link_event("ERRORED"), SECRET) == 200
    [line] = running.lines()
    assert line["link_status"] == "ERRORED"
    assert line["data"] == link_event()["data"] | {"status": "ERRORED"}


async def test_serve_refuses_a_bad_signature_and_a_replay_as_the_library_does(
    start_serve: Start, caplog: pytest.LogCaptureFixture
) -> None:
    running = await start_serve("--secret", SECRET)
    assert await send_webhook(running.url, link_event(), "another-secret") == 400
    assert running.out.getvalue() == ""
    assert "no v1 signature matches" in caplog.text
    body = _json.dumps({"event": "rec.uploaded", "service": "rec", "data": {"document_id": "d-1"}})
    headers = {"Content-Type": "application/json", webhooks.SIGNATURE_HEADER: sign(body, SECRET)}
    async with aiohttp.ClientSession() as session:
        for expected in ("ok", "duplicate webhook ignored"):
            async with session.post(running.url, data=body, headers=headers) as response:
                assert (response.status, await response.text()) == (200, expected)
        async with session.get(running.url) as response:
            assert response.status == 405
    assert [line["event"] for line in running.lines()] == ["rec.uploaded"]


async def test_serve_takes_the_secret_from_the_environment_and_never_prints_it(
    start_serve: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(webhooks_cli.ENV_WEBHOOK_SECRET, SECRET)
    running = await start_serve("--path", "/hooks/eka")
    assert running.url.endswith("/hooks/eka")
    assert await send_webhook(running.url, link_event(), SECRET) == 200
    assert len(running.lines()) == 1 and SECRET not in running.out.getvalue()


async def test_serve_forwards_the_same_body_and_a_signature_that_verifies(start_serve: Start, serve: Serve) -> None:
    received: list[tuple[bytes, str | None]] = []

    async def app(request: web.Request) -> web.Response:
        received.append((await request.read(), request.headers.get(webhooks.SIGNATURE_HEADER)))
        return web.Response(status=204)

    target = await serve({("POST", "/app/webhooks"): app})
    running = await start_serve("--secret", SECRET, "--forward", f"{target}/app/webhooks")
    event = link_event()
    assert await send_webhook(running.url, event, SECRET) == 200
    [(body, header)] = received
    assert body == _json.dumps(event)
    forwarded = webhooks.verify(body, header, SECRET)
    assert forwarded.event == "abha.link_care_context" and forwarded.data == event["data"]
    [line] = running.lines()
    assert line["forward"] == {"status": 204}


async def test_a_failed_forward_is_printed_and_the_server_goes_on(start_serve: Start) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    running = await start_serve("--secret", SECRET, "--forward", f"http://127.0.0.1:{port}/webhooks")
    assert await send_webhook(running.url, link_event(), SECRET) == 200
    assert await send_webhook(running.url, link_event("ERRORED"), SECRET) == 200
    lines = running.lines()
    assert [line["link_status"] for line in lines] == ["LINKED", "ERRORED"]
    assert all(line["forward"]["error"]["type"] == "ClientConnectorError" for line in lines)
    assert await running.close() == 0


async def test_serve_stops_cleanly_when_told(start_serve: Start) -> None:
    running = await start_serve("--secret", SECRET)
    assert await running.close() == 0
    with pytest.raises(aiohttp.ClientConnectorError):
        await send_webhook(running.url, link_event(), SECRET)


def test_serve_without_a_secret_or_with_a_clear_text_forward_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "webhooks", "serve", "--port", "0")
    assert (code, out) == (2, "")
    assert (
        err == f"health-async: webhooks serve needs the signing secret: --secret or {webhooks_cli.ENV_WEBHOOK_SECRET}\n"
    )
    code, out, err = run(capsys, "webhooks", "serve", "--secret", SECRET, "--forward", "http://example.com/hook")
    assert (code, out) == (2, "")
    assert "plain http:// to a non-loopback host" in err and SECRET not in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_command_stops_on_sigterm_and_ctrl_c(signum: int, status: int) -> None:
    env = {**os.environ, webhooks_cli.ENV_WEBHOOK_SECRET: SECRET}
    process = subprocess.Popen(
        [sys.executable, "-m", "health_async", "webhooks", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("webhooks: listening on http://127.0.0.1:"), first
        url = first.split()[3]
        assert asyncio.run(send_webhook(url, link_event(), SECRET)) == 200
        process.send_signal(signum)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == status
    assert orjson.loads(out)["care_context_id"] == "V-1"
    assert err.endswith("webhooks: stopped\n") and SECRET not in err


async def test_serve_records_the_services_link_webhooks_against_an_ingest_link_journal(
    start_serve: Start, tmp_path: Path
) -> None:
    source = tmp_path / "visits.csv"
    source.write_text("care_context_id,display,hi_type,oid\nV-1,Visit,OPConsultation,o-1\nV-2,Visit,Prescription,o-2\n")
    journal = tmp_path / "links.db"
    running = await start_serve("--secret", SECRET, "--record-links", str(journal))
    async with FakeHealthServer(users=1, documents_per_user=1) as fake:
        fake.abdm.webhooks(running.url, SECRET)
        fake.abdm.fail_links({"V-2"})
        async with HealthClient(base_url=fake.url, token=fake.token) as client:
            summary = await IngestJob.link(source, out=tmp_path / "links.jsonl", journal=journal, client=client).run()
            await fake.abdm.flush()
            assert summary.ok and [status for _, status in fake.abdm.deliveries] == [200, 200]
    lines = {line["care_context_id"]: line for line in running.lines()}
    assert lines["V-1"]["recorded"] is True and lines["V-2"]["link_status"] == "ERRORED"
    status = await IngestJob.status(journal)
    assert (status.linked, status.errored, status.waiting) == (1, 1, 0)


# ------------------------------------------------------------------------ webhooks serve --discover-from

HIP = "IN2910000101"
MEERA_MOBILE = "9812345678"
PATIENTS = {
    "patients": [
        {
            "reference": "PT-1042",
            "name": "Meera Krishnan",
            "gender": "F",
            "year_of_birth": 1990,
            "mobile": MEERA_MOBILE,
            "care_contexts": [
                {"care_context_id": "OPD-2024-17", "display": "OP visit, 3 March 2024", "hi_type": "OPConsultation"},
                {"care_context_id": "LAB-88", "display": "Lipid profile", "hi_type": "DiagnosticReport"},
            ],
        },
        {
            "reference": "PT-2001",
            "name": "Ravi Iyer",
            "abha_address": "ravi.iyer@sbx",
            "care_contexts": [
                {"care_context_id": "OPD-2024-40", "display": "OP visit, 1 June 2024", "hi_type": "OPConsultation"}
            ],
        },
    ]
}


class Phone(io.StringIO):
    """serve's stderr, read by a developer: the OTP printed there is typed into the fake patient's phone."""

    def __init__(self, fake: FakeHealthServer, mobile: str) -> None:
        super().__init__()
        self.fake, self.mobile = fake, mobile

    def write(self, text: str) -> int:
        found = re.search(r"the linking OTP for \S+ is (\d{6}) ", text)
        if found:
            self.fake.abdm.text(self.mobile, found.group(1))
        return super().write(text)


def patients_file(tmp_path: Path, document: Any = PATIENTS) -> str:
    path = tmp_path / "patients.json"
    path.write_bytes(orjson.dumps(document))
    return str(path)


async def serve_discovering(fake: FakeHealthServer, tmp_path: Path, err: io.StringIO) -> Running:
    args = cli.build_parser().parse_args(
        ["webhooks", "serve", "--port", "0", "--secret", SECRET, "--discover-from", patients_file(tmp_path),
         "--base-url", fake.url, "--token", fake.token, "--client-id", fake.client_id]
    )  # fmt: skip
    stop, out = asyncio.Event(), io.StringIO()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(webhooks_cli.serve(args, stop=stop, on_ready=ready.set_result, out=out, err=err))
    running = Running(task, stop, await asyncio.wait_for(asyncio.shield(ready), 10), out)
    fake.abdm.webhooks(running.url, SECRET)
    return running


async def test_serve_discover_from_answers_a_patients_own_search_and_shows_the_flow_masked(tmp_path: Path) -> None:
    async with FakeHealthServer(users=1, documents_per_user=1) as fake:
        phone = Phone(fake, MEERA_MOBILE)
        running = await serve_discovering(fake, tmp_path, phone)
        try:
            search = await fake.abdm.patient_discovers(
                HIP, abha_address="meera.k@sbx", name="meera  KRISHNAN", gender="F", year_of_birth=1990,
                mobile="+91 98123 45678", oid="oid-9",
            )  # fmt: skip
            assert search.errors == [] and search.linked == ("OPD-2024-17", "LAB-88")
            # what is linked is not offered again: the same search now finds nothing left to link
            again = await fake.abdm.patient_discovers(HIP, name="Meera Krishnan", gender="F", year_of_birth=1990,
                                                      mobile=MEERA_MOBILE)  # fmt: skip
            assert again.errors == [1012]  # LinkingError.NO_MATCH
        finally:
            assert await running.close() == 0
    lines = running.lines()
    events = [line["event"] for line in lines if "event" in line]
    assert events == [
        "abha.care_context_discover",
        "abha.care_context_discover_link_init",
        "abha.context_discover_link_confirm",
        "abha.care_context_discover",
    ]
    steps = [line for line in lines if "linking" in line]
    assert steps[0] == {
        "linking": "discover",
        "hip_id": HIP,
        "searched": {"abha_address": "me***@sbx", "name": "m*** K***", "mobile": "XXXXXX5678", "gender": "F",
                     "year_of_birth": 1990},
        "matches": 1,
        "reference": "PT-1042",
        "offered": ["OPD-2024-17", "LAB-88"],
    }  # fmt: skip
    assert steps[1] == {
        "linking": "otp_sent", "hip_id": HIP, "mobile": "XXXXXX5678", "care_contexts": ["OPD-2024-17", "LAB-88"],
    }  # fmt: skip
    assert steps[2] == {
        "linking": "linked", "hip_id": HIP, "reference": "PT-1042", "abha_address": "me***@sbx",
        "care_contexts": ["OPD-2024-17", "LAB-88"],
    }  # fmt: skip
    assert steps[3]["matches"] == 1 and steps[3]["offered"] == []
    # the OTP is on stderr only, said to be for development; stdout holds no OTP, mobile, name or ABHA address
    ((_, otp),) = fake.abdm.texts
    err = phone.getvalue()
    assert f"is {otp} " in err and "DEVELOPMENT ONLY" in err
    out = running.out.getvalue()
    for secret in (otp, MEERA_MOBILE, "98123", "Meera", "Krishnan", "meera.k", "OP visit"):
        assert secret not in out


async def test_serve_discover_from_matches_one_patient_only(tmp_path: Path) -> None:
    async with FakeHealthServer(users=1, documents_per_user=1) as fake:
        running = await serve_discovering(fake, tmp_path, io.StringIO())
        try:
            by_address = await fake.abdm.patient_discovers(HIP, abha_address="Ravi.Iyer@sbx")
            wrong_year = await fake.abdm.patient_discovers(
                HIP, abha_address="x@sbx", name="Meera Krishnan", gender="F", year_of_birth=1991, mobile=MEERA_MOBILE
            )
        finally:
            await running.close()
    assert by_address.discover is not None and by_address.discover["patients"][0]["ref_num"] == "PT-2001"
    assert wrong_year.errors == [1012]
    steps = [line for line in running.lines() if line.get("linking") == "discover"]
    assert [(s["matches"], s["reference"]) for s in steps] == [(1, "PT-2001"), (0, None)]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], 'must be a JSON object {"patients": [...]}'),
        ({"patients": [{"reference": "P", "name": "N", "care_contexts": []}]}, "patients[0] needs a mobile or an"),
        ({"patients": [{"reference": "P", "name": "", "mobile": "9812345678", "care_contexts": []}]},
         "patients[0].name must be"),
        ({"patients": [{"reference": "P", "name": "N", "mobile": "9812345678",
                        "care_contexts": [{"care_context_id": "C", "display": "D", "hi_type": "XRay"}]}]},
         "patients[0].care_contexts[0]"),
    ],
)  # fmt: skip
def test_serve_refuses_a_bad_discover_from_file_before_listening(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: Any, message: str
) -> None:
    code, out, err = run(capsys, "webhooks", "serve", "--port", "0", "--secret", SECRET,
                         "--discover-from", patients_file(tmp_path, document))  # fmt: skip
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "--discover-from: " in err and message in err, err
    assert "9812345678" not in err and "listening" not in err
    code, out, err = run(capsys, "webhooks", "serve", "--secret", SECRET, "--discover-from", str(tmp_path / "none"))
    assert (code, err) == (2, "health-async: the input file does not exist\n")


def test_serve_discover_from_needs_credentials_to_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HEALTH_ASYNC_TOKEN", "HEALTH_ASYNC_CLIENT_ID", "HEALTH_ASYNC_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = run(capsys, "webhooks", "serve", "--port", "0", "--secret", SECRET,
                         "--discover-from", patients_file(tmp_path))  # fmt: skip
    assert (code, out) == (2, "")
    assert "HEALTH_ASYNC_TOKEN" in err and "listening" not in err
