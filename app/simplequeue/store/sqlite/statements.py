"""Running this dialect's named queries (queries.sql beside this file), bound by name.

aiosqlite runs every call on its connection's own thread, and each call is a hop there and back
(a queue, a future, a wake-up of the event loop). With a cursor, a statement took three hops
(execute, fetch, close), and a completion with its next pop about twenty. So the work is written
as plain functions of a sqlite3 connection (`rows`, `first`, `run`), and:
- each async helper (`fetch`, `fetch_one`, `execute`) runs one of them as one hop;
- a hot transaction runs whole on the thread, statements and all, as one hop (the store's
  `_transaction`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator, Mapping
from typing import Any, TypeAlias, TypeVar

import aiosqlite

from simplequeue.store.queries import load_queries

Q = load_queries("simplequeue.store.sqlite", "named")
T = TypeVar("T")

Step: TypeAlias = tuple[str, Mapping[str, Any] | list[dict[str, Any]]]
Steps: TypeAlias = Generator[Step, list[sqlite3.Row], T]
"""Work written once for every way of reaching a connection: it yields a query's name and its
values, and is sent what the query answered. Values as a mapping: the query's rows; as a list of
mappings: the query run once for each (executemany), answering no rows. The function's result is
the generator's return value. run_steps runs them on a sqlite3 connection (the store's writer
thread, a caller's connection); run_steps_async on a caller's aiosqlite connection."""


def rows(conn: sqlite3.Connection, name: str, /, **values: Any) -> list[sqlite3.Row]:
    query = Q[name]
    return conn.execute(query.sql, query.bind(**values)).fetchall()


def first(conn: sqlite3.Connection, name: str, /, **values: Any) -> Any:
    """The first row, or None. Every row is read: a DML statement with RETURNING has made all its
    changes by its first row anyway, and this dialect's queries that return one row select one."""
    return next(iter(rows(conn, name, **values)), None)


def run(conn: sqlite3.Connection, name: str, /, **values: Any) -> int:
    """Run the named query; how many rows it changed."""
    query = Q[name]
    cursor = conn.execute(query.sql, query.bind(**values))
    try:
        return cursor.rowcount
    finally:
        cursor.close()


def run_many(conn: sqlite3.Connection, name: str, /, each: list[dict[str, Any]]) -> None:
    query = Q[name]
    conn.executemany(query.sql, [query.bind(**values) for values in each]).close()


def run_steps(conn: sqlite3.Connection, steps: Steps[T]) -> T:
    answer: list[sqlite3.Row] | None = None
    try:
        while True:
            name, values = steps.send(answer)  # type: ignore[arg-type]  # None starts it
            if isinstance(values, list):
                if values:  # nothing to run: no statement at all
                    run_many(conn, name, values)
                answer = []
            else:
                answer = rows(conn, name, **values)
    except StopIteration as done:
        result: T = done.value
        return result


async def run_steps_async(conn: aiosqlite.Connection, steps: Steps[T]) -> T:
    """run_steps through aiosqlite's documented API only, which runs each call on the
    connection's thread (sqlite3 connections refuse other threads): for a connection the caller
    owns, where on_thread's private way in is not ours to take."""
    answer: list[sqlite3.Row] | None = None
    try:
        while True:
            name, values = steps.send(answer)  # type: ignore[arg-type]  # None starts it
            query = Q[name]
            if isinstance(values, list):
                # Hops are the cost here: none for nothing to run, one for one row (a push's usual
                # queue and item), two (run, close) for executemany's cursor.
                if len(values) == 1:
                    await conn.execute_fetchall(query.sql, query.bind(**values[0]))
                elif values:
                    cursor = await conn.executemany(query.sql, [query.bind(**v) for v in values])
                    await cursor.close()
                answer = []
            else:
                answer = list(await conn.execute_fetchall(query.sql, query.bind(**values)))
    except StopIteration as done:
        result: T = done.value
        return result


async def on_thread(
    conn: aiosqlite.Connection, function: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    """`function(sqlite3_connection, *args, **kwargs)`, run on the connection's thread in its turn,
    as aiosqlite runs its own methods (Connection._execute: not in its documented API, so this is
    the one place that uses it; every test of this dialect goes through here).

    Only on the store's own connections. aiosqlite documents no way to run a function on its
    thread; its documented calls (run_steps_async) take a hop per statement, which a hot
    transaction run whole here does not (the outbox, on a caller's connection, pays them: 0.62x
    to 0.75x of this way's pushes per second in A/B runs)."""
    raw: sqlite3.Connection = conn._conn
    result: T = await conn._execute(function, raw, *args, **kwargs)  # type: ignore[no-untyped-call]
    return result


async def fetch(conn: aiosqlite.Connection, name: str, /, **values: Any) -> list[sqlite3.Row]:
    return await on_thread(conn, rows, name, **values)


async def fetch_one(conn: aiosqlite.Connection, name: str, /, **values: Any) -> Any:
    return await on_thread(conn, first, name, **values)


async def execute(conn: aiosqlite.Connection, name: str, /, **values: Any) -> int:
    """Run the named query; how many rows it changed."""
    return await on_thread(conn, run, name, **values)


async def execute_many(conn: aiosqlite.Connection, name: str, /, each: list[dict[str, Any]]) -> None:
    await on_thread(conn, run_many, name, each)
