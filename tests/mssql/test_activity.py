"""Activity per bucket of time: the statement's shape (each part a seek of an index range from the
window's start, per queue), then binding and rows. SQL Server itself does not run here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from simplequeue.domain.activity import ActivityWindow
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    FakeConnection,
    Result,
    declared,
    hints,
    index_hint,
    live_statuses,
    openjson_columns,
    placeholders,
    statements,
)

COLUMNS = ["bucket", "pushed", "completed", "failed", "dead"]


def parts() -> list[exp.Select]:
    """The events CTE's five SELECTs, in order."""
    [_, select] = statements("activity")
    [cte] = select.find_all(exp.CTE)
    return flatten(cte.this)


def flatten(node: exp.Expression) -> list[exp.Select]:
    if isinstance(node, exp.Union):
        return [*flatten(node.this), *flatten(node.expression)]
    assert isinstance(node, exp.Select)
    return [node]


def test_the_window_and_the_queues_are_declared_once_and_bound_as_text() -> None:
    assert placeholders(Q["activity"].sql) == 5  # queue, since, until, bucket, limit
    code = declared("activity")
    for declaration in (
        "@queue NVARCHAR(4000) = NULLIF(?, N'')",
        "@since DATETIME2(7) = CAST(? AS DATETIME2(7))",
        "@until DATETIME2(7) = CAST(? AS DATETIME2(7))",
        "@bucket INTEGER = CAST(? AS INTEGER)",
        "@queues TABLE (name NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY)",
    ):
        assert declaration in code
    [insert, _] = statements("activity")
    assert isinstance(insert, exp.Insert)
    assert insert.expression.args["where"].this.sql("tsql") == "@queue IS NULL OR name = @queue"


def test_each_part_seeks_a_range_of_its_index_from_the_window_start() -> None:
    found = parts()
    assert len(found) == 5
    expected = [
        ("sq_history", "INDEX(sq_history_queue)", "h.finished_at >= @since"),
        ("sq_history", "INDEX(sq_history_queue)", "h.finished_at >= @since"),
        ("sq_items", "INDEX(sq_items_visible)", "i.visible_at >= @since"),
        ("sq_items", "INDEX(sq_items_visible)", "i.visible_at >= @since"),
        ("sq_items", "INDEX(sq_items_dead)", "i.died_at >= @since"),
    ]
    for select, (table_name, index, start) in zip(found, expected, strict=True):
        [table] = [t for t in select.find_all(exp.Table) if t.name == table_name]
        assert index_hint(table) == f"WITH ({index}, FORCESEEK)"
        assert "FORCESEEK" in hints(table)
        join = select.args["joins"][0]  # (then CROSS APPLY OPENJSON for failures)
        assert join.args["on"].sql("tsql") in ("h.queue = q.name", "i.queue = q.name")
        assert start in select.args["where"].sql("tsql")
    # The filtered indexes' own predicates, so that the seeks may use them.
    assert live_statuses(found[2].args["where"]) == [["leased", "ready"]]
    assert live_statuses(found[3].args["where"]) == [["leased", "ready"]]
    assert "i.status = 'dead'" in found[4].args["where"].sql("tsql")


def test_failures_are_read_from_each_recorded_error_time() -> None:
    found = parts()
    for select in found[3:]:
        assert openjson_columns(select) == {"moment": "DATETIME2(7)"}
    assert "i.attempts > 0" in found[3].args["where"].sql("tsql")


def test_buckets_are_whole_seconds_from_the_window_start_divided_by_the_bucket() -> None:
    [_, select] = statements("activity")
    assert [e.alias_or_name for e in select.expressions] == COLUMNS
    bucket = select.expressions[0].sql("tsql")
    assert "DATEDIFF_BIG(SECOND, CAST(@since AS DATETIME2), CAST(moment AS DATETIME2)) / @bucket" in bucket
    assert select.args["where"].this.sql("tsql") == "moment >= @since AND moment < @until"
    assert select.args.get("limit") is not None  # TOP (the window's bucket count)
    assert "OPTION(RECOMPILE)" in select.sql("tsql")


async def test_binds_the_window_and_fills_the_buckets_without_rows(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    since = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
    conn.reply("activity", Result(COLUMNS, [(0, 3, 1, 0, 0), (2, 0, 2, 1, 1)]))

    found = await store.activity("orders", ActivityWindow(since, 60, 3))

    assert conn.params("activity") == (
        "orders",
        "2026-03-01T11:00:00.000000",
        "2026-03-01T11:03:00.000000",
        "60",
        3,
    )
    assert [(b.start, b.pushed, b.completed, b.failed, b.dead) for b in found] == [
        (since, 3, 1, 0, 0),
        (since + timedelta(minutes=1), 0, 0, 0, 0),
        (since + timedelta(minutes=2), 0, 2, 1, 1),
    ]


async def test_every_queue_binds_empty_text(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("activity", Result(COLUMNS, []))

    found = await store.activity(None, ActivityWindow(datetime(2026, 3, 1, tzinfo=UTC), 900, 4))

    assert conn.params("activity")[0] == ""
    assert conn.params("activity")[3] == "900"
    assert [b.pushed for b in found] == [0, 0, 0, 0]
