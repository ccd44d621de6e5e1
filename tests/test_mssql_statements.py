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
import re
import subprocess
import sys
import types
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote_plus
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo

import pytest
import sqlglot
from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    Backoff,
    CompleteOutcome,
    Completion,
    DatabaseMisconfigured,
    DatabaseUnavailable,
    DeadFilter,
    DeletedQueue,
    Failure,
    HistoryFilter,
    InvalidCursor,
    ItemDead,
    ItemExists,
    ItemNotFound,
    ItemStatus,
    LeaseExpired,
    LeaseMismatch,
    NewItem,
    Outcome,
    Pushed,
    QueueError,
    QueueInUse,
    QueueNotFound,
    QueueSettings,
    SchemaNotReady,
    StoreError,
)
from simplequeue.store import rows
from simplequeue.store.cursors import encode_cursor
from simplequeue.store.migrations import Migration, load_migrations, split_statements
from simplequeue.store.mssql.errors import Deadlocked, translated_errors
from simplequeue.store.mssql.odbc import NVARCHAR_MAX, odbc_connection_string
from simplequeue.store.mssql.params import index_order
from simplequeue.store.mssql.statements import Q, fetch
from simplequeue.store.mssql.store import BATCH, MssqlStore
from simplequeue.store.queries import load_queries
from sqlglot import exp
from sqlglot.errors import ErrorLevel

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
NOW_TEXT = "2026-03-01T12:00:00.123456"
# The clock line of a batch, as the server sees it with the fake clock bound.
CLOCK = f"@now DATETIME2(7) = COALESCE(CAST(NULLIF(N'{NOW_TEXT}', N'') AS DATETIME2(7)), SYSUTCDATETIME());"
URL = "mssql+odbc://sa:secret@db.example:1433/queue?TrustServerCertificate=yes"
# v1; v2: delivery semantics; v3: pause; v4: no lock escalation on sq_items; v5: remembered ids
MIGRATION, DELIVERY, ADMIN, ESCALATION, CLIENT_IDS = load_migrations("mssql")[:5]
SQLITE_DELIVERY = load_migrations("sqlite")[1]


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


def migration_statements(migration: Migration = MIGRATION) -> list[str]:
    # One statement at a time, as MssqlStore.migrate runs them. Parsing the whole file at once would
    # not do: sqlglot nests every statement after an IF into that IF's body, where T-SQL's IF
    # governs only the next statement.
    return split_statements(migration.sql)


def all_migration_statements() -> list[str]:
    return [
        statement for migration in load_migrations("mssql") for statement in migration_statements(migration)
    ]


@pytest.mark.parametrize("name", sorted(Q))
def test_every_query_parses_as_tsql(name: str) -> None:
    assert parse(Q[name].sql)


@pytest.mark.parametrize("statement", all_migration_statements(), ids=lambda s: s.splitlines()[0][:60])
def test_every_migration_statement_parses_as_tsql(statement: str) -> None:
    assert len(parse(statement)) == 1


@pytest.mark.parametrize("name", sorted(Q))
def test_sqlglot_keeps_every_where_of_every_batch(name: str) -> None:
    # sqlglot can drop a clause it does not expect where it is (a WHERE after DELETE ... OUTPUT ...
    # INTO inside BEGIN ... END) without an error; the tests that read a batch's tree would then check
    # a statement that deletes everything.
    text = "\n".join(code(name))
    parsed = " ".join(tree.sql("tsql") for tree in parse(Q[name].sql))
    assert len(re.findall(r"\bWHERE\b", parsed)) == len(re.findall(r"\bWHERE\b", text))


def test_the_migration_splits_into_its_six_guarded_creates() -> None:
    assert len(migration_statements()) == 6
    for migration in (MIGRATION, DELIVERY, ADMIN, CLIENT_IDS):
        assert all(
            ";" not in line.rstrip()[:-1] for line in migration.sql.splitlines() if not line.startswith("--")
        )


def code(name: str) -> list[str]:
    """A batch's lines without its comments."""
    return [line for line in Q[name].sql.splitlines() if not line.lstrip().startswith("--")]


def batches() -> list[str]:
    """The queries sent as batches of several statements."""
    return sorted(name for name in Q if code(name)[0] == "SET NOCOUNT ON;")


def write_targets(name: str) -> list[str]:
    """What each INSERT, UPDATE and DELETE of a batch writes to: a table, a CTE, an alias or @variable."""
    found = []
    for tree in parse(Q[name].sql):
        for node in tree.walk():
            if isinstance(node, exp.Insert | exp.Update | exp.Delete):
                target = node.this.this if isinstance(node.this, exp.Schema) else node.this
                found.append(target.sql("tsql"))
    return found


def writes(name: str) -> bool:
    """Whether a batch changes a table of ours (not only table variables)."""
    return any(not target.startswith("@") for target in write_targets(name))


@pytest.mark.parametrize("name", batches())
def test_every_batch_that_writes_aborts_its_transaction_on_any_error(name: str) -> None:
    if writes(name):
        assert code(name)[1] == "SET XACT_ABORT ON;", "a failed statement must roll back the ones before it"


def test_the_batches_that_write_are_the_ones_expected() -> None:
    assert {name for name in batches() if writes(name)} == {
        "claim_dedup_keys",
        "push_batch",
        "pop",
        "extend",
        "complete_batch",
        "fail",
        "reap_expired",
        "revive",
        "purge_dead",
        "purge_history",
        "put_queue",
        "set_paused",
        "delete_queue",
    }


def clocked() -> list[str]:
    return sorted(name for name in Q if "@now" in Q[name].sql and name != "record_version")


@pytest.mark.parametrize("name", clocked())
def test_the_server_clock_is_used_unless_one_is_bound(name: str) -> None:
    declare = next(tree for tree in parse(Q[name].sql) if isinstance(tree, exp.Declare))
    default = declare.expressions[0].args["default"]
    assert declare.expressions[0].this[0].name == "now", "the clock is the batch's first variable"
    assert "SYSUTCDATETIME" in default.sql("tsql").upper()
    assert default.find(exp.Placeholder) is not None


def test_batches_that_stamp_finish_times_round_the_clock_to_the_microsecond() -> None:
    # died_at and finished_at key the dead-letter and history pages; a cursor is a Python datetime.
    rounding = "SET @now = CAST(@now AS DATETIME2(6));"
    stamping = {"complete_batch", "fail", "reap_expired"}
    for name in clocked():
        lines = code(name)
        if name in stamping:
            assert lines[3] == rounding, name
        else:
            assert rounding not in lines, name


def test_fractional_seconds_are_added_as_whole_seconds_then_microseconds() -> None:
    # DATEADD(MICROSECOND, n, t) takes an INT n: all of a delay in microseconds overflows past 35.8 min.
    found = 0
    for name in Q:
        for tree in parse(Q[name].sql):
            for add in tree.find_all(exp.DateAdd):
                if add.text("unit").upper() == "MICROSECOND":
                    found += 1
                    inner = add.this
                    assert isinstance(inner, exp.DateAdd), name
                    assert inner.text("unit").upper() == "SECOND", name
    assert found == 3, "push_batch, fail and revive"


# --- named parameters ---------------------------------------------------------------------------

# Each query's parameters, in the order of its ? markers: the order in which pyodbc takes the values
# that Query.bind lines up by name. The binding tests below check which value lands on which marker.
PARAMETERS = {
    "claim_dedup_keys": ("now", "claims"),
    "push_batch": ("now", "items"),
    "pop": ("now", "queue", "lease_seconds", "max_items", "lease_token"),
    "extend": ("now", "id", "lease_token", "lease_seconds"),
    "complete_batch": ("now", "items"),
    "fail": ("now", "id", "lease_token", "retry", "retry_after", "draw", "error"),
    "reap_expired": ("now", "error", "limit"),
    "get_item": ("now", "id"),
    "list_dead": ("now", "queue", "since", "until", "after_at", "after_seq", "limit"),
    "pick_dead": ("queue", "ids", "limit"),
    "revive": ("now", "queue", "plan"),
    "purge_dead": ("now", "queue", "limit"),
    "list_history": ("queue", "outcome", "since", "until", "after_at", "after_seq", "limit"),
    "purge_history": ("now", "limit"),
    "put_queue": (
        "now",
        "queue",
        "max_attempts",
        "lease_seconds",
        "backoff_base_seconds",
        "backoff_factor",
        "backoff_cap_seconds",
        "backoff_jitter",
        "retention_seconds",
        "dedup_window_seconds",
        "history_payload",
    ),
    "next_visible_at": ("now", "queues"),
    "queue_stats": ("now", "queue"),
    "queue_exists": ("queue",),
    "set_paused": ("queue", "paused"),
    "peek": ("now", "queue", "state", "after_at", "after_seq", "limit"),
    "delete_queue": ("now", "queue", "force"),
    "lock_migrations": ("timeout_ms",),
    "unlock_migrations": (),
    "create_version_table": (),
    "applied_versions": (),
    "record_version": ("version", "name", "now"),
    "compatibility_level": (),
}
# The same file with :name kept, for tests that read which parameter a statement takes.
NAMED = load_queries("simplequeue.store.mssql", "named")


def test_every_query_names_its_parameters_in_marker_order() -> None:
    assert {name: query.params for name, query in Q.items()} == PARAMETERS
    assert {query.style for query in Q.values()} == {"qmark"}


@pytest.mark.parametrize("name", sorted(Q))
def test_every_marker_is_a_named_parameter_written_once(name: str) -> None:
    # A ? written into queries.sql would be a marker that no name binds; a name written twice would be
    # a second marker and a second copy of its value (a batch reads a value twice through its variable).
    query = Q[name]
    assert placeholders(query.sql) == len(query.params)
    assert len(set(query.params)) == len(query.params)
    assert sorted(query.params) == sorted(NAMED[name].params)


def test_a_variable_set_from_a_parameter_takes_the_parameters_name() -> None:
    found = {}
    for name, query in NAMED.items():
        for tree in parse(query.sql):
            if isinstance(tree, exp.Declare) and (default := tree.expressions[0].args.get("default")):
                variable = tree.expressions[0].this[0].name
                for placeholder in default.find_all(exp.Placeholder):
                    found[(name, variable)] = placeholder.name
    mismatched = {key: param for key, param in found.items() if key[1] != param}
    # @token is the batch's short name for the lease token the store binds under its protocol name.
    assert mismatched == {("extend", "token"): "lease_token", ("fail", "token"): "lease_token"}
    assert ("pop", "queue") in found


# --- the pop --------------------------------------------------------------------------------------


def hints(table: exp.Table) -> list[str]:
    return sorted(var.name.upper() for hint in table.args.get("hints") or [] for var in hint.expressions)


def index_hint(table: exp.Table) -> str:
    [index] = [
        hint for hint in table.args["hints"] for var in hint.expressions if var.name.upper() == "INDEX"
    ]
    return index.sql(dialect="tsql")


def pop_update() -> exp.Update:
    trees = parse(Q["pop"].sql)
    assert [type(tree) for tree in trees] == [exp.Set, exp.Set, *[exp.Declare] * 5, exp.Update]
    update = trees[-1]
    assert isinstance(update, exp.Update)
    return update


def pop_declares() -> dict[str, str]:
    """pop's variables: name -> initialiser."""
    declares = [tree for tree in parse(Q["pop"].sql) if isinstance(tree, exp.Declare)]
    return {d.expressions[0].this[0].name: d.expressions[0].args["default"].sql("tsql") for d in declares}


def claim_select() -> exp.Select:
    update = pop_update()
    cte = update.find(exp.CTE)
    assert cte is not None
    assert update.this.name == cte.alias, "the UPDATE must target the claiming CTE"
    assert isinstance(cte.this, exp.Select)
    return cte.this


def group_probe() -> exp.Select:
    [probe] = [node.this for node in claim_select().args["where"].find_all(exp.Exists)]
    assert isinstance(probe, exp.Select)
    return probe


def test_pop_claims_top_n_rows_of_sq_items_with_the_four_locking_hints_on_the_pop_index() -> None:
    select = claim_select()
    assert select.args.get("limit") is not None, "TOP (n)"
    table = select.find(exp.From).this
    assert (table.db, table.name) == ("dbo", "sq_items")
    assert hints(table) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert "sq_items_pop" in index_hint(table), "pop must walk the filtered pop index"


def test_pop_takes_the_highest_priority_first_then_the_oldest_then_insertion_order() -> None:
    order = claim_select().find(exp.Order)
    assert [(o.this.name, bool(o.args.get("desc"))) for o in order.expressions] == [
        ("priority", True),
        ("created_at", False),
        ("seq", False),
    ]
    # The pop index has the same order, so the claim stops after TOP rows of a walk.
    columns = create_index("sq_items_pop", DELIVERY).this.args["params"].args["columns"]
    assert [(o.this.name, bool(o.args.get("desc"))) for o in columns] == [
        ("queue", False),
        ("priority", True),
        ("created_at", False),
        ("seq", False),
    ]


def test_pop_claims_only_live_due_rows_and_no_expired_lease_on_its_last_attempt() -> None:
    where = claim_select().args["where"]
    assert live_statuses(where) == [["leased", "ready"]] * 2, "the claim's, then the group probe's"
    assert where.this.sql("tsql").startswith("x.queue = @queue AND x.status IN ('ready', 'leased')")
    cutoffs = [node for node in where.find_all(exp.LTE) if node.this.name == "visible_at"]
    assert len(cutoffs) == 1
    assert isinstance(cutoffs[0].expression, exp.Parameter)
    assert cutoffs[0].expression.name == "now"
    assert "(x.status = 'ready' OR x.attempts < @max_attempts)" in where.sql("tsql")
    assert pop_declares()["max_attempts"] == "(SELECT max_attempts FROM dbo.sq_queues WHERE name = @queue)"


def test_pops_group_probe_waits_for_locked_rows_instead_of_passing_them() -> None:
    # READPAST here would skip an earlier item of the group that another transaction holds and hand
    # out a later one while it is in flight; READCOMMITTEDLOCK waits and reads the committed status.
    probe = group_probe()
    table = probe.find(exp.From).this
    assert (table.db, table.name, table.alias) == ("dbo", "sq_items", "e")
    assert hints(table) == ["INDEX", "READCOMMITTEDLOCK"]
    assert "READPAST" not in probe.sql("tsql").upper()
    assert "sq_items_group" in index_hint(table)
    assert "deliberately carries READCOMMITTEDLOCK but NOT READPAST" in Q["pop"].sql, "the comment says why"


def test_pops_group_probe_looks_for_an_earlier_live_item_of_the_same_group() -> None:
    where = claim_select().args["where"].sql("tsql")
    assert "(x.group_key IS NULL OR NOT EXISTS(" in where, "ungrouped items need no probe"
    probe = group_probe().args["where"]
    assert live_statuses(probe) == [["leased", "ready"]]
    for condition in ("e.queue = x.queue", "e.group_key = x.group_key", "e.seq < x.seq"):
        assert condition in probe.sql("tsql")
    # A filtered index serves the probe only if the probe repeats its filter as literals.
    index = create_index("sq_items_group", DELIVERY).this.args["params"]
    assert [o.this.name for o in index.args["columns"]] == ["queue", "group_key", "seq"]
    assert index.args["where"].this.sql("tsql") in probe.sql("tsql").replace("e.", "")


