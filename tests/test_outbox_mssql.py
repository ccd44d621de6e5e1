"""simplequeue.outbox on SQL Server, by shape only: what it sends through pyodbc (and SQLAlchemy's
mssql dialect) and how it reads the answers and refusals, on fakes that record every call. No SQL
Server runs here; the procedure itself is tested by the SQL Server suites."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from simplequeue import outbox
from simplequeue.outbox import alchemy, mssql
from simplequeue.store.migrations import latest_version
from sqlalchemy.dialects import mssql as mssql_dialect

LIMITS = ("262144", "64")
ANSWER = UUID("0b6f3d4e-8a5c-4d8e-9a55-2c1f0a7e6b10")


class FakeCursor:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn
        self.description: Any = None
        self.rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, *params: Any) -> FakeCursor:
        self.conn.sent.append((sql, params))
        if failure := self.conn.failures.get(sql):
            raise failure
        self.description = None
        self.rows = []
        if sql == mssql.TRANCOUNT_SQL:
            self.rows = [(self.conn.trancount,)]
        elif sql == mssql.CHECK_SQL:
            self.rows = [(self.conn.version, *LIMITS)]
        elif sql == mssql.PUSH_SQL:
            self.rows = [(str(ANSWER).upper(), True)] + [(str(uuid4()), False)] * (
                len(json.loads(params[0])) - 1
            )
        if self.rows:
            self.description = [("column",)]
        return self

    def fetchone(self) -> tuple[Any, ...]:
        return self.rows[0]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def nextset(self) -> bool:
        return False

    def close(self) -> None:
        self.conn.closed_cursors += 1


class FakeConnection:
    """pyodbc.Connection's part the outbox uses."""

    def __init__(self, autocommit: bool = False, trancount: int = 0) -> None:
        self.autocommit = autocommit
        self.trancount = trancount
        self.version = latest_version("mssql")
        self.sent: list[tuple[str, tuple[Any, ...]]] = []
        self.failures: dict[str, Exception] = {}
        self.closed_cursors = 0

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)


class FakeOdbcError(Exception):
    """As pyodbc words SQL Server's errors: (SQLSTATE, '[SQLSTATE] [driver]text (number) (function)')."""


def _odbc_error(number: int, text: str) -> FakeOdbcError:
    return FakeOdbcError(
        "42000",
        f"[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]{text} ({number}) (SQLExecDirectW)",
    )


@pytest.fixture(autouse=True)
def fake_pyodbc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The outbox tells a pyodbc connection by pyodbc.Connection: here, the fake's class."""
    monkeypatch.setitem(sys.modules, "pyodbc", types.SimpleNamespace(Connection=FakeConnection))


def test_a_push_saves_a_savepoint_checks_the_schema_and_calls_the_procedure_with_json() -> None:
    conn = FakeConnection()
    item_id = uuid4()
    created_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    pushed = outbox.push(
        conn, "emails", {"order": 42, "note": "é"}, id=item_id, priority=5, group="g", dedup_key="k",
        created_at=created_at, delay_seconds=1.5,
    )  # fmt: skip

    assert pushed == outbox.Pushed(ANSWER, created=True)  # pyodbc's text uniqueidentifier, as a UUID
    assert [sql for sql, _ in conn.sent] == [
        "SAVE TRANSACTION simplequeue_push",
        mssql.CHECK_SQL,
        "EXEC dbo.sq_push_batch @items = ?",
    ]
    assert "FROM dbo.sq_schema_version" in mssql.CHECK_SQL
    assert "FROM dbo.sq_settings WHERE name = 'max_payload_bytes'" in mssql.CHECK_SQL
    [items] = conn.sent[-1][1]
    assert json.loads(items) == [
        {
            "payload": {"order": 42, "note": "é"},
            "queue": "emails",
            "priority": 5,
            "delay_seconds": 1.5,
            "created_at": "2026-01-02T03:04:05+00:00",
            "group_key": "g",
            "dedup_key": "k",
            "id": str(item_id),
        }
    ]
    assert conn.closed_cursors == 1


def test_push_many_sends_one_array_and_only_what_the_caller_gave() -> None:
    conn = FakeConnection()
    answers = outbox.push_many(conn, "emails", [{"payload": 1}, {"payload": None, "dedup_key": "k"}])
    assert [a.created for a in answers] == [True, False]
    [items] = conn.sent[-1][1]
    assert items == '[{"payload":1,"queue":"emails"},{"payload":null,"queue":"emails","dedup_key":"k"}]'


