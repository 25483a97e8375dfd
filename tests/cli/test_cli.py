"""The health-async command, every subcommand against the fake server (run in a thread with its own loop)."""

from __future__ import annotations

import asyncio
import io
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import health_async as ha
from health_async import cli
from health_async._cli import _output
from health_async._cli.abha import register as abha_cli
from health_async._demo import patient_own_search
from health_async._progress import Progress
from health_async.testing import FakeHealthServer, Fault
from health_async.testing._data import FakeData

from ..conftest import ServerThread


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=25) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        monkeypatch.setenv("HEALTH_ASYNC_ENCRYPTION_KEY", srv.encryption_key)
        monkeypatch.setenv("HEALTH_ASYNC_KEY_ID", srv.key_id)
        yield srv


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, [orjson.loads(line) for line in out.splitlines() if line.strip()], err


def test_help_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    top = capsys.readouterr().out
    commands = ["describe", "describe-many", "list", "upload", "profile", "aadhaar-init", "fake-server", "demo"]
    for command in commands:
        assert command in top
        with pytest.raises(SystemExit) as info:
            cli.main([command, "--help"])
        assert info.value.code == 0
        assert "usage: health-async " + command in capsys.readouterr().out


def test_describe(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = server.data.document_ids(server.data.user_ids[0])[0]
    code, lines, _ = run(capsys, "describe", doc_id)
    assert code == 0
    assert lines[0]["document_id"] == doc_id
    assert lines[0]["files"]


def test_describe_missing_is_exit_1_with_a_typed_message(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = run(capsys, "describe", "no-such-doc")
    assert code == 1 and lines == []
    assert "DocumentNotFound" in err


def test_describe_many_from_a_file(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ids = server.data.document_ids(server.data.user_ids[0])[:10]
    path = tmp_path / "ids.txt"
    path.write_text("\n".join([*ids, "", "# a comment", "missing-doc"]) + "\n")
    code, lines, err = run(capsys, "describe-many", str(path), "--ordered")
    assert code == 1  # one id failed, and the empty line is a bad item of its own
    bad = [line for line in lines if "line" in line]
    assert bad == [{"line": 11, "error": {"type": "InvalidRequest", "message": "line 11: empty line"}}]
    described = [line for line in lines if "document_id" in line]
    assert [line["document_id"] for line in described] == [*ids, "missing-doc"]
    assert all("document" in line for line in described[:10])
    assert described[-1]["error"]["type"] == "DocumentNotFound" and described[-1]["error"]["status"] == 404
    # no progress bar when stderr is not a terminal; the summary only
    assert err == "describe finished: 10 done, 2 failed\n"


def test_describe_many_from_stdin(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = server.data.document_ids(server.data.user_ids[0])[:5]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(ids)))
    code, lines, _ = run(capsys, "describe-many")
    assert code == 0
    assert sorted(line["document_id"] for line in lines) == sorted(ids)


def test_list(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, "list")
    assert code == 0
    assert {line["document_id"] for line in lines} == set(server.data.document_ids(server.data.user_ids[0]))


def test_upload_plain_encrypted_and_missing(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.7 fake report")
    code, lines, _ = run(capsys, "upload", str(report), "--task", "smart", "--task", "pii")
    assert code == 0 and lines[0]["file"] == str(report) and lines[0]["document_id"]
    code, lines, _ = run(capsys, "upload", str(report), "--encrypt")
    assert code == 0 and lines[0]["document_id"]
    code, lines, _ = run(capsys, "upload", str(report), str(tmp_path / "missing.pdf"))
    assert code == 1
    assert lines[1]["error"]["type"] == "InvalidRequest"


def test_an_upload_answered_with_a_5xx_is_of_unknown_outcome(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.7 fake report")
    server.inject("upload", Fault(status=502, times=1))  # a gateway error: the upload may have been stored
    code, lines, err = run(capsys, "upload", str(report))
    assert code == 1 and lines[0]["error"]["type"] == "ServerError" and lines[0]["error"]["status"] == 502
    assert err == "upload finished: 0 done, 0 failed, 1 sent with an unknown outcome\n"
    assert server.calls("upload") == 1  # not resent


def test_tally_counts_unknown_outcomes_for_uploads_only(capsys: pytest.CaptureFixture[str]) -> None:
    from health_async._cli._output import Tally

    errors: list[BaseException | None] = [
        None,
        ha.ServerError("HTTP 502", status=502),
        ha.TransportError("reset", sent=True),
        ha.TransportError("refused", sent=False),
        ha.DocumentNotFound("no such document", status=404),
    ]
    upload, describe = (
        Tally("upload", idempotent=False),
        Tally("describe", idempotent=True),
    )  # describe is a read: nothing is of unknown outcome
    for error in errors:
        upload.add(error)
        describe.add(error)
    assert (upload.done, upload.failed, upload.unknown) == (1, 2, 2)
    assert (describe.done, describe.failed, describe.unknown) == (1, 4, 0)
    describe.summary()
    assert capsys.readouterr().err == "describe finished: 1 done, 4 failed\n"


def test_read_ids_follows_the_shared_line_rules(tmp_path: Path) -> None:
    from health_async._cli._output import BadLine, read_ids

    path = tmp_path / "ids.txt"
    path.write_bytes(b"a\n\n\xff\n# c\n\xc2\xa0# nbsp comment\n\xc2\xa0\n" + b"z" * 257 + b"\n" + b"y" * 256 + b"\n")
    assert list(read_ids(str(path))) == [
        "a",
        BadLine(2, "empty line"),
        BadLine(3, "not valid UTF-8"),
        BadLine(6, "empty line"),  # a no-break space alone is blank, as in ingest
        BadLine(7, "longer than 256 characters"),
        "y" * 256,
    ]
    assert list(read_ids(io.StringIO("a\n  \n#x\nb"))) == ["a", BadLine(2, "empty line"), "b"]
    path.write_bytes(b"\xef\xbb\xbfdoc-1\ndoc-2\n")  # a byte-order mark, as some Windows editors save
    assert list(read_ids(str(path))) == ["doc-1", "doc-2"]


def test_profile(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    oid = server.data.user_ids[0]
    code, lines, _ = run(capsys, "profile", oid)
    assert code == 0 and lines[0]["oid"] == oid


def test_aadhaar_init_masks_the_number_everywhere(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    number = server.data.valid_aadhaar[0]
    code, lines, err = run(capsys, "aadhaar-init", number)
    assert code == 0 and lines[0]["txn_id"]
    assert lines[0]["aadhaar"] == "XXXX XXXX " + number[-4:]
    code, lines, err2 = run(capsys, "aadhaar-init", number, "--encrypt")
    assert code == 0 and lines[0]["txn_id"]
    failing = next(iter(server.data.failing_aadhaar))
    code, lines, err3 = run(capsys, "aadhaar-init", failing)
    assert code == 1 and lines[0]["error"]["type"] == "AbhaRateLimited"
    code, lines, err4 = run(capsys, "aadhaar-init", number[:-1] + str((int(number[-1]) + 1) % 10))
    assert code == 1 and lines[0]["error"]["type"] == "InvalidAadhaarNumber"
    for text in (str(lines), err, err2, err3, err4):
        assert number not in text and failing not in text


def test_missing_configuration_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["describe", "x"])
    assert code == 2
    assert "HEALTH_ASYNC_TOKEN" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["fake-server", "--port", "99999"],
        ["demo", "--documents", "-5"],
        ["demo", "--concurrency", "100000000"],
        ["describe", "x", "--rate-limit", "inf"],
        ["describe", "x", "--timeout", "nan"],
        ["describe", "x", "--max-connections", "0"],
        ["ingest", "describe", "ids.txt", "--out", "o.jsonl", "--rate-limit", "inf"],
        ["ingest", "describe", "ids.txt", "--out", "o.jsonl", "--concurrency", "100000000"],
    ],
    ids=[
        "port",
        "documents",
        "demo-concurrency",
        "rate",
        "timeout",
        "connections",
        "ingest-rate",
        "ingest-concurrency",
    ],
)
def test_a_number_out_of_range_is_usage_not_a_traceback(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:  # argparse's own exit: 2 and one usage line
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("must be" in err or "port is a number" in err), err


def test_a_port_in_use_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        code = cli.main(["fake-server", "--port", str(taken.getsockname()[1])])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1, err


def test_fake_server_command_prints_its_environment() -> None:
    out = io.StringIO()

    async def scenario() -> None:
        args = cli.build_parser().parse_args(["fake-server", "--port", "0"])
        task = asyncio.create_task(cli.run_fake_server(args, out=out))
        for _ in range(200):
            if "HEALTH_ASYNC_TOKEN" in out.getvalue():
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    text = out.getvalue()
    assert "export HEALTH_ASYNC_BASE_URL=http://127.0.0.1:" in text
    assert "export HEALTH_ASYNC_USER_ID=" in text


def test_demo_runs_every_operation(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["demo", "--documents", "300", "--concurrency", "16", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAIL" not in out
    assert "described 300 documents" in out
    assert "retries absorbed" in out
    for step in ("describe a document", "upload (JWE-encrypted, streamed)", "aadhaar init (JWE-encrypted)", "profile"):
        assert step in out
    # the patient's own search: discovered and linked through the hospital's abdm_handler, nothing personal shown
    (line,) = [line for line in out.splitlines() if "patient-initiated discover + link" in line]
    assert line.startswith("  ok ") and "2 care contexts offered -> OTP texted to XXXXXX" in line
    assert line.endswith("-> 2 linked")
    profile = orjson.loads(FakeData.generate(users=1, documents_per_user=300).profiles[server_user(300)])
    for secret in (profile["fln"], profile["mobile"], profile["mobile"][-10:-4], "demo.patient"):
        assert secret not in out
    # the chain ABDM exists for: a lab report built as FHIR, linked, pushed, and read back by the requester
    (line,) = [line for line in out.splitlines() if "FHIR lab report -> requester" in line]
    found = re.search(
        r"DiagnosticReportRecord \((\d+) observations, valid\).*requester read the same (\d+) values$", line
    )
    assert line.startswith("  ok ") and found is not None and found[1] == found[2] != "0"
    # milestone 4: a professional's HPR ID through the guided flow, a facility searched, onboarded and linked
    (line,) = [line for line in out.splitlines() if "hpr register (a professional)" in line]
    assert line.startswith("  ok ") and line.endswith("HPR ID created (DONE)") and "XXXX XXXX " in line
    (line,) = [line for line in out.splitlines() if "hfr register (search/onboard/link)" in line]
    assert line.startswith("  ok ") and "onboarded, then linked" in line
    assert "Demo!Passw0rd" not in out and "@hpr.abdm" not in out
    assert "summary: 17/17 operations as expected" in out


def server_user(documents: int) -> str:
    return FakeData.generate(users=1, documents_per_user=documents).user_ids[0]


async def test_the_demos_patient_search_goes_through_the_three_answers_and_links_two_records() -> None:
    async with FakeHealthServer(users=1, documents_per_user=3) as server:
        user = server.data.user_ids[0]
        async with ha.HealthClient(
            base_url=server.url, token=server.token, client_id=server.client_id, user_id=user
        ) as client:
            doc_ids = server.data.document_ids(user)
            detail = await patient_own_search(server, client, user, doc_ids)
        assert detail.endswith("-> 2 linked")
        for route in ("on_discover", "discover_link_on_init", "discover_link_on_confirm"):
            assert server.calls(route) == 1
        ((mobile, otp),) = server.abdm.texts
        assert otp not in detail and mobile[-10:-4] not in detail
        assert sorted(server.abdm.links["demo.patient@sbx"]) == sorted(doc_ids[:2])


def test_progress_bar_on_a_terminal_and_silence_otherwise() -> None:
    shown = io.StringIO()
    bar = Progress("describe", enabled=True, stream=shown)
    bar(1, 0, 10)
    bar(10, 1, 10)
    bar.close()
    text = shown.getvalue()
    assert "10/10" in text and "failed 1" in text and text.endswith("\n")
    unknown_total = io.StringIO()
    bar = Progress("describe", enabled=True, stream=unknown_total)
    bar(5, 0, None)
    assert "5 done" in unknown_total.getvalue()
    piped = io.StringIO()  # not a terminal: nothing at all
    bar = Progress("describe", stream=piped)
    bar(10, 1, 10)
    bar.close()
    assert piped.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_delete_asks_unless_yes(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    user = server.data.user_ids[0]
    doomed, kept = server.data.document_ids(user)[:2]
    code, lines, err = run(capsys, "delete", kept)  # stdin is not a terminal: refuse rather than guess
    assert code == 2 and lines == [] and "--yes" in err
    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    code, lines, err = run(capsys, "delete", kept)
    assert code == 1 and lines == [] and "not deleted" in err
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    code, lines, _ = run(capsys, "delete", doomed)
    assert code == 0 and lines == [{"document_id": doomed, "deleted": True}]
    code, lines, _ = run(capsys, "describe", kept)
    assert code == 0
    code, _, err = run(capsys, "delete", doomed, "--yes")  # already gone
    assert code == 1 and "DocumentNotFound" in err


def _abha_prompt(server: FakeHealthServer, answers: dict[str, str]) -> Any:
    """A prompt for the ``abha`` commands: answers by the question's start; an OTP is the one the fake "sent"."""

    def prompt(question: str, *, secret: bool = False) -> str:
        if question.startswith(("OTP", "OTP sent")):
            return server.abha.last_otp()
        for start, answer in answers.items():
            if question.startswith(start):
                return answer
        raise AssertionError(f"unexpected question: {question}")

    return prompt


def _abha_requests(server: FakeHealthServer, since: int) -> list[Any]:
    return [r for r in server.requests[since:] if r.path.startswith("/abdm/")]


def _pt_id(request: Any) -> str | None:
    return next((v for k, v in request.headers.items() if k.lower() == "x-pt-id"), None)


def test_abha_commands_send_x_pt_id_only_when_given_on_the_command(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from health_async._cli.abha import register as abha_cli

    env_oid = server.data.user_ids[0]  # HEALTH_ASYNC_USER_ID (the fixture): the OID of the records work
    aadhaar = server.data.valid_aadhaar[0]
    monkeypatch.setattr(
        abha_cli,
        "PROMPT",
        _abha_prompt(
            server,
            {
                "Aadhaar number": aadhaar,
                "Mobile number to link": server.abha.linked_mobile(aadhaar),
                "New ABHA address": "kavya.reddy@sbx",
                "ABHA address": "kavya.reddy@sbx",
            },
        ),
    )
    # a registration, every step of it (OTP, verify, suggestions, the address check, the create): no X-Pt-Id
    start = len(server.requests)
    code, lines, err = run(capsys, "abha", "register", "--aadhaar")
    assert code == 0, err
    assert lines[0]["abha_address"] == "kavya.reddy@sbx" and lines[0]["created"] is True
    sent = _abha_requests(server, start)
    assert {"aadhaar_init", "address_exists", "aadhaar_create"} <= {r.route for r in sent}, [r.route for r in sent]
    assert [_pt_id(r) for r in sent] == [None] * len(sent)
    assert env_oid not in str([r.headers for r in sent])
    # a login: no X-Pt-Id either
    start = len(server.requests)
    code, lines, err = run(capsys, "abha", "login")
    assert code == 0, err
    sent = _abha_requests(server, start)
    assert sent and [_pt_id(r) for r in sent] == [None] * len(sent)
    # asked for on the command: every ABHA call carries that OID (not the environment's)
    chosen = server.data.user_ids[1]
    start = len(server.requests)
    code, lines, err = run(capsys, "abha", "login", "--user-id", chosen)
    assert code == 0, err
    sent = _abha_requests(server, start)
    assert sent and [_pt_id(r) for r in sent] == [chosen] * len(sent)


def test_output_into_a_closed_pipe_ends_quietly(server: FakeHealthServer, tmp_path: Path) -> None:
    """``health-async describe-many ids | head -1``: the reader goes away; no traceback, no "Exception ignored",
    the status a shell gives a command ended by SIGPIPE."""
    ids = server.data.document_ids(server.data.user_ids[0])
    path = tmp_path / "ids.txt"
    path.write_text("\n".join(ids * 200) + "\n")  # about 15 MB of output: far more than a pipe holds
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    child = subprocess.Popen(
        [sys.executable, "-m", "health_async", "describe-many", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    child.stdout.close()  # the reader goes away, as `head -1` does
    err = child.stderr.read().decode()
    child.stderr.close()
    assert child.wait(timeout=60) == cli.EXIT_BROKEN_PIPE == 141
    assert orjson.loads(first)["document_id"] in ids
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err, err


def test_input_that_ends_is_not_ctrl_c(
    server: FakeHealthServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """End of file on a non-interactive stdin is an error of the input (exit 1, "input ended"), not 130."""

    def ended(question: str, *, secret: bool = False) -> str:
        raise EOFError

    monkeypatch.setattr(abha_cli, "PROMPT", ended)
    assert cli.main(["abha", "login"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "input ended" in err and "Traceback" not in err and "cancelled" not in err
    assert server.calls("login_init") == 0


def _bad_items(tmp_path: Path) -> Path:
    """A directory with one good file and three bad ones: a name that is not UTF-8, a vanished file (a link to
    nothing) and a special file (a FIFO: opening it to read would block for ever)."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.pdf").write_bytes(b"%PDF-1.4 good")
    with open(os.fsencode(folder) + b"/bad\xff.pdf", "wb") as f:
        f.write(b"%PDF-1.4 bad name")
    (folder / "vanished.pdf").symlink_to(folder / "nowhere.pdf")
    os.mkfifo(folder / "fifo.pdf")
    return folder


def test_one_bad_file_never_stops_upload_many(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = _bad_items(tmp_path)
    code, lines, err = run(capsys, "upload-many", str(folder))
    assert code == 1 and "1 done, 3 failed" in err
    by_file = {line["file"].rsplit("/", 1)[-1]: line for line in lines}
    assert set(by_file) == {"good.pdf", "bad\\xff.pdf", "vanished.pdf", "fifo.pdf"}  # the bad name escaped
    assert "document_id" in by_file["good.pdf"]
    assert "not valid UTF-8" in by_file["bad\\xff.pdf"]["error"]["message"]
    assert by_file["vanished.pdf"]["error"]["message"] == "file: the upload file does not exist"
    assert by_file["fifo.pdf"]["error"]["message"] == "file: the upload path is not a regular file"
    assert server.calls("upload") == 1


def test_one_bad_file_never_stops_an_ingest_upload(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = _bad_items(tmp_path)
    journal, out = tmp_path / "j.db", tmp_path / "out.jsonl"
    code = cli.main(["ingest", "upload", str(folder), "--journal", str(journal), "--out", str(out), "--quiet"])
    assert code == 1  # some items failed; the job itself ran to its end
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    by_key = {line["key"].rsplit("/", 1)[-1]: line for line in lines}
    assert set(by_key) == {"good.pdf", "bad\\xff.pdf", "vanished.pdf", "fifo.pdf"}
    assert "upload" in by_key["good.pdf"]
    assert by_key["bad\\xff.pdf"]["error"]["message"] == "the file name is not valid UTF-8: rename the file"
    assert all("error" in by_key[name] for name in ("vanished.pdf", "fifo.pdf"))
    assert server.calls("upload") == 1


async def test_one_bad_file_never_stops_upload_many_in_python(tmp_path: Path) -> None:
    folder = _bad_items(tmp_path)
    gone = folder / "gone.pdf"
    gone.write_bytes(b"%PDF-1.4 soon gone")
    files: list[Any] = [folder / "good.pdf", Path(os.fsdecode(os.fsencode(folder) + b"/bad\xff.pdf")), gone]
    files += [folder / "fifo.pdf"]
    gone.unlink()  # listed, then vanished before its upload
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        user = srv.data.user_ids[0]
        async with ha.HealthClient(base_url=srv.url, token=srv.token, user_id=user) as client:
            outcomes = [outcome async for outcome in client.documents.upload_many(files, ordered=True)]
        assert [outcome.ok for outcome in outcomes] == [True, False, False, False]
        assert all(isinstance(outcome.error, ha.InvalidRequest) for outcome in outcomes[1:])
        assert "not valid UTF-8" in str(outcomes[1].error)  # says why, not a codec's traceback text
        assert srv.calls("upload") == 1


def test_json_output_to_a_stream_that_is_not_unicode_is_escaped_valid_json(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    """A Windows redirect in cp1252, or ``PYTHONIOENCODING=ascii``: a report item named in Devanagari (and an emoji
    beyond the Basic Multilingual Plane) used to fail the command with the codec's error after part of the output.
    Now the line is JSON with ``\\uXXXX`` escapes: the same text for any JSON reader."""
    user = server.data.user_ids[0]
    doc_id = server.data.document_ids(user)[0]
    body = orjson.loads(server.data.documents[user][doc_id])
    body["smart_report"]["verified"][0]["name"] = "हीमोग्लोबिन 🩸"
    server.data.documents[user][doc_id] = orjson.dumps(body)
    for encoding in ("ascii", "cp1252"):
        done = subprocess.run(
            [sys.executable, "-m", "health_async", "describe", doc_id],
            capture_output=True,
            env={**os.environ, "PYTHONIOENCODING": encoding},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.isascii()
        line = orjson.loads(done.stdout)
        assert line["smart_report"]["verified"][0]["name"] == "हीमोग्लोबिन 🩸"


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "cp1252", "latin-1"])
def test_write_json_keeps_the_text_whatever_the_stream_encodes(encoding: str) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding)
    value = {"name": "राम é 🙂", "n": 1.5, "ok": True, "quote": 'a"b\\c'}
    _output.write_json(value, stream)
    data = raw.getvalue()
    assert orjson.loads(data) == value
    assert data.isascii() or encoding == "utf-8"  # raw UTF-8 where the stream is Unicode


def test_text_for_people_that_stdout_cannot_encode_is_escaped_not_an_error() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    cli._tolerant(stream)
    print("subscription राम created", file=stream)
    stream.flush()
    assert raw.getvalue() == b"subscription \\u0930\\u093e\\u092e created\n"


def test_reading_a_closed_stdin_is_a_usage_error_that_says_so(server: FakeHealthServer) -> None:
    """``health-async describe-many - <&-`` (a job started with no stdin at all): it used to print Python's
    "'NoneType' object is not iterable" and "describe interrupted"."""
    done = subprocess.run(
        [sys.executable, "-m", "health_async", "describe-many", "-"],
        capture_output=True,
        preexec_fn=lambda: os.close(0),  # the child starts with fd 0 closed, as with `<&-`
        timeout=60,
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "stdin is closed" in err and "NoneType" not in err and "interrupted" not in err
    assert done.stdout == b"" and server.calls("describe") == 0


def _closed_fd(fd: int) -> Callable[[], None]:
    def close() -> None:
        os.close(fd)

    return close


def test_a_closed_stdout_does_nothing_and_says_so(server: FakeHealthServer) -> None:
    """``health-async describe ID >&-``: the result would be lost (it was a traceback, after the request)."""
    doc_id = server.data.document_ids(server.data.user_ids[0])[0]
    done = subprocess.run(
        [sys.executable, "-m", "health_async", "describe", doc_id],
        stderr=subprocess.PIPE,
        preexec_fn=_closed_fd(1),
        timeout=60,
    )
    err = done.stderr.decode()
    assert done.returncode == 2 and "stdout is closed" in err and "Traceback" not in err, err
    assert server.calls("describe") == 0


def test_a_closed_stderr_keeps_diagnostics_out_of_the_results(server: FakeHealthServer) -> None:
    """``health-async describe ID 2>&-``: the error line used to be printed on stdout, among the JSON results."""
    done = subprocess.run(
        [sys.executable, "-m", "health_async", "describe", "no-such-document"],
        stdout=subprocess.PIPE,
        preexec_fn=_closed_fd(2),
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == b""


def test_an_ingest_runs_with_stdout_closed_its_results_go_to_its_file(server: FakeHealthServer, tmp_path: Path) -> None:
    """A cron job started with ``>&-``: the ingest's results are in its output file, its summary on stderr."""
    ids = server.data.document_ids(server.data.user_ids[0])[:5]
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "health_async", "ingest", "describe", str(tmp_path / "ids.txt"), "--out", str(out)],
        stderr=subprocess.PIPE,
        preexec_fn=_closed_fd(1),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert sorted(orjson.loads(line)["key"] for line in out.read_bytes().splitlines()) == sorted(ids)
