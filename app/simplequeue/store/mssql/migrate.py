"""Migrating the schema: one replica at a time under a session lock, with no statement bounds, on a
database whose compatibility level has OPENJSON; the pending migrations, then the procedures as
they are now (procedures.sql)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from simplequeue.domain import DatabaseUnavailable, StoreError
from simplequeue.store.migrations import load_migrations, load_routines, routines_due, split_statements
from simplequeue.store.mssql.odbc import Connection, bound_statements, run_batch, set_query_timeout
from simplequeue.store.mssql.statements import fetch

DIALECT = "mssql"
MIGRATION_LOCK_TIMEOUT_MS = 300_000
# OPENJSON, which reads every batch of items, needs SQL Server 2016's compatibility level.
MIN_COMPATIBILITY_LEVEL = 130


@asynccontextmanager
async def migration_session(conn: Connection, timeout_seconds: float) -> AsyncIterator[None]:
    """The block runs holding the migration lock, with the statement bounds lifted (DDL on a big table,
    or waiting for another replica's migration). Afterwards the lock is released, after the block's
    commit, so that a replica that waited finds the versions recorded; and the bounds are put back
    before the connection returns to the pool."""
    set_query_timeout(conn, 0)
    await run_batch(conn, "SET LOCK_TIMEOUT -1")
    try:
        try:
            await _take_migration_lock(conn)
            yield
        finally:
            await _release_migration_lock(conn)
    finally:
        with suppress(Exception):  # a broken connection is closed by _release_migration_lock
            await bound_statements(conn, timeout_seconds)


async def apply_pending(conn: Connection, now: str) -> list[int]:
    """Apply the migrations not yet recorded, in order, recording each, then the procedures, a batch
    at a time; the versions applied. The caller holds the transaction: all of it commits, or none."""
    await _check_compatibility_level(conn)
    await fetch(conn, "create_version_table")
    done = {row["version"] for row in await fetch(conn, "applied_versions")}
    applied: list[int] = []
    for migration in load_migrations(DIALECT):
        if migration.version in done:
            continue
        for statement in split_statements(migration.sql):
            await run_batch(conn, statement)
        await fetch(conn, "record_version", version=migration.version, name=migration.name, now=now)
        applied.append(migration.version)
    routines = load_routines(DIALECT)
    if routines is not None and routines_due(done, DIALECT):
        for batch in split_statements(routines):
            await run_batch(conn, batch)
    return applied


async def _check_compatibility_level(conn: Connection) -> None:
    [row] = await fetch(conn, "compatibility_level")
    level = row["compatibility_level"]
    if level < MIN_COMPATIBILITY_LEVEL:
        raise StoreError(
            f"SQL Server: the database is at compatibility level {level}; simplequeue needs "
            f"{MIN_COMPATIBILITY_LEVEL} or later (OPENJSON): ALTER DATABASE CURRENT SET "
            f"COMPATIBILITY_LEVEL = {MIN_COMPATIBILITY_LEVEL}"
        )


async def _take_migration_lock(conn: Connection) -> None:
    found = await fetch(conn, "lock_migrations", timeout_ms=MIGRATION_LOCK_TIMEOUT_MS)
    result = found[0]["result"] if found else None
    if result is None or result < 0:
        # -1: another process has been migrating for the whole timeout; lower: refused outright.
        error = DatabaseUnavailable if result == -1 else StoreError
        raise error(f"SQL Server: could not take the migration lock (sp_getapplock returned {result})")


async def _release_migration_lock(conn: Connection) -> None:
    """Release the session's lock. A connection that cannot is closed instead, which releases the lock
    too, rather than going back to the pool still holding it."""
    try:
        await fetch(conn, "unlock_migrations")
        await conn.commit()  # in case the procedure opened an implicit transaction
    except Exception:
        with suppress(Exception):
            await conn.close()
