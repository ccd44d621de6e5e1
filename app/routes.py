"""HTTP routes. Each one validates, makes one store call, and shapes the answer."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from pydantic import BaseModel

from app.domain import CompleteOutcome, Completion, Failure, HistoryFilter, ItemStatus, NewItem, Outcome
from app.payloads import encode_payload
from app.schemas import (
    QUEUE_NAME_PATTERN,
    TIME_TEXT,
    BatchItem,
    CompleteBatchRequest,
    CompleteBatchResponse,
    CompleteResult,
    DeadPage,
    ErrorBody,
    ExtendRequest,
    FailRequest,
    HistoryEntry,
    HistoryPage,
    ItemResponse,
    PoppedItem,
    PopRequest,
    PopResponse,
    PurgeResponse,
    PushBatchRequest,
    PushBatchResponse,
    PushRequest,
    PushResponse,
    QueueResponse,
    QueueSettingsBody,
    QueuesResponse,
    RedriveRequest,
    RedriveResponse,
    StatusResponse,
    UtcDatetime,
)
from app.services import Services


async def get_services(request: Request) -> Services:
    # One dependency, and `async def`: FastAPI runs a plain `def` dependency in a thread pool, and
    # resolves each dependency separately; under load both showed as top costs of a push.
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
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


def repeat_rounds(ids: list[UUID]) -> list[list[int]]:
    """Places of `ids` split into rounds of distinct ids, the k-th occurrence of an id in round k:
    run one after another, they treat a repeated id as that many requests in order would."""
    rounds: list[list[int]] = []
    seen: dict[UUID, int] = {}
    for n, item_id in enumerate(ids):
        k = seen[item_id] = seen.get(item_id, -1) + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(n)
    return rounds


def _also(code: int, model: type[BaseModel], description: str) -> dict[int | str, dict[str, Any]]:
    """A success status besides the route's own, for the spec."""
    return {code: {"model": model, "description": description}}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    described = {
        400: "The body is not valid JSON.",
        404: "No such item or queue.",
        409: "Conflicts with the item's current state.",
        413: "The request body is over the service's limit (pushes: or a payload over its limit).",
        415: "The body was not sent as application/json.",
        422: "Invalid input.",
        503: "The database is unavailable or not migrated.",
    }
    return {code: {"model": ErrorBody, "description": described[code]} for code in codes}


router = APIRouter()


def _new_item(queue: str, entry: PushRequest | BatchItem, sq: Services, now: datetime, where: str) -> NewItem:
    """An item as pushed: the client's id and timestamp where given, else new ones."""
    return NewItem(
        id=entry.id or uuid4(),
        queue=queue,
        payload_json=encode_payload(entry.payload, sq.settings.max_payload_bytes, where),
        created_at=entry.created_at or now,
        priority=entry.priority,
        group=entry.group,
        dedup_key=entry.dedup_key,
        delay_seconds=entry.delay_seconds,
        not_before=entry.not_before,
    )


@router.post(
    "/push",
    status_code=status.HTTP_201_CREATED,
    operation_id="push",
    response_model=PushResponse,
    responses=_also(200, PushResponse, "The dedup_key matched an existing item: nothing was inserted.")
    | _errors(400, 409, 413, 415, 422, 503),
)
async def push(body: PushRequest, sq: ServicesDep) -> Response:
    """Add an item to a queue (created on first push). 201 means it is committed; 200 means its
    dedup_key matched an existing item, whose id is returned, and nothing was inserted."""
    item = _new_item(body.queue, body, sq, sq.clock(), "payload")
    pushed = await sq.pusher.push(item)
    if pushed.created:
        sq.waiting.notify(item.queue, 1)
    return serialized(
        PushResponse.model_construct(
            id=pushed.id, queue=item.queue, created_at=pushed.created_at, created=pushed.created
        ),
        status.HTTP_201_CREATED if pushed.created else status.HTTP_200_OK,
    )


