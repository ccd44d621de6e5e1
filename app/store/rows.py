"""Conversions shared by every dialect between database rows and domain values."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from app.domain import (
    CompleteOutcome,
    Completion,
    ErrorRecord,
    ItemView,
    LeasedItem,
    QueueStats,
    effective_status,
)
from app.errors import ItemDead, ItemNotFound, LeaseMismatch, QueueError


class Row(Protocol):
    """What every driver's row offers: sqlite3.Row, asyncpg.Record and our ODBC dicts."""

    def __getitem__(self, key: str, /) -> Any: ...


def as_utc(value: datetime | str) -> datetime:
    """Drivers hand back naive UTC (ODBC), aware (asyncpg) or ISO text (SQLite, JSON)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def as_uuid(value: UUID | str) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


def leased_item(row: Row) -> LeasedItem:
    return LeasedItem(
        id=as_uuid(row["id"]),
        queue=row["queue"],
        payload=json.loads(row["payload"]),
        created_at=as_utc(row["created_at"]),
        attempts=row["attempts"],
        lease_token=as_uuid(row["lease_token"]),
        lease_expires_at=as_utc(row["visible_at"]),
    )


def item_view(row: Row, now: datetime | str) -> ItemView:
    visible_at = as_utc(row["visible_at"])
    status = effective_status(row["status"], visible_at, as_utc(now))
    errors = [ErrorRecord(as_utc(e["at"]), e["error"]) for e in json.loads(row["errors"])]
    return ItemView(
        id=as_uuid(row["id"]),
        queue=row["queue"],
        payload=json.loads(row["payload"]),
        status=status,
        attempts=row["attempts"],
        errors=errors,
        created_at=as_utc(row["created_at"]),
        lease_expires_at=visible_at if status == "leased" else None,
    )


def queue_stats(row: Row) -> QueueStats:
    """Rows carry the counts, the oldest poppable created_at and the clock they were read at."""
    oldest = row["oldest_ready"]
    age = None
    if oldest is not None:
        age = max(0.0, (as_utc(row["now"]) - as_utc(oldest)).total_seconds())
    return QueueStats(
        name=row["name"],
        ready=int(row["ready"] or 0),
        leased=int(row["leased"] or 0),
        dead=int(row["dead"] or 0),
        oldest_ready_age_seconds=age,
    )


def transition_refused(row: Row | None, lease_token: UUID | None) -> QueueError:
    """Why a compare-and-set changed nothing, given the item's current row (or None)."""
    if row is None:
        return ItemNotFound()
    if lease_token is not None and (row["lease_token"] is None or as_uuid(row["lease_token"]) != lease_token):
        return LeaseMismatch()
    if row["status"] == "dead":
        return ItemDead()
    return LeaseMismatch()


def sorted_leases(items: Sequence[tuple[Any, LeasedItem]]) -> list[LeasedItem]:
    """RETURNING/OUTPUT rows come in no defined order; hand them out oldest first."""
    return [item for _, item in sorted(items, key=lambda pair: (pair[1].created_at, pair[0]))]


def complete_outcomes(
    requested: Sequence[Completion], completed: set[UUID], still_there: set[UUID]
) -> list[CompleteOutcome]:
    """Each request's outcome, given the ids the batch deleted and those it left in place."""

    def outcome(item: Completion) -> CompleteOutcome:
        if item.id in completed:
            return CompleteOutcome.COMPLETED
        if item.id in still_there:
            return CompleteOutcome.LEASE_MISMATCH
        return CompleteOutcome.NOT_FOUND

    return [outcome(item) for item in requested]
