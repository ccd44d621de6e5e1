"""Queue administration: put_queue, the stats rows, pause, delete_queue; statements, then binding
and rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from simplequeue.domain import Backoff, InvalidCursor, QueueError, QueueInUse, QueueNotFound, QueueSettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.store import rows
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    NOW,
    NOW_TEXT,
    STATS_COLUMNS,
    FakeConnection,
    Result,
    declared,
    hints,
    live_statuses,
    placeholders,
    result,
    statements,
    stats_row,
    table_named,
)


def test_put_queue_updates_under_a_key_lock_or_inserts_and_says_which() -> None:
    update, rerank, created, insert = statements("put_queue")
    assert placeholders(Q["put_queue"].sql) == 21
    # A key's own limits keep the queue limited (per-key limits), whatever :limited says.
    assert "SET @limited = CASE WHEN @limited = 1 OR EXISTS (" in Q["put_queue"].sql
    # The optional settings come as text, '' for none (params.optional), as NULL.
    assert "DECLARE @dead_letter_queue NVARCHAR(128) = NULLIF(?, N'');" in Q["put_queue"].sql
    assert "DECLARE @message_retention_seconds INT = CAST(NULLIF(?, N'') AS INT);" in Q["put_queue"].sql
    assert isinstance(update, exp.Update)
    assert hints(update.this) == ["HOLDLOCK", "UPDLOCK"]
    # Every setting, and the time they changed (SQS's LastModifiedTimestamp).
    written = {eq.this.name for eq in update.expressions}
    assert written == {*rows.settings_params(QueueSettings()), "modified_at"}
    assert (
        created.sql("tsql") == "SELECT CASE WHEN EXISTS(SELECT 1 FROM @updated) THEN 0 ELSE 1 END AS created"
    )
    assert isinstance(insert, exp.IfBlock)
    assert insert.this.sql("tsql") == "NOT EXISTS(SELECT 1 FROM @updated)"
    # A change of priority_aging_seconds (the UPDATE's old value against the new) re-ranks the
    # queue's items, as the push ranks them.
    assert "OUTPUT inserted.name, deleted.priority_aging_seconds INTO @updated" in Q["put_queue"].sql
    assert isinstance(rerank, exp.Update)
    assert rerank.this.sql("tsql") == "i"
    where = rerank.args["where"].sql("tsql")
    assert "i.queue = @queue" in where
    assert "u.aging <> @priority_aging_seconds" in where
    assert "u.aging IS NULL AND NOT @priority_aging_seconds IS NULL" in where
    assert "NOT u.aging IS NULL AND @priority_aging_seconds IS NULL" in where
    assert [eq.this.name for eq in rerank.expressions] == ["rank_priority"]
    assert "WHEN @priority_aging_seconds IS NULL THEN i.priority" in rerank.expressions[0].sql("tsql")


def test_queue_stats_rows_carry_every_column_queue_stats_reads() -> None:
    [select] = statements("queue_stats")
    assert isinstance(select, exp.Select)
    assert [col.alias_or_name for col in select.expressions] == STATS_COLUMNS
    # An expired lease on its last attempt counts as dead, not ready.
    assert "dead.dead + COALESCE(live.expired_dead, 0) AS dead" in select.sql("tsql")
    applied = {lateral.alias: lateral.this.this for lateral in select.find_all(exp.Lateral)}
    assert live_statuses(applied["live"].args["where"]) == [["leased", "ready"]]
    assert "d.status = 'dead'" in applied["dead"].sql("tsql")
    assert applied["hist"].find(exp.From).this.name == "sq_history"


def test_delete_queue_locks_the_queue_row_before_it_counts_leases_and_deletes() -> None:
    trees = statements("delete_queue")
    [lock] = [t for t in trees if isinstance(t, exp.Select) and "UPDLOCK" in t.sql("tsql")]
    table = lock.find(exp.Table)
    assert (table.name, hints(table)) == ("sq_queues", ["HOLDLOCK", "UPDLOCK"])
    text = Q["delete_queue"].sql
    assert text.index("UPDLOCK") < text.index("status = 'leased'") < text.index("FROM dbo.sq_items AS i")
    for table_name in ("sq_history", "sq_dedup", "sq_fair_keys", "sq_queues"):
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
    assert list(deletes) == [
        "sq_items",
        "sq_client_ids",
        "sq_history",
        "sq_dedup",
        "sq_queue_attributes",
        "sq_queue_tags",
        "sq_fair_keys",
        "sq_queues",
    ]
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


# --- binding and rows -----------------------------------------------------------------------------


async def test_list_queues_pages_by_name_from_the_cursor(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    oldest = NOW.replace(tzinfo=None) - timedelta(seconds=90)
    conn.reply(
        "queue_page",
        Result(STATS_COLUMNS, [stats_row("a", oldest), stats_row("b", None)]),
        Result(STATS_COLUMNS, [stats_row("c", None)]),
    )

    page = await store.list_queues(2, None)
    rest = await store.list_queues(2, page.next_cursor, "c")

    # '' for no cursor and no prefix: every name is > '' and starts with ''.
    assert conn.all_params("queue_page") == [(NOW_TEXT, "", "", 2), (NOW_TEXT, "b", "c", 2)]
    stats = page.items
    assert [
        (s.name, s.ready, s.leased, s.delayed, s.retrying, s.dead, s.oldest_ready_age_seconds) for s in stats
    ] == [("a", 2, 1, 3, 0, 4, 90.0), ("b", 2, 1, 3, 0, 4, None)]
    assert (stats[0].completed_in_history, stats[0].dead_in_history) == (7, 8)
    assert stats[0].settings == QueueSettings()
    assert ([q.name for q in rest.items], rest.next_cursor) == (["c"], None)
    with pytest.raises(InvalidCursor):
        await store.list_queues(2, "not-a-cursor")


def test_queue_page_seeks_the_name_key_from_the_cursor_or_prefix_and_stops_after_top() -> None:
    [page] = statements("queue_page")
    [one] = statements("queue_stats")
    assert isinstance(page, exp.Select)
    assert isinstance(one, exp.Select)
    assert placeholders(Q["queue_page"].sql) == 4
    assert page.args.get("limit") is not None
    # The same columns and applies as one queue's stats: one fragment, written once.
    assert [c.alias_or_name for c in page.expressions] == [c.alias_or_name for c in one.expressions]
    assert [(o.this.sql("tsql"), bool(o.args.get("desc"))) for o in page.args["order"].expressions] == [
        ("q.name", False),
    ]
    assert page.args["where"].this.sql("tsql") == (
        "q.name > @after AND q.name >= @prefix AND LEFT(q.name, LEN(@prefix)) = @prefix"
    )
    assert one.args["where"].this.sql("tsql") == "q.name = @queue"


async def test_count_queues_counts_the_queue_rows(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    [count] = statements("count_queues")
    assert count.sql("tsql") == "SELECT COUNT_BIG(*) AS queues FROM dbo.sq_queues"
    conn.reply("count_queues", result(queues=3))
    assert await store.count_queues() == 3


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
        limits=FlowLimits(max_leased=4, rate_per_second=2.5),
    )

    assert await store.put_queue("orders", settings) is created

    bound = (
        NOW_TEXT,
        "orders",
        3,
        90,
        "0.5",
        "3.0",
        "60.0",
        "0.0",
        0,
        10,
        "finish",
        1,
        "",
        "",
        "4",
        "2.5",
        "",
        "",
        "",
        "",
        1,
    )
    assert conn.params("put_queue") == bound
    batch = conn.inlined("put_queue")
    assert "DECLARE @backoff_factor FLOAT = CAST(N'3.0' AS FLOAT);" in batch
    assert "DECLARE @history_payload BIT = 1;" in batch
    assert "DECLARE @rate_per_second FLOAT = CAST(NULLIF(N'2.5', N'') AS FLOAT);" in batch
    assert "DECLARE @limited BIT = 1;" in batch
    assert conn.commits == 1


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
