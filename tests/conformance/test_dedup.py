"""Idempotent pushes: a dedup key, and an id its producer chose, each stand for one item while it
lives and for the queue's dedup window after it finished.

A retried push never makes a second item. Two paths push: a single push goes through the
service's coalescer (the store's skip_existing mode, where one caller's refusal must not fail
its neighbours), a batch through the all-or-nothing mode; the `send` fixture holds each rule on
both.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import Completion, Failure, ItemExists, ItemNotFound, NewItem, Pushed
from simplequeue.service import batches
from simplequeue.service.pushing import PushCoalescer
from simplequeue.service.upkeep import purge
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, finish, pop_one, push
from tests.engines import FakeClock
from tests.factories import given, new_item

WINDOW = 60

Push = Callable[[NewItem], Awaitable[Pushed]]


@pytest.fixture(params=["single", "batch"])
def send(request: pytest.FixtureRequest, store: Store) -> Push:
    """One item pushed as a single push (coalesced) or as a batch of one; ItemExists either way
    when it is refused."""
    if request.param == "single":
        return PushCoalescer(store).push

    async def batch(item: NewItem) -> Pushed:
        [result] = await store.push_batch([item], skip_existing=False)
        assert result is not None
        return result

    return batch


def again(item: NewItem, payload: object = "retry") -> NewItem:
    """The same push sent again: same id and queue; a fresh attempt's own created_at and payload
    (a retry built anew must still find the first)."""
    return given(item.queue, payload, id=item.id)


def original(item: NewItem) -> Pushed:
    return Pushed(item.id, item.created_at, created=False)


# --- dedup keys -----------------------------------------------------------------------------


async def test_a_repeated_dedup_key_returns_the_original(store: Store, queue: str) -> None:
    first = new_item(queue, "first", dedup_key="order-1")
    [pushed] = await push(store, first)
    assert pushed == Pushed(first.id, first.created_at, created=True)

    again = new_item(queue, "again", dedup_key="order-1")
    assert await push(store, again) == [Pushed(first.id, first.created_at, created=False)]
    with pytest.raises(ItemNotFound):
        await store.get_item(again.id)
    assert (await store.get_item(first.id)).dedup_key == "order-1"
    other_queue = new_item(queue + "-2", dedup_key="order-1")
    assert (await push(store, other_queue))[0] == Pushed(other_queue.id, other_queue.created_at, created=True)


async def test_a_retried_push_with_its_own_id_and_key_is_a_duplicate_not_a_conflict(
    store: Store, queue: str
) -> None:
    item = new_item(queue, dedup_key="k")
    await push(store, item)
    assert await push(store, item) == [Pushed(item.id, item.created_at, created=False)]
    with pytest.raises(ItemExists):  # the same id under another key is still a conflict
        await push(store, new_item(queue, id=item.id, dedup_key="other"))


async def test_dedup_inside_one_batch(store: Store, queue: str) -> None:
    a, b, c = (new_item(queue, n, dedup_key=k) for n, k in enumerate(["x", "y", "x"]))
    pushed = await push(store, a, b, c)
    assert pushed == [
        Pushed(a.id, a.created_at, True),
        Pushed(b.id, b.created_at, True),
        Pushed(a.id, a.created_at, False),
    ]
    assert len(await store.pop(queue, 10, 30)) == 2


async def test_a_key_keeps_matching_for_the_window_after_its_item_finished(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=60)
    first = new_item(queue, dedup_key="k")
    await push(store, first)
    popped = await pop_one(store, queue)
    await store.complete(popped.id, popped.lease_token)

    clock.advance(59)
    assert (await push(store, new_item(queue, dedup_key="k")))[0] == Pushed(first.id, first.created_at, False)
    clock.advance(1)
    fresh = new_item(queue, dedup_key="k")
    assert (await push(store, fresh))[0] == Pushed(fresh.id, fresh.created_at, True)


async def test_a_window_from_the_send_ends_whether_or_not_the_item_is_still_there(
    store: Store, queue: str, clock: FakeClock, send: Push
) -> None:
    # SQS FIFO's deduplication interval: the key matches for the window after the push that
    # claimed it, while its item waits and after it finished alike.
    await configure(store, queue, dedup_window_seconds=60, dedup_window_from="send")
    assert (await store.get_queue(queue)).settings.dedup_window_from == "send"
    first = new_item(queue, "first", dedup_key="k")
    assert (await send(first)).created
    clock.advance(59)
    assert await send(new_item(queue, dedup_key="k")) == original(first)
    clock.advance(1)
    waiting = new_item(queue, "second", dedup_key="k")  # the first is still there, not popped
    assert await send(waiting) == Pushed(waiting.id, waiting.created_at, created=True)
    assert [i.payload for i in await store.pop(queue, 10, 30)] == ["first", "second"]


async def test_a_window_from_the_send_is_not_restarted_when_the_item_finishes(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=60, dedup_window_from="send")
    first = new_item(queue, dedup_key="k")
    await push(store, first)
    clock.advance(30)
    await finish(store, queue)
    clock.advance(29)
    assert (await push(store, new_item(queue, dedup_key="k")))[0] == original(first)
    clock.advance(1)
    assert (await push(store, new_item(queue, dedup_key="k")))[0].created  # type: ignore[union-attr]


async def test_a_dead_item_holds_its_key_until_purged(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, dedup_window_seconds=0)
    first = new_item(queue, dedup_key="k")
    await push(store, first)
    await store.fail(first.id, Failure("bad", retry=False))
    assert (await push(store, new_item(queue, dedup_key="k")))[0].created is False  # type: ignore[union-attr]
    await batches.purge_dead(store, queue)
    assert (await push(store, new_item(queue, dedup_key="k")))[0].created is True  # type: ignore[union-attr]


async def test_concurrent_identical_pushes_insert_one_row(store: Store, queue: str) -> None:
    attempts = [new_item(queue, n, dedup_key="same") for n in range(24)]
    results = await asyncio.wait_for(asyncio.gather(*(push(store, i) for i in attempts)), timeout=60)
    flat = [r for [r] in results]
    winners = [r for r in flat if r is not None and r.created]
    assert len(winners) == 1
    assert {r.id for r in flat if r is not None} == {winners[0].id}
    assert len(await store.pop(queue, 100, 30)) == 1


# --- remembered ids: the retry after the item finished --------------------------------------


async def test_a_retry_after_completion_answers_the_original_and_inserts_nothing(
    store: Store, queue: str, send: Push, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first", created_at=datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=clock.now.tzinfo))
    assert await send(first) == Pushed(first.id, first.created_at, created=True)
    await finish(store, queue)

    assert await send(again(first)) == original(first)

    assert await store.pop(queue, 10, 30) == []
    with pytest.raises(ItemNotFound):
        await store.get_item(first.id)
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.completed_in_history) == (0, 1)


async def test_a_retry_while_the_item_lives_answers_the_original(
    store: Store, queue: str, send: Push
) -> None:
    first = given(queue, "first")
    await send(first)
    assert await send(again(first)) == original(first)  # ready
    [leased] = await store.pop(queue, 1, 30)
    assert await send(again(first)) == original(first)  # leased
    assert (await store.get_item(first.id)).payload == "first"
    assert await store.pop(queue, 10, 30) == []
    await store.complete(leased.id, leased.lease_token)


async def test_a_dead_item_holds_its_id_and_its_window_starts_when_it_is_purged(
    store: Store, queue: str, send: Push, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first")
    await send(first)
    await store.fail(first.id, Failure("poison", retry=False))
    assert await send(again(first)) == original(first)

    clock.advance(WINDOW * 10)  # dead for long: still held, the window has not started
    assert await send(again(first)) == original(first)
    assert await batches.purge_dead(store, queue) == 1
    assert await send(again(first)) == original(first)
    clock.advance(WINDOW - 1)
    assert await send(again(first)) == original(first)
    assert await store.pop(queue, 10, 30) == []

    clock.advance(1)
    fresh = again(first, "after the window")
    assert await send(fresh) == Pushed(first.id, fresh.created_at, created=True)
    assert (await store.pop(queue, 10, 30))[0].payload == "after the window"


async def test_a_redriven_item_keeps_its_id_remembered(store: Store, queue: str, send: Push) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first")
    await send(first)
    await store.fail(first.id, Failure("poison", retry=False))
    assert await batches.redrive(store, queue, None, None) == 1
    await finish(store, queue)
    assert await send(again(first)) == original(first)
    assert await store.pop(queue, 10, 30) == []


async def test_after_the_window_the_id_is_a_new_item(
    store: Store, queue: str, send: Push, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first")
    await send(first)
    await finish(store, queue)

    clock.advance(WINDOW - 1)
    assert await send(again(first)) == original(first)
    clock.advance(1)
    fresh = again(first, "second life")
    assert await send(fresh) == Pushed(first.id, fresh.created_at, created=True)
    popped = await finish(store, queue)
    assert popped.payload == "second life"
    # The new item's window is its own, from its own completion.
    clock.advance(WINDOW - 1)
    assert await send(again(first)) == original(fresh)


async def test_a_window_of_zero_forgets_the_id_when_the_item_finishes(
    store: Store, queue: str, send: Push
) -> None:
    await configure(store, queue, dedup_window_seconds=0)
    first = given(queue, "first")
    await send(first)
    assert await send(again(first)) == original(first)  # still live: held whatever the window
    await finish(store, queue)
    assert (await send(again(first))).created is True


async def test_the_id_is_remembered_when_the_queue_keeps_no_history(
    store: Store, queue: str, send: Push, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW, retention_seconds=0)
    first = given(queue, "first")
    await send(first)
    await finish(store, queue)
    clock.advance(1)
    await purge(store, max_rows=10_000)
    assert (await store.get_queue(queue)).completed_in_history == 0

    assert await send(again(first)) == original(first)


async def test_the_sweep_forgets_ids_past_their_window_and_no_sooner(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first")
    await store.push_batch([first], skip_existing=False)
    await finish(store, queue)

    clock.advance(WINDOW - 1)
    await purge(store, max_rows=10_000)
    assert await store.push_batch([again(first)], skip_existing=False) == [original(first)]
    clock.advance(1)
    assert await store.purge_history(1000) >= 1  # the claim itself goes
    assert (await store.push_batch([again(first)], skip_existing=True))[0].created is True  # type: ignore[union-attr]


# --- remembered ids in batches --------------------------------------------------------------


async def test_a_retried_batch_inserts_only_what_is_new(store: Store, queue: str) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    a, b = given(queue, "a"), given(queue, "b")
    await store.push_batch([a, b], skip_existing=False)
    [popped] = await store.pop(queue, 1, 30)
    await store.complete(popped.id, popped.lease_token)  # a is done, b is waiting
    c = given(queue, "c")

    results = await store.push_batch([again(a), again(b), c], skip_existing=False)

    assert results == [original(a), original(b), Pushed(c.id, c.created_at, created=True)]
    assert sorted(p.payload for p in await store.pop(queue, 10, 30)) == ["b", "c"]


async def test_a_batch_naming_an_id_twice_inserts_it_once(store: Store, queue: str) -> None:
    a = given(queue, "first")
    results = await store.push_batch([a, again(a, "second")], skip_existing=False)
    assert results == [Pushed(a.id, a.created_at, created=True), original(a)]
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["first"]


async def test_single_pushes_of_one_id_committed_together_make_one_item(store: Store, queue: str) -> None:
    pusher = PushCoalescer(store)
    a = given(queue, "first")
    results = await asyncio.gather(*(pusher.push(again(a, n)) for n in range(5)))
    assert sum(r.created for r in results) == 1
    assert {r.id for r in results} == {a.id}
    assert len(await store.pop(queue, 10, 30)) == 1


# --- what a remembered id is not ------------------------------------------------------------


async def test_an_id_held_by_another_queue_is_refused_live_or_remembered(
    store: Store, queue: str, send: Push
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    first = given(queue, "first")
    await send(first)
    elsewhere = given(queue + "-other", "impostor", id=first.id)
    with pytest.raises(ItemExists):
        await send(elsewhere)
    await finish(store, queue)
    with pytest.raises(ItemExists):
        await send(elsewhere)
    # In a batch it fails the whole batch; coalesced, only its own caller.
    bystander = given(queue + "-other", "bystander")
    with pytest.raises(ItemExists):
        await store.push_batch([bystander, elsewhere], skip_existing=False)
    assert await store.push_batch([bystander, elsewhere], skip_existing=True) == [
        Pushed(bystander.id, bystander.created_at, created=True),
        None,
    ]


async def test_with_a_dedup_key_the_key_decides_and_the_id_is_not_remembered(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    keyed = given(queue, "keyed", dedup_key="order-7")
    await store.push_batch([keyed], skip_existing=False)
    await finish(store, queue)

    retry = given(queue, "retry", id=keyed.id, dedup_key="order-7")
    assert await store.push_batch([retry], skip_existing=False) == [original(keyed)]
    # Another key with the same id is not a retry of it: a new item (the id is free again).
    other = given(queue, "other key", id=keyed.id, dedup_key="order-8")
    assert (await store.push_batch([other], skip_existing=False))[0].created is True  # type: ignore[union-attr]


async def test_ids_the_service_made_are_not_remembered(store: Store, queue: str) -> None:
    """Nobody retries with an id the service made, so its item claims nothing: the cost of the
    memory stays with producers' ids."""
    await configure(store, queue, dedup_window_seconds=WINDOW)
    made = new_item(queue, "made by the service")
    await store.push_batch([made], skip_existing=True)
    await finish(store, queue)
    assert (await store.push_batch([new_item(queue, "again", id=made.id)], skip_existing=True))[0] is not None


