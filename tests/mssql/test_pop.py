"""The pop: a locking claim of the TOP rows of two filtered indexes (ready items, and leases that
ran out), merged in priority order, that waits for an ordered group's earlier items; next_visible_at,
which tells a waiting pop when to look again; and both bound through the fake connection."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from simplequeue.store.migrations import load_migrations
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    CLOCK,
    DELIVERY,
    NOW,
    NOW_TEXT,
    FakeConnection,
    Result,
    Results,
    create_index,
    hints,
    index_hint,
    live_statuses,
    migration_statements,
    next_visible_at_min,
    parse,
    placeholders,
    result,
    visible_rows,
)

READY_POP = next(m for m in load_migrations("mssql") if m.name == "ready_pop_index")
# The pop indexes as they are now: fairness (v15) put fair_rank into their order and included columns,
# priority aging (v17) put the items' rank in place of their priority.
AGING = next(m for m in load_migrations("mssql") if m.name == "priority_aging")


def pop_update() -> exp.Update:
    trees = parse(Q["pop"].sql)
    assert [type(tree) for tree in trees] == [exp.Set, exp.Set, *[exp.Declare] * 8, exp.Update]
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


def walks() -> dict[str, exp.Select]:
    """The claim's two locking walks, by the index each names: ready items, and leases that ran out."""
    found: dict[str, exp.Select] = {}
    for select in claim_select().args["where"].find_all(exp.Select):
        table = select.find(exp.From).this
        if select.args.get("limit") is not None and table.alias == "w":
            [index] = re.findall(r"INDEX\((\w+)\)", index_hint(table))
            found[index] = select
    assert sorted(found) == ["sq_items_lapsed", "sq_items_ready"]
    return {"ready": found["sq_items_ready"], "lapsed": found["sq_items_lapsed"]}


def group_probe(walk: exp.Select) -> exp.Select:
    [probe] = [node.this for node in walk.args["where"].find_all(exp.Exists)]
    assert isinstance(probe, exp.Select)
    return probe


def order_of(select: exp.Select) -> list[tuple[str, bool]]:
    return [(o.this.name, bool(o.args.get("desc"))) for o in select.args["order"].expressions]


POP_ORDER = [("rank_priority", True), ("fair_rank", False), ("created_at", False), ("seq", False)]


def test_pop_claims_through_two_walks_each_top_n_rows_with_the_four_locking_hints_on_its_index() -> None:
    for walk in walks().values():
        assert walk.args["limit"].expression.sql("tsql") == "@max_items"
        table = walk.find(exp.From).this
        assert (table.db, table.name) == ("dbo", "sq_items")
        assert hints(table) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    # The CTE keeps the first TOP of the walks' rows, found by key: the rows the walks locked.
    select = claim_select()
    assert select.args["limit"].expression.sql("tsql") == "@max_items"
    table = select.find(exp.From).this
    assert (table.db, table.name) == ("dbo", "sq_items")
    assert hints(table) == ["FORCESEEK", "ROWLOCK"]
    members = select.args["where"].this
    assert isinstance(members, exp.In)
    assert members.this.sql("tsql") == "x.seq"
    assert isinstance(members.args["query"].this, exp.Union), "the two walks, UNION ALL"
    assert members.args["query"].this.args.get("distinct") is False
    assert pop_declares()["max_items"] == "CAST(? AS INTEGER)"


def test_pop_takes_the_highest_priority_then_the_lowest_fair_rank_then_the_oldest_then_first_in() -> None:
    assert order_of(claim_select()) == POP_ORDER
    for walk in walks().values():
        assert order_of(walk) == POP_ORDER
    # The ready index has the same order, so the ready walk stops after TOP rows; the expired
    # leases are sorted from the lapsed index's included columns, without visiting the table.
    ready = create_index("sq_items_ready", AGING).this.args["params"]
    assert [(o.this.name, bool(o.args.get("desc"))) for o in ready.args["columns"]] == [
        ("queue", False),
        *POP_ORDER,
    ]
    lapsed = create_index("sq_items_lapsed", AGING).this.args["params"]
    assert [o.this.name for o in lapsed.args["columns"]] == ["queue", "visible_at"]
    assert {i.name for i in lapsed.args["include"]} >= {
        "priority",
        "rank_priority",
        "fair_rank",
        "created_at",
        "attempts",
        "group_key",
    }


def test_pop_claims_only_due_rows_and_no_expired_lease_on_its_last_attempt() -> None:
    ready, lapsed = walks()["ready"], walks()["lapsed"]
    # Each walk repeats its filtered index's filter as a literal, so the index can serve it.
    for walk, name, status in ((ready, "sq_items_ready", "ready"), (lapsed, "sq_items_lapsed", "leased")):
        where = walk.args["where"].this
        assert where.sql("tsql").startswith(
            f"w.queue = @queue AND w.status = '{status}' AND w.visible_at <= @now"
        )
        for migration in (READY_POP, AGING):
            index = create_index(name, migration).this.args["params"]
            assert index.args["where"].this.sql("tsql") == f"status = '{status}'"
        cutoffs = [node for node in where.find_all(exp.LTE) if node.this.name == "visible_at"]
        assert [(c.expression.name, type(c.expression)) for c in cutoffs] == [("now", exp.Parameter)]
    assert "w.attempts < @max_attempts" in lapsed.args["where"].sql("tsql")
    assert "attempts" not in ready.args["where"].sql("tsql").replace("e.", "")
    assert pop_declares()["max_attempts"] == "(SELECT max_attempts FROM dbo.sq_queues WHERE name = @queue)"


