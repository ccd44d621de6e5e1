"""The schedules' routes. Each parses, makes one ScheduleService call, and shapes the answer.
Schedules push into queues on their own, so every route takes an admin key (`administer`),
covering the schedule's queue."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from simplequeue.api.auth import Action, Caller
from simplequeue.api.dependencies import SchedulesDep
from simplequeue.api.responses import also, errors
from simplequeue.api.schedules.schemas import ScheduleList, ScheduleRequest, ScheduleResponse
from simplequeue.domain import encode_payload
from simplequeue.domain.schedules import SCHEDULE_NAME_PATTERN, ScheduleSpec

SchedulePath = Annotated[str, Path(pattern=SCHEDULE_NAME_PATTERN, description="The schedule's name.")]
Cursor = Annotated[
    str | None, Query(min_length=1, max_length=200, description="The previous page's next_cursor.")
]
PageLimit = Annotated[int, Query(ge=1, le=1000, description="Per page.")]

router = APIRouter(tags=["schedules"])


@router.get("/schedules", operation_id="listSchedules", responses=errors(422, 503))
async def list_schedules(
    schedules: SchedulesDep, who: Caller, limit: PageLimit = 100, cursor: Cursor = None
) -> ScheduleList:
    """The schedules (those of queues the API key covers), in name order, a page at a time."""
    who.require(Action.ADMINISTER)
    page = await schedules.page(limit, cursor)
    found = [ScheduleResponse.of(s) for s in page.items if who.covers(s.spec.queue)]
    return ScheduleList(schedules=found, next_cursor=page.next_cursor)


@router.put(
    "/schedules/{name}",
    operation_id="putSchedule",
    responses=also(201, ScheduleResponse, "The schedule was made.") | errors(400, 409, 413, 415, 422, 503),
)
async def put_schedule(
    name: SchedulePath, body: ScheduleRequest, schedules: SchedulesDep, who: Caller, response: Response
) -> ScheduleResponse:
    """Make or replace the schedule; its next slot is the first after now (its last run is kept).
    409 TooManyQueues when its queue does not exist and the service holds its most queues."""
    who.require(Action.ADMINISTER, body.queue)
    spec = ScheduleSpec(
        queue=body.queue,
        payload_json=encode_payload(body.payload, schedules.max_payload_bytes),
        timing=body.timing(),
        priority=body.priority,
        group=body.group,
        paused=body.paused,
        jitter_seconds=body.jitter_seconds,
        overlap=body.overlap,
        catch_up=body.catch_up,
    )
    schedule, made = await schedules.put(name, spec)
    if made:
        response.status_code = status.HTTP_201_CREATED
    return ScheduleResponse.of(schedule)


@router.get("/schedules/{name}", operation_id="getSchedule", responses=errors(404, 422, 503))
async def get_schedule(name: SchedulePath, schedules: SchedulesDep, who: Caller) -> ScheduleResponse:
    """The schedule, with its next slot, its last run and the item that run pushed."""
    who.require(Action.ADMINISTER)
    schedule = await schedules.get(name)
    who.require(Action.ADMINISTER, schedule.spec.queue)
    return ScheduleResponse.of(schedule)


@router.delete(
    "/schedules/{name}",
    operation_id="deleteSchedule",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=errors(404, 422, 503),
)
async def delete_schedule(name: SchedulePath, schedules: SchedulesDep, who: Caller) -> Response:
    """Delete the schedule (the items it pushed stay in their queue)."""
    who.require(Action.ADMINISTER, (await schedules.get(name)).spec.queue)
    await schedules.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/schedules/{name}/pause", operation_id="pauseSchedule", responses=errors(404, 413, 422, 503))
async def pause_schedule(name: SchedulePath, schedules: SchedulesDep, who: Caller) -> ScheduleResponse:
    """Fire nothing until it is resumed."""
    who.require(Action.ADMINISTER, (await schedules.get(name)).spec.queue)
    return ScheduleResponse.of(await schedules.pause(name))


@router.post("/schedules/{name}/resume", operation_id="resumeSchedule", responses=errors(404, 413, 422, 503))
async def resume_schedule(name: SchedulePath, schedules: SchedulesDep, who: Caller) -> ScheduleResponse:
    """Fire again, from the first slot after now: the slots of the pause are not caught up."""
    who.require(Action.ADMINISTER, (await schedules.get(name)).spec.queue)
    return ScheduleResponse.of(await schedules.resume(name))


@router.post(
    "/schedules/{name}/trigger", operation_id="triggerSchedule", responses=errors(404, 413, 422, 503)
)
async def trigger_schedule(name: SchedulePath, schedules: SchedulesDep, who: Caller) -> ScheduleResponse:
    """Push one item now, even while paused; the slots are untouched."""
    who.require(Action.ADMINISTER, (await schedules.get(name)).spec.queue)
    return ScheduleResponse.of(await schedules.trigger(name))
