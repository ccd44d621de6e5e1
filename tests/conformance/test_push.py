"""Pushing: what goes in comes out (payloads, times), ids are unique, batches are all or nothing
or leave existing ids out, delayed items wait until due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from simplequeue.domain import ItemExists, ItemNotFound, ItemStatus, Pushed, QueueNotFound
from simplequeue.store.protocol import Store

from tests.conformance.helpers import pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


async def test_pushed_item_pops_with_its_payload_and_a_lease(
    store: Store, queue: str, clock: FakeClock
) -> None:
    item = new_item(queue, {"order": 42, "lines": ["a", "b"]})
    await push(store, item)

    popped = await pop_one(store, queue, lease_seconds=45)

    assert popped.id == item.id
    assert popped.queue == queue
    assert popped.payload == {"order": 42, "lines": ["a", "b"]}
    assert popped.attempts == 1
    assert popped.lease_expires_at == clock.now + timedelta(seconds=45)
    assert await store.pop(queue, 1, 30) == []


@pytest.mark.parametrize(
    "payload",
    [None, 0, -7, 2**62, 3.25, True, "", "ünïcødé ✓ 🚀", [], {}, [1, {"a": [None, "x"]}], {"z": 1, "a": 2}],
)
async def test_payload_round_trips_any_json_value(store: Store, queue: str, payload: Any) -> None:
    await push(store, new_item(queue, payload))
    popped = await pop_one(store, queue)
    assert popped.payload == payload
    assert type(popped.payload) is type(payload)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2021, 9, 16, 17, 55, 38, 403127, tzinfo=UTC),
        datetime(315, 11, 1, 10, 52, 10, tzinfo=UTC),  # found by schemathesis: SQLite mis-stored it
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
    ids=["2021", "year-315", "year-1", "year-9999"],
)
async def test_created_at_round_trips_to_the_microsecond(store: Store, queue: str, moment: datetime) -> None:
    await push(store, new_item(queue, "given", created_at=moment))
    await push(store, new_item(queue, "now"))
    popped = await store.pop(queue, 2, 30)
    assert {p.payload: p.created_at for p in popped}["given"] == moment
    # Order is time order across every year; a year-9999 item comes after one pushed today.
    assert [p.payload for p in popped] == (["now", "given"] if moment.year > 3000 else ["given", "now"])


async def test_queues_are_independent(store: Store, queue: str) -> None:
    await push(store, new_item(queue + "-a", "a"))
    assert await store.pop(queue + "-b", 10, 30) == []
    assert (await pop_one(store, queue + "-a")).payload == "a"


async def test_duplicate_id_is_refused_and_changes_nothing(store: Store, queue: str) -> None:
    item = new_item(queue, "original")
    await push(store, item)
    with pytest.raises(ItemExists):
        await push(store, new_item(queue + "-other", "impostor", id=item.id))
    assert (await store.get_item(item.id)).payload == "original"
    with pytest.raises(QueueNotFound):
        await store.get_queue(queue + "-other")


# --- batches --------------------------------------------------------------------------------


async def test_push_batch_inserts_all_in_order_and_registers_queues(store: Store, queue: str) -> None:
    moment = datetime(2026, 5, 1, tzinfo=UTC)
    items = [new_item(queue, n, created_at=moment) for n in range(50)] + [new_item(queue + "-b", "other")]

    pushed = await store.push_batch(items, skip_existing=False)

    assert pushed == [Pushed(i.id, i.created_at, created=True) for i in items]
    assert [p.payload for p in await store.pop(queue, 100, 30)] == list(range(50))  # ties: insertion order
    assert (await store.get_queue(queue + "-b")).ready == 1


async def test_push_batch_is_all_or_nothing(store: Store, queue: str) -> None:
    existing = new_item(queue, "first")
    await push(store, existing)
    batch = [
        new_item(queue + "-x", "a"),
        new_item(queue + "-x", "clash", id=existing.id),
        new_item(queue + "-x", "c"),
    ]

    with pytest.raises(ItemExists):
        await store.push_batch(batch, skip_existing=False)

    assert (await store.get_item(existing.id)).payload == "first"
    with pytest.raises(ItemNotFound):
        await store.get_item(batch[0].id)
    with pytest.raises(QueueNotFound):
        await store.get_queue(queue + "-x")


async def test_push_batch_can_leave_out_existing_ids(store: Store, queue: str) -> None:
    existing = new_item(queue, "first")
    await push(store, existing)
    twin = uuid4()
    batch = [
        new_item(queue, "a"),
        new_item(queue, "clash", id=existing.id),
        new_item(queue, "twin-1", id=twin),
        new_item(queue, "twin-2", id=twin),
    ]

    pushed = await store.push_batch(batch, skip_existing=True)

    assert [p and p.id for p in pushed] == [batch[0].id, None, twin, None]
    assert (await store.get_item(existing.id)).payload == "first"
    assert (await store.get_item(twin)).payload == "twin-1"
    assert (await store.get_queue(queue)).ready == 3


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
