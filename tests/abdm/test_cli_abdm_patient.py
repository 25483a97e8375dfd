"""``health-async abdm consents list | show | approve | deny | revoke`` and ``health-async abdm discover`` against the
fake server (in its own thread, the command run in-process with ``cli.main``, the prompt stubbed): what each
prints and sends, the consent PIN and the OTPs typed without echo and never shown, a wrong PIN refused once, an
unknown outcome pointing at ``show``, Ctrl-C (a stubbed one, and a real SIGINT under ``asyncio.run``) stopping
before anything more is sent."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from health_async import cli
from health_async._cli.abdm import patient as abdm_patient
from health_async.testing import FakeHealthServer, Fault

from ..conftest import ServerThread

PIN = "4821"
HIP = "IN2910000101"  # one of the fake's facilities
#: Answers of the stubbed prompt: a str, a callable giving one (read when asked: an OTP sent meanwhile), or one of
#: these to stop.
CTRL_C = "^C"
SIGINT = "SIGINT"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    with ServerThread(documents_per_user=1) as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        monkeypatch.setenv("HEALTH_ASYNC_USER_ID", srv.data.user_ids[0])
        yield srv


@pytest.fixture
def user(server: FakeHealthServer) -> str:
    return server.data.user_ids[0]


class Prompt:
    """The person at the terminal: each question gets the next answer (see :data:`CTRL_C`, :data:`SIGINT`)."""

    def __init__(self, answers: list[str | Callable[[], str]]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, bool]] = []

    def __call__(self, question: str, *, secret: bool = False) -> str:
        self.asked.append((question, secret))
        if not self.answers:
            raise AssertionError(f"unexpected question: {question}")
        answer = self.answers.pop(0)
        if answer == CTRL_C:
            raise KeyboardInterrupt
        if answer == SIGINT:  # what a real Ctrl-C does at a blocking prompt under asyncio.run: the prompt goes on
            signal.raise_signal(signal.SIGINT)
            return PIN
        return answer() if callable(answer) else answer


@pytest.fixture
def prompt(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str | Callable[[], str]]], Prompt]:
    def make(answers: list[str | Callable[[], str]]) -> Prompt:
        stub = Prompt(answers)
        monkeypatch.setattr(abdm_patient, "PROMPT", stub)
        return stub

    return make


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str, str]:
    """Exit status, the JSON lines of stdout, stdout and stderr as text."""
    code = cli.main(["abdm", *argv])
    out, err = capsys.readouterr()
    return code, [orjson.loads(line) for line in out.splitlines() if line.strip()], out, err


def seed(server: FakeHealthServer, user: str, *, pin: str | None = PIN) -> str:
    if pin is not None:
        server.abdm_consents.pins[user] = pin
    return server.abdm_consents.add_request(user, ["HIP-1", "HIP-2"], abha_address="asha.verma@abdm")


# ------------------------------------------------------------------------------------------------ consents


def test_list_prints_one_line_per_consent_and_filters_by_status(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = seed(server, user), seed(server, user)
    server.abdm_consents.consents[second]["status"] = "DENIED"
    code, lines, out, err = run(capsys, "consents", "list")
    assert code == 0 and err == ""
    assert [(line["consent_id"], line["status"]) for line in lines] == [(first, "requested"), (second, "denied")]
    assert lines[0]["hi_types"] == ["OPConsultation"] and set(lines[0]["period"]) == {"start", "end", "expiry"}
    assert "asha.verma" not in out
    code, lines, _, _ = run(capsys, "consents", "list", "--status", "denied", "--status", "granted")
    assert code == 0 and [line["consent_id"] for line in lines] == [second]
    assert server.calls("consents_list") == 2


def test_approve_with_the_pin_typed_without_echo_then_show(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    cid = seed(server, user)
    asked = prompt(["12", PIN])  # not 4 digits: asked again, nothing sent
    code, lines, out, err = run(
        capsys,
        "consents",
        "approve",
        cid,
        "--care-context",
        "HIP-1:visit-1",
        "--care-context",
        "HIP-2:lab:7",  # split at the first ':'
        "--care-context",
        "HIP-1:visit-2",
    )
    assert code == 0, err
    assert lines == [
        {
            "consent_id": cid,
            "approved": True,
            "hip_ids": ["HIP-1", "HIP-2"],
            "care_context_ids": ["visit-1", "visit-2", "lab:7"],
        }
    ]
    assert asked.asked == [(abdm_patient._PIN_QUESTION, True)] * 2 and "4 digits" in err
    assert server.calls("consent_pin_verify") == 1 and server.calls("consents_approve") == 1
    stored = server.abdm_consents.consents[cid]
    assert stored["status"] == "GRANTED"
    assert [(a["hip_id"], a["care_contexts"]) for a in stored["artefacts"]] == [
        ("HIP-1", ["visit-1", "visit-2"]),
        ("HIP-2", ["lab:7"]),
    ]
    assert PIN not in out + err

    code, lines, out, err = run(capsys, "consents", "show", cid)
    assert code == 0 and err == ""
    (shown,) = lines
    assert shown["consent_id"] == cid and shown["status"] == "granted"
    hips = {h["hip_id"]: [cc["care_context_id"] for cc in h["care_contexts"]] for h in shown["hips"]}
    assert hips == {"HIP-1": ["visit-1", "visit-2"], "HIP-2": ["lab:7"]}
    assert "display" not in out and "visit visit-1" not in out  # the fake's display text: health data
    code, lines, out, _ = run(capsys, "consents", "show", cid, "--show-display")
    assert code == 0 and lines[0]["hips"][0]["care_contexts"][0]["display"] == "visit visit-1"


def test_a_wrong_pin_exits_1_with_a_typed_error_and_nothing_approved(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    cid = seed(server, user)
    asked = prompt(["1357"])
    code, lines, out, err = run(capsys, "consents", "approve", cid, "--care-context", "HIP-1:visit-1")
    assert code == 1 and lines == []
    assert "ConsentPinMismatch" in err and "Traceback" not in err
    assert len(asked.asked) == 1  # not asked again: each wrong PIN counts toward ABDM's block
    assert server.calls("consent_pin_verify") == 1 and server.calls("consents_approve") == 0
    assert server.abdm_consents.consents[cid]["status"] == "REQUESTED"
    assert "1357" not in out + err and PIN not in out + err


def test_deny_with_a_reason_that_is_never_printed(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    cid = seed(server, user, pin=None)
    asked = prompt([])  # no PIN for a denial
    reason = "I see another doctor now"
    code, lines, out, err = run(capsys, "consents", "deny", cid, "--reason", reason)
    assert code == 0 and err == ""
    assert lines == [{"consent_id": cid, "denied": True}]
    assert server.abdm_consents.consents[cid]["status"] == "DENIED"
    assert server.abdm_consents.consents[cid]["reason"] == reason and reason not in out
    assert asked.asked == [] and server.calls("consent_pin_verify") == 0


def test_revoke_the_artefacts_with_the_pin(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    cid = seed(server, user)
    prompt([PIN, PIN])
    code, _, _, err = run(
        capsys, "consents", "approve", cid, "--care-context", "HIP-1:v1", "--care-context", "HIP-2:v2"
    )
    assert code == 0, err
    artefacts = server.abdm_consents.artefact_ids(cid)
    code, lines, out, err = run(capsys, "consents", "revoke", cid, "--artefact-id", artefacts[0])
    assert code == 0, err
    assert lines == [{"consent_id": cid, "revoked_artefact_ids": [artefacts[0]]}]
    stored = server.abdm_consents.consents[cid]
    assert [a["status"] for a in stored["artefacts"]] == ["REVOKED", "GRANTED"] and stored["status"] == "GRANTED"
    assert server.calls("consents_revoke") == 1 and PIN not in out + err


@pytest.mark.parametrize(
    ("route", "argv", "answers"),
    [
        ("consents_approve", ["approve", "--care-context", "HIP-1:visit-1"], [PIN]),
        ("consents_deny", ["deny"], []),
    ],
)
def test_an_unknown_outcome_says_to_check_show_and_is_not_repeated(
    server: FakeHealthServer,
    user: str,
    capsys: pytest.CaptureFixture[str],
    prompt: Callable[..., Prompt],
    route: str,
    argv: list[str],
    answers: list[str],
) -> None:
    cid = seed(server, user)
    prompt(answers)
    server.inject(route, Fault(status=502, times=1))
    code, lines, out, err = run(capsys, "consents", argv[0], cid, *argv[1:])
    assert code == 1 and lines == []
    assert "ConsentOutcomeUnknown" in err and f"'health-async abdm consents show {cid}'" in err
    assert server.calls(route) == 1  # sent once, never repeated
    assert PIN not in out + err


@pytest.mark.parametrize("how", [CTRL_C, SIGINT])
def test_ctrl_c_at_the_pin_prompt_exits_130_and_sends_nothing(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt], how: str
) -> None:
    cid = seed(server, user)
    prompt([how])
    code, lines, out, err = run(capsys, "consents", "approve", cid, "--care-context", "HIP-1:visit-1")
    assert code == 130 and lines == []
    assert server.calls("consent_pin_verify") == 0 and server.calls("consents_approve") == 0
    assert "cancelled" in err and "Traceback" not in err
    assert PIN not in out + err


def test_bad_usage_is_refused_before_the_pin_is_asked(
    server: FakeHealthServer,
    capsys: pytest.CaptureFixture[str],
    prompt: Callable[..., Prompt],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = prompt([])
    code, _, _, err = run(capsys, "consents", "approve", "c-1", "--care-context", "no-colon")
    assert code == 2 and "HIP_ID:CARE_CONTEXT_ID" in err
    code, _, _, err = run(capsys, "consents", "revoke")
    assert code == 2 and "--artefact-id" in err
    monkeypatch.delenv("HEALTH_ASYNC_USER_ID")
    for argv in (["approve", "c-1", "--care-context", "H:c"], ["deny", "c-1"], ["revoke", "c-1"]):
        code, _, _, err = run(capsys, "consents", *argv)
        assert code == 2 and "--user-id" in err, argv
    code, _, _, err = run(capsys, "discover", HIP)
    assert code == 2 and "--user-id" in err
    assert asked.asked == []
    for route in ("consent_pin_verify", "consents_approve", "consents_deny", "consents_revoke", "discover"):
        assert server.calls(route) == 0, route


# ------------------------------------------------------------------------------------------------ discover


def otp(server: FakeHealthServer) -> Callable[[], str]:
    """The OTP the facility sent last (read when asked)."""
    return lambda: server.abdm_discover.last_otp()


def wrong_otp(server: FakeHealthServer) -> Callable[[], str]:
    return lambda: f"{(int(server.abdm_discover.last_otp()) + 1) % 1_000_000:06d}"


def linked(server: FakeHealthServer, user: str) -> list[str]:
    return [item["care_context_id"] for item in server.abdm_discover.linked.get(user, [])]


def test_discover_links_the_one_record_found(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    server.abdm_discover.add_records(HIP, user, [("op-1", "OP visit, 3 March")], display="Asha Verma")
    asked = prompt([otp(server)])
    code, lines, out, err = run(capsys, "discover", HIP)
    assert code == 0, err
    assert lines == [{"hip_id": HIP, "linked": ["op-1"]}]
    assert linked(server, user) == ["op-1"]
    assert "1) OP visit, 3 March" in err
    assert [secret for _, secret in asked.asked] == [True]  # the OTP only: nothing to choose
    assert server.calls("discover_link_init") == 1 and server.calls("discover_link_confirm") == 1
    assert server.abdm_discover.last_otp() not in out + err and "Asha Verma" not in out + err


def test_discover_several_records_then_a_choice(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    server.abdm_discover.add_records(HIP, user, [("op-1", "OP visit"), ("lab-2", "Blood test"), ("dis-3", "Discharge")])
    asked = prompt(["4", "3,1", otp(server), otp(server)])  # 4: not a choice, asked again
    code, lines, out, err = run(capsys, "discover", HIP)
    assert code == 0, err
    assert lines == [{"hip_id": HIP, "linked": ["dis-3", "op-1"]}]
    assert linked(server, user) == ["dis-3", "op-1"]
    assert "OP visit" not in out and "Discharge" not in out  # what the records are: on the terminal only
    assert "1) OP visit" in err and "2) Blood test" in err and "3) Discharge" in err and "from 1 to 3" in err
    assert [secret for _, secret in asked.asked] == [False, False, True, True]
    assert server.calls("discover") == 2 and server.calls("discover_link_confirm") == 2  # one flow per record


def test_discover_all_by_default_skips_a_record_linked_meanwhile(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    server.abdm_discover.add_records(HIP, user, ["op-1", "lab-2"])

    def link_the_other_elsewhere() -> str:
        code = server.abdm_discover.last_otp()
        server.abdm_discover.linked.setdefault(user, []).append(
            {"hip_id": HIP, "patient_id": "P1", "care_context_id": "lab-2"}
        )
        return code

    prompt(["", link_the_other_elsewhere])
    code, lines, _, err = run(capsys, "discover", HIP)
    assert code == 0, err
    assert lines == [{"hip_id": HIP, "linked": ["op-1"], "skipped": ["lab-2"]}]
    assert "no longer listed" in err and server.calls("discover_link_init") == 1


def test_discover_a_wrong_otp_then_the_right_one(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    server.abdm_discover.add_records(HIP, user, ["op-1"])
    asked = prompt([wrong_otp(server), "", otp(server)])  # wrong, then nothing (asked again, nothing sent)
    code, lines, out, err = run(capsys, "discover", HIP)
    assert code == 0, err
    assert lines == [{"hip_id": HIP, "linked": ["op-1"]}]
    assert "not right" in err and len(asked.asked) == 3
    assert server.calls("discover_link_init") == 1 and server.calls("discover_link_confirm") == 2
    assert server.abdm_discover.last_otp() not in out + err


def test_discover_ctrl_c_exits_130_and_sends_nothing_more(
    server: FakeHealthServer, user: str, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    server.abdm_discover.add_records(HIP, user, ["op-1", "lab-2"])
    prompt(["", otp(server), CTRL_C])  # all; the first linked; Ctrl-C at the second's OTP
    code, lines, _, err = run(capsys, "discover", HIP)
    assert code == 130 and "cancelled" in err and "Traceback" not in err
    assert lines == [{"hip_id": HIP, "linked": ["op-1"]}]  # what was linked before
    assert server.calls("discover_link_init") == 2 and server.calls("discover_link_confirm") == 1
    assert linked(server, user) == ["op-1"]


def test_discover_nothing_found(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], prompt: Callable[..., Prompt]
) -> None:
    asked = prompt([])
    code, lines, _, err = run(capsys, "discover", HIP, "--ref-id", "REG-7781")
    assert code == 0 and lines == [{"hip_id": HIP, "linked": []}]
    assert "no record" in err and "REG-7781" not in err and asked.asked == []
    assert server.calls("discover") == 1 and server.calls("discover_link_init") == 0
