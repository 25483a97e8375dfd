"""A hospital's bundles are validated before they leave (issue 37): ``client.abdm.push_health_data`` and
``link_care_contexts(..., data=...)`` refuse a bundle with a validation error before anything is sent
(``BundleInvalid``, naming the care context and the errors' paths and rules, never a value); ``validate=False``
opts out; warnings pass; ``webhooks.abdm_handler`` treats the refusal as any refusal before sending."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest

import health_async as ha
from health_async import errors, webhooks
from health_async.fhir import Problem
from health_async.models import CareContext, HealthDataRequest, HiType
from health_async.testing import FakeHealthServer, send_webhook
from health_async.testing.abdm._hiu import example_document

from ..conftest import Serve

SECRET = "validation-webhook-secret"
NO_WAIT = ha.RetryPolicy(attempts=3, base_delay=0, max_delay=0, jitter=0, retry_after_cap=0)
#: A value of health data put into the broken bundles: it must never appear in an error, repr or log.
SECRET_NOTE = "HIV clinic, 3pm"


def valid(i: int = 0) -> dict[str, Any]:
    document = example_document("OPConsultation")
    document["id"] = f"doc-{i}"
    return document


def broken() -> dict[str, Any]:
    """The guide's OP consultation with two errors: no Composition.status, and a date that is not a dateTime."""
    document = valid(9)
    composition = document["entry"][0]["resource"]
    del composition["status"]
    composition["date"] = SECRET_NOTE
    return document


def assert_names_no_value(exc: BaseException) -> None:
    shown = str(exc) + repr(exc)
    for value in (SECRET_NOTE, "ABC", "Consultation Report", "305fecc2"):  # the note, the patient, title, identifier
        assert value not in shown


