"""Flow limits on SQL Server, by shape and binding (no server runs here): the columns and their checks
match SQLite's; a limited queue's pop locks its row to the end of the transaction (UPDLOCK,
HOLDLOCK), counts the leases with locking reads in a batch of its own, claims only what the limits
leave and takes its tokens; the one-batch pop claims nothing of a limited queue unless told the
limits were counted."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from uuid import uuid4

import pytest
from simplequeue.domain import QueueSettings
from simplequeue.domain.keys import KeySettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.store.limits import FlowState
from simplequeue.store.migrations import load_migrations
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    NOW,
    NOW_TEXT,
    FakeConnection,
    Result,
    hints,
    index_hint,
    item_row,
    limits_row,
    locked_keys,
    result,
    statements,
)
from tests.mssql.test_binding import PARAMETERS
from tests.mssql.test_schema import added_columns, constraint

FLOW = next(m for m in load_migrations("mssql") if m.name == "flow_limits")
SQLITE_FLOW = next(m for m in load_migrations("sqlite") if m.name == "flow_limits")


@pytest.fixture
def careful(
    fake: tuple[MssqlStore, FakeConnection], monkeypatch: pytest.MonkeyPatch
) -> tuple[MssqlStore, FakeConnection]:
    store, conn = fake
    monkeypatch.setattr(store.flow, "careful", lambda queue: True)  # as for a queue not seen lately
    return store, conn


def test_the_columns_are_sqlites_with_its_checks() -> None:
    columns = added_columns("sq_queues", (FLOW,))
    assert set(columns) == {
        "max_leased",
        "rate_per_second",
        "rate_burst",
        "rate_tokens",
        "rate_at",
        "limited",
    }
    for name in ("max_leased", "rate_per_second", "rate_burst"):
        check = constraint(columns[name], exp.CheckColumnConstraint)
        assert check is not None, name
        assert f"CHECK ({check.this.sql('tsql')})" in SQLITE_FLOW.sql, name
    assert columns["rate_at"].args["kind"].sql("tsql") == "DATETIME2(7)"  # as visible_at
    default = constraint(columns["limited"], exp.DefaultColumnConstraint)
    assert default is not None
    assert default.this.name == "0"
    assert set(re.findall(r"ADD COLUMN (\w+)", SQLITE_FLOW.sql)) == set(columns)


def test_the_queue_row_is_locked_to_the_end_of_the_transaction() -> None:
    [select] = statements("lock_limits")
    assert isinstance(select, exp.Select)
    assert hints(select.find(exp.Table)) == ["HOLDLOCK", "ROWLOCK", "UPDLOCK"]
    assert "SYSUTCDATETIME()" in select.sql("tsql")  # the bucket's time: when the lock was had


async def test_a_queue_limited_per_key_alone_takes_no_lock_on_its_row(
    careful: tuple[MssqlStore, FakeConnection],
) -> None:
    [select] = statements("queue_limits")
    assert hints(select.find(exp.Table)) == []  # its keys' turns instead (lock_keys)
    store, conn = careful
    conn.reply("queue_limits", limits_row(max_leased_per_key=2))
    conn.reply("add_keys", result(added=0))
    assert await store.pop("orders", 10, 30) == []
    assert conn.names == ["queue_limits", "lock_keys", "add_keys", "wait_keys"]  # an empty queue


def test_the_leases_are_counted_with_locking_reads_up_to_the_limit() -> None:
    [select] = statements("count_leased")
    inner = select.find(exp.Subquery).this
    table = inner.find(exp.Table)
    assert "READCOMMITTEDLOCK" in hints(table)  # committed rows, not row versions under RCSI
    assert "INDEX(sq_items_lapsed)" in index_hint(table)
    assert "TOP (@cap)" in inner.sql("tsql")
    assert "i.visible_at > @now" in inner.args["where"].sql("tsql")


async def test_a_limited_pop_claims_what_is_left_and_takes_its_tokens(
    careful: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = careful
    conn.reply("queue_limits", limits_row(max_leased=5, rate_per_second=2.0))
    conn.reply("lock_limits", limits_row(max_leased=5, rate_per_second=2.0, rate_tokens=1.5, rate_at=NOW))
    conn.reply("count_leased", result(leased=2))
    conn.reply("pop", Result(["seq"], []))
    conn.reply("take_tokens", result(changed=1))

    assert await store.pop("orders", 10, 30) == []

    assert conn.names == ["queue_limits", "lock_limits", "count_leased", "pop", "take_tokens"]
    assert conn.params("count_leased") == (NOW_TEXT, "orders", 5)
    # max_leased leaves 3, the bucket 1 (1.5 tokens): the pop asks for 1, told the limits were counted.
    _, queue, _, limits_checked, max_items, _ = conn.params("pop")
    assert (queue, limits_checked, max_items) == ("orders", 1, 1)
    # Nothing was handed out: the tokens stay as counted, at the lock's time.
    assert conn.params("take_tokens") == (
        "orders",
        "1.5",
        NOW.replace(tzinfo=None).isoformat(timespec="microseconds"),
    )
    assert conn.commits == 1


async def test_a_pop_with_no_room_sends_no_claim(careful: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = careful
    conn.reply("queue_limits", limits_row(max_leased=2))
    conn.reply("lock_limits", limits_row(max_leased=2))
    conn.reply("count_leased", result(leased=2))

    assert await store.pop("orders", 10, 30) == []

    assert conn.names == ["queue_limits", "lock_limits", "count_leased"]
    assert store.flow.held_by("orders") == "max_leased"


async def test_a_queue_without_limits_pops_at_once_after_the_look(
    careful: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = careful
    conn.reply("queue_limits", limits_row())
    conn.reply("pop", Result(["seq"], []))

    await store.pop("orders", 10, 30)

    assert conn.names == ["queue_limits", "pop"]
    assert conn.params("pop")[3:5] == (1, 10)


async def test_a_rate_per_key_is_taken_by_the_queue_and_by_a_key(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("put_queue", result(created=1))
    conn.reply("put_key", result(fairness_key="acme"))
    await store.put_queue("q", QueueSettings(limits=FlowLimits(rate_per_key_per_second=2.5)))
    await store.put_key("q", "acme", KeySettings(rate_per_second=0.5))
    assert conn.names == ["put_queue", "put_key"]
    put_queue = dict(zip(PARAMETERS["put_queue"], conn.params("put_queue"), strict=True))
    assert (put_queue["rate_per_key_per_second"], put_queue["limited"]) == ("2.5", 1)
    assert conn.params("put_key") == ("q", "acme", "1.0", "", "0.5")


def leased_rows(*found: tuple[int, str]) -> Result:
    """lease_keyed's rows: (seq, fairness_key) each, leased."""
    made = [item_row(uuid4(), status="leased", lease_token=uuid4(), fairness_key=key) for _, key in found]
    columns = ["seq", *made[0].columns, "fair_rank", "rank_priority"]
    return Result(columns, [(seq, *r.rows[0], 0.0, 0) for (seq, _), r in zip(found, made, strict=True)])


