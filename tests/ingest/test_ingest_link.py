"""health_async.ingest link jobs: care contexts linked in bulk from CSV or JSON Lines, at most once each; unknown
outcomes checked (webhook recorded, or the linked list) before anything is sent again; LinkRecorder; the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from health_async import HealthClient, InvalidRequest, RetryPolicy, cli, webhooks
from health_async._wire import structure
from health_async.ingest import IngestJob, LinkRecorder
from health_async.models import CareContext, LinkResult
from health_async.testing import FakeHealthServer, Fault
from health_async.testing.abdm._hiu import example_document

from ..conftest import ServerThread

NO_RETRY = RetryPolicy(attempts=1)
HIP = "HIP-1"
SECRET = "whsec-link-tests"
BUNDLE = example_document("Prescription")  # the guide's own example: linked data is validated


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], retry=NO_RETRY, partner_hip_id=HIP
    ) as c:
        yield c


def rows_of(path: Path) -> dict[str, dict[str, Any]]:
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), "an item has two lines"
    return {r["key"]: r for r in rows}


def write_csv(path: Path, rows: list[dict[str, str]], columns: tuple[str, ...]) -> Path:
    lines = [",".join(columns)] + [",".join(row.get(c, "") for c in columns) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def visits(n: int, *, patients: int = 5) -> list[dict[str, str]]:
    return [
        {"care_context_id": f"visit-{i:04d}", "display": f"OP visit {i}", "hi_type": "OPConsultation",
         "oid": f"oid-{i % patients}"}
        for i in range(n)
    ]  # fmt: skip


def linked(server: FakeHealthServer) -> dict[str, dict[str, Any]]:
    """Every care context the fake holds, by id (each id is used by one patient in these tests)."""
    out: dict[str, dict[str, Any]] = {}
    for held in server.abdm.links.values():
        for cid, link in held.items():
            assert cid not in out
            out[cid] = link
    return out


# ------------------------------------------------------------------------------------------------- linking


async def test_a_csv_is_linked_once_per_row_and_a_bad_row_fails_alone_without_echoing_it(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    rows = visits(40)
    rows.insert(3, {"care_context_id": "visit-bad", "display": "", "hi_type": "OPConsultation", "oid": "oid-1"})
    rows.insert(7, {"care_context_id": "visit-x", "display": "Secret diagnosis", "hi_type": "XRay", "oid": "oid-1"})
    rows.insert(9, {"care_context_id": "visit-np", "display": "No patient", "hi_type": "Prescription"})
    rows.append(dict(rows[0]))  # the same row again: one item
    source = write_csv(tmp_path / "visits.csv", rows, ("care_context_id", "display", "hi_type", "oid", "extra"))
    out = tmp_path / "links.jsonl"

    summary = await IngestJob.link(source, out=out, client=client, concurrency=8).run()

    assert summary.status.done == 40 and summary.status.failed == 3 and summary.duplicates == 1
    made = linked(server)
    assert sorted(made) == sorted(r["care_context_id"] for r in visits(40))
    assert made["visit-0007"]["display"] == "OP visit 7" and made["visit-0007"]["hi_type"] == "OPConsultation"
    assert server.abdm.relinked == 0 and server.calls("care_contexts_link") == 40
    lines = rows_of(out)
    assert lines["visit-0005@oid:oid-0"]["link"] == {"care_context_id": "visit-0005", "status": "sent"}
    errors = {k: r["error"]["message"] for k, r in lines.items() if "error" in r}
    assert set(errors) == {"<row 5>", "<row 9>", "<row 11>"}  # the CSV's row numbers (the header is row 1)
    assert "display" in errors["<row 5>"] and "hi_type must be one of" in errors["<row 9>"]
    assert "no patient" in errors["<row 11>"]
    assert "Secret diagnosis" not in out.read_text() and "XRay" not in json.dumps(errors)


async def test_json_lines_with_a_bundle_and_each_way_of_naming_the_patient(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    items = [
        {"care_context_id": "cc-abha", "display": "Visit", "hi_type": "Prescription", "abha_address": "Shyam@sbx",
         "data": BUNDLE},
        {"care_context_id": "cc-oid", "display": "Visit", "hi_type": "DiagnosticReport", "oid": 1234},
        {"care_context_id": "cc-partner", "display": "Visit", "hi_type": "WellnessRecord", "partner_user_id": "p-9"},
        {"care_context_id": "cc-badbundle", "display": "Visit", "hi_type": "Prescription", "oid": "o", "data": "[1]"},
    ]  # fmt: skip
    source = tmp_path / "visits.jsonl"
    source.write_bytes(b"\n".join(orjson.dumps(i) for i in items) + b"\n\nnot json\n")
    out = tmp_path / "links.jsonl"

    summary = await IngestJob.link(source, out=out, client=client).run()

    assert summary.status.done == 3 and summary.status.failed == 2 and summary.blank == 1
    lines = rows_of(out)
    # the key names the patient: oid, else partner id, else the ABHA address in lower case
    assert {"cc-abha@shyam@sbx", "cc-oid@oid:1234", "cc-partner@partner:p-9"} <= set(lines)
    assert "FHIR bundle" in lines["<line 4>"]["error"]["message"]
    assert lines["<line 6>"]["error"]["message"] == "line 6 is not a JSON object"
    assert server.abdm.links["Shyam@sbx"]["cc-abha"]["data"] == BUNDLE  # the bundle went as base64, whole
    assert server.abdm.links["1234"]["cc-oid"]["data"] is None
    assert "cc-partner" in server.abdm.links["p-9"]  # named by the partner id alone: no default X-Pt-Id beside it


async def test_a_csv_without_a_required_column_is_refused_before_anything_is_sent(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "v.csv", visits(3), ("care_context_id", "hi_type", "oid"))
    with pytest.raises(InvalidRequest, match="no display column"):
        await IngestJob.link(source, out=tmp_path / "o.jsonl", client=client).run()
    nameless = write_csv(tmp_path / "n.csv", visits(3), ("care_context_id", "display", "hi_type"))
    with pytest.raises(InvalidRequest, match="names no patient"):
        await IngestJob.link(nameless, out=tmp_path / "o2.jsonl", client=client).run()
    latin = tmp_path / "latin.csv"  # a spreadsheet's export in Latin-1: refused whole, naming the line
    text = "care_context_id,display,hi_type,oid\nv1,Visit,OPConsultation,o\nv2,Visite \xe9t\xe9,OPConsultation,o\n"
    latin.write_bytes(text.encode("latin-1"))
    with pytest.raises(InvalidRequest, match=r"not UTF-8 text \(line 3\)"):
        await IngestJob.link(latin, out=tmp_path / "o3.jsonl", client=client).run()
    twice = write_csv(tmp_path / "t.csv", visits(3), ("care_context_id", "display", "hi_type", "oid", "oid"))
    with pytest.raises(InvalidRequest, match="repeats the column oid"):  # which patient? never the last by chance
        await IngestJob.link(twice, out=tmp_path / "o4.jsonl", client=client).run()
    assert server.calls("care_contexts_link") == 0


async def test_a_csv_with_a_large_bundle_a_quote_left_open_and_json_lines_with_a_bom(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    big = example_document("Prescription")
    big["entry"][0]["resource"]["title"] = "x" * 300_000  # over the csv module's 128 KiB default cell limit
    cell = json.dumps(big).replace('"', '""')
    source = tmp_path / "big.csv"
    source.write_text(
        f'care_context_id,display,hi_type,oid,data\nv1,Visit,Prescription,o1,"{cell}"\nv2,Visit,OPConsultation,o2,\n',
        encoding="utf-8",
    )
    summary = await IngestJob.link(source, out=tmp_path / "big.jsonl", client=client).run()
    assert summary.status.done == 2 and "v1" in server.abdm.links["o1"]
    open_quote = tmp_path / "q.csv"  # row 3 opens a quote it never closes: reported, not swallowing rows 4-5
    open_quote.write_text(
        'care_context_id,display,hi_type,oid\nv1,Visit,OPConsultation,o\nv2,"Visit 2,OPConsultation,o\n'
        "v3,Visit,OPConsultation,o\nv4,Visit,OPConsultation,o\n",
        encoding="utf-8",
    )
    await IngestJob.link(open_quote, out=tmp_path / "q.jsonl", client=client).run()
    errors = {k: v["error"]["message"] for k, v in rows_of(tmp_path / "q.jsonl").items() if "error" in v}
    assert any("cannot be read" in message and "quote" in message for message in errors.values()), errors
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + orjson.dumps(visits(1)[0]) + b"\n")
    summary = await IngestJob.link(bom, out=tmp_path / "bom-out.jsonl", client=client).run()
    assert summary.status.done == 1 and summary.status.failed == 0


# ------------------------------------------------------------------------------------------ unknown outcomes


async def test_a_link_of_unknown_outcome_found_in_the_linked_list_is_never_sent_again(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "v.csv", visits(6), ("care_context_id", "display", "hi_type", "oid"))
    out = tmp_path / "links.jsonl"
    # the service makes the first link, then a gateway loses its answer (502): the outcome is unknown to us
    server.inject("care_contexts_link", Fault(status=502, times=1))
    made = {"care_context_id": "visit-0000", "display": "OP visit 0", "hi_type": "OPConsultation", "oid": "oid-0"}
    server.abdm.links["oid-0"] = {"visit-0000": {**made, "data": None}}
    async with HealthClient(base_url=server.url, token=server.token, retry=NO_RETRY, partner_hip_id=HIP) as c:
        first = await IngestJob.link(source, out=out, client=c, concurrency=1).run()
    assert first.status.unknown == 1 and first.status.done == 5 and len(linked(server)) == 6
    unknown_key = first.status.unknown_keys[0]
    assert rows_of(out)[unknown_key]["error"]["outcome"] == "unknown"

    async with HealthClient(base_url=server.url, token=server.token, retry=NO_RETRY, partner_hip_id=HIP) as c:
        second = await IngestJob.link(source, out=out, client=c).run()

    assert second.ok and second.processed == 1
    assert server.calls("care_contexts_link") == 6 and server.calls("care_contexts_linked") == 1
    assert server.abdm.relinked == 0
    assert rows_of(out)[unknown_key]["link"]["status"] == "listed"


async def test_a_link_of_unknown_outcome_not_in_the_list_is_sent_again_once(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "v.csv", visits(4), ("care_context_id", "display", "hi_type", "oid"))
    out = tmp_path / "links.jsonl"
    server.inject("care_contexts_link", Fault(status=502, times=1))  # a gateway's 5XX: it may or may not be made
    first = await IngestJob.link(source, out=out, client=client, concurrency=1).run()
    assert first.status.unknown == 1 and len(linked(server)) == 3
    # a run that did nothing else does not send it blindly: it checks first
    second = await IngestJob.link(source, out=out, client=client).run()
    assert second.ok and len(linked(server)) == 4 and server.abdm.relinked == 0
    assert server.calls("care_contexts_linked") == 1 and server.calls("care_contexts_link") == 5
    assert rows_of(out)[first.status.unknown_keys[0]]["link"]["status"] == "sent"
    third = await IngestJob.link(source, out=out, client=client).run()
    assert third.processed == 0 and server.calls("care_contexts_link") == 5  # done items are never sent again


async def test_an_unknown_outcome_that_cannot_be_checked_stays_unknown_unless_relink_is_asked(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    source = tmp_path / "v.jsonl"
    source.write_bytes(
        orjson.dumps({"care_context_id": "c1", "display": "Visit", "hi_type": "Prescription", "abha_address": "a@sbx"})
        + b"\n"
    )
    out = tmp_path / "links.jsonl"
    server.inject("care_contexts_link", Fault(status=503, times=1))
    await IngestJob.link(source, out=out, client=client).run()
    again = await IngestJob.link(source, out=out, client=client).run()
    assert again.status.unknown == 1 and server.calls("care_contexts_link") == 1
    assert server.calls("care_contexts_linked") == 0  # no oid: nothing to check with
    line = rows_of(out)["c1@a@sbx"]["error"]
    assert line["outcome"] == "unknown" and "--relink-unknown" in line["message"]
    forced = await IngestJob.link(source, out=out, client=client, relink_unknown=True).run()
    assert forced.ok and server.calls("care_contexts_link") == 2 and "c1" in server.abdm.links["a@sbx"]


# ------------------------------------------------------------------------------------------ webhooks recorded


def link_result(cid: str, status: str, **data: Any) -> LinkResult:
    return structure({"care_context_id": cid, "status": status, **data}, LinkResult)


async def test_recorded_webhooks_show_in_the_status_and_settle_unknown_outcomes_without_a_request(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "v.csv", visits(5), ("care_context_id", "display", "hi_type", "oid"))
    out, journal = tmp_path / "links.jsonl", tmp_path / "links.db"
    server.inject("care_contexts_link", Fault(status=502, times=2))
    await IngestJob.link(source, out=out, journal=journal, client=client, concurrency=1).run()
    unknown = ["visit-0000", "visit-0001"]  # the first two got the 502s
    recorder = LinkRecorder(journal)
    # the service reports each link; the data can name the patient by every id it knows (abha, oid, partner)
    assert await recorder.record(link_result("visit-0000", "LINKED", oid="oid-0", abha_address="x@sbx"))
    error = "consent missing for mobile 9123456789 (asha@example.org)"  # the service's text: redacted in the line
    assert await recorder.record(link_result("visit-0001", "ERRORED", error=error, oid="oid-1"))
    assert await recorder.record(link_result("visit-0002", "LINKED", abha_address="y@sbx", oid="oid-2"))
    assert await recorder.record(link_result("visit-0003", "ERRORED", error="bad display", oid="oid-3"))
    assert not await recorder.record(link_result("visit-0009", "LINKED", oid="oid-4"))  # not in this journal
    assert not await recorder.record(link_result("visit-0004", "PENDING", oid="oid-4"))  # unknown status

    status = await IngestJob.status(journal)
    assert (status.linked, status.errored, status.waiting, status.unknown) == (2, 2, 1, 2)
    assert status.errored_keys == ("visit-0001@oid:oid-1", "visit-0003@oid:oid-3")

    calls = server.calls("care_contexts_link"), server.calls("care_contexts_linked")
    second = await IngestJob.link(source, out=out, journal=journal, client=client).run()
    assert (server.calls("care_contexts_link"), server.calls("care_contexts_linked")) == calls  # nothing sent
    lines = rows_of(out)
    assert lines[f"{unknown[0]}@oid:oid-0"]["link"] == {"care_context_id": unknown[0], "status": "webhook"}
    errored = lines[f"{unknown[1]}@oid:oid-1"]["error"]
    assert errored["type"] == "LinkErrored" and errored["retryable"] and "consent missing" in errored["message"]
    assert "9123456789" not in errored["message"] and "asha@" not in errored["message"]
    assert second.status.failed == 1 and second.status.retryable == 1
    # an ERRORED link was not made: --retry-failed sends it again
    third = await IngestJob.link(source, out=out, journal=journal, client=client, retry_failed=True).run()
    assert third.ok and "visit-0001" in server.abdm.links["oid-1"]


async def test_the_recorder_as_the_abdm_handlers_on_event_records_the_services_signed_webhooks(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "v.csv", visits(6), ("care_context_id", "display", "hi_type", "oid"))
    journal = tmp_path / "links.db"
    job = IngestJob.link(source, out=tmp_path / "links.jsonl", journal=journal, client=client)
    app = web.Application()
    runner = web.AppRunner(app)
    handler = webhooks.abdm_handler(SECRET, client=client, on_event=LinkRecorder(journal))  # before the journal
    app.router.add_post("/abdm", handler.handle)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.abdm.webhooks(f"http://127.0.0.1:{runner.addresses[0][1]}/abdm", SECRET)
    server.abdm.fail_links({"visit-0004"})
    try:
        summary = await job.run()
        await server.abdm.flush()  # the service's webhooks, one per link, have been answered
        # and one for a care context of another job: answered 200, recorded nowhere
        await client.abdm.link_care_contexts([CareContext("elsewhere", "Visit", "Prescription")], oid="oid-x")
        await server.abdm.flush()
    finally:
        await handler.aclose()
        await runner.cleanup()
    assert summary.ok and all(status == 200 for _, status in server.abdm.deliveries)
    status = await IngestJob.status(journal)
    assert (status.linked, status.errored, status.waiting) == (5, 1, 0)
    assert status.errored_keys == ("visit-0004@oid:oid-4",)


async def test_the_recorder_refuses_a_missing_journal_and_one_of_another_version_gets_the_new_columns(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path
) -> None:
    # a webhook that cannot be recorded fails (the handler answers 500: the service delivers it again later)
    with pytest.raises(InvalidRequest, match="does not exist"):
        await LinkRecorder(tmp_path / "nope.db").record(link_result("c", "LINKED", oid="o"))
    assert not (tmp_path / "nope.db").exists()
    # a journal written before link jobs existed (no payload/link columns) is upgraded when a run opens it
    ids = tmp_path / "ids.txt"
    ids.write_text(next(iter(server.data.documents[server.data.user_ids[0]])) + "\n")
    old = tmp_path / "old.db"
    db = sqlite3.connect(old)
    db.executescript(
        "CREATE TABLE items (key TEXT PRIMARY KEY, idx INTEGER NOT NULL, state TEXT NOT NULL, "
        "retryable INTEGER NOT NULL DEFAULT 0, line BLOB); CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);"
    )
    db.close()
    summary = await IngestJob.describe(ids, out=tmp_path / "d.jsonl", journal=old, client=client).run()
    assert summary.ok
    with contextlib.closing(sqlite3.connect(old)) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(items)")}
    assert {"payload", "link_status", "link_error"} <= columns


# ------------------------------------------------------------------------------------------------------ CLI


def test_cli_ingest_link_and_status_show_linked_errored_and_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_csv(tmp_path / "v.csv", visits(3), ("care_context_id", "display", "hi_type", "oid"))
    out, journal = tmp_path / "links.jsonl", tmp_path / "links.db"
    with ServerThread(documents_per_user=1) as server:
        monkeypatch.setenv("HEALTH_ASYNC_BASE_URL", server.url)
        monkeypatch.setenv("HEALTH_ASYNC_TOKEN", server.token)
        argv = ["ingest", "link", str(source), "--out", str(out), "--journal", str(journal), "--quiet",
                "--hip-id", HIP]  # fmt: skip
        assert cli.main(argv) == 0
        err = capsys.readouterr().err
        assert "done 3, failed 0" in err and "linked 0, errored 0, waiting 3" in err
        assert server.calls("care_contexts_link") == 3
    asyncio.run(LinkRecorder(journal).record(link_result("visit-0001", "ERRORED", error="x", oid="oid-1")))
    assert cli.main(["ingest", "status", "--journal", str(journal)]) == 0
    text = capsys.readouterr().out
    assert "linked 0" in text and "errored 1" in text and "  visit-0001@oid:oid-1" in text and "waiting 2" in text
    assert cli.main(["ingest", "status", "--journal", str(journal), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["op"] == "link" and data["errored_keys"] == ["visit-0001@oid:oid-1"] and data["waiting"] == 2
