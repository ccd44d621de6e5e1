"""Running this dialect's named queries (queries.sql beside this file), bound by name."""

from __future__ import annotations

from typing import Any

import asyncpg

from simplequeue.store.queries import load_queries

Q = load_queries("simplequeue.store.postgres", "numbered")

Connection = asyncpg.pool.PoolConnectionProxy


async def fetch(
    conn: Connection, name: str, /, *, deadline_seconds: float | None = None, **values: Any
) -> list[Any]:
    """The rows of the named query, with its parameters bound by name."""
    query = Q[name]
    return list(await conn.fetch(query.sql, *query.bind(**values), timeout=deadline_seconds))


async def fetch_one(conn: Connection, name: str, /, **values: Any) -> Any:
    query = Q[name]
    return await conn.fetchrow(query.sql, *query.bind(**values))


async def fetch_value(conn: Connection, name: str, /, **values: Any) -> Any:
    query = Q[name]
    return await conn.fetchval(query.sql, *query.bind(**values))


async def execute(
    conn: Connection, name: str, /, *, deadline_seconds: float | None = None, **values: Any
) -> int:
    """Run the named query; how many rows it changed (asyncpg reports 'DELETE 3')."""
    query = Q[name]
    status = await conn.execute(query.sql, *query.bind(**values), timeout=deadline_seconds)
    return int(status.rsplit(" ", 1)[-1]) if status[-1:].isdigit() else 0
