"""Push inside the caller's own database transaction: the item exists if and only if the
caller's transaction commits (the dual-write problem, without an outbox relay). docs/outbox.md.

    with conn.transaction():                                   # psycopg; any driver below alike
        conn.execute("INSERT INTO orders (id) VALUES (%s)", (42,))
        outbox.push(conn, "emails", {"order": 42})             # committed with the order, or not at all

Connections taken, by their type (no driver is imported unless the caller's connection is one):

- push / push_many: sqlite3.Connection, psycopg.Connection, pyodbc.Connection, SQLAlchemy's
  Connection and Session (on SQLite, PostgreSQL or SQL Server underneath).
- push_async / push_many_async: asyncpg.Connection (and a pool's connections), psycopg's
  AsyncConnection, aiosqlite.Connection, SQLAlchemy's AsyncConnection and AsyncSession.

On SQLite the push runs the SQLite store's own statements on the caller's connection; on PostgreSQL
and SQL Server it calls the SQL entry point the migrations install (sq_push_batch), which the
service's own push runs too. Either way it behaves as a push through the service does (the same
dedup keys, remembered ids, ordered groups and payload rules). What the caller must know:

- The connection must be inside a transaction, or the push is refused (NotInTransaction), since it
  would commit on its own. (pyodbc with autocommit=False is always inside one.)
- Items, names and keys are checked by the service's rules before the database is touched; the
  payload's size limit is the database's (sq_settings, written by `simplequeue migrate`), and the
  schema's version must be this code's (SchemaNotReady otherwise).
- Nothing is visible to workers before the caller commits; a rollback leaves no trace (no item,
  no dedup key, no queue). The push runs under a savepoint, so a refused push (ItemExists: an id
  another queue's item holds; a bad payload) leaves the caller's transaction usable.
- A dedup key or a remembered id that matches answers `created = False` and never raises.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from simplequeue.domain import InvalidPayload, ItemExists, PayloadTooLarge, SchemaNotReady, attribute_of
from simplequeue.domain.publications import (
    PUBLICATIONS,
    InvalidPublication,
    Publication,
    publication_payload,
    relay_group,
)
from simplequeue.outbox.items import QUEUE_NAME, InvalidInput, NotInTransaction, Pushed, check_items

__all__ = [
    "QUEUE_NAME",
    "InvalidInput",
    "InvalidPayload",
    "InvalidPublication",
    "ItemExists",
    "NotInTransaction",
    "PayloadTooLarge",
    "Pushed",
    "SchemaNotReady",
    "publish",
    "publish_async",
    "push",
    "push_async",
    "push_many",
    "push_many_async",
]


def push(
    conn: Any,
    queue: str,
    payload: Any,
    *,
    id: UUID | None = None,
    priority: int = 0,
    delay_seconds: float = 0.0,
    not_before: datetime | None = None,
    created_at: datetime | None = None,
    group: str | None = None,
    dedup_key: str | None = None,
    fairness_key: str | None = None,
) -> Pushed:
    """Push one item in the caller's transaction, on a sync connection; see the module's docstring."""
    item = _item(payload, id, priority, delay_seconds, not_before, created_at, group, dedup_key)
    item["fairness_key"] = fairness_key
    [pushed] = push_many(conn, queue, [item])
    return pushed


def publish(
    conn: Any,
    topic: str,
    message: Any,
    *,
    subject: str | None = None,
    attributes: Mapping[str, Mapping[str, str]] | None = None,
    id: UUID | None = None,
    group: str | None = None,
    dedup_key: str | None = None,
) -> UUID:
    """Publish to a topic in the caller's transaction, on a sync connection: when it commits, the
    service delivers the message to every subscribed queue whose filter it passes (its relay, within
    moments); if it rolls back, nothing is delivered. Answers the message's id (`id`, or a new one):
    a publish repeated with it delivers nothing twice. attributes: {name: {"type", "value"}}, as the
    HTTP API takes them; group and dedup_key: a FIFO topic's MessageGroupId and
    MessageDeduplicationId. docs/sns.md, In your own transaction."""
    [pushed] = push_many(
        conn, PUBLICATIONS, [_publication(topic, message, subject, attributes, id, group, dedup_key)]
    )
    return pushed.id


async def publish_async(
    conn: Any,
    topic: str,
    message: Any,
    *,
    subject: str | None = None,
    attributes: Mapping[str, Mapping[str, str]] | None = None,
    id: UUID | None = None,
    group: str | None = None,
    dedup_key: str | None = None,
) -> UUID:
    """publish, on an async connection."""
    item = _publication(topic, message, subject, attributes, id, group, dedup_key)
    [pushed] = await push_many_async(conn, PUBLICATIONS, [item])
    return pushed.id


def _publication(
    topic: str,
    message: Any,
    subject: str | None,
    attributes: Mapping[str, Mapping[str, str]] | None,
    id: UUID | None,
    group: str | None,
    dedup_key: str | None,
) -> dict[str, Any]:
    """The PUBLICATIONS item (domain.publications), checked by the rules a publish checks that need
    no database; a topic that does not exist is found by the relay (the item dies, with the reason)."""
    try:
        given = {n: attribute_of(n, a["type"], a["value"]) for n, a in (attributes or {}).items()}
    except (KeyError, TypeError):
        raise InvalidInput("attributes are {name: {'type': ..., 'value': ...}}") from None
    publication = Publication(message, subject, given or None, None, group, dedup_key)
    payload = publication_payload(topic, publication)
    return {"payload": payload, "id": id or uuid4(), "group": relay_group(topic)}


def push_many(conn: Any, queue: str, items: Sequence[Mapping[str, Any]]) -> list[Pushed]:
    """Push items (mappings of push's keyword arguments, `payload` required) in the caller's
    transaction, all or nothing; one answer per item, in order."""
    from simplequeue.outbox import alchemy, mssql, postgres
    from simplequeue.outbox.sqlite import push_checked

    if isinstance(conn, sqlite3.Connection):
        return push_checked(conn, check_items(queue, items))
    if _is(conn, "psycopg", "Connection"):
        return postgres.push_psycopg(conn, check_items(queue, items))
    if _is(conn, "pyodbc", "Connection"):
        return mssql.push_pyodbc(conn, check_items(queue, items))
    if _is(conn, "sqlalchemy.engine", "Connection"):
        return alchemy.push_connection(conn, check_items(queue, items))
    if _is(conn, "sqlalchemy.orm", "Session"):
        return alchemy.push_session(conn, check_items(queue, items))
    if any(_is(conn, *kind) for kind in _ASYNC):
        raise TypeError(f"{type(conn).__name__} is an async connection: use outbox.push_many_async(...)")
    raise TypeError(_unknown(conn))


async def push_async(
    conn: Any,
    queue: str,
    payload: Any,
    *,
    id: UUID | None = None,
    priority: int = 0,
    delay_seconds: float = 0.0,
    not_before: datetime | None = None,
    created_at: datetime | None = None,
    group: str | None = None,
    dedup_key: str | None = None,
    fairness_key: str | None = None,
) -> Pushed:
    """push, on an async connection."""
    item = _item(payload, id, priority, delay_seconds, not_before, created_at, group, dedup_key)
    item["fairness_key"] = fairness_key
    [pushed] = await push_many_async(conn, queue, [item])
    return pushed


async def push_many_async(conn: Any, queue: str, items: Sequence[Mapping[str, Any]]) -> list[Pushed]:
    """push_many, on an async connection."""
    from simplequeue.outbox import alchemy, postgres
    from simplequeue.outbox.sqlite import push_aiosqlite

    if _is(conn, "asyncpg", "Connection"):  # a pool's proxies are instances too (asyncpg's metaclass)
        return await postgres.push_asyncpg(conn, check_items(queue, items))
    if _is(conn, "psycopg", "AsyncConnection"):
        return await postgres.push_psycopg_async(conn, check_items(queue, items))
    if _is(conn, "aiosqlite", "Connection"):
        return await push_aiosqlite(conn, check_items(queue, items))
    if _is(conn, "sqlalchemy.ext.asyncio", "AsyncConnection"):
        return await alchemy.push_async_connection(conn, check_items(queue, items))
    if _is(conn, "sqlalchemy.ext.asyncio", "AsyncSession"):
        return await alchemy.push_async_session(conn, check_items(queue, items))
    if isinstance(conn, sqlite3.Connection) or any(_is(conn, *kind) for kind in _SYNC):
        raise TypeError(f"{type(conn).__name__} is a sync connection: use outbox.push_many(...)")
    raise TypeError(_unknown(conn))


_SYNC = [
    ("psycopg", "Connection"),
    ("pyodbc", "Connection"),
    ("sqlalchemy.engine", "Connection"),
    ("sqlalchemy.orm", "Session"),
]
_ASYNC = [
    ("asyncpg", "Connection"),
    ("psycopg", "AsyncConnection"),
    ("aiosqlite", "Connection"),
    ("sqlalchemy.ext.asyncio", "AsyncConnection"),
    ("sqlalchemy.ext.asyncio", "AsyncSession"),
]


def _is(conn: Any, module: str, name: str) -> bool:
    """Whether conn is an instance of module.name, importing nothing: a driver nobody imported
    made no connection."""
    found = sys.modules.get(module)
    kind = getattr(found, name, None) if found is not None else None
    return isinstance(kind, type) and isinstance(conn, kind)


def _unknown(conn: Any) -> str:
    return (
        f"simplequeue.outbox takes a connection of sqlite3, psycopg, pyodbc or SQLAlchemy (push), or of "
        f"asyncpg, psycopg, aiosqlite or SQLAlchemy's asyncio (push_async), not {type(conn).__name__}"
    )


def _item(
    payload: Any,
    id: UUID | None,
    priority: int,
    delay_seconds: float,
    not_before: datetime | None,
    created_at: datetime | None,
    group: str | None,
    dedup_key: str | None,
) -> dict[str, Any]:
    return {
        "payload": payload,
        "id": id,
        "priority": priority,
        "delay_seconds": delay_seconds,
        "not_before": not_before,
        "created_at": created_at,
        "group": group,
        "dedup_key": dedup_key,
    }