def test_pop_leases_for_the_given_seconds_or_the_queues_and_outputs_the_leased_rows() -> None:
    update = pop_update()
    assignments = {eq.this.name: eq.expression.sql("tsql") for eq in update.expressions}
    assert assignments == {
        "status": "'leased'",
        "attempts": "attempts + 1",
        "lease_token": "CAST(? AS UNIQUEIDENTIFIER)",
        "visible_at": "DATEADD(SECOND, @lease_seconds, @now)",
        "first_popped_at": "COALESCE(first_popped_at, @now)",
    }
    assert pop_declares()["lease_seconds"] == (
        "COALESCE(CAST(NULLIF(?, N'') AS INTEGER), "
        "(SELECT lease_seconds FROM dbo.sq_queues WHERE name = @queue))"
    )
    output = update.args["returning"].expressions
    assert {column.table for column in output} == {"inserted"}
    assert [column.name for column in output] == [
        "seq",
        "id",
        "queue",
        "payload",
        "created_at",
        "attempts",
        "lease_token",
        "visible_at",
        "priority",
        "group_key",
    ]
    assert not update.args["returning"].args.get("into"), "OUTPUT rows go to the client"


# --- the schema -----------------------------------------------------------------------------------


def guarded(migration: Migration) -> list[tuple[exp.Expression, exp.Expression]]:
    """(guard, statement) of each guarded statement of a migration."""
    pairs = []
    for statement in migration_statements(migration):
        [tree] = parse(statement)
        if isinstance(tree, exp.IfBlock):
            [body] = tree.args["true"].expressions
            pairs.append((tree.this, body))
    return pairs


def guarded_creates(migration: Migration = MIGRATION) -> list[tuple[exp.Expression, exp.Create]]:
    if migration is MIGRATION:
        assert all(isinstance(parse(s)[0], exp.IfBlock) for s in migration_statements()), "unguarded"
    return [(guard, body) for guard, body in guarded(migration) if isinstance(body, exp.Create)]


def create_table(name: str, migration: Migration = MIGRATION) -> exp.Schema:
    for _, create in guarded_creates(migration):
        if create.args["kind"] == "TABLE" and create.this.this.name == name:
            assert isinstance(create.this, exp.Schema)
            return create.this
    raise AssertionError(f"no CREATE TABLE {name}")


def create_index(name: str, migration: Migration = MIGRATION) -> exp.Create:
    for _, create in guarded_creates(migration):
        if "INDEX" in create.args["kind"] and create.this.name == name:
            return create
    raise AssertionError(f"no CREATE INDEX {name}")


@pytest.mark.parametrize("migration", [MIGRATION, DELIVERY, CLIENT_IDS], ids=lambda m: m.name)
def test_every_create_is_guarded_by_a_check_for_the_object_it_creates(migration: Migration) -> None:
    for guard, create in guarded_creates(migration):
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
            assert str(create.this.args["table"]) in named


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


# --- the schema, v2: delivery semantics -----------------------------------------------------------


def added_columns(table: str) -> dict[str, exp.ColumnDef]:
    """The columns the delivery migration adds to a table, each guarded by a check for itself."""
    found = {}
    for guard, body in guarded(DELIVERY):
        if isinstance(body, exp.Alter) and isinstance(body.args["actions"][0], exp.ColumnDef):
            if body.this.name != table:
                continue
            [column] = body.args["actions"]
            assert guard.sql("tsql") == f"COL_LENGTH(N'dbo.{table}', N'{column.name}') IS NULL"
            found[column.name] = column
    return found


def constraint(column: exp.ColumnDef, kind: type[exp.Expression]) -> exp.Expression | None:
    for c in column.args.get("constraints") or []:
        if isinstance(c.args.get("kind"), kind):
            return c.args["kind"]
    return None


def sqlite_settings() -> dict[str, tuple[str, str]]:
    """SQLite's queue settings, the reference: column -> (default, check)."""
    found = re.findall(
        r"ALTER TABLE sq_queues ADD COLUMN (\w+) \w+ NOT NULL DEFAULT ([\d.]+) CHECK \((.+)\);",
        SQLITE_DELIVERY.sql,
    )
    return {name: (default, check) for name, default, check in found}


def test_every_delivery_statement_is_guarded_or_touches_only_rows_not_yet_done() -> None:
    for statement in migration_statements(DELIVERY):
        [tree] = parse(statement)
        if isinstance(tree, exp.IfBlock):
            continue
        # The backfills: running them again changes nothing.
        assert isinstance(tree, exp.Update), statement
        [assignment] = tree.expressions
        assert f"{assignment.this.name} IS NULL" in tree.args["where"].sql("tsql")


def test_queue_settings_have_sqlites_defaults_and_ranges() -> None:
    columns = added_columns("sq_queues")
    reference = sqlite_settings()
    assert set(columns) == set(reference) == set(rows.settings_params(QueueSettings()))
    for name, (default, check) in reference.items():
        column = columns[name]
        assert constraint(column, exp.NotNullColumnConstraint) is not None
        assert float(constraint(column, exp.DefaultColumnConstraint).this.name) == float(default), name
        if name == "history_payload":
            assert column.args["kind"].sql("tsql") == "BIT", "0 or 1 by its type"
            continue
        ours = constraint(column, exp.CheckColumnConstraint).this.sql("tsql")
        assert [float(n) for n in re.findall(r"[\d.]+", ours)] == [
            float(n) for n in re.findall(r"[\d.]+", check)
        ]
        assert ours.startswith(f"{name} BETWEEN")
    kinds = {name: column.args["kind"].sql("tsql") for name, column in columns.items()}
    assert {kinds[n] for n in kinds if n.startswith("backoff_")} == {"FLOAT"}


def test_a_queue_made_by_a_push_gets_the_domains_default_settings() -> None:
    defaults = {
        name: constraint(column, exp.DefaultColumnConstraint).this.name
        for name, column in added_columns("sq_queues").items()
    }
    row = {name: float(value) if "." in value else int(value) for name, value in defaults.items()}
    assert rows.queue_settings(row) == QueueSettings()


def test_items_gain_the_columns_of_sqlites_items() -> None:
    columns = added_columns("sq_items")
    assert {name: column.args["kind"].sql("tsql") for name, column in columns.items()} == {
        "priority": "INTEGER",
        "group_key": "NVARCHAR(128)",
        "dedup_key": "NVARCHAR(128)",
        "first_popped_at": "DATETIME2(7)",
        "died_at": "DATETIME2(7)",
    }
    assert constraint(columns["priority"], exp.DefaultColumnConstraint).this.name == "0"
    for key in ("group_key", "dedup_key"):
        collation = constraint(columns[key], exp.CollateColumnConstraint)
        assert collation is not None
        assert collation.sql("tsql") == "COLLATE Latin1_General_100_BIN2"
        assert (
            constraint(columns[key], exp.CheckColumnConstraint).sql("tsql")
            == f"CHECK (DATALENGTH({key}) > 0)"
        )
    # Together with v1's, the columns SQLite's sq_items has.
    v1 = {col.name for col in create_table("sq_items").expressions if isinstance(col, exp.ColumnDef)}
    sqlite = re.search(r"CREATE TABLE sq_items_v2 \((.*?)\n\);", SQLITE_DELIVERY.sql, re.S)
    assert sqlite is not None
    reference = {
        line.split()[0]
        for line in sqlite[1].splitlines()
        if line.strip() and not line.strip().startswith("CHECK")
    }
    assert v1 | set(columns) == reference


def test_dead_items_have_a_died_at_backfilled_before_the_check_that_demands_it() -> None:
    statements = [parse(s)[0] for s in migration_statements(DELIVERY)]
    backfill = next(
        n
        for n, t in enumerate(statements)
        if isinstance(t, exp.Update) and t.expressions[0].this.name == "died_at"
    )
    check = next(
        n
        for n, t in enumerate(statements)
        if isinstance(t, exp.IfBlock) and "sq_items_died_ck" in t.args["true"].sql("tsql")
    )
    assert backfill < check
    assert statements[backfill].sql("tsql") == (
        "UPDATE dbo.sq_items SET died_at = visible_at WHERE status = 'dead' AND died_at IS NULL"
    )
    assert (
        statements[check]
        .args["true"]
        .sql("tsql")
        .endswith(
            "CHECK ((status = 'dead' AND NOT died_at IS NULL) OR (status <> 'dead' AND died_at IS NULL))"
        )
    )


def test_v1s_pop_and_dead_indexes_are_rebuilt_only_while_they_lack_their_new_column() -> None:
    drops = [(guard, body) for guard, body in guarded(DELIVERY) if isinstance(body, exp.Drop)]
    assert [body.sql("tsql") for _, body in drops] == [
        "DROP INDEX sq_items_pop ON dbo.sq_items",
        "DROP INDEX sq_items_dead ON dbo.sq_items",
    ]
    for (guard, _), column in zip(drops, ("priority", "died_at"), strict=True):
        assert f"COLUMNPROPERTY(i.object_id, N'{column}', 'ColumnId')" in guard.sql("tsql")
    statements = migration_statements(DELIVERY)
    for index in ("sq_items_pop", "sq_items_dead"):
        drop = next(n for n, s in enumerate(statements) if f"DROP INDEX {index}" in s)
        create = next(n for n, s in enumerate(statements) if f"CREATE NONCLUSTERED INDEX {index} " in s)
        assert drop < create


@pytest.mark.parametrize(
    ("name", "columns", "where"),
    [
        ("sq_items_pop", ["queue", "priority", "created_at", "seq"], "status IN ('ready', 'leased')"),
        (
            "sq_items_group",
            ["queue", "group_key", "seq"],
            "NOT group_key IS NULL AND status IN ('ready', 'leased')",
        ),
        ("sq_items_leased", ["visible_at"], "status = 'leased'"),
        ("sq_items_dead", ["queue", "died_at", "seq"], "status = 'dead'"),
        ("sq_history_queue", ["queue", "finished_at", "seq"], None),
        ("sq_history_outcome", ["queue", "outcome", "finished_at", "seq"], None),
        ("sq_dedup_expires", ["expires_at"], "NOT expires_at IS NULL"),
    ],
)
def test_the_delivery_indexes(name: str, columns: list[str], where: str | None) -> None:
    params = create_index(name, DELIVERY).this.args["params"]
    assert [o.this.name for o in params.args["columns"]] == columns
    found = params.args.get("where")
    assert (found.this.sql("tsql") if found else None) == where


def test_history_has_sqlites_columns_clustered_on_an_identity_seq() -> None:
    schema = create_table("sq_history", DELIVERY)
    types_ = {
        col.name: col.args["kind"].sql("tsql") for col in schema.expressions if isinstance(col, exp.ColumnDef)
    }
    sqlite = re.search(r"CREATE TABLE sq_history \((.*?)\n\);", SQLITE_DELIVERY.sql, re.S)
    assert sqlite is not None
    assert list(types_) == [line.split()[0] for line in sqlite[1].splitlines() if line.strip()]
    assert types_["outcome"] == "VARCHAR(9)"
    assert types_["last_error"] == types_["payload"] == "NVARCHAR(MAX)"
    seq = next(col for col in schema.expressions if isinstance(col, exp.ColumnDef) and col.name == "seq")
    assert seq.find(exp.GeneratedAsIdentityColumnConstraint) is not None
    [primary_key] = [c for c in schema.expressions if c.find(exp.PrimaryKeyColumnConstraint)]
    assert [o.this.name for o in primary_key.find(exp.ClusteredColumnConstraint).this] == ["seq"]
    checks = [c.sql("tsql") for c in schema.find_all(exp.CheckColumnConstraint)]
    assert checks == ["CHECK (outcome IN ('completed', 'dead'))", "CHECK (attempts >= 0)"]


def test_dedup_keys_are_unique_per_queue_by_their_primary_key() -> None:
    schema = create_table("sq_dedup", DELIVERY)
    types_ = {
        col.name: col.args["kind"].sql("tsql") for col in schema.expressions if isinstance(col, exp.ColumnDef)
    }
    assert types_ == {
        "queue": "NVARCHAR(128)",
        "dedup_key": "NVARCHAR(128)",
        "item_id": "UNIQUEIDENTIFIER",
        "created_at": "DATETIME2(7)",
        "expires_at": "DATETIME2(7)",
    }
    [primary_key] = [c for c in schema.expressions if c.find(exp.PrimaryKeyColumnConstraint)]
    assert [o.this.name for o in primary_key.find(exp.ClusteredColumnConstraint).this] == [
        "queue",
        "dedup_key",
    ]
    assert schema.sql("tsql").count("COLLATE Latin1_General_100_BIN2") == 2


# --- the schema, v5: remembered ids ---------------------------------------------------------------


def column_def(schema: exp.Schema, name: str) -> exp.ColumnDef:
    [column] = [c for c in schema.expressions if isinstance(c, exp.ColumnDef) and c.name == name]
    return column


def test_every_v5_statement_is_guarded_by_a_check_for_what_it_adds() -> None:
    statements_ = [parse(s)[0] for s in migration_statements(CLIENT_IDS)]
    assert all(isinstance(tree, exp.IfBlock) for tree in statements_)
    assert len(guarded(CLIENT_IDS)) == 3, "the item flag, the table, its index"


def test_items_say_whether_they_claimed_their_id_and_older_items_did_not() -> None:
    [(guard, alter)] = [(g, b) for g, b in guarded(CLIENT_IDS) if isinstance(b, exp.Alter)]
    assert guard.sql("tsql") == "COL_LENGTH(N'dbo.sq_items', N'remember_id') IS NULL"
    assert alter.this.sql("tsql") == "dbo.sq_items"
    [column] = alter.args["actions"]
    assert (column.name, column.args["kind"].sql("tsql")) == ("remember_id", "BIT")
    assert constraint(column, exp.NotNullColumnConstraint) is not None
    assert constraint(column, exp.DefaultColumnConstraint).this.name == "0"
    named = [c.name for c in column.args["constraints"] if c.name]
    assert named == ["sq_items_remember_id_df"], "a named default, as every other"


def test_remembered_ids_are_unique_by_id_alone_like_sq_items_id_index() -> None:
    schema = create_table("sq_client_ids", CLIENT_IDS)
    types_ = {
        col.name: col.args["kind"].sql("tsql") for col in schema.expressions if isinstance(col, exp.ColumnDef)
    }
    assert types_ == {
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(128)",
        "created_at": "DATETIME2(7)",
        "expires_at": "DATETIME2(7)",
    }
    # The queue column exactly as the items' (binary collation), created_at as theirs.
    items = create_table("sq_items")
    for name in ("queue", "created_at"):
        assert column_def(schema, name).sql("tsql") == column_def(items, name).sql("tsql")
    for name, nullable in (("id", False), ("queue", False), ("created_at", False), ("expires_at", True)):
        # sqlglot reads an explicit NULL as a NOT NULL constraint that allows null.
        not_null = constraint(column_def(schema, name), exp.NotNullColumnConstraint)
        assert bool(not_null.args.get("allow_null")) is nullable, name  # expires_at NULL: the item lives
    [primary_key] = [c for c in schema.expressions if c.find(exp.PrimaryKeyColumnConstraint)]
    assert [o.this.name for o in primary_key.find(exp.ClusteredColumnConstraint).this] == ["id"]
    assert "CONSTRAINT sq_client_ids_pk PRIMARY KEY CLUSTERED (id)" in schema.sql("tsql")


def test_the_sweep_finds_claims_past_their_window_by_a_filtered_index() -> None:
    params = create_index("sq_client_ids_expires", CLIENT_IDS).this.args["params"]
    assert [o.this.name for o in params.args["columns"]] == ["expires_at"]
    assert params.args["where"].this.sql("tsql") == "NOT expires_at IS NULL"


# --- the batches ----------------------------------------------------------------------------------


def openjson_columns(node: exp.Expression) -> dict[str, str]:
    openjson = node.find(exp.OpenJSON)
    assert openjson is not None
    return {col.name: col.args["kind"].sql("tsql") for col in openjson.expressions}


def statements(name: str) -> list[exp.Expression]:
    """A batch's statements after its SETs and DECLAREs."""
    return [tree for tree in parse(Q[name].sql) if not isinstance(tree, exp.Set | exp.Declare)]


