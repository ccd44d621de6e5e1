"""The one place where asyncpg's exceptions become domain errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from simplequeue.domain import DatabaseUnavailable, ItemExists, QueueError, SchemaNotReady, StoreError

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


# Worth a retry: one of two deadlocked transactions was rolled back, or a statement ran into
# statement_timeout or lock_timeout (the server is overloaded or a lock is held too long).
_TRY_AGAIN = (asyncpg.DeadlockDetectedError, asyncpg.QueryCanceledError, asyncpg.LockNotAvailableError)


@asynccontextmanager
async def translated_errors() -> AsyncIterator[None]:
    """The one place where asyncpg's exceptions become domain errors. What the driver said stays
    on the chained cause, for the log; clients hear the domain error's plain sentence."""
    try:
        yield
    except QueueError:
        raise
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "sq_items_id_key":
            raise ItemExists() from exc
        raise StoreError() from exc
    except asyncpg.UndefinedTableError as exc:
        raise SchemaNotReady() from exc
    except (*UNAVAILABLE, *_TRY_AGAIN) as exc:
        raise DatabaseUnavailable() from exc
    except asyncpg.PostgresError as exc:
        raise StoreError() from exc
