"""Scan & Share at the registration counter, both sides, against the fake server: the patient's share and wait
(``client.abha.scan_and_share``), the hospital's answer (``answer_profile_share``, and ``abdm_handler``'s
``on_profile_share`` on an aiohttp app on 127.0.0.1), the counter's tokens (``TokenCounter``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async.errors import ScanShareFailed, ScanShareTimeout, ShareOutcomeUnknown
from health_async.models import ProfileShare, ShareLocation, ShareStatus, ShareToken
from health_async.resources.records._polling import PollPolicy
from health_async.testing import FakeHealthServer, Fault, sign_webhook
from health_async.webhooks import TokenCounter

from ..conftest import Serve

SECRET = "scan-share-webhook-secret"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
FAST_POLL = PollPolicy(first_poll=0.02, max_poll=0.05, jitter=0)
HIP, COUNTER = "IN2910000223", "counter-3"
SHYAM, NISHA = "shyam.verma@sbx", "nisha.rao@sbx"


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        srv.scan_share.abha_addresses.update({"oid-1": SHYAM, "oid-2": NISHA})
        srv.scan_share.abha_numbers["oid-1"] = "91-1234-5678-9012"
        srv.scan_share.hip_names[HIP] = "City Hospital"
        yield srv


@pytest.fixture
async def patient(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    """The PHR app of the patient ``oid-1``."""
    async with ha.HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id="oid-1", retry=NO_WAIT
    ) as c:
        yield c


@pytest.fixture
async def hospital(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    """The facility's software (no user of its own)."""
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id, retry=NO_WAIT) as c:
        yield c


ShareCallback = Callable[[ProfileShare], Awaitable[str | int | None]]


async def counter_desk(
    serve: Serve,
    server: FakeHealthServer,
    hospital: ha.HealthClient,
    on_profile_share: ShareCallback | None,
    **kwargs: Any,
) -> webhooks.AbdmHandler:
    """The hospital's webhook receiver on 127.0.0.1, registered with the fake as where shares go."""
    handler = webhooks.abdm_handler(SECRET, client=hospital, on_profile_share=on_profile_share, **kwargs)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    server.scan_share.webhooks(url, SECRET)
    return handler


def share_of(request_id: str, address: str | None = SHYAM, **data: Any) -> ProfileShare:
    return ProfileShare(abha_address=address, hip_id=HIP, hip_code=COUNTER, request_id=request_id, **data)


def event(name: str, data: dict[str, Any]) -> webhooks.WebhookEvent:
    now = int(time.time())
    return webhooks.parse_event(
        {"service": "abdm", "event": name, "event_time": now, "transaction_id": "wh-1", "timestamp": now, "data": data}
    )


# ------------------------------------------------------------------------------------ the patient side


async def test_without_a_hospital_the_fake_counter_gives_the_token(
    server: FakeHealthServer, patient: ha.HealthClient
) -> None:
    share = await patient.abha.scan_and_share(HIP, f"  {COUNTER} ", location=(12.9716, 77.5946), poll=FAST_POLL)
    assert isinstance(share, ShareToken) and share.status is ShareStatus.SUCCESS and share.done
    assert share.token_number == "1" and share.hip_id == HIP and share.hip_name == "City Hospital"
    assert share.counter_id == COUNTER and share.show_token_screen is True
    assert share.expires_at is not None and share.expires_at.tzinfo is not None
    assert "token_number" not in repr(share) and "77.59" not in repr(ShareLocation(12.9716, 77.5946))
    sent = next(r for r in server.requests if r.route == "profile_share")
    assert sent.json is not None and sent.headers["X-Pt-Id"] == "oid-1"
    assert {k: sent.json[k] for k in ("hip_id", "counter_id")} == {"hip_id": HIP, "counter_id": COUNTER}
    assert sent.json["location"] == {"latitude": "12.9716", "longitude": "77.5946"}  # HipLocation: strings
    assert sent.json["request_id"] == share.request_id  # the client's own id, so an unknown outcome can be checked
    assert server.scan_share.shares[share.request_id].answered_by == "fake"
    again = await patient.abha.share_status(share.request_id)
    assert again.token_number == "1" and again.counter_id is None


async def test_a_repeated_scan_at_the_fake_counter_gets_the_same_token(
    server: FakeHealthServer, patient: ha.HealthClient
) -> None:
    first = await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL)
    other = await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL, user_id="oid-2")
    again = await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL)
    elsewhere = await patient.abha.scan_and_share(HIP, "counter-4", poll=FAST_POLL)
    assert (first.token_number, other.token_number, again.token_number) == ("1", "2", "1")
    assert elsewhere.token_number == "1" and first.request_id != again.request_id  # each scan is a new share
    assert server.calls("profile_share") == 4


