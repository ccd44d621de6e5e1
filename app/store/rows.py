"""Conversions shared by every dialect between database rows and domain values."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from app.domain import (
    Backoff,
    CompleteOutcome,
    Completion,
    ErrorRecord,
    HistoryRecord,
    ItemStatus,
    ItemView,
    LeasedItem,
    NewItem,
    Outcome,
    Pushed,
    QueueSettings,
    QueueStats,
    effective_status,
)
from app.errors import InvalidCursor, ItemDead, ItemNotFound, LeaseExpired, LeaseMismatch, QueueError


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


def as_utc_or_none(value: datetime | str | None) -> datetime | None:
    return None if value is None else as_utc(value)


def leased_item(row: Row) -> LeasedItem:
    return LeasedItem(
        id=as_uuid(row["id"]),
        queue=row["queue"],
        payload_json=row["payload"],
        created_at=as_utc(row["created_at"]),
        attempts=row["attempts"],
        lease_token=as_uuid(row["lease_token"]),
        lease_expires_at=as_utc(row["visible_at"]),
        priority=row["priority"],
        group=row["group_key"],
    )


def item_view(row: Row, now: datetime | str) -> ItemView:
    """An item row joined with its queue's max_attempts, as it is at `now`."""
    visible_at = as_utc(row["visible_at"])
    status = effective_status(row["status"], visible_at, row["attempts"], row["max_attempts"], as_utc(now))
    errors = [ErrorRecord(as_utc(e["at"]), e["error"]) for e in json.loads(row["errors"])]
    return ItemView(
        id=as_uuid(row["id"]),
        queue=row["queue"],
        payload_json=row["payload"],
        status=status,
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        errors=errors,
        created_at=as_utc(row["created_at"]),
        lease_expires_at=visible_at if status == ItemStatus.LEASED else None,
        visible_at=visible_at if status in (ItemStatus.DELAYED, ItemStatus.RETRYING) else None,
        priority=row["priority"],
        group=row["group_key"],
        dedup_key=row["dedup_key"],
        first_popped_at=as_utc_or_none(row["first_popped_at"]),
        died_at=as_utc_or_none(row["died_at"]),
    )


def queue_settings(row: Row) -> QueueSettings:
    return QueueSettings(
        max_attempts=row["max_attempts"],
        lease_seconds=row["lease_seconds"],
        backoff=Backoff(
            base_seconds=float(row["backoff_base_seconds"]),
            factor=float(row["backoff_factor"]),
            cap_seconds=float(row["backoff_cap_seconds"]),
            jitter=float(row["backoff_jitter"]),
        ),
        retention_seconds=row["retention_seconds"],
        dedup_window_seconds=row["dedup_window_seconds"],
        history_payload=bool(row["history_payload"]),
    )


def settings_params(settings: QueueSettings) -> dict[str, Any]:
    """A QueueSettings as the columns of sq_queues."""
    return {
        "max_attempts": settings.max_attempts,
        "lease_seconds": settings.lease_seconds,
        "backoff_base_seconds": settings.backoff.base_seconds,
        "backoff_factor": settings.backoff.factor,
        "backoff_cap_seconds": settings.backoff.cap_seconds,
        "backoff_jitter": settings.backoff.jitter,
        "retention_seconds": settings.retention_seconds,
        "dedup_window_seconds": settings.dedup_window_seconds,
        "history_payload": settings.history_payload,
    }


def queue_stats(row: Row) -> QueueStats:
    """Rows carry the settings, the counts, the oldest poppable created_at and the clock they were read at."""
    oldest = row["oldest_ready"]
    age = None
    if oldest is not None:
        age = max(0.0, (as_utc(row["now"]) - as_utc(oldest)).total_seconds())
    return QueueStats(
        name=row["name"],
        settings=queue_settings(row),
        ready=int(row["ready"] or 0),
        leased=int(row["leased"] or 0),
        delayed=int(row["delayed"] or 0),
        retrying=int(row["retrying"] or 0),
        dead=int(row["dead"] or 0),
        oldest_ready_age_seconds=age,
        completed_in_history=int(row["completed_in_history"] or 0),
        dead_in_history=int(row["dead_in_history"] or 0),
    )


def history_record(row: Row) -> HistoryRecord:
    payload = row["payload"]
    return HistoryRecord(
        id=as_uuid(row["id"]),
        queue=row["queue"],
        outcome=Outcome(row["outcome"]),
        attempts=row["attempts"],
        created_at=as_utc(row["created_at"]),
        first_popped_at=as_utc_or_none(row["first_popped_at"]),
        finished_at=as_utc(row["finished_at"]),
        group=row["group_key"],
        dedup_key=row["dedup_key"],
        last_error=row["last_error"],
        payload_json=payload,
    )


