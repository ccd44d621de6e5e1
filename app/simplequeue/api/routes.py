"""HTTP routes. Each one parses, makes one QueueService call, and shapes the answer."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from simplequeue.api.auth import Action, Caller
from simplequeue.api.errors import Forbidden, codes_of
from simplequeue.api.metrics import Metrics
from simplequeue.api.schemas import (
    QUEUE_NAME_PATTERN,
    TIME_TEXT,
    CompleteBatchRequest,
    CompleteBatchResponse,
    CompleteRef,
    DeadItemPage,
    DeletedQueueResponse,
    ErrorBody,
    ExtendRequest,
    FailRequest,
    HealthStatus,
    HistoryEntry,
    HistoryPage,
    Item,
    ItemPage,
    LeasedRef,
    PeekState,
    PoppedItem,
    PopRequest,
    PopResponse,
    PurgeResponse,
    PushBatchRequest,
    PushBatchResponse,
    PushRequest,
    PushResponse,
    Queue,
    QueueList,
    QueueSettingsRequest,
    RedriveRequest,
    RedriveResponse,
    UtcDatetime,
)
from simplequeue.domain import (
    CompleteOutcome,
    Completion,
    DeadFilter,
    Failure,
    HistoryFilter,
    ItemNotFound,
    ItemStatus,
    Outcome,
)
from simplequeue.service.queues import QueueService


async def get_service(request: Request) -> QueueService:
    # One dependency, and `async def`: FastAPI runs a plain `def` dependency in a thread pool, and
    # resolves each dependency separately; under load both showed as top costs of a push.
    service: QueueService = request.app.state.service
    service.require_ready()  # 503 until the database has been reached (see QueueService.start)
    return service


ServiceDep = Annotated[QueueService, Depends(get_service)]
ItemId = Annotated[UUID, Path(description="The item's id.")]
QueuePath = Annotated[str, Path(pattern=QUEUE_NAME_PATTERN, description="The queue's name.")]
PageLimit = Annotated[int, Query(ge=1, le=1000, description="Items per page.")]
Cursor = Annotated[
    str | None, Query(min_length=1, max_length=200, description="The previous page's next_cursor.")
]
LeaseTokenQuery = Annotated[
    UUID | None, Query(description="Refuse (409) unless this is the item's current lease.")
]


def serialized(body: BaseModel, status_code: int = status.HTTP_200_OK) -> Response:
    """The hot routes' answer, serialized once by pydantic-core.

    A route that returns a model has FastAPI validate it again before serializing it; these
    bodies are built from values the store and the request already validated, and under load
    that second validation was the largest cost left in the service (see bench/).
    """
    return Response(body.model_dump_json(), status_code=status_code, media_type="application/json")


def json_text(text: str, status_code: int = status.HTTP_200_OK) -> Response:
    """An answer already serialized as JSON (payloads go out as the text the store holds)."""
    return Response(text, status_code=status_code, media_type="application/json")


def page_json(entries: list[str], next_cursor: str | None) -> str:
    return '{"items":[' + ",".join(entries) + '],"next_cursor":' + json.dumps(next_cursor) + "}"


def _also(code: int, model: type[BaseModel], description: str) -> dict[int | str, dict[str, Any]]:
    """A success status besides the route's own, for the spec."""
    return {code: {"model": model, "description": description}}


_WHY: dict[int, str] = {
    400: "The body is not valid JSON.",
    401: "The service has API keys, and none (or an unknown one) was sent.",
    403: "The API key's role or queues do not allow this.",
    404: "No such item or queue.",
    408: "The request's headers or body did not arrive in time; the connection is closed.",
    409: "Conflicts with the item's current state.",
    413: "The request body is over the service's limit (pushes: or a payload over its limit).",
    415: "The body was not sent as application/json.",
    422: "Invalid input.",
    500: "The database refused a statement, or the server failed unexpectedly.",
    503: "The database is unavailable or not migrated.",
}


def _results_json(refs: Iterable[CompleteRef | LeasedRef], outcomes: Iterable[CompleteOutcome]) -> str:
    """CompleteResult entries as a JSON array, written directly: an id and a fixed word each, in
    answers of up to a thousand of them (pop's `completed`, POST /items/complete's `results`)."""
    entries = (f'{{"id":"{r.id}","result":"{o.value}"}}' for r, o in zip(refs, outcomes, strict=True))
    return "[" + ",".join(entries) + "]"


