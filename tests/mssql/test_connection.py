"""Opening the pool, the ODBC connection string, and no unixODBC needed to import the dialect."""

from __future__ import annotations

import subprocess
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest
from simplequeue.store.mssql.odbc import odbc_connection_string
from simplequeue.store.mssql.store import MssqlStore

from tests.mssql.helpers import URL, FakeConnection

# --- opening the pool -----------------------------------------------------------------------------


@pytest.fixture
def fake_aioodbc(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    calls: dict[str, Any] = {}

    class Pool:
        def close(self) -> None:
            calls["closed"] = True

        async def wait_closed(self) -> None:
            calls["wait_closed"] = True

    async def create_pool(**kwargs: Any) -> Pool:
        calls["create_pool"] = kwargs
        return Pool()

    module = types.ModuleType("aioodbc")
    module.create_pool = create_pool
    monkeypatch.setitem(sys.modules, "aioodbc", module)
    return calls


async def test_open_creates_a_lazy_pool_that_never_autocommits(fake_aioodbc: dict[str, Any]) -> None:
    store = MssqlStore(URL, pool_size=7, timeout_seconds=2.5)

    await store.open()
    await store.close()

    kwargs = fake_aioodbc["create_pool"]
    assert kwargs["dsn"] == odbc_connection_string(URL)
    assert (kwargs["minsize"], kwargs["maxsize"], kwargs["autocommit"]) == (0, 7, False)
    assert kwargs["timeout"] == 2
    assert isinstance(kwargs["timeout"], int)
    assert fake_aioodbc["closed"]
    # Blocking ODBC calls get a thread per pooled connection, not the loop's few default ones.
    executor = kwargs["executor"]
    assert isinstance(executor, ThreadPoolExecutor)
    assert executor._max_workers == 7
    assert executor._shutdown, "closed with the store"
    assert fake_aioodbc["wait_closed"]


async def test_each_new_connection_bounds_its_statements_and_lock_waits(fake_aioodbc: dict[str, Any]) -> None:
    store = MssqlStore(URL, timeout_seconds=2.5)
    await store.open()
    conn = FakeConnection()

    await fake_aioodbc["create_pool"]["after_created"](conn)

    assert conn._conn.timeout == 3  # whole seconds, rounded up: never 0, which would mean none
    assert [e.sql for e in conn.executed] == ["SET LOCK_TIMEOUT 2500"]
    await store.close()


# --- the connection string ------------------------------------------------------------------------


def test_microsoft_driver_is_the_default_with_the_port_after_a_comma() -> None:
    assert odbc_connection_string(
        "mssql+odbc://sa:pw@db.local:1444/queue?Encrypt=yes&TrustServerCertificate=yes"
    ) == (
        "Driver={ODBC Driver 18 for SQL Server};Server=db.local,1444;Database=queue;UID=sa;PWD=pw;"
        "Encrypt=yes;TrustServerCertificate=yes"
    )


def test_the_port_defaults_to_1433_and_every_scheme_is_accepted() -> None:
    for scheme in ("mssql", "mssql+odbc", "mssql+aioodbc"):
        dsn = odbc_connection_string(f"{scheme}://sa:pw@db/queue?driver=ODBC+Driver+18+for+SQL+Server")
        assert dsn == "Driver={ODBC Driver 18 for SQL Server};Server=db,1433;Database=queue;UID=sa;PWD=pw"


def test_freetds_gets_a_port_keyword_and_tds_7_4() -> None:
    assert odbc_connection_string("mssql+odbc://sa:pw@db:1433/queue?driver=FreeTDS") == (
        "Driver={FreeTDS};Server=db;Port=1433;Database=queue;UID=sa;PWD=pw;TDS_Version=7.4"
    )
    assert odbc_connection_string("mssql://sa:pw@db/q?driver=FreeTDS&TDS_Version=8.0").endswith(
        ";TDS_Version=8.0"
    )


def test_credentials_are_percent_decoded_and_braced_when_needed() -> None:
    dsn = odbc_connection_string("mssql+odbc://app%40corp:p%3Bw%7Dd%40%3A@db/queue")
    assert "UID=app@corp;PWD={p;w}}d@:}" in dsn


def test_odbc_connect_is_passed_through_verbatim() -> None:
    raw = (
        "Driver={ODBC Driver 18 for SQL Server};Server=tcp:x.database.windows.net,1433;"
        "Authentication=ActiveDirectoryMsi"
    )
    url = "mssql+odbc:///?odbc_connect=" + quote_plus(raw)
    assert odbc_connection_string(url) == raw


def test_other_databases_urls_are_refused() -> None:
    with pytest.raises(ValueError, match="SQL Server"):
        odbc_connection_string("postgresql://u@h/db")


# --- no unixODBC needed to import -----------------------------------------------------------------


def test_importing_the_store_loads_no_odbc_module() -> None:
    # Every module of the dialect, not only the store that imports most of them.
    code = (
        "import sys, importlib, pkgutil, simplequeue.store.mssql as dialect; "
        "names = [m.name for m in pkgutil.iter_modules(dialect.__path__)]; "
        "assert {'store', 'odbc', 'errors', 'params', 'statements'} <= set(names), names; "
        "[importlib.import_module(f'{dialect.__name__}.{name}') for name in names]; "
        "print(sorted(m for m in ('pyodbc', 'aioodbc') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"
