"""purge_live (SQS's PurgeQueue) on SQL Server: the batch's statements, then its binding. Its
behaviour runs in the conformance suite on the engines that are there."""

from __future__ import annotations

from simplequeue.service import batches
from simplequeue.service.batches import BATCH
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    NOW_TEXT,
    FakeConnection,
    declared,
    hints,
    index_hint,
    placeholders,
    result,
    statements,
    table_named,
)


def test_purge_live_deletes_a_batch_of_live_items_and_keeps_a_lease_dead_already() -> None:
    delete, _, _, count = statements("purge_live")
    assert isinstance(delete, exp.Delete)
    select = delete.find(exp.CTE).this
    table = select.find(exp.From).this
    assert hints(table) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert "sq_items_visible" in index_hint(table)  # its rows are the live items, its columns all this reads
    assert select.args.get("limit") is not None
    assert select.args["where"].this.sql("tsql") == (
        "x.queue = @queue AND x.status IN ('ready', 'leased') "
        "AND NOT (x.status = 'leased' AND x.visible_at <= @now AND x.attempts >= @max_attempts)"
    )
    assert [o.sql("tsql") for o in select.args["order"].expressions] == ["x.seq"]
    assert [col.sql("tsql") for col in delete.args["returning"].expressions][-1] == "deleted.remember_id"
    assert count.sql("tsql") == "SELECT COUNT(*) AS purged FROM @gone"


def test_purge_live_writes_no_history_and_starts_the_windows_as_purge_dead() -> None:
    _, windows, id_windows, _ = statements("purge_live")
    assert "sq_history" not in Q["purge_live"].sql
    assert "max_attempts FROM dbo.sq_queues" in declared("purge_live")
    assert "remember_id BIT NOT NULL" in declared("purge_live")
    assert isinstance(windows, exp.Update)
    assert "k.item_id = d.id" in windows.sql("tsql")
    assert isinstance(id_windows, exp.Update)
    claims = table_named(id_windows, "sq_client_ids")
    assert (claims.alias, hints(claims)) == ("k", ["FORCESEEK"])
    assert id_windows.args["where"].this.sql("tsql") == "d.remember_id = 1"
    _, dead_windows, dead_id_windows, _ = statements("purge_dead")
    assert windows.sql("tsql") == dead_windows.sql("tsql")
    assert id_windows.sql("tsql") == dead_id_windows.sql("tsql")


def test_purge_live_takes_the_clock_the_queue_and_the_batch_size() -> None:
    assert placeholders(Q["purge_live"].sql) == 3
    assert Q["purge_live"].params == ("now", "queue", "limit")


async def test_purge_live_repeats_full_batches(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("purge_live", result(purged=BATCH), result(purged=3))

    assert await batches.purge_live(store, "orders") == BATCH + 3

    assert conn.all_params("purge_live") == [(NOW_TEXT, "orders", BATCH)] * 2
    assert conn.commits == 2


# --- expire_retained (message_retention_seconds, SQS's MessageRetentionPeriod) ---------------------


def test_expire_retained_deletes_old_live_items_of_queues_that_keep_a_period_as_purge_live_does() -> None:
    delete, windows, id_windows, count = statements("expire_retained")
    assert isinstance(delete, exp.Delete)
    assert [col.sql("tsql") for col in delete.args["returning"].expressions] == [
        "deleted.id",
        "deleted.queue",
        "deleted.dedup_key",
        "deleted.remember_id",
    ]
    [pick] = [s for s in delete.find_all(exp.Select)]
    items = table_named(pick, "sq_items")
    assert hints(items) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert "WITH (INDEX(sq_items_visible), READCOMMITTEDLOCK" in Q["expire_retained"].sql
    where = pick.args["where"].this.sql("tsql")
    assert "NOT q.message_retention_seconds IS NULL" in where
    assert "i.created_at < DATEADD(SECOND, -q.message_retention_seconds, @now)" in where
    assert "sq_queue_attributes" not in Q["expire_retained"].sql
    assert "i.attempts >= q.max_attempts" in where  # a lease out on its last attempt is dead: it stays
    assert "sq_history" not in Q["expire_retained"].sql
    _, live_windows, live_id_windows, live_count = statements("purge_live")
    assert windows.sql("tsql") == live_windows.sql("tsql")
    assert id_windows.sql("tsql") == live_id_windows.sql("tsql")
    assert count.sql("tsql") == live_count.sql("tsql")
    assert Q["expire_retained"].params == ("now", "limit")


async def test_expire_retained_binds_the_clock_and_the_batch(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("expire_retained", result(purged=4))

    assert await store.expire_retained(50) == 4

    assert conn.all_params("expire_retained") == [(NOW_TEXT, 50)]
    assert conn.commits == 1
