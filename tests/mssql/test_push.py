"""The push, dbo.sq_push_items (migration v6): every item read from one JSON parameter, queues
registered, keys and ids claimed under key-range locks, the rest inserted in the order given; and the
store's binding of its items, skip_existing and all-or-nothing through the fake connection."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo

import pytest
from simplequeue.domain import ItemExists, NewItem, Pushed
from simplequeue.store.mssql.params import index_order
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    CLOCK,
    NOW,
    NOW_TEXT,
    FakeConnection,
    Result,
    hints,
    openjson_columns,
    pushed,
    table_named,
)
from tests.mssql.test_push_procedures import answers, body, body_trees

PUSH = "sq_push_items"


@dataclass(frozen=True)
class PushBatch:
    """dbo.sq_push_items' statements after its SETs and DECLAREs, in its order."""

    read: exp.Insert  # every item of the call
    leaders: exp.Update  # which speak for the others
    register: exp.IfBlock  # the call's queues
    keys: exp.Insert  # the leaders' dedup keys...
    lock_keys: exp.Insert  # ...locked
    take_over_keys: exp.Update
    claim_keys: exp.Insert
    key_answers: exp.Update
    fresh: exp.Update  # the items to insert, each id once
    grouped: exp.Insert  # the queues of their grouped items...
    lock_groups: exp.Insert  # ...locked
    ids: exp.Insert  # their ids, keyed in the index's order
    lock_ids: exp.Insert  # the ids that exist in sq_items, locked
    remember: exp.Insert  # the ids that are their items' idempotency keys
    lock_claims: exp.Insert  # their claims in sq_client_ids, locked
    take_over: exp.Update  # claims whose window passed
    claim: exp.Insert  # new claims
    aged: exp.Update  # the ranks of items whose queue ages priorities
    fair: exp.IfBlock  # the fair ranks, when an item has a key or its queue saw one
    insert: exp.Insert  # the items
    holders: exp.Insert  # what holds each remembered id not inserted
    answer: exp.Insert  # the leaders' answers
    follow: exp.Insert  # the others'
    results: exp.Set  # @results


def push_batch_statements() -> PushBatch:
    trees = body_trees(PUSH)
    kinds = [type(tree) for tree in trees]
    assert kinds[:17] == [exp.Set, exp.Set, *[exp.Declare] * 15]
    found = PushBatch(*trees[17:])
    for name, kind in PushBatch.__annotations__.items():
        assert isinstance(getattr(found, name), getattr(exp, kind.split(".")[1])), name
    return found


def created(*items: NewItem) -> Result:
    """The procedure's answers when every item of the call went in."""
    return answers(*((n, item.id, item.created_at, True) for n, item in enumerate(items)))


def declared() -> str:
    return " ".join(tree.sql("tsql") for tree in body_trees(PUSH) if isinstance(tree, exp.Declare))


def test_the_push_reads_every_item_from_one_json_parameter_into_a_table_by_place() -> None:
    batch = push_batch_statements()
    read = batch.read
    assert read.this.this.sql("tsql") == "@item"
    assert read.expression.find(exp.OpenJSON).this.sql("tsql") == "@items"
    assert "CAST(j.created_at AS DATETIME2(7))" in read.expression.sql("tsql")
    assert "@item TABLE (n INT NOT NULL PRIMARY KEY" in declared().replace("INTEGER", "INT")
    # The payloads stay in the JSON text until they are inserted: read as text (no AS JSON, which
    # would re-serialise them), with OPENJSON the outer input, read once.
    insert = batch.insert
    assert openjson_columns(insert.expression) == {
        "n": "INTEGER",
        "payload": "NVARCHAR(MAX)",
        "attributes": "NVARCHAR(MAX)",
    }
    openjson = insert.expression.find(exp.OpenJSON)
    assert not any(col.args.get("as_json") for col in openjson.expressions)
    assert insert.expression.find(exp.From).this.find(exp.OpenJSON) is openjson
    assert "OPTION (FORCE ORDER);" in body(PUSH)
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
        "attributes",
        "fairness_key",
        "fair_rank",
        "rank_priority",
    ]
    assert [e.sql("tsql") for e in insert.expression.expressions[-5:]] == [
        "i.remember",
        "j.attributes",
        "i.fairness_key",
        "i.fair_rank",
        "COALESCE(i.rank_priority, i.priority)",
    ], "the flag the store sends, the attributes' text as sent, the key and its ranks"


