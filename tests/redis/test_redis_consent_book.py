"""RedisConsentBook against a real Redis server (issue 44): the consent book shared by every worker. It behaves as
``ConsentBook`` (the same tests run over both), a consent's status only moves forward even under concurrent updates
from several workers (the rule applied on the server, in one script), entries expire with their consent and an ended
one outlives the grant it ends, the book is bounded, the keys share one hash tag; and a consent revoked through a
webhook that reached one worker process is refused by another."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import itertools
import logging
import os
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import health_async as ha
from health_async import webhooks
from health_async._wire import structure
from health_async.models import ConsentUpdate, HealthDataRequest, HiType
from health_async.redis import DEFAULT_CONSENT_TTL, RedisConsentBook, RedisUnavailable
from health_async.resources import ConsentBook, ConsentGrant, ConsentStore
from health_async.resources.abdm._guard import advance
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hiu import example_document
from health_async.testing.webhooks._send import sign

from ..webhooks.test_abdm_asgi import SECRET as ASGI_SECRET
from ..webhooks.test_abdm_asgi import call, envelope
from .conftest import RedisServer, free_port

NOW = dt.datetime(2026, 11, 28, 10, 0, tzinfo=dt.UTC)
IST = dt.timezone(dt.timedelta(hours=5, minutes=30))
_names = itertools.count()

Store = ConsentBook | RedisConsentBook


def consent_update(consent_id: str, status: str, request_id: str = "req-1") -> ConsentUpdate:
    data = {
        "status": status,
        "notification": {"consentRequestId": request_id, "status": status, "consentArtefacts": {"id": consent_id}},
    }
    return structure(data, ConsentUpdate)


async def grant(store: Store, consent_id: str, **kwargs: Any) -> None:
    """``store.grant(...)``: a plain call for ConsentBook, awaited for RedisConsentBook."""
    done = store.grant(consent_id, **kwargs)
    if inspect.isawaitable(done):
        await done


@pytest.fixture(params=["ConsentBook", "RedisConsentBook"])
async def store(request: pytest.FixtureRequest, redis_server: RedisServer, name: str) -> AsyncIterator[Store]:
    """Each behaviour test runs over the book in this process and the one in Redis."""
    if request.param == "ConsentBook":
        yield ConsentBook(max_consents=2)
    else:
        async with RedisConsentBook(redis_server.url, name=name, max_consents=2) as book:
            yield book


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id) as c:
        yield c


def bundle() -> dict[str, Any]:
    return {**example_document("OPConsultation"), "id": "0"}


def request(server: FakeHealthServer, **data: Any) -> HealthDataRequest:
    raw = server.abdm.data_request(["cc-1"], oid="oid-1")
    raw["key_information"]["dh_public_key"]["expiry"] = (NOW + dt.timedelta(days=1)).isoformat()
    return HealthDataRequest.from_event(
        {**raw, "consent_id": "consent-9", "hi_types": ["OPConsultation", "Prescription"], **data}, requested_at=NOW
    )


# --- the same behaviour as ConsentBook --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("granted", "data", "rule"),
    [
        (None, {}, "consent_unknown"),
        ({}, {}, None),
        ({"expires_at": NOW - dt.timedelta(seconds=1)}, {}, "consent_expired"),
        ({"expires_at": NOW + dt.timedelta(days=1)}, {}, None),
        ({"hi_types": [HiType.OP_CONSULTATION]}, {}, "consent_types"),
        ({"hi_types": []}, {}, "consent_types"),  # known to cover no type: not "unknown"
        ({"hi_types": ["OPConsultation", "Prescription"]}, {}, None),
        (
            {"date_from": NOW - dt.timedelta(days=30), "date_to": NOW},
            {"date_range": {"from": (NOW - dt.timedelta(days=10)).isoformat(), "to": NOW.isoformat()}},
            None,
        ),
        (
            {"date_from": (NOW - dt.timedelta(days=30)).astimezone(IST), "date_to": NOW},
            {"date_range": {"from": (NOW - dt.timedelta(days=40)).isoformat(), "to": NOW.isoformat()}},
            "consent_dates",
        ),
        ({"date_from": NOW - dt.timedelta(days=30)}, {}, "consent_dates"),
    ],
)
async def test_the_consent_behind_a_request_is_checked(
    server: FakeHealthServer,
    client: ha.HealthClient,
    store: Store,
    granted: dict[str, Any] | None,
    data: dict[str, Any],
    rule: str | None,
) -> None:
    assert isinstance(store, ConsentStore)
    if granted is not None:
        await grant(store, "consent-9", **granted)
        known = await store.lookup("consent-9")
        assert known == ConsentGrant(
            "GRANTED",
            None if "hi_types" not in granted else frozenset(str(t) for t in granted["hi_types"]),
            granted.get("date_from"),
            granted.get("date_to"),
            granted.get("expires_at"),
        )
    asked = request(server, **data)
    result = await client.abdm.push_health_data(asked, {"cc-1": bundle()}, consents=store, now=NOW)
    if rule is None:
        assert result.pushed == ("cc-1",) and result.refused == ()
    else:
        assert result.pushed == () and [r.rule for r in result.refused] == [rule]
        assert server.abdm.pages(asked.transaction_id) == []


async def test_a_revoked_consent_stays_revoked_and_the_late_grant_is_logged_without_the_id(
    server: FakeHealthServer, client: ha.HealthClient, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    await grant(store, "consent-secret-9", hi_types=["OPConsultation"], expires_at=NOW + dt.timedelta(days=1))
    await store.take(consent_update("consent-secret-9", "REVOKED", request_id="req-secret-1"))
    revoked = ConsentGrant("REVOKED", frozenset({"OPConsultation"}), None, None, NOW + dt.timedelta(days=1))
    assert await store.lookup("consent-secret-9") == revoked  # the status changes; what it allowed is kept
    assert await store.lookup("req-secret-1") == ConsentGrant("REVOKED")  # the request's id is marked too
    with caplog.at_level(logging.WARNING, logger="health_async"):
        await store.take(consent_update("consent-secret-9", "REVOKED", request_id="req-secret-1"))  # no news
        assert "consent_ended_is_final" not in caplog.text
        await store.take(consent_update("consent-secret-9", "GRANTED", request_id="req-secret-1"))  # late
        await grant(store, "consent-secret-9")  # the hospital's own grant: final all the same
        await store.take(consent_update("consent-secret-9", "expired", request_id="req-secret-1"))
    assert await store.lookup("consent-secret-9") == revoked
    assert caplog.text.count("consent_ended_is_final") == 3 + 2  # each ignored change but the repeats
    assert "secret" not in caplog.text
    asked = request(server, consent_id="consent-secret-9")
    result = await client.abdm.push_health_data(asked, {"cc-1": bundle()}, consents=store, now=NOW)
    assert result.pushed == () and result.refused[0].rule == "consent_revoked"


async def test_a_webhook_status_over_a_grant_and_a_new_grant_replacing_one(store: Store) -> None:
    await grant(store, "consent-9", hi_types=["Prescription"], date_to=NOW)
    await store.take(consent_update("consent-9", "REQUESTED"))  # not granted, not ended: taken as it comes
    assert await store.lookup("consent-9") == ConsentGrant("REQUESTED", frozenset({"Prescription"}), None, NOW)
    await grant(store, "consent-9")  # a grant replaces what was known
    assert await store.lookup("consent-9") == ConsentGrant()
    await store.take(consent_update("consent-10", "GRANTED", request_id=""))  # a consent first known by webhook
    assert await store.lookup("consent-10") == ConsentGrant("GRANTED")
    assert await store.lookup("never-heard-of") is None


async def test_input_is_checked_the_book_is_bounded_and_holds_nothing_personal_in_its_repr(store: Store) -> None:
    for bad in ({"hi_types": "OPConsultation"}, {"hi_types": ["LabReport"]}, {"expires_at": dt.datetime(2026, 1, 1)}):
        with pytest.raises(ha.InvalidRequest):
            await grant(store, "c", **bad)
    with pytest.raises(ha.InvalidRequest):
        await grant(store, "")
    with pytest.raises(ha.InvalidRequest):
        await store.take(webhooks.parse_event({"event": "rec.uploaded"}))
    with pytest.raises(ha.InvalidRequest):
        await store.take("REVOKED")  # type: ignore[arg-type]
    await store.take(structure({"status": "REVOKED"}, ConsentUpdate))  # no consent named: nothing changes
    for consent_id in ("consent-a", "consent-b", "consent-c"):
        await grant(store, consent_id)
    assert await store.lookup("consent-a") is None  # max_consents=2: the oldest forgotten
    assert await store.lookup("consent-b") is not None and await store.lookup("consent-c") is not None
    await store.take(consent_update("consent-b", "REVOKED", request_id=""))  # a change makes it the newest
    await grant(store, "consent-d")
    assert await store.lookup("consent-c") is None and await store.lookup("consent-b") is not None
    assert "consent-" not in repr(store)


# --- the forward-only rule, on the server -----------------------------------------------------------------------

STATUSES = ["GRANTED", "granted", "REVOKED", "EXPIRED", "DENIED", "REQUESTED", "revoked", "Denied"]
STEPS = st.lists(
    st.one_of(
        st.sampled_from(STATUSES),
        st.tuples(
            st.none() | st.sets(st.sampled_from(list(HiType)), max_size=3),
            st.none() | st.just(NOW.astimezone(IST)),
            st.none() | st.just(NOW + dt.timedelta(days=3)),
        ),
    ),
    max_size=10,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
async def test_any_sequence_of_updates_reads_as_consent_book_reads(
    redis_server: RedisServer, redis_client: aioredis.Redis, steps: list[Any]
) -> None:
    name = f"seq-{next(_names)}-{random.getrandbits(32)}"
    book = ConsentBook()
    async with RedisConsentBook(redis_client, name=name) as shared:
        for step in steps:
            if isinstance(step, str):
                for store in (book, shared):
                    await store.take(consent_update("consent-9", step))
            else:
                hi_types, date_to, expires_at = step
                for store in (book, shared):
                    await grant(store, "consent-9", hi_types=hi_types, date_to=date_to, expires_at=expires_at)
            for consent_id in ("consent-9", "req-1"):
                assert await shared.lookup(consent_id) == await book.lookup(consent_id)
    await redis_client.delete(f"{{{name}}}:consent:consent-9", f"{{{name}}}:consent:req-1", f"{{{name}}}:consents")


def test_the_script_applies_advance() -> None:
    """The rule the script applies is advance()'s: an ended record is final, anything else is replaced (the
    statuses that end a consent are ConsentGrant.ended's, stored beside the status)."""
    for known, new in itertools.product([None, *STATUSES], STATUSES):
        before = None if known is None else ConsentGrant(known)
        assert (advance(before, ConsentGrant(new)) is None) == (before is not None and before.ended)


