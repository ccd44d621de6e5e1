"""SQLite: the embedded default. WAL mode, one writer per file, safe for several processes."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

import aiosqlite

from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    Clock,
    CompleteOutcome,
    Completion,
    DeletedQueue,
    Failure,
    FinishedHook,
    ItemNotFound,
    ItemStatus,
    ItemView,
    LeasedItem,
    NewItem,
    Outcome,
    Pushed,
    QueueInUse,
    QueueNotFound,
    QueueSettings,
    QueueStats,
    SchemaNotReady,
    ignore_finished,
    system_clock,
    tell,
)
from simplequeue.domain.metadata import MetadataChange, QueueMetadata
from simplequeue.domain.rules import (
    redrive_delay,
    why_not_extended,
    why_refused,
)
from simplequeue.store import rows
from simplequeue.store.keys import KeyStore
from simplequeue.store.limits import FlowState, Limited
from simplequeue.store.metadata import metadata_of
from simplequeue.store.migrations import latest_version, load_migrations, split_statements
from simplequeue.store.reads import QueueReads
from simplequeue.store.schedules import ScheduleStore, Then
from simplequeue.store.sqlite import transactions
from simplequeue.store.sqlite.errors import translated_errors
from simplequeue.store.sqlite.group_commit import GroupCommit
from simplequeue.store.sqlite.params import add_seconds, to_text
from simplequeue.store.sqlite.statements import execute, execute_many, fetch, fetch_one
from simplequeue.store.sqlite.statements import rows as rows_of
from simplequeue.store.topics import Step, TopicStore

T = TypeVar("T")


def _bound(value: object) -> object:
    """A value as this dialect binds it: times as text, UUIDs as text, flags as 0 or 1."""
    if isinstance(value, datetime):
        return to_text(value)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list):  # rows of a batch statement, which reads them with json_each
        return json.dumps([{k: _bound(v) for k, v in row.items()} for row in value])
    return value


async def _move_dead(conn: aiosqlite.Connection, seqs: str, now: str) -> None:
    """Items just killed (their history records written) whose queue has a dead-letter target move
    there, in the transaction that killed them: the source's dedup windows start, remembered ids
    follow, then the items move (new seqs, so last)."""
    await execute(conn, "dead_letter_windows", seqs=seqs, now=now)
    await execute(conn, "dead_letter_ids", seqs=seqs)
    await execute(conn, "dead_letter_moves", seqs=seqs, now=now)


class SqliteStore(QueueReads, TopicStore, ScheduleStore, KeyStore):
    dialect = "sqlite"
    notifications = None  # no notifications: the long-poll probe finds other processes' pushes
    reaps_at_pop = True  # a pop reaps its queue in its own transaction (transactions.reap_queue)

    def __init__(
        self,
        path: str,
        *,
        timeout_seconds: float = 5.0,
        readers: int = 2,
        clock: Clock | None = None,
        random: Callable[[], float] = random.random,
        on_finished: FinishedHook = ignore_finished,
    ):
        self._path = path
        self._on_finished = on_finished
        self._timeout = timeout_seconds
        self._reader_count = readers
        self._clock = clock or system_clock
        self._random = random  # backoff jitter
        self._writer: aiosqlite.Connection | None = None
        # One writer per process: contention between our own requests queues here instead of
        # in SQLite's busy handler, which sleeps; busy_timeout still covers other processes.
        self._write_lock = asyncio.Lock()
        self._readers: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._all: list[aiosqlite.Connection] = []
        self._commits = GroupCommit(self._writer_turn, timeout_seconds)
        self.flow = FlowState()

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self._path, isolation_level=None, timeout=self._timeout)
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        await conn.execute("PRAGMA journal_mode = WAL")
        # FULL: a 2xx means the row survives power loss, not only a crash of this process.
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.create_function("sq_add_seconds", 2, add_seconds, deterministic=True)
        self._all.append(conn)
        return conn

    async def open(self) -> None:
        async with translated_errors():
            if self._path not in ("", ":memory:"):
                # No folder is made. A path SQLite cannot open (its folder missing, a directory, no
                # permission) fails here, in this thread: aiosqlite's connection thread outlives
                # such a failure and prints a traceback when the event loop has closed.
                sqlite3.connect(self._path, timeout=self._timeout).close()
            self._writer = await self._connect()
            for _ in range(self._reader_count):
                self._readers.put_nowait(await self._connect())

    async def close(self) -> None:
        for conn in self._all:
            await conn.close()
        self._all.clear()

    @asynccontextmanager
    async def _writer_turn(self) -> AsyncIterator[aiosqlite.Connection]:
        """The writer, this process's turn at it. Waiting for it is bounded: by the timeout for
        this process's other writes, by busy_timeout for other processes'. Statements are not: they
        run on this machine's disk, and one cut off mid-commit would leave a 503 for a change
        that was made."""
        assert self._writer is not None, "store is not open"
        async with translated_errors():
            async with asyncio.timeout(self._timeout):
                await self._write_lock.acquire()
            try:
                yield self._writer
            finally:
                self._write_lock.release()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[aiosqlite.Connection]:
        """The writer, in a transaction whose statements are awaited one by one."""
        async with self._writer_turn() as writer:
            await writer.execute("BEGIN IMMEDIATE")
            try:
                yield writer
            except BaseException:
                await writer.execute("ROLLBACK")
                raise
            await writer.execute("COMMIT")

    async def _transaction(self, body: Callable[..., T], /, *args: Any) -> T:
        """`body(sqlite3_connection, *args)` in a write transaction, run whole on the writer's
        thread: the hot paths' statements cost one hop there and back, not one each (see
        statements.py). The calls that wait meanwhile share the next transaction's commit (see
        group_commit.py). A caller cancelled once its body is taken does not stop it: it commits,
        as a request cut off just after its commit would (leased items come back when their
        leases expire)."""
        async with translated_errors():
            return await self._commits.run(body, *args)

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        async with translated_errors():
            async with asyncio.timeout(self._timeout):
                conn = await self._readers.get()
            try:
                yield conn
            finally:
                self._readers.put_nowait(conn)

    async def migrate(self, *, max_payload_bytes: int | None = None) -> list[int]:
        applied: list[int] = []
        async with self._write() as conn:
            await execute(conn, "create_version_table")
            done = {row[0] for row in await fetch(conn, "applied_versions")}
            for migration in load_migrations(self.dialect):
                if migration.version in done:
                    continue
                for statement in split_statements(migration.sql):
                    await conn.execute(statement)
                await execute(
                    conn,
                    "record_version",
                    version=migration.version,
                    name=migration.name,
                    now=to_text(self._clock()),
                )
                applied.append(migration.version)
            if max_payload_bytes is not None:
                await execute(conn, "write_setting", name="max_payload_bytes", value=str(max_payload_bytes))
        return applied

    async def check_ready(self) -> None:
        latest = latest_version(self.dialect)
        async with self._read() as conn:
            versions = [row[0] for row in await fetch(conn, "applied_versions")]
        if latest not in versions:
            raise SchemaNotReady()

    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> list[Pushed | None]:
        assert not (skip_existing and any(i.dedup_key for i in items)), "dedup keys need skip_existing=False"
        return await self._transaction(transactions.push_batch, items, skip_existing, self._clock())

    async def pop(
        self, queue: str, max_items: int, lease_seconds: int | None, *, group_runs: bool = False
    ) -> list[LeasedItem]:
        now = to_text(self._clock())
        reaped: list[str] = []
        flow: list[Limited] = []
        popped = await self._transaction(
            transactions.pop, queue, max_items, lease_seconds, now, group_runs, reaped, flow
        )
        tell(self._on_finished, Outcome.DEAD, reaped)
        for found in flow:
            self.flow.popped(queue, found)
        return popped

    async def extend(self, item_id: UUID, lease_token: UUID, lease_seconds: int) -> ItemView:
        now = self._clock()
        params = {
            "id": str(item_id),
            "lease_token": str(lease_token),
            "lease_seconds": lease_seconds,
            "now": to_text(now),
        }
        async with self._write() as conn:
            extended = await execute(conn, "extend", **params)
            row = await fetch_one(conn, "get_item", id=str(item_id))
            if extended == 0:
                raise why_not_extended(rows.found(row, now), lease_token)
        return rows.item_view(row, now)

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        row = await self._transaction(transactions.complete_one, item_id, lease_token, self._clock())
        tell(self._on_finished, Outcome.COMPLETED, [row["queue"]])

    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        outcomes, queues = await self._transaction(transactions.complete, items, to_text(self._clock()))
        tell(self._on_finished, Outcome.COMPLETED, queues)
        return outcomes

    async def complete_and_pop(
        self, completions: Sequence[Completion], queue: str, max_items: int, lease_seconds: int | None
    ) -> tuple[list[CompleteOutcome], list[LeasedItem]]:
        # One transaction: the pop sees the completions (a completed group head lets its next go).
        # An item completed here is gone, so the pop cannot hand it out again.
        now = to_text(self._clock())
        flow: list[Limited] = []
        outcomes, queues, popped, reaped = await self._transaction(
            transactions.complete_and_pop, completions, queue, max_items, lease_seconds, now, flow
        )
        tell(self._on_finished, Outcome.COMPLETED, queues)
        tell(self._on_finished, Outcome.DEAD, reaped)
        for found in flow:
            self.flow.popped(queue, found)
        return outcomes, popped

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        now = self._clock()
        params = {
            "id": str(item_id),
            "lease_token": str(failure.lease_token) if failure.lease_token else None,
            "retry": failure.retry,
            "retry_after": failure.retry_after_seconds,
            "draw": self._random(),
            "now": to_text(now),
            "error": failure.error,
        }
        async with self._write() as conn:
            failed = await fetch_one(conn, "fail", **params)
            if failed is not None and failed["status"] == ItemStatus.DEAD:
                seqs = json.dumps([failed["seq"]])
                await execute(conn, "write_history", seqs=seqs, now=to_text(now), outcome=Outcome.DEAD)
                await _move_dead(conn, seqs, to_text(now))
            row = await fetch_one(conn, "get_item", id=str(item_id))
            if failed is None:
                raise why_refused(rows.found(row, now), failure.lease_token)
        return rows.item_view(row, now)

    async def get_item(self, item_id: UUID) -> ItemView:
        async with self._read() as conn:
            row = await fetch_one(conn, "get_item", id=str(item_id))
        if row is None:
            raise ItemNotFound()
        return rows.item_view(row, self._clock())

    async def sequence_numbers(self, ids: Sequence[UUID]) -> dict[UUID, int]:
        async with self._read() as conn:
            found = await fetch(conn, "sequence_numbers", ids=json.dumps([str(i) for i in ids]))
        return {rows.as_uuid(row["id"]): row["seq"] for row in found}

    async def dedup_item(self, queue: str, dedup_key: str) -> ItemView:
        async with self._read() as conn:
            row = await fetch_one(conn, "dedup_item", queue=queue, dedup_key=dedup_key)
        if row is None:
            raise ItemNotFound()
        return rows.item_view(row, self._clock())

    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        now = self._clock()
        async with self._read() as conn:
            found = await fetch(conn, "next_visible_at", queues=json.dumps(queues))
        return {row["queue"]: rows.as_utc(row["next"]) for row in found if row["next"]}, now

    def _now(self) -> datetime:
        return self._clock()

    async def _fetch_page(self, statement: str, limit: int, **values: object) -> list[sqlite3.Row]:
        bound = {name: to_text(v) if isinstance(v, datetime) else v for name, v in values.items()}
        async with self._read() as conn:
            return await fetch(conn, statement, limit=limit, **bound)

    async def _stats(self, queue: str) -> list[QueueStats]:
        params = {"queue": queue, "now": to_text(self._clock())}
        async with self._read() as conn:
            return [rows.queue_stats(row) for row in await fetch(conn, "queue_stats", **params)]

    async def _topic_run(self, steps: Sequence[Step]) -> list[list[sqlite3.Row]]:
        bound = [(name, {k: _bound(v) for k, v in values.items()}) for name, values in steps]

        def body(conn: sqlite3.Connection) -> list[list[sqlite3.Row]]:
            return [rows_of(conn, name, **values) for name, values in bound]

        return await self._transaction(body)

    async def _lock_and_push(self, lock: Step, then: Then) -> None:
        # The write transaction holds SQLite's one writer lock: what `lock` reads, no one else
        # changes before the commit.
        statement, values = lock
        bound = {k: _bound(v) for k, v in values.items()}
        now = self._clock()

        def body(conn: sqlite3.Connection) -> None:
            found = rows_of(conn, statement, **bound)
            if not found:
                return
            (name, given), items = then(found)
            rows_of(conn, name, **{k: _bound(v) for k, v in given.items()})
            if items:
                transactions.push_batch(conn, items, False, now)

        await self._transaction(body)

    async def _claim_and_push(self, claim: Step, items: Sequence[NewItem]) -> bool:
        statement, values = claim
        bound = {k: _bound(v) for k, v in values.items()}
        now = self._clock()

        def body(conn: sqlite3.Connection) -> bool:
            if not rows_of(conn, statement, **bound):
                return False
            if items:
                transactions.push_batch(conn, items, False, now)
            return True

        return await self._transaction(body)

    async def put_queue(self, name: str, settings: QueueSettings) -> bool:
        params = {"queue": name, "now": to_text(self._clock()), **rows.settings_params(settings)}
        async with self._write() as conn:
            existed = await fetch_one(conn, "queue_exists", queue=name)
            await execute(
                conn, "rerank_queue", queue=name, priority_aging_seconds=settings.priority_aging_seconds
            )
            await execute(conn, "put_queue", **params)
        self.flow.forget(name)
        return existed is None

    async def queue_exists(self, name: str) -> bool:
        async with self._read() as conn:
            return await fetch_one(conn, "queue_exists", queue=name) is not None

    async def count_queues(self) -> int:
        async with self._read() as conn:
            return int((await fetch_one(conn, "count_queues"))["queues"])

    async def queue_metadata(self, name: str) -> QueueMetadata:
        async with self._read() as conn:
            row = await fetch_one(conn, "queue_metadata", queue=name)
        if row is None:
            raise QueueNotFound()
        return metadata_of(row)

    async def change_queue_metadata(self, name: str, change: MetadataChange) -> int:
        # Under the writer's BEGIN IMMEDIATE: no other change of the tags comes between the count
        # and the writes.
        async with self._write() as conn:
            if await fetch_one(conn, "queue_exists", queue=name) is None:
                raise QueueNotFound()
            keys = {row["key"] for row in await fetch(conn, "queue_tag_keys", queue=name)}
            tags = len((keys - change.unset_tags) | change.set_tags.keys())
            if tags > change.max_tags:
                return tags
            for statement, values in (
                ("set_queue_attribute", change.set_attributes),
                ("set_queue_tag", change.set_tags),
            ):
                each = [{"queue": name, "name": k, "value": v} for k, v in values.items()]
                await execute_many(conn, statement, each)
            for statement, names in (
                ("unset_queue_attribute", change.unset_attributes),
                ("unset_queue_tag", change.unset_tags),
            ):
                await execute_many(conn, statement, [{"queue": name, "name": k} for k in names])
            if change.touches:
                await execute(conn, "touch_queue", queue=name, now=to_text(self._clock()))
        return tags

    async def set_paused(self, queue: str, paused: bool) -> None:
        async with self._write() as conn:
            if not await execute(conn, "set_paused", queue=queue, paused=paused):
                raise QueueNotFound()

    async def delete_queue(self, queue: str, force: bool) -> DeletedQueue:
        async with self._write() as conn:
            if await fetch_one(conn, "queue_exists", queue=queue) is None:
                raise QueueNotFound()
            leased = await fetch_one(conn, "live_leases", queue=queue, now=to_text(self._clock()))
            if leased["leased"] and not force:
                raise QueueInUse()
            items = await execute(conn, "delete_queue_items", queue=queue)
            history = await execute(conn, "delete_queue_history", queue=queue)
            await execute(conn, "delete_queue_dedup", queue=queue)
            await execute(conn, "delete_queue_attributes", queue=queue)
            await execute(conn, "delete_queue_tags", queue=queue)
            await execute(conn, "delete_queue_fair_keys", queue=queue)
            await execute(conn, "delete_queue", queue=queue)
        return DeletedQueue(items=items, history=history)

    async def redrive(
        self, queue: str, ids: Sequence[UUID] | None, rate_per_second: float | None, limit: int, offset: int
    ) -> int:
        wanted = json.dumps([str(i) for i in ids]) if ids is not None else None
        async with self._write() as conn:
            now = self._clock()
            params = {"queue": queue, "ids": wanted, "limit": limit}
            seqs = [row["seq"] for row in await fetch(conn, "dead_to_redrive", **params)]
            await execute_many(
                conn,
                "revive",
                [
                    {"seq": seq, "visible_at": to_text(now + redrive_delay(offset + k, rate_per_second))}
                    for k, seq in enumerate(seqs)
                ],
            )
        return len(seqs)

    @staticmethod
    async def _delete_purged(conn: aiosqlite.Connection, seqs: list[int], now: str) -> None:
        """Items that go without finishing (purge_dead, purge_live, expire_retained): the windows
        of their dedup keys and remembered ids start, then they are deleted."""
        await execute(conn, "start_dedup_windows", seqs=json.dumps(seqs), now=now)
        await execute(conn, "remember_ids", seqs=json.dumps(seqs), now=now)
        await execute(conn, "delete_items", seqs=json.dumps(seqs))

    async def purge_dead(self, queue: str, limit: int) -> int:
        async with self._write() as conn:
            params = {"queue": queue, "ids": None, "limit": limit}
            seqs = [row["seq"] for row in await fetch(conn, "dead_to_redrive", **params)]
            await self._delete_purged(conn, seqs, to_text(self._clock()))
        return len(seqs)

    async def purge_live(self, queue: str, limit: int) -> int:
        async with self._write() as conn:
            now = to_text(self._clock())
            seqs = [
                row["seq"] for row in await fetch(conn, "live_to_purge", queue=queue, now=now, limit=limit)
            ]
            await self._delete_purged(conn, seqs, now)
        return len(seqs)

    async def expire_retained(self, limit: int) -> int:
        async with self._write() as conn:
            now = to_text(self._clock())
            seqs = [row["seq"] for row in await fetch(conn, "live_to_expire", now=now, limit=limit)]
            await self._delete_purged(conn, seqs, now)
        return len(seqs)

    async def reap_expired(self, limit: int, queue: str | None = None) -> int:
        now = to_text(self._clock())
        if queue is not None:
            # A pop's reap: the common answer, none, comes from a reader, without the writer's turn.
            of_queue = {"queue": queue, "now": now, "limit": limit}
            async with self._read() as reader:
                if await fetch_one(reader, "expired_last_attempts_of_queue", **of_queue) is None:
                    return 0
        async with self._write() as conn:
            if queue is None:
                expired = await fetch(conn, "expired_last_attempts", now=now, limit=limit)
            else:
                expired = await fetch(conn, "expired_last_attempts_of_queue", **of_queue)
            if not expired:
                return 0
            seqs = json.dumps([row["seq"] for row in expired])
            killed = await execute(conn, "kill", seqs=seqs, now=now, error=LEASE_EXPIRED_ERROR)
            await execute(conn, "write_history", seqs=seqs, now=now, outcome=Outcome.DEAD)
            await _move_dead(conn, seqs, now)
        tell(self._on_finished, Outcome.DEAD, [row["queue"] for row in expired])
        return killed

    async def purge_history(self, limit: int) -> int:
        params = {"now": to_text(self._clock()), "limit": limit}
        async with self._write() as conn:
            history = await execute(conn, "purge_history", **params)
            keys = await execute(conn, "purge_dedup_keys", **params)
            ids = await execute(conn, "purge_client_ids", **params)
        return max(history, keys, ids)
