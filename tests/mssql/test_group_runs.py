"""pop(group_runs=True) on SQL Server: after the pop batch, lease_runs leases the runs behind the
group heads it took, in the same transaction: its shape (a group's next live items in seq order,
as long as each is due, ready or a lease run out before its last attempt, at most the room left,
locked from the read to the UPDATE) and how the store binds it."""

from __future__ import annotations

import json
from datetime import datetime
from uuid import UUID, uuid4

from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import FakeConnection, Result, hints, index_hint, parse
from tests.mssql.test_pop import POP_COLUMNS as COLUMNS

CREATED = datetime(2026, 2, 1, 8, 0, 0)
UNTIL = datetime(2026, 2, 1, 8, 1, 0)


def runs_update() -> exp.Update:
    trees = parse(Q["lease_runs"].sql)
    update = trees[-1]
    assert isinstance(update, exp.Update)
    return update


def test_lease_runs_reads_each_groups_next_live_items_in_seq_order_locked_until_leased() -> None:
    update = runs_update()
    [cte] = list(update.find_all(exp.CTE))
    assert cte.alias == "runs"
    inner = cte.this.find(exp.Subquery).this
    assert isinstance(inner, exp.Select)
    tables = {t.alias: t for t in inner.find_all(exp.Table)}
    follower = tables["y"]
    assert hints(follower) == ["INDEX", "ROWLOCK", "UPDLOCK"]
    assert "sq_items_group" in index_hint(follower)
    assert "READPAST" not in hints(follower), "an item behind a live head is nobody else's to take"
    sql = inner.sql("tsql")
    assert "y.queue = h.queue AND y.group_key = h.group_key AND y.seq > h.seq" in sql
    assert "y.status IN ('ready', 'leased')" in sql  # live items: a dead one neither counts nor blocks
    # unbroken: every item from the head's next up to this one is due: ready, or a lease that ran
    # out before its last attempt (a lapsed last attempt is dead already and ends the run), and
    # within the queue's retention (one past it is never handed out, and ends the run).
    due = (
        "(y.status = 'ready' OR (y.status = 'leased' AND y.attempts < @max_attempts))"
        " AND y.visible_at <= @now AND y.created_at >= @retained"
    )
    assert f"MIN(IIF({due}, 1, 0)) OVER (PARTITION BY y.group_key" in sql
    outer = cte.this
    assert outer.args["where"].this.sql("tsql") == "r.unbroken = 1 AND r.n <= @room"
    assert [o.sql("tsql") for o in outer.args["order"].expressions] == ["r.seq"]
    assert outer.args["limit"].expression.sql("tsql") == "@room"  # TOP (@room)


def test_lease_runs_leases_only_items_still_due_with_the_pops_token() -> None:
    update = runs_update()
    assigned = {eq.this.name: eq.expression.sql("tsql") for eq in update.expressions}
    assert assigned["status"] == "'leased'"
    assert assigned["lease_token"] == "CAST(? AS UNIQUEIDENTIFIER)"
    assert assigned["visible_at"] == "DATEADD(SECOND, @lease_seconds, @now)"
    assert update.args["where"].this.sql("tsql") == "i.status IN ('ready', 'leased')"
    output = [c.sql("tsql") for c in update.args["returning"].expressions]
    assert output == [f"inserted.{c}" for c in COLUMNS]


def row(seq: int, group: str | None, token: str) -> tuple[object, ...]:
    return (
        seq,
        str(uuid4()).upper(),
        "jobs.fifo",
        '"x"',
        CREATED,
        1,
        token,
        UNTIL,
        0,
        group,
        None,
        None,
        0.0,
        0,
    )


async def test_a_pop_for_runs_leases_the_runs_behind_its_group_heads_in_its_transaction(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    token = str(uuid4()).upper()
    conn.reply("pop", Result(COLUMNS, [row(3, "g", token), row(5, None, token), row(8, "h", token)]))
    conn.reply("lease_runs", Result(COLUMNS, [row(4, "g", token), row(9, "h", token)]))

    items = await store.pop("jobs.fifo", 10, 30, group_runs=True)

    assert [item.seq for item in items] == [3, 4, 5, 8, 9]
    [lease_token] = {item.lease_token for item in items}
    assert lease_token == UUID(token)
    values = dict(zip(Q["lease_runs"].params, conn.params("lease_runs"), strict=True))
    assert json.loads(values["heads"]) == [3, 8]  # the grouped heads only
    assert (values["room"], values["queue"], values["lease_seconds"]) == (7, "jobs.fifo", "30")
    assert values["lease_token"] == dict(zip(Q["pop"].params, conn.params("pop"), strict=True))["lease_token"]
    assert conn.commits == 1  # one transaction: the heads and their runs


async def test_a_plain_pop_or_a_full_one_asks_for_no_runs(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    token = str(uuid4()).upper()
    conn.reply("pop", Result(COLUMNS, [row(3, "g", token)]))
    await store.pop("jobs.fifo", 10, 30)
    await store.pop("jobs.fifo", 1, 30, group_runs=True)
    assert [e.name for e in conn.executed if e.name in ("pop", "lease_runs")] == ["pop", "pop"]
