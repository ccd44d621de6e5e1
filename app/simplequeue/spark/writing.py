"""Batch writes: each task pushes its rows in batches as it reads them.

Exactly once under task retries and speculative execution: every row without a dedup_key of its
own gets one made of the write's id (drawn once, on the driver), the partition and the row's index
in it. A retried or speculative attempt of a task pushes the same keys; the service answers those
already there as duplicates and inserts nothing, also for items that workers completed meanwhile,
as long as the queue's dedup_window_seconds has not passed since (see the README). That needs the
task's input in the same order on every attempt, as Spark's sources give it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage

from simplequeue.client import Client, RetryPolicy, SimplequeueError
from simplequeue.spark.options import WriteOptions

# A task waits out a restarting service for a while; Spark's own task retries come after that.
TASK_RETRY = RetryPolicy(attempts=6, total_seconds=60.0)
OPTIONAL = ("dedup_key", "priority", "delay_seconds", "group", "created_at")


class InjectedFailure(RuntimeError):
    """Raised by the test-only option _fail_after_batches, on a task's first attempt."""


@dataclass
class Pushed(WriterCommitMessage):
    partition: int
    rows: int
    created: int


class BadRow(ValueError):
    """A row the service would refuse: the message names the partition and the row."""


def item_of(row: Row, where: str) -> dict[str, Any]:
    """The push/batch item for one row. A null in an optional column means "not given"."""
    values = row.asDict(recursive=True)
    payload = values["payload"]
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise BadRow(f"{where}: payload is not JSON ({exc.msg} at column {exc.colno})") from None
    elif payload is None:
        raise BadRow(f"{where}: payload is null")
    item: dict[str, Any] = {"payload": payload}
    for name in OPTIONAL:
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, datetime):
            # PySpark hands timestamps over as naive local times of the worker process:
            # astimezone() reads them as such, so the instant is right whatever its time zone.
            value = (value if value.tzinfo else value.astimezone()).astimezone(UTC).isoformat()
        item[name] = value
    return item


class QueueWriter(DataSourceWriter):
    """Made on the driver (the write id is drawn there, once) and sent to every task."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Row]) -> Pushed:
        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        attempt = context.attemptNumber() if context else 0
        return push_rows(self.options, f"{self.write_id}:{partition}", partition, attempt, iterator)


def push_rows(options: WriteOptions, scope: str, partition: int, attempt: int, rows: Iterator[Row]) -> Pushed:
    """Push as the rows come, batch_size rows or batch_bytes at most per request, per queue."""
    pending: dict[str, list[dict[str, Any]]] = {}
    sizes: dict[str, int] = {}
    count = created = batches = 0
    with Client(options.url, retry=TASK_RETRY, timeout=60.0, api_key=options.api_key) as sq:

        def flush(queue: str) -> None:
            nonlocal created, batches
            items = pending.pop(queue, [])
            sizes.pop(queue, None)
            if not items:
                return
            try:
                result = sq.push_batch(items, queue=queue)
            except SimplequeueError as exc:
                raise RuntimeError(
                    f"simplequeue at {options.url} refused a batch of partition {partition} "
                    f"(queue {queue}): {exc.code}: {exc.detail}"
                ) from None
            created += sum(result.created)
            batches += 1
            injected = options.fail_after_batches
            if injected is not None and attempt == 0 and batches >= injected:
                raise InjectedFailure(f"injected failure in partition {partition} after {batches} batches")

        for index, row in enumerate(rows):
            item = item_of(row, f"partition {partition}, row {index}")
            item.setdefault("dedup_key", f"spark:{scope}:{index}")
            queue = options.queue or row["queue"]
            if queue is None:
                raise BadRow(f"partition {partition}, row {index}: queue is null")
            size = len(json.dumps(item, default=str))
            if sizes.get(queue, 0) + size > options.batch_bytes:
                flush(queue)
            pending.setdefault(queue, []).append(item)
            sizes[queue] = sizes.get(queue, 0) + size
            count += 1
            if len(pending[queue]) >= options.batch_size:
                flush(queue)
        for queue in list(pending):
            flush(queue)
    return Pushed(partition, count, created)
