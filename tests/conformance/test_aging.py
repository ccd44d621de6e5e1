"""Priority aging: with a queue's priority_aging_seconds, a waiting item's effective priority rises by
one per period (counted on a fixed grid from the epoch), through a static rank that pops sort by."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from simplequeue.domain import Failure
from simplequeue.domain.aging import rank_priority
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, push
from tests.engines import FakeClock
from tests.factories import new_item

PERIOD = 60


def on_grid(clock: FakeClock, periods_ago: int) -> datetime:
    """A created_at that many periods before the clock's, on a period's first second."""
    now = int(clock.now.timestamp())
    return datetime.fromtimestamp(now - now % PERIOD - periods_ago * PERIOD, UTC)


async def order(store: Store, queue: str) -> list[object]:
    """The payloads of the queue's pops of one item each, completed as they come."""
    out: list[object] = []
    while popped := await store.pop(queue, 1, 30):
        out.append(popped[0].payload)
        await store.complete(popped[0].id, popped[0].lease_token)
    return out


@pytest.mark.parametrize(
    ("apart", "first"),
    [
        (timedelta(seconds=2 * PERIOD), "high"),  # two periods: 0 + 2 < 3
        (timedelta(seconds=3 * PERIOD - 1), "high"),  # a second short of the third boundary
        (timedelta(seconds=3 * PERIOD), "low"),  # three: level, and the older pops first
        (timedelta(seconds=4 * PERIOD), "low"),
    ],
)
async def test_an_older_low_priority_item_overtakes_a_newer_high_one_after_enough_periods(
    store: Store, queue: str, clock: FakeClock, apart: timedelta, first: str
) -> None:
    await configure(store, queue, priority_aging_seconds=PERIOD)
    low_at = on_grid(clock, 10)
    await push(store, new_item(queue, "low", priority=0, created_at=low_at))
    await push(store, new_item(queue, "high", priority=3, created_at=low_at + apart))
    assert (await order(store, queue))[0] == first


async def test_the_order_holds_as_time_passes(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, priority_aging_seconds=PERIOD)
    low_at = on_grid(clock, 10)
    await push(store, new_item(queue, "low", priority=0, created_at=low_at))
    await push(store, new_item(queue, "high", priority=3, created_at=low_at + timedelta(seconds=2 * PERIOD)))
    clock.advance(100 * PERIOD)  # both have aged a hundred periods more: still two apart against three
    assert await order(store, queue) == ["high", "low"]


async def test_without_aging_priority_wins_however_old(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue)
    old = clock.now - timedelta(days=365)
    await push(store, new_item(queue, "old", priority=0, created_at=old))
    await push(store, new_item(queue, "new", priority=1))
    await push(store, new_item(queue, "newer", priority=1))
    popped = await store.pop(queue, 10, 30)
    assert [p.payload for p in popped] == ["new", "newer", "old"]
    assert [p.rank_priority for p in popped] == [1, 1, 0]


async def test_an_items_rank_is_its_priority_less_the_periods_to_its_creation(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, priority_aging_seconds=PERIOD)
    item = new_item(queue, "x", priority=7, created_at=clock.now - timedelta(seconds=1234.5))
    await push(store, item)
    [popped] = await store.pop(queue, 1, 30)
    assert popped.priority == 7  # what the producer gave stays
    assert popped.rank_priority == rank_priority(7, item.created_at, PERIOD)
    assert popped.rank_priority == 7 - int(item.created_at.timestamp()) // PERIOD


async def test_aging_with_fairness_keys_takes_turns_within_one_rank(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, priority_aging_seconds=PERIOD)
    at = on_grid(clock, 5)
    # One period's items: level, so the keys take turns (a pushed 3 before b's).
    await push(store, *[new_item(queue, f"a{n}", fairness_key="a", created_at=at) for n in range(3)])
    await push(
        store,
        *[new_item(queue, f"b{n}", fairness_key="b", created_at=at + timedelta(seconds=1)) for n in range(2)],
    )
    # A higher priority pushed a period later ranks level (1 - 1): it takes the next turn of its key.
    await push(
        store, new_item(queue, "c0", fairness_key="c", priority=1, created_at=at + timedelta(seconds=PERIOD))
    )
    # Two periods later, priority 1 ranks below the first period's items.
    await push(
        store,
        new_item(queue, "a9", fairness_key="a", priority=1, created_at=at + timedelta(seconds=2 * PERIOD)),
    )
    assert await order(store, queue) == ["a0", "b0", "c0", "a1", "b1", "a2", "a9"]


