"""The sweep: reap_expired kills expired last attempts past locked rows, purge_history bounds
every walk by its limit; statements, then binding."""

from __future__ import annotations

import pytest
from simplequeue.domain import LEASE_EXPIRED_ERROR
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    NOW_TEXT,
    FakeConnection,
    Result,
    code,
    hints,
    history_values,
    index_hint,
    placeholders,
    result,
    statements,
    table_named,
)


def test_reap_expired_kills_expired_last_attempts_skipping_locked_rows_and_writes_history() -> None:
    update, history, _dead, _delete, _windows, _ids, _insert, count = statements("reap_expired")
    assert isinstance(update, exp.Update)
    assert placeholders(Q["reap_expired"].sql) == 4
    # A pop's reap names its queue ('' for the sweep's, of every queue).
    assert "DECLARE @queue NVARCHAR(4000) = NULLIF(?, N'');" in Q["reap_expired"].sql
    select = update.find(exp.CTE).this
    table = select.find(exp.From).this
    assert hints(table) == ["INDEX", "READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert "sq_items_leased" in index_hint(table)
    assert select.args.get("limit") is not None
    assert select.args["where"].this.sql("tsql") == (
        "x.status = 'leased' AND x.visible_at <= @now AND (@queue IS NULL OR x.queue = @queue) "
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
    # A queue whose retention is 0 keeps no history.
    assert history.expression.args["where"].this.sql("tsql") == "q.retention_seconds > 0"
    assert count.sql("tsql") == "SELECT queue, COUNT(*) AS killed FROM @killed GROUP BY queue"


@pytest.mark.parametrize("name", ["fail", "reap_expired"])
def test_an_item_that_dies_keeps_its_id_until_it_is_purged(name: str) -> None:
    # Its claim's window never starts here: the one write to it moves it with a moved item.
    [write] = [s for s in statements(name) if "sq_client_ids" in s.sql("tsql")]
    assert isinstance(write, exp.Update)
    assert [eq.sql("tsql") for eq in write.expressions] == ["queue = m.target"]


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


# --- binding --------------------------------------------------------------------------------------


async def test_reap_expired_binds_the_sweeps_error_and_says_how_many(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("reap_expired", Result(["queue", "killed"], [("orders", 2), ("mail", 1)]))

    assert await store.reap_expired(100) == 3

    assert conn.params("reap_expired") == (NOW_TEXT, LEASE_EXPIRED_ERROR, "", 100)
    assert conn.commits == 1
    conn.reply("reap_expired", Result(["queue", "killed"], [("orders", 1)]))
    assert await store.reap_expired(100, "orders") == 1  # a pop's reap of its own queue
    assert conn.executed[-1].params == (NOW_TEXT, LEASE_EXPIRED_ERROR, "orders", 100)


@pytest.mark.parametrize(("history", "keys", "ids_", "largest"), [(2, 5, 1, 5), (2, 0, 5, 5), (5, 1, 0, 5)])
async def test_purge_history_says_the_largest_of_its_three_counts(
    fake: tuple[MssqlStore, FakeConnection], history: int, keys: int, ids_: int, largest: int
) -> None:
    # The sweep goes on while any of the three filled its batch.
    store, conn = fake
    conn.reply("purge_history", result(history=history, keys=keys, ids=ids_))

    assert await store.purge_history(5) == largest

    assert conn.params("purge_history") == (NOW_TEXT, 5)
