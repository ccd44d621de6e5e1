"""SQS's message move tasks: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask.

A task moves the messages of a dead-letter queue (a queue some queue's RedrivePolicy names) to a
destination queue, or back to the queue they died in, at most MaxNumberOfMessagesPerSecond. It is
the SQS face of the service's redrive, paced by the redrive's rule (the k-th message moves
redrive_delay(k, rate) after the task started). The store's redrive itself cannot serve: it
revives a queue's dead items in place, and the messages of an SQS dead-letter queue are live
messages of another queue (the dead-letter move made them so). A task therefore moves them with the
service's own delivery: a batch is received from the source (leased), sent to the destination in
one transaction, then deleted from the source. A crash between the last two leaves the batch in
both queues (its lease runs out in the source): at least once, as every SQS delivery is.

Tasks run in the process that started them, as asyncio tasks owned by the app's lifespan (MoveTasks,
on app.state); they and their list are this process's own, as PurgeQueue's 60-second window is.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID, uuid4

from simplequeue.api.auth import Action
from simplequeue.api.sqs import params
from simplequeue.api.sqs.addressing import dead_letter_sources
from simplequeue.api.sqs.context import Context
from simplequeue.api.sqs.errors import SqsError, invalid, unsupported
from simplequeue.domain import (
    Clock,
    Completion,
    DatabaseUnavailable,
    Draft,
    LeasedItem,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    decode_attributes,
    split_system,
    system_clock,
)
from simplequeue.domain.rules import redrive_delay
from simplequeue.service.queues import QueueService

log = logging.getLogger("simplequeue.sqs")

MAX_RATE = 500  # SQS's highest MaxNumberOfMessagesPerSecond
MAX_LISTED = 10  # ListMessageMoveTasks's highest MaxResults; also how many tasks a source keeps
BATCH = 10  # messages per receive, send and delete, as an SQS client would move them
LEASE_SECONDS = 60
"""How long a batch being moved stays invisible in the source: far longer than its send and delete
take, and short enough that a batch a crash left behind comes back soon."""
CLOSE_SECONDS = 5.0  # how long shutdown lets running tasks finish their batch before cancelling them
NO_QUEUE_REASON = "AWS.SimpleQueueService.NonExistentQueue"  # SQS's FailureReason for a queue gone


class Status(StrEnum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


@dataclass(eq=False)
class MoveTask:
    id: UUID
    source: str
    destination: str | None
    """The DestinationArn's queue as given; None: back to the queue the messages died in."""
    target: str  # where the messages go
    rate: int | None
    to_move: int
    started_at: datetime
    moved: int = 0
    status: Status = Status.RUNNING
    failure: str | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None


Pause = Callable[[MoveTask, float], Awaitable[None]]


