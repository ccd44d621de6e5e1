"""The queue's vocabulary: item states, queue settings and the values the store hands back.

Item life cycle. The ``status`` column stores three states; ``delayed`` and ``retrying`` are
``ready`` rows whose ``visible_at`` is still in the future (the schema's CHECK constraints allow
exactly the stored three)::

    push ─┬─────────────────▶ ready ──pop──▶ leased ──complete──▶ (deleted; history: completed)
          └─▶ delayed ──due──▶  ▲  ▲           │ │ │
                                │  └─ due ── retrying ◀── fail, attempts < max_attempts
                                │              │ │ └── lease expires, attempts < max_attempts:
                                │              │ │     poppable again, under a new token
                      redrive ──┘              │ └── fail(retry=false), or fail / lease expiry
                         │                     │     on the last attempt
                         └────────── dead ◀────┘     (kept with its errors; history: dead)

A ``leased`` row whose lease has run out keeps its status until it is popped again (or, on its
last attempt, until the sweep marks it dead); every reader reports what it effectively is, and
every transition treats it so: on its last attempt it is dead, and completing, failing or extending
it is refused as for a dead item from the moment the lease ran out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar
from uuid import UUID

from simplequeue.domain.attributes import Attributes

T = TypeVar("T")


class ItemStatus(StrEnum):
    READY = "ready"  # stored: poppable now
    DELAYED = "delayed"  # stored as ready: pushed with a delay that has not passed (attempts = 0)
    RETRYING = "retrying"  # stored as ready: failed, waiting out its backoff (attempts > 0)
    LEASED = "leased"  # stored: held by one worker until lease_expires_at
    DEAD = "dead"  # stored: failed for good, kept with its errors until redriven or purged


STORED_STATUSES = (ItemStatus.READY, ItemStatus.LEASED, ItemStatus.DEAD)
LEASE_EXPIRED_ERROR = "lease expired on the last attempt"  # the error the sweep records


def effective_status(
    status: str, visible_at: datetime, attempts: int, max_attempts: int, now: datetime
) -> ItemStatus:
    """What a stored row is at `now`: an expired lease is ready again, or dead on its last attempt."""
    if status == ItemStatus.LEASED:
        if visible_at > now:
            return ItemStatus.LEASED
        return ItemStatus.DEAD if attempts >= max_attempts else ItemStatus.READY
    if status == ItemStatus.READY and visible_at > now:
        return ItemStatus.RETRYING if attempts > 0 else ItemStatus.DELAYED
    return ItemStatus(status)


@dataclass(frozen=True, slots=True)
class Draft:
    """An item as a producer describes it: everything but the payload may be left to the service
    (a new id, the service's clock for created_at)."""

    payload: Any
    id: UUID | None = None
    created_at: datetime | None = None
    priority: int = 0
    group: str | None = None
    dedup_key: str | None = None
    delay_seconds: float = 0.0
    not_before: datetime | None = None
    attributes: Attributes | None = None
    system_attributes: Mapping[str, str] | None = None
    """SQS's message system attributes (SenderId, AWSTraceHeader...), kept beside the attributes
    under names no producer may give (domain.attributes.SYSTEM_PREFIX); they count toward no limit."""
    fairness_key: str | None = None  # the tenant the item belongs to (domain.fairness)


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item ready to insert: id, time and payload text decided."""

    id: UUID
    queue: str
    payload_json: str
    created_at: datetime
    priority: int = 0
    group: str | None = None
    dedup_key: str | None = None
    delay_seconds: float = 0.0  # from the database's now; visible at the later of the two
    not_before: datetime | None = None
    id_given: bool = False  # the producer chose the id (a retry re-sends it), the service did not
    attributes_json: str | None = None  # domain.attributes.encode_attributes's text; None: none
    fairness_key: str | None = None  # the tenant the item belongs to (domain.fairness)

    @property
    def remembers_id(self) -> bool:
        """Whether the id itself is the item's idempotency key: given by the producer, with no
        dedup_key (which, when given, decides instead). Such an id stays taken while the item lives
        and for its queue's dedup window after it finished; ids the service makes need no memory,
        since nobody retries with them."""
        return self.id_given and self.dedup_key is None


@dataclass(frozen=True, slots=True)
class Pushed:
    """What became of one pushed item: inserted, or matched by dedup_key to an existing item."""

    id: UUID
    created_at: datetime
    created: bool


@dataclass(frozen=True, slots=True)
class LeasedItem:
    """A popped item. Payloads stay the JSON text the database holds, from the store to the wire:
    whatever was stored is handed back as it is, never decoded and re-encoded on the way."""

    id: UUID
    queue: str
    payload_json: str
    created_at: datetime
    attempts: int
    lease_token: UUID
    lease_expires_at: datetime
    priority: int = 0
    group: str | None = None
    attributes_json: str | None = None
    seq: int | None = None  # the store's insertion order: a group's items pop in this order
    fairness_key: str | None = None
    fair_rank: float = 0.0  # its place among its queue's tenants (domain.fairness); 0 in a queue without
    # Its sort key among priorities (domain.aging): None for its priority, as without aging.
    rank_priority: int | None = None

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    at: datetime
    error: str


@dataclass(frozen=True, slots=True)
class ItemView:
    id: UUID
    queue: str
    payload_json: str
    status: ItemStatus
    attempts: int
    max_attempts: int
    errors: list[ErrorRecord]
    created_at: datetime
    lease_expires_at: datetime | None
    visible_at: datetime | None  # when a ready item became poppable, a delayed or retrying one becomes it
    priority: int = 0
    group: str | None = None
    dedup_key: str | None = None
    first_popped_at: datetime | None = None
    died_at: datetime | None = None
    attributes_json: str | None = None
    lease_token: UUID | None = None  # the live lease's, for the service's own use; never answered whole
    fairness_key: str | None = None

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)


@dataclass(frozen=True, slots=True)
class Failure:
    """What a worker reports when it could not process an item."""

    error: str
    lease_token: UUID | None = None
    retry: bool = True  # false: dead now, whatever attempts remain
    retry_after_seconds: float | None = None  # None: the queue's backoff


class CompleteOutcome(StrEnum):
    COMPLETED = "completed"
    NOT_FOUND = "not_found"
    LEASE_MISMATCH = "lease_mismatch"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class Completion:
    """One item of a batch completion: the lease token is checked when given."""

    id: UUID
    lease_token: UUID | None = None


class Outcome(StrEnum):
    COMPLETED = "completed"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """A finished item, written in the transaction that finished it."""

    id: UUID
    queue: str
    outcome: Outcome
    attempts: int
    created_at: datetime
    first_popped_at: datetime | None
    finished_at: datetime
    group: str | None = None
    dedup_key: str | None = None
    last_error: str | None = None
    payload_json: str | None = None  # only when the queue keeps payloads in history

    @property
    def payload(self) -> Any:
        return None if self.payload_json is None else json.loads(self.payload_json)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """Newest first; `next_cursor` fetches the following page (None: this was the last)."""

    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    outcome: Outcome | None = None
    since: datetime | None = None  # finished_at >= since
    until: datetime | None = None  # finished_at < until


@dataclass(frozen=True, slots=True)
class DeadFilter:
    since: datetime | None = None  # died_at >= since
    until: datetime | None = None  # died_at < until