def declared(name: str) -> str:
    return " ".join(tree.sql("tsql") for tree in parse(Q[name].sql) if isinstance(tree, exp.Declare))


def table_named(node: exp.Expression, name: str) -> exp.Table:
    [table] = [t for t in node.find_all(exp.Table) if t.name == name]
    return table


def history_insert(name: str) -> exp.Insert:
    [insert] = [s for s in statements(name) if isinstance(s, exp.Insert) and s.this.this.name == "sq_history"]
    assert isinstance(insert, exp.Insert)
    return insert


def history_values(insert: exp.Insert) -> dict[str, str]:
    """Each history column and what the batch writes into it."""
    columns = [col.name for col in insert.this.expressions]
    values = [value.sql("tsql") for value in insert.expression.expressions]
    return dict(zip(columns, values, strict=True))


HISTORY_COLUMNS = [
    "id",
    "queue",
    "outcome",
    "attempts",
    "created_at",
    "first_popped_at",
    "finished_at",
    "group_key",
    "dedup_key",
    "last_error",
    "payload",
]


def test_claim_dedup_keys_locks_every_claimed_key_present_or_not_then_takes_new_and_expired_ones() -> None:
    assert placeholders(Q["claim_dedup_keys"].sql) == 2, "the clock and the claims, however many"
    read, lock, take_over, insert, answer = statements("claim_dedup_keys")
    assert isinstance(read, exp.Insert)
    assert read.this.this.sql("tsql") == "@claim"
    assert openjson_columns(read.expression) == {
        "n": "INTEGER",
        "queue": "NVARCHAR(4000)",
        "key": "NVARCHAR(4000)",
        "id": "UNIQUEIDENTIFIER",
        "created_at": "NVARCHAR(40)",
    }
    assert "PRIMARY KEY (queue, dedup_key)" in declared("claim_dedup_keys"), "seeks in key order"
    assert declared("claim_dedup_keys").count("COLLATE Latin1_General_100_BIN2") == 6
    # The lock: a serializable seek per key, so that a missing key is range-locked until commit.
    assert isinstance(lock, exp.Insert)
    assert lock.this.this.sql("tsql") == "@held"
    assert hints(table_named(lock, "sq_dedup")) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    # A key whose window passed is taken over; only a new key is inserted.
    assert isinstance(take_over, exp.Update)
    assert take_over.args["where"].this.sql("tsql") == "NOT d.expires_at IS NULL AND d.expires_at <= @now"
    assert {eq.this.name: eq.expression.sql("tsql") for eq in take_over.expressions} == {
        "item_id": "c.item_id",
        "created_at": "c.created_at",
        "expires_at": "NULL",
    }
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_dedup"
    assert "NOT EXISTS(SELECT 1 FROM @held AS h" in insert.expression.sql("tsql")
    for took in (take_over, insert):
        assert took.args["returning"].args["into"].name == "took"
    assert isinstance(answer, exp.Select)
    assert [col.alias_or_name for col in answer.expressions] == ["n", "item_id", "created_at", "taken"]


@dataclass(frozen=True)
class PushBatch:
    """push_batch's statements after its SETs and DECLAREs, in the batch's order."""

    register: exp.IfBlock  # the batch's queues
    grouped: exp.Insert  # the queues of its grouped items...
    lock_groups: exp.Insert  # ...locked
    lock_ids: exp.Insert  # the ids that exist in sq_items, locked
    remember: exp.Insert  # the ids that are their items' idempotency keys
    lock_claims: exp.Insert  # their claims in sq_client_ids, locked
    take_over: exp.Update  # claims whose window passed
    claim: exp.Insert  # new claims
    insert: exp.Insert  # the items
    inserted: exp.Select  # first result set
    holders: exp.Union  # second result set


def push_batch_statements() -> PushBatch:
    sql = Q["push_batch"].sql
    # sqlglot reads every statement after a T-SQL IF as its body; T-SQL's IF governs one statement.
    # So the IF (up to its semicolon) is parsed on its own, in its place.
    start = sql.index("\nIF EXISTS")
    end = sql.index(";\n", start) + 2
    before, [register], after = parse(sql[:start]), parse(sql[start:end]), parse(sql[end:])
    trees = [*before, register, *after]
    kinds = [type(tree) for tree in trees]
    assert kinds == [
        exp.Set,
        exp.Set,
        *[exp.Declare] * 9,
        exp.IfBlock,
        *[exp.Insert] * 5,
        exp.Update,
        exp.Insert,
        exp.Insert,
        exp.Select,
        exp.Union,
    ]
    found = PushBatch(*trees[11:])
    for name, kind in PushBatch.__annotations__.items():
        assert isinstance(getattr(found, name), getattr(exp, kind.split(".")[1])), name
    return found


def test_push_batch_reads_every_item_from_one_json_parameter() -> None:
    batch = push_batch_statements()
    assert placeholders(Q["push_batch"].sql) == 2, "the clock and the items, whatever their number"
    assert parse(Q["push_batch"].sql)[3].sql("tsql") == "DECLARE @items NVARCHAR(MAX) = ?"
    for statement in (batch.grouped, batch.lock_ids, batch.remember, batch.insert):
        assert statement.expression.find(exp.OpenJSON).this.sql("tsql") == "@items"
    # The payload is a JSON string read as text (no AS JSON, which would re-serialise it); the times are
    # text that the SELECT casts, as everywhere else.
    insert = batch.insert
    openjson = insert.expression.find(exp.OpenJSON)
    assert openjson_columns(insert.expression) == {
        "n": "INTEGER",
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(4000)",
        "payload": "NVARCHAR(MAX)",
        "created_at": "NVARCHAR(40)",
        "priority": "INTEGER",
        "group_key": "NVARCHAR(4000)",
        "dedup_key": "NVARCHAR(4000)",
        "delay_seconds": "INTEGER",
        "delay_micros": "INTEGER",
        "not_before": "NVARCHAR(40)",
        "remember": "BIT",
    }
    assert not any(col.args.get("as_json") for col in openjson.expressions)
    assert "CAST(j.created_at AS DATETIME2(7))" in insert.expression.sql("tsql")
    assert [col.name for col in insert.this.expressions] == [
        "id",
        "queue",
        "payload",
        "created_at",
        "visible_at",
        "priority",
        "group_key",
        "dedup_key",
        "remember_id",
    ]
    assert insert.expression.expressions[-1].sql("tsql") == "j.remember", "the flag the store sends"


def test_push_batch_makes_an_item_visible_at_the_later_of_not_before_and_its_delay_from_the_servers_now() -> (
    None
):
    insert = push_batch_statements().insert
    visible_at = insert.expression.expressions[4].sql("tsql")
    assert visible_at == (
        "(SELECT MAX(v.at) FROM (VALUES (CAST(j.not_before AS DATETIME2(7))), "
        "(DATEADD(MICROSECOND, j.delay_micros, DATEADD(SECOND, j.delay_seconds, @now)))) AS v(at))"
    )


def test_push_batch_takes_turns_on_the_queues_of_its_grouped_items_before_anything_else() -> None:
    batch = push_batch_statements()
    grouped, lock_groups = batch.grouped, batch.lock_groups
    assert grouped.this.this.sql("tsql") == "@grouped"
    assert grouped.expression.args.get("distinct") is not None
    assert "j.queue COLLATE Latin1_General_100_BIN2" in grouped.expression.sql("tsql")
    assert grouped.expression.args["where"].this.sql("tsql") == "NOT j.group_key IS NULL"
    assert (
        "@grouped TABLE (queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY)"
        in declared("push_batch")
    )
    queues = table_named(lock_groups, "sq_queues")
    assert hints(queues) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert lock_groups.expression.find(exp.From).this.sql("tsql") == "@grouped AS g", "in the key's order"


def test_push_batch_then_finds_the_ids_that_exist_under_key_range_locks() -> None:
    lock = push_batch_statements().lock_ids
    assert lock.this.sql("tsql") == "@taken (id)"
    assert openjson_columns(lock.expression) == {"id": "UNIQUEIDENTIFIER"}
    [join] = lock.expression.args["joins"]
    probed = join.this
    assert (probed.db, probed.name, probed.alias) == ("dbo", "sq_items", "e")
    assert hints(probed) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert join.args["on"].sql("tsql") == "e.id = j.id"
    assert join.args.get("side") is None, "an inner join: only the ids found"
    # The id index's key only: reading the row too would lock it after its key, while a purge or
    # redrive that deletes the row locks it before the key.
    assert [col.sql("tsql") for col in lock.expression.expressions] == ["e.id"]


def test_push_batch_reads_the_remembered_ids_into_a_table_keyed_like_sq_client_ids() -> None:
    remember = push_batch_statements().remember
    assert remember.this.sql("tsql") == "@remember (id, queue, created_at)"
    assert openjson_columns(remember.expression) == {
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(4000)",
        "created_at": "NVARCHAR(40)",
        "remember": "BIT",
    }
    assert remember.expression.args["where"].this.sql("tsql") == "j.remember = 1"
    assert [col.sql("tsql") for col in remember.expression.expressions] == [
        "j.id",
        "j.queue",
        "CAST(j.created_at AS DATETIME2(7))",
    ]
    # Keyed by id, as sq_client_ids: the seeks that lock the claims follow the key's order.
    assert (
        "@remember TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY, "
        "queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL, created_at DATETIME2(7) NOT NULL)"
    ) in declared("push_batch")


def test_push_batch_locks_every_remembered_id_in_sq_client_ids_in_key_order_after_the_items() -> None:
    lock = push_batch_statements().lock_claims
    assert lock.this.sql("tsql") == "@held (id, queue, created_at, expires_at)"
    assert lock.expression.find(exp.From).this.sql("tsql") == "@remember AS r", "in the key's order"
    [join] = lock.expression.args["joins"]
    claims = join.this
    assert (claims.db, claims.name, claims.alias) == ("dbo", "sq_client_ids", "k")
    # A serializable seek per id: a missing id is range-locked until commit, as in sq_items.
    assert hints(claims) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert join.args["on"].sql("tsql") == "k.id = r.id"
    assert join.args.get("side") is None, "an inner join: only the claims found"
    assert [col.sql("tsql") for col in lock.expression.expressions] == [
        "k.id",
        "k.queue",
        "k.created_at",
        "k.expires_at",
    ]
    # Items before claims, as completions, purge_dead and delete_queue lock them; claims before any
    # is written.
    sql = Q["push_batch"].sql
    assert (
        sql.index("INSERT INTO @taken")
        < sql.index("INSERT INTO @held")
        < sql.index("UPDATE k")
        < sql.index("INSERT INTO dbo.sq_client_ids")
        < sql.index("INSERT INTO dbo.sq_items")
    )
    # Every read of sq_client_ids in the batch is a seek: the lock, then the take-over (the third is
    # the new claims' INSERT).
    found = [hints(t) for tree in parse(sql) for t in tree.find_all(exp.Table) if t.name == "sq_client_ids"]
    assert sorted(found) == [[], ["FORCESEEK"], ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]]


def test_push_batch_claims_an_id_nothing_holds_new_or_past_its_window() -> None:
    batch = push_batch_statements()
    nothing_there = "NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = r.id)"
    # A claim whose window passed is taken over, unless an item has the id (pushed with a dedup_key).
    take_over = batch.take_over
    assert take_over.this.sql("tsql") == "k"
    assert hints(table_named(take_over, "sq_client_ids")) == ["FORCESEEK"]
    assert take_over.args["where"].this.sql("tsql") == (
        f"NOT k.expires_at IS NULL AND k.expires_at <= @now AND {nothing_there}"
    )
    assert {eq.this.name: eq.expression.sql("tsql") for eq in take_over.expressions} == {
        "queue": "r.queue",
        "created_at": "r.created_at",
        "expires_at": "NULL",
    }
    # A new id: no claim found under the lock, and no item.
    claim = batch.claim
    assert claim.this.sql("tsql") == "dbo.sq_client_ids (id, queue, created_at, expires_at)"
    assert [col.sql("tsql") for col in claim.expression.expressions] == [
        "r.id",
        "r.queue",
        "r.created_at",
        "NULL",
    ]
    assert claim.expression.args["where"].this.sql("tsql") == (
        f"NOT EXISTS(SELECT 1 FROM @held AS h WHERE h.id = r.id) AND {nothing_there}"
    )
    for took in (take_over, claim):
        output = took.args["returning"]
        assert [col.sql("tsql") for col in output.expressions] == ["inserted.id"]
        assert output.args["into"].name == "claimed"
    assert "DECLARE @claimed TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY)" in declared("push_batch")


def test_push_batch_inserts_the_others_in_the_order_given_and_outputs_them() -> None:
    batch = push_batch_statements()
    insert, select = batch.insert, batch.inserted
    table = insert.this.this
    assert (table.db, table.name) == ("dbo", "sq_items")
    where = insert.expression.args["where"].this
    assert isinstance(where, exp.And)
    assert where.this.sql("tsql") == "NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = j.id)"
    # A remembered id goes in only if this batch claimed it.
    assert (
        where.expression.sql("tsql")
        == "(j.remember = 0 OR EXISTS(SELECT 1 FROM @claimed AS c WHERE c.id = j.id))"
    )
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


def test_push_batch_then_says_what_holds_each_remembered_id_it_did_not_insert() -> None:
    holders = push_batch_statements().holders
    assert holders.args.get("distinct") is False, "UNION ALL: the two parts never share an id"
    claims, items = holders.this, holders.expression
    assert isinstance(claims, exp.Select)
    assert isinstance(items, exp.Select)
    for part, alias in ((claims, "h"), (items, "i")):
        assert [col.sql("tsql") for col in part.expressions] == [
            f"{alias}.id",
            f"{alias}.queue",
            f"{alias}.created_at",
        ]
    # A claim answers for its id unless an item has the id: then only a live item's own claim (NULL)
    # does, which mirrors it.
    assert claims.find(exp.From).this.sql("tsql") == "@held AS h"
    assert claims.args["where"].this.sql("tsql") == (
        "NOT EXISTS(SELECT 1 FROM @claimed AS c WHERE c.id = h.id) "
        "AND (h.expires_at IS NULL OR NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = h.id))"
    )
    # An item that has the id without a claim of its own is read from sq_items: by seek, only for
    # those ids, and without lock hints (its key is locked already).
    assert items.find(exp.From).this.sql("tsql") == "@remember AS r"
    taken, row = items.args["joins"]
    assert taken.sql("tsql") == "JOIN @taken AS t ON t.id = r.id"
    assert (row.this.db, row.this.name, row.this.alias) == ("dbo", "sq_items", "i")
    assert hints(row.this) == ["FORCESEEK"]
    assert row.args["on"].sql("tsql") == "i.id = r.id"
    assert items.args["where"].this.sql("tsql") == (
        "NOT EXISTS(SELECT 1 FROM @held AS h WHERE h.id = r.id AND h.expires_at IS NULL)"
    )


def test_push_batch_registers_its_queues_once_under_a_lock_before_locking_any_item() -> None:
    register = push_batch_statements().register
    # Before any item lock: every writer takes a queue's row before its items.
    sql = Q["push_batch"].sql
    assert sql.index("\nIF EXISTS") < sql.index("INSERT INTO @grouped") < sql.index("INSERT INTO @taken")
    # An unlocked probe first, so that pushes to existing queues take no lock on sq_queues.
    assert isinstance(register.this, exp.Exists)
    assert {hints(t) == [] for t in register.this.find_all(exp.Table)} == {True}
    [insert] = register.args["true"].expressions
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_queues"
    assert insert.expression.args.get("distinct") is not None
    assert insert.expression.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert "j.queue COLLATE Latin1_General_100_BIN2" in insert.expression.sql("tsql")
    locked = [t for t in insert.expression.find_all(exp.Table) if t.name == "sq_queues"]
    assert [hints(t) for t in locked] == [["HOLDLOCK", "UPDLOCK"]]
    assert "DECLARE @taken TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY)" in declared("push_batch")
    assert "queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2" in declared("push_batch")