def test_the_push_makes_an_item_visible_at_the_later_of_not_before_and_its_delay_from_the_servers_now() -> (
    None
):
    visible_at = push_batch_statements().read.expression.expressions[4].sql("tsql")
    assert visible_at == (
        "(SELECT MAX(v.at) FROM (VALUES (CAST(j.not_before AS DATETIME2(7))), "
        "(DATEADD(MICROSECOND, j.delay_micros, DATEADD(SECOND, j.delay_seconds, @now)))) AS v(at))"
    )


def test_the_first_item_of_a_dedup_key_or_of_a_remembered_id_of_its_queue_leads() -> None:
    leaders = push_batch_statements().leaders
    sql = leaders.sql("tsql")
    assert "MIN(i.n) OVER (PARTITION BY i.queue, i.dedup_key) AS first_keyed" in sql
    assert "MIN(i.n) OVER (PARTITION BY i.remember, i.id) AS first_remembered" in sql
    assert "FIRST_VALUE(i.queue) OVER (PARTITION BY i.remember, i.id ORDER BY i.n) AS first_queue" in sql
    assert (
        "CASE WHEN NOT dedup_key IS NULL THEN first_keyed "
        "WHEN remember = 1 AND first_queue = queue THEN first_remembered ELSE n END"
    ) in sql
    # Of the leaders whose key (if any) this call took, the first of each id goes in.
    fresh = push_batch_statements().fresh.sql("tsql")
    assert "MIN(i.n) OVER (PARTITION BY i.id) AS first_with_id" in fresh
    assert "WHERE i.leader = i.n AND (i.dedup_key IS NULL OR i.key_taken = 1)" in fresh
    assert "SET fresh = IIF(first_with_id = n, 1, 0)" in fresh


def test_the_push_takes_its_locks_in_the_order_every_writer_takes_them() -> None:
    # Queues, dedup keys, groups' turns, ids, remembered ids, items: as the migration explains.
    sql = body(PUSH)
    order = [
        "INSERT INTO dbo.sq_queues",
        "INSERT INTO @keys_held",
        "INSERT INTO dbo.sq_dedup",
        "INSERT INTO @locked",
        "INSERT INTO @taken",
        "INSERT INTO @held",
        "UPDATE k",
        "INSERT INTO dbo.sq_client_ids",
        "INSERT INTO dbo.sq_items",
    ]
    assert [sql.index(step) for step in order] == sorted(sql.index(step) for step in order)


def test_the_push_claims_every_dedup_key_present_or_not_then_takes_new_and_expired_ones() -> None:
    batch = push_batch_statements()
    assert (
        batch.keys.expression.args["where"].this.sql("tsql") == "NOT i.dedup_key IS NULL AND i.leader = i.n"
    )
    assert "PRIMARY KEY (queue, dedup_key)" in declared(), "seeks in key order"
    assert hints(table_named(batch.lock_keys, "sq_dedup")) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    take_over = batch.take_over_keys
    assert take_over.args["where"].this.sql("tsql") == "NOT d.expires_at IS NULL AND d.expires_at <= @now"
    assert {eq.this.name: eq.expression.sql("tsql") for eq in take_over.expressions} == {
        "item_id": "c.item_id",
        "created_at": "c.created_at",
        "expires_at": "c.expires_at",  # the queue's window from the send, or NULL until the finish
    }
    assert batch.claim_keys.this.this.name == "sq_dedup"
    assert "NOT EXISTS(SELECT 1 FROM @keys_held AS h" in batch.claim_keys.expression.sql("tsql")
    for took in (take_over, batch.claim_keys):
        assert took.args["returning"].args["into"].name == "keys_took"
    assert "key_taken = IIF(t.queue IS NULL, 0, 1)" in batch.key_answers.sql("tsql")


def test_the_push_takes_turns_on_the_queues_of_its_grouped_items() -> None:
    batch = push_batch_statements()
    grouped, lock_groups = batch.grouped, batch.lock_groups
    assert grouped.this.this.sql("tsql") == "@grouped"
    assert grouped.expression.args.get("distinct") is not None
    assert grouped.expression.args["where"].this.sql("tsql") == "i.fresh = 1 AND NOT i.group_key IS NULL"
    assert (
        "@grouped TABLE (queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY)"
        in declared()
    )
    assert hints(table_named(lock_groups, "sq_queues")) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert lock_groups.expression.find(exp.From).this.sql("tsql") == "@grouped AS g", "in the key's order"


