"""Running this dialect's named queries (queries.sql beside this file), bound by name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from simplequeue.store.queries import load_queries

Q = load_queries("simplequeue.store.postgres", "numbered")

Connection = asyncpg.Connection


# Pooled sessions reuse one generic plan per statement (store.PLANNER_SETTINGS). These reads
# filter on optional values (`:since IS NULL OR ...`, a paging cursor, a state): only a plan made
# for the values at hand turns those into index bounds, so each runs in a transaction that asks
# for one. They serve people and dashboards, not the hot path, so the extra round trips are cheap.
CUSTOM_PLANNED = frozenset({"list_dead", "pick_dead", "list_history", "peek", "queue_stats", "queue_page"})


@asynccontextmanager
async def _custom_planned(conn: Connection) -> AsyncIterator[None]:
    async with conn.transaction():  # a savepoint inside the caller's transaction, if any
        await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        yield


async def fetch(
    conn: Connection, name: str, /, *, deadline_seconds: float | None = None, **values: Any
) -> list[Any]:
    """The rows of the named query, with its parameters bound by name."""
    query = Q[name]
    if name not in CUSTOM_PLANNED:  # the hot statements: no context manager to enter and leave
        return await conn.fetch(query.sql, *query.bind(**values), timeout=deadline_seconds)
    async with _custom_planned(conn):
        return await conn.fetch(query.sql, *query.bind(**values), timeout=deadline_seconds)


async def fetch_one(conn: Connection, name: str, /, **values: Any) -> Any:
    query = Q[name]
    if name not in CUSTOM_PLANNED:
        return await conn.fetchrow(query.sql, *query.bind(**values))
    async with _custom_planned(conn):
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
