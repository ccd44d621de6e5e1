"""SQL Server's pop of a queue whose keys have limits, read from its text: a walk of the first items
that claims none, the rows of their keys locked as a claim locks items (UPDLOCK, ROWLOCK, READPAST:
a key another pop holds is passed over), those keys' leases counted in a statement after the lock
with their rates and buckets read, then the picked items leased by seq with their state checked
again and the buckets written back less what the pop took. Shape and binding only: no SQL
Server runs here."""

from __future__ import annotations

from sqlglot import exp

from tests.mssql.helpers import LOCKED_COLUMNS, Q, hints, index_hint, openjson_columns, statements


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
    counted = trees[-1]
    assert isinstance(counted, exp.Select)  # a statement of its own, after the lock
    indexes = sorted(index_hint(t) for t in counted.find_all(exp.Table) if t.name == "sq_items")
    assert len(indexes) == 2
    assert "INDEX(sq_items_key_leased)" in indexes[0]
    assert "INDEX(sq_items_lapsed)" in indexes[1]
    assert [c.alias_or_name for c in counted.expressions] == LOCKED_COLUMNS


def test_each_locked_keys_rate_and_bucket_are_read_with_its_locked_row() -> None:
    counted = statements("lock_keys")[-1]
    columns = {c.alias_or_name: c.sql("tsql") for c in counted.expressions}
    # Its own rate, else the queue's default for its keys; its bucket as stored; the batch's clock.
    assert columns["rate"] == "COALESCE(f.rate_per_second, q.rate_per_key_per_second) AS rate"
    assert (columns["rate_tokens"], columns["rate_at"], columns["now"]) == (
        "f.rate_tokens",
        "f.rate_at",
        "@now AS now",
    )
    joined = {t.alias_or_name: t.name for t in counted.find_all(exp.Table) if t.name.startswith("sq_")}
    assert {k: joined[k] for k in ("f", "q")} == {"f": "sq_fair_keys", "q": "sq_queues"}


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
