"""Ordered groups: a group hands out its head only, until the head is finished or dead; a redriven
item rejoins its group at the back; under 32 workers, no two items of a group are in flight."""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import CompleteOutcome, Completion, Failure
from simplequeue.service import batches
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure, pop_one, push
from tests.engines import FakeClock
from tests.factories import new_item


async def test_a_group_hands_out_its_head_only(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, max_attempts=2)
    a1, a2, a3 = (new_item(queue, f"a{n}", group="a") for n in (1, 2, 3))
    b1 = new_item(queue, "b1", group="b")
    loose = new_item(queue, "loose")
    await push(store, a1, a2, a3, b1, loose)

    assert {p.payload for p in await store.pop(queue, 10, 30)} == {"a1", "b1", "loose"}
    await store.complete(a1.id, None)
    [head] = await store.pop(queue, 10, 30)
    assert head.payload == "a2"
    await store.fail(a2.id, Failure("retry me", head.lease_token))  # retrying: still the head
    clock.advance(10)
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["a2"]
    await store.fail(a2.id, Failure("dead now", None))  # dead: no longer blocks
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["a3"]


async def test_complete_and_pop_moves_an_ordered_group_on(store: Store, queue: str) -> None:
    a1, a2, a3 = (new_item(queue, f"a{n}", group="a") for n in (1, 2, 3))
    await store.push_batch([a1, a2, a3], skip_existing=False)
    head = await pop_one(store, queue)

    # A refused completion leaves the head in place: the group stays blocked.
    outcomes, popped = await store.complete_and_pop([Completion(a1.id, uuid4())], queue, 5, 30)
    assert (outcomes, popped) == ([CompleteOutcome.LEASE_MISMATCH], [])

    outcomes, popped = await store.complete_and_pop([Completion(a1.id, head.lease_token)], queue, 5, 30)
    assert outcomes == [CompleteOutcome.COMPLETED]
    assert [p.payload for p in popped] == ["a2"]  # the next head, in the same call


async def test_a_redriven_item_rejoins_its_group_at_the_back(store: Store, queue: str) -> None:
    a1, a2 = new_item(queue, "a1", group="a"), new_item(queue, "a2", group="a")
    await push(store, a1, a2)
    await store.fail(a1.id, Failure("bad", retry=False))
    [leased] = await store.pop(queue, 10, 30)
    assert leased.payload == "a2"
    await batches.redrive(store, queue, None, None)
    assert await store.pop(queue, 10, 30) == []  # a2 is in flight, and a1 is now behind it
    await store.complete(leased.id, leased.lease_token)
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["a1"]


@pytest.mark.parametrize("group_runs", [False, True], ids=["heads", "runs"])
async def test_groups_under_32_workers_never_overlap_and_finish_in_order(
    store: Store, queue: str, group_runs: bool
) -> None:
    groups, per_group, workers = 8, 25, 32
    pushed: dict[str, list[UUID]] = defaultdict(list)
    for n in range(per_group):
        batch = [new_item(queue, n, group=f"g{g}") for g in range(groups)]
        await push(store, *batch)
        for g, item in enumerate(batch):
            pushed[f"g{g}"].append(item.id)
    for n in range(40):  # ungrouped work in between
        await push(store, new_item(queue, -n))
    in_flight: set[str] = set()
    finished: dict[str, list[UUID]] = defaultdict(list)
    overlaps: list[str] = []
    rng = random.Random(11)

    async def worker() -> None:
        for _ in range(groups * per_group + 40):  # bounded
            batch = await store.pop(queue, rng.randint(1, 4), 120, group_runs=group_runs)
            if not batch:
                if sum(map(len, finished.values())) == groups * per_group:
                    return
                await asyncio.sleep(0.005)
                continue
            for group in {item.group for item in batch if item.group is not None}:
                if group in in_flight:  # held by another worker's batch
                    overlaps.append(group)
                in_flight.add(group)
            await asyncio.sleep(0)
            held = Counter(item.group for item in batch if item.group is not None)
            for item in sorted(batch, key=lambda item: item.seq or 0):  # a run, in its order
                if item.group is not None:
                    held[item.group] -= 1
                    if not held[item.group]:  # the batch's last of its group: free once completed
                        in_flight.discard(item.group)
                    finished[item.group].append(item.id)
                await store.complete(item.id, item.lease_token)

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(workers))), timeout=120)

    assert overlaps == []
    assert dict(finished) == dict(pushed)


