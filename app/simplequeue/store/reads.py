"""What every dialect reads the same way once its one statement has run."""

from __future__ import annotations

from collections.abc import Sequence

from simplequeue.domain import (
    DeadFilter,
    HistoryFilter,
    HistoryRecord,
    ItemStatus,
    ItemView,
    Page,
    QueueNotFound,
    QueueStats,
)
from simplequeue.domain.activity import ActivityBucket, ActivityWindow, fill
from simplequeue.store import rows
from simplequeue.store.cursors import decode_cursor, decode_name_cursor, encode_name_cursor, next_cursor
from simplequeue.store.rows import Row


class QueueReads:
    """A queue, from a dialect's `_stats`: its counts and settings in one statement. Pages of
    queues (in name order), items and history, from its `_fetch_page`: one statement a page."""

    def _now(self) -> object:
        """The clock as this dialect's statements take it."""
        raise NotImplementedError

    async def _stats(self, queue: str) -> list[QueueStats]:
        raise NotImplementedError

    async def _fetch_page(self, statement: str, limit: int, **values: object) -> Sequence[Row]:
        """Up to `limit` rows of a page's statement. The values are as the domain has them (times as
        datetimes, None for a filter or cursor left out): each dialect binds them its own way. Item
        rows carry the clock they were read at as `now`."""
        raise NotImplementedError

    async def _page(self, statement: str, limit: int, cursor: str | None, **values: object) -> Sequence[Row]:
        after_at, after_seq = decode_cursor(cursor)
        return await self._fetch_page(statement, limit, after_at=after_at, after_seq=after_seq, **values)

    async def list_queues(
        self, limit: int, cursor: str | None, prefix: str | None = None
    ) -> Page[QueueStats]:
        after = decode_name_cursor(cursor)
        page = await self._fetch_page(
            "queue_page", limit, now=self._now(), after=after, prefix=prefix or None
        )
        found = [rows.queue_stats(row) for row in page]
        return Page(found, encode_name_cursor(found[-1].name) if len(found) == limit else None)

    async def get_queue(self, name: str) -> QueueStats:
        found = await self._stats(name)
        if not found:
            raise QueueNotFound()
        return found[0]

    async def peek(self, queue: str, state: ItemStatus, limit: int, cursor: str | None) -> Page[ItemView]:
        page = await self._page("peek", limit, cursor, now=self._now(), queue=queue, state=state.value)
        return Page([rows.item_view(row, row["now"]) for row in page], next_cursor(page, limit, "created_at"))

    async def group_items(self, queue: str, group: str, limit: int, cursor: str | None) -> Page[ItemView]:
        # Group order is seq alone: the cursor's time is the last row's created_at, unread here.
        _, after_seq = decode_cursor(cursor)
        page = await self._fetch_page(
            "group_items", limit, now=self._now(), queue=queue, group=group, after_seq=after_seq
        )
        return Page([rows.item_view(row, row["now"]) for row in page], next_cursor(page, limit, "created_at"))

    async def list_dead(
        self, queue: str, where: DeadFilter, limit: int, cursor: str | None
    ) -> Page[ItemView]:
        page = await self._page(
            "list_dead", limit, cursor, now=self._now(), queue=queue, since=where.since, until=where.until
        )
        return Page([rows.item_view(row, row["now"]) for row in page], next_cursor(page, limit, "died_at"))

    async def list_history(
        self, queue: str, where: HistoryFilter, limit: int, cursor: str | None
    ) -> Page[HistoryRecord]:
        outcome = where.outcome.value if where.outcome else None
        page = await self._page(
            "list_history", limit, cursor, queue=queue, outcome=outcome, since=where.since, until=where.until
        )
        return Page([rows.history_record(row) for row in page], next_cursor(page, limit, "finished_at"))

    async def activity(self, queue: str | None, window: ActivityWindow) -> list[ActivityBucket]:
        found = await self._fetch_page(
            "activity",
            window.buckets,
            queue=queue,
            since=window.since,
            until=window.until,
            bucket=window.bucket_seconds,
        )
        counted = {
            int(r["bucket"]): (int(r["pushed"]), int(r["completed"]), int(r["failed"]), int(r["dead"]))
            for r in found
        }
        return fill(window, counted)
