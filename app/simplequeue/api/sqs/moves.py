"""SQS's message move tasks: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask.

A task moves the messages of a dead-letter queue (a queue some queue's RedrivePolicy names) to a
destination queue, or back to the queue they died in, at most MaxNumberOfMessagesPerSecond. The
tasks, and the asyncio tasks that run them, are this process's own (MoveTasks, in
simplequeue.service.local.moves, built by the app's lifespan); this module reads the actions'
parameters, checks them as SQS does, and writes the tasks as SQS lists them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from typing import Any
from uuid import UUID

from simplequeue.api.auth import Action
from simplequeue.api.sqs import params
from simplequeue.api.sqs.addressing import dead_letter_sources
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, invalid, unsupported
from simplequeue.service.local.moves import KEPT, Failure, MoveTask, MoveTasks, Status

MAX_RATE = 500  # SQS's highest MaxNumberOfMessagesPerSecond
MAX_LISTED = KEPT  # ListMessageMoveTasks's highest MaxResults (10), as many as a source keeps
FAILURE_REASONS = {
    Failure.QUEUE_GONE: "AWS.SimpleQueueService.NonExistentQueue",
    Failure.UNAVAILABLE: "ServiceUnavailable",
    Failure.INTERNAL: "InternalFailure",
}
"""SQS's FailureReason for each way a task fails."""


def _not_found(parameter: str) -> SqsError:
    return SqsError(
        "ResourceNotFoundException",
        f"The resource that you specified for the {parameter} parameter doesn't exist.",
    )


def _tasks(ctx: Context, action: str) -> MoveTasks:
    if ctx.moves is None:  # an app built without its lifespan's move tasks
        raise unsupported(action)
    return ctx.moves


async def _queue_of_arn(ctx: Context, p: dict[str, Any], parameter: str) -> str:
    """The queue an ARN names, if the caller may administer it and it exists. The key is asked
    first, as every action asks it: a queue outside the key's reach is AccessDenied whether it exists
    or not, so that the answer tells nothing of queues the key may not see."""
    arn = params.required_text(p, parameter)
    name = ctx.place.queue_of_arn(arn)
    if name is None:
        raise _not_found(parameter)
    ctx.authorize(Action.ADMINISTER, name)
    if not await ctx.service.queue_exists(name):
        raise _not_found(parameter)
    return name


def task_handle(ctx: Context, task: MoveTask) -> str:
    """Opaque to callers, as SQS's is: the task's id and its source's ARN."""
    text = json.dumps({"taskId": str(task.id), "sourceArn": ctx.place.arn(task.source)})
    return base64.urlsafe_b64encode(text.encode()).decode()


def _handle_of(handle: str) -> tuple[UUID, str]:
    """(task id, source ARN) of a handle this door gave; InvalidParameterValue otherwise (any
    other text, JSON of another shape, or nested past the parser's depth)."""
    parsed: Any = None
    with contextlib.suppress(binascii.Error, ValueError, UnicodeError, RecursionError):
        parsed = json.loads(base64.urlsafe_b64decode(handle.encode() + b"=" * (-len(handle) % 4)))
    fields = parsed if isinstance(parsed, dict) else {}
    task_id, source_arn = fields.get("taskId"), fields.get("sourceArn")
    if isinstance(task_id, str) and isinstance(source_arn, str):
        with contextlib.suppress(ValueError):
            return UUID(task_id), source_arn
    raise SqsError("InvalidParameterValue", "Value for parameter TaskHandle is invalid.")


async def start_message_move_task(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    moves = _tasks(ctx, "StartMessageMoveTask")
    rate = params.integer(p, "MaxNumberOfMessagesPerSecond", 1, MAX_RATE, None)
    given_destination = params.text(p, "DestinationArn", required=False)
    source = await _queue_of_arn(ctx, p, "SourceArn")
    sources = [queue async for queue in dead_letter_sources(ctx, source)]
    if not sources:
        raise SqsError("InvalidParameterValue", "Source queue must be configured as a Dead Letter Queue.")
    destination = await _queue_of_arn(ctx, p, "DestinationArn") if given_destination else None
    if destination is None and len(sources) > 1:
        # An item does not keep the queue it died in: with several, which one is unknown.
        raise invalid(
            "DestinationArn",
            "(none)",
            f"the source is the dead-letter queue of {len(sources)} queues; simplequeue moves messages back "
            "only to a dead-letter queue's one source queue: give the DestinationArn.",
        )
    target = destination or sources[0]
    if target == source:
        raise invalid(
            "DestinationArn", given_destination, "the destination must be another queue than the source."
        )
    ctx.authorize(Action.ADMINISTER, target)
    stats = await ctx.service.get_queue(source)
    # No await from this check to the start: two starts cannot both pass it.
    if moves.active(source) is not None:
        raise SqsError(
            "InvalidParameterValue",
            "There is already a task running. "
            "Only one active task is allowed for a source queue arn at a given time.",
        )
    to_move = stats.ready + stats.leased + stats.delayed + stats.retrying
    task = moves.start(source, destination, target, rate, to_move)
    return {"TaskHandle": task_handle(ctx, task)}


async def list_message_move_tasks(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    moves = _tasks(ctx, "ListMessageMoveTasks")
    limit = params.integer(p, "MaxResults", 1, MAX_LISTED, 1)
    source = await _queue_of_arn(ctx, p, "SourceArn")
    return {"Results": [_entry(ctx, task) for task in moves.listed(source, limit)]}


def _entry(ctx: Context, task: MoveTask) -> dict[str, Any]:
    """A task as SQS lists it: its handle only while it runs; DestinationArn and the rate only
    when the start gave them; FailureReason only when it failed."""
    entry: dict[str, Any] = {}
    if task.status is Status.RUNNING:
        entry["TaskHandle"] = task_handle(ctx, task)
    entry |= {"Status": task.status.value, "SourceArn": ctx.place.arn(task.source)}
    if task.destination is not None:
        entry["DestinationArn"] = ctx.place.arn(task.destination)
    if task.rate is not None:
        entry["MaxNumberOfMessagesPerSecond"] = task.rate
    entry["ApproximateNumberOfMessagesMoved"] = task.moved
    entry["ApproximateNumberOfMessagesToMove"] = task.to_move
    if task.failure is not None:
        entry["FailureReason"] = FAILURE_REASONS[task.failure]
    entry["StartedTimestamp"] = int(task.started_at.timestamp() * 1000)
    return entry


async def cancel_message_move_task(ctx: Context, p: dict[str, Any]) -> dict[str, Any]:
    moves = _tasks(ctx, "CancelMessageMoveTask")
    task_id, source_arn = _handle_of(params.required_text(p, "TaskHandle"))
    source = await _queue_of_arn(ctx, {"SourceArn": source_arn}, "SourceArn")
    task = moves.find(source, task_id)
    if task is None:
        raise SqsError("ResourceNotFoundException", "Task does not exist.")
    if task.status is not Status.RUNNING:
        raise SqsError(
            "InvalidParameterValue",
            f"Only a task whose status is RUNNING can be cancelled; this one is {task.status.value}.",
        )
    moved = task.moved
    moves.cancel(task)
    return {"ApproximateNumberOfMessagesMoved": moved}
