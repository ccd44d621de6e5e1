"""The one interface every database dialect implements.

Methods are domain-shaped. Each transition is a compare-and-set statement: when it
changes no row, the store says why (not found, lease mismatch, dead) instead of
pretending it succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from app.domain import CompleteOutcome, Completion, Failure, ItemView, LeasedItem, NewItem, QueueStats

ReadyCallback = Callable[[str | None, int], None]
"""Called with (queue, count) when items became ready through another process; with
(None, 0) when notifications may have been missed (a reconnect) and every queue should look."""


class Store(Protocol):
    dialect: str

    async def open(self) -> None:
        """Create the connection pool. Must not fail when the database is down."""

    async def close(self) -> None: ...

    async def migrate(self) -> list[int]:
        """Apply pending migrations under a lock; return the versions applied."""

    async def check_ready(self) -> None:
        """Raise DatabaseUnavailable or SchemaNotReady unless the store can serve."""

    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> set[UUID]:
        """Insert ready items in one transaction, registering their queues; return the ids inserted.

        skip_existing=False: all or nothing; an id that exists raises ItemExists.
        skip_existing=True: items whose id exists are left out and the rest are inserted (so that
        one producer's duplicate does not fail the pushes coalesced with it).
        """

    async def pop(self, queue: str, max_items: int, lease_seconds: int) -> list[LeasedItem]:
        """Lease up to max_items poppable items, oldest created_at first."""

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        """Delete the item. Raises ItemNotFound or LeaseMismatch."""

    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        """Delete each item whose token matches (or that has no token given), in one statement where
        the engine allows; the outcomes are in the order of `items`, whose ids are distinct."""

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        """Record an error; make the item ready again later or dead. Raises ItemNotFound,
        LeaseMismatch or ItemDead."""

    async def get_item(self, item_id: UUID) -> ItemView: ...

    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        """({queue: earliest visible_at of its ready or leased items}, the database's now).

        Queues with no such items are left out. The long-poll watcher's probe: one statement for
        every queue this process has waiters on, one indexed seek per queue.
        """

    async def subscribe(self, on_ready: ReadyCallback) -> None:
        """Call `on_ready` when items are pushed through other processes, where the engine can
        say so (PostgreSQL: LISTEN/NOTIFY on one connection). Elsewhere this does nothing and the
        watcher's probe finds them. Stopped by close()."""

    async def list_queues(self) -> list[QueueStats]: ...

    async def get_queue(self, name: str) -> QueueStats:
        """Raises QueueNotFound for a queue that never had an item."""
