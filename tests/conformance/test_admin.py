"""Administration: queue settings, inspection (items, queue stats), dead letters and redrive,
history and retention, migrations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import (
    Backoff,
    CompleteOutcome,
    Completion,
    DeadFilter,
    Failure,
    HistoryFilter,
    InvalidCursor,
    ItemNotFound,
    ItemStatus,
    Outcome,
    Page,
    Pushed,
    QueueNotFound,
    QueueSettings,
)
from simplequeue.service import batches
from simplequeue.service.upkeep import purge
from simplequeue.store.cursors import encode_cursor, encode_name_cursor
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item

# --- queue settings -------------------------------------------------------------------------


async def test_a_queue_made_by_a_push_has_the_default_settings(store: Store, queue: str) -> None:
    await push(store, new_item(queue))
    assert (await store.get_queue(queue)).settings == QueueSettings()


async def test_put_queue_creates_then_replaces_its_settings(store: Store, queue: str) -> None:
    first = QueueSettings(max_attempts=3, lease_seconds=90, backoff=Backoff(2, 3, 60, 0.5))
    assert await store.put_queue(queue, first) is True
    assert (await store.get_queue(queue)).settings == first

    second = QueueSettings(retention_seconds=60, dedup_window_seconds=0, history_payload=True)
    assert await store.put_queue(queue, second) is False
    assert (await store.get_queue(queue)).settings == second
    assert queue in [q.name for q in (await store.list_queues(1000, None)).items]


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
    assert queue in {q.name for q in (await store.list_queues(1000, None)).items}


async def test_a_queue_outlives_its_items_and_unknown_queues_are_not_found(store: Store, queue: str) -> None:
    item = new_item(queue)
    await push(store, item)
    await store.complete(item.id, None)

    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.dead, stats.oldest_ready_age_seconds) == (0, 0, 0, None)
    with pytest.raises(QueueNotFound):
        await store.get_queue(queue + "-never")


# --- the list of queues ----------------------------------------------------------------------


async def test_list_queues_pages_in_name_order_from_the_cursor(store: Store, queue: str) -> None:
    # Tests share the database: a prefix keeps this one to its own queues.
    names = [f"{queue}-{n}" for n in ("c", "a", "e", "b", "d")]
    for name in names[:4]:
        await push(store, new_item(name))
    await store.put_queue(names[4], QueueSettings(max_attempts=2))  # made by a put: listed alike

    pages = []
    cursor = None
    while True:
        page = await store.list_queues(2, cursor, queue)
        pages.append([q.name for q in page.items])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == [[f"{queue}-a", f"{queue}-b"], [f"{queue}-c", f"{queue}-d"], [f"{queue}-e"]]
    [made] = (await store.list_queues(1, encode_name_cursor(f"{queue}-c"), queue)).items
    assert (made.name, made.settings.max_attempts, made.ready) == (f"{queue}-d", 2, 0)


async def test_a_full_last_page_has_a_cursor_to_an_empty_page(store: Store, queue: str) -> None:
    await push(store, new_item(f"{queue}-a"), new_item(f"{queue}-b"))
    full = await store.list_queues(2, None, queue)
    assert [q.name for q in full.items] == [f"{queue}-a", f"{queue}-b"]
    assert await store.list_queues(2, full.next_cursor, queue) == Page([], None)


async def test_a_cursor_holds_when_its_queue_is_deleted(store: Store, queue: str) -> None:
    await push(store, new_item(f"{queue}-a"), new_item(f"{queue}-b"), new_item(f"{queue}-c"))
    first = await store.list_queues(1, None, queue)
    await store.delete_queue(f"{queue}-a", force=False)
    rest = await store.list_queues(5, first.next_cursor, queue)
    assert [q.name for q in rest.items] == [f"{queue}-b", f"{queue}-c"]


async def test_list_queues_counts_each_queue_as_get_queue_does(store: Store, queue: str) -> None:
    await push(store, new_item(f"{queue}-a"), new_item(f"{queue}-a"), new_item(f"{queue}-b"))
    listed = (await store.list_queues(10, None, queue)).items
    assert listed == [await store.get_queue(f"{queue}-a"), await store.get_queue(f"{queue}-b")]
    assert [q.ready for q in listed] == [2, 1]


async def test_without_a_prefix_every_queue_is_listed_and_none_twice(store: Store, queue: str) -> None:
    await push(store, new_item(f"{queue}-a"), new_item(f"{queue}-b"))
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_queues(7, cursor)
        seen += [q.name for q in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)) == await store.count_queues()
    assert {f"{queue}-a", f"{queue}-b"} <= set(seen)


@pytest.mark.parametrize(
    "cursor",
    [
        "not-a-cursor",
        encode_cursor(datetime(2026, 1, 1, tzinfo=UTC), 1),  # an item page's cursor
        encode_name_cursor("a b"),  # no queue's name
        encode_name_cursor("a") + "=x",
    ],
)
async def test_a_queue_cursor_not_handed_out_is_refused(store: Store, cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        await store.list_queues(2, cursor)


async def test_count_queues_counts_queues_made_by_push_and_put(store: Store, queue: str) -> None:
    before = await store.count_queues()
    await push(store, new_item(f"{queue}-a"), new_item(f"{queue}-a"))
    await store.put_queue(f"{queue}-b", QueueSettings())
    assert await store.count_queues() == before + 2


# --- dead letters ---------------------------------------------------------------------------


async def kill(store: Store, queue: str, n: int, clock: FakeClock) -> list[UUID]:
    ids = []
    for k in range(n):
        item = new_item(queue, k)
        await push(store, item)
        await store.fail(item.id, Failure(f"bad {k}", retry=False))
        ids.append(item.id)
        clock.advance(1)
    return ids


async def test_dead_letters_page_newest_first(store: Store, queue: str, clock: FakeClock) -> None:
    ids = await kill(store, queue, 5, clock)
    seen, cursor = [], None
    for _ in range(3):
        page = await store.list_dead(queue, DeadFilter(), 2, cursor)
        seen += [(v.id, v.errors[-1].error) for v in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [(ids[k], f"bad {k}") for k in reversed(range(5))]
    with pytest.raises(InvalidCursor):
        await store.list_dead(queue, DeadFilter(), 2, "not-a-cursor")


async def test_dead_letters_between_since_and_until(store: Store, queue: str, clock: FakeClock) -> None:
    start = clock.now
    ids = await kill(store, queue, 5, clock)  # died at start + 0, 1, 2, 3, 4 s
    window = DeadFilter(since=start + timedelta(seconds=1), until=start + timedelta(seconds=3))
    assert [v.id for v in (await store.list_dead(queue, window, 10, None)).items] == [ids[2], ids[1]]
    later = DeadFilter(since=start + timedelta(seconds=3))
    first = await store.list_dead(queue, later, 1, None)
    rest = await store.list_dead(queue, later, 1, first.next_cursor)
    assert [v.id for v in first.items + rest.items] == [ids[4], ids[3]]
    assert (await store.list_dead(queue, later, 1, rest.next_cursor)).items == []
    earlier = DeadFilter(until=start + timedelta(seconds=1))
    assert [v.id for v in (await store.list_dead(queue, earlier, 10, None)).items] == [ids[0]]


async def test_redrive_makes_dead_items_ready_with_attempts_reset(
    store: Store, queue: str, clock: FakeClock
) -> None:
    ids = await kill(store, queue, 3, clock)
    assert await batches.redrive(store, queue, [ids[1], uuid4()], None) == 1
    view = await store.get_item(ids[1])
    assert (view.status, view.attempts, view.died_at) == (ItemStatus.READY, 0, None)
    assert [e.error for e in view.errors] == ["bad 1"]  # the record of what went wrong stays

    assert await batches.redrive(store, queue, None, None) == 2
    assert {p.id for p in await store.pop(queue, 10, 30)} == set(ids)
    assert (await store.get_queue(queue)).dead == 0


async def test_redrive_at_a_rate_spreads_the_items_out(store: Store, queue: str, clock: FakeClock) -> None:
    ids = await kill(store, queue, 4, clock)
    assert await batches.redrive(store, queue, None, 2.0) == 4  # one every half second, oldest dead first
    due = [(await store.get_item(i)).visible_at for i in ids]
    # The first is ready now (visible since now), the others delayed by half a second each.
    assert due == [clock.now + timedelta(seconds=k / 2) for k in range(4)]


async def test_a_redrive_step_does_at_most_its_limit_and_spreads_on_from_its_offset(
    store: Store, queue: str, clock: FakeClock
) -> None:
    """The store's step, which the service's loop (service/batches.py) repeats: one bounded
    transaction, oldest dead first, its rate's count taken up after the batches before."""
    ids = await kill(store, queue, 5, clock)
    assert await store.redrive(queue, None, 2.0, 2, 0) == 2
    assert await store.redrive(queue, None, 2.0, 2, 2) == 2
    assert await store.redrive(queue, None, 2.0, 2, 4) == 1
    assert await store.redrive(queue, None, 2.0, 2, 5) == 0
    due = [(await store.get_item(i)).visible_at for i in ids]
    assert due == [clock.now + timedelta(seconds=k / 2) for k in range(5)]


