"""Finding items (the dashboard's search): a group's live items in group order from a seq cursor,
and the item that holds a dedup key; statements, then binding and rows."""

from __future__ import annotations

from datetime import datetime
from uuid import uuid4

import pytest
from simplequeue.domain import InvalidCursor, ItemNotFound, ItemStatus
from simplequeue.store.cursors import encode_cursor
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    NOW_TEXT,
    FakeConnection,
    Result,
    dead_rows,
    index_hint,
    item_row,
    placeholders,
    statements,
    table_named,
)


def test_group_items_walks_the_group_index_in_seq_order_from_the_cursor() -> None:
    select = statements("group_items")[-1]
    assert isinstance(select, exp.Select)
    assert placeholders(Q["group_items"].sql) == 5
    assert select.args.get("limit") is not None
    assert "sq_items_group" in index_hint(table_named(select, "sq_items"))
    assert [(o.this.sql("tsql"), bool(o.args.get("desc"))) for o in select.args["order"].expressions] == [
        ("i.seq", False),
    ]
    # The filtered index's own predicate, spelt out so that the optimizer may use it with variables.
    assert select.args["where"].this.sql("tsql") == (
        "i.queue = @queue AND i.group_key = @group AND NOT i.group_key IS NULL "
        "AND i.status IN ('ready', 'leased') AND i.seq > @after_seq"
    )


def test_dedup_item_seeks_the_key_then_the_item() -> None:
    select = statements("dedup_item")[-1]
    assert isinstance(select, exp.Select)
    assert placeholders(Q["dedup_item"].sql) == 3
    assert table_named(select, "sq_dedup") is not None
    assert select.args["where"].this.sql("tsql") == "d.queue = @queue AND d.dedup_key = @dedup_key"
    assert "d.item_id = i.id AND d.queue = i.queue" in select.sql("tsql")


async def test_group_items_binds_the_group_and_the_cursors_seq(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    a, b = uuid4(), uuid4()
    at = datetime(2026, 3, 1, 11, 0)
    conn.reply("group_items", dead_rows((4, a, at), (9, b, at)), dead_rows())

    page = await store.group_items("orders", "tenant/7", 2, None)
    assert [v.id for v in page.items] == [a, b]
    assert page.next_cursor == encode_cursor(datetime(2026, 2, 1, 8, 0), 9)  # the row's created_at
    rest = await store.group_items("orders", "tenant/7", 2, page.next_cursor)
    assert (rest.items, rest.next_cursor) == ([], None)

    first, second = conn.all_params("group_items")
    assert first == (NOW_TEXT, "orders", "tenant/7", "", 2)
    assert second == (NOW_TEXT, "orders", "tenant/7", "9", 2)
    assert "COALESCE(CAST(NULLIF(N'9', N'') AS BIGINT), 0)" in conn.executed[1].inlined
    with pytest.raises(InvalidCursor):
        await store.group_items("orders", "g", 2, "not-a-cursor")
    assert len(conn.executed) == 2, "a cursor that is not ours is refused before asking"


async def test_dedup_item_binds_the_key_and_answers_the_item_or_not_found(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("dedup_item", item_row(item_id, status="dead", dedup_key="order-7"))
    conn.reply("dedup_item", Result(item_row(uuid4(), status="ready").columns, []))

    found = await store.dedup_item("orders", "order-7")
    assert (found.id, found.status, found.dedup_key) == (item_id, ItemStatus.DEAD, "order-7")
    with pytest.raises(ItemNotFound):
        await store.dedup_item("orders", "order-8")
    assert conn.all_params("dedup_item") == [(NOW_TEXT, "orders", "order-7"), (NOW_TEXT, "orders", "order-8")]
