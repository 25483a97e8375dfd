"""``health-async abha register|login --json --state FILE``: the scriptable mode, one step per run of the command
(each run a separate ``cli.main`` call against the fake server in its thread), JSON lines in and out, the flow kept
sealed in the state file between runs."""

from __future__ import annotations

import io
import os
import stat
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pybase64
import pytest

import health_async as ha
from health_async import cli
from health_async._cli.abha import register as abha_cli
from health_async.resources.abha import _flows as _abha_flow
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abha._registration import SEEDED_MOBILE

from ..conftest import ServerThread

KEY = bytes(range(32))
KEY_TEXT = pybase64.urlsafe_b64encode(KEY).decode()
OTHER_MOBILE = "8123456789"
PROMPT_WORDS = ("typing is not shown", "Enter alone", "Enter:", "e.g. name.surname", "Which one", "First name")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=1) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv(abha_cli.ENV_STATE_KEY, KEY_TEXT)
        yield srv


class Runner:
    """Runs the command once per step, as a script would: stdin given, one JSON line read back."""

    def __init__(
        self, server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, state: Path
    ) -> None:
        self.server, self.capsys, self.monkeypatch, self.state = server, capsys, monkeypatch, state
        self.outputs: list[str] = []

    def __call__(
        self, *argv: str, stdin: str | dict[str, Any] | None = None, locale: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        """``locale``: stdin as Python opens it in a locale of that encoding (a pipe of UTF-8 bytes decoded so)."""
        text = orjson.dumps(stdin).decode() + "\n" if isinstance(stdin, dict) else (stdin or "")
        if locale is None:
            self.monkeypatch.setattr("sys.stdin", io.StringIO(text))
        else:
            self.monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding=locale))
        code = cli.main(["abha", *argv, "--json", "--state", str(self.state)])
        out, err = self.capsys.readouterr()
        self.outputs.append(out + err)
        assert err == "", err  # never a prompt, nor anything else on stderr
        assert not any(word in out for word in PROMPT_WORDS), out
        lines = out.splitlines()
        assert len(lines) == 1, out
        line = orjson.loads(lines[0])
        assert isinstance(line, dict)
        return code, line

    def opened(self) -> dict[str, Any]:
        """The flow in the sealed state file: opened with the key, as the command does (nothing sent)."""
        client = ha.HealthClient(base_url=self.server.url, token=self.server.token, client_id=self.server.client_id)
        return client.abha.resume(self.state.read_text().strip(), seal=KEY).to_state()

    def txn_id(self) -> str:
        """The transaction in the sealed state (the OTP the fake "sent" is that transaction's)."""
        txn_id = self.opened()["txn_id"]
        assert isinstance(txn_id, str)
        return txn_id

    def otp(self) -> str:
        return self.server.abha.last_otp(self.txn_id())

    def assert_private_state(self) -> None:
        assert stat.S_IMODE(self.state.stat().st_mode) == 0o600
        assert [p.name for p in self.state.parent.iterdir()] == [self.state.name]  # no temporary file left


