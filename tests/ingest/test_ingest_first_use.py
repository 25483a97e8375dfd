"""``ingest`` and ``ingest export`` as new users met them (issue 36): the option an error names exists, the items
table keeps the suffix given, a link journal exports its links, and a journal is not silently shared by two
inputs."""

from __future__ import annotations

import asyncio
import csv
from collections.abc import AsyncIterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from health_async import HealthClient, InvalidRequest, RetryPolicy, cli
from health_async._wire import structure
from health_async.ingest import IngestJob, LinkRecorder
from health_async.ingest._export import LINK_COLUMNS
from health_async.models import LinkResult
from health_async.testing import FakeHealthServer

NO_RETRY = RetryPolicy(attempts=1)


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=4) as srv:
        yield srv


@pytest.fixture
async def client(server: FakeHealthServer) -> AsyncIterator[HealthClient]:
    async with HealthClient(
        base_url=server.url, token=server.token, user_id=server.data.user_ids[0], retry=NO_RETRY, partner_hip_id="HIP-1"
    ) as c:
        yield c


def names(directory: Path, pattern: str) -> list[str]:
    return sorted(p.name for p in directory.glob(pattern))


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


async def describe_job(server: FakeHealthServer, client: HealthClient, tmp_path: Path) -> Path:
    ids = tmp_path / "a.txt"
    ids.write_text("\n".join(server.data.document_ids(server.data.user_ids[0])) + "\n")
    journal = tmp_path / "j.db"
    await IngestJob.describe(ids, out=tmp_path / "docs.jsonl", journal=journal, client=client).run()
    return journal


async def test_an_unknown_suffix_names_the_commands_own_option(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = await describe_job(server, client, tmp_path)
    argv = ["ingest", "export", "--journal", str(journal), "--to", str(tmp_path / "out.xlsx")]
    assert await asyncio.to_thread(cli.main, argv) == 2
    err = capsys.readouterr().err
    assert "--format" in err and "format=" not in err and err.count("\n") == 1
    assert not names(tmp_path, "out*")


@pytest.mark.parametrize("suffix", [".CSV", ".Parquet"])
async def test_the_items_table_keeps_the_suffix_as_given(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path, suffix: str
) -> None:
    journal = await describe_job(server, client, tmp_path)
    await IngestJob.export(journal, tmp_path / f"R{suffix}")
    assert names(tmp_path, "R*") == sorted([f"R.items{suffix}", f"R{suffix}"])


async def test_a_link_journal_exports_its_links(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "visits.csv"
    source.write_text(
        "care_context_id,display,hi_type,oid\n"
        "visit-1,OP visit,OPConsultation,oid-1\n"
        "visit-2,Lab,DiagnosticReport,oid-2\n"
        "visit-3,,OPConsultation,oid-3\n"  # no display: fails alone
    )
    journal = tmp_path / "links.db"
    await IngestJob.link(source, out=tmp_path / "links.jsonl", journal=journal, client=client).run()
    linked = structure({"care_context_id": "visit-1", "status": "LINKED", "oid": "oid-1"}, LinkResult)
    assert await LinkRecorder(journal).record(linked)  # the service's webhook for the first

    argv = ["ingest", "export", "--journal", str(journal), "--to", str(tmp_path / "links.csv")]
    assert await asyncio.to_thread(cli.main, argv) == 0
    assert "exported 3 links" in capsys.readouterr().err
    assert names(tmp_path, "links*.csv") == ["links.csv"]  # no empty items table
    rows = {row["key"]: row for row in read_csv(tmp_path / "links.csv")}
    assert list(next(iter(rows.values()))) == list(LINK_COLUMNS)
    first, second, bad = (
        rows["visit-1@oid:oid-1"],
        rows["visit-2@oid:oid-2"],
        rows["<row 4>"],
    )  # a row that breaks a rule is keyed by its number
    assert (first["status"], first["care_context_id"], first["outcome"], first["webhook_status"]) == (
        "done",
        "visit-1",
        "sent",
        "LINKED",
    )
    assert (second["care_context_id"], second["outcome"], second["webhook_status"]) == ("visit-2", "sent", "")
    # a row refused when read has no care context the job vouches for: null, as in the output line
    assert bad["status"] == "failed" and bad["care_context_id"] == "" and bad["error_type"]

    await IngestJob.export(journal, tmp_path / "links.parquet")
    table = pq.read_table(tmp_path / "links.parquet")
    assert table.column_names == list(LINK_COLUMNS) and table.num_rows == 3


async def test_a_journal_made_from_one_input_refuses_another(
    server: FakeHealthServer, client: HealthClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = await describe_job(server, client, tmp_path)
    other = tmp_path / "b.txt"
    other.write_text("doc-other\n")
    sent = len(server.requests)
    with pytest.raises(InvalidRequest, match="another input file"):
        await IngestJob.describe(other, out=tmp_path / "docs.jsonl", journal=journal, client=client).run()
    assert len(server.requests) == sent  # nothing read or sent
    assert (await IngestJob.status(journal)).total == 4  # b's id was not added

    # the same input, grown, is still the job's: its new line is described
    ids = tmp_path / "a.txt"
    ids.write_text(ids.read_text() + "doc-added\n")
    summary = await IngestJob.describe(ids, out=tmp_path / "docs.jsonl", journal=journal, client=client).run()
    assert summary.status.total == 5
