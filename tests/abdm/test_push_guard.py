"""A hospital pushes only what a data request may receive (issue 36): within ABDM's 20-minute window, under a
consent granted and current (not revoked by a consent webhook already received, not expired, covering the requested
types and dates), and only bundles of a requested record type. What is refused is not sent, and the result says
why, per care context."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import webhooks
from health_async._wire import structure
from health_async.fhir import RecordType
from health_async.models import ConsentUpdate, HealthDataRequest, HiType
from health_async.resources import PUSH_WINDOW, ConsentBook
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hiu import example_document

NOW = dt.datetime(2026, 11, 28, 10, 0, tzinfo=dt.UTC)


def bundle(record: RecordType | None, i: int = 0) -> dict[str, Any]:
    """The guide's example of ``record`` (a valid document: pushes are validated); ``None``: an OP consultation whose
    Composition declares no profile (a bundle of no known record type, to the guard)."""
    document = example_document((record or RecordType.OP_CONSULT).hi_type.value)
    document["id"] = str(i)
    if record is None:
        del document["entry"][0]["resource"]["meta"]["profile"]
    return document


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id) as c:
        yield c


def request(server: FakeHealthServer, *, at: dt.datetime | None = NOW, **data: Any) -> HealthDataRequest:
    raw = server.abdm.data_request(["cc-1", "cc-2"], oid="oid-1")
    raw["key_information"]["dh_public_key"]["expiry"] = (NOW + dt.timedelta(days=1)).isoformat()
    return HealthDataRequest.from_event(
        {**raw, "hi_types": ["OPConsultation", "Prescription"], **data}, requested_at=at
    )


def consent_update(consent_id: str, status: str) -> ConsentUpdate:
    data = {
        "status": status,
        "notification": {"consentRequestId": "req-1", "status": status, "consentArtefacts": {"id": consent_id}},
    }
    return structure(data, ConsentUpdate)


async def test_a_request_answered_within_the_window_is_pushed_and_one_past_it_is_not(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    on_time = request(server)
    done = await client.abdm.push_health_data(on_time, {"cc-1": bundle(RecordType.OP_CONSULT)}, now=NOW + PUSH_WINDOW)
    assert done.pushed == ("cc-1",) and done.refused == ()
    late = request(server)
    result = await client.abdm.push_health_data(
        late, {"cc-1": bundle(None), "cc-2": bundle(None)}, now=NOW + PUSH_WINDOW + dt.timedelta(seconds=1)
    )
    assert result.pushed == () and [r.care_context_id for r in result.refused] == ["cc-1", "cc-2"]
    assert "20-minute" in result.refused[0].reason and {r.rule for r in result.refused} == {"push_window"}
    assert server.abdm.pages(late.transaction_id) == []  # nothing reached the service


async def test_a_bundle_of_a_type_not_asked_for_is_refused_alone(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    asked = request(server)  # OPConsultation and Prescription
    result = await client.abdm.push_health_data(
        asked, {"cc-1": bundle(RecordType.DISCHARGE_SUMMARY), "cc-2": bundle(RecordType.PRESCRIPTION)}, now=NOW
    )
    assert result.pushed == ("cc-2",)
    [refused] = result.refused
    assert refused.care_context_id == "cc-1" and "DischargeSummaryRecord" in refused.reason
    assert refused.rule == "record_type"
    assert list(server.abdm.received(asked.transaction_id)) == ["cc-2"]


@pytest.mark.parametrize(
    ("grant", "data", "reason"),
    [
        ({}, {}, None),  # granted, nothing more known: pushed
        (None, {}, "not known to be granted"),
        ({"expires_at": NOW}, {}, "expired"),
        ({"hi_types": [HiType.OP_CONSULTATION]}, {}, "types"),  # the request also asks for Prescription
        ({"hi_types": ["OPConsultation", "Prescription"]}, {}, None),
        (
            {"date_from": NOW - dt.timedelta(days=30), "date_to": NOW},
            {"date_range": {"from": (NOW - dt.timedelta(days=10)).isoformat(), "to": NOW.isoformat()}},
            None,
        ),
        (
            {"date_from": NOW - dt.timedelta(days=30), "date_to": NOW},
            {"date_range": {"from": (NOW - dt.timedelta(days=40)).isoformat(), "to": NOW.isoformat()}},
            "dates",
        ),
        ({"date_from": NOW - dt.timedelta(days=30)}, {}, "dates"),  # the consent has a range, the request none
    ],
)
async def test_the_consent_behind_a_request_is_checked(
    server: FakeHealthServer,
    client: ha.HealthClient,
    grant: dict[str, Any] | None,
    data: dict[str, Any],
    reason: str | None,
) -> None:
    book = ConsentBook()
    if grant is not None:
        book.grant("consent-9", **grant)
    asked = request(server, consent_id="consent-9", **data)
    result = await client.abdm.push_health_data(asked, {"cc-1": bundle(None)}, consents=book, now=NOW)
    if reason is None:
        assert result.pushed == ("cc-1",) and result.refused == ()
    else:
        assert result.pushed == () and reason in result.refused[0].reason
        assert server.abdm.pages(asked.transaction_id) == []


async def test_a_consent_revoked_by_a_webhook_is_never_pushed_for_again(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    book = ConsentBook()
    book.grant("consent-9")
    book.record(consent_update("consent-9", "REVOKED"))
    grant = book.get("consent-9")
    assert grant is not None and grant.ended and grant.status == "REVOKED"
    assert book.get("req-1") is not None  # the consent request's id is marked too
    asked = request(server, consent_id="consent-9")
    result = await client.abdm.push_health_data(asked, {"cc-1": bundle(None)}, consents=book, now=NOW)
    assert result.pushed == () and "revoked" in result.refused[0].reason
    assert result.refused[0].rule == "consent_revoked"
    book.record(consent_update("consent-9", "GRANTED"))  # the grant's notification, redelivered late: ignored
    book.grant("consent-9")  # so is the hospital's own grant: revoked is final
    grant = book.get("consent-9")
    assert grant is not None and grant.status == "REVOKED"
    again = await client.abdm.push_health_data(request(server, consent_id="consent-9"), {"cc-1": bundle(None)},
                                               consents=book, now=NOW)  # fmt: skip
    assert again.pushed == ()


async def test_a_request_naming_no_consent_is_checked_for_window_and_types_only(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    asked = request(server)  # the vendor's request names no consent
    result = await client.abdm.push_health_data(asked, {"cc-1": bundle(None)}, consents=ConsentBook(), now=NOW)
    assert result.pushed == ("cc-1",)


def test_the_webhook_gives_the_request_its_time_and_consent() -> None:
    event = webhooks.parse_event(
        {
            "event": "abha.hip_data_fetch",
            "event_time": int(NOW.timestamp()),
            "transaction_id": "t-1",
            "data": {
                "care_contexts": ["cc-1"],
                "abha_address": "shyam@abdm",
                "consent_id": "consent-9",
                "date_range": {"from": "2026-01-01T00:00:00Z", "to": "2026-02-01T00:00:00Z"},
                "key_information": {"dh_public_key": {"key_value": "k"}, "nonce": "n"},
            },
        }
    )
    asked = event.data_request()
    assert asked.requested_at == NOW and asked.consent_id == "consent-9"
    assert asked.starts_at == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert "shyam" not in repr(asked)  # the patient's ABHA address stays out of the repr


def test_consent_book_input_is_checked_and_it_holds_nothing_personal_in_its_repr() -> None:
    book = ConsentBook(max_consents=2)
    with pytest.raises(ha.InvalidRequest):
        book.grant("")
    with pytest.raises(ha.InvalidRequest):
        book.grant("c", hi_types="OPConsultation")
    with pytest.raises(ha.InvalidRequest):
        book.grant("c", hi_types=["LabReport"])
    with pytest.raises(ha.InvalidRequest):
        book.grant("c", expires_at=dt.datetime(2026, 1, 1))  # naive
    with pytest.raises(ha.InvalidRequest):
        book.record(webhooks.parse_event({"event": "rec.uploaded"}))
    for consent_id in ("a", "b", "c"):
        book.grant(consent_id)
    assert len(book) == 2 and book.get("a") is None  # bounded: the oldest forgotten
    assert repr(book) == "ConsentBook(consents=2)"
    with pytest.raises(ha.InvalidRequest):
        ConsentBook(max_consents=0)
