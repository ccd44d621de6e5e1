"""The behaviour every store must have, run against every reachable engine."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import (
    CompleteOutcome,
    Completion,
    Failure,
    HistoryFilter,
    ItemDead,
    ItemExists,
    ItemNotFound,
    ItemStatus,
    LeasedItem,
    LeaseMismatch,
    NewItem,
    Outcome,
    Pushed,
    QueueNotFound,
)
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.factories import new_item


async def push(store: Store, item: NewItem) -> None:
    await store.push_batch([item], skip_existing=False)


async def pop_one(store: Store, queue: str, lease_seconds: int = 30) -> LeasedItem:
    items = await store.pop(queue, 1, lease_seconds)
    assert len(items) == 1, items
    return items[0]


# --- push and pop ---------------------------------------------------------------------------


async def test_pushed_item_pops_with_its_payload_and_a_lease(
    store: Store, queue: str, clock: FakeClock
) -> None:
    item = new_item(queue, {"order": 42, "lines": ["a", "b"]})
    await push(store, item)

    popped = await pop_one(store, queue, lease_seconds=45)

    assert popped.id == item.id
    assert popped.queue == queue
    assert popped.payload == {"order": 42, "lines": ["a", "b"]}
    assert popped.attempts == 1
    assert popped.lease_expires_at == clock.now + timedelta(seconds=45)
    assert await store.pop(queue, 1, 30) == []


@pytest.mark.parametrize(
    "payload",
    [None, 0, -7, 2**62, 3.25, True, "", "ünïcødé ✓ 🚀", [], {}, [1, {"a": [None, "x"]}], {"z": 1, "a": 2}],
)
async def test_payload_round_trips_any_json_value(store: Store, queue: str, payload: Any) -> None:
    await push(store, new_item(queue, payload))
    popped = await pop_one(store, queue)
    assert popped.payload == payload
    assert type(popped.payload) is type(payload)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2021, 9, 16, 17, 55, 38, 403127, tzinfo=UTC),
        datetime(315, 11, 1, 10, 52, 10, tzinfo=UTC),  # found by schemathesis: SQLite mis-stored it
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
    ids=["2021", "year-315", "year-1", "year-9999"],
)
async def test_created_at_round_trips_to_the_microsecond(store: Store, queue: str, moment: datetime) -> None:
    await push(store, new_item(queue, "given", created_at=moment))
    await push(store, new_item(queue, "now"))
    popped = await store.pop(queue, 2, 30)
    assert {p.payload: p.created_at for p in popped}["given"] == moment
    # Order is time order across every year; a year-9999 item comes after one pushed today.
    assert [p.payload for p in popped] == (["now", "given"] if moment.year > 3000 else ["given", "now"])


async def test_pop_hands_out_oldest_created_at_first_then_insertion_order(store: Store, queue: str) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    order = [("late", 30), ("early", 10), ("tie-first", 20), ("tie-second", 20)]
    for name, offset in order:
        await push(store, new_item(queue, name, created_at=base + timedelta(seconds=offset)))

    popped = await store.pop(queue, 10, 30)

    assert [p.payload for p in popped] == ["early", "tie-first", "tie-second", "late"]


async def test_pop_takes_at_most_max_items(store: Store, queue: str) -> None:
    for n in range(5):
        await push(
            store, new_item(queue, n, created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n))
        )
    first = await store.pop(queue, 3, 30)
    second = await store.pop(queue, 3, 30)
    assert [p.payload for p in first] == [0, 1, 2]
    assert [p.payload for p in second] == [3, 4]
    assert len({p.lease_token for p in first} | {p.lease_token for p in second}) == 2


async def test_queues_are_independent(store: Store, queue: str) -> None:
    await push(store, new_item(queue + "-a", "a"))
    assert await store.pop(queue + "-b", 10, 30) == []
    assert (await pop_one(store, queue + "-a")).payload == "a"


async def test_duplicate_id_is_refused_and_changes_nothing(store: Store, queue: str) -> None:
    item = new_item(queue, "original")
    await push(store, item)
    with pytest.raises(ItemExists):
        await push(store, new_item(queue + "-other", "impostor", id=item.id))
    assert (await store.get_item(item.id)).payload == "original"
    with pytest.raises(QueueNotFound):
        await store.get_queue(queue + "-other")


# --- leases ---------------------------------------------------------------------------------


async def test_leased_item_is_not_popped_again_until_its_lease_expires(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue, "job"))
    first = await pop_one(store, queue, lease_seconds=10)

    clock.advance(9.999)
    assert await store.pop(queue, 1, 10) == []

    clock.advance(0.001)
    second = await pop_one(store, queue, lease_seconds=10)
    assert second.id == first.id
    assert second.attempts == 2
    assert second.lease_token != first.lease_token


async def test_stale_lease_token_cannot_complete_and_changes_nothing(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue, "job"))
    first = await pop_one(store, queue, lease_seconds=5)
    clock.advance(6)
    second = await pop_one(store, queue, lease_seconds=5)

    with pytest.raises(LeaseMismatch):
        await store.complete(first.id, first.lease_token)

    view = await store.get_item(first.id)
    assert view.status == ItemStatus.LEASED
    assert view.attempts == 2
    await store.complete(second.id, second.lease_token)
    with pytest.raises(ItemNotFound):
        await store.get_item(first.id)


async def test_expired_but_untaken_lease_can_still_complete(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue))
    popped = await pop_one(store, queue, lease_seconds=5)
    clock.advance(60)
    assert (await store.get_item(popped.id)).status == ItemStatus.READY
    await store.complete(popped.id, popped.lease_token)
    assert await store.pop(queue, 1, 5) == []


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


# --- fail -----------------------------------------------------------------------------------


async def test_fail_with_retry_records_the_error_and_makes_the_item_ready_again(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue, "job"))
    popped = await pop_one(store, queue)
    clock.advance(1)

    view = await store.fail(popped.id, Failure("boom", popped.lease_token, retry_after_seconds=0))

    assert view.status == ItemStatus.READY
    assert view.lease_expires_at is None
    assert [(e.at, e.error) for e in view.errors] == [(clock.now, "boom")]
    again = await pop_one(store, queue)
    assert again.attempts == 2


async def test_fail_with_retry_after_keeps_the_item_back_until_then(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue))
    popped = await pop_one(store, queue)
    await store.fail(popped.id, Failure("later", popped.lease_token, retry=True, retry_after_seconds=60))

    clock.advance(59)
    assert await store.pop(queue, 1, 30) == []
    clock.advance(1)
    assert (await pop_one(store, queue)).id == popped.id


async def test_fail_without_retry_parks_the_item_dead_with_its_errors(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue, {"x": 1}))
    popped = await pop_one(store, queue)
    await store.fail(popped.id, Failure("first", popped.lease_token, retry_after_seconds=0))
    popped = await pop_one(store, queue)
    clock.advance(2)

    view = await store.fail(
        popped.id, Failure("fatal: 'quoted' \"text\" \\ ✗", popped.lease_token, retry=False)
    )

    assert view.status == ItemStatus.DEAD
    assert [e.error for e in view.errors] == ["first", "fatal: 'quoted' \"text\" \\ ✗"]
    assert view.errors[1].at == clock.now
    clock.advance(10_000)
    assert await store.pop(queue, 10, 30) == []
    assert (await store.get_item(popped.id)).status == ItemStatus.DEAD
    with pytest.raises(ItemDead):
        await store.fail(popped.id, Failure("again", None, retry=True))
    assert len((await store.get_item(popped.id)).errors) == 2


async def test_fail_with_a_stale_token_changes_nothing(store: Store, queue: str, clock: FakeClock) -> None:
    await push(store, new_item(queue))
    first = await pop_one(store, queue, lease_seconds=5)
    clock.advance(6)
    second = await pop_one(store, queue, lease_seconds=5)

    with pytest.raises(LeaseMismatch):
        await store.fail(first.id, Failure("late report", first.lease_token, retry=False))

    view = await store.get_item(second.id)
    assert view.status == ItemStatus.LEASED
    assert view.errors == []


async def test_fail_unknown_item_is_not_found(store: Store) -> None:
    with pytest.raises(ItemNotFound):
        await store.fail(uuid4(), Failure("x"))


async def test_dead_item_cannot_be_completed_only_purged(store: Store, queue: str) -> None:
    item = new_item(queue)
    await push(store, item)
    await store.fail(item.id, Failure("bad", retry=False))
    with pytest.raises(ItemDead):
        await store.complete(item.id, None)
    assert await store.complete_batch([Completion(item.id)]) == [CompleteOutcome.DEAD]

    assert await store.purge_dead(queue) == 1
    with pytest.raises(ItemNotFound):
        await store.get_item(item.id)


# --- batches -------------------------------------------------------------------------------


async def test_push_batch_inserts_all_in_order_and_registers_queues(store: Store, queue: str) -> None:
    moment = datetime(2026, 5, 1, tzinfo=UTC)
    items = [new_item(queue, n, created_at=moment) for n in range(50)] + [new_item(queue + "-b", "other")]

    pushed = await store.push_batch(items, skip_existing=False)

    assert pushed == [Pushed(i.id, i.created_at, created=True) for i in items]
    assert [p.payload for p in await store.pop(queue, 100, 30)] == list(range(50))  # ties: insertion order
    assert (await store.get_queue(queue + "-b")).ready == 1


async def test_push_batch_is_all_or_nothing(store: Store, queue: str) -> None:
    existing = new_item(queue, "first")
    await push(store, existing)
    batch = [
        new_item(queue + "-x", "a"),
        new_item(queue + "-x", "clash", id=existing.id),
        new_item(queue + "-x", "c"),
    ]

    with pytest.raises(ItemExists):
        await store.push_batch(batch, skip_existing=False)

    assert (await store.get_item(existing.id)).payload == "first"
    with pytest.raises(ItemNotFound):
        await store.get_item(batch[0].id)
    with pytest.raises(QueueNotFound):
        await store.get_queue(queue + "-x")


async def test_push_batch_can_leave_out_existing_ids(store: Store, queue: str) -> None:
    existing = new_item(queue, "first")
    await push(store, existing)
    twin = uuid4()
    batch = [
        new_item(queue, "a"),
        new_item(queue, "clash", id=existing.id),
        new_item(queue, "twin-1", id=twin),
        new_item(queue, "twin-2", id=twin),
    ]

    pushed = await store.push_batch(batch, skip_existing=True)

    assert [p and p.id for p in pushed] == [batch[0].id, None, twin, None]
    assert (await store.get_item(existing.id)).payload == "first"
    assert (await store.get_item(twin)).payload == "twin-1"
    assert (await store.get_queue(queue)).ready == 3


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


async def test_complete_and_pop_moves_an_ordered_group_on(store: Store, queue: str) -> None:
    a1, a2, a3 = (new_item(queue, f"a{n}", group="a") for n in (1, 2, 3))
    await store.push_batch([a1, a2, a3], skip_existing=False)
    head = await pop_one(store, queue)

    # A refused completion leaves the head in place: the group stays blocked.
    outcomes, popped = await store.complete_and_pop([Completion(a1.id, uuid4())], queue, 5, 30)
    assert (outcomes, popped) == ([CompleteOutcome.LEASE_MISMATCH], [])

    outcomes, popped = await store.complete_and_pop([Completion(a1.id, head.lease_token)], queue, 5, 30)
    assert outcomes == [CompleteOutcome.COMPLETED]
    assert [p.payload for p in popped] == ["a2"]  # the next head, in the same call


async def test_next_visible_at_tells_when_each_queue_has_work(
    store: Store, queue: str, clock: FakeClock
) -> None:
    idle, busy, leased = queue + "-idle", queue + "-busy", queue + "-leased"
    await push(store, new_item(busy, 1))
    await push(store, new_item(leased, 2))
    await store.pop(leased, 1, 90)

    found, now = await store.next_visible_at([idle, busy, leased])

    assert now == clock.now
    assert found == {busy: clock.now, leased: clock.now + timedelta(seconds=90)}
    assert await store.next_visible_at([]) == ({}, clock.now)


# --- inspection -----------------------------------------------------------------------------


async def test_get_item_shows_state_without_changing_it(store: Store, queue: str, clock: FakeClock) -> None:
    created = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    item = new_item(queue, [1, 2], created_at=created)
    await push(store, item)

    ready = await store.get_item(item.id)
    assert (ready.status, ready.attempts, ready.lease_expires_at, ready.created_at) == (
        ItemStatus.READY,
        0,
        None,
        created,
    )
    assert ready.payload == [1, 2]

    popped = await pop_one(store, queue, lease_seconds=30)
    leased = await store.get_item(item.id)
    assert (leased.status, leased.attempts, leased.lease_expires_at) == (
        ItemStatus.LEASED,
        1,
        popped.lease_expires_at,
    )
    assert await store.get_item(item.id) == leased


async def test_queue_stats_count_each_state(store: Store, queue: str, clock: FakeClock) -> None:
    for n in range(6):
        await push(store, new_item(queue, n, created_at=clock.now - timedelta(seconds=100 - n)))
    leased = await store.pop(queue, 3, 30)
    await store.fail(leased[0].id, Failure("dead", leased[0].lease_token, retry=False))

    stats = await store.get_queue(queue)
    assert (stats.name, stats.ready, stats.leased, stats.dead) == (queue, 3, 2, 1)
    assert stats.oldest_ready_age_seconds == pytest.approx(97)

    clock.advance(31)  # the two leases expire: their items count as ready again
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.dead) == (5, 0, 1)
    assert stats.oldest_ready_age_seconds == pytest.approx(99 + 31)
    assert queue in {q.name for q in await store.list_queues()}


async def test_a_queue_outlives_its_items_and_unknown_queues_are_not_found(store: Store, queue: str) -> None:
    item = new_item(queue)
    await push(store, item)
    await store.complete(item.id, None)

    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.dead, stats.oldest_ready_age_seconds) == (0, 0, 0, None)
    with pytest.raises(QueueNotFound):
        await store.get_queue(queue + "-never")


# --- the database's own clock ---------------------------------------------------------------


async def test_leases_follow_the_database_clock_when_none_is_injected(settings: Settings, queue: str) -> None:
    store = store_for(settings)  # no fake clock: the engine's clock decides
    await store.open()
    try:
        await store.migrate()
        await push(store, new_item(queue, "real time"))
        popped = await pop_one(store, queue, lease_seconds=1)
        assert timedelta(0) < popped.lease_expires_at - datetime.now(UTC) <= timedelta(seconds=2)
        assert await store.pop(queue, 1, 1) == []
        await asyncio.sleep(1.2)
        again = await pop_one(store, queue, lease_seconds=1)
        assert (again.id, again.attempts) == (popped.id, 2)
    finally:
        await store.close()


# --- migrations -----------------------------------------------------------------------------


async def test_migrations_are_recorded_and_safe_to_rerun(store: Store) -> None:
    assert await store.migrate() == []
    await store.check_ready()


# --- concurrency ----------------------------------------------------------------------------


async def test_concurrent_poppers_get_every_item_exactly_once(store: Store, queue: str) -> None:
    total, workers = 2000, 32
    ids = set()
    for n in range(total):
        item = new_item(queue, n)
        ids.add(item.id)
        await push(store, item)
    delivered: list[UUID] = []
    rng = random.Random(7)

    async def worker() -> None:
        for _ in range(total):  # bounded: a worker never needs more rounds than there are items
            batch = await store.pop(queue, rng.randint(1, 5), 60)
            if not batch:
                return
            for item in batch:
                delivered.append(item.id)
                await store.complete(item.id, item.lease_token)

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(workers))), timeout=120)

    assert len(delivered) == total
    assert set(delivered) == ids
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)


async def test_concurrent_pushes_are_all_kept(store: Store, queue: str) -> None:
    items = [new_item(queue, n) for n in range(300)]
    await asyncio.gather(*(push(store, i) for i in items))
    popped = (
        await store.pop(queue, 100, 30) + await store.pop(queue, 100, 30) + await store.pop(queue, 100, 30)
    )
    assert {p.id for p in popped} == {i.id for i in items}
