"""SQLite: the embedded default. WAL mode, one writer per file, safe for several processes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import aiosqlite

from app.domain import (
    Clock,
    CompleteOutcome,
    Completion,
    Failure,
    ItemView,
    LeasedItem,
    NewItem,
    QueueStats,
    system_clock,
)
from app.errors import (
    DatabaseUnavailable,
    ItemExists,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    StoreError,
)
from app.store import rows
from app.store.migrations import latest_version, load_migrations, split_statements
from app.store.protocol import ReadyCallback
from app.store.sqlfile import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))


def to_text(moment: datetime) -> str:
    """Fixed-width UTC text, so that SQLite's text comparison is time order.

    isoformat, not strftime: strftime's %Y does not pad years before 1000 ('315-…'), which
    broke both the order and the parsing of such a client-supplied created_at.
    """
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


@asynccontextmanager
async def translated_errors() -> AsyncIterator[None]:
    """The one place where sqlite3's exceptions become domain errors."""
    try:
        yield
    except QueueError:
        raise
    except sqlite3.IntegrityError as exc:
        if "sq_items.id" in str(exc):
            raise ItemExists() from exc
        raise StoreError(f"constraint violated: {exc}") from exc
    except sqlite3.OperationalError as exc:
        message = str(exc)
        if "no such table" in message:
            raise SchemaNotReady() from exc
        if "locked" in message or "busy" in message or "unable to open" in message:
            raise DatabaseUnavailable(f"SQLite: {message}") from exc
        raise StoreError(f"SQLite: {message}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite: {exc}") from exc


