"""Webhooks: signature verification, parsing of the vendor's example bodies, the aiohttp handler end to end."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import logging
import time
from typing import Any

import aiohttp
import orjson
import pytest

from health_async import webhooks
from health_async.errors import InvalidRequest, WebhookSignatureError
from health_async.testing.webhooks._send import send_webhook, sign
from health_async.webhooks import EventKind, ParsingStatus, WebhookEvent

from ..conftest import Serve

SECRET = "whsec-test-3f9a1c"
OTHER_SECRET = "whsec-other-77b2"
NOW = 1_784_460_124

# The request bodies of the vendor's pages, byte for byte (spec/vendor/*.mdx).
RECORD_UPLOADED = b"""{
  "service": "rec",
  "event": "rec.uploaded",
  "event_time": 1784460123,
  "transaction_id": "f9be74b5-edd4-43fe-83b9-2f4f80d11233",
  "timestamp": 1784460124,
  "business_id": "7177582627443091",
  "client_id": "sachin",
  "data": {
    "doctor_id": "177582627448596",
    "document_id": "f9be74b5-edd4-43fe-83b9-2f4f80d11233",
    "patient_id": "178213256173099"
  }
}"""

# parsing-webhook-smart-report.mdx as printed: the trailing comma after "identifier" makes it invalid JSON.
SMART_REPORT_AS_PRINTED = b"""{
        "event": "rec.srp",
        "service": "rec",
        "event_time": 1759234802,
        "transaction_id": "4d39628e-7916-47d7-bc35-a00cb986942b",
        "data": {
             "status": "parsing_complete",
             "document_id": "ed66604d-9d62-4f71-a5fb-b78a490148a0",
             "identifier": "ekacare-sr-82b9b563-6c83-48e6-a89e-c2621db5599a",
        }
}"""
SMART_REPORT = SMART_REPORT_AS_PRINTED.replace(b'5599a",\n', b'5599a"\n')

PII = b"""{
  "event": "rec.pii",
  "service": "rec",
  "event_time": 1759234802,
  "transaction_id": "4d39628e-7916-47d7-bc35-a00cb986942b",
  "data": {
    "status": "parsing_complete",
    "document_id": "ed66604d-9d62-4f71-a5fb-b78a490148a0",
    "data": {
      "pii": [
        {
          "file_index": 0,
          "page_num": 1,
          "document_date": 1562697000,
          "patient": {
            "age": {
              "years": 25,
              "months": 0,
              "days": 0
            },
            "gender": "male",
            "name": "THREE DUMMY"
          },
          "report_info": {
            "date_sample_collection": "10/07/2019 15:07:00",
            "date_sample_received": "10/07/2019 15:08:19",
            "date_report_generated": "10/07/2019 15:44:01",
            "doctor": "Dr. UNKNWON",
            "facility": "Dr Lal PathLabs"
          }
        }
      ]
    }
  }
}

"""

CLASSIFICATION = b"""{
        "event": "rec.classification",
        "service": "rec",
        "event_time": 1759234802,
        "transaction_id": "4d39628e-7916-47d7-bc35-a00cb986942b",
        "data": {
             "status": "parsing_complete",
             "document_id": "ed66604d-9d62-4f71-a5fb-b78a490148a0",
             "document_classification": "lab_report"
        }
}"""


def vendor_header(secret: str, payload: bytes, timestamp: int) -> str:
    """The header exactly as the vendor's guide computes it (generate_signature_header, with a fixed time)."""
    signed_payload = f"{timestamp}.{payload.decode()}"
    signature = hmac.new(key=secret.encode(), msg=signed_payload.encode(), digestmod=hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={signature}"


def check(body: bytes, header: str | None, secret: Any = SECRET, **kwargs: Any) -> WebhookEvent:
    kwargs.setdefault("now", NOW)
    return webhooks.verify(body, header, secret, **kwargs)


def refused(body: bytes, header: str | None, secret: Any = SECRET, **kwargs: Any) -> str:
    """verify must raise WebhookSignatureError; its message never shows the secret(s) or the body."""
    with pytest.raises(WebhookSignatureError) as info:
        check(body, header, secret, **kwargs)
    message = str(info.value)
    for s in (SECRET, OTHER_SECRET):
        assert s not in message
    assert "THREE DUMMY" not in message and "178213256173099" not in message
    return message


# ----------------------------------------------------------------------------------------------- signatures


def test_valid_signature_from_the_vendor_algorithm_verifies() -> None:
    event = check(RECORD_UPLOADED, vendor_header(SECRET, RECORD_UPLOADED, NOW))
    assert event.event == "rec.uploaded"
    assert event.signed_at == dt.datetime.fromtimestamp(NOW, tz=dt.UTC)


def test_sign_helper_matches_the_vendor_algorithm() -> None:
    assert sign(RECORD_UPLOADED, SECRET, timestamp=NOW) == vendor_header(SECRET, RECORD_UPLOADED, NOW)
    assert sign(RECORD_UPLOADED, SECRET.encode(), timestamp=NOW) == vendor_header(SECRET, RECORD_UPLOADED, NOW)


def test_str_body_and_spaces_in_header_are_accepted() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW).replace(",", " , ")
    assert check(RECORD_UPLOADED.decode(), header).event == "rec.uploaded"  # type: ignore[arg-type]


