"""Completing: with a token or without, one item or a batch of them each with its own outcome, and
complete_and_pop, which completes first and then pops."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest
from simplequeue.domain import (
    CompleteOutcome,
    Completion,
    HistoryFilter,
    ItemNotFound,
    ItemStatus,
    LeaseMismatch,
    Outcome,
)
from simplequeue.store.protocol import Store

from tests.conformance.helpers import pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


async def test_complete_without_token_deletes_and_a_second_complete_is_not_found(
    store: Store, queue: str
) -> None:
    item = new_item(queue)
    await push(store, item)
    await store.complete(item.id, None)
    with pytest.raises(ItemNotFound):
        await store.complete(item.id, None)
    with pytest.raises(ItemNotFound):
        await store.complete(uuid4(), uuid4())


async def test_token_for_an_item_never_leased_is_a_mismatch(store: Store, queue: str) -> None:
    item = new_item(queue)
    await push(store, item)
    with pytest.raises(LeaseMismatch):
        await store.complete(item.id, uuid4())
    assert (await store.get_item(item.id)).status == ItemStatus.READY


async def test_complete_batch_reports_each_item(store: Store, queue: str, clock: FakeClock) -> None:
    items = [new_item(queue, n, created_at=clock.now + timedelta(seconds=n)) for n in range(4)]
    await store.push_batch(items, skip_existing=False)
    a, b, c = await store.pop(queue, 3, 30)
    missing = uuid4()

    outcomes = await store.complete_batch(
        [
            Completion(a.id, a.lease_token),
            Completion(b.id, uuid4()),  # someone else's token
            Completion(missing, None),
            Completion(c.id, None),  # no token: completes whatever the lease
            Completion(items[3].id, None),  # never popped
        ]
    )

    assert outcomes == [
        CompleteOutcome.COMPLETED,
        CompleteOutcome.LEASE_MISMATCH,
        CompleteOutcome.NOT_FOUND,
        CompleteOutcome.COMPLETED,
        CompleteOutcome.COMPLETED,
    ]
    assert (await store.get_item(b.id)).status == ItemStatus.LEASED
    for gone in (a.id, c.id, items[3].id):
        with pytest.raises(ItemNotFound):
            await store.get_item(gone)


# --- complete and pop -----------------------------------------------------------------------


async def test_complete_and_pop_completes_first_then_pops(store: Store, queue: str, clock: FakeClock) -> None:
    items = [new_item(queue, n, created_at=clock.now + timedelta(seconds=n)) for n in range(4)]
    await store.push_batch(items, skip_existing=False)
    a, b = await store.pop(queue, 2, 30)

    outcomes, popped = await store.complete_and_pop(
        [Completion(a.id, a.lease_token), Completion(b.id, uuid4()), Completion(uuid4(), uuid4())],
        queue,
        5,
        30,
    )

    assert outcomes == [CompleteOutcome.COMPLETED, CompleteOutcome.LEASE_MISMATCH, CompleteOutcome.NOT_FOUND]
    assert [p.payload for p in popped] == [2, 3]
    assert len({p.lease_token for p in popped}) == 1
    with pytest.raises(ItemNotFound):
        await store.get_item(a.id)
    assert (await store.get_item(b.id)).status == ItemStatus.LEASED  # refused: untouched
    [record] = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert (record.id, record.outcome) == (a.id, Outcome.COMPLETED)


async def test_complete_and_pop_with_nothing_ready_still_commits(store: Store, queue: str) -> None:
    item = new_item(queue, "only")
    await push(store, item)
    leased = await pop_one(store, queue)
    assert await store.complete_and_pop([Completion(item.id, leased.lease_token)], queue, 1, 30) == (
        [CompleteOutcome.COMPLETED],
        [],
    )
    with pytest.raises(ItemNotFound):
        await store.get_item(item.id)


async def test_complete_and_pop_never_hands_back_what_it_completes(
    store: Store, queue: str, clock: FakeClock
) -> None:
    item = new_item(queue, "late")
    await push(store, item)
    leased = await pop_one(store, queue, lease_seconds=5)
    clock.advance(6)  # expired, not on its last attempt: poppable again, and still completable

    outcomes, popped = await store.complete_and_pop([Completion(item.id, leased.lease_token)], queue, 1, 30)

    assert (outcomes, popped) == ([CompleteOutcome.COMPLETED], [])