async def test_purge_steps_do_at_most_their_limit(store: Store, queue: str, clock: FakeClock) -> None:
    await kill(store, queue, 3, clock)
    await push(store, *(new_item(queue) for _ in range(3)))
    assert [await store.purge_dead(queue, 2) for _ in range(3)] == [2, 1, 0]
    assert [await store.purge_live(queue, 2) for _ in range(3)] == [2, 1, 0]
    stats = await store.get_queue(queue)
    assert (stats.dead, stats.ready) == (0, 0)


async def test_purging_dead_letters_keeps_their_history(store: Store, queue: str, clock: FakeClock) -> None:
    ids = await kill(store, queue, 3, clock)
    live = new_item(queue)
    await push(store, live)
    assert await batches.purge_dead(store, queue) == 3
    for i in ids:
        with pytest.raises(ItemNotFound):
            await store.get_item(i)
    assert (await store.get_item(live.id)).status == ItemStatus.READY
    stats = await store.get_queue(queue)
    assert (stats.dead, stats.dead_in_history, stats.ready) == (0, 3, 1)


# --- history and retention ------------------------------------------------------------------


async def test_completion_writes_history_with_the_payload_only_when_asked(
    store: Store, queue: str, clock: FakeClock
) -> None:
    plain = new_item(queue, {"secret": 1}, group="g", dedup_key="k")
    await push(store, plain)
    popped_at = clock.now
    clock.advance(5)
    popped = await pop_one(store, queue)
    clock.advance(5)
    await store.complete(popped.id, popped.lease_token)
    [record] = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert (record.id, record.outcome, record.attempts) == (plain.id, Outcome.COMPLETED, 1)
    assert (record.first_popped_at, record.finished_at) == (popped_at + timedelta(seconds=5), clock.now)
    assert (record.group, record.dedup_key, record.payload) == ("g", "k", None)

    await configure(store, queue, history_payload=True)
    kept = new_item(queue, {"keep": True})
    await push(store, kept)
    assert await store.complete_batch([Completion(kept.id)]) == [CompleteOutcome.COMPLETED]
    newest = (await store.list_history(queue, HistoryFilter(), 1, None)).items[0]
    assert (newest.id, newest.payload) == (kept.id, {"keep": True})
    stats = await store.get_queue(queue)
    assert (stats.completed_in_history, stats.dead_in_history) == (2, 0)