def test_uppercase_hex_and_unknown_schemes_are_accepted() -> None:
    t, v1 = sign(RECORD_UPLOADED, SECRET, timestamp=NOW).split(",")
    header = f"{t},v0=deadbeef,{v1.upper().replace('V1=', 'v1=')},v2=whatever"
    assert check(RECORD_UPLOADED, header).event == "rec.uploaded"


@pytest.mark.parametrize("header", [None, "", "   "])
def test_missing_header_is_refused(header: str | None) -> None:
    assert "missing Eka-Webhook-Signature" in refused(RECORD_UPLOADED, header)


def test_header_without_t_is_refused() -> None:
    v1 = sign(RECORD_UPLOADED, SECRET, timestamp=NOW).split(",")[1]
    assert "no t=" in refused(RECORD_UPLOADED, v1)


def test_header_without_v1_is_refused() -> None:
    assert "no v1=" in refused(RECORD_UPLOADED, f"t={NOW}")
    assert "no v1=" in refused(RECORD_UPLOADED, f"t={NOW},v0=" + "a" * 64)


@pytest.mark.parametrize("t", ["", "abc", "-5", "1.5", "1e9", "١٢٣", "9" * 13])
def test_header_with_bad_t_is_refused(t: str) -> None:
    assert "t= is not a unix time" in refused(RECORD_UPLOADED, f"t={t},v1=" + "a" * 64)


def test_header_with_two_t_is_refused() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW) + f",t={NOW}"
    assert "more than one t=" in refused(RECORD_UPLOADED, header)


@pytest.mark.parametrize("v1", ["z" * 64, "a" * 63, "a" * 65, "", "ä" * 64])
def test_non_hex_v1_is_refused(v1: str) -> None:
    assert "not 64 hex digits" in refused(RECORD_UPLOADED, f"t={NOW},v1={v1}")


def test_item_without_equals_is_refused() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW) + ",garbage"
    assert "has no '='" in refused(RECORD_UPLOADED, header)


def test_too_many_v1_values_are_refused() -> None:
    good = sign(RECORD_UPLOADED, SECRET, timestamp=NOW)
    assert "too many" in refused(RECORD_UPLOADED, good + (",v1=" + "b" * 64) * 16)


def test_wrong_secret_is_refused() -> None:
    header = sign(RECORD_UPLOADED, OTHER_SECRET, timestamp=NOW)
    assert "no v1 signature matches" in refused(RECORD_UPLOADED, header)


def test_body_changed_by_one_byte_is_refused() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW)
    changed = RECORD_UPLOADED.replace(b"178213256173099", b"178213256173098")
    assert len(changed) == len(RECORD_UPLOADED) and changed != RECORD_UPLOADED
    assert "no v1 signature matches" in refused(changed, header)
    # re-serialising the JSON (same content, other whitespace) also breaks it: verify needs the raw bytes
    assert "no v1 signature matches" in refused(orjson.dumps(orjson.loads(RECORD_UPLOADED)), header)


def test_timestamp_changed_in_header_is_refused() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW).replace(f"t={NOW}", f"t={NOW + 1}")
    assert "no v1 signature matches" in refused(RECORD_UPLOADED, header)


def test_timestamp_too_old_is_refused_and_edge_accepted() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW - 181)
    message = refused(RECORD_UPLOADED, header)
    assert "181 s old" in message and "tolerance of 180 s" in message
    assert check(RECORD_UPLOADED, sign(RECORD_UPLOADED, SECRET, timestamp=NOW - 180)).event == "rec.uploaded"


