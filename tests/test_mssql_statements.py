"""The SQL Server dialect, checked without a server.

This is a statement and binding test, not a substitute for SQL Server. It shows that every batch
parses as T-SQL (sqlglot's tsql dialect), that the pop and the schema have the shape the design
depends on, that every statement gets exactly as many parameters as it has markers and of types
pyodbc binds without asking the server, that rows shaped like pyodbc's become domain values, and
that driver errors become domain errors. Whether SQL Server accepts, plans and locks as intended is
for the conformance suite, run with SIMPLEQUEUE_TEST_MSSQL_URL set against a real server.

No unixODBC is needed: the store under test talks to a recording fake connection through its
``_acquire`` seam, and pyodbc/aioodbc are replaced by stand-in modules where a test needs them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import types
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from app.domain import CompleteOutcome, Completion, Failure, ItemStatus, NewItem
from app.errors import (
    DatabaseUnavailable,
    ItemDead,
    ItemExists,
    ItemNotFound,
    LeaseMismatch,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    StoreError,
)
from app.store.migrations import load_migrations, split_statements
from app.store.mssql import MssqlStore, Q, _index_order, odbc_connection_string, translated_errors

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
NOW_TEXT = "2026-03-01T12:00:00.123456"
# The clock line of a batch, as the server sees it with the fake clock bound.
CLOCK = f"@now DATETIME2(7) = COALESCE(CAST(NULLIF(N'{NOW_TEXT}', N'') AS DATETIME2(7)), SYSUTCDATETIME());"
URL = "mssql+odbc://sa:secret@db.example:1433/queue?TrustServerCertificate=yes"
MIGRATION = load_migrations("mssql")[0]


# --- parsing --------------------------------------------------------------------------------------


def parse(sql: str) -> list[exp.Expression]:
    trees = [
        tree for tree in sqlglot.parse(sql, read="tsql", error_level=ErrorLevel.RAISE) if tree is not None
    ]
    # sqlglot turns syntax it does not know into an opaque Command instead of failing; refuse that too.
    opaque = [node.sql() for tree in trees for node in tree.walk() if isinstance(node, exp.Command)]
    assert not opaque, f"sqlglot did not understand: {opaque}"
    return trees


def placeholders(sql: str) -> int:
    return sum(len(list(tree.find_all(exp.Placeholder))) for tree in parse(sql))


def migration_statements() -> list[str]:
    # One statement at a time, as MssqlStore.migrate runs them. Parsing the whole file at once would
    # not do: sqlglot nests every statement after an IF into that IF's body, where T-SQL's IF
    # governs only the next statement.
    return split_statements(MIGRATION.sql)


@pytest.mark.parametrize("name", sorted(Q))
def test_every_query_parses_as_tsql(name: str) -> None:
    assert parse(Q[name])


@pytest.mark.parametrize("statement", migration_statements(), ids=lambda s: s.splitlines()[0][:60])
def test_every_migration_statement_parses_as_tsql(statement: str) -> None:
    assert len(parse(statement)) == 1


def test_the_migration_splits_into_its_six_guarded_creates() -> None:
    assert len(migration_statements()) == 6
    assert all(
        ";" not in line.rstrip()[:-1] for line in MIGRATION.sql.splitlines() if not line.startswith("--")
    )


# --- the pop --------------------------------------------------------------------------------------


def pop_update() -> exp.Update:
    trees = parse(Q["pop"])
    assert [type(tree) for tree in trees] == [exp.Set, exp.Set, exp.Declare, exp.Update]
    update = trees[-1]
    assert isinstance(update, exp.Update)
    return update


def claim_select() -> exp.Select:
    update = pop_update()
    cte = update.find(exp.CTE)
    assert cte is not None
    assert update.this.name == cte.alias, "the UPDATE must target the claiming CTE"
    assert isinstance(cte.this, exp.Select)
    return cte.this


def test_pop_claims_top_n_rows_of_sq_items_with_the_four_locking_hints_on_the_pop_index() -> None:
    select = claim_select()
    assert select.args.get("limit") is not None, "TOP (n)"
    table = select.find(exp.From).this
    assert (table.db, table.name) == ("dbo", "sq_items")
    hints = [var.name.upper() for hint in table.args["hints"] for var in hint.expressions]
    assert sorted(hints) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    [index] = [
        hint for hint in table.args["hints"] for var in hint.expressions if var.name.upper() == "INDEX"
    ]
    assert "sq_items_pop" in index.sql(dialect="tsql"), "pop must walk the filtered pop index"


def test_pop_takes_the_oldest_created_at_first_then_insertion_order() -> None:
    order = claim_select().find(exp.Order)
    assert [(o.this.name, bool(o.args.get("desc"))) for o in order.expressions] == [
        ("created_at", False),
        ("seq", False),
    ]


def test_pop_claims_only_live_rows_that_are_visible_at_now() -> None:
    where = claim_select().args["where"]
    statuses = [node for node in where.find_all(exp.In) if node.this.name == "status"]
    assert [sorted(lit.name for lit in node.expressions) for node in statuses] == [["leased", "ready"]]
    cutoffs = [node for node in where.find_all(exp.LTE) if node.this.name == "visible_at"]
    assert len(cutoffs) == 1
    assert isinstance(cutoffs[0].expression, exp.Parameter)
    assert cutoffs[0].expression.name == "now"


def test_pop_leases_and_outputs_the_leased_rows() -> None:
    update = pop_update()
    assignments = {eq.this.name: eq.expression for eq in update.expressions}
    assert assignments["status"].name == "leased"
    assert assignments["attempts"].sql("tsql") == "attempts + 1"
    assert isinstance(assignments["visible_at"].find(exp.Parameter), exp.Parameter), "computed from @now"
    output = update.args["returning"].expressions
    assert {column.table for column in output} == {"inserted"}
    assert {column.name for column in output} == {
        "seq",
        "id",
        "queue",
        "payload",
        "created_at",
        "attempts",
        "lease_token",
        "visible_at",
    }


def test_the_server_clock_is_used_unless_one_is_bound() -> None:
    for name in ("push_batch", "pop", "fail", "get_item", "next_visible_at", "queue_stats"):
        declare = next(tree for tree in parse(Q[name]) if isinstance(tree, exp.Declare))
        default = declare.expressions[0].args["default"]
        assert declare.expressions[0].this[0].name == "now"
        assert "SYSUTCDATETIME" in default.sql("tsql").upper()
        assert default.find(exp.Placeholder) is not None


# --- the schema -----------------------------------------------------------------------------------


def guarded_creates() -> list[tuple[exp.Expression, exp.Create]]:
    pairs = []
    for statement in migration_statements():
        [tree] = parse(statement)
        assert isinstance(tree, exp.IfBlock), f"unguarded: {statement}"
        [create] = tree.args["true"].expressions
        assert isinstance(create, exp.Create)
        pairs.append((tree.this, create))
    return pairs


def create_table(name: str) -> exp.Schema:
    for _, create in guarded_creates():
        if create.args["kind"] == "TABLE" and create.this.this.name == name:
            assert isinstance(create.this, exp.Schema)
            return create.this
    raise AssertionError(f"no CREATE TABLE {name}")


def create_index(name: str) -> exp.Create:
    for _, create in guarded_creates():
        if "INDEX" in create.args["kind"] and create.this.name == name:
            return create
    raise AssertionError(f"no CREATE INDEX {name}")


def test_every_create_is_guarded_by_a_check_for_the_object_it_creates() -> None:
    for guard, create in guarded_creates():
        if create.args["kind"] == "TABLE":
            table = create.this.this
            assert isinstance(guard, exp.Is)
            assert isinstance(guard.this, exp.ObjectId)
            assert guard.this.this.name == f"{table.db}.{table.name}"
        else:
            assert isinstance(guard, exp.Not)
            assert isinstance(guard.this, exp.Exists)
            assert guard.find(exp.Table).sql() == "sys.indexes"
            named = {node.name for node in guard.find_all(exp.National)}
            assert create.this.name in named
            assert "dbo.sq_items" in named


def test_items_are_clustered_on_a_bigint_identity_seq() -> None:
    schema = create_table("sq_items")
    seq = next(col for col in schema.expressions if isinstance(col, exp.ColumnDef) and col.name == "seq")
    assert seq.args["kind"].sql("tsql") == "BIGINT"
    assert seq.find(exp.GeneratedAsIdentityColumnConstraint) is not None
    [primary_key] = [c for c in schema.expressions if c.find(exp.PrimaryKeyColumnConstraint)]
    clustered = primary_key.find(exp.ClusteredColumnConstraint)
    assert clustered is not None
    assert [o.this.name for o in clustered.this] == ["seq"]


def test_item_columns_have_the_types_pyodbc_binds_to() -> None:
    schema = create_table("sq_items")
    types_ = {
        col.name: col.args["kind"].sql("tsql") for col in schema.expressions if isinstance(col, exp.ColumnDef)
    }
    assert types_ == {
        "seq": "BIGINT",
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(128)",
        "payload": "NVARCHAR(MAX)",
        "created_at": "DATETIME2(7)",
        "status": "VARCHAR(6)",
        "attempts": "INTEGER",
        "visible_at": "DATETIME2(7)",
        "lease_token": "UNIQUEIDENTIFIER",
        "errors": "NVARCHAR(MAX)",
    }


def test_items_keep_the_state_machine_in_check_constraints() -> None:
    checks = [c.sql("tsql") for c in create_table("sq_items").find_all(exp.CheckColumnConstraint)]
    # sqlglot writes IS NOT NULL as NOT ... IS NULL.
    assert checks == [
        "CHECK (status IN ('ready', 'leased', 'dead'))",
        "CHECK (attempts >= 0)",
        "CHECK ((status = 'leased' AND NOT lease_token IS NULL) "
        "OR (status <> 'leased' AND lease_token IS NULL))",
    ]


def test_item_ids_are_unique_through_the_index_the_error_translation_names() -> None:
    index = create_index("sq_items_id_key")
    assert index.args["unique"] is True
    assert [o.this.name for o in index.this.args["params"].args["columns"]] == ["id"]


def test_the_pop_index_is_filtered_to_live_rows() -> None:
    params = create_index("sq_items_pop").this.args["params"]
    assert [o.this.name for o in params.args["columns"]] == ["queue", "created_at", "seq"]
    assert [i.name for i in params.args["include"]] == ["visible_at"]
    [status] = list(params.args["where"].find_all(exp.In))
    assert status.this.name == "status"
    assert sorted(lit.name for lit in status.expressions) == [
        "leased",
        "ready",
    ]


def live_statuses(where: exp.Expression) -> list[list[str]]:
    """The status lists of a predicate's `status IN (...)`s, each sorted."""
    found = [node for node in where.find_all(exp.In) if node.this.name == "status"]
    return [sorted(lit.name for lit in node.expressions) for node in found]


