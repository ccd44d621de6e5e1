"""The items' routes: a producer's push, a worker's loop (pop, complete, fail, extend), and a look
at one item. Each parses, makes one QueueService call, and shapes the answer. All of them are hot:
the front door calls them itself (simplequeue.api.hot)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request, Response, status

from simplequeue.api.auth import Action, Caller
from simplequeue.api.dependencies import ServiceDep
from simplequeue.api.errors import Forbidden
from simplequeue.api.items.schemas import (
    CompleteBatchRequest,
    CompleteBatchResponse,
    CompleteRef,
    ExtendRequest,
    FailRequest,
    Item,
    LeasedRef,
    PoppedItem,
    PopRequest,
    PopResponse,
    PushBatchRequest,
    PushBatchResponse,
    PushRequest,
    PushResponse,
)
from simplequeue.api.responses import also, errors, json_text, serialized
from simplequeue.domain import CompleteOutcome, Completion, Failure, ItemNotFound
from simplequeue.service.queues import QueueService

ItemId = Annotated[UUID, Path(description="The item's id.")]
LeaseTokenQuery = Annotated[
    UUID | None, Query(description="Refuse (409) unless this is the item's current lease.")
]


def _results_json(refs: Iterable[CompleteRef | LeasedRef], outcomes: Iterable[CompleteOutcome]) -> str:
    """CompleteResult entries as a JSON array, written directly: an id and a fixed word each, in
    answers of up to a thousand of them (pop's `completed`, POST /items/complete's `results`)."""
    entries = (f'{{"id":"{r.id}","result":"{o.value}"}}' for r, o in zip(refs, outcomes, strict=True))
    return "[" + ",".join(entries) + "]"


def _token_needed(who: Caller, lease_token: UUID | None) -> None:
    """Finishing an item takes its lease token (the proof of having popped it); admins may finish
    any item by its id."""
    if lease_token is None and not who.is_admin:
        raise Forbidden("only an admin key may finish an item without its lease_token")


async def _own_queues(who: Caller, sq: QueueService, ids: Iterable[UUID]) -> None:
    """A key limited to some queues may touch only their items. The ids say nothing of their
    queue, so this costs a read per item, for such keys only; an unknown id is left to the call
    (which answers it as not found)."""
    if who.queues is None:
        return
    for item_id in dict.fromkeys(ids):
        try:
            view = await sq.get_item(item_id)
        except ItemNotFound:
            continue
        who.require(Action.CONSUME, view.queue)


router = APIRouter()

HOT_OPERATIONS = frozenset(
    {"push", "pushBatch", "pop", "completeItem", "completeItems", "failItem", "extendLease", "getItem"}
)
"""The routes the front door calls itself (simplequeue.api.hot): a worker's and a producer's loop."""


@router.post(
    "/push",
    status_code=status.HTTP_201_CREATED,
    operation_id="push",
    tags=["items"],
    response_model=PushResponse,
    responses=also(
        200, PushResponse, "The dedup_key or the id matched an item of the queue: nothing was inserted."
    )
    | errors(400, 409, 413, 415, 422, 503),
)
async def push(body: PushRequest, sq: ServiceDep, who: Caller) -> Response:
    """Add an item to a queue (created on first push). 201 means it is committed; 200 means its
    dedup_key, or its id, matched an item of the queue (live, or finished less than the queue's
    dedup window ago), whose id is returned, and nothing was inserted: a retry is safe."""
    who.require(Action.PUSH, body.queue)
    pushed = await sq.push(body.queue, body.draft())
    return serialized(
        PushResponse.model_construct(
            id=pushed.id, queue=body.queue, created_at=pushed.created_at, created=pushed.created
        ),
        status.HTTP_201_CREATED if pushed.created else status.HTTP_200_OK,
    )


@router.post(
    "/push/batch",
    status_code=status.HTTP_201_CREATED,
    operation_id="pushBatch",
    tags=["items"],
    response_model=PushBatchResponse,
    responses=also(200, PushBatchResponse, "Every item was a duplicate: nothing was inserted.")
    | errors(400, 409, 413, 415, 422, 503),
)
async def push_batch(body: PushBatchRequest, sq: ServiceDep, who: Caller) -> Response:
    """Add 1..1000 items to one queue in one transaction: all of them, or (409, 413, 422) none.
    Items whose dedup_key or id matches an item of the queue (or an earlier item of the batch) are
    not inserted and answer with the original's id; 200 when that is all of them."""
    who.require(Action.PUSH, body.queue)
    results = await sq.push_batch(body.queue, [entry.draft() for entry in body.items])
    return serialized(
        PushBatchResponse.model_construct(ids=[r.id for r in results], created=[r.created for r in results]),
        status.HTTP_201_CREATED if any(r.created for r in results) else status.HTTP_200_OK,
    )


