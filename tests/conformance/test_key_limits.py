"""Per-key limits: max_leased_per_key (the queue's default) and a key's own max_leased cap each
fairness key's leases at once, held by the database for every process that pops (here: two stores
on one database, as two replicas are), on the injected clock. A key at its limit gets nothing more;
the others still get theirs; throttled items stay ready, with no attempt spent. Weights share the
turns."""

from __future__ import annotations

import asyncio
from collections import Counter

from simplequeue.domain import Completion
from simplequeue.domain.keys import KeySettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, push
from tests.engines import FakeClock
from tests.factories import new_item


async def fill(store: Store, queue: str, counts: dict[str, int]) -> None:
    await push(
        store,
        *[
            new_item(queue, f"{key}{n}", fairness_key=key)
            for key, count in counts.items()
            for n in range(count)
        ],
    )


def keys_of(items: list) -> Counter[str | None]:  # type: ignore[type-arg]
    return Counter(item.fairness_key for item in items)


async def test_a_key_at_its_limit_gets_nothing_more_while_the_others_get_theirs(
    store: Store, queue: str
) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=2))
    await fill(store, queue, {"a": 10, "b": 10, "c": 1})

    first = await store.pop(queue, 10, 30)
    assert keys_of(first) == {"a": 2, "b": 2, "c": 1}
    assert await store.pop(queue, 10, 30) == []
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased) == (16, 5)  # throttled items stay ready

    done = next(item for item in first if item.fairness_key == "a")
    await store.complete(done.id, done.lease_token)
    [again] = await store.pop(queue, 10, 30)
    assert (again.fairness_key, again.attempts) == ("a", 1)


async def test_a_keys_own_max_leased_replaces_the_queues_and_a_reset_restores_it(
    store: Store, queue: str
) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=1))
    await fill(store, queue, {"gold": 10, "free": 10})
    await store.put_key(queue, "gold", KeySettings(max_leased=4))
    assert keys_of(await store.pop(queue, 10, 30)) == {"gold": 4, "free": 1}
    assert (await store.get_key(queue, "gold")).leased == 4

    await store.reset_key(queue, "gold")
    assert await store.pop(queue, 10, 30) == []  # gold holds 4, over its default of 1 now


async def test_a_keys_own_limit_applies_in_a_queue_without_a_default(store: Store, queue: str) -> None:
    await configure(store, queue)
    await fill(store, queue, {"small": 10, "big": 10})
    await store.put_key(queue, "small", KeySettings(max_leased=1))
    assert keys_of(await store.pop(queue, 8, 30)) == {"small": 1, "big": 7}
    await store.reset_key(queue, "small")
    assert keys_of(await store.pop(queue, 20, 30)) == {"small": 9, "big": 3}


async def test_an_expired_lease_frees_its_keys_room(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=1))
    await fill(store, queue, {"a": 3})
    [held] = await store.pop(queue, 5, 10)
    clock.advance(9.9)
    assert await store.pop(queue, 5, 10) == []
    clock.advance(0.1)
    [again] = await store.pop(queue, 5, 10)
    assert (again.id, again.attempts) == (held.id, 2)


async def test_complete_and_pop_counts_the_completions_as_ended(store: Store, queue: str) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=2))
    await fill(store, queue, {"a": 6})
    held = await store.pop(queue, 5, 30)
    assert len(held) == 2
    outcomes, nxt = await store.complete_and_pop(
        [Completion(item.id, item.lease_token) for item in held], queue, 5, 30
    )
    assert [o.value for o in outcomes] == ["completed", "completed"]
    assert keys_of(nxt) == {"a": 2}


async def test_unkeyed_items_are_one_more_key(store: Store, queue: str) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=1))
    await push(store, *[new_item(queue, n) for n in range(3)], new_item(queue, "k", fairness_key="k"))
    assert keys_of(await store.pop(queue, 5, 30)) == {None: 1, "k": 1}


async def test_a_queue_that_never_saw_a_key_hands_its_unkeyed_items_out_on_its_first_pop(
    store: Store, queue: str
) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=2))
    await push(store, *[new_item(queue, n) for n in range(3)])
    assert keys_of(await store.pop(queue, 5, 30)) == {None: 2}
    assert await store.pop(queue, 5, 30) == []


async def test_the_queues_own_max_leased_still_applies(store: Store, queue: str) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased=3, max_leased_per_key=2))
    await fill(store, queue, {"a": 5, "b": 5})
    assert len(await store.pop(queue, 10, 30)) == 3


async def test_a_heavier_key_takes_more_turns(store: Store, queue: str) -> None:
    await configure(store, queue)
    await store.put_key(queue, "heavy", KeySettings(weight=3))
    await fill(store, queue, {"heavy": 9, "light": 9})
    assert keys_of(await store.pop(queue, 8, 30)) == {"heavy": 6, "light": 2}


async def test_two_replicas_share_the_keys_limits(
    settings: Settings, store: Store, queue: str, clock: FakeClock
) -> None:
    other = store_for(settings, clock)
    await other.open()
    try:
        await configure(store, queue, limits=FlowLimits(max_leased_per_key=3))
        await fill(store, queue, {"a": 20, "b": 20})
        handed = await asyncio.gather(*[s.pop(queue, 2, 30) for s in (store, other) * 5])
        popped = [item for items in handed for item in items]
        assert keys_of(popped) == {"a": 3, "b": 3}
        assert len({item.id for item in popped}) == 6
    finally:
        await other.close()


async def test_a_replica_that_saw_no_limits_hands_out_nothing_more_than_the_keys_allow(
    settings: Settings, store: Store, queue: str, clock: FakeClock
) -> None:
    other = store_for(settings, clock)
    await other.open()
    try:
        await fill(store, queue, {"a": 6})
        [one] = await other.pop(queue, 1, 30)  # `other` has seen the queue without limits
        await store.put_key(queue, "a", KeySettings(max_leased=1))
        assert await other.pop(queue, 3, 30) == []
        assert await store.pop(queue, 3, 30) == []
        await other.complete(one.id, one.lease_token)
        assert len(await store.pop(queue, 3, 30)) == 1
    finally:
        await other.close()


async def test_a_pop_cut_short_by_a_keys_cap_holds_its_waiters_until_room_frees(
    store: Store, queue: str
) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=1))
    await fill(store, queue, {"a": 3})
    [held] = await store.pop(queue, 3, 30)
    # Items are there, but not for this key now: waiters are not woken for them...
    assert store.flow.held_by(queue) == "max_leased_per_key"
    # ...until a completion through this process frees room.
    await store.complete(held.id, held.lease_token)
    assert queue in store.flow.room_freed()  # (the service calls it at a completion)
    assert store.flow.held_by(queue) is None
    assert len(await store.pop(queue, 3, 30)) == 1