def test_timestamp_too_far_in_the_future_is_refused_and_edge_accepted() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW + 181)
    assert "181 s in the future" in refused(RECORD_UPLOADED, header)
    assert check(RECORD_UPLOADED, sign(RECORD_UPLOADED, SECRET, timestamp=NOW + 180)).event == "rec.uploaded"


def test_tolerance_is_configurable() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW - 100)
    assert check(RECORD_UPLOADED, header, tolerance=100).event == "rec.uploaded"
    refused(RECORD_UPLOADED, header, tolerance=99.5)


def test_now_defaults_to_the_clock() -> None:
    assert webhooks.verify(RECORD_UPLOADED, sign(RECORD_UPLOADED, SECRET), SECRET).event == "rec.uploaded"
    with pytest.raises(WebhookSignatureError):
        webhooks.verify(RECORD_UPLOADED, sign(RECORD_UPLOADED, SECRET, timestamp=NOW - 10**6), SECRET)


def test_two_v1_values_with_one_valid_verify() -> None:
    good = sign(RECORD_UPLOADED, SECRET, timestamp=NOW).split(",")[1]
    stale = sign(RECORD_UPLOADED, OTHER_SECRET, timestamp=NOW).split(",")[1]
    assert check(RECORD_UPLOADED, f"t={NOW},{stale},{good}").event == "rec.uploaded"
    assert check(RECORD_UPLOADED, f"t={NOW},{good},{stale}").event == "rec.uploaded"
    # neither valid: refused
    assert "no v1 signature matches" in refused(RECORD_UPLOADED, f"t={NOW},{stale},v1=" + "0" * 64)


def test_two_secrets_with_the_second_valid_verify() -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW)
    assert check(RECORD_UPLOADED, header, [OTHER_SECRET, SECRET]).event == "rec.uploaded"
    assert check(RECORD_UPLOADED, header, (OTHER_SECRET.encode(), SECRET.encode())).event == "rec.uploaded"
    refused(RECORD_UPLOADED, header, [OTHER_SECRET, "third-secret"])


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe{}", "not valid JSON"),
        (b'[{"event": "rec.uploaded"}]', "not a JSON object"),
        (b'{"service": "rec"}', "no 'event' name"),
        (b'{"event": 5}', "no 'event' name"),
        (b'{"event": ""}', "no 'event' name"),
    ],
)
def test_signed_body_that_is_not_an_event_is_refused(body: bytes, reason: str) -> None:
    assert reason in refused(body, sign(body, SECRET, timestamp=NOW))


def test_vendor_smart_report_example_as_printed_is_not_json() -> None:
    header = sign(SMART_REPORT_AS_PRINTED, SECRET, timestamp=NOW)
    assert "not valid JSON" in refused(SMART_REPORT_AS_PRINTED, header)


def test_a_str_body_decoded_with_surrogateescape_verifies_and_a_lone_surrogate_is_refused() -> None:
    raw = RECORD_UPLOADED.replace(b"}", b',"note":"\xff"}', 1)  # a byte that is not UTF-8, as some senders send
    header = sign(raw, SECRET, timestamp=NOW)
    with pytest.raises(WebhookSignatureError, match="not valid JSON"):  # verified, then refused as not JSON
        check(raw.decode("utf-8", "surrogateescape"), header)  # type: ignore[arg-type]
    assert "text of any bytes" in refused("\ud800{}", header)  # type: ignore[arg-type]


def test_compute_signature_refuses_what_no_header_can_carry() -> None:
    assert webhooks.compute_signature(RECORD_UPLOADED, SECRET, NOW) == webhooks.compute_signature(
        RECORD_UPLOADED, SECRET, str(NOW)
    )
    for timestamp in ("\u0661\u0662", "12.5", True):  # True: a bool is an int to the type checker, not to us
        with pytest.raises(InvalidRequest, match="timestamp"):
            webhooks.compute_signature(RECORD_UPLOADED, SECRET, timestamp)
    with pytest.raises(InvalidRequest, match="valid Unicode"):
        webhooks.compute_signature("\ud800", SECRET, NOW)


@pytest.mark.parametrize(
    "secret",
    ["", b"", [], ["ok", ""], None, 123, ["ok", 5], "k\ud800"],
    ids=["str", "bytes", "empty", "one-empty", "none", "int", "mixed", "lone-surrogate"],
)
def test_bad_secret_is_a_programming_error(secret: Any) -> None:
    header = sign(RECORD_UPLOADED, SECRET, timestamp=NOW)
    with pytest.raises(InvalidRequest, match="webhook secret"):
        check(RECORD_UPLOADED, header, secret)