def test_the_watchers_index_is_filtered_to_live_rows_by_the_probes_own_predicate() -> None:
    params = create_index("sq_items_visible").this.args["params"]
    assert [o.this.name for o in params.args["columns"]] == ["queue", "visible_at"]
    assert live_statuses(params.args["where"]) == [["leased", "ready"]]
    # A filtered index serves a parameterised statement only when the statement repeats its filter
    # as literals.
    assert params.args["where"].this.sql("tsql") in next_visible_at_min().args["where"].sql("tsql")


# --- the batches ----------------------------------------------------------------------------------


def hints(table: exp.Table) -> list[str]:
    return sorted(var.name.upper() for hint in table.args.get("hints") or [] for var in hint.expressions)


def openjson_columns(node: exp.Expression) -> dict[str, str]:
    openjson = node.find(exp.OpenJSON)
    assert openjson is not None
    return {col.name: col.args["kind"].sql("tsql") for col in openjson.expressions}


def push_batch_statements() -> tuple[exp.Insert, exp.Insert, exp.Select, exp.IfBlock]:
    trees = parse(Q["push_batch"])
    kinds = [type(tree) for tree in trees]
    assert kinds == [exp.Set, exp.Set, *[exp.Declare] * 4, exp.Insert, exp.Insert, exp.Select, exp.IfBlock]
    lock, insert, select, register = trees[6:]
    assert isinstance(lock, exp.Insert)
    assert isinstance(insert, exp.Insert)
    assert isinstance(select, exp.Select)
    assert isinstance(register, exp.IfBlock)
    return lock, insert, select, register


def test_push_batch_reads_every_item_from_one_json_parameter() -> None:
    lock, insert, _, _ = push_batch_statements()
    assert placeholders(Q["push_batch"]) == 2, "the clock and the items, whatever their number"
    assert parse(Q["push_batch"])[3].sql("tsql") == "DECLARE @items NVARCHAR(MAX) = ?"
    for statement in (lock, insert):
        assert statement.expression.find(exp.OpenJSON).this.sql("tsql") == "@items"
    # The payload is a JSON string read as text (no AS JSON, which would re-serialise it); the time is
    # text that the SELECT casts, as everywhere else.
    openjson = insert.expression.find(exp.OpenJSON)
    assert openjson_columns(insert.expression) == {
        "n": "INTEGER",
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(4000)",
        "payload": "NVARCHAR(MAX)",
        "created_at": "NVARCHAR(40)",
    }
    assert not any(col.args.get("as_json") for col in openjson.expressions)
    assert "CAST(j.created_at AS DATETIME2(7))" in insert.expression.sql("tsql")
    assert [col.name for col in insert.this.expressions] == [
        "id",
        "queue",
        "payload",
        "created_at",
        "visible_at",
    ]


def test_push_batch_first_finds_the_ids_that_exist_under_key_range_locks() -> None:
    lock, _, _, _ = push_batch_statements()
    assert lock.this.sql("tsql") == "@taken (id)"
    assert openjson_columns(lock.expression) == {"id": "UNIQUEIDENTIFIER"}
    [join] = lock.expression.args["joins"]
    probed = join.this
    assert (probed.db, probed.name, probed.alias) == ("dbo", "sq_items", "e")
    assert hints(probed) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert join.args["on"].sql("tsql") == "e.id = j.id"
    assert join.args.get("side") is None, "an inner join: only the ids found"
    assert [col.sql("tsql") for col in lock.expression.expressions] == ["e.id"]