@router.post(
    "/pop",
    operation_id="pop",
    tags=["items"],
    response_model=PopResponse,
    responses=errors(400, 413, 415, 422, 503),
)
async def pop(body: PopRequest, sq: ServiceDep, who: Caller, request: Request) -> Response:
    """Lease up to `max_items` items (highest priority first, then oldest), waiting up to
    `wait_seconds` for one to arrive. Of an ordered group only the head is handed out. Items
    listed in `complete` are completed first (see `completed` for each one's result)."""
    who.require(Action.CONSUME, body.queue)
    await _own_queues(who, sq, [ref.id for ref in body.complete])
    outcomes, items = await sq.complete_and_pop(
        [Completion(ref.id, ref.lease_token) for ref in body.complete],
        body.queue,
        max_items=body.max_items,
        wait_seconds=body.wait_seconds,
        lease_seconds=body.lease_seconds,
        gone=request.is_disconnected,
    )
    popped = ",".join(PoppedItem.json_of(i) for i in items)
    return json_text(f'{{"items":[{popped}],"completed":{_results_json(body.complete, outcomes)}}}')


@router.delete(
    "/items/{item_id:uuid}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="completeItem",
    tags=["items"],
    responses=errors(404, 409, 422, 503),
)
async def complete_item(
    item_id: ItemId, sq: ServiceDep, who: Caller, lease_token: LeaseTokenQuery = None
) -> Response:
    """Finish an item: it is deleted, and recorded in the queue's history. Without the lease token
    (admin keys only, when the service has keys) whatever holds the item loses it."""
    who.require(Action.CONSUME)
    _token_needed(who, lease_token)
    await _own_queues(who, sq, [item_id])
    await sq.complete(item_id, lease_token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/items/complete",
    operation_id="completeItems",
    tags=["items"],
    response_model=CompleteBatchResponse,
    responses=errors(400, 413, 415, 422, 503),
)
async def complete_items(body: CompleteBatchRequest, sq: ServiceDep, who: Caller) -> Response:
    """Finish 1..1000 items at once; each gets its own result, as DELETE /items/{id} would give."""
    who.require(Action.CONSUME)
    for ref in body.items:
        _token_needed(who, ref.lease_token)
    await _own_queues(who, sq, [ref.id for ref in body.items])
    outcomes = await sq.complete_many([Completion(i.id, i.lease_token) for i in body.items])
    return json_text(f'{{"results":{_results_json(body.items, outcomes)}}}')


@router.post(
    "/items/{item_id:uuid}/fail",
    operation_id="failItem",
    tags=["items"],
    response_model=Item,
    responses=errors(400, 404, 409, 413, 415, 422, 503),
)
async def fail_item(item_id: ItemId, body: FailRequest, sq: ServiceDep, who: Caller) -> Response:
    """Record an error. The item is retried after `retry_after_seconds` or the queue's backoff,
    unless `retry` is false or this was its last attempt: then it is dead."""
    who.require(Action.CONSUME)
    _token_needed(who, body.lease_token)
    await _own_queues(who, sq, [item_id])
    failure = Failure(body.error, body.lease_token, body.retry, body.retry_after_seconds)
    view = await sq.fail(item_id, failure)
    return json_text(Item.json_of(view))


@router.post(
    "/items/{item_id:uuid}/extend",
    operation_id="extendLease",
    tags=["items"],
    response_model=Item,
    responses=errors(400, 404, 409, 413, 415, 422, 503),
)
async def extend_lease(item_id: ItemId, body: ExtendRequest, sq: ServiceDep, who: Caller) -> Response:
    """Keep working on an item: its live lease now ends `lease_seconds` from now (a heartbeat).
    409 when the token is stale, or the lease has already expired."""
    who.require(Action.CONSUME)
    await _own_queues(who, sq, [item_id])
    return json_text(Item.json_of(await sq.extend(item_id, body.lease_token, body.lease_seconds)))


@router.get(
    "/items/{item_id:uuid}",
    operation_id="getItem",
    tags=["items"],
    response_model=Item,
    responses=errors(404, 422, 503),
)
async def get_item(item_id: ItemId, sq: ServiceDep, who: Caller) -> Response:
    """Look at an item without changing it."""
    who.require(Action.CONSUME)
    view = await sq.get_item(item_id)
    who.require(Action.CONSUME, view.queue)
    return json_text(Item.json_of(view))
