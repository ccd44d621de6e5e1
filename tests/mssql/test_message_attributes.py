"""Message attributes on SQL Server (migration v8's nullable sq_items.attributes, procedures.sql's
dbo.sq_push_items inserting them), and the statements that hand items out reading them.

No SQL Server runs here: shape and binding only. The migration's batch and the procedure are read
by sqlglot's tsql dialect; the procedure's INSERT carries the attributes; the JSON contract between
params.push_json and the procedure's OPENJSON columns; the store's push binding the attributes'
text; and every statement whose rows become items naming the column."""

from __future__ import annotations

import json
from uuid import uuid4

from simplequeue.domain import NewItem
from simplequeue.store.migrations import load_migrations, load_routines, split_statements
from simplequeue.store.mssql.params import push_json
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import NOW, FakeConnection, parse
from tests.mssql.test_push_procedures import answers, code_lines

[ATTRIBUTES] = [m for m in load_migrations("mssql") if m.name == "message_attributes"]
BATCHES = split_statements(ATTRIBUTES.sql)
PROCEDURES = split_statements(load_routines("mssql") or "")
[PUSH_ITEMS] = [b for b in PROCEDURES if "CREATE OR ALTER PROCEDURE dbo.sq_push_items\n" in b]
TEXT = '{"trace":{"type":"String","value":"abc"}}'


INSERT = (
    "INSERT INTO dbo.sq_items (id, queue, payload, created_at, visible_at, priority, group_key, dedup_key,"
)


def test_the_migration_is_version_8_in_one_batch() -> None:
    assert ATTRIBUTES.version == 8
    assert [code_lines(b)[0] for b in BATCHES] == ["IF COL_LENGTH(N'dbo.sq_items', N'attributes') IS NULL"]


def test_the_column_is_added_once_and_nullable() -> None:
    [guarded] = parse(BATCHES[0])
    assert isinstance(guarded, exp.IfBlock)
    [added] = guarded.args["true"].expressions
    assert isinstance(added, exp.Alter)
    assert added.this.sql("tsql") == "dbo.sq_items"
    [column] = added.args["actions"]
    assert column.sql("tsql") == "attributes NVARCHAR(MAX) NULL"


def test_the_procedure_parses_whole() -> None:
    [created] = parse(PUSH_ITEMS)
    assert isinstance(created, exp.Create)
    assert created.args["kind"] == "PROCEDURE"
    assert created.args.get("replace"), "CREATE OR ALTER: the grants and the ownership chain stay"


def test_the_procedure_inserts_each_items_attributes() -> None:
    lines = PUSH_ITEMS.splitlines()
    at = lines.index(f"{INSERT} remember_id,")
    assert lines[at : at + 6] == [
        f"{INSERT} remember_id,",
        "                          attributes, fairness_key, fair_rank, rank_priority)",
        "OUTPUT inserted.id, inserted.queue INTO @inserted",
        "SELECT i.id, i.queue, j.payload, i.created_at, i.visible_at, i.priority, i.group_key, i.dedup_key, "
        "i.remember,",
        "       j.attributes, i.fairness_key, i.fair_rank, COALESCE(i.rank_priority, i.priority)",
        "FROM OPENJSON(@items) WITH (n INT, payload NVARCHAR(MAX), attributes NVARCHAR(MAX)) AS j",
    ]


def test_push_json_sends_the_attributes_text_the_procedure_reads() -> None:
    [with_them, without] = json.loads(
        push_json([NewItem(uuid4(), "q", "1", NOW, attributes_json=TEXT), NewItem(uuid4(), "q", "2", NOW)])
    )
    assert with_them["attributes"] == TEXT
    assert "attributes" not in without, "read as NULL, as in the items applications push"
    [created] = parse(PUSH_ITEMS)
    read = {
        column.name: column.args["kind"].sql("tsql")
        for node in created.find_all(exp.OpenJSON)
        if node.this.sql("tsql") == "@items"
        for column in node.expressions
    }
    assert read["attributes"] == "NVARCHAR(MAX)"
    assert set(read) == set(with_them), "every field push_json sends is read, and no other"


async def test_the_store_binds_the_attributes_into_the_procedures_items(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = NewItem(uuid4(), "orders", '"body"', NOW, attributes_json=TEXT)
    conn.reply("push_batch", answers((0, item.id, NOW, True)))

    await store.push_batch([item], skip_existing=False)

    _, items = conn.params("push_batch")
    assert json.loads(items)[0]["attributes"] == TEXT


def test_every_statement_that_hands_items_out_reads_the_column() -> None:
    assert "inserted.attributes" in Q["pop"].sql
    assert "x.attributes" in Q["pop"].sql, "the claimable rows carry it to the OUTPUT"
    for name in ("get_item", "list_dead", "peek"):
        assert "i.attributes" in Q[name].sql, name


def test_a_redrive_reinserts_the_attributes_with_the_item() -> None:
    sql = Q["revive"].sql
    assert "deleted.attributes" in sql
    assert "g.attributes" in sql
    assert "attributes NVARCHAR(MAX) NULL" in sql
