"""Pushing as stored procedures (store/mssql/procedures.sql: dbo.sq_push_items, which the service
calls, and dbo.sq_push_batch and dbo.sq_push, which applications call inside their own
transactions), applied by every migrate after the migrations; migration v6 adds the sq_settings
they read.

No SQL Server runs here: these tests check shape only. The procedures file's GO batches, each read by
sqlglot's tsql dialect where it can (THROW and SAVE TRANSACTION it cannot: those statements are
checked as text); the procedures' parameters and result set; the JSON contract between
params.push_json, the procedures' OPENJSON ... WITH columns and their FOR JSON answers; and the
store's push bound to an EXEC of dbo.sq_push_items through the recording fake connection."""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import MAX_PAYLOAD_DEPTH, ItemExists, NewItem, Pushed
from simplequeue.store.migrations import ROUTINES, as_script, load_migrations, load_routines, split_statements
from simplequeue.store.mssql.params import push_json
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql import helpers
from tests.mssql.helpers import NOW, NOW_TEXT, FakeConnection, Result, openjson_columns, parse, placeholders
from tests.queue_names import NAMES, decisions
from tests.test_e2e import simplequeue_command

[PUSH_PROCEDURES] = [m for m in load_migrations("mssql") if m.name == "push_procedures"]
SETTINGS_BATCHES = split_statements(PUSH_PROCEDURES.sql)  # v6: dbo.sq_settings, and its defaults
PROCEDURES = load_routines("mssql") or ""
BATCHES = split_statements(PROCEDURES)
PUBLIC = ("sq_push_batch", "sq_push", "sq_publish")


# --- reading the procedures -----------------------------------------------------------------------


def code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("--")]


def procedure(name: str) -> str:
    """The batch that creates dbo.<name>."""
    [batch] = [b for b in BATCHES if f"CREATE OR ALTER PROCEDURE dbo.{name}\n" in b]
    return batch


def header(name: str) -> str:
    batch = procedure(name)
    return batch[batch.index("CREATE OR ALTER") : batch.index("\nAS\nBEGIN\n")]


def body(name: str) -> str:
    batch = procedure(name).rstrip()
    assert batch.endswith("\nEND"), "the body is one BEGIN ... END"
    return batch[batch.index("\nAS\nBEGIN\n") + len("\nAS\nBEGIN\n") : -len("\nEND")]


def body_statements(name: str) -> list[str]:
    """A procedure's top-level statements: each ends with ';' at the end of a line outside any
    BEGIN ... END block (an IF's block is part of its IF)."""
    found, current, depth = [], [], 0
    for line in body(name).splitlines():
        current.append(line)
        stripped = line.strip()
        if stripped == "BEGIN":
            depth += 1
        elif stripped in ("END", "END;") and depth:
            depth -= 1
        if depth == 0 and stripped.endswith(";"):
            found.append("\n".join(current))
            current = []
    assert not "".join(current).strip(), f"a statement without its ';': {current}"
    return found


def unparsable(statement: str) -> bool:
    """THROW and SAVE TRANSACTION, which sqlglot cannot read."""
    return bool(re.search(r"\bTHROW\b|\bSAVE TRANSACTION\b", statement))


def body_trees(name: str) -> list[exp.Expression]:
    """The procedure's statements as sqlglot reads them, each alone (sqlglot would read every
    statement after an IF as its body), but for those it cannot read."""
    trees = []
    for statement in body_statements(name):
        if not unparsable(statement):
            [tree] = parse(statement)
            trees.append(tree)
    return trees


def parameters(name: str) -> dict[str, str]:
    """Each parameter of a procedure and its declaration: type, then default or OUTPUT."""
    [create] = parse(header(name) + "\nAS\nSELECT 1")
    assert isinstance(create, exp.Create)
    assert create.args["kind"] == "PROCEDURE"
    assert create.args.get("replace"), "CREATE OR ALTER: running the file again is harmless"
    assert create.this.this.sql("tsql") == f"dbo.{name}"
    declared = {}
    for column in create.this.expressions:
        kind = column.args["kind"].sql("tsql")
        default = column.args.get("default")
        declared[column.this.name] = kind + (f" = {default.sql('tsql')}" if default is not None else "")
    for output in re.findall(r"@(\w+) [^,\n]+ OUTPUT", header(name)):
        declared[output] += " OUTPUT"
    return declared


