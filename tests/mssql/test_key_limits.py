"""SQL Server's pop of a queue whose keys have limits, read from its text: a walk of the first items
that claims none, the rows of their keys locked as a claim locks items (UPDLOCK, ROWLOCK, READPAST:
a key another pop holds is passed over), then, in statements after the lock, those keys' leases
counted, their rates and buckets read and their first items read (by key, in pop order: not what
the walk saw before the lock), then the picked items leased by seq with their state checked again
and the buckets written back less what the pop took. Shape and binding only: no SQL
Server runs here."""

from __future__ import annotations

from simplequeue.store.migrations import load_migrations
from sqlglot import exp

from tests.mssql.helpers import (
    LOCKED_COLUMNS,
    Q,
    create_index,
    hints,
    index_hint,
    openjson_columns,
    statements,
)

KEY_READY = next(m for m in load_migrations("mssql") if m.name == "key_ready_index")


def test_the_walk_reads_pops_indexes_without_claiming() -> None:
    text = Q["lock_keys"].sql
    assert "INDEX(sq_items_ready), READCOMMITTEDLOCK)" in text
    assert "INDEX(sq_items_lapsed), READCOMMITTEDLOCK)" in text
    assert text.count("SELECT TOP (@walk) w.seq") == 2
    assert "READPAST, UPDLOCK" not in text  # items are not locked: the keys' rows are
    assert "SET NOCOUNT ON;\nSET XACT_ABORT ON;" in text


def test_the_keys_rows_are_locked_passing_over_held_ones_then_their_leases_counted() -> None:
    trees = statements("lock_keys")
    inserts = [t for t in trees if isinstance(t, exp.Insert)]
    locking = next(t for t in inserts if t.this.this.sql("tsql") == "@locked")
    [keys] = [t for t in locking.find_all(exp.Table) if t.name == "sq_fair_keys"]
    assert hints(keys) == ["READCOMMITTEDLOCK", "READPAST", "ROWLOCK", "UPDLOCK"]
    assert "TOP (@max_keys)" in locking.sql("tsql")
    turns = next(t for t in inserts if t.this.this.sql("tsql") == "@turns")
    assert trees.index(turns) > trees.index(locking)  # a statement of its own, after the lock
    indexes = sorted(index_hint(t) for t in turns.find_all(exp.Table) if t.name == "sq_items")
    assert len(indexes) == 2
    assert "INDEX(sq_items_key_leased)" in indexes[0]
    assert "INDEX(sq_items_lapsed)" in indexes[1]
    subquery = turns.expression.find(exp.Subquery)
    assert subquery is not None
    read = {c.alias_or_name: c.sql("tsql") for c in subquery.this.expressions}
    # Its own limits, else the queue's defaults for its keys; its bucket as stored, under its lock.
    assert read["cap"] == "COALESCE(f.max_leased, q.max_leased_per_key) AS cap"
    assert read["rate"] == "COALESCE(f.rate_per_second, q.rate_per_key_per_second) AS rate"
    assert (read["rate_tokens"], read["rate_at"]) == ("f.rate_tokens", "f.rate_at")


def test_a_keys_reach_is_one_more_than_its_cap_leaves_at_most_one_more_than_the_pop_takes() -> None:
    [turns] = [
        t for t in statements("lock_keys") if isinstance(t, exp.Insert) and "@turns" in t.this.sql("tsql")
    ]
    [reach] = [e for e in turns.expression.expressions if isinstance(e, exp.Add)]
    assert reach.sql("tsql") == (
        "CASE WHEN c.cap IS NULL OR c.cap - c.leased > @max_keys THEN @max_keys "
        "WHEN c.cap - c.leased < 0 THEN 0 ELSE c.cap - c.leased END + 1"
    )


def _branches(read: exp.Select) -> dict[str, exp.Select]:
    """The item reads of lock_keys' last statement by the index each walks (group probes aside)."""
    found = {}
    for table in read.find_all(exp.Table):
        if table.name == "sq_items" and "sq_items_group" not in index_hint(table):
            select = table.find_ancestor(exp.Select)
            assert select is not None
            found[index_hint(table).split("INDEX(")[1].split(")")[0]] = select
    return found