async def test_a_keyed_pop_takes_each_keys_tokens_and_writes_its_bucket_back(
    fake: tuple[MssqlStore, FakeConnection], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, conn = fake
    store.flow = FlowState(monotonic=lambda: 100.0)
    monkeypatch.setattr(store.flow, "careful", lambda queue: True)
    conn.reply("queue_limits", limits_row(rate_per_key_per_second=2.0))
    quarter_ago = (NOW - timedelta(seconds=0.25)).replace(tzinfo=None)
    walked = [
        ("a", 11, 1, None, 0, 2.0, 0.5, quarter_ago),  # 0.5 + 0.25 s at 2/s: 1 token
        ("b", 12, 2, None, 0, 2.0, None, None),  # never counted: full, 2 tokens
        ("a", 13, 3, None, 0, 2.0, 0.5, quarter_ago),
        ("b", 14, 4, None, 0, 2.0, None, None),
        ("b", 15, 5, None, 0, 2.0, None, None),
        ("c", 16, 6, None, 0, 1.0, 0.2, NOW.replace(tzinfo=None)),  # its own rate: no whole token
    ]
    conn.reply("lock_keys", locked_keys(*walked))
    conn.reply("lease_keyed", leased_rows((11, "a"), (12, "b"), (14, "b")))
    conn.reply("take_key_tokens", result(changed=3))

    popped = await store.pop("orders", 10, 30)

    assert len(popped) == 3
    assert conn.names == ["queue_limits", "lock_keys", "lease_keyed", "take_key_tokens"]
    assert "[11, 12, 14]" in conn.params("lease_keyed")  # a: 1 token, b: 2, c: none
    queue, buckets = conn.params("take_key_tokens")
    assert queue == "orders"
    # Each bucket less what the pop took of its key, counted at the batch's clock.
    assert json.loads(buckets) == [
        {"key": "a", "tokens": "0.0", "at": NOW_TEXT},
        {"key": "b", "tokens": "0.0", "at": NOW_TEXT},
        {"key": "c", "tokens": "0.2", "at": NOW_TEXT},
    ]
    assert conn.commits == 1
    # Cut short by the keys' rates: held until the first dry bucket (a's, b's) holds a token again.
    assert store.flow.held_by("orders") == "rate_per_key"
    assert store.flow.hold_seconds("orders") == 0.5


async def test_a_keyed_pop_whose_keys_have_no_tokens_leases_nothing_and_keeps_their_buckets(
    careful: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = careful
    conn.reply("queue_limits", limits_row(rate_per_key_per_second=1.0))
    conn.reply("lock_keys", locked_keys(("a", 11, 1, 3, 1, 1.0, 0.25, NOW.replace(tzinfo=None))))
    conn.reply("take_key_tokens", result(changed=1))

    assert await store.pop("orders", 10, 30) == []

    assert conn.names == ["queue_limits", "lock_keys", "take_key_tokens"]
    assert json.loads(conn.params("take_key_tokens")[1]) == [{"key": "a", "tokens": "0.25", "at": NOW_TEXT}]
    assert store.flow.held_by("orders") == "rate_per_key"  # its rate, not its cap (room 2 of 3)


async def test_a_keyed_pop_leases_up_to_each_keys_room_of_what_it_walked(
    careful: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = careful
    conn.reply("queue_limits", limits_row(max_leased_per_key=2))
    walked = [
        ("a", 11, 1, 2, 1),
        ("b", 12, 2, 2, 0),
        ("a", 13, 3, 2, 1),
        ("b", 14, 4, 2, 0),
        ("b", 15, 5, 2, 0),
    ]
    conn.reply("lock_keys", locked_keys(*walked))
    conn.reply("lease_keyed", Result(["seq"], []))
    await store.pop("orders", 10, 30)
    assert conn.names == ["queue_limits", "lock_keys", "lease_keyed"]  # no rate: no bucket written
    assert "[11, 12, 14]" in conn.params("lease_keyed")  # a: room 1 of 2; b: room 2 of 3
    assert store.flow.held_by("orders") == "max_leased_per_key"  # cut short by the keys' caps


async def test_a_key_whose_items_went_between_the_walk_and_its_lock_gives_none_and_cuts_nothing(
    careful: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = careful
    conn.reply("queue_limits", limits_row(max_leased_per_key=2))
    # lock_keys reads the keys' items after their locks: a's went to a pop that committed in between.
    conn.reply("lock_keys", locked_keys(("a", None, 1, 2, 2), ("b", 12, 2, 2, 0)))
    conn.reply("lease_keyed", Result(["seq"], []))
    await store.pop("orders", 10, 30)
    assert conn.names == ["queue_limits", "lock_keys", "lease_keyed"]
    assert "[12]" in conn.params("lease_keyed")
    assert store.flow.held_by("orders") is None  # no key had more items than room
