"""The one interface every database dialect implements.

Methods are domain-shaped. Each transition is a compare-and-set statement: when it
changes no row, the store says why (not found, lease mismatch, dead) instead of
pretending it succeeded. Every transition that finishes an item (complete, dead) writes its
history record in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from simplequeue.domain import (
    CompleteOutcome,
    Completion,
    DeadFilter,
    DeletedQueue,
    Failure,
    HistoryFilter,
    HistoryRecord,
    ItemStatus,
    ItemView,
    LeasedItem,
    NewItem,
    Page,
    Pushed,
    QueueSettings,
    QueueStats,
)
from simplequeue.domain.activity import ActivityBucket, ActivityWindow
from simplequeue.domain.keys import KeyLoad, KeySettings, KeyStats
from simplequeue.domain.metadata import MetadataChange, QueueMetadata
from simplequeue.domain.schedules import Fired, PutMode, Schedule, ScheduleSpec
from simplequeue.domain.topics import Subscription, Topic, TopicChange
from simplequeue.store.limits import FlowState

ReadyCallback = Callable[[str | None, int], None]
"""Called with (queue, count) when items became ready through another process; with
(None, 0) when notifications may have been missed (a reconnect) and every queue should look."""


class Notifications(Protocol):
    """A capability of engines that can say when other processes push (PostgreSQL: LISTEN/NOTIFY).
    Elsewhere a store's `notifications` is None, and the long-poll probe finds such pushes."""

    async def start(self, on_ready: ReadyCallback) -> None:
        """Call `on_ready` from now on, until the store is closed."""

    def on_schedules_changed(self, callback: Callable[[], None]) -> None:
        """Call `callback` (once started) when a schedule was made, replaced, paused, resumed or
        deleted through another process, and when such news may have been missed (a reconnect)."""


class Lifecycle(Protocol):
    dialect: str
    flow: FlowState
    """What this process knows of its queues' flow limits, and the holds its pops left (store/limits.py)."""
    reaps_at_pop: bool
    """True where a pop with room for more reaps its own queue's leases that ran out on their last
    attempt in its own transaction (SQLite); elsewhere the service asks reap_expired(limit, queue)
    after such a pop."""

    @property
    def notifications(self) -> Notifications | None:
        """The engine's notifications of other processes' pushes, if it has any."""

    async def open(self) -> None:
        """Create the connection pool. Must not fail when the database is down."""

    async def close(self) -> None: ...

    async def migrate(self, *, max_payload_bytes: int | None = None) -> list[int]:
        """Apply pending migrations under a lock; return the versions applied. max_payload_bytes
        (the service's setting) is written to sq_settings, where pushes that do not go through the
        service (sq_push, simplequeue.outbox) read it."""

    async def check_ready(self) -> None:
        """Raise DatabaseUnavailable or SchemaNotReady unless the store can serve."""


class Delivery(Protocol):
    """Pushing, leasing and finishing items."""

    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> list[Pushed | None]:
        """Insert items in one transaction, registering their queues; one result per item, in order.

        An item whose dedup_key matches a live item of its queue, or one finished less than the
        queue's dedup window ago, is not inserted: its result carries the original's id. Two items
        of one call with one key: the first is inserted, the second matches it. A unique index
        decides, so concurrent identical pushes insert one row.

        skip_existing=False: all or nothing; an id that exists raises ItemExists.
        skip_existing=True: items whose id exists get None and the rest are inserted (so that
        one producer's duplicate does not fail the pushes coalesced with it). Only for items
        without a dedup_key.
        """

    async def pop(
        self, queue: str, max_items: int, lease_seconds: int | None, *, group_runs: bool = False
    ) -> list[LeasedItem]:
        """Lease up to max_items poppable items: highest rank first (the priority, aged when the
        queue ages priorities: domain.aging), then lowest fair rank, then oldest created_at, then
        first pushed. Of an ordered group, only its head (its earliest live item) is poppable.
        lease_seconds None: the queue's setting. group_runs: a head taken brings the run of due
        items behind it in its group (ready, or leased with the lease run out before the last
        attempt; up to max_items in all), for a caller that handles one group's items of a pop
        in order (SQS's FIFO receive, which hands a whole run out again after its visibility)."""

    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        """({queue: earliest visible_at of its ready or leased items}, the database's now).

        Queues with no such items are left out. The long-poll watcher's probe: one statement for
        every queue this process has waiters on, one indexed seek per queue.
        """

    async def extend(self, item_id: UUID, lease_token: UUID, lease_seconds: int) -> ItemView:
        """Move a live lease's expiry to now + lease_seconds. Raises ItemNotFound, LeaseMismatch,
        LeaseExpired or ItemDead."""

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        """Delete the item and record it in history. Raises ItemNotFound, LeaseMismatch or ItemDead
        (also for a lease that expired on its last attempt, which is dead before the sweep records it)."""

    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        """Complete each item whose token matches (or that has no token given), in one statement where
        the engine allows; the outcomes are in the order of `items`, whose ids are distinct."""

    async def complete_and_pop(
        self, completions: Sequence[Completion], queue: str, max_items: int, lease_seconds: int | None
    ) -> tuple[list[CompleteOutcome], list[LeasedItem]]:
        """complete_batch, then pop, in one transaction (one statement where the engine allows):
        a worker's finished items and its next ones in one round trip. The completions' ids are
        distinct; an item completed here is not popped here, and a group whose head was completed
        here offers its next item."""

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        """Record an error. The item is ready again after the given delay or the queue's backoff,
        or dead when retry is false or this was its last attempt. Raises ItemNotFound,
        LeaseMismatch or ItemDead."""


