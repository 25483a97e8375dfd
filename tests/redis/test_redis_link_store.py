"""RedisLinkOtpStore against a real Redis server (issue 44): the in-memory store's behaviour (the same checks run on
both), one script per step (two confirmations at once: one link), nothing of the OTP or the patient in Redis, the
keys in one Cluster slot, and a patient's own search whose link is requested at one worker process and confirmed at
another, once."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

import health_async as ha
from health_async import webhooks
from health_async.errors import InvalidRequest
from health_async.models import CareContext, HiType, LinkingError
from health_async.redis import MIN_OTP_KEY_BYTES, RedisLinkOtpStore, RedisUnavailable
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._user_linking import DISCOVER_EVENT, LINK_CONFIRM_EVENT, LINK_INIT_EVENT

from .._abdm_fixtures import client, server
from ..abdm.test_linking_races import (
    test_a_failed_sms_forgets_only_its_own_pending_link,
    test_another_requester_can_use_neither_a_discovery_nor_a_link_not_theirs,
    test_one_requesters_wrong_otps_do_not_lock_the_other,
    test_the_tries_are_bounded_per_discovery_then_it_refuses_new_link_requests,
)
from ..abdm.test_user_initiated_linking import HIP, MOBILE, SECRET, VISITS, Hospital, asgi_bridge
from ..conftest import Serve
from .conftest import RedisServer, free_port

ROOT = Path(__file__).resolve().parent.parent.parent
OTP_KEY = bytes(range(32))  # the workers' configuration (a test's: a real one is secrets.token_bytes(32))
ADDRESS = "meera.k@sbx"
NAME = "Meera Krishnan"
OTP = "402917"
OID = "oid-meera"

# The linking races of tests/abdm, through both receivers, with their pending links in Redis (the `start` below).
__all__ = [
    "client",
    "server",
    "test_a_failed_sms_forgets_only_its_own_pending_link",
    "test_another_requester_can_use_neither_a_discovery_nor_a_link_not_theirs",
    "test_one_requesters_wrong_otps_do_not_lock_the_other",
    "test_the_tries_are_bounded_per_discovery_then_it_refuses_new_link_requests",
]


def link_of(*visits: CareContext, mobile: str | None = MOBILE) -> webhooks.PendingLink:
    return webhooks.PendingLink(
        HIP, "PT-1042", NAME, visits or VISITS, mobile=mobile, abha_address=ADDRESS, oid=OID, partner_patient_id="P-9"
    )


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest, redis_server: RedisServer, name: str) -> AsyncIterator[Any]:
    """The reference store and the Redis one: every test taking ``store`` checks both behave alike."""
    if request.param == "memory":
        yield webhooks.InMemoryLinkOtpStore()
    else:
        async with RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY) as shared:
            yield shared


@pytest.fixture(params=["aiohttp", "asgi"])
async def start(
    request: pytest.FixtureRequest,
    serve: Serve,
    server: FakeHealthServer,
    client: ha.HealthClient,
    redis_server: RedisServer,
    name: str,
) -> AsyncIterator[Callable[..., Awaitable[webhooks.AbdmHandler | webhooks.AbdmAsgiApp]]]:
    """tests/abdm/test_linking_races.py's receivers (aiohttp, ASGI), their pending links in a RedisLinkOtpStore."""
    receivers: list[webhooks.AbdmHandler | webhooks.AbdmAsgiApp] = []
    stores: list[RedisLinkOtpStore] = []

    async def start(hospital: Hospital, **kwargs: Any) -> webhooks.AbdmHandler | webhooks.AbdmAsgiApp:
        if "link_store" not in kwargs:
            stores.append(RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY))
            kwargs["link_store"] = stores[-1]
        callbacks: dict[str, Any] = {"on_discover": hospital.on_discover, "on_link_otp": hospital.on_link_otp,
                     "on_linked": hospital.on_linked}  # fmt: skip
        receiver: webhooks.AbdmHandler | webhooks.AbdmAsgiApp
        if request.param == "aiohttp":
            handler = webhooks.abdm_handler(SECRET, client=client, **callbacks, **kwargs)
            receiver, url = handler, await serve({("POST", "/abdm"): handler.handle})
        else:
            app = webhooks.abdm_asgi(SECRET, client=client, **callbacks, **kwargs)
            receiver, url = app, await serve({("POST", "/abdm"): asgi_bridge(app)})
        server.abdm.webhooks(f"{url}/abdm", SECRET)
        receivers.append(receiver)
        return receiver

    yield start
    for receiver in receivers:
        await receiver.aclose()
    for shared in stores:
        await shared.aclose()


