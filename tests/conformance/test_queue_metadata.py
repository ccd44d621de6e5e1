"""A queue's metadata (SQS's CreatedTimestamp, LastModifiedTimestamp, kept attributes and tags):
read whole, changed whole under the tag limit, serialised per queue, and gone with the queue. And
the message_retention_seconds setting (SQS's MessageRetentionPeriod), past which live items expire."""

from __future__ import annotations

import asyncio

import pytest
from simplequeue.domain import (
    Failure,
    HistoryFilter,
    ItemNotFound,
    ItemStatus,
    Pushed,
    QueueNotFound,
    QueueSettings,
)
from simplequeue.domain.metadata import MetadataChange
from simplequeue.service import batches
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


async def test_created_at_is_when_the_queue_was_made_and_modified_at_when_its_settings_changed(
    store: Store, queue: str, clock: FakeClock
) -> None:
    with pytest.raises(QueueNotFound):
        await store.queue_metadata(queue)
    made = clock.now
    await store.put_queue(queue, QueueSettings())
    fresh = await store.queue_metadata(queue)
    assert (fresh.created_at, fresh.modified_at, fresh.last_modified) == (made, None, made)
    assert (dict(fresh.attributes), dict(fresh.tags)) == ({}, {})
    clock.advance(90)
    await store.put_queue(queue, QueueSettings(lease_seconds=90))
    await batches.purge_live(store, queue)
    changed = await store.queue_metadata(queue)
    assert (changed.created_at, changed.modified_at) == (made, clock.now)


async def test_a_queue_made_by_a_push_was_made_at_the_push(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue))
    assert (await store.queue_metadata(queue)).created_at == clock.now


