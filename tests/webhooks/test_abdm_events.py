"""The typed ``data`` of every ABDM webhook event, read from the vendor's own pages at test time.

Each page of the vendor's ``abdm-connect/webhooks/`` prints one JSON request body in a ```json block; the tests
take that block from the ``.mdx`` file (so they follow the page), structure its ``data`` with
``health_async._wire.structure`` into the model :data:`EVENT_PAYLOADS` names for its ``event``, and compare
with the values the page prints.

The pages are a verbatim copy of the vendor's ``abdm-connect/webhooks/*.mdx`` in ``tests/data/vendor/abdm-webhooks``
(as the OpenAPI files are in ``tests/data/vendor``), so every test runs on a clean clone.

Examples that are not strict JSON: the vendor's pages have printed bodies with a trailing comma
(``parsing-webhook-smart-report.mdx``), and JSON-with-comments is common in such docs. An example is parsed
strictly first; one that does not parse is read again with its ``//`` and ``/* */`` comments and trailing commas
removed (outside strings, see :func:`relaxed`), and only when its page is listed in :data:`NOT_STRICT_JSON`,
which is empty today (all twelve examples are strict JSON). A page that stops or starts being strict JSON fails
:func:`test_each_page_prints_one_example_strict_json_unless_listed`, so the list stays true.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest

from health_async import webhooks
from health_async._wire import structure
from health_async.models import (
    EVENT_PAYLOADS,
    AbhaCreated,
    CareContextDiscover,
    CareContextRef,
    ConsentArtefactRef,
    ConsentNotification,
    ConsentUpdate,
    DiscoverLinkConfirm,
    DiscoverLinkInit,
    HealthDataEntry,
    HealthDataRequest,
    HipKey,
    HiuDataPush,
    LinkInitPatient,
    LinkResult,
    LinkStatus,
    LockerCreated,
    PatientIdentifier,
    ProfileShare,
    SubscribedCareContext,
    SubscriptionDetails,
    SubscriptionMeta,
    SubscriptionModified,
    SubscriptionNotify,
    SubscriptionPeriod,
)
from health_async.testing.webhooks._send import sign
from health_async.webhooks import EventKind

T = TypeVar("T")

#: The vendor's pages, copied verbatim into the repository (as the OpenAPI files are): CI runs every test.
PAGES_DIR = Path(__file__).resolve().parent.parent / "data" / "vendor" / "abdm-webhooks"

#: Each page and the event its example is.
PAGES: dict[str, str] = {
    "abha-created.mdx": "abha.created",
    "consent-update.mdx": "abha.consent_update",
    "discover-care-context.mdx": "abha.care_context_discover",
    "discover-link-confirm.mdx": "abha.context_discover_link_confirm",
    "discover-link-init.mdx": "abha.care_context_discover_link_init",
    "hip-data-fetch.mdx": "abha.hip_data_fetch",
    "hip-scan-and-share.mdx": "abha.hip_profile_share",
    "hiu-data-push.mdx": "abha.hiu_data_push",
    "link-care-context.mdx": "abha.link_care_context",
    "locker-created.mdx": "abha.locker_created",
    "subscription-modify.mdx": "abha.subscription_modified",
    "subscription-notify.mdx": "abha.subscription_notify",
}

#: Pages whose example is not strict JSON (comments, trailing commas) and is read with :func:`relaxed`.
NOT_STRICT_JSON: frozenset[str] = frozenset()

#: The models that predate this module (``models/abdm/_hospital.py``): not lenient, and HealthDataRequest has required
#: fields.
OLDER_MODELS = (LinkResult, HealthDataRequest)

#: Wire keys whose values are personal data (or secrets, or health data) in the examples.
PII_KEYS = frozenset(
    {
        "abha_address",
        "abha_number",
        "patient_name",
        "gender",
        "year_of_birth",
        "value",
        "token",
        "content",
        "key_value",
        "nonce",
        "patient_reference",
        "ref_num",
    }
)

_JSON_BLOCK = re.compile(r"^```json[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_PLACEHOLDER = re.compile(r"<[^<>]*>")


# ----------------------------------------------------------------------------------- reading the pages


def relaxed(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments and trailing commas (before ``}`` or ``]``), outside JSON
    strings: what a documentation example that is not strict JSON needs to become JSON."""
    parts: list[str] = []  # a JSON string is one part, any other character a part of its own
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            parts.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            parts.append(text[i])
            i += 1
    kept: list[str] = []
    for index, part in enumerate(parts):
        if part == ",":
            following = next((later for later in parts[index + 1 :] if not later.isspace()), "")
            if following in ("}", "]"):
                continue
        kept.append(part)
    return "".join(kept)


