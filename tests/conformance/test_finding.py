"""Finding items (the dashboard's search): a group's live items in group order, paged by seq, and
the item that holds a dedup key, live or dead, until it finishes."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest
from simplequeue.domain import Failure, InvalidCursor, ItemNotFound, ItemStatus
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


async def test_a_groups_items_come_in_group_order_with_every_live_state(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=3)
    # Created out of order: group order is the order they were pushed (seq), not created_at.
    a1, a2, a3, a4 = (
        new_item(queue, f"a{n}", group="a", created_at=clock.now - timedelta(seconds=n)) for n in (1, 2, 3, 4)
    )
    other = new_item(queue, "b1", group="b")
    loose = new_item(queue, "loose")
    await push(store, a1, other, a2, loose, a3)
    await push(store, new_item(queue, "delayed", group="a", delay_seconds=600), a4)

    assert (await pop_one(store, queue)).id == a1.id  # the oldest created of the heads

    page = await store.group_items(queue, "a", 10, None)
    assert [v.payload for v in page.items] == ["a1", "a2", "a3", "delayed", "a4"]
    assert page.items[0].status == ItemStatus.LEASED
    assert {v.group for v in page.items} == {"a"}
    assert page.next_cursor is None

    seen, cursor = [], None
    while True:
        part = await store.group_items(queue, "a", 2, cursor)
        seen += [v.payload for v in part.items]
        if part.next_cursor is None:
            break
        cursor = part.next_cursor
    assert seen == ["a1", "a2", "a3", "delayed", "a4"]


async def test_a_groups_dead_and_finished_items_are_not_listed(store: Store, queue: str) -> None:
    a1, a2 = new_item(queue, "a1", group="a"), new_item(queue, "a2", group="a")
    await push(store, a1, a2)
    head = await pop_one(store, queue)
    await store.fail(head.id, Failure("gone", head.lease_token, retry=False))  # a1 dead
    head = await pop_one(store, queue)
    await store.complete(head.id, head.lease_token)  # a2 completed
    assert (await store.group_items(queue, "a", 10, None)).items == []
    assert (await store.group_items(queue, "none such", 10, None)).items == []
    with pytest.raises(InvalidCursor):
        await store.group_items(queue, "a", 10, "not a cursor")


async def test_the_item_holding_a_dedup_key_is_found_live_or_dead(store: Store, queue: str) -> None:
    keyed = new_item(queue, "first", dedup_key="order-7")
    await push(store, keyed, new_item(queue, "other", dedup_key="order-8"))
    assert (await store.dedup_item(queue, "order-7")).id == keyed.id
    # A second push with the key matches the first: the key still finds the first.
    await push(store, new_item(queue, "again", dedup_key="order-7"))
    found = await store.dedup_item(queue, "order-7")
    assert (found.id, found.payload, found.dedup_key, found.status) == (
        keyed.id,
        "first",
        "order-7",
        ItemStatus.READY,
    )

    await store.fail(keyed.id, Failure("bad", None, retry=False))
    assert (await store.dedup_item(queue, "order-7")).status == ItemStatus.DEAD
    with pytest.raises(ItemNotFound):
        await store.dedup_item(queue, "order-9")
    with pytest.raises(ItemNotFound):
        await store.dedup_item(f"{queue}-elsewhere", "order-7")  # keys are per queue


async def test_a_finished_items_dedup_key_finds_nothing(store: Store, queue: str) -> None:
    await push(store, new_item(queue, "done", dedup_key="k"))
    popped = await pop_one(store, queue)
    await store.complete(popped.id, popped.lease_token)
    with pytest.raises(ItemNotFound):
        await store.dedup_item(queue, "k")  # the key is held for the window; its item is gone


async def test_sequence_numbers_are_the_insertion_order_a_pop_sees(store: Store, queue: str) -> None:
    first, second = new_item(queue, "a"), new_item(queue, "b")
    await push(store, first)
    await push(store, second)
    numbers = await store.sequence_numbers([second.id, first.id, uuid4()])
    assert set(numbers) == {first.id, second.id}, "an id of no item is left out"
    assert numbers[first.id] < numbers[second.id]
    popped = await pop_one(store, queue)
    assert popped.seq == numbers[popped.id]
    await store.fail(second.id, Failure("bad", retry=False))
    assert await store.sequence_numbers([second.id]) == {second.id: numbers[second.id]}, "dead ones too"
    assert await store.sequence_numbers([]) == {}