async def test_setting_aging_reranks_the_items_already_there(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue)
    low_at = on_grid(clock, 10)
    await push(store, new_item(queue, "low", priority=0, created_at=low_at))
    await push(store, new_item(queue, "high", priority=2, created_at=low_at + timedelta(seconds=5 * PERIOD)))
    await configure(store, queue, priority_aging_seconds=PERIOD)  # low is five periods older than high
    await push(store, new_item(queue, "newest", priority=2, created_at=clock.now))
    assert await order(store, queue) == ["low", "high", "newest"]


async def test_turning_aging_off_ranks_every_item_by_its_priority_again(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, priority_aging_seconds=PERIOD)
    low_at = on_grid(clock, 10)
    await push(store, new_item(queue, "low", priority=0, created_at=low_at))
    await push(store, new_item(queue, "high", priority=2, created_at=low_at + timedelta(seconds=5 * PERIOD)))
    await configure(store, queue)
    await push(store, new_item(queue, "newest", priority=1, created_at=clock.now))
    assert await order(store, queue) == ["high", "newest", "low"]


async def test_an_item_moved_to_its_dead_letter_target_ranks_by_the_targets_aging(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = f"{queue}-dlq"
    await configure(store, target, priority_aging_seconds=PERIOD)
    await configure(store, queue, max_attempts=1, dead_letter_queue=target)
    at = on_grid(clock, 10)
    await push(store, new_item(queue, "moved", priority=1, created_at=at))
    # Two periods older, one priority lower: it outranks the moved item by one there.
    await push(store, new_item(target, "there", priority=0, created_at=at - timedelta(seconds=2 * PERIOD)))
    [popped] = await store.pop(queue, 1, 30)
    await store.fail(popped.id, Failure("boom", popped.lease_token, retry=False))
    moved = await store.pop(target, 10, 30)
    assert [p.payload for p in moved] == ["there", "moved"]
    assert moved[1].rank_priority == rank_priority(1, at, PERIOD)


async def test_an_item_whose_last_lease_ran_out_moves_with_the_targets_rank(
    store: Store, queue: str, clock: FakeClock
) -> None:
    target = f"{queue}-dlq"
    await configure(store, target, priority_aging_seconds=PERIOD)
    await configure(store, queue, max_attempts=1, dead_letter_queue=target)
    at = on_grid(clock, 10)
    await push(store, new_item(queue, "moved", priority=1, created_at=at))
    await push(store, new_item(target, "there", priority=0, created_at=at - timedelta(seconds=2 * PERIOD)))
    await store.pop(queue, 1, 30)
    clock.advance(31)
    assert await store.reap_expired(10, queue) == 1
    assert await order(store, target) == ["there", "moved"]


async def test_a_lapsed_lease_pops_again_in_its_rank(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, priority_aging_seconds=PERIOD)
    at = on_grid(clock, 10)
    await push(store, new_item(queue, "old", priority=0, created_at=at))
    [leased] = await store.pop(queue, 1, 30)
    assert leased.payload == "old"
    await push(store, new_item(queue, "new", priority=2, created_at=at + timedelta(seconds=3 * PERIOD)))
    clock.advance(31)  # old's lease runs out: it pops again ahead of new, as three periods older
    assert await order(store, queue) == ["old", "new"]


async def test_a_push_and_a_rerank_rank_alike_before_the_epoch_and_within_a_second(
    store: Store, queue: str
) -> None:
    aging = 7  # not a divisor of a minute: periods fall across the clock's seconds
    times = [
        datetime(315, 3, 1, 12, 0, 0, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1970, 1, 1, 0, 0, 6, 999999, tzinfo=UTC),
        datetime(2026, 11, 29, 5, 0, 0, 123456, tzinfo=UTC),
    ]
    expected = sorted(rank_priority(n, at, aging) for n, at in enumerate(times))

    async def ranks() -> list[int]:
        popped = await store.pop(queue, 10, 30)
        for item in popped:
            await store.fail(item.id, Failure("again", item.lease_token, retry_after_seconds=0))
        return sorted(p.rank_priority or 0 for p in popped)

    await configure(store, queue, priority_aging_seconds=aging)
    await push(store, *[new_item(queue, n, priority=n, created_at=at) for n, at in enumerate(times)])
    assert await ranks() == expected  # as the push ranked them
    await configure(store, queue)
    await configure(store, queue, priority_aging_seconds=aging)
    assert await ranks() == expected  # as the re-rank did
