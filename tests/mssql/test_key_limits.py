"""SQL Server's pop of a queue whose keys have limits (pop_keyed), read from its text: the same
locking walks as pop, each passing over the full keys and looking at up to @walk rows, then each
key's room applied in pop order. Shape and binding only: no SQL Server runs here."""

from __future__ import annotations

from tests.mssql.helpers import Q


def test_the_keyed_pop_walks_as_pop_does_and_passes_over_the_full_keys() -> None:
    keyed, plain = Q["pop_keyed"].sql, Q["pop"].sql
    for hint in (
        "INDEX(sq_items_ready), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK",
        "INDEX(sq_items_lapsed), READCOMMITTEDLOCK, ROWLOCK, READPAST, UPDLOCK",
    ):
        assert hint in keyed
        assert hint in plain
    assert keyed.count("SELECT TOP (@walk) w.seq") == 2
    assert (
        keyed.count(
            "NOT IN (\n                  SELECT f.value COLLATE Latin1_General_100_BIN2 FROM OPENJSON(@full)"
        )
        == 2
    )
    assert "WHERE w.nth <= COALESCE(CAST(r.value AS INT), @default_room, w.nth)" in keyed
    assert "SELECT TOP (@max_items) w.seq FROM walked AS w" in keyed
    assert "SET NOCOUNT ON;\nSET XACT_ABORT ON;" in keyed


def test_the_keys_leases_are_counted_along_their_indexes() -> None:
    counted = Q["key_leases"].sql
    assert "WITH (INDEX(sq_items_key_leased))" in counted
    assert "WITH (INDEX(sq_items_lapsed))" in counted
    assert counted.count("i.visible_at > @now") == 2