@pytest.mark.parametrize("tolerance", [-1, float("nan"), float("inf"), "180", True, 10**400])
def test_bad_tolerance_is_a_programming_error(tolerance: Any) -> None:
    with pytest.raises(InvalidRequest, match="tolerance"):
        check(RECORD_UPLOADED, sign(RECORD_UPLOADED, SECRET, timestamp=NOW), tolerance=tolerance)


# ----------------------------------------------------------------------------------------------- parsing


def verified(body: bytes) -> WebhookEvent:
    return check(body, sign(body, SECRET, timestamp=NOW))


def test_record_uploaded_example_parses() -> None:
    event = verified(RECORD_UPLOADED)
    assert event.kind is EventKind.UPLOADED
    assert event.status is None
    assert event.service == "rec"
    assert event.document_id == "f9be74b5-edd4-43fe-83b9-2f4f80d11233"
    assert event.patient_id == "178213256173099"
    assert event.doctor_id == "177582627448596"
    assert event.business_id == "7177582627443091"
    assert event.client_id == "sachin"
    assert event.transaction_id == "f9be74b5-edd4-43fe-83b9-2f4f80d11233"
    assert event.event_time == dt.datetime(2026, 7, 19, 11, 22, 3, tzinfo=dt.UTC)
    assert event.timestamp == dt.datetime(2026, 7, 19, 11, 22, 4, tzinfo=dt.UTC)
    assert event.data == orjson.loads(RECORD_UPLOADED)["data"]
    assert event.raw == orjson.loads(RECORD_UPLOADED)


def test_smart_report_example_parses() -> None:
    event = verified(SMART_REPORT)
    assert (event.event, event.kind, event.status) == ("rec.srp", EventKind.SMART_REPORT, ParsingStatus.COMPLETE)
    assert event.document_id == "ed66604d-9d62-4f71-a5fb-b78a490148a0"
    assert event.identifier == "ekacare-sr-82b9b563-6c83-48e6-a89e-c2621db5599a"
    assert event.transaction_id == "4d39628e-7916-47d7-bc35-a00cb986942b"
    assert event.event_time == dt.datetime.fromtimestamp(1759234802, tz=dt.UTC)
    assert event.timestamp is None and event.patient_id is None


def test_pii_example_parses_and_keeps_the_pii() -> None:
    event = verified(PII)
    assert (event.event, event.kind, event.status) == ("rec.pii", EventKind.PII, ParsingStatus.COMPLETE)
    assert event.document_id == "ed66604d-9d62-4f71-a5fb-b78a490148a0"
    page = event.data["data"]["pii"][0]
    assert page["patient"]["name"] == "THREE DUMMY"
    assert page["report_info"]["facility"] == "Dr Lal PathLabs"


def test_classification_example_parses() -> None:
    event = verified(CLASSIFICATION)
    assert event.kind is EventKind.CLASSIFICATION
    assert event.status is ParsingStatus.COMPLETE
    assert event.document_classification == "lab_report"
    assert event.document_id == "ed66604d-9d62-4f71-a5fb-b78a490148a0"


@pytest.mark.parametrize(
    ("wire", "status"),
    [
        ("parsing_initiated", ParsingStatus.INITIATED),
        ("parsing_complete", ParsingStatus.COMPLETE),
        ("parsing_error", ParsingStatus.ERROR),
        ("parsing_paused", ParsingStatus.UNKNOWN),
        ("", ParsingStatus.UNKNOWN),
    ],
)
def test_parsing_status_values(wire: str, status: ParsingStatus) -> None:
    body = CLASSIFICATION.replace(b'"parsing_complete"', orjson.dumps(wire))
    assert verified(body).status is status


def test_unknown_event_parses_and_keeps_raw_data() -> None:
    payload = {"event": "rec.deleted", "service": "rec", "extra": [1, 2], "data": {"document_id": 42, "x": {"y": 1}}}
    body = orjson.dumps(payload)
    event = verified(body)
    assert event.event == "rec.deleted" and event.kind is EventKind.UNKNOWN
    assert event.document_id == "42"  # ids sent as numbers become strings
    assert event.data == {"document_id": 42, "x": {"y": 1}}
    assert event.raw == payload