def _block(page: str) -> str:
    blocks = _JSON_BLOCK.findall((PAGES_DIR / page).read_text(encoding="utf-8"))
    assert len(blocks) == 1, f"{page}: expected one ```json block, found {len(blocks)}"
    return str(blocks[0])


def example(page: str) -> dict[str, Any]:
    """The request body the page prints (read with :func:`relaxed` only when the page is in NOT_STRICT_JSON)."""
    text = _block(page)
    body = json.loads(relaxed(text) if page in NOT_STRICT_JSON else text)
    assert isinstance(body, dict)
    return body


def structured(page: str, cls: type[T]) -> T:
    """The page's ``data`` structured into ``cls``, which must be the model EVENT_PAYLOADS names for its event."""
    body = example(page)
    assert body["event"] == PAGES[page]
    assert EVENT_PAYLOADS[body["event"]] is cls
    return structure(body["data"], cls)


# ----------------------------------------------------------------------------------- the table and the pages


def test_every_abdm_event_kind_has_a_payload_model() -> None:
    abdm = {kind.value for kind in EventKind if kind.value.startswith("abha.")}
    assert set(EVENT_PAYLOADS) == abdm
    # every other EventKind is one of the records service's events, read into WebhookEvent's own fields: a new
    # event kind must be given a model here or be added to this list on purpose
    others = {kind.value for kind in EventKind if kind is not EventKind.UNKNOWN} - abdm
    assert others == {"rec.uploaded", "rec.srp", "rec.pii", "rec.classification"}
    assert set(PAGES.values()) == abdm
    with pytest.raises(TypeError):
        EVENT_PAYLOADS["abha.created"] = LockerCreated  # type: ignore[index]


def test_every_field_of_the_new_models_is_optional() -> None:
    for cls in set(EVENT_PAYLOADS.values()) - set(OLDER_MODELS):
        assert structure({}, cls) == cls(), cls.__name__  # type: ignore[call-arg]  # the older two are excluded
        assert attrs.has(cls) and "__slots__" in cls.__dict__, cls.__name__
        assert getattr(cls, "__wire_lenient__", False), cls.__name__


def test_the_pages_are_the_ones_modelled() -> None:
    assert {path.name for path in PAGES_DIR.glob("*.mdx")} == set(PAGES)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_page_prints_one_example_strict_json_unless_listed(page: str) -> None:
    text = _block(page)
    try:
        json.loads(text)
    except json.JSONDecodeError:
        strict = False
    else:
        strict = True
    assert strict is (page not in NOT_STRICT_JSON)
    assert isinstance(example(page)["data"], dict)


def test_relaxed_removes_comments_and_trailing_commas_outside_strings_only() -> None:
    text = '{\n  "url": "https://x.test/a,}", // the site\n  "list": [1, 2, ],\n  /* gone */ "s": "a // b",\n}'
    assert json.loads(relaxed(text)) == {"url": "https://x.test/a,}", "list": [1, 2], "s": "a // b"}
    assert json.loads(relaxed('{"q": "say \\"hi\\" // not a comment",}')) == {"q": 'say "hi" // not a comment'}


# ----------------------------------------------------------------------------------- one test per page


def test_abha_created() -> None:
    assert structured("abha-created.mdx", AbhaCreated) == AbhaCreated(
        abha_address="shyam@abdm",
        abha_number="12-2345-6789-0123",
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
    )


def test_consent_update() -> None:
    update = structured("consent-update.mdx", ConsentUpdate)
    assert update == ConsentUpdate(
        timestamp="<string>",
        status="<string>",
        notification=ConsentNotification(
            consent_request_id="<string>",
            status="<string>",
            consent_artefacts=(ConsentArtefactRef(id="<string>"),),  # one object on the page: a one-item tuple
        ),
    )


def test_consent_artefacts_as_a_list_are_read_too() -> None:
    data = {"notification": {"consentArtefacts": [{"id": "a-1"}, {"id": "a-2"}], "status": "GRANTED"}}
    notification = structure(data, ConsentUpdate).notification
    assert notification is not None and notification.status == "GRANTED"
    assert notification.consent_artefacts == (ConsentArtefactRef("a-1"), ConsentArtefactRef("a-2"))


