"""The one place where pyodbc's exceptions (and timeouts) become domain errors."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_random

from simplequeue.domain import DatabaseUnavailable, ItemExists, QueueError, SchemaNotReady, StoreError
from simplequeue.domain.errors import DatabaseMisconfigured

P = ParamSpec("P")
T = TypeVar("T")

_ITEM_ID_INDEX = "sq_items_id_key"
_DUPLICATE_KEY = {2601, 2627}
_INVALID_OBJECT = 208
# A procedure migrate creates (dbo.sq_push_items, procedures.sql) is not there: a service newer than its
# database's schema, as 208 is for a table.
_NO_PROCEDURE = 2812
_DEADLOCK_VICTIM = 1205
# Azure SQL's "try again later" errors: the database is moving, busy or throttled, or not yet open;
# and 1222, a lock not granted within the session's LOCK_TIMEOUT.
_TRANSIENT = {1222, 10928, 10929, 40197, 40501, 40613, 49918, 49919, 49920}
# The server refuses our settings: 4060, the database named cannot be opened (it does not exist,
# or the login may not open it; on Azure, also while it moves); 18456, the login failed. Tried
# again like an outage, but the detail names the cause (the server's words hold no password).
_NO_DATABASE = 4060
_LOGIN_FAILED = 18456
_LOGIN_STATE = "28000"
_DATABASE_NAMED = re.compile(r'Cannot open database "([^"]*)"')
_USER_NAMED = re.compile(r"Login failed for user '([^']*)'")
# 08: connection; HYT00/HYT01: login or query timeout; 40001: deadlock victim.
# FreeTDS reports deadlocks and lock timeouts under other states (HY000, 01000): the native
# numbers above decide for those.
_UNAVAILABLE_STATES = ("08", "HYT", "40001")
# pyodbc ends each diagnostic record with "(native error number) (ODBC function)" and joins
# records with "; ". Only those numbers are SQL Server's: a "(12345)" inside the message text (a
# duplicate key's value, a process id) is not, and must not be read as an error number.
_NATIVE = re.compile(r"\((-?\d+)\)(?=\s*\(SQL\w*\)|\s*;|\s*$)")


class Deadlocked(Exception):
    """SQL Server chose this transaction as a deadlock victim and rolled it back. Not a domain
    error: it never leaves the store, which runs the transaction again a few times and then
    raises DatabaseUnavailable (see retry_deadlocks)."""


def on_deadlock(
    attempts: int,
) -> Callable[[Callable[P, Coroutine[Any, Any, T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Run a store method up to `attempts` times while it is a deadlock victim, after a short
    random pause that lets the winner finish; then DatabaseUnavailable (503), which clients retry.
    Only a method of one transaction may run again (rolled back whole, it is safe to); one of
    several (redrive, purge_dead, migrate) would count or apply its earlier batches twice."""

    def decorate(method: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        retrying = retry(
            retry=retry_if_exception_type(Deadlocked),
            stop=stop_after_attempt(attempts),
            wait=wait_random(0.005, 0.05),
            reraise=True,
        )(method)

        @functools.wraps(method)
        async def run(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await retrying(*args, **kwargs)
            except Deadlocked as exc:
                raise DatabaseUnavailable() from exc

        return run

    return decorate


retry_deadlocks = on_deadlock(4)
deadlock_unavailable = on_deadlock(1)


@asynccontextmanager
async def translated_errors(server: str | None = None) -> AsyncIterator[None]:
    """The one place where pyodbc's exceptions (and timeouts) become domain errors. `server`
    (host:port) ends a misconfiguration's detail: `database "x" does not exist on db:1433, ...`."""
    try:
        yield
    except QueueError:
        raise
    except OSError as exc:  # TimeoutError from a bounded acquire included
        raise DatabaseUnavailable() from exc
    except Exception as exc:
        if not _is_driver_error(exc):
            raise
        raise _domain_error(exc, server) from exc


def _is_driver_error(exc: Exception) -> bool:
    # A pyodbc exception can only exist once open() imported pyodbc; no import is attempted here.
    pyodbc = sys.modules.get("pyodbc")
    return pyodbc is not None and isinstance(exc, pyodbc.Error)


def _domain_error(exc: Exception, server: str | None = None) -> QueueError | Deadlocked:
    state, message = _diagnostics(exc)
    codes = native_errors(message)
    if detail := misconfiguration(state, message, codes, server):
        return DatabaseMisconfigured(detail)
    if _DEADLOCK_VICTIM in codes:
        return Deadlocked()
    if codes & _DUPLICATE_KEY and _ITEM_ID_INDEX in message:
        return ItemExists()
    if codes & {_INVALID_OBJECT, _NO_PROCEDURE} or state == "42S02":
        return SchemaNotReady()
    operational = isinstance(exc, sys.modules["pyodbc"].OperationalError)
    # What the driver said stays on the chained cause, for the log; clients get a plain sentence.
    if operational or state.startswith(_UNAVAILABLE_STATES) or codes & _TRANSIENT:
        return DatabaseUnavailable()
    return StoreError()


def misconfiguration(state: str, message: str, codes: set[int], server: str | None = None) -> str | None:
    """One line naming what SQL Server refused (the database, the login), or None."""
    on = f" on {server}" if server else ""
    if _NO_DATABASE in codes:
        named = _DATABASE_NAMED.search(message)
        database = f'database "{named.group(1)}"' if named else "the database named in the URL"
        return f"{database} does not exist{on}, or the login may not open it (SQL Server error 4060)"
    if _LOGIN_FAILED in codes or state == _LOGIN_STATE:
        named = _USER_NAMED.search(message)
        user = f" for user '{named.group(1)}'" if named else ""
        why = "SQL Server error 18456" if _LOGIN_FAILED in codes else f"SQLSTATE {state}"
        return f"login failed{user}{on}: check the user name and password ({why})"
    return None


def native_errors(message: str) -> set[int]:
    """SQL Server's error numbers in a pyodbc message, one per diagnostic record."""
    return {int(code) for code in _NATIVE.findall(message)}


def _diagnostics(exc: Exception) -> tuple[str, str]:
    """pyodbc's errors carry (SQLSTATE, message); the message ends in '(native error number)'."""
    if len(exc.args) >= 2 and isinstance(exc.args[0], str):
        return exc.args[0], str(exc.args[1])
    return "", str(exc)
