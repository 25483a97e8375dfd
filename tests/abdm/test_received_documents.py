"""The requester's side of validation (issue 37): each decrypted bundle comes with its validation report and is
read with ``health_async.fhir.read``; nothing is refused (it is the patient's data); ``HealthDataStatus.from_bundle``
says which did not validate. The bundles are what the fake's HIP sends: the NRCeS guide's own examples."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import fhir, webhooks
from health_async.abdm_crypto import KeyMaterial
from health_async.fhir import RecordType
from health_async.models import HealthDataStatus, ReceivedBundle
from health_async.testing import FakeHealthServer
from health_async.testing.abdm._hiu import example_document

from ..conftest import Serve

SECRET = "documents-webhook-secret"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(
        base_url=server.url, token=server.token, client_id=server.client_id, user_id="oid-hiu", retry=NO_WAIT
    ) as c:
        yield c


async def _push(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient, hi_type: str, **options: Any
) -> tuple[tuple[ReceivedBundle, ...], dict[str, dict[str, Any]]]:
    """The fake HIP pushes a consent of ``hi_type`` to ``abdm_handler``; the client decrypts what arrived."""
    events: list[webhooks.WebhookEvent] = []

    async def on_event(event: webhooks.WebhookEvent) -> None:
        events.append(event)

    handler = webhooks.abdm_handler(SECRET, client=client, on_event=on_event)
    server.abdm.webhooks(f"{await serve({('POST', '/abdm'): handler.handle})}/abdm", SECRET)
    material = KeyMaterial.generate()
    await client.abdm.set_hiu_keys(material)
    consent = {"consent_id": "consent-1", "care_contexts": ["cc-1", "cc-2"], "hi_types": [hi_type]}
    sent = await asyncio.wait_for(server.abdm_hiu.push_for_consent(consent, **options), 5)
    await handler.aclose()
    assert sent.status == 200 and len(events) == 1
    return client.abdm.decrypt_health_data(events[0], material), sent.bundles


# ------------------------------------------------------------------------------------------ the requester's side


async def test_a_lab_report_pushed_by_the_fake_is_decrypted_validated_and_read(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    received, sent = await _push(serve, server, client, "DiagnosticReport")
    assert [b.care_context_id for b in received] == ["cc-1", "cc-2"]
    for bundle in received:
        assert bundle.bundle == sent[bundle.care_context_id] == example_document("DiagnosticReport")
        assert bundle.report.ok and bundle.report.record_type is RecordType.DIAGNOSTIC_REPORT
        record = fhir.read(bundle.bundle)
        assert record.record_type is RecordType.DIAGNOSTIC_REPORT
        assert record.patient is not None and record.patient.name == "ABC"  # the guide's fictional patient
        assert len(record.observations) == 2
    assert "ABC" not in repr(received) and "report" not in repr(received[0])  # no health data, nor its report
    statuses = [HealthDataStatus.from_bundle(b) for b in received]
    assert statuses == [HealthDataStatus("cc-1", True), HealthDataStatus("cc-2", True)]


async def test_a_wellness_record_reads_back_its_observations(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    received, _ = await _push(serve, server, client, "WellnessRecord")
    record = fhir.read(received[0].bundle)
    assert received[0].report.ok and record.record_type is RecordType.WELLNESS
    assert record.patient is not None and record.patient.name == "ABC" and len(record.observations) == 19


async def test_an_invalid_bundle_is_given_with_its_report_and_acknowledged_as_not_valid(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient
) -> None:
    broken = example_document("OPConsultation")
    del broken["entry"][0]["resource"]["status"]
    broken["entry"][0]["resource"]["date"] = "HIV clinic, 3pm"
    received, _ = await _push(serve, server, client, "OPConsultation", bundles={"cc-2": broken})
    good, bad = received
    assert good.report.ok and not bad.report.ok  # given all the same: nothing refused
    assert bad.bundle == broken and fhir.read(bad.bundle).patient is not None
    rules = {p.rule for p in bad.report.errors}
    status = HealthDataStatus.from_bundle(bad)
    assert status.care_context_id == "cc-2" and status.success is False and status.description is not None
    assert f"{len(bad.report.errors)} error(s)" in status.description
    assert all(rule in status.description for rule in rules)
    assert "HIV" not in status.description and "Bundle.entry" not in status.description  # rules only: no value
    await client.abdm.acknowledge_health_data("consent-1", "txn-1", [HealthDataStatus.from_bundle(good), status])
    (ack,) = server.abdm_hiu.acknowledgements
    assert [(s["care_context_id"], s["success"]) for s in ack["status_response"]] == [("cc-1", True), ("cc-2", False)]


def test_from_bundle_needs_a_report_and_names_at_most_ten_rules() -> None:
    with pytest.raises(ha.InvalidRequest, match="no validation report"):
        HealthDataStatus.from_bundle(ReceivedBundle("cc-1", {"resourceType": "Bundle"}))
    with pytest.raises(ha.InvalidRequest, match="takes a ReceivedBundle"):
        HealthDataStatus.from_bundle("cc-1")  # type: ignore[arg-type]
    problems = tuple(fhir.Problem("error", f"Bundle.x{i}", f"rule.{i}", "expected") for i in range(15))
    report = fhir.ValidationReport(None, problems + problems[:1])  # 16 errors of 15 rules
    status = HealthDataStatus.from_bundle(ReceivedBundle("cc-1", {"resourceType": "Bundle"}, report=report))
    assert status.description == (
        "FHIR bundle not valid: 16 error(s) (rule.0, rule.1, rule.2, rule.3, rule.4, rule.5, rule.6, rule.7, rule.8, "
        "rule.9 and 5 more)"
    )
