"""The queues' routes: their settings and counts, dead items (list, redrive, purge), history,
pause and resume, a look at live items, deletion. Each parses, makes one QueueService call, and
shapes the answer."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, status
from fastapi.exceptions import RequestValidationError

from simplequeue.api.auth import Action, Caller
from simplequeue.api.dependencies import ServiceDep
from simplequeue.api.errors import Forbidden
from simplequeue.api.fields import KEY_TEXT, TIME_TEXT, Key, UtcDatetime
from simplequeue.api.items.schemas import Item
from simplequeue.api.queues.schemas import (
    Activity,
    DeadItemPage,
    DeletedQueueResponse,
    GroupItemPage,
    HistoryEntry,
    HistoryPage,
    ItemPage,
    PeekState,
    PurgeResponse,
    Queue,
    QueueDetail,
    QueueList,
    QueueSettingsRequest,
    RedriveRequest,
    RedriveResponse,
)
from simplequeue.api.responses import also, errors, json_text, page_response
from simplequeue.domain import DeadFilter, HistoryFilter, ItemStatus, Outcome
from simplequeue.domain.activity import (
    MAX_AGE,
    MAX_BUCKET_SECONDS,
    MAX_BUCKETS,
    MIN_BUCKET_SECONDS,
    InvalidWindow,
)
from simplequeue.domain.names import QUEUE_NAME_PATTERN

QueuePath = Annotated[str, Path(pattern=QUEUE_NAME_PATTERN, description="The queue's name.")]
PageLimit = Annotated[int, Query(ge=1, le=1000, description="Items per page.")]
Cursor = Annotated[
    str | None, Query(min_length=1, max_length=200, description="The previous page's next_cursor.")
]


def time_query(description: str) -> Any:
    """A time filter's query parameter, its description followed by the times the API reads."""
    return Query(description=f"{description} ({TIME_TEXT}).")


router = APIRouter(tags=["queues"])


@router.get("/queues", operation_id="listQueues", responses=errors(422, 503))
async def list_queues(
    sq: ServiceDep,
    who: Caller,
    limit: Annotated[int, Query(ge=1, le=1000, description="Queues per page.")] = 100,
    cursor: Cursor = None,
) -> QueueList:
    """The queues with their counts (those the API key covers), in name order, a page at a time:
    follow `next_cursor` until it is null."""
    who.require(Action.READ_STATS)
    page = await sq.list_queues(limit, cursor, wanted=who.covers)
    return QueueList(queues=[Queue.of(q) for q in page.items], next_cursor=page.next_cursor)


@router.get("/queues/{name}", operation_id="getQueue", responses=errors(404, 422, 503))
async def get_queue(name: QueuePath, sq: ServiceDep, who: Caller) -> QueueDetail:
    """One queue's settings and counts, its busiest fairness keys, and the flow limits that cut its
    pops short."""
    who.require(Action.READ_STATS, name)
    return QueueDetail.of_detail(await sq.queue_detail(name))


@router.put(
    "/queues/{name}",
    operation_id="putQueue",
    responses=also(201, Queue, "The queue was created.") | errors(400, 409, 413, 415, 422, 503),
)
async def put_queue(
    name: QueuePath, body: QueueSettingsRequest, sq: ServiceDep, who: Caller, response: Response
) -> Queue:
    """Create a queue with these settings, or replace its settings (omitted fields take their
    defaults). They apply from the next pop, fail or finish on. 409 TooManyQueues when it would make
    a queue past the service's most (SIMPLEQUEUE_MAX_QUEUES)."""
    who.require(Action.ADMINISTER, name)
    created, stats = await sq.put_queue(name, body.to_domain())
    if created:
        response.status_code = status.HTTP_201_CREATED
    return Queue.of(stats)


@router.get(
    "/queues/{name}/dead",
    operation_id="listDead",
    response_model=DeadItemPage,
    responses=errors(404, 422, 503),
)
async def list_dead(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    since: Annotated[UtcDatetime | None, time_query("Died at or after this time")] = None,
    until: Annotated[UtcDatetime | None, time_query("Died before this time")] = None,
    limit: PageLimit = 100,
    cursor: Cursor = None,
) -> Response:
    """Dead items with their errors and payloads, most recently dead first."""
    who.require(Action.ADMINISTER, name)
    return page_response(await sq.list_dead(name, DeadFilter(since, until), limit, cursor), Item.json_of)


@router.post(
    "/queues/{name}/redrive",
    operation_id="redrive",
    responses=errors(400, 404, 413, 415, 422, 503),
)
async def redrive(name: QueuePath, body: RedriveRequest, sq: ServiceDep, who: Caller) -> RedriveResponse:
    """Make dead items ready again (all, or those of `ids`; other ids are ignored), with their
    attempts reset and their errors kept."""
    who.require(Action.ADMINISTER, name)
    return RedriveResponse(redriven=await sq.redrive(name, body.ids, body.rate_per_second))


@router.delete("/queues/{name}/dead", operation_id="purgeDead", responses=errors(404, 422, 503))
async def purge_dead(name: QueuePath, sq: ServiceDep, who: Caller) -> PurgeResponse:
    """Delete the queue's dead items. Their history records stay."""
    who.require(Action.ADMINISTER, name)
    return PurgeResponse(purged=await sq.purge_dead(name))


