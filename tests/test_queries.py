"""Named queries: one file of SQL per dialect, fragments written once and included where used."""

from __future__ import annotations

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


def test_postgresql_completions_share_one_text() -> None:
    queries = load_queries("simplequeue.store.postgres", "numbered")
    shared = "UPDATE sq_client_ids AS k"
    assert shared in queries["complete_batch"].sql
    assert shared in queries["complete_and_pop"].sql
