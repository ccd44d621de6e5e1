"""The one interface every database dialect implements.

Methods are domain-shaped. Each transition is a compare-and-set statement: when it
changes no row, the store says why (not found, lease mismatch, dead) instead of
pretending it succeeded.
"""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from app.domain import Failure, ItemView, LeasedItem, NewItem, QueueStats


class Store(Protocol):
    dialect: str

    async def open(self) -> None:
        """Create the connection pool. Must not fail when the database is down."""

    async def close(self) -> None: ...

    async def migrate(self) -> list[int]:
        """Apply pending migrations under a lock; return the versions applied."""

    async def check_ready(self) -> None:
        """Raise DatabaseUnavailable or SchemaNotReady unless the store can serve."""

    async def push(self, item: NewItem) -> None:
        """Insert a ready item, registering its queue. Raises ItemExists."""

    async def pop(self, queue: str, max_items: int, lease_seconds: int) -> list[LeasedItem]:
        """Lease up to max_items poppable items, oldest created_at first."""

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        """Delete the item. Raises ItemNotFound or LeaseMismatch."""

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        """Record an error; make the item ready again later or dead. Raises ItemNotFound,
        LeaseMismatch or ItemDead."""

    async def get_item(self, item_id: UUID) -> ItemView: ...

    async def list_queues(self) -> list[QueueStats]: ...

    async def get_queue(self, name: str) -> QueueStats:
        """Raises QueueNotFound for a queue that never had an item."""
