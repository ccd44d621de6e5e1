"""Loads a dialect's named queries: blocks headed ``-- name: <query>`` in one .sql file."""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load_queries(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    queries = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    if not queries:
        raise ValueError(f"{path} holds no '-- name:' blocks")
    return queries
