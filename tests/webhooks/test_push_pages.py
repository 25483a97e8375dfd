"""A requester's data push in several pages is handed over whole, once, in page order; a transaction whose pages
stop coming is reported, never handed over in part (issue 36)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from health_async import webhooks
from health_async._wire import structure
from health_async.errors import InvalidRequest
from health_async.models import HiuDataPush


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def page(txn: str, number: int | None, count: int | None, *care_contexts: str, **extra: Any) -> HiuDataPush:
    data: dict[str, Any] = {
        "transaction_id": txn,
        "consent_id": "consent-1",
        "entries": [{"care_context_id": cid, "content": f"enc-{cid}", "checksum": "c"} for cid in care_contexts],
        **extra,
    }
    if number is not None:
        data["page_number"] = number
    if count is not None:
        data["page_count"] = count
    return structure(data, HiuDataPush)


def test_the_page_fields_are_read_from_the_webhook() -> None:
    push = page("t", 2, 3, "cc-2")
    assert (push.page_number, push.page_count) == (2, 3)
    assert (page("t", None, None).page_number, page("t", None, None).page_count) == (None, None)


def test_a_push_without_pages_is_whole_as_it_is() -> None:
    pages = webhooks.PushPages()
    single = page("t-1", None, None, "cc-1", "cc-2")
    assert pages.add(single) is single
    one_of_one = page("t-2", 1, 1, "cc-1")
    assert pages.add(one_of_one) is one_of_one
    assert len(pages) == 0


@pytest.mark.parametrize("seed", range(5))
def test_pages_in_any_order_and_repeated_are_handed_over_once_in_page_order(seed: int) -> None:
    pages = webhooks.PushPages()
    sent = [page("t", n, 4, f"cc-{n}") for n in range(1, 5)]
    arrivals = [*sent, sent[1], sent[2]]  # two redeliveries
    random.Random(seed).shuffle(arrivals)
    whole = [result for result in (pages.add(p) for p in arrivals) if result is not None]
    assert len(whole) == 1  # handed over exactly once, when the last missing page arrived
    assert [e.care_context_id for e in whole[0].entries] == ["cc-1", "cc-2", "cc-3", "cc-4"]
    assert whole[0].transaction_id == "t" and whole[0].consent_id == "consent-1"
    assert len(pages) == 0 and pages.overdue() == []
    assert pages.add(sent[0]) is None and len(pages) == 0  # a redelivery after the hand-over starts nothing


def test_transactions_are_put_together_separately() -> None:
    pages = webhooks.PushPages()
    assert pages.add(page("a", 1, 2, "a-1")) is None
    assert pages.add(page("b", 2, 2, "b-2")) is None
    whole_b = pages.add(page("b", 1, 2, "b-1"))
    assert whole_b is not None and [e.care_context_id for e in whole_b.entries] == ["b-1", "b-2"]
    assert len(pages) == 1  # a still waits


def test_a_missing_page_is_reported_after_the_timeout_and_nothing_is_handed_over() -> None:
    clock = Clock()
    pages = webhooks.PushPages(timeout=30, clock=clock)
    assert pages.add(page("txn-77", 1, 3, "cc-1")) is None
    clock.now += 20
    assert pages.add(page("txn-77", 3, 3, "cc-3")) is None
    clock.now += 29  # 29 s after the last page: still waiting
    assert pages.overdue() == []
    clock.now += 2
    [incomplete] = pages.overdue()
    assert incomplete.transaction_id == "txn-77" and incomplete.consent_id == "consent-1"
    assert (incomplete.page_count, incomplete.received, incomplete.missing) == (3, (1, 3), (2,))
    assert incomplete.reason == "missing pages"
    assert pages.overdue() == [] and len(pages) == 0  # reported once, then forgotten
    assert "txn-77" not in repr(incomplete)  # the transaction id stays out of the repr
    assert pages.add(page("txn-77", 2, 3, "cc-2")) is None  # the late page of a transaction given up on: dropped
    assert len(pages) == 0 and pages.overdue() == []


def test_pages_that_disagree_on_the_count_are_reported_at_once_and_never_handed_over() -> None:
    pages = webhooks.PushPages()
    assert pages.add(page("t", 1, 2, "cc-1")) is None
    assert pages.add(page("t", 2, 3, "cc-2")) is None
    assert pages.add(page("t", 2, 2, "cc-2")) is None  # the right count now: still not handed over
    [incomplete] = pages.overdue()
    assert incomplete.reason == "pages disagree on page_count"


def test_the_bound_evicts_the_longest_waiting_and_reports_it() -> None:
    pages = webhooks.PushPages(max_transactions=2)
    for txn in ("a", "b", "c"):
        assert pages.add(page(txn, 1, 2, f"{txn}-1")) is None
    assert len(pages) == 2
    assert [i.transaction_id for i in pages.overdue()] == ["a"]


@pytest.mark.parametrize(
    "bad",
    [
        page("", 1, 2, "cc"),  # no transaction id: cannot be matched
        page("t", 3, 2, "cc"),  # a page past the count
        page("t", 0, 2, "cc"),
        page("t", None, 2, "cc"),
        page("t", 1, 10**9, "cc"),  # a count no push has
    ],
)
def test_a_page_that_cannot_be_placed_is_refused(bad: HiuDataPush) -> None:
    with pytest.raises(InvalidRequest):
        webhooks.PushPages().add(bad)


def test_bad_arguments_are_refused() -> None:
    for kwargs in ({"timeout": 0}, {"timeout": float("nan")}, {"max_transactions": 0}, {"clock": 3}):
        with pytest.raises(InvalidRequest):
            webhooks.PushPages(**kwargs)
    with pytest.raises(InvalidRequest):
        webhooks.PushPages().add({"transaction_id": "t"})  # type: ignore[arg-type]
