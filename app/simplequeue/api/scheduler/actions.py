"""The door's five operations over our schedules, and the mapping both ways between a schedule
and EventBridge Scheduler's shapes (see docs/schedules.md, "EventBridge Scheduler's API").

A schedule made here keeps its expression, time zone, target and time window as given (the
schedule's `aws_json`), and GetSchedule answers them back as they were; one made through the
REST API is answered with a form derived from its timing. Only the group `default` exists."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from simplequeue.api.auth import Action, Grant
from simplequeue.api.scheduler.errors import SchedulerError, invalid
from simplequeue.api.scheduler.expressions import ExpressionError, expression_of, timing_of
from simplequeue.api.sqs.urls import Place, is_fifo
from simplequeue.domain import encode_payload
from simplequeue.domain.schedules import MAX_JITTER_SECONDS, Schedule, ScheduleSpec, is_schedule_name
from simplequeue.service.schedules import ScheduleService

GROUP = "default"
MAX_WINDOW_MINUTES = MAX_JITTER_SECONDS // 60
"""The widest FlexibleTimeWindow kept here (AWS allows 1440 minutes; our jitter is at most an hour)."""
MAX_RESULTS = 100
PAGE = 100  # schedules read per look while ListSchedules filters by prefix or state
_AWS_NAME = re.compile(r"[0-9a-zA-Z_.-]{1,64}")
_NOT_FOR_SQS = ("EcsParameters", "EventBridgeParameters", "KinesisParameters", "SageMakerPipelineParameters")
_NOT_HERE = ("StartDate", "EndDate", "KmsKeyArn")
"""What changes when a schedule fires (or how it is kept) that ours cannot do: refused, never ignored."""

_TOKEN = "ClientToken"
"""Kept with the EventBridge form, to know a create's retry by; never answered back."""

Params = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Context:
    schedules: ScheduleService
    grant: Grant
    place: Place  # the account and region of ARNs, as the SQS door forms them

    def arn(self, name: str) -> str:
        return f"arn:aws:scheduler:{self.place.region}:{self.place.account_id}:schedule/{GROUP}/{name}"

    def authorize(self, queue: str | None = None) -> None:
        """As the REST schedule routes: an admin key, covering the schedule's queue."""
        if not self.grant.may(Action.ADMINISTER, queue):
            why = "this key does not cover the queue" if self.grant.may(Action.ADMINISTER) else "an admin key"
            raise SchedulerError(
                "AccessDeniedException",
                f"User: {self.grant.name} is not authorized to perform this action ({why} is needed).",
            )


async def create_schedule(ctx: Context, name: str | None, body: Params, query: Params) -> Params:
    assert name is not None
    if not _AWS_NAME.fullmatch(name):
        raise invalid("Name: 1 to 64 letters, digits, '-', '_' or '.'")
    spec = _spec_of(ctx, body)
    ctx.authorize(spec.queue)
    found, made = await ctx.schedules.put(name, spec, must="new")
    # A retry of a create that was made (its answer lost) carries the same ClientToken: answered
    # as the create was, rather than as a conflict with itself.
    if not made and not _same_token(found, body.get("ClientToken")):
        raise SchedulerError("ConflictException", f"Schedule {name} already exists.")
    return {"ScheduleArn": ctx.arn(name)}


def _same_token(schedule: Schedule, token: object) -> bool:
    kept = json.loads(schedule.spec.aws_json) if schedule.spec.aws_json else {}
    return token is not None and kept.get(_TOKEN) == token


async def update_schedule(ctx: Context, name: str | None, body: Params, query: Params) -> Params:
    name = _existing_name(name)
    spec = _spec_of(ctx, body)
    ctx.authorize(spec.queue)
    ctx.authorize((await ctx.schedules.get(name)).spec.queue)
    await ctx.schedules.put(name, spec, must="existing")
    return {"ScheduleArn": ctx.arn(name)}


async def get_schedule(ctx: Context, name: str | None, body: Params, query: Params) -> Params:
    name = _existing_name(name)
    _group(query.get("groupName"))
    ctx.authorize()
    schedule = await ctx.schedules.get(name)
    ctx.authorize(schedule.spec.queue)
    return _described(ctx, schedule)


async def delete_schedule(ctx: Context, name: str | None, body: Params, query: Params) -> Params:
    name = _existing_name(name)
    _group(query.get("groupName"))
    ctx.authorize()
    ctx.authorize((await ctx.schedules.get(name)).spec.queue)
    await ctx.schedules.delete(name)
    return {}


