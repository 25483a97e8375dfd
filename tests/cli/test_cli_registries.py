"""``health-async hpr register`` (interactive, answers fed on stdin as a terminal would give them; and ``--json
--state FILE``, one step per run) and ``health-async hfr register | search``, each run a ``cli.main`` call against
the fake server in its thread. Nothing secret (the password, the Aadhaar number, an OTP, the mobile number) is in
the output, the logs or the state file."""

from __future__ import annotations

import getpass
import io
import logging
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pybase64
import pytest

from health_async import cli
from health_async._cli._state import ENV_STATE_KEY, EXIT_WAITING
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.registries._hfr import SEEDED_FACILITY

from ..conftest import ServerThread

KEY_TEXT = pybase64.urlsafe_b64encode(bytes(range(32))).decode()
OTHER_MOBILE = "8123456789"
PASSWORD = "S3cret!Pass#46"
EXISTING = "asha.verma@hpr.abdm"  # the fake's seeded professional (the last valid Aadhaar)

Answer = str | Callable[[], str]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[FakeHealthServer]:
    caplog.set_level(logging.DEBUG, logger="health_async")
    with ServerThread(users=1, documents_per_user=1) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", "patient-oid-1")
        monkeypatch.setenv(ENV_STATE_KEY, KEY_TEXT)
        yield srv


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


def assert_clean(text: str | bytes, *secrets: str) -> None:
    blob = text if isinstance(text, bytes) else text.encode()
    for secret in secrets:
        assert secret.encode() not in blob, secret


# ----------------------------------------------------------------------------------- interactive, fed on stdin


