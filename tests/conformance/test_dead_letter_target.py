"""A dead-letter target queue (the dead_letter_queue setting, the SQS door's RedrivePolicy):
an item that dies in a queue with a target moves there in the statement or transaction that kills
it (a worker's last failure, or the sweep's reap of a lease that expired on its last attempt),
keeping its id, payload, attributes, created_at, group and errors, ready there with attempts reset.
The source keeps the dead history record; the item's dedup key frees after the source's window."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from uuid import UUID

from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    DeadFilter,
    Failure,
    HistoryFilter,
    ItemStatus,
    Outcome,
    Pushed,
    QueueError,
    encode_attributes,
)
from simplequeue.service.upkeep import reap
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.conformance.test_attributes import ATTRIBUTES
from tests.engines import FakeClock
from tests.factories import given, new_item

WINDOW = 120


async def with_target(store: Store, queue: str, max_attempts: int = 3, **settings: object) -> str:
    target = f"{queue}-dlq"
    await configure(store, target)
    await configure(store, queue, max_attempts=max_attempts, dead_letter_queue=target, **settings)
    return target


async def test_a_failure_without_retry_moves_the_item_to_the_target(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = await with_target(store, queue)
    item = replace(new_item(queue, {"job": 1}, group="g"), attributes_json=encode_attributes(ATTRIBUTES))
    await push(store, item)
    popped = await pop_one(store, queue)
    clock.advance(1)

    view = await store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))

    assert (view.queue, view.status, view.attempts) == (target, ItemStatus.READY, 0)
    assert (await store.get_queue(queue)).dead == 0
    assert (await store.list_dead(queue, DeadFilter(), 10, None)).items == []
    moved = await pop_one(store, target)
    assert (moved.id, moved.payload, moved.attributes_json) == (item.id, {"job": 1}, item.attributes_json)
    assert (moved.created_at, moved.group, moved.attempts) == (item.created_at, "g", 1)
    got = await store.get_item(item.id)
    assert [(e.at, e.error) for e in got.errors] == [(clock.now, "fatal")]
    assert got.died_at is None
    [record] = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert (record.id, record.outcome, record.attempts, record.last_error) == (
        item.id,
        Outcome.DEAD,
        1,
        "fatal",
    )
    assert (await store.list_history(target, HistoryFilter(), 10, None)).items == []


async def test_the_last_attempts_failure_moves_the_item(store: Store, queue: str) -> None:
    target = await with_target(store, queue, max_attempts=2)
    item = new_item(queue, "x")
    await push(store, item)
    first = await pop_one(store, queue)
    await store.fail(first.id, Failure("one", first.lease_token, retry_after_seconds=0))
    assert (await store.get_item(item.id)).queue == queue
    second = await pop_one(store, queue)

    view = await store.fail(second.id, Failure("two", second.lease_token, retry_after_seconds=0))

    assert (view.queue, view.status) == (target, ItemStatus.READY)
    moved = await pop_one(store, target)
    assert (moved.id, moved.attempts) == (item.id, 1)
    assert [e.error for e in (await store.get_item(item.id)).errors] == ["one", "two"]
    [record] = (await store.list_history(queue, HistoryFilter(outcome=Outcome.DEAD), 10, None)).items
    assert (record.id, record.attempts, record.last_error) == (item.id, 2, "two")


async def test_the_sweep_moves_a_lease_that_expired_on_its_last_attempt(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = await with_target(store, queue, max_attempts=1)
    item = new_item(queue, "x")
    await push(store, item)
    await pop_one(store, queue, lease_seconds=10)
    clock.advance(10)

    assert await reap(store, max_rows=100) == 1
    assert await reap(store, max_rows=100) == 0

    moved = await pop_one(store, target)
    assert (moved.id, moved.payload, moved.attempts) == (item.id, "x", 1)
    assert [e.error for e in (await store.get_item(item.id)).errors] == [LEASE_EXPIRED_ERROR]
    assert (await store.get_queue(queue)).dead == 0
    [record] = (await store.list_history(queue, HistoryFilter(outcome=Outcome.DEAD), 10, None)).items
    assert (record.id, record.last_error) == (item.id, LEASE_EXPIRED_ERROR)


async def test_a_moved_items_dedup_key_frees_after_the_sources_window(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = await with_target(store, queue, dedup_window_seconds=WINDOW)
    first = new_item(queue, "first", dedup_key="k")
    await push(store, first)
    popped = await pop_one(store, queue)
    await store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))

    retry = new_item(queue, "retry", dedup_key="k")
    assert (await push(store, retry))[0] == Pushed(first.id, first.created_at, created=False)
    assert await store.pop(queue, 10, 30) == []

    clock.advance(WINDOW)
    fresh = new_item(queue, "fresh", dedup_key="k")
    assert (await push(store, fresh))[0] == Pushed(fresh.id, fresh.created_at, created=True)
    assert (await pop_one(store, queue)).payload == "fresh"
    assert (await pop_one(store, target)).id == first.id


async def test_a_moved_items_given_id_stays_claimed_while_it_lives(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = await with_target(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first")
    await push(store, first)
    popped = await pop_one(store, queue)
    await store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))
    clock.advance(WINDOW)

    again = replace(first, payload_json='"again"')
    [answer] = await store.push_batch([again], skip_existing=True)
    assert answer is None or not answer.created
    assert (await pop_one(store, target)).payload == "first"
    assert await store.pop(queue, 10, 30) == []


async def test_a_deleted_target_means_the_item_dies_in_place(store: Store, queue: str) -> None:
    target = await with_target(store, queue)
    await store.delete_queue(target, force=True)
    item = new_item(queue, "x")
    await push(store, item)
    popped = await pop_one(store, queue)

    view = await store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))

    assert (view.queue, view.status) == (queue, ItemStatus.DEAD)
    assert [d.id for d in (await store.list_dead(queue, DeadFilter(), 10, None)).items] == [item.id]


async def test_without_a_target_items_die_in_place(store: Store, queue: str) -> None:
    await configure(store, queue, max_attempts=1)
    item = new_item(queue, "x")
    await push(store, item)
    popped = await pop_one(store, queue)
    view = await store.fail(popped.id, Failure("fatal", popped.lease_token, retry_after_seconds=0))
    assert (view.queue, view.status) == (queue, ItemStatus.DEAD)


async def test_failing_workers_and_the_sweep_move_every_item_exactly_once(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = await with_target(store, queue, max_attempts=1)
    total, workers = 200, 8
    ids: set[UUID] = set()
    for n in range(total):
        item = new_item(queue, n)
        ids.add(item.id)
        await push(store, item)
    # Half the leases run out before their workers fail them: the sweep races the failures.
    leased = await store.pop(queue, total // 2, 10) + await store.pop(queue, total // 2, 60)
    assert len(leased) == total
    clock.advance(10)

    async def worker(k: int) -> None:
        for popped in leased[k::workers]:
            # Refused when its lease ran out on its last attempt: the sweep's to move.
            with contextlib.suppress(QueueError):
                await store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))

    async def sweep() -> None:
        for _ in range(20):
            await store.reap_expired(7)
            await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(sweep(), *(worker(k) for k in range(workers))), timeout=120)
    await reap(store, max_rows=10_000)
    moved: list[UUID] = []
    while batch := await store.pop(target, 50, 60):
        for popped in batch:
            moved.append(popped.id)
            await store.complete(popped.id, popped.lease_token)

    assert sorted(moved) == sorted(ids)
    assert len(moved) == total
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)
    history = (await store.list_history(queue, HistoryFilter(outcome=Outcome.DEAD), 1000, None)).items
    assert sorted(r.id for r in history) == sorted(ids)


async def test_a_pops_reap_of_its_queue_moves_only_that_queues_expired_last_attempts(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = await with_target(store, queue, max_attempts=1)
    other = f"{queue}-other"
    other_target = await with_target(store, other, max_attempts=1)
    await push(store, mine := new_item(queue, "mine"), theirs := new_item(other, "theirs"))
    await pop_one(store, queue)
    await pop_one(store, other)
    clock.advance(31)  # both leases (30 s) ran out on their last attempt

    assert await store.reap_expired(10, queue) == 1

    assert (await store.get_item(mine.id)).queue == target
    assert (await store.get_item(theirs.id)).queue == other  # dead for readers, not moved yet
    assert (await store.get_queue(other_target)).ready == 0
    # Reaped too, so that no expired lease of this test is left for another's sweep to count.
    assert await store.reap_expired(10, other) == 1
    assert (await store.get_item(theirs.id)).queue == other_target
