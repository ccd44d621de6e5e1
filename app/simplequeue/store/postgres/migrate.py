"""Migrating the schema: the pending migrations, then the functions as they are now
(functions.sql), in one transaction under a transaction-scoped advisory lock."""

from __future__ import annotations

from simplequeue.store.migrations import load_migrations, load_routines, routines_due
from simplequeue.store.postgres.statements import Connection, execute, fetch

DIALECT = "postgresql"
# DDL on a big table, or waiting for another replica's migration, may take a while.
MIGRATION_TIMEOUT_SECONDS = 3600.0


async def apply_pending(conn: Connection) -> list[int]:
    """Apply the migrations not yet recorded, in order, recording each, then the functions; the
    versions applied. The caller holds the transaction: all of it commits, or none."""
    slow = MIGRATION_TIMEOUT_SECONDS
    await conn.execute("SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0", timeout=slow)
    await execute(conn, "lock_migrations", deadline_seconds=slow)
    await execute(conn, "create_version_table", deadline_seconds=slow)
    done = {r["version"] for r in await fetch(conn, "applied_versions", deadline_seconds=slow)}
    applied: list[int] = []
    for migration in load_migrations(DIALECT):
        if migration.version not in done:
            await conn.execute(migration.sql, timeout=slow)
            await execute(
                conn, "record_version", version=migration.version, name=migration.name, deadline_seconds=slow
            )
            applied.append(migration.version)
    routines = load_routines(DIALECT)
    if routines is not None and routines_due(done, DIALECT):
        await conn.execute(routines, timeout=slow)
    return applied