async def test_a_revocation_and_a_late_grant_at_once_from_two_workers_end_revoked(
    redis_server: RedisServer, name: str
) -> None:
    async with (
        RedisConsentBook(redis_server.url, name=name) as one,
        RedisConsentBook(redis_server.url, name=name) as two,
    ):
        ids = [f"consent-{i}" for i in range(40)]
        await asyncio.gather(*(one.grant(consent_id) for consent_id in ids))
        updates = []
        for consent_id in ids:
            updates += [
                one.take(consent_update(consent_id, "REVOKED", request_id="")),
                two.take(consent_update(consent_id, "GRANTED", request_id="")),
                two.grant(consent_id, hi_types=["OPConsultation"]),
                one.take(consent_update(consent_id, "DENIED", request_id="")),
            ]
        random.Random(44).shuffle(updates)
        await asyncio.gather(*updates)
        for consent_id in ids:
            for store in (one, two):
                known = await store.lookup(consent_id)
                assert known is not None and known.ended, consent_id


# --- expiry, the bound, the keys --------------------------------------------------------------------------------


async def test_entries_expire_with_their_consent_and_an_ended_one_outlives_its_grant(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    key = f"{{{name}}}:consent:"
    async with RedisConsentBook(redis_server.url, name=name, ttl=0.3) as store:
        assert store.ttl == 0.3 and DEFAULT_CONSENT_TTL == 30 * 24 * 3600
        later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)
        await store.grant("long", expires_at=later)
        assert 55_000 < await redis_client.pttl(key + "long") <= 60_000  # PEXPIREAT at the consent's expiry
        await store.grant("short", expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=1))  # already past
        assert 0 < await redis_client.pttl(key + "short") <= 300  # kept ttl after its last change
        await store.grant("open")  # no expiry known: ttl
        assert 0 < await redis_client.pttl(key + "open") <= 300
        await store.take(consent_update("long", "REVOKED", request_id=""))
        assert await redis_client.pttl(key + "long") > 55_000  # the ending lives as long as the grant would have
        assert await redis_client.pttl(f"{{{name}}}:consents") > 55_000  # the index lives as long as its longest
        await asyncio.sleep(0.4)
        assert await store.lookup("short") is None and await store.lookup("open") is None  # gone on the server
        await store.grant("long")  # a late grant still meets the revocation
        known = await store.lookup("long")
        assert known is not None and known.status == "REVOKED"


