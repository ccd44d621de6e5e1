"""Fixtures of the SQL Server tests: the store on the recording fake connection, and pyodbc's
exception tree without pyodbc."""

from __future__ import annotations

import sys
import types

import pytest
from simplequeue.store.mssql.store import MssqlStore

from tests.mssql.helpers import FakeConnection, fake_store


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> tuple[MssqlStore, FakeConnection]:
    return fake_store(monkeypatch)


@pytest.fixture
def fake_pyodbc(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """pyodbc's exception tree, without pyodbc (it cannot load without unixODBC)."""
    module = types.ModuleType("pyodbc")
    module.Error = type("Error", (Exception,), {})
    for name in ("OperationalError", "ProgrammingError", "IntegrityError", "DataError", "InterfaceError"):
        setattr(module, name, type(name, (module.Error,), {}))
    monkeypatch.setitem(sys.modules, "pyodbc", module)
    return module
