"""Running this dialect's named queries (queries.sql beside this file), bound by name."""

from __future__ import annotations

import sqlite3
from typing import Any

import aiosqlite

from simplequeue.store.queries import load_queries

Q = load_queries("simplequeue.store.sqlite", "named")


async def fetch(conn: aiosqlite.Connection, name: str, /, **values: Any) -> list[sqlite3.Row]:
    query = Q[name]
    async with conn.execute(query.sql, query.bind(**values)) as cursor:
        return list(await cursor.fetchall())


async def fetch_one(conn: aiosqlite.Connection, name: str, /, **values: Any) -> Any:
    query = Q[name]
    async with conn.execute(query.sql, query.bind(**values)) as cursor:
        return await cursor.fetchone()


async def execute(conn: aiosqlite.Connection, name: str, /, **values: Any) -> int:
    """Run the named query; how many rows it changed."""
    query = Q[name]
    async with conn.execute(query.sql, query.bind(**values)) as cursor:
        return cursor.rowcount


async def execute_many(conn: aiosqlite.Connection, name: str, /, each: list[dict[str, Any]]) -> None:
    query = Q[name]
    await conn.executemany(query.sql, [query.bind(**values) for values in each])
