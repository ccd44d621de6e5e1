"""The queues' request and response bodies: settings and counts, dead items, history, redrive,
purge, deletion. Generated clients depend on these shapes."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, Field, StrictBool, ValidationInfo, field_validator

from simplequeue import domain
from simplequeue.api.fields import Body, Number, QueueName
from simplequeue.api.items.schemas import Item
from simplequeue.api.responses import with_payload
from simplequeue.domain import HistoryRecord, Outcome, QueueStats
from simplequeue.domain.activity import ActivityBucket
from simplequeue.domain.aging import AGING_RANGE
from simplequeue.domain.keys import TOP_KEYS, KeyLoad
from simplequeue.domain.limits import FlowLimits
from simplequeue.domain.queues import MESSAGE_RETENTION_RANGE, DedupWindowFrom

DEFAULTS = domain.QueueSettings()


class BackoffRequest(Body):
    """Retry delay after failed attempt n: min(cap_seconds, base_seconds * factor^(n-1)), less a random
    part of up to `jitter` of it."""

    base_seconds: Annotated[float, Number] = Field(DEFAULTS.backoff.base_seconds, ge=0, le=86400)
    factor: Annotated[float, Number] = Field(DEFAULTS.backoff.factor, ge=1, le=10)
    cap_seconds: Annotated[float, Number] = Field(DEFAULTS.backoff.cap_seconds, ge=0, le=604800)
    jitter: Annotated[float, Number] = Field(DEFAULTS.backoff.jitter, ge=0, le=1)


class QueueSettingsRequest(Body):
    """A queue's delivery settings. PUT replaces them all: an omitted field takes its default."""

    max_attempts: Annotated[int, Number] = Field(
        DEFAULTS.max_attempts,
        ge=1,
        le=1000,
        description="Pops before a failure or expiry makes an item dead.",
    )
    lease_seconds: Annotated[int, Number] = Field(
        DEFAULTS.lease_seconds,
        ge=0,
        le=43200,
        description="Lease of a pop that gives none. 0: a popped item is visible again at once, and the "
        "next pop takes it unless its worker completes it first (SQS's VisibilityTimeout 0).",
    )
    backoff: BackoffRequest = Field(default_factory=BackoffRequest)
    retention_seconds: Annotated[int, Number] = Field(
        DEFAULTS.retention_seconds, ge=0, le=31536000, description="History is kept this long."
    )
    dedup_window_seconds: Annotated[int, Number] = Field(
        DEFAULTS.dedup_window_seconds,
        ge=0,
        le=31536000,
        description="A dedup_key keeps matching this long after its item finished (or after the push "
        "that claimed it: dedup_window_from).",
    )
    dedup_window_from: DedupWindowFrom = Field(
        DEFAULTS.dedup_window_from,
        description="Where a dedup_key's window starts. finish: the key matches while its item lives, "
        "then for dedup_window_seconds. send: for dedup_window_seconds from the push that claimed it, "
        "whether or not its item is still there (SQS FIFO queues' deduplication interval).",
    )
    history_payload: StrictBool = Field(
        DEFAULTS.history_payload, description="Copy payloads into history records."
    )
    dead_letter_queue: QueueName | None = Field(
        DEFAULTS.dead_letter_queue,
        description="A queue that an item dying here moves to instead of staying dead (SQS's "
        "RedrivePolicy target): ready there, its attempts reset, its history record written here. "
        "It must exist and be another queue (422 ValidationError otherwise). null: items stay dead here.",
    )
    message_retention_seconds: (
        Annotated[int, Field(ge=MESSAGE_RETENTION_RANGE[0], le=MESSAGE_RETENTION_RANGE[1]), Number] | None
    ) = Field(
        DEFAULTS.message_retention_seconds,
        description="A live item older than this (from its push) is never handed out, and the sweep "
        "deletes it, without history (SQS's MessageRetentionPeriod). null: items stay until they finish.",
    )
    max_leased: Annotated[int, Field(ge=1, le=1_000_000), Number] | None = Field(
        DEFAULTS.limits.max_leased,
        description="At most this many of the queue's items are leased at once, across every replica "
        "and worker: a pop hands out only what is left (perhaps nothing); the rest stay ready. "
        "null: no limit.",
    )
    rate_per_second: Annotated[float, Field(gt=0, le=1_000_000), Number] | None = Field(
        DEFAULTS.limits.rate_per_second,
        description="Pops hand out at most this many of the queue's items per second on average, across "
        "every replica (a token bucket kept in the database). null: no limit.",
    )
    rate_burst: Annotated[int, Field(ge=1, le=1_000_000), Number] | None = Field(
        DEFAULTS.limits.rate_burst,
        description="How many items may be handed out at once after a quiet spell (the bucket's size). "
        "null: one second's worth of rate_per_second, at least 1. Only with rate_per_second.",
    )

    max_leased_per_key: Annotated[int, Field(ge=1, le=1_000_000), Number] | None = Field(
        DEFAULTS.limits.max_leased_per_key,
        description="At most this many items of one fairness key are leased at once, across every "
        "replica: a pop passes over a key at its limit and hands out the others' items. A key's own "
        "max_leased (PUT /queues/{name}/keys/{key}) replaces it. null: no limit.",
    )
    rate_per_key_per_second: Annotated[float, Field(gt=0, le=1_000_000), Number] | None = Field(
        DEFAULTS.limits.rate_per_key_per_second,
        description="Pops hand out at most this many items of one fairness key per second on average, "
        "across every replica: a token bucket per key, kept in the database, of one second's worth "
        "(at least 1). A key over its rate is passed over; its items stay ready. A key's own "
        "rate_per_second (PUT /queues/{name}/keys/{key}) replaces it. null: no limit.",
    )
    priority_aging_seconds: Annotated[int, Field(ge=AGING_RANGE[0], le=AGING_RANGE[1]), Number] | None = (
        Field(
            DEFAULTS.priority_aging_seconds,
            description="A waiting item's effective priority rises by one for each period of this many "
            "seconds it has waited, so that a steady stream of high-priority items cannot starve a "
            "low-priority one: an item created n periods before another pops first when n reaches their "
            "priorities' difference. Periods are counted on a fixed grid (whole multiples of this many "
            "seconds since 1970-01-01 UTC), so the order of two items never changes as time passes. A "
            "change re-ranks the queue's items in the same request (its cost grows with them). The items' "
            "own priority is unchanged. null: priorities never age.",
        )
    )

    @field_validator("rate_burst")
    @classmethod
    def _burst_needs_rate(cls, burst: int | None, info: ValidationInfo) -> int | None:
        # (a field's own check, so that the 422 names rate_burst)
        if burst is not None and info.data.get("rate_per_second") is None:
            raise ValueError("rate_burst needs rate_per_second")
        return burst

    def to_domain(self) -> domain.QueueSettings:
        b = self.backoff
        return domain.QueueSettings(
            max_attempts=self.max_attempts,
            lease_seconds=self.lease_seconds,
            backoff=domain.Backoff(b.base_seconds, b.factor, b.cap_seconds, b.jitter),
            retention_seconds=self.retention_seconds,
            dedup_window_seconds=self.dedup_window_seconds,
            dedup_window_from=self.dedup_window_from,
            history_payload=self.history_payload,
            dead_letter_queue=self.dead_letter_queue,
            message_retention_seconds=self.message_retention_seconds,
            priority_aging_seconds=self.priority_aging_seconds,
            limits=FlowLimits(
                self.max_leased,
                self.rate_per_second,
                self.rate_burst,
                self.max_leased_per_key,
                self.rate_per_key_per_second,
            ),
        )