async def test_an_ended_consent_is_kept_ttl_after_its_ending(redis_client: aioredis.Redis, name: str) -> None:
    async with RedisConsentBook(redis_client, name=name, ttl=3600) as store:
        await store.grant("consent-9", expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5))
        await store.take(consent_update("consent-9", "REVOKED", request_id=""))
        assert await redis_client.pttl(f"{{{name}}}:consent:consent-9") > 3_500_000


async def test_the_bound_trims_the_oldest_change_on_the_server(redis_client: aioredis.Redis, name: str) -> None:
    async with RedisConsentBook(redis_client, name=name, max_consents=3) as store:
        for i in range(5):
            await store.grant(f"consent-{i}")
        await store.take(consent_update("consent-2", "REVOKED", request_id=""))  # now the newest change
        await store.grant("consent-5")
        members = await redis_client.zrange(f"{{{name}}}:consents", 0, -1)
        assert members == [b"consent-4", b"consent-2", b"consent-5"]
        for i in (0, 1, 3):
            assert await redis_client.exists(f"{{{name}}}:consent:consent-{i}") == 0  # deleted, not only unlisted


async def test_keys_share_the_names_hash_tag(redis_client: aioredis.Redis, name: str) -> None:
    async with RedisConsentBook(redis_client, name=name) as store:
        await store.grant("consent-{9}:x")  # braces in an id: the first hash tag, the name's, still decides
        keys = sorted(await redis_client.keys(f"*{name}*"))
        assert keys == [f"{{{name}}}:consent:consent-{{9}}:x".encode(), f"{{{name}}}:consents".encode()]
        assert await redis_client.type(keys[0]) == b"hash" and await redis_client.type(keys[1]) == b"zset"
        assert await redis_client.ttl(keys[0]) > 0 and await redis_client.ttl(keys[1]) > 0
        assert await store.lookup("consent-{9}:x") == ConsentGrant()


