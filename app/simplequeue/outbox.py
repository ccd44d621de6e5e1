"""Push inside the caller's own database transaction: the item exists if and only if the
caller's transaction commits (the dual-write problem, without an outbox relay).

    with sqlite3.connect("simplequeue.db") as conn:          # the service's own SQLite file
        conn.execute("INSERT INTO orders (id) VALUES (?)", (42,))
        outbox.push(conn, "emails", {"order": 42})           # committed with the order, or not at all

Today this takes a `sqlite3` connection to the service's SQLite database; the push runs the SQLite
store's own statements on it, so it behaves as a push through the service does (the same dedup
keys, remembered ids, ordered groups and payload rules). What the caller must know:

- The connection must be inside a transaction (a statement of the caller's already began one, or
  an explicit BEGIN): a push outside one is refused (NotInTransaction), since it would commit on
  its own.
- Nothing is visible to workers before the caller commits; a rollback leaves no trace (no item,
  no dedup key, no queue). The push runs under a savepoint, so a refused push (ItemExists, a bad
  payload) leaves the caller's transaction as it was, and the caller may go on and commit.
- A dedup key or a remembered id that matches answers `created = False` and never raises.
- Workers long-polling on the service find the item within SIMPLEQUEUE_WAIT_RECHECK_SECONDS of
  the commit (1 s by default).
- SQLite has one writer: the caller's transaction holds the database's write lock from its first
  write until it commits, so push last, just before committing, and keep the transaction short.
- API keys do not apply: whoever can write the database file can push.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from simplequeue.domain import NewItem, SchemaNotReady, encode_payload, system_clock
from simplequeue.domain.names import QUEUE_NAME, key_problem, text_problem
from simplequeue.store.migrations import latest_version
from simplequeue.store.sqlite.store import push_on

MAX_PAYLOAD_BYTES = 256 * 1024  # the service's default (SIMPLEQUEUE_MAX_PAYLOAD_BYTES)


class NotInTransaction(RuntimeError):
    """The connection is not inside a transaction: begin one (or write first), then push."""

    def __init__(self) -> None:
        super().__init__((type(self).__doc__ or "").strip())


class InvalidInput(ValueError):
    """A queue name, key, priority or delay the service would refuse. (Not a QueueError: those are
    the service's answers, each a code of the HTTP API's envelope.)"""


@dataclass(frozen=True, slots=True)
class Pushed:
    id: UUID
    created: bool


def push(
    conn: sqlite3.Connection,
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
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> Pushed:
    """Push one item in the caller's transaction; see the module's docstring."""
    item = {
        "payload": payload,
        "id": id,
        "priority": priority,
        "delay_seconds": delay_seconds,
        "not_before": not_before,
        "created_at": created_at,
        "group": group,
        "dedup_key": dedup_key,
    }
    [pushed] = push_many(conn, queue, [item], max_payload_bytes=max_payload_bytes)
    return pushed


def push_many(
    conn: sqlite3.Connection,
    queue: str,
    items: Sequence[Mapping[str, Any]],
    *,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
) -> list[Pushed]:
    """Push items (mappings of push's keyword arguments, `payload` required) in the caller's
    transaction, all or nothing; one answer per item, in order."""
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError(
            f"simplequeue.outbox takes a sqlite3.Connection to the service's SQLite database, not "
            f"{type(conn).__name__}; on PostgreSQL and SQL Server, push through the service"
        )
    if not conn.in_transaction:
        raise NotInTransaction()
    now = system_clock()
    new = [_new_item(queue, item, now, n, max_payload_bytes) for n, item in enumerate(items)]
    _check_schema(conn)
    conn.execute("SAVEPOINT simplequeue_push")
    try:
        results = push_on(conn, new, now)
    except BaseException:
        conn.execute("ROLLBACK TO simplequeue_push")
        conn.execute("RELEASE simplequeue_push")
        raise
    conn.execute("RELEASE simplequeue_push")
    return [Pushed(r.id, r.created) for r in results]


def _key(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where} must be text")
    if problem := text_problem(value) or key_problem(value):
        raise InvalidInput(f"{where}: {problem}")
    return value


def _new_item(queue: str, item: Mapping[str, Any], now: datetime, n: int, limit: int) -> NewItem:
    if not QUEUE_NAME.match(queue):
        raise InvalidInput(f"queue {queue!r} is not 1..128 characters of [A-Za-z0-9._-]")
    priority = item.get("priority") or 0
    if not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
        raise InvalidInput(f"items[{n}].priority must be a 32-bit integer")
    delay = item.get("delay_seconds") or 0.0
    if not 0 <= delay <= 31536000:
        raise InvalidInput(f"items[{n}].delay_seconds must be from 0 to 31536000")
    for name in ("created_at", "not_before"):
        moment = item.get(name)
        if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
            raise InvalidInput(f"items[{n}].{name} must be a datetime with a time zone")
    given = item.get("id")
    return NewItem(
        id=given or uuid4(),
        queue=queue,
        payload_json=encode_payload(item["payload"], limit, f"items[{n}].payload"),
        created_at=item.get("created_at") or now,
        priority=priority,
        group=_key(item.get("group"), f"items[{n}].group"),
        dedup_key=_key(item.get("dedup_key"), f"items[{n}].dedup_key"),
        delay_seconds=float(delay),
        not_before=item.get("not_before"),
        id_given=given is not None,
    )


def _check_schema(conn: sqlite3.Connection) -> None:
    try:
        [found] = conn.execute("SELECT max(version) FROM sq_schema_version").fetchone()
    except sqlite3.OperationalError as exc:
        raise SchemaNotReady("this database has no simplequeue schema: run `simplequeue migrate`") from exc
    if found != latest_version("sqlite"):
        raise SchemaNotReady(
            f"this database's simplequeue schema is at version {found}, this code needs "
            f"{latest_version('sqlite')}: run `simplequeue migrate`"
        )
