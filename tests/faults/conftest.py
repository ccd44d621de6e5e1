"""Fixtures of the fault-injection suite.

- `private_postgres`: a PostgreSQL cluster of this session only (initdb on a free port of 127.0.0.1),
  which the tests may stop, restart, freeze (SIGSTOP) and thaw (SIGCONT) without touching the
  shared server. It cannot be made: the PostgreSQL cases fail under CI (CI=true, or
  SIMPLEQUEUE_REQUIRE_FAULTS=1) and are skipped with the reason otherwise.
- `engine`: each test runs on SQLite (a file in tmp_path) and on the private cluster.
- `services`: starts `simplequeue serve` processes and stops every one of them afterwards.
- `report`: prints a test's figures at once and again in the run's summary.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NoReturn

import pytest

from tests.faults.helpers import (
    REQUIRED,
    Engine,
    PrivatePostgres,
    Reporter,
    Service,
    ServiceFactory,
    postgres_bindir,
)


def _unavailable(message: str) -> NoReturn:
    if REQUIRED:
        pytest.fail(message + " (required under CI)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def _private_cluster() -> Iterator[PrivatePostgres | str]:
    """The cluster, or why there is none (reported by each test that needs it)."""
    bindir = postgres_bindir()
    if bindir is None:
        yield "no PostgreSQL server binaries (initdb, postgres) found; set SIMPLEQUEUE_FAULT_PG_BIN"
        return
    try:
        cluster = PrivatePostgres(bindir)
    except (OSError, KeyError) as exc:
        yield f"cannot prepare a private PostgreSQL cluster: {exc!r}"
        return
    try:
        cluster.init()
        cluster.start()
    except (OSError, RuntimeError, ValueError) as exc:
        cluster.destroy()
        yield f"cannot start a private PostgreSQL cluster with {bindir}: {exc}"
        return
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def private_postgres(_private_cluster: PrivatePostgres | str) -> Iterator[PrivatePostgres]:
    """The private cluster, running and thawed before and after the test."""
    if isinstance(_private_cluster, str):
        _unavailable(_private_cluster)
    cluster = _private_cluster
    cluster.thaw()
    if not cluster.running():
        cluster.start()
    try:
        yield cluster
    finally:
        cluster.thaw()
        if not cluster.running():
            cluster.start()


@pytest.fixture
def private_postgres_url(private_postgres: PrivatePostgres) -> str:
    return private_postgres.url


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    if request.param == "sqlite":
        path = tmp_path / "faults.db"
        return Engine("sqlite", f"sqlite:///{path}", sqlite_path=path)
    cluster: PrivatePostgres = request.getfixturevalue("private_postgres")
    return Engine("postgresql", cluster.url, cluster=cluster)


@pytest.fixture
def services(tmp_path: Path) -> Iterator[ServiceFactory]:
    """make(database_url, name=..., env=..., start=True) -> Service; every one is stopped afterwards."""
    started: list[Service] = []

    def make(
        database_url: str, name: str = "service", env: Mapping[str, str] | None = None, start: bool = True
    ) -> Service:
        service = Service(database_url, tmp_path, f"{name}-{len(started)}", env)
        started.append(service)
        if start:
            service.start()
        return service

    try:
        yield make
    finally:
        for service in started:
            service.stop(timeout=10)


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Reporter:
    return Reporter(request.config, request.node)