# ------------------------------------------------------------------------------------------------ the store's behaviour


async def test_keeps_the_link_uses_the_otp_once_and_an_entry_without_otp_cannot_be_consumed(store: Any) -> None:
    assert isinstance(store, webhooks.LinkOtpStore)
    link = link_of(
        CareContext("OPD-1", "OP visit", HiType.OP_CONSULTATION, {"resourceType": "Bundle", "id": "b-1"}),
        CareContext("LAB-1", "Lipid profile", "SomeNewType", b"\x00\xff raw"),
        CareContext("RX-1", "Prescription", "Prescription", '{"resourceType": "Bundle"}'),
    )
    version = await store.put("k", link, otp=OTP, ttl=60)
    assert isinstance(version, str) and len(version) >= 16
    kept = await store.get("k")
    assert kept == link  # every field, the care contexts' bundles included
    assert kept is not None and [type(cc.data) for cc in kept.care_contexts] == [dict, bytes, str]
    assert kept.care_contexts[0].hi_type is HiType.OP_CONSULTATION
    first = await store.consume("k", OTP, max_tries=3)
    assert first.outcome is webhooks.OtpOutcome.MATCHED and first.link == link
    assert (await store.consume("k", OTP, max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN  # one use
    assert await store.get("k") is None
    assert await store.put("offer", link, otp=None, ttl=60)
    assert (await store.consume("offer", "123456", max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN  # no OTP
    assert await store.get("offer") == link  # and it stays
    assert (await store.consume("never", OTP, max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN


async def test_tries_count_on_the_counting_entry_and_discard_forgets_only_its_own_version(store: Any) -> None:
    offer = link_of()
    assert isinstance(await store.put("offer", offer, otp=None, ttl=60), str)
    one = await store.put("one", offer, otp="111111", ttl=600, tries_key="offer")
    two = await store.put("two", offer, otp="222222", ttl=600, tries_key="offer")
    assert one and two and one != two
    assert await store.put("three", offer, otp="3", ttl=60, tries_key="missing") is None  # nothing to count on
    assert await store.put("offer", offer, otp="3", ttl=60, tries_key="offer") is None  # not on itself
    # the wrong tries of both links count on the offer: 2 in all
    assert (await store.consume("one", "999999", max_tries=2)).outcome is webhooks.OtpOutcome.WRONG
    assert (await store.consume("two", "999999", max_tries=2)).outcome is webhooks.OtpOutcome.LOCKED
    assert (await store.consume("two", "222222", max_tries=2)).outcome is webhooks.OtpOutcome.UNKNOWN  # forgotten
    # locked: the other link is refused even with its OTP (and forgotten), and no new entry may count on the offer
    assert (await store.consume("one", "111111", max_tries=2)).outcome is webhooks.OtpOutcome.LOCKED
    assert (await store.consume("one", "111111", max_tries=2)).outcome is webhooks.OtpOutcome.UNKNOWN
    assert await store.put("four", offer, otp="444444", ttl=60, tries_key="offer") is None
    assert await store.get("offer") == offer  # still there (so a link request is told why), until it expires
    # discard(only=) forgets only the version it names; discard() whatever is there
    first = await store.put("k", offer, otp="555555", ttl=60)
    second = await store.put("k", offer, otp="666666", ttl=60)
    assert first and second and first != second
    await store.discard("k", only=first)
    await store.discard("k", only="")
    assert await store.get("k") == offer
    assert (await store.consume("k", "555555", max_tries=3)).outcome is webhooks.OtpOutcome.WRONG  # the second's
    await store.discard("k", only=second)
    assert await store.get("k") is None
    await store.put("k", offer, otp=None, ttl=60)
    await store.discard("k")
    await store.discard("k")  # nothing there: nothing happens
    assert await store.get("k") is None


async def test_an_entry_counting_on_itself_a_replaced_one_and_one_whose_counter_is_gone(store: Any) -> None:
    link = link_of()
    await store.put("self", link, otp=OTP, ttl=60)
    assert (await store.consume("self", "000000", max_tries=2)).outcome is webhooks.OtpOutcome.WRONG
    await store.put("self", link, otp=OTP, ttl=60)  # replaced: its tries start again
    assert (await store.consume("self", "000000", max_tries=2)).outcome is webhooks.OtpOutcome.WRONG
    assert (await store.consume("self", "000000", max_tries=2)).outcome is webhooks.OtpOutcome.LOCKED
    assert (await store.consume("self", OTP, max_tries=2)).outcome is webhooks.OtpOutcome.UNKNOWN  # forgotten
    # the counting entry ends (the discovery forgotten): its links end too
    await store.put("offer", link, otp=None, ttl=60)
    await store.put("link", link, otp=OTP, ttl=60, tries_key="offer")
    await store.discard("offer")
    assert (await store.consume("link", OTP, max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN
    await store.put("offer", link, otp=None, ttl=60)  # a new discovery under the same key does not bring it back
    assert (await store.consume("link", OTP, max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN


async def test_entries_expire_and_a_counting_entry_lives_as_long_as_its_links(store: Any) -> None:
    link = link_of()
    await store.put("offer", link, otp=None, ttl=0.3)
    await store.put("link", link, otp=OTP, ttl=60, tries_key="offer")  # the offer now lives 60 s too
    await store.put("short", link, otp=OTP, ttl=0.2)
    await asyncio.sleep(0.45)
    assert await store.get("short") is None
    expired = await store.consume("short", OTP, max_tries=3)
    assert expired.outcome in (webhooks.OtpOutcome.EXPIRED, webhooks.OtpOutcome.UNKNOWN)  # Redis: gone, UNKNOWN
    assert await store.get("offer") == link
    assert (await store.consume("link", OTP, max_tries=3)).outcome is webhooks.OtpOutcome.MATCHED


# ------------------------------------------------------------------------------------------------ Redis only


async def test_two_confirmations_at_once_with_the_right_otp_link_once(redis_server: RedisServer, name: str) -> None:
    async with (
        RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY) as worker_a,
        RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY) as worker_b,
    ):
        await worker_a.put("offer", link_of(), otp=None, ttl=60)
        await worker_a.put("link", link_of(), otp=OTP, ttl=60, tries_key="offer")
        checks = await asyncio.gather(*(s.consume("link", OTP, max_tries=3) for s in (worker_a, worker_b) * 8))
        outcomes = sorted(c.outcome.value for c in checks)
        assert outcomes == ["matched"] + ["unknown"] * 15
        # wrong tries at once are each counted, once: 3 allowed, 6 at once on two links of one discovery
        await worker_a.put("l1", link_of(), otp=OTP, ttl=60, tries_key="offer")
        await worker_b.put("l2", link_of(), otp=OTP, ttl=60, tries_key="offer")
        wrong = await asyncio.gather(
            *(s.consume(k, "000000", max_tries=3) for s, k in [(worker_a, "l1"), (worker_b, "l2")] * 3)
        )
        counts = {o: sum(c.outcome is o for c in wrong) for o in webhooks.OtpOutcome}
        assert counts[webhooks.OtpOutcome.WRONG] == 2 and counts[webhooks.OtpOutcome.LOCKED] >= 1
        assert counts[webhooks.OtpOutcome.MATCHED] == 0
        assert await worker_b.put("l3", link_of(), otp=OTP, ttl=60, tries_key="offer") is None  # locked


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def _everything_in(redis: aioredis.Redis) -> tuple[list[bytes], bytes]:
    """Every key of the server, and every value of every key (hash fields included) joined."""
    keys: list[Any] = [key async for key in redis.scan_iter(count=1000)]
    values: list[Any] = []
    for key in keys:
        kind = _text(await redis.type(key))
        if kind == "hash":
            for field, value in (await redis.hgetall(key)).items():
                values += [field, value]
        elif kind == "string":
            values.append(await redis.get(key) or b"")
        elif kind == "zset":
            members: Any = await redis.zrange(key, 0, -1)
            values += members
    return keys, b"\n".join(values)


async def test_redis_holds_no_otp_nor_patient_and_every_key_is_in_one_cluster_slot(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    txn = str(uuid.uuid4())
    async with RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY) as store:
        await store.put(f"offer\x1f{txn}", link_of(), otp=None, ttl=60)
        await store.put("link\x1fHIP\x1fref-xyz", link_of(), otp=OTP, ttl=60, tries_key=f"offer\x1f{txn}")
        await store.put("link\x1fHIP\x1fref-abc", link_of(), otp="731064", ttl=60, tries_key=f"offer\x1f{txn}")
        assert (await store.consume("link\x1fHIP\x1fref-abc", "000000", max_tries=3)).outcome.value == "wrong"
        assert repr(store) == f"RedisLinkOtpStore(name={name!r})"
        assert OTP_KEY.hex() not in repr(store) and str(OTP_KEY) not in repr(store)
    keys, values = await _everything_in(redis_client)
    ours = [k.decode() for k in keys if k.decode().startswith(f"{{{name}}}:")]
    assert len(ours) == 3 and all(k.startswith(f"{{{name}}}:link:") for k in ours)
    assert {key_slot(k.encode()) for k in ours} == {key_slot(name.encode())}  # one slot: the hash tag's
    everything = b"\n".join(keys) + values
    personal = [OTP, "731064", "000000", MOBILE, ADDRESS, NAME, OID, "PT-1042", "P-9", txn, "ref-xyz", "ref-abc"]
    personal += [cc.care_context_id for cc in VISITS] + [cc.display for cc in VISITS] + [OTP_KEY.hex()]
    for secret in personal:
        assert secret.encode() not in everything, secret
    assert OTP_KEY not in everything


async def test_the_otp_key_is_required_long_enough_and_shared(redis_server: RedisServer, name: str) -> None:
    for bad in (None, b"", b"k" * (MIN_OTP_KEY_BYTES - 1), "k" * 64, bytearray(32)):
        with pytest.raises(InvalidRequest, match="otp_key") as info:
            RedisLinkOtpStore(redis_server.url, name=name, otp_key=bad)  # type: ignore[arg-type]
        assert "kkkk" not in str(info.value)
    with pytest.raises(InvalidRequest, match="otp_key"):
        RedisLinkOtpStore(redis_server.url, name=name)
    with pytest.raises(InvalidRequest, match="name"):
        RedisLinkOtpStore(redis_server.url, name="a{b}", otp_key=OTP_KEY)
    async with (
        RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY) as one,
        RedisLinkOtpStore(redis_server.url, name=name, otp_key=b"\x01" * 32) as other,
    ):
        await one.put("k", link_of(), otp=OTP, ttl=60)
        assert await other.get("k") is None  # another key: another store (configure every worker alike)
        assert (await other.consume("k", OTP, max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN
        assert await one.get("k") == link_of()


async def test_an_entry_that_cannot_be_read_is_absent_and_logged_without_data(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY) as store:
        await store.put("a", link_of(), otp=OTP, ttl=60)
        await store.put("b", link_of(mobile="9000000000"), otp=OTP, ttl=60)
        key_a, key_b = store._key("a"), store._key("b")
        # a's sealed link moved under b's key: bound to its key, it does not open there
        await redis_client.hset(key_b, "l", await redis_client.hget(key_a, "l") or b"")
        assert await store.get("b") is None
        assert (await store.consume("b", OTP, max_tries=3)).outcome is webhooks.OtpOutcome.UNKNOWN  # used, unread
        assert await store.get("a") == link_of()
        assert "could not be read" in caplog.text
        assert MOBILE not in caplog.text and OTP not in caplog.text and ADDRESS not in caplog.text


async def test_a_client_that_decodes_responses_works_too(redis_server: RedisServer, name: str) -> None:
    own = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        store = RedisLinkOtpStore(own, name=name, otp_key=OTP_KEY)
        await store.put("offer", link_of(), otp=None, ttl=60)
        version = await store.put("k", link_of(), otp=OTP, ttl=60, tries_key="offer")
        assert await store.get("k") == link_of()
        assert (await store.consume("k", "000000", max_tries=3)).outcome is webhooks.OtpOutcome.WRONG
        assert (await store.consume("k", OTP, max_tries=3)).link == link_of()
        await store.discard("offer", only=version)  # not the offer's version: stays
        assert await store.get("offer") == link_of()
        await store.aclose()  # not ours to close: the client still works
        assert await own.ping()
    finally:
        await own.aclose()


async def test_a_link_that_is_not_json_is_refused_before_redis(redis_server: RedisServer, name: str) -> None:
    async with RedisLinkOtpStore(redis_server.url, name=name, otp_key=OTP_KEY) as store:
        bad = link_of(CareContext("OPD-1", "visit \ud800", HiType.OP_CONSULTATION))
        with pytest.raises(InvalidRequest, match="JSON") as info:
            await store.put("k", bad, otp=OTP, ttl=60)
        assert "visit" not in str(info.value)
        with pytest.raises(InvalidRequest, match="ttl"):
            await store.put("k", link_of(), otp=OTP, ttl=float("inf"))
        assert await store.get("k") is None


async def test_redis_down_is_a_typed_error() -> None:
    async with RedisLinkOtpStore(f"redis://:s3cret@127.0.0.1:{free_port()}/0", otp_key=OTP_KEY) as store:
        calls = (
            store.put("k", link_of(), otp=OTP, ttl=60),
            store.get("k"),
            store.consume("k", OTP, max_tries=3),
            store.discard("k", only="v"),
        )
        for call in calls:
            with pytest.raises(RedisUnavailable) as info:
                await call
            assert "s3cret" not in str(info.value) and OTP not in str(info.value)


# ------------------------------------------------------------------------------------------------ two worker processes


def _start_worker(
    server: FakeHealthServer, redis_url: str, name: str, label: str, files: dict[str, Path]
) -> subprocess.Popen[bytes]:
    args = [server.url, server.token, server.client_id, redis_url, name, OTP_KEY.hex(), SECRET, label,
            str(files["phone"]), str(files["linked"]), str(files[label])]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "tests.redis._link_worker", *args], cwd=ROOT, env=env)


@pytest.fixture
def link_workers(
    server: FakeHealthServer, redis_server: RedisServer, name: str, tmp_path: Path
) -> Iterator[tuple[dict[str, str], dict[str, Path]]]:
    """Two hospital workers A and B (processes), sharing their pending links through Redis; their URLs, and the
    files: the patient's phone (``mobile otp`` lines) and the links made (``worker address count`` lines)."""
    files = {"phone": tmp_path / "phone", "linked": tmp_path / "linked", "A": tmp_path / "A", "B": tmp_path / "B"}
    processes = [_start_worker(server, redis_server.url, name, label, files) for label in "AB"]
    try:
        deadline = time.monotonic() + 20
        while not all(files[w].exists() and files[w].read_text() for w in "AB"):
            assert all(p.poll() is None for p in processes), "a worker died at start"
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        yield {w: f"http://127.0.0.1:{files[w].read_text()}/abdm" for w in "AB"}, files
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=10)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _wait_for_line(path: Path, count: int) -> list[str]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # written by another process
        lines = await asyncio.to_thread(_lines, path)
        if len(lines) >= count:
            return lines
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path.name}: fewer than {count} lines")


async def test_a_link_requested_at_one_worker_process_is_confirmed_at_another_once(
    server: FakeHealthServer,
    link_workers: tuple[dict[str, str], dict[str, Path]],
    redis_client: aioredis.Redis,
    name: str,
) -> None:
    urls, files = link_workers
    txn = str(uuid.uuid4())
    ids = {"hip_id": HIP, "oid": OID, "partner_patient_id": None}

    async def ask(worker: str, route: str, event: str, data: dict[str, Any]) -> dict[str, Any]:
        server.abdm.webhooks(urls[worker], SECRET)  # the service delivers this step to that worker
        answer = await server.abdm._ask(route, event, {"request_id": str(uuid.uuid4()), **data}, 10.0)
        assert answer is not None
        return answer

    discover = {"abha_address": ADDRESS, "txn_id": txn, "patient_name": NAME, "gender": "F", "year_of_birth": 1990,
                "identifiers": [{"type": "MOBILE", "value": MOBILE}], **ids}  # fmt: skip
    offered = await ask("A", "on_discover", DISCOVER_EVENT, discover)
    assert [cc["ref_num"] for p in offered["patients"] for cc in p["care_contexts"]] == ["OPD-2024-17", "LAB-88"]
    # the link request at B: the discovery answered by A is known there
    chosen = [{"ref_num": "PT-1042", "hi_type": "OPConsultation", "id": "", "count": 1,
               "care_contexts": [{"reference_number": "LAB-88"}]}]  # fmt: skip
    init = await ask("B", "discover_link_on_init", LINK_INIT_EVENT,
                     {"abha_address": ADDRESS, "txn_id": txn, "patient": chosen, **ids})  # fmt: skip
    assert init.get("error") is None and init["ref_num"]
    ((mobile, otp),) = (line.split() for line in await _wait_for_line(files["phone"], 1))
    assert mobile == MOBILE
    confirm = {"linkRefNumber": init["ref_num"], **ids}
    # a wrong OTP at A counts on the discovery; the right one at A links, once
    wrong = await ask("A", "discover_link_on_confirm", LINK_CONFIRM_EVENT, {**confirm, "token": "000000"})
    assert wrong["error"]["code"] == LinkingError.OTP_MISMATCH
    linked = await ask("A", "discover_link_on_confirm", LINK_CONFIRM_EVENT, {**confirm, "token": otp})
    assert [cc["ref_num"] for p in linked["patients"] for cc in p["care_contexts"]] == ["LAB-88"]
    # the same OTP at the other worker (and at A again): used, refused
    for worker in "BA":
        again = await ask(worker, "discover_link_on_confirm", LINK_CONFIRM_EVENT, {**confirm, "token": otp})
        assert again["error"]["code"] == LinkingError.INVALID_LINK and not again.get("patients")
    assert await _wait_for_line(files["linked"], 1) == [f"A {ADDRESS} 1"]
    # a second link request of the discovery, made at A, is confirmed at B
    init = await ask("A", "discover_link_on_init", LINK_INIT_EVENT,
                     {"abha_address": ADDRESS, "txn_id": txn, "patient": chosen, **ids})  # fmt: skip
    (_, second) = (await _wait_for_line(files["phone"], 2))[1].split()
    confirm = {"linkRefNumber": init["ref_num"], **ids}
    linked = await ask("B", "discover_link_on_confirm", LINK_CONFIRM_EVENT, {**confirm, "token": second})
    assert linked.get("patients")
    again = await ask("A", "discover_link_on_confirm", LINK_CONFIRM_EVENT, {**confirm, "token": second})
    assert again["error"]["code"] == LinkingError.INVALID_LINK
    assert (await _wait_for_line(files["linked"], 2))[1] == f"B {ADDRESS} 1"
    # nothing of the OTPs, the mobile or the patient in Redis
    keys, values = await _everything_in(redis_client)
    assert any(k.decode().startswith(f"{{{name}}}:link:") for k in keys)
    everything = b"\n".join(keys) + values
    for secret in (otp, second, MOBILE, ADDRESS, NAME, OID, txn, init["ref_num"], "PT-1042", "LAB-88"):
        assert secret.encode() not in everything, secret
