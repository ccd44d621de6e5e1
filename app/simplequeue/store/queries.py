"""Loads a dialect's named queries: blocks headed ``-- name: <query>`` in its queries.sql."""

from __future__ import annotations

import re
from importlib.resources import files

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load_queries(package: str) -> dict[str, str]:
    """The named queries of `package`'s queries.sql (a dialect's folder)."""
    text = (files(package) / "queries.sql").read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    if not queries:
        raise ValueError(f"{package}/queries.sql holds no '-- name:' blocks")
    return queries
