"""Engines: what does the items of an ingest job. :class:`LocalEngine` runs them in this process.

An :class:`Engine` takes a :class:`~health_async.ingest._work.JobSpec` and an async iterator of
:class:`~health_async.ingest._work.WorkItem` and yields one :class:`~health_async.ingest._work.WorkResult` per
item it finished, in any order. It consumes the items lazily (bounded lookahead: an item is taken only when a
worker is free), and closing its iterator (``aclose``) stops the work and cleans up. The job, not the engine,
owns the journal and the output, so an engine needs no access to either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._bulk import BulkStream, run_pool
from .._config import check_rate
from .._limits import Limits, Overdue
from ..errors import HealthError, InvalidRequest
from ._work import JobSpec, WorkItem, WorkResult, described, process, user_of

if TYPE_CHECKING:
    from .._client import HealthClient
    from .._limits import SharedLimiter

__all__ = ["ClientFactory", "ClientRecipe", "Engine", "LocalEngine", "RateLimiter"]

#: Builds one client; called as ``factory(limiter)`` so an engine can inject a shared limiter (or ``None``).
ClientFactory = Callable[["SharedLimiter | None"], "HealthClient"]


@runtime_checkable
class Engine(Protocol):
    """Does the items of a job; see the module docstring for the contract."""

    def run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        """Yield one result per finished item, in any order; ``aclose`` stops the work and cleans up."""
        ...


class RateLimiter:
    """A :class:`~health_async.SharedLimiter` for one process: ``rate`` requests per second and one shared pause,
    given to a factory-built client for ``rate_limit``. The same admission as a client's own ``rate_limit`` (one
    :class:`~health_async._limits.Limits`: the limit holds in every one-second window, pauses extend, never
    shorten), so that one rule serves both."""

    def __init__(self, rate: float) -> None:
        self.rate = check_rate(rate)
        self._limits = Limits(1, rate)  # only its rate and pause are used: the client bounds what is in flight

    def __repr__(self) -> str:
        return f"RateLimiter(rate={self.rate})"

    async def acquire(self, deadline: float | None = None) -> bool:
        """Wait for the pause and for a slot of the rate; ``False`` at once when that wait would end after
        ``deadline`` (a ``time.monotonic()`` instant). The slot is charged when the request is sent: a client
        reports each request it acquired (:meth:`sent` or :meth:`unsent`), so a connection slow to open shifts the
        requests behind it, as with a client's own ``rate_limit``. Used without a client, report them yourself."""
        try:
            await self._limits.admit(deadline)
        except Overdue:
            return False
        return True

    def sent(self, at: float | None = None) -> None:
        """The request acquired went out (``at``: when, by ``time.monotonic()``; default now)."""
        self._limits.sent(at)

    def unsent(self) -> None:
        """The request acquired never left: its slot is given back."""
        self._limits.unsent()

    def pause(self, seconds: float) -> None:
        """Hold back every request for ``seconds`` from now (extends, never shortens)."""
        self._limits.pause(seconds)


def _default_factory(limiter: SharedLimiter | None) -> HealthClient:
    from .._client import HealthClient

    return HealthClient.from_env(limiter=limiter)


class LocalEngine:
    """One :class:`~health_async.HealthClient` in this process and ``spec.concurrency`` workers calling
    :func:`~health_async.ingest._work.process`.

    Give either ``client`` (used as is, never closed: its own limits apply, so ``rate_limit`` is refused with
    it) or ``client_factory`` (called once per run as ``factory(limiter)``; the client is closed at the end); with
    neither, the client comes from ``HealthClient.from_env``. ``rate_limit`` (requests per second) is enforced by
    a :class:`RateLimiter` passed to the factory.
    """

    def __init__(
        self,
        client: HealthClient | None = None,
        *,
        client_factory: ClientFactory | None = None,
        rate_limit: float | None = None,
    ) -> None:
        if client is not None and client_factory is not None:
            raise InvalidRequest("give a client or a client_factory, not both")
        if client is not None and rate_limit is not None:
            raise InvalidRequest("rate_limit cannot be combined with a client: set rate_limit on the HealthClient")
        if rate_limit is not None:
            check_rate(rate_limit)
        self._client = client
        self._factory = client_factory
        self.rate_limit = rate_limit

    def __repr__(self) -> str:
        return f"LocalEngine(rate_limit={self.rate_limit})"

    def run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        """Do every item of ``items``, ``spec.concurrency`` at a time; yield results as they complete."""
        if not isinstance(spec.concurrency, int) or isinstance(spec.concurrency, bool) or spec.concurrency < 1:
            raise InvalidRequest("concurrency must be a positive int")
        return self._run(spec, items)

    async def _run(self, spec: JobSpec, items: AsyncIterator[WorkItem]) -> AsyncIterator[WorkResult]:
        owned = self._client is None
        if self._client is not None:
            client = self._client
        else:
            limiter = RateLimiter(self.rate_limit) if self.rate_limit is not None else None
            client = (self._factory or _default_factory)(limiter)
        try:
            if spec.op == "describe" and spec.user_id is None and client.user_id is None:
                raise InvalidRequest("describe needs a user id (X-Pt-Id): give user_id or set it on the client")
            stream = _Described(client, spec, items) if spec.op == "describe" else _processed(client, spec, items)
            async with stream:
                async for result in stream:
                    yield result
        finally:
            if owned:
                await client.aclose()