async def test_attributes_and_tags_are_written_replaced_and_removed(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await store.put_queue(queue, QueueSettings())
    policy = '{"Version": "2012-10-17", "Statement": [' + ", ".join(["{}"] * 4000) + "]}"
    first = MetadataChange(
        set_attributes={"DelaySeconds": "5", "Policy": policy},
        set_tags={"team": "payments", "cost centre": "ünïcode ✓", "empty": ""},
    )
    assert await store.change_queue_metadata(queue, first) == 3
    read = await store.queue_metadata(queue)
    assert dict(read.attributes) == {"DelaySeconds": "5", "Policy": policy}
    assert dict(read.tags) == {"team": "payments", "cost centre": "ünïcode ✓", "empty": ""}

    clock.advance(30)
    second = MetadataChange(
        set_attributes={"DelaySeconds": "7"},
        unset_attributes=frozenset({"Policy", "never set"}),
        set_tags={"team": "billing"},
        unset_tags=frozenset({"empty", "never set"}),
    )
    assert await store.change_queue_metadata(queue, second) == 2
    read = await store.queue_metadata(queue)
    assert dict(read.attributes) == {"DelaySeconds": "7"}
    assert dict(read.tags) == {"team": "billing", "cost centre": "ünïcode ✓"}
    assert read.modified_at == clock.now


async def test_tags_alone_do_not_move_the_modified_time(store: Store, queue: str, clock: FakeClock) -> None:
    await store.put_queue(queue, QueueSettings())
    clock.advance(10)
    await store.change_queue_metadata(queue, MetadataChange(set_tags={"a": "1"}))
    assert (await store.queue_metadata(queue)).modified_at is None
    await store.change_queue_metadata(queue, MetadataChange(set_attributes={"DelaySeconds": "1"}))
    assert (await store.queue_metadata(queue)).modified_at == clock.now


async def test_a_change_that_would_pass_the_tag_limit_changes_nothing(store: Store, queue: str) -> None:
    await store.put_queue(queue, QueueSettings())
    await store.change_queue_metadata(
        queue, MetadataChange(set_tags={f"k{n}": "v" for n in range(4)}, max_tags=5)
    )
    over = MetadataChange(
        set_attributes={"DelaySeconds": "3"},
        set_tags={"k0": "replaced", "new1": "v", "new2": "v"},
        max_tags=5,
    )
    assert await store.change_queue_metadata(queue, over) == 6
    read = await store.queue_metadata(queue)
    assert dict(read.tags) == {f"k{n}": "v" for n in range(4)}
    assert dict(read.attributes) == {}
    # Removing as many as it adds keeps it within the limit.
    swap = MetadataChange(set_tags={"new1": "v", "new2": "v"}, unset_tags=frozenset({"k1", "k2"}), max_tags=5)
    assert await store.change_queue_metadata(queue, swap) == 4
    assert set((await store.queue_metadata(queue)).tags) == {"k0", "k3", "new1", "new2"}


async def test_concurrent_changes_of_one_queue_never_pass_the_limit(store: Store, queue: str) -> None:
    await store.put_queue(queue, QueueSettings())
    changes = [MetadataChange(set_tags={f"t{n}-{k}": "v" for k in range(6)}, max_tags=50) for n in range(12)]
    counts = await asyncio.gather(*(store.change_queue_metadata(queue, c) for c in changes))
    kept = (await store.queue_metadata(queue)).tags
    assert len(kept) == 48  # 8 of the 12 changes fit; each is whole or absent
    assert sorted(c for c in counts if c <= 50) == [6, 12, 18, 24, 30, 36, 42, 48]
    for n in range(12):
        present = [f"t{n}-{k}" in kept for k in range(6)]
        assert all(present) or not any(present)


async def test_changing_an_unknown_queue_is_queue_not_found_and_makes_nothing(
    store: Store, queue: str
) -> None:
    with pytest.raises(QueueNotFound):
        await store.change_queue_metadata(queue, MetadataChange(set_tags={"a": "b"}))
    assert not await store.queue_exists(queue)


async def test_metadata_goes_with_its_queue(store: Store, queue: str) -> None:
    await store.put_queue(queue, QueueSettings())
    await store.change_queue_metadata(
        queue, MetadataChange(set_attributes={"DelaySeconds": "4"}, set_tags={"team": "payments"})
    )
    other = f"{queue}-other"
    await store.put_queue(other, QueueSettings())
    await store.change_queue_metadata(other, MetadataChange(set_tags={"team": "search"}))
    await store.delete_queue(queue, force=False)
    await store.put_queue(queue, QueueSettings())
    again = await store.queue_metadata(queue)
    assert (dict(again.attributes), dict(again.tags), again.modified_at) == ({}, {}, None)
    assert dict((await store.queue_metadata(other)).tags) == {"team": "search"}


# --- MessageRetentionPeriod: live items past it expire ----------------------------------------------


async def test_live_items_past_the_retention_period_expire_without_history(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=5, dedup_window_seconds=600, message_retention_seconds=60)
    other = f"{queue}-keeps"  # no retention period: its items stay until they finish
    await push(
        store,
        old_ready := new_item(queue, "old", created_at=clock.now, dedup_key="k"),
        old_leased := new_item(queue, "leased", created_at=clock.now, priority=9),
        old_dead := new_item(queue, "dead", created_at=clock.now, priority=8),
        kept := new_item(other, "kept", created_at=clock.now),
    )
    leased = await pop_one(store, queue)
    assert leased.id == old_leased.id
    dying = await pop_one(store, queue)
    await store.fail(dying.id, Failure("gave up", lease_token=dying.lease_token, retry=False))
    clock.advance(59)
    young = new_item(queue, "young", created_at=clock.now)
    await push(store, young)
    assert await store.expire_retained(1000) >= 0
    assert (await store.get_item(old_ready.id)).status == ItemStatus.READY  # 59 s old: kept

    clock.advance(2)
    assert await store.expire_retained(1000) >= 2  # other tests' queues may hold expired items too

    for gone in (old_ready, old_leased):
        with pytest.raises(ItemNotFound):
            await store.get_item(gone.id)
    assert (await store.get_item(young.id)).status == ItemStatus.READY
    assert (await store.get_item(old_dead.id)).status == ItemStatus.DEAD  # dead letters stay
    assert (await store.get_item(kept.id)).status == ItemStatus.READY
    with pytest.raises(ItemNotFound):
        await store.complete(leased.id, leased.lease_token)
    # No history for an expiry; its dedup key's window starts as after a purge.
    records = (await store.list_history(queue, HistoryFilter(), 10, None)).items
    assert [r.id for r in records] == [old_dead.id]
    retry = new_item(queue, "retry", dedup_key="k", created_at=clock.now)
    assert (await push(store, retry))[0] == Pushed(old_ready.id, old_ready.created_at, created=False)


async def test_expiry_comes_in_batches(store: Store, queue: str, clock: FakeClock) -> None:
    await store.put_queue(queue, QueueSettings(message_retention_seconds=60))
    items = [new_item(queue, n, created_at=clock.now) for n in range(5)]
    await push(store, *items)
    clock.advance(61)
    while await store.expire_retained(2) == 2:  # bounded: at most 3 rounds for 5 items of this queue
        pass
    assert (await store.get_queue(queue)).ready == 0