async def test_a_flushed_script_cache_and_a_decoding_client_are_served(
    redis_server: RedisServer, redis_client: aioredis.Redis, name: str
) -> None:
    decoding = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    async with RedisConsentBook(decoding, name=name) as store:
        await redis_client.script_flush()  # as a restarted server: EVALSHA fails, EVAL loads the script
        await store.grant("consent-9", hi_types=["Prescription"], date_from=NOW)
        await store.take(consent_update("consent-9", "REVOKED", request_id=""))
        await store.grant("consent-9")
        assert await store.lookup("consent-9") == ConsentGrant("REVOKED", frozenset({"Prescription"}), NOW)
    await decoding.aclose()


async def test_redis_down_is_a_typed_error_and_arguments_are_checked() -> None:
    async with RedisConsentBook(f"redis://:s3cret@127.0.0.1:{free_port()}/0", name="n") as store:
        assert repr(store) == "RedisConsentBook(name='n', max_consents=100000)"
        for call in (
            store.lookup("consent-9"),
            store.grant("consent-9"),
            store.take(consent_update("consent-9", "REVOKED")),
        ):
            with pytest.raises(RedisUnavailable) as info:
                await call
            assert "s3cret" not in str(info.value) and "consent-9" not in str(info.value)
    for bad in ({"max_consents": 0}, {"max_consents": True}, {"ttl": 0}, {"ttl": float("inf")}, {"name": "{x}"}):
        with pytest.raises(ha.InvalidRequest):
            RedisConsentBook("redis://127.0.0.1:1/0", **bad)
    with pytest.raises(ha.InvalidArgumentType):
        RedisConsentBook(object())  # type: ignore[arg-type]