class Inspection(Protocol):
    """Reading items, queues, dead letters and history without changing them."""

    async def get_item(self, item_id: UUID) -> ItemView: ...

    async def sequence_numbers(self, ids: Sequence[UUID]) -> dict[UUID, int]:
        """The insertion order (seq) of the live or dead items among `ids`; an id of no item is
        left out. An SQS FIFO send answers it as the message's SequenceNumber."""
        ...

    async def list_queues(
        self, limit: int, cursor: str | None, prefix: str | None = None
    ) -> Page[QueueStats]:
        """Up to `limit` queues with their counts, in name order after the cursor's (a range of the
        name's key: a page costs its own queues, not those before it); only those whose names start
        with `prefix` when one is given. Raises InvalidCursor."""

    async def count_queues(self) -> int:
        """How many queues there are: the service asks before a call that would make one."""

    async def get_queue(self, name: str) -> QueueStats:
        """Raises QueueNotFound for a queue that was never configured or pushed to."""

    async def queue_exists(self, name: str) -> bool: ...

    async def queue_metadata(self, name: str) -> QueueMetadata:
        """When the queue was made (configured or first pushed to) and last changed, its attributes
        and tags. Raises QueueNotFound."""

    async def change_queue_metadata(self, name: str, change: MetadataChange) -> int:
        """Make the change in one transaction, serialised with other changes of the queue; the
        answer is how many tags the queue has after it. When that is over change.max_tags, nothing
        changed (and the answer is how many it would have had). Raises QueueNotFound."""

    async def peek(self, queue: str, state: ItemStatus, limit: int, cursor: str | None) -> Page[ItemView]:
        """Live items in one state (ready, delayed, retrying or leased) as they are at this moment,
        oldest created first, leasing nothing. Raises InvalidCursor."""

    async def group_items(self, queue: str, group: str, limit: int, cursor: str | None) -> Page[ItemView]:
        """The group's live items (every state but dead) in group order (seq: the order they are
        handed out, its head first), a range of sq_items_group. Raises InvalidCursor."""

    async def dedup_item(self, queue: str, dedup_key: str) -> ItemView:
        """The item, live or dead, that holds the queue's dedup key (sq_dedup's key, then the item
        by id). Raises ItemNotFound when none does: no such key, or its item finished."""

    async def list_dead(
        self, queue: str, where: DeadFilter, limit: int, cursor: str | None
    ) -> Page[ItemView]:
        """Dead items, most recently dead first, those that died in the filter's range. Raises
        InvalidCursor."""

    async def list_history(
        self, queue: str, where: HistoryFilter, limit: int, cursor: str | None
    ) -> Page[HistoryRecord]:
        """Finished items, most recently finished first. Raises InvalidCursor."""

    async def activity(self, queue: str | None, window: ActivityWindow) -> list[ActivityBucket]:
        """Every bucket of the window with its counts (None: every queue's together), counted in the
        database: pushed by created_at (live items and history records), completed and dead by
        finished_at (history), failed by each recorded error's time (items still held, live or
        dead). Each part is a range of an index (sq_history_queue, sq_items_visible, sq_items_dead)
        from the window's start, so the cost follows the window, not what the tables hold."""


class Administration(Protocol):
    """Queue settings and dead letters."""

    async def put_queue(self, name: str, settings: QueueSettings) -> bool:
        """Create the queue with these settings or replace its settings; True if it was created."""

    async def redrive(
        self, queue: str, ids: Sequence[UUID] | None, rate_per_second: float | None, limit: int, offset: int
    ) -> int:
        """One transaction: make up to `limit` dead items (all the queue's, or those of `ids`),
        oldest dead first, ready again with attempts reset; return how many. With a rate, the k-th
        item of this batch becomes poppable (offset + k) / rate seconds from now, `offset` being
        how many the batches before revived. The loop is the service's (service/batches.py)."""

    async def purge_dead(self, queue: str, limit: int) -> int:
        """One transaction: delete up to `limit` of the queue's dead items; return how many."""

    async def purge_live(self, queue: str, limit: int) -> int:
        """One transaction: delete up to `limit` of the queue's live items (ready, delayed,
        retrying, leased) and return how many: SQS's PurgeQueue, a batch at a time. No history is
        written (a purge is not a completion); dead items stay, and so does a lease that ran out on
        its last attempt (dead already). Their dedup keys and remembered ids start their windows,
        as purge_dead's do."""

    async def set_paused(self, queue: str, paused: bool) -> None:
        """A paused queue takes pushes and hands out nothing. Raises QueueNotFound."""

    async def delete_queue(self, queue: str, force: bool) -> DeletedQueue:
        """Delete the queue, its items, history and dedup keys in one transaction. Raises
        QueueNotFound, and QueueInUse while it has leased items unless `force`."""

    async def put_key(self, queue: str, key: str, settings: KeySettings) -> None:
        """Set a key's own settings (store/keys.py). Raises QueueNotFound."""

    async def reset_key(self, queue: str, key: str) -> None:
        """A key's settings back to the queue's defaults."""

    async def get_key(self, queue: str, key: str) -> KeyStats:
        """A key's settings and counts (the defaults and none for a key never seen)."""

    async def list_keys(self, queue: str, limit: int, cursor: str | None) -> Page[KeyStats]:
        """A page of the queue's keys in key order. InvalidCursor."""

    async def top_keys(self, queue: str, limit: int) -> list[KeyLoad]:
        """The queue's keys with the most ready items, then the most leased (unkeyed items one
        more key, None), at most `limit`; none for a queue that never saw a key."""