def test_care_context_discover() -> None:
    discover = structured("discover-care-context.mdx", CareContextDiscover)
    assert discover == CareContextDiscover(
        abha_address="gajendrasingh5445@sbx",
        patient_name="Gajendra Singh",
        gender="M",
        year_of_birth=2001,
        identifiers=(
            PatientIdentifier(type="MOBILE", value="6260413674"),
            PatientIdentifier(type="ABHA_NUMBER", value=None),  # "" on the page
            PatientIdentifier(type="abhaAddress", value="gajendrasingh5445@sbx"),
        ),
        request_id="a273f8af-3b8e-42ed-8847-fbdb2e4207c3",
        txn_id="1fe0a9d8-6737-471a-87b4-867d45707db5",
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
    )
    assert discover.identifier("mobile") == "6260413674"
    assert discover.identifier("ABHA_ADDRESS") == "gajendrasingh5445@sbx"
    assert discover.identifier("ABHA_NUMBER") is None and discover.identifier("EMAIL") is None


def test_discover_link_init() -> None:
    assert structured("discover-link-init.mdx", DiscoverLinkInit) == DiscoverLinkInit(
        abha_address="gajendrasingh5445@sbx",
        patients=(
            LinkInitPatient(
                care_contexts=(CareContextRef(reference_number="CC101"),),
                count=1,
                hi_type="OPConsultation",
                id=None,  # "" on the page
                ref_num="temp",
            ),
        ),
        request_id="7234a162-1c76-486d-be8c-22cdf5c5007f",
        txn_id="1fe0a9d8-6737-471a-87b4-867d45707db5",
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
    )


def test_discover_link_confirm() -> None:
    assert structured("discover-link-confirm.mdx", DiscoverLinkConfirm) == DiscoverLinkConfirm(
        link_ref_number="temp",
        token="111111",
        request_id="546f3465-30fa-4894-89f4-b884a2683fdf",
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
    )


def test_hip_data_fetch() -> None:
    request = structured("hip-data-fetch.mdx", HealthDataRequest)
    assert request.transaction_id == ""  # empty on the page: from_event lets the event's stand in
    assert request.care_contexts == ("care_context_1", "care_context_2")
    assert request.hi_types == ("OPConsultation", "Prescription")
    assert (request.abha_address, request.oid, request.hip_id) == ("shyam@abdm", "<eka user id>", "<partner hip id>")
    assert request.partner_patient_id == "<partner patient id>"
    assert request.key.public_key == "base64-encoded public key"
    assert request.key.nonce == "base64-encoded 32-byte nonce"
    assert (request.key.crypto_alg, request.key.curve) == ("ECDH", "Curve25519")
    assert request.key.parameters == "Curve25519/32byte random key"
    assert request.key.expires_at == dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    body = example("hip-data-fetch.mdx")
    assert HealthDataRequest.from_event(body["data"], transaction_id="wh-1").transaction_id == "wh-1"


def test_profile_share() -> None:
    assert structured("hip-scan-and-share.mdx", ProfileShare) == ProfileShare(
        abha_address="shyam@abdm",
        abha_number="12-2345-6789-0123",
        hip_code="<counter id>",
        request_id="<request id>",  # wire req_id
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
    )
    assert structure({"request_id": "r-2"}, ProfileShare).request_id == "r-2"  # the other pages' spelling


def test_hiu_data_push() -> None:
    push = structured("hiu-data-push.mdx", HiuDataPush)
    assert push == HiuDataPush(
        consent_id="<string>",
        transaction_id="<string>",
        entries=(
            HealthDataEntry(
                care_context_id="<string>", content="<string>", checksum="<string>", media="application/fhir+json"
            ),
        ),
        key=HipKey(
            public_key="<string>",
            nonce="<string>",
            expiry="<string>",
            crypto_alg="<string>",
            curve="<string>",
            parameters="<string>",
        ),
        abha_address="shyam@abdm",
        abha_number=None,  # "" on the page
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner patient id>",
    )
    assert push.key is not None and push.key.expires_at is None  # "<string>" is no time


def test_link_care_context() -> None:
    assert structured("link-care-context.mdx", LinkResult) == LinkResult(
        care_context_id="c61f74f9-6f58-49b2-be18-8150bf0bd6ab",
        status=LinkStatus.LINKED,
        error=None,
        retry_count=0,
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
        abha_address="shyam@abdm",
    )


