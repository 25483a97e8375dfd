"""``health-async fake-server`` tried end to end from a shell: its signed webhooks reach a local receiver
(``health-async webhooks serve``) as in-process tests get them, the OTPs it "sends" and the test Aadhaar numbers it
accepts are visible, ``--documents N`` seeds N documents a user; bad options are usage errors (exit 2)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

import health_async as ha
from health_async import cli
from health_async._cli.webhooks import commands as webhooks_cli
from health_async.models import CareContext
from health_async.testing import FakeData

SECRET = "whsec-fake-server"
NO_WAIT = ha.RetryPolicy(attempts=1, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


class Running:
    """A command started in-process: its task, its stdout and stderr."""

    def __init__(self, task: asyncio.Task[int], out: io.StringIO, err: io.StringIO) -> None:
        self.task, self.out, self.err = task, out, err

    def env(self, name: str) -> str:
        found = re.search(rf"^export {name}=(.*)$", self.out.getvalue(), re.MULTILINE)
        assert found, self.out.getvalue()
        return found.group(1)

    def client(self) -> ha.HealthClient:
        return ha.HealthClient(
            base_url=self.env("HEALTH_ASYNC_BASE_URL"),
            token=self.env("HEALTH_ASYNC_TOKEN"),
            client_id=self.env("HEALTH_ASYNC_CLIENT_ID"),
            user_id=self.env("HEALTH_ASYNC_USER_ID"),
            retry=NO_WAIT,
        )


Start = Callable[..., Awaitable[Running]]


@pytest.fixture
async def fake_server() -> AsyncIterator[Start]:
    """Start ``health-async fake-server --port 0 FLAGS`` in-process, as ``cli.run`` does; stopped at the end."""
    started: list[Running] = []

    async def start(*flags: str) -> Running:
        args = cli.build_parser().parse_args(["fake-server", "--port", "0", *flags])
        out, err = io.StringIO(), io.StringIO()
        running = Running(asyncio.create_task(cli.run_fake_server(args, out=out, err=err)), out, err)
        started.append(running)
        for _ in range(500):
            if "HEALTH_ASYNC_KEY_ID" in out.getvalue() or running.task.done():
                break
            await asyncio.sleep(0.01)
        assert "HEALTH_ASYNC_KEY_ID" in out.getvalue(), err.getvalue()
        return running

    yield start
    for running in started:
        running.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running.task


async def test_its_signed_webhooks_reach_webhooks_serve(fake_server: Start) -> None:
    receiver = cli.build_parser().parse_args(["webhooks", "serve", "--port", "0", "--secret", SECRET])
    stop, printed = asyncio.Event(), io.StringIO()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(
        webhooks_cli.serve(receiver, stop=stop, on_ready=ready.set_result, out=printed, err=io.StringIO())
    )
    try:
        url = await asyncio.wait_for(asyncio.shield(ready), 10)
        running = await fake_server("--webhook-url", url, "--webhook-secret", SECRET)
        assert f"signed webhooks (ABDM's and Scan & Share's) go to {url}" in running.err.getvalue()
        assert SECRET not in running.err.getvalue() + running.out.getvalue()
        async with running.client() as client:
            oid = running.env("HEALTH_ASYNC_USER_ID")
            await client.abdm.link_care_contexts([CareContext("visit-1", "OP visit", "OPConsultation")], oid=oid)
            for _ in range(500):  # the webhook goes out after the 202, in the background
                if printed.getvalue():
                    break
                await asyncio.sleep(0.01)
            [line] = [json.loads(text) for text in printed.getvalue().splitlines()]
            # verified by the receiver with the secret: it prints only what passed its signature check
            assert (line["event"], line["link_status"], line["care_context_id"]) == (
                "abha.link_care_context",
                "LINKED",
                "visit-1",
            )
            assert "status" not in line  # an ABDM event has no parsing status
            # ... and the fake lists it as linked once its webhook was sent
            assert [c.care_context_id for c in await client.abdm.linked_care_contexts("HIP-1")] == ["visit-1"]
    finally:
        stop.set()
        assert await asyncio.wait_for(serving, 10) == 0


async def test_a_webhook_secret_from_the_environment_is_used(
    fake_server: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEALTH_ASYNC_WEBHOOK_SECRET", SECRET)
    running = await fake_server("--webhook-url", "http://127.0.0.1:9/webhooks")
    assert "go to http://127.0.0.1:9/webhooks" in running.err.getvalue()


async def test_documents_n_seeds_n_documents_a_user(fake_server: Start) -> None:
    running = await fake_server("--documents", "7")
    async with running.client() as client:
        listed = [item async for item in client.documents.list()]
    assert len(listed) == 7


async def test_the_banner_lists_the_test_aadhaar_numbers_and_where_otps_appear(fake_server: Start) -> None:
    running = await fake_server("--seed", "3")
    banner = running.err.getvalue()
    data = FakeData.generate(seed=3)  # the command: 3 users, 50 documents each
    assert f"test Aadhaar numbers accepted: {', '.join(data.valid_aadhaar)}" in banner
    for number in data.failing_aadhaar:
        assert number in banner
    assert "asha.verma@sbx" in banner and "ravi_kumar@sbx" in banner
    assert "printed here as they are made" in banner and "/_fake/otps" in banner
    assert "no webhooks are sent" in banner
    assert all(line.startswith("fake-server: ") for line in banner.splitlines())
    assert "export " not in banner  # the environment stays on stdout


async def otps_route(running: Running) -> list[dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(running.env("HEALTH_ASYNC_BASE_URL") + "/_fake/otps") as response,
    ):
        assert response.status == 200
        body = await response.json()
    assert isinstance(body, dict)
    otps: list[dict[str, Any]] = body["otps"]
    return otps


async def test_each_otp_it_sends_is_printed_as_it_is_made(
    fake_server: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    running = await fake_server()
    number = FakeData.generate(seed=0).valid_aadhaar[0]
    async with running.client() as client:
        started = await client.abha.aadhaar_init(number)
    [sent] = await otps_route(running)
    assert sent["purpose"] == "ABHA registration" and re.fullmatch(r"[0-9]{6}", sent["otp"])
    masked = re.search(r"\*{6}[0-9]{4}", started.hint or "")
    assert masked and sent["to"] == f"mobile {masked.group(0)}"  # the mobile the hint names
    err = capsys.readouterr().err
    assert f"fake OTP for ABHA registration, mobile {masked.group(0)}: {sent['otp']}\n" in err
    assert number not in err  # the Aadhaar number typed is not echoed with it


async def test_no_show_otps_prints_none_but_the_route_still_lists_them(
    fake_server: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    running = await fake_server("--no-show-otps")
    number = FakeData.generate(seed=0).valid_aadhaar[1]
    async with running.client() as client:
        await client.abha.aadhaar_init(number)
    [sent] = await otps_route(running)
    assert "fake OTP" not in capsys.readouterr().err
    assert "not printed (--no-show-otps)" in running.err.getvalue()
    assert re.fullmatch(r"[0-9]{6}", sent["otp"])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--webhook-url", "http://example.com/hook", "--webhook-secret", "s"], "loopback"),
        (["--webhook-url", "http://127.0.0.1:9/hook"], "--webhook-url needs the signing secret"),
        (["--webhook-secret", "s"], "--webhook-secret needs --webhook-url"),
    ],
    ids=["off-loopback", "no-secret", "secret-alone"],
)
def test_bad_webhook_options_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, flags: list[str], message: str
) -> None:
    monkeypatch.delenv("HEALTH_ASYNC_WEBHOOK_SECRET", raising=False)
    with socket.socket() as probe:  # a free port: the command must fail before listening
        probe.bind(("127.0.0.1", 0))
        free = str(probe.getsockname()[1])
    code = cli.main(["fake-server", "--port", free, *flags])
    captured = capsys.readouterr()
    assert code == 2 and message in captured.err and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err and captured.out == ""


@pytest.mark.parametrize("documents", ["0", "-1", "100001", "many"])
def test_documents_out_of_range_is_usage(capsys: pytest.CaptureFixture[str], documents: str) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["fake-server", "--documents", documents])
    assert info.value.code == 2 and "must be" in capsys.readouterr().err


def test_help_names_the_new_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["fake-server", "--help"])
    out = capsys.readouterr().out
    for option in ("--webhook-url", "--webhook-secret", "--documents", "--show-otps", "--no-show-otps"):
        assert option in out
