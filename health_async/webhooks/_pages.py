"""A requester's (HIU's) data push in several pages, put back together per transaction: :class:`PushPages`.

An HIP may answer one data request with several pages (``page_number`` of ``page_count``, each its own webhook, as
ABDM's on-fetch sends them and :meth:`~health_async.resources.Abdm.push_health_data` does, one care context a page).
The pages arrive in any order, possibly twice (a redelivery), possibly not at all. A requester that hands each page
over as it comes shows the patient part of their record as if it were all of it; :class:`PushPages` hands over a
transaction once every page is in, and reports a transaction whose pages stopped coming.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import attrs

from .._config import finite
from ..errors import InvalidRequest
from ..models.abdm._events import HiuDataPush

__all__ = ["DEFAULT_PAGE_TIMEOUT", "IncompletePush", "PushPages"]

#: Seconds a transaction may wait for its missing pages after its last page arrived, by default.
DEFAULT_PAGE_TIMEOUT: Final = 120.0
#: Transactions waiting for pages held at most, by default.
DEFAULT_MAX_TRANSACTIONS: Final = 1000
#: The most pages a push may declare (a bound on what one webhook can make us hold).
MAX_PAGES: Final = 10_000


@attrs.frozen
class IncompletePush:
    """A transaction whose pages stopped coming (or contradict each other): nothing of it was handed over.

    Report it to the service as not read (``client.abdm.acknowledge_health_data``), naming :attr:`transaction_id`."""

    #: The data flow's transaction id (hidden from ``repr``).
    transaction_id: str = attrs.field(repr=False)
    #: The consent the pages were shared under, when they said.
    consent_id: str | None
    #: How many pages the push declared.
    page_count: int
    #: The page numbers received, in order.
    received: tuple[int, ...]
    #: Why it is incomplete: ``"missing pages"`` or ``"pages disagree on page_count"``.
    reason: str

    @property
    def missing(self) -> tuple[int, ...]:
        """The page numbers never received."""
        have = set(self.received)
        return tuple(n for n in range(1, self.page_count + 1) if n not in have)


@attrs.define
class _Waiting:
    first: HiuDataPush
    page_count: int
    pages: dict[int, HiuDataPush]
    last_seen: float
    conflicting: bool = False


class PushPages:
    """Puts the pages of a requester's data pushes back together, per transaction, before they are handed over.

    ``add(push)`` returns the whole push (every page's entries, in page order, on the first page's fields) once its
    last page is in, and ``None`` while pages are missing. A push without ``page_count`` (or with 1) is whole as it
    is. A page received twice is taken once (the first copy). :meth:`overdue` returns, and forgets, the transactions
    whose last page arrived more than ``timeout`` seconds ago with pages still missing, so the application can
    report them as not read.

    Judgement calls: a page whose ``page_count`` differs from the transaction's first page makes the transaction
    unreadable (reported by the next :meth:`overdue`, with reason ``"pages disagree on page_count"``, and its later
    pages dropped), since which count is right cannot be known; a page without a transaction id cannot be matched
    to others and is refused (``InvalidRequest``); the bound on waiting transactions (``max_transactions``) evicts
    the one that waited longest, which is then reported by :meth:`overdue` as incomplete; a page of a transaction
    already handed over or given up on (a redelivery) is dropped, as long as the transaction is among the last
    ``10 * max_transactions`` finished.

    Args:
        timeout: seconds to wait for missing pages after the last page of a transaction arrived.
        max_transactions: transactions held waiting for pages at most.
        clock: a monotonic clock in seconds, for tests; default :func:`time.monotonic`.
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_PAGE_TIMEOUT,
        max_transactions: int = DEFAULT_MAX_TRANSACTIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not finite(timeout) or timeout <= 0:
            raise InvalidRequest("timeout must be a positive number of seconds")
        if isinstance(max_transactions, bool) or not isinstance(max_transactions, int) or max_transactions < 1:
            raise InvalidRequest("max_transactions must be a positive number")
        if not callable(clock):
            raise InvalidRequest("clock must be a function returning seconds")
        self._timeout = float(timeout)
        self._max = max_transactions
        self._clock = clock
        self._waiting: dict[str, _Waiting] = {}  # insertion order: the longest waiting first
        self._done: list[IncompletePush] = []  # reported by the next overdue()
        self._finished: dict[str, None] = {}  # transactions handed over or given up on, newest last (bounded)

    def __len__(self) -> int:
        """Transactions waiting for pages."""
        return len(self._waiting)

    def __repr__(self) -> str:
        return f"PushPages(waiting={len(self._waiting)}, timeout={self._timeout})"

    def add(self, push: HiuDataPush) -> HiuDataPush | None:
        """Take one page: the whole push when it completes its transaction, else ``None``.

        Raises:
            InvalidRequest: ``push`` is not a :class:`~health_async.models.HiuDataPush`, has no transaction id,
                or a page number outside ``1..page_count``.
        """
        if not isinstance(push, HiuDataPush):
            raise InvalidRequest("push must be the HiuDataPush of an abha.hiu_data_push event")
        count = push.page_count
        if count is None or (count == 1 and push.page_number in (None, 1)):
            return push
        if not push.transaction_id:
            raise InvalidRequest("a page of a push without a transaction id cannot be put together with the others")
        number = push.page_number
        if not 1 <= count <= MAX_PAGES or number is None or not 1 <= number <= count:
            raise InvalidRequest(f"page_number must be 1..page_count and page_count 1..{MAX_PAGES}")
        if push.transaction_id in self._finished:
            return None  # a redelivered page of a transaction already handed over (or given up on)
        now = self._clock()
        waiting = self._waiting.get(push.transaction_id)
        if waiting is None:
            waiting = self._waiting[push.transaction_id] = _Waiting(push, count, {}, now)
            self._evict()
        else:  # keep the waiting order by last arrival: move it to the end
            self._waiting[push.transaction_id] = self._waiting.pop(push.transaction_id)
        waiting.last_seen = now
        if waiting.conflicting:
            return None
        if count != waiting.page_count:
            waiting.conflicting = True
            self._report(push.transaction_id, "pages disagree on page_count")
            return None
        waiting.pages.setdefault(number, push)
        if len(waiting.pages) < waiting.page_count:
            return None
        self._finish(push.transaction_id)
        pages = [waiting.pages[n] for n in range(1, waiting.page_count + 1)]
        entries = tuple(entry for page in pages for entry in page.entries)
        return attrs.evolve(waiting.first, entries=entries, page_number=None, page_count=waiting.page_count)

    def overdue(self) -> list[IncompletePush]:
        """The transactions given up on since the last call (pages missing past ``timeout``, pages that disagree,
        or evicted by the bound), each once; they are forgotten."""
        now = self._clock()
        for transaction_id, waiting in list(self._waiting.items()):
            if waiting.conflicting or now - waiting.last_seen > self._timeout:
                if not waiting.conflicting:
                    self._report(transaction_id, "missing pages")
                self._finish(transaction_id)
        found, self._done = self._done, []
        return found

    def _report(self, transaction_id: str, reason: str) -> None:
        waiting = self._waiting[transaction_id]
        self._done.append(
            IncompletePush(
                transaction_id=transaction_id,
                consent_id=waiting.first.consent_id,
                page_count=waiting.page_count,
                received=tuple(sorted(waiting.pages)),
                reason=reason,
            )
        )

    def _evict(self) -> None:
        while len(self._waiting) > self._max:
            oldest = next(iter(self._waiting))
            if not self._waiting[oldest].conflicting:
                self._report(oldest, "missing pages")
            self._finish(oldest)

    def _finish(self, transaction_id: str) -> None:
        del self._waiting[transaction_id]
        self._finished[transaction_id] = None
        while len(self._finished) > 10 * self._max:
            del self._finished[next(iter(self._finished))]
