"""The queue's vocabulary: item states and the values the store hands back.

Item life cycle (the schema's CHECK constraints allow exactly these states)::

    push ──▶ ready ──pop──▶ leased ──complete──▶ (deleted)
               ▲              │ │
               │  fail(retry) │ │ lease expires: poppable again, new token
               └──────────────┘ │
                                └──fail(retry=false)──▶ dead (kept with its errors)

An item whose lease has expired keeps ``status = 'leased'`` in the table until it is
popped again; every reader treats it as ready (see ``effective_status``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

Clock = Callable[[], datetime]
"""Returns an aware UTC datetime. Injected so that time-dependent tests are deterministic."""


def system_clock() -> datetime:
    return datetime.now(UTC)


class ItemStatus(StrEnum):
    READY = "ready"  # waiting to be popped, once its visible_at has passed
    LEASED = "leased"  # handed to one worker until lease_expires_at
    DEAD = "dead"  # failed for good: kept with its errors, never popped


def effective_status(status: str, visible_at: datetime, now: datetime) -> ItemStatus:
    """A leased item whose lease has run out is ready again."""
    if status == ItemStatus.LEASED and visible_at <= now:
        return ItemStatus.READY
    return ItemStatus(status)


@dataclass(frozen=True, slots=True)
class NewItem:
    id: UUID
    queue: str
    payload_json: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class LeasedItem:
    id: UUID
    queue: str
    payload: Any
    created_at: datetime
    attempts: int
    lease_token: UUID
    lease_expires_at: datetime


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    at: datetime
    error: str


@dataclass(frozen=True, slots=True)
class ItemView:
    id: UUID
    queue: str
    payload: Any
    status: ItemStatus
    attempts: int
    errors: list[ErrorRecord]
    created_at: datetime
    lease_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class Failure:
    """What a worker reports when it could not process an item."""

    error: str
    lease_token: UUID | None = None
    retry: bool = True
    retry_after_seconds: int = 0


class CompleteOutcome(StrEnum):
    COMPLETED = "completed"
    NOT_FOUND = "not_found"
    LEASE_MISMATCH = "lease_mismatch"


@dataclass(frozen=True, slots=True)
class Completion:
    """One item of a batch completion: the lease token is checked when given."""

    id: UUID
    lease_token: UUID | None = None


@dataclass(frozen=True, slots=True)
class QueueStats:
    name: str
    ready: int
    leased: int
    dead: int
    oldest_ready_age_seconds: float | None
