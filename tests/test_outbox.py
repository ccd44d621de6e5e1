"""simplequeue.outbox on SQLite: a push in the caller's own transaction exists if and only if the
caller commits, and behaves as a push through the service does."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from simplequeue import outbox
from simplequeue.domain import InvalidPayload, ItemExists, PayloadTooLarge, SchemaNotReady, names
from simplequeue.store.sqlite.store import SqliteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "sq.db"))
    await store.open()
    await store.migrate()
    yield store
    await store.close()


@pytest.fixture
def conn(store: SqliteStore, tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """The application's own connection to the service's database, with a table of its own."""
    conn = sqlite3.connect(tmp_path / "sq.db", timeout=5)
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
    conn.commit()
    yield conn
    conn.close()


async def test_a_committed_push_is_popped_with_its_payload_and_options(
    store: SqliteStore, conn: sqlite3.Connection
) -> None:
    conn.execute("INSERT INTO orders (id) VALUES (1)")
    pushed = outbox.push(conn, "emails", {"order": 1}, priority=5, group="customer-1")
    assert not await store.queue_exists("emails")  # nothing visible before the commit
    conn.commit()

    [item] = await store.pop("emails", 10, 30)
    assert (item.id, item.payload, item.priority, item.group) == (pushed.id, {"order": 1}, 5, "customer-1")
    assert pushed.created


async def test_a_push_with_a_fairness_key_takes_its_turn_among_the_tenants(
    store: SqliteStore, conn: sqlite3.Connection
) -> None:
    conn.execute("INSERT INTO orders (id) VALUES (3)")
    outbox.push_many(conn, "reports", [{"payload": n, "fairness_key": "big"} for n in range(5)])
    outbox.push(conn, "reports", "small", fairness_key="small")
    conn.commit()

    popped = await store.pop("reports", 3, 30)
    assert [(i.payload, i.fairness_key) for i in popped] == [(0, "big"), ("small", "small"), (1, "big")]


async def test_a_rollback_leaves_no_trace(store: SqliteStore, conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO orders (id) VALUES (2)")
    outbox.push(conn, "rolled", {"order": 2}, dedup_key="order-2")
    conn.rollback()

    assert not await store.queue_exists("rolled")
    conn.execute("INSERT INTO orders (id) VALUES (2)")
    assert outbox.push(conn, "rolled", {"order": 2}, dedup_key="order-2").created  # the key is free
    conn.commit()
    assert len(await store.pop("rolled", 10, 30)) == 1


async def test_a_duplicate_answers_created_false_and_the_callers_row_commits(
    store: SqliteStore, conn: sqlite3.Connection
) -> None:
    conn.execute("BEGIN")
    first = outbox.push(conn, "dups", 1, dedup_key="k")
    conn.commit()
    conn.execute("INSERT INTO orders (id) VALUES (3)")
    again = outbox.push(conn, "dups", 2, dedup_key="k")
    conn.commit()

    assert (again.id, again.created) == (first.id, False)
    assert conn.execute("SELECT count(*) FROM orders WHERE id = 3").fetchone() == (3 - 2,)
    assert len(await store.pop("dups", 10, 30)) == 1


async def test_a_producers_id_is_remembered_after_its_item_finished(
    store: SqliteStore, conn: sqlite3.Connection
) -> None:
    item_id = uuid4()
    conn.execute("BEGIN")
    outbox.push(conn, "ids", "x", id=item_id)
    conn.commit()
    [popped] = await store.pop("ids", 1, 30)
    await store.complete(popped.id, popped.lease_token)

    conn.execute("INSERT INTO orders (id) VALUES (4)")
    assert outbox.push(conn, "ids", "x", id=item_id) == outbox.Pushed(item_id, created=False)
    conn.commit()
    assert await store.pop("ids", 1, 30) == []


async def test_a_refused_push_leaves_the_callers_transaction_as_it_was(
    store: SqliteStore, conn: sqlite3.Connection
) -> None:
    conn.execute("BEGIN")
    taken = outbox.push(conn, "a", 1, id=uuid4())
    conn.commit()
    conn.execute("INSERT INTO orders (id) VALUES (5)")
    with pytest.raises(ItemExists):  # the id is another queue's: nothing of this batch goes in
        outbox.push_many(conn, "b", [{"payload": 1}, {"payload": 2, "id": taken.id}])
    conn.commit()

    assert conn.execute("SELECT count(*) FROM orders WHERE id = 5").fetchone() == (1,)
    assert not await store.queue_exists("b")


def test_a_push_outside_a_transaction_is_refused(conn: sqlite3.Connection) -> None:
    assert not conn.in_transaction
    with pytest.raises(outbox.NotInTransaction):
        outbox.push(conn, "q", 1)


@pytest.mark.parametrize(
    ("payload", "error"),
    [(float("nan"), InvalidPayload), ("a\x00b", InvalidPayload), ("x" * 1_100_000, PayloadTooLarge)],
)
def test_payloads_follow_the_services_rules(conn: sqlite3.Connection, payload: object, error: type) -> None:
    conn.execute("INSERT INTO orders (id) VALUES (6)")
    with pytest.raises(error):
        outbox.push(conn, "q", payload)
    conn.rollback()


@pytest.mark.parametrize(
    "options",
    [
        {"queue": "has space"},
        {"dedup_key": "ends with a space "},
        {"group": ""},
        {"fairness_key": "x" * 129},
        {"priority": 2**31},
        {"delay_seconds": -1},
        {"created_at": datetime(2026, 1, 1)},  # no time zone
    ],
)
def test_names_keys_and_options_follow_the_services_rules(conn: sqlite3.Connection, options: dict) -> None:
    conn.execute("INSERT INTO orders (id) VALUES (7)")
    queue = options.pop("queue", "q")
    with pytest.raises(outbox.InvalidInput):
        outbox.push(conn, queue, 1, **options)
    conn.rollback()


def test_the_queue_name_rule_is_the_services() -> None:
    assert outbox.QUEUE_NAME is names.QUEUE_NAME


def test_a_database_without_the_schema_is_named(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "empty.db")
    conn.execute("CREATE TABLE orders (id INTEGER)")
    conn.execute("INSERT INTO orders VALUES (1)")
    with pytest.raises(SchemaNotReady, match="simplequeue migrate"):
        outbox.push(conn, "q", 1, created_at=datetime.now(UTC))
    conn.close()


async def test_a_connection_of_another_kind_is_refused_by_name(conn: sqlite3.Connection) -> None:
    with pytest.raises(TypeError, match="takes a connection of sqlite3, psycopg, pyodbc or SQLAlchemy"):
        outbox.push(object(), "q", 1)
    with pytest.raises(TypeError, match=r"is a sync connection: use outbox\.push_many"):
        await outbox.push_async(conn, "q", 1)
