"""What the push guard guarantees (issue 42): a consent's status only moves forward (revoked, expired and denied are
final, whatever arrives late or twice); the guard holds before every page of a push and every retry of one, not only
the first; under the receivers it runs before the records are loaded; the window is never skipped; the receiver
logs the rules it refused by; what is validated and sent is the one encoding of a bundle (no NaN turned ``null``).
The guard reaches the consents through the ``ConsentStore`` protocol, so any store serves."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import health_async as ha
from health_async import webhooks
from health_async._wire import structure
from health_async.models import CareContext, ConsentUpdate, HealthDataRequest, HiType
from health_async.resources import PUSH_WINDOW, ConsentBook, ConsentGrant, ConsentStore
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abdm._hiu import example_document
from health_async.testing.webhooks._send import sign

from ..webhooks.test_abdm_asgi import SECRET, call

CARE_CONTEXTS = ["cc-1", "cc-2", "cc-3", "cc-4"]
LATE = PUSH_WINDOW + dt.timedelta(seconds=1)


def bundle(i: int = 0, hi_type: str = "OPConsultation") -> dict[str, Any]:
    document = example_document(hi_type)
    document["id"] = f"doc-{i}"
    return document


def consent_update(consent_id: str, status: str) -> ConsentUpdate:
    data = {
        "status": status,
        "notification": {"consentRequestId": "req-1", "status": status, "consentArtefacts": {"id": consent_id}},
    }
    return structure(data, ConsentUpdate)


def data_request(
    server: FakeHealthServer, *, at: dt.datetime | None, consent_id: str | None = "consent-9", **data: Any
) -> HealthDataRequest:
    raw = server.abdm.data_request(CARE_CONTEXTS, oid="oid-1")
    if consent_id is not None:
        raw["consent_id"] = consent_id
    return HealthDataRequest.from_event({**raw, **data}, requested_at=at)


def bundles() -> dict[str, dict[str, Any]]:
    return {cid: bundle(i) for i, cid in enumerate(CARE_CONTEXTS)}


# --- a consent's status only moves forward ---------------------------------------------------------------------

STATUSES = ["GRANTED", "granted", "REVOKED", "EXPIRED", "DENIED", "REQUESTED", "revoked"]
STEPS = st.lists(st.one_of(st.sampled_from(STATUSES), st.just("grant()")), max_size=12)


@settings(max_examples=300, deadline=None)
@given(steps=STEPS)
def test_once_a_consent_ended_it_never_reads_as_granted_again(steps: list[str]) -> None:
    book = ConsentBook()
    ended = False
    for step in steps:
        if step == "grant()":
            book.grant("consent-9", hi_types=["OPConsultation"])
        else:
            book.record(consent_update("consent-9", step))
            ended = ended or step.upper() in {"REVOKED", "EXPIRED", "DENIED"}
        grant = book.get("consent-9")
        assert grant is not None
        if ended:
            assert grant.ended and grant.status.upper() != "GRANTED"


async def test_a_grant_redelivered_after_the_revocation_is_ignored_and_logged_without_the_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = ConsentBook()
    await book.take(consent_update("consent-secret-9", "GRANTED"))
    await book.take(consent_update("consent-secret-9", "REVOKED"))
    with caplog.at_level(logging.WARNING, logger="health_async"):
        await book.take(consent_update("consent-secret-9", "GRANTED"))  # the grant's notification, redelivered late
        book.grant("consent-secret-9")  # and the hospital's own grant: final all the same
        await book.take(consent_update("consent-secret-9", "EXPIRED"))  # a second ending: the first one stands
    grant = await book.lookup("consent-secret-9")
    assert grant is not None and grant.status == "REVOKED"
    assert "consent_ended_is_final" in caplog.text and "secret" not in caplog.text and "req-1" not in caplog.text


# --- the guard holds before every page, and every retry of a page ---------------------------------------------


async def test_a_revocation_recorded_while_page_one_is_in_flight_stops_every_later_page(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    book = ConsentBook()
    book.grant("consent-9")
    asked = data_request(server, at=dt.datetime.now(dt.UTC))
    server.inject("hip_data_push", Fault(latency=0.2, times=1))  # page 1 is slow: the revocation lands meanwhile
    push = asyncio.create_task(client.abdm.push_health_data(asked, bundles(), consents=book))
    while server.calls("hip_data_push") == 0:  # noqa: ASYNC110 - page 1 reached the service (counted as it arrives)
        await asyncio.sleep(0)
    book.record(consent_update("consent-9", "REVOKED"))
    result = await push
    assert result.pushed == ("cc-1",)
    assert [(r.care_context_id, r.rule) for r in result.refused] == [(c, "consent_revoked") for c in CARE_CONTEXTS[1:]]
    assert len(server.abdm.pages(asked.transaction_id)) == 1  # no later page went out


@pytest.mark.parametrize("requested_at", ["the webhook's time", None])
async def test_the_window_closing_between_pages_stops_the_later_pages(
    server: FakeHealthServer, client: ha.HealthClient, requested_at: str | None
) -> None:
    start = dt.datetime.now(dt.UTC)

    def clock() -> dt.datetime:  # the window closes as soon as page 1 has reached the service
        return start if server.calls("hip_data_push") == 0 else start + LATE

    # without requested_at, the window counts from the push's first check: it is never skipped
    asked = data_request(server, at=start if requested_at else None, consent_id=None)
    result = await client.abdm.push_health_data(asked, bundles(), now=clock)
    assert result.pushed == ("cc-1",)
    assert {r.rule for r in result.refused} == {"push_window"} and len(result.refused) == 3
    assert len(server.abdm.pages(asked.transaction_id)) == 1


async def test_the_guard_runs_again_before_a_page_is_retried(
    server: FakeHealthServer, client: ha.HealthClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = ConsentBook()
    book.grant("consent-9")
    abdm = client.abdm
    send = abdm._send_once
    attempts: list[int] = []

    async def refused_at_first(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:  # page 1 never reached the service: it may be retried, and meanwhile...
            if revoke:
                book.record(consent_update("consent-9", "REVOKED"))
            raise ha.TransportError("connection refused", sent=False)
        return await send(*args, **kwargs)

    monkeypatch.setattr(abdm, "_send_once", refused_at_first)
    for revoke in (False, True):  # a retry goes out once the guard allows it; not once the consent is revoked
        attempts.clear()
        asked = data_request(server, at=dt.datetime.now(dt.UTC))
        result = await abdm.push_health_data(asked, {"cc-1": bundle()}, consents=book)
        if revoke:
            assert result.pushed == () and [r.rule for r in result.refused] == ["consent_revoked"]
            assert len(attempts) == 1 and server.abdm.pages(asked.transaction_id) == []
        else:
            assert result.pushed == ("cc-1",) and len(attempts) == 2


# --- any ConsentStore serves ------------------------------------------------------------------------------------


class DictStore:
    """A ConsentStore of its own (as a shared one would be): async lookup and take."""

    def __init__(self) -> None:
        self.grants: dict[str, ConsentGrant] = {}
        self.lookups = 0

    async def lookup(self, consent_id: str) -> ConsentGrant | None:
        self.lookups += 1
        return self.grants.get(consent_id)

    async def take(self, update: webhooks.WebhookEvent | ConsentUpdate) -> None:  # pragma: no cover - not sent here
        raise AssertionError("not called in this test")


async def test_push_and_receivers_take_any_consent_store(server: FakeHealthServer, client: ha.HealthClient) -> None:
    store = DictStore()
    assert isinstance(store, ConsentStore) and isinstance(ConsentBook(), ConsentStore)
    asked = data_request(server, at=dt.datetime.now(dt.UTC))
    result = await client.abdm.push_health_data(asked, {"cc-1": bundle()}, consents=store)
    assert result.pushed == () and result.refused[0].rule == "consent_unknown"
    store.grants["consent-9"] = ConsentGrant()
    result = await client.abdm.push_health_data(asked, {"cc-1": bundle(), "cc-2": bundle(1)}, consents=store)
    assert result.pushed == ("cc-1", "cc-2") and store.lookups >= 4  # a look before the push and before each page
    app = webhooks.abdm_asgi(SECRET, client=client, consents=store)
    await app.aclose()
    with pytest.raises(ha.InvalidArgumentType):
        await client.abdm.push_health_data(asked, {}, consents=object())  # type: ignore[arg-type]


# --- under the receivers: refused before loading, and the rules logged -----------------------------------------


def fetch_event(data: dict[str, Any], *, age: float = 0.0) -> bytes:
    """An ``abha.hip_data_fetch`` webhook made ``age`` seconds ago (signed now: a late delivery, not a replay)."""
    made = int(time.time() - age)
    payload = {"service": "abdm", "event": "abha.hip_data_fetch", "event_time": made,
               "transaction_id": data["transaction_id"], "timestamp": made, "data": data}  # fmt: skip
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("consent", "age", "rule"),
    [
        ("consent-revoked", 0.0, "consent_revoked"),
        ("consent-unknown", 0.0, "consent_unknown"),
        ("consent-narrow", 0.0, "consent_types"),  # granted for Prescription only; OPConsultation asked
        ("consent-9", LATE.total_seconds(), "push_window"),
        ("consent-9", 0.0, None),  # granted: the records are loaded and pushed
    ],
)
async def test_the_receiver_refuses_before_loading_the_records(
    server: FakeHealthServer,
    client: ha.HealthClient,
    caplog: pytest.LogCaptureFixture,
    consent: str,
    age: float,
    rule: str | None,
) -> None:
    book = ConsentBook()
    book.grant("consent-9")
    book.grant("consent-revoked")
    book.record(consent_update("consent-revoked", "REVOKED"))
    book.grant("consent-narrow", hi_types=[HiType.PRESCRIPTION])
    loaded: list[str] = []

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, Any]:
        loaded.append(request.transaction_id)
        return {cid: bundle(i) for i, cid in enumerate(request.care_contexts)}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch, consents=book)
    data = {**server.abdm.data_request(["cc-1", "cc-2"], oid="oid-1"), "consent_id": consent}
    body = fetch_event(data, age=age)
    with caplog.at_level(logging.INFO, logger="health_async"):
        assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
        await app.join()
    await app.aclose()
    if rule is None:
        assert len(loaded) == 1 and list(server.abdm.received(data["transaction_id"])) == ["cc-1", "cc-2"]
    else:
        assert loaded == [] and server.calls("hip_data_push") == 0
        assert f"refused before loading its records: {rule}" in caplog.text
    assert consent not in caplog.text and data["transaction_id"] not in caplog.text


async def test_the_receiver_logs_the_rule_of_each_care_context_refused(
    server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    async def on_data_fetch(request: HealthDataRequest) -> dict[str, Any]:  # discharge summaries: not asked for
        return {cid: bundle(i, "DischargeSummary") for i, cid in enumerate(request.care_contexts)}

    app = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch)
    data = server.abdm.data_request(["cc-1", "cc-2"], oid="oid-1")  # asks for OPConsultation
    body = fetch_event(data)
    with caplog.at_level(logging.INFO, logger="health_async"):
        assert (await call(app, body, signature=sign(body, SECRET))).body == b"accepted"
        await app.join()
    await app.aclose()
    assert "0 care context(s) pushed, 0 not found, 2 refused; record_type: 2" in caplog.text
    assert "cc-1" not in caplog.text and "cc-2" not in caplog.text


# --- what is validated is what is sent ----------------------------------------------------------------------------


def with_non_finite(value: float) -> dict[str, Any]:
    document = bundle(0, "Prescription")
    document["entry"][3]["resource"]["dosageInstruction"][0]["timing"]["repeat"]["period"] = value  # a decimal
    return document


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
async def test_a_non_finite_number_is_refused_at_encoding_not_sent_as_null(
    server: FakeHealthServer, client: ha.HealthClient, value: float
) -> None:
    asked = data_request(server, at=dt.datetime.now(dt.UTC), consent_id=None, hi_types=["Prescription"])
    with pytest.raises(ha.InvalidRequest) as refused:
        await client.abdm.push_health_data(asked, {"cc-2": with_non_finite(value)})
    assert not isinstance(refused.value, ha.BundleInvalid)  # refused as unencodable, before any validation
    message = str(refused.value)
    assert "'cc-2'" in message and "NaN or infinity" in message and "nan" not in message.replace("NaN", "")
    assert server.calls("hip_data_push") == 0
    with pytest.raises(ha.InvalidRequest) as refused:
        await client.abdm.link_care_contexts(
            [CareContext("cc-2", "OP visit", HiType.PRESCRIPTION, data=with_non_finite(value))],
            abha_address="shyam@sbx",
        )
    assert "'cc-2'" in str(refused.value) and server.calls("care_contexts_link") == 0


async def test_the_bytes_sent_are_what_is_validated(server: FakeHealthServer, client: ha.HealthClient) -> None:
    # a tuple is not a JSON array to the validator, but it is encoded as one: the bytes sent are a valid document
    document = bundle()
    document["entry"] = tuple(document["entry"])
    asked = data_request(server, at=dt.datetime.now(dt.UTC), consent_id=None)
    result = await client.abdm.push_health_data(asked, {"cc-1": document})
    assert result.pushed == ("cc-1",)
    assert json.loads(server.abdm.received(asked.transaction_id)["cc-1"])["entry"] == list(document["entry"])
    await client.abdm.link_care_contexts(
        [CareContext("cc-1", "OP visit", HiType.OP_CONSULTATION, data=document)], abha_address="shyam@sbx"
    )
    assert server.calls("care_contexts_link") == 1