async def test_history_filters_and_pages(store: Store, queue: str, clock: FakeClock) -> None:
    start = clock.now
    done, dead = [], []
    for n in range(6):
        item = new_item(queue, n)
        await push(store, item)
        if n % 2:
            await store.fail(item.id, Failure("x", retry=False))
            dead.append(item.id)
        else:
            await store.complete(item.id, None)
            done.append(item.id)
        clock.advance(10)

    page = await store.list_history(queue, HistoryFilter(outcome=Outcome.COMPLETED), 2, None)
    assert [r.id for r in page.items] == done[::-1][:2]
    rest = await store.list_history(queue, HistoryFilter(outcome=Outcome.COMPLETED), 2, page.next_cursor)
    assert [r.id for r in rest.items] == done[::-1][2:]
    window = HistoryFilter(since=start + timedelta(seconds=10), until=start + timedelta(seconds=30))
    assert [r.id for r in (await store.list_history(queue, window, 10, None)).items] == [done[1], dead[0]]


async def test_retention_purges_old_history_and_expired_keys_in_batches(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, retention_seconds=100, dedup_window_seconds=50)
    for n in range(5):
        await push(store, item := new_item(queue, n, dedup_key=f"k{n}"))
        await store.complete(item.id, None)
    clock.advance(60)
    await push(store, recent := new_item(queue, "recent"))
    await store.complete(recent.id, None)

    assert await store.purge_history(2) == 2  # bounded: the 5 dedup keys past their window
    clock.advance(41)  # the first five records are now past retention, the last is not
    assert await purge(store, max_rows=1000) >= 3
    remaining = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert [r.id for r in remaining] == [recent.id]
    again = new_item(queue, dedup_key="k0")
    assert (await push(store, again))[0] == Pushed(again.id, again.created_at, True)


# --- migrations -----------------------------------------------------------------------------


async def test_migrations_are_recorded_and_safe_to_rerun(store: Store) -> None:
    assert await store.migrate() == []
    await store.check_ready()