def test_pop_never_hands_out_an_item_past_its_queues_retention() -> None:
    # Both walks stop at the cutoff, read once from the queue's message_retention_seconds before
    # the claim (the earliest DATETIME2 for a queue without one); the sweep deletes what is past it.
    for walk in walks().values():
        assert "w.created_at >= @retained" in walk.args["where"].this.sql("tsql")
    assert pop_declares()["retained"] == (
        "COALESCE((SELECT DATEADD(SECOND, -message_retention_seconds, @now) FROM dbo.sq_queues"
        " WHERE name = @queue), CAST('0001-01-01' AS DATETIME2(7)))"
    )


def test_the_migration_drops_the_pop_index_and_makes_the_live_readers_index_cover_them() -> None:
    statements = migration_statements(READY_POP)
    assert any("DROP INDEX sq_items_pop ON dbo.sq_items" in s for s in statements)
    visible = create_index("sq_items_visible", READY_POP).this.args["params"]
    assert [o.this.name for o in visible.args["columns"]] == ["queue", "visible_at"]
    assert [i.name for i in visible.args["include"]] == ["status", "attempts", "created_at"]
    assert live_statuses(visible.args["where"]) == [["leased", "ready"]]
    assert not [q for q in Q.values() if "sq_items_pop" in q.sql], "no statement names the dropped index"


def test_pops_group_probe_waits_for_locked_rows_instead_of_passing_them() -> None:
    # READPAST here would skip an earlier item of the group that another transaction holds and hand
    # out a later one while it is in flight; READCOMMITTEDLOCK waits and reads the committed status.
    for walk in walks().values():
        probe = group_probe(walk)
        table = probe.find(exp.From).this
        assert (table.db, table.name, table.alias) == ("dbo", "sq_items", "e")
        assert hints(table) == ["INDEX", "READCOMMITTEDLOCK"]
        assert "READPAST" not in probe.sql("tsql").upper()
        assert "sq_items_group" in index_hint(table)
    assert "deliberately carries READCOMMITTEDLOCK but NOT READPAST" in Q["pop"].sql, "the comment says why"


def test_pops_group_probe_looks_for_an_earlier_live_item_of_the_same_group() -> None:
    for walk in walks().values():
        where = walk.args["where"].sql("tsql")
        assert "(w.group_key IS NULL OR NOT EXISTS(" in where, "ungrouped items need no probe"
        probe = group_probe(walk).args["where"]
        assert live_statuses(probe) == [["leased", "ready"]]
        for condition in ("e.queue = w.queue", "e.group_key = w.group_key", "e.seq < w.seq"):
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
        "attributes",
        "fairness_key",
        "fair_rank",
        "rank_priority",
    ]
    assert not update.args["returning"].args.get("into"), "OUTPUT rows go to the client"


def test_a_paused_queue_hands_out_nothing() -> None:
    # (or one with flow limits, unless the pop counted them first: test_limits.py)
    assert pop_declares()["paused"] == (
        "COALESCE((SELECT CASE WHEN paused = 1 OR (limited = 1 AND @limits_checked = 0) THEN 1 ELSE 0 END "
        "FROM dbo.sq_queues WHERE name = @queue), 0)"
    )
    for walk in walks().values():
        assert "@paused = 0" in walk.args["where"].sql("tsql")


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


# --- binding and rows -----------------------------------------------------------------------------


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
    "attributes",
    "fairness_key",
    "fair_rank",
    "rank_priority",
]
ATTRIBUTES = '{"trace":{"type":"String","value":"abc"}}'


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
                (
                    8,
                    str(newer).upper(),
                    "orders",
                    "[1, 2]",
                    later,
                    1,
                    token_text,
                    leased_until,
                    0,
                    None,
                    None,
                    None,
                    0.0,
                    0,
                ),
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
                    ATTRIBUTES,
                    None,
                    0.0,
                    0,
                ),
                (
                    9,
                    str(urgent).upper(),
                    "orders",
                    "0",
                    later,
                    1,
                    token_text,
                    leased_until,
                    5,
                    None,
                    None,
                    None,
                    0.0,
                    5,
                ),
            ],
        ),
    )

    items = await store.pop("orders", 5, 45)

    now_text, queue, lease_seconds, limits_checked, max_items, lease_token = conn.params("pop")
    assert (now_text, queue, lease_seconds, limits_checked, max_items) == (NOW_TEXT, "orders", "45", 0, 5)
    assert UUID(lease_token).version == 4
    batch = conn.inlined("pop")
    assert CLOCK in batch
    assert "DECLARE @queue NVARCHAR(4000) = N'orders';" in batch
    assert "CAST(NULLIF(N'45', N'') AS INT)" in batch
    assert "DECLARE @max_items INT = CAST(5 AS INT);" in batch
    assert "SELECT TOP (@max_items) x.seq," in batch
    assert f"lease_token = CAST(N'{lease_token}' AS UNIQUEIDENTIFIER)," in batch
    assert [item.id for item in items] == [urgent, older, newer]
    first, second = items[:2]
    assert (first.priority, second.priority, second.group) == (5, 0, "g")
    assert second.payload == {"a": None}
    assert (first.attributes_json, second.attributes_json) == (None, ATTRIBUTES)
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
