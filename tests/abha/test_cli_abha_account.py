"""``health-async abha profile | card | qr | search | pincode | kyc`` against the fake server (in its own thread, the
command run in-process with ``cli.main``): what each prints, what it sends and what it refuses before sending, the
KYC upgrade interactive (prompt stubbed) and scripted with ``--json --state FILE`` one step per run, and personal
data never on stderr."""

from __future__ import annotations

import io
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pybase64
import pytest

from health_async import cli
from health_async._cli.abha import register as abha_cli
from health_async.testing import FakeHealthServer
from health_async.testing.abha._profile import SEEDED_PROFILE_MOBILE

from ..conftest import ServerThread

KEY = bytes(range(32))
KEY_TEXT = pybase64.urlsafe_b64encode(KEY).decode()
#: The fake's mobile-only ABHA address that a KYC upgrade is run on.
KYC_ACCOUNT = "ravi_kumar"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=1) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv(abha_cli.ENV_STATE_KEY, KEY_TEXT)
        yield srv


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    code = cli.main(["abha", *argv])
    out, err = capsys.readouterr()
    return code, [orjson.loads(line) for line in out.splitlines() if line.strip()], err


def pt_ids(server: FakeHealthServer, route: str) -> list[str | None]:
    """The ``X-Pt-Id`` of every request the fake recorded for ``route``."""
    return [
        next((v for k, v in r.headers.items() if k.lower() == "x-pt-id"), None)
        for r in server.requests
        if r.route == route
    ]


def personal(profile: dict[str, Any]) -> list[str]:
    """The personal values of a stored profile (none may appear on stderr)."""
    keys = ("abha_address", "first_name", "last_name", "mobile", "address", "abha_number")
    return [str(profile[k]) for k in keys if profile.get(k)]


# ------------------------------------------------------------------------------------------------ profile


