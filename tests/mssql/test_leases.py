"""An item under lease: extend moves a live lease, fail is one compare-and-set that dies or backs
off, get_item judges an expired lease by the server's clock; statements, then binding and rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from simplequeue.domain import (
    Failure,
    ItemDead,
    ItemNotFound,
    ItemStatus,
    LeaseExpired,
    LeaseMismatch,
    QueueError,
)
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp

from tests.mssql.helpers import (
    CLOCK,
    HISTORY_COLUMNS,
    ITEM_COLUMNS,
    NOW,
    NOW_TEXT,
    FakeConnection,
    Result,
    Results,
    declared,
    history_values,
    item_row,
    placeholders,
    result,
    statements,
)


@pytest.mark.parametrize("name", ["get_item", "extend", "fail", "list_dead"])
def test_item_rows_carry_every_column_item_view_reads(name: str) -> None:
    *_, select = statements(name)
    assert isinstance(select, exp.Select)
    names = [col.alias_or_name for col in select.expressions]
    assert [n for n in names if n != "seq"] == ITEM_COLUMNS
    assert "JOIN dbo.sq_queues AS q ON q.name = i.queue" in select.sql("tsql")


def test_extend_moves_only_a_live_lease_with_its_token_then_reads_the_item() -> None:
    update, select = statements("extend")
    assert isinstance(update, exp.Update)
    assert placeholders(Q["extend"].sql) == 4
    assert update.args["where"].this.sql("tsql") == (
        "id = @id AND status = 'leased' AND lease_token = @token AND visible_at > @now"
    )
    assert [eq.sql("tsql") for eq in update.expressions] == [
        "visible_at = DATEADD(SECOND, CAST(? AS INTEGER), @now)"
    ]
    assert [col.sql("tsql") for col in update.args["returning"].expressions] == ["inserted.seq"]
    assert select.args["where"].this.sql("tsql") == "i.id = @id"


def fail_statements() -> tuple[exp.Update, exp.Insert, exp.Select, exp.Select]:
    # Between the history record and the answers: the move to a dead-letter target
    # (test_dead_letters.py).
    update, history, _dead, _delete, _windows, _ids, _insert, failed, item = statements("fail")
    assert isinstance(update, exp.Update)
    assert isinstance(history, exp.Insert)
    assert isinstance(failed, exp.Select)
    assert isinstance(item, exp.Select)
    return update, history, failed, item


def test_fail_is_one_compare_and_set_that_dies_or_backs_off() -> None:
    update, *_ = fail_statements()
    assert placeholders(Q["fail"].sql) == 7
    sql = update.sql("tsql")
    assert update.args["where"].this.sql("tsql") == (
        "i.id = @id AND i.status <> 'dead' AND (@token IS NULL OR i.lease_token = @token) "
        "AND NOT (i.status = 'leased' AND i.visible_at <= @now AND i.attempts >= q.max_attempts)"
    )
    assert "IIF(@retry = 0 OR i.attempts >= q.max_attempts, 1, 0) AS dies" in sql
    # min(cap, base * factor^(min(max(attempts, 1) - 1, 60))) * (1 - jitter * draw), unless retry_after
    assert "IIF(i.attempts > 61, 60, IIF(i.attempts > 1, i.attempts - 1, 0)) AS exponent" in sql
    assert "q.backoff_base_seconds * POWER(q.backoff_factor, e.exponent) AS backoff" in sql
    assert (
        "COALESCE(@retry_after, IIF(b.backoff < q.backoff_cap_seconds, b.backoff, q.backoff_cap_seconds)"
        " * (1 - q.backoff_jitter * @draw)) AS delay"
    ) in sql
    assignments = {eq.this.name: eq.expression.sql("tsql") for eq in update.expressions}
    assert assignments["status"] == "CASE WHEN f.dies = 1 THEN 'dead' ELSE 'ready' END"
    assert assignments["died_at"] == "CASE WHEN f.dies = 1 THEN @now END"
    assert assignments["lease_token"] == "NULL"
    assert assignments["visible_at"] == (
        "CASE WHEN f.dies = 1 THEN i.visible_at "
        "ELSE DATEADD(MICROSECOND, s.micros, DATEADD(SECOND, s.whole, @now)) END"
    )
    assert "JSON_MODIFY(i.errors, 'append $'" in assignments["errors"]
    for variable in ("@retry_after FLOAT = CAST(NULLIF(?, N'') AS FLOAT)", "@draw FLOAT = CAST(? AS FLOAT)"):
        assert variable in declared("fail")


def test_fail_writes_a_deaths_history_record_in_the_same_batch() -> None:
    update, history, failed, _ = fail_statements()
    assert update.args["returning"].args["into"].name == "failed"
    values = history_values(history)
    assert list(values) == HISTORY_COLUMNS
    assert (values["outcome"], values["finished_at"], values["last_error"]) == (
        "'dead'",
        "d.died_at",
        "@error",
    )
    # Only for a death, in a queue that keeps history (retention above 0).
    assert history.expression.args["where"].this.sql("tsql") == "d.status = 'dead' AND d.keeps_history = 1"
    # The UPDATE's own join to the queue row decides whether the payload is kept, and whether any
    # record is; the INSERT reads sq_queues no second time.
    assert [col.sql("tsql") for col in update.args["returning"].expressions][-2:] == [
        "CASE WHEN q.history_payload = 1 THEN inserted.payload END",
        "IIF(q.retention_seconds > 0, 1, 0)",
    ]
    assert values["payload"] == "d.payload"
    assert history.expression.args.get("joins") is None
    assert failed.sql("tsql") == "SELECT status FROM @failed"


# --- binding and rows -----------------------------------------------------------------------------


async def test_extend_binds_the_lease_and_returns_the_item(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    until = datetime(2026, 3, 1, 12, 1, 0, 123456)
    conn.reply(
        "extend",
        Results([result(seq=7), item_row(item_id, status="leased", lease_token=token, visible_at=until)]),
    )

    view = await store.extend(item_id, token, 60)

    assert conn.params("extend") == (NOW_TEXT, str(item_id), str(token), 60)
    assert "SET visible_at = DATEADD(SECOND, CAST(60 AS INT), @now)" in conn.inlined("extend")
    assert (view.status, view.lease_expires_at) == (ItemStatus.LEASED, until.replace(tzinfo=UTC))
    assert conn.commits == 1


async def test_extend_of_a_lease_that_ran_out_is_lease_expired(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    expired = NOW.replace(tzinfo=None) - timedelta(seconds=1)
    conn.reply(
        "extend",
        Results(
            [Result(["seq"], []), item_row(item_id, status="leased", lease_token=token, visible_at=expired)]
        ),
    )

    with pytest.raises(LeaseExpired):
        await store.extend(item_id, token, 60)


async def test_extend_of_a_lease_that_ran_out_on_its_last_attempt_is_item_dead(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    current = item_row(
        item_id, status="leased", lease_token=token, visible_at=NOW.replace(tzinfo=None), max_attempts=1
    )
    conn.reply("extend", Results([Result(["seq"], []), current]))

    with pytest.raises(ItemDead):
        await store.extend(item_id, token, 60)


@pytest.mark.parametrize(
    ("status", "error"), [("leased", LeaseMismatch), ("dead", ItemDead), (None, ItemNotFound)]
)
async def test_extend_refused_otherwise_says_why(
    fake: tuple[MssqlStore, FakeConnection], status: str | None, error: type[QueueError]
) -> None:
    store, conn = fake
    item_id = uuid4()
    current = item_row(item_id, status=status, lease_token=uuid4()) if status else Result(ITEM_COLUMNS, [])
    conn.reply("extend", Results([Result(["seq"], []), current]))

    with pytest.raises(error):
        await store.extend(item_id, uuid4(), 60)


async def test_fail_binds_floats_as_text_and_returns_the_item(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id, token = uuid4(), uuid4()
    errors = json.dumps([{"at": "2026-03-01T12:00:00.1234560", "error": "boom"}])  # FOR JSON's DATETIME2
    conn.reply(
        "fail",
        Results(
            [
                result(status="ready"),
                item_row(item_id, status="ready", errors=errors, visible_at=datetime(2026, 3, 1, 12, 1)),
            ]
        ),
    )

    view = await store.fail(item_id, Failure("boom", lease_token=token, retry=True, retry_after_seconds=60.5))

    assert conn.params("fail") == (NOW_TEXT, str(item_id), str(token), 1, "60.5", "0.25", "boom")
    batch = conn.inlined("fail")
    for fragment in (
        CLOCK,
        f"DECLARE @id UNIQUEIDENTIFIER = CAST(N'{item_id}' AS UNIQUEIDENTIFIER);",
        f"DECLARE @token UNIQUEIDENTIFIER = CAST(NULLIF(N'{token}', N'') AS UNIQUEIDENTIFIER);",
        "DECLARE @retry BIT = 1;",
        "DECLARE @retry_after FLOAT = CAST(NULLIF(N'60.5', N'') AS FLOAT);",
        "DECLARE @draw FLOAT = CAST(N'0.25' AS FLOAT);",
        "DECLARE @error NVARCHAR(MAX) = N'boom';",
    ):
        assert fragment in batch
    assert view.id == item_id
    assert view.status is ItemStatus.RETRYING
    assert view.lease_expires_at is None
    assert [(e.at, e.error) for e in view.errors] == [(NOW, "boom")]
    assert conn.commits == 1


async def test_fail_without_retry_or_delay_binds_zero_and_empty_text(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    conn.reply("fail", Results([result(status="dead"), item_row(item_id, status="dead")]))

    view = await store.fail(item_id, Failure("fatal", retry=False))

    assert conn.params("fail")[2:5] == ("", 0, "")
    assert view.status is ItemStatus.DEAD
    assert view.died_at == NOW


@pytest.mark.parametrize(
    ("status", "error"), [("dead", ItemDead), ("leased", LeaseMismatch), (None, ItemNotFound)]
)
async def test_a_refused_failure_says_why_and_rolls_back(
    fake: tuple[MssqlStore, FakeConnection], status: str | None, error: type[QueueError]
) -> None:
    store, conn = fake
    item_id = uuid4()
    current = (
        item_row(item_id, status=status, lease_token=uuid4() if status == "leased" else None)
        if status
        else Result(ITEM_COLUMNS, [])
    )
    conn.reply("fail", Results([Result(["status"], []), current]))

    with pytest.raises(error):
        await store.fail(item_id, Failure("again", lease_token=uuid4()))

    assert conn.names == ["fail"]
    assert conn.rollbacks == 1


@pytest.mark.parametrize("token", ["its own", "another", None])
async def test_a_refused_failure_of_a_lease_that_ran_out_on_its_last_attempt_is_item_dead(
    fake: tuple[MssqlStore, FakeConnection], token: str | None
) -> None:
    store, conn = fake
    item_id, held = uuid4(), uuid4()
    expired = NOW.replace(tzinfo=None) - timedelta(microseconds=1)
    current = item_row(item_id, status="leased", lease_token=held, visible_at=expired, attempts=5)
    conn.reply("fail", Results([Result(["status"], []), current]))
    sent = {"its own": held, "another": uuid4(), None: None}[token]

    with pytest.raises(ItemDead):
        await store.fail(item_id, Failure("late", lease_token=sent))


async def test_get_item_judges_an_expired_lease_by_the_server_clock(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    item_id = uuid4()
    expired = NOW.replace(tzinfo=None) - timedelta(seconds=1)
    conn.reply(
        "get_item",
        item_row(
            item_id, status="leased", lease_token=uuid4(), visible_at=expired, group_key="g", dedup_key="k"
        ),
    )

    view = await store.get_item(item_id)

    assert view.status is ItemStatus.READY
    assert view.lease_expires_at is None
    assert view.created_at == datetime(2026, 2, 1, 8, 0, tzinfo=UTC)
    assert (view.group, view.dedup_key, view.max_attempts) == ("g", "k", 5)
    assert view.first_popped_at == datetime(2026, 2, 1, 8, 0, 1, tzinfo=UTC)
    assert conn.params("get_item") == (NOW_TEXT, str(item_id))


async def test_get_item_of_an_unknown_id_is_not_found(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, _ = fake
    with pytest.raises(ItemNotFound):
        await store.get_item(uuid4())
