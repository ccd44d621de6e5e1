"""Failing and retrying: a failure makes the item ready again, later (retry_after, or the queue's
backoff) or dead; the last attempt's failure or expired lease makes it dead for every reader."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest
from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    Backoff,
    CompleteOutcome,
    Completion,
    DeadFilter,
    Failure,
    HistoryFilter,
    ItemDead,
    ItemNotFound,
    ItemStatus,
    LeaseMismatch,
    Outcome,
)
from simplequeue.service import batches
from simplequeue.service.upkeep import reap
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


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

    assert await batches.purge_dead(store, queue) == 1
    with pytest.raises(ItemNotFound):
        await store.get_item(item.id)


# --- backoff --------------------------------------------------------------------------------


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


# --- the last attempt -----------------------------------------------------------------------


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

    # Recorded by that pop (it had room: it reaps its queue) or by the sweep's next round: once.
    reaped_by_pop = getattr(store, "reaps_at_pop", False)
    assert await reap(store, max_rows=100) == (0 if reaped_by_pop else 1)
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
    # (A pop now would record them, as the sweep does: it reaps its queue. Asked after the sweep.)

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
    assert await store.pop(queue, 6, 30) == []

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