async def pause_unless_stopped(task: MoveTask, seconds: float) -> None:
    """Wait `seconds`, or less if the task is cancelled meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(task.stop.wait(), seconds)


class MoveTasks:
    """This process's move tasks: the running ones and, per source queue, its MAX_LISTED latest.
    `clock` paces them (the service's clock); `pause` waits between paced batches."""

    def __init__(
        self, service: QueueService, clock: Clock = system_clock, pause: Pause = pause_unless_stopped
    ) -> None:
        self._service = service
        self._clock = clock
        self._pause = pause
        self._by_source: dict[str, deque[MoveTask]] = {}

    def active(self, source: str) -> MoveTask | None:
        """The source's task that runs or is being cancelled, if any."""
        return next(
            (t for t in self._by_source.get(source, ()) if t.status in (Status.RUNNING, Status.CANCELLING)),
            None,
        )

    def start(
        self, source: str, destination: str | None, target: str, rate: int | None, to_move: int
    ) -> MoveTask:
        task = MoveTask(uuid4(), source, destination, target, rate, to_move, self._clock())
        # Newest first; a source has one active task at most, its newest, so none is dropped here.
        self._by_source.setdefault(source, deque(maxlen=MAX_LISTED)).appendleft(task)
        task.runner = asyncio.get_running_loop().create_task(self._run(task), name=f"sqs-move-{task.id}")
        return task

    def listed(self, source: str, limit: int) -> list[MoveTask]:
        return list(self._by_source.get(source, ()))[:limit]

    def find(self, source: str, task_id: UUID) -> MoveTask | None:
        return next((t for t in self._by_source.get(source, ()) if t.id == task_id), None)

    @staticmethod
    def cancel(task: MoveTask) -> None:
        """The task stops before its next batch (CANCELLING until then); what it moved stays moved."""
        task.status = Status.CANCELLING
        task.stop.set()

    async def close(self) -> None:
        """Stop every running task (at shutdown): each ends its batch, or is cancelled after
        CLOSE_SECONDS."""
        running = [t for ts in self._by_source.values() for t in ts if t.runner and not t.runner.done()]
        for task in running:
            task.stop.set()
        runners = [t.runner for t in running if t.runner is not None]
        if not runners:
            return
        _, pending = await asyncio.wait(runners, timeout=CLOSE_SECONDS)
        for runner in pending:
            runner.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _run(self, task: MoveTask) -> None:
        try:
            await self._move(task)
        except asyncio.CancelledError:  # shutdown did not wait for its batch to end
            task.status = Status.CANCELLED
            raise
        except QueueNotFound:
            task.status, task.failure = Status.FAILED, NO_QUEUE_REASON
        except (DatabaseUnavailable, SchemaNotReady):
            log.warning("SQS move task %s from %s failed: the database is unavailable", task.id, task.source)
            task.status, task.failure = Status.FAILED, "ServiceUnavailable"
        except Exception:
            log.exception("SQS move task %s from %s failed unexpectedly", task.id, task.source)
            task.status, task.failure = Status.FAILED, "InternalFailure"
        else:
            task.status = Status.CANCELLED if task.stop.is_set() else Status.COMPLETED

    async def _move(self, task: MoveTask) -> None:
        service = self._service
        while not task.stop.is_set() and task.moved < task.to_move:
            allowed = BATCH
            if task.rate is not None:
                now = self._clock()
                due = task.started_at + redrive_delay(task.moved, task.rate)
                if due > now:
                    await self._pause(task, (due - now).total_seconds())
                    continue  # cancelled meanwhile, or due now
                # Every message whose time has come, at least the one that is due.
                elapsed = (now - task.started_at).total_seconds()
                allowed = max(1, min(BATCH, int(elapsed * task.rate) + 1 - task.moved))
            items = await service.pop(
                task.source,
                max_items=min(allowed, task.to_move - task.moved),
                wait_seconds=0.0,
                lease_seconds=LEASE_SECONDS,
            )
            if not items:
                if not await service.queue_exists(task.source):
                    raise QueueNotFound()
                return  # nothing more to receive: the rest was received by others, or is delayed
            # A push makes a queue that is missing: the destination must still exist. (A delete
            # between this look and the push makes it again, as it would under SendMessage.)
            if not await service.queue_exists(task.target):
                await self._put_back(items)
                raise QueueNotFound()
            try:
                await service.push_batch(task.target, [_moved(item) for item in items])
            except QueueError:
                await self._put_back(items)
                raise
            await service.complete_many([Completion(item.id, item.lease_token) for item in items])
            task.moved += len(items)

    async def _put_back(self, items: list[LeasedItem]) -> None:
        """A batch that could not move is visible again in its source at once."""
        for item in items:
            with contextlib.suppress(QueueError):
                await self._service.extend(item.id, item.lease_token, 0)


def _moved(item: LeasedItem) -> Draft:
    """The message sent to the destination: the same body, message attributes, group and sent time
    (SentTimestamp; the retention period counts from it, as in the dead-letter queue), a new
    MessageId, received never."""
    found, system = split_system(decode_attributes(item.attributes_json))
    return Draft(
        payload=item.payload,
        created_at=item.created_at,
        priority=item.priority,
        group=item.group,
        attributes=found or None,
        system_attributes=system or None,
    )


# --- the actions -------------------------------------------------------------------------------


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
        entry["FailureReason"] = task.failure
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