def test_push_batch_inserts_the_others_in_the_order_given_and_outputs_them() -> None:
    _, insert, select, _ = push_batch_statements()
    table = insert.this.this
    assert (table.db, table.name) == ("dbo", "sq_items")
    where = insert.expression.args["where"].this
    assert isinstance(where, exp.Not)
    assert where.this.this.sql("tsql") == "SELECT 1 FROM @taken AS t WHERE t.id = j.id"
    assert insert.expression.find(exp.Hint) is None
    assert not [t for t in where.find_all(exp.Table) if t.name == "sq_items"], "the locks are taken"
    # IDENTITY numbers the rows in the ORDER BY's order, so that seq keeps the batch's order.
    order = insert.expression.args["order"]
    assert [o.sql("tsql") for o in order.expressions] == ["j.n"]
    output = insert.args["returning"]
    assert [(col.table, col.name) for col in output.expressions] == [
        ("inserted", "id"),
        ("inserted", "queue"),
    ]
    assert output.args["into"].name == "inserted"
    assert select.sql("tsql") == "SELECT id FROM @inserted"


def test_push_batch_registers_the_inserted_items_queues_once_under_a_lock() -> None:
    _, _, _, register = push_batch_statements()
    # An unlocked probe first, so that pushes to existing queues take no lock on sq_queues.
    assert isinstance(register.this, exp.Exists)
    assert {hints(t) == [] for t in register.this.find_all(exp.Table)} == {True}
    [insert] = register.args["true"].expressions
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_queues"
    assert insert.expression.args.get("distinct") is not None
    locked = [t for t in insert.expression.find_all(exp.Table) if t.name == "sq_queues"]
    assert [hints(t) for t in locked] == [["HOLDLOCK", "UPDLOCK"]]
    declares = " ".join(tree.sql("tsql") for tree in parse(Q["push_batch"])[2:6])
    assert "DECLARE @taken TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY)" in declares
    assert "queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2" in declares


def complete_batch_statements() -> tuple[exp.Delete, exp.Select]:
    trees = parse(Q["complete_batch"])
    assert [type(tree) for tree in trees] == [exp.Set, exp.Set, exp.Declare, exp.Delete, exp.Select]
    delete, select = trees[3:]
    assert isinstance(delete, exp.Delete)
    assert isinstance(select, exp.Select)
    return delete, select


def test_complete_batch_deletes_by_seek_where_the_token_matches_or_none_was_given() -> None:
    delete, _ = complete_batch_statements()
    assert placeholders(Q["complete_batch"]) == 1
    assert parse(Q["complete_batch"])[2].sql("tsql") == "DECLARE @items NVARCHAR(MAX) = ?"
    target = delete.this
    assert (target.db, target.name, target.alias) == ("dbo", "sq_items", "i")
    assert [t.name for t in delete.args["tables"]] == ["i"]
    assert hints(target) == ["FORCESEEK"]
    [join] = target.args["joins"]
    assert join.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert openjson_columns(join) == {"id": "UNIQUEIDENTIFIER", "token": "UNIQUEIDENTIFIER"}
    assert join.args["on"].sql("tsql") == "i.id = j.id"
    assert delete.args["where"].this.sql("tsql") == "j.token IS NULL OR i.lease_token = j.token"
    assert [(c.table, c.name) for c in delete.args["returning"].expressions] == [("deleted", "id")]
    assert not delete.args["returning"].args.get("into")


def test_complete_batch_then_reads_which_requested_ids_are_still_there() -> None:
    _, select = complete_batch_statements()
    table = select.find(exp.From).this
    assert (table.db, table.name) == ("dbo", "sq_items")
    assert hints(table) == ["FORCESEEK"]
    [join] = select.args["joins"]
    assert join.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert openjson_columns(join) == {"id": "UNIQUEIDENTIFIER"}
    assert join.args["on"].sql("tsql") == "i.id = j.id"
    assert [col.sql("tsql") for col in select.expressions] == ["i.id"]
    assert select.args.get("where") is None


def next_visible_at_min() -> exp.Select:
    """The MIN(visible_at) applied to each queue of next_visible_at's second SELECT."""
    [*_, per_queue] = parse(Q["next_visible_at"])
    subquery = per_queue.find(exp.Subquery)
    assert subquery is not None
    assert isinstance(subquery.this, exp.Select)
    return subquery.this


def test_next_visible_at_reads_the_clock_then_each_queues_earliest_live_item() -> None:
    trees = parse(Q["next_visible_at"])
    assert [type(tree) for tree in trees] == [exp.Set, exp.Declare, exp.Select, exp.Select]
    assert placeholders(Q["next_visible_at"]) == 2, "the clock and the queues, however many"
    clock, per_queue = trees[2:]
    assert clock.sql("tsql") == "SELECT @now AS now"
    assert [col.alias for col in per_queue.expressions] == ["queue", "next_visible_at"]
    openjson = per_queue.find(exp.OpenJSON)
    assert isinstance(openjson.this, exp.Placeholder)
    [column] = openjson.expressions
    assert (column.name, column.args["kind"].sql("tsql"), column.args["path"].name) == (
        "queue",
        "NVARCHAR(4000)",
        "$",
    )
    # CROSS APPLY of an aggregate: one row for every queue asked about, NULL for those without items.
    [apply] = per_queue.args["joins"]
    assert isinstance(apply.this, exp.Lateral)
    assert apply.this.args.get("cross_apply") is True, "CROSS APPLY, not OUTER APPLY"
    minimum = next_visible_at_min()
    assert [col.sql("tsql") for col in minimum.expressions] == ["MIN(i.visible_at) AS next_visible_at"]
    assert minimum.find(exp.From).this.name == "sq_items"
    where = minimum.args["where"]
    assert live_statuses(where) == [["leased", "ready"]]
    assert "i.queue = q.queue" in where.sql("tsql")


# --- a recording fake of aioodbc's connection -----------------------------------------------------


@dataclass
class Result:
    columns: list[str]
    rows: list[tuple[Any, ...]]


@dataclass
class Results:
    """The result sets of one batch of several statements that each return rows."""

    sets: list[Result]


def result(**columns: Any) -> Result:
    """One row; Result(...) for several."""
    return Result(list(columns), [tuple(columns.values())])


@dataclass
class Executed:
    name: str  # the query's name in mssql.sql, or the statement itself for migrations
    sql: str
    params: tuple[Any, ...]

    @property
    def inlined(self) -> str:
        """The batch with its parameters written in as literals, whitespace collapsed: which value
        lands on which marker, which a count of markers cannot tell."""
        code = "\n".join(line for line in self.sql.splitlines() if not line.lstrip().startswith("--"))
        pieces = code.split("?")
        assert len(pieces) == len(self.params) + 1, "a '?' that is not a parameter marker"
        literals = [str(p) if isinstance(p, int) else "N'" + p.replace("'", "''") + "'" for p in self.params]
        return " ".join("".join(a + b for a, b in zip(pieces, [*literals, ""], strict=True)).split())


