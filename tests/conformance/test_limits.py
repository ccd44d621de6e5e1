"""Flow limits: max_leased caps the items leased at once and a token bucket caps how fast pops hand
them out, held by the database for every process that pops (here: two stores on one database, as
two replicas are), on the injected clock. Throttled items stay ready, with no attempt spent."""

from __future__ import annotations

import asyncio

from simplequeue.domain import Completion, Failure
from simplequeue.domain.limits import FlowLimits
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, push
from tests.engines import FakeClock
from tests.factories import new_item


async def fill(store: Store, queue: str, count: int) -> None:
    await push(store, *[new_item(queue, n) for n in range(count)])


async def test_max_leased_caps_what_pops_hand_out_until_a_lease_ends(store: Store, queue: str) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased=3))
    await fill(store, queue, 10)

    first = await store.pop(queue, 2, 30)
    second = await store.pop(queue, 5, 30)
    assert (len(first), len(second)) == (2, 1)
    assert await store.pop(queue, 5, 30) == []

    # Throttled items stay ready: nothing spent, nothing moved.
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased) == (7, 3)

    await store.complete(first[0].id, first[0].lease_token)
    [after_complete] = await store.pop(queue, 5, 30)
    assert after_complete.attempts == 1

    # A failure ends its lease too (the item is ready again after its backoff).
    await store.fail(first[1].id, Failure("boom", lease_token=first[1].lease_token, retry_after_seconds=60))
    assert len(await store.pop(queue, 5, 30)) == 1


async def test_an_expired_lease_frees_its_room(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased=2))
    await fill(store, queue, 5)
    assert len(await store.pop(queue, 5, 10)) == 2
    clock.advance(9.9)
    assert await store.pop(queue, 5, 10) == []
    clock.advance(0.1)
    # Both leases ran out: room for two; the expired ones come first (oldest), on their 2nd attempt.
    again = await store.pop(queue, 5, 10)
    assert [item.attempts for item in again] == [2, 2]


async def test_complete_and_pop_counts_the_completions_as_ended(store: Store, queue: str) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased=2))
    await fill(store, queue, 6)
    held = await store.pop(queue, 2, 30)
    outcomes, nxt = await store.complete_and_pop(
        [Completion(item.id, item.lease_token) for item in held], queue, 5, 30
    )
    assert [o.value for o in outcomes] == ["completed", "completed"]
    assert len(nxt) == 2


async def test_the_rate_bucket_starts_full_then_refills_at_the_rate(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, limits=FlowLimits(rate_per_second=2, rate_burst=4))
    await fill(store, queue, 20)

    assert len(await store.pop(queue, 10, 30)) == 4  # the burst
    assert await store.pop(queue, 10, 30) == []
    clock.advance(0.49)
    assert await store.pop(queue, 10, 30) == []
    clock.advance(0.01)
    assert len(await store.pop(queue, 10, 30)) == 1  # half a second at 2/s: one token
    clock.advance(10)
    assert len(await store.pop(queue, 10, 30)) == 4  # never more than the burst, however long
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased) == (11, 9)


async def test_a_rate_without_a_burst_allows_a_seconds_worth(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, limits=FlowLimits(rate_per_second=3))
    await fill(store, queue, 10)
    assert len(await store.pop(queue, 10, 30)) == 3
    clock.advance(0.334)  # (times are kept to the microsecond: a third of a second is 0.333333)
    assert len(await store.pop(queue, 10, 30)) == 1


async def test_the_tighter_limit_decides(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased=5, rate_per_second=1, rate_burst=3))
    await fill(store, queue, 10)
    assert len(await store.pop(queue, 10, 30)) == 3  # the bucket
    clock.advance(10)
    assert len(await store.pop(queue, 10, 30)) == 2  # the leases, with tokens to spare
    clock.advance(10)
    assert await store.pop(queue, 10, 30) == []


async def test_limits_removed_stop_applying(store: Store, queue: str) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased=1))
    await fill(store, queue, 4)
    assert len(await store.pop(queue, 4, 30)) == 1
    await configure(store, queue)
    assert len(await store.pop(queue, 4, 30)) == 3


async def test_two_replicas_share_the_limits(
    settings: Settings, store: Store, queue: str, clock: FakeClock
) -> None:
    other = store_for(settings, clock)
    await other.open()
    try:
        await configure(store, queue, limits=FlowLimits(max_leased=5, rate_per_second=1, rate_burst=8))
        await fill(store, queue, 40)
        # The other replica learns of the limits from the database, not from this process.
        handed = await asyncio.gather(*[s.pop(queue, 2, 30) for s in (store, other) * 4])
        assert sum(len(items) for items in handed) == 5
        ids = [item.id for items in handed for item in items]
        assert len(set(ids)) == len(ids)
        stats = await store.get_queue(queue)
        assert stats.leased == 5
    finally:
        await other.close()


async def test_a_replica_that_saw_no_limits_hands_out_nothing_of_a_queue_limited_since(
    settings: Settings, store: Store, queue: str, clock: FakeClock
) -> None:
    other = store_for(settings, clock)
    await other.open()
    try:
        await fill(store, queue, 6)
        [one] = await other.pop(queue, 1, 30)  # `other` has seen the queue without limits
        await configure(store, queue, limits=FlowLimits(max_leased=1))
        # Whatever `other` believes, the queue's row decides: one is leased, so nothing more.
        assert await other.pop(queue, 3, 30) == []
        assert await store.pop(queue, 3, 30) == []
        await other.complete(one.id, one.lease_token)
        assert len(await store.pop(queue, 3, 30)) == 1
    finally:
        await other.close()
