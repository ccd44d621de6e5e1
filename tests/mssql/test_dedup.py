"""Idempotent pushes: dedup keys claimed first in the push's transaction, and remembered ids (a
producer's id without a dedup_key is the push's idempotency key)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import ItemExists, NewItem, Pushed
from simplequeue.store.mssql.params import index_order
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    NOW,
    NOW_TEXT,
    FakeConnection,
    claim_rows,
    claimed,
    declared,
    hints,
    ids,
    openjson_columns,
    placeholders,
    pushed,
    statements,
    table_named,
)


def test_claim_dedup_keys_locks_every_claimed_key_present_or_not_then_takes_new_and_expired_ones() -> None:
    assert placeholders(Q["claim_dedup_keys"].sql) == 2, "the clock and the claims, however many"
    read, lock, take_over, insert, answer = statements("claim_dedup_keys")
    assert isinstance(read, exp.Insert)
    assert read.this.this.sql("tsql") == "@claim"
    assert openjson_columns(read.expression) == {
        "n": "INTEGER",
        "queue": "NVARCHAR(4000)",
        "key": "NVARCHAR(4000)",
        "id": "UNIQUEIDENTIFIER",
        "created_at": "NVARCHAR(40)",
    }
    assert "PRIMARY KEY (queue, dedup_key)" in declared("claim_dedup_keys"), "seeks in key order"
    assert declared("claim_dedup_keys").count("COLLATE Latin1_General_100_BIN2") == 6
    # The lock: a serializable seek per key, so that a missing key is range-locked until commit.
    assert isinstance(lock, exp.Insert)
    assert lock.this.this.sql("tsql") == "@held"
    assert hints(table_named(lock, "sq_dedup")) == ["FORCESEEK", "HOLDLOCK", "UPDLOCK"]
    # A key whose window passed is taken over; only a new key is inserted.
    assert isinstance(take_over, exp.Update)
    assert take_over.args["where"].this.sql("tsql") == "NOT d.expires_at IS NULL AND d.expires_at <= @now"
    assert {eq.this.name: eq.expression.sql("tsql") for eq in take_over.expressions} == {
        "item_id": "c.item_id",
        "created_at": "c.created_at",
        "expires_at": "NULL",
    }
    assert isinstance(insert, exp.Insert)
    assert insert.this.this.name == "sq_dedup"
    assert "NOT EXISTS(SELECT 1 FROM @held AS h" in insert.expression.sql("tsql")
    for took in (take_over, insert):
        assert took.args["returning"].args["into"].name == "took"
    assert isinstance(answer, exp.Select)
    assert [col.alias_or_name for col in answer.expressions] == ["n", "item_id", "created_at", "taken"]


# --- dedup keys, bound ----------------------------------------------------------------------------


async def test_dedup_keys_are_claimed_first_in_the_same_transaction_one_per_key(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    a = NewItem(uuid4(), "orders", "1", datetime(2026, 2, 1, tzinfo=UTC), dedup_key="k")
    again = NewItem(uuid4(), "orders", "2", NOW, dedup_key="k")  # follows a, unsent
    other_queue = NewItem(uuid4(), "Orders", "3", NOW, dedup_key="k")
    plain = NewItem(uuid4(), "orders", "4", NOW)
    conn.reply("claim_dedup_keys", claim_rows((0, a.id, a.created_at, True), (2, other_queue.id, NOW, True)))
    conn.reply("push_batch", ids(a.id, other_queue.id, plain.id))

    results = await store.push_batch([a, again, other_queue, plain], skip_existing=False)

    assert results == [
        Pushed(a.id, a.created_at, True),
        Pushed(a.id, a.created_at, False),
        Pushed(other_queue.id, NOW, True),
        Pushed(plain.id, NOW, True),
    ]
    assert conn.names == ["claim_dedup_keys", "push_batch"]
    assert conn.params("claim_dedup_keys")[0] == NOW_TEXT
    assert claimed(conn) == [
        {"n": 0, "queue": "orders", "key": "k", "id": str(a.id), "created_at": "2026-02-01T00:00:00.000000"},
        {"n": 2, "queue": "Orders", "key": "k", "id": str(other_queue.id), "created_at": NOW_TEXT},
    ]
    assert {item["n"]: item["dedup_key"] for item in pushed(conn)} == {0: "k", 1: "k", 2: None}
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_an_item_whose_key_another_item_holds_is_its_duplicate_and_is_not_inserted(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    original = uuid4()
    held = datetime(2026, 2, 1, 8, 0, 0, 5)
    dup = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, original, held, False)))

    assert await store.push_batch([dup], skip_existing=False) == [
        Pushed(original, held.replace(tzinfo=UTC), False)
    ]
    assert conn.names == ["claim_dedup_keys"], "nothing left to insert"
    assert conn.commits == 1


async def test_a_retried_push_with_its_own_id_and_key_is_a_duplicate_not_a_conflict(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, item.id, NOW, False)))

    assert await store.push_batch([item], skip_existing=False) == [Pushed(item.id, NOW, False)]
    assert "push_batch" not in conn.names


async def test_a_taken_key_whose_id_exists_refuses_the_batch_and_rolls_the_claim_back(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = NewItem(uuid4(), "orders", "1", NOW, dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, item.id, NOW, True)))
    conn.reply("push_batch", ids())

    with pytest.raises(ItemExists):
        await store.push_batch([item], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1)


# --- remembered ids: a producer's id without a dedup_key is the push's idempotency key ------------


def given(queue: str = "orders", payload: str = "1", item_id: UUID | None = None, **fields: Any) -> NewItem:
    """An item whose id its producer chose."""
    return NewItem(item_id or uuid4(), queue, payload, NOW, id_given=True, **fields)


HELD_AT = datetime(2026, 2, 1, 8, 0, 0, 5, tzinfo=UTC)  # when the holding item was created


async def test_a_producers_id_is_sent_to_be_remembered_unless_a_dedup_key_decides(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    remembered = given()
    keyed = given(dedup_key="k")  # the key decides; its id is not remembered
    made = NewItem(uuid4(), "orders", "3", NOW)  # the service's id: nobody retries with it
    conn.reply("claim_dedup_keys", claim_rows((1, keyed.id, NOW, True)))
    conn.reply("push_batch", ids(remembered.id, keyed.id, made.id))

    results = await store.push_batch([remembered, keyed, made], skip_existing=False)

    assert results == [Pushed(i.id, NOW, True) for i in (remembered, keyed, made)]
    assert {item["id"]: item["remember"] for item in pushed(conn)} == {
        str(remembered.id): 1,
        str(keyed.id): 0,
        str(made.id): 0,
    }
    assert conn.names == ["claim_dedup_keys", "push_batch"], "the id is claimed in push_batch's round trip"
    assert (conn.commits, conn.rollbacks) == (1, 0)


@pytest.mark.parametrize("skip_existing", [False, True])
async def test_a_retry_whose_id_its_queue_holds_is_the_holders_duplicate_not_a_conflict(
    fake: tuple[MssqlStore, FakeConnection], skip_existing: bool
) -> None:
    # The holder: the first attempt's item (live or dead), or its claim within the queue's window.
    store, conn = fake
    retry, new = given(), given()
    conn.reply("push_batch", ids(new.id, held=[(retry.id, "orders", HELD_AT)]))

    results = await store.push_batch([retry, new], skip_existing=skip_existing)

    assert results == [Pushed(retry.id, HELD_AT, False), Pushed(new.id, NOW, True)]
    assert results[0] is not None
    assert results[0].created_at.tzinfo is UTC
    assert (conn.commits, conn.rollbacks) == (1, 0), "a retry is not a refusal: the batch commits"


@pytest.mark.parametrize("holder", ["mail", "Orders"], ids=["another queue", "another case"])
async def test_an_id_another_queue_holds_refuses_the_whole_batch(
    fake: tuple[MssqlStore, FakeConnection], holder: str
) -> None:
    store, conn = fake
    taken, new = given(), given()
    conn.reply("push_batch", ids(new.id, held=[(taken.id, holder, HELD_AT)]))

    with pytest.raises(ItemExists):
        await store.push_batch([new, taken], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1), "the new item and its claim are rolled back"


async def test_with_skip_existing_an_id_another_queue_holds_is_none_and_the_rest_commit(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    taken, retry, new = given(), given(), given()
    conn.reply(
        "push_batch",
        ids(new.id, held=[(taken.id, "mail", HELD_AT), (retry.id, "orders", HELD_AT)]),
    )

    results = await store.push_batch([taken, retry, new], skip_existing=True)

    assert results == [None, Pushed(retry.id, HELD_AT, False), Pushed(new.id, NOW, True)]
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_an_id_that_is_not_remembered_is_refused_whatever_holds_it(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # With a dedup_key, or made by the service, an existing id is ItemExists, as before; the server
    # names holders of remembered ids only, and the store reads none for the others.
    store, conn = fake
    keyed = given(dedup_key="k")
    conn.reply("claim_dedup_keys", claim_rows((0, keyed.id, NOW, True)))
    conn.reply("push_batch", ids(held=[(keyed.id, "orders", HELD_AT)]))

    with pytest.raises(ItemExists):
        await store.push_batch([keyed], skip_existing=False)

    assert conn.rollbacks == 1


async def test_a_remembered_id_nothing_is_said_to_hold_is_refused(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item = given()
    conn.reply("push_batch", ids(), ids())

    with pytest.raises(ItemExists):
        await store.push_batch([item], skip_existing=False)
    assert await store.push_batch([item], skip_existing=True) == [None]


async def test_a_remembered_id_repeated_in_one_call_is_sent_once_and_its_repeats_follow_it(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # Two single pushes of one item that arrive together (a client's retry racing its first attempt).
    store, conn = fake
    item_id = uuid4()
    first = given(item_id=item_id, payload='"first"')
    again = NewItem(item_id, "orders", '"again"', NOW + timedelta(seconds=1), id_given=True)
    conn.reply("push_batch", ids(item_id))

    results = await store.push_batch([first, again], skip_existing=False)

    assert results == [Pushed(item_id, NOW, True), Pushed(item_id, NOW, False)]
    assert [(item["id"], item["payload"], item["remember"]) for item in pushed(conn)] == [
        (str(item_id), '"first"', 1)
    ]


async def test_a_remembered_id_given_again_for_another_queue_in_one_call_is_refused(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    first, other = given(item_id=item_id), given("mail", item_id=item_id)

    with pytest.raises(ItemExists):
        await store.push_batch([first, other], skip_existing=False)
    assert conn.executed == [], "refused before asking the server"

    conn.reply("push_batch", ids(item_id))
    assert await store.push_batch([first, other], skip_existing=True) == [Pushed(item_id, NOW, True), None]
    assert len(pushed(conn)) == 1


async def test_the_claims_are_sent_in_the_id_indexs_order_with_the_items(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # push_batch reads them into a table keyed by id; the items' order is the id index's already.
    store, conn = fake
    items = [given(payload=str(n)) for n in range(20)]
    conn.reply("push_batch", ids(*(item.id for item in items)))

    await store.push_batch(items, skip_existing=True)

    sent = pushed(conn)
    assert [UUID(item["id"]) for item in sent] == sorted((item.id for item in items), key=index_order)
    assert {item["remember"] for item in sent} == {1}
    assert len(conn.params("push_batch")) == 2, "still the clock and the items"