async def list_schedules(ctx: Context, name: str | None, body: Params, query: Params) -> Params:
    _group(query.get("ScheduleGroup"))
    ctx.authorize()
    prefix = query.get("NamePrefix") or ""
    state = query.get("State")
    if state not in (None, "ENABLED", "DISABLED"):
        raise invalid("State must be ENABLED or DISABLED")
    limit = _max_results(query.get("MaxResults"))
    cursor = query.get("NextToken")
    found: list[Params] = []
    # Pages in name order until `limit` match: a cursor is the last name looked at, so the next
    # call goes on from there, and a name past the prefix's range ends the listing.
    while len(found) < limit:
        page = await ctx.schedules.page(min(PAGE, limit - len(found)), cursor)
        cursor = page.next_cursor
        for schedule in page.items:
            if schedule.name > prefix and not schedule.name.startswith(prefix):
                return {"Schedules": found}
            if _listed(ctx, schedule, prefix, state):
                found.append(_summary(ctx, schedule))
        if cursor is None:
            break
    return {"Schedules": found, **({"NextToken": cursor} if cursor is not None else {})}


def _listed(ctx: Context, schedule: Schedule, prefix: str, state: str | None) -> bool:
    return (
        schedule.name.startswith(prefix)
        and (state is None or _state(schedule) == state)
        and ctx.grant.covers(schedule.spec.queue)
    )


def _max_results(value: str | None) -> int:
    if value is None:
        return MAX_RESULTS
    if not (value.isascii() and value.isdigit() and 1 <= int(value) <= MAX_RESULTS):
        raise invalid(f"MaxResults must be 1 to {MAX_RESULTS}")
    return int(value)


def _existing_name(name: str | None) -> str:
    """A schedule's name in a path: AWS's names, and ours (up to 80) made through the REST API."""
    assert name is not None
    if not is_schedule_name(name):
        raise invalid("Name: 1 to 64 letters, digits, '-', '_' or '.'")
    return name


def _group(group: object) -> None:
    if group is not None and group != GROUP:
        raise SchedulerError("ResourceNotFoundException", f"Schedule group {str(group)[:64]} does not exist.")


# --- EventBridge Scheduler's shapes -> our schedule --------------------------------------------


def _spec_of(ctx: Context, body: Params) -> ScheduleSpec:
    _group(body.get("GroupName"))
    for field in _NOT_HERE:
        if body.get(field) is not None:
            raise invalid(f"{field} is not supported here")
    if body.get("ActionAfterCompletion") not in (None, "NONE"):
        raise invalid("ActionAfterCompletion DELETE is not supported here (NONE is)")
    expression = _text(body, "ScheduleExpression", 256)
    zone = _optional_text(body, "ScheduleExpressionTimezone", 50)
    try:
        timing = timing_of(expression, zone)
    except ExpressionError as exc:
        raise invalid(f"ScheduleExpression: {exc}") from None
    state = body.get("State", "ENABLED")
    if state not in ("ENABLED", "DISABLED"):
        raise invalid("State must be ENABLED or DISABLED")
    window = body.get("FlexibleTimeWindow")
    target = body.get("Target")
    if not isinstance(target, dict):
        raise invalid("Target is required: an object with Arn, RoleArn and Input")
    queue, group = _target(ctx, target)
    description = _optional_text(body, "Description", 512, shortest=0)
    body_text = _text(target, "Input", None, "Target.Input")
    kept = {"ScheduleExpression": expression, "Target": target, "FlexibleTimeWindow": window}
    if zone is not None:
        kept["ScheduleExpressionTimezone"] = zone
    if isinstance(token := body.get(_TOKEN), str):
        kept[_TOKEN] = token
    return ScheduleSpec(
        queue=queue,
        # The item a SendMessage of this body would be: its payload is the body as a JSON string.
        payload_json=encode_payload(body_text, ctx.schedules.max_payload_bytes),
        timing=timing,
        group=group,
        paused=state == "DISABLED",
        jitter_seconds=_jitter(window),
        description=description or None,
        aws_json=json.dumps(kept, ensure_ascii=False, separators=(",", ":")),
    )


def _target(ctx: Context, target: Params) -> tuple[str, str | None]:
    """The queue a target names (an SQS queue ARN of this service) and its items' group."""
    arn = _text(target, "Arn", 1600, "Target.Arn")
    queue = ctx.place.queue_of_arn(arn)
    if queue is None:
        raise invalid(f"Target.Arn must be an SQS queue of this service ({ctx.place.arn('<queue>')})")
    _text(target, "RoleArn", 1600, "Target.RoleArn")  # kept as given; this service assumes no role
    for field in _NOT_FOR_SQS:
        if target.get(field) is not None:
            raise invalid(f"Target.{field} is not for an SQS queue")
    sqs = target.get("SqsParameters") or {}
    group = sqs.get("MessageGroupId") if isinstance(sqs, dict) else None
    if group is not None and not isinstance(group, str):
        raise invalid("Target.SqsParameters.MessageGroupId must be a string")
    if is_fifo(queue) and group is None:
        raise invalid("Target.SqsParameters.MessageGroupId is required for a FIFO queue")
    if not is_fifo(queue) and group is not None:
        raise invalid("Target.SqsParameters.MessageGroupId is for FIFO queues only")
    return queue, group