def answers(*found: tuple[int, UUID, datetime, bool | None]) -> Result:
    """push_batch's rows, as pyodbc gives them: n, id (uppercase text), created_at (naive UTC),
    created (a BIT: True, False, or None for a refused item)."""
    return Result(
        ["n", "id", "created_at", "created"],
        [(n, str(i).upper(), at.replace(tzinfo=None), created) for n, i, at, created in found],
    )


def procedures_sent_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the fake connection take the procedure batches, which it would refuse for want of
    counting their markers with sqlglot (THROW): a migration binds no parameters."""
    original = helpers.placeholders
    monkeypatch.setattr(
        helpers, "placeholders", lambda sql: 0 if "CREATE OR ALTER PROCEDURE" in sql else original(sql)
    )


# --- the file -------------------------------------------------------------------------------------


def test_the_file_splits_into_its_batches_at_go() -> None:
    assert PUSH_PROCEDURES.version == 6
    assert [code_lines(batch)[0] for batch in SETTINGS_BATCHES] == [
        "IF OBJECT_ID(N'dbo.sq_settings', N'U') IS NULL",
        "INSERT INTO dbo.sq_settings (name, value)",
    ]
    firsts = [code_lines(batch)[0] for batch in BATCHES]
    assert firsts == [
        "CREATE OR ALTER FUNCTION dbo.sq_utf8_bytes (@text NVARCHAR(MAX))",
        "CREATE OR ALTER PROCEDURE dbo.sq_push_items",
        "CREATE OR ALTER PROCEDURE dbo.sq_push_batch",
        "CREATE OR ALTER PROCEDURE dbo.sq_push",
        "CREATE OR ALTER PROCEDURE dbo.sq_publish",
    ]
    # A procedure's body keeps its semicolons: the whole batch goes in one call.
    assert all(not re.search(r"^\s*GO\s*$", batch, re.MULTILINE | re.IGNORECASE) for batch in BATCHES)
    assert body("sq_push_items").count(";\n") > 30
    # Each CREATE stands alone in its batch, first after the batch's comments.
    for batch in BATCHES:
        assert sum(line.startswith("CREATE ") for line in code_lines(batch)) == 1


def test_every_batch_parses_as_tsql_where_sqlglot_can_read_it() -> None:
    function, push_items, *_ = BATCHES
    for batch in (*SETTINGS_BATCHES, function):
        assert len(parse(batch)) == 1
    [created] = parse(function)
    assert isinstance(created, exp.Create)
    assert created.args["kind"] == "FUNCTION"
    assert len(parse(push_items)) == 1, "the internal procedure, whole"
    for name in ("sq_push_items", *PUBLIC):
        statements = body_statements(name)
        assert len(body_trees(name)) == len([s for s in statements if not unparsable(s)])
        for statement in filter(unparsable, statements):
            throws = re.findall(r"\bTHROW (\S+), (.+), 1;", statement)
            saves = re.findall(r"\bSAVE TRANSACTION (\w+);", statement)
            assert throws or saves, statement


def test_sq_settings_holds_the_limits_the_database_cannot_see_with_the_services_defaults() -> None:
    [guarded] = parse(SETTINGS_BATCHES[0])
    assert isinstance(guarded, exp.IfBlock)
    [create] = guarded.args["true"].expressions
    columns = {
        c.name: c.args["kind"].sql("tsql") for c in create.this.expressions if isinstance(c, exp.ColumnDef)
    }
    assert columns == {"name": "NVARCHAR(64)", "value": "NVARCHAR(256)"}
    assert "PRIMARY KEY CLUSTERED (name)" in create.sql("tsql")
    [insert] = parse(SETTINGS_BATCHES[1])
    values = {row.expressions[0].name: row.expressions[1].name for row in insert.find(exp.Values).expressions}
    # The seed is the service's default when the migration was written (256 KiB, 1 MiB since): every
    # migrate, the service's or the CLI's, then writes the configured limit over it.
    assert values == {
        "max_payload_bytes": "262144",
        "max_payload_depth": str(MAX_PAYLOAD_DEPTH),
    }
    assert "WHERE NOT EXISTS" in SETTINGS_BATCHES[1], "a limit a deployment changed is kept"


def test_the_procedures_parameters() -> None:
    assert parameters("sq_push_items") == {
        "items": "NVARCHAR(MAX)",
        "now": "DATETIME2(7)",
        "results": "NVARCHAR(MAX) OUTPUT",
    }
    assert parameters("sq_push_batch") == {"items": "NVARCHAR(MAX)"}
    # Names and keys are wider than they may be: a procedure's parameter cuts a longer value short
    # without an error, and a cut key would match another item's.
    assert parameters("sq_push") == {
        "queue": "NVARCHAR(4000)",
        "payload": "NVARCHAR(MAX)",
        "priority": "INTEGER = NULL",
        "delay_seconds": "FLOAT = NULL",
        "group_key": "NVARCHAR(4000) = NULL",
        "dedup_key": "NVARCHAR(4000) = NULL",
        "id": "UNIQUEIDENTIFIER = NULL",
        "created_at": "DATETIMEOFFSET = NULL",
        "not_before": "DATETIMEOFFSET = NULL",
        "fairness_key": "NVARCHAR(4000) = NULL",
    }


def test_sq_push_hands_every_argument_to_sq_push_batch_as_its_items_field() -> None:
    # Its element, but the payload (spliced in as raw JSON): each argument under its own name, a
    # field sq_push_batch reads and checks, so a fairness key is refused or ranked as a batch's is.
    [element] = [s for s in body_statements("sq_push") if s.startswith("SET @item =")]
    fields = re.findall(r"@(\w+) AS (\w+)", element)
    assert all(argument == field for argument, field in fields)
    assert {field for field, _ in fields} | {"payload"} == set(parameters("sq_push"))
    read = set(re.findall(r"NVARCHAR\(4000\) '\$\.(\w+)'", body("sq_push_batch")))
    assert {field for field, _ in fields} <= read
    assert "fairness_key" in read


def test_sq_push_batch_answers_one_result_set_of_id_and_created_in_the_items_order() -> None:
    selects = [t for t in body_trees("sq_push_batch") if isinstance(t, exp.Select) and not t.find(exp.EQ)]
    [answer] = [s for s in selects if s.args.get("order")]
    assert [col.sql("tsql") for col in answer.expressions] == ["r.id", "r.created"]
    assert openjson_columns(answer) == {"n": "INTEGER", "id": "UNIQUEIDENTIFIER", "created": "BIT"}
    assert answer.find(exp.OpenJSON).this.sql("tsql") == "@results"
    assert [o.sql("tsql") for o in answer.args["order"].expressions] == ["r.n"]
    assert body_statements("sq_push_batch")[-1].startswith("SELECT r.id, r.created"), "the last statement"
    # The only result set: every other SELECT assigns variables or feeds an INSERT.
    assert all(s is answer or s.find(exp.EQ) for s in selects)
    # sq_push has none of its own: it is sq_push_batch's, for its one item.
    assert not [t for t in body_trees("sq_push") if isinstance(t, exp.Select)]
    [*_, run] = body_trees("sq_push")
    assert isinstance(run, exp.Execute)
    assert run.sql("tsql") == "EXECUTE dbo.sq_push_batch @items = @items"


# --- the rules the application procedures add: checks, errors, the caller's transaction -----------


def test_the_application_procedures_check_everything_before_anything_is_written() -> None:
    text = body("sq_push_batch")
    first_write = text.index("EXEC dbo.sq_push_items")
    checks = [m.start() for m in re.finditer(r"THROW (51400|@code)", text)]
    assert len(checks) == 2
    assert all(at < first_write for at in checks)
    assert text.index("THROW 51409") > first_write, "a refusal only the push itself can find"
    # The limits come from sq_settings, the defaults if a row is gone.
    assert "FROM dbo.sq_settings AS s WHERE s.name = N'max_payload_bytes'), 262144" in text
    assert "FROM dbo.sq_settings AS s WHERE s.name = N'max_payload_depth'), 64" in text
    assert "SET @code = 51413" in text
    problems = re.findall(r"THEN (?:N'|CONCAT\(N')(\.?\w*)", text[text.index(") AS p;") :])
    assert problems == [
        "",  # must be a JSON object
        ".queue",
        ".queue",
        ".payload",
        ".payload",
        ".payload",
        ".payload",
        ".priority",
        ".delay_seconds",
        ".not_before",
        ".created_at",
        ".id",
        ".group_key",
        ".dedup_key",
        ".fairness_key",
    ]
    # sq_push checks what it must before building the element (its payload goes in as raw JSON).
    pushed = body("sq_push")
    assert pushed.index("THROW 51400, N'simplequeue: @payload") < pushed.index("SET @items")


QUEUE_CHECK = """\
        WHEN DATALENGTH(i.queue) NOT BETWEEN 2 AND 256 OR DATALENGTH(i.queue) <> DATALENGTH(RTRIM(i.queue))
             OR i.queue COLLATE Latin1_General_100_BIN2 LIKE N'%[^A-Za-z0-9._-]%'
            THEN N'.queue must be 1..128 characters of [A-Za-z0-9._-]'"""


def _refused_by_the_queue_check(name: str) -> bool:
    """QUEUE_CHECK as SQL Server reads it: DATALENGTH counts an NVARCHAR's UTF-16 bytes, RTRIM cuts
    trailing spaces, and LIKE's [^...] under a binary collation compares code points."""
    size = len(name.encode("utf-16-le", "surrogatepass"))
    trimmed = len(name.rstrip(" ").encode("utf-16-le", "surrogatepass"))
    return not 2 <= size <= 256 or size != trimmed or re.search(r"[^A-Za-z0-9._-]", name) is not None


