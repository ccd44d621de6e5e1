"""The HTTP API's request and response bodies. Generated clients depend on these shapes."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StrictBool,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from simplequeue import domain
from simplequeue.domain import (
    MAX_PAYLOAD_DEPTH,
    CompleteOutcome,
    Draft,
    HistoryRecord,
    ItemStatus,
    ItemView,
    LeasedItem,
    Outcome,
    QueueStats,
)

DEFAULTS = domain.QueueSettings()

QUEUE_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"


def _to_utc(value: datetime) -> datetime:
    """A time without an offset is taken as UTC (the seed's clients send UTC wall-clock text)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("time is out of range once converted to UTC") from exc


def _storable_text(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from exc
    return value


def _json_number(value: Any) -> Any:
    # Lax validation would read true as 1 and "5" as 5; a client sending those has a bug to hear about.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON number")
    return value


# Any number of fraction digits, as RFC 3339 allows (pydantic keeps microseconds: the rest is cut off).
_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(:\d\d(\.\d+)?)?([Zz]|[+-]\d\d:?\d\d)?", re.ASCII)


def _iso_text(value: Any) -> Any:
    # Lax validation would read 0, or a query's "0.5", as Unix times; the API takes ISO-8601 text only.
    if not isinstance(value, str) or not _DATE_TIME.fullmatch(value):
        raise ValueError("must be an ISO-8601 date-time such as 2026-11-20T09:30:00Z")
    return value


Number = BeforeValidator(_json_number)

QueueName = Annotated[
    str,
    Field(pattern=QUEUE_NAME_PATTERN, min_length=1, max_length=128, examples=["default"]),
]
UtcDatetime = Annotated[datetime, BeforeValidator(_iso_text), AfterValidator(_to_utc)]
TIME_TEXT = "ISO-8601; UTC if no offset; no leap second :60; in years 1 to 9999 once in UTC"
"""What a UtcDatetime accepts, for the spec's descriptions."""
NO_NUL_PATTERN = r"^[^\u0000]*$"
"""What the spec says of text the service stores: no NUL characters (PostgreSQL cannot hold them).
_storable_text enforces it with a plainer message than a pattern's."""
_NO_NUL = {"pattern": NO_NUL_PATTERN}
ErrorText = Annotated[
    str, Field(min_length=1, max_length=16384, json_schema_extra=_NO_NUL), AfterValidator(_storable_text)
]
KEY_PATTERN = r"^[^\u0000]*[^\u0000 ]$"
KEY_TEXT = (
    "At most 128 UTF-16 code units (a character beyond U+FFFF counts two, so 64 such characters "
    "at most; 422 beyond), and no space at its end."
)
"""What a key's schema cannot say itself (maxLength counts characters): in its description."""
"""What the spec says of a key (group, dedup_key): no NUL, and no space at its end. _key_text
enforces it, and the length in UTF-16 code units, with plainer messages."""


def _key_text(value: str) -> str:
    # The same rules on every engine, set by the strictest: SQL Server's NVARCHAR(128) counts UTF-16
    # code units (a character beyond U+FFFF takes two), and its = ignores trailing spaces, so "k"
    # and "k " would be one key there and two elsewhere.
    if value.endswith(" "):
        raise ValueError("a key must not end with a space")
    if len(value.encode("utf-16-le")) > 256:
        raise ValueError("a key holds at most 128 UTF-16 code units (a character beyond U+FFFF counts two)")
    return value


Key = Annotated[
    str,
    Field(min_length=1, max_length=128, json_schema_extra={"pattern": KEY_PATTERN}),
    AfterValidator(_storable_text),
    AfterValidator(_key_text),
]
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1), Number]


def with_payload(model: BaseModel, payload_json: str | None) -> str:
    """The model as JSON with its `payload` as the stored JSON text, spliced in unparsed: whatever
    the store holds can be answered, at no cost of decoding and encoding it again."""
    head = model.model_dump_json(exclude=_PAYLOAD)
    return f'{head[:-1]},"payload":{"null" if payload_json is None else payload_json}}}'


_PAYLOAD = {"payload"}


