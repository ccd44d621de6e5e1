"""A rate per key: rate_per_key_per_second (the queue's default) and a key's own rate_per_second,
each a token bucket of one second's worth (at least 1) kept in the key's row and taken in the pop's
transaction, so every replica draws on it; on the injected clock. A key out of tokens is passed over
while the others are handed out; its items stay ready; its waiters are held until it refills."""

from __future__ import annotations

from simplequeue.domain.keys import KeySettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, push
from tests.conformance.test_key_limits import fill, keys_of
from tests.engines import FakeClock
from tests.factories import new_item


async def test_each_key_has_a_bucket_that_refills_at_the_rate(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, limits=FlowLimits(rate_per_key_per_second=2))
    await fill(store, queue, {"a": 10, "b": 10})

    assert keys_of(await store.pop(queue, 20, 300)) == {"a": 2, "b": 2}  # a second's worth each
    assert await store.pop(queue, 20, 300) == []
    clock.advance(0.49)
    assert await store.pop(queue, 20, 300) == []
    clock.advance(0.01)
    assert keys_of(await store.pop(queue, 20, 300)) == {"a": 1, "b": 1}  # half a second at 2/s
    clock.advance(60)
    assert keys_of(await store.pop(queue, 20, 300)) == {"a": 2, "b": 2}  # never more than its size
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased) == (10, 10)  # throttled items stay ready


async def test_the_first_pop_of_a_queue_that_never_saw_a_key_takes_its_unkeyed_items_tokens(
    store: Store, queue: str
) -> None:
    await configure(store, queue, limits=FlowLimits(rate_per_key_per_second=2))
    await push(store, *[new_item(queue, n) for n in range(5)])
    assert keys_of(await store.pop(queue, 5, 300)) == {None: 2}
    assert await store.pop(queue, 5, 300) == []  # the clock stands still: no token made since


async def test_a_keys_own_rate_replaces_the_queues_and_a_reset_restores_it(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, limits=FlowLimits(rate_per_key_per_second=1))
    await fill(store, queue, {"gold": 10, "free": 10})
    await store.put_key(queue, "gold", KeySettings(rate_per_second=3))
    assert keys_of(await store.pop(queue, 20, 30)) == {"gold": 3, "free": 1}
    assert (await store.get_key(queue, "gold")).settings.rate_per_second == 3

    await store.reset_key(queue, "gold")  # back to the queue's 1/s, from a full bucket of 1
    clock.advance(1)
    assert keys_of(await store.pop(queue, 20, 30)) == {"gold": 1, "free": 1}


async def test_a_keys_own_rate_applies_in_a_queue_without_a_default(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue)
    await fill(store, queue, {"slow": 10, "fast": 10})
    await store.put_key(queue, "slow", KeySettings(rate_per_second=0.5))
    assert keys_of(await store.pop(queue, 8, 30)) == {"slow": 1, "fast": 7}
    clock.advance(1.0)
    assert keys_of(await store.pop(queue, 8, 30)) == {"fast": 3}  # half a token
    clock.advance(1.0)
    assert keys_of(await store.pop(queue, 8, 30)) == {"slow": 1}


async def test_unkeyed_items_are_one_more_key_with_a_bucket(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, limits=FlowLimits(rate_per_key_per_second=1))
    await push(store, *[new_item(queue, n) for n in range(3)])
    assert len(await store.pop(queue, 5, 30)) == 1
    assert await store.pop(queue, 5, 30) == []
    clock.advance(1)
    assert len(await store.pop(queue, 5, 30)) == 1


async def test_a_rate_and_a_cap_per_key_together_the_tighter_decides(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=1, rate_per_key_per_second=5))
    await fill(store, queue, {"a": 10})
    [held] = await store.pop(queue, 10, 30)  # the cap, not the 5 tokens
    await store.complete(held.id, held.lease_token)
    assert len(await store.pop(queue, 10, 30)) == 1  # the cap again, a token left for later


async def test_replicas_draw_on_one_bucket_per_key(
    settings: Settings, store: Store, queue: str, clock: FakeClock
) -> None:
    other = store_for(settings, clock)
    await other.open()
    try:
        await configure(store, queue, limits=FlowLimits(rate_per_key_per_second=2))
        await fill(store, queue, {"a": 10})
        assert len(await store.pop(queue, 1, 30)) == 1
        assert len(await other.pop(queue, 5, 30)) == 1  # what the first left
        assert await store.pop(queue, 5, 30) == []
    finally:
        await other.close()


async def test_a_pop_cut_short_by_a_keys_rate_holds_its_waiters_until_the_bucket_refills(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, limits=FlowLimits(rate_per_key_per_second=2))
    await fill(store, queue, {"a": 5})
    assert len(await store.pop(queue, 5, 30)) == 2
    assert store.flow.held_by(queue) == "rate_per_key"
    assert 0 < store.flow.hold_seconds(queue) <= 0.5  # half a second at 2/s, at most
    assert queue not in store.flow.room_freed()  # a completion frees no tokens