# --- runs: a head that brings the ready items behind it (SQS's FIFO receive) ------------------


async def test_a_pop_for_runs_takes_a_groups_ready_items_behind_its_head_in_order(
    store: Store, queue: str, clock: FakeClock
) -> None:
    a = [new_item(queue, f"a{n}", group="a") for n in range(1, 6)]
    b = [new_item(queue, f"b{n}", group="b") for n in range(1, 3)]
    loose = new_item(queue, "loose")
    await push(store, *a[:3], b[0], loose, *a[3:], b[1])

    popped = await store.pop(queue, 6, 30, group_runs=True)
    # The heads (a1, b1, loose), then the runs behind them in seq order as far as room allows:
    # a2, a3 and a4 (pushed before b2).
    assert sorted(p.payload for p in popped) == ["a1", "a2", "a3", "a4", "b1", "loose"]
    assert len({p.lease_token for p in popped}) == 1
    assert await store.pop(queue, 10, 30, group_runs=True) == []  # a5 and b2 wait behind live items
    assert await store.pop(queue, 10, 30) == []

    # Every item of the run is leased: completed in order, the group moves on to a5.
    for item in sorted((p for p in popped if p.group == "a"), key=lambda p: p.seq or 0):
        await store.complete(item.id, item.lease_token)
    assert [p.payload for p in await store.pop(queue, 10, 30, group_runs=True)] == ["a5"]


async def test_a_run_ends_at_the_first_item_not_ready(store: Store, queue: str, clock: FakeClock) -> None:
    await configure(store, queue, max_attempts=3)
    a1, a2, a3 = (new_item(queue, f"a{n}", group="a") for n in (1, 2, 3))
    await push(store, a1, a2, a3)
    [first] = await store.pop(queue, 1, 30)
    await store.fail(first.id, Failure("later", first.lease_token, retry_after_seconds=60))
    assert await store.pop(queue, 10, 30, group_runs=True) == []  # the head is retrying: nothing

    clock.advance(61)
    [head] = [p for p in await store.pop(queue, 1, 30)]
    assert head.payload == "a1"
    await store.complete(head.id, head.lease_token)
    delayed = new_item(queue, "a4", group="a", delay_seconds=600)
    await push(store, delayed, new_item(queue, "a5", group="a"))
    # a2 and a3 are ready behind the head a2; a4 is delayed, so the run stops before it (and a5).
    assert [p.payload for p in await store.pop(queue, 10, 30, group_runs=True)] == ["a2", "a3"]


async def test_without_runs_a_pop_keeps_one_item_of_a_group_in_flight(store: Store, queue: str) -> None:
    await push(store, *(new_item(queue, f"a{n}", group="a") for n in range(3)))
    assert [p.payload for p in await store.pop(queue, 10, 30)] == ["a0"]


async def test_a_run_whose_leases_ran_out_comes_back_whole(
    store: Store, queue: str, clock: FakeClock
) -> None:
    await configure(store, queue, max_attempts=2)
    await push(store, *(new_item(queue, f"a{n}", group="a") for n in range(1, 4)))
    first = await store.pop(queue, 10, 30, group_runs=True)
    assert [p.payload for p in sorted(first, key=lambda p: p.seq or 0)] == ["a1", "a2", "a3"]

    clock.advance(31)  # every lease of the run runs out: SQS hands the whole run out again
    again = await store.pop(queue, 10, 30, group_runs=True)
    assert [(p.payload, p.attempts) for p in sorted(again, key=lambda p: p.seq or 0)] == [
        ("a1", 2),
        ("a2", 2),
        ("a3", 2),
    ]
    stale = first[1]
    assert await store.complete_batch([Completion(stale.id, stale.lease_token)]) == [
        CompleteOutcome.LEASE_MISMATCH
    ]

    # On their last attempt, lapsed leases are dead already: no run goes past one.
    clock.advance(31)
    assert await store.pop(queue, 10, 30, group_runs=True) == []
