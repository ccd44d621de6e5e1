"""push_batch: every item read from one JSON parameter, the ids that exist found under key-range
locks, the rest inserted in the order given; and the binding of its items, skip_existing and
all-or-nothing through the fake connection."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo

import pytest
from simplequeue.domain import ItemExists, NewItem, Pushed
from simplequeue.store.mssql.params import index_order
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    CLOCK,
    NOW,
    NOW_TEXT,
    FakeConnection,
    claim_rows,
    declared,
    hints,
    ids,
    openjson_columns,
    parse,
    placeholders,
    pushed,
    table_named,
)


@dataclass(frozen=True)
class PushBatch:
    """push_batch's statements after its SETs and DECLAREs, in the batch's order."""

    register: exp.IfBlock  # the batch's queues
    grouped: exp.Insert  # the queues of its grouped items...
    lock_groups: exp.Insert  # ...locked
    lock_ids: exp.Insert  # the ids that exist in sq_items, locked
    remember: exp.Insert  # the ids that are their items' idempotency keys
    lock_claims: exp.Insert  # their claims in sq_client_ids, locked
    take_over: exp.Update  # claims whose window passed
    claim: exp.Insert  # new claims
    insert: exp.Insert  # the items
    inserted: exp.Select  # first result set
    holders: exp.Union  # second result set


def push_batch_statements() -> PushBatch:
    sql = Q["push_batch"].sql
    # sqlglot reads every statement after a T-SQL IF as its body; T-SQL's IF governs one statement.
    # So the IF (up to its semicolon) is parsed on its own, in its place.
    start = sql.index("\nIF EXISTS")
    end = sql.index(";\n", start) + 2
    before, [register], after = parse(sql[:start]), parse(sql[start:end]), parse(sql[end:])
    trees = [*before, register, *after]
    kinds = [type(tree) for tree in trees]
    assert kinds == [
        exp.Set,
        exp.Set,
        *[exp.Declare] * 9,
        exp.IfBlock,
        *[exp.Insert] * 5,
        exp.Update,
        exp.Insert,
        exp.Insert,
        exp.Select,
        exp.Union,
    ]
    found = PushBatch(*trees[11:])
    for name, kind in PushBatch.__annotations__.items():
        assert isinstance(getattr(found, name), getattr(exp, kind.split(".")[1])), name
    return found


def test_push_batch_reads_every_item_from_one_json_parameter() -> None:
    batch = push_batch_statements()
    assert placeholders(Q["push_batch"].sql) == 2, "the clock and the items, whatever their number"
    assert parse(Q["push_batch"].sql)[3].sql("tsql") == "DECLARE @items NVARCHAR(MAX) = ?"
    for statement in (batch.grouped, batch.lock_ids, batch.remember, batch.insert):
        assert statement.expression.find(exp.OpenJSON).this.sql("tsql") == "@items"
    # The payload is a JSON string read as text (no AS JSON, which would re-serialise it); the times are
    # text that the SELECT casts, as everywhere else.
    insert = batch.insert
    openjson = insert.expression.find(exp.OpenJSON)
    assert openjson_columns(insert.expression) == {
        "n": "INTEGER",
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(4000)",
        "payload": "NVARCHAR(MAX)",
        "created_at": "NVARCHAR(40)",
        "priority": "INTEGER",
        "group_key": "NVARCHAR(4000)",
        "dedup_key": "NVARCHAR(4000)",
        "delay_seconds": "INTEGER",
        "delay_micros": "INTEGER",
        "not_before": "NVARCHAR(40)",
        "remember": "BIT",
    }
    assert not any(col.args.get("as_json") for col in openjson.expressions)
    assert "CAST(j.created_at AS DATETIME2(7))" in insert.expression.sql("tsql")
    assert [col.name for col in insert.this.expressions] == [
        "id",
        "queue",
        "payload",
        "created_at",
        "visible_at",
        "priority",
        "group_key",
        "dedup_key",
        "remember_id",
    ]
    assert insert.expression.expressions[-1].sql("tsql") == "j.remember", "the flag the store sends"


def test_push_batch_makes_an_item_visible_at_the_later_of_not_before_and_its_delay_from_the_servers_now() -> (
    None
):
    insert = push_batch_statements().insert
    visible_at = insert.expression.expressions[4].sql("tsql")
    assert visible_at == (
        "(SELECT MAX(v.at) FROM (VALUES (CAST(j.not_before AS DATETIME2(7))), "
        "(DATEADD(MICROSECOND, j.delay_micros, DATEADD(SECOND, j.delay_seconds, @now)))) AS v(at))"
    )


def test_push_batch_takes_turns_on_the_queues_of_its_grouped_items_before_anything_else() -> None:
    batch = push_batch_statements()
    grouped, lock_groups = batch.grouped, batch.lock_groups
    assert grouped.this.this.sql("tsql") == "@grouped"
    assert grouped.expression.args.get("distinct") is not None
    assert "j.queue COLLATE Latin1_General_100_BIN2" in grouped.expression.sql("tsql")
    assert grouped.expression.args["where"].this.sql("tsql") == "NOT j.group_key IS NULL"
    assert (
        "@grouped TABLE (queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY)"
        in declared("push_batch")
    )
    queues = table_named(lock_groups, "sq_queues")
    assert hints(queues) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert lock_groups.expression.find(exp.From).this.sql("tsql") == "@grouped AS g", "in the key's order"


def test_push_batch_then_finds_the_ids_that_exist_under_key_range_locks() -> None:
    lock = push_batch_statements().lock_ids
    assert lock.this.sql("tsql") == "@taken (id)"
    assert openjson_columns(lock.expression) == {"id": "UNIQUEIDENTIFIER"}
    [join] = lock.expression.args["joins"]
    probed = join.this
    assert (probed.db, probed.name, probed.alias) == ("dbo", "sq_items", "e")
    assert hints(probed) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert join.args["on"].sql("tsql") == "e.id = j.id"
    assert join.args.get("side") is None, "an inner join: only the ids found"
    # The id index's key only: reading the row too would lock it after its key, while a purge or
    # redrive that deletes the row locks it before the key.
    assert [col.sql("tsql") for col in lock.expression.expressions] == ["e.id"]


def test_push_batch_reads_the_remembered_ids_into_a_table_keyed_like_sq_client_ids() -> None:
    remember = push_batch_statements().remember
    assert remember.this.sql("tsql") == "@remember (id, queue, created_at)"
    assert openjson_columns(remember.expression) == {
        "id": "UNIQUEIDENTIFIER",
        "queue": "NVARCHAR(4000)",
        "created_at": "NVARCHAR(40)",
        "remember": "BIT",
    }
    assert remember.expression.args["where"].this.sql("tsql") == "j.remember = 1"
    assert [col.sql("tsql") for col in remember.expression.expressions] == [
        "j.id",
        "j.queue",
        "CAST(j.created_at AS DATETIME2(7))",
    ]
    # Keyed by id, as sq_client_ids: the seeks that lock the claims follow the key's order.
    assert (
        "@remember TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY, "
        "queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL, created_at DATETIME2(7) NOT NULL)"
    ) in declared("push_batch")


def test_push_batch_locks_every_remembered_id_in_sq_client_ids_in_key_order_after_the_items() -> None:
    lock = push_batch_statements().lock_claims
    assert lock.this.sql("tsql") == "@held (id, queue, created_at, expires_at)"
    assert lock.expression.find(exp.From).this.sql("tsql") == "@remember AS r", "in the key's order"
    [join] = lock.expression.args["joins"]
    claims = join.this
    assert (claims.db, claims.name, claims.alias) == ("dbo", "sq_client_ids", "k")
    # A serializable seek per id: a missing id is range-locked until commit, as in sq_items.
    assert hints(claims) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert join.args["on"].sql("tsql") == "k.id = r.id"
    assert join.args.get("side") is None, "an inner join: only the claims found"
    assert [col.sql("tsql") for col in lock.expression.expressions] == [
        "k.id",
        "k.queue",
        "k.created_at",
        "k.expires_at",
    ]
    # Items before claims, as completions, purge_dead and delete_queue lock them; claims before any
    # is written.
    sql = Q["push_batch"].sql
    assert (
        sql.index("INSERT INTO @taken")
        < sql.index("INSERT INTO @held")
        < sql.index("UPDATE k")
        < sql.index("INSERT INTO dbo.sq_client_ids")
        < sql.index("INSERT INTO dbo.sq_items")
    )
    # Every read of sq_client_ids in the batch is a seek: the lock, then the take-over (the third is
    # the new claims' INSERT).
    found = [hints(t) for tree in parse(sql) for t in tree.find_all(exp.Table) if t.name == "sq_client_ids"]
    assert sorted(found) == [[], ["FORCESEEK"], ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]]


def test_push_batch_claims_an_id_nothing_holds_new_or_past_its_window() -> None:
    batch = push_batch_statements()
    nothing_there = "NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = r.id)"
    # A claim whose window passed is taken over, unless an item has the id (pushed with a dedup_key).
    take_over = batch.take_over
    assert take_over.this.sql("tsql") == "k"
    assert hints(table_named(take_over, "sq_client_ids")) == ["FORCESEEK"]
    assert take_over.args["where"].this.sql("tsql") == (
        f"NOT k.expires_at IS NULL AND k.expires_at <= @now AND {nothing_there}"
    )
    assert {eq.this.name: eq.expression.sql("tsql") for eq in take_over.expressions} == {
        "queue": "r.queue",
        "created_at": "r.created_at",
        "expires_at": "NULL",
    }
    # A new id: no claim found under the lock, and no item.
    claim = batch.claim
    assert claim.this.sql("tsql") == "dbo.sq_client_ids (id, queue, created_at, expires_at)"
    assert [col.sql("tsql") for col in claim.expression.expressions] == [
        "r.id",
        "r.queue",
        "r.created_at",
        "NULL",
    ]
    assert claim.expression.args["where"].this.sql("tsql") == (
        f"NOT EXISTS(SELECT 1 FROM @held AS h WHERE h.id = r.id) AND {nothing_there}"
    )
    for took in (take_over, claim):
        output = took.args["returning"]
        assert [col.sql("tsql") for col in output.expressions] == ["inserted.id"]
        assert output.args["into"].name == "claimed"
    assert "DECLARE @claimed TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY)" in declared("push_batch")


def test_push_batch_inserts_the_others_in_the_order_given_and_outputs_them() -> None:
    batch = push_batch_statements()
    insert, select = batch.insert, batch.inserted
    table = insert.this.this
    assert (table.db, table.name) == ("dbo", "sq_items")
    where = insert.expression.args["where"].this
    assert isinstance(where, exp.And)
    assert where.this.sql("tsql") == "NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = j.id)"
    # A remembered id goes in only if this batch claimed it.
    assert (
        where.expression.sql("tsql")
        == "(j.remember = 0 OR EXISTS(SELECT 1 FROM @claimed AS c WHERE c.id = j.id))"
    )
    assert insert.expression.find(exp.Hint) is None
    assert not [t for t in where.find_all(exp.Table) if t.name == "sq_items"], "the locks are taken"
    # IDENTITY numbers the rows in the ORDER BY's order, so that seq keeps the batch's order.
    order = insert.expression.args["order"]
    assert [o.sql("tsql") for o in order.expressions] == ["j.n"]
    output = insert.args["returning"]
    assert [(col.table, col.name) for col in output.expressions] == [
        ("inserted", "id"),
        ("inserted", "queue"),
    ]
    assert output.args["into"].name == "inserted"
    assert select.sql("tsql") == "SELECT id FROM @inserted"


def test_push_batch_then_says_what_holds_each_remembered_id_it_did_not_insert() -> None:
    holders = push_batch_statements().holders
    assert holders.args.get("distinct") is False, "UNION ALL: the two parts never share an id"
    claims, items = holders.this, holders.expression
    assert isinstance(claims, exp.Select)
    assert isinstance(items, exp.Select)
    for part, alias in ((claims, "h"), (items, "i")):
        assert [col.sql("tsql") for col in part.expressions] == [
            f"{alias}.id",
            f"{alias}.queue",
            f"{alias}.created_at",
        ]
    # A claim answers for its id unless an item has the id: then only a live item's own claim (NULL)
    # does, which mirrors it.
    assert claims.find(exp.From).this.sql("tsql") == "@held AS h"
    assert claims.args["where"].this.sql("tsql") == (
        "NOT EXISTS(SELECT 1 FROM @claimed AS c WHERE c.id = h.id) "
        "AND (h.expires_at IS NULL OR NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = h.id))"
    )
    # An item that has the id without a claim of its own is read from sq_items: by seek, only for
    # those ids, and without lock hints (its key is locked already).
    assert items.find(exp.From).this.sql("tsql") == "@remember AS r"
    taken, row = items.args["joins"]
    assert taken.sql("tsql") == "JOIN @taken AS t ON t.id = r.id"
    assert (row.this.db, row.this.name, row.this.alias) == ("dbo", "sq_items", "i")
    assert hints(row.this) == ["FORCESEEK"]
    assert row.args["on"].sql("tsql") == "i.id = r.id"
    assert items.args["where"].this.sql("tsql") == (
        "NOT EXISTS(SELECT 1 FROM @held AS h WHERE h.id = r.id AND h.expires_at IS NULL)"
    )


def test_push_batch_registers_its_queues_once_under_a_lock_before_locking_any_item() -> None:
    register = push_batch_statements().register
    # Before any item lock: every writer takes a queue's row before its items.
    sql = Q["push_batch"].sql
    assert sql.index("\nIF EXISTS") < sql.index("INSERT INTO @grouped") < sql.index("INSERT INTO @taken")
    # An unlocked probe first, so that pushes to existing queues take no lock on sq_queues.
    assert isinstance(register.this, exp.Exists)
    assert {hints(t) == [] for t in register.this.find_all(exp.Table)} == {True}
    [insert] = register.args["true"].expressions
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_queues"
    assert insert.expression.args.get("distinct") is not None
    assert insert.expression.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert "j.queue COLLATE Latin1_General_100_BIN2" in insert.expression.sql("tsql")
    locked = [t for t in insert.expression.find_all(exp.Table) if t.name == "sq_queues"]
    assert [hints(t) for t in locked] == [["HOLDLOCK", "UPDLOCK"]]
    assert "DECLARE @taken TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY)" in declared("push_batch")
    assert "queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2" in declared("push_batch")


# --- binding and rows -----------------------------------------------------------------------------


async def test_push_batch_binds_the_clock_and_the_items_as_one_json_text(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    first = NewItem(uuid4(), "orders", '{"n": 1}', datetime(2026, 2, 1, 9, 30, 0, 654321, tzinfo=UTC))
    second = NewItem(uuid4(), "Orders", "[1, 2]", NOW, priority=-3, group="g", delay_seconds=2.5)
    conn.reply("push_batch", ids(first.id, second.id))

    results = await store.push_batch([first, second], skip_existing=False)

    assert results == [Pushed(first.id, first.created_at, True), Pushed(second.id, second.created_at, True)]
    assert conn.names == ["push_batch"], "no keys: nothing to claim"
    assert conn.params("push_batch")[0] == NOW_TEXT
    common = {"dedup_key": None, "not_before": None, "remember": 0}
    assert sorted(pushed(conn), key=lambda item: item["n"]) == [
        {
            "n": 0,
            "id": str(first.id),
            "queue": "orders",
            "payload": '{"n": 1}',
            "created_at": "2026-02-01T09:30:00.654321",
            "priority": 0,
            "group_key": None,
            "delay_seconds": 0,
            "delay_micros": 0,
            **common,
        },
        {
            "n": 1,
            "id": str(second.id),
            "queue": "Orders",
            "payload": "[1, 2]",
            "created_at": NOW_TEXT,
            "priority": -3,
            "group_key": "g",
            "delay_seconds": 2,
            "delay_micros": 500000,
            **common,
        },
    ]
    batch = conn.inlined("push_batch")
    assert CLOCK in batch
    assert 'DECLARE @items NVARCHAR(MAX) = N\'[{"n":' in batch
    assert (conn.commits, conn.rollbacks, conn.cursors_closed) == (1, 0, 1)


@pytest.mark.parametrize(
    ("delay", "seconds", "micros"),
    [(0.000001, 0, 1), (2147.483648, 2147, 483648), (3600.5, 3600, 500000), (31536000, 31536000, 0)],
)
async def test_push_batch_splits_a_delay_into_whole_seconds_and_microseconds(
    fake: tuple[MssqlStore, FakeConnection], delay: float, seconds: int, micros: int
) -> None:
    # All of a day in microseconds would overflow DATEADD's INT; the split never does.
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW, delay_seconds=delay)
    conn.reply("push_batch", ids(item.id))

    await store.push_batch([item], skip_existing=False)

    [sent] = pushed(conn)
    assert (sent["delay_seconds"], sent["delay_micros"]) == (seconds, micros)
    assert all(-(2**31) <= n < 2**31 for n in (sent["delay_seconds"], sent["delay_micros"]))


async def test_push_batch_sends_not_before_as_utc_text(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    paris = datetime(2026, 3, 2, 10, 30, tzinfo=UTC).astimezone(ZoneInfo("Europe/Paris"))
    item = NewItem(uuid4(), "orders", "1", NOW, not_before=paris)
    conn.reply("push_batch", ids(item.id))

    await store.push_batch([item], skip_existing=False)

    assert pushed(conn)[0]["not_before"] == "2026-03-02T10:30:00.000000"


async def test_push_batch_sends_payload_text_exactly_as_a_json_string(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    payloads = [
        '{"b": 1,  "a": [1.0, 1e3, 12345678901234567890.5]}',  # key order, spacing, number spelling
        '"quote \\" backslash \\\\ tab \\t"',
        '"na\u00efve \u65e5\u672c \U0001f600 \u2028"',  # as characters: BMP, beyond it, a separator
        '"\\u0000 nul and \\u2028 separator"',
        "null",
    ]
    items = [NewItem(uuid4(), "orders", payload, NOW) for payload in payloads]
    conn.reply("push_batch", ids(*(item.id for item in items)))

    await store.push_batch(items, skip_existing=True)

    sent = {item["id"]: item["payload"] for item in pushed(conn)}
    assert all(isinstance(payload, str) for payload in sent.values()), "a JSON string, not a JSON value"
    assert sent == {str(item.id): item.payload_json for item in items}


async def test_a_thousand_items_are_still_two_parameters(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    items = [NewItem(uuid4(), f"q{n % 7}", str(n), NOW, dedup_key=f"k{n}") for n in range(1000)]
    conn.reply("claim_dedup_keys", claim_rows(*((n, item.id, NOW, True) for n, item in enumerate(items))))
    conn.reply("push_batch", ids(*(item.id for item in items)))

    assert len(await store.push_batch(items, skip_existing=False)) == 1000

    assert len(conn.params("claim_dedup_keys")) == 2
    assert len(conn.params("push_batch")) == 2
    assert len(pushed(conn)) == 1000


async def test_push_batch_sends_the_items_in_the_id_indexs_order_numbered_in_the_order_given(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    items = [NewItem(uuid4(), "orders", str(n), NOW) for n in range(50)]
    conn.reply("push_batch", ids(*(item.id for item in items)))

    await store.push_batch(items, skip_existing=True)

    sent = pushed(conn)
    assert [UUID(item["id"]) for item in sent] == sorted((item.id for item in items), key=index_order)
    assert [item["id"] for item in sorted(sent, key=lambda item: item["n"])] == [str(i.id) for i in items]


def test_the_index_order_is_sql_servers_uniqueidentifier_order() -> None:
    # Documented: byte groups right to left; the last two groups compared as written, the first
    # three byte-reversed. One GUID per byte position, with only that byte set, sorts from the least
    # significant position to the most.
    def only(position: int) -> UUID:
        raw = bytearray(16)
        raw[position] = 1
        return UUID(bytes=bytes(raw))

    ladder = sorted(range(16), key=lambda position: index_order(only(position)))
    assert ladder == [0, 1, 2, 3, 4, 5, 6, 7, 9, 8, 15, 14, 13, 12, 11, 10]
    # The documented example: compared on their last groups first, 86FF976E763F > 393AE6BBB849.
    g1 = UUID("55666BEE-B3A0-4BF5-81A7-86FF976E763F")
    g2 = UUID("8DD5BCA5-6ABE-4F73-B4B7-393AE6BBB849")
    assert index_order(g2) < index_order(g1)


async def test_skip_existing_returns_none_for_the_ids_not_inserted_and_commits(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    existing, new = NewItem(uuid4(), "orders", "1", NOW), NewItem(uuid4(), "orders", "2", NOW)
    conn.reply("push_batch", ids(new.id))

    assert await store.push_batch([existing, new], skip_existing=True) == [None, Pushed(new.id, NOW, True)]

    assert {item["id"] for item in pushed(conn)} == {str(existing.id), str(new.id)}
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_skip_existing_keeps_the_first_of_a_repeated_id(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    first, again = NewItem(item_id, "orders", '"first"', NOW), NewItem(item_id, "orders", '"again"', NOW)

    later = NewItem(uuid4(), "orders", '"later"', NOW)
    conn.reply("push_batch", ids(item_id, later.id))

    results = await store.push_batch([first, again, later], skip_existing=True)

    assert results == [Pushed(item_id, NOW, True), None, Pushed(later.id, NOW, True)]
    sent = sorted(pushed(conn), key=lambda item: item["n"])
    assert [(item["n"], item["payload"]) for item in sent] == [(0, '"first"'), (1, '"later"')]


async def test_all_or_nothing_refuses_the_batch_when_an_id_exists(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    existing, new = NewItem(uuid4(), "orders", "1", NOW), NewItem(uuid4(), "orders", "2", NOW)
    conn.reply("push_batch", ids(new.id))

    with pytest.raises(ItemExists):
        await store.push_batch([existing, new], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1), "the new item and its queue are rolled back"


async def test_all_or_nothing_refuses_a_repeated_id_without_asking_the_server(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW)

    with pytest.raises(ItemExists):
        await store.push_batch([item, NewItem(uuid4(), "orders", "2", NOW), item], skip_existing=False)

    assert conn.executed == []


@pytest.mark.parametrize("skip_existing", [False, True])
async def test_an_empty_batch_asks_nothing(
    fake: tuple[MssqlStore, FakeConnection], skip_existing: bool
) -> None:
    store, conn = fake
    assert await store.push_batch([], skip_existing=skip_existing) == []
    assert await store.complete_batch([]) == []
    assert conn.executed == []


async def test_created_at_in_another_zone_is_sent_as_utc(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    paris = datetime(2026, 2, 1, 10, 30, tzinfo=UTC).astimezone(ZoneInfo("Europe/Paris"))
    item = NewItem(uuid4(), "orders", "1", paris)
    conn.reply("push_batch", ids(item.id))

    await store.push_batch([item], skip_existing=False)

    assert pushed(conn)[0]["created_at"] == "2026-02-01T10:30:00.000000"