class Sweeping(Protocol):
    """The background upkeep every replica runs (and `simplequeue purge` runs once)."""

    async def reap_expired(self, limit: int, queue: str | None = None) -> int:
        """Mark dead (with an error and a history record) up to `limit` items whose lease expired on
        their last attempt, of every queue or of `queue` only (a pop's own reap); return how many.
        Those of a queue with a dead-letter queue move there."""

    async def purge_history(self, limit: int) -> int:
        """Delete up to `limit` history records older than their queue's retention, and dedup keys
        past their window; return how many rows went. Callers repeat while it returns `limit`."""

    async def expire_retained(self, limit: int) -> int:
        """Delete up to `limit` live items older than their queue's MessageRetentionPeriod (a kept
        attribute, in seconds) as purge_live deletes them; return how many. Queues without it keep
        their items until they finish."""


class Topics(Protocol):
    """Topics, their subscriptions and the key that signs deliveries (store/topics.py, written once
    over each dialect's statements). A publish reads topic_subscriptions and pushes its deliveries
    with push_batch, one transaction."""

    async def create_topic(
        self, name: str, attributes: Mapping[str, str], tags: Mapping[str, str], now: datetime
    ) -> tuple[Topic, bool]: ...

    async def get_topic(self, name: str) -> Topic: ...

    async def list_topics(self, limit: int, cursor: str | None) -> Page[Topic]: ...

    async def change_topic(self, name: str, change: TopicChange, now: datetime) -> Topic: ...

    async def delete_topic(self, name: str) -> bool: ...

    async def subscribe(self, subscription: Subscription) -> tuple[Subscription, bool]: ...

    async def get_subscription(self, subscription_id: UUID) -> Subscription: ...

    async def list_subscriptions(
        self, topic: str | None, limit: int, cursor: str | None
    ) -> Page[Subscription]: ...

    async def change_subscription(
        self,
        subscription_id: UUID,
        set_attributes: Mapping[str, str],
        unset_attributes: frozenset[str] = frozenset(),
        *,
        confirm: bool = False,
    ) -> Subscription: ...

    async def unsubscribe(self, subscription_id: UUID) -> bool: ...

    async def topic_subscriptions(self, topic: str) -> tuple[Topic, list[Subscription]]: ...

    async def signing_key(self, make: Callable[[], tuple[str, str]], now: datetime) -> tuple[str, str]: ...


class Schedules(Protocol):
    """Schedules and their firing (store/schedules.py, written once over each dialect's
    statements). Firing a slot is one transaction: the compare-and-set on the schedule's
    next_run_at, then the push of its items; times are the caller's clock."""

    async def put_schedule(
        self,
        name: str,
        spec: ScheduleSpec,
        next_run_at: datetime | None,
        now: datetime,
        must: PutMode = "any",
    ) -> tuple[Schedule, bool]: ...

    async def get_schedule(self, name: str) -> Schedule: ...

    async def list_schedules(self, limit: int, cursor: str | None) -> Page[Schedule]: ...

    async def delete_schedule(self, name: str) -> bool: ...

    async def pause_schedule(self, name: str, now: datetime) -> Schedule: ...

    async def resume_schedule(self, name: str, next_run_at: datetime | None, now: datetime) -> Schedule: ...

    async def schedules_due(self, now: datetime, limit: int) -> tuple[list[Schedule], datetime | None]: ...

    async def next_schedule_slot(self) -> datetime | None: ...

    async def fire_due_schedules(
        self, now: datetime, limit: int, plan: Callable[[Schedule], Fired]
    ) -> list[Fired]: ...

    async def fire_schedule(
        self,
        name: str,
        claimed: datetime,
        following: datetime | None,
        items: Sequence[NewItem],
        last_slot: datetime | None,
    ) -> bool: ...

    async def trigger_schedule(self, name: str, item: NewItem, now: datetime) -> None: ...


class Store(Lifecycle, Delivery, Inspection, Administration, Sweeping, Topics, Schedules, Protocol):
    """Everything a dialect implements."""
