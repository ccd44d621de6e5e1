"""Callers of simplequeue.outbox, one per driver, behind one async face, so that the outbox's
suites run the same cases on every driver and engine: each begins, writes a business row, pushes,
and commits or rolls back in its driver's own idiom."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiosqlite
import asyncpg
import psycopg
import sqlalchemy as sa
from simplequeue import outbox
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

# (driver, engine): what the suites run on. SQLAlchemy's async dialects: aiosqlite, asyncpg; the
# async session rides psycopg's async connection, to cover SQLAlchemy's other PostgreSQL adapter.
DRIVERS = [
    ("sqlite3", "sqlite"),
    ("aiosqlite", "sqlite"),
    ("psycopg", "postgresql"),
    ("psycopg-async", "postgresql"),
    ("asyncpg", "postgresql"),
    ("asyncpg-pool", "postgresql"),
    ("sqlalchemy", "sqlite"),
    ("sqlalchemy", "postgresql"),
    ("sqlalchemy-session", "sqlite"),
    ("sqlalchemy-session", "postgresql"),
    ("sqlalchemy-async", "sqlite"),
    ("sqlalchemy-async", "postgresql"),
    ("sqlalchemy-async-session", "sqlite"),
    ("sqlalchemy-async-session", "postgresql"),
]
ORDERS = "CREATE TABLE IF NOT EXISTS outbox_orders (id BIGINT PRIMARY KEY)"


class Caller:
    """One application connection. Its SQL takes no parameters (each driver has its own style)."""

    def __init__(self, conn: Any, sync: bool) -> None:
        self.conn = conn
        self.sync = sync
        self.closers: list[Callable[[], Awaitable[Any] | Any]] = []

    async def run(self, call: Callable[[], Any]) -> Any:
        result = call()
        return await result if not self.sync and hasattr(result, "__await__") else result

    async def push(self, queue: str, payload: Any, **options: Any) -> outbox.Pushed:
        if self.sync:
            return outbox.push(self.conn, queue, payload, **options)
        return await outbox.push_async(self.conn, queue, payload, **options)

    async def publish(self, topic: str, message: Any, **options: Any) -> Any:
        if self.sync:
            return outbox.publish(self.conn, topic, message, **options)
        return await outbox.publish_async(self.conn, topic, message, **options)

    async def push_many(self, queue: str, items: Sequence[Mapping[str, Any]]) -> list[outbox.Pushed]:
        if self.sync:
            return outbox.push_many(self.conn, queue, items)
        return await outbox.push_many_async(self.conn, queue, items)

    async def write(self, order: int) -> None:
        await self.execute(f"INSERT INTO outbox_orders (id) VALUES ({order})")

    async def begin(self) -> None:
        await self.execute("BEGIN")

    async def commit(self) -> None:
        await self.run(self.conn.commit)

    async def rollback(self) -> None:
        await self.run(self.conn.rollback)

    async def savepoint(self) -> None:
        await self.execute("SAVEPOINT s1")

    async def rollback_to_savepoint(self) -> None:
        await self.execute("ROLLBACK TO SAVEPOINT s1")

    async def execute(self, sql: str) -> None:
        await self.run(lambda: self.conn.execute(sql))

    async def close(self) -> None:
        for close in reversed(self.closers):
            await self.run(close)


class Psycopg(Caller):
    """psycopg's idiom: a transaction() block (entered here, left by commit or rollback)."""

    def __init__(self, conn: Any, sync: bool) -> None:
        super().__init__(conn, sync)
        self.block: Any = None

    async def begin(self) -> None:
        self.block = self.conn.transaction()
        await self.run(self.block.__enter__ if self.sync else self.block.__aenter__)

    async def _leave(self, error: BaseException | None) -> None:
        block, self.block = self.block, None
        kind = type(error) if error else None
        await self.run(lambda: (block.__exit__ if self.sync else block.__aexit__)(kind, error, None))

    async def commit(self) -> None:
        await self._leave(None)

    async def rollback(self) -> None:
        await self._leave(psycopg.Rollback())


class Asyncpg(Caller):
    async def begin(self) -> None:
        self.block = self.conn.transaction()
        await self.block.start()

    async def commit(self) -> None:
        await self.block.commit()

    async def rollback(self) -> None:
        await self.block.rollback()


class Alchemy(Caller):
    """A Connection or Session (sync or async): begin(), commit(), begin_nested()."""

    async def begin(self) -> None:
        await self.run(self.conn.begin)

    async def savepoint(self) -> None:
        self.nested = await self.run(self.conn.begin_nested)

    async def rollback_to_savepoint(self) -> None:
        await self.run(self.nested.rollback)

    async def execute(self, sql: str) -> None:
        await self.run(lambda: self.conn.execute(sa.text(sql)))


def _alchemy_url(engine: str, url: str, async_driver: str | None) -> str:
    if engine == "sqlite":
        return f"sqlite+{async_driver}:///{url}" if async_driver else f"sqlite:///{url}"
    driver = async_driver or "psycopg"
    return url.replace("postgresql://", f"postgresql+{driver}://", 1)


async def open_caller(driver: str, engine: str, where: str) -> Caller:
    """A caller on `where`: a SQLite file's path, or a PostgreSQL URL."""
    if driver == "sqlite3":
        caller = Caller(sqlite3.connect(where, timeout=10), sync=True)
        caller.closers.append(caller.conn.close)
    elif driver == "aiosqlite":
        caller = Caller(await aiosqlite.connect(where, timeout=10), sync=False)
        caller.closers.append(caller.conn.close)
    elif driver in ("psycopg", "psycopg-async"):
        sync = driver == "psycopg"
        conn = psycopg.connect(where) if sync else await psycopg.AsyncConnection.connect(where)
        caller = Psycopg(conn, sync=sync)
        caller.closers.append(conn.close)
    elif driver == "asyncpg":
        caller = Asyncpg(await asyncpg.connect(where), sync=False)
        caller.closers.append(caller.conn.close)
    elif driver == "asyncpg-pool":
        pool = await asyncpg.create_pool(where, min_size=1, max_size=1)
        caller = Asyncpg(await pool.acquire(), sync=False)
        caller.closers += [pool.close, lambda: pool.release(caller.conn)]
    elif driver in ("sqlalchemy", "sqlalchemy-session"):
        sync_engine = sa.create_engine(_alchemy_url(engine, where, None))
        conn = sync_engine.connect() if driver == "sqlalchemy" else Session(sync_engine)
        caller = Alchemy(conn, sync=True)
        caller.closers += [sync_engine.dispose, conn.close]
    else:
        async_driver = "aiosqlite" if engine == "sqlite" else "asyncpg"
        if driver == "sqlalchemy-async-session" and engine == "postgresql":
            async_driver = "psycopg"
        async_engine = create_async_engine(_alchemy_url(engine, where, async_driver))
        aconn: AsyncConnection | AsyncSession = (
            await async_engine.connect() if driver == "sqlalchemy-async" else AsyncSession(async_engine)
        )
        caller = Alchemy(aconn, sync=False)
        caller.closers += [async_engine.dispose, aconn.close]
    return caller


@contextlib.asynccontextmanager
async def caller_on(driver: str, engine: str, where: str) -> Any:
    caller = await open_caller(driver, engine, where)
    try:
        yield caller
    finally:
        await caller.close()
