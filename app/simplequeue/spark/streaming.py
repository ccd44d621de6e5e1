"""Structured Streaming in and out of queues.

The sink (`df.writeStream.format("simplequeue")`) pushes each micro-batch as the batch write does.
Its rows' dedup keys are made of the query's id (kept in its checkpoint, so the same after a
restart), the batch id, the partition and the row's index: a batch that Spark runs again, after a
task retry or a restart from the checkpoint, pushes the same keys and creates nothing twice.

The source (`spark.readStream.format("simplequeue").option("source", "queue")`: Spark asks a source
for its columns before it says whether it streams, so `source` cannot default to "queue" for a
stream only, and a stream without it is refused when the query starts) pops on the driver
when Spark plans a micro-batch and hands the items to its tasks inside the batch's partitions. The
items are completed when Spark commits that batch; until then a thread keeps their leases alive.
A query that dies before the commit completes nothing: its items come back when their leases
expire, and the next run reads them again (at least once).

Spark commits batch N only when it plans batch N + 1. So that the last batch of data is completed
without waiting for more, the source ends a batch whose items are still open with one empty batch.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from simplequeue.client import Client, Item, RetryPolicy, SimplequeueError
from simplequeue.spark.options import OptionError, WriteOptions, check_queue_name, positive
from simplequeue.spark.writing import Pushed, push_rows, rows_of

STREAM_SCHEMA = (
    "id string, queue string, payload string, attempts int, created_at timestamp, priority int, "
    "`group` string"
)
POP_RETRY = RetryPolicy(attempts=6, total_seconds=60.0)
DEFAULT_MAX_ITEMS = 1000
DEFAULT_LEASE_SECONDS = 300


class QueueStreamWriter(DataSourceStreamArrowWriter):
    """Pushes every micro-batch; the commit has nothing left to do, the rows are in the queue."""

    def __init__(self, options: WriteOptions, fallback_id: str) -> None:
        self.options = options
        self.fallback_id = fallback_id  # when Spark does not say which query this is (never seen)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Pushed:
        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        attempt = context.attemptNumber() if context else 0
        query = (context and context.getLocalProperty("sql.streaming.queryId")) or self.fallback_id
        batch = (context and context.getLocalProperty("streaming.sql.batchId")) or "0"
        scope = f"stream:{query}:{batch}:{partition}"
        return push_rows(self.options, scope, partition, attempt, rows_of(iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # What the batch pushed stays: Spark runs the batch again and its keys are duplicates then.
        pass


@dataclass(frozen=True)
class StreamOptions:
    url: str
    queue: str
    max_items: int  # per micro-batch
    lease_seconds: int
    partitions: int
    api_key: str | None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> StreamOptions:
        url = (options.get("url") or "").rstrip("/")
        if not url:
            raise OptionError('option "url" is required: .option("url", "http://host:8000")')
        source = options.get("source")
        if source != "queue":
            raise OptionError(
                'a stream reads a queue\'s items as they come: add .option("source", "queue")'
                + (f" (not {source!r}: history and dead letters are batch reads)" if source else "")
            )
        queue = options.get("queue")
        if not queue:
            raise OptionError('option "queue" is required: the queue to read')
        check_queue_name(queue)
        return cls(
            url=url,
            queue=queue,
            max_items=positive(options, "maxItemsPerBatch", DEFAULT_MAX_ITEMS, most=100_000),
            lease_seconds=positive(options, "lease_seconds", DEFAULT_LEASE_SECONDS, most=43_200),
            partitions=positive(options, "numPartitions", 2, most=10_000),
            api_key=options.get("api_key") or None,
        )


@dataclass(frozen=True)
class Popped(InputPartition):
    rows: tuple[tuple[Any, ...], ...]


def row_of(item: Item) -> tuple[Any, ...]:
    return (
        item.id,
        item.queue,
        json.dumps(item.payload),
        item.attempts,
        item.created_at,
        item.priority,
        item.group,
    )


class Leases:
    """The items popped and not yet completed, by the batch they went into, with a thread that
    extends their leases every third of a lease."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._open: dict[int, list[Item]] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._keep_alive, name="simplequeue-leases", daemon=True)
        self._thread.start()

    def hold(self, batch: int, items: list[Item]) -> None:
        with self._lock:
            self._open[batch] = items

    def open_batches(self) -> list[int]:
        with self._lock:
            return sorted(b for b, items in self._open.items() if items)

    def items(self, batch: int) -> list[Item]:
        with self._lock:
            return list(self._open.get(batch, []))

    def release(self, upto: int) -> list[Item]:
        """Forget the batches up to `upto` and return their items, to complete."""
        with self._lock:
            done = [b for b in self._open if b <= upto]
            return [item for b in sorted(done) for item in self._open.pop(b)]

    def stop(self) -> None:
        self._stopped.set()

    def _keep_alive(self) -> None:
        period = max(self.options.lease_seconds / 3, 0.2)
        with Client(self.options.url, retry=POP_RETRY, timeout=30.0, api_key=self.options.api_key) as sq:
            while not self._stopped.wait(period):
                with self._lock:
                    held = [item for items in self._open.values() for item in items]
                for item in held:
                    if self._stopped.is_set():
                        return
                    # A lease lost already (purged, or run out) needs no keeping alive.
                    with contextlib.suppress(SimplequeueError):
                        sq.extend(item, self.options.lease_seconds)