@pytest.mark.parametrize(
    ("hip_id", "counter_id", "rule"),
    [
        ("", COUNTER, "hip_id must not be empty"),
        ("   ", COUNTER, "hip_id must not be empty"),
        (HIP, "counter 3", "counter_id must be printable ASCII without spaces"),
        (HIP, "counter\t3", "counter_id must be printable ASCII"),
        ("IN29é10000223", COUNTER, "hip_id must be printable ASCII"),
        ("I" * 129, COUNTER, "hip_id must be at most 128 characters"),
        (None, COUNTER, "hip_id must be a str"),
        (HIP, 12345, "counter_id must be a str"),
    ],
)
async def test_bad_qr_ids_are_refused_before_sending(
    server: FakeHealthServer, patient: ha.HealthClient, hip_id: Any, counter_id: Any, rule: str
) -> None:
    with pytest.raises(ha.InvalidRequest, match=rule) as info:
        await patient.abha.scan_and_share(hip_id, counter_id)
    assert server.calls("profile_share") == 0 and server.calls("profile_share_status") == 0
    assert "counter 3" not in str(info.value) and "12345" not in str(info.value)


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        ({"location": (91.0, 0.0)}, "latitude must be within"),
        ({"location": (0.0, float("nan"))}, "longitude must be a finite number"),
        ({"location": ("12.9", "77.5")}, "latitude must be a finite number"),
        ({"location": (1.0, 2.0, 3.0)}, "location must be a ShareLocation or a"),
        ({"location": (10**400, 0)}, "latitude must be a finite number"),  # too large for a float: no OverflowError
        ({"location": (0, -(10**400))}, "longitude must be a finite number"),
        ({"wait_timeout": 0}, "wait_timeout must be a positive number"),
        ({"wait_timeout": float("inf")}, "wait_timeout must be a positive number"),
        ({"wait_timeout": 10**400}, "wait_timeout must be a positive number"),
        ({"wait_timeout": None}, "wait_timeout must be"),
        ({"user_id": None}, "needs a user id"),
        ({"poll": "fast"}, "poll must be"),
    ],
)
async def test_bad_options_are_refused_before_sending(
    server: FakeHealthServer, patient: ha.HealthClient, options: dict[str, Any], rule: str
) -> None:
    with pytest.raises(ha.InvalidRequest, match=rule) as info:
        await patient.abha.scan_and_share(HIP, COUNTER, **options)
    assert server.calls("profile_share") == 0 and "10000" not in str(info.value)


@pytest.mark.parametrize(
    ("latitude", "longitude"),
    [(10**400, 0), (0, 10**400), (-(10**400), 0)],
    ids=["latitude", "longitude", "negative-latitude"],
)
def test_a_location_too_large_for_a_float_is_refused(latitude: int, longitude: int) -> None:
    with pytest.raises(ha.InvalidRequest, match="must be a finite number of degrees") as info:
        ShareLocation(latitude, longitude)
    assert "10000" not in str(info.value)


async def test_the_wait_is_bounded_by_a_typed_timeout(
    serve: Serve, server: FakeHealthServer, patient: ha.HealthClient, hospital: ha.HealthClient
) -> None:
    handler = await counter_desk(serve, server, hospital, None)  # the hospital takes the webhook, gives no token
    started = time.monotonic()
    with pytest.raises(ScanShareTimeout) as info:
        await patient.abha.scan_and_share(HIP, COUNTER, wait_timeout=0.4, poll=FAST_POLL)
    assert time.monotonic() - started < 2.0
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, ha.HealthError)
    assert info.value.last_status is ShareStatus.PROCESSING and "0.4 s" in str(info.value)
    status = await patient.abha.share_status(info.value.request_id)  # the share was made; still waiting
    assert status.status is ShareStatus.PROCESSING and status.token_number is None
    await server.scan_share.flush()
    assert server.scan_share.deliveries == [(info.value.request_id, 200)]
    await handler.aclose()


async def test_a_slow_share_counts_against_the_wait(server: FakeHealthServer, patient: ha.HealthClient) -> None:
    server.inject("profile_share", Fault(latency=0.5, times=1))
    with pytest.raises(ShareOutcomeUnknown) as info:  # the share itself ran out of the wait's time, once sent
        await patient.abha.scan_and_share(HIP, COUNTER, wait_timeout=0.2, poll=FAST_POLL)
    assert server.calls("profile_share") == 1 and server.calls("profile_share_status") == 0
    assert info.value.request_id and info.value.operation == "profile_share"