def test_locker_created() -> None:
    assert structured("locker-created.mdx", LockerCreated) == LockerCreated(
        abha_address="gajendrasingh2248@sbx",
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
        auto_approval_id="7186798d-971c-4fb4-a899-e8e7ebd69866",
        subscription_id="3e25fb90-f70e-4180-a966-e7b2a3f2239c",
    )


def test_subscription_modified() -> None:
    modified = structured("subscription-modify.mdx", SubscriptionModified)
    assert modified == SubscriptionModified(
        subscription=SubscriptionDetails(
            subscription_id="3e25fb90-f70e-4180-a966-e7b2a3f2239c",
            period=SubscriptionPeriod(start="2025-06-20T11:44:23.624Z", end="2125-06-20T11:44:23.624Z"),
            categories=("DATA", "LINK"),
            status="GRANTED",
        ),
        abha_address="gajendrasingh2248@sbx",
        oid="175041983138006",
        hip_id="<partner hip id>",
        partner_patient_id="<partner user id>",
    )
    assert modified.subscription is not None and modified.subscription.period is not None
    assert modified.subscription.period.starts_at == dt.datetime(2025, 6, 20, 11, 44, 23, 624000, tzinfo=dt.UTC)
    assert modified.subscription.period.ends_at == dt.datetime(2125, 6, 20, 11, 44, 23, 624000, tzinfo=dt.UTC)


def test_subscription_notify() -> None:
    assert structured("subscription-notify.mdx", SubscriptionNotify) == SubscriptionNotify(
        meta=SubscriptionMeta(
            event_id="<event id>",
            hip_id="<care-context producer hip id>",
            care_contexts=(
                SubscribedCareContext(care_context_id="<care-context id>", patient_reference="<patient reference id>"),
            ),
        ),
        abha_address="neelima0820@sbx",
        abha_number="12-2345-6789-0123",
        hip_id="<partner hip id>",
        oid="<eka user id>",
        partner_patient_id="<partner user id>",
    )


# ----------------------------------------------------------------------------------- personal data and repr