def test_the_queue_check_takes_the_names_of_the_services_rule() -> None:
    # tests/queue_names.py's table, which every door runs; no server here, so the check as written.
    assert QUEUE_CHECK in body("sq_push_batch")
    assert "queue NVARCHAR(4000) '$.queue'" in body("sq_push_batch")  # wider than 128: not cut short
    assert "@queue NVARCHAR(4000)," in header("sq_push")
    assert decisions({name: not _refused_by_the_queue_check(name) for name in NAMES}) == {}


def test_every_refusal_leaves_the_callers_transaction_usable() -> None:
    for name in PUBLIC:
        statements = body_statements(name)
        throwing = [s for s in statements if "THROW" in s]
        assert throwing
        for statement in throwing:
            lines = [line.strip() for line in statement.splitlines()]
            [throw] = [n for n, line in enumerate(lines) if line.startswith("THROW")]
            # XACT_ABORT ON would doom the caller's transaction: it is lifted for the THROW only.
            assert lines[throw - 1] == "SET XACT_ABORT OFF;", statement
            message = re.search(r"THROW \S+, (.+), 1;", lines[throw])
            assert message is not None
            assert "\n" not in message[1]
    # The push itself under a savepoint (its own transaction outside one), undone before 51409.
    text = body("sq_push_batch")
    assert text.index("SAVE TRANSACTION sq_push_batch;") < text.index("EXEC dbo.sq_push_items")
    refusal = text[text.index("WHERE r.created IS NULL") :]
    assert refusal.index("ELSE ROLLBACK TRANSACTION sq_push_batch;") < refusal.index("THROW 51409")
    assert "IF @own = 1 ROLLBACK TRANSACTION;" in refusal
    assert "IF @own = 1 COMMIT TRANSACTION;" in refusal
    assert "exists in another queue" in text[: text.index("WHERE r.created IS NULL")]


