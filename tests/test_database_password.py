"""SIMPLEQUEUE_DATABASE_PASSWORD: a password as it is, with URL characters in it (`@`, `:`, `/`,
`%`...), put into SIMPLEQUEUE_DATABASE_URL's user part percent-encoded, so that a compose file or a
Kubernetes Secret can hold it unencoded; a setting that cannot work is refused in one line that
never shows the password. The drivers get it back as it was: asyncpg as it parses the URL, SQL
Server's ODBC driver in the connection string the store builds."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from urllib.parse import unquote, urlsplit

import asyncpg
import pytest
from pydantic import ValidationError
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.mssql.odbc import odbc_connection_string

PASSWORD = "p@ss:w/rd%20?#;{x}"


def test_the_password_goes_into_the_url_encoded() -> None:
    settings = Settings(database_url="postgresql://app@db:5432/queue", database_password=PASSWORD)
    parts = urlsplit(settings.database_url)
    assert (parts.username, parts.hostname, parts.port, parts.path) == ("app", "db", 5432, "/queue")
    assert unquote(parts.password or "") == PASSWORD


def test_sql_server_s_driver_gets_it_as_it_was() -> None:
    url = "mssql+odbc://sa@sqlserver:1433/simplequeue?driver=ODBC+Driver+18+for+SQL+Server"
    settings = Settings(database_url=url, database_password=PASSWORD)
    assert "PWD={p@ss:w/rd%20?#;{x}}}" in odbc_connection_string(settings.database_url)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("sqlite:///./queue.db", "SQLite takes no password"),
        ("postgresql://db:5432/queue", "names no user"),
        ("postgresql://app:other@db:5432/queue", "has a password already"),
    ],
)
def test_a_password_that_cannot_be_used_is_refused_without_showing_it(url: str, why: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(database_url=url, database_password=PASSWORD)
    assert why in str(refused.value)
    assert PASSWORD not in str(refused.value)


def test_the_cli_says_so_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simplequeue", "migrate"],
        env={"SIMPLEQUEUE_DATABASE_URL": "sqlite:///x.db", "SIMPLEQUEUE_DATABASE_PASSWORD": PASSWORD},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    [line] = done.stderr.strip().splitlines()
    assert "SQLite takes no password" in line
    assert PASSWORD not in done.stderr


def test_postgresql_s_driver_gets_it_as_it_was(postgres_url: str) -> None:
    """This machine's PostgreSQL trusts local logins, so it cannot check a password itself: what
    is checked is the password asyncpg parsed from the URL and logs in with, and that the store
    opens and migrates with that URL."""
    parts = urlsplit(postgres_url)
    settings = Settings(
        database_url=f"postgresql://{parts.username}@{parts.hostname}:{parts.port}{parts.path}",
        database_password=PASSWORD,
    )

    async def run() -> None:
        conn = await asyncpg.connect(settings.database_url)
        try:
            assert conn._params.password == PASSWORD  # what it sends the server (a private field)
        finally:
            await conn.close()
        store = store_for(settings)
        await store.open()
        try:
            await store.migrate()
        finally:
            await store.close()

    asyncio.run(run())
