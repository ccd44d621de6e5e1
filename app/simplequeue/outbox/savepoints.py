"""The savepoint every driver's push runs under, written once for sync drivers and once for async
ones: a refused push (an id another queue holds, a missing schema, a bad payload) is rolled back
to the savepoint and leaves the caller's transaction usable, and what the database said becomes
the outbox's own error on the way out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

from simplequeue.outbox.items import SAVEPOINT

Translate = Callable[[BaseException], BaseException]


@dataclass(frozen=True, slots=True)
class Dialect:
    """A dialect's savepoint statements. `undo` runs in order on any error, before it goes on up;
    `release` (if any) once the push went through."""

    save: str
    undo: tuple[str, ...]
    release: str | None


# SQLite takes PostgreSQL's statements as they are.
STANDARD = Dialect(
    save=f"SAVEPOINT {SAVEPOINT}",
    undo=(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}", f"RELEASE SAVEPOINT {SAVEPOINT}"),
    release=f"RELEASE SAVEPOINT {SAVEPOINT}",
)
# asyncpg runs a statement list without parameters in one round trip.
STANDARD_ONE_TRIP = Dialect(STANDARD.save, ("; ".join(STANDARD.undo),), STANDARD.release)
# SQL Server has no RELEASE: a savepoint lasts until the transaction ends. A doomed transaction
# (XACT_STATE() = -1) cannot roll back to a savepoint: only the caller's rollback ends it, and the
# caller's next statement says so.
MSSQL = Dialect(
    save=f"SAVE TRANSACTION {SAVEPOINT}",
    undo=(f"IF XACT_STATE() = 1 ROLLBACK TRANSACTION {SAVEPOINT}",),
    release=None,
)


@contextmanager
def translated(translate: Translate) -> Iterator[None]:
    """The outbox's error for what the database said (translate's answer), raised from it."""
    try:
        yield
    except Exception as exc:
        if (outboxed := translate(exc)) is not exc:
            raise outboxed from exc
        raise


@contextmanager
def savepoint(execute: Callable[[str], object], dialect: Dialect, translate: Translate) -> Iterator[None]:
    """The body under a savepoint, on a sync driver's `execute` (a cursor's or a connection's)."""
    execute(dialect.save)
    try:
        with translated(translate):
            yield
    except BaseException:
        for sql in dialect.undo:
            execute(sql)
        raise
    if dialect.release:
        execute(dialect.release)


@asynccontextmanager
async def savepoint_async(
    execute: Callable[[str], Awaitable[object]], dialect: Dialect, translate: Translate
) -> AsyncIterator[None]:
    """savepoint, on an async driver's `execute`."""
    await execute(dialect.save)
    try:
        with translated(translate):
            yield
    except BaseException:
        for sql in dialect.undo:
            await execute(sql)
        raise
    if dialect.release:
        await execute(dialect.release)