def is_dead(row: Row, now: datetime | str | None) -> bool:
    """Whether the item is dead: stored dead, or, given `now` and a whole item row (with its queue's
    max_attempts), a lease that expired on its last attempt, which is dead for every reader at once
    whether or not the sweep has recorded it. Without `now`, the row's status already says so."""
    if now is None:
        return bool(row["status"] == ItemStatus.DEAD)
    status = effective_status(
        row["status"], as_utc(row["visible_at"]), row["attempts"], row["max_attempts"], as_utc(now)
    )
    return status == ItemStatus.DEAD


def transition_refused(
    row: Row | None, lease_token: UUID | None, now: datetime | str | None = None
) -> QueueError:
    """Why a compare-and-set changed nothing, given the item's current row (or None): it is dead,
    or the token is not its current lease's. `now` as for is_dead."""
    if row is None:
        return ItemNotFound()
    return ItemDead() if is_dead(row, now) else LeaseMismatch()


def extension_refused(row: Row | None, lease_token: UUID, now: datetime | str | None = None) -> QueueError:
    """Why a lease extension changed nothing: as for any transition, or the lease ran out."""
    if row is not None and row["status"] == ItemStatus.LEASED and as_uuid(row["lease_token"]) == lease_token:
        # The token matches, so only the expiry can have refused it: on the last attempt, that is death.
        return ItemDead() if is_dead(row, now) else LeaseExpired()
    return transition_refused(row, lease_token, now)


def encode_cursor(moment: datetime | str, seq: int) -> str:
    """Where a newest-first page ended: (time, seq) of its last row, opaque to clients."""
    raw = f"{as_utc(moment).isoformat()}|{seq}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[datetime, int] | tuple[None, None]:
    """The (time, seq) of a cursor that encode_cursor made; anything else is InvalidCursor, before
    any value of it reaches a statement."""
    if cursor is None:
        return None, None
    try:
        moment, seq = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split("|")
        decoded = as_utc(moment), int(seq)
    except (ValueError, OverflowError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidCursor() from exc
    # Only the exact text encode_cursor gives back: UTC, and a seq that a BIGINT holds.
    if not 0 < decoded[1] < 2**63 or encode_cursor(*decoded) != cursor.rstrip("="):
        raise InvalidCursor()
    return decoded


def dedup_leaders(items: Sequence[NewItem]) -> list[int]:
    """For each item, the index of the first item of the call with its queue and dedup_key
    (itself when it has no key or is that first one): later ones become duplicates of it."""
    first: dict[tuple[str, str], int] = {}
    leaders = []
    for index, item in enumerate(items):
        if item.dedup_key is None:
            leaders.append(index)
        else:
            leaders.append(first.setdefault((item.queue, item.dedup_key), index))
    return leaders


def sorted_leases(items: Sequence[tuple[Any, LeasedItem]]) -> list[LeasedItem]:
    """RETURNING/OUTPUT rows come in no defined order; hand them out in pop order."""
    return [
        item for _, item in sorted(items, key=lambda pair: (-pair[1].priority, pair[1].created_at, pair[0]))
    ]


def complete_outcomes(
    requested: Sequence[Completion], completed: set[UUID], still_there: set[UUID], dead: set[UUID]
) -> list[CompleteOutcome]:
    """Each request's outcome, given the ids the batch deleted, those it left in place, and of
    those, the dead ones."""

    def outcome(item: Completion) -> CompleteOutcome:
        if item.id in completed:
            return CompleteOutcome.COMPLETED
        if item.id in dead:
            return CompleteOutcome.DEAD
        if item.id in still_there:
            return CompleteOutcome.LEASE_MISMATCH
        return CompleteOutcome.NOT_FOUND

    return [outcome(item) for item in requested]


def redrive_delay(position: int, rate_per_second: float | None) -> timedelta:
    """How long after the redrive the item at `position` (from 0) becomes poppable."""
    return timedelta(seconds=position / rate_per_second) if rate_per_second else timedelta(0)


def follow_leaders(results: list[Pushed | None], leaders: list[int]) -> list[Pushed | None]:
    """Items that repeat an earlier item's dedup_key (see dedup_leaders) get that item's result,
    as duplicates; `results` holds the leaders' own."""
    followed = []
    for n, leader in enumerate(leaders):
        result = results[leader]
        if leader != n and result is not None:
            result = Pushed(result.id, result.created_at, created=False)
        followed.append(result)
    return followed
