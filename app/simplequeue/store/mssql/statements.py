"""Running this dialect's named queries (queries.sql beside this file), bound by name.

ODBC's markers are positional (``?``); the queries name theirs (``:now``), and ``Query.bind``
turns keyword values into the tuple in marker order, refusing a value missing or left over.
"""

from __future__ import annotations

from simplequeue.store.mssql.odbc import Connection, Param, Row, run_batch, run_batch_sets
from simplequeue.store.queries import load_queries

Q = load_queries("simplequeue.store.mssql", "qmark")


async def fetch(conn: Connection, name: str, /, **values: Param) -> list[Row]:
    """The rows of the named query's first result set, with its parameters bound by name."""
    query = Q[name]
    return await run_batch(conn, query.sql, *query.bind(**values))


async def fetch_sets(conn: Connection, name: str, /, **values: Param) -> list[list[Row]]:
    """Every result set of the named batch, in order, with its parameters bound by name."""
    query = Q[name]
    return await run_batch_sets(conn, query.sql, *query.bind(**values))