async def test_deleting_a_queue_frees_its_items_ids(store: Store, queue: str) -> None:
    await configure(store, queue, dedup_window_seconds=WINDOW)
    live = given(queue, "live")
    await store.push_batch([live], skip_existing=False)
    await store.delete_queue(queue, force=True)
    moved = given(queue + "-new", "moved", id=live.id)
    assert (await store.push_batch([moved], skip_existing=False))[0].created is True  # type: ignore[union-attr]


# --- remembered ids under concurrency -------------------------------------------------------


async def test_every_push_sent_twice_under_load_is_processed_once(store: Store, queue: str) -> None:
    """8 producers send each of their pushes twice, the second after a random delay (as a
    producer does whose answer was lost), some by single push and some by batch, while 4 workers
    pop and complete: each id is processed exactly once, and none is lost."""
    await configure(store, queue, dedup_window_seconds=WINDOW)
    rng = random.Random(27)
    producers, per_producer = 8, 40
    pusher = PushCoalescer(store)
    processed: Counter[UUID] = Counter()
    acknowledged: set[UUID] = set()
    pushing_done = asyncio.Event()

    async def submit(item: NewItem, as_batch: bool) -> None:
        if as_batch:
            [result] = await store.push_batch([item], skip_existing=False)
            assert result is not None
        else:
            result = await pusher.push(item)
        assert result.id == item.id
        acknowledged.add(result.id)

    async def producer(n: int) -> None:
        delays = [rng.uniform(0, 0.05) for _ in range(per_producer)]
        retries = []
        for k in range(per_producer):
            item = given(queue, {"producer": n, "k": k}, id=uuid4())
            await submit(item, as_batch=k % 3 == 0)
            retries.append(asyncio.create_task(_later(delays[k], submit(again(item), as_batch=k % 2 == 0))))
        await asyncio.gather(*retries)

    async def worker() -> None:
        for _ in range(10_000):  # bounded: the test's timeout ends it sooner if it ever spins
            batch = await store.pop(queue, 5, 30)
            if not batch:
                if pushing_done.is_set() and (await store.get_queue(queue)).ready == 0:
                    return
                await asyncio.sleep(0.005)
                continue
            processed.update(item.id for item in batch)
            await store.complete_batch([Completion(item.id, item.lease_token) for item in batch])

    async def produce() -> None:
        await asyncio.gather(*(producer(n) for n in range(producers)))
        pushing_done.set()

    await asyncio.wait_for(asyncio.gather(produce(), *(worker() for _ in range(4))), timeout=120)

    assert len(acknowledged) == producers * per_producer
    twice = [item_id for item_id, count in processed.items() if count > 1]
    assert twice == [], f"{len(twice)} items processed more than once"
    assert set(processed) == acknowledged, "every acknowledged push processed, nothing else"
    assert (await store.get_queue(queue)).completed_in_history == producers * per_producer


async def _later(delay: float, work: Awaitable[None]) -> None:
    await asyncio.sleep(delay)
    await work
