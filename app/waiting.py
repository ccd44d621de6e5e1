"""Long-polling pops that hold no database connection while they wait.

A waiting request sleeps on an in-process signal for its queue, which a push through this
process sets; it re-checks the database every ``recheck_seconds`` for items that arrived
through another process or became poppable when a lease expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from app.domain import LeasedItem
from app.store import Store


class WakeHub:
    """Per-queue wake-up signals for the waiting pops of this process."""

    def __init__(self) -> None:
        self._signals: dict[str, asyncio.Event] = {}
        self.closed = False

    def signal(self, queue: str) -> asyncio.Event:
        """The event the next push to `queue` will set. Take it *before* checking the
        database, so that a push landing between the check and the wait is not missed."""
        return self._signals.setdefault(queue, asyncio.Event())

    def notify(self, queue: str) -> None:
        event = self._signals.pop(queue, None)
        if event is not None:
            event.set()

    def close(self) -> None:
        """Wake every waiter for good: shutting down answers waiting pops with what they have."""
        self.closed = True
        for event in self._signals.values():
            event.set()
        self._signals.clear()


async def pop_waiting(
    store: Store,
    hub: WakeHub,
    queue: str,
    *,
    max_items: int,
    wait_seconds: float,
    lease_seconds: int,
    recheck_seconds: float,
) -> list[LeasedItem]:
    deadline = time.monotonic() + wait_seconds
    while True:
        signal = hub.signal(queue)
        items = await store.pop(queue, max_items, lease_seconds)
        remaining = deadline - time.monotonic()
        if items or remaining <= 0 or hub.closed:
            return items
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(signal.wait(), timeout=min(remaining, recheck_seconds))
