"""Message move tasks (SQS's StartMessageMoveTask): each moves the messages of a queue to another,
at most `rate` a second, as asyncio tasks of this process.

A task is SQS's face of the service's redrive, paced by the redrive's rule (the k-th message moves
redrive_delay(k, rate) after the task started). The store's redrive itself cannot serve: it
revives a queue's dead items in place, and the messages of an SQS dead-letter queue are live
messages of another queue (the dead-letter move made them so). A task therefore moves them with the
service's own delivery: a batch is popped from the source (leased), pushed to the target in one
transaction, then completed in the source. A crash between the last two leaves the batch in both
queues (its lease runs out in the source): at least once, as every SQS delivery is.

MoveTasks is built by create_app's lifespan, which closes it at shutdown; its tasks and their list
are this process's own (simplequeue.service.local). What SQS calls them, and says of them, is the
door's (simplequeue.api.sqs.moves)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from uuid import UUID, uuid4

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

KEPT = 10  # tasks kept per source queue, the latest (as many as ListMessageMoveTasks lists)
BATCH = 10  # messages per pop, push and completion, as an SQS client would move them
LEASE_SECONDS = 60
"""How long a batch being moved stays invisible in the source: far longer than its send and delete
take, and short enough that a batch a crash left behind comes back soon."""
CLOSE_SECONDS = 5.0  # how long shutdown lets running tasks finish their batch before cancelling them


class Status(StrEnum):
    """SQS's task statuses, by SQS's names."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


class Failure(StrEnum):
    """Why a task failed."""

    QUEUE_GONE = "queue gone"  # its source or target was deleted
    UNAVAILABLE = "unavailable"  # the database did not answer
    INTERNAL = "internal"  # a fault of ours (logged with its traceback)


@dataclass(eq=False)
class MoveTask:
    id: UUID
    source: str
    destination: str | None
    """The destination as the start named it; None: back to the queue the messages died in."""
    target: str  # where the messages go
    rate: int | None
    to_move: int
    started_at: datetime
    moved: int = 0
    status: Status = Status.RUNNING
    failure: Failure | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None


Pause = Callable[[MoveTask, float], Awaitable[None]]


async def pause_unless_stopped(task: MoveTask, seconds: float) -> None:
    """Wait `seconds`, or less if the task is cancelled meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(task.stop.wait(), seconds)


class MoveTasks:
    """This process's move tasks: the running ones and, per source queue, its KEPT latest.
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
        self._by_source.setdefault(source, deque(maxlen=KEPT)).appendleft(task)
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
            task.status, task.failure = Status.FAILED, Failure.QUEUE_GONE
        except (DatabaseUnavailable, SchemaNotReady):
            log.warning("SQS move task %s from %s failed: the database is unavailable", task.id, task.source)
            task.status, task.failure = Status.FAILED, Failure.UNAVAILABLE
        except Exception:
            log.exception("SQS move task %s from %s failed unexpectedly", task.id, task.source)
            task.status, task.failure = Status.FAILED, Failure.INTERNAL
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
        fairness_key=item.fairness_key,
        attributes=found or None,
        system_attributes=system or None,
    )
