"""The one place where asyncpg's exceptions become domain errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import unquote, urlsplit

import asyncpg

from simplequeue.domain import DatabaseUnavailable, ItemExists, QueueError, SchemaNotReady, StoreError
from simplequeue.domain.errors import DatabaseMisconfigured

# The server is down, unreachable, refusing connections or shutting down, or a statement timed
# out on our side: the connection it happened on is not to be trusted again.
UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.InterfaceError,
    asyncpg.AdminShutdownError,
    # The database named in the URL does not exist (yet): a deployment that creates it after
    # starting the service gets 503s until it does, not a crash or a 500.
    asyncpg.InvalidCatalogNameError,
)


# The server refuses our settings: the database named in the URL does not exist (3D000), or the
# login (28000: no such role, no pg_hba.conf entry; 28P01: wrong password). Tried again like an
# outage, but the detail says which, in the server's words (they never hold the password).
_MISCONFIGURED = (asyncpg.InvalidCatalogNameError, asyncpg.InvalidAuthorizationSpecificationError)


# Worth a retry: one of two deadlocked transactions was rolled back, or a statement ran into
# statement_timeout or lock_timeout (the server is overloaded or a lock is held too long).
_TRY_AGAIN = (asyncpg.DeadlockDetectedError, asyncpg.QueryCanceledError, asyncpg.LockNotAvailableError)


# What sq_push_rows raises (store/postgres/functions.sql) for an item it refuses:
# its id is another queue's item's, or appears twice in an all-or-nothing push.
ITEM_EXISTS = "SQ409"


@asynccontextmanager
async def translated_errors(server: str | None = None) -> AsyncIterator[None]:
    """The one place where asyncpg's exceptions become domain errors. What the driver said stays
    on the chained cause, for the log; clients hear the domain error's plain sentence. `server`
    (host:port, see server_of) ends a misconfiguration's detail: `... does not exist on db:5432`."""
    try:
        yield
    except Exception as exc:
        error = domain_error(exc, server)
        if error is None:
            raise
        raise error from exc


def domain_error(exc: BaseException, server: str | None = None) -> QueueError | None:
    """The domain error that `exc` becomes (see translated_errors), or None: it goes on as it is
    (a domain error already, or not the driver's)."""
    if isinstance(exc, QueueError):
        return None
    if isinstance(exc, asyncpg.UniqueViolationError):
        return ItemExists() if exc.constraint_name == "sq_items_id_key" else StoreError()
    if isinstance(exc, _MISCONFIGURED):
        return DatabaseMisconfigured(misconfiguration(exc, server))
    if isinstance(exc, asyncpg.UndefinedTableError | asyncpg.UndefinedFunctionError):
        return SchemaNotReady()
    if isinstance(exc, (*UNAVAILABLE, *_TRY_AGAIN)):
        return DatabaseUnavailable()
    if isinstance(exc, asyncpg.PostgresError):
        return ItemExists() if exc.sqlstate == ITEM_EXISTS else StoreError()
    return None


def misconfiguration(exc: asyncpg.PostgresError, server: str | None = None) -> str:
    """One line: what the server said (`database "x" does not exist`, `password authentication
    failed for user "u"`), and where."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    return f"{lines[0]} on {server}" if server else lines[0]


def server_of(url: str) -> str | None:
    """host:port of a postgresql:// URL, as errors name the server; None where the URL names no
    one server (several, or libpq's defaults and query parameters decide)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or "," in host:
        return None
    host = unquote(host)
    if host.startswith("/"):  # a Unix socket's directory
        return host
    return f"[{host}]:{port or 5432}" if ":" in host else f"{host}:{port or 5432}"
