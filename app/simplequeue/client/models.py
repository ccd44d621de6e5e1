"""The client's own values: plain dataclasses read from the service's JSON (no server types)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _req_time(value: Any) -> datetime:
    parsed = _time(value)
    if parsed is None:
        raise ValueError(f"expected an ISO-8601 time, got {value!r}")
    return parsed


@dataclass(frozen=True, slots=True)
class PushResult:
    id: str
    queue: str
    created: bool
    """False: the dedup_key matched an existing item (id is the original's); nothing was inserted."""
    created_at: datetime | None
    """None only when a retried push found its own id already stored (the first attempt had committed)."""

    @classmethod
    def of(cls, body: dict[str, Any]) -> PushResult:
        return cls(
            id=body["id"], queue=body["queue"], created=body["created"], created_at=_time(body["created_at"])
        )


@dataclass(frozen=True, slots=True)
class BatchPushResult:
    ids: list[str]
    created: list[bool]


@dataclass(frozen=True, slots=True)
class Item:
    """A leased item, as pop hands it out. Complete, fail or extend it with its lease_token."""

    id: str
    queue: str
    payload: Any = field(repr=False)  # never in logs or reprs
    attempts: int
    lease_token: str
    lease_expires_at: datetime
    created_at: datetime
    priority: int
    group: str | None
    attributes: dict[str, dict[str, str]] | None = field(default=None, repr=False)
    """Message attributes by name ({"type", "value"}), or None."""
    fairness_key: str | None = None

    @classmethod
    def of(cls, body: dict[str, Any]) -> Item:
        return cls(
            id=body["id"],
            queue=body["queue"],
            payload=body["payload"],
            attempts=body["attempts"],
            lease_token=body["lease_token"],
            lease_expires_at=_req_time(body["lease_expires_at"]),
            created_at=_req_time(body["created_at"]),
            priority=body["priority"],
            group=body.get("group"),
            attributes=body.get("attributes"),
            fairness_key=body.get("fairness_key"),
        )


@dataclass(frozen=True, slots=True)
class ErrorEntry:
    at: datetime
    error: str


@dataclass(frozen=True, slots=True)
class ItemInfo:
    """An item as GET /items/{id} (and fail, extend, the dead-letter list) describe it."""

    id: str
    queue: str
    payload: Any = field(repr=False)
    status: str
    """ready, delayed, retrying, leased or dead."""
    attempts: int
    max_attempts: int
    errors: list[ErrorEntry]
    created_at: datetime
    lease_expires_at: datetime | None
    visible_at: datetime | None
    priority: int
    group: str | None
    dedup_key: str | None
    first_popped_at: datetime | None
    died_at: datetime | None
    attributes: dict[str, dict[str, str]] | None = field(default=None, repr=False)
    """Message attributes by name ({"type", "value"}), or None."""
    lease_token_prefix: str | None = None
    """The live lease token's first 8 characters (which lease holds it), or None."""
    fairness_key: str | None = None

    @classmethod
    def of(cls, body: dict[str, Any]) -> ItemInfo:
        return cls(
            id=body["id"],
            queue=body["queue"],
            payload=body["payload"],
            status=body["status"],
            attempts=body["attempts"],
            max_attempts=body["max_attempts"],
            errors=[ErrorEntry(_req_time(e["at"]), e["error"]) for e in body["errors"]],
            created_at=_req_time(body["created_at"]),
            lease_expires_at=_time(body.get("lease_expires_at")),
            visible_at=_time(body.get("visible_at")),
            priority=body["priority"],
            group=body.get("group"),
            dedup_key=body.get("dedup_key"),
            first_popped_at=_time(body.get("first_popped_at")),
            died_at=_time(body.get("died_at")),
            attributes=body.get("attributes"),
            lease_token_prefix=body.get("lease_token_prefix"),
            fairness_key=body.get("fairness_key"),
        )


@dataclass(frozen=True, slots=True)
class CompleteResult:
    id: str
    result: str
    """completed, not_found, lease_mismatch or dead."""


@dataclass(frozen=True, slots=True)
class TopKey:
    """One of a queue's busiest fairness keys (None: its items pushed without a key)."""

    key: str | None
    ready: int
    leased: int
    max_leased: int | None
    """Its cap: its own max_leased, else the queue's max_leased_per_key; None: none."""
    at_limit: bool

    @classmethod
    def of(cls, body: dict[str, Any]) -> TopKey:
        return cls(body.get("key"), body["ready"], body["leased"], body.get("max_leased"), body["at_limit"])


@dataclass(frozen=True, slots=True)
class LimitBinding:
    """A flow limit that cut pops of a queue short on the replica that answered."""

    limit: str
    """max_leased, max_leased_per_key or rate."""
    pops: int
    last_seen: datetime

    @classmethod
    def of(cls, body: dict[str, Any]) -> LimitBinding:
        return cls(body["limit"], body["pops"], _req_time(body["last_seen"]))


@dataclass(frozen=True, slots=True)
class QueueStats:
    name: str
    ready: int
    leased: int
    delayed: int
    retrying: int
    dead: int
    oldest_ready_age_seconds: float | None
    completed_in_history: int
    dead_in_history: int
    settings: dict[str, Any]
    """max_attempts, lease_seconds, backoff, retention_seconds, dedup_window_seconds, dedup_window_from,
    history_payload, dead_letter_queue, message_retention_seconds."""
    paused: bool = False
    top_keys: tuple[TopKey, ...] = ()
    """The busiest keys, most ready first: in `stats` only (pages of queues leave them out)."""
    limits_binding: tuple[LimitBinding, ...] = ()
    """The limits that cut the queue's pops short, the latest first: in `stats` only."""

    @classmethod
    def of(cls, body: dict[str, Any]) -> QueueStats:
        return cls(
            name=body["name"],
            ready=body["ready"],
            leased=body["leased"],
            delayed=body["delayed"],
            retrying=body["retrying"],
            dead=body["dead"],
            oldest_ready_age_seconds=body.get("oldest_ready_age_seconds"),
            completed_in_history=body["history"]["completed"],
            dead_in_history=body["history"]["dead"],
            settings=body["settings"],
            paused=bool(body.get("paused", False)),
            top_keys=tuple(TopKey.of(k) for k in body.get("top_keys", ())),
            limits_binding=tuple(LimitBinding.of(b) for b in body.get("limits_binding", ())),
        )


@dataclass(frozen=True, slots=True)
class FairKey:
    """A fairness key of a queue: its own weight and limits (None: the queue's default for its
    keys) and its live items' counts."""

    key: str
    weight: float
    max_leased: int | None
    rate_per_second: float | None
    ready: int
    leased: int

    @classmethod
    def of(cls, body: dict[str, Any]) -> FairKey:
        return cls(
            key=body["key"],
            weight=body["weight"],
            max_leased=body.get("max_leased"),
            rate_per_second=body.get("rate_per_second"),
            ready=body["ready"],
            leased=body["leased"],
        )


@dataclass(frozen=True, slots=True)
class FairKeyPage:
    keys: list[FairKey]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class QueuePage:
    queues: list[QueueStats]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class DeadPage:
    items: list[ItemInfo]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A finished item: completed or dead."""

    id: str
    queue: str
    outcome: str
    attempts: int
    created_at: datetime
    first_popped_at: datetime | None
    finished_at: datetime
    group: str | None
    dedup_key: str | None
    last_error: str | None
    payload: Any = field(repr=False)
    """None unless the queue keeps payloads in history."""

    @classmethod
    def of(cls, body: dict[str, Any]) -> HistoryEntry:
        return cls(
            id=body["id"],
            queue=body["queue"],
            outcome=body["outcome"],
            attempts=body["attempts"],
            created_at=_req_time(body["created_at"]),
            first_popped_at=_time(body.get("first_popped_at")),
            finished_at=_req_time(body["finished_at"]),
            group=body.get("group"),
            dedup_key=body.get("dedup_key"),
            last_error=body.get("last_error"),
            payload=body.get("payload"),
        )


@dataclass(frozen=True, slots=True)
class HistoryPage:
    items: list[HistoryEntry]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    arn: str
    attributes: dict[str, str]
    tags: dict[str, str]
    subscriptions: int
    created_at: datetime

    @classmethod
    def of(cls, body: dict[str, Any]) -> Topic:
        return cls(
            name=body["name"],
            arn=body["arn"],
            attributes=body["attributes"],
            tags=body["tags"],
            subscriptions=body["subscriptions"],
            created_at=_req_time(body["created_at"]),
        )


@dataclass(frozen=True, slots=True)
class Subscription:
    id: str
    arn: str
    topic: str
    protocol: str
    endpoint: str
    """The queue's name (protocol sqs)."""
    attributes: dict[str, str]
    confirmed: bool

    @classmethod
    def of(cls, body: dict[str, Any]) -> Subscription:
        return cls(
            id=body["id"],
            arn=body["arn"],
            topic=body["topic"],
            protocol=body["protocol"],
            endpoint=body["endpoint"],
            attributes=body["attributes"],
            confirmed=body["confirmed"],
        )


@dataclass(frozen=True, slots=True)
class Published:
    message_id: str
    delivered_to: list[str]
    """The queues that hold it now."""
    endpoints: int = 0
    """The HTTP/S endpoints it is queued for."""

    @classmethod
    def of(cls, body: dict[str, Any]) -> Published:
        return cls(
            message_id=body["message_id"],
            delivered_to=body["delivered_to"],
            endpoints=body.get("endpoints", 0),
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """A schedule as the service keeps it: when it fires (one of every_seconds, cron in timezone,
    at), what it pushes, and where its firing stands."""

    name: str
    queue: str
    payload: Any
    every_seconds: int | None
    cron: str | None
    timezone: str
    at: datetime | None
    priority: int
    group: str | None
    paused: bool
    jitter_seconds: int
    overlap: str
    catch_up: str
    created_at: datetime
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_item_id: str | None

    @classmethod
    def of(cls, body: dict[str, Any]) -> Schedule:
        return cls(
            name=body["name"],
            queue=body["queue"],
            payload=body["payload"],
            every_seconds=body["every_seconds"],
            cron=body["cron"],
            timezone=body["timezone"],
            at=_time(body["at"]),
            priority=body["priority"],
            group=body["group"],
            paused=body["paused"],
            jitter_seconds=body["jitter_seconds"],
            overlap=body["overlap"],
            catch_up=body["catch_up"],
            created_at=_req_time(body["created_at"]),
            next_run_at=_time(body["next_run_at"]),
            last_run_at=_time(body["last_run_at"]),
            last_item_id=body["last_item_id"],
        )