async def test_a_share_of_unknown_outcome_is_not_repeated_and_names_its_request_id(
    server: FakeHealthServer, patient: ha.HealthClient
) -> None:
    server.inject("profile_share", Fault(status=502, times=1))
    with pytest.raises(ShareOutcomeUnknown) as info:
        await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL)
    assert isinstance(info.value, ha.OutcomeUnknown) and server.calls("profile_share") == 1
    assert len(info.value.request_id) == 36 and info.value.request_id in str(info.value)
    with pytest.raises(ha.NotFoundError):  # checked: the 502 came before the fake took it, so scan again
        await patient.abha.share_status(info.value.request_id)


async def test_a_failing_poll_does_not_end_the_wait(server: FakeHealthServer, patient: ha.HealthClient) -> None:
    server.inject("profile_share_status", Fault(status=503, times=4))  # more than the client's retries
    share = await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL, wait_timeout=5)
    assert share.token_number == "1" and server.calls("profile_share_status") >= 5


async def test_a_failed_share_raises_at_once(
    serve: Serve, server: FakeHealthServer, patient: ha.HealthClient, hospital: ha.HealthClient
) -> None:
    async def refuse(event: webhooks.WebhookEvent) -> None:  # the facility refuses: the service marks it failed
        payload = event.payload()
        assert isinstance(payload, ProfileShare) and payload.request_id is not None
        server.scan_share.shares[payload.request_id].status = " failed"  # the OpenAPI's spelling

    handler = await counter_desk(serve, server, hospital, None, on_event=refuse)
    started = time.monotonic()
    with pytest.raises(ScanShareFailed) as info:
        await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL, wait_timeout=30)
    assert time.monotonic() - started < 5 and info.value.request_id in server.scan_share.shares
    await handler.aclose()


# ------------------------------------------------------------------------------------ both sides, end to end


async def test_a_scan_yields_a_token_through_the_hospitals_webhook_handler(
    serve: Serve,
    server: FakeHealthServer,
    patient: ha.HealthClient,
    hospital: ha.HealthClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    counter = TokenCounter(prefix="A-")
    seen: list[ProfileShare] = []

    async def desk(share: ProfileShare) -> str:
        seen.append(share)
        return await counter(share)

    handler = await counter_desk(serve, server, hospital, desk)
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        first = await patient.abha.scan_and_share(HIP, COUNTER, location=ShareLocation(12.97, 77.59), poll=FAST_POLL)
        second = await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL, user_id="oid-2")
        again = await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL)
        await handler.join()
    assert (first.token_number, second.token_number, again.token_number) == ("A-1", "A-2", "A-1")
    assert first.status is ShareStatus.SUCCESS and first.hip_id == HIP and first.hip_name == "City Hospital"
    assert [s.abha_address for s in seen] == [SHYAM, NISHA, SHYAM] and seen[0].hip_code == COUNTER
    assert seen[0].abha_number == "91-1234-5678-9012" and seen[0].request_id == first.request_id
    assert all(s.answered_by == "hospital" for s in server.scan_share.shares.values())
    answer = server.scan_share.answers[0]
    assert answer == {
        "request_id": first.request_id,
        "abha_address": SHYAM,
        "hip_code": COUNTER,
        "token": {"token_number": "A-1"},
    }
    sent = next(r for r in server.requests if r.route == "profile_on_share")
    assert sent.headers["X-Hip-Id"] == HIP  # the share's facility, as the hospital's client sets none
    assert len(server.scan_share.answers) == 3 and counter.issued(COUNTER, hip_id=HIP) == 2
    assert "ABDM profile share answered with a token" in caplog.text
    for secret in ("shyam", "nisha", "9012", "A-1", "A-2", "12.97"):
        assert secret not in caplog.text
    await handler.aclose()


async def test_a_redelivered_share_is_not_answered_twice(
    serve: Serve,
    server: FakeHealthServer,
    patient: ha.HealthClient,
    hospital: ha.HealthClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked = 0

    async def desk(share: ProfileShare) -> int:
        nonlocal asked
        asked += 1
        return 7

    handler = await counter_desk(serve, server, hospital, desk)
    share = await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL)
    assert share.token_number == "7"  # an int token is sent as its digits
    with caplog.at_level(logging.WARNING, logger="health_async"):
        assert await server.scan_share.send_again(share.request_id) == 200  # re-signed, a new transaction id
        await handler.join()
    assert asked == 1 and len(server.scan_share.answers) == 1 and server.calls("profile_on_share") == 1
    assert "redelivered" in caplog.text
    await handler.aclose()