def _processed(client: HealthClient, spec: JobSpec, items: AsyncIterator[WorkItem]) -> BulkStream[WorkResult]:
    """The items done by :func:`~health_async.ingest._work.process` in the bulk helpers' pool (``run_pool``:
    ``spec.concurrency`` workers owned by the client, at most ``2 * concurrency`` results waiting unread)."""
    return run_pool(
        client._session, items, _caller(client, spec), _unwrap, concurrency=spec.concurrency, ordered=False,
        what="items", name="ingest",
    )  # fmt: skip


class _Described(AsyncIterator[WorkResult]):
    """A describe job's items, done by ``client.documents.describe_many``: its workers keep each answer's bytes
    and its consumer (this, here) decodes each and makes its line while the document is in the CPU's cache.
    Measured: about an eighth less CPU a document than :func:`~health_async.ingest._work.process` in the pool's
    workers (decode and line there, the line then waiting for the consumer). Same lines, same failures
    (:func:`~health_async.ingest._work.described`)."""

    def __init__(self, client: HealthClient, spec: JobSpec, items: AsyncIterator[WorkItem]) -> None:
        self._spec = spec
        self._items = items
        self._indexes: dict[str, int] = {}  # of the items taken and not yet done (at most 2 * concurrency)
        self._stream = client.documents.describe_many(self._keys(), user_id=user_of(spec), concurrency=spec.concurrency)

    async def _keys(self) -> AsyncIterator[str]:
        indexes = self._indexes
        async for item in self._items:
            indexes[item.key] = item.index
            yield item.key

    async def __anext__(self) -> WorkResult:
        r = await self._stream.__anext__()
        return described(self._spec, r.document_id, self._indexes.pop(r.document_id), r.document, r.error)

    async def __aenter__(self) -> _Described:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.aclose()


def _caller(client: HealthClient, spec: JobSpec) -> Callable[[WorkItem], Awaitable[WorkResult]]:
    def call(item: WorkItem) -> Awaitable[WorkResult]:
        return process(client, spec, item)  # a plain def handing out process()'s own coroutine

    return call


def _unwrap(_item: WorkItem, result: WorkResult | None, error: HealthError | None) -> WorkResult:
    # process() turns every item's failure into its result: an error here (a closed client) stops the run
    if error is not None:
        raise error
    assert result is not None
    return result


class ClientRecipe:
    """A picklable client factory for the Ray engine: ``HealthClient(**kwargs, limiter=limiter)`` in each actor.

    ``RayEngine(ClientRecipe(base_url=url, token=..., user_id=...))``. The keyword arguments travel to the actors
    (Ray keeps actor arguments in its control store): prefer credentials from each node's environment (the
    default, ``HealthClient.from_env``) or a factory that reads them from a secret store inside the actor. The
    repr shows the base URL only.
    """

    def __init__(self, **kwargs: Any) -> None:
        if "limiter" in kwargs:
            raise InvalidRequest("ClientRecipe: the engine gives the limiter; do not pass one")
        self._kwargs = kwargs

    def __repr__(self) -> str:
        return f"ClientRecipe(base_url={self._kwargs.get('base_url')!r})"

    def __call__(self, limiter: SharedLimiter | None) -> HealthClient:
        """Build one client with ``limiter``."""
        from .._client import HealthClient

        return HealthClient(**self._kwargs, limiter=limiter)