def complete_batch_statements() -> tuple[
    exp.Delete, exp.Insert, exp.Update, exp.Update, exp.Select, exp.Select
]:
    trees = statements("complete_batch")
    kinds = [type(tree) for tree in trees]
    assert kinds == [exp.Delete, exp.Insert, exp.Update, exp.Update, exp.Select, exp.Select]
    delete, history, windows, id_windows, done, still_there = trees
    assert isinstance(delete, exp.Delete)
    assert isinstance(history, exp.Insert)
    assert isinstance(windows, exp.Update)
    assert isinstance(id_windows, exp.Update)
    assert isinstance(done, exp.Select)
    assert isinstance(still_there, exp.Select)
    return delete, history, windows, id_windows, done, still_there


# An expired lease on its last attempt, by reap_expired's cutoff: dead already for every reader.
EXPIRED_LAST_ATTEMPT = (
    "i.status = 'leased' AND i.visible_at <= @now "
    "AND i.attempts >= (SELECT q.max_attempts FROM dbo.sq_queues AS q WHERE q.name = i.queue)"
)


def test_complete_batch_deletes_by_seek_where_the_token_matches_or_none_was_given_and_not_dead() -> None:
    delete, *_ = complete_batch_statements()
    assert placeholders(Q["complete_batch"].sql) == 2, "the clock and the items"
    assert "DECLARE @items NVARCHAR(MAX) = ?" in declared("complete_batch")
    target = delete.this
    assert (target.db, target.name, target.alias) == ("dbo", "sq_items", "i")
    assert [t.name for t in delete.args["tables"]] == ["i"]
    assert hints(target) == ["FORCESEEK"]
    join, queue = target.args["joins"]
    assert join.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert openjson_columns(join) == {"id": "UNIQUEIDENTIFIER", "token": "UNIQUEIDENTIFIER"}
    assert join.args["on"].sql("tsql") == "i.id = j.id"
    # Each item's queue row, read once by its key: max_attempts here, and what the history record
    # and the dedup window need, carried in @done (no later statement reads sq_queues again).
    assert (queue.this.db, queue.this.name, queue.this.alias) == ("dbo", "sq_queues", "q")
    assert hints(queue.this) == ["FORCESEEK"]
    assert queue.args["on"].sql("tsql") == "q.name = i.queue"
    assert delete.args["where"].this.sql("tsql") == (
        "i.status <> 'dead' AND (j.token IS NULL OR i.lease_token = j.token) "
        "AND NOT (i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts)"
    )
    output = delete.args["returning"]
    assert output.args["into"].name == "done"
    # The payload is copied only for a queue whose history keeps it.
    assert [col.sql("tsql") for col in output.expressions][-2:] == [
        "CASE WHEN q.history_payload = 1 THEN deleted.payload END",
        "q.dedup_window_seconds",
    ]
    assert "payload NVARCHAR(MAX) NULL, dedup_window_seconds INTEGER NOT NULL" in declared("complete_batch")


def test_complete_batch_writes_history_and_starts_dedup_windows_in_the_same_batch() -> None:
    _, history, windows, _, done, _ = complete_batch_statements()
    values = history_values(history)
    assert list(values) == HISTORY_COLUMNS
    assert values["outcome"] == "'completed'"
    assert values["finished_at"] == "@now"
    assert values["payload"] == "d.payload"  # NULL in @done unless the queue keeps payloads
    # The last failure's error: the errors array's last element, read as NVARCHAR(MAX).
    assert "OPENJSON(d.errors) AS a" in values["last_error"]
    assert "error NVARCHAR(MAX) '$.error'" in values["last_error"]
    assert values["last_error"].endswith("ORDER BY CAST(a.[key] AS INTEGER) DESC)")
    assert history.expression.find(exp.From).this.sql("tsql") == "@done AS d"
    assert history.expression.args.get("joins") is None
    # A finished item's key keeps matching for the queue's window: its row in sq_dedup, if it holds
    # it. Items without a key are filtered out before any seek.
    assert windows.this.name == "k"
    assert hints(table_named(windows, "sq_dedup")) == ["FORCESEEK"]
    assert [eq.sql("tsql") for eq in windows.expressions] == [
        "expires_at = DATEADD(SECOND, d.dedup_window_seconds, @now)"
    ]
    assert "k.item_id = d.id" in windows.sql("tsql")
    assert windows.args["where"].this.sql("tsql") == "NOT d.dedup_key IS NULL"
    assert "sq_queues" not in history.sql("tsql") + windows.sql("tsql")
    assert done.sql("tsql") == "SELECT id, queue FROM @done"


def test_complete_batch_starts_the_windows_of_the_ids_its_items_claimed_only() -> None:
    delete, _, _, id_windows, _, _ = complete_batch_statements()
    # The DELETE carries each item's flag into @done, so only the items that claimed their id seek
    # sq_client_ids, each after the item is gone: in the order a push locks an item and its claim.
    output = [col.sql("tsql") for col in delete.args["returning"].expressions]
    assert "deleted.remember_id" in output
    assert (
        "dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL, remember_id BIT NOT NULL"
        in declared("complete_batch")
    ), "@done's columns in the OUTPUT's order"
    assert output.index("deleted.remember_id") == output.index("deleted.dedup_key") + 1
    assert id_windows.this.name == "k"
    claims = table_named(id_windows, "sq_client_ids")
    assert (claims.db, claims.alias, hints(claims)) == ("dbo", "k", ["FORCESEEK"])
    assert [join.sql("tsql") for join in claims.args["joins"]] == ["JOIN @done AS d ON k.id = d.id"]
    assert id_windows.args["where"].this.sql("tsql") == "d.remember_id = 1"
    assert [eq.sql("tsql") for eq in id_windows.expressions] == [
        "expires_at = DATEADD(SECOND, d.dedup_window_seconds, @now)"
    ]
    text = Q["complete_batch"].sql
    assert text.index("DELETE i") < text.index("FROM dbo.sq_client_ids")


def test_complete_batch_then_reads_the_requested_items_still_there_with_their_status_and_lease() -> None:
    *_, select = complete_batch_statements()
    table = select.find(exp.From).this
    assert (table.db, table.name) == ("dbo", "sq_items")
    assert hints(table) == ["FORCESEEK"]
    [join] = select.args["joins"]
    assert join.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert openjson_columns(join) == {"id": "UNIQUEIDENTIFIER"}
    assert join.args["on"].sql("tsql") == "i.id = j.id"
    assert [col.sql("tsql") for col in select.expressions] == [
        "i.id",
        f"CASE WHEN {EXPIRED_LAST_ATTEMPT} THEN 'dead' ELSE i.status END AS status",
        "i.lease_token",
    ]
    assert select.args.get("where") is None


ITEM_COLUMNS = [
    "id",
    "queue",
    "payload",
    "status",
    "attempts",
    "errors",
    "created_at",
    "visible_at",
    "lease_token",
    "priority",
    "group_key",
    "dedup_key",
    "first_popped_at",
    "died_at",
    "max_attempts",
    "now",
]


@pytest.mark.parametrize("name", ["get_item", "extend", "fail", "list_dead"])
def test_item_rows_carry_every_column_item_view_reads(name: str) -> None:
    *_, select = statements(name)
    assert isinstance(select, exp.Select)
    names = [col.alias_or_name for col in select.expressions]
    assert [n for n in names if n != "seq"] == ITEM_COLUMNS
    assert "JOIN dbo.sq_queues AS q ON q.name = i.queue" in select.sql("tsql")


def test_extend_moves_only_a_live_lease_with_its_token_then_reads_the_item() -> None:
    update, select = statements("extend")
    assert isinstance(update, exp.Update)
    assert placeholders(Q["extend"].sql) == 4
    assert update.args["where"].this.sql("tsql") == (
        "id = @id AND status = 'leased' AND lease_token = @token AND visible_at > @now"
    )
    assert [eq.sql("tsql") for eq in update.expressions] == [
        "visible_at = DATEADD(SECOND, CAST(? AS INTEGER), @now)"
    ]
    assert [col.sql("tsql") for col in update.args["returning"].expressions] == ["inserted.seq"]
    assert select.args["where"].this.sql("tsql") == "i.id = @id"


def fail_statements() -> tuple[exp.Update, exp.Insert, exp.Select, exp.Select]:
    update, history, failed, item = statements("fail")
    assert isinstance(update, exp.Update)
    assert isinstance(history, exp.Insert)
    assert isinstance(failed, exp.Select)
    assert isinstance(item, exp.Select)
    return update, history, failed, item


def test_fail_is_one_compare_and_set_that_dies_or_backs_off() -> None:
    update, *_ = fail_statements()
    assert placeholders(Q["fail"].sql) == 7
    sql = update.sql("tsql")
    assert update.args["where"].this.sql("tsql") == (
        "i.id = @id AND i.status <> 'dead' AND (@token IS NULL OR i.lease_token = @token) "
        "AND NOT (i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts)"
    )
    assert "IIF(@retry = 0 OR i.attempts >= q.max_attempts, 1, 0) AS dies" in sql
    # min(cap, base * factor^(min(max(attempts, 1) - 1, 60))) * (1 - jitter * draw), unless retry_after
    assert "IIF(i.attempts > 61, 60, IIF(i.attempts > 1, i.attempts - 1, 0)) AS exponent" in sql
    assert "q.backoff_base_seconds * POWER(q.backoff_factor, e.exponent) AS backoff" in sql
    assert (
        "COALESCE(@retry_after, IIF(b.backoff < q.backoff_cap_seconds, b.backoff, q.backoff_cap_seconds)"
        " * (1 - q.backoff_jitter * @draw)) AS delay"
    ) in sql
    assignments = {eq.this.name: eq.expression.sql("tsql") for eq in update.expressions}
    assert assignments["status"] == "CASE WHEN f.dies = 1 THEN 'dead' ELSE 'ready' END"
    assert assignments["died_at"] == "CASE WHEN f.dies = 1 THEN @now END"
    assert assignments["lease_token"] == "NULL"
    assert assignments["visible_at"] == (
        "CASE WHEN f.dies = 1 THEN i.visible_at "
        "ELSE DATEADD(MICROSECOND, s.micros, DATEADD(SECOND, s.whole, @now)) END"
    )
    assert "JSON_MODIFY(i.errors, 'append $'" in assignments["errors"]
    for variable in ("@retry_after FLOAT = CAST(NULLIF(?, N'') AS FLOAT)", "@draw FLOAT = CAST(? AS FLOAT)"):
        assert variable in declared("fail")


def test_fail_writes_a_deaths_history_record_in_the_same_batch() -> None:
    update, history, failed, _ = fail_statements()
    assert update.args["returning"].args["into"].name == "failed"
    values = history_values(history)
    assert list(values) == HISTORY_COLUMNS
    assert (values["outcome"], values["finished_at"], values["last_error"]) == (
        "'dead'",
        "d.died_at",
        "@error",
    )
    assert history.expression.args["where"].this.sql("tsql") == "d.status = 'dead'"
    # The UPDATE's own join to the queue row decides whether the payload is kept; the INSERT
    # reads sq_queues no second time.
    assert [col.sql("tsql") for col in update.args["returning"].expressions][-1] == (
        "CASE WHEN q.history_payload = 1 THEN inserted.payload END"
    )
    assert values["payload"] == "d.payload"
    assert history.expression.args.get("joins") is None
    assert failed.sql("tsql") == "SELECT status FROM @failed"


def test_reap_expired_kills_expired_last_attempts_skipping_locked_rows_and_writes_history() -> None:
    update, history, count = statements("reap_expired")
    assert isinstance(update, exp.Update)
    assert placeholders(Q["reap_expired"].sql) == 3
    select = update.find(exp.CTE).this
    table = select.find(exp.From).this
    assert hints(table) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert "sq_items_leased" in index_hint(table)
    assert select.args.get("limit") is not None
    assert select.args["where"].this.sql("tsql") == (
        "x.status = 'leased' AND x.visible_at <= @now "
        "AND x.attempts >= (SELECT q.max_attempts FROM dbo.sq_queues AS q WHERE q.name = x.queue)"
    )
    assignments = {eq.this.name: eq.expression.sql("tsql") for eq in update.expressions}
    assert (assignments["status"], assignments["died_at"], assignments["lease_token"]) == (
        "'dead'",
        "@now",
        "NULL",
    )
    assert isinstance(history, exp.Insert)
    values = history_values(history)
    assert (values["outcome"], values["finished_at"], values["last_error"]) == ("'dead'", "@now", "@error")
    assert count.sql("tsql") == "SELECT queue, COUNT(*) AS killed FROM @killed GROUP BY queue"


def test_list_dead_pages_newest_dead_first_from_the_cursor() -> None:
    [select] = statements("list_dead")
    assert isinstance(select, exp.Select)
    assert placeholders(Q["list_dead"].sql) == 7
    assert select.args.get("limit") is not None
    assert "sq_items_dead" in index_hint(table_named(select, "sq_items"))
    assert [(o.this.sql("tsql"), bool(o.args.get("desc"))) for o in select.args["order"].expressions] == [
        ("i.died_at", True),
        ("i.seq", True),
    ]
    assert select.args["where"].this.sql("tsql") == (
        "i.queue = @queue AND i.status = 'dead' AND (@since IS NULL OR i.died_at >= @since) "
        "AND (@until IS NULL OR i.died_at < @until) AND (@after_at IS NULL OR i.died_at < @after_at "
        "OR (i.died_at = @after_at AND i.seq < @after_seq))"
    )


def test_list_history_pages_newest_finished_first_with_its_filters() -> None:
    [select] = statements("list_history")
    assert isinstance(select, exp.Select)
    assert placeholders(Q["list_history"].sql) == 7
    assert [col.alias_or_name for col in select.expressions] == [
        "seq",
        *HISTORY_COLUMNS[:2],
        *HISTORY_COLUMNS[2:],
    ]
    assert [(o.this.sql("tsql"), bool(o.args.get("desc"))) for o in select.args["order"].expressions] == [
        ("finished_at", True),
        ("seq", True),
    ]
    where = select.args["where"].this.sql("tsql")
    for condition in (
        "queue = @queue",
        "(@outcome IS NULL OR outcome = @outcome)",
        "(@since IS NULL OR finished_at >= @since)",
        "(@until IS NULL OR finished_at < @until)",
        "(@after_at IS NULL OR finished_at < @after_at OR (finished_at = @after_at AND seq < @after_seq))",
    ):
        assert condition in where
    assert "OPTION(RECOMPILE)" in select.sql("tsql")


def test_redrive_picks_the_oldest_dead_first_and_locks_them() -> None:
    [select] = statements("pick_dead")
    assert isinstance(select, exp.Select)
    assert placeholders(Q["pick_dead"].sql) == 3
    table = select.find(exp.From).this
    assert hints(table) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert "sq_items_dead" in index_hint(table)
    assert [(o.this.sql("tsql"), bool(o.args.get("desc"))) for o in select.args["order"].expressions] == [
        ("i.died_at", False),
        ("i.seq", False),
    ]
    assert "(@ids IS NULL OR i.id IN (SELECT j.id FROM OPENJSON(@ids)" in select.sql("tsql")


