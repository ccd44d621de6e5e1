"""Work on an unbounded number of rows, done a bounded batch at a time (one transaction each, so
that none holds its locks long): the loops over the store's batch steps, written once for every
dialect. A store's step does up to `limit` rows and answers how many; a short batch is the last.

- redrive, purge_dead, purge_live: the administration's, until nothing is left;
- the sweep's reap, purge and expire (service/upkeep.py), up to a soft cap of rows per turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from uuid import UUID

from simplequeue.store.protocol import Administration

BATCH = 1000

Step = Callable[[int, int], Awaitable[int]]
"""step(limit, done so far): the rows it did, at most limit."""


async def in_batches(step: Step, max_rows: int | None = None) -> int:
    """Run step a batch at a time until a batch comes back short, or (with max_rows) until about
    max_rows are done: a soft cap, of whole batches. How many rows were done in all."""
    total = 0
    while max_rows is None or total < max_rows:
        done = await step(BATCH, total)
        total += done
        if done < BATCH:
            break
    return total


async def redrive(
    store: Administration, queue: str, ids: Sequence[UUID] | None, rate_per_second: float | None
) -> int:
    """Make dead items (all, or those of `ids`) ready again, oldest dead first; how many. With a
    rate, the k-th of them all (across batches: each step is told how many came before) becomes
    poppable k / rate seconds from its batch's now."""
    wanted = list(ids) if ids is not None else None
    return await in_batches(lambda limit, done: store.redrive(queue, wanted, rate_per_second, limit, done))


async def purge_dead(store: Administration, queue: str) -> int:
    """Delete the queue's dead items; how many."""
    return await in_batches(lambda limit, _: store.purge_dead(queue, limit))


async def purge_live(store: Administration, queue: str) -> int:
    """Delete the queue's live items (SQS's PurgeQueue); how many."""
    return await in_batches(lambda limit, _: store.purge_live(queue, limit))