class RefusedStream(DataSourceStreamReader):
    """What streamReader returns for options it refuses: the refusal, raised by Spark's first call
    (PySpark hides an exception raised in streamReader itself behind an UnboundLocalError)."""

    def __init__(self, refusal: str) -> None:
        self.refusal = refusal

    def _refuse(self) -> OptionError:
        return OptionError(self.refusal)

    def initialOffset(self) -> dict[str, int]:
        raise self._refuse()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        raise self._refuse()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        raise self._refuse()

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        raise self._refuse()

    def commit(self, end: dict[str, int]) -> None:
        pass

    def stop(self) -> None:
        pass


class QueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"batch": n}: n counts the micro-batches that carried items, or closed some."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self._leases: Leases | None = None  # started on first use, in Spark's source process
        # Trigger.AvailableNow: the items ready when the query starts, at most; None: no bound.
        self._budget: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Tasks get a copy of the reader for read(): the leases (a thread, a lock, the popped
        # items) stay in Spark's source process on the driver.
        return {**self.__dict__, "_leases": None}

    @property
    def leases(self) -> Leases:
        if self._leases is None:
            self._leases = Leases(self.options)
        return self._leases

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.options.max_items)

    def prepareForTriggerAvailableNow(self) -> None:
        # A queue has no "latest offset" to stop at: those ready now are what is available now,
        # and the run ends sooner if the queue runs dry (others' workers may pop some).
        with Client(self.options.url, retry=POP_RETRY, timeout=30.0, api_key=self.options.api_key) as sq:
            self._budget = sq.stats(self.options.queue).ready

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        batch = int(start["batch"]) + 1
        wanted = self.options.max_items
        if isinstance(limit, ReadMaxRows):
            wanted = min(wanted, limit.max_rows)
        # Any other limit (ReadAllAvailable under Trigger.AvailableNow): still maxItemsPerBatch at
        # most, since every popped item is held in memory until its batch commits.
        if self._budget is not None:
            wanted = min(wanted, self._budget)
        items = self._pop(wanted) if wanted > 0 else []
        if self._budget is not None:
            self._budget = 0 if len(items) < wanted else self._budget - len(items)
        if items:
            self.leases.hold(batch, items)
            return {"batch": batch}
        if self.leases.open_batches():
            # Nothing new, but the last batch's items wait for their commit: an empty batch
            # makes Spark commit it now.
            return {"batch": batch}
        return start

    def _pop(self, wanted: int) -> list[Item]:
        found: list[Item] = []
        with Client(self.options.url, retry=POP_RETRY, timeout=30.0, api_key=self.options.api_key) as sq:
            while len(found) < wanted:
                try:
                    got = sq.pop(
                        self.options.queue,
                        max_items=min(100, wanted - len(found)),
                        lease_seconds=self.options.lease_seconds,
                    )
                except SimplequeueError as exc:
                    raise RuntimeError(
                        f"simplequeue at {self.options.url} refused a pop from {self.options.queue}: "
                        f"{exc.code}: {exc.detail}"
                    ) from None
                found += got
                if not got:
                    break
        return found

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        rows: list[tuple[Any, ...]] = []
        for batch in range(int(start["batch"]) + 1, int(end["batch"]) + 1):
            # A batch this process did not pop (a restart replaying the checkpoint's last batch)
            # is empty here: its items come back when their leases expire.
            rows += [row_of(item) for item in self.leases.items(batch)]
        n = min(self.options.partitions, len(rows))
        return [Popped(tuple(rows[k::n])) for k in range(n)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, Popped)
        yield from partition.rows

    def commit(self, end: dict[str, int]) -> None:
        items = self.leases.release(int(end["batch"]))
        if not items:
            return
        with Client(self.options.url, retry=POP_RETRY, timeout=60.0, api_key=self.options.api_key) as sq:
            for k in range(0, len(items), 1000):
                # A result other than "completed" (the lease was lost and someone else holds the
                # item) needs nothing from us: that holder finishes it.
                sq.complete_many(items[k : k + 1000])

    def stop(self) -> None:
        if self._leases is not None:
            self._leases.stop()
