"""ABDM events carry no parsing status: :attr:`WebhookEvent.status` is ``None`` for them, their own ``data.status``
(a link's, a consent's) stays in their typed payload; the records events' parsing status is read as before."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from health_async import webhooks
from health_async.models import ConsentUpdate, LinkResult, LinkStatus
from health_async.testing.webhooks._send import sign
from health_async.webhooks import ParsingStatus

from .test_abdm_events import PAGES, example

SECRET = "whsec-status"


def signed(body: Mapping[str, object]) -> webhooks.WebhookEvent:
    raw = json.dumps(body).encode()
    return webhooks.verify(raw, sign(raw, SECRET), SECRET)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_no_abdm_event_of_the_vendors_pages_has_a_parsing_status(page: str) -> None:
    body = example(page)
    for event in (webhooks.parse_event(body), signed(body)):
        assert event.is_abdm
        assert event.status is None, (page, event.status)


@pytest.mark.parametrize("status", ["LINKED", "ERRORED", "GRANTED", "parsing_complete", "whatever"])
def test_an_abdm_events_own_status_stays_in_its_payload(status: str) -> None:
    link = example("link-care-context.mdx")
    link["data"]["status"] = status
    event = webhooks.parse_event(link)
    assert event.status is None
    assert event.data["status"] == status
    result = event.payload()
    assert isinstance(result, LinkResult)
    assert result.status is (LinkStatus.from_wire(status))


def test_a_consent_updates_status_is_in_its_payload_only() -> None:
    event = webhooks.parse_event(example("consent-update.mdx"))
    assert event.status is None
    payload = event.payload()
    assert isinstance(payload, ConsentUpdate)
    assert payload.status is not None


def test_an_event_on_the_abdm_service_with_an_unknown_name_has_no_parsing_status() -> None:
    event = webhooks.parse_event({"service": "abdm", "event": "abdm.something_new", "data": {"status": "DONE"}})
    assert event.status is None and event.data == {"status": "DONE"}


@pytest.mark.parametrize(
    ("wire", "expected"),
    [("parsing_complete", ParsingStatus.COMPLETE), ("parsing_paused", ParsingStatus.UNKNOWN)],
)
def test_a_records_events_status_is_still_parsed(wire: str, expected: ParsingStatus) -> None:
    body = {"service": "rec", "event": "rec.srp", "data": {"document_id": "d-1", "status": wire}}
    assert webhooks.parse_event(body).status is expected
    assert signed(body).status is expected
    # an event this version does not know, off ABDM, keeps the records' reading too
    assert webhooks.parse_event({"event": "rec.new_kind", "data": {"status": wire}}).status is expected