def test_revive_moves_items_to_the_back_of_their_groups_with_new_seqs() -> None:
    lock, delete, insert, count = statements("revive")
    assert placeholders(Q["revive"].sql) == 3
    assert isinstance(lock, exp.Insert)
    assert hints(table_named(lock, "sq_queues")) == ["HOLDLOCK", "UPDLOCK"], "as pushes into groups do"
    assert isinstance(delete, exp.Delete)
    assert delete.args["where"].this.sql("tsql") == "i.queue = @queue AND i.status = 'dead'"
    assert delete.args["returning"].args["into"].name == "gone"
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_items"
    assert "seq" not in [col.name for col in insert.this.expressions], "IDENTITY numbers them anew"
    values = dict(
        zip(
            [col.name for col in insert.this.expressions],
            [value.sql("tsql") for value in insert.expression.expressions],
            strict=True,
        )
    )
    assert (values["status"], values["attempts"]) == ("'ready'", "0")
    assert values["visible_at"] == "DATEADD(MICROSECOND, p.micros, DATEADD(SECOND, p.seconds, @now))"
    assert values["errors"] == "g.errors", "errors are kept"
    # A dead item's claim on its id still holds; the revived item goes on holding it.
    assert values["remember_id"] == "g.remember_id"
    assert [col.sql("tsql") for col in delete.args["returning"].expressions][-1] == "deleted.remember_id"
    assert [o.sql("tsql") for o in insert.expression.args["order"].expressions] == ["p.n"]
    assert count.sql("tsql") == "SELECT COUNT(*) AS revived FROM @gone"


def test_purge_dead_deletes_a_batch_oldest_first_and_starts_their_dedup_windows() -> None:
    delete, windows, _, count = statements("purge_dead")
    assert isinstance(delete, exp.Delete)
    select = delete.find(exp.CTE).this
    table = select.find(exp.From).this
    assert hints(table) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert select.args.get("limit") is not None
    assert select.args["where"].this.sql("tsql") == "x.queue = @queue AND x.status = 'dead'"
    assert [o.sql("tsql") for o in select.args["order"].expressions] == ["x.died_at", "x.seq"]
    assert isinstance(windows, exp.Update)
    assert "k.item_id = d.id" in windows.sql("tsql")
    assert count.sql("tsql") == "SELECT COUNT(*) AS purged FROM @gone"


def test_purge_dead_starts_the_windows_of_the_ids_its_items_claimed_only() -> None:
    # A dead item holds its id until it is purged; then its claim's window starts, as a completion's.
    delete, _, id_windows, _ = statements("purge_dead")
    assert isinstance(delete, exp.Delete)
    assert "x.remember_id" in [col.sql("tsql") for col in delete.find(exp.CTE).this.expressions]
    assert [col.sql("tsql") for col in delete.args["returning"].expressions][-1] == "deleted.remember_id"
    assert "remember_id BIT NOT NULL" in declared("purge_dead")
    assert isinstance(id_windows, exp.Update)
    claims = table_named(id_windows, "sq_client_ids")
    assert (claims.alias, hints(claims)) == ("k", ["FORCESEEK"])
    assert [join.sql("tsql") for join in claims.args["joins"]] == [
        "JOIN @gone AS d ON k.id = d.id",
        "JOIN dbo.sq_queues AS q ON q.name = d.queue",
    ]
    assert id_windows.args["where"].this.sql("tsql") == "d.remember_id = 1"
    assert [eq.sql("tsql") for eq in id_windows.expressions] == [
        "expires_at = DATEADD(SECOND, q.dedup_window_seconds, @now)"
    ]


@pytest.mark.parametrize("name", ["fail", "reap_expired"])
def test_an_item_that_dies_keeps_its_id_until_it_is_purged(name: str) -> None:
    assert "sq_client_ids" not in Q[name].sql


def test_purge_history_deletes_at_most_limit_records_past_retention_and_keys_past_their_window() -> None:
    history, keys, _, answer = statements("purge_history")
    assert placeholders(Q["purge_history"].sql) == 2
    assert isinstance(history, exp.Delete)
    per_queue = history.find(exp.CTE).this
    assert per_queue.args["limit"].expression.sql("tsql") == "@limit"
    inner = per_queue.find(exp.Lateral).this.this
    assert inner.args["limit"].expression.sql("tsql") == "@limit", "each queue's walk is bounded too"
    assert "x.finished_at < DATEADD(SECOND, -q.retention_seconds, @now)" in inner.sql("tsql")
    assert isinstance(keys, exp.Delete)
    expired = keys.find(exp.CTE).this
    assert expired.args["where"].this.sql("tsql") == "NOT expires_at IS NULL AND expires_at <= @now"
    assert "sq_dedup_expires" in index_hint(table_named(expired, "sq_dedup"))
    assert answer.sql("tsql") == "SELECT @history AS history, @keys AS keys, @ids AS ids"


def test_purge_history_deletes_at_most_limit_remembered_ids_past_their_window_by_their_index() -> None:
    _, _, ids_, _ = statements("purge_history")
    assert isinstance(ids_, exp.Delete)
    expired = ids_.find(exp.CTE).this
    assert ids_.this.name == ids_.find(exp.CTE).alias, "the DELETE goes through the bounded walk"
    assert expired.args["limit"].expression.sql("tsql") == "@limit"
    # The filtered index's own predicate, so that the walk can use it; claims of live items (NULL)
    # are not in it.
    assert expired.args["where"].this.sql("tsql") == "NOT expires_at IS NULL AND expires_at <= @now"
    assert "sq_client_ids_expires" in index_hint(table_named(expired, "sq_client_ids"))
    assert "SET @ids = @@ROWCOUNT;" in code("purge_history")


def test_put_queue_updates_under_a_key_lock_or_inserts_and_says_which() -> None:
    update, created, insert = statements("put_queue")
    assert placeholders(Q["put_queue"].sql) == 11
    assert isinstance(update, exp.Update)
    assert hints(update.this) == ["HOLDLOCK", "UPDLOCK"]
    assert {eq.this.name for eq in update.expressions} == set(rows.settings_params(QueueSettings()))
    assert (
        created.sql("tsql") == "SELECT CASE WHEN EXISTS(SELECT 1 FROM @updated) THEN 0 ELSE 1 END AS created"
    )
    assert isinstance(insert, exp.IfBlock)
    assert insert.this.sql("tsql") == "NOT EXISTS(SELECT 1 FROM @updated)"


def test_queue_stats_rows_carry_every_column_queue_stats_reads() -> None:
    [select] = statements("queue_stats")
    assert isinstance(select, exp.Select)
    assert [col.alias_or_name for col in select.expressions] == [
        "name",
        *rows.settings_params(QueueSettings()),
        "paused",
        "ready",
        "leased",
        "delayed",
        "retrying",
        "dead",
        "oldest_ready",
        "completed_in_history",
        "dead_in_history",
        "now",
    ]
    # An expired lease on its last attempt counts as dead, not ready.
    assert "dead.dead + COALESCE(live.expired_dead, 0) AS dead" in select.sql("tsql")
    applied = {lateral.alias: lateral.this.this for lateral in select.find_all(exp.Lateral)}
    assert live_statuses(applied["live"].args["where"]) == [["leased", "ready"]]
    assert "d.status = 'dead'" in applied["dead"].sql("tsql")
    assert applied["hist"].find(exp.From).this.name == "sq_history"


def next_visible_at_min() -> exp.Select:
    """The MIN(visible_at) applied to each queue of next_visible_at's second SELECT."""
    [*_, per_queue] = parse(Q["next_visible_at"].sql)
    subquery = per_queue.find(exp.Subquery)
    assert subquery is not None
    assert isinstance(subquery.this, exp.Select)
    return subquery.this


def test_next_visible_at_reads_the_clock_then_each_queues_earliest_live_item() -> None:
    trees = parse(Q["next_visible_at"].sql)
    assert [type(tree) for tree in trees] == [exp.Set, exp.Declare, exp.Declare, exp.Select, exp.Select]
    assert placeholders(Q["next_visible_at"].sql) == 2, "the clock and the queues, however many"
    clock, per_queue = trees[3:]
    assert clock.sql("tsql") == "SELECT @now AS now"
    assert [col.alias for col in per_queue.expressions] == ["queue", "next_visible_at"]
    openjson = per_queue.find(exp.OpenJSON)
    # Through an NVARCHAR(MAX) variable: OPENJSON takes no NTEXT (error 8116).
    assert openjson.this.sql("tsql") == "@queues"
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
    name: str  # the query's name in queries.sql, or the statement itself (migrations, SETs)
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


QUERY_NAMES = {query.sql: name for name, query in Q.items()}
LIFT, BOUND = "SET LOCK_TIMEOUT -1", "SET LOCK_TIMEOUT 5000"  # around a migration (timeout 5 s)


class FakeCursor:
    def __init__(self, conn: FakeConnection) -> None:
        self._conn = conn
        self._sets: list[Result | None] = []
        self._sizes: list[Any] | None = None

    async def setinputsizes(self, sizes: list[Any]) -> None:
        self._sizes = list(sizes)

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
        # pyodbc binds a str longer than the driver's limit as NTEXT unless told NVARCHAR(MAX): that
        # fails in OPENJSON (8116) and in comparisons (402). The store declares every str so.
        declared = self._sizes or [None] * len(params)
        assert len(declared) == len(params), f"{len(declared)} input sizes for {len(params)} parameters"
        for param, size in zip(params, declared, strict=True):
            assert not isinstance(param, str) or size == NVARCHAR_MAX, (
                f"str not bound as NVARCHAR(MAX): {size}"
            )
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
    _conn: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(timeout=0))  # pyodbc's

    def reply(self, name: str, *results: Result | Results) -> None:
        self.replies.setdefault(name, []).extend(results)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.executed]

    def params(self, name: str) -> tuple[Any, ...]:
        [found] = [e.params for e in self.executed if e.name == name]
        return found

    def all_params(self, name: str) -> list[tuple[Any, ...]]:
        return [e.params for e in self.executed if e.name == name]

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
        await cursor.execute(Q["next_visible_at"].sql, NOW_TEXT, bad)


async def test_the_fake_refuses_a_parameter_too_many_or_too_few() -> None:
    cursor = FakeCursor(FakeConnection())
    for params in [(NOW_TEXT,), (NOW_TEXT, "orders", "extra")]:
        with pytest.raises(AssertionError, match="markers"):
            await cursor.execute(Q["next_visible_at"].sql, *params)


DRAW = 0.25  # the fake store's backoff jitter draw


def fake_store(monkeypatch: pytest.MonkeyPatch, *, clock: bool = True) -> tuple[MssqlStore, FakeConnection]:
    store = MssqlStore(URL, clock=(lambda: NOW) if clock else None, random=lambda: DRAW)
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


def ids(*item_ids: UUID, held: Sequence[tuple[UUID, str, datetime]] = ()) -> Results:
    """push_batch's two result sets: the ids inserted (OUTPUT rows, as pyodbc gives UNIQUEIDENTIFIER:
    uppercase text), then what holds each remembered id not inserted: (id, queue, created_at)."""
    return Results(
        [
            Result(["id"], [(str(item_id).upper(),) for item_id in item_ids]),
            Result(
                ["id", "queue", "created_at"],
                [(str(i).upper(), queue, at.replace(tzinfo=None)) for i, queue, at in held],
            ),
        ]
    )


def completed_ids(*item_ids: UUID, queue: str = "orders") -> Result:
    """complete_batch's first result set: the ids completed, with their queue."""
    return Result(["id", "queue"], [(str(item_id).upper(), queue) for item_id in item_ids])


def pushed(conn: FakeConnection) -> list[dict[str, Any]]:
    """The items push_batch sent, as its OPENJSON reads them."""
    _, items_json = conn.params("push_batch")
    assert isinstance(items_json, str)
    items = json.loads(items_json)
    assert isinstance(items, list)
    return items


def claimed(conn: FakeConnection) -> list[dict[str, Any]]:
    """The keys claim_dedup_keys was asked to claim."""
    _, claims_json = conn.params("claim_dedup_keys")
    assert isinstance(claims_json, str)
    claims = json.loads(claims_json)
    assert isinstance(claims, list)
    return claims


def claim_rows(*found: tuple[int, UUID, datetime, bool]) -> Result:
    return Result(
        ["n", "item_id", "created_at", "taken"],
        [(n, str(item_id).upper(), at.replace(tzinfo=None), int(taken)) for n, item_id, at, taken in found],
    )


async def test_push_batch_binds_the_clock_and_the_items_as_one_json_text(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    first = NewItem(uuid4(), "orders", '{"n": 1}', datetime(2026, 2, 1, 9, 30, 0, 654321, tzinfo=UTC))
    second = NewItem(uuid4(), "Orders", "[1, 2]", NOW, priority=-3, group="g", delay_seconds=2.5)
    conn.reply("push_batch", ids(first.id, second.id))

    results = await store.push_batch([first, second], skip_existing=False)

    assert results == [Pushed(first.id, first.created_at, True), Pushed(second.id, second.created_at, True)]
    assert conn.names == ["push_batch"], "no keys: nothing to claim"
    assert conn.params("push_batch")[0] == NOW_TEXT
    common = {"dedup_key": None, "not_before": None, "remember": 0}
    assert sorted(pushed(conn), key=lambda item: item["n"]) == [
        {
            "n": 0,
            "id": str(first.id),
            "queue": "orders",
            "payload": '{"n": 1}',
            "created_at": "2026-02-01T09:30:00.654321",
            "priority": 0,
            "group_key": None,
            "delay_seconds": 0,
            "delay_micros": 0,
            **common,
        },
        {
            "n": 1,
            "id": str(second.id),
            "queue": "Orders",
            "payload": "[1, 2]",
            "created_at": NOW_TEXT,
            "priority": -3,
            "group_key": "g",
            "delay_seconds": 2,
            "delay_micros": 500000,
            **common,
        },
    ]
    batch = conn.inlined("push_batch")
    assert CLOCK in batch
    assert 'DECLARE @items NVARCHAR(MAX) = N\'[{"n":' in batch
    assert (conn.commits, conn.rollbacks, conn.cursors_closed) == (1, 0, 1)


@pytest.mark.parametrize(
    ("delay", "seconds", "micros"),
    [(0.000001, 0, 1), (2147.483648, 2147, 483648), (3600.5, 3600, 500000), (31536000, 31536000, 0)],
)
async def test_push_batch_splits_a_delay_into_whole_seconds_and_microseconds(
    fake: tuple[MssqlStore, FakeConnection], delay: float, seconds: int, micros: int
) -> None:
    # All of a day in microseconds would overflow DATEADD's INT; the split never does.
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW, delay_seconds=delay)
    conn.reply("push_batch", ids(item.id))

    await store.push_batch([item], skip_existing=False)

    [sent] = pushed(conn)
    assert (sent["delay_seconds"], sent["delay_micros"]) == (seconds, micros)
    assert all(-(2**31) <= n < 2**31 for n in (sent["delay_seconds"], sent["delay_micros"]))


