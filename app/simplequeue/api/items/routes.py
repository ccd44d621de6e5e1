"""The items' routes, as declared to FastAPI (the spec is written from these): a producer's push, a
worker's loop (pop, complete, fail, extend), and a look at one item. Each calls its operation in
simplequeue.api.items.operations. Those marked `@hot` the front door serves itself, calling the
same function with the inputs it read (simplequeue.api.hot); FastAPI serves the others, and these
too when the front door does not."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request, Response, status

from simplequeue.api.auth import Caller
from simplequeue.api.dependencies import ServiceDep
from simplequeue.api.hot import hot
from simplequeue.api.items import operations
from simplequeue.api.items.schemas import (
    CompleteBatchRequest,
    CompleteBatchResponse,
    ExtendRequest,
    FailRequest,
    Item,
    PopRequest,
    PopResponse,
    PushBatchRequest,
    PushBatchResponse,
    PushRequest,
    PushResponse,
)
from simplequeue.api.responses import also, errors

ItemId = Annotated[UUID, Path(description="The item's id.")]
LeaseTokenQuery = Annotated[
    UUID | None, Query(description="Refuse (409) unless this is the item's current lease.")
]


router = APIRouter(tags=["items"])


@router.post(
    "/push",
    status_code=status.HTTP_201_CREATED,
    operation_id="push",
    response_model=PushResponse,
    responses=also(
        200, PushResponse, "The dedup_key or the id matched an item of the queue: nothing was inserted."
    )
    | errors(400, 409, 413, 415, 422, 503),
)
@hot
async def push(body: PushRequest, sq: ServiceDep, who: Caller) -> Response:
    """Add an item to a queue (created on first push; 409 TooManyQueues when that would make a queue
    past the service's most). 201 means it is committed; 200 means its
    dedup_key, or its id, matched an item of the queue (live, or finished less than the queue's
    dedup window ago), whose id is returned, and nothing was inserted: a retry is safe."""
    return await operations.push(sq, who, body)


@router.post(
    "/push/batch",
    status_code=status.HTTP_201_CREATED,
    operation_id="pushBatch",
    response_model=PushBatchResponse,
    responses=also(200, PushBatchResponse, "Every item was a duplicate: nothing was inserted.")
    | errors(400, 409, 413, 415, 422, 503),
)
@hot
async def push_batch(body: PushBatchRequest, sq: ServiceDep, who: Caller) -> Response:
    """Add 1..1000 items to one queue in one transaction: all of them, or (409, 413, 422) none.
    Items whose dedup_key or id matches an item of the queue (or an earlier item of the batch) are
    not inserted and answer with the original's id; 200 when that is all of them."""
    return await operations.push_batch(sq, who, body)


@router.post(
    "/pop",
    operation_id="pop",
    response_model=PopResponse,
    responses=errors(400, 413, 415, 422, 503),
)
@hot
async def pop(body: PopRequest, sq: ServiceDep, who: Caller, request: Request) -> Response:
    """Lease up to `max_items` items (highest priority first, then oldest), waiting up to
    `wait_seconds` for one to arrive. Of an ordered group only the head is handed out. Items
    listed in `complete` are completed first (see `completed` for each one's result)."""
    return await operations.pop(sq, who, body, gone=request.is_disconnected)


@router.delete(
    "/items/{item_id:uuid}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="completeItem",
    responses=errors(404, 409, 422, 503),
)
@hot
async def complete_item(
    item_id: ItemId, sq: ServiceDep, who: Caller, lease_token: LeaseTokenQuery = None
) -> Response:
    """Finish an item: it is deleted, and recorded in the queue's history. Without the lease token
    (admin keys only, when the service has keys) whatever holds the item loses it."""
    return await operations.complete_item(sq, who, item_id, lease_token)


@router.post(
    "/items/complete",
    operation_id="completeItems",
    response_model=CompleteBatchResponse,
    responses=errors(400, 413, 415, 422, 503),
)
@hot
async def complete_items(body: CompleteBatchRequest, sq: ServiceDep, who: Caller) -> Response:
    """Finish 1..1000 items at once; each gets its own result, as DELETE /items/{id} would give."""
    return await operations.complete_items(sq, who, body)


@router.post(
    "/items/{item_id:uuid}/fail",
    operation_id="failItem",
    response_model=Item,
    responses=errors(400, 404, 409, 413, 415, 422, 503),
)
@hot
async def fail_item(item_id: ItemId, body: FailRequest, sq: ServiceDep, who: Caller) -> Response:
    """Record an error. The item is retried after `retry_after_seconds` or the queue's backoff,
    unless `retry` is false or this was its last attempt: then it is dead."""
    return await operations.fail_item(sq, who, item_id, body)


@router.post(
    "/items/{item_id:uuid}/extend",
    operation_id="extendLease",
    response_model=Item,
    responses=errors(400, 404, 409, 413, 415, 422, 503),
)
@hot
async def extend_lease(item_id: ItemId, body: ExtendRequest, sq: ServiceDep, who: Caller) -> Response:
    """Keep working on an item: its live lease now ends `lease_seconds` from now (a heartbeat).
    409 when the token is stale, or the lease has already expired."""
    return await operations.extend_lease(sq, who, item_id, body)


@router.post(
    "/items/{item_id:uuid}/release",
    operation_id="releaseItem",
    response_model=Item,
    responses=errors(403, 404, 409, 413, 422, 503),
)
async def release_item(item_id: ItemId, sq: ServiceDep, who: Caller) -> Response:
    """End an item's lease now (admin): a stuck worker's item is ready again at once, its attempt
    counted (dead if that was its last; moved to its dead-letter queue if it has one). The worker's
    later complete, fail or extend is refused (409). An item that is not leased is answered as it
    is; a dead one is 409 ItemDead."""
    return await operations.release_item(sq, who, item_id)


@router.get(
    "/items/{item_id:uuid}",
    operation_id="getItem",
    response_model=Item,
    responses=errors(404, 422, 503),
)
@hot
async def get_item(item_id: ItemId, sq: ServiceDep, who: Caller) -> Response:
    """Look at an item without changing it."""
    return await operations.get_item(sq, who, item_id)