class SqliteStore:
    dialect = "sqlite"

    def __init__(
        self, path: str, *, timeout_seconds: float = 5.0, readers: int = 2, clock: Clock | None = None
    ):
        self._path = path
        self._timeout = timeout_seconds
        self._reader_count = readers
        self._clock = clock or system_clock
        self._writer: aiosqlite.Connection | None = None
        # One writer per process: contention between our own requests queues here instead of
        # in SQLite's busy handler, which sleeps; busy_timeout still covers other processes.
        self._write_lock = asyncio.Lock()
        self._readers: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._all: list[aiosqlite.Connection] = []

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self._path, isolation_level=None, timeout=self._timeout)
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        await conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a 2xx means the row survives power loss, not only a crash of this process.
        await conn.execute("PRAGMA synchronous = FULL")
        self._all.append(conn)
        return conn

    async def open(self) -> None:
        if self._path not in ("", ":memory:"):
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        async with translated_errors():
            self._writer = await self._connect()
            for _ in range(self._reader_count):
                self._readers.put_nowait(await self._connect())

    async def close(self) -> None:
        for conn in self._all:
            await conn.close()
        self._all.clear()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        assert self._writer is not None, "store is not open"
        async with self._write_lock, translated_errors():
            await self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield self._writer
            except BaseException:
                await self._writer.execute("ROLLBACK")
                raise
            await self._writer.execute("COMMIT")

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        conn = await self._readers.get()
        try:
            async with translated_errors():
                yield conn
        finally:
            self._readers.put_nowait(conn)

    async def _fetchone(self, conn: aiosqlite.Connection, name: str, params: Mapping[str, Any]) -> Any:
        async with conn.execute(Q[name], params) as cursor:
            return await cursor.fetchone()

    async def migrate(self) -> list[int]:
        applied: list[int] = []
        async with self._write() as conn:
            await conn.execute(Q["create_version_table"])
            async with conn.execute(Q["applied_versions"]) as cursor:
                done = {row[0] for row in await cursor.fetchall()}
            for migration in load_migrations(self.dialect):
                if migration.version in done:
                    continue
                for statement in split_statements(migration.sql):
                    await conn.execute(statement)
                await conn.execute(
                    Q["record_version"],
                    {"version": migration.version, "name": migration.name, "now": to_text(self._clock())},
                )
                applied.append(migration.version)
        return applied

    async def check_ready(self) -> None:
        latest = latest_version(self.dialect)
        async with self._read() as conn, conn.execute(Q["applied_versions"]) as cursor:
            versions = [row[0] for row in await cursor.fetchall()]
        if latest not in versions:
            raise SchemaNotReady()

    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> set[UUID]:
        now = to_text(self._clock())
        async with self._write() as conn:
            # Under BEGIN IMMEDIATE no other writer can insert between this look-up and the insert.
            async with conn.execute(
                Q["existing_ids"], {"ids": json.dumps([str(i.id) for i in items])}
            ) as cursor:
                taken = {row[0] for row in await cursor.fetchall()}
            fresh = _first_of_each_id(items, taken)
            if not skip_existing and len(fresh) < len(items):
                raise ItemExists()
            await conn.executemany(
                Q["ensure_queue"], [{"queue": q, "now": now} for q in {i.queue for i in fresh}]
            )
            await conn.executemany(Q["insert_item"], [_insert_params(i, now) for i in fresh])
        return {i.id for i in fresh}

    async def pop(self, queue: str, max_items: int, lease_seconds: int) -> list[LeasedItem]:
        now = self._clock()
        params = {
            "queue": queue,
            "max_items": max_items,
            "now": to_text(now),
            "lease_token": str(uuid4()),
            "lease_expires_at": to_text(now + timedelta(seconds=lease_seconds)),
        }
        async with self._write() as conn, conn.execute(Q["pop"], params) as cursor:
            found = await cursor.fetchall()
        return rows.sorted_leases([(row["seq"], rows.leased_item(row)) for row in found])

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        params = {"id": str(item_id), "lease_token": str(lease_token) if lease_token else None}
        async with self._write() as conn:
            async with conn.execute(Q["complete"], params) as cursor:
                deleted = cursor.rowcount
            if deleted == 0:
                row = await self._fetchone(conn, "get_item", {"id": str(item_id)})
                raise rows.transition_refused(row, lease_token)

    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        requested = json.dumps(
            [{"id": str(i.id), "token": str(i.lease_token) if i.lease_token else None} for i in items]
        )
        async with self._write() as conn:
            async with conn.execute(Q["complete_batch"], {"items": requested}) as cursor:
                completed = {rows.as_uuid(row[0]) for row in await cursor.fetchall()}
            async with conn.execute(
                Q["existing_ids"], {"ids": json.dumps([str(i.id) for i in items])}
            ) as cursor:
                still_there = {rows.as_uuid(row[0]) for row in await cursor.fetchall()}
        return rows.complete_outcomes(items, completed, still_there)

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        now = self._clock()
        params = {
            "id": str(item_id),
            "lease_token": str(failure.lease_token) if failure.lease_token else None,
            "retry": failure.retry,
            "retry_at": to_text(now + timedelta(seconds=failure.retry_after_seconds)),
            "now": to_text(now),
            "error": failure.error,
        }
        async with self._write() as conn:
            row = await self._fetchone(conn, "fail", params)
            if row is None:
                current = await self._fetchone(conn, "get_item", {"id": str(item_id)})
                raise rows.transition_refused(current, failure.lease_token)
        return rows.item_view(row, now)

    async def get_item(self, item_id: UUID) -> ItemView:
        async with self._read() as conn:
            row = await self._fetchone(conn, "get_item", {"id": str(item_id)})
        if row is None:
            raise rows.transition_refused(None, None)
        return rows.item_view(row, self._clock())

    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        now = self._clock()
        async with (
            self._read() as conn,
            conn.execute(Q["next_visible_at"], {"queues": json.dumps(queues)}) as cursor,
        ):
            found = await cursor.fetchall()
        return {row["queue"]: rows.as_utc(row["next"]) for row in found if row["next"]}, now

    async def subscribe(self, on_ready: ReadyCallback) -> None:
        """SQLite has no notifications: the watcher's probe finds other processes' pushes."""

    async def _stats(self, queue: str | None) -> list[QueueStats]:
        params = {"queue": queue, "now": to_text(self._clock())}
        async with self._read() as conn, conn.execute(Q["queue_stats"], params) as cursor:
            return [rows.queue_stats(row) for row in await cursor.fetchall()]

    async def list_queues(self) -> list[QueueStats]:
        return await self._stats(None)

    async def get_queue(self, name: str) -> QueueStats:
        found = await self._stats(name)
        if not found:
            raise QueueNotFound()
        return found[0]


def _first_of_each_id(items: Sequence[NewItem], taken: set[str]) -> list[NewItem]:
    """The items to insert: those whose id is not taken, each id once, in the order given."""
    seen = set(taken)
    fresh = []
    for item in items:
        if str(item.id) not in seen:
            seen.add(str(item.id))
            fresh.append(item)
    return fresh


def _insert_params(item: NewItem, now: str) -> dict[str, str]:
    return {
        "id": str(item.id),
        "queue": item.queue,
        "payload": item.payload_json,
        "created_at": to_text(item.created_at),
        "now": now,
    }
