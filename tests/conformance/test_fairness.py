"""Fairness between tenants: pops hand out the ready items of a queue's fairness keys round-robin,
within a priority; a queue without keys pops as it always did."""

from __future__ import annotations

from simplequeue.domain import Failure, NewItem
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, push
from tests.engines import FakeClock
from tests.factories import new_item


def keyed(queue: str, key: str | None, count: int, **fields: object) -> list[NewItem]:
    return [new_item(queue, f"{key}{n}", fairness_key=key, **fields) for n in range(count)]  # type: ignore[arg-type]


async def drain(store: Store, queue: str, count: int) -> list[str]:
    """The payloads of the next `count` pops of one item each, completed as they come."""
    out: list[str] = []
    for _ in range(count):
        popped = await store.pop(queue, 1, 30)
        if not popped:
            break
        out.append(popped[0].payload)
        await store.complete(popped[0].id, popped[0].lease_token)
    return out


def keys(payloads: list[str]) -> list[str]:
    return [p.rstrip("0123456789") for p in payloads]


async def test_a_quiet_key_is_not_starved_by_a_noisy_one(store: Store, queue: str) -> None:
    await push(store, *keyed(queue, "a", 100))
    await push(store, *keyed(queue, "b", 10))

    first = keys(await drain(store, queue, 20))
    assert first == ["a", "b"] * 10
    assert keys(await drain(store, queue, 200)) == ["a"] * 90


async def test_one_batch_of_several_keys_alternates_and_each_key_keeps_its_order(
    store: Store, queue: str
) -> None:
    await push(store, *keyed(queue, "a", 3), *keyed(queue, "b", 3), *keyed(queue, "c", 1))
    popped = await drain(store, queue, 10)
    assert popped[:3] == ["a0", "b0", "c0"]
    assert popped[3:] == ["a1", "b1", "a2", "b2"]


async def test_a_queue_without_keys_pops_in_created_order(store: Store, queue: str) -> None:
    items = [new_item(queue, n) for n in range(5)]
    await push(store, *items[:2])
    await push(store, *items[2:])
    popped = await store.pop(queue, 10, 30)
    assert [p.payload for p in popped] == [0, 1, 2, 3, 4]
    assert {(p.fair_rank, p.fairness_key) for p in popped} == {(0, None)}


async def test_unkeyed_items_of_a_fair_queue_are_one_more_key(store: Store, queue: str) -> None:
    await push(store, *keyed(queue, "a", 5))
    await push(store, *keyed(queue, None, 2))
    assert keys(await drain(store, queue, 4)) == ["a", "None", "a", "None"]


async def test_priorities_still_come_first(store: Store, queue: str) -> None:
    await push(store, *keyed(queue, "a", 3))
    await push(store, *keyed(queue, "b", 2, priority=5))
    assert keys(await drain(store, queue, 5)) == ["b", "b", "a", "a", "a"]


async def test_a_key_back_from_idle_saves_up_no_credit(store: Store, queue: str) -> None:
    await push(store, *keyed(queue, "b", 1))
    await push(store, *keyed(queue, "a", 50))
    assert keys(await drain(store, queue, 21)) == ["b", "a"] + ["a"] * 19  # b is idle: a alone pops

    await push(store, *keyed(queue, "b", 10))  # b is back: it alternates with a, no burst ahead
    assert keys(await drain(store, queue, 6)) == ["a", "b"] * 3


async def test_a_key_back_to_an_empty_queue_starts_level_with_the_others(store: Store, queue: str) -> None:
    await push(store, *keyed(queue, "a", 30))
    await push(store, *keyed(queue, "b", 1))
    await drain(store, queue, 31)
    await push(store, *keyed(queue, "a", 3))  # a pushed much, and b little: both start level now
    await push(store, *keyed(queue, "b", 3))
    assert keys(await drain(store, queue, 6)) == ["a", "b"] * 3


async def test_the_item_carries_its_key_out(store: Store, queue: str) -> None:
    [item] = keyed(queue, "tenant-7", 1)
    await push(store, item)
    assert (await store.get_item(item.id)).fairness_key == "tenant-7"
    [popped] = await store.pop(queue, 1, 30)
    assert popped.fairness_key == "tenant-7"


async def test_a_retried_item_keeps_its_place(store: Store, queue: str, clock: FakeClock) -> None:
    await push(store, *keyed(queue, "a", 3))
    await push(store, *keyed(queue, "b", 3))
    [first] = await store.pop(queue, 1, 30)
    await store.fail(first.id, Failure("again", first.lease_token, retry_after_seconds=5))
    clock.advance(6)
    assert (await store.pop(queue, 1, 30))[0].payload == first.payload


async def test_ordered_groups_stay_in_order_across_keys(store: Store, queue: str) -> None:
    await push(store, *keyed(queue, "a", 3, group="g"))
    await push(store, *keyed(queue, "b", 3))
    popped: list[str] = []
    while leased := await store.pop(queue, 10, 30):
        popped += [p.payload for p in leased]
        for p in leased:
            await store.complete(p.id, p.lease_token)
    assert [p for p in popped if p.startswith("a")] == ["a0", "a1", "a2"]
    assert len(popped) == 6


async def test_an_item_moved_to_its_dead_letter_target_keeps_its_key_and_ranks_first_there(
    store: Store, queue: str
) -> None:
    target = f"{queue}-dlq"
    await configure(store, target)
    await configure(store, queue, max_attempts=1, dead_letter_queue=target)
    await push(store, *keyed(queue, "a", 3))
    await push(store, *keyed(target, "b", 2))
    [doomed] = await store.pop(queue, 1, 30)
    await store.fail(doomed.id, Failure("bad", doomed.lease_token, retry=False))

    moved = await store.pop(target, 3, 30)
    assert [(p.payload, p.fairness_key) for p in moved] == [("a0", "a"), ("b0", "b"), ("b1", "b")]


async def test_a_queue_deleted_and_made_again_shares_its_turns_afresh(store: Store, queue: str) -> None:
    await push(store, *keyed(queue, "a", 30))
    await store.delete_queue(queue, force=True)  # its keys' rows go with it
    await push(store, *keyed(queue, "b", 2))
    await push(store, *keyed(queue, "a", 2))
    assert keys(await drain(store, queue, 4)) == ["b", "a", "b", "a"]
