"""Dead letters and history: pages newest first from a cursor, redrive oldest first at a rate to
the back of their groups, purge_dead in batches; statements, then binding and rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from simplequeue.domain import DeadFilter, HistoryFilter, InvalidCursor, ItemStatus, Outcome
from simplequeue.service import batches
from simplequeue.service.batches import BATCH
from simplequeue.store.cursors import encode_cursor
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    HISTORY_COLUMNS,
    NOW_TEXT,
    FakeConnection,
    dead_rows,
    declared,
    hints,
    history_rows,
    index_hint,
    picked,
    placeholders,
    result,
    statements,
    table_named,
)


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
    assert values["attributes"] == "g.attributes", "message attributes are kept"
    assert [col.sql("tsql") for col in delete.args["returning"].expressions][-5:] == [
        "deleted.remember_id",
        "deleted.attributes",
        "deleted.fairness_key",
        "deleted.fair_rank",
        "deleted.rank_priority",
    ]
    # A revived item keeps its tenant and its place among the queue's tenants.
    assert (values["fairness_key"], values["fair_rank"]) == ("g.fairness_key", "g.fair_rank")
    assert values["rank_priority"] == "g.rank_priority", "and its rank: the queue is the same"
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


# --- binding and rows -----------------------------------------------------------------------------


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


async def test_redrive_revives_in_batches_oldest_dead_first_spread_out_at_the_rate(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    first_batch = list(range(1, BATCH + 1))
    conn.reply("pick_dead", picked(*first_batch), picked(5000, 5001))
    conn.reply("revive", result(revived=BATCH), result(revived=2))

    assert await batches.redrive(store, "orders", None, 4.0) == BATCH + 2

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

    assert await batches.redrive(store, "orders", wanted, None) == 0

    assert conn.names == ["pick_dead"], "nothing picked, nothing to revive"
    queue, ids_json, limit = conn.params("pick_dead")
    assert (queue, json.loads(ids_json), limit) == ("orders", [str(i) for i in wanted], BATCH)


async def test_purge_dead_repeats_full_batches(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("purge_dead", result(purged=BATCH), result(purged=BATCH), result(purged=7))

    assert await batches.purge_dead(store, "orders") == 2 * BATCH + 7

    assert conn.all_params("purge_dead") == [(NOW_TEXT, "orders", BATCH)] * 3
    assert conn.commits == 3


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


@pytest.mark.parametrize(("name", "killed"), [("fail", "@failed"), ("reap_expired", "@killed")])
def test_an_item_that_dies_in_a_queue_with_a_target_moves_there_in_the_same_batch(
    name: str, killed: str
) -> None:
    trees = statements(name)
    [dead] = [s for s in trees if isinstance(s, exp.Insert) and s.this.this.name == "dead"]
    assert killed in dead.sql("tsql")
    delete, windows, ids, insert = trees[trees.index(dead) + 1 : trees.index(dead) + 5]
    # The dead items this batch killed whose queue names an existing other queue as its target.
    assert isinstance(delete, exp.Delete)
    sql = delete.sql("tsql")
    assert "JOIN @dead AS d ON d.id = i.id" in sql
    assert "JOIN dbo.sq_queues AS s ON s.name = i.queue" in sql
    assert "JOIN dbo.sq_queues AS t ON t.name = s.dead_letter_queue AND t.name <> i.queue" in sql
    assert "sq_queue_attributes" not in sql  # a typed setting, not an SQS attribute's string
    assert delete.args["where"].this.sql("tsql") == "i.status = 'dead'"
    assert delete.args["returning"].args["into"].name == "moving"
    # The source's dedup claim starts its window; the remembered id's claim follows the item.
    assert isinstance(windows, exp.Update)
    assert "FROM dbo.sq_dedup AS k" in windows.sql("tsql")
    assert [eq.sql("tsql") for eq in windows.expressions] == [
        "expires_at = DATEADD(SECOND, q.dedup_window_seconds, @now)"
    ]
    assert "k.queue = m.queue AND k.dedup_key = m.dedup_key AND k.item_id = m.id" in windows.sql("tsql")
    assert isinstance(ids, exp.Update)
    assert "FROM dbo.sq_client_ids AS c" in ids.sql("tsql")
    assert ids.args["where"].this.sql("tsql") == "m.remember_id = 1"
    # Inserted again in the target: ready now, attempts reset, a new seq, the rest kept.
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_items"
    values = dict(
        zip(
            [col.name for col in insert.this.expressions],
            [value.sql("tsql") for value in insert.expression.expressions],
            strict=True,
        )
    )
    assert "seq" not in values
    assert (values["queue"], values["status"], values["attempts"], values["visible_at"]) == (
        "m.target",
        "'ready'",
        "0",
        "@now",
    )
    assert values["first_popped_at"] == "NULL"
    for kept in ("id", "payload", "created_at", "errors", "priority", "group_key", "dedup_key", "attributes"):
        assert values[kept] == f"m.{kept}"
    assert [o.sql("tsql") for o in insert.expression.args["order"].expressions] == ["m.seq"]


@pytest.mark.parametrize("batch", ["fail", "reap_expired"])
def test_an_item_moved_to_its_dead_letter_target_ranks_by_the_targets_aging(batch: str) -> None:
    text = " ".join(Q[batch].sql.split())
    # The target's setting travels with the moving rows, and the insert ranks as the push does.
    assert "deleted.fairness_key, t.priority_aging_seconds INTO @moving" in text
    assert "remember_id, attributes, fairness_key, rank_priority)" in text
    assert (
        "CASE WHEN m.aging IS NULL THEN m.priority "
        "ELSE m.priority - (e.s - ((e.s % m.aging) + m.aging) % m.aging) / m.aging END"
    ) in text
    assert "DATEDIFF_BIG(SECOND, CAST('1970-01-01' AS DATETIME2(7)), m.created_at) AS s" in text
