"""The SQLite push's fair ranks (domain.fairness), as steps of its push (statements.Steps). Under
the push's write lock no other writer moves a key's last rank between the look-up and the write."""

from __future__ import annotations

from collections.abc import Sequence

from simplequeue.domain import NewItem
from simplequeue.domain.fairness import ranks, shares
from simplequeue.store.sqlite import statements


def fair_ranks(
    items: Sequence[NewItem], ranked: Sequence[int], fair: set[str], now: str
) -> statements.Steps[list[float]]:
    """Each item's fair rank by place, among the items of its rank (`ranked`, by place: domain.aging);
    `fair`: the push's queues that saw a key. A push into queues that never saw one, with no key of
    its own, writes nothing."""
    keyed = [(i.queue, i.fairness_key, r) for i, r in zip(items, ranked, strict=True)]
    if not fair and all(i.fairness_key is None for i in items):
        return [0.0] * len(items)
    starts: dict[tuple[str, str], float] = {}
    weights: dict[tuple[str, str], float] = {}
    for share in shares(keyed, fair):
        [row] = yield (
            "fair_start",
            {
                "queue": share.queue,
                "key": share.key,
                "priority": share.priority,
                "now": now,
            },
        )
        starts[(share.queue, share.key)] = float(row["start"])
        weights[(share.queue, share.key)] = float(row["weight"])
    found, last = ranks(keyed, lambda s: starts[(s.queue, s.key)], fair, lambda s: weights[(s.queue, s.key)])
    yield "set_fair_rank", [{"queue": q, "key": k, "last_rank": r} for (q, k), r in sorted(last.items())]
    return found
