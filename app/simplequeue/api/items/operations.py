"""What each item operation does: the caller's checks, one QueueService call, the answer. The
routes (simplequeue.api.items.routes) call these with their inputs, whether FastAPI read them or
the front door did (simplequeue.api.hot); the routes declare, these do."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from uuid import UUID

from fastapi import Response, status

from simplequeue.api.auth import Action, Grant
from simplequeue.api.errors import Forbidden
from simplequeue.api.items.schemas import (
    CompleteBatchRequest,
    CompleteRef,
    ExtendRequest,
    FailRequest,
    Item,
    LeasedRef,
    PoppedItem,
    PopRequest,
    PushBatchRequest,
    PushBatchResponse,
    PushRequest,
    PushResponse,
)
from simplequeue.api.responses import json_text, serialized
from simplequeue.domain import CompleteOutcome, Completion, Failure, ItemNotFound
from simplequeue.service.queues import QueueService


def _results_json(refs: Iterable[CompleteRef | LeasedRef], outcomes: Iterable[CompleteOutcome]) -> str:
    """CompleteResult entries as a JSON array, written directly: an id and a fixed word each, in
    answers of up to a thousand of them (pop's `completed`, POST /items/complete's `results`)."""
    entries = (f'{{"id":"{r.id}","result":"{o.value}"}}' for r, o in zip(refs, outcomes, strict=True))
    return "[" + ",".join(entries) + "]"


def _token_needed(who: Grant, lease_token: UUID | None) -> None:
    """Finishing an item takes its lease token (the proof of having popped it); admins may finish
    any item by its id."""
    if lease_token is None and not who.is_admin:
        raise Forbidden("only an admin key may finish an item without its lease_token")


async def _own_queues(who: Grant, sq: QueueService, ids: Iterable[UUID]) -> None:
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


Gone = Callable[[], Awaitable[bool]]
"""Whether the client has gone away (a long-poll stops waiting for it): Request.is_disconnected."""


# --- The operations -------------------------------------------------------------------------


async def push(sq: QueueService, who: Grant, body: PushRequest) -> Response:
    who.require(Action.PUSH, body.queue)
    pushed = await sq.push(body.queue, body.draft())
    return serialized(
        PushResponse.model_construct(
            id=pushed.id, queue=body.queue, created_at=pushed.created_at, created=pushed.created
        ),
        status.HTTP_201_CREATED if pushed.created else status.HTTP_200_OK,
    )


async def push_batch(sq: QueueService, who: Grant, body: PushBatchRequest) -> Response:
    who.require(Action.PUSH, body.queue)
    results = await sq.push_batch(body.queue, [entry.draft() for entry in body.items])
    return serialized(
        PushBatchResponse.model_construct(ids=[r.id for r in results], created=[r.created for r in results]),
        status.HTTP_201_CREATED if any(r.created for r in results) else status.HTTP_200_OK,
    )


async def pop(sq: QueueService, who: Grant, body: PopRequest, gone: Gone) -> Response:
    who.require(Action.CONSUME, body.queue)
    await _own_queues(who, sq, [ref.id for ref in body.complete])
    outcomes, items = await sq.complete_and_pop(
        [Completion(ref.id, ref.lease_token) for ref in body.complete],
        body.queue,
        max_items=body.max_items,
        wait_seconds=body.wait_seconds,
        lease_seconds=body.lease_seconds,
        gone=gone,
    )
    popped = ",".join(PoppedItem.json_of(i) for i in items)
    return json_text(f'{{"items":[{popped}],"completed":{_results_json(body.complete, outcomes)}}}')


async def complete_item(sq: QueueService, who: Grant, item_id: UUID, lease_token: UUID | None) -> Response:
    who.require(Action.CONSUME)
    _token_needed(who, lease_token)
    await _own_queues(who, sq, [item_id])
    await sq.complete(item_id, lease_token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def complete_items(sq: QueueService, who: Grant, body: CompleteBatchRequest) -> Response:
    who.require(Action.CONSUME)
    for ref in body.items:
        _token_needed(who, ref.lease_token)
    await _own_queues(who, sq, [ref.id for ref in body.items])
    outcomes = await sq.complete_many([Completion(i.id, i.lease_token) for i in body.items])
    return json_text(f'{{"results":{_results_json(body.items, outcomes)}}}')


async def fail_item(sq: QueueService, who: Grant, item_id: UUID, body: FailRequest) -> Response:
    who.require(Action.CONSUME)
    _token_needed(who, body.lease_token)
    await _own_queues(who, sq, [item_id])
    failure = Failure(body.error, body.lease_token, body.retry, body.retry_after_seconds)
    view = await sq.fail(item_id, failure)
    return json_text(Item.json_of(view))


async def extend_lease(sq: QueueService, who: Grant, item_id: UUID, body: ExtendRequest) -> Response:
    who.require(Action.CONSUME)
    await _own_queues(who, sq, [item_id])
    return json_text(Item.json_of(await sq.extend(item_id, body.lease_token, body.lease_seconds)))


async def get_item(sq: QueueService, who: Grant, item_id: UUID) -> Response:
    who.require(Action.CONSUME)
    view = await sq.get_item(item_id)
    who.require(Action.CONSUME, view.queue)
    return json_text(Item.json_of(view))


async def release_item(sq: QueueService, who: Grant, item_id: UUID) -> Response:
    who.require(Action.ADMINISTER)
    who.require(Action.ADMINISTER, (await sq.get_item(item_id)).queue)
    return json_text(Item.json_of(await sq.release(item_id)))
