"""SQLite: the SQLite store's own push statements, run on the caller's sqlite3 connection under a
savepoint (there are no procedures). aiosqlite's connection, and SQLAlchemy's on either, run the
same code on the sqlite3 connection underneath, on the thread that owns it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from simplequeue.domain import system_clock
from simplequeue.outbox.items import (
    SAVEPOINT,
    SETTINGS_SQL,
    Checked,
    NotInTransaction,
    Pushed,
    check_limits,
    is_missing_table,
    limits_from,
    no_schema,
)
from simplequeue.store.sqlite.transactions import push_on


def push_checked(conn: sqlite3.Connection, items: Sequence[Checked], *, begin: bool = False) -> list[Pushed]:
    """Push on a sqlite3 connection inside the caller's transaction. `begin`: the caller's
    transaction is one a layer above knows of (SQLAlchemy's), which sqlite3 may not have begun yet
    (it begins at the first write): begin it here, to be committed or rolled back by that layer."""
    if not conn.in_transaction:
        # Python 3.12's autocommit=True commits nothing on commit(): a BEGIN here would stay open.
        if not begin or getattr(conn, "autocommit", None) is True:
            raise NotInTransaction()
        conn.execute("BEGIN")
    now = system_clock()
    conn.execute(f"SAVEPOINT {SAVEPOINT}")
    try:
        try:
            row = conn.execute(SETTINGS_SQL).fetchone()
        except sqlite3.OperationalError as exc:
            if is_missing_table(exc):
                raise no_schema("sqlite") from exc
            raise
        check_limits(items, limits_from(row, "sqlite"))
        results = push_on(conn, [i.new_item(now) for i in items], now)
    except BaseException:
        conn.execute(f"ROLLBACK TO {SAVEPOINT}")
        conn.execute(f"RELEASE {SAVEPOINT}")
        raise
    conn.execute(f"RELEASE {SAVEPOINT}")
    return [Pushed(r.id, r.created) for r in results]


async def push_aiosqlite(conn: Any, items: Sequence[Checked], *, begin: bool = False) -> list[Pushed]:
    """On an aiosqlite.Connection: the sqlite3 path, on the connection's own thread (sqlite3
    connections refuse other threads). aiosqlite has no public way to run a function there, so this
    uses its Connection._execute, the one its own methods use."""
    raw: sqlite3.Connection = conn._conn
    results: list[Pushed] = await conn._execute(push_checked, raw, items, begin=begin)
    return results
