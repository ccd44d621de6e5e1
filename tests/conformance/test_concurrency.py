"""Many callers at once on one store: concurrent poppers get every item exactly once, concurrent
pushes are all kept. (Groups and idempotent pushes under load: test_groups.py, test_dedup.py.)"""

from __future__ import annotations

import asyncio
import random
from uuid import UUID

from simplequeue.store.protocol import Store

from tests.conformance.helpers import push
from tests.factories import new_item


async def test_concurrent_poppers_get_every_item_exactly_once(store: Store, queue: str) -> None:
    total, workers = 2000, 32
    ids = set()
    for n in range(total):
        item = new_item(queue, n)
        ids.add(item.id)
        await push(store, item)
    delivered: list[UUID] = []
    rng = random.Random(7)

    async def worker() -> None:
        for _ in range(total):  # bounded: a worker never needs more rounds than there are items
            batch = await store.pop(queue, rng.randint(1, 5), 60)
            if not batch:
                return
            for item in batch:
                delivered.append(item.id)
                await store.complete(item.id, item.lease_token)

    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(workers))), timeout=120)

    assert len(delivered) == total
    assert set(delivered) == ids
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.dead) == (0, 0, 0)


async def test_concurrent_pushes_are_all_kept(store: Store, queue: str) -> None:
    items = [new_item(queue, n) for n in range(300)]
    await asyncio.gather(*(push(store, i) for i in items))
    popped = (
        await store.pop(queue, 100, 30) + await store.pop(queue, 100, 30) + await store.pop(queue, 100, 30)
    )
    assert {p.id for p in popped} == {i.id for i in items}
