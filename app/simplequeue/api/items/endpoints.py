"""What each item operation does, written once: the caller's checks, one QueueService call, the
answer. Both ways in call these functions: the FastAPI declarations (simplequeue.api.items.routes,
from which the spec is written) with the inputs FastAPI bound, and the hot functions below, which
the front door calls (simplequeue.api.hot) after reading the inputs themselves, in plain code.

`HOT` lists the hot functions with the method and path each serves; the app refuses to start
when they disagree with the declarations (simplequeue.api.hot.check_declared)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from uuid import UUID

from fastapi import Response, status
from pydantic import TypeAdapter

from simplequeue.api.auth import Action, Grant, caller
from simplequeue.api.dependencies import get_service
from simplequeue.api.errors import Forbidden
from simplequeue.api.hot import Hot, HotCall
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


async def pop(
    sq: QueueService, who: Grant, body: PopRequest, gone: Callable[[], Awaitable[bool]]
) -> Response:
    """`gone` tells whether the client has gone away (a long-poll stops waiting for it)."""
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


# --- The hot functions: each reads its inputs as its declaration says, then calls the operation.
# The service and the caller first (a service that is not ready answers 503 whatever the body),
# as FastAPI solves a route's dependencies before its parameters.

LEASE_TOKEN: TypeAdapter[UUID | None] = TypeAdapter(UUID | None)  # DELETE /items/{id}?lease_token=


async def hot_push(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    return await push(sq, who, call.body(PushRequest))


async def hot_push_batch(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    return await push_batch(sq, who, call.body(PushBatchRequest))


async def hot_pop(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    return await pop(sq, who, call.body(PopRequest), gone=call.request.is_disconnected)


async def hot_complete_item(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    lease_token = call.query("lease_token", LEASE_TOKEN, None)
    return await complete_item(sq, who, call.path["item_id"], lease_token)


async def hot_complete_items(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    return await complete_items(sq, who, call.body(CompleteBatchRequest))


async def hot_fail_item(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    return await fail_item(sq, who, call.path["item_id"], call.body(FailRequest))


async def hot_extend_lease(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    return await extend_lease(sq, who, call.path["item_id"], call.body(ExtendRequest))


async def hot_get_item(call: HotCall) -> Response:
    sq, who = await get_service(call.request), await caller(call.request)
    return await get_item(sq, who, call.path["item_id"])


HOT = (
    Hot("push", "POST", "/push", hot_push),
    Hot("pushBatch", "POST", "/push/batch", hot_push_batch),
    Hot("pop", "POST", "/pop", hot_pop),
    Hot("completeItem", "DELETE", "/items/{item_id:uuid}", hot_complete_item),
    Hot("completeItems", "POST", "/items/complete", hot_complete_items),
    Hot("failItem", "POST", "/items/{item_id:uuid}/fail", hot_fail_item),
    Hot("extendLease", "POST", "/items/{item_id:uuid}/extend", hot_extend_lease),
    Hot("getItem", "GET", "/items/{item_id:uuid}", hot_get_item),
)
"""The hot functions, with the method and path template of the declaration each stands for."""