def test_the_push_finds_the_ids_that_exist_under_key_range_locks_in_the_index_order() -> None:
    batch = push_batch_statements()
    assert batch.ids.expression.args["where"].this.sql("tsql") == "i.fresh = 1"
    assert "DECLARE @ids TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY)" in declared()
    lock = batch.lock_ids
    assert lock.this.sql("tsql") == "@taken (id)"
    assert lock.expression.find(exp.From).this.sql("tsql") == "@ids AS j", "keyed: the index's order"
    [join] = lock.expression.args["joins"]
    probed = join.this
    assert (probed.db, probed.name, probed.alias) == ("dbo", "sq_items", "e")
    assert hints(probed) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert join.args["on"].sql("tsql") == "e.id = j.id"
    assert join.args.get("side") is None, "an inner join: only the ids found"
    # The id index's key only: reading the row too would lock it after its key, while a purge or
    # redrive that deletes the row locks it before the key.
    assert [col.sql("tsql") for col in lock.expression.expressions] == ["e.id"]


def test_the_push_locks_every_remembered_id_in_sq_client_ids_in_key_order() -> None:
    batch = push_batch_statements()
    remember = batch.remember
    assert remember.this.sql("tsql") == "@remember (id, queue, created_at)"
    assert remember.expression.args["where"].this.sql("tsql") == "i.fresh = 1 AND i.remember = 1"
    assert (
        "@remember TABLE (id UNIQUEIDENTIFIER NOT NULL PRIMARY KEY, "
        "queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL, created_at DATETIME2(7) NOT NULL)"
    ) in declared()
    lock = batch.lock_claims
    assert lock.this.sql("tsql") == "@held (id, queue, created_at, expires_at)"
    assert lock.expression.find(exp.From).this.sql("tsql") == "@remember AS r", "in the key's order"
    [join] = lock.expression.args["joins"]
    assert (join.this.db, join.this.name, join.this.alias) == ("dbo", "sq_client_ids", "k")
    assert hints(join.this) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    assert join.args["on"].sql("tsql") == "k.id = r.id"
    found = [
        hints(t) for tree in body_trees(PUSH) for t in tree.find_all(exp.Table) if t.name == "sq_client_ids"
    ]
    assert sorted(found) == [[], ["FORCESEEK"], ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]]


def test_the_push_claims_an_id_nothing_holds_new_or_past_its_window() -> None:
    batch = push_batch_statements()
    nothing_there = "NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = r.id)"
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
    claim = batch.claim
    assert claim.this.sql("tsql") == "dbo.sq_client_ids (id, queue, created_at, expires_at)"
    assert claim.expression.args["where"].this.sql("tsql") == (
        f"NOT EXISTS(SELECT 1 FROM @held AS h WHERE h.id = r.id) AND {nothing_there}"
    )
    for took in (take_over, claim):
        output = took.args["returning"]
        assert [col.sql("tsql") for col in output.expressions] == ["inserted.id"]
        assert output.args["into"].name == "claimed"


def test_the_push_inserts_the_fresh_items_in_the_order_given_and_outputs_them() -> None:
    insert = push_batch_statements().insert
    table = insert.this.this
    assert (table.db, table.name) == ("dbo", "sq_items")
    assert insert.expression.args["where"].this.sql("tsql") == (
        "i.fresh = 1 AND NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = i.id) "
        "AND (i.remember = 0 OR EXISTS(SELECT 1 FROM @claimed AS c WHERE c.id = i.id))"
    )
    assert not [t for t in insert.expression.find_all(exp.Table) if t.name == "sq_items"], (
        "the locks are taken"
    )
    # IDENTITY numbers the rows in the ORDER BY's order, so that seq keeps the call's order.
    assert [o.sql("tsql") for o in insert.expression.args["order"].expressions] == ["i.n"]
    output = insert.args["returning"]
    assert [(col.table, col.name) for col in output.expressions] == [
        ("inserted", "id"),
        ("inserted", "queue"),
    ]
    assert output.args["into"].name == "inserted"


def test_the_push_says_what_holds_each_remembered_id_it_did_not_insert() -> None:
    holders = push_batch_statements().holders.expression
    assert isinstance(holders, exp.Union)
    assert holders.args.get("distinct") is False, "UNION ALL: the two parts never share an id"
    claims, items = holders.this, holders.expression
    assert claims.find(exp.From).this.sql("tsql") == "@held AS h"
    assert claims.args["where"].this.sql("tsql") == (
        "NOT EXISTS(SELECT 1 FROM @claimed AS c WHERE c.id = h.id) "
        "AND (h.expires_at IS NULL OR NOT EXISTS(SELECT 1 FROM @taken AS t WHERE t.id = h.id))"
    )
    assert items.find(exp.From).this.sql("tsql") == "@remember AS r"
    taken, row = items.args["joins"]
    assert taken.sql("tsql") == "JOIN @taken AS t ON t.id = r.id"
    assert (row.this.db, row.this.name) == ("dbo", "sq_items")
    assert hints(row.this) == ["FORCESEEK"], "no lock hints: its key is locked already"


