"""HTTP routes. Each one validates, makes one store call, and shapes the answer."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status

from app.domain import Clock, Completion, Failure, NewItem
from app.payloads import encode_payload
from app.pushing import PushCoalescer
from app.schemas import (
    QUEUE_NAME_PATTERN,
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
from app.settings import Settings
from app.store import Store
from app.waiting import Waiting


def _state(request: Request, name: str) -> Any:
    return getattr(request.app.state, name)


def get_store(request: Request) -> Store:
    store: Store = _state(request, "store")
    return store


def get_settings(request: Request) -> Settings:
    settings: Settings = _state(request, "settings")
    return settings


def get_waiting(request: Request) -> Waiting:
    waiting: Waiting = _state(request, "waiting")
    return waiting


def get_coalescer(request: Request) -> PushCoalescer:
    coalescer: PushCoalescer = _state(request, "coalescer")
    return coalescer


def get_clock(request: Request) -> Clock:
    clock: Clock = _state(request, "clock")
    return clock


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
WaitingDep = Annotated[Waiting, Depends(get_waiting)]
CoalescerDep = Annotated[PushCoalescer, Depends(get_coalescer)]
ClockDep = Annotated[Clock, Depends(get_clock)]
ItemId = Annotated[UUID, Path(description="The item's id.")]
LeaseTokenQuery = Annotated[
    UUID | None, Query(description="Refuse (409) unless this is the item's current lease.")
]


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


@router.post(
    "/push",
    status_code=status.HTTP_201_CREATED,
    operation_id="push",
    responses=_errors(400, 409, 413, 415, 422, 503),
)
async def push(
    body: PushRequest, pusher: CoalescerDep, settings: SettingsDep, waiting: WaitingDep, clock: ClockDep
) -> PushResponse:
    """Add an item to a queue (created on first push). 201 means it is committed."""
    item = NewItem(
        id=body.id or uuid4(),
        queue=body.queue,
        payload_json=encode_payload(body.payload, settings.max_payload_bytes),
        created_at=body.created_at or clock(),
    )
    await pusher.push(item)
    waiting.notify(item.queue, 1)
    return PushResponse(id=item.id, queue=item.queue, created_at=item.created_at)


@router.post(
    "/push/batch",
    status_code=status.HTTP_201_CREATED,
    operation_id="pushBatch",
    responses=_errors(400, 409, 413, 415, 422, 503),
)
async def push_batch(
    body: PushBatchRequest, store: StoreDep, settings: SettingsDep, waiting: WaitingDep, clock: ClockDep
) -> PushBatchResponse:
    """Add 1..1000 items to one queue in one transaction: all of them, or (409, 413, 422) none."""
    now = clock()
    items = [
        NewItem(
            id=entry.id or uuid4(),
            queue=body.queue,
            payload_json=encode_payload(entry.payload, settings.max_payload_bytes, f"items[{n}].payload"),
            created_at=entry.created_at or now,
        )
        for n, entry in enumerate(body.items)
    ]
    await store.push_batch(items, skip_existing=False)
    waiting.notify(body.queue, len(items))
    return PushBatchResponse(ids=[item.id for item in items])


@router.post("/pop", operation_id="pop", responses=_errors(400, 415, 422, 503))
async def pop(body: PopRequest, waiting: WaitingDep) -> PopResponse:
    """Lease up to `max_items` items, oldest first, waiting up to `wait_seconds` for one to arrive."""
    items = await waiting.pop(
        body.queue, max_items=body.max_items, wait_seconds=body.wait_seconds, lease_seconds=body.lease_seconds
    )
    return PopResponse(items=[PoppedItem.of(i) for i in items])


@router.delete(
    "/items/{item_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    operation_id="completeItem",
    responses=_errors(404, 409, 422, 503),
)
async def complete_item(item_id: ItemId, store: StoreDep, lease_token: LeaseTokenQuery = None) -> Response:
    """Finish an item: it is deleted."""
    await store.complete(item_id, lease_token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/items/complete", operation_id="completeItems", responses=_errors(400, 415, 422, 503))
async def complete_items(body: CompleteBatchRequest, store: StoreDep) -> CompleteBatchResponse:
    """Finish 1..1000 items at once; each gets its own result, as DELETE /items/{id} would give."""
    outcomes = await store.complete_batch([Completion(i.id, i.lease_token) for i in body.items])
    results = [CompleteResult(id=i.id, result=o.value) for i, o in zip(body.items, outcomes, strict=True)]
    return CompleteBatchResponse(results=results)


@router.post(
    "/items/{item_id}/fail", operation_id="failItem", responses=_errors(400, 404, 409, 415, 422, 503)
)
async def fail_item(item_id: ItemId, body: FailRequest, store: StoreDep, waiting: WaitingDep) -> ItemResponse:
    """Record an error; retry the item later (`retry: true`) or park it as dead."""
    failure = Failure(body.error, body.lease_token, body.retry, body.retry_after_seconds)
    view = await store.fail(item_id, failure)
    if view.status == "ready":
        waiting.notify(view.queue, 1)
    return ItemResponse.of(view)


@router.get("/items/{item_id}", operation_id="getItem", responses=_errors(404, 422, 503))
async def get_item(item_id: ItemId, store: StoreDep) -> ItemResponse:
    """Look at an item without changing it."""
    return ItemResponse.of(await store.get_item(item_id))


@router.get("/queues", operation_id="listQueues", responses=_errors(503))
async def list_queues(store: StoreDep) -> QueuesResponse:
    """Every queue with its counts."""
    return QueuesResponse(queues=[QueueResponse.of(q) for q in await store.list_queues()])


@router.get("/queues/{name}", operation_id="getQueue", responses=_errors(404, 422, 503))
async def get_queue(name: Annotated[str, Path(pattern=QUEUE_NAME_PATTERN)], store: StoreDep) -> QueueResponse:
    """One queue's counts."""
    return QueueResponse.of(await store.get_queue(name))


@router.get("/healthz", operation_id="healthz")
async def healthz() -> StatusResponse:
    """The process is alive."""
    return StatusResponse(status="ok")


@router.get("/readyz", operation_id="readyz", responses=_errors(503))
async def readyz(store: StoreDep) -> StatusResponse:
    """The database answers and its schema is up to date."""
    await store.check_ready()
    return StatusResponse(status="ready")