QUERY_NAMES = {sql: name for name, sql in Q.items()}


class FakeCursor:
    def __init__(self, conn: FakeConnection) -> None:
        self._conn = conn
        self._sets: list[Result | None] = []

    @property
    def description(self) -> Sequence[tuple[Any, ...]] | None:
        current = self._sets[0] if self._sets else None
        if current is None:
            return None
        return [(name, str, None, None, None, None, True) for name in current.columns]

    async def execute(self, sql: str, *params: Any) -> FakeCursor:
        # What pyodbc refuses at once, or binds only after asking the server to describe the batch.
        markers = placeholders(sql)
        assert markers == len(params), f"{markers} markers, {len(params)} parameters: {params}"
        assert all(type(p) in (str, int) for p in params), f"bind str and int only: {params}"
        name = QUERY_NAMES.get(sql, sql)
        self._conn.executed.append(Executed(name, sql, params))
        if name in self._conn.errors:
            raise self._conn.errors[name]
        replies = self._conn.replies.get(name, [])
        reply = replies.pop(0) if replies else Results([])
        # Like a batch of several statements: a result without columns ahead of each set of rows.
        sets = reply.sets if isinstance(reply, Results) else [reply]
        self._sets = [part for found in sets for part in (None, found)] or [None]
        return self

    async def fetchall(self) -> list[tuple[Any, ...]]:
        current = self._sets[0]
        assert current is not None, "fetchall() on a result without columns"
        return list(current.rows)

    async def nextset(self) -> bool:
        self._sets.pop(0)
        return bool(self._sets)

    async def close(self) -> None:
        self._conn.cursors_closed += 1


@dataclass
class FakeConnection:
    replies: dict[str, list[Result | Results]] = field(default_factory=dict)
    errors: dict[str, Exception] = field(default_factory=dict)
    executed: list[Executed] = field(default_factory=list)
    commits: int = 0
    rollbacks: int = 0
    closed: bool = False
    cursors_closed: int = 0

    def reply(self, name: str, *results: Result | Results) -> None:
        self.replies.setdefault(name, []).extend(results)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.executed]

    def params(self, name: str) -> tuple[Any, ...]:
        [found] = [e.params for e in self.executed if e.name == name]
        return found

    def inlined(self, name: str) -> str:
        [found] = [e.inlined for e in self.executed if e.name == name]
        return found

    async def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    async def commit(self) -> None:
        self.commits += 1

    async def rollback(self) -> None:
        self.rollbacks += 1

    async def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("bad", [None, True, 1.5, uuid4(), NOW, b"orders", ["orders"]], ids=repr)
async def test_the_fake_refuses_parameters_pyodbc_cannot_bind_without_asking(bad: Any) -> None:
    # None needs the server to describe the batch; a bool, a float, a UUID or a datetime bind as types
    # the statements do not expect. Every binding test below relies on this check.
    cursor = FakeCursor(FakeConnection())
    with pytest.raises(AssertionError, match="bind str and int only"):
        await cursor.execute(Q["next_visible_at"], NOW_TEXT, bad)


async def test_the_fake_refuses_a_parameter_too_many_or_too_few() -> None:
    cursor = FakeCursor(FakeConnection())
    for params in [(NOW_TEXT,), (NOW_TEXT, "orders", "extra")]:
        with pytest.raises(AssertionError, match="markers"):
            await cursor.execute(Q["next_visible_at"], *params)


def fake_store(monkeypatch: pytest.MonkeyPatch, *, clock: bool = True) -> tuple[MssqlStore, FakeConnection]:
    store = MssqlStore(URL, clock=(lambda: NOW) if clock else None)
    conn = FakeConnection()

    @asynccontextmanager
    async def acquire() -> AsyncIterator[FakeConnection]:
        yield conn

    monkeypatch.setattr(store, "_acquire", acquire)
    return store, conn


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[MssqlStore, FakeConnection]:
    return fake_store(monkeypatch)


# --- binding and row mapping, method by method ----------------------------------------------------


def ids(*item_ids: UUID) -> Result:
    """OUTPUT id rows as pyodbc gives UNIQUEIDENTIFIER: uppercase text."""
    return Result(["id"], [(str(item_id).upper(),) for item_id in item_ids])


def pushed(conn: FakeConnection) -> list[dict[str, Any]]:
    """The items push_batch sent, as its OPENJSON reads them."""
    _, items_json = conn.params("push_batch")
    assert isinstance(items_json, str)
    items = json.loads(items_json)
    assert isinstance(items, list)
    return items


