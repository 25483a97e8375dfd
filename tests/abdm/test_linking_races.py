"""A patient's own search when two ABHA users discover the same hospital patient (issue 42): a family sharing the
mobile number on file. Each link request is bound to its requester (a link reference of its own), the wrong OTPs
are bounded per discovery, and a request forgets only what it put. Every race runs through both receivers, the
aiohttp handler (``webhooks.abdm_handler``) and the ASGI app (``webhooks.abdm_asgi``), with the fake playing both
PHR apps (``server.abdm.patient_discovers``)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import DiscoverLinkInit, LinkingError
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hospital import PatientSearch

from ..conftest import Serve
from .test_user_initiated_linking import HIP, MOBILE, SECRET, WRONG, Hospital, asgi_bridge, meera

ANITA = "anita.k@sbx"  # the first requester
BALA = "bala.k@sbx"  # the second: same family, same mobile on the hospital's file, same hospital patient

Start = Callable[..., Awaitable[webhooks.AbdmHandler | webhooks.AbdmAsgiApp]]


class Family(Hospital):
    """The hospital's callbacks, whose SMS sender can be held (or made to fail) per requester's ABHA address."""

    def __init__(self, server: FakeHealthServer) -> None:
        super().__init__(server, meera())
        #: Set when the sender is called for an address.
        self.sending: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        #: What the sender awaits, per address, after texting (before the OTP counts as sent).
        self.hold: dict[str, Callable[[], Awaitable[object]]] = {}
        #: Addresses whose SMS fails (late: after the hold).
        self.fail: set[str] = set()

    async def on_link_otp(self, mobile: str, otp: str, request: DiscoverLinkInit) -> None:
        address = request.abha_address or ""
        self.sending[address].set()
        if address not in self.fail:
            self.sent.append((mobile, otp))
            self.server.abdm.text(mobile, otp)
        wait = self.hold.get(address)
        if wait is not None:
            await wait()
        if address in self.fail:
            raise ConnectionError("sms gateway down")


@pytest.fixture(params=["aiohttp", "asgi"])
async def start(
    request: pytest.FixtureRequest, serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> AsyncIterator[Start]:
    """Register the hospital's receiver (the aiohttp handler or the ASGI app) with the fake; closed at the end."""
    receivers: list[webhooks.AbdmHandler | webhooks.AbdmAsgiApp] = []

    async def start(hospital: Hospital, **kwargs: Any) -> webhooks.AbdmHandler | webhooks.AbdmAsgiApp:
        if request.param == "aiohttp":
            handler = webhooks.abdm_handler(
                SECRET, client=client, on_discover=hospital.on_discover, on_link_otp=hospital.on_link_otp,
                on_linked=hospital.on_linked, **kwargs,
            )  # fmt: skip
            receiver: webhooks.AbdmHandler | webhooks.AbdmAsgiApp = handler
            url = await serve({("POST", "/abdm"): handler.handle})
        else:
            app = webhooks.abdm_asgi(
                SECRET, client=client, on_discover=hospital.on_discover, on_link_otp=hospital.on_link_otp,
                on_linked=hospital.on_linked, **kwargs,
            )  # fmt: skip
            receiver = app
            url = await serve({("POST", "/abdm"): asgi_bridge(app)})
        server.abdm.webhooks(f"{url}/abdm", SECRET)
        receivers.append(receiver)
        return receiver

    yield start
    for receiver in receivers:
        await receiver.aclose()


async def discovers(server: FakeHealthServer, address: str, **kwargs: Any) -> PatientSearch:
    return await server.abdm.patient_discovers(HIP, abha_address=address, mobile=MOBILE, oid=f"oid-{address}", **kwargs)