class Terminal(io.TextIOBase):
    """stdin as a terminal: one answer a line, each read when asked (an OTP is known only once it was sent)."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers

    def isatty(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        if not self.answers:
            return ""
        answer = self.answers.pop(0)
        return (answer() if callable(answer) else answer) + "\n"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[Answer]], list[str]]:
    """Feed answers on stdin; ``getpass`` reads them from there too (as it does from a terminal, without echo).
    Returns the questions asked without echo."""
    hidden: list[str] = []

    def feed(answers: list[Answer]) -> list[str]:
        monkeypatch.setattr("sys.stdin", Terminal(answers))

        def no_echo(question: str = "", stream: Any = None) -> str:
            hidden.append(question)
            (stream or io.StringIO()).write(question)
            line = sys.stdin.readline()
            if not line:  # as getpass does at the end of input
                raise EOFError
            return line.rstrip("\n")

        monkeypatch.setattr(getpass, "getpass", no_echo)
        return hidden

    return feed


def test_hpr_register_interactively_with_another_mobile(
    server: FakeHealthServer,
    terminal: Callable[[list[Answer]], list[str]],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    otp = server.hpr.last_otp
    hidden = terminal(
        [
            aadhaar,
            lambda: wrong(otp()),  # refused: asked again
            lambda: otp(),
            OTHER_MOBILE,  # not the Aadhaar-linked one: its own OTP
            lambda: otp(),
            "ravi.kumar",  # taken (seeded): asked again after the create is refused
            "asha.sharma@example.org",
            "1",
            "2",
            "",  # first name: the Aadhaar's
            "",
            "560001",
            PASSWORD,
            PASSWORD + "x",  # the two differ: asked again
            PASSWORD,
            PASSWORD,
            "",  # HPR ID again: Enter, the first free suggestion
        ]
    )
    code = cli.main(["hpr", "register"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = orjson.loads(out)
    assert result["created"] is True and result["hpr_id"].endswith("@hpr.abdm")
    assert "not right" in err and "taken" in err and "differ" in err and "******" in err
    assert len(hidden) == 9 and all("typing is not shown" in q or "same password" in q for q in hidden)
    assert server.calls("hpr_mobile_init") == 1 and server.calls("hpr_create") == 2
    creates = [r for r in server.requests if r.route == "hpr_create"]
    assert creates[-1].json["password"] == PASSWORD and creates[-1].json["hp_sub_category_code"] == 2
    assert all("X-Pt-Id" not in r.headers for r in server.requests)  # never the environment's patient OID
    otps = [str(o["otp"]) for o in server.otps]
    assert_clean(out + err + caplog.text, aadhaar, OTHER_MOBILE, PASSWORD, *otps)


def test_hpr_register_interactively_an_existing_professional(
    server: FakeHealthServer, terminal: Callable[[list[Answer]], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    aadhaar = server.data.valid_aadhaar[-1]
    terminal([aadhaar, lambda: server.hpr.last_otp(), server.hpr.linked_mobile(aadhaar)])
    code = cli.main(["hpr", "register"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert orjson.loads(out) == {"hpr_id": EXISTING, "created": False}
    assert "already holds" in err and server.calls("hpr_create") == 0 and server.calls("hpr_suggest") == 0


def test_hpr_register_refuses_a_stdin_that_is_not_a_terminal(
    server: FakeHealthServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(server.data.valid_aadhaar[0] + "\n"))
    assert cli.main(["hpr", "register"]) == 2
    assert "--json --state FILE" in capsys.readouterr().err and not server.requests


def test_hpr_register_input_that_ends_is_exit_1(
    server: FakeHealthServer, terminal: Callable[[list[Answer]], list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    terminal([server.data.valid_aadhaar[0]])
    assert cli.main(["hpr", "register"]) == 1
    assert "input ended" in capsys.readouterr().err and server.calls("hpr_aadhaar_init") == 1


# ----------------------------------------------------------------------------------- --json --state FILE


class Runner:
    """One run of ``hpr register --json --state FILE`` per step, as a script would: stdin given, one line back."""

    def __init__(self, server: FakeHealthServer, capsys: Any, monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
        self.server, self.capsys, self.monkeypatch, self.state = server, capsys, monkeypatch, state
        self.written: list[bytes] = []

    def __call__(self, stdin: dict[str, Any] | str | None = None) -> tuple[int, dict[str, Any]]:
        text = orjson.dumps(stdin).decode() + "\n" if isinstance(stdin, dict) else (stdin or "")
        self.monkeypatch.setattr("sys.stdin", io.StringIO(text))
        code = cli.main(["hpr", "register", "--json", "--state", str(self.state)])
        out, err = self.capsys.readouterr()
        assert err == "", err
        self.written.append(out.encode())
        if self.state.exists():
            assert stat.S_IMODE(self.state.stat().st_mode) == 0o600
            self.written.append(self.state.read_bytes())
        [line] = out.splitlines()
        parsed = orjson.loads(line)
        assert isinstance(parsed, dict)
        return code, parsed

    def otp(self) -> str:
        return self.server.hpr.last_otp()


@pytest.fixture
def run(server: FakeHealthServer, capsys: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Runner:
    return Runner(server, capsys, monkeypatch, tmp_path / "hpr.state")


CREATE = {"password": PASSWORD, "email": "asha@example.org", "hp_category_code": 1, "hp_sub_category_code": 1}


@pytest.mark.parametrize("other_mobile", [False, True], ids=["same-mobile", "other-mobile"])
def test_hpr_register_json_step_by_step(
    server: FakeHealthServer, run: Runner, caplog: pytest.LogCaptureFixture, other_mobile: bool
) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    mobile = OTHER_MOBILE if other_mobile else server.hpr.linked_mobile(aadhaar)
    code, line = run({"aadhaar": aadhaar})
    assert code == EXIT_WAITING and line["step"] == "verify_otp" and "******" in line["hint"]
    code, line = run({"otp": wrong(run.otp())})
    assert code == 1 and line["step"] == "verify_otp" and line["error"]["type"] == "OtpMismatch"
    code, line = run("")  # no answer: the step again, nothing sent
    assert code == EXIT_WAITING and line["step"] == "verify_otp"
    code, line = run({"otp": run.otp()})
    assert code == EXIT_WAITING and line == {"step": "verify_mobile"}
    code, line = run({"mobile": mobile})
    if other_mobile:
        assert code == EXIT_WAITING and line["step"] == "verify_mobile_otp"
        code, line = run({"otp": run.otp()})
    # check/exist needs no answer: done in the same run, which stops at create with free HPR IDs
    assert code == EXIT_WAITING and line["step"] == "create" and line["suggestions"], line
    free = line["suggestions"][0]
    code, line = run({**CREATE, "hpr_id": "ravi.kumar"})
    assert code == 1 and line["step"] == "create" and "taken" in line["error"]["message"]
    code, line = run({**CREATE, "hpr_id": free, "first_name": "Asha", "pincode": "560001"})
    assert code == 0 and line["step"] == "done" and line["created"] is True and line["hpr_id"]
    assert not run.state.exists()
    assert server.calls("hpr_check_exist") == 1 and server.calls("hpr_mobile_init") == (1 if other_mobile else 0)
    assert all("X-Pt-Id" not in r.headers for r in server.requests)  # kept by the flow across runs: no patient OID
    otps = [str(o["otp"]) for o in server.otps]
    for blob in [*run.written, caplog.text.encode()]:
        assert_clean(blob, aadhaar, mobile, PASSWORD, *otps)


def test_hpr_register_json_an_existing_professional_ends_at_check_exist(server: FakeHealthServer, run: Runner) -> None:
    aadhaar = server.data.valid_aadhaar[-1]
    run({"aadhaar": aadhaar})
    run({"otp": run.otp()})
    code, line = run({"mobile": server.hpr.linked_mobile(aadhaar)})
    assert code == 0 and line == {"step": "done", "hpr_id": EXISTING, "created": False}
    assert not run.state.exists() and server.calls("hpr_create") == 0


def test_hpr_register_json_a_lost_create_is_not_retried(server: FakeHealthServer, run: Runner) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    run({"aadhaar": aadhaar})
    run({"otp": run.otp()})
    code, line = run({"mobile": server.hpr.linked_mobile(aadhaar)})
    free = line["suggestions"][0]
    server.inject("hpr_create", Fault(status=502, times=1))
    code, line = run({**CREATE, "hpr_id": free})
    assert code == 1 and line["step"] == "create" and line["error"]["type"] == "OutcomeUnknown"
    assert line["create_outcome_unknown"] is True and server.calls("hpr_create") == 1
    assert PASSWORD not in str(line)
    code, line = run("")  # the step again: still unknown, nothing sent
    assert code == EXIT_WAITING and line["create_outcome_unknown"] is True and server.calls("hpr_create") == 1
    # the next create asks check/exist first: nothing was created, so it is sent, once
    code, line = run({**CREATE, "hpr_id": free})
    assert code == 0 and line["hpr_id"] == free and server.calls("hpr_create") == 2
    routes = [r.route for r in server.requests if r.route in ("hpr_create", "hpr_check_exist")]
    assert routes[-2:] == ["hpr_check_exist", "hpr_create"]


def test_hpr_register_json_bad_usage(server: FakeHealthServer, run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    code, line = run("")  # no start input
    assert code == 1 and line["step"] is None and not server.requests
    code, line = run({"aadhaar": server.data.valid_aadhaar[0], "password": PASSWORD})
    assert code == 1 and line["error"]["type"] == "InvalidRequest" and not server.requests
    monkeypatch.delenv(ENV_STATE_KEY)
    code, line = run({"aadhaar": server.data.valid_aadhaar[0]})
    assert code == 2 and line["error"]["type"] == "UsageError" and not server.requests


# ----------------------------------------------------------------------------------- hfr


def hfr(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["hfr", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_hfr_search_register_onboard_and_link(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = hfr(capsys, "search", SEEDED_FACILITY)
    found = orjson.loads(out)
    assert code == 0 and found["hfr_id"] == SEEDED_FACILITY
    assert found["facility"]["facility_name"] == "Sunrise Multispeciality Hospital"
    code, out, _ = hfr(capsys, "search", "IN2910000999")
    assert code == 0 and orjson.loads(out) == {"hfr_id": "IN2910000999", "facility": None}

    # a facility the registry holds: found, linked, not onboarded
    code, out, _ = hfr(capsys, "register", "--clinic-id", "clinic-42", "--hfr-id", SEEDED_FACILITY)
    done = orjson.loads(out)
    assert code == 0 and done["onboarded"] is False and done["facility"]["facility_id"] == SEEDED_FACILITY
    assert done["clinic_id"] == "clinic-42" and done["hfr_id"] == SEEDED_FACILITY
    assert server.calls("hfr_onboard") == 0 and server.hfr.links["clinic-42"] == SEEDED_FACILITY

    # one it does not: searched, onboarded, then linked
    code, out, _ = hfr(capsys, "register", "--clinic-id", "clinic-7", "--hfr-id", "IN2910000555")
    done = orjson.loads(out)
    assert code == 0 and done["onboarded"] is True and done["facility"] is None and done["facility_id"]
    assert server.calls("hfr_onboard") == 1 and server.hfr.links["clinic-7"] == "IN2910000555"
    routes = [r.route for r in server.requests if r.route.startswith("hfr_")]
    assert routes[-3:] == ["hfr_search", "hfr_onboard", "hfr_link"]


def test_hfr_refusals(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = hfr(capsys, "register", "--clinic-id", "clinic-7", "--hfr-id", "IN 29/1")
    assert code == 2 and out == "" and "hfr_id" in err and not server.requests
    code, out, err = hfr(capsys, "search", "IN/29")
    assert code == 2 and not server.requests
    server.inject("hfr_onboard", Fault(status=502, times=1))
    code, out, _ = hfr(capsys, "register", "--clinic-id", "clinic-7", "--hfr-id", "IN2910000555")
    lost = orjson.loads(out)
    assert code == 1 and lost["error"]["type"] == "OutcomeUnknown" and "searches first" in lost["hint"]
    assert server.calls("hfr_onboard") == 1 and server.calls("hfr_link") == 0
    server.inject("hfr_link", Fault(status=400, times=1, body={"code": 400, "error": "no", "source_error": {}}))
    code, out, err = hfr(capsys, "register", "--clinic-id", "clinic-7", "--hfr-id", "IN2910000555")
    assert code == 1 and out == "" and "health-async:" in err
