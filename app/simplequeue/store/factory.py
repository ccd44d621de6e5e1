"""The store: one interface, one module (with its SQL beside it) per database dialect."""

from __future__ import annotations

from urllib.parse import urlsplit

from simplequeue.domain import Clock, FinishedHook, ignore_finished
from simplequeue.store.protocol import Store

__all__ = ["Store", "UnsupportedDatabaseURL", "create_store", "dialect_of"]


class UnsupportedDatabaseURL(ValueError):
    pass


_SCHEMES = {
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mssql": "mssql",
    "mssql+odbc": "mssql",
    "mssql+aioodbc": "mssql",
}


def dialect_of(url: str) -> str:
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _SCHEMES:
        raise UnsupportedDatabaseURL(
            f"unsupported database URL scheme {scheme!r}; use sqlite:///, postgresql:// or mssql+odbc://"
        )
    return _SCHEMES[scheme]


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


def sqlite_path(url: str) -> str:
    """sqlite:///relative.db, sqlite:////absolute.db, sqlite:///:memory: (one process only)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise UnsupportedDatabaseURL(
            "SQLite URLs look like sqlite:///./simplequeue.db or sqlite:////var/lib/sq.db"
        )
    return url[len(prefix) :] or "simplequeue.db"