def _defaults_in_words(schema: dict[str, Any]) -> None:
    """A request field's default goes into its description, not the schema's `default`: generators
    such as openapi-typescript make a property with a `default` required, and a caller must be able
    to omit it. The server applies the default (the model's own)."""
    for prop in schema.get("properties", {}).values():
        if "default" not in prop:
            continue
        default = prop.pop("default")
        if default is not None:
            said = f"Default: {json.dumps(default)}."
            prop["description"] = f"{prop['description']} {said}" if "description" in prop else said


class Body(BaseModel):
    """A request body. A misspelt field is an error, not a silently ignored option."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_defaults_in_words)


class ItemFields(Body):
    """What a producer may say about an item, in a single push or in each item of a batch."""

    payload: Any = Field(
        ...,
        description="Any JSON value, stored and returned as given. Arrays and objects may nest "
        f"{MAX_PAYLOAD_DEPTH} levels deep at most, and NUL characters (U+0000) in its strings or keys "
        "are refused, as are NaN and Infinity (422 InvalidPayload).",
    )
    id: UUID | None = Field(
        None,
        description="Client-chosen id. Without a dedup_key it is also the push's idempotency key: while "
        "an item with this id is in the queue (live or dead), and for the queue's dedup_window_seconds "
        "after it finished (completed, or dead and purged), a push with it inserts nothing and answers "
        "200 with created false, so a retry never makes a second item; after the window it is a new "
        "item. An id held by another queue's item, or (with a dedup_key, which then decides) by any "
        "item, is refused with 409 ItemExists.",
    )
    created_at: UtcDatetime | None = Field(
        None,
        description=f"The producer's timestamp ({TIME_TEXT}). Pop order is oldest first.",
    )
    priority: Int32 = Field(
        0,
        description="Higher pops first; equal priorities pop oldest first. A steady stream of higher "
        "priorities starves lower ones: that is the producer's choice.",
    )
    delay_seconds: Annotated[float, Number] = Field(
        0, ge=0, le=31536000, description="Not poppable until this long after the push."
    )
    not_before: UtcDatetime | None = Field(
        None,
        description=f"Not poppable before this time ({TIME_TEXT}). Given "
        "with delay_seconds, the later of the two holds.",
    )
    group: Key | None = Field(
        None,
        description="Ordered group: its items are handed out one at a time, in the order they were "
        "pushed; the next waits until the one before is completed or dead. Groups proceed in parallel. "
        + KEY_TEXT,
    )
    dedup_key: Key | None = Field(
        None,
        description="Idempotency key. While an item with this key exists in the queue, or for the queue's "
        "dedup_window_seconds after it finished, a push with the key inserts nothing and answers 200 "
        "with the original's id. " + KEY_TEXT,
    )

    def draft(self) -> Draft:
        return Draft(
            payload=self.payload,
            id=self.id,
            created_at=self.created_at,
            priority=self.priority,
            group=self.group,
            dedup_key=self.dedup_key,
            delay_seconds=self.delay_seconds,
            not_before=self.not_before,
        )


class PushRequest(ItemFields):
    queue: QueueName = "default"


class BatchItem(ItemFields):
    pass


class PushBatchRequest(Body):
    queue: QueueName = "default"
    items: list[BatchItem] = Field(
        ...,
        min_length=1,
        max_length=1000,
        description="All or nothing: an id held by another queue's item is 409 ItemExists, and nothing "
        "is inserted. An item whose id (without a dedup_key) its queue holds, or that an earlier item of "
        "the batch gave, is a duplicate: not inserted, answered with created false.",
    )


class PushBatchResponse(BaseModel):
    ids: list[UUID] = Field(description="The items' ids, in the order given (a duplicate's: the original's).")
    created: list[bool] = Field(
        description="Per item: false when its dedup_key or its id matched an item of the queue (live, or "
        "finished within the queue's dedup window), so nothing was inserted."
    )


class CompleteRef(Body):
    id: UUID
    lease_token: UUID | None = None


class CompleteBatchRequest(Body):
    items: list[CompleteRef] = Field(
        ...,
        min_length=1,
        max_length=1000,
        description="Taken in order, as that many DELETE /items/{id} would be: an id given again "
        "after it was completed is not_found.",
    )


class CompleteResult(BaseModel):
    id: UUID
    result: CompleteOutcome


class CompleteBatchResponse(BaseModel):
    results: list[CompleteResult] = Field(description="One per requested item, in the order given.")


class PushResponse(BaseModel):
    id: UUID = Field(description="The item's id; for a duplicate (created: false), the original's.")
    queue: str
    created_at: datetime
    created: bool = Field(
        description="False: the dedup_key or the id matched an item of the queue (live, or finished within "
        "the queue's dedup window); nothing was inserted."
    )


class LeasedRef(Body):
    id: UUID
    lease_token: UUID = Field(description="The lease the item was popped with.")


class PopRequest(Body):
    queue: QueueName = "default"
    max_items: Annotated[int, Number] = Field(1, ge=1, le=100)
    wait_seconds: Annotated[float, Number] = Field(
        0, ge=0, le=20, description="Long-poll up to this long when nothing is ready."
    )
    lease_seconds: Annotated[int, Field(ge=1, le=43200), Number] | None = Field(
        None, description="How long the worker holds each item (default: the queue's)."
    )
    complete: list[LeasedRef] = Field(
        default_factory=list,
        max_length=100,
        description="Items this worker has finished: completed before the pop, as POST "
        "/items/complete would complete them, and committed even when the pop then waits or finds "
        "nothing. A worker that acknowledges its last items here makes one request per item instead "
        "of two. Their results come back in `completed`. An item completed here is not popped in "
        "the same call, and an ordered group whose head is completed here offers its next item.",
    )


class PoppedItem(BaseModel):
    id: UUID
    queue: str
    payload: Any
    created_at: datetime
    attempts: int
    lease_token: UUID
    lease_expires_at: datetime
    priority: int
    group: str | None

    @classmethod
    def json_of(cls, item: LeasedItem) -> str:
        popped = cls.model_construct(  # the store's values are already valid
            id=item.id,
            queue=item.queue,
            created_at=item.created_at,
            attempts=item.attempts,
            lease_token=item.lease_token,
            lease_expires_at=item.lease_expires_at,
            priority=item.priority,
            group=item.group,
            payload=None,  # spliced in as text
        )
        return with_payload(popped, item.payload_json)


class PopResponse(BaseModel):
    items: list[PoppedItem]
    completed: list[CompleteResult] = Field(
        description="One result per entry of the request's `complete`, in its order."
    )


class FailRequest(Body):
    error: ErrorText
    lease_token: UUID | None = None
    retry: StrictBool = Field(
        True,
        description="true: poppable again after a delay, unless this was the item's last attempt "
        "(then dead); false: dead now.",
    )
    retry_after_seconds: Annotated[float, Field(ge=0, le=604800), Number] | None = Field(
        None, description="The delay before the retry (default: the queue's backoff)."
    )


class ExtendRequest(Body):
    lease_token: UUID
    lease_seconds: Annotated[int, Number] = Field(
        ..., ge=1, le=43200, description="The lease now ends this long from now."
    )


class ErrorEntry(BaseModel):
    at: datetime
    error: str


class Item(BaseModel):
    id: UUID
    queue: str
    payload: Any
    status: ItemStatus = Field(
        description="delayed: pushed with a delay not yet passed; retrying: failed, waiting out its backoff."
    )
    attempts: int
    max_attempts: int = Field(description="The queue's setting: the attempt that fails or expires last.")
    errors: list[ErrorEntry]
    created_at: datetime
    lease_expires_at: datetime | None
    visible_at: datetime | None = Field(description="When a delayed or retrying item becomes poppable.")
    priority: int
    group: str | None
    dedup_key: str | None
    first_popped_at: datetime | None
    died_at: datetime | None

    @classmethod
    def json_of(cls, view: ItemView) -> str:
        response = cls.model_construct(
            id=view.id,
            queue=view.queue,
            status=view.status,
            attempts=view.attempts,
            max_attempts=view.max_attempts,
            errors=[ErrorEntry.model_construct(at=e.at, error=e.error) for e in view.errors],
            created_at=view.created_at,
            lease_expires_at=view.lease_expires_at,
            visible_at=view.visible_at,
            priority=view.priority,
            group=view.group,
            dedup_key=view.dedup_key,
            first_popped_at=view.first_popped_at,
            died_at=view.died_at,
            payload=None,  # spliced in as text
        )
        return with_payload(response, view.payload_json)


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
        DEFAULTS.lease_seconds, ge=1, le=43200, description="Lease of a pop that gives none."
    )
    backoff: BackoffRequest = Field(default_factory=BackoffRequest)
    retention_seconds: Annotated[int, Number] = Field(
        DEFAULTS.retention_seconds, ge=0, le=31536000, description="History is kept this long."
    )
    dedup_window_seconds: Annotated[int, Number] = Field(
        DEFAULTS.dedup_window_seconds,
        ge=0,
        le=31536000,
        description="A dedup_key keeps matching this long after its item finished.",
    )
    history_payload: StrictBool = Field(
        DEFAULTS.history_payload, description="Copy payloads into history records."
    )

    def to_domain(self) -> domain.QueueSettings:
        b = self.backoff
        return domain.QueueSettings(
            max_attempts=self.max_attempts,
            lease_seconds=self.lease_seconds,
            backoff=domain.Backoff(b.base_seconds, b.factor, b.cap_seconds, b.jitter),
            retention_seconds=self.retention_seconds,
            dedup_window_seconds=self.dedup_window_seconds,
            history_payload=self.history_payload,
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
    history_payload: bool

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
            history_payload=settings.history_payload,
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


class QueueList(BaseModel):
    queues: list[Queue]


class DeadItemPage(BaseModel):
    items: list[Item] = Field(description="Most recently dead first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class ItemPage(BaseModel):
    items: list[Item] = Field(description="Oldest created first.")
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


class HealthStatus(BaseModel):
    status: str


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str


class ErrorCode(StrEnum):
    """Every code the error envelope may carry: one per class of the domain's error tree (its name),
    and those of errors the HTTP layer answers itself. Stable: clients switch on them."""

    # The domain's (simplequeue.domain.errors); a base class's code when it is raised itself.
    NOT_FOUND = "NotFound"
    ITEM_NOT_FOUND = "ItemNotFound"
    QUEUE_NOT_FOUND = "QueueNotFound"
    CONFLICT = "Conflict"
    ITEM_EXISTS = "ItemExists"
    LEASE_MISMATCH = "LeaseMismatch"
    LEASE_EXPIRED = "LeaseExpired"
    ITEM_DEAD = "ItemDead"
    INVALID_PAYLOAD = "InvalidPayload"
    INVALID_CURSOR = "InvalidCursor"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    DATABASE_UNAVAILABLE = "DatabaseUnavailable"
    SCHEMA_NOT_READY = "SchemaNotReady"
    STORE_ERROR = "StoreError"
    # The HTTP layer's (NotFound and PayloadTooLarge above are answered by it too).
    QUEUE_IN_USE = "QueueInUse"
    MALFORMED_JSON = "MalformedJSON"
    UNAUTHORIZED = "Unauthorized"
    FORBIDDEN = "Forbidden"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
    VALIDATION_ERROR = "ValidationError"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    REQUEST_TIMEOUT = "RequestTimeout"
    INTERNAL_ERROR = "InternalError"

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # Generators that read x-enum-varnames (openapi-python-client) name the members as we do
        # (ErrorCode.ITEM_NOT_FOUND), rather than upper-casing the values (ITEMNOTFOUND).
        schema = handler.resolve_ref_schema(handler(core_schema))
        schema["x-enum-varnames"] = [code.name for code in cls]
        return schema


class ErrorBody(BaseModel):
    """The one error envelope. `error` is a stable code that clients can switch on."""

    error: ErrorCode
    detail: str
    fields: list[FieldError] | None = Field(
        None, description="Which inputs were invalid (ValidationError only)."
    )