@pytest.fixture
def run(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Runner:
    folder = tmp_path / "flows"
    folder.mkdir()
    return Runner(server, capsys, monkeypatch, folder / "flow.state")


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


def test_aadhaar_registration_step_by_step(server: FakeHealthServer, run: Runner) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    linked = server.abha.linked_mobile(aadhaar)
    code, line = run("register", "--aadhaar", stdin={"aadhaar": aadhaar})
    assert code == abha_cli.EXIT_WAITING == 3
    assert line["step"] == "verify_otp" and line["hint"].endswith(linked[-4:]) and "******" in line["hint"]
    assert 55 < line["resend_in"] <= 60
    run.assert_private_state()
    assert server.calls("aadhaar_init") == 1

    # a wrong OTP: refused, the same step, the state kept
    otp = run.otp()
    code, line = run("register", "--aadhaar", stdin={"otp": wrong(otp), "mobile": linked})
    assert code == 1 and line["step"] == "verify_otp" and line["error"]["type"] == "OtpMismatch"
    assert run.state.exists()
    run.assert_private_state()

    # no answer: the step again, nothing sent
    sent = len(server.requests)
    for empty in ("", "\n"):
        code, line = run("register", "--aadhaar", stdin=empty)
        assert code == 3 and line["step"] == "verify_otp" and line["hint"]
    assert len(server.requests) == sent

    # a malformed line: an error at the same step, nothing sent
    for bad in ("not json\n", "[1, 2]\n", '{"otp": 123456, "mobile": "x"}\n', '{"otp": "1", "aadhaar": "2"}\n'):
        code, line = run("register", "--aadhaar", stdin=bad)
        assert code == 1 and line["step"] == "verify_otp" and line["error"]["type"] == "InvalidRequest", line
    code, line = run("register", "--aadhaar", stdin={"otp": otp})  # the mobile to link is needed here
    assert code == 1 and '"mobile" is needed' in line["error"]["message"]
    assert len(server.requests) == sent

    code, line = run("register", "--aadhaar", stdin={"otp": run.otp(), "mobile": linked})
    assert code == 3 and line["step"] == "create_address" and line["suggestions"], line
    assert "hint" not in line and "accounts" not in line

    code, line = run("register", "--aadhaar", stdin={"abha_address": "asha.verma@sbx"})  # taken
    assert code == 1 and line["step"] == "create_address" and line["error"]["source_code"] == "ABDM-1101"
    assert line["error"]["type"] == "AbhaError" and "taken" in line["error"]["message"]

    code, line = run("register", "--aadhaar", stdin={"abha_address": "kavya.reddy@sbx"})
    assert code == 0
    assert line == {
        "step": "done",
        "abha_address": "kavya.reddy@sbx",
        "abha_number": line["abha_number"],
        "created": True,
        "kyc_verified": True,
        "oid": server.abha.accounts["kavya.reddy"].oid,
    }
    assert line["abha_number"].startswith("xx-xxxx-xxxx-")
    assert not run.state.exists() and list(run.state.parent.iterdir()) == []
    everything = "".join(run.outputs)
    for secret in (aadhaar, linked, otp, KEY_TEXT, "token"):
        assert secret not in everything


def test_aadhaar_registration_with_another_mobile_and_a_resend(server: FakeHealthServer, run: Runner) -> None:
    aadhaar = server.data.valid_aadhaar[1]
    assert run("register", "--aadhaar", stdin={"aadhaar": aadhaar})[0] == 3
    code, line = run("register", "--aadhaar", stdin={"otp": run.otp(), "mobile": "+91 81234 56789"})
    assert code == 3 and line["step"] == "verify_mobile_otp" and line["hint"].endswith(OTHER_MOBILE[-4:])
    code, line = run("register", "--aadhaar", stdin={"resend": True})  # too soon: refused locally
    assert code == 1 and line["step"] == "verify_mobile_otp" and line["error"]["type"] == "ResendTooSoon"
    assert line["resend_in"] > 50 and server.calls("aadhaar_mobile_resend") == 0
    code, line = run("register", "--aadhaar", stdin={"resend": False})
    assert code == 1 and line["error"]["type"] == "InvalidRequest"
    code, line = run("register", "--aadhaar", stdin={"otp": run.otp()})
    assert code == 3 and line["step"] == "create_address"
    code, line = run("register", "--aadhaar", stdin={"abha_address": "arjun.k1@sbx"})
    assert code == 0 and line["created"] is True and not run.state.exists()
    assert OTHER_MOBILE not in "".join(run.outputs)


def test_mobile_registration_needs_the_profile(server: FakeHealthServer, run: Runner) -> None:
    code, line = run("register", "--mobile", stdin={"mobile": OTHER_MOBILE})
    assert code == 3 and line["step"] == "verify_otp"
    code, line = run("register", "--mobile", stdin={"otp": run.otp(), "mobile": OTHER_MOBILE})
    assert code == 1 and line["error"]["type"] == "InvalidRequest"  # no mobile at a mobile registration's OTP
    code, line = run("register", "--mobile", stdin={"otp": run.otp()})
    assert code == 3 and line == {"step": "create_address"}  # no KYC: no suggestions before the names
    code, line = run("register", "--mobile", stdin={"abha_address": "meera_k92@sbx"})
    assert code == 1 and "profile" in line["error"]["message"]
    profile = {"first_name": "Meera", "last_name": "Iyer", "gender": "f", "date_of_birth": "1992-03-04"}
    code, line = run("register", "--mobile", stdin={"abha_address": "meera_k92@sbx", "profile": profile})
    assert code == 1 and "pincode" in line["error"]["message"]
    profile["pincode"] = "560001"
    code, line = run("register", "--mobile", stdin={"abha_address": "meera_k92@sbx", "profile": profile})
    assert code == 0 and line["abha_address"] == "meera_k92@sbx" and line["kyc_verified"] is False
    assert server.abha.accounts["meera_k92"].last_name == "Iyer"
    assert server.calls("mobile_create") == 1


@pytest.mark.parametrize("locale", ["latin-1", "cp1252"])
def test_answers_are_read_as_utf8_whatever_the_locale(server: FakeHealthServer, run: Runner, locale: str) -> None:
    """A script pipes UTF-8 JSON (as JSON between programs is) into a process whose locale is not UTF-8: the name
    used to be decoded in the locale's encoding and registered as other letters."""
    run("register", "--mobile", stdin={"mobile": OTHER_MOBILE})
    run("register", "--mobile", stdin={"otp": run.otp()})
    profile = {"first_name": "मीरा", "last_name": "अय्यर", "gender": "f", "date_of_birth": "1992-03-04"}
    profile["pincode"] = "560001"
    answer = {"abha_address": "meera_k92@sbx", "profile": profile}
    code, line = run("register", "--mobile", stdin=answer, locale=locale)
    assert code == 0, line
    assert server.abha.accounts["meera_k92"].last_name == "अय्यर"


def test_mobile_registration_on_a_shared_mobile_may_log_into_one(server: FakeHealthServer, run: Runner) -> None:
    run("register", "--mobile", stdin={"mobile": SEEDED_MOBILE})
    code, line = run("register", "--mobile", stdin={"otp": run.otp()})
    assert code == 3 and line["step"] == "create_address"
    assert sorted(line["accounts"]) == ["ravi.k1990@sbx", "ravi_kumar@sbx"]
    code, line = run("register", "--mobile", stdin={"abha_address": "RAVI_KUMAR"})  # one of them: log in
    assert code == 0 and line["abha_address"] == "ravi_kumar@sbx" and line["created"] is False
    assert server.calls("mobile_create") == 0


def test_login_by_mobile_step_by_step(server: FakeHealthServer, run: Runner) -> None:
    code, line = run("login", stdin={"method": "mobile", "identifier": SEEDED_MOBILE})
    assert code == 3 and line["step"] == "verify_otp" and line["resend_in"] is None  # a login has no resend
    run.assert_private_state()
    code, line = run("login", stdin={"resend": True})
    assert code == 1 and line["error"]["type"] == "InvalidFlowStep" and line["step"] == "verify_otp"
    code, line = run("login", stdin={"otp": wrong(run.otp())})
    assert code == 1 and line["error"]["type"] == "OtpMismatch" and line["step"] == "verify_otp"
    code, line = run("login", stdin={"otp": run.otp()})
    assert code == 3 and line == {"step": "select_account", "accounts": line["accounts"]}
    assert sorted(line["accounts"]) == ["ravi.k1990@sbx", "ravi_kumar@sbx"]
    code, line = run("login", stdin={"abha_address": "someone.else@sbx"})
    assert code == 1 and line["step"] == "select_account" and line["error"]["type"] == "InvalidRequest"
    code, line = run("login", stdin={})  # two accounts: one must be named
    assert code == 1 and "2 accounts" in line["error"]["message"]
    code, line = run("login", stdin={"abha_address": "ravi.k1990@sbx"})
    assert code == 0 and line["step"] == "done" and line["abha_address"] == "ravi.k1990@sbx"
    assert line["created"] is False and not run.state.exists()
    assert SEEDED_MOBILE not in "".join(run.outputs)


def test_login_method_from_the_flag_or_the_input(server: FakeHealthServer, run: Runner) -> None:
    code, line = run("login", "--method", "phr_address", stdin={"method": "mobile", "identifier": SEEDED_MOBILE})
    assert code == 1 and line == {"step": None, "error": line["error"]} and "--method" in line["error"]["message"]
    code, line = run("login", stdin={"method": "search", "identifier": "x"})
    assert code == 1 and '"method" must be one of' in line["error"]["message"]
    code, line = run("login", stdin={"identifier": "no such@@address"})  # phr_address by default
    assert code == 1 and line["error"]["type"] == "InvalidAbhaAddress"
    code, line = run("login", "--method", "mobile", stdin={"identifier": "12345"})
    assert code == 1 and line["error"]["type"] == "InvalidMobileNumber" and "12345" not in line["error"]["message"]
    assert not run.state.exists() and server.calls("login_init") == 0
    code, line = run("login", stdin={"identifier": "asha.verma@sbx"})
    assert code == 3 and line["step"] == "verify_otp"
    code, line = run("login", stdin={"otp": run.otp()})
    assert code == 0 and line["abha_address"] == "asha.verma@sbx" and line["kyc_verified"] is True


def test_first_run_needs_its_input_and_sends_nothing_without_it(server: FakeHealthServer, run: Runner) -> None:
    code, line = run("register", "--aadhaar", stdin="")
    assert code == 1 and line["step"] is None and "no start input" in line["error"]["message"]
    code, line = run("register", "--aadhaar", stdin={"mobile": OTHER_MOBILE})
    assert code == 1 and '"aadhaar"' in line["error"]["message"]
    aadhaar = server.data.valid_aadhaar[0]
    code, line = run("register", "--aadhaar", stdin={"aadhaar": aadhaar[:-1] + str((int(aadhaar[-1]) + 1) % 10)})
    assert code == 1 and line["error"]["type"] == "InvalidAadhaarNumber"
    assert not run.state.exists() and server.calls("aadhaar_init") == 0
    assert aadhaar[:8] not in "".join(run.outputs)


def test_a_tampered_or_foreign_state_is_refused_and_kept(server: FakeHealthServer, run: Runner) -> None:
    run("login", stdin={"identifier": "asha.verma@sbx"})
    sealed = run.state.read_text().strip()
    tampered = sealed[:20] + ("A" if sealed[20] != "A" else "B") + sealed[21:]
    run.state.write_text(tampered + "\n")
    sent = len(server.requests)
    code, line = run("login", stdin={"otp": "123456"})
    assert code == 1 and line["step"] is None and line["error"]["type"] == "FlowStateInvalid"
    assert run.state.read_text().strip() == tampered and len(server.requests) == sent  # kept; nothing sent
    # and how to start over: what a kiosk's operator needs to read
    assert "to start over, delete the state file" in line["error"]["message"]
    assert '{"identifier": "...", "method": "..."}' in line["error"]["message"]
    # another command's flow
    run.state.write_text(sealed)
    code, line = run("register", "--mobile", stdin={"otp": "123456"})
    assert code == 1 and "holds a login flow" in line["error"]["message"] and run.state.exists()
    # another key
    run.monkeypatch.setenv(abha_cli.ENV_STATE_KEY, pybase64.urlsafe_b64encode(os.urandom(16)).decode())
    code, line = run("login", stdin={"otp": "123456"})
    assert code == 1 and line["error"]["type"] == "FlowStateInvalid" and run.state.exists()
    assert len(server.requests) == sent


def test_an_expired_state_is_removed(server: FakeHealthServer, run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    run("login", stdin={"identifier": "asha.verma@sbx"})
    later = types.SimpleNamespace(time=lambda: time.time() + 3600)  # past the sealed state's 30 minutes
    monkeypatch.setattr(_abha_flow, "time", later)
    code, line = run("login", stdin={"otp": "123456"})
    assert code == 1 and line["error"]["type"] == "FlowStateExpired" and not run.state.exists()
    assert server.calls("login_verify") == 0


@pytest.mark.parametrize(
    ("key", "says"),
    [(None, "is not set"), ("not base64!", "not URL-safe base64"), (pybase64.urlsafe_b64encode(b"x" * 20), "20 bytes")],
)
def test_the_key_is_checked_before_anything(
    server: FakeHealthServer, run: Runner, monkeypatch: pytest.MonkeyPatch, key: str | bytes | None, says: str
) -> None:
    if key is None:
        monkeypatch.delenv(abha_cli.ENV_STATE_KEY)
    else:
        monkeypatch.setenv(abha_cli.ENV_STATE_KEY, key.decode() if isinstance(key, bytes) else key)
    code, line = run("login", stdin={"identifier": "asha.verma@sbx"})
    assert code == 2 and line["step"] is None and line["error"]["type"] == "UsageError"
    assert says in line["error"]["message"] and abha_cli.ENV_STATE_KEY in line["error"]["message"]
    assert not run.state.exists() and server.calls("login_init") == 0


def test_usage_errors(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('{"identifier": "asha.verma@sbx"}\n'))
    assert cli.main(["abha", "login", "--json"]) == 2
    out, _ = capsys.readouterr()
    assert "--json needs --state" in orjson.loads(out)["error"]["message"]
    assert cli.main(["abha", "login", "--state", str(tmp_path / "s")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "goes with --json" in err
    monkeypatch.setattr("sys.stdin", io.StringIO('{"identifier": "asha.verma@sbx"}\n'))
    assert cli.main(["abha", "login", "--json", "--state", str(tmp_path / "missing" / "s")]) == 1
    out, _ = capsys.readouterr()
    assert "nothing sent" in orjson.loads(out)["error"]["message"]
    assert server.calls("login_init") == 0


def test_ctrl_c_is_130_and_keeps_the_state(
    server: FakeHealthServer, run: Runner, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run("login", stdin={"identifier": "asha.verma@sbx"})
    before = run.state.read_text()

    class CtrlC:
        """A stdin at which the person presses Ctrl-C."""

        def readline(self, size: int = -1) -> str:
            raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", CtrlC())
    assert cli.main(["abha", "login", "--json", "--state", str(run.state)]) == 130
    assert capsys.readouterr().out == "" and run.state.read_text() == before
    assert server.calls("login_verify") == 0


def test_a_failed_step_that_moved_the_flow_is_saved(
    server: FakeHealthServer, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("register", "--aadhaar", stdin={"aadhaar": server.data.valid_aadhaar[0]})
    later = types.SimpleNamespace(time=lambda: time.time() + 61)  # past the resend interval
    monkeypatch.setattr(_abha_flow, "time", later)
    server.inject("aadhaar_resend", Fault(status=502, times=1))  # the resend may or may not have gone out
    code, line = run("register", "--aadhaar", stdin={"resend": True})
    assert code == 1 and line["step"] == "verify_otp" and line["error"]["type"] == "OutcomeUnknown"
    assert line["resend_in"] > 55  # counted as sent: the next resend waits again
    state = run.opened()
    assert state["resends"] == 1 and state["send_outcome_unknown"] is True
    run.assert_private_state()


def test_a_blocked_flow_ends_and_its_state_goes(server: FakeHealthServer, run: Runner) -> None:
    run("login", stdin={"identifier": "asha.verma@sbx"})
    otp = run.otp()
    for _ in range(server.abha.max_otp_attempts):
        code, line = run("login", stdin={"otp": wrong(otp)})
        assert code == 1 and line["error"]["type"] == "OtpMismatch"
    code, line = run("login", stdin={"otp": otp})  # locked: ABDM-1100
    assert code == 1 and line["step"] == "blocked" and line["error"]["type"] == "AbhaRateLimited"
    assert line["blocked_until"] > time.time() and not run.state.exists()


def test_a_run_never_overwrites_the_state_another_run_saved_meanwhile(
    server: FakeHealthServer, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    aadhaar = server.data.valid_aadhaar[0]
    assert run("register", "--aadhaar", stdin={"aadhaar": aadhaar})[0] == 3
    otp = run.otp()
    answer = abha_cli._answer

    async def answered_while_another_run_saves(*args: Any) -> Any:
        result = await answer(*args)
        run.state.write_text("another run's state\n")  # a second terminal answered the same step meanwhile
        return result

    monkeypatch.setattr(abha_cli, "_answer", answered_while_another_run_saves)
    code, line = run("register", "--aadhaar", stdin={"otp": otp, "mobile": server.abha.linked_mobile(aadhaar)})
    assert code == 1 and line["error"]["type"] == "StateChanged" and "kept" in line["error"]["message"], line
    assert run.state.read_text() == "another run's state\n"  # that run's state stays; this step's is dropped