def _errors(*codes: int, public: bool = False) -> dict[int | str, dict[str, Any]]:
    """The error answers an operation may give, with the codes each may carry. Any request may meet
    the header and body deadlines (408) or an unexpected failure (500); any but the public ones may
    lack a key (401) or the key its rights (403)."""
    always = {408, 500} if public else {401, 403, 408, 500}
    return {
        code: {"model": ErrorBody, "description": f"{_WHY[code]} Codes: {', '.join(codes_of(code))}."}
        for code in sorted({*codes, *always})
    }


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
    responses=_also(
        200, PushResponse, "The dedup_key or the id matched an item of the queue: nothing was inserted."
    )
    | _errors(400, 409, 413, 415, 422, 503),
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
    responses=_also(200, PushBatchResponse, "Every item was a duplicate: nothing was inserted.")
    | _errors(400, 409, 413, 415, 422, 503),
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
    responses=_errors(400, 413, 415, 422, 503),
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
    responses=_errors(404, 409, 422, 503),
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
    responses=_errors(400, 413, 415, 422, 503),
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
    responses=_errors(400, 404, 409, 413, 415, 422, 503),
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
    responses=_errors(400, 404, 409, 413, 415, 422, 503),
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
    responses=_errors(404, 422, 503),
)
async def get_item(item_id: ItemId, sq: ServiceDep, who: Caller) -> Response:
    """Look at an item without changing it."""
    who.require(Action.CONSUME)
    view = await sq.get_item(item_id)
    who.require(Action.CONSUME, view.queue)
    return json_text(Item.json_of(view))


@router.get("/queues", operation_id="listQueues", tags=["queues"], responses=_errors(503))
async def list_queues(sq: ServiceDep, who: Caller) -> QueueList:
    """Every queue with its counts (those the API key covers)."""
    who.require(Action.READ_STATS)
    return QueueList(queues=[Queue.of(q) for q in await sq.list_queues() if who.covers(q.name)])


@router.get("/queues/{name}", operation_id="getQueue", tags=["queues"], responses=_errors(404, 422, 503))
async def get_queue(name: QueuePath, sq: ServiceDep, who: Caller) -> Queue:
    """One queue's settings and counts."""
    who.require(Action.READ_STATS, name)
    return Queue.of(await sq.get_queue(name))


@router.put(
    "/queues/{name}",
    operation_id="putQueue",
    tags=["queues"],
    responses=_also(201, Queue, "The queue was created.") | _errors(400, 413, 415, 422, 503),
)
async def put_queue(
    name: QueuePath, body: QueueSettingsRequest, sq: ServiceDep, who: Caller, response: Response
) -> Queue:
    """Create a queue with these settings, or replace its settings (omitted fields take their
    defaults). They apply from the next pop, fail or finish on."""
    who.require(Action.ADMINISTER, name)
    created, stats = await sq.put_queue(name, body.to_domain())
    if created:
        response.status_code = status.HTTP_201_CREATED
    return Queue.of(stats)


@router.get(
    "/queues/{name}/dead",
    operation_id="listDead",
    tags=["queues"],
    response_model=DeadItemPage,
    responses=_errors(404, 422, 503),
)
async def list_dead(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    since: Annotated[
        UtcDatetime | None,
        Query(description=f"Died at or after this time ({TIME_TEXT})."),
    ] = None,
    until: Annotated[
        UtcDatetime | None,
        Query(description=f"Died before this time ({TIME_TEXT})."),
    ] = None,
    limit: PageLimit = 100,
    cursor: Cursor = None,
) -> Response:
    """Dead items with their errors and payloads, most recently dead first."""
    who.require(Action.ADMINISTER, name)
    page = await sq.list_dead(name, DeadFilter(since, until), limit, cursor)
    return json_text(page_json([Item.json_of(v) for v in page.items], page.next_cursor))


@router.post(
    "/queues/{name}/redrive",
    operation_id="redrive",
    tags=["queues"],
    responses=_errors(400, 404, 413, 415, 422, 503),
)
async def redrive(name: QueuePath, body: RedriveRequest, sq: ServiceDep, who: Caller) -> RedriveResponse:
    """Make dead items ready again (all, or those of `ids`; other ids are ignored), with their
    attempts reset and their errors kept."""
    who.require(Action.ADMINISTER, name)
    return RedriveResponse(redriven=await sq.redrive(name, body.ids, body.rate_per_second))


