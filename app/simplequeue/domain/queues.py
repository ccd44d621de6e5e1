"""A queue's settings, and what its counts look like."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from simplequeue.domain.keys import KeyLoad
from simplequeue.domain.limits import NO_LIMITS, Binding, FlowLimits

DedupWindowFrom = Literal["finish", "send"]
"""Where a dedup key's window starts: when its item finishes (the key matches while the item lives,
then for the window), or at the push that claimed it (SQS FIFO's deduplication interval)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry delay after failed attempt n: min(cap, base * factor ** (n - 1)), less up to `jitter`
    of it at random (so that items failed together do not all come back together)."""

    base_seconds: float = 1.0
    factor: float = 2.0
    cap_seconds: float = 3600.0
    jitter: float = 0.1


@dataclass(frozen=True, slots=True)
class QueueSettings:
    max_attempts: int = 5
    lease_seconds: int = 30
    backoff: Backoff = field(default_factory=Backoff)
    retention_seconds: int = 7 * 24 * 3600  # history kept this long after an item finished
    dedup_window_seconds: int = 3600  # a dedup_key still matches this long after its item finished
    dedup_window_from: DedupWindowFrom = "finish"
    history_payload: bool = False  # copy payloads into history records
    # Where an item that dies here goes instead of staying dead (SQS's RedrivePolicy target): ready
    # there, attempts reset. None, or a queue that no longer exists: it stays dead here.
    dead_letter_queue: str | None = None
    # Live items older than this (from their push) are never handed out, and the sweep deletes them
    # (SQS's MessageRetentionPeriod). None: kept until they finish.
    message_retention_seconds: int | None = None
    # A waiting item's effective priority rises by one per this many seconds (domain/aging.py).
    # None: priorities never age.
    priority_aging_seconds: int | None = None
    # How many items may be leased at once and how fast pops hand them out (domain/limits.py).
    limits: FlowLimits = NO_LIMITS


MESSAGE_RETENTION_RANGE = (60, 1_209_600)
"""message_retention_seconds' bounds: SQS's MessageRetentionPeriod's, so the SQS door can answer it."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    name: str
    settings: QueueSettings
    ready: int
    leased: int
    delayed: int
    retrying: int
    dead: int
    oldest_ready_age_seconds: float | None
    completed_in_history: int
    dead_in_history: int
    paused: bool = False  # accepts pushes, hands out nothing


@dataclass(frozen=True, slots=True)
class QueueDetail:
    """One queue's counts, its busiest keys (domain/keys.py) and the limits that cut its pops short
    in this process, the latest first."""

    stats: QueueStats
    top_keys: Sequence[KeyLoad] = ()
    bindings: Sequence[Binding] = ()


@dataclass(frozen=True, slots=True)
class DeletedQueue:
    """What deleting a queue removed."""

    items: int
    history: int