def _jitter(window: object) -> int:
    """FlexibleTimeWindow as our jitter: OFF none, FLEXIBLE up to MaximumWindowInMinutes."""
    if not isinstance(window, dict):
        raise invalid("FlexibleTimeWindow is required: Mode OFF, or FLEXIBLE with MaximumWindowInMinutes")
    mode, minutes = window.get("Mode"), window.get("MaximumWindowInMinutes")
    if mode == "OFF":
        if minutes is not None:
            raise invalid("FlexibleTimeWindow.MaximumWindowInMinutes is for Mode FLEXIBLE only")
        return 0
    if mode != "FLEXIBLE":
        raise invalid("FlexibleTimeWindow.Mode must be OFF or FLEXIBLE")
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 1 <= minutes <= 1440:
        raise invalid("FlexibleTimeWindow.MaximumWindowInMinutes must be 1 to 1440 with Mode FLEXIBLE")
    if minutes > MAX_WINDOW_MINUTES:
        raise invalid(
            f"FlexibleTimeWindow.MaximumWindowInMinutes: at most {MAX_WINDOW_MINUTES} is supported here"
        )
    return minutes * 60


def _text(p: Params, field: str, longest: int | None, named: str | None = None) -> str:
    value = _optional_text(p, field, longest, named=named)
    if value is None:
        raise invalid(f"{named or field} is required")
    return value


def _optional_text(
    p: Params, field: str, longest: int | None, *, shortest: int = 1, named: str | None = None
) -> str | None:
    value = p.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) < shortest or (longest is not None and len(value) > longest):
        bounds = f"{shortest} to {longest} characters" if longest is not None else "a string"
        raise invalid(f"{named or field} must be {bounds}")
    return value


# --- our schedule -> EventBridge Scheduler's shapes --------------------------------------------


def _state(schedule: Schedule) -> str:
    return "DISABLED" if schedule.spec.paused else "ENABLED"


def _timestamp(moment: datetime) -> float:
    return moment.timestamp()  # rest-json's timestamps: seconds since the epoch


def _described(ctx: Context, schedule: Schedule) -> Params:
    spec = schedule.spec
    kept: Params = json.loads(spec.aws_json) if spec.aws_json else _derived(ctx, schedule)
    kept.pop(_TOKEN, None)
    answer: Params = {
        "Arn": ctx.arn(schedule.name),
        "Name": schedule.name,
        "GroupName": GROUP,
        "State": _state(schedule),
        "CreationDate": _timestamp(schedule.created_at),
        "LastModificationDate": _timestamp(schedule.modified_at or schedule.created_at),
        "ActionAfterCompletion": "NONE",
        **kept,
    }
    if spec.description is not None:
        answer["Description"] = spec.description
    return answer


def _derived(ctx: Context, schedule: Schedule) -> Params:
    """The EventBridge form of a schedule the REST API made: its expression from its timing, its
    target the queue with its payload as Input (a string payload is its text, as an SQS body)."""
    spec = schedule.spec
    payload = json.loads(spec.payload_json)
    target: Params = {
        "Arn": ctx.place.arn(spec.queue),
        "Input": payload if isinstance(payload, str) else spec.payload_json,
    }
    if spec.group is not None:
        target["SqsParameters"] = {"MessageGroupId": spec.group}
    window: Params = {"Mode": "OFF"}
    if spec.jitter_seconds:
        window = {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": math.ceil(spec.jitter_seconds / 60)}
    return {
        "ScheduleExpression": expression_of(spec.timing),
        "ScheduleExpressionTimezone": spec.timing.timezone,
        "Target": target,
        "FlexibleTimeWindow": window,
    }


def _summary(ctx: Context, schedule: Schedule) -> Params:
    return {
        "Arn": ctx.arn(schedule.name),
        "Name": schedule.name,
        "GroupName": GROUP,
        "State": _state(schedule),
        "CreationDate": _timestamp(schedule.created_at),
        "LastModificationDate": _timestamp(schedule.modified_at or schedule.created_at),
        "Target": {"Arn": ctx.place.arn(schedule.spec.queue)},
    }
