"""Leases: a leased item is not handed out again until its lease expires, a stale token changes
nothing, extend moves a live lease, and leases follow the database's clock when none is given."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from simplequeue.domain import Failure, ItemDead, ItemNotFound, ItemStatus, LeaseExpired, LeaseMismatch
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


async def test_leased_item_is_not_popped_again_until_its_lease_expires(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue, "job"))
    first = await pop_one(store, queue, lease_seconds=10)

    clock.advance(9.999)
    assert await store.pop(queue, 1, 10) == []

    clock.advance(0.001)
    second = await pop_one(store, queue, lease_seconds=10)
    assert second.id == first.id
    assert second.attempts == 2
    assert second.lease_token != first.lease_token


async def test_a_pop_without_a_lease_takes_the_queues(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, lease_seconds=75)
    await push(store, new_item(queue))
    assert (await pop_one(store, queue, None)).lease_expires_at == clock.now + timedelta(seconds=75)


async def test_a_queue_leasing_for_zero_seconds_hands_an_item_out_again_at_once(
    store: Store, queue: str, clock: FakeClock
) -> None:
    # SQS's VisibilityTimeout 0: a received message is visible again straight away; whoever holds
    # the latest lease completes it.
    await configure(store, queue, lease_seconds=0)
    assert (await store.get_queue(queue)).settings.lease_seconds == 0
    await push(store, new_item(queue, "job"))
    first = await pop_one(store, queue, None)
    assert first.lease_expires_at == clock.now
    second = await pop_one(store, queue, None)
    assert (second.id, second.attempts) == (first.id, 2)
    with pytest.raises(LeaseMismatch):
        await store.complete(first.id, first.lease_token)
    await store.complete(second.id, second.lease_token)
    assert await store.pop(queue, 1, None) == []


async def test_stale_lease_token_cannot_complete_and_changes_nothing(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue, "job"))
    first = await pop_one(store, queue, lease_seconds=5)
    clock.advance(6)
    second = await pop_one(store, queue, lease_seconds=5)

    with pytest.raises(LeaseMismatch):
        await store.complete(first.id, first.lease_token)

    view = await store.get_item(first.id)
    assert view.status == ItemStatus.LEASED
    assert view.attempts == 2
    await store.complete(second.id, second.lease_token)
    with pytest.raises(ItemNotFound):
        await store.get_item(first.id)


async def test_expired_but_untaken_lease_can_still_complete(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue))
    popped = await pop_one(store, queue, lease_seconds=5)
    clock.advance(60)
    assert (await store.get_item(popped.id)).status == ItemStatus.READY
    await store.complete(popped.id, popped.lease_token)
    assert await store.pop(queue, 1, 5) == []


# --- lease extension ------------------------------------------------------------------------


async def test_extend_moves_a_live_lease(store: Store, queue: str, clock: FakeClock) -> None:
    await push(store, new_item(queue))
    popped = await pop_one(store, queue, lease_seconds=10)
    clock.advance(8)
    view = await store.extend(popped.id, popped.lease_token, 60)
    assert (view.status, view.lease_expires_at) == (ItemStatus.LEASED, clock.now + timedelta(seconds=60))
    clock.advance(30)
    assert await store.pop(queue, 1, 30) == []  # the old expiry has passed; the new one holds
    await store.complete(popped.id, popped.lease_token)


async def test_extend_refuses_stale_expired_dead_and_unknown(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await push(store, new_item(queue))
    popped = await pop_one(store, queue, lease_seconds=10)
    with pytest.raises(LeaseMismatch):
        await store.extend(popped.id, uuid4(), 60)
    clock.advance(11)
    with pytest.raises(LeaseExpired):
        await store.extend(popped.id, popped.lease_token, 60)
    again = await pop_one(store, queue)
    with pytest.raises(LeaseMismatch):
        await store.extend(popped.id, popped.lease_token, 60)
    await store.fail(again.id, Failure("x", again.lease_token, retry=False))
    with pytest.raises(ItemDead):
        await store.extend(again.id, again.lease_token, 60)
    with pytest.raises(ItemNotFound):
        await store.extend(uuid4(), uuid4(), 60)


# --- the database's own clock ---------------------------------------------------------------


async def test_leases_follow_the_database_clock_when_none_is_injected(settings: Settings, queue: str) -> None:
    store = store_for(settings)  # no fake clock: the engine's clock decides
    await store.open()
    try:
        await store.migrate()
        await push(store, new_item(queue, "real time"))
        popped = await pop_one(store, queue, lease_seconds=1)
        assert timedelta(0) < popped.lease_expires_at - datetime.now(UTC) <= timedelta(seconds=2)
        assert await store.pop(queue, 1, 1) == []
        await asyncio.sleep(1.2)
        again = await pop_one(store, queue, lease_seconds=1)
        assert (again.id, again.attempts) == (popped.id, 2)
    finally:
        await store.close()
