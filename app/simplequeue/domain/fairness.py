"""Fairness between tenants: start-time fair queueing over an item's fairness_key.

Pops order a queue's ready items by priority, then by fair rank (then created_at, then
insertion). The priority here is the item's rank (domain.aging): its priority, aged when the queue
ages priorities, so keys take turns within one effective priority. A push ranks the items of a
*fair* queue (one that has seen a fairness key):

- the items of one key of the queue take consecutive ranks, in the push's order, after
  ``max(last, clock)``: the key's last rank (0 for a new key) and the queue's virtual time at the
  priority of the key's first item in the push;
- the virtual time is one less than the lowest rank of the queue's due ready items of that
  priority, so that a key's next item ranks level with the front of the queue; with none due, it
  is the highest rank the queue handed out. A key back from idle thus starts level with the
  others and has saved up no credit while it was away;
- a key's items are 1/weight apart (its weight, default 1, set by PUT /queues/{name}/keys/{key}):
  a key of weight 3 takes three turns to a key of weight 1's one;
- a fair queue's unkeyed items are one more key, NO_KEY;
- a queue that never saw a key ranks nothing: every rank stays 0 and pops keep the order of
  created_at and insertion.

So with keys A (100,000 ready) and B (10 pushed after), B's items rank level with the front of A's
and the two alternate (equal ranks pop in created_at order). The stores apply these rules in their
push (PostgreSQL: sq_fair_ranks; SQL Server: dbo.sq_push_items; SQLite: store/sqlite/fairness.py,
through `ranks` below). PostgreSQL and SQL Server rank every item of a call before its dedup keys
and ids decide what goes in, SQLite only what goes in: an item turned away may leave a gap in its
key's ranks there, which moves no other key's turn by more than that item's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

NO_KEY = ""
"""The key of a fair queue's unkeyed items (a given key is never empty: domain.names.key_problem)."""


@dataclass(frozen=True, slots=True)
class KeyShare:
    """The items of one key of one queue in a push: how many, and the priority of the first."""

    queue: str
    key: str
    count: int
    priority: int


def shares(items: Sequence[tuple[str, str | None, int]], fair: set[str]) -> list[KeyShare]:
    """(queue, key, priority) by place to each fair queue's keys in the push, sorted (the order the
    stores lock their rows in). A queue is fair when it is in `fair` or the push gives it a key."""
    fair = fair | {queue for queue, key, _ in items if key is not None}
    found: dict[tuple[str, str], KeyShare] = {}
    for queue, key, priority in items:
        if queue not in fair:
            continue
        k = (queue, key if key is not None else NO_KEY)
        share = found.get(k)
        found[k] = KeyShare(
            queue, k[1], share.count + 1 if share else 1, share.priority if share else priority
        )
    return [found[k] for k in sorted(found)]


def ranks(
    items: Sequence[tuple[str, str | None, int]],
    start: Callable[[KeyShare], float],
    fair: set[str],
    weight: Callable[[KeyShare], float] | None = None,
) -> tuple[list[float], dict[tuple[str, str], float]]:
    """Each item's rank by place (0 outside fair queues), and each key's new last rank; `start`
    answers max(last, clock) for a key's share, `weight` the key's weight (default 1): its items'
    ranks are 1/weight apart, so a key of weight 2 takes two turns to another's one."""
    found_shares = shares(items, fair)
    bases = {(s.queue, s.key): start(s) for s in found_shares}
    steps = {(s.queue, s.key): 1.0 / (weight(s) if weight else 1.0) for s in found_shares}
    taken: dict[tuple[str, str], int] = {}
    out: list[float] = []
    for queue, key, _ in items:
        k = (queue, key if key is not None else NO_KEY)
        if k not in bases:
            out.append(0.0)
            continue
        taken[k] = taken.get(k, 0) + 1
        out.append(bases[k] + taken[k] * steps[k])
    return out, {k: bases[k] + n * steps[k] for k, n in taken.items()}