@router.post(
    "/push/batch",
    status_code=status.HTTP_201_CREATED,
    operation_id="pushBatch",
    response_model=PushBatchResponse,
    responses=_also(200, PushBatchResponse, "Every item was a duplicate: nothing was inserted.")
    | _errors(400, 409, 413, 415, 422, 503),
)
async def push_batch(body: PushBatchRequest, sq: ServicesDep) -> Response:
    """Add 1..1000 items to one queue in one transaction: all of them, or (409, 413, 422) none.
    Items whose dedup_key matches an existing item (or an earlier item of the batch) are not
    inserted and answer with the original's id; 200 when that is all of them."""
    now = sq.clock()
    items = [
        _new_item(body.queue, entry, sq, now, f"items[{n}].payload") for n, entry in enumerate(body.items)
    ]
    results = [r for r in await sq.store.push_batch(items, skip_existing=False) if r is not None]
    created = sum(r.created for r in results)
    if created:
        sq.waiting.notify(body.queue, created)
    return serialized(
        PushBatchResponse.model_construct(ids=[r.id for r in results], created=[r.created for r in results]),
        status.HTTP_201_CREATED if created else status.HTTP_200_OK,
    )


@router.post(
    "/pop", operation_id="pop", response_model=PopResponse, responses=_errors(400, 413, 415, 422, 503)
)
async def pop(body: PopRequest, sq: ServicesDep, request: Request) -> Response:
    """Lease up to `max_items` items (highest priority first, then oldest), waiting up to
    `wait_seconds` for one to arrive. Of an ordered group only the head is handed out."""
    items = await sq.waiting.pop(
        body.queue,
        max_items=body.max_items,
        wait_seconds=body.wait_seconds,
        lease_seconds=body.lease_seconds,
        gone=request.is_disconnected,
    )
    return json_text('{"items":[' + ",".join(PoppedItem.json_of(i) for i in items) + "]}")


@router.delete(
    "/items/{item_id:uuid}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="completeItem",
    responses=_errors(404, 409, 422, 503),
)
async def complete_item(item_id: ItemId, sq: ServicesDep, lease_token: LeaseTokenQuery = None) -> Response:
    """Finish an item: it is deleted, and recorded in the queue's history."""
    await sq.store.complete(item_id, lease_token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/items/complete",
    operation_id="completeItems",
    response_model=CompleteBatchResponse,
    responses=_errors(400, 413, 415, 422, 503),
)
async def complete_items(body: CompleteBatchRequest, sq: ServicesDep) -> Response:
    """Finish 1..1000 items at once; each gets its own result, as DELETE /items/{id} would give."""
    requested = [Completion(i.id, i.lease_token) for i in body.items]
    outcomes: list[CompleteOutcome | None] = [None] * len(requested)
    for places in repeat_rounds([c.id for c in requested]):
        done = await sq.store.complete_batch([requested[n] for n in places])
        for n, outcome in zip(places, done, strict=True):
            outcomes[n] = outcome
    results = [
        CompleteResult.model_construct(id=c.id, result=o.value if o else "not_found")
        for c, o in zip(requested, outcomes, strict=True)
    ]
    return serialized(CompleteBatchResponse.model_construct(results=results))


@router.post(
    "/items/{item_id:uuid}/fail",
    operation_id="failItem",
    response_model=ItemResponse,
    responses=_errors(400, 404, 409, 413, 415, 422, 503),
)
async def fail_item(item_id: ItemId, body: FailRequest, sq: ServicesDep) -> Response:
    """Record an error. The item is retried after `retry_after_seconds` or the queue's backoff,
    unless `retry` is false or this was its last attempt: then it is dead."""
    failure = Failure(body.error, body.lease_token, body.retry, body.retry_after_seconds)
    view = await sq.store.fail(item_id, failure)
    if view.status == ItemStatus.READY:
        sq.waiting.notify(view.queue, 1)
    return json_text(ItemResponse.json_of(view))


