"""purge_live (SQS's PurgeQueue): every live item of a queue goes, whatever its state; dead items,
history and other queues stay; dedup keys and remembered ids start their windows, as after
purge_dead."""

from __future__ import annotations

import pytest
from simplequeue.domain import (
    Failure,
    HistoryFilter,
    ItemDead,
    ItemNotFound,
    ItemStatus,
    NewItem,
    Pushed,
)
from simplequeue.service import batches
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, finish, pop_one, push
from tests.engines import FakeClock
from tests.factories import given, new_item

WINDOW = 60


async def test_purge_live_deletes_items_of_every_live_state_and_keeps_the_dead(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=3)
    leased_item = new_item(queue, "leased", priority=9)
    await push(store, leased_item)
    leased = await pop_one(store, queue)
    retrying = new_item(queue, "retrying", priority=8)
    await push(store, retrying)
    popped = await pop_one(store, queue)
    await store.fail(popped.id, Failure("again", lease_token=popped.lease_token, retry=True))
    dead = new_item(queue, "dead")
    await push(store, dead)
    await store.fail(dead.id, Failure("poison", retry=False))
    ready = new_item(queue, "ready")
    delayed = new_item(queue, "delayed", delay_seconds=600)
    grouped = [new_item(queue, n, group="g") for n in range(3)]
    await push(store, ready, delayed, *grouped)
    done = await finish(store, queue)  # the group's head or the plain ready one: history to keep
    before = await store.get_queue(queue)
    assert (before.leased, before.retrying, before.delayed, before.dead) == (1, 1, 1, 1)
    assert before.ready == 3

    assert await batches.purge_live(store, queue) == 6

    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.delayed, stats.retrying) == (0, 0, 0, 0)
    assert (stats.dead, stats.completed_in_history, stats.dead_in_history) == (1, 1, 1)
    assert (await store.get_item(dead.id)).status == ItemStatus.DEAD
    for item in [leased_item, retrying, ready, delayed, *grouped]:
        if item.id != done.id:
            with pytest.raises(ItemNotFound):
                await store.get_item(item.id)
    # A purge writes no history: the records are the completion and the death before it.
    records = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert {r.id for r in records} == {done.id, dead.id}
    with pytest.raises(ItemNotFound):
        await store.complete(leased.id, leased.lease_token)
    assert await store.pop(queue, 10, 30) == []
    clock.advance(601)
    assert await store.pop(queue, 10, 30) == []
    assert await batches.purge_live(store, queue) == 0


async def test_a_leased_items_completion_after_a_purge_is_not_found(store: Store, queue: str) -> None:
    await push(store, new_item(queue, "one"))
    leased = await pop_one(store, queue)
    assert await batches.purge_live(store, queue) == 1
    with pytest.raises(ItemNotFound):
        await store.complete(leased.id, leased.lease_token)
    with pytest.raises(ItemNotFound):
        await store.extend(leased.id, leased.lease_token, 30)
    with pytest.raises(ItemNotFound):
        await store.fail(leased.id, Failure("late", lease_token=leased.lease_token))


async def test_a_group_purged_while_its_head_is_leased_hands_out_new_items(store: Store, queue: str) -> None:
    await push(store, *[new_item(queue, n, group="g") for n in range(3)])
    head = await pop_one(store, queue)
    assert await batches.purge_live(store, queue) == 3
    after = new_item(queue, "after", group="g")
    await push(store, after)
    assert (await pop_one(store, queue)).id == after.id
    with pytest.raises(ItemNotFound):
        await store.complete(head.id, head.lease_token)


async def test_a_lease_that_ran_out_on_its_last_attempt_is_dead_and_stays(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=1)
    await push(store, last := new_item(queue, "last"))
    leased = await pop_one(store, queue, lease_seconds=10)
    await push(store, new_item(queue, "ready"))
    clock.advance(11)

    assert await batches.purge_live(store, queue) == 1

    assert (await store.get_queue(queue)).dead == 1
    assert (await store.get_item(last.id)).id == last.id
    with pytest.raises(ItemDead):
        await store.complete(leased.id, leased.lease_token)
    # Engines share a database between tests: leave no lease for another test's sweep to find.
    await store.delete_queue(queue, force=True)


async def test_other_queues_are_untouched(store: Store, queue: str) -> None:
    other = f"{queue}-other"
    await push(store, mine := new_item(queue), theirs := new_item(other))
    assert await batches.purge_live(store, queue) == 1
    assert (await store.get_item(theirs.id)).status == ItemStatus.READY
    with pytest.raises(ItemNotFound):
        await store.get_item(mine.id)
    assert (await store.get_queue(other)).ready == 1


async def test_a_purge_of_a_queue_never_seen_purges_nothing(store: Store, queue: str) -> None:
    assert await batches.purge_live(store, queue) == 0


# --- what a retried push finds after a purge: as after a dead item's purge ------------------


def again(item: NewItem, payload: object = "retry") -> NewItem:
    return given(item.queue, payload, id=item.id)


async def test_a_purged_items_dedup_key_matches_for_the_window_then_is_free(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = new_item(queue, "first", dedup_key="k")
    await push(store, first)
    assert await batches.purge_live(store, queue) == 1

    retry = new_item(queue, "retry", dedup_key="k")
    assert (await push(store, retry))[0] == Pushed(first.id, first.created_at, created=False)
    assert await store.pop(queue, 10, 30) == []

    clock.advance(WINDOW)
    fresh = new_item(queue, "fresh", dedup_key="k")
    assert (await push(store, fresh))[0] == Pushed(fresh.id, fresh.created_at, created=True)


async def test_a_purged_items_given_id_is_remembered_for_the_window(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first")
    await push(store, first)
    await pop_one(store, queue)
    assert await batches.purge_live(store, queue) == 1

    assert (await push(store, again(first)))[0] == Pushed(first.id, first.created_at, created=False)
    assert await store.pop(queue, 10, 30) == []

    clock.advance(WINDOW)
    fresh = again(first, "after the window")
    assert (await push(store, fresh))[0] == Pushed(first.id, fresh.created_at, created=True)
    assert (await pop_one(store, queue)).payload == "after the window"
