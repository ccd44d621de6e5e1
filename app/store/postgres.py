"""PostgreSQL through asyncpg: FOR UPDATE SKIP LOCKED claims, the database's clock."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from pathlib import Path
from uuid import UUID, uuid4

import asyncpg

from app.domain import Clock, CompleteOutcome, Completion, Failure, ItemView, LeasedItem, NewItem, QueueStats
from app.errors import (
    DatabaseUnavailable,
    ItemExists,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    StoreError,
)
from app.store import rows
from app.store.migrations import latest_version, load_migrations
from app.store.protocol import ReadyCallback
from app.store.sqlfile import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))
CHANNEL = "simplequeue_ready"
log = logging.getLogger("simplequeue.postgres")

# A queue table's size swings faster than autovacuum analyses it, so the planner often thinks a
# queue holds a handful of rows when it holds thousands. It then reads them all through a bitmap
# scan and sorts them, on every pop (seen: 22 ms instead of 0.1 ms with 60,000 ready rows).
# Pricing sorts out for our own sessions leaves pop one cheap plan: walking sq_items_pop in order
# (a bitmap scan loses the order, so it would need the sort too). A penalty, not a ban: statements
# that cannot avoid a sort (ORDER BY over unnest) still sort.
PLANNER_SETTINGS = {"enable_sort": "off"}

_UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.InterfaceError,
    asyncpg.AdminShutdownError,
)


@asynccontextmanager
async def translated_errors() -> AsyncIterator[None]:
    """The one place where asyncpg's exceptions become domain errors."""
    try:
        yield
    except QueueError:
        raise
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "sq_items_id_key":
            raise ItemExists() from exc
        raise StoreError(f"PostgreSQL: {exc}") from exc
    except asyncpg.UndefinedTableError as exc:
        raise SchemaNotReady() from exc
    except _UNAVAILABLE as exc:
        raise DatabaseUnavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc
    except asyncpg.PostgresError as exc:
        raise StoreError(f"PostgreSQL: {exc}") from exc


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Skip asyncpg's reset on release (UNLISTEN, RESET ALL, ...: a round trip per operation).

    Pooled connections keep no session state: migrations' advisory lock is transaction-scoped and
    LISTEN has a connection of its own.
    """


def _affected(status: str) -> int:
    """asyncpg reports 'DELETE 3'."""
    return int(status.rsplit(" ", 1)[-1])


class PostgresStore:
    dialect = "postgresql"

    def __init__(
        self, url: str, *, pool_size: int = 10, timeout_seconds: float = 5.0, clock: Clock | None = None
    ):
        self._url = url
        self._pool_size = pool_size
        self._timeout = timeout_seconds
        self._clock = clock
        self._pool: asyncpg.Pool | None = None
        self._own_pids: set[int] = set()  # our pool's backends: their NOTIFYs were already signalled
        self._listener: asyncio.Task[None] | None = None

    def _now(self) -> datetime | None:
        """None lets the database's clock decide; a clock is injected only by tests."""
        return self._clock() if self._clock else None

    async def open(self) -> None:
        # min_size=0: the service starts (and answers 503) while the database is down.
        self._pool = await asyncpg.create_pool(
            self._url,
            min_size=0,
            max_size=self._pool_size,
            timeout=self._timeout,
            command_timeout=max(30.0, self._timeout),
            init=self._remember_pid,
            reset=_keep_session,
            server_settings=PLANNER_SETTINGS,
        )

    async def _remember_pid(self, conn: asyncpg.Connection) -> None:
        self._own_pids.add(conn.get_server_pid())

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with suppress(asyncio.CancelledError):
                await self._listener
        if self._pool is not None:
            await self._pool.close()

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy]:
        assert self._pool is not None, "store is not open"
        async with translated_errors(), self._pool.acquire(timeout=self._timeout) as conn:
            yield conn

    async def migrate(self) -> list[int]:
        applied: list[int] = []
        async with self._conn() as conn, conn.transaction():
            await conn.execute(Q["lock_migrations"])
            await conn.execute(Q["create_version_table"])
            done = {r["version"] for r in await conn.fetch(Q["applied_versions"])}
            for migration in load_migrations(self.dialect):
                if migration.version not in done:
                    await conn.execute(migration.sql)
                    await conn.execute(Q["record_version"], migration.version, migration.name)
                    applied.append(migration.version)
        return applied

    async def check_ready(self) -> None:
        latest = latest_version(self.dialect)
        async with self._conn() as conn:
            versions = [r["version"] for r in await conn.fetch(Q["applied_versions"])]
        if latest not in versions:
            raise SchemaNotReady()

    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> set[UUID]:
        columns = (
            [i.id for i in items],
            [i.queue for i in items],
            [i.payload_json for i in items],
            [i.created_at for i in items],
            self._now(),
        )
        async with self._conn() as conn:
            if skip_existing:
                return {r["id"] for r in await conn.fetch(Q["push_batch"], *columns)}
            async with conn.transaction():
                inserted = {r["id"] for r in await conn.fetch(Q["push_batch"], *columns)}
                if len(inserted) < len(items):
                    raise ItemExists()  # rolls the batch back: all or nothing
                return inserted

    async def pop(self, queue: str, max_items: int, lease_seconds: int) -> list[LeasedItem]:
        async with self._conn() as conn:
            found = await conn.fetch(Q["pop"], queue, self._now(), max_items, uuid4(), lease_seconds)
        return rows.sorted_leases([(r["seq"], rows.leased_item(r)) for r in found])

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        async with self._conn() as conn:
            if _affected(await conn.execute(Q["complete"], item_id, lease_token)) == 0:
                current = await conn.fetchrow(Q["get_item"], item_id, self._now())
                raise rows.transition_refused(current, lease_token)

    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        async with self._conn() as conn:
            found = await conn.fetch(
                Q["complete_batch"], [i.id for i in items], [i.lease_token for i in items]
            )
        completed = {r["id"] for r in found if r["completed"]}
        still_there = {r["id"] for r in found if not r["completed"]}
        return rows.complete_outcomes(items, completed, still_there)

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["fail"],
                item_id,
                failure.lease_token,
                failure.retry,
                failure.retry_after_seconds,
                self._now(),
                failure.error,
            )
            if row is None:
                current = await conn.fetchrow(Q["get_item"], item_id, self._now())
                raise rows.transition_refused(current, failure.lease_token)
        return rows.item_view(row, row["now"])

    async def get_item(self, item_id: UUID) -> ItemView:
        async with self._conn() as conn:
            row = await conn.fetchrow(Q["get_item"], item_id, self._now())
        if row is None:
            raise rows.transition_refused(None, None)
        return rows.item_view(row, row["now"])

    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        now = self._now()
        async with self._conn() as conn:
            found = await conn.fetch(Q["next_visible_at"], list(queues), now)
            if not found:
                return {}, now or await conn.fetchval("SELECT now()")
        return {r["queue"]: r["next"] for r in found if r["next"] is not None}, found[0]["now"]

    async def subscribe(self, on_ready: ReadyCallback) -> None:
        """LISTEN on one dedicated connection per process, kept up for the life of the store."""
        self._listener = asyncio.create_task(self._listen(on_ready), name="simplequeue-listen")

    async def _listen(self, on_ready: ReadyCallback) -> None:
        def received(_: object, pid: int, channel: str, payload: object) -> None:
            if pid in self._own_pids:
                return
            message = json.loads(str(payload))
            on_ready(message["q"], int(message["n"]))

        backoff = 0.5
        while True:
            lost = asyncio.Event()
            try:
                conn = await asyncpg.connect(self._url, timeout=self._timeout)
            except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
                log.warning("LISTEN connection failed (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            try:
                conn.add_termination_listener(lambda _, lost=lost: lost.set())
                await conn.add_listener(CHANNEL, received)
                backoff = 0.5
                on_ready(None, 0)  # anything pushed while we were not listening
                await lost.wait()
                log.warning("LISTEN connection lost; reconnecting")
            except (*_UNAVAILABLE, asyncpg.PostgresError) as exc:
                log.warning("LISTEN failed (%s); reconnecting", exc)
            finally:
                with suppress(Exception):
                    await conn.close(timeout=1)

    async def _stats(self, queue: str | None) -> list[QueueStats]:
        async with self._conn() as conn:
            return [rows.queue_stats(r) for r in await conn.fetch(Q["queue_stats"], self._now(), queue)]

    async def list_queues(self) -> list[QueueStats]:
        return await self._stats(None)

    async def get_queue(self, name: str) -> QueueStats:
        found = await self._stats(name)
        if not found:
            raise QueueNotFound()
        return found[0]
