"""More of the fake's ABDM controls: a consent update and a data request naming its consent, sent to a hospital's
receiver; an unknown transaction asked for; what a patient's search shows in its repr."""

from __future__ import annotations

import pytest

import health_async as ha
from health_async import webhooks
from health_async.models import HealthDataRequest
from health_async.resources import ConsentBook
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hiu import example_document
from health_async.testing.abdm._hospital import UnknownTransaction
from health_async.testing.abdm._user_linking import PatientSearch

from .._abdm_fixtures import client, server
from ..conftest import Serve

__all__ = ["client", "server"]

SECRET = "whsec-fake-abdm-more"


async def test_a_hospital_pushes_under_a_granted_consent_and_never_once_the_fake_revokes_it(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    book = ConsentBook()
    book.grant("consent-9")
    asked: list[HealthDataRequest] = []
    updates: list[webhooks.WebhookEvent] = []

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, dict[str, object]]:
        asked.append(request)
        return {cid: {**example_document("OPConsultation"), "id": cid} for cid in request.care_contexts}

    async def on_event(event: webhooks.WebhookEvent) -> None:
        if event.event == "abha.consent_update":
            updates.append(event)

    handler = webhooks.abdm_handler(
        SECRET, client=client, on_data_fetch=on_data_fetch, on_event=on_event, consents=book
    )
    server.abdm.webhooks(f"{await serve({('POST', '/abdm'): handler.handle})}/abdm", SECRET)

    granted = await server.abdm.send_data_request(["cc-1"], consent_id="consent-9")
    await handler.join()
    assert asked[0].consent_id == "consent-9"
    assert set(server.abdm.received(granted.transaction_id)) == {"cc-1"}

    sent = await server.abdm.send_consent_update("consent-9", "REVOKED", artefact_ids=["artefact-1"])
    assert sent.status == 200
    (update,) = updates
    assert update.raw["service"] == "abha" and update.transaction_id == sent.transaction_id
    notification = update.raw["data"]["notification"]
    assert notification == {
        "consentRequestId": "consent-9",
        "status": "REVOKED",
        "consentArtefacts": {"id": "artefact-1"},  # one artefact: the page's object
    }
    grant = book.get("consent-9")
    assert grant is not None and grant.ended

    revoked = await server.abdm.send_data_request(["cc-1"], consent_id="consent-9")
    await handler.join()
    assert server.abdm.pages(revoked.transaction_id) == []  # refused by the book: nothing pushed
    assert server.abdm.received(revoked.transaction_id) == {}
    await handler.aclose()


async def test_a_data_request_names_its_consent_only_when_asked(server: FakeHealthServer) -> None:
    assert "consent_id" not in server.abdm.data_request(["cc-1"])  # the vendor's page shows none
    assert server.abdm.data_request(["cc-1"], consent_id="consent-9")["consent_id"] == "consent-9"


async def test_a_consent_update_needs_a_url_and_a_collection_of_artefacts(server: FakeHealthServer) -> None:
    with pytest.raises(RuntimeError, match="no webhook URL registered"):
        await server.abdm.send_consent_update("consent-9")
    with pytest.raises(ValueError, match="not one str"):
        await server.abdm.send_consent_update("consent-9", artefact_ids="artefact-1")


async def test_an_unknown_transaction_is_a_lookup_error_saying_what_to_pass(server: FakeHealthServer) -> None:
    with pytest.raises(LookupError, match=r"server\.abdm\.received: .*send_data_request") as info:
        server.abdm.received("txn-never-made")
    assert isinstance(info.value, UnknownTransaction) and not isinstance(info.value, KeyError)
    assert "txn-never-made" not in str(info.value)
    with pytest.raises(UnknownTransaction, match=r"server\.abdm\.hiu_key"):
        server.abdm.hiu_key("txn-never-made")
    made = server.abdm.data_request(["cc-1"])
    assert server.abdm.received(made["transaction_id"]) == {}  # made, nothing pushed yet: empty, no error
    server.reset()
    with pytest.raises(UnknownTransaction):
        server.abdm.received(made["transaction_id"])  # forgotten by the reset


def test_a_patient_search_repr_shows_no_name_nor_transaction_id() -> None:
    search = PatientSearch(
        "txn-secret-42",
        discover={"patient": {"reference": "PT-1042", "display": "Meera Krishnan"}},
        confirms=[{"error": {"code": 1000, "message": "wrong OTP"}}],
        linked=("OPD-2024-17",),
    )
    shown = repr(search)
    assert "Meera" not in shown and "txn-secret-42" not in shown and "PT-1042" not in shown
    assert "OPD-2024-17" not in shown
    assert shown == "PatientSearch(discover=answered, link_init=None, confirms=1, linked=1, errors=[1000])"
