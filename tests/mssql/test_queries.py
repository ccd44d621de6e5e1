"""Every batch parses as T-SQL, aborts its transaction on any error when it writes, and takes the
server's clock unless one is bound."""

from __future__ import annotations

import re

import pytest
from simplequeue.store.mssql.statements import Q
from sqlglot import exp

from tests.mssql.helpers import code, parse


@pytest.mark.parametrize("name", sorted(Q))
def test_every_query_parses_as_tsql(name: str) -> None:
    assert parse(Q[name].sql)


@pytest.mark.parametrize("name", sorted(Q))
def test_sqlglot_keeps_every_where_of_every_batch(name: str) -> None:
    # sqlglot can drop a clause it does not expect where it is (a WHERE after DELETE ... OUTPUT ...
    # INTO inside BEGIN ... END) without an error; the tests that read a batch's tree would then check
    # a statement that deletes everything.
    text = "\n".join(code(name))
    parsed = " ".join(tree.sql("tsql") for tree in parse(Q[name].sql))
    assert len(re.findall(r"\bWHERE\b", parsed)) == len(re.findall(r"\bWHERE\b", text))


def batches() -> list[str]:
    """The queries sent as batches of several statements."""
    return sorted(name for name in Q if code(name)[0] == "SET NOCOUNT ON;")


def write_targets(name: str) -> list[str]:
    """What each INSERT, UPDATE and DELETE of a batch writes to: a table, a CTE, an alias or @variable."""
    found = []
    for tree in parse(Q[name].sql):
        for node in tree.walk():
            if isinstance(node, exp.Insert | exp.Update | exp.Delete):
                target = node.this.this if isinstance(node.this, exp.Schema) else node.this
                found.append(target.sql("tsql"))
    return found


def writes(name: str) -> bool:
    """Whether a batch changes a table of ours (not only table variables)."""
    return any(not target.startswith("@") for target in write_targets(name))


@pytest.mark.parametrize("name", batches())
def test_every_batch_that_writes_aborts_its_transaction_on_any_error(name: str) -> None:
    if writes(name):
        assert code(name)[1] == "SET XACT_ABORT ON;", "a failed statement must roll back the ones before it"


def test_the_batches_that_write_are_the_ones_expected() -> None:
    assert {name for name in batches() if writes(name)} == {
        "pop",
        "lease_runs",
        "extend",
        "complete_batch",
        "fail",
        "reap_expired",
        "revive",
        "purge_dead",
        "purge_live",
        "purge_history",
        "put_queue",
        "set_paused",
        "take_tokens",
        "take_key_tokens",
        "delete_queue",
        "change_queue_metadata",
        "expire_retained",
        "topic_create",
        "topic_update",
        "topic_delete_subscriptions",
        "topic_delete",
        "subscription_create",
        "subscription_update",
        "subscription_delete",
        "signing_key_insert",
        "schedule_put",
        "schedule_delete",
        "schedule_pause",
        "schedule_resume",
        "schedule_claim",
        "schedules_claimed",
        "schedule_triggered",
        "put_key",
        "reset_key",
        "lease_keyed",
        "add_keys",
    }


def clocked() -> list[str]:
    return sorted(name for name in Q if "@now" in Q[name].sql and name != "record_version")


@pytest.mark.parametrize("name", clocked())
def test_the_server_clock_is_used_unless_one_is_bound(name: str) -> None:
    declare = next(tree for tree in parse(Q[name].sql) if isinstance(tree, exp.Declare))
    default = declare.expressions[0].args["default"]
    assert declare.expressions[0].this[0].name == "now", "the clock is the batch's first variable"
    assert "SYSUTCDATETIME" in default.sql("tsql").upper()
    assert default.find(exp.Placeholder) is not None


def test_batches_that_stamp_finish_times_round_the_clock_to_the_microsecond() -> None:
    # died_at and finished_at key the dead-letter and history pages; a cursor is a Python datetime.
    rounding = "SET @now = CAST(@now AS DATETIME2(6));"
    stamping = {"complete_batch", "fail", "reap_expired"}
    for name in clocked():
        lines = code(name)
        if name in stamping:
            assert lines[3] == rounding, name
        else:
            assert rounding not in lines, name


def test_fractional_seconds_are_added_as_whole_seconds_then_microseconds() -> None:
    # DATEADD(MICROSECOND, n, t) takes an INT n: all of a delay in microseconds overflows past 35.8 min.
    found = 0
    for name in Q:
        for tree in parse(Q[name].sql):
            for add in tree.find_all(exp.DateAdd):
                if add.text("unit").upper() == "MICROSECOND":
                    found += 1
                    inner = add.this
                    assert isinstance(inner, exp.DateAdd), name
                    assert inner.text("unit").upper() == "SECOND", name
    assert found == 2, "fail and revive (a push's delay: dbo.sq_push_items, migration v6)"
