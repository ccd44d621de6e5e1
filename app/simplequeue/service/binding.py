"""Which flow limits cut this process's pops of each queue short, how often, and when last: what
the queue's stats show as its binding limits. The process's own, like the metrics' counters
(replicas share none of it, a restart forgets it); at most three entries a queue."""

from __future__ import annotations

from dataclasses import replace

from simplequeue.domain import Clock
from simplequeue.domain.limits import Binding


class Bindings:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._seen: dict[str, dict[str, Binding]] = {}

    def seen(self, queue: str, limit: str) -> None:
        """A pop of `queue` cut short by `limit` now."""
        by_limit = self._seen.setdefault(queue, {})
        last = by_limit.get(limit)
        now = self._clock()
        by_limit[limit] = (
            Binding(limit, 1, now) if last is None else replace(last, pops=last.pops + 1, last_seen=now)
        )

    def of(self, queue: str) -> list[Binding]:
        """The limits that cut the queue's pops short here, the latest seen first."""
        return sorted(self._seen.get(queue, {}).values(), key=lambda b: b.last_seen, reverse=True)

    def forget(self, queue: str) -> None:
        self._seen.pop(queue, None)
