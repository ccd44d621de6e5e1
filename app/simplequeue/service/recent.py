"""What this process did to a queue lately, and when: a memory that answers "less than N seconds
ago?" and forgets what is older than that. It is the process's own (replicas share none of it, a
restart forgets it): the rules it serves are SQS's (a name deleted less than 60 seconds ago, one
purge per 60 seconds), which a replica keeps for what it did itself."""

from __future__ import annotations

from datetime import datetime

from simplequeue.domain import Clock


class Recent:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._at: dict[str, datetime] = {}

    def within(self, queue: str, seconds: float) -> bool:
        """Whether `queue` was noted less than `seconds` ago. Entries older than that are forgotten
        on the way, since only recent ones are asked about."""
        now = self._clock()
        for name, at in list(self._at.items()):
            if (now - at).total_seconds() >= seconds:
                del self._at[name]
        return queue in self._at

    def note(self, queue: str) -> datetime:
        """Note `queue` now; the answer is the time noted (for `unnote`)."""
        at = self._at[queue] = self._clock()
        return at

    def unnote(self, queue: str, at: datetime) -> None:
        """Forget the note taken at `at`, unless a later one replaced it."""
        if self._at.get(queue) == at:
            del self._at[queue]