async def test_a_failed_callback_answers_nothing_and_a_redelivery_tries_again(
    serve: Serve, server: FakeHealthServer, patient: ha.HealthClient, hospital: ha.HealthClient
) -> None:
    counter = TokenCounter()
    calls = 0
    failed = asyncio.Event()

    async def flaky(share: ProfileShare) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            failed.set()
            raise RuntimeError("the HMIS database is down")
        return await counter(share)

    handler = await counter_desk(serve, server, hospital, flaky)
    waiting = asyncio.create_task(patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL, wait_timeout=10))
    await asyncio.wait_for(failed.wait(), 5)
    await handler.join()
    assert server.calls("profile_on_share") == 0 and not waiting.done()
    (request_id,) = server.scan_share.shares
    assert await server.scan_share.send_again(request_id) == 200
    share = await asyncio.wait_for(waiting, 10)
    assert share.token_number == "1" and calls == 2 and len(server.scan_share.answers) == 1
    await handler.aclose()


async def test_a_callback_without_a_token_answers_nothing(
    serve: Serve, server: FakeHealthServer, patient: ha.HealthClient, hospital: ha.HealthClient
) -> None:
    async def none(share: ProfileShare) -> None:
        return None

    handler = await counter_desk(serve, server, hospital, none)
    with pytest.raises(ScanShareTimeout):
        await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL, wait_timeout=0.3)
    await handler.join()
    assert server.calls("profile_on_share") == 0
    await handler.aclose()


async def test_the_asgi_receiver_answers_shares_too(
    server: FakeHealthServer, patient: ha.HealthClient, hospital: ha.HealthClient
) -> None:
    app = webhooks.abdm_asgi(SECRET, client=hospital, on_profile_share=TokenCounter(prefix="B-"))
    waiting = await _shared(server, patient)
    data = {"abha_address": SHYAM, "hip_id": HIP, "hip_code": COUNTER, "req_id": waiting.request_id}
    now = int(time.time())
    raw = json.dumps({"service": "abdm", "event": "abha.hip_profile_share", "event_time": now,
                      "transaction_id": "t-1", "timestamp": now, "data": data}).encode()  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"eka-webhook-signature", sign_webhook(raw, SECRET).encode())],
    }
    await app(scope, receive, send)
    assert sent[0]["status"] == 200
    await app.join()
    assert server.scan_share.shares[waiting.request_id].token_number == "B-1"
    with pytest.raises(ha.InvalidRequest, match="on_profile_share"):
        webhooks.abdm_asgi(SECRET, client=hospital, on_profile_share="not a function")  # type: ignore[arg-type]
    await app.aclose()


async def _shared(server: FakeHealthServer, patient: ha.HealthClient) -> ShareToken:
    """A share left waiting for the hospital (the URL registered answers nothing: no one listens there)."""
    server.scan_share.webhooks("http://127.0.0.1:9/nowhere", SECRET)
    with pytest.raises(ScanShareTimeout) as info:
        await patient.abha.scan_and_share(HIP, COUNTER, poll=FAST_POLL, wait_timeout=0.2)
    await server.scan_share.flush()
    server.scan_share.webhooks(None)
    return await patient.abha.share_status(info.value.request_id)


# ------------------------------------------------------------------------------------ the hospital side by hand


async def test_answering_by_hand_with_an_expiry(
    server: FakeHealthServer, patient: ha.HealthClient, hospital: ha.HealthClient
) -> None:
    waiting = await _shared(server, patient)
    expires = dt.datetime(2030, 1, 2, 18, 0, tzinfo=dt.UTC)
    payload = {"abha_address": SHYAM.upper(), "hip_id": HIP, "hip_code": COUNTER, "req_id": waiting.request_id}
    await hospital.abha.answer_profile_share(
        event("abha.hip_profile_share", payload), token_number=" 42 ", expires_at=expires
    )
    answer = server.scan_share.answers[-1]
    assert answer["token"] == {"token_number": "42", "expires_at": int(expires.timestamp())}
    done = await patient.abha.share_status(waiting.request_id, hip_id=HIP, counter_id=COUNTER)
    assert done.token_number == "42" and done.expires_at == expires and done.counter_id == COUNTER
    with pytest.raises(ha.ApiError) as refused:  # the service's word: already answered
        await hospital.abha.answer_profile_share(share_of(waiting.request_id), token_number="43")
    assert refused.value.status == 409


