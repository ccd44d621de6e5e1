"""Batch writes: each task pushes its rows in batches as it reads them.

Exactly once under task retries and speculative execution: every row without a dedup_key of its
own gets one made of the write's id (drawn once, on the driver), the partition and the row's index
in it. A retried or speculative attempt of a task pushes the same keys; the service answers those
already there as duplicates and inserts nothing, also for items that workers completed meanwhile,
as long as the queue's dedup_window_seconds has not passed since (see docs/spark.md). That needs the
task's input in the same order on every attempt, as Spark's sources give it.

Each row is also pushed with an id made the same way, so that a duplicate answered with the row's
own id is known as this write's (an earlier attempt of its task pushed it) and counts as pushed,
while one answered with another id was there before (a rerun with the same keys): skipped.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from simplequeue.client import BatchPushResult, Client, RetryPolicy, SimplequeueError
from simplequeue.spark.options import WriteOptions

# A task waits out a restarting service for a while; Spark's own task retries come after that.
TASK_RETRY = RetryPolicy(attempts=6, total_seconds=60.0)
OPTIONAL = ("dedup_key", "priority", "delay_seconds", "group", "created_at")


class InjectedFailure(RuntimeError):
    """Raised by the test-only option _fail_after_batches, on a task's first attempt."""


# The rows' ids are uuid5s in this namespace (itself uuid5(NAMESPACE_URL, "simplequeue:spark-rows")).
ROW_IDS = uuid.UUID("cd3ab65a-4868-519f-af6e-cd89cd34cc1a")


@dataclass
class Pushed(WriterCommitMessage):
    partition: int
    rows: int
    created: int  # the rows this write put in the queue; the others' keys were there before it


def row_id(scope: str, index: int) -> str:
    return str(uuid.uuid5(ROW_IDS, f"{scope}:{index}"))


def ours(answer: BatchPushResult, items: list[dict[str, Any]]) -> int:
    """The items of a batch this write put in the queue: created now, or answered with the row's
    own id (an earlier attempt of the task created it)."""
    sent = (item["id"] for item in items)
    return sum(made or got == mine for made, got, mine in zip(answer.created, answer.ids, sent, strict=True))


class BadRow(ValueError):
    """A row the service would refuse: the message names the partition and the row."""


def plain(value: Any, kind: pa.DataType) -> Any:
    """An Arrow value as JSON would have it: Arrow hands a map over as a list of (key, value)
    pairs, which becomes an object here, in structs and lists too."""
    if value is None:
        return None
    if pa.types.is_map(kind):
        return {k: plain(v, kind.item_type) for k, v in value}
    if pa.types.is_struct(kind):
        return {field.name: plain(value[field.name], field.type) for field in kind}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [plain(v, kind.value_type) for v in value]
    return value


def rows_of(batches: Iterable[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    """Each Arrow batch's rows as dicts, a batch at a time (never the whole partition)."""
    for batch in batches:
        payload_type = batch.schema.field("payload").type
        nested = not (pa.types.is_string(payload_type) or pa.types.is_large_string(payload_type))
        for row in batch.to_pylist():
            if nested:
                row["payload"] = plain(row["payload"], payload_type)
            yield row


def item_of(values: dict[str, Any], where: str) -> dict[str, Any]:
    """The push/batch item for one row. A null in an optional column means "not given"."""
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
            # Arrow's timestamps carry their zone; a naive one is a local time of this process,
            # as astimezone() reads it. Either way the instant is right whatever the time zones.
            value = (value if value.tzinfo else value.astimezone()).astimezone(UTC).isoformat()
        item[name] = value
    return item


class QueueWriter(DataSourceArrowWriter):
    """Made on the driver (the write id is drawn there, once) and sent to every task."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Pushed:
        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        attempt = context.attemptNumber() if context else 0
        return push_rows(self.options, f"{self.write_id}:{partition}", partition, attempt, rows_of(iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Runs on the driver once every task succeeded: the totals, for the command that asked."""
        if self.options.summary_path is None:
            return
        done = [m for m in messages if isinstance(m, Pushed)]
        rows, created = sum(m.rows for m in done), sum(m.created for m in done)
        summary = {"rows": rows, "pushed": created, "skipped": rows - created}
        Path(self.options.summary_path).write_text(json.dumps(summary), encoding="utf-8")


def push_rows(
    options: WriteOptions, scope: str, partition: int, attempt: int, rows: Iterator[dict[str, Any]]
) -> Pushed:
    """Push as the rows come, batch_size rows or batch_bytes at most per request, per queue. One
    request is in flight while the next batch is built; they go out in order."""
    pending: dict[str, list[dict[str, Any]]] = {}
    sizes: dict[str, int] = {}
    count = created = batches = 0
    in_flight: Future[int] | None = None
    with (
        Client(options.url, retry=TASK_RETRY, timeout=60.0, api_key=options.api_key) as sq,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="simplequeue-push") as sender,
    ):

        def send(queue: str, items: list[dict[str, Any]]) -> int:
            try:
                answer = sq.push_batch(items, queue=queue)
            except SimplequeueError as exc:
                raise RuntimeError(
                    f"simplequeue at {options.url} refused a batch of partition {partition} "
                    f"(queue {queue}): {exc.code}: {exc.detail}"
                ) from None
            return ours(answer, items)

        def settle() -> None:
            nonlocal created, batches, in_flight
            if in_flight is None:
                return
            created += in_flight.result()
            in_flight = None
            batches += 1
            injected = options.fail_after_batches
            if injected is not None and attempt == 0 and batches >= injected:
                raise InjectedFailure(f"injected failure in partition {partition} after {batches} batches")

        def flush(queue: str) -> None:
            nonlocal in_flight
            items = pending.pop(queue, [])
            sizes.pop(queue, None)
            if not items:
                return
            settle()
            in_flight = sender.submit(send, queue, items)

        for index, values in enumerate(rows):
            item = item_of(values, f"partition {partition}, row {index}")
            item.setdefault("dedup_key", f"spark:{scope}:{index}")
            item["id"] = row_id(scope, index)
            queue = options.queue or values.get("queue")
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
        settle()
    return Pushed(partition, count, created)
