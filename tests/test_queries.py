"""Named queries: one file of SQL per dialect, fragments written once and included where used."""

from __future__ import annotations

from importlib.resources import files

import pytest
from simplequeue.store.queries import load_queries, parse_queries

SQL = """
-- fragment: recent
recent AS (SELECT id FROM t WHERE at > :since)

-- name: count_recent
WITH
-- include: recent
SELECT count(*) FROM recent

-- name: list_recent
WITH
-- include: recent
SELECT id FROM recent ORDER BY id LIMIT :limit
"""


def test_a_fragment_is_included_whole_where_each_query_names_it() -> None:
    queries = parse_queries(SQL, "numbered")
    assert set(queries) == {"count_recent", "list_recent"}  # a fragment is not a query
    for query in queries.values():
        assert "recent AS (SELECT id FROM t WHERE at > $1)" in query.sql
        assert "include:" not in query.sql
    assert queries["list_recent"].params == ("since", "limit")


def test_an_unknown_fragment_is_an_error_at_load() -> None:
    with pytest.raises(ValueError, match="no fragment 'nothing'"):
        parse_queries("-- name: q\nWITH\n-- include: nothing\nSELECT 1", "named")


def test_a_fragment_takes_in_a_fragment_above_it_and_only_one_above() -> None:
    nested = (
        "-- fragment: since\nat > :since\n\n"
        "-- fragment: recent\nrecent AS (SELECT id FROM t WHERE\n    -- include: since\n)\n\n"
        "-- name: q\nWITH\n-- include: recent\nSELECT id FROM recent"
    )
    assert "recent AS (SELECT id FROM t WHERE\n    at > :since\n)" in parse_queries(nested, "named")["q"].sql
    below = "-- fragment: a\n-- include: b\n\n-- fragment: b\nx\n\n-- name: q\nSELECT 1\n-- include: a"
    with pytest.raises(ValueError, match="no fragment 'b'"):
        parse_queries(below, "named")


def test_postgresql_pops_share_one_lease_and_one_claim() -> None:
    """pop, pop_runs and complete_and_pop take the lease and the claim from their fragments: each
    line below is written once in queries.sql, and is in all three."""
    text = (files("simplequeue.store.postgres") / "queries.sql").read_text(encoding="utf-8")
    queries = load_queries("simplequeue.store.postgres", "numbered")
    for line in (
        "first_popped_at = COALESCE(first_popped_at,",
        "ORDER BY c.rank_priority DESC, c.fair_rank, c.created_at, c.seq",
    ):
        assert text.count(line) == 1, line
        for name in ("pop", "pop_runs", "complete_and_pop"):
            assert line in queries[name].sql, (name, line)


def test_postgresql_completions_share_one_text() -> None:
    queries = load_queries("simplequeue.store.postgres", "numbered")
    shared = "UPDATE sq_client_ids AS k"
    assert shared in queries["complete_batch"].sql
    assert shared in queries["complete_and_pop"].sql
