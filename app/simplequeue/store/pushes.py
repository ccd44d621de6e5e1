"""The push flow: which items of a call speak for the others, which go to the database, and what
each item answers. SQLite runs it here, with only its statements between the steps; PostgreSQL
and SQL Server run the same steps in SQL (sq_push_rows, dbo.sq_push_items), the entry points that
applications pushing inside their own transactions call too, and the conformance suite holds all
three to the same answers:

    plan = PushPlan(items, skip_existing=...)
    winners = <claim the dedup keys of plan.keyed()>      # {place: None (taken here) | the holder}
    fresh = plan.fresh(winners)                          # places to insert, each id once
    inserted, holders = <insert them; ask what holds the ids that did not go in>
    return plan.results(winners, inserted, holders)

Rules (docs/concepts.md, Idempotency): of items that repeat a dedup key, or a remembered id of
their queue, the first speaks for the others (domain.rules.dedup_leaders); an item whose key
another item holds is that item's duplicate; an item whose remembered id an item of its queue
holds is a retry of it; any other item left out is refused: ItemExists for the whole call in
all-or-nothing mode (the caller's transaction rolls back), None with skip_existing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from uuid import UUID

from simplequeue.domain import ItemExists, NewItem, Pushed
from simplequeue.domain.rules import dedup_leaders, follow_leaders, id_holder_answer

Winners = Mapping[int, Pushed | None]
"""By the place of a dedup key's first item: None where this call took the key, else the item
that holds it (the call's item is its duplicate)."""

Holders = Mapping[UUID, tuple[str, datetime]]
"""By id: the queue and created_at of what holds an id that did not go in (a live or dead item,
or a finished one the queue remembers)."""


class PushPlan:
    def __init__(self, items: Sequence[NewItem], *, skip_existing: bool) -> None:
        assert not (skip_existing and any(i.dedup_key for i in items)), "dedup keys need skip_existing=False"
        self.items = items
        self.skip_existing = skip_existing
        self.leaders = dedup_leaders(items)

    def leading(self) -> list[int]:
        """The places of the items that speak for themselves."""
        return [n for n, leader in enumerate(self.leaders) if leader == n]

    def keyed(self) -> list[int]:
        """The places of the leading items with a dedup key: the keys to claim."""
        return [n for n in self.leading() if self.items[n].dedup_key is not None]

    def by_place(self, by_key: Mapping[tuple[str, str], Pushed | None]) -> dict[int, Pushed | None]:
        """Winners given by (queue, dedup_key), as the keyed items' places have them."""
        return {n: by_key[(self.items[n].queue, self.items[n].dedup_key or "")] for n in self.keyed()}

    def grouped(self, places: Sequence[int]) -> list[NewItem]:
        """Of these, the items of ordered groups (whose pushes take turns per group)."""
        return [self.items[n] for n in places if self.items[n].group is not None]

    def fresh(self, winners: Winners) -> list[int]:
        """The places to insert: leading items whose key (if any) this call took, each id once. An
        id that two of them share is refused at once in all-or-nothing mode; with skip_existing
        the first keeps it and the others answer None."""
        fresh: list[int] = []
        seen: set[UUID] = set()
        for n in self.leading():
            if self.items[n].dedup_key is not None and winners.get(n) is not None:
                continue
            if self.items[n].id in seen:
                if not self.skip_existing:
                    raise ItemExists()
                continue
            seen.add(self.items[n].id)
            fresh.append(n)
        return fresh

    def results(self, winners: Winners, inserted: set[UUID], holders: Holders) -> list[Pushed | None]:
        """Each item's answer, in order; raises ItemExists for a refused item in all-or-nothing mode."""
        results: list[Pushed | None] = []
        answered: set[UUID] = set()
        for n, item in enumerate(self.items):
            result: Pushed | None = None
            if self.leaders[n] != n:
                pass  # filled in by follow_leaders
            elif item.dedup_key is not None and (winner := winners.get(n)):
                result = winner
            elif item.id in inserted and item.id not in answered:
                answered.add(item.id)
                result = Pushed(item.id, item.created_at, created=True)
            else:
                result = id_holder_answer(item, holders.get(item.id))
                if result is None and not self.skip_existing:
                    raise ItemExists()
            results.append(result)
        return follow_leaders(results, self.leaders)
