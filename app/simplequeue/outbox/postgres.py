"""PostgreSQL: sq_push_batch (migrations/postgresql, SECURITY DEFINER) on the caller's psycopg or
asyncpg connection, under a savepoint: on PostgreSQL an error aborts the whole transaction, so a
refused push (an id another queue holds, a missing schema) is rolled back to the savepoint and
leaves the caller's transaction usable.

The schema's version and limits come from sq_push_limits() (SECURITY DEFINER too), not from the
tables: the application's role needs EXECUTE on sq_push, sq_push_batch and sq_push_limits only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simplequeue.outbox.items import (
    Checked,
    NotInTransaction,
    Pushed,
    as_uuid,
    batch_json,
    check_limits,
    codes_of,
    is_missing_table,
    limits_from,
    no_schema,
    refusal,
)
from simplequeue.outbox.savepoints import STANDARD, STANDARD_ONE_TRIP, savepoint, savepoint_async

# The row limits_from reads: (schema_version, max_payload_bytes, max_payload_depth).
LIMITS_SQL = "SELECT schema_version, max_payload_bytes, max_payload_depth FROM sq_push_limits()"
PUSH_SQL = "SELECT id, created FROM sq_push_batch({}::json)"


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
        cur.execute(LIMITS_SQL)
        check_limits(items, limits_from(cur.fetchone(), "postgresql"))
        cur.execute(PUSH_SQL.format("%s"), (batch_json(items),))
        rows = cur.fetchall()
    return [Pushed(as_uuid(i), bool(c)) for i, c in rows]


async def push_psycopg_async(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On a psycopg.AsyncConnection: as push_psycopg."""
    _in_transaction(conn)
    async with conn.cursor() as cur, savepoint_async(cur.execute, STANDARD, translate):
        await cur.execute(LIMITS_SQL)
        check_limits(items, limits_from(await cur.fetchone(), "postgresql"))
        await cur.execute(PUSH_SQL.format("%s"), (batch_json(items),))
        rows = await cur.fetchall()
    return [Pushed(as_uuid(i), bool(c)) for i, c in rows]


async def push_asyncpg(conn: Any, items: Sequence[Checked]) -> list[Pushed]:
    """On an asyncpg.Connection or a pool's connection proxy. The savepoint is plain SQL rather
    than a nested conn.transaction(), which asyncpg refuses in a transaction begun by a BEGIN."""
    if not conn.is_in_transaction():
        raise NotInTransaction()
    async with savepoint_async(conn.execute, STANDARD_ONE_TRIP, translate):
        check_limits(items, limits_from(await conn.fetchrow(LIMITS_SQL), "postgresql"))
        rows = await conn.fetch(PUSH_SQL.format("$1"), batch_json(items))
    return [Pushed(as_uuid(r[0]), bool(r[1])) for r in rows]


def _in_transaction(conn: Any) -> None:
    """psycopg's (sync or async) connection is in a transaction, or the push is refused."""
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status not in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        raise NotInTransaction()
