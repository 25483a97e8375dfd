"""The hard way, for links: ``python -m health_async ingest link`` in a child process killed with SIGKILL at random
points (seeded), then run to completion: 10,000 care contexts, each linked exactly once at the fake server (which
counts every link it receives, repeats included), each with exactly one output line."""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from health_async.ingest import IngestJob
from health_async.testing import FakeHealthServer, Fault

from .test_ingest_crash import child_env, complete_lines, run_child

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

CARE_CONTEXTS = 10_000
KILLS = 8
SEED = 20261125


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=1) as srv:
        yield srv


def link_bodies(server: FakeHealthServer) -> Counter[str]:
    """Every care context id the fake received in a link request (a repeat counts twice)."""
    sent: Counter[str] = Counter()
    for r in server.requests:
        if r.route == "care_contexts_link" and isinstance(r.json, dict):
            sent.update(cc["care_context_id"] for cc in r.json["care_contexts"])
    return sent


async def test_ten_thousand_links_killed_at_random_points_are_each_made_exactly_once(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    source = tmp_path / "visits.csv"
    rows = ["care_context_id,display,hi_type,oid"]
    rows += [f"visit-{i:05d},OP visit {i},OPConsultation,patient-{i % 97}" for i in range(CARE_CONTEXTS)]
    source.write_text("\n".join(rows) + "\n")
    out, journal = tmp_path / "links.jsonl", tmp_path / "links.db"
    argv = ["ingest", "link", str(source), "--out", str(out), "--journal", str(journal),
            "--concurrency", "16", "--hip-id", "HIP-1", "--quiet"]  # fmt: skip
    server.inject("care_contexts_link", Fault(latency=0.002))  # links in flight at every kill
    env = child_env(server)
    rng = random.Random(SEED)
    for _ in range(KILLS):
        assert await run_child(argv, env, server, rng, most=1500) is None, "finished before the kills"
        assert max(link_bodies(server).values(), default=1) == 1, "a care context was linked twice"
    server.clear_faults()
    assert await run_child(argv, env) == 0

    sent = link_bodies(server)
    expected = {f"visit-{i:05d}" for i in range(CARE_CONTEXTS)}
    assert set(sent) == expected and max(sent.values()) == 1  # every one linked, none twice
    assert server.abdm.relinked == 0
    held = {cid for links in server.abdm.links.values() for cid in links}
    assert held == expected
    lines = complete_lines(out)
    assert len(lines) == CARE_CONTEXTS and len({r["key"] for r in lines}) == CARE_CONTEXTS
    assert all("link" in r for r in lines)
    how = Counter(r["link"]["status"] for r in lines)
    assert how["sent"] + how["listed"] == CARE_CONTEXTS
    print(f"after {KILLS} kills: {dict(how)}, {server.calls('care_contexts_linked')} checks")
    # the links in flight at a kill were checked, not resent: some were found made ("listed")
    assert server.calls("care_contexts_linked") > 0
    status = await IngestJob.status(journal)
    assert status.done == CARE_CONTEXTS and status.unknown == 0 and status.waiting == CARE_CONTEXTS
