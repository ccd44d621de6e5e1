"""Popping: the order items are handed out in (priority, then age, then insertion), how many, and
when each queue next has work."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from simplequeue.domain import CompleteOutcome, Completion
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, push
from tests.engines import FakeClock
from tests.factories import new_item


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


# --- when there is work ---------------------------------------------------------------------


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


async def test_an_items_view_says_when_it_became_or_becomes_poppable(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, now := new_item(queue, "now", created_at=clock.now))
    await push(store, later := new_item(queue, "later", created_at=clock.now, delay_seconds=30))
    ready = await store.get_item(now.id)
    assert (ready.status, ready.visible_at) == ("ready", clock.now)
    delayed = await store.get_item(later.id)
    assert (delayed.status, delayed.visible_at) == ("delayed", clock.now + timedelta(seconds=30))
    clock.advance(31)
    assert (await store.get_item(later.id)).visible_at == clock.now - timedelta(seconds=1)  # ready since
    [leased] = await store.pop(queue, 1, 60)
    view = await store.get_item(leased.id)
    assert (view.status, view.visible_at, view.lease_expires_at) == (
        "leased",
        None,
        clock.now + timedelta(seconds=60),
    )


# --- leases that ran out --------------------------------------------------------------------


async def _ready_and_expired(store: Store, queue: str, clock: FakeClock) -> None:
    """Two leases that ran out (hi, a), one in flight (b), and ready items on either side of them
    in pop order (top before all, mid between a and b, c to e after)."""
    t = clock.now
    await push(
        store,
        new_item(queue, "hi", priority=5, created_at=t - timedelta(seconds=10)),
        *(new_item(queue, name, created_at=t - timedelta(seconds=s)) for name, s in [("a", 60), ("b", 50)]),
        *(new_item(queue, name, created_at=t - timedelta(seconds=s)) for name, s in [("c", 40), ("d", 30)]),
    )
    assert [p.payload for p in await store.pop(queue, 2, 10)] == ["hi", "a"]
    assert [p.payload for p in await store.pop(queue, 1, 100)] == ["b"]
    clock.advance(11)
    await push(
        store,
        new_item(queue, "top", priority=9, created_at=t),
        new_item(queue, "mid", created_at=t - timedelta(seconds=55)),
    )


async def test_leases_that_ran_out_are_popped_again_in_pop_order_among_ready_items(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await _ready_and_expired(store, queue, clock)

    first = await store.pop(queue, 4, 30)
    assert [(p.payload, p.attempts) for p in first] == [("top", 1), ("hi", 2), ("a", 2), ("mid", 1)]
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["c", "d"]  # b's lease still runs


async def test_complete_and_pop_takes_leases_that_ran_out_in_pop_order_too(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await _ready_and_expired(store, queue, clock)
    [top] = await store.pop(queue, 1, 30)
    assert top.payload == "top"

    outcomes, popped = await store.complete_and_pop([Completion(top.id, top.lease_token)], queue, 2, 30)
    assert outcomes == [CompleteOutcome.COMPLETED]
    assert [(p.payload, p.attempts) for p in popped] == [("hi", 2), ("a", 2)]
    outcomes, popped = await store.complete_and_pop([], queue, 10, 30)
    assert [p.payload for p in popped] == ["mid", "c", "d"]


async def test_a_lease_that_ran_out_on_its_last_attempt_is_not_popped(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=1)
    await push(
        store, new_item(queue, "once", created_at=clock.now - timedelta(seconds=5)), new_item(queue, "next")
    )
    assert [p.payload for p in await store.pop(queue, 1, 10)] == ["once"]
    clock.advance(11)
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["next"]
    # The lapsed last attempt would be the next sweep's, whichever test runs it: it goes here.
    await store.delete_queue(queue, force=True)


async def test_a_group_head_whose_lease_ran_out_is_popped_again_before_the_rest_of_its_group(
    store: Store, queue: str, clock: FakeClock
) -> None:
    t = clock.now
    await push(
        store,
        new_item(queue, "g1", group="g", created_at=t - timedelta(seconds=60)),
        new_item(queue, "g2", group="g", created_at=t - timedelta(seconds=50)),
        new_item(queue, "free", created_at=t - timedelta(seconds=40)),
    )
    assert [p.payload for p in await store.pop(queue, 1, 10)] == ["g1"]
    assert [p.payload for p in await store.pop(queue, 10, 100)] == ["free"]  # g2 waits for its head
    clock.advance(11)
    [again] = await store.pop(queue, 10, 30)
    assert (again.payload, again.attempts) == ("g1", 2)
