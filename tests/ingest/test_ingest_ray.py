"""The Ray engine on a local two-CPU Ray cluster (started once for the module) against the fake server in this
process: every item exactly once even when a worker is killed, one account-wide rate, one shared pause, and
nothing left behind. Plus the pure parts (the actor-side limiter, the fate of a lost batch) without Ray."""

from __future__ import annotations

import asyncio
import threading
import time
import types
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, cast

import pytest
import ray
import ray.exceptions
from aiohttp import web

from health_async.errors import InvalidRequest
from health_async.ingest import ClientRecipe
from health_async.ingest._ray import MAX_LOSSES, ActorLimiter, RayEngine, _reassign
from health_async.ingest._work import JobSpec, WorkItem, WorkResult
from health_async.testing import FakeHealthServer, Fault

#: Two worker actors fit on each of the cluster's two CPUs.
HALF_CPU = {"num_cpus": 0.5}


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    yield
    ray.shutdown()


class TimedServer(FakeHealthServer):
    """The fake server, noting when each request arrived (``time.monotonic()``) and the status it got."""

    def __init__(self) -> None:
        super().__init__(record=False)
        self.arrivals: list[tuple[float, int]] = []

    def make_app(self) -> web.Application:
        app = super().make_app()

        @web.middleware
        async def timing(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            arrived = time.monotonic()
            response = await handler(request)
            self.arrivals.append((arrived, response.status))
            return response

        app.middlewares.append(timing)
        return app


@pytest.fixture
async def server() -> AsyncIterator[TimedServer]:
    timed = TimedServer()
    async with timed:
        yield timed


def recipe(server: FakeHealthServer) -> ClientRecipe:
    return ClientRecipe(base_url=server.url, token=server.token, user_id=server.data.user_ids[0])


def known_ids(server: FakeHealthServer) -> list[str]:
    return list(server.data.documents[server.data.user_ids[0]])


async def items_of(keys: list[str]) -> AsyncIterator[WorkItem]:
    for index, key in enumerate(keys):
        yield WorkItem(key, index)


def max_per_second(times: list[float]) -> int:
    """The most arrivals in any one-second window."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - 1.0:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


# ------------------------------------------------------------------------------------------------ on Ray


@pytest.mark.usefixtures("ray_cluster")
async def test_killed_worker_loses_nothing_every_id_exactly_once(server: TimedServer) -> None:
    known = known_ids(server)
    keys = [known[i % len(known)] if i < len(known) else f"missing-{i}" for i in range(20_000)]
    engine = RayEngine(recipe(server), workers=4, actor_options=HALF_CPU)
    seen: Counter[str] = Counter()
    ok: set[str] = set()
    killed: Any = None
    async for result in engine.run(JobSpec(op="describe", concurrency=16), items_of(keys)):
        seen[result.key] += 1
        if result.ok:
            ok.add(result.key)
        if killed is None and sum(seen.values()) == 3000:
            killed = engine.actors[0]
            ray.kill(killed, no_restart=True)  # mid-run: it has batches outstanding
    assert killed is not None
    assert len(seen) == 20_000
    assert set(seen.values()) == {1}  # every id exactly once among the results
    assert ok == set(known)  # the seeded documents were described; the rest are 404 results
    assert engine.actors == ()  # the run cleaned up


@pytest.mark.usefixtures("ray_cluster")
async def test_account_wide_rate_limit_across_workers(server: TimedServer) -> None:
    rate, lease = 100.0, 8
    engine = RayEngine(recipe(server), workers=2, rate_limit=rate, lease_size=lease, actor_options=HALF_CPU)
    keys = [f"missing-{i}" for i in range(400)]
    count = 0
    async for _ in engine.run(JobSpec(op="describe", concurrency=8), items_of(keys)):
        count += 1
    assert count == 400
    times = [t for t, _ in server.arrivals]
    assert len(times) == 400
    assert max_per_second(times) <= rate + lease  # both workers together, in every one-second window
    achieved = len(times) / (max(times) - min(times))
    assert achieved > rate / 2  # the leases do not starve the workers either


@pytest.mark.usefixtures("ray_cluster")
async def test_retry_after_pauses_every_worker(server: TimedServer) -> None:
    engine = RayEngine(recipe(server), workers=2, actor_options=HALF_CPU)
    keys = [f"missing-{i}" for i in range(3000)]
    done = 0
    async for result in engine.run(JobSpec(op="describe", concurrency=4), items_of(keys)):
        done += 1
        assert not result.retryable  # the 503 was retried after the pause: every item ends in a plain 404
        if done == 300:
            server.inject("describe", Fault(status=503, retry_after=1, times=1))
    assert done == 3000
    t503 = next(t for t, status in server.arrivals if status == 503)
    during = [t for t, _ in server.arrivals if t503 + 0.2 < t < t503 + 0.9]
    assert during == []  # neither the worker that got the 503 nor the other one sent anything
    assert any(t > t503 + 1.0 for t, _ in server.arrivals)  # and both went on afterwards


def _coordinator_of(results: AsyncIterator[WorkResult]) -> Any:
    """The coordinator actor of a run under way (a local of the engine's generator)."""
    frame = cast(types.AsyncGeneratorType[WorkResult, None], results).ag_frame
    assert frame is not None  # the run is under way
    return frame.f_locals["coordinator"]


async def _restart(coordinator: Any) -> None:
    """Kill the coordinator and let Ray restart it; return once it answers again."""
    ray.kill(coordinator, no_restart=False)
    await asyncio.sleep(0.2)  # the kill is asynchronous: let it land before asking
    await asyncio.wait_for(coordinator.paused_until.remote(), 30)  # retried until the restarted actor answers


@pytest.mark.usefixtures("ray_cluster")
async def test_retry_after_pauses_every_worker_after_the_coordinator_restarts(server: TimedServer) -> None:
    engine = RayEngine(recipe(server), workers=2, actor_options=HALF_CPU)
    results = engine.run(JobSpec(op="describe", concurrency=4), items_of([f"missing-{i}" for i in range(100_000)]))
    done = 0
    restarted = injected = 0.0
    async for _ in results:
        done += 1
        if done == 100:
            await _restart(_coordinator_of(results))
            restarted = time.monotonic()
        if restarted and not injected and time.monotonic() > restarted + 1.5:  # the workers are known again
            server.inject("describe", Fault(status=503, retry_after=1, times=1))
            injected = time.monotonic()
        if injected and time.monotonic() > injected + 1.5:
            break
    await results.aclose()  # type: ignore[attr-defined]
    t503 = next(t for t, status in server.arrivals if status == 503)
    during = [t for t, _ in server.arrivals if t503 + 0.2 < t < t503 + 0.9]
    assert during == []  # the restarted coordinator pushed the pause to the other worker too
    assert any(t > t503 + 1.0 for t, _ in server.arrivals)


@pytest.mark.usefixtures("ray_cluster")
async def test_account_wide_rate_holds_across_a_coordinator_restart(server: TimedServer) -> None:
    rate, lease = 20.0, 4
    engine = RayEngine(
        recipe(server), workers=4, rate_limit=rate, lease_size=lease, max_replacements=0, actor_options=HALF_CPU
    )
    results = engine.run(JobSpec(op="describe", concurrency=8), items_of([f"missing-{i}" for i in range(80)]))
    done = 0
    async for _ in results:
        done += 1
        if done == 30:  # the workers hold slots of the coordinator that dies now, over a second's worth
            ray.kill(_coordinator_of(results), no_restart=False)
    assert done == 80
    times = [t for t, _ in server.arrivals]
    assert max_per_second(times) <= rate + engine.lease_slots  # the old slots and the new are not spent together


async def _until_dead(handle: Any, within: float = 30.0) -> None:
    """Return once the actor answers a call with ``RayActorError``; fail if it still answers after ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            await asyncio.wait_for(handle.set_pause.remote(0.0), within)
        except ray.exceptions.RayActorError:
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"the actor still answers {within:g}s after the run was closed")


@pytest.mark.usefixtures("ray_cluster")
async def test_closing_the_iterator_kills_every_actor(server: TimedServer) -> None:
    engine = RayEngine(recipe(server), workers=2, actor_options=HALF_CPU)
    results = engine.run(JobSpec(op="describe", concurrency=4), items_of([f"missing-{i}" for i in range(100_000)]))
    async for _ in results:
        break
    handles = engine.actors
    assert len(handles) == 2
    await results.aclose()  # type: ignore[attr-defined]
    assert engine.actors == ()
    for handle in handles:  # ray.kill is asynchronous: a call sent right after it may still be served
        await _until_dead(handle)
    assert server.calls("describe") < 100_000


@pytest.mark.usefixtures("ray_cluster")
async def test_configuration_error_in_the_actor_is_raised_typed(server: TimedServer) -> None:
    engine = RayEngine(ClientRecipe(base_url=server.url, token=server.token), workers=1, actor_options=HALF_CPU)
    with pytest.raises(InvalidRequest, match="user id"):
        async for _ in engine.run(JobSpec(op="describe", concurrency=2), items_of(["a"])):
            pass
    assert engine.actors == ()
    assert server.calls("describe") == 0


# ------------------------------------------------------------------------------------------------ without Ray


def test_bad_settings_are_refused_before_anything_starts() -> None:
    with pytest.raises(InvalidRequest, match="workers"):
        RayEngine(workers=0)
    with pytest.raises(InvalidRequest, match="rate_limit"):
        RayEngine(rate_limit=0)
    with pytest.raises(InvalidRequest, match="lease_size"):
        RayEngine(lease_size=0)
    lock = threading.Lock()
    engine = RayEngine(lambda limiter: (lock, limiter))  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidRequest, match="picklable"):
        engine.run(JobSpec(op="describe", concurrency=1), items_of([]))


def test_client_recipe_repr_hides_credentials() -> None:
    r = ClientRecipe(base_url="http://127.0.0.1:1", token="secret-token-123", user_id="oid-9")
    assert "secret-token-123" not in repr(r) and "oid-9" not in repr(r)
    with pytest.raises(InvalidRequest):
        ClientRecipe(limiter=None)


def test_lost_batch_describe_is_requeued_upload_is_unknown() -> None:
    batch = [WorkItem("a", 0), WorkItem("b", 1)]
    ready: deque[WorkItem] = deque()
    losses: dict[str, int] = {}
    assert _reassign(JobSpec(op="describe", concurrency=1), batch, losses, ready) == []
    assert list(ready) == batch  # back at the front, in order
    ready.clear()
    uploads = _reassign(JobSpec(op="upload", concurrency=1), batch, {}, ready)
    assert not ready  # an upload that may have been sent is never re-sent
    assert {r.key for r in uploads} == {"a", "b"}
    assert all(r.unknown and not r.ok and r.line_json()["error"]["type"] == "OutcomeUnknown" for r in uploads)
    for _ in range(MAX_LOSSES - 2):
        _reassign(JobSpec(op="describe", concurrency=1), batch, losses, ready)
    ready.clear()
    failed: list[WorkResult] = _reassign(JobSpec(op="describe", concurrency=1), batch, losses, ready)
    assert not ready and {r.key for r in failed} == {"a", "b"}
    assert all(r.retryable and not r.ok for r in failed)  # worth --retry-failed, not another worker


class FakeCoordinator:
    """Stands in for the coordinator actor: ``lease.remote`` / ``pause.remote`` as awaitables."""

    def __init__(self, rate: float, latency: float = 0.0) -> None:
        self.rate = rate
        self.latency = latency
        self.next = 0.0
        self.paused_until = 0.0
        self.leases = 0
        self.pauses: list[float] = []
        self.lease = self._Method(self._lease)
        self.pause = self._Method(self._pause)

    class _Method:
        def __init__(self, fn: Callable[..., Any]) -> None:
            self.fn = fn

        def remote(self, *args: Any) -> Any:
            return self.fn(*args)

    async def _lease(self, size: int) -> tuple[float, int, float, float]:
        self.leases += 1
        count = max(1, min(size, int(self.rate)))
        start = max(time.time(), self.next, self.paused_until)
        self.next = start + count / self.rate
        await asyncio.sleep(self.latency)  # the trip back to the worker
        return start, count, 1 / self.rate, self.paused_until

    def _pause(self, seconds: float) -> None:
        self.pauses.append(seconds)


async def test_actor_limiter_spends_leases_at_the_rate() -> None:
    coordinator = FakeCoordinator(rate=200)
    limiter = ActorLimiter(coordinator, rate=200, lease_size=8)
    started = time.monotonic()
    await asyncio.gather(*(limiter.acquire() for _ in range(40)))
    elapsed = time.monotonic() - started
    assert coordinator.leases == 5  # one call per lease of 8, shared by every waiter
    assert elapsed >= 39 / 200 - 0.02  # 40 slots at 200/s


async def test_actor_limiter_pause_holds_back_and_voids_the_lease() -> None:
    coordinator = FakeCoordinator(rate=1000)
    limiter = ActorLimiter(coordinator, rate=1000, lease_size=8)
    await limiter.acquire()
    limiter.pause(0.15)
    assert coordinator.pauses == [0.15]  # sent to the coordinator, for every other worker
    started = time.monotonic()
    await limiter.acquire()
    assert time.monotonic() - started >= 0.14
    assert coordinator.leases == 2  # the slots held before the pause were dropped
    limiter.note_pause(time.time() - 1)  # an older deadline never shortens the pause
    assert limiter.paused_until > time.time() - 0.5


async def test_actor_limiter_without_rate_never_calls_the_coordinator() -> None:
    coordinator = FakeCoordinator(rate=1)
    limiter = ActorLimiter(coordinator, rate=None, lease_size=8)
    await asyncio.gather(*(limiter.acquire() for _ in range(100)))
    assert coordinator.leases == 0


async def test_high_rate_leases_outlive_their_trip_to_the_worker() -> None:
    engine = RayEngine(rate_limit=100_000, lease_size=8)
    assert engine.lease_slots == 5000  # 50 ms worth, not 80 microseconds
    assert RayEngine(rate_limit=100, lease_size=8).lease_slots == 8
    assert RayEngine(rate_limit=3, lease_size=8).lease_slots == 3  # at most one second's worth
    coordinator = FakeCoordinator(rate=100_000, latency=0.01)
    limiter = ActorLimiter(coordinator, rate=100_000, lease_size=8, max_lease=engine.lease_slots)
    await asyncio.wait_for(asyncio.gather(*(limiter.acquire() for _ in range(200))), 5)
    # one lease for the 200 waiters, usable although 8 slots last 80 microseconds and the trip 10 ms
    assert coordinator.leases == 1
    assert coordinator.next - time.time() < 0.01  # sized by demand: no 50 ms of the schedule reserved for nothing
