"""ODBC as this dialect uses it: the connection string, the pool and its connections' bounds, and
batches run on an aioodbc connection, committed or rolled back.

aioodbc (and with it pyodbc) is imported by ``create_pool()`` only, when the store opens, so that
importing this module (and every deployment on another database) needs no unixODBC: the connection
and cursor are described by the protocols below, not by aioodbc's classes.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Executor
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

SCHEMES = ("mssql", "mssql+odbc", "mssql+aioodbc")
DEFAULT_DRIVER = "ODBC Driver 18 for SQL Server"
DEFAULT_PORT = 1433
# Idle pooled connections are replaced before load balancers and Azure's gateway drop them.
POOL_RECYCLE_SECONDS = 600

# What the store binds: pyodbc types a str or an int without asking the server (see queries.sql).
Param = str | int
Row = dict[str, Any]
# pyodbc.SQL_WVARCHAR (kept here so that importing this module needs no pyodbc). With size 0 a
# str parameter is NVARCHAR(MAX) whatever its length: pyodbc would otherwise bind a str longer
# than the driver's limit (2,000 characters with Driver 18, 4,000 with FreeTDS) as NTEXT, which
# OPENJSON refuses (error 8116) and no comparison takes (error 402); and one type for every
# length keeps one cached plan per statement instead of one per declared length.
SQL_WVARCHAR = -9
NVARCHAR_MAX = (SQL_WVARCHAR, 0, 0)


class Cursor(Protocol):
    """The part of an aioodbc cursor the store uses."""

    @property
    def description(self) -> Sequence[Sequence[Any]] | None: ...

    async def setinputsizes(self, sizes: Sequence[tuple[int, int, int] | None]) -> None: ...

    async def execute(self, sql: str, *params: Param) -> Any: ...

    async def fetchall(self) -> list[Sequence[Any]]: ...

    async def nextset(self) -> bool | None: ...

    async def close(self) -> None: ...


class Connection(Protocol):
    """The part of an aioodbc connection the store uses."""

    async def cursor(self) -> Cursor: ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...

    async def close(self) -> None: ...


# --- the connection string ----------------------------------------------------------------------


def odbc_connection_string(url: str) -> str:
    """The ODBC connection string that an ``mssql+odbc://`` URL stands for.

    ``mssql+odbc://user:password@host:port/database?driver=...&Encrypt=yes`` with the user and
    password percent-encoded. ``driver`` picks Microsoft's ODBC driver (the default, version 18) or
    FreeTDS; every other parameter is passed on as an ODBC keyword. ``odbc_connect=<percent-encoded
    connection string>`` is used as it is.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise ValueError(f"not a SQL Server URL: scheme {parts.scheme!r}, expected one of {SCHEMES}")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    verbatim = _take(options, "odbc_connect")
    if verbatim is not None:
        return verbatim
    driver = _take(options, "driver") or DEFAULT_DRIVER
    freetds = any(name in driver.lower() for name in ("freetds", "tdsodbc"))
    host, port = parts.hostname or "localhost", str(parts.port or DEFAULT_PORT)
    # Microsoft's driver takes the port after a comma; FreeTDS has a keyword of its own.
    pairs = [("Driver", _braced(driver))]
    pairs += [("Server", host), ("Port", port)] if freetds else [("Server", f"{host},{port}")]
    if database := unquote(parts.path.lstrip("/")):
        pairs.append(("Database", _odbc_value(database)))
    if parts.username is not None:
        pairs.append(("UID", _odbc_value(unquote(parts.username))))
    if parts.password is not None:
        pairs.append(("PWD", _odbc_value(unquote(parts.password))))
    pairs += [(key, _odbc_value(value)) for key, value in options.items()]
    if freetds and not any(key.lower() == "tds_version" for key, _ in pairs):
        pairs.append(("TDS_Version", "7.4"))  # the first version that carries DATETIME2 as a time
    return ";".join(f"{key}={value}" for key, value in pairs)


def _take(options: dict[str, str], key: str) -> str | None:
    """Remove and return a URL parameter, whatever its case."""
    for name in list(options):
        if name.lower() == key:
            return options.pop(name)
    return None


def _braced(value: str) -> str:
    return "{" + value.replace("}", "}}") + "}"


def _odbc_value(value: str) -> str:
    """Brace a value that would otherwise end the attribute or be trimmed (a password with ';')."""
    if any(char in value for char in ";{}=") or value != value.strip():
        return _braced(value)
    return value


# --- the pool ----------------------------------------------------------------------------------


