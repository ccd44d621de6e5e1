"""The store: one interface, one module (with its SQL beside it) per database dialect."""

from __future__ import annotations

import importlib.util
import os
from urllib.parse import SplitResult, urlsplit

from simplequeue.domain import Clock, FinishedHook, ignore_finished
from simplequeue.store.protocol import Store

__all__ = ["Store", "UnsupportedDatabaseURL", "create_store", "dialect_of"]


class UnsupportedDatabaseURL(ValueError):
    """A database URL this service cannot use. The message is one line that never repeats the
    URL (it may hold a password): settings show it as SIMPLEQUEUE_DATABASE_URL's problem."""


_SCHEMES = {
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mssql": "mssql",
    "mssql+odbc": "mssql",
    "mssql+aioodbc": "mssql",
}

_FORMS = "sqlite:///path, postgresql://user@host:port/db or mssql+odbc://user:password@host:port/db"

# The schemes other tools write for the dialects served here: the dialect's own is suggested.
_ALIKE = {
    "sqlite": "sqlite:///path (this service picks the driver itself)",
    "postgres": "postgresql://user@host:port/db (this service picks the driver itself)",
    "mssql": "mssql+odbc://user:password@host:port/db?driver=...",
}


def dialect_of(url: str) -> str:
    """The dialect a database URL names: sqlite, postgresql or mssql. UnsupportedDatabaseURL when
    it is not one of those, is malformed, or names a SQLite file in a folder that does not exist
    (checked without a driver: settings call this)."""
    parts = _split(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise UnsupportedDatabaseURL(_unsupported(url, scheme))
    dialect = _SCHEMES[scheme]
    if dialect == "sqlite":
        _check_folder(sqlite_path(url))
    return dialect


def _check_folder(path: str) -> None:
    """The service makes the SQLite file, never its folder: a mistyped path would otherwise make a
    tree of folders wherever the service may write (anywhere, as root)."""
    if path in ("", ":memory:"):
        return
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise UnsupportedDatabaseURL(
            f"the SQLite file's folder {folder} does not exist: create it, or name a file in a folder "
            "that exists"
        )


def _split(url: str) -> SplitResult:
    if not url.strip():
        raise UnsupportedDatabaseURL(f"empty; use {_FORMS}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": a '[' without its ']'
        raise UnsupportedDatabaseURL(f"malformed URL ({exc}); use {_FORMS}") from None
    try:
        if "," not in parts.netloc:  # postgresql://u@h1:5432,h2:5432/db names several servers
            parts.port  # noqa: B018 -- raises on a port that is not a number from 0 to 65535
    except ValueError:  # not quoted: in postgresql://user:password/db the "port" is a password
        raise UnsupportedDatabaseURL(
            f"malformed URL (its port is not a number from 0 to 65535); use {_FORMS}"
        ) from None
    return parts


def _unsupported(url: str, scheme: str) -> str:
    if "://" not in url and not scheme:
        return f"not a URL; use {_FORMS}"
    for prefix, form in _ALIKE.items():
        if scheme.startswith(prefix):
            return f"unsupported scheme {scheme!r}; use {form}"
    return f"unsupported scheme {scheme!r}: the database is SQLite, PostgreSQL or SQL Server; use {_FORMS}"


def create_store(
    url: str,
    *,
    pool_size: int = 10,
    timeout_seconds: float = 5.0,
    clock: Clock | None = None,
    on_finished: FinishedHook = ignore_finished,
) -> Store:
    """Build (but do not open) the store the URL names. Drivers are imported only when chosen,
    so that SQLite and PostgreSQL deployments never need unixODBC. `on_finished` hears of
    completions and of leases the sweep made dead (metrics count them)."""
    dialect = dialect_of(url)
    timeout = timeout_seconds
    if dialect == "sqlite":
        from simplequeue.store.sqlite.store import SqliteStore

        return SqliteStore(sqlite_path(url), timeout_seconds=timeout, clock=clock, on_finished=on_finished)
    if dialect == "postgresql":
        from simplequeue.store.postgres.store import PostgresStore

        return PostgresStore(
            url, pool_size=pool_size, timeout_seconds=timeout, clock=clock, on_finished=on_finished
        )
    from simplequeue.store.mssql.store import MssqlStore

    return MssqlStore(url, pool_size=pool_size, timeout_seconds=timeout, clock=clock, on_finished=on_finished)


DRIVERS = {"postgresql": ("asyncpg", "postgres"), "mssql": ("aioodbc", "mssql")}
"""dialect -> (the module its store needs, the extra that installs it)."""


def missing_driver(dialect: str) -> str | None:
    """Why the dialect's store cannot be built here (its driver is not installed), in one line
    saying what to install; None when it can."""
    module, extra = DRIVERS.get(dialect, (None, None))
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return f"{dialect} needs {module}, which is not installed: pip install 'simplequeue[{extra}]'"


def sqlite_path(url: str) -> str:
    """sqlite:///relative.db, sqlite:////absolute.db, sqlite:///:memory: (one process only)."""
    _, _, rest = url.partition(":")
    if rest.startswith("///"):
        return rest[3:] or "simplequeue.db"
    named = rest.removeprefix("//")
    # sqlite://relative.db: what follows the two slashes is a host, and no file is named at all.
    shown = f"sqlite:///{named}" if named and "@" not in named else "sqlite:///relative.db"
    raise UnsupportedDatabaseURL(
        f"a SQLite URL takes three slashes before the file: use {shown} (relative to the working "
        "directory) or sqlite:////abs/path (absolute)"
    )