def test_the_public_procedures_use_the_servers_clock_and_no_dynamic_sql() -> None:
    assert "DECLARE @now DATETIME2(7) = SYSUTCDATETIME();" in body("sq_push_batch")
    assert "EXEC dbo.sq_push_items @items = @push, @now = @now, @results = @results OUTPUT;" in body(
        "sq_push_batch"
    )
    # Dynamic SQL would break the ownership chain that lets EXECUTE alone suffice.
    assert not re.search(r"sp_executesql|EXEC(UTE)?\s*\(", PROCEDURES, re.IGNORECASE)
    assert "GRANT EXECUTE ON dbo.sq_push TO app_role;" in PROCEDURES
    assert "GRANT EXECUTE ON dbo.sq_push_batch TO app_role;" in PROCEDURES
    assert "Ownership chaining" in PROCEDURES


# --- one JSON contract: params.push_json, the procedure's reads, its answers ----------------------


def read_columns(name: str) -> dict[str, str]:
    """Every OPENJSON(@items) WITH column a procedure reads, with its type."""
    found: dict[str, str] = {}
    for tree in body_trees(name):
        for node in tree.find_all(exp.OpenJSON):
            if node.this.sql("tsql") == "@items":
                found |= {col.name: col.args["kind"].sql("tsql") for col in node.expressions}
    return found


