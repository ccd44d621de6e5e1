"""The HTTP API's request and response bodies. Generated clients depend on these shapes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
)

from app.domain import ItemView, LeasedItem, QueueStats

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


def _iso_text(value: Any) -> Any:
    # Lax validation would read 0 as 1970-01-01; the API takes ISO-8601 text only.
    if not isinstance(value, str):
        raise ValueError("must be an ISO-8601 date-time string")
    return value


Number = BeforeValidator(_json_number)

QueueName = Annotated[
    str,
    Field(pattern=QUEUE_NAME_PATTERN, min_length=1, max_length=128, examples=["default"]),
]
UtcDatetime = Annotated[datetime, BeforeValidator(_iso_text), AfterValidator(_to_utc)]
ErrorText = Annotated[str, Field(min_length=1, max_length=16384), AfterValidator(_storable_text)]


class Body(BaseModel):
    # A misspelt field is an error, not a silently ignored option.
    model_config = ConfigDict(extra="forbid")


class PushRequest(Body):
    queue: QueueName = "default"
    payload: Any = Field(..., description="Any JSON value, stored and returned as given.")
    id: UUID | None = Field(
        None, description="Client-chosen id; an id that already exists is refused with 409."
    )
    created_at: UtcDatetime | None = Field(
        None, description="The producer's timestamp (ISO-8601; UTC if no offset). Pop order is oldest first."
    )


class BatchItem(Body):
    payload: Any = Field(..., description="Any JSON value, stored and returned as given.")
    id: UUID | None = None
    created_at: UtcDatetime | None = None


def _distinct_ids(ids: list[UUID | None]) -> None:
    given = [i for i in ids if i is not None]
    if len(set(given)) != len(given):
        raise ValueError("ids must be distinct within one request")


class PushBatchRequest(Body):
    queue: QueueName = "default"
    items: list[BatchItem] = Field(..., min_length=1, max_length=1000)

    @field_validator("items")
    @classmethod
    def _ids_are_distinct(cls, items: list[BatchItem]) -> list[BatchItem]:
        _distinct_ids([i.id for i in items])
        return items


class PushBatchResponse(BaseModel):
    ids: list[UUID] = Field(description="The items' ids, in the order given.")


class CompleteRef(Body):
    id: UUID
    lease_token: UUID | None = None


class CompleteBatchRequest(Body):
    items: list[CompleteRef] = Field(..., min_length=1, max_length=1000)

    @field_validator("items")
    @classmethod
    def _ids_are_distinct(cls, items: list[CompleteRef]) -> list[CompleteRef]:
        _distinct_ids([i.id for i in items])
        return items


class CompleteResult(BaseModel):
    id: UUID
    result: Literal["completed", "not_found", "lease_mismatch"]


class CompleteBatchResponse(BaseModel):
    results: list[CompleteResult] = Field(description="One per requested item, in the order given.")


class PushResponse(BaseModel):
    id: UUID
    queue: str
    created_at: datetime


class PopRequest(Body):
    queue: QueueName = "default"
    max_items: Annotated[int, Number] = Field(1, ge=1, le=100)
    wait_seconds: Annotated[float, Number] = Field(
        0, ge=0, le=20, description="Long-poll up to this long when nothing is ready."
    )
    lease_seconds: Annotated[int, Number] = Field(
        30, ge=1, le=43200, description="How long the worker holds each item."
    )


class PoppedItem(BaseModel):
    id: UUID
    queue: str
    payload: Any
    created_at: datetime
    attempts: int
    lease_token: UUID
    lease_expires_at: datetime

    @classmethod
    def of(cls, item: LeasedItem) -> PoppedItem:
        return cls.model_construct(  # the store's values are already valid
            id=item.id,
            queue=item.queue,
            payload=item.payload,
            created_at=item.created_at,
            attempts=item.attempts,
            lease_token=item.lease_token,
            lease_expires_at=item.lease_expires_at,
        )


class PopResponse(BaseModel):
    items: list[PoppedItem]


class FailRequest(Body):
    error: ErrorText
    lease_token: UUID | None = None
    retry: StrictBool = Field(
        True, description="true: poppable again after retry_after_seconds; false: park as dead."
    )
    retry_after_seconds: Annotated[int, Number] = Field(0, ge=0, le=86400)


class ErrorEntry(BaseModel):
    at: datetime
    error: str


class ItemResponse(BaseModel):
    id: UUID
    queue: str
    payload: Any
    status: Literal["ready", "leased", "dead"]
    attempts: int
    errors: list[ErrorEntry]
    created_at: datetime
    lease_expires_at: datetime | None

    @classmethod
    def of(cls, view: ItemView) -> ItemResponse:
        return cls(
            id=view.id,
            queue=view.queue,
            payload=view.payload,
            status=view.status.value,
            attempts=view.attempts,
            errors=[ErrorEntry(at=e.at, error=e.error) for e in view.errors],
            created_at=view.created_at,
            lease_expires_at=view.lease_expires_at,
        )


class QueueResponse(BaseModel):
    name: str
    ready: int
    leased: int
    dead: int
    oldest_ready_age_seconds: float | None

    @classmethod
    def of(cls, stats: QueueStats) -> QueueResponse:
        return cls(
            name=stats.name,
            ready=stats.ready,
            leased=stats.leased,
            dead=stats.dead,
            oldest_ready_age_seconds=stats.oldest_ready_age_seconds,
        )


class QueuesResponse(BaseModel):
    queues: list[QueueResponse]


class StatusResponse(BaseModel):
    status: str


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str


class ErrorBody(BaseModel):
    """The one error envelope. `error` is a stable code that clients can switch on."""

    error: str = Field(examples=["LeaseMismatch"])
    detail: str
    fields: list[FieldError] | None = Field(
        None, description="Which inputs were invalid (ValidationError only)."
    )