async def create_pool(dsn: str, *, size: int, timeout_seconds: float, executor: Executor) -> Any:
    """aioodbc's pool, imported only now. minsize=0: nothing connects here, so the service starts (and
    answers 503) while SQL Server is down. timeout is pyodbc's login timeout, in whole seconds.

    Every blocking ODBC call runs on `executor`, a thread per pooled connection: on the loop's
    default executor (a few threads on a small machine) connections blocked on locks would starve
    the rest, and the process would hang with the pool half idle."""
    try:
        import aioodbc
    except ImportError as exc:
        raise ImportError(
            "SQL Server needs aioodbc (pip install 'simplequeue[mssql]') and unixODBC with "
            "Microsoft's ODBC Driver 18 or FreeTDS on the host"
        ) from exc
    return await aioodbc.create_pool(
        dsn=dsn,
        minsize=0,
        maxsize=size,
        autocommit=False,
        timeout=max(1, round(timeout_seconds)),
        pool_recycle=POOL_RECYCLE_SECONDS,
        executor=executor,
        after_created=partial(bound_statements, timeout_seconds=timeout_seconds),
    )


async def bound_statements(conn: Any, timeout_seconds: float) -> None:
    """Every statement of a new connection ends within the timeout: the driver cancels it past
    its query timeout (HYT00, and the server rolls the batch back under XACT_ABORT), and a lock
    wait ends at LOCK_TIMEOUT (1222). Both become DatabaseUnavailable. Migrations lift them."""
    set_query_timeout(conn, whole_seconds(timeout_seconds))
    await run_batch(conn, f"SET LOCK_TIMEOUT {round(timeout_seconds * 1000)}")


def set_query_timeout(conn: Any, seconds: int) -> None:
    """pyodbc's query timeout (0: none), for the cursors made from now on. aioodbc's connection
    exposes it read-only, so it is set on the pyodbc connection inside."""
    conn._conn.timeout = seconds


def whole_seconds(seconds: float) -> int:
    """ODBC timeouts are whole seconds, and 0 means none."""
    return max(1, math.ceil(seconds))


# --- running batches ----------------------------------------------------------------------------


async def run_batch_sets(conn: Connection, sql: str, *params: Param) -> list[list[Row]]:
    """Run one batch and return every result set that has columns, in order, as lists of dicts.
    Every str parameter is bound as NVARCHAR(MAX) (see NVARCHAR_MAX).

    Cancelled (a client went away, a shutdown), the batch does not just stop being awaited: it
    runs on in its executor thread, on this connection. So the driver is asked to stop it
    (SQLCancel, made to be called from another thread), and the caller waits for the thread to
    let go of the connection before it rolls back and hands it back to the pool. The query timeout
    bounds that wait."""
    cursor = await conn.cursor()
    work = asyncio.ensure_future(_run(cursor, sql, params))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        cancel_statement(cursor)
        with suppress(BaseException):
            await asyncio.shield(work)  # its own error (HY008, cancelled) is of no interest now
        raise


def cancel_statement(cursor: Cursor) -> None:
    """SQLCancel on the pyodbc cursor inside aioodbc's (a no-op for a cursor without one)."""
    impl = getattr(cursor, "_impl", None)
    if impl is not None:
        with suppress(Exception):
            impl.cancel()


async def _run(cursor: Cursor, sql: str, params: Sequence[Param]) -> list[list[Row]]:
    try:
        if params:
            await cursor.setinputsizes([NVARCHAR_MAX if isinstance(p, str) else None for p in params])
        await cursor.execute(sql, *params)
        sets = await _result_sets(cursor)
    except BaseException:
        # The statement's error is the one to tell: closing a cursor on a dead link (08S01) fails
        # too, and would hide it behind an error of its own.
        with suppress(Exception):
            await cursor.close()
        raise
    await cursor.close()
    return sets


async def run_batch(conn: Connection, sql: str, *params: Param) -> list[Row]:
    """Run one batch and return its first result set (none: an empty list)."""
    sets = await run_batch_sets(conn, sql, *params)
    return sets[0] if sets else []


async def _result_sets(cursor: Cursor) -> list[list[Row]]:
    # Reading on to the end of the batch makes the driver raise errors of later statements too.
    # Results without columns (row counts, should a batch not SET NOCOUNT ON) are passed over.
    sets: list[list[Row]] = []
    while True:
        if cursor.description is not None:
            names = [column[0] for column in cursor.description]
            sets.append([dict(zip(names, row, strict=True)) for row in await cursor.fetchall()])
        if not await cursor.nextset():
            return sets


@asynccontextmanager
async def committed(conn: Connection) -> AsyncIterator[None]:
    """Commit what the block did, or roll it back if it raised.

    ODBC manual-commit mode opens a transaction at the first statement that needs one.
    """
    try:
        yield
    except BaseException:
        try:
            await conn.rollback()
        except Exception:
            # A connection that cannot roll back must not go back to the pool; closed, it is dropped.
            with suppress(Exception):
                await conn.close()
        raise
    try:
        await conn.commit()
    except BaseException:
        # A commit that failed leaves the connection in a state nobody knows (the link may be gone,
        # the transaction may or may not be open): closed, the pool drops it instead of lending it.
        with suppress(Exception):
            await conn.close()
        raise
