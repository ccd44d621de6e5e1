"""The migrations' statements: every CREATE guarded by a check for what it creates, the items
clustered on an identity, the filtered indexes, and v2 (delivery) and v5 (remembered ids) next
to SQLite's reference schema."""

from __future__ import annotations

import re

import pytest
from simplequeue.domain import QueueSettings
from simplequeue.store import rows
from simplequeue.store.migrations import Migration, load_migrations
from sqlglot import exp

from tests.mssql.helpers import (
    ADMIN,
    AGING,
    CLIENT_IDS,
    DELIVERY,
    FLOW_LIMITS,
    MIGRATION,
    OPTIONAL_SETTINGS,
    QUEUE_WINDOWS,
    SQLITE_DELIVERY,
    SQLITE_QUEUE_WINDOWS,
    SQLITE_TYPED_SETTINGS,
    TYPED_SETTINGS,
    all_migration_statements,
    create_index,
    create_table,
    guarded,
    guarded_creates,
    live_statuses,
    migration_statements,
    next_visible_at_min,
    parse,
)


# The procedures (procedures.sql, not a migration) hold THROW and SAVE TRANSACTION, which sqlglot
# cannot read: test_push_procedures.py reads them statement by statement.
@pytest.mark.parametrize(
    "statement",
    all_migration_statements(),
    ids=lambda s: s.splitlines()[0][:60],
)
def test_every_migration_statement_parses_as_tsql(statement: str) -> None:
    assert len(parse(statement)) == 1


def test_the_migration_splits_into_its_six_guarded_creates() -> None:
    assert len(migration_statements()) == 6
    for migration in (MIGRATION, DELIVERY, ADMIN, CLIENT_IDS):
        assert all(
            ";" not in line.rstrip()[:-1] for line in migration.sql.splitlines() if not line.startswith("--")
        )


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


def test_the_watchers_index_is_filtered_to_live_rows_by_the_probes_own_predicate() -> None:
    params = create_index("sq_items_visible").this.args["params"]
    assert [o.this.name for o in params.args["columns"]] == ["queue", "visible_at"]
    assert live_statuses(params.args["where"]) == [["leased", "ready"]]
    # A filtered index serves a parameterised statement only when the statement repeats its filter
    # as literals.
    assert params.args["where"].this.sql("tsql") in next_visible_at_min().args["where"].sql("tsql")


# --- v2: delivery semantics -----------------------------------------------------------------------


def added_columns(table: str, migrations: tuple[Migration, ...] = (DELIVERY,)) -> dict[str, exp.ColumnDef]:
    """The columns the migrations add to a table, each guarded by a check for itself."""
    found = {}
    for guard, body in (pair for migration in migrations for pair in guarded(migration)):
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
    """SQLite's queue settings as its latest sq_queues has them, the reference: column -> (default,
    check)."""
    found = re.findall(
        r"^    (\w+) \w+ NOT NULL DEFAULT ('\w+'|[\d.]+) CHECK \((.+)\),$",
        SQLITE_QUEUE_WINDOWS.sql,
        re.M,
    )
    return {name: (default, check) for name, default, check in found if name != "paused"}


QUEUE_SETTINGS = (DELIVERY, QUEUE_WINDOWS)
"""The migrations that add the queue settings' columns."""


def replaced_checks() -> dict[str, str]:
    """Column -> the CHECK that v10 puts in place of v2's (dropped first, by name)."""
    found = re.findall(r"ADD CONSTRAINT sq_queues_(\w+)_ck CHECK \((.+)\);", QUEUE_WINDOWS.sql)
    assert all(f"DROP CONSTRAINT sq_queues_{name}_ck;" in QUEUE_WINDOWS.sql for name, _ in found)
    return dict(found)


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
    columns = added_columns("sq_queues", QUEUE_SETTINGS)
    reference = sqlite_settings()
    assert (
        set(columns)
        == set(reference)
        == set(rows.settings_params(QueueSettings())) - OPTIONAL_SETTINGS - FLOW_LIMITS - AGING
    )
    replaced = replaced_checks()
    assert set(replaced) == {"lease_seconds"}
    for name, (default, check) in reference.items():
        column = columns[name]
        assert constraint(column, exp.NotNullColumnConstraint) is not None
        ours_default = constraint(column, exp.DefaultColumnConstraint).this.name
        if name == "dedup_window_from":
            assert ours_default == default.strip("'") == QueueSettings().dedup_window_from
            assert constraint(column, exp.CheckColumnConstraint).this.sql("tsql") == check
            continue
        assert float(ours_default) == float(default), name
        if name == "history_payload":
            assert column.args["kind"].sql("tsql") == "BIT", "0 or 1 by its type"
            continue
        ours = replaced.get(name) or constraint(column, exp.CheckColumnConstraint).this.sql("tsql")
        assert [float(n) for n in re.findall(r"[\d.]+", ours)] == [
            float(n) for n in re.findall(r"[\d.]+", check)
        ]
        assert ours.startswith(f"{name} BETWEEN")
    kinds = {name: column.args["kind"].sql("tsql") for name, column in columns.items()}
    assert {kinds[n] for n in kinds if n.startswith("backoff_")} == {"FLOAT"}