def test_the_push_answers_each_item_as_pushplan_does() -> None:
    batch = push_batch_statements()
    answer = batch.answer.expression.sql("tsql")
    # A key held by another item: that item. Inserted: created. A remembered id its queue holds: a
    # retry. Anything else: NULL, refused.
    assert (
        "CASE WHEN i.key_taken = 0 THEN 0 WHEN i.fresh = 1 AND NOT s.id IS NULL THEN 1 "
        "WHEN i.remember = 1 AND h.queue = i.queue THEN 0 END"
    ) in answer
    assert answer.endswith("WHERE i.leader = i.n")
    follow = batch.follow.expression.sql("tsql")
    assert "IIF(a.created IS NULL, NULL, 0)" in follow, "a follower is its leader's duplicate"
    assert follow.endswith("WHERE i.leader <> i.n")
    assert "@results" in batch.results.sql("tsql")


def test_the_push_registers_its_queues_once_under_a_lock_before_locking_any_item() -> None:
    register = push_batch_statements().register
    assert isinstance(register.this, exp.Exists)
    assert {hints(t) == [] for t in register.this.find_all(exp.Table)} == {True}, "an unlocked probe first"
    [insert] = register.args["true"].expressions
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_queues"
    assert insert.expression.args.get("distinct") is not None
    assert insert.expression.find(exp.From).this.sql("tsql") == "@item AS j"
    locked = [t for t in insert.expression.find_all(exp.Table) if t.name == "sq_queues"]
    assert [hints(t) for t in locked] == [["HOLDLOCK", "UPDLOCK"]]
    assert "queue NVARCHAR(128) COLLATE Latin1_General_100_BIN2 NOT NULL" in declared()


# --- binding and rows -----------------------------------------------------------------------------


