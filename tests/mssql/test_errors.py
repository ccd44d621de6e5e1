"""Driver errors become domain errors; waiting for a connection is bounded."""

from __future__ import annotations

import asyncio
import types
from typing import Any
from uuid import uuid4

import pytest
from simplequeue.domain import (
    DatabaseMisconfigured,
    DatabaseUnavailable,
    ItemExists,
    NewItem,
    QueueError,
    SchemaNotReady,
    StoreError,
)
from simplequeue.store.mssql.errors import Deadlocked, translated_errors
from simplequeue.store.mssql.store import MssqlStore

from tests.mssql.helpers import NOW, URL, FakeConnection

DRIVER = "[Microsoft][ODBC Driver 18 for SQL Server]"
SERVER = DRIVER + "[SQL Server]"
DUPLICATE = "Cannot insert duplicate key row in object 'dbo.sq_items' with unique index '{}'."


@pytest.mark.parametrize(
    ("kind", "state", "message", "expected"),
    [
        (
            "IntegrityError",
            "23000",
            SERVER + DUPLICATE.format("sq_items_id_key") + " (2601) (SQLExecute)",
            ItemExists,
        ),
        (
            "IntegrityError",
            "23000",
            SERVER + DUPLICATE.format("other_index") + " (2601) (SQLExecute)",
            StoreError,
        ),
        (
            "ProgrammingError",
            "42S02",
            SERVER + "Invalid object name 'dbo.sq_items'. (208) (SQLExecute)",
            SchemaNotReady,
        ),
        (
            "ProgrammingError",
            "42000",
            SERVER + "Could not find stored procedure 'dbo.sq_push_items'. (2812) (SQLExecute)",
            SchemaNotReady,
        ),
        (
            "OperationalError",
            "08001",
            DRIVER + "Login timeout expired (0) (SQLDriverConnect)",
            DatabaseUnavailable,
        ),
        (
            "OperationalError",
            "08S01",
            DRIVER + "Communication link failure (0) (SQLExecute)",
            DatabaseUnavailable,
        ),
        ("Error", "HYT00", DRIVER + "Query timeout expired (0) (SQLExecute)", DatabaseUnavailable),
        (
            "InterfaceError",
            "28000",
            SERVER + "Login failed for user 'sa'. (18456) (SQLDriverConnect)",
            DatabaseMisconfigured,  # still a DatabaseUnavailable (retried), naming the cause
        ),
        (
            "Error",
            "42000",
            SERVER + "Database 'q' on server 's' is not currently available. (40613)",
            DatabaseUnavailable,
        ),
        (
            "Error",
            "40001",
            SERVER + "Transaction was deadlocked ... chosen as the deadlock victim. (1205)",
            Deadlocked,
        ),
        (
            "DataError",
            "22001",
            SERVER + "String or binary data would be truncated. (2628) (SQLExecute)",
            StoreError,
        ),
    ],
)
async def test_driver_errors_become_domain_errors(
    fake_pyodbc: types.ModuleType, kind: str, state: str, message: str, expected: type[QueueError]
) -> None:
    original = getattr(fake_pyodbc, kind)(state, message)

    with pytest.raises((QueueError, Deadlocked)) as raised:
        async with translated_errors():
            raise original

    assert type(raised.value) is expected
    assert raised.value.__cause__ is original


async def test_timeouts_become_database_unavailable() -> None:
    with pytest.raises(DatabaseUnavailable) as raised:
        async with translated_errors():
            raise TimeoutError()
    assert isinstance(raised.value.__cause__, TimeoutError)


async def test_other_exceptions_pass_through_untouched(fake_pyodbc: types.ModuleType) -> None:
    with pytest.raises(KeyError):
        async with translated_errors():
            raise KeyError("not the driver's")


async def test_a_duplicate_id_is_item_exists_and_rolls_back(
    fake: tuple[MssqlStore, FakeConnection], fake_pyodbc: types.ModuleType
) -> None:
    store, conn = fake
    message = SERVER + DUPLICATE.format("sq_items_id_key") + " (2601) (SQLExecute)"
    conn.errors["push_batch"] = fake_pyodbc.IntegrityError("23000", message)

    with pytest.raises(ItemExists):
        await store.push_batch([NewItem(uuid4(), "orders", "1", NOW)], skip_existing=False)

    assert (conn.commits, conn.rollbacks) == (0, 1)


class HangingPool:
    """A pool whose connections never come: the server is down and the login never answers."""

    async def acquire(self) -> Any:
        await asyncio.Event().wait()

    async def release(self, conn: Any) -> None:
        raise AssertionError("nothing was acquired")


async def test_waiting_for_a_connection_is_bounded() -> None:
    store = MssqlStore(URL, timeout_seconds=0.05)
    store._pool = HangingPool()

    with pytest.raises(DatabaseUnavailable) as raised:
        async with asyncio.timeout(5):
            await store.pop("orders", 1, 30)

    assert isinstance(raised.value.__cause__, TimeoutError)