def test_a_queue_made_by_a_push_gets_the_domains_default_settings() -> None:
    defaults = {
        name: constraint(column, exp.DefaultColumnConstraint).this.name
        for name, column in added_columns("sq_queues", QUEUE_SETTINGS).items()
    }
    row = {
        name: value if name == "dedup_window_from" else float(value) if "." in value else int(value)
        for name, value in defaults.items()
    } | dict.fromkeys(OPTIONAL_SETTINGS | FLOW_LIMITS | AGING)
    assert rows.queue_settings(row) == QueueSettings()


def test_the_optional_settings_are_nullable_columns_with_sqlites_ranges_filled_from_the_attributes() -> None:
    columns = added_columns("sq_queues", (TYPED_SETTINGS,))
    assert set(columns) == OPTIONAL_SETTINGS
    for column in columns.values():  # NULL: none
        nullable = constraint(column, exp.NotNullColumnConstraint)
        assert nullable is not None, column.sql("tsql")
        assert nullable.args.get("allow_null"), column.sql("tsql")
    assert columns["dead_letter_queue"].args["kind"].sql("tsql") == "NVARCHAR(128)"
    assert "COLLATE Latin1_General_100_BIN2" in columns["dead_letter_queue"].sql("tsql")  # as sq_queues.name
    check = constraint(columns["message_retention_seconds"], exp.CheckColumnConstraint).this.sql("tsql")
    assert check == "message_retention_seconds BETWEEN 60 AND 1209600"
    assert f"CHECK ({check})" in SQLITE_TYPED_SETTINGS.sql
    # The values move from the SQS door's attributes, which then go (RedrivePolicy with them: the
    # door answers it from the settings).
    moves = [parse(s)[0] for s in migration_statements(TYPED_SETTINGS)]
    updates = [m for m in moves if isinstance(m, exp.Update)]
    assert [u.sql("tsql") for u in updates] == [
        "UPDATE q SET dead_letter_queue = a.value FROM dbo.sq_queues AS q JOIN dbo.sq_queue_attributes AS a"
        " ON a.queue = q.name AND a.name = N'dead_letter_queue'",
        "UPDATE q SET message_retention_seconds = CAST(a.value AS INTEGER) FROM dbo.sq_queues AS q"
        " JOIN dbo.sq_queue_attributes AS a ON a.queue = q.name AND a.name = N'MessageRetentionPeriod'",
    ]
    [delete] = [m for m in moves if isinstance(m, exp.Delete)]
    assert delete.args["where"].sql("tsql") == (
        "WHERE name IN (N'dead_letter_queue', N'MessageRetentionPeriod', N'RedrivePolicy')"
    )


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


# --- v5: remembered ids ---------------------------------------------------------------------------


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


PRIORITY_AGING = next(m for m in load_migrations("mssql") if m.name == "priority_aging")


def test_priority_aging_adds_a_nullable_setting_and_a_bigint_rank_filled_from_priority() -> None:
    setting = added_columns("sq_queues", (PRIORITY_AGING,))
    assert set(setting) == AGING
    column = setting["priority_aging_seconds"]
    assert column.args["kind"].sql("tsql") == "INTEGER"
    assert constraint(column, exp.CheckColumnConstraint).this.sql("tsql") == "priority_aging_seconds >= 1"
    [sqlite] = [m for m in load_migrations("sqlite") if m.name == "priority_aging"]
    assert "CHECK (priority_aging_seconds >= 1)" in sqlite.sql
    [rank] = added_columns("sq_items", (PRIORITY_AGING,)).values()
    assert rank.args["kind"].sql("tsql") == "BIGINT", "with a period of a second, INT runs out in 2038"
    assert constraint(rank, exp.NotNullColumnConstraint) is not None
    # The items already there rank by their priority, so that they keep their order; once more changes
    # nothing.
    updates = [parse(s)[0] for s in migration_statements(PRIORITY_AGING)]
    [backfill] = [u for u in updates if isinstance(u, exp.Update)]
    assert backfill.sql("tsql") == (
        "UPDATE dbo.sq_items SET rank_priority = priority WHERE rank_priority <> priority"
    )
