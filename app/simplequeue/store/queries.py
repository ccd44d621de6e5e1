"""A dialect's named statements, bound the same way on every engine.

Each dialect keeps its SQL in one queries.sql, in blocks headed ``-- name: <query>``, with
parameters written ``:name`` on every engine. Loading compiles them to the driver's own
placeholders (SQLite keeps ``:name``, asyncpg takes ``$1``, ODBC takes ``?``), and a store binds
values by name: ``Q["pop"].bind(queue=..., now=...)``, whatever the engine. A value missing or
left over is an error at once, not a wrong value at some position.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Literal

Style = Literal["named", "numbered", "qmark"]

_HEADER = re.compile(r"^--\s*(name|fragment):\s*(\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^([ \t]*)--\s*include:\s*(\w+)[ \t]*$", re.MULTILINE)
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
    """The named queries of `package`'s queries.sql (a dialect's folder).

    A block headed ``-- fragment: <name>`` is not a query: it is SQL that several queries share,
    written once. A query takes it in whole with a line ``-- include: <name>``, indented as that line;
    so may a fragment, of a fragment above it.
    """
    return parse_queries((files(package) / "queries.sql").read_text(encoding="utf-8"), style, package)


def parse_queries(text: str, style: Style, where: str = "queries.sql") -> dict[str, Query]:
    """load_queries' work on the text of one queries.sql."""
    parts = _HEADER.split(text)
    # parts = [preamble, kind1, name1, body1, kind2, name2, body2, ...]
    blocks = list(zip(parts[1::3], parts[2::3], parts[3::3], strict=True))
    fragments: dict[str, str] = {}

    def included(match: re.Match[str]) -> str:
        indent, name = match[1], match[2]
        if name not in fragments:
            # (a fragment takes only those above it)
            raise ValueError(f"{where}: no fragment {name!r} to include")
        # At the include's indentation: a fragment of a column list reads as the list's own lines.
        # A fragment may include others (a pop's claim, its retention cutoff), but not itself.
        return textwrap.indent(_INCLUDE.sub(included, fragments[name]), indent)

    # A fragment may include fragments written above it (never itself, so never a loop).
    for kind, name, body in blocks:
        if kind == "fragment":
            fragments[name] = _INCLUDE.sub(included, body).strip()
    queries = {
        name: compile_query(name, _INCLUDE.sub(included, body).strip(), style)
        for kind, name, body in blocks
        if kind == "name"
    }
    if not queries:
        raise ValueError(f"{where} holds no '-- name:' blocks")
    return queries