def _with_pii_values(node: Any, found: list[object], key: str | None = None) -> Any:
    """``node`` with every placeholder under a personal-data key replaced by a value of its own (so that it can
    be looked for in a repr, where ``"<string>"`` would also match a field that is rightly shown); the
    non-empty personal values are collected in ``found``."""
    if isinstance(node, dict):
        return {k: _with_pii_values(v, found, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_pii_values(item, found, key) for item in node]
    if key in PII_KEYS and node not in ("", None):
        if isinstance(node, str) and _PLACEHOLDER.fullmatch(node):
            node = f"pii-{key}-{len(found)}"
        found.append(node)
    return node


@pytest.mark.parametrize("page", sorted(PAGES))
def test_no_personal_value_of_the_example_is_in_the_repr(page: str) -> None:
    body = example(page)
    found: list[object] = []
    data = _with_pii_values(body["data"], found)
    model: Any = structure(data, EVENT_PAYLOADS[body["event"]])
    shown, read = repr(model), repr(attrs.asdict(model))
    assert found or page == "consent-update.mdx"  # the consent update carries no personal data
    for value in found:
        assert repr(value) in read, f"{page}: {value!r} was not read"  # read, so its absence below means hidden
        assert repr(value) not in shown, f"{page}: {value!r} is in the repr"
    assert type(model).__name__ in shown


def test_the_patient_reference_of_a_link_init_is_not_in_the_repr() -> None:
    patient = structure({"id": "MRN-445566", "ref_num": "REF-778899", "hi_type": "OPConsultation"}, LinkInitPatient)
    assert (patient.id, patient.ref_num) == ("MRN-445566", "REF-778899")
    assert "445566" not in repr(patient) and "778899" not in repr(patient)


# ----------------------------------------------------------------------------------- a misfit never loses the event


def test_a_field_of_the_wrong_type_is_read_as_not_sent() -> None:
    data = {
        "patient_name": "A B",
        "year_of_birth": "nineteen ninety",  # not a number
        "gender": ["M"],  # not a string
        "identifiers": "9999999999",  # not an array
        "request_id": "req-1",
        "txn_id": "txn-1",
    }
    discover = structure(data, CareContextDiscover)
    assert discover == CareContextDiscover(patient_name="A B", request_id="req-1", txn_id="txn-1")
    assert discover.year_of_birth is None and discover.gender is None and discover.identifiers == ()

    modified = structure(
        {
            "oid": "o-1",
            "subscription_details": {"subscription_id": "s-1", "period": "forever", "categories": "DATA"},
        },
        SubscriptionModified,
    )
    assert modified == SubscriptionModified(oid="o-1", subscription=SubscriptionDetails(subscription_id="s-1"))


def test_a_misfit_in_a_nested_item_drops_only_that_field() -> None:
    data = {
        "txn_id": "txn-1",
        "patient": [{"care_contexts": [{"reference_number": "CC1"}], "count": "many", "hi_type": 7.5}],
    }
    init = structure(data, DiscoverLinkInit)
    assert init == DiscoverLinkInit(
        txn_id="txn-1", patients=(LinkInitPatient(care_contexts=(CareContextRef("CC1"),), ref_num=None),)
    )
    push = structure({"consent_id": "c-1", "key_information": {"nonce": 5.5, "crypto_alg": "ECDH"}}, HiuDataPush)
    assert push == HiuDataPush(consent_id="c-1", key=HipKey(crypto_alg="ECDH"))
    # HipKey reads dh_public_key.* through dotted wire names: a dh_public_key that is not an object drops only the
    # fields under it (the nonce and the rest of the event are kept)
    push = structure({"consent_id": "c-1", "key_information": {"nonce": "n", "dh_public_key": "k"}}, HiuDataPush)
    assert push == HiuDataPush(consent_id="c-1", key=HipKey(nonce="n"))
    assert structure({"notification": ["GRANTED"], "status": "GRANTED"}, ConsentUpdate) == ConsentUpdate(
        status="GRANTED"
    )


@pytest.mark.parametrize(
    "page", sorted(page for page, event in PAGES.items() if EVENT_PAYLOADS[event] not in OLDER_MODELS)
)
def test_any_top_level_field_of_the_example_may_misfit(page: str) -> None:
    body = example(page)
    cls = EVENT_PAYLOADS[body["event"]]
    good: Any = structure(body["data"], cls)
    defaults = {field.name: field.default for field in attrs.fields(cls)}
    for key in body["data"]:
        bad: Any = structure({**body["data"], key: 1.5}, cls)  # 1.5 fits no field here
        changed = {
            name
            for name, value in attrs.asdict(bad, recurse=False).items()
            if value != attrs.asdict(good, recurse=False)[name]
        }
        assert len(changed) <= 1, (page, key, changed)
        assert all(getattr(bad, name) == defaults[name] for name in changed), (page, key)
        structure({**body["data"], key: {"unexpected": ["shape"]}}, cls)  # an object where it is not expected


# ------------------------------------------------------------------------------ through webhooks.verify


@pytest.mark.parametrize("page", sorted(PAGES))
def test_verify_gives_every_pages_event_its_typed_payload(page: str) -> None:
    body = json.dumps(example(page)).encode()
    event = webhooks.verify(body, sign(body, "whsec-pages"), "whsec-pages")
    payload = event.payload()
    assert event.kind.value == PAGES[page] and event.is_abdm
    assert type(payload) is EVENT_PAYLOADS[PAGES[page]]
    if PAGES[page] != "abha.hip_data_fetch":  # its transaction id falls back to the event's (see from_event)
        assert payload == structure(example(page)["data"], EVENT_PAYLOADS[PAGES[page]])


def test_an_unknown_or_rec_event_has_no_payload_and_is_never_an_error() -> None:
    for event_name in ("abha.some_future_event", "rec.uploaded"):
        body = json.dumps({"event": event_name, "service": "abdm", "data": {"anything": [1, 2]}}).encode()
        event = webhooks.verify(body, sign(body, "s"), "s")
        assert event.payload() is None and event.data == {"anything": [1, 2]}
    data = {"status": "GRANTED", "notification": {"consentRequestId": ["not", "an", "id"], "status": "GRANTED"}}
    body = json.dumps({"event": "abha.consent_update", "data": data}).encode()
    misfit = webhooks.verify(body, sign(body, "s"), "s").payload()
    assert isinstance(misfit, ConsentUpdate) and misfit.status == "GRANTED" and misfit.notification is not None
    assert misfit.notification.consent_request_id is None and misfit.notification.status == "GRANTED"