def test_the_procedure_reads_exactly_the_fields_push_json_sends() -> None:
    attributes = '{"trace":{"type":"String","value":"abc"}}'
    item = NewItem(
        uuid4(), "orders", '{"n": 1}', NOW, not_before=NOW, id_given=True, attributes_json=attributes
    )
    [sent] = json.loads(push_json([item]))
    columns = read_columns("sq_push_items")
    assert set(columns) == set(sent)
    assert columns == {
        "n": "INTEGER",
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(4000)",
        "payload": "NVARCHAR(MAX)",
        "created_at": "NVARCHAR(40)",
        "priority": "INTEGER",
        "group_key": "NVARCHAR(4000)",
        "dedup_key": "NVARCHAR(4000)",
        "fairness_key": "NVARCHAR(4000)",
        "delay_seconds": "INTEGER",
        "delay_micros": "INTEGER",
        "not_before": "NVARCHAR(40)",
        "remember": "BIT",
        "attributes": "NVARCHAR(MAX)",
    }
    assert isinstance(sent["payload"], str), "the payload's text, as a JSON string"
    assert sent["created_at"] == sent["not_before"] == NOW_TEXT


def test_sq_push_batch_builds_the_same_json_for_the_procedure() -> None:
    [build] = [t for t in body_trees("sq_push_batch") if isinstance(t, exp.Set) and "@push" in t.sql("tsql")]
    select = build.find(exp.Select)
    assert select is not None
    assert [col.alias_or_name for col in select.expressions] == list(json.loads(push_json([new_item()]))[0])
    assert "FOR JSON PATH, INCLUDE_NULL_VALUES" in build.sql("tsql")
    # It reads what an application sends, by exact (case-sensitive) JSON path.
    item_fields = [
        "queue",
        "priority",
        "delay_seconds",
        "not_before",
        "group_key",
        "dedup_key",
        "fairness_key",
        "id",
        "created_at",
    ]
    assert re.findall(r"'\$\.(\w+)'", body("sq_push_batch")) == item_fields
    assert "v.[key] = N'payload' COLLATE Latin1_General_100_BIN2" in body("sq_push_batch")
    # An id the caller chose, without a dedup_key, is its idempotency key, as NewItem.remembers_id.
    assert "IIF(i.id IS NOT NULL AND i.dedup_key IS NULL, 1, 0) AS remember" in body("sq_push_batch")


def test_the_answers_are_one_json_element_per_item_that_every_caller_reads_alike() -> None:
    [answer] = [t for t in body_trees("sq_push_items") if isinstance(t, exp.Set)][-1:]
    select = answer.find(exp.Select)
    assert select is not None
    assert [col.sql("tsql") for col in select.expressions] == [
        "a.n",
        "a.id",
        "a.created_at",
        "a.created",
        "a.held_by",
    ]
    assert "FOR JSON PATH, INCLUDE_NULL_VALUES" in answer.sql("tsql"), "a refused item's created is null"
    written = {"n": "INTEGER", "id": "UNIQUEIDENTIFIER", "created_at": "DATETIME2(7)", "created": "BIT"}
    # The store's batch and sq_push_batch read them back with the @answer table's own types.
    assert openjson_columns(parse(Q["push_batch"].sql)[-1]) == written
    readers = [
        openjson_columns(t)
        for t in body_trees("sq_push_batch")
        if t.find(exp.OpenJSON) is not None and t.find(exp.OpenJSON).this.sql("tsql") == "@results"
    ]
    assert readers == [
        {"n": "INTEGER", "id": "UNIQUEIDENTIFIER", "created": "BIT", "held_by": "NVARCHAR(128)"},
        {"n": "INTEGER", "id": "UNIQUEIDENTIFIER", "created": "BIT"},
    ]


# --- the store's push: one EXEC of dbo.sq_push_items ---------------------------------------------


def new_item(**fields: Any) -> NewItem:
    return NewItem(uuid4(), "orders", '{"n": 1}', NOW, **fields)


def test_push_batch_is_an_exec_of_the_procedure_with_the_clock_and_the_items() -> None:
    sql = Q["push_batch"].sql
    assert Q["push_batch"].params == ("now", "items")
    assert placeholders(sql) == 2, "the clock and the items, whatever their number"
    lines = code_lines(sql)
    assert lines[:2] == ["SET NOCOUNT ON;", "SET XACT_ABORT ON;"], (
        "the caller's transaction, aborted on error"
    )
    assert "EXEC dbo.sq_push_items @items = @items, @now = @now, @results = @results OUTPUT;" in lines
    trees = parse(sql)
    assert [type(t) for t in trees] == [
        exp.Set,
        exp.Set,
        exp.Declare,
        exp.Declare,
        exp.Declare,
        exp.Execute,
        exp.Select,
    ]
    assert trees[-1].find(exp.OpenJSON).this.sql("tsql") == "@results"
    assert [o.sql("tsql") for o in trees[-1].args["order"].expressions] == ["r.n"]


