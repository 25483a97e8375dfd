"""The hard way: ``python -m health_async ingest ...`` in a child process, killed with SIGKILL at random points
(seeded), then run to completion. Every item ends as exactly one line of the output, items done before a kill
are never requested again, and no file is uploaded twice unless ``--reupload-unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from health_async.ingest import IngestJob
from health_async.testing import FakeHealthServer, Fault

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

KILLS = 20
#: Uploads are slower to start and to do: fewer kills keep the file within its time budget.
UPLOAD_KILLS = 12
SEED = 20240611


@pytest.fixture
async def server() -> AsyncIterator[FakeHealthServer]:
    async with FakeHealthServer(users=1, documents_per_user=20) as srv:
        yield srv


def child_env(server: FakeHealthServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEALTH_ASYNC_")}
    env.update(
        HEALTH_ASYNC_BASE_URL=server.url,
        HEALTH_ASYNC_TOKEN=server.token,
        HEALTH_ASYNC_USER_ID=server.data.user_ids[0],
    )
    return env


async def run_child(
    argv: list[str],
    env: dict[str, str],
    server: FakeHealthServer | None = None,
    rng: random.Random | None = None,
    *,
    most: int = 200,
) -> int | None:
    """Run the CLI. With ``rng``, SIGKILL it at a random point: a fifth of the time after a random fraction of a
    second (while it starts, scans, recovers), else once the server has seen a random number of its
    requests (1 to ``most``), plus a random few milliseconds. Returns its exit status, None when killed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "health_async", *argv, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    if rng is not None and server is not None:
        start = len(server.requests)
        early = rng.random() < 0.2
        delay, wanted = rng.uniform(0, 0.5), rng.randint(1, most)
        loop = asyncio.get_running_loop()
        began = loop.time()
        while proc.returncode is None:
            waited = loop.time() - began
            assert waited < 60, "the child made no progress in 60 s"
            if (early and waited >= delay) or (not early and len(server.requests) - start >= wanted):
                await asyncio.sleep(rng.uniform(0, 0.02))
                break
            await asyncio.sleep(0.005)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it may have ended on its own meanwhile
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
                return None
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert b"Traceback" not in err, err.decode()
    return proc.returncode


