"""Numbered SQL migrations per dialect, read from ``migrations/<dialect>/NNNN_name.sql``, and the
dialect's routines as they are now (PostgreSQL's functions, SQL Server's procedures), read from
one file beside the dialect's store.

Each store applies the pending migrations inside its own lock and transaction, records every
version in ``sq_schema_version``, and then, in the same transaction, applies the routines file
whole (CREATE OR REPLACE / CREATE OR ALTER): migrations hold tables, columns and data moves, and a
routine is written once, in its current form. The files are idempotent where the engine allows it.

A migration therefore runs before its release's routines exist: it finds those of the version the
database was at (or none, on a new database), and must not call them. What CREATE OR REPLACE cannot
do (drop a routine, change a PostgreSQL function's arguments or result) is a migration's job: it
drops the old one, and the routines file creates the new.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


# The routines file of each dialect that has routines, beside its store (SQLite has none).
ROUTINES = {"postgresql": "store/postgres/functions.sql", "mssql": "store/mssql/procedures.sql"}


def migrations_root() -> Traversable:
    """The one place migrations are found: inside the package (the wheel carries them there; in a
    checkout, app/simplequeue/migrations links to the top-level migrations/)."""
    return files("simplequeue") / "migrations"


@cache  # the files do not change while the process runs; /readyz asks on every probe
def load_migrations(dialect: str) -> tuple[Migration, ...]:
    folder = migrations_root() / dialect
    found = []
    for path in sorted((p for p in folder.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name):
        match = _FILE.match(path.name)
        if match is None:
            raise ValueError(f"migration file {path.name} is not named NNNN_name.sql")
        found.append(Migration(int(match[1]), match[2], path.read_text(encoding="utf-8")))
    if not found:
        raise FileNotFoundError(f"no migrations for {dialect} under {folder}")
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"duplicate migration versions for {dialect}: {versions}")
    return tuple(found)


def latest_version(dialect: str) -> int:
    return load_migrations(dialect)[-1].version


@cache
def load_routines(dialect: str) -> str | None:
    """The dialect's routines file, as SQL to run after the migrations; None if it has none."""
    path = ROUTINES.get(dialect)
    if path is None:
        return None
    return (files("simplequeue") / path).read_text(encoding="utf-8")


def routines_due(versions_before: set[int], dialect: str) -> bool:
    """Whether this migrate applies the routines, given the versions recorded before it: always,
    unless a newer release has migrated the database. Its routines are then the newer release's,
    which this one's would overwrite with older code (a replica of the release before restarting
    during a rolling upgrade): those are left alone, as its tables are."""
    return max(versions_before, default=0) <= latest_version(dialect)


def script(dialect: str) -> str:
    """Everything `migrate` applies to a new database, as a DBA runs it by hand (`migrate --print`):
    each migration, then the routines file."""
    parts = [
        f"-- migration {migration.version:04d}_{migration.name}\n{as_script(migration.sql, dialect)}"
        for migration in load_migrations(dialect)
    ]
    routines = load_routines(dialect)
    if routines is not None:
        parts.append(
            f"-- routines ({ROUTINES[dialect]}), applied by every migrate after the migrations\n"
            f"{as_script(routines, dialect)}"
        )
    return "\n".join(parts)


_BATCH_SEPARATOR = re.compile(r"^[ \t]*GO[ \t]*$", re.MULTILINE | re.IGNORECASE)


def split_statements(sql: str) -> list[str]:
    """Split a migration into what is sent to the server one call at a time.

    A file with batch separators (a line `GO`, as sqlcmd and SSMS read them) is split there only:
    each batch goes whole, so a `CREATE PROCEDURE`, which SQL Server wants alone in its batch, keeps
    the semicolons of its body. Other files keep one statement per semicolon that ends a line (no
    procedural bodies), which is what drivers that run one statement per call need.
    """
    if _BATCH_SEPARATOR.search(sql):
        return [batch.strip() for batch in _BATCH_SEPARATOR.split(sql) if _has_code(batch)]
    body = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in re.split(r";\s*$", body, flags=re.MULTILINE) if s.strip()]


def as_script(sql: str, dialect: str) -> str:
    """A migration as a DBA runs it by hand: on SQL Server, its statements (or batches) each ended
    by `GO`, so that sqlcmd or SSMS compiles each on its own (a column added by one statement is
    then there for the next, and a procedure stands alone in its batch); elsewhere, as it is."""
    if dialect != "mssql":
        return sql
    return "".join(
        f"{statement}{'' if statement.endswith(';') else ';'}\nGO\n" for statement in split_statements(sql)
    )


def _has_code(batch: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("--") for line in batch.splitlines())
