"""Reading PostgreSQL plans of the store's statements: shared by the plan tests
(tests/test_query_plans.py) and the raw-SQL benchmark (bench/sql_paths.py). Standard library only,
so that the benchmark, which installs no test tools, can import it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def literal(value: object) -> str:
    """A bound value written into EXECUTE's argument list (PREPARE inferred the types)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "'{" + ",".join("NULL" if v is None else f'"{v}"' for v in value) + "}'"
    return "'" + str(value).replace("'", "''") + "'"


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A plan node (EXPLAIN's JSON) and every node below it, depth first."""
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)
