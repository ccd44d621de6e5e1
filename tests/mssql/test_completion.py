"""complete_batch: a seek DELETE where the token matches, the history record and the dedup
windows in the same batch, then what is still there; and complete / complete_batch bound
through the fake connection, each refusal said from the item still there."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

import pytest
from simplequeue.domain import CompleteOutcome, Completion, ItemDead, ItemNotFound, LeaseMismatch, QueueError
from simplequeue.store.mssql.params import index_order
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    CLOCK,
    HISTORY_COLUMNS,
    NOW_TEXT,
    FakeConnection,
    Results,
    completed_ids,
    declared,
    hints,
    history_values,
    openjson_columns,
    placeholders,
    statements,
    still_there,
    table_named,
)


def complete_batch_statements() -> tuple[
    exp.Delete, exp.Insert, exp.Update, exp.Update, exp.Select, exp.Select
]:
    trees = statements("complete_batch")
    kinds = [type(tree) for tree in trees]
    assert kinds == [exp.Delete, exp.Insert, exp.Update, exp.Update, exp.Select, exp.Select]
    delete, history, windows, id_windows, done, still_there = trees
    assert isinstance(delete, exp.Delete)
    assert isinstance(history, exp.Insert)
    assert isinstance(windows, exp.Update)
    assert isinstance(id_windows, exp.Update)
    assert isinstance(done, exp.Select)
    assert isinstance(still_there, exp.Select)
    return delete, history, windows, id_windows, done, still_there


# An expired lease on its last attempt, by reap_expired's cutoff: dead already for every reader.
EXPIRED_LAST_ATTEMPT = (
    "i.status = 'leased' AND i.visible_at <= @now "
    "AND i.attempts >= (SELECT q.max_attempts FROM dbo.sq_queues AS q WHERE q.name = i.queue)"
)


def test_complete_batch_deletes_by_seek_where_the_token_matches_or_none_was_given_and_not_dead() -> None:
    delete, *_ = complete_batch_statements()
    assert placeholders(Q["complete_batch"].sql) == 2, "the clock and the items"
    assert "DECLARE @items NVARCHAR(MAX) = ?" in declared("complete_batch")
    target = delete.this
    assert (target.db, target.name, target.alias) == ("dbo", "sq_items", "i")
    assert [t.name for t in delete.args["tables"]] == ["i"]
    assert hints(target) == ["FORCESEEK"]
    join, queue = target.args["joins"]
    assert join.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert openjson_columns(join) == {"id": "UNIQUEIDENTIFIER", "token": "UNIQUEIDENTIFIER"}
    assert join.args["on"].sql("tsql") == "i.id = j.id"
    # Each item's queue row, read once by its key: max_attempts here, and what the history record
    # and the dedup window need, carried in @done (no later statement reads sq_queues again).
    assert (queue.this.db, queue.this.name, queue.this.alias) == ("dbo", "sq_queues", "q")
    assert hints(queue.this) == ["FORCESEEK"]
    assert queue.args["on"].sql("tsql") == "q.name = i.queue"
    assert delete.args["where"].this.sql("tsql") == (
        "i.status <> 'dead' AND (j.token IS NULL OR i.lease_token = j.token) "
        "AND NOT (i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts)"
    )
    output = delete.args["returning"]
    assert output.args["into"].name == "done"
    # The payload is copied only for a queue whose history keeps it, and a queue with retention 0
    # keeps no history at all.
    assert [col.sql("tsql") for col in output.expressions][-3:] == [
        "CASE WHEN q.history_payload = 1 THEN deleted.payload END",
        "q.dedup_window_seconds",
        "IIF(q.retention_seconds > 0, 1, 0)",
    ]
    assert (
        "payload NVARCHAR(MAX) NULL, dedup_window_seconds INTEGER NOT NULL, keeps_history BIT NOT NULL"
        in declared("complete_batch")
    )


def test_complete_batch_writes_history_and_starts_dedup_windows_in_the_same_batch() -> None:
    _, history, windows, _, done, _ = complete_batch_statements()
    values = history_values(history)
    assert list(values) == HISTORY_COLUMNS
    assert values["outcome"] == "'completed'"
    assert values["finished_at"] == "@now"
    assert values["payload"] == "d.payload"  # NULL in @done unless the queue keeps payloads
    # The last failure's error: the errors array's last element, read as NVARCHAR(MAX).
    assert "OPENJSON(d.errors) AS a" in values["last_error"]
    assert "error NVARCHAR(MAX) '$.error'" in values["last_error"]
    assert values["last_error"].endswith("ORDER BY CAST(a.[key] AS INTEGER) DESC)")
    assert history.expression.find(exp.From).this.sql("tsql") == "@done AS d"
    assert history.expression.args.get("joins") is None
    assert history.expression.args["where"].this.sql("tsql") == "d.keeps_history = 1"
    # A finished item's key keeps matching for the queue's window: its row in sq_dedup, if it holds
    # it. Items without a key are filtered out before any seek.
    assert windows.this.name == "k"
    assert hints(table_named(windows, "sq_dedup")) == ["FORCESEEK"]
    assert [eq.sql("tsql") for eq in windows.expressions] == [
        "expires_at = DATEADD(SECOND, d.dedup_window_seconds, @now)"
    ]
    assert "k.item_id = d.id" in windows.sql("tsql")
    # A window already running (one that runs from the send) is kept.
    assert windows.args["where"].this.sql("tsql") == "NOT d.dedup_key IS NULL AND k.expires_at IS NULL"
    assert "sq_queues" not in history.sql("tsql") + windows.sql("tsql")
    assert done.sql("tsql") == "SELECT id, queue FROM @done"


def test_complete_batch_starts_the_windows_of_the_ids_its_items_claimed_only() -> None:
    delete, _, _, id_windows, _, _ = complete_batch_statements()
    # The DELETE carries each item's flag into @done, so only the items that claimed their id seek
    # sq_client_ids, each after the item is gone: in the order a push locks an item and its claim.
    output = [col.sql("tsql") for col in delete.args["returning"].expressions]
    assert "deleted.remember_id" in output
    assert (
        "dedup_key NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NULL, remember_id BIT NOT NULL"
        in declared("complete_batch")
    ), "@done's columns in the OUTPUT's order"
    assert output.index("deleted.remember_id") == output.index("deleted.dedup_key") + 1
    assert id_windows.this.name == "k"
    claims = table_named(id_windows, "sq_client_ids")
    assert (claims.db, claims.alias, hints(claims)) == ("dbo", "k", ["FORCESEEK"])
    assert [join.sql("tsql") for join in claims.args["joins"]] == ["JOIN @done AS d ON k.id = d.id"]
    assert id_windows.args["where"].this.sql("tsql") == "d.remember_id = 1"
    assert [eq.sql("tsql") for eq in id_windows.expressions] == [
        "expires_at = DATEADD(SECOND, d.dedup_window_seconds, @now)"
    ]
    text = Q["complete_batch"].sql
    assert text.index("DELETE i") < text.index("FROM dbo.sq_client_ids")


def test_complete_batch_then_reads_the_requested_items_still_there_with_their_status_and_lease() -> None:
    *_, select = complete_batch_statements()
    table = select.find(exp.From).this
    assert (table.db, table.name) == ("dbo", "sq_items")
    assert hints(table) == ["FORCESEEK"]
    [join] = select.args["joins"]
    assert join.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert openjson_columns(join) == {"id": "UNIQUEIDENTIFIER"}
    assert join.args["on"].sql("tsql") == "i.id = j.id"
    assert [col.sql("tsql") for col in select.expressions] == [
        "i.id",
        f"CASE WHEN {EXPIRED_LAST_ATTEMPT} THEN 'dead' ELSE i.status END AS status",
        "i.lease_token",
    ]
    assert select.args.get("where") is None


# --- binding and rows -----------------------------------------------------------------------------


def completed(conn: FakeConnection) -> list[dict[str, Any]]:
    [(now_text, items_json)] = conn.all_params("complete_batch")
    assert now_text == NOW_TEXT
    assert isinstance(items_json, str)
    items = json.loads(items_json)
    assert isinstance(items, list)
    return items


async def test_complete_is_the_batch_completion_of_one_item(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    conn.reply("complete_batch", Results([completed_ids(item_id), still_there()]))

    await store.complete(item_id, token)

    assert conn.names == ["complete_batch"]
    assert completed(conn) == [{"id": str(item_id), "token": str(token)}]
    assert conn.commits == 1


async def test_complete_without_a_token_sends_a_null_token(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("complete_batch", Results([completed_ids(item_id), still_there()]))

    await store.complete(item_id, None)

    assert completed(conn) == [{"id": str(item_id), "token": None}]


@pytest.mark.parametrize(
    ("status", "error"), [("leased", LeaseMismatch), ("dead", ItemDead), ("ready", LeaseMismatch)]
)
async def test_a_refused_completion_says_why_from_the_item_still_there_and_rolls_back(
    fake: tuple[MssqlStore, FakeConnection], status: str, error: type[QueueError]
) -> None:
    store, conn = fake
    item_id = uuid4()
    holder = uuid4() if status == "leased" else None
    conn.reply("complete_batch", Results([completed_ids(), still_there((item_id, status, holder))]))

    with pytest.raises(error):
        await store.complete(item_id, uuid4())

    assert conn.names == ["complete_batch"], "one round trip, refusal included"
    assert (conn.commits, conn.rollbacks) == (0, 1)


async def test_complete_of_an_unknown_item_is_not_found(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("complete_batch", Results([completed_ids(), still_there()]))
    with pytest.raises(ItemNotFound):
        await store.complete(uuid4(), None)


async def test_complete_batch_maps_both_result_sets_to_outcomes_in_request_order(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    done, untokened, mismatched, missing, dead = (uuid4() for _ in range(5))
    token = uuid4()
    requests = [
        Completion(mismatched, uuid4()),
        Completion(done, token),
        Completion(missing, uuid4()),
        Completion(untokened),
        Completion(dead, uuid4()),
    ]
    conn.reply(
        "complete_batch",
        Results(
            [
                completed_ids(done, untokened),
                still_there((mismatched, "leased", uuid4()), (dead, "dead", None)),
            ]
        ),
    )

    outcomes = await store.complete_batch(requests)

    assert outcomes == [
        CompleteOutcome.LEASE_MISMATCH,
        CompleteOutcome.COMPLETED,
        CompleteOutcome.NOT_FOUND,
        CompleteOutcome.COMPLETED,
        CompleteOutcome.DEAD,
    ]
    assert conn.names == ["complete_batch"]
    assert completed(conn) == [  # sent in the id index's order, for the locks
        {"id": str(c.id), "token": str(c.lease_token) if c.lease_token else None}
        for c in sorted(requests, key=lambda c: index_order(c.id))
    ]
    batch = conn.inlined("complete_batch")
    assert 'DECLARE @items NVARCHAR(MAX) = N\'[{"id":' in batch
    assert CLOCK in batch
    assert (conn.commits, conn.rollbacks, conn.cursors_closed) == (1, 0, 1)


async def test_complete_batch_that_deletes_nothing_still_reads_the_second_result(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    mismatched, missing = uuid4(), uuid4()
    conn.reply("complete_batch", Results([completed_ids(), still_there((mismatched, "ready", None))]))

    outcomes = await store.complete_batch([Completion(missing), Completion(mismatched, uuid4())])

    assert outcomes == [CompleteOutcome.NOT_FOUND, CompleteOutcome.LEASE_MISMATCH]
