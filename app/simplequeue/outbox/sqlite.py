"""SQLite: the SQLite store's own push statements, run on the caller's connection under a savepoint
(there are no procedures): a sqlite3 connection runs them itself; an aiosqlite connection runs each
through its documented execute_fetchall and executemany, on the connection's own thread. SQLAlchemy's
connections, on either, take the same paths with the DBAPI connection underneath."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from simplequeue.domain import system_clock
from simplequeue.outbox.items import (
    SETTINGS_SQL,
    Checked,
    NotInTransaction,
    Pushed,
    check_limits,
    is_missing_table,
    limits_from,
    no_schema,
)
from simplequeue.outbox.savepoints import STANDARD, savepoint, savepoint_async
from simplequeue.store.sqlite.transactions import push_on, push_on_async


def translate(exc: BaseException) -> BaseException:
    """A missing table (the schema never migrated) is a schema not ready; the push's own
    statements translate the rest of SQLite's errors themselves."""
    if isinstance(exc, sqlite3.OperationalError) and is_missing_table(exc):
        return no_schema("sqlite")
    return exc


def push_checked(conn: sqlite3.Connection, items: Sequence[Checked], *, begin: bool = False) -> list[Pushed]:
    """Push on a sqlite3 connection inside the caller's transaction. `begin`: the caller's
    transaction is one a layer above knows of (SQLAlchemy's), which sqlite3 may not have begun yet
    (it begins at the first write): begin it here, to be committed or rolled back by that layer."""
    if _begin(conn, begin):
        conn.execute("BEGIN")
    now = system_clock()
    with savepoint(conn.execute, STANDARD, translate):
        check_limits(items, limits_from(conn.execute(SETTINGS_SQL).fetchone(), "sqlite"))
        results = push_on(conn, [i.new_item(now) for i in items], now)
    return [Pushed(r.id, r.created) for r in results]


async def push_aiosqlite(conn: Any, items: Sequence[Checked], *, begin: bool = False) -> list[Pushed]:
    """push_checked, on an aiosqlite.Connection."""
    if _begin(conn, begin):
        await conn.execute_fetchall("BEGIN")
    now = system_clock()
    async with savepoint_async(conn.execute_fetchall, STANDARD, translate):
        [row] = await conn.execute_fetchall(SETTINGS_SQL)
        check_limits(items, limits_from(row, "sqlite"))
        results = await push_on_async(conn, [i.new_item(now) for i in items], now)
    return [Pushed(r.id, r.created) for r in results]


def _begin(conn: Any, begin: bool) -> bool:
    """Whether the push must begin the caller's transaction (see push_checked); refused when
    outside one that no layer above knows of."""
    if conn.in_transaction:
        return False
    # Python 3.12's autocommit=True commits nothing on commit(): a BEGIN here would stay open.
    # (aiosqlite does not pass that attribute on; its connections are made without it.)
    if not begin or getattr(conn, "autocommit", None) is True:
        raise NotInTransaction()
    return True