async def test_push_batch_binds_the_clock_and_the_items_as_one_json_text(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    first = NewItem(uuid4(), "orders", '{"n": 1}', datetime(2026, 2, 1, 9, 30, 0, 654321, tzinfo=UTC))
    second = NewItem(uuid4(), "Orders", "[1, 2]", NOW)
    conn.reply("push_batch", ids(first.id, second.id))

    inserted = await store.push_batch([first, second], skip_existing=False)

    assert inserted == {first.id, second.id}
    assert conn.names == ["push_batch"]
    assert conn.params("push_batch")[0] == NOW_TEXT
    assert sorted(pushed(conn), key=lambda item: item["n"]) == [
        {
            "n": 0,
            "id": str(first.id),
            "queue": "orders",
            "payload": '{"n": 1}',
            "created_at": "2026-02-01T09:30:00.654321",
        },
        {"n": 1, "id": str(second.id), "queue": "Orders", "payload": "[1, 2]", "created_at": NOW_TEXT},
    ]
    batch = conn.inlined("push_batch")
    assert CLOCK in batch
    assert 'DECLARE @items NVARCHAR(MAX) = N\'[{"n":' in batch
    assert (conn.commits, conn.rollbacks, conn.cursors_closed) == (1, 0, 1)


async def test_push_batch_sends_payload_text_exactly_as_a_json_string(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    payloads = [
        '{"b": 1,  "a": [1.0, 1e3, 12345678901234567890.5]}',  # key order, spacing, number spelling
        '"quote \\" backslash \\\\ tab \\t"',
        '"na\u00efve \u65e5\u672c \U0001f600 \u2028"',  # as characters: BMP, beyond it, a separator
        '"\\u0000 nul and \\u2028 separator"',
        "null",
    ]
    items = [NewItem(uuid4(), "orders", payload, NOW) for payload in payloads]
    conn.reply("push_batch", ids(*(item.id for item in items)))

    await store.push_batch(items, skip_existing=True)

    sent = {item["id"]: item["payload"] for item in pushed(conn)}
    assert all(isinstance(payload, str) for payload in sent.values()), "a JSON string, not a JSON value"
    assert sent == {str(item.id): item.payload_json for item in items}


async def test_a_thousand_items_are_still_two_parameters(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    items = [NewItem(uuid4(), f"q{n % 7}", str(n), NOW) for n in range(1000)]
    conn.reply("push_batch", ids(*(item.id for item in items)))

    assert len(await store.push_batch(items, skip_existing=False)) == 1000

    assert len(conn.params("push_batch")) == 2
    assert len(pushed(conn)) == 1000


async def test_push_batch_sends_the_items_in_the_id_indexs_order_numbered_in_the_order_given(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    items = [NewItem(uuid4(), "orders", str(n), NOW) for n in range(50)]
    conn.reply("push_batch", ids(*(item.id for item in items)))

    await store.push_batch(items, skip_existing=True)

    sent = pushed(conn)
    assert [UUID(item["id"]) for item in sent] == sorted((item.id for item in items), key=_index_order)
    assert [item["id"] for item in sorted(sent, key=lambda item: item["n"])] == [str(i.id) for i in items]


def test_the_index_order_is_sql_servers_uniqueidentifier_order() -> None:
    # Documented: byte groups right to left; the last two groups compared as written, the first
    # three byte-reversed. One GUID per byte position, with only that byte set, sorts from the least
    # significant position to the most.
    def only(position: int) -> UUID:
        raw = bytearray(16)
        raw[position] = 1
        return UUID(bytes=bytes(raw))

    ladder = sorted(range(16), key=lambda position: _index_order(only(position)))
    assert ladder == [0, 1, 2, 3, 4, 5, 6, 7, 9, 8, 15, 14, 13, 12, 11, 10]
    # The documented example: compared on their last groups first, 86FF976E763F > 393AE6BBB849.
    g1 = UUID("55666BEE-B3A0-4BF5-81A7-86FF976E763F")
    g2 = UUID("8DD5BCA5-6ABE-4F73-B4B7-393AE6BBB849")
    assert _index_order(g2) < _index_order(g1)


async def test_skip_existing_returns_only_the_ids_inserted_and_commits(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    existing, new = NewItem(uuid4(), "orders", "1", NOW), NewItem(uuid4(), "orders", "2", NOW)
    conn.reply("push_batch", ids(new.id))

    assert await store.push_batch([existing, new], skip_existing=True) == {new.id}

    assert {item["id"] for item in pushed(conn)} == {str(existing.id), str(new.id)}
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_skip_existing_keeps_the_first_of_a_repeated_id(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    first, again = NewItem(item_id, "orders", '"first"', NOW), NewItem(item_id, "orders", '"again"', NOW)

    later = NewItem(uuid4(), "orders", '"later"', NOW)
    conn.reply("push_batch", ids(item_id, later.id))

    assert await store.push_batch([first, again, later], skip_existing=True) == {item_id, later.id}

    sent = sorted(pushed(conn), key=lambda item: item["n"])
    assert [(item["n"], item["payload"]) for item in sent] == [(0, '"first"'), (1, '"later"')]


async def test_all_or_nothing_refuses_the_batch_when_an_id_exists(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    existing, new = NewItem(uuid4(), "orders", "1", NOW), NewItem(uuid4(), "orders", "2", NOW)
    conn.reply("push_batch", ids(new.id))

    with pytest.raises(ItemExists):
        await store.push_batch([existing, new], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1), "the new item and its queue are rolled back"


async def test_all_or_nothing_refuses_a_repeated_id_without_asking_the_server(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW)

    with pytest.raises(ItemExists):
        await store.push_batch([item, NewItem(uuid4(), "orders", "2", NOW), item], skip_existing=False)

    assert conn.executed == []


@pytest.mark.parametrize("skip_existing", [False, True])
async def test_an_empty_batch_asks_nothing(
    fake: tuple[MssqlStore, FakeConnection], skip_existing: bool
) -> None:
    store, conn = fake
    assert await store.push_batch([], skip_existing=skip_existing) == set()
    assert await store.complete_batch([]) == []
    assert conn.executed == []


async def test_without_a_clock_the_server_clock_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    store, conn = fake_store(monkeypatch, clock=False)
    item = NewItem(uuid4(), "orders", "null", NOW)
    conn.reply("push_batch", ids(item.id))
    conn.reply("next_visible_at", Results([result(now=NOW.replace(tzinfo=None)), visible_rows()]))

    await store.push_batch([item], skip_existing=False)
    await store.pop("orders", 1, 30)
    await store.next_visible_at(["orders"])

    server_clock = "COALESCE(CAST(NULLIF(N'', N'') AS DATETIME2(7)), SYSUTCDATETIME())"
    for name in ("push_batch", "pop", "next_visible_at"):
        assert server_clock in conn.inlined(name)
    # created_at is the item's own time, never the clock's.
    assert pushed(conn)[0]["created_at"] == NOW_TEXT


async def test_created_at_in_another_zone_is_sent_as_utc(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    paris = datetime(2026, 2, 1, 10, 30, tzinfo=UTC).astimezone(ZoneInfo("Europe/Paris"))
    item = NewItem(uuid4(), "orders", "1", paris)
    conn.reply("push_batch", ids(item.id))

    await store.push_batch([item], skip_existing=False)

    assert pushed(conn)[0]["created_at"] == "2026-02-01T10:30:00.000000"


async def test_pop_binds_a_fresh_lease_and_returns_items_oldest_first(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    older, newer, token = uuid4(), uuid4(), uuid4()
    created = datetime(2026, 2, 1, 8, 0, 0, 5)
    leased_until = datetime(2026, 3, 1, 12, 0, 45, 123456)
    # OUTPUT rows in no particular order, UUIDs as pyodbc gives them (uppercase text), naive times.
    columns = ["seq", "id", "queue", "payload", "created_at", "attempts", "lease_token", "visible_at"]
    token_text = str(token).upper()
    later = created + timedelta(seconds=1)
    conn.reply(
        "pop",
        Result(
            columns,
            [
                (8, str(newer).upper(), "orders", "[1, 2]", later, 1, token_text, leased_until),
                (7, str(older).upper(), "orders", '{"a": null}', created, 3, token_text, leased_until),
            ],
        ),
    )

    items = await store.pop("orders", 5, 45)

    now_text, max_items, queue, lease_token, lease_seconds = conn.params("pop")
    assert (now_text, max_items, queue, lease_seconds) == (NOW_TEXT, 5, "orders", 45)
    assert UUID(lease_token).version == 4
    batch = conn.inlined("pop")
    assert CLOCK in batch
    assert "SELECT TOP (CAST(5 AS INT)) seq," in batch
    assert "WHERE queue = N'orders' AND status IN ('ready', 'leased') AND visible_at <= @now" in batch
    assert f"lease_token = CAST(N'{lease_token}' AS UNIQUEIDENTIFIER)," in batch
    assert "visible_at = DATEADD(SECOND, CAST(45 AS INT), @now)" in batch
    assert [item.id for item in items] == [older, newer]
    first = items[0]
    assert first.payload == {"a": None}
    assert first.attempts == 3
    assert first.lease_token == token
    assert first.created_at == created.replace(tzinfo=UTC)
    assert first.lease_expires_at == leased_until.replace(tzinfo=UTC)
    assert conn.commits == 1


async def test_pop_of_an_empty_queue_returns_nothing(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("pop", Result(["seq"], []))
    assert await store.pop("orders", 1, 30) == []


async def test_complete_deletes_with_the_lease_token(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    conn.reply("complete", result(seq=7))

    await store.complete(item_id, token)

    assert conn.names == ["complete"]
    assert conn.params("complete") == (str(token), str(item_id))
    batch = conn.inlined("complete")
    assert f"DECLARE @token UNIQUEIDENTIFIER = CAST(NULLIF(N'{token}', N'') AS UNIQUEIDENTIFIER);" in batch
    assert f"WHERE id = CAST(N'{item_id}' AS UNIQUEIDENTIFIER) AND (@token IS NULL OR" in batch
    assert conn.commits == 1


async def test_complete_without_a_token_binds_an_empty_token(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("complete", result(seq=7))
    item_id = uuid4()

    await store.complete(item_id, None)

    assert conn.params("complete") == ("", str(item_id))


def item_row(item_id: UUID, *, status: str, lease_token: UUID | None = None, **overrides: Any) -> Result:
    row = {
        "id": str(item_id).upper(),
        "queue": "orders",
        "payload": '{"n": 1}',
        "status": status,
        "attempts": 1,
        "errors": "[]",
        "created_at": datetime(2026, 2, 1, 8, 0),
        "visible_at": datetime(2026, 3, 1, 12, 0, 30),
        "lease_token": str(lease_token).upper() if lease_token else None,
        "now": NOW.replace(tzinfo=None),
    }
    return result(**(row | overrides))


async def test_complete_of_someone_elses_lease_is_refused_and_rolled_back(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("complete", Result(["seq"], []))
    conn.reply("get_item", item_row(item_id, status="leased", lease_token=uuid4()))

    with pytest.raises(LeaseMismatch):
        await store.complete(item_id, uuid4())

    assert conn.names == ["complete", "get_item"]
    assert conn.params("get_item") == (NOW_TEXT, str(item_id))
    assert f"WHERE id = CAST(N'{item_id}' AS UNIQUEIDENTIFIER);" in conn.inlined("get_item")
    assert (conn.commits, conn.rollbacks) == (0, 1)


async def test_complete_of_an_unknown_item_is_not_found(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, _ = fake
    with pytest.raises(ItemNotFound):
        await store.complete(uuid4(), None)


def completed(conn: FakeConnection) -> list[dict[str, Any]]:
    [items_json] = conn.params("complete_batch")
    assert isinstance(items_json, str)
    items = json.loads(items_json)
    assert isinstance(items, list)
    return items


async def test_complete_batch_maps_both_result_sets_to_outcomes_in_request_order(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    done, untokened, mismatched, missing, dead = (uuid4() for _ in range(5))
    token = uuid4()
    requests = [
        Completion(mismatched, uuid4()),
        Completion(done, token),
        Completion(missing, uuid4()),
        Completion(untokened),
        Completion(dead, uuid4()),  # a dead item has no lease: a given token cannot match
    ]
    conn.reply("complete_batch", Results([ids(done, untokened), ids(mismatched, dead)]))

    outcomes = await store.complete_batch(requests)

    assert outcomes == [
        CompleteOutcome.LEASE_MISMATCH,
        CompleteOutcome.COMPLETED,
        CompleteOutcome.NOT_FOUND,
        CompleteOutcome.COMPLETED,
        CompleteOutcome.LEASE_MISMATCH,
    ]
    assert conn.names == ["complete_batch"]
    assert completed(conn) == [
        {"id": str(c.id), "token": str(c.lease_token) if c.lease_token else None} for c in requests
    ]
    assert 'DECLARE @items NVARCHAR(MAX) = N\'[{"id":' in conn.inlined("complete_batch")
    assert (conn.commits, conn.rollbacks, conn.cursors_closed) == (1, 0, 1)


async def test_complete_batch_that_deletes_nothing_still_reads_the_second_result(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    mismatched, missing = uuid4(), uuid4()
    conn.reply("complete_batch", Results([ids(), ids(mismatched)]))

    outcomes = await store.complete_batch([Completion(missing), Completion(mismatched, uuid4())])

    assert outcomes == [CompleteOutcome.NOT_FOUND, CompleteOutcome.LEASE_MISMATCH]


def visible_rows(*rows_: tuple[str, datetime | None]) -> Result:
    return Result(["queue", "next_visible_at"], list(rows_))


async def test_next_visible_at_binds_the_queues_as_one_json_array_and_returns_aware_utc(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    busy = datetime(2026, 3, 1, 12, 0, 30, 5)
    leased = datetime(2026, 3, 1, 12, 1, 30)
    clock = result(now=NOW.replace(tzinfo=None))
    conn.reply(
        "next_visible_at",
        Results([clock, visible_rows(("idle", None), ("busy", busy), ("Leased ✓", leased))]),
    )

    found, now = await store.next_visible_at(["idle", "busy", "Leased ✓"])

    assert found == {"busy": busy.replace(tzinfo=UTC), "Leased ✓": leased.replace(tzinfo=UTC)}
    assert now == NOW
    assert all(moment.tzinfo is UTC for moment in [*found.values(), now])
    now_text, queues_json = conn.params("next_visible_at")
    assert now_text == NOW_TEXT
    assert json.loads(queues_json) == ["idle", "busy", "Leased ✓"]
    batch = conn.inlined("next_visible_at")
    assert CLOCK in batch
    assert 'FROM OPENJSON(N\'["idle","busy","Leased ✓"]\') WITH (queue NVARCHAR(4000) \'$\') AS q' in batch
    assert conn.commits == 1


async def test_next_visible_at_of_no_queues_still_tells_the_time(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("next_visible_at", Results([result(now=NOW.replace(tzinfo=None)), visible_rows()]))

    assert await store.next_visible_at([]) == ({}, NOW)

    assert conn.params("next_visible_at") == (NOW_TEXT, "[]")


async def test_subscribe_does_nothing(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    calls: list[tuple[str | None, int]] = []

    await store.subscribe(lambda queue, count: calls.append((queue, count)))

    assert conn.executed == []
    assert calls == []


async def test_fail_appends_the_error_and_returns_the_item(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    errors = json.dumps([{"at": "2026-03-01T12:00:00.1234560", "error": "boom"}])  # FOR JSON's DATETIME2
    conn.reply(
        "fail", item_row(item_id, status="ready", errors=errors, visible_at=datetime(2026, 3, 1, 12, 1))
    )

    view = await store.fail(item_id, Failure("boom", lease_token=token, retry=True, retry_after_seconds=60))

    assert conn.params("fail") == (NOW_TEXT, str(token), 1, 60, "boom", str(item_id))
    batch = conn.inlined("fail")
    for fragment in (
        CLOCK,
        f"DECLARE @token UNIQUEIDENTIFIER = CAST(NULLIF(N'{token}', N'') AS UNIQUEIDENTIFIER);",
        "DECLARE @retry BIT = 1;",
        "THEN DATEADD(SECOND, CAST(60 AS INT), @now)",
        "CAST(N'boom' AS NVARCHAR(MAX)) AS [error]",
        f"WHERE id = CAST(N'{item_id}' AS UNIQUEIDENTIFIER) AND status <> 'dead'",
    ):
        assert fragment in batch
    assert view.id == item_id
    assert view.status is ItemStatus.READY
    assert view.lease_expires_at is None
    assert [(e.at, e.error) for e in view.errors] == [(NOW, "boom")]
    assert conn.commits == 1


async def test_fail_without_retry_binds_zero_not_a_bool(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("fail", item_row(item_id, status="dead"))

    view = await store.fail(item_id, Failure("fatal", retry=False))

    assert conn.params("fail")[1:3] == ("", 0)
    assert view.status is ItemStatus.DEAD


async def test_fail_of_a_dead_item_is_refused(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("fail", Result(["id"], []))
    conn.reply("get_item", item_row(item_id, status="dead"))

    with pytest.raises(ItemDead):
        await store.fail(item_id, Failure("again"))

    assert conn.rollbacks == 1


async def test_get_item_judges_an_expired_lease_by_the_server_clock(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    expired = NOW.replace(tzinfo=None) - timedelta(seconds=1)
    conn.reply("get_item", item_row(item_id, status="leased", lease_token=uuid4(), visible_at=expired))

    view = await store.get_item(item_id)

    assert view.status is ItemStatus.READY
    assert view.lease_expires_at is None
    assert view.created_at == datetime(2026, 2, 1, 8, 0, tzinfo=UTC)


async def test_get_item_of_an_unknown_id_is_not_found(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, _ = fake
    with pytest.raises(ItemNotFound):
        await store.get_item(uuid4())


def stats_row(name: str, oldest: datetime | None) -> tuple[Any, ...]:
    return (name, 2, 1, 0, oldest, NOW.replace(tzinfo=None))


STATS_COLUMNS = ["name", "ready", "leased", "dead", "oldest_ready", "now"]


async def test_list_queues_asks_for_every_queue(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    oldest = NOW.replace(tzinfo=None) - timedelta(seconds=90)
    conn.reply("queue_stats", Result(STATS_COLUMNS, [stats_row("a", oldest), stats_row("b", None)]))

    stats = await store.list_queues()

    assert conn.params("queue_stats") == (NOW_TEXT, "")
    assert "DECLARE @queue NVARCHAR(4000) = NULLIF(N'', N'');" in conn.inlined("queue_stats")
    assert [(s.name, s.ready, s.leased, s.dead, s.oldest_ready_age_seconds) for s in stats] == [
        ("a", 2, 1, 0, 90.0),
        ("b", 2, 1, 0, None),
    ]


async def test_get_queue_filters_by_name_and_knows_missing_queues(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("queue_stats", Result(STATS_COLUMNS, [stats_row("orders", None)]))

    assert (await store.get_queue("orders")).name == "orders"
    with pytest.raises(QueueNotFound):
        await store.get_queue("nope")
    assert [e.params for e in conn.executed] == [(NOW_TEXT, "orders"), (NOW_TEXT, "nope")]


# --- migrations -----------------------------------------------------------------------------------


async def test_migrate_from_zero_applies_the_schema_under_the_lock(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply("applied_versions", Result(["version"], []))

    assert await store.migrate() == [1]

    assert conn.names == [
        "lock_migrations",
        "compatibility_level",
        "create_version_table",
        "applied_versions",
        *migration_statements(),
        "record_version",
        "unlock_migrations",
    ]
    assert conn.params("record_version") == (1, "init", NOW_TEXT)
    assert f"VALUES (1, N'init', COALESCE(CAST(NULLIF(N'{NOW_TEXT}', N'')" in conn.inlined("record_version")
    assert "@LockOwner = N'Session', @LockTimeout = 300000;" in conn.inlined("lock_migrations")
    assert conn.commits == 2, "the migration, then after the lock is released"
    assert not conn.closed


async def test_migrate_again_applies_nothing(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=1))  # granted after waiting for another replica
    conn.reply("compatibility_level", result(compatibility_level=160))
    conn.reply("applied_versions", Result(["version"], [(1,)]))

    assert await store.migrate() == []

    assert conn.names == [
        "lock_migrations",
        "compatibility_level",
        "create_version_table",
        "applied_versions",
        "unlock_migrations",
    ]


async def test_migrate_refuses_a_database_too_old_for_openjson(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=120))

    with pytest.raises(StoreError, match=r"compatibility level 120\b.*\b130 or later"):
        await store.migrate()

    assert conn.names == ["lock_migrations", "compatibility_level", "unlock_migrations"]
    assert conn.rollbacks == 1


async def test_migrate_gives_up_when_the_lock_is_not_granted(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=-1))

    with pytest.raises(DatabaseUnavailable, match="migration lock"):
        await store.migrate()

    assert conn.names == ["lock_migrations", "unlock_migrations"]


async def test_a_failed_migration_rolls_back_and_still_releases_the_lock(
    fake: tuple[MssqlStore, FakeConnection], fake_pyodbc: types.ModuleType
) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply("applied_versions", Result(["version"], []))
    conn.errors[migration_statements()[1]] = fake_pyodbc.ProgrammingError("42000", "Incorrect syntax (102)")

    with pytest.raises(StoreError):
        await store.migrate()

    assert conn.names[-1] == "unlock_migrations"
    assert "record_version" not in conn.names
    assert conn.rollbacks == 1


async def test_check_ready_wants_the_latest_version(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("applied_versions", Result(["version"], []), Result(["version"], [(1,)]))

    with pytest.raises(SchemaNotReady):
        await store.check_ready()
    await store.check_ready()


# --- errors ---------------------------------------------------------------------------------------


@pytest.fixture
def fake_pyodbc(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """pyodbc's exception tree, without pyodbc (it cannot load without unixODBC)."""
    module = types.ModuleType("pyodbc")
    module.Error = type("Error", (Exception,), {})
    for name in ("OperationalError", "ProgrammingError", "IntegrityError", "DataError", "InterfaceError"):
        setattr(module, name, type(name, (module.Error,), {}))
    monkeypatch.setitem(sys.modules, "pyodbc", module)
    return module


DRIVER = "[Microsoft][ODBC Driver 18 for SQL Server]"
SERVER = DRIVER + "[SQL Server]"
DUPLICATE = "Cannot insert duplicate key row in object 'dbo.sq_items' with unique index '{}'."


@pytest.mark.parametrize(
    ("kind", "state", "message", "expected"),
    [
        (
            "IntegrityError",
            "23000",
            SERVER + DUPLICATE.format("sq_items_id_key") + " (2601) (SQLExecute)",
            ItemExists,
        ),
        (
            "IntegrityError",
            "23000",
            SERVER + DUPLICATE.format("other_index") + " (2601) (SQLExecute)",
            StoreError,
        ),
        (
            "ProgrammingError",
            "42S02",
            SERVER + "Invalid object name 'dbo.sq_items'. (208) (SQLExecute)",
            SchemaNotReady,
        ),
        (
            "OperationalError",
            "08001",
            DRIVER + "Login timeout expired (0) (SQLDriverConnect)",
            DatabaseUnavailable,
        ),
        (
            "OperationalError",
            "08S01",
            DRIVER + "Communication link failure (0) (SQLExecute)",
            DatabaseUnavailable,
        ),
        ("Error", "HYT00", DRIVER + "Query timeout expired (0) (SQLExecute)", DatabaseUnavailable),
        (
            "InterfaceError",
            "28000",
            SERVER + "Login failed for user 'sa'. (18456) (SQLDriverConnect)",
            DatabaseUnavailable,
        ),
        (
            "Error",
            "42000",
            SERVER + "Database 'q' on server 's' is not currently available. (40613)",
            DatabaseUnavailable,
        ),
        (
            "Error",
            "40001",
            SERVER + "Transaction was deadlocked ... chosen as the deadlock victim. (1205)",
            DatabaseUnavailable,
        ),
        (
            "DataError",
            "22001",
            SERVER + "String or binary data would be truncated. (2628) (SQLExecute)",
            StoreError,
        ),
    ],
)
async def test_driver_errors_become_domain_errors(
    fake_pyodbc: types.ModuleType, kind: str, state: str, message: str, expected: type[QueueError]
) -> None:
    original = getattr(fake_pyodbc, kind)(state, message)

    with pytest.raises(QueueError) as raised:
        async with translated_errors():
            raise original

    assert type(raised.value) is expected
    assert raised.value.__cause__ is original


async def test_timeouts_become_database_unavailable() -> None:
    with pytest.raises(DatabaseUnavailable) as raised:
        async with translated_errors():
            raise TimeoutError()
    assert isinstance(raised.value.__cause__, TimeoutError)


async def test_other_exceptions_pass_through_untouched(fake_pyodbc: types.ModuleType) -> None:
    with pytest.raises(KeyError):
        async with translated_errors():
            raise KeyError("not the driver's")


async def test_a_duplicate_id_is_item_exists_and_rolls_back(
    fake: tuple[MssqlStore, FakeConnection], fake_pyodbc: types.ModuleType
) -> None:
    store, conn = fake
    message = SERVER + DUPLICATE.format("sq_items_id_key") + " (2601) (SQLExecute)"
    conn.errors["push_batch"] = fake_pyodbc.IntegrityError("23000", message)

    with pytest.raises(ItemExists):
        await store.push_batch([NewItem(uuid4(), "orders", "1", NOW)], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1)


class HangingPool:
    """A pool whose connections never come: the server is down and the login never answers."""

    async def acquire(self) -> Any:
        await asyncio.Event().wait()

    async def release(self, conn: Any) -> None:
        raise AssertionError("nothing was acquired")


async def test_waiting_for_a_connection_is_bounded() -> None:
    store = MssqlStore(URL, timeout_seconds=0.05)
    store._pool = HangingPool()

    with pytest.raises(DatabaseUnavailable) as raised:
        async with asyncio.timeout(5):
            await store.pop("orders", 1, 30)

    assert isinstance(raised.value.__cause__, TimeoutError)


# --- opening the pool -----------------------------------------------------------------------------


@pytest.fixture
def fake_aioodbc(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    calls: dict[str, Any] = {}

    class Pool:
        def close(self) -> None:
            calls["closed"] = True

        async def wait_closed(self) -> None:
            calls["wait_closed"] = True

    async def create_pool(**kwargs: Any) -> Pool:
        calls["create_pool"] = kwargs
        return Pool()

    module = types.ModuleType("aioodbc")
    module.create_pool = create_pool
    monkeypatch.setitem(sys.modules, "aioodbc", module)
    return calls


async def test_open_creates_a_lazy_pool_that_never_autocommits(fake_aioodbc: dict[str, Any]) -> None:
    store = MssqlStore(URL, pool_size=7, timeout_seconds=2.5)

    await store.open()
    await store.close()

    kwargs = fake_aioodbc["create_pool"]
    assert kwargs["dsn"] == odbc_connection_string(URL)
    assert (kwargs["minsize"], kwargs["maxsize"], kwargs["autocommit"]) == (0, 7, False)
    assert kwargs["timeout"] == 2
    assert isinstance(kwargs["timeout"], int)
    assert fake_aioodbc["closed"]
    assert fake_aioodbc["wait_closed"]


# --- the connection string ------------------------------------------------------------------------


def test_microsoft_driver_is_the_default_with_the_port_after_a_comma() -> None:
    assert odbc_connection_string(
        "mssql+odbc://sa:pw@db.local:1444/queue?Encrypt=yes&TrustServerCertificate=yes"
    ) == (
        "Driver={ODBC Driver 18 for SQL Server};Server=db.local,1444;Database=queue;UID=sa;PWD=pw;"
        "Encrypt=yes;TrustServerCertificate=yes"
    )


def test_the_port_defaults_to_1433_and_every_scheme_is_accepted() -> None:
    for scheme in ("mssql", "mssql+odbc", "mssql+aioodbc"):
        dsn = odbc_connection_string(f"{scheme}://sa:pw@db/queue?driver=ODBC+Driver+18+for+SQL+Server")
        assert dsn == "Driver={ODBC Driver 18 for SQL Server};Server=db,1433;Database=queue;UID=sa;PWD=pw"


def test_freetds_gets_a_port_keyword_and_tds_7_4() -> None:
    assert odbc_connection_string("mssql+odbc://sa:pw@db:1433/queue?driver=FreeTDS") == (
        "Driver={FreeTDS};Server=db;Port=1433;Database=queue;UID=sa;PWD=pw;TDS_Version=7.4"
    )
    assert odbc_connection_string("mssql://sa:pw@db/q?driver=FreeTDS&TDS_Version=8.0").endswith(
        ";TDS_Version=8.0"
    )


def test_credentials_are_percent_decoded_and_braced_when_needed() -> None:
    dsn = odbc_connection_string("mssql+odbc://app%40corp:p%3Bw%7Dd%40%3A@db/queue")
    assert "UID=app@corp;PWD={p;w}}d@:}" in dsn


def test_odbc_connect_is_passed_through_verbatim() -> None:
    raw = (
        "Driver={ODBC Driver 18 for SQL Server};Server=tcp:x.database.windows.net,1433;"
        "Authentication=ActiveDirectoryMsi"
    )
    url = "mssql+odbc:///?odbc_connect=" + quote_plus(raw)
    assert odbc_connection_string(url) == raw


def test_other_databases_urls_are_refused() -> None:
    with pytest.raises(ValueError, match="SQL Server"):
        odbc_connection_string("postgresql://u@h/db")


# --- no unixODBC needed to import ------------------------------------------------------------------


def test_importing_the_store_loads_no_odbc_module() -> None:
    code = "import sys, app.store.mssql; print(sorted(m for m in ('pyodbc', 'aioodbc') if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"