async def test_push_batch_sends_not_before_as_utc_text(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    paris = datetime(2026, 3, 2, 10, 30, tzinfo=UTC).astimezone(ZoneInfo("Europe/Paris"))
    item = NewItem(uuid4(), "orders", "1", NOW, not_before=paris)
    conn.reply("push_batch", ids(item.id))

    await store.push_batch([item], skip_existing=False)

    assert pushed(conn)[0]["not_before"] == "2026-03-02T10:30:00.000000"


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
    items = [NewItem(uuid4(), f"q{n % 7}", str(n), NOW, dedup_key=f"k{n}") for n in range(1000)]
    conn.reply("claim_dedup_keys", claim_rows(*((n, item.id, NOW, True) for n, item in enumerate(items))))
    conn.reply("push_batch", ids(*(item.id for item in items)))

    assert len(await store.push_batch(items, skip_existing=False)) == 1000

    assert len(conn.params("claim_dedup_keys")) == 2
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
    assert [UUID(item["id"]) for item in sent] == sorted((item.id for item in items), key=index_order)
    assert [item["id"] for item in sorted(sent, key=lambda item: item["n"])] == [str(i.id) for i in items]


def test_the_index_order_is_sql_servers_uniqueidentifier_order() -> None:
    # Documented: byte groups right to left; the last two groups compared as written, the first
    # three byte-reversed. One GUID per byte position, with only that byte set, sorts from the least
    # significant position to the most.
    def only(position: int) -> UUID:
        raw = bytearray(16)
        raw[position] = 1
        return UUID(bytes=bytes(raw))

    ladder = sorted(range(16), key=lambda position: index_order(only(position)))
    assert ladder == [0, 1, 2, 3, 4, 5, 6, 7, 9, 8, 15, 14, 13, 12, 11, 10]
    # The documented example: compared on their last groups first, 86FF976E763F > 393AE6BBB849.
    g1 = UUID("55666BEE-B3A0-4BF5-81A7-86FF976E763F")
    g2 = UUID("8DD5BCA5-6ABE-4F73-B4B7-393AE6BBB849")
    assert index_order(g2) < index_order(g1)


async def test_skip_existing_returns_none_for_the_ids_not_inserted_and_commits(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    existing, new = NewItem(uuid4(), "orders", "1", NOW), NewItem(uuid4(), "orders", "2", NOW)
    conn.reply("push_batch", ids(new.id))

    assert await store.push_batch([existing, new], skip_existing=True) == [None, Pushed(new.id, NOW, True)]

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

    results = await store.push_batch([first, again, later], skip_existing=True)

    assert results == [Pushed(item_id, NOW, True), None, Pushed(later.id, NOW, True)]
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
    assert await store.push_batch([], skip_existing=skip_existing) == []
    assert await store.complete_batch([]) == []
    assert conn.executed == []


async def test_dedup_keys_are_claimed_first_in_the_same_transaction_one_per_key(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    a = NewItem(uuid4(), "orders", "1", datetime(2026, 2, 1, tzinfo=UTC), dedup_key="k")
    again = NewItem(uuid4(), "orders", "2", NOW, dedup_key="k")  # follows a, unsent
    other_queue = NewItem(uuid4(), "Orders", "3", NOW, dedup_key="k")
    plain = NewItem(uuid4(), "orders", "4", NOW)
    conn.reply("claim_dedup_keys", claim_rows((0, a.id, a.created_at, True), (2, other_queue.id, NOW, True)))
    conn.reply("push_batch", ids(a.id, other_queue.id, plain.id))

    results = await store.push_batch([a, again, other_queue, plain], skip_existing=False)

    assert results == [
        Pushed(a.id, a.created_at, True),
        Pushed(a.id, a.created_at, False),
        Pushed(other_queue.id, NOW, True),
        Pushed(plain.id, NOW, True),
    ]
    assert conn.names == ["claim_dedup_keys", "push_batch"]
    assert conn.params("claim_dedup_keys")[0] == NOW_TEXT
    assert claimed(conn) == [
        {"n": 0, "queue": "orders", "key": "k", "id": str(a.id), "created_at": "2026-02-01T00:00:00.000000"},
        {"n": 2, "queue": "Orders", "key": "k", "id": str(other_queue.id), "created_at": NOW_TEXT},
    ]
    assert {item["n"]: item["dedup_key"] for item in pushed(conn)} == {0: "k", 1: "k", 2: None}
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_an_item_whose_key_another_item_holds_is_its_duplicate_and_is_not_inserted(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    original = uuid4()
    held = datetime(2026, 2, 1, 8, 0, 0, 5)
    dup = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, original, held, False)))

    assert await store.push_batch([dup], skip_existing=False) == [
        Pushed(original, held.replace(tzinfo=UTC), False)
    ]
    assert conn.names == ["claim_dedup_keys"], "nothing left to insert"
    assert conn.commits == 1


async def test_a_retried_push_with_its_own_id_and_key_is_a_duplicate_not_a_conflict(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, item.id, NOW, False)))

    assert await store.push_batch([item], skip_existing=False) == [Pushed(item.id, NOW, False)]
    assert "push_batch" not in conn.names


async def test_a_taken_key_whose_id_exists_refuses_the_batch_and_rolls_the_claim_back(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, item.id, NOW, True)))
    conn.reply("push_batch", ids())

    with pytest.raises(ItemExists):
        await store.push_batch([item], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1)


# --- remembered ids: a producer's id without a dedup_key is the push's idempotency key ---------------


def given(queue: str = "orders", payload: str = "1", item_id: UUID | None = None, **fields: Any) -> NewItem:
    """An item whose id its producer chose."""
    return NewItem(item_id or uuid4(), queue, payload, NOW, id_given=True, **fields)


HELD_AT = datetime(2026, 2, 1, 8, 0, 0, 5, tzinfo=UTC)  # when the holding item was created


