"""Database rows to domain values, the same for every dialect (rows are read by column name)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from simplequeue.domain import (
    Backoff,
    ErrorRecord,
    HistoryRecord,
    ItemStatus,
    ItemView,
    LeasedItem,
    Outcome,
    QueueSettings,
    QueueStats,
    effective_status,
)
from simplequeue.domain.limits import FlowLimits
from simplequeue.domain.rules import Found


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


def found(row: Row | None, now: datetime | str | None = None) -> Found | None:
    """What a refused transition found of the item, for the domain to say why. Given `now` and a
    whole item row (with its queue's max_attempts), a lease that expired on its last attempt is
    dead, as it is for every reader, whether or not the sweep has recorded it yet."""
    if row is None:
        return None
    token = row["lease_token"]
    if now is None:
        dead = row["status"] == ItemStatus.DEAD
    else:
        visible_at = as_utc(row["visible_at"])
        status = effective_status(
            row["status"], visible_at, row["attempts"], row["max_attempts"], as_utc(now)
        )
        dead = status == ItemStatus.DEAD
    return Found(row["status"], None if token is None else as_uuid(token), dead)


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
        attributes_json=row["attributes"],
        seq=row["seq"],
        fairness_key=row["fairness_key"],
        fair_rank=float(row["fair_rank"]),
        rank_priority=int(row["rank_priority"]),
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
        # Ready items too: when they became poppable (their delay or backoff ended, or their push).
        visible_at=visible_at
        if status in (ItemStatus.READY, ItemStatus.DELAYED, ItemStatus.RETRYING)
        else None,
        priority=row["priority"],
        group=row["group_key"],
        dedup_key=row["dedup_key"],
        first_popped_at=as_utc_or_none(row["first_popped_at"]),
        died_at=as_utc_or_none(row["died_at"]),
        attributes_json=row["attributes"],
        lease_token=as_uuid(row["lease_token"]) if status == ItemStatus.LEASED else None,
        fairness_key=row["fairness_key"],
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
        dedup_window_from=row["dedup_window_from"],
        history_payload=bool(row["history_payload"]),
        dead_letter_queue=row["dead_letter_queue"],
        message_retention_seconds=row["message_retention_seconds"],
        priority_aging_seconds=row["priority_aging_seconds"],
        limits=flow_limits(row),
    )


def flow_limits(row: Row) -> FlowLimits:
    """A queue row's flow limits (its settings, or a careful pop's look at them)."""
    rate, per_key = row["rate_per_second"], row["rate_per_key_per_second"]
    return FlowLimits(
        row["max_leased"],
        None if rate is None else float(rate),
        row["rate_burst"],
        row["max_leased_per_key"],
        None if per_key is None else float(per_key),
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
        "dedup_window_from": settings.dedup_window_from,
        "history_payload": settings.history_payload,
        "dead_letter_queue": settings.dead_letter_queue,
        "message_retention_seconds": settings.message_retention_seconds,
        "priority_aging_seconds": settings.priority_aging_seconds,
        "max_leased": settings.limits.max_leased,
        "rate_per_second": settings.limits.rate_per_second,
        "rate_burst": settings.limits.rate_burst,
        "max_leased_per_key": settings.limits.max_leased_per_key,
        "rate_per_key_per_second": settings.limits.rate_per_key_per_second,
        "limited": settings.limits.limited,
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
        paused=bool(row["paused"]),
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