async def test_a_push_with_an_invalid_bundle_sends_no_page_and_names_paths_and_rules(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    request = HealthDataRequest.from_event(server.abdm.data_request(["visit-0", "visit-1", "visit-2"]))
    bundles = {"visit-0": valid(0), "visit-1": broken(), "visit-2": valid(2)}
    with pytest.raises(ha.BundleInvalid) as info:
        await client.abdm.push_health_data(request, bundles)
    exc = info.value
    assert isinstance(exc, ha.InvalidRequest) and errors.BundleInvalid is ha.BundleInvalid
    assert server.calls("hip_data_push") == 0  # not even visit-0, which came first and was valid
    assert exc.care_context_id == "visit-1" and "'visit-1'" in str(exc)
    assert all(isinstance(p, Problem) for p in exc.problems)
    paths = {(p.path, p.rule) for p in exc.problems if p.severity == "error"}
    assert ("Bundle.entry[0].resource.status", "structure.required") in paths
    for path, rule in paths:
        assert path in str(exc) and rule in str(exc)
    assert_names_no_value(exc)


async def test_validate_false_pushes_the_bundle_as_it_is(server: FakeHealthServer, client: ha.HealthClient) -> None:
    request = HealthDataRequest.from_event(server.abdm.data_request(["visit-0", "visit-1"]))
    result = await client.abdm.push_health_data(request, {"visit-0": valid(), "visit-1": broken()}, validate=False)
    assert result.pushed == ("visit-0", "visit-1")
    assert json.loads(server.abdm.received(request.transaction_id)["visit-1"]) == broken()


async def test_bytes_and_text_are_validated_too_and_warnings_pass(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    request = HealthDataRequest.from_event(server.abdm.data_request(["visit-0"]))
    for raw in (json.dumps(broken()).encode(), json.dumps(broken())):
        with pytest.raises(ha.BundleInvalid, match="visit-0"):
            await client.abdm.push_health_data(request, {"visit-0": raw})
    assert server.calls("hip_data_push") == 0
    warned = valid()  # an R4 resource type the validator does not describe: a warning, not an error
    warned["entry"].append({"fullUrl": "Basic/extra", "resource": {"resourceType": "Basic", "id": "extra"}})
    result = await client.abdm.push_health_data(request, {"visit-0": json.dumps(warned).encode()})
    assert result.pushed == ("visit-0",)


async def test_a_bundle_the_guard_refuses_is_not_validated(server: FakeHealthServer, client: ha.HealthClient) -> None:
    """It is not sent anyway: the guard's reason is reported, the push of the rest goes on."""
    request = HealthDataRequest.from_event(
        server.abdm.data_request(["visit-0", "visit-1"], hi_types=("OPConsultation",))
    )
    wrong_type = example_document("Prescription")
    del wrong_type["timestamp"]  # invalid too, but of a type the request did not ask for
    result = await client.abdm.push_health_data(request, {"visit-0": valid(), "visit-1": wrong_type})
    assert result.pushed == ("visit-0",) and [r.care_context_id for r in result.refused] == ["visit-1"]


async def test_the_message_names_ten_errors_and_counts_the_rest(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    request = HealthDataRequest.from_event(server.abdm.data_request(["visit-0"]))
    many = {**valid(), **{f"unknown{i}": SECRET_NOTE for i in range(15)}}
    with pytest.raises(ha.BundleInvalid) as info:
        await client.abdm.push_health_data(request, {"visit-0": many})
    message = str(info.value)
    assert "15 error(s)" in message and "and 5 more" in message
    assert message.count("structure.unknown-element") == 10 and len(info.value.problems) == 15
    assert_names_no_value(info.value)


async def test_linked_data_is_validated_before_anything_is_sent(
    server: FakeHealthServer, client: ha.HealthClient
) -> None:
    for data in (broken(), json.dumps(broken()), json.dumps(broken()).encode()):
        contexts = [
            CareContext("visit-0", "OP visit", HiType.OP_CONSULTATION, data=valid()),
            CareContext("visit-1", "OP visit", HiType.OP_CONSULTATION, data=data),
        ]
        with pytest.raises(ha.BundleInvalid) as info:
            await client.abdm.link_care_contexts(contexts, abha_address="shyam@sbx")
        assert info.value.care_context_id == "visit-1" and str(info.value).startswith("care_contexts[1]")
        assert_names_no_value(info.value)
    assert server.calls("care_contexts_link") == 0
    contexts = [CareContext("visit-1", "OP visit", HiType.OP_CONSULTATION, data=json.dumps(valid()))]
    await client.abdm.link_care_contexts(contexts, abha_address="shyam@sbx")  # valid JSON text passes
    broken_link = [CareContext("visit-2", "OP visit", HiType.OP_CONSULTATION, data=broken())]
    await client.abdm.link_care_contexts(broken_link, abha_address="shyam@sbx", validate=False)
    held = server.abdm.links["shyam@sbx"]
    assert held["visit-1"]["data"] == valid() and held["visit-2"]["data"] == broken()


async def test_the_handler_treats_an_invalid_bundle_as_a_refusal_and_a_redelivery_asks_again(
    serve: Serve, server: FakeHealthServer, client: ha.HealthClient, caplog: pytest.LogCaptureFixture
) -> None:
    """``_abdm.py`` unchanged: ``BundleInvalid`` is an ``InvalidRequest``, which the handler logs by type and
    forgets (nothing was pushed), so the service's redelivery runs ``on_data_fetch`` again."""
    calls = 0

    async def on_data_fetch(request: HealthDataRequest) -> dict[str, dict[str, Any]]:
        nonlocal calls
        calls += 1
        return {cid: broken() if calls == 1 else valid() for cid in request.care_contexts}

    handler = webhooks.abdm_handler(SECRET, client=client, on_data_fetch=on_data_fetch)
    url = f"{await serve({('POST', '/abdm'): handler.handle})}/abdm"
    data = server.abdm.data_request(["visit-1"], oid="oid-1")
    body = {
        "service": "abdm",
        "event": "abha.hip_data_fetch",
        "event_time": "2026-11-28T10:00:00Z",
        "transaction_id": data["transaction_id"],
        "data": data,
    }
    with caplog.at_level(logging.DEBUG, logger="health_async"):
        assert await asyncio.wait_for(send_webhook(url, body, SECRET), 5) == 200
        await handler.join()
        assert server.calls("hip_data_push") == 0
        assert "not answered: BundleInvalid" in caplog.text
        assert await send_webhook(url, body, SECRET, timestamp=int(time.time()) + 1) == 200
        await handler.join()
    assert calls == 2 and list(server.abdm.received(data["transaction_id"])) == ["visit-1"]
    assert SECRET_NOTE not in caplog.text and "visit-1" not in caplog.text
    await handler.aclose()
