"""Batch reads of a queue's history (`.option("source", "history")`, the default) or of its dead
letters (`.option("source", "dead")`).

The time range [since, until) of finished_at (a dead letter's died_at) is cut into numPartitions
equal slices; each task pages through its slice over GET /queues/{name}/history (or /dead), for
one queue or for every queue. Both give the same columns: a dead letter's outcome is "dead", its
last_error the error of its last attempt, and its payload always there (history keeps payloads only
for queues whose history_payload is on).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from simplequeue.client import Client, RetryPolicy, SimplequeueError
from simplequeue.spark.options import OptionError

HISTORY_SCHEMA = (
    "id string, queue string, outcome string, attempts int, created_at timestamp, "
    "first_popped_at timestamp, finished_at timestamp, last_error string, payload string, "
    "`group` string, dedup_key string"
)
PAGE = 1000
READ_RETRY = RetryPolicy(attempts=6, total_seconds=60.0)
# Without `since`: as far back as any queue keeps history (retention_seconds is at most a year).
LONGEST_RETENTION = timedelta(days=366)


@dataclass(frozen=True)
class ReadOptions:
    url: str
    source: str
    queues: tuple[str, ...]
    since: datetime
    until: datetime
    partitions: int
    api_key: str | None

    @classmethod
    def of(cls, options: Mapping[str, str], listed: list[str]) -> ReadOptions:
        url = (options.get("url") or "").rstrip("/")
        if not url:
            raise OptionError('option "url" is required: .option("url", "http://host:8000")')
        source = options.get("source", "history")
        if source not in ("history", "dead"):
            raise OptionError(
                f'option "source" must be "history" or "dead" for a batch read (a stream reads '
                f'"queue"), not {source!r}'
            )
        until = _time(options, "until") or datetime.now(UTC)
        since = _time(options, "since") or until - LONGEST_RETENTION
        if since >= until:
            raise OptionError(
                f'option "since" ({since.isoformat()}) must come before "until" ({until.isoformat()})'
            )
        text = options.get("numPartitions", "4")
        if not text.isdigit() or not 1 <= int(text) <= 10_000:
            raise OptionError(f'option "numPartitions" must be a whole number from 1 to 10000, not {text!r}')
        queue = options.get("queue")
        queues = (queue,) if queue else tuple(listed)
        return cls(url, source, queues, since, until, int(text), options.get("api_key") or None)


def _time(options: Mapping[str, str], name: str) -> datetime | None:
    text = options.get(name)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(f'option "{name}" must be an ISO-8601 time, not {text!r}') from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Slice(InputPartition):
    queues: tuple[str, ...]
    since: datetime
    until: datetime


class HistoryReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> list[Slice]:
        o = self.options
        step = (o.until - o.since) / o.partitions
        edges = [o.since + step * n for n in range(o.partitions)] + [o.until]
        return [Slice(o.queues, edges[n], edges[n + 1]) for n in range(o.partitions)]

    def read(self, partition: InputPartition) -> Iterator[tuple[object, ...]]:
        assert isinstance(partition, Slice)
        o = self.options
        with Client(o.url, retry=READ_RETRY, timeout=60.0, api_key=o.api_key) as sq:
            for queue in partition.queues:
                try:
                    yield from (dead_rows if o.source == "dead" else history_rows)(sq, queue, partition)
                except SimplequeueError as exc:
                    raise RuntimeError(
                        f"simplequeue at {o.url} refused the {o.source} of {queue}: {exc.code}: {exc.detail}"
                    ) from None


def _json(payload: object) -> str | None:
    return None if payload is None else json.dumps(payload)


def paged(fetch: Callable[[str | None], Any]) -> Iterator[Any]:
    """Every item of a paged listing (a history or dead-letter page), the pages fetched in turn."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def history_rows(sq: Client, queue: str, part: Slice) -> Iterator[tuple[object, ...]]:
    for e in paged(lambda c: sq.history(queue, since=part.since, until=part.until, limit=PAGE, cursor=c)):
        yield (
            e.id,
            e.queue,
            e.outcome,
            e.attempts,
            e.created_at,
            e.first_popped_at,
            e.finished_at,
            e.last_error,
            _json(e.payload),
            e.group,
            e.dedup_key,
        )


def dead_rows(sq: Client, queue: str, part: Slice) -> Iterator[tuple[object, ...]]:
    for i in paged(lambda c: sq.dead(queue, since=part.since, until=part.until, limit=PAGE, cursor=c)):
        yield (
            i.id,
            i.queue,
            "dead",
            i.attempts,
            i.created_at,
            i.first_popped_at,
            i.died_at,
            i.errors[-1].error if i.errors else None,
            _json(i.payload),
            i.group,
            i.dedup_key,
        )