class Backoff(BaseModel):
    """Retry delay after failed attempt n: min(cap_seconds, base_seconds * factor^(n-1)), less a random
    part of up to `jitter` of it."""

    base_seconds: float
    factor: float
    cap_seconds: float
    jitter: float


class QueueSettings(BaseModel):
    """A queue's delivery settings, as they are (see PUT /queues/{name} for their meaning)."""

    max_attempts: int
    lease_seconds: int
    backoff: Backoff
    retention_seconds: int
    dedup_window_seconds: int
    dedup_window_from: DedupWindowFrom
    history_payload: bool
    dead_letter_queue: str | None
    message_retention_seconds: int | None
    max_leased: int | None
    rate_per_second: float | None
    rate_burst: int | None
    max_leased_per_key: int | None
    rate_per_key_per_second: float | None
    priority_aging_seconds: int | None

    @classmethod
    def of(cls, settings: domain.QueueSettings) -> QueueSettings:
        b = settings.backoff
        return cls(
            max_attempts=settings.max_attempts,
            lease_seconds=settings.lease_seconds,
            backoff=Backoff(
                base_seconds=b.base_seconds, factor=b.factor, cap_seconds=b.cap_seconds, jitter=b.jitter
            ),
            retention_seconds=settings.retention_seconds,
            dedup_window_seconds=settings.dedup_window_seconds,
            dedup_window_from=settings.dedup_window_from,
            history_payload=settings.history_payload,
            dead_letter_queue=settings.dead_letter_queue,
            message_retention_seconds=settings.message_retention_seconds,
            max_leased=settings.limits.max_leased,
            rate_per_second=settings.limits.rate_per_second,
            rate_burst=settings.limits.rate_burst,
            max_leased_per_key=settings.limits.max_leased_per_key,
            rate_per_key_per_second=settings.limits.rate_per_key_per_second,
            priority_aging_seconds=settings.priority_aging_seconds,
        )


