"""``client.webhook_subscriptions`` (create, list, delete) against the fake service, its rules checked before
anything is sent, its secret kept out of sight; and ``health-async webhooks subscribe|list|unsubscribe`` against
the fake service in a thread."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from health_async import HealthClient, cli
from health_async._cli.webhooks import commands as webhooks_cli
from health_async._wire import structure
from health_async.errors import (
    ApiError,
    InvalidArgumentType,
    InvalidRequest,
    NotFoundError,
    OutcomeUnknown,
    ResponseValidationError,
)
from health_async.models import WebhookSubscription, WebhookSubscriptionCreated, WebhookSubscriptionList
from health_async.resources.webhooks.subscriptions import DOCUMENTED_EVENTS
from health_async.testing import FakeHealthServer, Fault
from health_async.webhooks import EventKind

from ..conftest import ServerThread

URL = "https://hospital.example/webhooks/eka"
KEY = "whsec-0123456789abcdef"
CREATE, LIST, DELETE = "webhook_subscription_create", "webhook_subscription_list", "webhook_subscription_delete"


def _last_body(server: FakeHealthServer, route: str) -> Any:
    return [r for r in server.requests if r.route == route][-1].json


# ---------------------------------------------------------------------------------------------- the client


async def test_create_list_delete_round_trip(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    created = await health_client.webhook_subscriptions.create(
        URL, [EventKind.LINK_CARE_CONTEXT, "abha.hip_data_fetch", "abha.link_care_context", "appointment.created"]
    )
    assert isinstance(created, WebhookSubscriptionCreated)
    assert (created.url, created.events, created.status) == (
        URL,
        ("abha.link_care_context", "abha.hip_data_fetch", "appointment.created"),
        "success",
    )
    sent = _last_body(fake_health_server, CREATE)
    assert sent == {
        "endpoint": URL,
        "event_names": ["abha.link_care_context", "abha.hip_data_fetch", "appointment.created"],
        "signing_key": created.signing_key,
        "protocol": "https",
    }
    assert created.signing_key is not None and len(created.signing_key) >= 40  # generated: 32 random bytes

    listed = await health_client.webhook_subscriptions.list()
    assert [s.id for s in listed] == [created.id]
    sub = listed[0]
    assert (sub.url, sub.events, sub.protocol, sub.client_id) == (
        URL,
        created.events,
        "https",
        fake_health_server.client_id,
    )
    assert sub.signed and sub.signing_key == created.signing_key
    assert sub.created_at is not None and sub.created_at.tzinfo is not None
    assert abs(sub.created_at - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)

    await health_client.webhook_subscriptions.delete(created.id)
    assert await health_client.webhook_subscriptions.list() == ()
    assert [fake_health_server.calls(r) for r in (CREATE, LIST, DELETE)] == [1, 2, 1]


async def test_each_subscription_gets_a_fresh_key_unless_one_is_given(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    first = await health_client.webhook_subscriptions.create(URL, ["rec.uploaded"])
    second = await health_client.webhook_subscriptions.create(URL + "/2", ["rec.uploaded"])
    assert first.signing_key != second.signing_key
    own = await health_client.webhook_subscriptions.create(URL + "/3", ["rec.uploaded"], signing_key=KEY)
    assert own.signing_key == KEY
    assert _last_body(fake_health_server, CREATE)["signing_key"] == KEY


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/hook", "http://localhost/hook", "http://[::1]:9000/hook"])
async def test_plain_http_is_accepted_to_a_loopback_host(
    health_client: HealthClient, fake_health_server: FakeHealthServer, url: str
) -> None:
    created = await health_client.webhook_subscriptions.create(url, ["rec.uploaded"])
    assert created.url == url
    assert _last_body(fake_health_server, CREATE)["protocol"] == "http"


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://hospital.example/hook", "plain http:// to a non-loopback host"),
        ("http://10.0.0.5/hook", "plain http:// to a non-loopback host"),
        ("ftp://hospital.example/hook", "absolute https:// URL"),
        ("hospital.example/hook", "absolute https:// URL"),
        ("https:///hook", "absolute https:// URL"),
        ("https://user:pass@hospital.example/hook", "user name or password"),
        ("https://hospital.example/hook#part", "#fragment"),
        ("https://hospital.example/a hook", "whitespace or control"),
        ("https://hospital.example:port/hook", "absolute https:// URL"),
        ("", "must not be empty"),
        ("https://hospital.example/" + "a" * 2048, "at most 2048"),
    ],
)
async def test_a_bad_url_is_refused_before_sending(
    health_client: HealthClient, fake_health_server: FakeHealthServer, url: str, rule: str
) -> None:
    with pytest.raises(InvalidRequest, match=rule):
        await health_client.webhook_subscriptions.create(url, ["rec.uploaded"])
    assert fake_health_server.calls(CREATE) == 0


@pytest.mark.parametrize(
    ("events", "error", "rule"),
    [
        ([], InvalidRequest, "at least one event"),
        (["abha.link_carecontext"], InvalidRequest, r"events\[0\] is not a documented event name"),
        (["rec.uploaded", "Rec.Uploaded"], InvalidRequest, r"events\[1\] is not a documented"),
        ([EventKind.UNKNOWN], InvalidRequest, "names no event"),
        ("abha.link_care_context", InvalidArgumentType, "events must be an iterable"),
        (EventKind.LINK_CARE_CONTEXT, InvalidArgumentType, "events must be an iterable"),
        (["rec.uploaded", 7], InvalidArgumentType, r"events\[1\] must be a str or an EventKind"),
    ],
)
async def test_empty_or_unknown_events_are_refused_before_sending(
    health_client: HealthClient, fake_health_server: FakeHealthServer, events: Any, error: type, rule: str
) -> None:
    with pytest.raises(error, match=rule):
        await health_client.webhook_subscriptions.create(URL, events)
    assert fake_health_server.calls(CREATE) == 0


async def test_an_unknown_event_passes_only_with_the_flag_and_only_if_it_looks_like_one(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    created = await health_client.webhook_subscriptions.create(URL, ["abha.new_thing"], allow_unknown_events=True)
    assert created.events == ("abha.new_thing",)
    assert _last_body(fake_health_server, CREATE)["event_names"] == ["abha.new_thing"]
    for bad in ("no-dot", "abha.", "two words.x"):
        with pytest.raises(InvalidRequest, match="dotted event name"):
            await health_client.webhook_subscriptions.create(URL + "/2", [bad], allow_unknown_events=True)
    assert fake_health_server.calls(CREATE) == 1


def test_documented_events_hold_the_library_kinds_and_the_connect_events() -> None:
    assert {k.value for k in EventKind if k is not EventKind.UNKNOWN} < DOCUMENTED_EVENTS
    assert {"appointment.created", "prescription.updated", "receipt.created", "user.delete"} < DOCUMENTED_EVENTS
    assert "unknown" not in DOCUMENTED_EVENTS


@pytest.mark.parametrize("key", ["short-key", "a key with spaces in it", "k" * 257, "clé-non-ascii-0123456"])
async def test_a_bad_signing_key_is_refused_without_showing_it(
    health_client: HealthClient, fake_health_server: FakeHealthServer, key: str
) -> None:
    with pytest.raises(InvalidRequest, match="16 to 256 printable ASCII") as info:
        await health_client.webhook_subscriptions.create(URL, ["rec.uploaded"], signing_key=key)
    assert key not in str(info.value)
    assert fake_health_server.calls(CREATE) == 0


async def test_delete_of_an_unknown_id_is_not_found(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    with pytest.raises(NotFoundError) as info:
        await health_client.webhook_subscriptions.delete("404")
    assert info.value.status == 404
    assert info.value.body == {"error": {"message": "Webhook not found", "code": "INVALID_REQUEST"}}
    assert fake_health_server.calls(DELETE) == 1


async def test_the_documented_400_not_registered_is_not_found_too(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    body = {"error": {"message": "requested webhook is not registered", "code": "INVALID_REQUEST"}}
    fake_health_server.inject(DELETE, Fault(status=400, body=body, times=1))
    with pytest.raises(NotFoundError) as info:
        await health_client.webhook_subscriptions.delete("7")
    assert (info.value.status, info.value.operation) == (400, DELETE)
    other = {"error": {"message": "bad id", "code": "INVALID_REQUEST"}}
    fake_health_server.inject(DELETE, Fault(status=400, body=other, times=1))
    with pytest.raises(ApiError) as plain:
        await health_client.webhook_subscriptions.delete("7")
    assert not isinstance(plain.value, NotFoundError)


@pytest.mark.parametrize("bad", ["", "a/b", "..", "7?x=1", "7 8"])
async def test_a_bad_id_is_refused_before_sending(
    health_client: HealthClient, fake_health_server: FakeHealthServer, bad: str
) -> None:
    with pytest.raises(InvalidRequest):
        await health_client.webhook_subscriptions.delete(bad)
    assert fake_health_server.calls(DELETE) == 0


@pytest.mark.parametrize("status", [504, None])
async def test_a_create_whose_answer_is_lost_is_outcome_unknown_and_not_repeated(
    health_client: HealthClient, fake_health_server: FakeHealthServer, status: int | None
) -> None:
    fake_health_server.webhook_subscriptions.fail_after_create(status=status)
    with pytest.raises(OutcomeUnknown) as info:
        await health_client.webhook_subscriptions.create(URL, ["rec.uploaded"], signing_key=KEY)
    assert fake_health_server.calls(CREATE) == 1
    assert KEY not in str(info.value)
    listed = await health_client.webhook_subscriptions.list()  # the documented way to find out
    assert [s.url for s in listed] == [URL]


async def test_a_delete_whose_answer_is_lost_is_outcome_unknown_and_not_repeated(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    created = await health_client.webhook_subscriptions.create(URL, ["rec.uploaded"])
    fake_health_server.inject(DELETE, Fault(status=503))
    with pytest.raises(OutcomeUnknown):
        await health_client.webhook_subscriptions.delete(created.id)
    assert fake_health_server.calls(DELETE) == 1


async def test_a_refused_create_is_a_definite_api_error(
    health_client: HealthClient, fake_health_server: FakeHealthServer
) -> None:
    await health_client.webhook_subscriptions.create(URL, ["rec.uploaded"])
    with pytest.raises(ApiError) as info:
        await health_client.webhook_subscriptions.create(URL, ["rec.pii"])
    assert not isinstance(info.value, OutcomeUnknown)
    assert info.value.status == 400
    assert info.value.body["error"]["message"] == "requested endpoint is already registered"


async def test_list_is_a_read_and_is_retried(health_client: HealthClient, fake_health_server: FakeHealthServer) -> None:
    fake_health_server.inject(LIST, Fault(status=503, times=1))
    assert await health_client.webhook_subscriptions.list() == ()
    assert fake_health_server.calls(LIST) == 2


async def test_the_signing_key_is_in_no_repr_and_no_log(
    health_client: HealthClient, fake_health_server: FakeHealthServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="health_async")
    created = await health_client.webhook_subscriptions.create(URL, ["rec.uploaded"], signing_key=KEY)
    listed = await health_client.webhook_subscriptions.list()
    assert created.signing_key == KEY and listed[0].signing_key == KEY
    for shown in (repr(created), str(created), repr(listed), repr(listed[0])):
        assert KEY not in shown and "signing_key" not in shown
    assert KEY not in caplog.text


def test_the_vendors_example_answers_are_read() -> None:
    """``webhooks.yml``'s examples: the create answer, and a listing (with an item whose audit field is broken: the
    listing is not lost to it; without an id it is)."""
    created = structure({"id": "7", "status": "success"}, WebhookSubscriptionCreated)
    assert (created.id, created.status, created.signing_key) == ("7", "success", None)
    example = {
        "id": "7",
        "event_names": ["appointment.created", "appointment.updated"],
        "endpoint": "https://example.com/webhook",
        "signing_key": "supersecretkey",
        "client_id": "testing",
        "protocol": "https",
        "created_at": "2024-10-07T13:53:52Z",
        "updated_at": "not a time",
        "created_by": "testing",
        "updated_by": "testing",
    }
    listing = structure({"data": [example, {"id": 8, "signing_key": None}], "msg": "success"}, WebhookSubscriptionList)
    first, second = listing.subscriptions
    assert first.created_at == dt.datetime(2024, 10, 7, 13, 53, 52, tzinfo=dt.UTC)
    assert first.updated_at is None
    assert first.events == ("appointment.created", "appointment.updated")
    assert (first.url, first.signed) == ("https://example.com/webhook", True)
    assert (second.id, second.signed, second.events) == ("8", False, ())
    assert structure({"data": None}, WebhookSubscriptionList).subscriptions == ()
    with pytest.raises(ResponseValidationError, match="id"):
        structure({"data": [{"endpoint": "https://example.com/webhook"}]}, WebhookSubscriptionList)
    assert isinstance(first, WebhookSubscription)


# ---------------------------------------------------------------------------------------------- the command


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHealthServer]:
    monkeypatch.delenv(webhooks_cli.ENV_WEBHOOK_SECRET, raising=False)
    with ServerThread() as srv:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", srv.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", srv.token)
        monkeypatch.setenv("HEALTH_ASYNC_CLIENT_ID", srv.client_id)
        yield srv


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["webhooks", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["subscribe", "list", "unsubscribe"])
def test_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["webhooks", command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: health-async webhooks " + command) and "--base-url" in out


def test_subscribe_prints_the_subscription_and_where_the_key_is_not_the_key(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "subscribe", URL, "--event", "abha.link_care_context,abha.hip_data_fetch")
    assert code == 0, err
    assert out == f"webhook subscription 1 created: {URL} (abha.link_care_context, abha.hip_data_fetch)\n"
    stored = server.webhook_subscriptions.subscriptions["1"]
    assert stored["event_names"] == ["abha.link_care_context", "abha.hip_data_fetch"]
    key = stored["signing_key"]
    assert key and key not in out + err
    assert "not shown" in err and "webhooks list --show-secret" in err


def test_subscribe_json_with_the_receivers_secret_and_show_secret(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(webhooks_cli.ENV_WEBHOOK_SECRET, KEY)
    code, out, err = run(capsys, "subscribe", URL, "--event", "rec.uploaded", "--event", "rec.srp", "--json")
    assert code == 0, err
    assert orjson.loads(out) == {"id": "1", "url": URL, "events": ["rec.uploaded", "rec.srp"], "status": "success"}
    assert server.webhook_subscriptions.subscriptions["1"]["signing_key"] == KEY  # what `webhooks serve` verifies
    assert KEY not in out + err and webhooks_cli.ENV_WEBHOOK_SECRET in err
    code, out, err = run(capsys, "subscribe", URL + "/2", "--event", "rec.pii", "--json", "--show-secret")
    assert code == 0, err
    assert orjson.loads(out)["signing_key"] == KEY and "not shown" not in err
    code, out, _ = run(capsys, "subscribe", URL + "/3", "--event", "rec.pii", "--show-secret")
    assert code == 0 and out.splitlines()[1] == f"signing key: {KEY}"


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (["http://hospital.example/hook", "--event", "rec.uploaded"], "plain http:// to a non-loopback host"),
        ([URL, "--event", "rec.uplaoded"], "not a documented event name"),
        ([URL, "--event", ","], "at least one event"),
    ],
)
def test_subscribe_refuses_bad_input_with_exit_2_and_sends_nothing(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], argv: list[str], rule: str
) -> None:
    code, out, err = run(capsys, "subscribe", *argv)
    assert (code, out) == (2, "")
    assert err.startswith("health-async: ") and rule in err and err.count("\n") == 1
    assert server.calls(CREATE) == 0


def test_subscribe_refuses_a_weak_receiver_secret_naming_the_variable_not_the_value(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(webhooks_cli.ENV_WEBHOOK_SECRET, "short-secret")
    code, out, err = run(capsys, "subscribe", URL, "--event", "rec.uploaded")
    assert (code, out) == (2, "")
    assert webhooks_cli.ENV_WEBHOOK_SECRET in err and "16 to 256" in err and "short-secret" not in err
    assert server.calls(CREATE) == 0


def test_subscribe_an_unknown_event_with_the_flag(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "subscribe", URL, "--event", "abha.new_thing", "--allow-unknown-event")
    assert (code, out) == (0, f"webhook subscription 1 created: {URL} (abha.new_thing)\n"), err
    assert server.webhook_subscriptions.subscriptions["1"]["event_names"] == ["abha.new_thing"]


def test_subscribe_of_unknown_outcome_exits_1_with_a_hint(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.webhook_subscriptions.fail_after_create(status=504)
    code, out, err = run(capsys, "subscribe", URL, "--event", "rec.uploaded")
    assert (code, out) == (1, "")
    assert "OutcomeUnknown" in err and "webhooks list" in err
    assert server.calls(CREATE) == 1
    key = server.webhook_subscriptions.subscriptions["1"]["signing_key"]
    assert key not in err


def test_a_service_refusal_is_exit_1(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "subscribe", URL, "--event", "rec.uploaded")[0] == 0
    code, out, err = run(capsys, "subscribe", URL, "--event", "rec.pii")  # already registered: 400
    assert (code, out) == (1, "")
    assert "HTTP 400" in err


def test_list_as_a_table_and_as_json_lines(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list")
    assert (code, out, err) == (0, "", "no webhook subscriptions\n")
    run(capsys, "subscribe", URL, "--event", "rec.uploaded,rec.srp")
    run(capsys, "subscribe", "http://127.0.0.1:8000/hook", "--event", "abha.link_care_context")
    key = server.webhook_subscriptions.subscriptions["1"]["signing_key"]

    code, out, _ = run(capsys, "list")
    assert code == 0
    header, first, second = out.splitlines()
    assert header.split() == ["id", "url", "events", "signed", "created_at"]
    assert first.split()[:4] == ["1", URL, "rec.uploaded,rec.srp", "yes"]
    assert second.split()[:4] == ["2", "http://127.0.0.1:8000/hook", "abha.link_care_context", "yes"]
    assert key not in out

    code, out, _ = run(capsys, "list", "--json")
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert code == 0 and [line["id"] for line in lines] == ["1", "2"]
    assert lines[0]["events"] == ["rec.uploaded", "rec.srp"] and lines[0]["signed"] is True
    assert "signing_key" not in lines[0] and key not in out

    code, out, _ = run(capsys, "list", "--json", "--show-secret")
    assert code == 0 and orjson.loads(out.splitlines()[0])["signing_key"] == key
    code, out, _ = run(capsys, "list", "--show-secret")
    assert code == 0 and out.splitlines()[0].split()[-1] == "signing_key" and key in out


def test_unsubscribe_and_an_unknown_id(server: FakeHealthServer, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "subscribe", URL, "--event", "rec.uploaded")
    code, out, err = run(capsys, "unsubscribe", "1")
    assert (code, out) == (0, "webhook subscription 1 deleted\n"), err
    assert server.webhook_subscriptions.subscriptions == {}
    code, out, err = run(capsys, "unsubscribe", "1")
    assert (code, out) == (1, "")
    assert "NotFoundError" in err and "webhooks list" in err
    code, out, _ = run(capsys, "unsubscribe", "1", "--json")
    line = orjson.loads(out)
    assert code == 1 and line["id"] == "1" and line["error"]["type"] == "NotFoundError"
    code, out, err = run(capsys, "unsubscribe", "a/b")
    assert (code, out) == (2, "") and "single path segment" in err
    assert server.calls(DELETE) == 3  # the bad id was never sent


def test_the_subscription_commands_need_credentials_and_serve_does_not(
    server: FakeHealthServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HEALTH_ASYNC_TOKEN")
    code, out, err = run(capsys, "list")
    assert (code, out) == (2, "") and "HEALTH_ASYNC_TOKEN" in err
    assert server.calls(LIST) == 0
    code, out, _ = run(capsys, "list", "--token", server.token)  # the connection flags reach the client
    assert code == 0 and server.calls(LIST) == 1
    code, _, err = run(capsys, "serve", "--port", "0")  # still no client: it fails for want of its own secret
    assert code == 2 and "signing secret" in err