def test_autocommit_false_is_a_transaction_and_autocommit_true_needs_a_begin() -> None:
    assert mssql.in_transaction(FakeConnection(autocommit=False))
    assert mssql.in_transaction(FakeConnection(autocommit=True, trancount=1))

    conn = FakeConnection(autocommit=True, trancount=0)
    with pytest.raises(outbox.NotInTransaction, match="autocommit"):
        outbox.push(conn, "emails", 1)
    assert [sql for sql, _ in conn.sent] == ["SELECT @@TRANCOUNT"]


@pytest.mark.parametrize(
    ("number", "error"),
    [(51409, outbox.ItemExists), (51400, outbox.InvalidInput), (51413, outbox.PayloadTooLarge)],
)
def test_the_procedures_refusals_are_the_outboxs_errors_and_roll_back_to_the_savepoint(
    number: int, error: type[Exception]
) -> None:
    conn = FakeConnection()
    conn.failures[mssql.PUSH_SQL] = _odbc_error(number, "simplequeue: items[0] is refused")
    with pytest.raises(error, match=r"^simplequeue: items\[0\] is refused$"):
        outbox.push(conn, "emails", 1)
    assert conn.sent[-1][0] == "IF XACT_STATE() = 1 ROLLBACK TRANSACTION simplequeue_push"


def test_another_error_is_the_drivers_own_after_the_savepoint_is_rolled_back() -> None:
    conn = FakeConnection()
    conn.failures[mssql.PUSH_SQL] = _odbc_error(1205, "Transaction was deadlocked")
    with pytest.raises(FakeOdbcError):
        outbox.push(conn, "emails", 1)
    assert conn.sent[-1][0].startswith("IF XACT_STATE() = 1 ROLLBACK")


def test_a_schema_missing_or_out_of_date_is_named() -> None:
    conn = FakeConnection()
    conn.failures[mssql.CHECK_SQL] = _odbc_error(208, "Invalid object name 'dbo.sq_settings'.")
    with pytest.raises(outbox.SchemaNotReady, match="simplequeue migrate"):
        outbox.push(conn, "emails", 1)

    conn = FakeConnection()
    conn.version -= 1
    with pytest.raises(outbox.SchemaNotReady, match=f"at version {conn.version}, this code needs"):
        outbox.push(conn, "emails", 1)
    assert mssql.PUSH_SQL not in [sql for sql, _ in conn.sent]


def test_payloads_are_checked_before_anything_is_sent() -> None:
    conn = FakeConnection()
    with pytest.raises(outbox.InvalidPayload):
        outbox.push(conn, "emails", float("inf"))
    with pytest.raises(outbox.InvalidInput):
        outbox.push(conn, "emails", 1, dedup_key="trailing ")
    assert conn.sent == []


class FakeAlchemyConnection:
    """SQLAlchemy's Connection's part the outbox uses, on the mssql dialect."""

    def __init__(self) -> None:
        self.dialect = mssql_dialect.pyodbc.dialect()
        self.sent: list[tuple[str, Any]] = []
        self.nested = 0

    def in_transaction(self) -> bool:
        return True

    @contextmanager
    def begin_nested(self) -> Iterator[None]:
        self.nested += 1
        yield

    def execute(self, statement: Any, params: Any = None) -> Any:
        self.sent.append((statement.text, params))
        rows = [(latest_version("mssql"), *LIMITS)] if params is None else [(str(ANSWER), 1)]
        return types.SimpleNamespace(fetchone=lambda: rows[0], all=lambda: rows)


def test_sqlalchemy_on_mssql_calls_the_procedure_in_a_nested_transaction() -> None:
    conn = FakeAlchemyConnection()
    [pushed] = alchemy.push_connection(conn, outbox.items.check_items("emails", [{"payload": [1]}]))

    assert pushed == outbox.Pushed(ANSWER, created=True)
    assert conn.nested == 1
    assert conn.sent[0] == (mssql.CHECK_SQL, None)
    assert conn.sent[1] == (
        "EXEC dbo.sq_push_batch @items = :items",
        {"items": '[{"payload":[1],"queue":"emails"}]'},
    )
