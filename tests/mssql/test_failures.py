"""The SQL Server dialect's failure paths, through the real pyodbc exception classes: FreeTDS's
deadlock and lock-timeout reports, error numbers that only look like native codes, a deadlock
victim run again, a link lost mid-statement, a commit that fails, and every str parameter bound
as NVARCHAR(MAX) (long text would otherwise go as NTEXT, which OPENJSON and comparisons refuse).
Needs pyodbc, hence unixODBC: scripts/test installs it, and CI requires it."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

import pytest

pyodbc = pytest.importorskip("pyodbc", reason="pyodbc needs unixODBC (apt-get install unixodbc)")

from simplequeue.domain import (  # noqa: E402
    DatabaseUnavailable,
    ItemExists,
    QueueError,
    StoreError,
)
from simplequeue.domain.errors import DatabaseMisconfigured  # noqa: E402
from simplequeue.service import batches  # noqa: E402
from simplequeue.store.mssql import odbc  # noqa: E402
from simplequeue.store.mssql.errors import Deadlocked, native_errors, translated_errors  # noqa: E402
from simplequeue.store.mssql.statements import Q  # noqa: E402
from simplequeue.store.mssql.store import MssqlStore  # noqa: E402

from tests.mssql.helpers import (  # noqa: E402
    QUERY_NAMES,
    URL,
    FakeConnection,
    FakeCursor,
    Result,
)

FREETDS = "[FreeTDS][SQL Server]"
MSODBC = "[Microsoft][ODBC Driver 18 for SQL Server][SQL Server]"


def test_our_sql_wvarchar_is_pyodbcs() -> None:
    assert odbc.SQL_WVARCHAR == pyodbc.SQL_WVARCHAR


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        # FreeTDS reports a deadlock victim and a lock timeout under HY000, not 40001 / HYT00.
        (
            pyodbc.Error(
                "HY000",
                FREETDS + "Transaction (Process ID 55) was deadlocked on lock "
                "resources with another process and has been chosen as the deadlock victim. "
                "Rerun the transaction. (1205) (SQLExecDirectW)",
            ),
            Deadlocked,
        ),
        (
            pyodbc.Error("HY000", FREETDS + "Lock request time out period exceeded. (1222) (SQLExecDirectW)"),
            DatabaseUnavailable,
        ),
        (
            pyodbc.ProgrammingError(
                "40001", MSODBC + "Transaction (Process ID 61) was deadlocked ... (1205) (SQLExecDirectW)"
            ),
            Deadlocked,
        ),
        # A number in parentheses inside the text is not an error number: (40613) here is a key's
        # value, not Azure's "database not available".
        (
            pyodbc.IntegrityError(
                "23000",
                MSODBC + "Violation of PRIMARY KEY constraint 'pk_x'. Cannot "
                "insert duplicate key in object 'dbo.x'. The duplicate key value is "
                "(40613). (2627) (SQLExecDirectW)",
            ),
            StoreError,
        ),
        (
            pyodbc.IntegrityError(
                "23000",
                MSODBC + "Cannot insert duplicate key row in object 'dbo.sq_items' "
                "with unique index 'sq_items_id_key'. The duplicate key value is (1205). "
                "(2601) (SQLExecDirectW); " + MSODBC + "The statement has been "
                "terminated. (3621) (SQLExecDirectW)",
            ),
            ItemExists,
        ),
    ],
    ids=["freetds-deadlock", "freetds-lock-timeout", "odbc18-deadlock", "number-in-text", "two-records"],
)
async def test_native_error_numbers_decide_whatever_the_sqlstate(error: Exception, expected: type) -> None:
    with pytest.raises((QueueError, Deadlocked)) as raised:
        async with translated_errors():
            raise error
    assert type(raised.value) is expected
    assert raised.value.__cause__ is error


def test_native_errors_are_the_numbers_before_the_odbc_function() -> None:
    message = (
        MSODBC
        + "Value (7) is odd (8) (SQLExecDirectW); "
        + MSODBC
        + "The statement has been terminated. (3621) "
        "(SQLExecDirectW)"
    )
    assert native_errors(message) == {8, 3621}


# --- what SQL Server refuses: named in one line (never the password) --------------------------------


@pytest.mark.parametrize(
    ("error", "detail"),
    [
        (
            pyodbc.InterfaceError(
                "28000",
                "[28000] " + MSODBC + "Login failed for user 'app'. (18456) (SQLDriverConnect)",
            ),
            "login failed for user 'app': check the user name and password (SQL Server error 18456)",
        ),
        (
            pyodbc.OperationalError(
                "42000",
                "[42000] " + FREETDS + "Login failed for user 'app'. (18456) (SQLDriverConnect)",
            ),
            "login failed for user 'app': check the user name and password (SQL Server error 18456)",
        ),
        (
            pyodbc.InterfaceError("28000", "[28000] [unixODBC][FreeTDS]Login refused (0) (SQLDriverConnect)"),
            "login failed: check the user name and password (SQLSTATE 28000)",
        ),
        (
            pyodbc.InterfaceError(
                "42000",
                "[42000] " + MSODBC + 'Cannot open database "jobs" requested by the login. The login '
                "failed. (4060) (SQLDriverConnect); [28000] "
                + MSODBC
                + "Login failed for user 'app'. (18456) (SQLDriverConnect)",
            ),
            'database "jobs" does not exist, or the login may not open it (SQL Server error 4060)',
        ),
    ],
    ids=["odbc18-login", "freetds-login", "no-native-number", "no-database"],
)
async def test_a_refused_login_or_database_is_named(error: Exception, detail: str) -> None:
    with pytest.raises(DatabaseMisconfigured) as raised:
        async with translated_errors():
            raise error
    assert raised.value.detail == detail
    assert raised.value.__cause__ is error
    assert isinstance(raised.value, DatabaseUnavailable)  # still a 503, still tried again

    with pytest.raises(DatabaseMisconfigured) as raised:
        async with translated_errors("db.internal:1433"):
            raise error
    assert " on db.internal:1433" in raised.value.detail


async def test_a_migration_refused_its_login_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import asynccontextmanager

    tries = 0
    refused = pyodbc.InterfaceError(
        "28000", "[28000] " + MSODBC + "Login failed for user 'sa'. (18456) (SQLDriverConnect)"
    )
    store = MssqlStore(URL)

    @asynccontextmanager
    async def acquire():  # type: ignore[no-untyped-def]
        nonlocal tries
        tries += 1
        raise refused
        yield

    monkeypatch.setattr(store, "_acquire", acquire)
    with pytest.raises(DatabaseMisconfigured, match="login failed for user 'sa'") as raised:
        await store.migrate()
    assert tries == 1  # migrate runs once: `simplequeue migrate` exits with the line at once
    assert "secret" in URL
    assert "secret" not in raised.value.detail


# --- a stand-in connection that fails on cue -------------------------------------------------------


@dataclass
class Flaky(FakeConnection):
    """Raises the listed errors, one per execute of the named query, then behaves."""

    failures: dict[str, list[Exception]] = field(default_factory=dict)
    close_fails: Exception | None = None
    commit_fails: Exception | None = None

    async def cursor(self) -> FakeCursor:
        return FlakyCursor(self)

    async def commit(self) -> None:
        if self.commit_fails is not None:
            raise self.commit_fails
        await super().commit()

    async def rollback(self) -> None:
        await super().rollback()


class FlakyCursor(FakeCursor):
    def __init__(self, conn: Flaky) -> None:
        super().__init__(conn)
        self._flaky = conn

    async def execute(self, sql: str, *params: Any) -> FakeCursor:
        pending = self._flaky.failures.get(QUERY_NAMES.get(sql, sql))
        if pending:
            raise pending.pop(0)
        return await super().execute(sql, *params)

    async def close(self) -> None:
        if self._flaky.close_fails is not None:
            raise self._flaky.close_fails
        await super().close()


def flaky_store(monkeypatch: pytest.MonkeyPatch, conn: Flaky) -> MssqlStore:
    from contextlib import asynccontextmanager

    store = MssqlStore(URL)

    @asynccontextmanager
    async def acquire():  # type: ignore[no-untyped-def]
        yield conn

    monkeypatch.setattr(store, "_acquire", acquire)
    monkeypatch.setattr(store.flow, "careful", lambda queue: False)  # see helpers.fake_store
    return store


def deadlock() -> Exception:
    return pyodbc.Error(
        "HY000", FREETDS + "Transaction (Process ID 55) was deadlocked ... (1205) (SQLExecDirectW)"
    )


def popped_row() -> Result:
    return Result(["seq", "id"], [])


async def test_a_deadlock_victim_is_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = Flaky(failures={"pop": [deadlock(), deadlock()]})
    store = flaky_store(monkeypatch, conn)
    assert await store.pop("orders", 1, 30) == []
    assert (conn.rollbacks, conn.commits, conn.names) == (2, 1, ["pop"])


async def test_a_deadlock_victim_four_times_over_is_database_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = Flaky(failures={"pop": [deadlock() for _ in range(4)]})
    store = flaky_store(monkeypatch, conn)
    with pytest.raises(DatabaseUnavailable) as raised:
        await store.pop("orders", 1, 30)
    assert (conn.rollbacks, conn.commits) == (4, 0)
    # A domain error with a code clients know: Deadlocked never leaves the store.
    assert type(raised.value) is DatabaseUnavailable
    assert isinstance(raised.value.__cause__, Deadlocked)


async def test_a_deadlock_in_a_redrive_is_database_unavailable_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = Flaky(failures={"pick_dead": [deadlock()]})
    store = flaky_store(monkeypatch, conn)
    with pytest.raises(DatabaseUnavailable) as raised:
        await batches.redrive(store, "orders", None, None)
    assert type(raised.value) is DatabaseUnavailable
    assert conn.rollbacks == 1


async def test_a_link_lost_mid_statement_is_told_not_the_failed_cursor_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lost = pyodbc.OperationalError("08S01", MSODBC + "Communication link failure (10054) (SQLExecDirectW)")
    conn = Flaky(
        failures={"get_item": [lost]},
        close_fails=pyodbc.ProgrammingError("HY000", "Attempt to use a closed cursor. (0) (SQLFreeStmt)"),
    )
    store = flaky_store(monkeypatch, conn)
    with pytest.raises(DatabaseUnavailable) as raised:
        await store.get_item(uuid4())
    assert raised.value.__cause__ is lost


async def test_a_failed_commit_closes_the_connection_so_the_pool_drops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = Flaky(
        commit_fails=pyodbc.OperationalError("08S01", MSODBC + "Communication link failure (0) (SQLEndTran)")
    )
    store = flaky_store(monkeypatch, conn)
    with pytest.raises(DatabaseUnavailable):
        await store.pop("orders", 1, 30)
    assert conn.closed


# --- binding -------------------------------------------------------------------------------------


async def test_every_str_parameter_is_bound_as_nvarchar_max_however_long() -> None:
    conn = FakeConnection()
    long_json = '["' + "q" * 5000 + '"]'  # past both drivers' limits (2,000 and 4,000 characters)
    await odbc.run_batch(conn, Q["next_visible_at"].sql, "", long_json)
    assert conn.names == ["next_visible_at"]


def test_no_parameter_reaches_openjson_or_a_comparison_directly() -> None:
    """Text parameters go through typed variables (DECLARE @x NVARCHAR(MAX) = :x, or a procedure's
    @argument = :x) or CASTs to other types before OPENJSON or a comparison sees them."""
    compared = re.compile(r"(=|<>|<|>|\bIN\b|\bLIKE\b)\s*\?|\?\s*(=|<>|<|>|\bIN\b|\bLIKE\b)")
    offending = []
    for name, query in Q.items():
        for line in query.sql.splitlines():
            code = re.sub(r"@\w+\s*=\s*\?", "", line.split("--", 1)[0])  # assignments
            if "?" not in code or code.lstrip().upper().startswith("DECLARE "):
                continue
            if re.search(r"OPENJSON\(\s*\?", code) or compared.search(code):
                offending.append((name, code.strip()))
    assert offending == []


# --- collations, deadlock priority ----------------------------------------------------------------


def openjson_text_columns(sql: str) -> list[tuple[str, str, set[str]]]:
    """Per OPENJSON: the statement it is in, its alias and its NVARCHAR columns (WITH clauses hold
    parentheses of their own)."""
    found = []
    for match in re.finditer(r"OPENJSON\([^)]*\)\s*WITH\s*\(", sql, re.IGNORECASE):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            end += 1
        alias = re.match(r"\s*AS\s+(\w+)", sql[end:], re.IGNORECASE)
        assert alias is not None
        columns = set(re.findall(r"\[?(\w+)\]?\s+NVARCHAR", sql[match.end() : end - 1], re.IGNORECASE))
        statement = sql[sql.rfind(";", 0, match.start()) + 1 : sql.find(";", end)]
        found.append((statement, alias.group(1), columns))
    return found


def test_openjson_text_meets_table_columns_only_through_collate() -> None:
    """OPENJSON's columns take the database's default collation; compared with a
    Latin1_General_100_BIN2 column they fail with error 468 unless one side says COLLATE."""
    offending = []
    for name, query in Q.items():
        for statement, alias, columns in openjson_text_columns(query.sql):
            for column in columns:
                ref = rf"\b{alias}\.\[?{column}\]?"
                for m in re.finditer(rf"(=\s*{ref}(?!\]?\s+COLLATE))|({ref}\]?\s*=)", statement):
                    offending.append((name, m.group(0)))
    assert offending == []
    assert "i.queue = q.queue COLLATE Latin1_General_100_BIN2" in Q["next_visible_at"].sql


def test_the_sweep_yields_in_deadlocks_and_gives_the_priority_back() -> None:
    lines = [line.strip() for line in Q["reap_expired"].sql.splitlines() if line.strip()]
    assert "SET DEADLOCK_PRIORITY LOW;" in lines
    assert lines[-1] == "SET DEADLOCK_PRIORITY NORMAL;"


async def test_a_sweep_that_fails_midway_still_gives_the_priority_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeout = pyodbc.Error(
        "HY000", FREETDS + "Lock request time out period exceeded. (1222) (SQLExecDirectW)"
    )
    conn = Flaky(failures={"reap_expired": [timeout]})
    store = flaky_store(monkeypatch, conn)
    with pytest.raises(DatabaseUnavailable):
        await store.reap_expired(10)
    assert conn.names == ["SET DEADLOCK_PRIORITY NORMAL"]


def test_the_items_table_never_escalates_to_a_table_lock() -> None:
    from simplequeue.store.migrations import load_migrations

    [latest] = [m for m in load_migrations("mssql") if m.name == "lock_escalation"]
    assert "ALTER TABLE dbo.sq_items SET (LOCK_ESCALATION = DISABLE);" in latest.sql


def test_complete_batches_lock_their_items_in_the_id_indexs_order() -> None:
    import json

    from simplequeue.domain import Completion
    from simplequeue.store.mssql.params import complete_json, index_order

    items = [Completion(uuid4(), None) for _ in range(50)]
    sent = [entry["id"] for entry in json.loads(complete_json(items))]
    assert sent == [str(i.id) for i in sorted(items, key=lambda i: index_order(i.id))]
    assert sorted(sent) == sorted(str(i.id) for i in items)


# --- cancellation ----------------------------------------------------------------------------------


class SlowCursor(FakeCursor):
    """A statement that runs until the driver is told to stop it (SQLCancel), like a lock wait."""

    def __init__(self, conn: Slow) -> None:
        super().__init__(conn)
        self._slow = conn
        self._impl = self  # where cancel_statement finds the pyodbc cursor

    async def execute(self, sql: str, *params: Any) -> FakeCursor:
        self._slow.events.append("execute")
        self._slow.started.set()
        await self._slow.stop.wait()
        await asyncio.sleep(0.01)  # the thread lets go a moment after SQLCancel
        self._slow.events.append("stopped")
        raise pyodbc.OperationalError("HY008", MSODBC + "Operation canceled (0) (SQLExecDirectW)")

    def cancel(self) -> None:
        self._slow.events.append("cancel")
        self._slow.stop.set()


@dataclass
class Slow(FakeConnection):
    events: list[str] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def cursor(self) -> FakeCursor:
        return SlowCursor(self)

    async def rollback(self) -> None:
        self.events.append("rollback")
        await super().rollback()


async def test_a_cancelled_request_stops_its_statement_before_the_connection_is_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conn = Slow()
    store = flaky_store(monkeypatch, conn)  # type: ignore[arg-type]
    request = asyncio.ensure_future(store.get_item(uuid4()))
    await asyncio.wait_for(conn.started.wait(), 5)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    # Told to stop, stopped, and only then rolled back (and handed back to the pool).
    assert conn.events == ["execute", "cancel", "stopped", "rollback"]
    assert conn.commits == 0
