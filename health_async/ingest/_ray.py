"""The Ray engine: the items of an ingest job split among async Ray actors, one account-wide rate and one shared
``Retry-After`` pause across every actor on every node.

Imported lazily (``engine="ray"``); this is the only module of the package that imports ``ray``.

How it works:

* **Workers.** ``workers`` async actors; each builds ONE :class:`~health_async.HealthClient` inside the actor,
  with ``client_factory(limiter)`` (a picklable callable) or ``HealthClient.from_env(limiter=limiter)``, so the
  credentials come from the node's environment or from the factory and never travel in a log or a repr. Each
  runs :func:`~health_async.ingest._work.process` on the items it is sent, ``spec.concurrency`` at a time.
* **Coordinator.** One small actor holds the account-wide state: a schedule of request slots at ``rate_limit``
  per second and the shared pause deadline (wall clock, ``time.time()``). A worker's :class:`ActorLimiter` takes
  a *lease* of at least ``lease_size`` slots in one call (so coordination costs one actor call per ``lease_size``
  requests), each lease carrying the current pause deadline. ``pause(seconds)`` (a 429/503 ``Retry-After`` seen
  by any worker) is sent to the coordinator fire-and-forget; it extends the shared pause and pushes the new
  deadline to every worker at once, which voids the slots they still hold.
* **Driver.** :meth:`RayEngine.run` runs in the job's process, the single writer: it sends items to the workers
  in small batches, a bounded number outstanding per worker, and yields every :class:`WorkResult` back. A batch
  whose worker dies (``ray.kill``, a node that leaves) is not lost: for a describe its items go to live workers
  (at most :data:`MAX_LOSSES` times each, then the item is a retryable failure); for an upload, whose request
  may have reached the service, each such item is reported as *outcome unknown* and never re-sent. A dead
  worker is replaced (up to ``max_replacements`` times). Closing the iterator kills every actor of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import ray
import ray.exceptions
from ray import cloudpickle

from ..errors import HealthError, InvalidRequest, OutcomeUnknown, RayEngineError, TransportError
from ._engine import ClientRecipe, _default_factory
from ._work import JobSpec, WorkItem, WorkResult, error_line, process

if TYPE_CHECKING:
    from .._client import HealthClient
    from ._engine import ClientFactory

__all__ = ["MAX_LOSSES", "ActorLimiter", "ClientRecipe", "RayEngine", "RayEngineError"]

#: A describe item whose worker died this many times is reported as a (retryable) failure instead of being sent
#: to yet another worker: an item that kills its worker must not kill them all.
MAX_LOSSES: Final = 3

#: A lease spans at least this many seconds of slots (``lease_size`` is raised to fit at high rates): it must
#: outlive its trip from the coordinator to the worker, or every lease would expire before its first use.
MIN_LEASE_SECONDS: Final = 0.05

#: Seconds to wait for the workers to start (a cluster without room for them would otherwise wait forever).
DEFAULT_START_TIMEOUT: Final = 120.0

#: Seconds between the driver's refreshes of every live worker's registration with the coordinator: a restarted
#: coordinator (whose list of workers starts empty) pushes pauses to every worker again within about this long.
REGISTER_EVERY: Final = 1.0

#: The failures that lose a batch (its result will never come) without the batch's code having failed.
_LOST: Final = (
    ray.exceptions.RayActorError,  # ActorDiedError (ray.kill, a crash, its node left), ActorUnavailableError
    ray.exceptions.ObjectLostError,  # the result was stored on a node that left
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
)


# ------------------------------------------------------------------------------------------------ actor side


class ActorLimiter:
    """The :class:`~health_async.SharedLimiter` of one worker actor, backed by the coordinator actor.

    ``acquire`` spends slots of the current lease and waits for the shared pause. When no slot is left it takes
    a new lease (one call for every waiter) of as many slots as there are waiters, at least ``lease_size`` and
    at most ``max_lease``: sized by demand, so a worker with little to do does not reserve the schedule that
    other workers could use. Slot ``k`` of a lease starting at ``s`` may be used from ``s + k / rate`` until
    ``s + max_lease / rate`` (then it expires unused), so any one-second window holds at most about
    ``rate + max_lease`` requests of all workers together. Without a rate it only waits for the pause, with no
    coordinator call at all. ``pause`` holds this worker back at once and tells the coordinator
    (fire-and-forget), which tells every other worker.

    Deadlines are wall-clock times (``time.time()``) because they cross processes and nodes: keep the nodes'
    clocks in sync (NTP). The limiter is asyncio-only and lives in the actor's event loop.
    """

    def __init__(self, coordinator: Any, *, rate: float | None, lease_size: int, max_lease: int | None = None) -> None:
        self._coordinator = coordinator
        self._rated = rate is not None
        self._lease_size = lease_size
        self._max_lease = max(lease_size, max_lease or lease_size)
        self._waiting = 0  # acquire calls under way
        self._paused_until = 0.0
        self._slot = 0.0  # time of the next slot of the lease
        self._interval = 0.0
        self._left = 0  # slots left in the lease
        self._end = 0.0  # when the lease expires
        self._epoch = 0  # bumped by every new pause: a slot reserved before it is void
        self._fetching: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"ActorLimiter(rated={self._rated}, lease_size={self._lease_size})"

    @property
    def paused_until(self) -> float:
        """Wall-clock time the shared pause ends (0 or a past time when none)."""
        return self._paused_until

    def note_pause(self, deadline: float) -> None:
        """A pause until ``deadline`` (wall clock) is on: hold back, and void the slots held (extends only)."""
        if deadline > self._paused_until:
            self._paused_until = deadline
            self._left = 0
            self._epoch += 1

    def pause(self, seconds: float) -> None:
        """The service asked for a pause: hold this worker back now and have the coordinator pause all."""
        if seconds > 0:
            self.note_pause(time.time() + seconds)
            self._coordinator.pause.remote(seconds)  # fire and forget: the coordinator pushes it to everyone

    async def acquire(self, deadline: float | None = None) -> bool:
        """Wait for the shared pause and, with a rate, for one slot of a lease; ``False`` at once when that wait
        would end after ``deadline`` (a ``time.monotonic()`` instant of this process)."""
        self._waiting += 1
        try:
            return await self._acquire(deadline)
        finally:
            self._waiting -= 1

    async def _acquire(self, deadline: float | None) -> bool:
        while True:
            now = time.time()
            if self._paused_until > now:
                if not _fits(deadline, self._paused_until - now):
                    return False
                await asyncio.sleep(self._paused_until - now)
                continue
            if not self._rated:
                return True
            if self._left > 0 and now < self._end:
                slot, epoch = self._slot, self._epoch
                if not _fits(deadline, slot - now):
                    return False  # the slot stays for a later caller
                self._slot += self._interval
                self._left -= 1
                if slot <= now:
                    return True
                await asyncio.sleep(slot - now)
                if epoch == self._epoch:
                    return True
                continue  # a pause came while we waited for the slot: it is void, start over
            self._left = 0
            if self._fetching is None:
                self._fetching = asyncio.ensure_future(self._lease())
            await asyncio.shield(self._fetching)  # one waiter cancelled does not cancel the lease of the others

    async def _lease(self) -> None:
        try:
            wanted = min(self._max_lease, max(self._lease_size, self._waiting))
            start, count, interval, paused_until = await self._coordinator.lease.remote(wanted)
            self.note_pause(paused_until)
            self._slot, self._interval, self._left = start, interval, count
            self._end = start + max(count, self._max_lease) * interval
        finally:
            self._fetching = None


def _fits(deadline: float | None, wait: float) -> bool:
    """Whether a wait of ``wait`` seconds from now ends by ``deadline`` (``time.monotonic()``; None: no limit)."""
    return deadline is None or time.monotonic() + wait <= deadline


class _Coordinator:
    """The account-wide state (a Ray actor): the schedule of request slots and the shared pause deadline.

    ``backlog``: seconds of the schedule the workers may hold at most (slots leased, not spent yet). When Ray
    restarts this actor, its schedule starts that long after now, so that the slots its previous life handed
    out are spent before any of its own: the account-wide rate holds across the restart.
    """

    def __init__(self, rate: float | None, backlog: float = 0.0) -> None:
        self._rate = rate
        self._next = 0.0
        if rate is not None and backlog > 0 and ray.get_runtime_context().was_current_actor_reconstructed:
            self._next = time.time() + backlog
        self._paused_until = 0.0
        self._workers: dict[int, Any] = {}

    async def lease(self, size: int) -> tuple[float, int, float, float]:
        """Up to ``size`` consecutive slots (at most one second's worth): ``(start, count, interval, pause)``."""
        assert self._rate is not None
        count = max(1, min(size, int(self._rate)))
        start = max(time.time(), self._next, self._paused_until)
        self._next = start + count / self._rate
        return start, count, 1 / self._rate, self._paused_until

    async def pause(self, seconds: float) -> None:
        """Extend the shared pause to ``seconds`` from now and push it to every worker."""
        deadline = time.time() + seconds
        if deadline <= self._paused_until:
            return
        self._paused_until = deadline
        self._next = max(self._next, deadline)
        for worker in self._workers.values():
            worker.set_pause.remote(deadline)  # fire and forget

    async def paused_until(self) -> float:
        """The current pause deadline (wall clock)."""
        return self._paused_until

    async def register(self, key: int, worker: Any) -> None:
        """Push future pauses to ``worker``."""
        self._workers[key] = worker

    async def unregister(self, key: int) -> None:
        """Stop pushing to a worker that is gone."""
        self._workers.pop(key, None)


class _Worker:
    """One worker (a Ray actor): ONE client, built inside the actor, doing items ``concurrency`` at a time."""

    def __init__(
        self,
        factory: ClientFactory,
        coordinator: Any,
        rate: float | None,
        lease: tuple[int, int],
        concurrency: int,
    ) -> None:
        self._factory = factory
        self._coordinator = coordinator
        self._limiter = ActorLimiter(coordinator, rate=rate, lease_size=lease[0], max_lease=lease[1])
        self._concurrency = concurrency
        self._client: HealthClient | None = None
        self._slots: asyncio.Semaphore | None = None
        self._lock = asyncio.Lock()

    async def start(self, spec: JobSpec) -> None:
        """Build the client now (so a configuration error shows before any item is sent)."""
        await self._ensure(spec)

    async def _ensure(self, spec: JobSpec) -> HealthClient:
        async with self._lock:
            if self._client is None:
                from .._client import HealthClient

                try:
                    client = self._factory(self._limiter)
                except (ValueError, TypeError) as exc:  # the client's own rules name the setting, not its value
                    raise InvalidRequest(f"the client factory failed in a Ray worker: {exc}") from None
                if not isinstance(client, HealthClient):
                    raise InvalidRequest("client_factory must return a HealthClient")
                if spec.op == "describe" and spec.user_id is None and client.user_id is None:
                    await client.aclose()
                    raise InvalidRequest("describe needs a user id (X-Pt-Id): give user_id or set it on the client")
                self._limiter.note_pause(await self._coordinator.paused_until.remote())
                self._client = client
                self._slots = asyncio.Semaphore(self._concurrency)
            return self._client

    async def run(self, spec: JobSpec, items: list[WorkItem]) -> list[WorkResult]:
        """Do ``items``; one result each, in the same order."""
        client = await self._ensure(spec)
        slots = self._slots
        assert slots is not None

        async def one(item: WorkItem) -> WorkResult:
            async with slots:
                return await process(client, spec, item)

        return list(await asyncio.gather(*(one(item) for item in items)))

    async def set_pause(self, deadline: float) -> None:
        """The coordinator's push: the shared pause now ends at ``deadline`` (wall clock)."""
        self._limiter.note_pause(deadline)

    async def close(self) -> None:
        """Close the client (the actor is killed next)."""
        if self._client is not None:
            await self._client.aclose()


_CoordinatorActor: Any = ray.remote(_Coordinator)
_WorkerActor: Any = ray.remote(_Worker)


# ------------------------------------------------------------------------------------------------ driver side


class _Slot:
    """A live worker as the driver sees it."""

    __slots__ = ("handle", "key", "outstanding")

    def __init__(self, key: int, handle: Any) -> None:
        self.key = key
        self.handle = handle
        self.outstanding = 0


class _End:
    """The input is exhausted."""


class _InputFailed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_Entry = WorkItem | _End | _InputFailed


class RayEngine:
    """Does the items of an ingest job on a Ray cluster; an :class:`~health_async.ingest._engine.Engine`.

    Args:
        client_factory: called inside each worker actor as ``client_factory(limiter)`` and must return a
            :class:`~health_async.HealthClient` built with that ``limiter``; it must be picklable (a module-level
            function, a :class:`ClientRecipe`). Default: ``HealthClient.from_env(limiter=limiter)``, so each node
            needs the ``HEALTH_ASYNC_*`` variables in its environment. The package must be installed on every
            node (or shipped with ``actor_options={"runtime_env": ...}``).
        address: the Ray cluster to connect to when Ray is not initialised yet (``"auto"``, ``"ray://..."``);
            ``None`` starts a local one. When this engine initialised Ray it shuts it down at the end of a run;
            a Ray the caller initialised is left as it is.
        workers: worker actors (each with one client). ``spec.concurrency`` is the concurrency *of each*, so a
            run has up to ``workers * spec.concurrency`` requests in flight; ``rate_limit`` bounds them all.
        rate_limit: requests per second for the whole account, across every worker on every node. Any one-second
            window holds at most about ``rate_limit + lease_slots`` requests.
        lease_size: the fewest slots a worker takes from the coordinator in one call (more when more of its
            requests wait, up to :attr:`lease_slots`). Larger is cheaper; smaller is fairer between workers.
        batch_size: items sent to a worker in one call (default: for a describe, half of ``spec.concurrency``,
            1 to 64; for an upload, 1).
        actor_options: Ray options for the worker actors (``num_cpus``, ``resources``, ``runtime_env``,
            ``scheduling_strategy``, ...). Default: one CPU each. Never put credentials in a ``runtime_env``:
            Ray shows it in its dashboard.
        max_replacements: workers started in place of dead ones in one run (default ``workers``).
        start_timeout: seconds to wait for the workers to start.

    Judgement calls: a dead worker's describe items are re-sent, but its upload items are reported as *outcome
    unknown* (``unknown=True``), never re-sent, since a Ray actor call is at-most-once and a repeated upload
    creates a duplicate document; a worker that only becomes *unavailable* is treated as dead (killed, replaced)
    so that no item can be both re-sent and answered. The coordinator restarts itself if it dies, losing its
    state. A pause under way is forgotten (the workers that had it still keep it). The workers go on spending the
    slots of their leases, so a restarted coordinator starts its schedule later, by an upper bound of the slots
    they may hold: ``(workers + max_replacements) * (spec.concurrency + lease_slots) / rate_limit`` seconds
    (every worker the run may start, each with every request waiting on a slot and a lease unspent), a lull
    that keeps the account-wide rate. And it knows no worker until the driver re-registers the live ones, which
    it does every :data:`REGISTER_EVERY` second while the run goes on: for about a second after a restart, a
    ``Retry-After`` pauses only the worker that got it. An upload's item is a file path read by the worker on
    its own node: on a cluster of several nodes the files must be on a filesystem every node shares.
    """

    def __init__(
        self,
        client_factory: ClientFactory | None = None,
        *,
        address: str | None = None,
        workers: int = 2,
        rate_limit: float | None = None,
        lease_size: int = 8,
        batch_size: int | None = None,
        actor_options: Mapping[str, Any] | None = None,
        max_replacements: int | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        if client_factory is not None and not callable(client_factory):
            raise InvalidRequest("client_factory must be a callable taking the limiter and returning a HealthClient")
        if not _positive_int(workers):
            raise InvalidRequest("workers must be a positive int")
        if rate_limit is not None and not (
            isinstance(rate_limit, int | float) and not isinstance(rate_limit, bool) and rate_limit > 0
        ):
            raise InvalidRequest("rate_limit must be > 0 requests per second, or None")
        if not _positive_int(lease_size):
            raise InvalidRequest("lease_size must be a positive int")
        if batch_size is not None and not _positive_int(batch_size):
            raise InvalidRequest("batch_size must be a positive int, or None")
        if max_replacements is not None and not (_positive_int(max_replacements) or max_replacements == 0):
            raise InvalidRequest("max_replacements must be an int >= 0, or None")
        if not (isinstance(start_timeout, int | float) and start_timeout > 0):
            raise InvalidRequest("start_timeout must be > 0 seconds")
        self.client_factory: ClientFactory = client_factory or _default_factory
        self.address = address
        self.workers = workers
        self.rate_limit = None if rate_limit is None else float(rate_limit)
        self.lease_size = lease_size
        self.batch_size = batch_size
        self.actor_options: dict[str, Any] = {"num_cpus": 1, **(actor_options or {})}
        self.max_replacements = workers if max_replacements is None else max_replacements
        self.start_timeout = float(start_timeout)
        self._live: dict[int, _Slot] = {}
        self._running = False

    def __repr__(self) -> str:
        return f"RayEngine(workers={self.workers}, rate_limit={self.rate_limit}, lease_size={self.lease_size})"

    @property
    def lease_slots(self) -> int:
        """The most slots a lease may hold (and how long an unused slot lives, in slots): ``lease_size``, raised
        to :data:`MIN_LEASE_SECONDS` worth of ``rate_limit``, at most one second's worth (at least 1). A worker
        asks for as many slots as it has waiting requests, between ``lease_size`` and this."""
        if self.rate_limit is None:
            return self.lease_size
        wanted = max(self.lease_size, math.ceil(self.rate_limit * MIN_LEASE_SECONDS))
        return max(1, min(wanted, int(self.rate_limit)))

    @property
    def actors(self) -> tuple[Any, ...]:
        """Handles of the live worker actors of the current run (empty between runs)."""
        return tuple(slot.handle for slot in self._live.values())

    def run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        """Do every item of ``items`` on the workers; yield one result per item as batches complete.

        Raises :class:`InvalidRequest` for a bad ``spec`` or client configuration (the actor's own error, e.g. no
        credentials), :class:`RayEngineError` when the run cannot go on; ``aclose()`` kills every actor.
        """
        if not _positive_int(spec.concurrency):
            raise InvalidRequest("concurrency must be a positive int")
        if self._running:
            raise InvalidRequest("a RayEngine does one run at a time")
        try:
            cloudpickle.dumps(self.client_factory)  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise InvalidRequest(f"client_factory must be picklable ({type(exc).__name__})") from None
        return self._run(spec, items)

    def _shape(self, spec: JobSpec) -> tuple[int, int]:
        """Items per batch, batches outstanding per worker.

        Describe: about 1.5x ``concurrency`` items per worker, so it never starves while results travel back.
        Upload and link (not idempotent): one item per call and at most ``concurrency`` items per worker, so that
        every item a dead worker held had started (and is rightly *unknown*) rather than waiting in its queue.
        """
        if spec.op != "describe":  # uploads and links: not idempotent
            size = min(self.batch_size or 1, spec.concurrency)
            return size, max(1, spec.concurrency // size)
        size = self.batch_size or min(64, max(1, math.ceil(spec.concurrency / 2)))
        return size, max(2, math.ceil(1.5 * spec.concurrency / size))

    async def _run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        if self._running:
            raise InvalidRequest("a RayEngine does one run at a time")
        owns_ray = not ray.is_initialized()
        if owns_ray:  # blocks the loop while a local cluster starts or the connection is made: once per run
            ray.init(address=self.address)
        self._running = True
        size, per_worker = self._shape(spec)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Entry] = asyncio.Queue(maxsize=max(size, self.workers * size * per_worker))
        producer = loop.create_task(_produce(items, queue))
        getter: asyncio.Future[_Entry] | None = None
        inflight: dict[asyncio.Future[list[WorkResult]], tuple[_Slot, list[WorkItem]]] = {}
        ready: deque[WorkItem] = deque()
        losses: dict[str, int] = {}
        replacements = self.max_replacements
        serial = 0
        registered = loop.time()
        coordinator: Any = None
        finished = False

        def spawn() -> _Slot:
            nonlocal serial
            serial += 1
            handle = _WorkerActor.options(max_restarts=0, max_task_retries=0, **self.actor_options).remote(
                self.client_factory,
                coordinator,
                self.rate_limit,
                (min(self.lease_size, self.lease_slots), self.lease_slots),
                spec.concurrency,
            )
            coordinator.register.remote(serial, handle)
            slot = self._live[serial] = _Slot(serial, handle)
            return slot

        def bury(slot: _Slot) -> None:
            if self._live.pop(slot.key, None) is not None:
                coordinator.unregister.remote(slot.key)
                _kill(slot.handle)

        def take() -> list[WorkItem]:
            batch: list[WorkItem] = []
            while ready and len(batch) < size:
                batch.append(ready.popleft())
            while len(batch) < size and not queue.empty():
                entry = queue.get_nowait()
                if not isinstance(entry, WorkItem):
                    accept(entry)
                    break
                batch.append(entry)
            return batch

        input_done = False

        def accept(entry: _Entry) -> None:
            nonlocal input_done
            if isinstance(entry, WorkItem):
                ready.append(entry)
            elif isinstance(entry, _InputFailed):
                raise entry.error
            else:
                input_done = True

        try:
            # the most slots the workers may hold, should the coordinator restart: one per waiting request and a
            # lease unspent, for every worker the run may start (replacements included)
            held = (self.workers + self.max_replacements) * (spec.concurrency + self.lease_slots)
            backlog = 0.0 if self.rate_limit is None else held / self.rate_limit
            coordinator = _CoordinatorActor.options(num_cpus=0, max_restarts=-1, max_task_retries=-1).remote(
                self.rate_limit, backlog
            )
            starting = [spawn() for _ in range(self.workers)]
            await self._start(spec, starting)
            while True:
                if loop.time() - registered >= REGISTER_EVERY:  # a restarted coordinator knows no worker
                    registered = loop.time()
                    for slot in self._live.values():
                        coordinator.register.remote(slot.key, slot.handle)  # idempotent, fire and forget
                for slot in list(self._live.values()):
                    while slot.outstanding < per_worker and (batch := take()):
                        ref = slot.handle.run.remote(spec, batch)
                        inflight[asyncio.wrap_future(ref.future())] = (slot, batch)
                        slot.outstanding += 1
                if input_done and not ready and not inflight:
                    break
                room = any(slot.outstanding < per_worker for slot in self._live.values())
                if getter is None and room and not input_done and not ready:
                    getter = loop.create_task(queue.get())
                waiting: set[asyncio.Future[Any]] = set(inflight)
                if getter is not None:
                    waiting.add(getter)
                if not waiting:  # items ready, no room and nothing in flight: every worker is gone
                    raise RayEngineError("every Ray worker was lost and no replacement is left")
                done, _ = await asyncio.wait(waiting, timeout=REGISTER_EVERY, return_when=asyncio.FIRST_COMPLETED)
                if getter is not None and getter in done:
                    entry, getter = getter.result(), None
                    accept(entry)
                for future in done:
                    if future not in inflight:
                        continue
                    slot, batch = inflight.pop(future)
                    slot.outstanding -= 1
                    try:
                        results: list[WorkResult] = future.result()
                    except _LOST as exc:
                        if isinstance(exc, ray.exceptions.RayActorError) and slot.key in self._live:
                            bury(slot)
                            if replacements > 0:
                                replacements -= 1
                                spawn()
                        for result in _reassign(spec, batch, losses, ready):
                            yield result
                        continue
                    except ray.exceptions.RayTaskError as exc:
                        raise _unwrap(exc) from None
                    for result in results:
                        yield result
            finished = True
        finally:
            producer.cancel()
            if getter is not None:
                getter.cancel()
            for future in inflight:
                future.cancel()
            slots, self._live = list(self._live.values()), {}
            if finished:  # a clean end: let the clients close their connections (briefly)
                closing = [slot.handle.close.remote() for slot in slots]
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 5)
            for slot in slots:
                _kill(slot.handle)
            if coordinator is not None:
                _kill(coordinator)
            if owns_ray:
                ray.shutdown()
            self._running = False

    async def _start(self, spec: JobSpec, slots: list[_Slot]) -> None:
        """Build every worker's client; a configuration error (e.g. no credentials) is raised here."""
        refs = [slot.handle.start.remote(spec) for slot in slots]
        try:
            await asyncio.wait_for(asyncio.gather(*refs), self.start_timeout)
        except TimeoutError:
            raise RayEngineError(
                f"the Ray workers did not start within {self.start_timeout:g}s: "
                "does the cluster have the resources asked for (actor_options)?"
            ) from None
        except ray.exceptions.RayTaskError as exc:
            raise _unwrap(exc) from None
        except _LOST as exc:
            raise RayEngineError(f"a Ray worker died while starting: {type(exc).__name__}") from exc


async def _produce(items: AsyncIterator[WorkItem], queue: asyncio.Queue[_Entry]) -> None:
    """Feed ``items`` into the bounded queue (the lookahead), then the end or the input's own error."""
    try:
        async for item in items:
            await queue.put(item)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # the input's own failure: the run raises it
        await queue.put(_InputFailed(exc))
    else:
        await queue.put(_End())


def _reassign(spec: JobSpec, batch: list[WorkItem], losses: dict[str, int], ready: deque[WorkItem]) -> list[WorkResult]:
    """The items of a lost batch: re-queued (describe), or results of their own (upload, or lost too often)."""
    results = []
    for item in reversed(batch):  # re-queued at the front, in their order
        lost = losses[item.key] = losses.get(item.key, 0) + 1
        if spec.op != "describe":  # uploads and links: not idempotent
            error: HealthError = OutcomeUnknown(
                f"{spec.op}: the Ray worker doing it was lost; the request may have reached the service",
                operation=spec.op,
            )
            line = error_line(item.index, error, retryable=False)
            results.append(WorkResult(item.key, line, ok=False, retryable=False, unknown=True))
        elif lost >= MAX_LOSSES:
            error = TransportError(f"{spec.op}: the Ray worker doing it was lost {lost} times")
            results.append(WorkResult(item.key, error_line(item.index, error, retryable=True), False, True))
        else:
            ready.appendleft(item)
    return results


def _unwrap(exc: ray.exceptions.RayTaskError) -> BaseException:
    """A worker's own exception: ours as it was (e.g. InvalidRequest for a bad configuration), else wrapped."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, HealthError):
        return cause
    name = type(cause).__name__ if cause is not None else "unknown"
    error = RayEngineError(f"a Ray worker failed: {name}")
    error.__cause__ = exc
    return error


def _kill(handle: Any) -> None:
    with contextlib.suppress(Exception):
        ray.kill(handle, no_restart=True)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
