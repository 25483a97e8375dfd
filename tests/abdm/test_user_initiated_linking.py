"""A patient's own search (user-initiated linking, issue 39): the fake plays the PHR app
(``server.abdm.patient_discovers``), the hospital answers through ``webhooks.abdm_handler`` (aiohttp) or
``webhooks.abdm_asgi`` with ``on_discover`` / ``on_link_otp`` / ``on_linked``, or by hand with
``client.abdm.answer_*``; every answer reaches its vendor operation with the vendor's body."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import health_async as ha
from health_async import webhooks
from health_async.errors import InvalidRequest, OutcomeUnknown
from health_async.models import (
    CareContext,
    CareContextDiscover,
    DiscoverLinkInit,
    HiType,
    LinkingError,
    MatchedPatient,
)
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.webhooks._send import sign

from ..conftest import Serve

SECRET = "user-linking-secret"
HIP = "IN2910000101"
ADDRESS = "meera.k@sbx"
MOBILE = "9812345678"
NAME = "Meera Krishnan"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
WRONG = "abcdef"  # never a right OTP: the library's are digits


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id, retry=NO_WAIT) as c:
        yield c


VISITS = (
    CareContext("OPD-2024-17", "OP visit, 3 March 2024", HiType.OP_CONSULTATION),
    CareContext("LAB-88", "Lipid profile", HiType.DIAGNOSTIC_REPORT),
    CareContext("OPD-2024-31", "OP visit, 9 May 2024", HiType.OP_CONSULTATION),
)


class Hospital:
    """The hospital's callbacks: its records, its SMS sender (the fake's phone) and what it was told."""

    def __init__(self, server: FakeHealthServer, patient: MatchedPatient | None) -> None:
        self.server, self.patient = server, patient
        self.searches: list[CareContextDiscover] = []
        self.sent: list[tuple[str, str]] = []
        self.linked: list[webhooks.PendingLink] = []
        self.after_send: Callable[[], None] = lambda: None

    async def on_discover(self, request: CareContextDiscover) -> MatchedPatient | None:
        self.searches.append(request)
        return self.patient

    async def on_link_otp(self, mobile: str, otp: str, request: DiscoverLinkInit) -> None:
        assert isinstance(request, DiscoverLinkInit)
        self.sent.append((mobile, otp))
        self.server.abdm.text(mobile, otp)
        self.after_send()

    async def on_linked(self, link: webhooks.PendingLink) -> None:
        self.linked.append(link)


def meera(*visits: CareContext, mobile: str | None = None) -> MatchedPatient:
    return MatchedPatient("PT-1042", NAME, visits or VISITS, mobile=mobile)


async def aiohttp_receiver(serve: Serve, client: ha.HealthClient, hospital: Hospital, **kwargs: Any) -> str:
    handler = webhooks.abdm_handler(
        SECRET,
        client=client,
        on_discover=hospital.on_discover,
        on_link_otp=hospital.on_link_otp,
        on_linked=hospital.on_linked,
        **kwargs,
    )
    return f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"


def asgi_bridge(app: webhooks.AbdmAsgiApp) -> Callable[[web.Request], Any]:
    """An aiohttp route that hands each request to an ASGI app (the test's stand-in for an ASGI server)."""

    async def route(request: web.Request) -> web.Response:
        body = await request.read()
        headers = [(k.lower().encode(), v.encode()) for k, v in request.headers.items()]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "method": request.method, "path": request.path,
                 "headers": headers, "query_string": b""}  # fmt: skip
        sent: list[dict[str, Any]] = []
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return web.Response(status=sent[0]["status"], body=sent[1]["body"])

    return route


async def start(serve: Serve, server: FakeHealthServer, client: ha.HealthClient, hospital: Hospital, **kw: Any) -> None:
    server.abdm.webhooks(await aiohttp_receiver(serve, client, hospital, **kw), SECRET)


# ------------------------------------------------------------------------------------------------ end to end