@router.get(
    "/queues/{name}/history",
    operation_id="listHistory",
    response_model=HistoryPage,
    responses=errors(404, 422, 503),
)
async def list_history(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    outcome: Annotated[Outcome | None, Query(description="Only completed, or only dead.")] = None,
    since: Annotated[UtcDatetime | None, time_query("Finished at or after this time")] = None,
    until: Annotated[UtcDatetime | None, time_query("Finished before this time")] = None,
    limit: PageLimit = 100,
    cursor: Cursor = None,
) -> Response:
    """Finished items (completed or dead), most recently finished first, kept for the queue's
    retention_seconds."""
    who.require(Action.ADMINISTER, name)
    page = await sq.list_history(name, HistoryFilter(outcome, since, until), limit, cursor)
    return page_response(page, HistoryEntry.json_of)


@router.post("/queues/{name}/pause", operation_id="pauseQueue", responses=errors(404, 413, 422, 503))
async def pause_queue(name: QueuePath, sq: ServiceDep, who: Caller) -> Queue:
    """Stop handing out the queue's items (pushes are still taken); long-polls wait on."""
    who.require(Action.ADMINISTER, name)
    return Queue.of(await sq.pause(name))


@router.post(
    "/queues/{name}/resume",
    operation_id="resumeQueue",
    responses=errors(404, 413, 422, 503),
)
async def resume_queue(name: QueuePath, sq: ServiceDep, who: Caller) -> Queue:
    """Hand out the queue's items again."""
    who.require(Action.ADMINISTER, name)
    return Queue.of(await sq.resume(name))


@router.get(
    "/queues/{name}/items",
    operation_id="peekItems",
    response_model=ItemPage,
    responses=errors(404, 422, 503),
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
    return page_response(await sq.peek(name, ItemStatus(state.value), limit, cursor), Item.json_of)


@router.get(
    "/queues/{name}/items/by-group",
    operation_id="listGroupItems",
    response_model=GroupItemPage,
    responses=errors(404, 422, 503),
)
async def list_group_items(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    group: Annotated[Key, Query(description=f"The group's key, as its items were pushed with. {KEY_TEXT}")],
    limit: PageLimit = 100,
    cursor: Cursor = None,
) -> Response:
    """Look at an ordered group's live items (every state but dead) in group order, its head (the
    one handed out next) first, without leasing them. A group without live items has none."""
    who.require(Action.ADMINISTER, name)
    return page_response(await sq.group_items(name, group, limit, cursor), Item.json_of)


@router.get(
    "/queues/{name}/items/by-dedup-key",
    operation_id="getItemByDedupKey",
    response_model=Item,
    responses=errors(404, 422, 503),
)
async def get_item_by_dedup_key(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    dedup_key: Annotated[Key, Query(description=f"The dedup_key the item was pushed with. {KEY_TEXT}")],
) -> Response:
    """The item, live or dead, that holds this dedup key in the queue. 404 ItemNotFound when none
    does: no item was pushed with it, or its item finished (the key may still be held for the
    queue's dedup window)."""
    who.require(Action.ADMINISTER, name)
    return json_text(Item.json_of(await sq.dedup_item(name, dedup_key)))


@router.delete(
    "/queues/{name}",
    operation_id="deleteQueue",
    responses=errors(404, 409, 422, 503),
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


BucketSeconds = Annotated[
    int,
    Query(
        ge=MIN_BUCKET_SECONDS,
        le=MAX_BUCKET_SECONDS,
        description=f"The buckets' length in seconds. Of a window of more than {MAX_BUCKETS} buckets, "
        "the latest are counted.",
    ),
]
ACTIVITY_SINCE = time_query(
    f"From the bucket holding this time; an hour ago if omitted, at most {MAX_AGE.days} days ago "
    "(an earlier time counts from then: the answer's since says where the window starts)"
)


async def _activity(sq: ServiceDep, queue: str | None, since: datetime | None, bucket: int) -> Activity:
    try:
        found = await sq.activity(queue, since, bucket)
    except InvalidWindow as e:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", e.field), "msg": str(e)}]
        ) from e
    return Activity.of(queue, found, bucket)


@router.get("/queues/{name}/activity", operation_id="getQueueActivity", responses=errors(404, 422, 503))
async def queue_activity(
    name: QueuePath,
    sq: ServiceDep,
    who: Caller,
    since: Annotated[UtcDatetime | None, ACTIVITY_SINCE] = None,
    bucket: BucketSeconds = 60,
) -> Activity:
    """Items pushed, completed, failed and dead per bucket of time, counted in the database."""
    who.require(Action.READ_STATS, name)
    return await _activity(sq, name, since, bucket)


@router.get("/activity", operation_id="getActivity", responses=errors(422, 503))
async def all_activity(
    sq: ServiceDep,
    who: Caller,
    since: Annotated[UtcDatetime | None, ACTIVITY_SINCE] = None,
    bucket: BucketSeconds = 60,
) -> Activity:
    """Every queue's activity together, per bucket of time. Only for keys that cover every queue."""
    who.require(Action.READ_STATS)
    if who.queues is not None:
        raise Forbidden("this key covers some queues only: ask for each queue's activity")
    return await _activity(sq, None, since, bucket)
