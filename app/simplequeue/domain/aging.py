"""Priority aging: a queue's priority_aging_seconds raises a waiting item's effective priority by one
per period, so that a steady stream of high-priority items cannot starve a low-priority one.

Pops order a queue's ready items by a static key, the item's rank (rank_priority), highest first,
then by fair rank, created_at and insertion. Without aging an item's rank is its priority. With
aging A, it is its priority less the number of whole periods of A seconds from the epoch
(1970-01-01 UTC) to its created_at::

    rank = priority - floor(epoch(created_at) / A)

Periods are counted on that fixed grid, so at any moment t an item's effective priority is
``priority + floor(t / A) - floor(epoch(created_at) / A)`` (the grid's boundaries it has waited
across), and two items' order never changes as time passes: nothing is re-sorted. An item created n
periods of the grid before another outranks it when n exceeds their priorities' difference, ties
it when n equals it (and then pops first, as the older of the two), and trails it otherwise. Items
pushed within one period of each other have the same rank when their priorities are equal, and a
fair queue takes its keys' turns among them.

The stores compute the rank in their push (PostgreSQL: sq_rank_priority; SQLite: insert_item; SQL
Server: dbo.sq_push_items) from the queue's setting at the push. Changing the setting re-ranks the
queue's live items in the same transaction, so that items ranked with and without aging never meet.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

AGING_RANGE = (1, 2_147_483_647)
"""priority_aging_seconds' bounds: a whole number of seconds that the engines' int columns hold."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def rank_priority(priority: int, created_at: datetime, aging_seconds: int | None) -> int:
    """The item's static sort key (see the module's docstring); its priority without aging."""
    if aging_seconds is None:
        return priority
    return priority - (created_at - _EPOCH) // timedelta(seconds=aging_seconds)
