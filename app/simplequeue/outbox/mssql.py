"""SQL Server: the dbo.sq_push_batch procedure (migrations/mssql) on the caller's pyodbc
connection, under a savepoint (SAVE TRANSACTION), so that a refused push leaves the caller's
transaction as it was, as on the other engines.

In a transaction: pyodbc's default, autocommit=False, is one. ODBC then runs every statement in a
transaction the driver begins by itself, which lasts until the caller's commit() or rollback(): a
push there commits with the caller's writes or not at all, which is the whole promise. With
autocommit=True only an explicit BEGIN TRANSACTION (@@TRANCOUNT > 0) is; otherwise the push
would commit on its own, and is refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simplequeue.outbox.items import (
    SETTINGS_SQL,
    Checked,
    NotInTransaction,
    Pushed,
    as_uuid,
    batch_json,
    check_limits,
    is_missing_table,
    limits_from,
    no_schema,
    refusal,
)
from simplequeue.outbox.savepoints import MSSQL, savepoint

TRANCOUNT_SQL = "SELECT @@TRANCOUNT"
CHECK_SQL = SETTINGS_SQL.replace("FROM sq_", "FROM dbo.sq_")
PUSH_SQL = "EXEC dbo.sq_push_batch @items = ?"


def translate(exc: BaseException) -> BaseException:
    if type(exc).__module__.startswith("simplequeue."):
        return exc
    if is_missing_table(exc):
        return no_schema("mssql")
    return refusal(exc) or exc


def in_transaction(conn: Any) -> bool:
    if not conn.autocommit:
        return True
    cur = conn.cursor()
    try:
        [count] = cur.execute(TRANCOUNT_SQL).fetchone()
    finally:
        cur.close()
    return bool(count)


def push_pyodbc(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    if not in_transaction(conn):
        raise NotInTransaction(
            "the pyodbc connection is in autocommit mode outside a transaction: use autocommit=False "
            "(pyodbc's default) or BEGIN TRANSACTION first"
        )
    cur = conn.cursor()
    try:
        with savepoint(cur.execute, MSSQL, translate):
            cur.execute(CHECK_SQL)
            check_limits(items, limits_from(cur.fetchone(), "mssql"))
            cur.execute(PUSH_SQL, batch_json(items))
            while cur.description is None and cur.nextset():
                pass  # row counts the procedure may send before its result set
            rows = cur.fetchall()
    finally:
        cur.close()
    return [Pushed(as_uuid(r[0]), bool(r[1])) for r in rows]