def test_each_locked_keys_items_are_read_after_the_lock_in_pop_order() -> None:
    trees = statements("lock_keys")
    locking = next(t for t in trees if isinstance(t, exp.Insert) and t.this.this.sql("tsql") == "@locked")
    read = trees[-1]
    assert isinstance(read, exp.Select)
    assert trees.index(read) > trees.index(locking)
    assert [c.alias_or_name for c in read.expressions] == LOCKED_COLUMNS
    # A key with no items now still answers (a row with no seq): OUTER APPLY, not CROSS.
    assert "FROM @turns AS t OUTER APPLY (SELECT TOP (t.reach)" in read.sql("tsql")
    branches = _branches(read)
    assert sorted(branches) == [
        "sq_items_key_leased",
        "sq_items_key_ready",
        "sq_items_lapsed",
        "sq_items_ready",
    ]
    for name, branch in branches.items():
        text = branch.sql("tsql")
        table = next(t for t in branch.find_all(exp.Table) if t.name == "sq_items")
        assert hints(table) == ["INDEX", "READCOMMITTEDLOCK"], name  # committed rows, none claimed
        assert "TOP (t.reach)" in text, name
        assert "ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq" in text, name
        assert "@paused = 0 AND x.created_at >= @retained" in text, name
        assert "INDEX(sq_items_group), READCOMMITTEDLOCK)" in text, name  # a group's head only
        # Each branch runs for its kind of key only; a keyed one repeats its index's filter as a literal.
        if name.startswith("sq_items_key_"):
            assert (
                "t.k <> N'' AND x.queue = @queue AND x.fairness_key = t.k AND NOT x.fairness_key IS NULL"
                in text
            )
        else:
            assert "t.k = N'' AND x.queue = @queue AND x.fairness_key IS NULL" in text
        ready = name in ("sq_items_key_ready", "sq_items_ready")
        assert ("x.status = 'ready'" in text) is ready, name
        assert ("x.attempts < @max_attempts" in text) is not ready, name
    assert read.args["order"].sql("tsql") == "ORDER BY place"


def test_a_keys_ready_items_have_an_index_in_pop_order_filtered_as_the_read_is() -> None:
    params = create_index("sq_items_key_ready", KEY_READY).this.args["params"]
    assert [o.this.name for o in params.args["columns"]] == [
        "queue",
        "fairness_key",
        "rank_priority",
        "fair_rank",
        "created_at",
        "seq",
    ]
    assert [i.name for i in params.args["include"]] == ["visible_at", "group_key"]
    where = params.args["where"].this.sql("tsql")
    assert where == "status = 'ready' AND NOT fairness_key IS NULL"
    # A filtered index serves a parameterised read only when the read repeats its filter as literals.
    read = _branches(statements("lock_keys")[-1])["sq_items_key_ready"].args["where"].sql("tsql")
    assert "x.status = 'ready'" in read
    assert "NOT x.fairness_key IS NULL" in read
    assert KEY_READY.version == 20


def test_the_buckets_are_written_back_to_the_keys_rows_by_key() -> None:
    [*_, update, _] = statements("take_key_tokens")
    assert isinstance(update, exp.Update)
    assert update.this.sql("tsql") == "f"
    assert openjson_columns(update) == {"k": "NVARCHAR(128)", "tokens": "NVARCHAR(40)", "at": "NVARCHAR(40)"}
    joined = update.find(exp.Join)
    assert joined is not None
    # The key in the column's collation (OPENJSON's text takes the database's: error 468 otherwise).
    assert "f.queue = @queue AND f.fairness_key = b.k COLLATE Latin1_General_100_BIN2" in joined.sql("tsql")
    text = Q["take_key_tokens"].sql
    assert "SET rate_tokens = CAST(b.tokens AS FLOAT), rate_at = CAST(b.at AS DATETIME2(7))" in text


def test_a_pop_that_finds_every_key_held_waits_for_one_key_without_readpast() -> None:
    [*_, select] = statements("wait_keys")
    [keys] = [t for t in select.find_all(exp.Table) if t.name == "sq_fair_keys"]
    assert hints(keys) == ["READCOMMITTEDLOCK", "ROWLOCK", "UPDLOCK"]


def test_the_picked_items_are_leased_by_seq_and_checked_again() -> None:
    text = Q["lease_keyed"].sql
    assert "WHERE x.seq IN (SELECT CAST(j.value AS BIGINT) FROM OPENJSON(@seqs) AS j)" in text
    assert "(x.status = 'ready' OR (x.status = 'leased' AND x.attempts < @max_attempts))" in text
    assert "x.visible_at <= @now AND @paused = 0" in text
