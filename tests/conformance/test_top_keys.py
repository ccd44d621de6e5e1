"""A queue's busiest keys, as its stats show them: the keys with the most ready items first (then
the most leased), at most the limit asked, each with its unexpired leases and its cap (its own
max_leased, else the queue's max_leased_per_key), on the injected clock. Unkeyed items of a queue
with keys are the key None; a queue that never saw a key has none."""

from __future__ import annotations

from simplequeue.domain.keys import KeyLoad, KeySettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, push
from tests.conformance.test_key_limits import fill
from tests.engines import FakeClock
from tests.factories import new_item


async def test_the_keys_with_most_ready_come_first_with_their_leases_and_caps(
    store: Store, queue: str
) -> None:
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=2))
    await fill(store, queue, {"big": 9, "mid": 5, "gold": 4, "tiny": 1})
    await push(store, new_item(queue, "unkeyed"))
    await store.put_key(queue, "gold", KeySettings(max_leased=3))
    popped = await store.pop(queue, 20, 30)
    assert len(popped) == 2 + 2 + 3 + 1 + 1

    assert await store.top_keys(queue, 10) == [
        KeyLoad("big", 7, 2, 2),
        KeyLoad("mid", 3, 2, 2),
        KeyLoad("gold", 1, 3, 3),
        KeyLoad("tiny", 0, 1, 2),
        KeyLoad(None, 0, 1, 2),  # ties on ready and leased: keys in key order, the unkeyed last
    ]
    top = await store.top_keys(queue, 2)
    assert [(k.key, k.at_limit) for k in top] == [("big", True), ("mid", True)]


async def test_a_finished_key_drops_out_and_an_expired_lease_counts_as_ready(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, lease_seconds=10)
    await fill(store, queue, {"done": 1, "slow": 2})
    popped = await store.pop(queue, 3, 10)
    finished = next(item for item in popped if item.fairness_key == "done")
    await store.complete(finished.id, finished.lease_token)
    assert await store.top_keys(queue, 10) == [KeyLoad("slow", 0, 2, None)]

    clock.advance(11)  # the leases ran out: poppable again, and no longer held
    assert await store.top_keys(queue, 10) == [KeyLoad("slow", 2, 0, None)]


async def test_a_queue_without_keys_has_no_top_keys(store: Store, queue: str) -> None:
    await configure(store, queue)
    await push(store, new_item(queue, "a"), new_item(queue, "b"))
    assert await store.top_keys(queue, 10) == []
    assert await store.top_keys("never-made", 10) == []