async def test_the_store_binds_every_item_and_maps_each_answer(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    made, keyed, retry = new_item(), new_item(dedup_key="k"), new_item(id_given=True)
    holder, held_at = uuid4(), datetime(2026, 2, 1, 8, 0, 0, 5, tzinfo=UTC)
    follower = NewItem(uuid4(), "orders", "2", NOW, dedup_key="k")
    conn.reply(
        "push_batch",
        answers(
            (0, made.id, NOW, True),
            (1, holder, held_at, False),
            (2, retry.id, held_at, False),
            (3, holder, held_at, False),
        ),
    )

    results = await store.push_batch([made, keyed, retry, follower], skip_existing=False)

    assert results == [
        Pushed(made.id, NOW, True),
        Pushed(holder, held_at, False),
        Pushed(retry.id, held_at, False),
        Pushed(holder, held_at, False),
    ]
    assert conn.names == ["push_batch"], "one round trip, dedup keys and all"
    now, items = conn.params("push_batch")
    assert now == NOW_TEXT
    assert [(e["n"], e["id"], e["remember"]) for e in json.loads(items)] == [
        (0, str(made.id), 0),
        (1, str(keyed.id), 0),
        (2, str(retry.id), 1),
        (3, str(follower.id), 0),
    ], "every item, in the call's order: the procedure decides which speak for the others"
    batch = conn.inlined("push_batch")
    assert 'DECLARE @items NVARCHAR(MAX) = N\'[{"n":0,' in batch
    assert "EXEC dbo.sq_push_items @items = @items, @now = @now, @results = @results OUTPUT;" in batch
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_a_refused_item_is_item_exists_all_or_nothing_and_none_with_skip_existing(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    taken, new = new_item(id_given=True), new_item()
    conn.reply("push_batch", answers((0, taken.id, NOW, None), (1, new.id, NOW, True)))
    conn.reply("push_batch", answers((0, taken.id, NOW, None), (1, new.id, NOW, True)))

    with pytest.raises(ItemExists):
        await store.push_batch([taken, new], skip_existing=False)
    assert (conn.commits, conn.rollbacks) == (0, 1), "the new item and its queue are rolled back"

    assert await store.push_batch([taken, new], skip_existing=True) == [None, Pushed(new.id, NOW, True)]
    assert (conn.commits, conn.rollbacks) == (1, 1)


async def test_an_answer_missing_is_an_error_not_a_short_list(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    from simplequeue.domain import StoreError

    store, conn = fake
    item = new_item()
    conn.reply("push_batch", answers())

    with pytest.raises(StoreError, match="answered 0 of 1"):
        await store.push_batch([item], skip_existing=True)
    assert conn.rollbacks == 1


# --- what a DBA is given --------------------------------------------------------------------------


def test_the_script_ends_every_batch_with_go() -> None:
    script = as_script(PROCEDURES, "mssql")
    assert script.count("\nGO\n") == len(BATCHES) == 5
    for name in ("sq_push_items", *PUBLIC):
        assert re.search(rf"CREATE OR ALTER PROCEDURE dbo\.{name}\n(.|\n)*?\nEND;\nGO\n", script)


def test_migrate_print_includes_the_procedures_each_in_its_batch() -> None:
    env = {
        **os.environ,
        "SIMPLEQUEUE_DATABASE_URL": "mssql+odbc://sa:secret@127.0.0.1:9/queue?TrustServerCertificate=yes",
    }
    printed = subprocess.run(
        [*simplequeue_command(), "migrate", "--print"], capture_output=True, text=True, timeout=60, env=env
    )
    assert printed.returncode == 0, printed.stderr
    out = printed.stdout
    assert "-- migration 0006_push_procedures\n" + as_script(PUSH_PROCEDURES.sql, "mssql") in out
    heading = f"-- routines ({ROUTINES['mssql']}), applied by every migrate after the migrations\n"
    tail = out[out.index(heading) :]
    assert out.rindex("-- migration ") < out.index(heading), "after every migration"
    assert tail.startswith(heading + as_script(PROCEDURES, "mssql"))
    for name in ("sq_push_items", *PUBLIC):
        start = tail.index(f"CREATE OR ALTER PROCEDURE dbo.{name}\n")
        before = tail[:start].rstrip("\n").splitlines()
        # Alone in its batch: only its comment lines since the last GO.
        since_go = before[len(before) - before[::-1].index("GO") :]
        assert all(line.startswith("--") for line in since_go), name
