"""A dialect's named statements, bound the same way on every engine.

Each dialect keeps its SQL in one queries.sql, in blocks headed ``-- name: <query>``, with
parameters written ``:name`` on every engine. Loading compiles them to the driver's own
placeholders (SQLite keeps ``:name``, asyncpg takes ``$1``, ODBC takes ``?``), and a store binds
values by name: ``Q["pop"].bind(queue=..., now=...)``, whatever the engine. A value missing or
left over is an error at once, not a wrong value at some position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Literal

Style = Literal["named", "numbered", "qmark"]

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
# Literals, quoted names and comments are passed over; `::` is PostgreSQL's cast, not a parameter.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|::|:([A-Za-z_]\w*)")


@dataclass(frozen=True, slots=True)
class Query:
    name: str
    sql: str  # in the driver's placeholder style
    params: tuple[str, ...]  # the parameter each placeholder takes, in order (named: each name once)
    style: Style
    names: frozenset[str] = frozenset()  # set(params), made once: bind runs on every statement

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(self.params))

    def bind(self, **values: Any) -> Any:
        """What the driver takes for these values: a dict (named), else a tuple in placeholder order."""
        if values.keys() != self.names:
            missing, extra = self.names - values.keys(), values.keys() - self.names
            raise TypeError(f"query {self.name}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        if self.style == "named":
            return values
        return tuple(values[name] for name in self.params)


def compile_query(name: str, sql: str, style: Style) -> Query:
    order: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        param = match[1]
        if param is None:
            return match[0]
        if style == "qmark":
            order.append(param)
            return "?"
        if param not in order:
            order.append(param)
        return f"${order.index(param) + 1}" if style == "numbered" else match[0]

    return Query(name, _TOKEN.sub(placeholder, sql), tuple(order), style)


def load_queries(package: str, style: Style) -> dict[str, Query]:
    """The named queries of `package`'s queries.sql (a dialect's folder)."""
    text = (files(package) / "queries.sql").read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries = {
        name: compile_query(name, body.strip(), style)
        for name, body in zip(parts[1::2], parts[2::2], strict=True)
    }
    if not queries:
        raise ValueError(f"{package}/queries.sql holds no '-- name:' blocks")
    return queries