async def test_push_batch_binds_the_clock_and_the_items_as_one_json_text(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    first = NewItem(uuid4(), "orders", '{"n": 1}', datetime(2026, 2, 1, 9, 30, 0, 654321, tzinfo=UTC))
    second = NewItem(uuid4(), "Orders", "[1, 2]", NOW, priority=-3, group="g", delay_seconds=2.5)
    conn.reply("push_batch", created(first, second))

    results = await store.push_batch([first, second], skip_existing=False)

    assert results == [Pushed(first.id, first.created_at, True), Pushed(second.id, second.created_at, True)]
    assert conn.names == ["push_batch"], "one round trip"
    assert conn.params("push_batch")[0] == NOW_TEXT
    common = {"dedup_key": None, "fairness_key": None, "not_before": None, "remember": 0}
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
    conn.reply("push_batch", created(item))

    await store.push_batch([item], skip_existing=False)

    [sent] = pushed(conn)
    assert (sent["delay_seconds"], sent["delay_micros"]) == (seconds, micros)
    assert all(-(2**31) <= n < 2**31 for n in (sent["delay_seconds"], sent["delay_micros"]))


async def test_push_batch_sends_not_before_as_utc_text(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    paris = datetime(2026, 3, 2, 10, 30, tzinfo=UTC).astimezone(ZoneInfo("Europe/Paris"))
    item = NewItem(uuid4(), "orders", "1", NOW, not_before=paris)
    conn.reply("push_batch", created(item))

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
    conn.reply("push_batch", created(*items))

    await store.push_batch(items, skip_existing=True)

    sent = {item["id"]: item["payload"] for item in pushed(conn)}
    assert all(isinstance(payload, str) for payload in sent.values()), "a JSON string, not a JSON value"
    assert sent == {str(item.id): item.payload_json for item in items}


async def test_a_thousand_items_are_still_two_parameters(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    items = [NewItem(uuid4(), f"q{n % 7}", str(n), NOW, dedup_key=f"k{n}") for n in range(1000)]
    conn.reply("push_batch", created(*items))

    assert len(await store.push_batch(items, skip_existing=False)) == 1000

    assert len(conn.params("push_batch")) == 2
    assert len(pushed(conn)) == 1000


async def test_push_batch_sends_every_item_numbered_in_the_order_given(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # The procedure reads them into tables keyed like the indexes it locks: the array's order is free.
    store, conn = fake
    items = [NewItem(uuid4(), "orders", str(n), NOW) for n in range(50)]
    conn.reply("push_batch", created(*items))

    await store.push_batch(items, skip_existing=True)

    assert [(item["n"], UUID(item["id"])) for item in pushed(conn)] == [
        (n, i.id) for n, i in enumerate(items)
    ]


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
    conn.reply("push_batch", answers((0, existing.id, NOW, None), (1, new.id, NOW, True)))

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
    conn.reply(
        "push_batch", answers((0, item_id, NOW, True), (1, item_id, NOW, None), (2, later.id, NOW, True))
    )

    results = await store.push_batch([first, again, later], skip_existing=True)

    assert results == [Pushed(item_id, NOW, True), None, Pushed(later.id, NOW, True)]
    assert [(item["n"], item["payload"]) for item in pushed(conn)] == [
        (0, '"first"'),
        (1, '"again"'),
        (2, '"later"'),
    ]


async def test_all_or_nothing_refuses_the_batch_when_an_id_exists(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    existing, new = NewItem(uuid4(), "orders", "1", NOW), NewItem(uuid4(), "orders", "2", NOW)
    conn.reply("push_batch", answers((0, existing.id, NOW, None), (1, new.id, NOW, True)))

    with pytest.raises(ItemExists):
        await store.push_batch([existing, new], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1), "the new item and its queue are rolled back"


async def test_all_or_nothing_refuses_a_repeated_id_the_procedure_answered_for_once(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item, other = NewItem(uuid4(), "orders", "1", NOW), NewItem(uuid4(), "orders", "2", NOW)
    conn.reply(
        "push_batch", answers((0, item.id, NOW, True), (1, other.id, NOW, True), (2, item.id, NOW, None))
    )

    with pytest.raises(ItemExists):
        await store.push_batch([item, other, item], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1)


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
    conn.reply("push_batch", created(item))

    await store.push_batch([item], skip_existing=False)

    assert pushed(conn)[0]["created_at"] == "2026-02-01T10:30:00.000000"


def test_the_push_ranks_fair_items_under_locks_on_their_keys_only_when_a_queue_is_fair() -> None:
    fair = push_batch_statements().fair
    condition = fair.this.sql("tsql")
    text = " ".join(body(PUSH).split())
    # A push with no key into queues that never saw one skips it all.
    assert "NOT i.fairness_key IS NULL" in condition
    assert "dbo.sq_fair_keys" in condition
    # Each fair key of the call is locked as the dedup keys are: present or not, until commit.
    assert text.count("dbo.sq_fair_keys AS f WITH (UPDLOCK, HOLDLOCK, FORCESEEK)") == 2
    # The virtual time: one less than the lowest due ready fair rank of the first item's rank (its
    # priority, aged), else the queue's top.
    assert "SELECT TOP (1) x.fair_rank - 1 FROM dbo.sq_items AS x" in text
    assert "x.rank_priority = c.priority" in text
    assert "ORDER BY x.rank_priority DESC, x.fair_rank" in text
    assert "COALESCE(i.rank_priority, i.priority) AS priority" in text
    assert "SELECT MAX(k.last_rank) FROM dbo.sq_fair_keys AS k WHERE k.queue = c.queue" in text
    # A key's items take consecutive ranks, in the call's order.
    assert "ROW_NUMBER() OVER (PARTITION BY i.queue, COALESCE(i.fairness_key, N'') ORDER BY i.n)" in text
    assert "SET last_rank = c.start + c.items" in text


def test_the_push_ranks_the_items_of_queues_that_age_priorities_by_their_periods() -> None:
    aged = push_batch_statements().aged
    sql = aged.sql("tsql")
    assert aged.this.sql("tsql") == "i"
    assert "JOIN dbo.sq_queues AS q ON q.name = i.queue" in sql
    assert "WHERE NOT q.priority_aging_seconds IS NULL" in sql
    # Whole seconds from the epoch, floored to periods before the epoch too (% and / truncate).
    assert (
        "DATEDIFF_BIG(SECOND, CAST('1970-01-01' AS DATETIME2(7)), CAST(i.created_at AS DATETIME2)) AS s"
        in sql
    )
    assert (
        "i.priority - (e.s - ((e.s % q.priority_aging_seconds) + q.priority_aging_seconds) "
        "% q.priority_aging_seconds) / q.priority_aging_seconds"
    ) in sql
    # An item of a queue without aging ranks by its priority.
    insert = push_batch_statements().insert.sql("tsql")
    assert "fair_rank, rank_priority)" in insert
    assert "i.fair_rank, COALESCE(i.rank_priority, i.priority)" in insert
