"""The queues this process's long-polls wait on, as listed in sq_waited for the NOTIFY trigger.

Every commit that sends a NOTIFY takes one lock for the whole cluster, so the trigger that wakes
long-polls (sq_items_notify_ready) notifies only the queues some replica lists in sq_waited, and a
push into a queue nobody waits on commits without it. The probe lists its queues before it looks
(PostgresStore.next_visible_at), for LISTED_SECONDS, and again when less than half of that is
left: one statement per queue every half minute, not one per probe.

What a listing can miss: a push whose statement ran before the listing committed, and that
commits after the probe looked (a long transaction of the caller's, in the instant a queue gets
its first waiter). Its waiters find it at the probe's next recheck (wait_recheck_seconds), as they
would find a NOTIFY lost with a dropped connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

LISTED_SECONDS = 60.0
MOST = 10_000  # queues remembered; past it, forgotten at once (they are listed again when due)


class Waited:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}  # queue -> when its listing runs out (this clock)

    def due(self, queues: Iterable[str]) -> list[str]:
        """The queues to list now (sorted: replicas listing the same queues lock them in one
        order): never listed, or listed for less than half LISTED_SECONDS more."""
        soon = self._clock() + LISTED_SECONDS / 2
        return sorted(q for q in queues if self._until.get(q, 0.0) < soon)

    def listed(self, queues: Iterable[str], since: float) -> None:
        """Listed by a statement sent at `since` (this clock): what it wrote lasts from later."""
        if len(self._until) >= MOST:
            self._until.clear()
        for queue in queues:
            self._until[queue] = since + LISTED_SECONDS

    def now(self) -> float:
        return self._clock()

    def forget(self) -> None:
        """The database may have lost the listings (a crash empties the unlogged table): list every
        queue again at the next probe."""
        self._until.clear()
