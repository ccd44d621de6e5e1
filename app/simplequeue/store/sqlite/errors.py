"""The one place where sqlite3's exceptions (and our own waits' timeouts) become domain errors."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from simplequeue.domain import DatabaseUnavailable, ItemExists, QueueError, SchemaNotReady, StoreError
from simplequeue.domain.errors import DatabaseMisconfigured


@asynccontextmanager
async def translated_errors() -> AsyncIterator[None]:
    """The one place where sqlite3's exceptions (and our own waits' timeouts) become domain errors.
    What SQLite said stays on the chained cause, for the log."""
    with translated_sync_errors():
        yield


@contextmanager
def translated_sync_errors() -> Iterator[None]:
    """translated_errors for code that runs on a sqlite3 connection directly (simplequeue.outbox)."""
    try:
        yield
    except QueueError:
        raise
    except TimeoutError as exc:  # waiting for this process's writer or a reader
        raise DatabaseUnavailable() from exc
    except sqlite3.IntegrityError as exc:
        if "sq_items.id" in str(exc):
            raise ItemExists() from exc
        raise StoreError() from exc
    except sqlite3.OperationalError as exc:
        message = str(exc)
        if "no such table" in message:
            raise SchemaNotReady() from exc
        if "unable to open" in message:  # a directory, or one that may not be written
            raise DatabaseMisconfigured(
                f"SQLite {message}: check that the path names a file in a directory this service may write"
            ) from exc
        if "locked" in message or "busy" in message:
            raise DatabaseUnavailable() from exc
        raise StoreError() from exc
    except sqlite3.Error as exc:
        raise StoreError() from exc
