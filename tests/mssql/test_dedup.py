"""Idempotent pushes on SQL Server: dedup keys and remembered ids (a producer's id without a
dedup_key is the push's idempotency key) are claimed by dbo.sq_push_items in the push's one round
trip (its statements: test_push.py); here, what the store sends for them and how it reads the
procedure's answers: a duplicate's holder, a retry, a refusal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from simplequeue.domain import ItemExists, NewItem, Pushed
from simplequeue.store.migrations import load_routines, split_statements
from simplequeue.store.mssql.store import MssqlStore

from tests.mssql.helpers import NOW, NOW_TEXT, FakeConnection, pushed
from tests.mssql.test_push_procedures import answers

HELD_AT = datetime(2026, 2, 1, 8, 0, 0, 5, tzinfo=UTC)  # when the holding item was created


def given(queue: str = "orders", payload: str = "1", item_id: UUID | None = None, **fields: Any) -> NewItem:
    """An item whose id its producer chose."""
    return NewItem(item_id or uuid4(), queue, payload, NOW, id_given=True, **fields)


async def test_dedup_keys_go_with_their_items_in_one_round_trip_and_repeats_answer_as_duplicates(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    a = NewItem(uuid4(), "orders", "1", datetime(2026, 2, 1, tzinfo=UTC), dedup_key="k")
    again = NewItem(uuid4(), "orders", "2", NOW, dedup_key="k")  # follows a
    other_queue = NewItem(uuid4(), "Orders", "3", NOW, dedup_key="k")
    plain = NewItem(uuid4(), "orders", "4", NOW)
    conn.reply(
        "push_batch",
        answers(
            (0, a.id, a.created_at, True),
            (1, a.id, a.created_at, False),
            (2, other_queue.id, NOW, True),
            (3, plain.id, NOW, True),
        ),
    )

    results = await store.push_batch([a, again, other_queue, plain], skip_existing=False)

    assert results == [
        Pushed(a.id, a.created_at, True),
        Pushed(a.id, a.created_at, False),
        Pushed(other_queue.id, NOW, True),
        Pushed(plain.id, NOW, True),
    ]
    assert conn.names == ["push_batch"], "no separate claim: the procedure claims the keys first"
    assert conn.params("push_batch")[0] == NOW_TEXT
    assert [(item["n"], item["queue"], item["dedup_key"]) for item in pushed(conn)] == [
        (0, "orders", "k"),
        (1, "orders", "k"),
        (2, "Orders", "k"),
        (3, "orders", None),
    ]
    assert pushed(conn)[0]["created_at"] == "2026-02-01T00:00:00.000000"
    assert (conn.commits, conn.rollbacks) == (1, 0)


@pytest.mark.parametrize("original", [uuid4(), None], ids=["another item", "its own id"])
async def test_an_item_whose_key_another_item_holds_is_its_duplicate(
    fake: tuple[MssqlStore, FakeConnection], original: UUID | None
) -> None:
    # Also a retried push with its own id and key: a duplicate of itself, not a conflict.
    store, conn = fake
    dup = given(dedup_key="k")
    holder = original or dup.id
    conn.reply("push_batch", answers((0, holder, HELD_AT, False)))

    [result] = await store.push_batch([dup], skip_existing=False)

    assert result == Pushed(holder, HELD_AT, False)
    assert result is not None
    assert result.created_at.tzinfo is UTC
    assert conn.commits == 1


async def test_a_producers_id_is_sent_to_be_remembered_unless_a_dedup_key_decides(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    remembered = given()
    keyed = given(dedup_key="k")  # the key decides; its id is not remembered
    made = NewItem(uuid4(), "orders", "3", NOW)  # the service's id: nobody retries with it
    conn.reply(
        "push_batch", answers(*((n, i.id, NOW, True) for n, i in enumerate([remembered, keyed, made])))
    )

    results = await store.push_batch([remembered, keyed, made], skip_existing=False)

    assert results == [Pushed(i.id, NOW, True) for i in (remembered, keyed, made)]
    assert {item["id"]: item["remember"] for item in pushed(conn)} == {
        str(remembered.id): 1,
        str(keyed.id): 0,
        str(made.id): 0,
    }
    assert len(conn.params("push_batch")) == 2, "still the clock and the items"


@pytest.mark.parametrize("skip_existing", [False, True])
async def test_a_retry_whose_id_its_queue_holds_is_the_holders_duplicate_not_a_conflict(
    fake: tuple[MssqlStore, FakeConnection], skip_existing: bool
) -> None:
    store, conn = fake
    retry, new = given(), given()
    conn.reply("push_batch", answers((0, retry.id, HELD_AT, False), (1, new.id, NOW, True)))

    results = await store.push_batch([retry, new], skip_existing=skip_existing)

    assert results == [Pushed(retry.id, HELD_AT, False), Pushed(new.id, NOW, True)]
    assert (conn.commits, conn.rollbacks) == (1, 0), "a retry is not a refusal: the batch commits"


async def test_an_id_another_queue_holds_refuses_the_whole_batch(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    taken, new = given(), given()
    conn.reply("push_batch", answers((0, new.id, NOW, True), (1, taken.id, NOW, None)))

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
        answers((0, taken.id, NOW, None), (1, retry.id, HELD_AT, False), (2, new.id, NOW, True)),
    )

    results = await store.push_batch([taken, retry, new], skip_existing=True)

    assert results == [None, Pushed(retry.id, HELD_AT, False), Pushed(new.id, NOW, True)]
    assert (conn.commits, conn.rollbacks) == (1, 0)


async def test_a_remembered_id_repeated_in_one_call_is_sent_as_given_and_answered_by_the_procedure(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # Two single pushes of one item that arrive together (a client's retry racing its first attempt):
    # the procedure's rules make the second follow the first.
    store, conn = fake
    item_id = uuid4()
    first = given(item_id=item_id, payload='"first"')
    again = NewItem(item_id, "orders", '"again"', NOW + timedelta(seconds=1), id_given=True)
    conn.reply("push_batch", answers((0, item_id, NOW, True), (1, item_id, NOW, False)))

    results = await store.push_batch([first, again], skip_existing=False)

    assert results == [Pushed(item_id, NOW, True), Pushed(item_id, NOW, False)]
    assert [(item["n"], item["payload"], item["remember"]) for item in pushed(conn)] == [
        (0, '"first"', 1),
        (1, '"again"', 1),
    ]


async def test_a_remembered_id_given_again_for_another_queue_in_one_call_is_refused(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    first, other = given(item_id=item_id), given("mail", item_id=item_id)
    refused = answers((0, item_id, NOW, True), (1, item_id, NOW, None))
    conn.reply("push_batch", refused, refused)

    with pytest.raises(ItemExists):
        await store.push_batch([first, other], skip_existing=False)
    assert await store.push_batch([first, other], skip_existing=True) == [Pushed(item_id, NOW, True), None]


def _push_items_procedure() -> list[str]:
    """The code lines of dbo.sq_push_items, as procedures.sql creates it."""
    batches = split_statements(load_routines("mssql") or "")
    [batch] = [b for b in batches if "CREATE OR ALTER PROCEDURE dbo.sq_push_items" in b]
    return [line for line in batch.splitlines() if line.strip() and not line.lstrip().startswith("--")]


def test_a_queue_counting_its_window_from_the_send_starts_it_at_the_claim() -> None:
    # Each key carries the window its queue starts at the push (NULL for 'finish': set when the
    # item finishes), written by both the take-over of an expired key and the insert of a new one.
    after = _push_items_procedure()
    for line in (
        "INSERT INTO @keys (n, queue, dedup_key, item_id, created_at)",
        "SELECT i.n, i.queue, i.dedup_key, i.id, i.created_at",
        "SET item_id = c.item_id, created_at = c.created_at, expires_at = NULL",
        "SELECT c.queue, c.dedup_key, c.item_id, c.created_at, NULL",
    ):
        assert line not in after, line
    for line in (
        "    expires_at DATETIME2(7) NULL,",
        "INSERT INTO @keys (n, queue, dedup_key, item_id, created_at, expires_at)",
        "SELECT i.n, i.queue, i.dedup_key, i.id, i.created_at,",
        "       IIF(q.dedup_window_from = 'send', DATEADD(SECOND, q.dedup_window_seconds, @now), NULL)",
        "JOIN dbo.sq_queues AS q ON q.name = i.queue",
        "SET item_id = c.item_id, created_at = c.created_at, expires_at = c.expires_at",
        "SELECT c.queue, c.dedup_key, c.item_id, c.created_at, c.expires_at",
    ):
        assert line in after, line
    text = "\n".join(after)
    # The queue exists when its keys are claimed: the procedure creates missing queues first.
    assert text.index("INSERT INTO dbo.sq_queues (name, created_at)") < text.index("INSERT INTO @keys")
