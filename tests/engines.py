"""Which databases the suites run against, and throwaway databases on them.

- SQLite: always (a file per test).
- PostgreSQL: SIMPLEQUEUE_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres).
  When it does not answer, the PostgreSQL cases fail under CI (CI=true) or with
  SIMPLEQUEUE_REQUIRE_POSTGRES=1, and are skipped with the reason otherwise.
- SQL Server: only when SIMPLEQUEUE_TEST_MSSQL_URL is set (see docs/engines.md); skipped otherwise.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest

POSTGRES_URL = os.environ.get(
    "SIMPLEQUEUE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
MSSQL_URL = os.environ.get("SIMPLEQUEUE_TEST_MSSQL_URL", "")
REQUIRE_POSTGRES = (
    os.environ.get("CI", "").lower() == "true" or os.environ.get("SIMPLEQUEUE_REQUIRE_POSTGRES") == "1"
)

ENGINES = ["sqlite", "postgresql", "mssql"]


class FakeClock:
    """A clock the test moves by hand. Starts at the real time so that pushed items look current."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@contextmanager
def postgres_database() -> Iterator[str]:
    """Create a uniquely named database for this test session, and drop it afterwards."""
    import asyncpg

    name = f"sq_test_{os.getpid()}_{secrets.token_hex(3)}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(POSTGRES_URL, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    try:
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as exc:
        message = f"PostgreSQL at {POSTGRES_URL} is not usable: {exc!r}"
        if REQUIRE_POSTGRES:
            pytest.fail(message + " (required under CI)")
        pytest.skip(message)
    try:
        yield _with_database(POSTGRES_URL, name)
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def require_mssql() -> str:
    if not MSSQL_URL:
        pytest.skip("SQL Server: set SIMPLEQUEUE_TEST_MSSQL_URL to run the suite against a real server")
    return MSSQL_URL