async def test_a_patient_discovers_and_links_with_the_right_otp_through_the_aiohttp_handler(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    hospital = Hospital(server, meera())
    await start(serve, server, client, hospital)
    search = await server.abdm.patient_discovers(HIP, abha_address=ADDRESS, name=NAME, mobile=MOBILE, oid="oid-9")

    # the search reached on_discover, typed, with the verified details
    (asked,) = hospital.searches
    assert (asked.abha_address, asked.patient_name, asked.identifier("MOBILE"), asked.hip_id) == (
        ADDRESS, NAME, MOBILE, HIP,
    )  # fmt: skip
    # on-discover: the vendor's body, one patients item per HI type
    assert search.discover == {
        "request_id": search.discover["request_id"] if search.discover else None,
        "txn_id": search.txn_id,
        "patients": [
            {"ref_num": "PT-1042", "display": NAME, "hi_type": "OPConsultation", "care_contexts": [
                {"ref_num": "OPD-2024-17", "display": "OP visit, 3 March 2024"},
                {"ref_num": "OPD-2024-31", "display": "OP visit, 9 May 2024"}]},
            {"ref_num": "PT-1042", "display": NAME, "hi_type": "DiagnosticReport", "care_contexts": [
                {"ref_num": "LAB-88", "display": "Lipid profile"}]},
        ],
    }  # fmt: skip
    # on-init: the OTP went to the discovery's verified mobile, six digits, and its expiry is said
    ((mobile, otp),) = hospital.sent
    assert mobile == MOBILE and len(otp) == 6 and otp.isdigit()
    # the link reference is this link request's own: fresh and unguessable, not the patient's reference
    assert search.link_init is not None and len(search.link_init["ref_num"]) >= 22
    assert search.link_init["ref_num"] != "PT-1042"
    assert set(search.link_init) == {"request_id", "txn_id", "ref_num", "otp_expiry"}
    expiry = dt.datetime.fromisoformat(search.link_init["otp_expiry"].replace("Z", "+00:00"))
    assert dt.timedelta(minutes=9) < expiry - dt.datetime.now(dt.UTC) <= dt.timedelta(minutes=10)
    # on-confirm: the care contexts linked; on_linked told the hospital the verified ABHA address
    (confirm,) = search.confirms
    assert "error" not in confirm and sorted(search.linked) == ["LAB-88", "OPD-2024-17", "OPD-2024-31"]
    (link,) = hospital.linked
    assert (link.abha_address, link.reference, link.hip_id, link.oid) == (ADDRESS, "PT-1042", HIP, "oid-9")
    assert [cc.care_context_id for cc in link.care_contexts] == ["OPD-2024-17", "OPD-2024-31", "LAB-88"]  # as asked
    # each answer reached its vendor operation once, for the facility searched
    for route in ("on_discover", "discover_link_on_init", "discover_link_on_confirm"):
        assert server.calls(route) == 1
    answers = [r for r in server.requests if r.route.startswith(("on_discover", "discover_link_on"))]
    assert {r.headers.get("X-Hip-Id") for r in answers} == {HIP}
    assert {r.headers.get("X-Pt-Id") for r in answers} == {"oid-9"}
    # and the fake now lists them as linked
    linked = await client.abdm.linked_care_contexts(HIP, oid="oid-9")
    assert sorted(c.care_context_id or "" for c in linked) == ["LAB-88", "OPD-2024-17", "OPD-2024-31"]


async def test_the_same_flow_through_the_asgi_app_and_only_what_the_patient_chose(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    hospital = Hospital(server, meera())
    app = webhooks.abdm_asgi(
        SECRET, client=client, on_discover=hospital.on_discover, on_link_otp=hospital.on_link_otp,
        on_linked=hospital.on_linked,
    )  # fmt: skip
    server.abdm.webhooks(f"{await serve({('POST', '/abdm'): asgi_bridge(app)})}/abdm", SECRET)
    search = await server.abdm.patient_discovers(HIP, abha_address=ADDRESS, mobile=MOBILE, link=["LAB-88"])
    assert search.errors == [] and search.linked == ("LAB-88",)
    assert [cc.care_context_id for cc in hospital.linked[0].care_contexts] == ["LAB-88"]
    await app.aclose()


async def test_a_wrong_otp_is_refused_and_the_right_one_still_links(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    hospital = Hospital(server, meera())
    await start(serve, server, client, hospital)
    search = await server.abdm.patient_discovers(HIP, abha_address=ADDRESS, mobile=MOBILE, otp=[WRONG, None])
    assert search.errors == [LinkingError.OTP_MISMATCH]
    assert search.confirms[0]["error"] == {"code": 1035, "message": "OTP does not matched"}
    assert "patients" not in search.confirms[0] and search.confirms[1]["patients"]
    assert len(hospital.linked) == 1


async def test_wrong_tries_are_bounded_then_even_the_right_otp_is_refused(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    hospital = Hospital(server, meera())
    await start(serve, server, client, hospital, max_otp_tries=2)
    search = await server.abdm.patient_discovers(HIP, mobile=MOBILE, otp=[WRONG, "zzzzzz", None])
    assert search.errors == [LinkingError.OTP_MISMATCH, LinkingError.TOO_MANY_ATTEMPTS, LinkingError.INVALID_LINK]
    assert search.linked == () and hospital.linked == []


async def test_an_expired_otp_is_refused(serve: Serve, server: FakeHealthServer, client: ha.HealthClient) -> None:
    now = [1000.0]
    store = webhooks.InMemoryLinkOtpStore(clock=lambda: now[0])
    hospital = Hospital(server, meera())

    def later() -> None:  # the patient types the OTP 10 minutes and 1 second after it was sent
        now[0] += 601

    hospital.after_send = later
    await start(serve, server, client, hospital, link_store=store, otp_ttl=600)
    search = await server.abdm.patient_discovers(HIP, mobile=MOBILE)
    assert search.errors == [LinkingError.INVALID_LINK] and hospital.linked == []
    assert len(store) == 1  # the discovery's offer only: the expired link was dropped when met


async def test_no_match_is_answered_with_abdms_error_and_nothing_more_is_asked(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    hospital = Hospital(server, None)  # none, or several patients: ABDM asks not to guess
    await start(serve, server, client, hospital)
    search = await server.abdm.patient_discovers(HIP, mobile=MOBILE)
    assert search.discover is not None and "patients" not in search.discover
    assert search.discover["error"] == {"code": 1012, "message": "No records found against the ABHA Address"}
    assert search.link_init is None and hospital.sent == []
    # a patient with nothing left to link is no match too
    hospital.patient = MatchedPatient("PT-1042", NAME, ())
    assert (await server.abdm.patient_discovers(HIP)).errors == [LinkingError.NO_MATCH]


async def test_a_link_request_for_what_was_not_offered_is_refused_without_an_otp(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    hospital = Hospital(server, meera())
    await start(serve, server, client, hospital)
    search = await server.abdm.patient_discovers(HIP, mobile=MOBILE, link=["SOMEONE-ELSES"])
    assert search.link_init is not None and search.link_init["error"]["code"] == LinkingError.NOT_OFFERED
    assert hospital.sent == [] and search.confirms == []


async def test_a_failing_sms_sender_refuses_the_link_and_keeps_no_otp(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    store = webhooks.InMemoryLinkOtpStore()
    hospital = Hospital(server, meera(mobile="9000000001"))  # the number on the hospital's file wins

    def gateway_down() -> None:
        raise ConnectionError("sms gateway down")

    hospital.after_send = gateway_down
    await start(serve, server, client, hospital, link_store=store)
    search = await server.abdm.patient_discovers(HIP, mobile=MOBILE)
    assert search.errors == [LinkingError.OTP_NOT_SENT]
    assert hospital.sent[0][0] == "9000000001" and len(store) == 1  # the offer; no pending OTP


async def test_no_otp_mobile_address_name_or_transaction_in_logs_or_reprs(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hospital = Hospital(server, meera())
    store = webhooks.InMemoryLinkOtpStore()
    await start(serve, server, client, hospital, link_store=store)
    search = await server.abdm.patient_discovers(HIP, abha_address=ADDRESS, name=NAME, mobile=MOBILE, otp=[WRONG, None])
    assert search.linked
    ((_, otp),) = hospital.sent
    text = caplog.text + repr(hospital.linked[0]) + repr(meera()) + repr(hospital.searches[0]) + repr(store)
    assert "answered" in caplog.text  # the steps are logged...
    for secret in (otp, MOBILE, ADDRESS, NAME, "Meera", search.txn_id, "PT-1042", "OP visit"):
        assert secret not in text  # ...without any of these


# ------------------------------------------------------------------------------------------------ by hand


async def test_the_answers_by_hand_are_checked_before_sending_and_sent_once(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    seen: list[webhooks.WebhookEvent] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        seen.append(event)
        if event.kind is webhooks.EventKind.CARE_CONTEXT_DISCOVER:
            with pytest.raises(InvalidRequest, match=r"patient\.care_contexts\[0\]\.hi_type"):
                await client.abdm.answer_discover(event, meera(CareContext("x", "y", "Unknown")))
            with pytest.raises(InvalidRequest, match=r"abha\.care_context_discover_link_init"):
                await client.abdm.answer_link_init(event, error=LinkingError.NO_MATCH)
            assert server.calls("on_discover") == 0  # nothing sent
            server.inject("on_discover", Fault(status=503, times=1))
            with pytest.raises(OutcomeUnknown):
                await client.abdm.answer_discover(event, meera())
            assert server.calls("on_discover") == 1  # not repeated, whatever the retry policy
            await client.abdm.answer_discover(event.payload(), meera(VISITS[1]))  # type: ignore[arg-type]
        elif event.kind is webhooks.EventKind.DISCOVER_LINK_INIT:
            with pytest.raises(InvalidRequest, match="reference= and otp_expires_at="):
                await client.abdm.answer_link_init(event)
            with pytest.raises(InvalidRequest, match="otp_expires_at"):
                await client.abdm.answer_link_init(event, reference="PT-1042", otp_expires_at=dt.datetime(2030, 1, 1))
            await client.abdm.answer_link_init(
                event, reference="PT-1042", otp_expires_at=dt.datetime(2030, 1, 1, 5, 30, tzinfo=dt.UTC)
            )
        elif event.kind is webhooks.EventKind.DISCOVER_LINK_CONFIRM:
            await client.abdm.answer_link_confirm(event, None, error=LinkingError.TOO_MANY_ATTEMPTS)

    url = await serve({("POST", "/abdm"): webhooks.aiohttp_handler(SECRET, on_event)})
    server.abdm.webhooks(f"{url}/abdm", SECRET)
    search = await server.abdm.patient_discovers(HIP, otp="123456")
    assert [e.kind.value for e in seen] == [
        "abha.care_context_discover", "abha.care_context_discover_link_init", "abha.context_discover_link_confirm",
    ]  # fmt: skip
    assert search.link_init is not None and search.link_init["otp_expiry"] == "2030-01-01T05:30:00.000Z"
    assert search.errors == [LinkingError.TOO_MANY_ATTEMPTS]
    assert search.confirms[0]["error"]["message"].startswith("You have requested multiple OTPs")


async def test_an_answer_the_fake_did_not_ask_for_is_refused(server: FakeHealthServer, client: ha.HealthClient) -> None:
    request = CareContextDiscover(request_id="not-sent", txn_id="t-1", hip_id=HIP)
    with pytest.raises(ha.ApiError) as info:
        await client.abdm.answer_discover(request, meera())
    assert info.value.status == 400 and server.abdm.answers["on_discover"][0]["patients"]


async def test_handler_arguments_are_checked(client: ha.HealthClient) -> None:
    hospital = Hospital.__new__(Hospital)
    with pytest.raises(InvalidRequest, match="both on_discover and on_link_otp"):
        webhooks.abdm_handler(SECRET, client=client, on_discover=hospital.on_discover)
    with pytest.raises(InvalidRequest, match="max_otp_tries"):
        webhooks.abdm_asgi(SECRET, client=client, on_discover=hospital.on_discover,
                           on_link_otp=hospital.on_link_otp, max_otp_tries=0)  # fmt: skip
    with pytest.raises(InvalidRequest, match="otp_ttl"):
        webhooks.abdm_handler(SECRET, client=client, on_discover=hospital.on_discover,
                              on_link_otp=hospital.on_link_otp, otp_ttl=float("nan"))  # fmt: skip
    with pytest.raises(InvalidRequest, match="link_store"):
        webhooks.abdm_handler(SECRET, client=client, on_discover=hospital.on_discover,
                              on_link_otp=hospital.on_link_otp, link_store=object())  # type: ignore[arg-type]  # fmt: skip


# ------------------------------------------------------------------------------------------------ the store


async def test_the_store_keeps_a_hash_uses_an_otp_once_and_is_bounded() -> None:
    store = webhooks.InMemoryLinkOtpStore(max_entries=2)
    link = webhooks.PendingLink("HIP-1", "PT-1", NAME, VISITS, mobile=MOBILE, abha_address=ADDRESS)
    otp = webhooks.new_otp()
    await store.put("k", link, otp=otp, ttl=60)
    assert otp.encode() not in repr(vars(store)).encode() and otp not in repr(store._entries)  # only the HMAC
    assert await store.get("k") == link
    first = await store.consume("k", otp, max_tries=3)
    assert first.outcome is webhooks.OtpOutcome.MATCHED and first.link == link
    assert (await store.consume("k", otp, max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN  # one use
    for key in ("a", "b", "c"):
        await store.put(key, link, otp=None, ttl=60)
    assert len(store) == 2 and await store.get("a") is None  # the oldest made room
    assert (await store.consume("b", "123456", max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN  # no OTP kept
    assert isinstance(store, webhooks.LinkOtpStore)


def test_otps_are_six_digits_from_secrets() -> None:
    otps = {webhooks.new_otp() for _ in range(200)}
    assert all(len(o) == 6 and o.isdigit() for o in otps) and len(otps) > 150


# ------------------------------------------------------------------------------------------------ onboarding


async def test_onboard_a_facility_and_list_the_providers_a_user_linked_with(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    facility = await client.abdm.onboard_facility(HIP, "Apollo Clinic Koramangala", clinic_id="c-1")
    assert (facility.hip_id, facility.hip_name, facility.hip_code) == (HIP, "Apollo Clinic Koramangala", "HC-1")
    assert server.requests[-1].json == {"hip_id": HIP, "name": "Apollo Clinic Koramangala", "clinic_id": "c-1"}
    with pytest.raises(InvalidRequest, match="name"):
        await client.abdm.onboard_facility(HIP, "two\nlines")
    assert await client.abdm.linked_providers(oid="oid-9") == ()
    hospital = Hospital(server, meera())
    await start(serve, server, client, hospital)
    await server.abdm.patient_discovers(HIP, oid="oid-9")
    (provider,) = await client.abdm.linked_providers(oid="oid-9")
    assert (provider.hip_id, provider.hip_name) == (HIP, "Apollo Clinic Koramangala")


async def test_a_redelivered_step_is_answered_once_and_a_failed_one_runs_again(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    gate = asyncio.Event()
    calls: list[str | None] = []

    async def on_discover(request: CareContextDiscover) -> MatchedPatient | None:
        calls.append(request.request_id)
        await gate.wait()
        if len(calls) == 1:
            raise RuntimeError("the hospital's database is down")
        return None

    hospital = Hospital(server, None)
    handler = webhooks.abdm_handler(SECRET, client=client, on_discover=on_discover, on_link_otp=hospital.on_link_otp)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    data = {"request_id": "r-1", "txn_id": "t-1", "hip_id": HIP, "abha_address": ADDRESS}

    async def deliver(envelope_id: str) -> int:
        now = int(time.time())
        body = json.dumps({"service": "abdm", "event": "abha.care_context_discover", "transaction_id": envelope_id,
                           "timestamp": now, "event_time": now, "data": data}).encode()  # fmt: skip
        async with (
            aiohttp.ClientSession() as http,
            http.post(url, data=body, headers={webhooks.SIGNATURE_HEADER: sign(body, SECRET)}) as answer,
        ):
            return answer.status

    # the same step re-signed, while the first runs: retry later (issue 42: the first may yet fail, as here)
    assert await deliver("wh-1") == 200 and await deliver("wh-2") == 503
    gate.set()
    await handler.join()
    assert calls == ["r-1"]  # the redelivery did not run while the first ran
    assert await deliver("wh-3") == 200  # the first failed before answering: forgotten, so this one runs
    await handler.join()
    assert calls == ["r-1", "r-1"] and server.calls("on_discover") == 1  # answered (no match) once
    await handler.aclose()
