"""The sweep: background upkeep that every replica runs, and `simplequeue purge` runs once.

- Reaping: an item whose lease expired on its last attempt becomes dead (with an error and a
  history record). Pops already pass such items over; the sweep makes them visible as dead
  letters. Every few seconds, in bounded batches.
- Retention: history older than each queue's retention_seconds, and dedup keys past their
  window, are deleted in bounded batches (seed 004's purgeDone), less often; so are the live
  items of queues that keep them for a MessageRetentionPeriod (SQS's), without history.

Replicas sweep concurrently without harm: each statement claims its own rows, and an item or
record already dealt with is simply not found again.
"""

from __future__ import annotations

import asyncio
import logging
import time

from simplequeue.domain import QueueError
from simplequeue.service.batches import in_batches
from simplequeue.store.protocol import Store

log = logging.getLogger("simplequeue.maintenance")


async def reap(store: Store, *, max_rows: int) -> int:
    """Make dead every expired last attempt, up to about max_rows."""
    return await in_batches(lambda limit, _: store.reap_expired(limit), max_rows)


async def purge(store: Store, *, max_rows: int) -> int:
    """Delete history and dedup keys past their time, up to about max_rows."""
    return await in_batches(lambda limit, _: store.purge_history(limit), max_rows)


async def expire(store: Store, *, max_rows: int) -> int:
    """Delete live items past their queue's MessageRetentionPeriod, up to about max_rows."""
    return await in_batches(lambda limit, _: store.expire_retained(limit), max_rows)


async def sweep_forever(
    store: Store, *, reap_every: float, purge_every: float, max_rows: int = 100_000
) -> None:
    """The service's schedule. Errors are logged and retried at the next turn: the sweep must
    never take the service down, and a database outage is reported by the requests themselves."""
    next_purge = time.monotonic()
    while True:
        try:
            if reaped := await reap(store, max_rows=max_rows):
                log.info("sweep: %d expired last attempts are dead", reaped)
            if time.monotonic() >= next_purge:
                next_purge = time.monotonic() + purge_every
                if purged := await purge(store, max_rows=max_rows):
                    log.info("sweep: purged %d history records and dedup keys", purged)
                if expired := await expire(store, max_rows=max_rows):
                    log.info("sweep: %d live items outlived their queue's MessageRetentionPeriod", expired)
        except QueueError as exc:
            log.warning("sweep failed: %s", exc.detail)
        await asyncio.sleep(reap_every)
