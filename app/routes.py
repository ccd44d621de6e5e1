"""HTTP routes. Each one validates, makes one store call, and shapes the answer."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from pydantic import BaseModel

from app.domain import Completion, Failure, NewItem
from app.payloads import encode_payload
from app.schemas import (
    QUEUE_NAME_PATTERN,
    BatchItem,
    CompleteBatchRequest,
    CompleteBatchResponse,
    CompleteResult,
    ErrorBody,
    FailRequest,
    ItemResponse,
    PoppedItem,
    PopRequest,
    PopResponse,
    PushBatchRequest,
    PushBatchResponse,
    PushRequest,
    PushResponse,
    QueueResponse,
    QueuesResponse,
    StatusResponse,
)
from app.services import Services


async def get_services(request: Request) -> Services:
    # One dependency, and `async def`: FastAPI runs a plain `def` dependency in a thread pool, and
    # resolves each dependency separately; under load both showed as top costs of a push.
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
ItemId = Annotated[UUID, Path(description="The item's id.")]
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


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    described = {
        400: "The body is not valid JSON.",
        404: "No such item or queue.",
        409: "Conflicts with the item's current state.",
        413: "Payload or body too large.",
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
    )


@router.post(
    "/push",
    status_code=status.HTTP_201_CREATED,
    operation_id="push",
    response_model=PushResponse,
    responses=_errors(400, 409, 413, 415, 422, 503),
)
async def push(body: PushRequest, sq: ServicesDep) -> Response:
    """Add an item to a queue (created on first push). 201 means it is committed."""
    item = _new_item(body.queue, body, sq, sq.clock(), "payload")
    await sq.pusher.push(item)
    sq.waiting.notify(item.queue, 1)
    return serialized(
        PushResponse.model_construct(id=item.id, queue=item.queue, created_at=item.created_at),
        status.HTTP_201_CREATED,
    )


@router.post(
    "/push/batch",
    status_code=status.HTTP_201_CREATED,
    operation_id="pushBatch",
    response_model=PushBatchResponse,
    responses=_errors(400, 409, 413, 415, 422, 503),
)
async def push_batch(body: PushBatchRequest, sq: ServicesDep) -> Response:
    """Add 1..1000 items to one queue in one transaction: all of them, or (409, 413, 422) none."""
    now = sq.clock()
    items = [
        _new_item(body.queue, entry, sq, now, f"items[{n}].payload") for n, entry in enumerate(body.items)
    ]
    await sq.store.push_batch(items, skip_existing=False)
    sq.waiting.notify(body.queue, len(items))
    return serialized(
        PushBatchResponse.model_construct(ids=[item.id for item in items]), status.HTTP_201_CREATED
    )


@router.post("/pop", operation_id="pop", response_model=PopResponse, responses=_errors(400, 415, 422, 503))
async def pop(body: PopRequest, sq: ServicesDep) -> Response:
    """Lease up to `max_items` items, oldest first, waiting up to `wait_seconds` for one to arrive."""
    items = await sq.waiting.pop(
        body.queue, max_items=body.max_items, wait_seconds=body.wait_seconds, lease_seconds=body.lease_seconds
    )
    return serialized(PopResponse.model_construct(items=[PoppedItem.of(i) for i in items]))


@router.delete(
    "/items/{item_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="completeItem",
    responses=_errors(404, 409, 422, 503),
)
async def complete_item(item_id: ItemId, sq: ServicesDep, lease_token: LeaseTokenQuery = None) -> Response:
    """Finish an item: it is deleted."""
    await sq.store.complete(item_id, lease_token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/items/complete",
    operation_id="completeItems",
    response_model=CompleteBatchResponse,
    responses=_errors(400, 415, 422, 503),
)
async def complete_items(body: CompleteBatchRequest, sq: ServicesDep) -> Response:
    """Finish 1..1000 items at once; each gets its own result, as DELETE /items/{id} would give."""
    outcomes = await sq.store.complete_batch([Completion(i.id, i.lease_token) for i in body.items])
    results = [
        CompleteResult.model_construct(id=i.id, result=o.value)
        for i, o in zip(body.items, outcomes, strict=True)
    ]
    return serialized(CompleteBatchResponse.model_construct(results=results))


@router.post(
    "/items/{item_id}/fail", operation_id="failItem", responses=_errors(400, 404, 409, 415, 422, 503)
)
async def fail_item(item_id: ItemId, body: FailRequest, sq: ServicesDep) -> ItemResponse:
    """Record an error; retry the item later (`retry: true`) or park it as dead."""
    failure = Failure(body.error, body.lease_token, body.retry, body.retry_after_seconds)
    view = await sq.store.fail(item_id, failure)
    if view.status == "ready":
        sq.waiting.notify(view.queue, 1)
    return ItemResponse.of(view)


@router.get("/items/{item_id}", operation_id="getItem", responses=_errors(404, 422, 503))
async def get_item(item_id: ItemId, sq: ServicesDep) -> ItemResponse:
    """Look at an item without changing it."""
    return ItemResponse.of(await sq.store.get_item(item_id))


@router.get("/queues", operation_id="listQueues", responses=_errors(503))
async def list_queues(sq: ServicesDep) -> QueuesResponse:
    """Every queue with its counts."""
    return QueuesResponse(queues=[QueueResponse.of(q) for q in await sq.store.list_queues()])


@router.get("/queues/{name}", operation_id="getQueue", responses=_errors(404, 422, 503))
async def get_queue(name: Annotated[str, Path(pattern=QUEUE_NAME_PATTERN)], sq: ServicesDep) -> QueueResponse:
    """One queue's counts."""
    return QueueResponse.of(await sq.store.get_queue(name))


@router.get("/healthz", operation_id="healthz")
async def healthz() -> StatusResponse:
    """The process is alive."""
    return StatusResponse(status="ok")


@router.get("/readyz", operation_id="readyz", responses=_errors(503))
async def readyz(sq: ServicesDep) -> StatusResponse:
    """The database answers and its schema is up to date."""
    await sq.store.check_ready()
    return StatusResponse(status="ready")
