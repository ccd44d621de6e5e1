"""The items' request and response bodies: push, pop, complete, fail, extend, and an item as it
is. Generated clients depend on these shapes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, Field, StrictBool, TypeAdapter
from pydantic.config import JsonDict

from simplequeue.api.fields import (
    KEY_TEXT,
    TIME_TEXT,
    Body,
    ErrorText,
    Int32,
    Key,
    Number,
    QueueName,
    UtcDatetime,
)
from simplequeue.api.responses import with_payload
from simplequeue.domain import (
    MAX_PAYLOAD_DEPTH,
    CompleteOutcome,
    Draft,
    ItemStatus,
    ItemView,
    LeasedItem,
    attribute_of,
)
from simplequeue.domain.attributes import (
    MAX_ATTRIBUTES,
    MAX_NAME_CHARS,
    MAX_TYPE_CHARS,
    NAME_PATTERN,
    TYPE_PATTERN,
    VALUE_PATTERN,
    message_attributes_json,
)
from simplequeue.domain.fields import MAX_DELAY_SECONDS

ATTRIBUTES_TEXT = (
    "Message attributes (SQS's MessageAttributes; received through the SQS door as such): at most "
    f"{MAX_ATTRIBUTES}, by name (1 to 256 characters of A-Z, a-z, 0-9, _, - and ., not starting with "
    "AWS. or Amazon. in any case, no leading, trailing or doubled period). Their names', types' and "
    "values' bytes count toward the payload's limit. Breaking a rule is 422 InvalidAttributes."
)
ATTRIBUTES_SCHEMA: JsonDict = {
    "maxProperties": MAX_ATTRIBUTES,
    "propertyNames": {"pattern": NAME_PATTERN, "minLength": 1, "maxLength": MAX_NAME_CHARS},
}
"""What the spec says of the attributes' names; simplequeue.domain.attributes enforces it (and
what depends on an attribute's type: a Number's digits and range, a Binary's base64)."""
_TYPE_TEXT = (
    "String, Number or Binary, optionally with a custom label of printable ASCII after a period "
    f"(Number.float, String.json, Binary.png); {MAX_TYPE_CHARS} characters at most."
)
_VALUE_TEXT = (
    "Not empty. String: text, of the characters an SQS message may hold (no control characters but "
    "tab, newline and carriage return); Number: a number as text (up to 38 significant digits, from "
    "-10^128 to 10^126), kept as written; Binary: the bytes in base64."
)


class MessageAttributeRequest(Body):
    """One message attribute, as a push gives it."""

    type: str = Field(
        ..., max_length=MAX_TYPE_CHARS, json_schema_extra={"pattern": TYPE_PATTERN}, description=_TYPE_TEXT
    )
    value: str = Field(
        ..., min_length=1, json_schema_extra={"pattern": VALUE_PATTERN}, description=_VALUE_TEXT
    )


class MessageAttribute(BaseModel):
    """One message attribute, as an item carries it."""

    type: str = Field(description=_TYPE_TEXT)
    value: str = Field(description=_VALUE_TEXT)


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
        0, ge=0, le=MAX_DELAY_SECONDS, description="Not poppable until this long after the push."
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
    fairness_key: Key | None = Field(
        None,
        description="The tenant, customer or resource the item belongs to. When items of several keys "
        "are ready, pops hand them out round-robin across the keys (within a priority), so a key with "
        "many ready items cannot starve one with few; items without a key in such a queue share one "
        "turn. A queue that never saw a key pops oldest first, as ever. " + KEY_TEXT,
    )

    attributes: dict[str, MessageAttributeRequest] | None = Field(
        None, description=ATTRIBUTES_TEXT, json_schema_extra=ATTRIBUTES_SCHEMA
    )

    def draft(self) -> Draft:
        attributes = self.attributes or {}
        return Draft(
            attributes={n: attribute_of(n, a.type, a.value) for n, a in attributes.items()} or None,
            payload=self.payload,
            id=self.id,
            created_at=self.created_at,
            priority=self.priority,
            group=self.group,
            dedup_key=self.dedup_key,
            delay_seconds=self.delay_seconds,
            not_before=self.not_before,
            fairness_key=self.fairness_key,
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
    fairness_key: str | None
    attributes: dict[str, MessageAttribute] | None = Field(
        description="The item's message attributes by name, or null when it has none."
    )

    @classmethod
    def json_of(cls, item: LeasedItem) -> str:
        """The model's JSON, as model_dump_json writes it with the payload and attributes spliced
        in as the text the store holds (responses.with_payload), written without building the
        model: every popped item is answered here, and building one cost more than writing it."""
        head = _POPPED_HEAD.to_json(
            _PoppedHead(
                item.id,
                item.queue,
                item.created_at,
                item.attempts,
                item.lease_token,
                item.lease_expires_at,
                item.priority,
                item.group,
                item.fairness_key,
            )
        ).decode()
        attributes = message_attributes_json(item.attributes_json) or "null"
        return f'{head[:-1]},"payload":{item.payload_json},"attributes":{attributes}}}'


@dataclass(slots=True)  # not frozen: a frozen dataclass is slower to build
class _PoppedHead:
    """PoppedItem's fields but the payload and attributes, in its order, serialized as the model
    serializes them (tests/test_hot_routes.py holds the two to the same text)."""

    id: UUID
    queue: str
    created_at: datetime
    attempts: int
    lease_token: UUID
    lease_expires_at: datetime
    priority: int
    group: str | None
    fairness_key: str | None


_POPPED_HEAD = TypeAdapter(_PoppedHead).serializer


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
    visible_at: datetime | None = Field(
        description="When the item became poppable (ready) or becomes it (delayed, retrying); "
        "null while leased (see lease_expires_at) or dead."
    )
    priority: int
    group: str | None
    dedup_key: str | None
    fairness_key: str | None
    first_popped_at: datetime | None
    died_at: datetime | None
    attributes: dict[str, MessageAttribute] | None = Field(
        description="The item's message attributes by name, or null when it has none."
    )
    lease_token_prefix: str | None = Field(
        description="The first 8 characters of the live lease's token, to tell one lease from another "
        "(the token itself stays with its worker); null unless leased."
    )

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
            fairness_key=view.fairness_key,
            first_popped_at=view.first_popped_at,
            died_at=view.died_at,
            payload=None,  # spliced in as text, as are the attributes
            attributes=None,
            lease_token_prefix=str(view.lease_token)[:8] if view.lease_token else None,
        )
        return with_payload(
            response, view.payload_json, attributes=message_attributes_json(view.attributes_json)
        )