@router.delete(
    "/queues/{name}/dead", operation_id="purgeDead", tags=["queues"], responses=_errors(404, 422, 503)
)
async def purge_dead(name: QueuePath, sq: ServiceDep, who: Caller) -> PurgeResponse:
    """Delete the queue's dead items. Their history records stay."""
    who.require(Action.ADMINISTER, name)
    return PurgeResponse(purged=await sq.purge_dead(name))


@router.get(
    "/queues/{name}/history",
    operation_id="listHistory",
    tags=["queues"],
    response_model=HistoryPage,
    responses=_errors(404, 422, 503),
)
async def list_history(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    outcome: Annotated[Outcome | None, Query(description="Only completed, or only dead.")] = None,
    since: Annotated[
        UtcDatetime | None,
        Query(description=f"Finished at or after this time ({TIME_TEXT})."),
    ] = None,
    until: Annotated[
        UtcDatetime | None,
        Query(description=f"Finished before this time ({TIME_TEXT})."),
    ] = None,
    limit: PageLimit = 100,
    cursor: Cursor = None,
) -> Response:
    """Finished items (completed or dead), most recently finished first, kept for the queue's
    retention_seconds."""
    who.require(Action.ADMINISTER, name)
    page = await sq.list_history(name, HistoryFilter(outcome, since, until), limit, cursor)
    return json_text(page_json([HistoryEntry.json_of(r) for r in page.items], page.next_cursor))


@router.post(
    "/queues/{name}/pause", operation_id="pauseQueue", tags=["queues"], responses=_errors(404, 413, 422, 503)
)
async def pause_queue(name: QueuePath, sq: ServiceDep, who: Caller) -> Queue:
    """Stop handing out the queue's items (pushes are still taken); long-polls wait on."""
    who.require(Action.ADMINISTER, name)
    return Queue.of(await sq.pause(name))


@router.post(
    "/queues/{name}/resume",
    operation_id="resumeQueue",
    tags=["queues"],
    responses=_errors(404, 413, 422, 503),
)
async def resume_queue(name: QueuePath, sq: ServiceDep, who: Caller) -> Queue:
    """Hand out the queue's items again."""
    who.require(Action.ADMINISTER, name)
    return Queue.of(await sq.resume(name))


@router.get(
    "/queues/{name}/items",
    operation_id="peekItems",
    tags=["queues"],
    response_model=ItemPage,
    responses=_errors(404, 422, 503),
)
async def peek_items(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    state: Annotated[PeekState, Query(description="Which live items: as the queue's counts name them.")],
    limit: PageLimit = 100,
    cursor: Cursor = None,
) -> Response:
    """Look at a queue's live items in one state, oldest created first, without leasing them."""
    who.require(Action.ADMINISTER, name)
    page = await sq.peek(name, ItemStatus(state.value), limit, cursor)
    return json_text(page_json([Item.json_of(v) for v in page.items], page.next_cursor))


@router.delete(
    "/queues/{name}",
    operation_id="deleteQueue",
    tags=["queues"],
    responses=_errors(404, 409, 422, 503),
)
async def delete_queue(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    force: Annotated[
        bool, Query(description="Delete it even while items are leased (their workers' results are refused).")
    ] = False,
) -> DeletedQueueResponse:
    """Delete a queue with its items (of every state), history and dedup keys, in one transaction.
    409 QueueInUse while items are leased, unless `force`."""
    who.require(Action.ADMINISTER, name)
    deleted = await sq.delete_queue(name, force)
    return DeletedQueueResponse(queue=name, items=deleted.items, history=deleted.history)


@router.get("/metrics", include_in_schema=False)
async def metrics(sq: ServiceDep, who: Caller, request: Request) -> Response:
    """Prometheus' text format (admin keys only, when the service has keys)."""
    who.require(Action.ADMINISTER)
    if who.queues is not None:
        raise Forbidden("metrics cover every queue: they need an admin key for all queues")
    found: Metrics = request.app.state.metrics
    if found.stale():
        found.queues_read(await sq.list_queues())
    return Response(found.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", operation_id="healthz", tags=["health"], responses=_errors(public=True))
async def healthz() -> HealthStatus:
    """The process is alive."""
    return HealthStatus(status="ok")


@router.get("/readyz", operation_id="readyz", tags=["health"], responses=_errors(503, public=True))
async def readyz(sq: ServiceDep) -> HealthStatus:
    """The database answers and its schema is up to date."""
    await sq.check_ready()
    return HealthStatus(status="ready")