def test_fields_of_an_unexpected_type_are_none_and_stay_in_raw() -> None:
    payload = {"event": "rec.srp", "event_time": "soon", "service": {}, "data": {"status": 3, "document_id": []}}
    event = verified(orjson.dumps(payload))
    assert (event.event_time, event.service, event.status, event.document_id) == (None, None, None, None)
    assert event.data == payload["data"]
    assert verified(b'{"event": "rec.srp", "data": [1]}').data == {}


def test_event_time_in_milliseconds_is_recognised() -> None:
    event = verified(b'{"event": "rec.srp", "event_time": 1759234802000}')
    assert event.event_time == dt.datetime.fromtimestamp(1759234802, tz=dt.UTC)


def test_parse_event_without_signature() -> None:
    event = webhooks.parse_event(orjson.loads(CLASSIFICATION))
    assert event.document_classification == "lab_report" and event.signed_at is None
    with pytest.raises(WebhookSignatureError):
        webhooks.parse_event({"data": {}})


def test_reprs_hide_personal_data() -> None:
    for body in (RECORD_UPLOADED, SMART_REPORT, PII, CLASSIFICATION):
        text = repr(verified(body))
        for secret in (
            "THREE DUMMY",
            "Dr. UNKNWON",
            "178213256173099",  # patient id
            "177582627448596",  # doctor id
            "4d39628e-7916-47d7-bc35-a00cb986942b",  # transaction id
            "ekacare-sr-82b9b563",  # care context
            "1562697000",
        ):
            assert secret not in text
    text = repr(verified(PII))
    assert "rec.pii" in text and "ed66604d-9d62-4f71-a5fb-b78a490148a0" in text


# ----------------------------------------------------------------------------------------------- aiohttp handler


class Receiver:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[WebhookEvent] = []
        self.fail = fail

    async def __call__(self, event: WebhookEvent) -> None:
        self.events.append(event)
        if self.fail:
            raise RuntimeError("database down for patient THREE DUMMY")


async def start(serve: Serve, receiver: Receiver, **kwargs: Any) -> str:
    handler = webhooks.aiohttp_handler([OTHER_SECRET, SECRET], receiver, **kwargs)
    base = await serve({("POST", "/hook"): handler, ("GET", "/hook"): handler})
    return f"{base}/hook"


async def test_handler_accepts_a_signed_webhook(serve: Serve) -> None:
    receiver = Receiver()
    url = await start(serve, receiver)
    assert await send_webhook(url, orjson.loads(PII), SECRET) == 200
    assert [e.kind for e in receiver.events] == [EventKind.PII]
    assert receiver.events[0].data["data"]["pii"][0]["patient"]["name"] == "THREE DUMMY"


async def test_handler_answers_400_to_a_bad_signature(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    receiver = Receiver()
    url = await start(serve, receiver)
    with caplog.at_level(logging.WARNING, logger="health_async"):
        assert await send_webhook(url, orjson.loads(PII), "not-the-secret") == 400
        assert await send_webhook(url, orjson.loads(PII), SECRET, timestamp=NOW - 10**6) == 400
    assert receiver.events == []
    assert "no v1 signature matches" in caplog.text and "s old" in caplog.text
    assert "THREE DUMMY" not in caplog.text and SECRET not in caplog.text


async def test_handler_answers_400_without_header_and_405_to_get(serve: Serve) -> None:
    receiver = Receiver()
    url = await start(serve, receiver)
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=CLASSIFICATION) as response:
            assert response.status == 400
            assert await response.text() == "webhook refused"
        async with session.get(url) as response:
            assert response.status == 405
        assert await send_webhook(url, orjson.loads(CLASSIFICATION), SECRET, session=session) == 200
    assert len(receiver.events) == 1