@router.post(
    "/items/{item_id:uuid}/extend",
    operation_id="extendLease",
    response_model=ItemResponse,
    responses=_errors(400, 404, 409, 413, 415, 422, 503),
)
async def extend_lease(item_id: ItemId, body: ExtendRequest, sq: ServicesDep) -> Response:
    """Keep working on an item: its live lease now ends `lease_seconds` from now (a heartbeat).
    409 when the token is stale, or the lease has already expired."""
    return json_text(
        ItemResponse.json_of(await sq.store.extend(item_id, body.lease_token, body.lease_seconds))
    )


@router.get(
    "/items/{item_id:uuid}",
    operation_id="getItem",
    response_model=ItemResponse,
    responses=_errors(404, 422, 503),
)
async def get_item(item_id: ItemId, sq: ServicesDep) -> Response:
    """Look at an item without changing it."""
    return json_text(ItemResponse.json_of(await sq.store.get_item(item_id)))


@router.get("/queues", operation_id="listQueues", responses=_errors(503))
async def list_queues(sq: ServicesDep) -> QueuesResponse:
    """Every queue with its counts."""
    return QueuesResponse(queues=[QueueResponse.of(q) for q in await sq.store.list_queues()])


@router.get("/queues/{name}", operation_id="getQueue", responses=_errors(404, 422, 503))
async def get_queue(name: QueuePath, sq: ServicesDep) -> QueueResponse:
    """One queue's settings and counts."""
    return QueueResponse.of(await sq.store.get_queue(name))


@router.put(
    "/queues/{name}",
    operation_id="putQueue",
    responses=_also(201, QueueResponse, "The queue was created.") | _errors(400, 413, 415, 422, 503),
)
async def put_queue(
    name: QueuePath, body: QueueSettingsBody, sq: ServicesDep, response: Response
) -> QueueResponse:
    """Create a queue with these settings, or replace its settings (omitted fields take their
    defaults). They apply from the next pop, fail or finish on."""
    if await sq.store.put_queue(name, body.to_domain()):
        response.status_code = status.HTTP_201_CREATED
    return QueueResponse.of(await sq.store.get_queue(name))


@router.get(
    "/queues/{name}/dead", operation_id="listDead", response_model=DeadPage, responses=_errors(422, 503)
)
async def list_dead(
    name: QueuePath, sq: ServicesDep, limit: PageLimit = 100, cursor: Cursor = None
) -> Response:
    """Dead items with their errors, most recently dead first."""
    page = await sq.store.list_dead(name, limit, cursor)
    return json_text(page_json([ItemResponse.json_of(v) for v in page.items], page.next_cursor))


@router.post("/queues/{name}/redrive", operation_id="redrive", responses=_errors(400, 413, 415, 422, 503))
async def redrive(name: QueuePath, body: RedriveRequest, sq: ServicesDep) -> RedriveResponse:
    """Make dead items ready again (all, or those of `ids`; other ids are ignored), with their
    attempts reset and their errors kept."""
    count = await sq.store.redrive(name, body.ids, body.rate_per_second)
    if count:
        sq.waiting.notify(name, count)
    return RedriveResponse(redriven=count)


@router.delete("/queues/{name}/dead", operation_id="purgeDead", responses=_errors(422, 503))
async def purge_dead(name: QueuePath, sq: ServicesDep) -> PurgeResponse:
    """Delete the queue's dead items. Their history records stay."""
    return PurgeResponse(purged=await sq.store.purge_dead(name))


@router.get(
    "/queues/{name}/history",
    operation_id="listHistory",
    response_model=HistoryPage,
    responses=_errors(422, 503),
)
async def list_history(
    name: QueuePath,
    sq: ServicesDep,
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
    page = await sq.store.list_history(name, HistoryFilter(outcome, since, until), limit, cursor)
    return json_text(page_json([HistoryEntry.json_of(r) for r in page.items], page.next_cursor))


@router.get("/healthz", operation_id="healthz")
async def healthz() -> StatusResponse:
    """The process is alive."""
    return StatusResponse(status="ok")


@router.get("/readyz", operation_id="readyz", responses=_errors(503))
async def readyz(sq: ServicesDep) -> StatusResponse:
    """The database answers and its schema is up to date."""
    await sq.store.check_ready()
    return StatusResponse(status="ready")