def test_profile_prints_the_users_profile(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = server.data.user_ids[:2]
    stored = server.abha_profile.profiles[second]
    code, lines, err = run(capsys, "profile", "--user-id", second)
    assert code == 0 and err == ""
    assert len(lines) == 1
    line = lines[0]
    for key in ("abha_address", "first_name", "last_name", "mobile", "pincode", "gender", "kyc_verified"):
        assert line[key] == stored[key], key
    assert pt_ids(server, "abha_profile_get") == [second]
    # without --user-id: the OID of HEALTH_ASYNC_USER_ID
    monkeypatch.setenv("HEALTH_ASYNC_USER_ID", first)
    code, lines, _ = run(capsys, "profile")
    assert code == 0 and lines[0]["abha_number"] == server.abha_profile.profiles[first]["abha_number"]
    assert pt_ids(server, "abha_profile_get") == [second, first]


def test_profile_without_a_user_is_refused_before_sending(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = run(capsys, "profile")
    assert code == 2 and lines == [] and "X-Pt-Id" in err
    assert server.calls("abha_profile_get") == 0


def test_profile_update_changes_only_the_given_fields(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    oid = server.data.user_ids[1]  # mobile-only: every field may change
    before = dict(server.abha_profile.profiles[oid])
    code, lines, err = run(
        capsys, "profile", "--user-id", oid, "--update", "pincode=110001", "address=", "last-name=Das", "gender=f"
    )
    assert code == 0 and err == ""
    assert lines == [{"updated": ["last_name", "gender", "pincode", "address"]}]
    after = server.abha_profile.profiles[oid]
    assert after["pincode"] == "110001" and after["state_name"] == "DELHI"
    assert after["address"] is None and after["last_name"] == "Das" and after["gender"] == "F"
    assert after["first_name"] == before["first_name"] and after["mobile"] == before["mobile"]
    assert server.calls("abha_profile_update") == 1
    assert pt_ids(server, "abha_profile_update") == [oid]


@pytest.mark.parametrize(
    ("pair", "rule"),
    [
        ("nickname=Secretvalue", "--update takes the fields"),
        ("Secretvalue", "FIELD=VALUE"),
        ("date_of_birth=04-03-1992", "YYYY-MM-DD"),
        ("gender=Secretvalue", "M, F or O"),
        ("pincode=012345", "pincode"),
        ("first_name=", "first_name"),
    ],
)
def test_a_bad_update_is_refused_before_anything_is_sent(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], pair: str, rule: str
) -> None:
    oid = server.data.user_ids[1]
    code, lines, err = run(capsys, "profile", "--user-id", oid, "--update", pair)
    assert code == 2 and lines == [] and rule in err, err
    assert "Secretvalue" not in err and "Traceback" not in err
    assert server.calls("abha_profile_get") == 0 and server.calls("abha_profile_update") == 0


def test_a_kyc_verified_profile_keeps_its_name(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    oid = server.data.user_ids[0]  # KYC-verified
    code, lines, err = run(capsys, "profile", "--user-id", oid, "--update", "first_name=Someoneelse")
    assert code == 2 and lines == [] and "KYC-verified" in err
    assert "Someoneelse" not in err and server.calls("abha_profile_update") == 0
    for value in personal(server.abha_profile.profiles[oid]):
        assert value not in err


def test_profile_delete_needs_yes_and_the_oid_on_the_command(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    oid = server.data.user_ids[1]
    monkeypatch.setenv("HEALTH_ASYNC_USER_ID", oid)
    code, lines, err = run(capsys, "profile", "--delete", "--user-id", oid)
    assert code == 2 and lines == [] and "--yes" in err and "nothing was sent" in err
    code, lines, err = run(capsys, "profile", "--delete", "--yes")  # the environment's OID is not enough
    assert code == 2 and lines == [] and "--user-id" in err
    code, lines, err = run(capsys, "profile", "--yes", "--user-id", oid)
    assert code == 2 and "--yes goes with --delete" in err
    assert server.calls("abha_profile_delete") == 0 and server.calls("abha_profile_get") == 0
    assert oid in server.abha_profile.profiles

    code, lines, err = run(capsys, "profile", "--delete", "--yes", "--user-id", oid)
    assert code == 0 and lines == [{"deleted": True}] and err == ""
    assert oid not in server.abha_profile.profiles and pt_ids(server, "abha_profile_delete") == [oid]
    code, lines, err = run(capsys, "profile", "--user-id", oid)
    assert code == 1 and lines == [] and "NotFoundError" in err


# ------------------------------------------------------------------------------------------------ card and QR


def test_card_and_qr_to_a_file(server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    oid = server.data.user_ids[0]
    card, qr, data = tmp_path / "card.png", tmp_path / "qr.png", tmp_path / "qr.json"
    code, lines, err = run(capsys, "card", "--to", str(card), "--user-id", oid)
    expected = server.abha_profile.card_bytes(oid)
    assert code == 0 and err == ""
    assert lines == [{"file": str(card), "content_type": "image/png", "bytes": len(expected)}]
    assert card.read_bytes() == expected
    assert stat.S_IMODE(card.stat().st_mode) & 0o077 == 0  # personal data: the owner's only

    code, lines, err = run(capsys, "qr", "--to", str(qr), "--user-id", oid)
    assert code == 0 and lines[0]["content_type"] == "image/png" and err == ""
    assert qr.read_bytes() == server.abha_profile.qr_bytes(oid)

    code, lines, err = run(capsys, "qr", "--to", str(data), "--as-json", "--user-id", oid)
    assert code == 0 and lines[0]["content_type"] == "application/json" and err == ""
    assert orjson.loads(data.read_bytes())["hid"] == server.abha_profile.profiles[oid]["abha_address"]

    server.abha_profile.card_format = "pdf"
    code, lines, _ = run(capsys, "card", "--to", str(card), "--user-id", oid)
    assert code == 0 and lines[0]["content_type"] == "application/pdf"
    assert card.read_bytes() == server.abha_profile.card_bytes(oid)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.png", "qr.json", "qr.png"]  # no partial file


def test_card_to_a_missing_folder_is_refused_before_sending(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    oid = server.data.user_ids[0]
    code, lines, err = run(capsys, "card", "--to", str(tmp_path / "nowhere" / "card.png"), "--user-id", oid)
    assert code == 2 and lines == [] and "existing folder" in err and "nowhere" not in err
    assert server.calls("abha_card") == 0


class _BinaryStdout(io.TextIOWrapper):
    """A stdout whose bytes the test reads back (``.buffer`` is a BytesIO); a terminal when ``tty``."""

    def __init__(self, *, tty: bool = False) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8")
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def written(self) -> bytes:
        self.flush()
        raw = self.buffer
        assert isinstance(raw, io.BytesIO)
        return raw.getvalue()


@pytest.mark.parametrize("asset", ["card", "qr"])
def test_card_and_qr_to_stdout(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, asset: str
) -> None:
    oid = server.data.user_ids[0]
    out = _BinaryStdout()
    monkeypatch.setattr("sys.stdout", out)
    assert cli.main(["abha", asset, "--to", "-", "--user-id", oid]) == 0
    expected = server.abha_profile.card_bytes(oid) if asset == "card" else server.abha_profile.qr_bytes(oid)
    assert out.written() == expected  # the bytes alone: no JSON line around them
    assert capsys.readouterr().err == f"health-async abha {asset}: image/png written to stdout\n"


def test_binary_to_a_terminal_is_refused(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _BinaryStdout(tty=True)
    monkeypatch.setattr("sys.stdout", out)
    assert cli.main(["abha", "card", "--to", "-", "--user-id", server.data.user_ids[0]]) == 2
    assert out.written() == b"" and "terminal" in capsys.readouterr().err
    assert server.calls("abha_card") == 0


# ------------------------------------------------------------------------------------------------ search, pincode


def test_search_prints_a_line_per_match(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = server.abha_profile.profiles[server.data.user_ids[0]]  # the KYC-verified one on that mobile
    code, lines, err = run(capsys, "search", "+91 " + SEEDED_PROFILE_MOBILE)
    assert code == 0 and err == ""
    assert len(lines) == 1
    match = lines[0]
    assert match["index"] == 1 and match["abha_address"] == stored["abha_address"] and match["kyc_verified"] is True
    assert match["abha_number"] == "xx-xxxx-xxxx-" + stored["abha_number"][-4:]
    assert SEEDED_PROFILE_MOBILE not in str(lines) and "txn_id" not in match
    # the number from stdin (kept out of the process list)
    monkeypatch.setattr("sys.stdin", io.StringIO(SEEDED_PROFILE_MOBILE + "\n"))
    code, again, _ = run(capsys, "search", "-")
    assert code == 0 and again == lines
    # no match: no line, a word on stderr without the number
    code, lines, err = run(capsys, "search", "9123456780")
    assert code == 0 and lines == [] and "no KYC-verified ABHA" in err and "9123456780" not in err
    assert server.calls("abha_search") == 3


@pytest.mark.parametrize("mobile", ["12345", "5123456789", "98765x4321"])
def test_a_bad_mobile_is_refused_before_sending(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], mobile: str
) -> None:
    code, lines, err = run(capsys, "search", mobile)
    assert code == 2 and lines == [] and mobile not in err and err.startswith("health-async: ")
    assert server.calls("abha_search") == 0


def test_pincode(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys, "pincode", "834001")
    assert code == 0 and err == ""
    assert lines == [
        {
            "pincode": "834001",
            "state_code": "20",
            "state_name": "Jharkhand",
            "district_code": "339",
            "district_name": "Ranchi",
        }
    ]
    code, lines, err = run(capsys, "pincode", "012345")
    assert code == 2 and lines == [] and "not start with 0" in err
    assert server.calls("abha_pincode") == 1
    code, lines, err = run(capsys, "pincode", "999999")
    assert code == 1 and lines == [] and "NotFoundError" in err


def test_help_says_the_output_is_personal_data(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("profile", "card", "qr", "search"):
        with pytest.raises(SystemExit) as info:
            cli.main(["abha", command, "--help"])
        assert info.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "personal data" in text, command
    with pytest.raises(SystemExit):
        cli.main(["abha", "profile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--update FIELD=VALUE" in text and "--delete --yes" in text and "date_of_birth" in text


# ------------------------------------------------------------------------------------------------ kyc, interactive


class Prompt:
    """Answers the KYC questions: the number, then each OTP in ``otps`` (``None``: the one the fake "sent")."""

    def __init__(self, server: FakeHealthServer, number: str, otps: list[str | None]) -> None:
        self.server, self.number, self.otps = server, number, list(otps)
        self.asked: list[tuple[str, bool]] = []

    def __call__(self, question: str, *, secret: bool = False) -> str:
        self.asked.append((question, secret))
        if question.startswith(("Aadhaar number", "ABHA number")):
            return self.number
        if question.startswith("OTP"):
            otp = self.otps.pop(0)
            if otp == "^C":
                raise KeyboardInterrupt
            return self.server.abha_kyc.last_otp() if otp is None else otp
        raise AssertionError(f"unexpected question: {question}")


def verified(account: Any) -> bool:
    """The fake account's KYC flag (read through a function: mypy keeps a narrowed attribute narrowed)."""
    return bool(account.kyc_verified)


def wrong(otp: str) -> str:
    return f"{(int(otp) + 1) % 1_000_000:06d}"


def test_kyc_interactive(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    account = server.abha.accounts[KYC_ACCOUNT]
    assert not verified(account)
    aadhaar = server.data.valid_aadhaar[0]
    prompt = Prompt(server, aadhaar, ["123456", None])  # a wrong OTP first, asked again
    monkeypatch.setattr(abha_cli, "PROMPT", prompt)
    code, lines, err = run(capsys, "kyc", "--user-id", account.oid)
    assert code == 0, err
    assert lines == [{"kyc_verified": True, "status": "verified"}]
    assert verified(account) and account.aadhaar == aadhaar
    assert "not right" in err and "KYC-verified" in err
    assert all(secret for _, secret in prompt.asked)  # the number and the OTPs typed without echo
    assert prompt.asked[0][0].startswith("Aadhaar number") and len(prompt.asked) == 3
    assert server.calls("kyc_init") == 1 and server.calls("kyc_verify") == 2
    assert pt_ids(server, "kyc_init") == [account.oid]
    for value in (aadhaar, server.abha_kyc.last_otp(), account.mobile, account.abha_address):
        assert value not in err and value not in str(lines)


def test_kyc_interactive_needs_a_user_and_stops_on_ctrl_c(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = Prompt(server, server.data.valid_aadhaar[0], ["^C"])
    monkeypatch.setattr(abha_cli, "PROMPT", prompt)
    code, lines, err = run(capsys, "kyc")  # no OID: refused before a question
    assert code == 1 and lines == [] and "--user-id" in err and prompt.asked == []
    assert server.calls("kyc_init") == 0

    code, lines, err = run(capsys, "kyc", "--user-id", server.abha.accounts[KYC_ACCOUNT].oid)
    assert code == 130 and lines == [] and "cancelled" in err and "Traceback" not in err
    assert server.calls("kyc_init") == 1 and server.calls("kyc_verify") == 0


# ------------------------------------------------------------------------------------------------ kyc --json


class Runner:
    """Runs ``abha kyc --json --state FILE`` once per step, as a script would."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
        self.capsys, self.monkeypatch, self.state = capsys, monkeypatch, state
        self.outputs: list[str] = []

    def __call__(self, *argv: str, stdin: str | dict[str, Any] = "", command: str = "kyc") -> tuple[int, Any]:
        text = orjson.dumps(stdin).decode() + "\n" if isinstance(stdin, dict) else stdin
        self.monkeypatch.setattr("sys.stdin", io.StringIO(text))
        code = cli.main(["abha", command, *argv, "--json", "--state", str(self.state)])
        out, err = self.capsys.readouterr()
        self.outputs.append(out + err)
        assert err == "", err  # no prompt, no getpass warning, nothing else on stderr
        lines = out.splitlines()
        assert len(lines) == 1, out
        return code, orjson.loads(lines[0])


@pytest.fixture
def script(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Runner:
    folder = tmp_path / "flows"
    folder.mkdir()
    return Runner(capsys, monkeypatch, folder / "kyc.state")


def test_kyc_json_step_by_step(server: FakeHealthServer, script: Runner) -> None:
    account = server.abha.accounts[KYC_ACCOUNT]
    aadhaar = server.data.valid_aadhaar[0]
    code, line = script("--user-id", account.oid, stdin={"identifier": aadhaar})
    assert code == abha_cli.EXIT_WAITING == 3
    assert line["step"] == "verify_otp" and "hint" in line and 55 < line["resend_in"] <= 60
    sealed = script.state.read_text()
    assert stat.S_IMODE(script.state.stat().st_mode) == 0o600
    assert [p.name for p in script.state.parent.iterdir()] == ["kyc.state"]
    for plain in (aadhaar, account.oid, "verify_otp", "kyc"):
        assert plain not in sealed  # sealed: nothing readable in it

    otp = server.abha_kyc.last_otp()
    code, line = script(stdin={"otp": wrong(otp)})  # no --user-id: the flow keeps the first run's OID
    assert code == 1 and line["step"] == "verify_otp" and line["error"]["type"] == "OtpMismatch"
    assert script.state.exists() and not verified(account)

    sent = len(server.requests)
    code, line = script(stdin="")  # no answer: the step again, nothing sent
    assert code == 3 and line["step"] == "verify_otp"
    code, line = script(stdin={"otp": otp, "mobile": "9876543210"})  # no mobile in a KYC
    assert code == 1 and line["error"]["type"] == "InvalidRequest" and "9876543210" not in str(line)
    code, line = script(stdin={"resend": True})  # too soon: refused locally
    assert code == 1 and line["error"]["type"] == "ResendTooSoon"
    assert len(server.requests) == sent

    code, line = script(stdin={"otp": otp})
    assert code == 0
    assert line == {"step": "done", "kyc_verified": True, "status": "verified"}
    assert not script.state.exists() and list(script.state.parent.iterdir()) == []
    assert verified(account) and account.aadhaar == aadhaar
    assert pt_ids(server, "kyc_init") == [account.oid] and pt_ids(server, "kyc_verify") == [account.oid] * 2
    everything = "".join(script.outputs)
    for secret in (aadhaar, otp, wrong(otp), KEY_TEXT, account.mobile):
        assert secret not in everything


def test_kyc_json_with_an_abha_number(server: FakeHealthServer, script: Runner) -> None:
    holder = server.abha.accounts["asha.verma"]  # KYC-verified: has an ABHA number
    account = server.abha.accounts[KYC_ACCOUNT]
    assert holder.abha_number is not None
    number = f"{holder.abha_number[:2]}-{holder.abha_number[2:6]}-{holder.abha_number[6:10]}-{holder.abha_number[10:]}"
    code, line = script("--user-id", account.oid, "--method", "abha-number", stdin={"identifier": number})
    assert code == 3 and line["step"] == "verify_otp"
    code, line = script(stdin={"otp": server.abha_kyc.last_otp()})
    assert code == 0 and line["kyc_verified"] is True and verified(account)
    assert holder.abha_number not in "".join(script.outputs)


def test_kyc_json_start_is_checked_before_sending(
    server: FakeHealthServer, script: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    oid = server.abha.accounts[KYC_ACCOUNT].oid
    aadhaar = server.data.valid_aadhaar[0]
    code, line = script(stdin={"identifier": aadhaar})  # no OID anywhere
    assert code == 1 and line["step"] is None and "--user-id" in line["error"]["message"]
    code, line = script("--user-id", oid, stdin="")
    assert code == 1 and "no start input" in line["error"]["message"] and "identifier" in line["error"]["message"]
    code, line = script("--user-id", oid, "--method", "aadhaar", stdin={"identifier": aadhaar, "method": "abha-number"})
    assert code == 1 and "differ" in line["error"]["message"]
    code, line = script("--user-id", oid, stdin={"identifier": aadhaar, "aadhaar": aadhaar})
    assert code == 1 and line["error"]["type"] == "InvalidRequest"
    bad = aadhaar[:-1] + str((int(aadhaar[-1]) + 1) % 10)  # the check digit broken
    code, line = script("--user-id", oid, stdin={"identifier": bad})
    assert code == 1 and line["error"]["type"] == "InvalidAadhaarNumber"
    assert server.calls("kyc_init") == 0 and not script.state.exists()
    assert aadhaar not in "".join(script.outputs) and bad not in "".join(script.outputs)
    # the environment's OID will do; a state of the KYC is not a login's
    monkeypatch.setenv("HEALTH_ASYNC_USER_ID", oid)
    assert script(stdin={"identifier": aadhaar})[0] == 3
    code, line = script(stdin={"otp": "123456"}, command="login")
    assert code == 1 and "kyc flow" in line["error"]["message"] and script.state.exists()
    assert server.calls("kyc_verify") == 0