class HistoryCounts(BaseModel):
    completed: int
    dead: int


class Queue(BaseModel):
    name: str
    ready: int = Field(description="Poppable now.")
    leased: int
    delayed: int
    retrying: int
    dead: int
    oldest_ready_age_seconds: float | None
    history: HistoryCounts = Field(description="Finished items still within the retention period.")
    settings: QueueSettings
    paused: bool = Field(description="A paused queue takes pushes and hands out nothing.")

    @classmethod
    def of(cls, stats: QueueStats) -> Queue:
        return cls(
            name=stats.name,
            ready=stats.ready,
            leased=stats.leased,
            delayed=stats.delayed,
            retrying=stats.retrying,
            dead=stats.dead,
            oldest_ready_age_seconds=stats.oldest_ready_age_seconds,
            history=HistoryCounts(completed=stats.completed_in_history, dead=stats.dead_in_history),
            settings=QueueSettings.of(stats.settings),
            paused=stats.paused,
        )


class BindingLimit(StrEnum):
    MAX_LEASED = "max_leased"
    MAX_LEASED_PER_KEY = "max_leased_per_key"
    RATE = "rate"
    RATE_PER_KEY = "rate_per_key"


class TopKey(BaseModel):
    key: str | None = Field(description="The fairness key; null: the items pushed without one.")
    ready: int
    leased: int = Field(description="Unexpired leases, as a pop counts them against the cap.")
    max_leased: int | None = Field(
        description="The key's cap: its own max_leased, else the queue's max_leased_per_key; null: none."
    )
    at_limit: bool = Field(description="Leased up to its cap: pops pass its items over until a lease ends.")

    @classmethod
    def of(cls, load: KeyLoad) -> TopKey:
        return cls(
            key=load.key,
            ready=load.ready,
            leased=load.leased,
            max_leased=load.max_leased,
            at_limit=load.at_limit,
        )


class LimitBinding(BaseModel):
    limit: BindingLimit
    pops: int = Field(description="Pops it cut short on this replica since it started.")
    last_seen: datetime = Field(description="When it last cut a pop short.")