def complete_lines(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    data = out.read_bytes()
    return [orjson.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]


def requested_ids(server: FakeHealthServer, start: int) -> list[str]:
    return [r.path.rsplit("/", 1)[-1] for r in server.requests[start:] if r.route == "describe"]


async def test_describe_killed_at_random_points_loses_nothing_and_repeats_only_what_was_in_flight(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    user = server.data.user_ids[0]
    bodies = list(server.data.documents[user].values())
    ids = [f"doc-{i:05d}" for i in range(3000)]
    for i, key in enumerate(ids):  # cheap aliases of the seeded documents
        server.data.documents[user][key] = bodies[i % len(bodies)]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n")
    out, journal = tmp_path / "docs.jsonl", tmp_path / "ingest.db"
    concurrency = 16
    argv = ["ingest", "describe", str(ids_file), "--out", str(out), "--journal", str(journal),
            "--concurrency", str(concurrency), "--quiet"]  # fmt: skip
    server.inject("describe", Fault(latency=0.03))
    env = child_env(server)
    rng = random.Random(SEED)
    marks: list[tuple[int, set[str]]] = []  # after each kill: (requests so far, ids with a line on disk)
    while len(marks) < KILLS:
        assert await run_child(argv, env, server, rng) is None, "finished before the kills"
        marks.append((len(server.requests), {row["key"] for row in complete_lines(out)}))
    server.clear_faults()
    assert await run_child(argv, env) == 0
    rows = complete_lines(out)
    assert sorted(r["key"] for r in rows) == ids  # every id exactly once, none failed
    assert all("document" in r for r in rows)
    # an id whose line was on disk at a kill is never requested after that kill
    for boundary, done in marks:
        repeated = [i for i in requested_ids(server, boundary) if i in done]
        assert not repeated, f"{len(repeated)} done ids requested again"
    assert len(marks[-1][1]) > 0, "the kills left no progress at all"
    counts = Counter(requested_ids(server, 0))
    extra = sum(counts.values()) - len(ids)
    assert set(counts) == set(ids)
    # requested again: only what was in flight (or finished, not yet on disk) at each kill
    assert extra <= KILLS * (2 * concurrency + 64), extra


async def test_upload_killed_at_random_points_never_uploads_a_file_twice_unless_asked(
    server: FakeHealthServer, tmp_path: Path
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    sha_of: dict[str, str] = {}
    for i in range(500):
        path = folder / f"r{i:04d}.txt"
        data = f"lab report {i}\n".encode()
        path.write_bytes(data)
        sha_of[str(path)] = hashlib.sha256(data).hexdigest()
    out, journal = tmp_path / "up.jsonl", tmp_path / "up.db"
    argv = ["ingest", "upload", str(folder), "--out", str(out), "--journal", str(journal),
            "--concurrency", "4", "--quiet"]  # fmt: skip
    server.inject("upload", Fault(latency=0.03))
    env = child_env(server)
    rng = random.Random(SEED + 1)
    user = server.data.user_ids[0]

    def uploads() -> Counter[str]:
        docs = (orjson.loads(d) for d in server.data.documents[user].values())
        return Counter(d["upload"]["sha256"] for d in docs if "upload" in d)

    for _ in range(UPLOAD_KILLS):
        assert await run_child(argv, env, server, rng, most=30) is None, "finished before the kills"
        assert max(uploads().values(), default=1) == 1  # no file uploaded twice
    server.clear_faults()
    assert await run_child(argv, env) == 1  # done, but some of unknown outcome
    assert max(uploads().values()) == 1
    rows = {r["key"]: r for r in complete_lines(out)}
    assert len(rows) == len(complete_lines(out)) == 500 and set(rows) == set(sha_of)
    unknown = {k for k, r in rows.items() if r.get("error", {}).get("outcome") == "unknown"}
    assert {k for k, r in rows.items() if "error" in r} == unknown  # the only failures: the kills'
    assert 0 < len(unknown) <= UPLOAD_KILLS * 4
    status = await IngestJob.status(journal)
    assert set(status.unknown_keys) == unknown and status.done == 500 - len(unknown)
    # a file with a result line was uploaded exactly once; an unknown one at most once
    sent = uploads()
    assert all(sent[sha_of[k]] == 1 for k in rows if k not in unknown)

    assert await run_child([*argv, "--reupload-unknown"], env) == 0
    rows = {r["key"]: r for r in complete_lines(out)}
    assert len(rows) == 500 and all("upload" in r for r in rows.values())
    sent = uploads()
    assert all(sent[sha] == 1 for k, sha in sha_of.items() if k not in unknown)
    assert all(1 <= sent[sha_of[k]] <= 2 for k in unknown)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
async def test_ctrl_c_commits_prints_a_summary_and_the_next_run_resumes(
    server: FakeHealthServer, tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    # SIGTERM (a redeploy, systemctl stop) stops the job as Ctrl-C does
    user = server.data.user_ids[0]
    bodies = list(server.data.documents[user].values())
    ids = [f"doc-{i:04d}" for i in range(600)]
    for i, key in enumerate(ids):
        server.data.documents[user][key] = bodies[i % len(bodies)]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n")
    out = tmp_path / "docs.jsonl"
    argv = ["ingest", "describe", str(ids_file), "--out", str(out), "--concurrency", "8", "--quiet"]
    server.inject("describe", Fault(latency=0.02))
    env = child_env(server)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "health_async",
        *argv,
        env=env,
        stderr=asyncio.subprocess.PIPE,
        # A shell starts background jobs with SIGINT ignored, and children inherit that: the test must not
        # depend on how pytest itself was started (Ctrl-C's default action is what a user's terminal gives).
        preexec_fn=_default_sigint,
    )
    while len(server.requests) < 50 and proc.returncode is None:  # noqa: ASYNC110 - polling another process
        await asyncio.sleep(0.005)
    proc.send_signal(signum)
    _, err = await proc.communicate()
    assert proc.returncode == status, err.decode()
    assert b"Traceback" not in err and b"interrupted: run the same command again to resume" in err
    data = out.read_bytes()
    assert data.endswith(b"\n")  # flushed: complete lines only
    done = {orjson.loads(line)["key"] for line in data.splitlines()}
    start = len(server.requests)
    server.clear_faults()
    assert await run_child(argv, env) == 0
    assert sorted(r["key"] for r in complete_lines(out)) == ids
    assert not done & set(requested_ids(server, start))