@pytest.mark.parametrize(
    ("answered", "options", "rule"),
    [
        (event("abha.link_care_context", {"req_id": "r-1"}), {}, r"event must be an abha\.hip_profile_share event"),
        (share_of("r-1"), {"token_number": ""}, "token_number must not be empty"),
        (share_of("r-1"), {"token_number": "A\n1"}, "token_number must not contain control characters"),
        (share_of("r-1"), {"token_number": "9" * 65}, "token_number must be at most 64"),
        (share_of("r-1"), {"token_number": -1}, "token_number must not be negative"),
        (share_of("r-1"), {"token_number": 10**64}, "token_number must be at most 64 digits"),
        (share_of("r-1"), {"token_number": 10**5000}, "token_number must be at most 64 digits"),  # past str()'s limit
        (share_of("r-1"), {"token_number": True}, "token_number must be a str or an int"),
        (share_of("r-1"), {"expires_at": dt.datetime(2030, 1, 1)}, "expires_at must be a timezone-aware"),
        (share_of(""), {}, "no request id"),
        (share_of("r-1", address=None), {}, "no ABHA address"),
    ],
)
async def test_a_bad_answer_is_refused_before_sending(
    server: FakeHealthServer, hospital: ha.HealthClient, answered: Any, options: dict[str, Any], rule: str
) -> None:
    with pytest.raises(ha.InvalidRequest, match=rule) as info:
        await hospital.abha.answer_profile_share(answered, **{"token_number": "A-1", **options})
    assert server.calls("profile_on_share") == 0 and "shyam" not in str(info.value) and "0000" not in str(info.value)


# ------------------------------------------------------------------------------------ TokenCounter


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2025, 7, 25, 3, 0, tzinfo=dt.UTC)  # 08:30 in India

    def __call__(self) -> dt.datetime:
        return self.now


def test_tokens_go_in_arrival_order_one_per_person_per_counter_per_day() -> None:
    clock = Clock()
    counter = TokenCounter(prefix="A-", clock=clock)
    assert counter.token_for(share_of("r-1", SHYAM)) == "A-1"
    assert counter.token_for(share_of("r-2", NISHA)) == "A-2"
    assert counter.token_for(share_of("r-3", " Shyam.Verma@SBX ")) == "A-1"  # the same address, any case
    assert counter.token_for(share_of("r-4", "shyam.alt@sbx", abha_number="91-1234-5678-9012")) == "A-3"
    assert counter.token_for(share_of("r-5", "shyam.other@sbx", abha_number="91123456789012")) == "A-3"  # number
    assert counter.token_for(share_of("r-2", None)) == "A-2"  # the same share delivered again
    assert counter.token_for(share_of("r-6", None)) == "A-4"  # nobody to recognise: a new token
    other = ProfileShare(abha_address=SHYAM, hip_id=HIP, hip_code="counter-4", request_id="r-7")
    assert counter.token_for(other) == "A-1"  # another counter counts on its own
    assert counter.issued(COUNTER, hip_id=HIP) == 4 and counter.issued("counter-4", hip_id=HIP) == 1
    clock.now = dt.datetime(2025, 7, 25, 18, 29, tzinfo=dt.UTC)  # 23:59 in India: still the same day
    assert counter.token_for(share_of("r-8", SHYAM)) == "A-1"
    clock.now = dt.datetime(2025, 7, 25, 18, 31, tzinfo=dt.UTC)  # 00:01 the next day in India
    assert counter.token_for(share_of("r-9", NISHA)) == "A-1" and counter.issued(COUNTER, hip_id=HIP) == 1
    assert "shyam" not in repr(counter) and "A-1" not in repr(counter)


async def test_token_counter_is_a_callback_and_checks_its_settings() -> None:
    counter = TokenCounter(first=100, tz=dt.UTC)
    assert await counter(share_of("r-1")) == "100" and await counter(share_of("r-2", NISHA)) == "101"
    for bad, rule in (
        ({"prefix": "A\n"}, "prefix"),
        ({"prefix": 5}, "prefix"),
        ({"first": -1}, "first"),
        ({"first": True}, "first"),
        ({"tz": "IST"}, "tz"),
        ({"clock": 5}, "clock"),
    ):
        with pytest.raises(ha.InvalidRequest, match=rule):
            TokenCounter(**bad)
    with pytest.raises(ha.InvalidRequest, match="ProfileShare"):
        counter.token_for({"abha_address": SHYAM})  # type: ignore[arg-type]
    naive = TokenCounter(clock=lambda: dt.datetime(2025, 1, 1))
    with pytest.raises(ha.InvalidRequest, match="timezone-aware"):
        naive.token_for(share_of("r-1"))