class QueueDetail(Queue):
    top_keys: list[TopKey] = Field(
        description=f"The queue's keys with the most ready items (then the most leased), at most {TOP_KEYS}, "
        "in that order. Empty for a queue that never saw a fairness key."
    )
    limits_binding: list[LimitBinding] = Field(
        description="The flow limits that cut pops of the queue short (handed out fewer items than "
        "asked while more were ready), the latest first, as the replica that answers saw them: its "
        "own pops since it started."
    )

    @classmethod
    def of_detail(cls, detail: domain.QueueDetail) -> QueueDetail:
        return cls(
            **Queue.of(detail.stats).model_dump(),
            top_keys=[TopKey.of(k) for k in detail.top_keys],
            limits_binding=[
                LimitBinding(limit=BindingLimit(b.limit), pops=b.pops, last_seen=b.last_seen)
                for b in detail.bindings
            ],
        )


class QueueList(BaseModel):
    queues: list[Queue] = Field(description="In name order.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class DeadItemPage(BaseModel):
    items: list[Item] = Field(description="Most recently dead first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class ItemPage(BaseModel):
    items: list[Item] = Field(description="Oldest created first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class GroupItemPage(BaseModel):
    items: list[Item] = Field(description="In group order: the group's head (the one handed out next) first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class PeekState(StrEnum):
    READY = "ready"
    DELAYED = "delayed"
    RETRYING = "retrying"
    LEASED = "leased"


class DeletedQueueResponse(BaseModel):
    queue: str
    items: int = Field(description="Items deleted with it (of every state).")
    history: int = Field(description="History records deleted with it.")


class RedriveRequest(Body):
    ids: list[UUID] | None = Field(
        None,
        min_length=1,
        max_length=1000,
        description="Only these dead items (default: all of the queue's).",
    )
    rate_per_second: Annotated[float, Field(gt=0, le=1000000), Number] | None = Field(
        None,
        description="Spread the items out: the k-th becomes poppable k / rate seconds from now.",
    )


class RedriveResponse(BaseModel):
    redriven: int


class PurgeResponse(BaseModel):
    purged: int


class HistoryEntry(BaseModel):
    id: UUID
    queue: str
    outcome: Outcome
    attempts: int
    created_at: datetime
    first_popped_at: datetime | None
    finished_at: datetime
    group: str | None
    dedup_key: str | None
    last_error: str | None
    payload: Any = Field(description="null unless the queue keeps payloads in history.")

    @classmethod
    def json_of(cls, record: HistoryRecord) -> str:
        entry = cls.model_construct(
            id=record.id,
            queue=record.queue,
            outcome=record.outcome,
            attempts=record.attempts,
            created_at=record.created_at,
            first_popped_at=record.first_popped_at,
            finished_at=record.finished_at,
            group=record.group,
            dedup_key=record.dedup_key,
            last_error=record.last_error,
            payload=None,  # spliced in as text
        )
        return with_payload(entry, record.payload_json)


class HistoryPage(BaseModel):
    items: list[HistoryEntry] = Field(description="Most recently finished first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class ActivityCounts(BaseModel):
    """One bucket's counts: pushed by the items' created_at, completed and dead by when they
    finished, failed by when each failure was recorded."""

    start: datetime = Field(description="The bucket's start; it lasts bucket_seconds.")
    pushed: int
    completed: int
    failed: int = Field(
        description="Failures recorded on items still held (live or dead); those of items that "
        "completed since are not counted (history keeps no time per failure)."
    )
    dead: int


class Activity(BaseModel):
    """Counts per bucket of time, oldest first, every bucket from since's to now's."""

    queue: str | None = Field(description="The queue, or null for every queue together.")
    since: datetime = Field(description="The first bucket's start.")
    until: datetime = Field(description="The last bucket's end.")
    bucket_seconds: int
    buckets: list[ActivityCounts]

    @classmethod
    def of(cls, queue: str | None, buckets: list[ActivityBucket], bucket_seconds: int) -> Activity:
        since = buckets[0].start
        until = buckets[-1].start + timedelta(seconds=bucket_seconds)
        return cls(
            queue=queue,
            since=since,
            until=until,
            bucket_seconds=bucket_seconds,
            buckets=[
                ActivityCounts(
                    start=b.start, pushed=b.pushed, completed=b.completed, failed=b.failed, dead=b.dead
                )
                for b in buckets
            ],
        )
