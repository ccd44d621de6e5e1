"""SQLAlchemy: Connection, Session, AsyncConnection and AsyncSession, by the dialect underneath.

- postgresql, mssql: the SQL entry point through SQLAlchemy itself (so that its driver adapter
  begins its transaction as it does for the caller's statements), under begin_nested().
- sqlite: the sqlite3 path on the DBAPI connection underneath (pysqlite; aiosqlite's, on its
  thread). SQLAlchemy's transaction may not have begun SQLite's yet (sqlite3 begins it at the first
  write): the push then begins it, for SQLAlchemy's commit or rollback to end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simplequeue.outbox import mssql, postgres
from simplequeue.outbox.items import (
    Checked,
    NotInTransaction,
    Pushed,
    as_uuid,
    batch_json,
    check_limits,
    limits_from,
)
from simplequeue.outbox.savepoints import translated
from simplequeue.outbox.sqlite import push_aiosqlite, push_checked

_STATEMENTS = {"mssql": (mssql.CHECK_SQL, "EXEC dbo.sq_push_batch @items = :items")}
# PostgreSQL's push reads the schema's version in its own statement (outbox.postgres.PUSH_SQL).
_PG_PUSH = postgres.PUSH_SQL.format(items=":items", version=":version")
_TRANSLATE = {"postgresql": postgres.translate, "mssql": mssql.translate}


def _statements(dialect: str) -> tuple[Any, Any]:
    from sqlalchemy import text

    if dialect not in _STATEMENTS:
        raise TypeError(f"simplequeue.outbox runs on SQLite, PostgreSQL and SQL Server, not {dialect}")
    check, push = _STATEMENTS[dialect]
    return text(check), text(push)


def push_connection(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On a sqlalchemy.engine.Connection."""
    if not conn.in_transaction():
        raise NotInTransaction()
    dialect = conn.dialect.name
    if dialect == "sqlite":
        return push_checked(_sqlite3_of(conn.connection.dbapi_connection), items, begin=True)
    if dialect == "postgresql":
        with conn.begin_nested(), translated(postgres.translate):
            return postgres.pushed(conn.execute(_pg_push(), postgres.values(items)).all())
    check, push = _statements(dialect)
    with conn.begin_nested(), translated(_TRANSLATE[dialect]):
        check_limits(items, limits_from(conn.execute(check).fetchone(), dialect))
        rows = conn.execute(push, {"items": batch_json(items)}).all()
    return [Pushed(as_uuid(r[0]), bool(r[1])) for r in rows]


def _pg_push() -> Any:
    from sqlalchemy import text

    return text(_PG_PUSH)


def push_session(session: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On a sqlalchemy.orm.Session: on its connection, in its transaction."""
    if not session.in_transaction():
        raise NotInTransaction("the Session has not begun a transaction: use session.begin(), or write first")
    return push_connection(session.connection(), items)


async def push_async_connection(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On a sqlalchemy.ext.asyncio.AsyncConnection."""
    if not conn.in_transaction():
        raise NotInTransaction()
    dialect = conn.dialect.name
    if dialect == "sqlite":
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        if type(driver).__module__.startswith("aiosqlite"):
            return await push_aiosqlite(driver, items, begin=True)
        raise TypeError(f"simplequeue.outbox takes SQLite through aiosqlite, not {type(driver).__name__}")
    if dialect == "postgresql":
        async with conn.begin_nested():
            with translated(postgres.translate):
                return postgres.pushed((await conn.execute(_pg_push(), postgres.values(items))).all())
    check, push = _statements(dialect)
    async with conn.begin_nested():
        with translated(_TRANSLATE[dialect]):
            check_limits(items, limits_from((await conn.execute(check)).fetchone(), dialect))
            rows = (await conn.execute(push, {"items": batch_json(items)})).all()
    return [Pushed(as_uuid(r[0]), bool(r[1])) for r in rows]


async def push_async_session(session: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On a sqlalchemy.ext.asyncio.AsyncSession."""
    if not session.in_transaction():
        raise NotInTransaction("the AsyncSession has not begun a transaction: use session.begin()")
    return await push_async_connection(await session.connection(), items)


def _sqlite3_of(dbapi_connection: Any) -> Any:
    import sqlite3

    if not isinstance(dbapi_connection, sqlite3.Connection):
        raise TypeError(
            "simplequeue.outbox takes SQLite through sqlite3 (pysqlite), "
            f"not {type(dbapi_connection).__name__}"
        )
    return dbapi_connection
