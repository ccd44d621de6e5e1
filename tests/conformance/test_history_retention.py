"""A queue keeps history only when its retention asks for it: with retention_seconds 0 an item
that completes, is failed to death or dies when its last lease runs out leaves no history record
(and its stats count none), while everything else about finishing it holds: its dedup key and
remembered id keep matching for the window, a dead item stays dead."""

from __future__ import annotations

from uuid import UUID, uuid4

from simplequeue.domain import Completion, Failure, HistoryFilter, ItemStatus, Outcome
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


async def history_of(store: Store, queue: str) -> list[tuple[str, Outcome]]:
    page = await store.list_history(queue, HistoryFilter(), 100, None)
    return sorted((str(r.id), r.outcome) for r in page.items)


async def finish_every_way(store: Store, queue: str, clock: FakeClock) -> dict[str, Outcome]:
    """Completes one item (alone), two in a batch, fails one to death and lets one die when its
    last lease runs out (the sweep's reap); what each should leave, were history kept."""
    await push(store, *(new_item(queue, n) for n in range(5)))
    completed = [await pop_one(store, queue) for _ in range(3)]
    await store.complete(completed[0].id, completed[0].lease_token)
    await store.complete_batch([Completion(i.id, i.lease_token) for i in completed[1:]])
    failed = await pop_one(store, queue)
    await store.fail(failed.id, Failure("no good", failed.lease_token, retry=False))
    expired = await pop_one(store, queue, lease_seconds=5)
    clock.advance(10)
    assert (
        await store.reap_expired(100, queue) == 1
    )  # this queue: earlier tests may leave leases that ran out
    outcomes = {str(i.id): Outcome.COMPLETED for i in completed}
    return outcomes | {str(failed.id): Outcome.DEAD, str(expired.id): Outcome.DEAD}


async def test_a_queue_with_retention_writes_every_finish_to_history(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=1, retention_seconds=3600)
    expected = await finish_every_way(store, queue, clock)
    assert await history_of(store, queue) == sorted(expected.items())
    stats = await store.get_queue(queue)
    assert (stats.completed_in_history, stats.dead_in_history) == (3, 2)


async def test_a_queue_with_retention_zero_writes_no_history(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=1, retention_seconds=0)
    expected = await finish_every_way(store, queue, clock)
    assert await history_of(store, queue) == []
    stats = await store.get_queue(queue)
    assert (stats.completed_in_history, stats.dead_in_history, stats.dead) == (0, 0, 2)
    dead = [i for i, outcome in expected.items() if outcome == Outcome.DEAD]
    for item_id in dead:
        assert (await store.get_item(UUID(item_id))).status == ItemStatus.DEAD


async def test_without_history_a_finished_items_keys_still_match(store: Store, queue: str) -> None:
    await configure(store, queue, retention_seconds=0, dedup_window_seconds=600)
    given_id = uuid4()
    [keyed] = await push(store, new_item(queue, "a", dedup_key="k"))
    [remembered] = await push(store, new_item(queue, "b", id=given_id, id_given=True))
    assert keyed is not None
    assert remembered is not None
    for _ in range(2):
        item = await pop_one(store, queue)
        await store.complete(item.id, item.lease_token)
    again = await push(
        store, new_item(queue, "a", dedup_key="k"), new_item(queue, "b", id=given_id, id_given=True)
    )
    assert [(p.id, p.created) for p in again if p is not None] == [(keyed.id, False), (given_id, False)]
    assert await history_of(store, queue) == []
