"""The SQL Server dialect through the real driver stack (aioodbc → pyodbc → unixODBC → FreeTDS),
against a loopback port where no server listens.

No SQL Server runs on our machines, so this checks what can be checked without one. The URL
becomes a connection string the driver manager accepts, and a refused connection surfaces as
DatabaseUnavailable (HTTP 503) within the timeout instead of hanging or becoming a 500.
Required under CI (SIMPLEQUEUE_REQUIRE_ODBC=1, where scripts/test installs unixodbc and tdsodbc);
skipped with the reason elsewhere.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from simplequeue.domain import DatabaseUnavailable, NewItem
from simplequeue.settings import Settings
from simplequeue.store.factory import create_store

from tests.test_e2e import free_port


def _require_freetds() -> None:
    try:
        import pyodbc
    except ImportError as exc:
        reason = f"pyodbc cannot load unixODBC: {exc}"
    else:
        if any("freetds" in d.lower() for d in pyodbc.drivers()):
            return
        reason = f"no FreeTDS ODBC driver registered (drivers: {pyodbc.drivers()})"
    if os.environ.get("SIMPLEQUEUE_REQUIRE_ODBC") == "1":
        pytest.fail(reason + " (required: SIMPLEQUEUE_REQUIRE_ODBC=1)")
    pytest.skip(reason)


@pytest.fixture
def refused_url() -> str:
    _require_freetds()
    return f"mssql+odbc://sa:pw%3Bx@127.0.0.1:{free_port()}/queue?driver=FreeTDS"


async def test_unreachable_server_is_database_unavailable(refused_url: str) -> None:
    store = create_store(refused_url, timeout_seconds=2)
    await store.open()  # opening never connects: the service starts while the database is down
    try:
        item = NewItem(uuid4(), "q", "1", datetime.now(UTC))
        with pytest.raises(DatabaseUnavailable) as caught:
            await asyncio.wait_for(store.push_batch([item], skip_existing=False), timeout=30)
        assert caught.value.__cause__ is not None  # the driver's error is chained, not swallowed
        with pytest.raises(DatabaseUnavailable):
            await asyncio.wait_for(store.pop("q", 1, 30), timeout=30)
    finally:
        await store.close()


async def test_api_answers_503_when_sql_server_is_down(refused_url: str) -> None:
    import httpx
    from asgi_lifespan import LifespanManager
    from simplequeue.main import create_app

    app = create_app(Settings(database_url=refused_url, migrate_on_start=False, db_timeout_seconds=2))
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sq") as client:
            response = await asyncio.wait_for(client.get("/readyz"), timeout=30)
    assert response.status_code == 503
    assert response.json()["error"] == "DatabaseUnavailable"
