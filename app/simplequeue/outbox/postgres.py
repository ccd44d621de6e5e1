"""PostgreSQL: sq_push_batch (migrations/postgresql, SECURITY DEFINER) on the caller's psycopg or
asyncpg connection, under a savepoint: on PostgreSQL an error aborts the whole transaction, so a
refused push (an id another queue holds, a missing schema) is rolled back to the savepoint and
leaves the caller's transaction usable.

One statement does the push and reads the schema's version, from sq_push_limits() (SECURITY
DEFINER too, so the application's role needs EXECUTE on sq_push, sq_push_batch and sq_push_limits
only, no right on the tables): sq_push_batch runs only when that version is this code's, and it
checks the payload limits itself. Before, the outbox read the version and limits in a statement of
their own, then the push read the limits again: one round trip in four of a push, for nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simplequeue.outbox.items import (
    Checked,
    NotInTransaction,
    Pushed,
    as_uuid,
    batch_json,
    check_version,
    codes_of,
    is_missing_table,
    no_schema,
    refusal,
)
from simplequeue.outbox.savepoints import STANDARD, STANDARD_ONE_TRIP, savepoint, savepoint_async
from simplequeue.store.migrations import latest_version

# The schema's version, and the push where it is this code's: for another version, sq_push_batch
# is handed no items (a condition beside the call would not stop the planner from calling it
# with them), and the answer is one row of NULLs besides the version.
PUSH_SQL = (
    "SELECT l.schema_version, p.id, p.created FROM sq_push_limits() AS l"
    " LEFT JOIN LATERAL sq_push_batch(CASE WHEN l.schema_version = CAST({version} AS integer)"
    " THEN CAST({items} AS json) ELSE '[]'::json END) AS p ON true"
)


def pushed(rows: Sequence[Sequence[Any]]) -> list[Pushed]:
    """PUSH_SQL's answer: every item's, or SchemaNotReady when the version is not this code's."""
    check_version(rows[0][0] if rows else None, "postgresql")
    return [Pushed(as_uuid(row[1]), bool(row[2])) for row in rows]


def version() -> int:
    return latest_version("postgresql")


def values(items: Sequence[Checked]) -> dict[str, Any]:
    """PUSH_SQL's parameters, by name."""
    return {"items": batch_json(items), "version": version()}


def translate(exc: BaseException) -> BaseException:
    """The outbox's error for what the database said, or the error itself."""
    if type(exc).__module__.startswith("simplequeue."):
        return exc
    # A function that is not there (undefined_function: a schema before v5, or none on the
    # search_path) is a schema not ready, as a missing table is.
    if is_missing_table(exc) or "42883" in codes_of(exc):
        return no_schema("postgresql")
    return refusal(exc) or exc


def push_psycopg(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On a psycopg.Connection. IDLE is outside a transaction (autocommit, or nothing run yet),
    INTRANS inside; INERROR is inside a failed one, which PostgreSQL refuses to go on with."""
    _in_transaction(conn)
    with conn.cursor() as cur, savepoint(cur.execute, STANDARD, translate):
        cur.execute(PUSH_SQL.format(items="%(items)s", version="%(version)s"), values(items))
        return pushed(cur.fetchall())


async def push_psycopg_async(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On a psycopg.AsyncConnection: as push_psycopg."""
    _in_transaction(conn)
    async with conn.cursor() as cur, savepoint_async(cur.execute, STANDARD, translate):
        await cur.execute(PUSH_SQL.format(items="%(items)s", version="%(version)s"), values(items))
        return pushed(await cur.fetchall())


async def push_asyncpg(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On an asyncpg.Connection or a pool's connection proxy. The savepoint is plain SQL rather
    than a nested conn.transaction(), which asyncpg refuses in a transaction begun by a BEGIN."""
    if not conn.is_in_transaction():
        raise NotInTransaction()
    async with savepoint_async(conn.execute, STANDARD_ONE_TRIP, translate):
        return pushed(
            await conn.fetch(PUSH_SQL.format(items="$1", version="$2"), batch_json(items), version())
        )


def _in_transaction(conn: Any) -> None:
    """psycopg's (sync or async) connection is in a transaction, or the push is refused."""
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status not in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        raise NotInTransaction()
