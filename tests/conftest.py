from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests import stopping
from tests.engines import ENGINES, FakeClock, postgres_database, require_mssql
from tests.faults.helpers import FIGURES_PROPERTY
from tests.http import Client, app_client

# A run's tests share one PostgreSQL database, and each makes queues of its own: together they pass
# the default SIMPLEQUEUE_MAX_QUEUES. Every service the tests start (in process, or `serve`, which
# inherits the environment) takes this limit unless a test gives its own (tests/test_queue_limits.py).
os.environ.setdefault("SIMPLEQUEUE_MAX_QUEUES", "1000000")


def pytest_configure(config: pytest.Config) -> None:
    """Stopped by a signal, the run still ends what it started (see tests/stopping.py). The last
    cleanup is registered first: it runs after every other (the Spark session's stop included)."""
    stopping.install()
    config.add_cleanup(stopping.end_what_is_left)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_database() as url:
        yield url


@pytest.fixture(params=ENGINES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One database URL per engine; the conformance and API suites run over all of them."""
    engine = request.param
    if engine == "sqlite":
        return f"sqlite:///{tmp_path / 'queue.db'}"
    if engine == "postgresql":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return require_mssql()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(database_url: str) -> Settings:
    # No background sweep, relay, deliverer or scheduler: tests that need one run it themselves, at a time
    # they choose (the served tests, tests.test_e2e.serving, run them all).
    return Settings(
        database_url=database_url,
        db_timeout_seconds=5,
        sweep=False,
        relay=False,
        deliver=False,
        schedule=False,
    )


@pytest.fixture
async def store(settings: Settings, clock: FakeClock) -> AsyncIterator[Store]:
    store = store_for(settings, clock)
    await store.open()
    await store.migrate()
    yield store
    await store.close()


@pytest.fixture
def queue() -> str:
    """A queue of this test's own: tests share a database per engine but never a queue."""
    return f"t-{uuid4().hex[:16]}"


@pytest.fixture
async def client(settings: Settings, clock: FakeClock) -> AsyncIterator[Client]:
    """A client of the app on each engine."""
    async for c in app_client(settings, clock):
        yield c


@pytest.fixture
async def lite(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Client]:
    """A client of the app on SQLite, for input validation (the engine is not what is tested)."""
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'api.db'}",
        max_payload_bytes=1024,
        max_request_bytes=20_000,
        sweep=False,
        schedule=False,
    )
    async for c in app_client(settings, clock):
        yield c


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Here, not in tests/faults/conftest.py: under pytest-xdist the process that reports loads
    # only the conftest files of the paths it was given.
    lines = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == FIGURES_PROPERTY
    ]
    if not lines:
        return
    terminalreporter.section(FIGURES_PROPERTY)
    for line in lines:
        terminalreporter.write_line(line)