async def test_handler_answers_500_when_the_callback_fails(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    receiver = Receiver(fail=True)
    url = await start(serve, receiver)
    with caplog.at_level(logging.ERROR, logger="health_async"):
        assert await send_webhook(url, orjson.loads(PII), SECRET) == 500
    assert len(receiver.events) == 1
    assert "RuntimeError" in caplog.text and "rec.pii" in caplog.text
    assert "THREE DUMMY" not in caplog.text and "ed66604d" not in caplog.text


async def test_handler_answers_413_to_a_declared_large_body_without_reading_it(serve: Serve) -> None:
    receiver = Receiver()
    url = await start(serve, receiver, max_body_size=1000)
    port = int(url.split(":")[2].split("/")[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        # announce 10 MiB, send none of it: the answer must come anyway
        writer.write(b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n")
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 2)
    finally:
        writer.close()
    assert status_line.startswith(b"HTTP/1.1 413")
    assert receiver.events == []


async def test_handler_answers_413_to_a_chunked_body_once_over_the_cap(serve: Serve) -> None:
    receiver = Receiver()
    url = await start(serve, receiver, max_body_size=1000)
    port = int(url.split(":")[2].split("/")[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"POST /hook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 600
        for _ in range(2):  # 1200 bytes, over the cap; the body never ends
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 2)
    finally:
        writer.close()
    assert status_line.startswith(b"HTTP/1.1 413")
    assert receiver.events == []


async def test_handler_accepts_a_chunked_body_under_the_cap(serve: Serve) -> None:
    receiver = Receiver()
    url = await start(serve, receiver, max_body_size=len(CLASSIFICATION))

    async def chunks() -> Any:
        for i in range(0, len(CLASSIFICATION), 50):
            yield CLASSIFICATION[i : i + 50]

    headers = {"Eka-Webhook-Signature": sign(CLASSIFICATION, SECRET)}
    async with aiohttp.ClientSession() as session, session.post(url, data=chunks(), headers=headers) as response:
        assert response.status == 200
    assert receiver.events[0].document_classification == "lab_report"


async def test_handler_answers_413_through_send_webhook(serve: Serve) -> None:
    receiver = Receiver()
    url = await start(serve, receiver, max_body_size=100)
    assert await send_webhook(url, orjson.loads(PII), SECRET) == 413
    assert receiver.events == []


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_handler_checks_its_settings_when_built(size: Any) -> None:
    with pytest.raises(InvalidRequest, match="max_body_size"):
        webhooks.aiohttp_handler(SECRET, Receiver(), max_body_size=size)
    with pytest.raises(InvalidRequest, match="webhook secret"):
        webhooks.aiohttp_handler("", Receiver())


async def test_send_webhook_refuses_a_non_loopback_url() -> None:
    for url in ("https://example.com/hook", "http://10.0.0.1/hook", "ftp://127.0.0.1/hook", "not a url"):
        with pytest.raises(InvalidRequest, match="loopback"):
            await send_webhook(url, {"event": "rec.srp"}, SECRET)


# ----------------------------------------------------------------------------------------------- replays


class RecordingStore:
    """A custom SeenStore: a plain dict of key -> (token or None once done), recording every call."""

    def __init__(self, fail: bool = False) -> None:
        self.seen: dict[str, str | None] = {}
        self.calls: list[tuple[str, str, float | None]] = []
        self.fail = fail

    async def claim(self, key: str, expires_at: float, *, token: str) -> webhooks.Claim:
        self.calls.append(("claim", key, expires_at))
        if self.fail:
            raise ConnectionError("redis down")
        if key in self.seen:
            return webhooks.Claim.DONE if self.seen[key] is None else webhooks.Claim.IN_PROGRESS
        self.seen[key] = token
        return webhooks.Claim.NEW

    async def finish(self, key: str, *, token: str) -> None:
        self.calls.append(("finish", key, None))
        if self.seen.get(key) == token:
            self.seen[key] = None

    async def release(self, key: str, *, token: str) -> None:
        self.calls.append(("release", key, None))
        if key in self.seen and self.seen[key] == token:
            del self.seen[key]


class LegacyStore:
    """A user's store of the protocol before issue 42: add and discard only."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    async def add(self, key: str, expires_at: float) -> bool:
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    async def discard(self, key: str) -> None:
        self.seen.discard(key)


async def post(session: aiohttp.ClientSession, url: str, body: bytes, header: str) -> tuple[int, str]:
    async with session.post(url, data=body, headers={webhooks.SIGNATURE_HEADER: header}) as response:
        return response.status, await response.text()


async def test_handler_ignores_a_replay_of_an_accepted_webhook(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    receiver = Receiver()
    url = await start(serve, receiver)
    header = sign(PII, SECRET)
    async with aiohttp.ClientSession() as session:
        assert await post(session, url, PII, header) == (200, "ok")
        with caplog.at_level(logging.WARNING, logger="health_async"):
            assert await post(session, url, PII, header) == (200, "duplicate webhook ignored")
            # extra, reordered or dropped v1= values do not make the replay new
            assert await post(session, url, PII, f"v1={'0' * 64},{header}") == (200, "duplicate webhook ignored")
    assert len(receiver.events) == 1
    assert "replay of rec.pii ignored" in caplog.text and "THREE DUMMY" not in caplog.text


async def test_handler_asks_concurrent_deliveries_of_one_webhook_to_retry(serve: Serve) -> None:
    calls: list[WebhookEvent] = []

    async def slow(event: WebhookEvent) -> None:
        calls.append(event)
        await asyncio.sleep(0.05)

    handler = webhooks.aiohttp_handler(SECRET, slow)
    url = f"{await serve({('POST', '/hook'): handler})}/hook"
    header = sign(PII, SECRET)
    async with aiohttp.ClientSession() as session:
        answers = await asyncio.gather(*(post(session, url, PII, header) for _ in range(3)))
    # the first may yet fail and release its key: the others are asked to come back, not told "duplicate"
    assert sorted(answers) == [(200, "ok")] + [(503, "webhook already being processed, retry later")] * 2
    assert len(calls) == 1


async def test_handler_accepts_a_different_event_with_the_same_timestamp(serve: Serve) -> None:
    receiver = Receiver()
    url = await start(serve, receiver)
    t = int(time.time())
    # same second and same transaction_id: only the body differs
    async with aiohttp.ClientSession() as session:
        assert await post(session, url, SMART_REPORT, sign(SMART_REPORT, SECRET, timestamp=t)) == (200, "ok")
        assert await post(session, url, CLASSIFICATION, sign(CLASSIFICATION, SECRET, timestamp=t)) == (200, "ok")
        # the same event re-signed at another second is a new delivery too
        assert await post(session, url, SMART_REPORT, sign(SMART_REPORT, SECRET, timestamp=t - 1)) == (200, "ok")
        replay = await post(session, url, CLASSIFICATION, sign(CLASSIFICATION, SECRET, timestamp=t))
    assert replay == (200, "duplicate webhook ignored")
    kinds = [e.kind for e in receiver.events]
    assert kinds == [EventKind.SMART_REPORT, EventKind.CLASSIFICATION, EventKind.SMART_REPORT]


async def test_handler_forgets_a_webhook_whose_callback_failed(serve: Serve) -> None:
    attempts: list[WebhookEvent] = []

    async def flaky(event: WebhookEvent) -> None:
        attempts.append(event)
        if len(attempts) == 1:
            raise RuntimeError("database down")

    handler = webhooks.aiohttp_handler(SECRET, flaky)
    url = f"{await serve({('POST', '/hook'): handler})}/hook"
    header = sign(PII, SECRET)
    async with aiohttp.ClientSession() as session:
        assert (await post(session, url, PII, header))[0] == 500
        assert await post(session, url, PII, header) == (200, "ok")  # the redelivery runs
        assert await post(session, url, PII, header) == (200, "duplicate webhook ignored")
    assert len(attempts) == 2


async def test_forged_or_stale_webhooks_never_enter_the_store(serve: Serve) -> None:
    receiver, store = Receiver(), RecordingStore()
    url = await start(serve, receiver, seen_store=store)
    async with aiohttp.ClientSession() as session:
        assert (await post(session, url, PII, sign(PII, "not-the-secret")))[0] == 400
        assert (await post(session, url, PII, sign(PII, SECRET, timestamp=NOW - 10**6)))[0] == 400
        assert (await post(session, url, PII, "t=1,v1=zz"))[0] == 400
        assert (await post(session, url, b"[1]", sign(b"[1]", SECRET)))[0] == 400
        assert store.calls == []
        assert (await post(session, url, PII, sign(PII, SECRET)))[0] == 200
    assert [c[0] for c in store.calls] == ["claim", "finish"]
    assert len(receiver.events) == 1


async def test_custom_store_plugs_in_and_is_shared_between_handlers(serve: Serve) -> None:
    store = RecordingStore()
    first, second = Receiver(), Receiver()
    h1 = webhooks.aiohttp_handler(SECRET, first, seen_store=store, tolerance=60)
    h2 = webhooks.aiohttp_handler(SECRET, second, seen_store=store, tolerance=60)
    base = await serve({("POST", "/a"): h1, ("POST", "/b"): h2})
    t = int(time.time())
    header = sign(PII, SECRET, timestamp=t)
    async with aiohttp.ClientSession() as session:
        assert await post(session, f"{base}/a", PII, header) == (200, "ok")
        assert await post(session, f"{base}/b", PII, header) == (200, "duplicate webhook ignored")
    assert len(first.events) == 1 and second.events == []
    key = header.split("v1=")[1]  # the signature under the (only) secret, kept until t + tolerance
    assert store.calls == [("claim", key, t + 60), ("finish", key, None), ("claim", key, t + 60)]


class SlowStore(RecordingStore):
    """A store that does I/O, as a Redis one: the key is set when the command goes out, then the reply is awaited
    (held here until ``reply`` is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.reply = asyncio.Event()

    async def claim(self, key: str, expires_at: float, *, token: str) -> webhooks.Claim:
        first = await super().claim(key, expires_at, token=token)
        await self.reply.wait()
        return first


async def test_a_webhook_cancelled_while_its_key_is_stored_is_processed_when_redelivered(serve: Serve) -> None:
    receiver, store = Receiver(), SlowStore()
    url = await start(serve, receiver, seen_store=store)
    header = sign(PII, SECRET)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(TimeoutError):  # the sender gives up: the request is cancelled in the store's add
            async with asyncio.timeout(0.2):
                await post(session, url, PII, header)
        for _ in range(100):
            if ("release", store.calls[0][1], None) in store.calls:
                break
            await asyncio.sleep(0.01)
        store.reply.set()
        assert await post(session, url, PII, header) == (200, "ok")  # the redelivery is not taken for a replay
    assert len(receiver.events) == 1


async def test_a_failing_store_is_a_server_error(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    receiver = Receiver()
    url = await start(serve, receiver, seen_store=RecordingStore(fail=True))
    with caplog.at_level(logging.ERROR, logger="health_async"):
        async with aiohttp.ClientSession() as session:
            assert await post(session, url, PII, sign(PII, SECRET)) == (500, "webhook replay check failed")
    assert receiver.events == []
    assert "ConnectionError" in caplog.text


async def test_in_memory_store_evicts_expired_entries() -> None:
    now = [1000.0]
    store = webhooks.InMemorySeenStore(clock=lambda: now[0])
    assert await store.add("a", 1100.0)
    assert await store.add("b", 1050.0)
    assert not await store.add("a", 1100.0)
    now[0] = 1100.0  # still live at its expiry (verify accepts an age equal to the tolerance)
    assert not await store.add("a", 1100.0)
    assert len(store) == 1  # "b" is gone
    now[0] = 1100.5
    assert await store.add("a", 1200.0)  # expired, so new again
    assert len(store) == 1


async def test_in_memory_store_is_capped() -> None:
    store = webhooks.InMemorySeenStore(max_entries=2, clock=lambda: 0.0)
    for i in range(1000):
        assert await store.add(f"k{i}", 100.0 + i)
        assert len(store) <= 2
    assert not await store.add("k999", 1099.0)
    assert await store.add("k0", 100.0)  # the entry closest to expiry went first
    for _ in range(1000):  # discards leave stale heap entries; the heap is rebuilt before it grows far
        await store.discard("k0")
        await store.add("k0", 100.0)
    assert len(store._heap) <= 4


def test_store_and_handler_check_their_settings() -> None:
    bad: Any
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidRequest, match="max_entries"):
            webhooks.InMemorySeenStore(max_entries=bad)
    with pytest.raises(InvalidRequest, match="seen_store"):
        webhooks.aiohttp_handler(SECRET, Receiver(), seen_store=object())  # type: ignore[arg-type]
    assert isinstance(webhooks.InMemorySeenStore(), webhooks.SeenStore)
    assert isinstance(RecordingStore(), webhooks.SeenStore)
    assert not isinstance(LegacyStore(), webhooks.SeenStore)


async def test_a_store_of_the_old_protocol_still_works_with_a_deprecation_warning(serve: Serve) -> None:
    receiver, store = Receiver(), LegacyStore()
    with pytest.warns(DeprecationWarning, match="claim, finish and release") as warned:
        handler = webhooks.aiohttp_handler(SECRET, receiver, seen_store=store)  # type: ignore[arg-type]
    assert warned[0].filename == __file__  # pointed at the caller
    url = f"{await serve({('POST', '/hook'): handler})}/hook"
    header = sign(PII, SECRET)
    async with aiohttp.ClientSession() as session:
        assert await post(session, url, PII, header) == (200, "ok")
        assert await post(session, url, PII, header) == (200, "duplicate webhook ignored")
    assert len(receiver.events) == 1 and len(store.seen) == 1