async def test_a_producers_id_is_sent_to_be_remembered_unless_a_dedup_key_decides(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    remembered = given()
    keyed = given(dedup_key="k")  # the key decides; its id is not remembered
    made = NewItem(uuid4(), "orders", "3", NOW)  # the service's id: nobody retries with it
    conn.reply("claim_dedup_keys", claim_rows((1, keyed.id, NOW, True)))
    conn.reply("push_batch", ids(remembered.id, keyed.id, made.id))

    results = await store.push_batch([remembered, keyed, made], skip_existing=False)

    assert results == [Pushed(i.id, NOW, True) for i in (remembered, keyed, made)]
    assert {item["id"]: item["remember"] for item in pushed(conn)} == {
        str(remembered.id): 1,
        str(keyed.id): 0,
        str(made.id): 0,
    }
    assert conn.names == ["claim_dedup_keys", "push_batch"], "the id is claimed in push_batch's round trip"
    assert (conn.commits, conn.rollbacks) == (1, 0)


@pytest.mark.parametrize("skip_existing", [False, True])
async def test_a_retry_whose_id_its_queue_holds_is_the_holders_duplicate_not_a_conflict(
    fake: tuple[MssqlStore, FakeConnection], skip_existing: bool
) -> None:
    # The holder: the first attempt's item (live or dead), or its claim within the queue's window.
    store, conn = fake
    retry, new = given(), given()
    conn.reply("push_batch", ids(new.id, held=[(retry.id, "orders", HELD_AT)]))

    results = await store.push_batch([retry, new], skip_existing=skip_existing)

    assert results == [Pushed(retry.id, HELD_AT, False), Pushed(new.id, NOW, True)]
    assert results[0] is not None
    assert results[0].created_at.tzinfo is UTC
    assert (conn.commits, conn.rollbacks) == (1, 0), "a retry is not a refusal: the batch commits"


@pytest.mark.parametrize("holder", ["mail", "Orders"], ids=["another queue", "another case"])
async def test_an_id_another_queue_holds_refuses_the_whole_batch(
    fake: tuple[MssqlStore, FakeConnection], holder: str
) -> None:
    store, conn = fake
    taken, new = given(), given()
    conn.reply("push_batch", ids(new.id, held=[(taken.id, holder, HELD_AT)]))

    with pytest.raises(ItemExists):
        await store.push_batch([new, taken], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1), "the new item and its claim are rolled back"


async def test_with_skip_existing_an_id_another_queue_holds_is_none_and_the_rest_commit(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    taken, retry, new = given(), given(), given()
    conn.reply(
        "push_batch",
        ids(new.id, held=[(taken.id, "mail", HELD_AT), (retry.id, "orders", HELD_AT)]),
    )

    results = await store.push_batch([taken, retry, new], skip_existing=True)

    assert results == [None, Pushed(retry.id, HELD_AT, False), Pushed(new.id, NOW, True)]
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_an_id_that_is_not_remembered_is_refused_whatever_holds_it(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # With a dedup_key, or made by the service, an existing id is ItemExists, as before; the server
    # names holders of remembered ids only, and the store reads none for the others.
    store, conn = fake
    keyed = given(dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, keyed.id, NOW, True)))
    conn.reply("push_batch", ids(held=[(keyed.id, "orders", HELD_AT)]))

    with pytest.raises(ItemExists):
        await store.push_batch([keyed], skip_existing=False)

    assert conn.rollbacks == 1


async def test_a_remembered_id_nothing_is_said_to_hold_is_refused(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = given()
    conn.reply("push_batch", ids(), ids())

    with pytest.raises(ItemExists):
        await store.push_batch([item], skip_existing=False)
    assert await store.push_batch([item], skip_existing=True) == [None]


async def test_a_remembered_id_repeated_in_one_call_is_sent_once_and_its_repeats_follow_it(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # Two single pushes of one item that arrive together (a client's retry racing its first attempt).
    store, conn = fake
    item_id = uuid4()
    first = given(item_id=item_id, payload='"first"')
    again = NewItem(item_id, "orders", '"again"', NOW + timedelta(seconds=1), id_given=True)
    conn.reply("push_batch", ids(item_id))

    results = await store.push_batch([first, again], skip_existing=False)

    assert results == [Pushed(item_id, NOW, True), Pushed(item_id, NOW, False)]
    assert [(item["id"], item["payload"], item["remember"]) for item in pushed(conn)] == [
        (str(item_id), '"first"', 1)
    ]


async def test_a_remembered_id_given_again_for_another_queue_in_one_call_is_refused(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    first, other = given(item_id=item_id), given("mail", item_id=item_id)

    with pytest.raises(ItemExists):
        await store.push_batch([first, other], skip_existing=False)
    assert conn.executed == [], "refused before asking the server"

    conn.reply("push_batch", ids(item_id))
    assert await store.push_batch([first, other], skip_existing=True) == [Pushed(item_id, NOW, True), None]
    assert len(pushed(conn)) == 1


async def test_the_claims_are_sent_in_the_id_indexs_order_with_the_items(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # push_batch reads them into a table keyed by id; the items' order is the id index's already.
    store, conn = fake
    items = [given(payload=str(n)) for n in range(20)]
    conn.reply("push_batch", ids(*(item.id for item in items)))

    await store.push_batch(items, skip_existing=True)

    sent = pushed(conn)
    assert [UUID(item["id"]) for item in sent] == sorted((item.id for item in items), key=index_order)
    assert {item["remember"] for item in sent} == {1}
    assert len(conn.params("push_batch")) == 2, "still the clock and the items"


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


POP_COLUMNS = [
    "seq",
    "id",
    "queue",
    "payload",
    "created_at",
    "attempts",
    "lease_token",
    "visible_at",
    "priority",
    "group_key",
]


async def test_pop_binds_a_fresh_lease_and_returns_items_in_pop_order(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    older, newer, urgent, token = uuid4(), uuid4(), uuid4(), uuid4()
    created = datetime(2026, 2, 1, 8, 0, 0, 5)
    leased_until = datetime(2026, 3, 1, 12, 0, 45, 123456)
    # OUTPUT rows in no particular order, UUIDs as pyodbc gives them (uppercase text), naive times.
    token_text = str(token).upper()
    later = created + timedelta(seconds=1)
    conn.reply(
        "pop",
        Result(
            POP_COLUMNS,
            [
                (8, str(newer).upper(), "orders", "[1, 2]", later, 1, token_text, leased_until, 0, None),
                (
                    7,
                    str(older).upper(),
                    "orders",
                    '{"a": null}',
                    created,
                    3,
                    token_text,
                    leased_until,
                    0,
                    "g",
                ),
                (9, str(urgent).upper(), "orders", "0", later, 1, token_text, leased_until, 5, None),
            ],
        ),
    )

    items = await store.pop("orders", 5, 45)

    now_text, queue, lease_seconds, max_items, lease_token = conn.params("pop")
    assert (now_text, queue, lease_seconds, max_items) == (NOW_TEXT, "orders", "45", 5)
    assert UUID(lease_token).version == 4
    batch = conn.inlined("pop")
    assert CLOCK in batch
    assert "DECLARE @queue NVARCHAR(4000) = N'orders';" in batch
    assert "CAST(NULLIF(N'45', N'') AS INT)" in batch
    assert "SELECT TOP (CAST(5 AS INT)) x.seq," in batch
    assert f"lease_token = CAST(N'{lease_token}' AS UNIQUEIDENTIFIER)," in batch
    assert [item.id for item in items] == [urgent, older, newer]
    first, second = items[:2]
    assert (first.priority, second.priority, second.group) == (5, 0, "g")
    assert second.payload == {"a": None}
    assert second.attempts == 3
    assert second.lease_token == token
    assert second.created_at == created.replace(tzinfo=UTC)
    assert second.lease_expires_at == leased_until.replace(tzinfo=UTC)
    assert conn.commits == 1


async def test_pop_without_a_lease_binds_an_empty_one_for_the_queues(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    await store.pop("orders", 1, None)
    assert conn.params("pop")[2] == ""
    assert "CAST(NULLIF(N'', N'') AS INT), (SELECT lease_seconds FROM" in conn.inlined("pop")


async def test_pop_of_an_empty_queue_returns_nothing(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("pop", Result(POP_COLUMNS, []))
    assert await store.pop("orders", 1, 30) == []


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
        "priority": 0,
        "group_key": None,
        "dedup_key": None,
        "first_popped_at": datetime(2026, 2, 1, 8, 0, 1),
        "died_at": NOW.replace(tzinfo=None) if status == "dead" else None,
        "max_attempts": 5,
        "now": NOW.replace(tzinfo=None),
    }
    return result(**(row | overrides))


def still_there(*found: tuple[UUID, str, UUID | None]) -> Result:
    return Result(
        ["id", "status", "lease_token"],
        [(str(i).upper(), status, str(token).upper() if token else None) for i, status, token in found],
    )


def completed(conn: FakeConnection) -> list[dict[str, Any]]:
    [(now_text, items_json)] = conn.all_params("complete_batch")
    assert now_text == NOW_TEXT
    assert isinstance(items_json, str)
    items = json.loads(items_json)
    assert isinstance(items, list)
    return items


async def test_complete_is_the_batch_completion_of_one_item(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    conn.reply("complete_batch", Results([completed_ids(item_id), still_there()]))

    await store.complete(item_id, token)

    assert conn.names == ["complete_batch"]
    assert completed(conn) == [{"id": str(item_id), "token": str(token)}]
    assert conn.commits == 1


async def test_complete_without_a_token_sends_a_null_token(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("complete_batch", Results([completed_ids(item_id), still_there()]))

    await store.complete(item_id, None)

    assert completed(conn) == [{"id": str(item_id), "token": None}]


@pytest.mark.parametrize(
    ("status", "error"), [("leased", LeaseMismatch), ("dead", ItemDead), ("ready", LeaseMismatch)]
)
async def test_a_refused_completion_says_why_from_the_item_still_there_and_rolls_back(
    fake: tuple[MssqlStore, FakeConnection], status: str, error: type[QueueError]
) -> None:
    store, conn = fake
    item_id = uuid4()
    holder = uuid4() if status == "leased" else None
    conn.reply("complete_batch", Results([completed_ids(), still_there((item_id, status, holder))]))

    with pytest.raises(error):
        await store.complete(item_id, uuid4())

    assert conn.names == ["complete_batch"], "one round trip, refusal included"
    assert (conn.commits, conn.rollbacks) == (0, 1)


async def test_complete_of_an_unknown_item_is_not_found(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("complete_batch", Results([completed_ids(), still_there()]))
    with pytest.raises(ItemNotFound):
        await store.complete(uuid4(), None)


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
        Completion(dead, uuid4()),
    ]
    conn.reply(
        "complete_batch",
        Results(
            [
                completed_ids(done, untokened),
                still_there((mismatched, "leased", uuid4()), (dead, "dead", None)),
            ]
        ),
    )

    outcomes = await store.complete_batch(requests)

    assert outcomes == [
        CompleteOutcome.LEASE_MISMATCH,
        CompleteOutcome.COMPLETED,
        CompleteOutcome.NOT_FOUND,
        CompleteOutcome.COMPLETED,
        CompleteOutcome.DEAD,
    ]
    assert conn.names == ["complete_batch"]
    assert completed(conn) == [  # sent in the id index's order, for the locks
        {"id": str(c.id), "token": str(c.lease_token) if c.lease_token else None}
        for c in sorted(requests, key=lambda c: index_order(c.id))
    ]
    batch = conn.inlined("complete_batch")
    assert 'DECLARE @items NVARCHAR(MAX) = N\'[{"id":' in batch
    assert CLOCK in batch
    assert (conn.commits, conn.rollbacks, conn.cursors_closed) == (1, 0, 1)


async def test_complete_batch_that_deletes_nothing_still_reads_the_second_result(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    mismatched, missing = uuid4(), uuid4()
    conn.reply("complete_batch", Results([completed_ids(), still_there((mismatched, "ready", None))]))

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
    assert 'DECLARE @queues NVARCHAR(MAX) = N\'["idle","busy","Leased ✓"]\';' in batch
    assert "FROM OPENJSON(@queues) WITH (queue NVARCHAR(4000) '$') AS q" in batch
    assert conn.commits == 1


async def test_next_visible_at_of_no_queues_still_tells_the_time(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("next_visible_at", Results([result(now=NOW.replace(tzinfo=None)), visible_rows()]))

    assert await store.next_visible_at([]) == ({}, NOW)

    assert conn.params("next_visible_at") == (NOW_TEXT, "[]")


async def test_sql_server_has_no_notifications_so_the_probe_finds_other_pushes(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, _ = fake
    assert store.notifications is None


async def test_extend_binds_the_lease_and_returns_the_item(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    until = datetime(2026, 3, 1, 12, 1, 0, 123456)
    conn.reply(
        "extend",
        Results([result(seq=7), item_row(item_id, status="leased", lease_token=token, visible_at=until)]),
    )

    view = await store.extend(item_id, token, 60)

    assert conn.params("extend") == (NOW_TEXT, str(item_id), str(token), 60)
    assert "SET visible_at = DATEADD(SECOND, CAST(60 AS INT), @now)" in conn.inlined("extend")
    assert (view.status, view.lease_expires_at) == (ItemStatus.LEASED, until.replace(tzinfo=UTC))
    assert conn.commits == 1


async def test_extend_of_a_lease_that_ran_out_is_lease_expired(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    expired = NOW.replace(tzinfo=None) - timedelta(seconds=1)
    conn.reply(
        "extend",
        Results(
            [Result(["seq"], []), item_row(item_id, status="leased", lease_token=token, visible_at=expired)]
        ),
    )

    with pytest.raises(LeaseExpired):
        await store.extend(item_id, token, 60)


async def test_extend_of_a_lease_that_ran_out_on_its_last_attempt_is_item_dead(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    current = item_row(
        item_id, status="leased", lease_token=token, visible_at=NOW.replace(tzinfo=None), max_attempts=1
    )
    conn.reply("extend", Results([Result(["seq"], []), current]))

    with pytest.raises(ItemDead):
        await store.extend(item_id, token, 60)


@pytest.mark.parametrize(
    ("status", "error"), [("leased", LeaseMismatch), ("dead", ItemDead), (None, ItemNotFound)]
)
async def test_extend_refused_otherwise_says_why(
    fake: tuple[MssqlStore, FakeConnection], status: str | None, error: type[QueueError]
) -> None:
    store, conn = fake
    item_id = uuid4()
    current = item_row(item_id, status=status, lease_token=uuid4()) if status else Result(ITEM_COLUMNS, [])
    conn.reply("extend", Results([Result(["seq"], []), current]))

    with pytest.raises(error):
        await store.extend(item_id, uuid4(), 60)


async def test_fail_binds_floats_as_text_and_returns_the_item(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    errors = json.dumps([{"at": "2026-03-01T12:00:00.1234560", "error": "boom"}])  # FOR JSON's DATETIME2
    conn.reply(
        "fail",
        Results(
            [
                result(status="ready"),
                item_row(item_id, status="ready", errors=errors, visible_at=datetime(2026, 3, 1, 12, 1)),
            ]
        ),
    )

    view = await store.fail(item_id, Failure("boom", lease_token=token, retry=True, retry_after_seconds=60.5))

    assert conn.params("fail") == (NOW_TEXT, str(item_id), str(token), 1, "60.5", "0.25", "boom")
    batch = conn.inlined("fail")
    for fragment in (
        CLOCK,
        f"DECLARE @id UNIQUEIDENTIFIER = CAST(N'{item_id}' AS UNIQUEIDENTIFIER);",
        f"DECLARE @token UNIQUEIDENTIFIER = CAST(NULLIF(N'{token}', N'') AS UNIQUEIDENTIFIER);",
        "DECLARE @retry BIT = 1;",
        "DECLARE @retry_after FLOAT = CAST(NULLIF(N'60.5', N'') AS FLOAT);",
        "DECLARE @draw FLOAT = CAST(N'0.25' AS FLOAT);",
        "DECLARE @error NVARCHAR(MAX) = N'boom';",
    ):
        assert fragment in batch
    assert view.id == item_id
    assert view.status is ItemStatus.RETRYING
    assert view.lease_expires_at is None
    assert [(e.at, e.error) for e in view.errors] == [(NOW, "boom")]
    assert conn.commits == 1


async def test_fail_without_retry_or_delay_binds_zero_and_empty_text(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("fail", Results([result(status="dead"), item_row(item_id, status="dead")]))

    view = await store.fail(item_id, Failure("fatal", retry=False))

    assert conn.params("fail")[2:5] == ("", 0, "")
    assert view.status is ItemStatus.DEAD
    assert view.died_at == NOW


@pytest.mark.parametrize(
    ("status", "error"), [("dead", ItemDead), ("leased", LeaseMismatch), (None, ItemNotFound)]
)
async def test_a_refused_failure_says_why_and_rolls_back(
    fake: tuple[MssqlStore, FakeConnection], status: str | None, error: type[QueueError]
) -> None:
    store, conn = fake
    item_id = uuid4()
    current = (
        item_row(item_id, status=status, lease_token=uuid4() if status == "leased" else None)
        if status
        else Result(ITEM_COLUMNS, [])
    )
    conn.reply("fail", Results([Result(["status"], []), current]))

    with pytest.raises(error):
        await store.fail(item_id, Failure("again", lease_token=uuid4()))

    assert conn.names == ["fail"]
    assert conn.rollbacks == 1


@pytest.mark.parametrize("token", ["its own", "another", None])
async def test_a_refused_failure_of_a_lease_that_ran_out_on_its_last_attempt_is_item_dead(
    fake: tuple[MssqlStore, FakeConnection], token: str | None
) -> None:
    store, conn = fake
    item_id, held = uuid4(), uuid4()
    expired = NOW.replace(tzinfo=None) - timedelta(microseconds=1)
    current = item_row(item_id, status="leased", lease_token=held, visible_at=expired, attempts=5)
    conn.reply("fail", Results([Result(["status"], []), current]))
    sent = {"its own": held, "another": uuid4(), None: None}[token]

    with pytest.raises(ItemDead):
        await store.fail(item_id, Failure("late", lease_token=sent))


async def test_get_item_judges_an_expired_lease_by_the_server_clock(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    expired = NOW.replace(tzinfo=None) - timedelta(seconds=1)
    conn.reply(
        "get_item",
        item_row(
            item_id, status="leased", lease_token=uuid4(), visible_at=expired, group_key="g", dedup_key="k"
        ),
    )

    view = await store.get_item(item_id)

    assert view.status is ItemStatus.READY
    assert view.lease_expires_at is None
    assert view.created_at == datetime(2026, 2, 1, 8, 0, tzinfo=UTC)
    assert (view.group, view.dedup_key, view.max_attempts) == ("g", "k", 5)
    assert view.first_popped_at == datetime(2026, 2, 1, 8, 0, 1, tzinfo=UTC)
    assert conn.params("get_item") == (NOW_TEXT, str(item_id))


async def test_get_item_of_an_unknown_id_is_not_found(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, _ = fake
    with pytest.raises(ItemNotFound):
        await store.get_item(uuid4())


STATS_COLUMNS = [
    "name",
    *rows.settings_params(QueueSettings()),
    "paused",
    "ready",
    "leased",
    "delayed",
    "retrying",
    "dead",
    "oldest_ready",
    "completed_in_history",
    "dead_in_history",
    "now",
]


def stats_row(name: str, oldest: datetime | None) -> tuple[Any, ...]:
    settings = (5, 30, 1.0, 2.0, 3600.0, 0.1, 604800, 3600, False)
    return (name, *settings, False, 2, 1, 3, None, 4, oldest, 7, 8, NOW.replace(tzinfo=None))


async def test_list_queues_asks_for_every_queue(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    oldest = NOW.replace(tzinfo=None) - timedelta(seconds=90)
    conn.reply("queue_stats", Result(STATS_COLUMNS, [stats_row("a", oldest), stats_row("b", None)]))

    stats = await store.list_queues()

    assert conn.params("queue_stats") == (NOW_TEXT, "")
    assert "DECLARE @queue NVARCHAR(4000) = NULLIF(N'', N'');" in conn.inlined("queue_stats")
    assert [
        (s.name, s.ready, s.leased, s.delayed, s.retrying, s.dead, s.oldest_ready_age_seconds) for s in stats
    ] == [("a", 2, 1, 3, 0, 4, 90.0), ("b", 2, 1, 3, 0, 4, None)]
    assert (stats[0].completed_in_history, stats[0].dead_in_history) == (7, 8)
    assert stats[0].settings == QueueSettings()


async def test_get_queue_filters_by_name_and_knows_missing_queues(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("queue_stats", Result(STATS_COLUMNS, [stats_row("orders", None)]))

    assert (await store.get_queue("orders")).name == "orders"
    with pytest.raises(QueueNotFound):
        await store.get_queue("nope")
    assert [e.params for e in conn.executed] == [(NOW_TEXT, "orders"), (NOW_TEXT, "nope")]


@pytest.mark.parametrize("created", [True, False])
async def test_put_queue_binds_every_setting_and_says_whether_it_created_the_queue(
    fake: tuple[MssqlStore, FakeConnection], created: bool
) -> None:
    store, conn = fake
    conn.reply("put_queue", result(created=int(created)))
    settings = QueueSettings(
        max_attempts=3,
        lease_seconds=90,
        backoff=Backoff(base_seconds=0.5, factor=3, cap_seconds=60, jitter=0),
        retention_seconds=0,
        dedup_window_seconds=10,
        history_payload=True,
    )

    assert await store.put_queue("orders", settings) is created

    assert conn.params("put_queue") == (NOW_TEXT, "orders", 3, 90, "0.5", "3.0", "60.0", "0.0", 0, 10, 1)
    batch = conn.inlined("put_queue")
    assert "DECLARE @backoff_factor FLOAT = CAST(N'3.0' AS FLOAT);" in batch
    assert "DECLARE @history_payload BIT = 1;" in batch
    assert conn.commits == 1


def dead_rows(*found: tuple[int, UUID, datetime]) -> Result:
    """list_dead's rows: seq, then an item row's columns."""
    page = [item_row(item_id, status="dead", died_at=died) for _, item_id, died in found]
    columns = ["seq", *item_row(uuid4(), status="dead").columns]
    return Result(columns, [(seq, *r.rows[0]) for (seq, _, _), r in zip(found, page, strict=True)])


async def test_list_dead_pages_with_a_cursor_of_the_last_rows_died_at_and_seq(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    newer, older = uuid4(), uuid4()
    died = datetime(2026, 3, 1, 11, 0, 0, 654321)
    conn.reply("list_dead", dead_rows((12, newer, died), (9, older, died)), dead_rows((3, uuid4(), died)))

    page = await store.list_dead("orders", DeadFilter(), 2, None)

    assert [view.id for view in page.items] == [newer, older]
    assert all(view.status is ItemStatus.DEAD for view in page.items)
    assert page.next_cursor == encode_cursor(died, 9)
    last = await store.list_dead("orders", DeadFilter(), 2, page.next_cursor)
    assert last.next_cursor is None, "a short page is the last"
    first, second = conn.all_params("list_dead")
    assert first == (NOW_TEXT, "orders", "", "", "", "", 2)
    assert second == (NOW_TEXT, "orders", "", "", "2026-03-01T11:00:00.654321", "9", 2)
    assert "DECLARE @after_seq BIGINT = CAST(NULLIF(N'9', N'') AS BIGINT);" in conn.executed[1].inlined


async def test_a_cursor_that_is_not_ours_is_refused_before_asking(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    with pytest.raises(InvalidCursor):
        await store.list_dead("orders", DeadFilter(), 10, "not-a-cursor")
    with pytest.raises(InvalidCursor):
        await store.list_history("orders", HistoryFilter(), 10, "%%%")
    assert conn.executed == []


def picked(*seqs: int) -> Result:
    return Result(["seq"], [(seq,) for seq in seqs])


async def test_redrive_revives_in_batches_oldest_dead_first_spread_out_at_the_rate(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    first_batch = list(range(1, BATCH + 1))
    conn.reply("pick_dead", picked(*first_batch), picked(5000, 5001))
    conn.reply("revive", result(revived=BATCH), result(revived=2))

    assert await store.redrive("orders", None, 4.0) == BATCH + 2

    assert conn.names == ["pick_dead", "revive", "pick_dead", "revive"]
    assert conn.all_params("pick_dead") == [("orders", "", BATCH)] * 2
    assert conn.commits == 2, "a transaction per batch"
    plans = [json.loads(params[2]) for params in conn.all_params("revive")]
    assert all(params[:2] == (NOW_TEXT, "orders") for params in conn.all_params("revive"))
    assert plans[0][:3] == [
        {"n": 0, "seq": 1, "seconds": 0, "micros": 0},
        {"n": 1, "seq": 2, "seconds": 0, "micros": 250000},
        {"n": 2, "seq": 3, "seconds": 0, "micros": 500000},
    ]
    # The k-th of the whole redrive, across batches: k / rate seconds from now.
    assert plans[1] == [
        {"n": 0, "seq": 5000, "seconds": 250, "micros": 0},
        {"n": 1, "seq": 5001, "seconds": 250, "micros": 250000},
    ]


async def test_redrive_of_some_ids_sends_them_as_json_and_stops_when_none_are_left(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    wanted = [uuid4(), uuid4()]
    conn.reply("pick_dead", picked())

    assert await store.redrive("orders", wanted, None) == 0

    assert conn.names == ["pick_dead"], "nothing picked, nothing to revive"
    queue, ids_json, limit = conn.params("pick_dead")
    assert (queue, json.loads(ids_json), limit) == ("orders", [str(i) for i in wanted], BATCH)


async def test_purge_dead_repeats_full_batches(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("purge_dead", result(purged=BATCH), result(purged=BATCH), result(purged=7))

    assert await store.purge_dead("orders") == 2 * BATCH + 7

    assert conn.all_params("purge_dead") == [(NOW_TEXT, "orders", BATCH)] * 3
    assert conn.commits == 3


def history_rows(*found: tuple[int, UUID, str, datetime]) -> Result:
    columns = ["seq", *HISTORY_COLUMNS]
    created = datetime(2026, 2, 1, 8, 0)
    return Result(
        columns,
        [
            (seq, str(i).upper(), "orders", outcome, 2, created, None, at, None, "k", "boom", '{"p": 1}')
            for seq, i, outcome, at in found
        ],
    )


async def test_list_history_binds_its_filters_and_pages_by_finished_at_and_seq(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    a, b = uuid4(), uuid4()
    at = datetime(2026, 3, 1, 11, 59)
    conn.reply("list_history", history_rows((20, a, "completed", at), (19, b, "dead", at)))
    since, until = datetime(2026, 3, 1, 11, 0, tzinfo=UTC), datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    cursor = encode_cursor(datetime(2026, 3, 1, 11, 59, 30, tzinfo=UTC), 25)

    page = await store.list_history("orders", HistoryFilter(Outcome.COMPLETED, since, until), 2, cursor)

    assert conn.params("list_history") == (
        "orders",
        "completed",
        "2026-03-01T11:00:00.000000",
        "2026-03-01T12:00:00.000000",
        "2026-03-01T11:59:30.000000",
        "25",
        2,
    )
    assert [(r.id, r.outcome, r.last_error, r.payload, r.dedup_key) for r in page.items] == [
        (a, Outcome.COMPLETED, "boom", {"p": 1}, "k"),
        (b, Outcome.DEAD, "boom", {"p": 1}, "k"),
    ]
    assert page.next_cursor == encode_cursor(at, 19)


async def test_list_history_without_filters_binds_empty_text(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("list_history", history_rows())

    page = await store.list_history("orders", HistoryFilter(), 10, None)

    assert page.items == []
    assert page.next_cursor is None
    assert conn.params("list_history") == ("orders", "", "", "", "", "", 10)


async def test_reap_expired_binds_the_sweeps_error_and_says_how_many(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("reap_expired", Result(["queue", "killed"], [("orders", 2), ("mail", 1)]))

    assert await store.reap_expired(100) == 3

    assert conn.params("reap_expired") == (NOW_TEXT, LEASE_EXPIRED_ERROR, 100)
    assert conn.commits == 1


@pytest.mark.parametrize(("history", "keys", "ids_", "largest"), [(2, 5, 1, 5), (2, 0, 5, 5), (5, 1, 0, 5)])
async def test_purge_history_says_the_largest_of_its_three_counts(
    fake: tuple[MssqlStore, FakeConnection], history: int, keys: int, ids_: int, largest: int
) -> None:
    # The sweep goes on while any of the three filled its batch.
    store, conn = fake
    conn.reply("purge_history", result(history=history, keys=keys, ids=ids_))

    assert await store.purge_history(5) == largest

    assert conn.params("purge_history") == (NOW_TEXT, 5)


# --- migrations -----------------------------------------------------------------------------------


async def test_migrate_from_zero_applies_both_schemas_under_the_lock(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply("applied_versions", Result(["version"], []))

    assert await store.migrate() == [1, 2, 3, 4, 5]

    assert conn.names == [
        LIFT,
        "lock_migrations",
        "compatibility_level",
        "create_version_table",
        "applied_versions",
        *migration_statements(),
        "record_version",
        *migration_statements(DELIVERY),
        "record_version",
        *migration_statements(ADMIN),
        "record_version",
        *migration_statements(ESCALATION),
        "record_version",
        *migration_statements(CLIENT_IDS),
        "record_version",
        "unlock_migrations",
        BOUND,
    ]
    assert conn.all_params("record_version") == [
        (1, "init", NOW_TEXT),
        (2, "delivery", NOW_TEXT),
        (3, "admin", NOW_TEXT),
        (4, "lock_escalation", NOW_TEXT),
        (5, "client_ids", NOW_TEXT),
    ]
    [v1, *_] = [e.inlined for e in conn.executed if e.name == "record_version"]
    assert f"VALUES (1, N'init', COALESCE(CAST(NULLIF(N'{NOW_TEXT}', N'')" in v1
    assert "@LockOwner = N'Session', @LockTimeout = 300000;" in conn.inlined("lock_migrations")
    assert conn.commits == 2, "the migration, then after the lock is released"
    assert not conn.closed


async def test_migrate_again_applies_nothing(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=1))  # granted after waiting for another replica
    conn.reply("compatibility_level", result(compatibility_level=160))
    conn.reply("applied_versions", Result(["version"], [(1,), (2,), (3,), (4,), (5,)]))

    assert await store.migrate() == []

    assert conn.names == [
        LIFT,
        "lock_migrations",
        "compatibility_level",
        "create_version_table",
        "applied_versions",
        "unlock_migrations",
        BOUND,
    ]


async def test_migrate_refuses_a_database_too_old_for_openjson(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=120))

    with pytest.raises(StoreError, match=r"compatibility level 120\b.*\b130 or later"):
        await store.migrate()

    assert conn.names == [LIFT, "lock_migrations", "compatibility_level", "unlock_migrations", BOUND]
    assert conn.rollbacks == 1


async def test_migrate_gives_up_when_the_lock_is_not_granted(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=-1))

    with pytest.raises(DatabaseUnavailable, match="migration lock"):
        await store.migrate()

    assert conn.names == [LIFT, "lock_migrations", "unlock_migrations", BOUND]


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

    assert conn.names[-2:] == ["unlock_migrations", BOUND]
    assert "record_version" not in conn.names
    assert conn.rollbacks == 1


async def test_check_ready_wants_the_latest_version(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply(
        "applied_versions",
        Result(["version"], []),
        Result(["version"], [(1,)]),
        Result(["version"], [(1,), (2,)]),
        Result(["version"], [(1,), (2,), (3,)]),
        Result(["version"], [(1,), (2,), (3,), (4,)]),
        Result(["version"], [(1,), (2,), (3,), (4,), (5,)]),
    )

    for _ in range(5):
        with pytest.raises(SchemaNotReady):
            await store.check_ready()
    await store.check_ready()


# --- every query bound by name at its call site ---------------------------------------------------


async def test_a_value_missing_or_left_over_is_refused_before_the_batch_is_sent() -> None:
    conn = FakeConnection()
    with pytest.raises(TypeError, match=r"missing \['queues'\], unexpected \[\]"):
        await fetch(conn, "next_visible_at", now=NOW_TEXT)
    with pytest.raises(TypeError, match=r"missing \[\], unexpected \['queue'\]"):
        await fetch(conn, "next_visible_at", now=NOW_TEXT, queues="[]", queue="orders")
    assert conn.executed == []
    await fetch(conn, "next_visible_at", queues="[]", now=NOW_TEXT)  # by name: any order
    assert conn.params("next_visible_at") == (NOW_TEXT, "[]")


async def test_every_query_is_sent_by_a_store_method_that_binds_each_of_its_names(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # Every call site binds through Query.bind, which raises TypeError for a name missing or left
    # over, before anything is sent (the test above). So a query that reached the fake was bound
    # with exactly its names; between them, these calls reach every query of queries.sql.
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    keyed = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, keyed.id, NOW, True)))
    conn.reply("push_batch", ids(keyed.id))
    conn.reply("extend", Results([result(seq=7), item_row(item_id, status="leased", lease_token=token)]))
    conn.reply("complete_batch", *[Results([completed_ids(item_id), still_there()])] * 2)
    conn.reply("fail", Results([result(status="dead"), item_row(item_id, status="dead")]))
    conn.reply("get_item", item_row(item_id, status="ready"))
    conn.reply("next_visible_at", Results([result(now=NOW.replace(tzinfo=None)), visible_rows()]))
    conn.reply("queue_stats", *[Result(STATS_COLUMNS, [stats_row("orders", None)])] * 2)
    conn.reply("put_queue", result(created=1))
    conn.reply("list_dead", dead_rows())
    conn.reply("pick_dead", picked(1))
    conn.reply("revive", result(revived=1))
    conn.reply("purge_dead", result(purged=0))
    conn.reply("list_history", history_rows())
    conn.reply("reap_expired", Result(["queue", "killed"], []))
    conn.reply("purge_history", result(history=0, keys=0, ids=0))
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply(
        "applied_versions", Result(["version"], []), Result(["version"], [(1,), (2,), (3,), (4,), (5,)])
    )
    conn.reply("queue_exists", result(found=1))
    conn.reply("set_paused", result(changed=1))
    conn.reply("peek", dead_rows())
    conn.reply("delete_queue", result(found=1, leased=0, deleted=1, items=2, history=3))

    await store.push_batch([keyed], skip_existing=False)
    await store.pop("orders", 1, None)
    await store.extend(item_id, token, 30)
    await store.complete(item_id, token)
    await store.complete_batch([Completion(item_id, None)])
    await store.fail(item_id, Failure("boom", lease_token=token, retry=False))
    await store.get_item(item_id)
    await store.next_visible_at(["orders"])
    await store.list_queues()
    await store.get_queue("orders")
    await store.put_queue("orders", QueueSettings())
    await store.list_dead("orders", DeadFilter(), 10, None)
    assert await store.redrive("orders", None, None) == 1
    await store.purge_dead("orders")
    await store.list_history("orders", HistoryFilter(), 10, None)
    await store.reap_expired(10)
    await store.purge_history(10)
    assert await store.migrate() == [1, 2, 3, 4, 5]
    await store.check_ready()
    assert await store.queue_exists("orders")
    await store.set_paused("orders", True)
    await store.peek("orders", ItemStatus.LEASED, 10, None)
    assert await store.delete_queue("orders", force=False) == DeletedQueue(items=2, history=3)

    named = [e for e in conn.executed if e.name in Q]
    assert {e.name for e in named} == set(Q), "a query no store method sends"
    for e in named:
        assert len(e.params) == len(Q[e.name].params), e.name
    assert not conn.closed, "unlock_migrations, whose errors are swallowed, was bound too"


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
            DatabaseMisconfigured,  # still a DatabaseUnavailable (retried), naming the cause
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
            Deadlocked,
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

    with pytest.raises((QueueError, Deadlocked)) as raised:
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
    # Blocking ODBC calls get a thread per pooled connection, not the loop's few default ones.
    executor = kwargs["executor"]
    assert isinstance(executor, ThreadPoolExecutor)
    assert executor._max_workers == 7
    assert executor._shutdown, "closed with the store"
    assert fake_aioodbc["wait_closed"]


async def test_each_new_connection_bounds_its_statements_and_lock_waits(fake_aioodbc: dict[str, Any]) -> None:
    store = MssqlStore(URL, timeout_seconds=2.5)
    await store.open()
    conn = FakeConnection()

    await fake_aioodbc["create_pool"]["after_created"](conn)

    assert conn._conn.timeout == 3  # whole seconds, rounded up: never 0, which would mean none
    assert [e.sql for e in conn.executed] == ["SET LOCK_TIMEOUT 2500"]
    await store.close()


async def test_migrations_lift_the_bounds_and_put_them_back(monkeypatch: pytest.MonkeyPatch) -> None:
    store, conn = fake_store(monkeypatch)
    seen: list[int] = []
    original = Q["lock_migrations"].sql
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=150))
    conn.reply("applied_versions", Result(["version"], []))

    class Watching(FakeCursor):
        async def execute(self, sql: str, *params: Any) -> FakeCursor:
            if sql == original:
                seen.append(conn._conn.timeout)
            return await super().execute(sql, *params)

    monkeypatch.setattr(conn, "cursor", lambda: _async(Watching(conn)))
    await store.migrate()

    assert seen == [0]  # waiting for another replica's migration is not cut off
    assert conn.executed[0].sql == "SET LOCK_TIMEOUT -1"
    assert conn.executed[-1].sql == "SET LOCK_TIMEOUT 5000"
    assert conn._conn.timeout == 5


async def _async(value: Any) -> Any:
    return value


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
    # Every module of the dialect, not only the store that imports most of them.
    code = (
        "import sys, importlib, pkgutil, simplequeue.store.mssql as dialect; "
        "names = [m.name for m in pkgutil.iter_modules(dialect.__path__)]; "
        "assert {'store', 'odbc', 'errors', 'params', 'statements'} <= set(names), names; "
        "[importlib.import_module(f'{dialect.__name__}.{name}') for name in names]; "
        "print(sorted(m for m in ('pyodbc', 'aioodbc') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"


# --- queue administration -------------------------------------------------------------------------


def test_a_paused_queue_hands_out_nothing() -> None:
    assert pop_declares()["paused"] == "COALESCE((SELECT paused FROM dbo.sq_queues WHERE name = @queue), 0)"
    assert "@paused = 0" in claim_select().args["where"].sql("tsql")


def test_delete_queue_locks_the_queue_row_before_it_counts_leases_and_deletes() -> None:
    trees = statements("delete_queue")
    [lock] = [t for t in trees if isinstance(t, exp.Select) and "UPDLOCK" in t.sql("tsql")]
    table = lock.find(exp.Table)
    assert (table.name, hints(table)) == ("sq_queues", ["HOLDLOCK", "UPDLOCK"])
    text = Q["delete_queue"].sql
    assert text.index("UPDLOCK") < text.index("status = 'leased'") < text.index("FROM dbo.sq_items AS i")
    for table_name in ("sq_history", "sq_dedup", "sq_queues"):
        assert f"DELETE FROM dbo.{table_name} WHERE" in text
    assert "SET @items = @@ROWCOUNT;" in text, "the items the DELETE deleted, not the claims"


def delete_queue_deletes() -> dict[str, exp.Delete]:
    """delete_queue's DELETEs, by the table each deletes from."""
    [block] = [t for t in statements("delete_queue") if isinstance(t, exp.IfBlock)]
    found = {}
    for delete in block.find_all(exp.Delete):
        [table] = [t for t in delete.find_all(exp.Table) if t.db == "dbo"]
        found[table.name] = delete
    return found


def test_delete_queue_removes_its_items_claims_after_the_items() -> None:
    deletes = delete_queue_deletes()
    assert list(deletes) == ["sq_items", "sq_client_ids", "sq_history", "sq_dedup", "sq_queues"]
    items = deletes["sq_items"]
    assert items.args["where"].this.sql("tsql") == "i.queue = @queue"
    output = items.args["returning"]
    assert [col.sql("tsql") for col in output.expressions] == ["deleted.id", "deleted.remember_id"]
    assert output.args["into"].name == "gone"
    claims = deletes["sq_client_ids"]
    table = table_named(claims, "sq_client_ids")
    assert (table.alias, hints(table)) == ("k", ["FORCESEEK"])
    assert [join.sql("tsql") for join in table.args["joins"]] == ["JOIN @gone AS g ON k.id = g.id"]
    assert claims.args["where"].this.sql("tsql") == "g.remember_id = 1"
    text = Q["delete_queue"].sql
    # The items first, as a push locks an item before its claim; the item count is read before the
    # claims' DELETE changes @@ROWCOUNT.
    assert (
        text.index("FROM dbo.sq_items AS i")
        < text.index("SET @items = @@ROWCOUNT;")
        < text.index("FROM dbo.sq_client_ids")
        < text.index("DELETE FROM dbo.sq_queues")
    )
    assert "DECLARE @gone TABLE (id UNIQUEIDENTIFIER NOT NULL, remember_id BIT NOT NULL)" in declared(
        "delete_queue"
    )


@pytest.mark.parametrize(
    ("row", "raised"),
    [
        ({"found": 0, "leased": 0, "deleted": 0, "items": 0, "history": 0}, QueueNotFound),
        ({"found": 1, "leased": 2, "deleted": 0, "items": 0, "history": 0}, QueueInUse),
    ],
)
async def test_delete_queue_says_why_it_deleted_nothing(
    fake: tuple[MssqlStore, FakeConnection], row: dict[str, int], raised: type[QueueError]
) -> None:
    store, conn = fake
    conn.reply("delete_queue", result(**row))
    with pytest.raises(raised):
        await store.delete_queue("orders", force=False)
    assert conn.params("delete_queue") == (NOW_TEXT, "orders", 0)


async def test_set_paused_of_an_unknown_queue_is_not_found(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("set_paused", result(changed=0))
    with pytest.raises(QueueNotFound):
        await store.set_paused("nowhere", True)
    assert conn.params("set_paused") == ("nowhere", 1)
