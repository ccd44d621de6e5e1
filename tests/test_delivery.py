"""Delivery semantics, on every reachable engine: queue settings, retries with backoff, dead
letters and redrive, delays, priorities, idempotency keys, lease extension, ordered groups,
history and retention. Time moves only when a test moves the clock."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from datetime import timedelta
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    Backoff,
    CompleteOutcome,
    Completion,
    DeadFilter,
    Failure,
    HistoryFilter,
    InvalidCursor,
    ItemDead,
    ItemExists,
    ItemNotFound,
    ItemStatus,
    LeasedItem,
    LeaseExpired,
    LeaseMismatch,
    NewItem,
    Outcome,
    Pushed,
    QueueSettings,
)
from simplequeue.service.upkeep import purge, reap
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.factories import new_item

NO_JITTER = Backoff(base_seconds=10, factor=2, cap_seconds=25, jitter=0)


async def push(store: Store, *items: NewItem) -> list[Pushed | None]:
    return await store.push_batch(items, skip_existing=False)


async def pop_one(store: Store, queue: str, lease_seconds: int | None = 30) -> LeasedItem:
    items = await store.pop(queue, 1, lease_seconds)
    assert len(items) == 1, items
    return items[0]


async def configure(store: Store, queue: str, **changes: object) -> QueueSettings:
    settings = QueueSettings(**{"backoff": NO_JITTER, **changes})  # type: ignore[arg-type]
    await store.put_queue(queue, settings)
    return settings


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
    assert queue in [q.name for q in await store.list_queues()]


async def test_a_pop_without_a_lease_takes_the_queues(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, lease_seconds=75)
    await push(store, new_item(queue))
    assert (await pop_one(store, queue, None)).lease_expires_at == clock.now + timedelta(seconds=75)


# --- retries and backoff --------------------------------------------------------------------


async def test_failures_back_off_exponentially_up_to_the_cap(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=10)
    await push(store, new_item(queue))
    for expected in (10, 20, 25, 25):  # base 10, factor 2, cap 25
        popped = await pop_one(store, queue)
        view = await store.fail(popped.id, Failure("flaky", popped.lease_token))
        assert view.status == ItemStatus.RETRYING
        assert view.visible_at == clock.now + timedelta(seconds=expected)
        assert (await store.get_queue(queue)).retrying == 1
        clock.advance(expected - 1)
        assert await store.pop(queue, 1, 30) == []
        clock.advance(1)


async def test_jitter_takes_off_at_most_its_share_of_the_delay(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, backoff=Backoff(base_seconds=100, factor=2, cap_seconds=1000, jitter=0.5))
    delays = []
    for _ in range(8):
        item = new_item(queue)
        await push(store, item)
        popped = await pop_one(store, queue)
        view = await store.fail(popped.id, Failure("x", popped.lease_token))
        assert view.visible_at is not None
        delays.append((view.visible_at - clock.now).total_seconds())
    assert all(50 <= d <= 100 for d in delays), delays


async def test_an_explicit_retry_after_overrides_the_backoff(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue)
    await push(store, new_item(queue))
    popped = await pop_one(store, queue)
    view = await store.fail(popped.id, Failure("x", popped.lease_token, retry_after_seconds=3.5))
    assert view.visible_at == clock.now + timedelta(seconds=3.5)


async def test_the_last_attempts_failure_makes_the_item_dead(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=2)
    item = new_item(queue, {"n": 1})
    await push(store, item)
    popped = await pop_one(store, queue)
    assert (await store.fail(popped.id, Failure("one", popped.lease_token))).status == ItemStatus.RETRYING
    clock.advance(10)
    popped = await pop_one(store, queue)

    view = await store.fail(popped.id, Failure("two", popped.lease_token))

    assert view.status == ItemStatus.DEAD
    assert view.died_at == clock.now
    assert [e.error for e in view.errors] == ["one", "two"]
    clock.advance(10_000)
    assert await store.pop(queue, 1, 30) == []
    [record] = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert (record.id, record.outcome, record.attempts, record.last_error) == (
        item.id,
        Outcome.DEAD,
        2,
        "two",
    )


async def test_a_lease_that_expires_on_the_last_attempt_goes_dead_not_ready(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=2)
    item = new_item(queue)
    await push(store, item)
    await pop_one(store, queue, lease_seconds=5)
    clock.advance(6)
    second = await pop_one(store, queue, lease_seconds=5)  # the first expiry was not the last attempt
    assert second.attempts == 2
    clock.advance(6)

    assert await store.pop(queue, 1, 30) == []
    assert (await store.get_item(item.id)).status == ItemStatus.DEAD
    assert (await store.get_queue(queue)).dead == 1

    assert await reap(store, max_rows=100) == 1
    assert await reap(store, max_rows=100) == 0
    [dead] = (await store.list_dead(queue, DeadFilter(), 10, None)).items
    assert (dead.id, dead.status, dead.died_at) == (item.id, ItemStatus.DEAD, clock.now)
    assert dead.errors[-1].error == LEASE_EXPIRED_ERROR
    [record] = (await store.list_history(queue, HistoryFilter(outcome=Outcome.DEAD), 10, None)).items
    assert record.last_error == LEASE_EXPIRED_ERROR
    with pytest.raises(ItemDead):
        await store.complete(item.id, second.lease_token)


async def test_a_lease_expired_on_its_last_attempt_is_dead_to_workers_before_the_sweep_and_after(
    store: Store, queue: str, clock: FakeClock
) -> None:
    # Dead for every reader from the moment the lease runs out; whether the sweep has recorded it yet
    # must not change what a late worker hears.
    await configure(store, queue, max_attempts=1)
    items = [new_item(queue, n) for n in range(6)]
    await push(store, *items)
    leases = {lease.id: lease for lease in await store.pop(queue, 6, 5)}
    a, b, c, d, e, f = (leases[item.id] for item in items)

    clock.advance(4)  # one second to go: still the worker's
    await store.complete(f.id, f.lease_token)
    clock.advance(1)  # the lease ends now: expired, as pop judges it (due at or before now)
    assert await store.pop(queue, 6, 30) == []

    for swept in (False, True):
        with pytest.raises(ItemDead):
            await store.complete(a.id, a.lease_token)
        with pytest.raises(ItemDead):
            await store.complete(a.id, None)
        with pytest.raises(ItemDead):
            await store.complete(a.id, uuid4())
        with pytest.raises(ItemDead):
            await store.fail(b.id, Failure("too late", b.lease_token))
        with pytest.raises(ItemDead):
            await store.fail(b.id, Failure("too late", retry=False))
        with pytest.raises(ItemDead):
            await store.extend(c.id, c.lease_token, 60)
        outcomes = await store.complete_batch(
            [Completion(d.id, d.lease_token), Completion(e.id), Completion(uuid4())]
        )
        assert outcomes == [CompleteOutcome.DEAD, CompleteOutcome.DEAD, CompleteOutcome.NOT_FOUND]
        for lease in (a, b, c, d, e):
            view = await store.get_item(lease.id)
            assert (view.status, view.attempts) == (ItemStatus.DEAD, 1)
            assert [x.error for x in view.errors] == ([LEASE_EXPIRED_ERROR] if swept else [])
        if not swept:
            # The refusals changed nothing: the sweep records all five now. (It counts other tests'
            # items too: the database is shared.)
            assert await reap(store, max_rows=10_000) >= 5

    history = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert sorted((r.outcome, r.last_error) for r in history) == [
        (Outcome.COMPLETED, None),
        *[(Outcome.DEAD, LEASE_EXPIRED_ERROR)] * 5,
    ]


async def test_a_lease_expired_before_its_last_attempt_can_still_be_finished_with_its_token(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=2)
    failing, completing = new_item(queue, 1), new_item(queue, 2)
    await push(store, failing, completing)
    leases = {lease.id: lease for lease in await store.pop(queue, 2, 5)}
    clock.advance(60)  # both expired, nobody has popped them since

    view = await store.fail(
        failing.id, Failure("late", leases[failing.id].lease_token, retry_after_seconds=0)
    )
    assert (view.status, view.attempts) == (ItemStatus.READY, 1)
    await store.complete(completing.id, leases[completing.id].lease_token)
    with pytest.raises(ItemNotFound):
        await store.get_item(completing.id)


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
    assert await store.redrive(queue, [ids[1], uuid4()], None) == 1
    view = await store.get_item(ids[1])
    assert (view.status, view.attempts, view.died_at) == (ItemStatus.READY, 0, None)
    assert [e.error for e in view.errors] == ["bad 1"]  # the record of what went wrong stays

    assert await store.redrive(queue, None, None) == 2
    assert {p.id for p in await store.pop(queue, 10, 30)} == set(ids)
    assert (await store.get_queue(queue)).dead == 0


async def test_redrive_at_a_rate_spreads_the_items_out(store: Store, queue: str, clock: FakeClock) -> None:
    ids = await kill(store, queue, 4, clock)
    assert await store.redrive(queue, None, 2.0) == 4  # one every half second, oldest dead first
    due = [(await store.get_item(i)).visible_at for i in ids]
    assert due == [None] + [clock.now + timedelta(seconds=k / 2) for k in range(1, 4)]


async def test_purging_dead_letters_keeps_their_history(store: Store, queue: str, clock: FakeClock) -> None:
    ids = await kill(store, queue, 3, clock)
    live = new_item(queue)
    await push(store, live)
    assert await store.purge_dead(queue) == 3
    for i in ids:
        with pytest.raises(ItemNotFound):
            await store.get_item(i)
    assert (await store.get_item(live.id)).status == ItemStatus.READY
    stats = await store.get_queue(queue)
    assert (stats.dead, stats.dead_in_history, stats.ready) == (0, 3, 1)


# --- delays ---------------------------------------------------------------------------------


async def test_delayed_items_wait_until_due(store: Store, queue: str, clock: FakeClock) -> None:
    later = new_item(queue, "later", delay_seconds=30)
    at = new_item(queue, "at", not_before=clock.now + timedelta(seconds=60))
    await push(store, later, at)
    view = await store.get_item(later.id)
    assert (view.status, view.visible_at) == (ItemStatus.DELAYED, clock.now + timedelta(seconds=30))
    stats = await store.get_queue(queue)
    assert (stats.delayed, stats.ready) == (2, 0)

    clock.advance(29)
    assert await store.pop(queue, 10, 30) == []
    clock.advance(1)
    [due] = await store.pop(queue, 10, 30)
    assert due.payload == "later"
    await store.complete(due.id, due.lease_token)
    clock.advance(30)
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["at"]


# --- priorities -----------------------------------------------------------------------------


async def test_higher_priority_pops_first_then_oldest_then_first_pushed(
    store: Store, queue: str, clock: FakeClock
) -> None:
    t = clock.now
    items = [
        new_item(queue, "low-old", priority=-1, created_at=t - timedelta(hours=1)),
        new_item(queue, "mid-new", priority=0, created_at=t),
        new_item(queue, "mid-old", priority=0, created_at=t - timedelta(minutes=1)),
        new_item(queue, "high-a", priority=7, created_at=t),
        new_item(queue, "high-b", priority=7, created_at=t),
    ]
    await push(store, *items)
    assert [p.payload for p in await store.pop(queue, 10, 30)] == [
        "high-a",
        "high-b",
        "mid-old",
        "mid-new",
        "low-old",
    ]


# --- idempotency ----------------------------------------------------------------------------


async def test_a_repeated_dedup_key_returns_the_original(store: Store, queue: str) -> None:
    first = new_item(queue, "first", dedup_key="order-1")
    [pushed] = await push(store, first)
    assert pushed == Pushed(first.id, first.created_at, created=True)

    again = new_item(queue, "again", dedup_key="order-1")
    assert await push(store, again) == [Pushed(first.id, first.created_at, created=False)]
    with pytest.raises(ItemNotFound):
        await store.get_item(again.id)
    assert (await store.get_item(first.id)).dedup_key == "order-1"
    other_queue = new_item(queue + "-2", dedup_key="order-1")
    assert (await push(store, other_queue))[0] == Pushed(other_queue.id, other_queue.created_at, created=True)


async def test_a_retried_push_with_its_own_id_and_key_is_a_duplicate_not_a_conflict(
    store: Store, queue: str
) -> None:
    item = new_item(queue, dedup_key="k")
    await push(store, item)
    assert await push(store, item) == [Pushed(item.id, item.created_at, created=False)]
    with pytest.raises(ItemExists):  # the same id under another key is still a conflict
        await push(store, new_item(queue, id=item.id, dedup_key="other"))


async def test_dedup_inside_one_batch(store: Store, queue: str) -> None:
    a, b, c = (new_item(queue, n, dedup_key=k) for n, k in enumerate(["x", "y", "x"]))
    pushed = await push(store, a, b, c)
    assert pushed == [
        Pushed(a.id, a.created_at, True),
        Pushed(b.id, b.created_at, True),
        Pushed(a.id, a.created_at, False),
    ]
    assert len(await store.pop(queue, 10, 30)) == 2


async def test_a_key_keeps_matching_for_the_window_after_its_item_finished(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=60)
    first = new_item(queue, dedup_key="k")
    await push(store, first)
    popped = await pop_one(store, queue)
    await store.complete(popped.id, popped.lease_token)

    clock.advance(59)
    assert (await push(store, new_item(queue, dedup_key="k")))[0] == Pushed(first.id, first.created_at, False)
    clock.advance(1)
    fresh = new_item(queue, dedup_key="k")
    assert (await push(store, fresh))[0] == Pushed(fresh.id, fresh.created_at, True)


async def test_a_dead_item_holds_its_key_until_purged(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, dedup_window_seconds=0)
    first = new_item(queue, dedup_key="k")
    await push(store, first)
    await store.fail(first.id, Failure("bad", retry=False))
    assert (await push(store, new_item(queue, dedup_key="k")))[0].created is False  # type: ignore[union-attr]
    await store.purge_dead(queue)
    assert (await push(store, new_item(queue, dedup_key="k")))[0].created is True  # type: ignore[union-attr]


async def test_concurrent_identical_pushes_insert_one_row(store: Store, queue: str) -> None:
    attempts = [new_item(queue, n, dedup_key="same") for n in range(24)]
    results = await asyncio.wait_for(asyncio.gather(*(push(store, i) for i in attempts)), timeout=60)
    flat = [r for [r] in results]
    winners = [r for r in flat if r is not None and r.created]
    assert len(winners) == 1
    assert {r.id for r in flat if r is not None} == {winners[0].id}
    assert len(await store.pop(queue, 100, 30)) == 1


# --- lease extension ------------------------------------------------------------------------


async def test_extend_moves_a_live_lease(store: Store, queue: str, clock: FakeClock) -> None:
    await push(store, new_item(queue))
    popped = await pop_one(store, queue, lease_seconds=10)
    clock.advance(8)
    view = await store.extend(popped.id, popped.lease_token, 60)
    assert (view.status, view.lease_expires_at) == (ItemStatus.LEASED, clock.now + timedelta(seconds=60))
    clock.advance(30)
    assert await store.pop(queue, 1, 30) == []  # the old expiry has passed; the new one holds
    await store.complete(popped.id, popped.lease_token)


async def test_extend_refuses_stale_expired_dead_and_unknown(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue))
    popped = await pop_one(store, queue, lease_seconds=10)
    with pytest.raises(LeaseMismatch):
        await store.extend(popped.id, uuid4(), 60)
    clock.advance(11)
    with pytest.raises(LeaseExpired):
        await store.extend(popped.id, popped.lease_token, 60)
    again = await pop_one(store, queue)
    with pytest.raises(LeaseMismatch):
        await store.extend(popped.id, popped.lease_token, 60)
    await store.fail(again.id, Failure("x", again.lease_token, retry=False))
    with pytest.raises(ItemDead):
        await store.extend(again.id, again.lease_token, 60)
    with pytest.raises(ItemNotFound):
        await store.extend(uuid4(), uuid4(), 60)


# --- ordered groups -------------------------------------------------------------------------


async def test_a_group_hands_out_its_head_only(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, max_attempts=2)
    a1, a2, a3 = (new_item(queue, f"a{n}", group="a") for n in (1, 2, 3))
    b1 = new_item(queue, "b1", group="b")
    loose = new_item(queue, "loose")
    await push(store, a1, a2, a3, b1, loose)

    assert {p.payload for p in await store.pop(queue, 10, 30)} == {"a1", "b1", "loose"}
    await store.complete(a1.id, None)
    [head] = await store.pop(queue, 10, 30)
    assert head.payload == "a2"
    await store.fail(a2.id, Failure("retry me", head.lease_token))  # retrying: still the head
    clock.advance(10)
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["a2"]
    await store.fail(a2.id, Failure("dead now", None))  # dead: no longer blocks
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["a3"]


async def test_a_redriven_item_rejoins_its_group_at_the_back(store: Store, queue: str) -> None:
    a1, a2 = new_item(queue, "a1", group="a"), new_item(queue, "a2", group="a")
    await push(store, a1, a2)
    await store.fail(a1.id, Failure("bad", retry=False))
    [leased] = await store.pop(queue, 10, 30)
    assert leased.payload == "a2"
    await store.redrive(queue, None, None)
    assert await store.pop(queue, 10, 30) == []  # a2 is in flight, and a1 is now behind it
    await store.complete(leased.id, leased.lease_token)
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["a1"]


async def test_groups_under_32_workers_never_overlap_and_finish_in_order(store: Store, queue: str) -> None:
    groups, per_group, workers = 8, 25, 32
    pushed: dict[str, list[UUID]] = defaultdict(list)
    for n in range(per_group):
        batch = [new_item(queue, n, group=f"g{g}") for g in range(groups)]
        await push(store, *batch)
        for g, item in enumerate(batch):
            pushed[f"g{g}"].append(item.id)
    for n in range(40):  # ungrouped work in between
        await push(store, new_item(queue, -n))
    in_flight: set[str] = set()
    finished: dict[str, list[UUID]] = defaultdict(list)
    overlaps: list[str] = []
    rng = random.Random(11)

    async def worker() -> None:
        for _ in range(groups * per_group + 40):  # bounded
            batch = await store.pop(queue, rng.randint(1, 4), 120)
            if not batch:
                if sum(map(len, finished.values())) == groups * per_group:
                    return
                await asyncio.sleep(0.005)
                continue
            for item in batch:
                if item.group is not None:
                    if item.group in in_flight:
                        overlaps.append(item.group)
                    in_flight.add(item.group)
            await asyncio.sleep(0)
            for item in batch:
                if item.group is not None:
                    in_flight.discard(item.group)
                    finished[item.group].append(item.id)
                await store.complete(item.id, item.lease_token)

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(workers))), timeout=120)

    assert overlaps == []
    assert dict(finished) == dict(pushed)


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
