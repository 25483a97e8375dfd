"""The command line as new users met it (issue 36): what it says when used as a first-time user would."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from health_async import cli
from health_async.testing import FakeHealthServer

from ..conftest import ServerThread

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=2) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        yield srv


# ------------------------------------------------------------------------- interactive commands without a terminal


@pytest.mark.parametrize(
    "argv",
    [
        ["abha", "register", "--aadhaar"],
        ["abha", "register", "--mobile"],
        ["abha", "login"],
        ["abha", "kyc"],
        ["abdm", "consents", "approve", "c-1", "--care-context", "hip-1:cc-1"],
        ["abdm", "consents", "revoke", "c-1"],
        ["abdm", "discover", "hip-1"],
    ],
    ids=lambda argv: " ".join(argv[:3]),
)
def test_an_interactive_command_without_a_terminal_says_how_to_run_it(
    server: FakeHealthServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("2345 6789 0124\n"))  # a pipe: answers a script would send
    sent = len(server.requests)
    assert cli.main(argv) == 2  # bad usage, as documented
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert "stdin is not a terminal" in err and "nothing was asked or sent" in err
    if argv[0] == "abha":
        assert "--json --state FILE" in err and f"health-async abha {argv[1]} --help" in err
    assert "Warning" not in err and "getpass" not in err and "Traceback" not in err
    assert len(server.requests) == sent


def test_no_getpass_warning_from_a_real_process(server: FakeHealthServer, tmp_path: Path) -> None:
    # what a user saw: Python's GetPassWarning and the path of getpass.py, from a real process with stdin /dev/null
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    proc = subprocess.run(
        [sys.executable, "-m", "health_async", "abha", "login", "--method", "mobile"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "GetPassWarning" not in proc.stderr and "getpass.py" not in proc.stderr
    assert "--json --state FILE" in proc.stderr and proc.stdout == ""


def test_the_guides_say_the_exit_codes_the_json_mode_gives_for_an_empty_stdin(
    server: FakeHealthServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("HEALTH_ASYNC_STATE_KEY", "A" * 43 + "=")
    state = tmp_path / "flow.state"
    argv = ["abha", "register", "--aadhaar", "--json", "--state", str(state)]
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(argv) == 1  # the first run has nothing to wait for
    monkeypatch.setattr("sys.stdin", io.StringIO(orjson.dumps({"aadhaar": server.data.valid_aadhaar[0]}).decode()))
    assert cli.main(argv) == 3
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert cli.main(argv) == 3  # a later run: the step line again
    capsys.readouterr()
    guide = " ".join((ROOT / "docs/guides/abha.md").read_text().split())
    assert "3 waiting for input (also for an empty stdin after the first run" in guide
    assert "also an empty stdin at the first run, which has nothing to wait for" in guide
    table = " ".join((ROOT / "docs/guides/command-line.md").read_text().split())
    assert "an empty stdin at the first run is exit 1" in table