async def test_with_redis_down_a_consent_webhook_is_answered_500_and_a_push_sends_nothing(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    async with RedisConsentBook(f"redis://127.0.0.1:{free_port()}/0") as down:
        app = webhooks.abdm_asgi(ASGI_SECRET, client=client, consents=down)
        data = {"status": "REVOKED", "notification": {"consentRequestId": "req-1", "status": "REVOKED"}}
        body = envelope("abha.consent_update", data)
        answer = await call(app, body, signature=sign(body, ASGI_SECRET))
        assert answer.status == 500  # the service delivers it again later
        await app.aclose()
        asked = request(server)
        with pytest.raises(RedisUnavailable) as info:
            await client.abdm.push_health_data(asked, {"cc-1": bundle()}, consents=down, now=NOW)
        assert info.value.sent is False and server.calls("hip_data_push") == 0


# --- two worker processes, one Redis -----------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent.parent
SECRET = "whsec-redis-consents"


class Worker:
    def __init__(self, directory: Path, index: int) -> None:
        self.port_file = directory / f"worker-{index}.port"
        self.calls_file = directory / f"worker-{index}.calls"
        self.log_file = directory / f"worker-{index}.log"
        self.calls_file.touch()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port_file.read_text()}/abdm"

    def calls(self) -> list[str]:
        return self.calls_file.read_text().split()

    async def logged(self, line: str) -> str:
        """This worker's log once it holds ``line`` (within 10 seconds; another process writes it)."""
        deadline = time.monotonic() + 10
        while line not in (text := self.log_file.read_text()) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        return text


@pytest.fixture
def workers(server: FakeHealthServer, redis_server: RedisServer, name: str, tmp_path: Path) -> Iterator[list[Worker]]:
    made = [Worker(tmp_path, i) for i in range(2)]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for worker in made:
        args = [server.url, server.token, server.client_id, redis_server.url, name, SECRET]
        args += [str(worker.port_file), str(worker.calls_file), str(worker.log_file)]
        worker.process = subprocess.Popen(
            [sys.executable, "-m", "tests.redis._consent_worker", *args], cwd=ROOT, env=env
        )
    try:
        deadline = time.monotonic() + 20
        while not all(w.port_file.exists() and w.port_file.read_text() for w in made):
            assert all(w.process is not None and w.process.poll() is None for w in made), "a worker died at start"
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        yield made
    finally:
        for worker in made:
            if worker.process is not None:
                worker.process.kill()
                worker.process.wait(timeout=10)


async def test_a_consent_revoked_at_worker_a_refuses_the_push_at_worker_b(
    server: FakeHealthServer, redis_server: RedisServer, name: str, workers: list[Worker]
) -> None:
    a, b = workers
    async with RedisConsentBook(redis_server.url, name=name) as book:  # the hospital's app grants, in a third process
        await book.grant("consent-9")
    server.abdm.webhooks(b.url, SECRET)
    granted = await server.abdm.send_data_request(["visit-1"], oid="oid-1", consent_id="consent-9")
    await b.logged("ABDM data request answered")
    assert list(server.abdm.received(granted.transaction_id)) == ["visit-1"]  # B pushes under the granted consent
    assert len(b.calls()) == 1

    server.abdm.webhooks(a.url, SECRET)
    revoked = await server.abdm.send_consent_update("consent-9", "REVOKED", artefact_ids=["artefact-1"])
    assert revoked.status == 200  # worker A took the revocation (before answering)

    server.abdm.webhooks(b.url, SECRET)
    asked = await server.abdm.send_data_request(["visit-1"], oid="oid-1", consent_id="consent-9")
    log = await b.logged("refused before loading its records")
    assert "refused before loading its records: consent_revoked" in log
    assert server.abdm.pages(asked.transaction_id) == [] and server.abdm.received(asked.transaction_id) == {}
    assert len(b.calls()) == 1 and a.calls() == []  # on_data_fetch not called for the refused request
    assert server.calls("hip_data_push") == 1
    assert "consent-9" not in log and "artefact-1" not in log