async def test_a_confirmation_with_the_other_requesters_otp_is_refused_and_never_links_their_address(
    start: Start, server: FakeHealthServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    hospital = Family(server)
    store = webhooks.InMemoryLinkOtpStore()
    anita_confirmed = asyncio.Event()
    hospital.hold[ANITA] = hospital.sending[BALA].wait  # Anita's OTP counts as sent once Bala asked too
    hospital.hold[BALA] = anita_confirmed.wait  # Bala's once Anita typed the latest SMS: Bala's OTP
    receiver = await start(hospital, link_store=store)

    first = asyncio.create_task(discovers(server, ANITA))
    await hospital.sending[ANITA].wait()  # Anita's link request is pending: now Bala asks for the same patient
    second = asyncio.create_task(discovers(server, BALA))
    anita = await first
    anita_confirmed.set()
    bala = await second
    await receiver.join()  # on_linked runs after the answer

    (anita_otp, bala_otp) = (otp for _, otp in hospital.sent)
    assert anita.link_init is not None and bala.link_init is not None
    # Anita typed the latest SMS (Bala's OTP): refused, nothing linked for her
    assert anita.errors == [LinkingError.OTP_MISMATCH] and anita.linked == ()
    # Bala's own OTP links Bala's request, with Bala's address
    assert bala.errors == [] and bala.linked
    assert [(link.abha_address, link.oid) for link in hospital.linked] == [(BALA, f"oid-{BALA}")]
    assert anita.link_init["ref_num"] != bala.link_init["ref_num"]  # each link request has a reference of its own
    # Anita, asking again under her discovery, links with her own address (one wrong try spent of three)
    again = await server.abdm.patient_links(anita)
    await receiver.join()
    assert again.errors == [] and again.linked
    assert [link.abha_address for link in hospital.linked] == [BALA, ANITA]

    # nothing of the requesters in the logs or reprs: OTPs, mobile, addresses, references, transactions
    text = caplog.text + repr(hospital.linked) + repr(store) + repr(await store.get("nothing"))
    assert "answered" in caplog.text
    secrets = (anita_otp, bala_otp, MOBILE, ANITA, BALA, anita.link_init["ref_num"], bala.link_init["ref_num"])
    for secret in (*secrets, anita.txn_id, bala.txn_id, "PT-1042"):
        assert secret not in text


async def test_one_requesters_wrong_otps_do_not_lock_the_other(start: Start, server: FakeHealthServer) -> None:
    hospital = Family(server)
    anita_done = asyncio.Event()
    hospital.hold[ANITA] = hospital.sending[BALA].wait
    hospital.hold[BALA] = anita_done.wait
    receiver = await start(hospital, max_otp_tries=2)

    first = asyncio.create_task(discovers(server, ANITA, otp=[WRONG, WRONG]))
    await hospital.sending[ANITA].wait()
    second = asyncio.create_task(discovers(server, BALA))
    anita = await first
    anita_done.set()
    bala = await second
    await receiver.join()

    assert anita.errors == [LinkingError.OTP_MISMATCH, LinkingError.TOO_MANY_ATTEMPTS]  # her own tries only
    assert bala.errors == [] and bala.linked  # Bala's link is untouched
    assert [link.abha_address for link in hospital.linked] == [BALA]


async def test_the_tries_are_bounded_per_discovery_then_it_refuses_new_link_requests(
    start: Start, server: FakeHealthServer
) -> None:
    hospital = Family(server)
    receiver = await start(hospital, max_otp_tries=3)
    first = await discovers(server, ANITA, otp=[WRONG])  # 1 wrong try; this link stays pending
    second = await server.abdm.patient_links(first, otp=[WRONG])  # a new link request while one is pending: 2
    assert first.errors == second.errors == [LinkingError.OTP_MISMATCH]
    third = await server.abdm.patient_links(first, otp=[WRONG])  # 3: the discovery's tries are spent
    assert third.errors == [LinkingError.TOO_MANY_ATTEMPTS]
    assert len(hospital.sent) == 3
    # the discovery's offer is spent: a new link request under it is refused, and no OTP is sent
    fourth = await server.abdm.patient_links(first)
    assert fourth.errors == [LinkingError.TOO_MANY_ATTEMPTS] and fourth.confirms == []
    assert len(hospital.sent) == 3 and hospital.linked == []
    # the patient starts a new discovery
    fresh = await discovers(server, ANITA)
    await receiver.join()
    assert fresh.errors == [] and fresh.linked and len(hospital.linked) == 1


async def test_a_failed_sms_forgets_only_its_own_pending_link(start: Start, server: FakeHealthServer) -> None:
    hospital = Family(server)
    anita_refused = asyncio.Event()
    hospital.fail.add(ANITA)
    hospital.hold[ANITA] = hospital.sending[BALA].wait  # Anita's SMS fails once Bala's was sent
    hospital.hold[BALA] = anita_refused.wait
    receiver = await start(hospital)

    first = asyncio.create_task(discovers(server, ANITA))
    await hospital.sending[ANITA].wait()
    second = asyncio.create_task(discovers(server, BALA))
    anita = await first
    anita_refused.set()
    bala = await second
    await receiver.join()

    assert anita.errors == [LinkingError.OTP_NOT_SENT]
    assert bala.errors == [] and bala.linked  # Bala's pending link survived Anita's failure
    assert [link.abha_address for link in hospital.linked] == [BALA]


async def test_another_requester_can_use_neither_a_discovery_nor_a_link_not_theirs(
    start: Start, server: FakeHealthServer
) -> None:
    hospital = Family(server)
    receiver = await start(hospital, max_otp_tries=2)
    anita = await discovers(server, ANITA, otp=[WRONG])  # her link stays pending, one wrong try spent
    assert anita.link_init is not None
    ((_, otp),) = hospital.sent

    async def ask(route: str, event: str, data: dict[str, Any]) -> dict[str, Any]:
        answer = await server.abdm._ask(route, event, {"request_id": str(uuid.uuid4()), **data}, 5.0)
        await receiver.join()
        assert answer is not None
        return answer

    # Bala's app names Anita's discovery: not his
    refused = await ask(
        "discover_link_on_init",
        "abha.care_context_discover_link_init",
        {"abha_address": BALA, "oid": f"oid-{BALA}", "hip_id": HIP, "txn_id": anita.txn_id,
         "patient": [{"ref_num": "PT-1042", "care_contexts": [{"reference_number": "LAB-88"}]}]},
    )  # fmt: skip
    assert refused["error"]["code"] == LinkingError.UNKNOWN_DISCOVERY and len(hospital.sent) == 1
    # a confirmation of Anita's link that names Bala: refused, even with the right OTP, and no try counted
    confirm = {"linkRefNumber": anita.link_init["ref_num"], "token": otp, "hip_id": HIP}
    for _ in range(2):  # twice: with max_otp_tries=2 counted tries would lock her link
        answer = await ask("discover_link_on_confirm", "abha.context_discover_link_confirm",
                           {**confirm, "oid": f"oid-{BALA}"})  # fmt: skip
        assert answer["error"]["code"] == LinkingError.INVALID_LINK
    assert hospital.linked == []
    # Anita's own confirmation still links
    answer = await ask("discover_link_on_confirm", "abha.context_discover_link_confirm",
                       {**confirm, "oid": f"oid-{ANITA}"})  # fmt: skip
    assert answer.get("patients") and [link.abha_address for link in hospital.linked] == [ANITA]


# ------------------------------------------------------------------------------------------------ the store


async def test_the_store_counts_tries_on_the_counting_entry_and_discards_only_its_own_version() -> None:
    now = [0.0]
    store = webhooks.InMemoryLinkOtpStore(clock=lambda: now[0])
    offer = webhooks.PendingLink("HIP-1", "PT-1", "Anita", meera().care_contexts, mobile=MOBILE, abha_address=ANITA)
    assert isinstance(await store.put("offer", offer, otp=None, ttl=60), str)
    one = await store.put("one", offer, otp="111111", ttl=600, tries_key="offer")
    two = await store.put("two", offer, otp="222222", ttl=600, tries_key="offer")
    assert one and two and one != two
    assert await store.put("three", offer, otp="3", ttl=60, tries_key="missing") is None  # nothing to count on
    # the counting entry lives as long as the entries counting on it
    now[0] = 500.0
    assert await store.get("offer") == offer
    # the wrong tries of both links count on the offer: 2 in all
    assert (await store.consume("one", "999999", max_tries=2)).outcome is webhooks.OtpOutcome.WRONG
    assert (await store.consume("two", "999999", max_tries=2)).outcome is webhooks.OtpOutcome.LOCKED
    # locked: the other link is refused even with its OTP, and no new entry may count on the offer
    assert (await store.consume("one", "111111", max_tries=2)).outcome is webhooks.OtpOutcome.LOCKED
    assert await store.put("four", offer, otp="444444", ttl=60, tries_key="offer") is None
    assert await store.get("offer") == offer  # still there (so a link request is told why), until it expires
    # discard(only=) forgets only the version it names
    first = await store.put("k", offer, otp="555555", ttl=60)
    second = await store.put("k", offer, otp="666666", ttl=60)
    assert first and second
    await store.discard("k", only=first)
    assert await store.get("k") == offer
    await store.discard("k", only=second)
    assert await store.get("k") is None
