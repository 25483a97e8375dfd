"""A hospital's callback may answer with builder inputs (``fhir.Record``) instead of bundles (issue 37): the push
builds each with its care context's id, validates it, and sends the same bytes a direct build would."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

import health_async as ha
from health_async import fhir, webhooks
from health_async.models import HealthDataRequest
from health_async.testing import FakeHealthServer
from health_async.testing.webhooks._send import sign

from ..webhooks.test_abdm_asgi import SECRET, call, envelope
from ._inputs import LAB, PATIENT, WHEN, lab_observations

INPUTS: dict[str, Any] = {
    "patient": PATIENT,
    "organization": LAB,
    "date": WHEN,
    "observations": lab_observations(3),
    "conclusion": "Raised fasting glucose",
}


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[ha.HealthClient]:
    async with ha.HealthClient(base_url=server.url, token=server.token, client_id=server.client_id) as c:
        yield c


def test_a_record_builds_what_the_builder_builds_for_the_care_context() -> None:
    record = fhir.Record(fhir.lab_report, **INPUTS)
    assert record.build("visit-1") == fhir.lab_report(care_context_id="visit-1", **INPUTS)
    assert record.build("visit-1") != record.build("visit-2")  # the ids are the care context's
    assert repr(record) == "Record(lab_report)"  # the inputs (a person's data) stay out


def test_a_record_is_refused_with_a_function_that_is_no_builder_or_with_its_own_care_context() -> None:
    with pytest.raises(TypeError, match="builders"):
        fhir.Record(json.loads, **INPUTS)
    with pytest.raises(TypeError, match="care_context_id"):
        fhir.Record(fhir.lab_report, care_context_id="x", **INPUTS)


async def test_a_callback_answering_with_records_pushes_built_and_validated_documents(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    async def on_data_fetch(request: HealthDataRequest) -> webhooks.Bundles:
        return {cid: fhir.Record(fhir.lab_report, **INPUTS) for cid in request.care_contexts}

    handler = webhooks.abdm_asgi(SECRET, client=client, on_data_fetch=on_data_fetch)
    data = server.abdm.data_request(["visit-1", "visit-2"], oid="oid-1", hi_types=("DiagnosticReport",))
    body = envelope("abha.hip_data_fetch", data)
    assert (await call(handler, body, signature=sign(body, SECRET))).body == b"accepted"
    await handler.join()
    await handler.aclose()
    received = server.abdm.received(data["transaction_id"])
    assert sorted(received) == ["visit-1", "visit-2"]
    for cid in ("visit-1", "visit-2"):  # each built with its own care context's id, and valid
        assert json.loads(received[cid]) == fhir.lab_report(care_context_id=cid, **INPUTS)
        assert fhir.validate(received[cid]).ok


async def test_a_record_the_builder_refuses_is_an_invalid_request_naming_the_care_context(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    data = server.abdm.data_request(["visit-1"], oid="oid-1", hi_types=("DiagnosticReport",))
    broken = fhir.Record(fhir.lab_report, **{**INPUTS, "observations": []})
    with pytest.raises(ha.InvalidRequest, match=r"bundles\['visit-1'\]") as info:
        await client.abdm.push_health_data(HealthDataRequest.from_event(data), {"visit-1": broken})
    assert "Asha" not in str(info.value)
    assert server.abdm.pages(data["transaction_id"]) == []
