"""One line, not a traceback: a database URL no store can use, a database that does not exist, a
login the server refuses. `simplequeue migrate` exits non-zero with one line naming the cause;
`simplequeue serve` refuses a bad URL the same way, and for a database it cannot use yet keeps
answering (503, the outage rule) while its log names the cause, once per cause."""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import subprocess
import time
from pathlib import Path

import asyncpg
import httpx
import pytest
from pydantic import ValidationError
from simplequeue.domain import DatabaseUnavailable
from simplequeue.domain.errors import DatabaseMisconfigured
from simplequeue.settings import Settings
from simplequeue.store.factory import UnsupportedDatabaseURL, dialect_of
from simplequeue.store.postgres.errors import server_of, translated_errors
from simplequeue.store.sqlite.errors import translated_errors as sqlite_errors
from simplequeue.store.sqlite.store import SqliteStore

from tests.engines import POSTGRES_URL, _with_database
from tests.http import app_client, assert_error
from tests.test_e2e import free_port, simplequeue_command

SECRET = "s3cret-pw"

BAD_URLS = {
    "asyncpg-scheme": (
        "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
        ["unsupported scheme 'postgresql+asyncpg'", "postgresql://"],
    ),
    "mysql": (f"mysql://app:{SECRET}@127.0.0.1:3306/jobs", ["unsupported scheme 'mysql'", "sqlite:///"]),
    "sqlite-two-slashes": ("sqlite://relative.db", ["sqlite:///relative.db", "sqlite:////abs/path"]),
    "malformed": ("postgresql://[::1", ["malformed URL"]),
    # Without a host, the password would be read as the port: it must not be repeated.
    "password-as-port": (f"postgresql://app:{SECRET}/jobs", ["malformed URL", "port"]),
}


def run(command: str, url: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SIMPLEQUEUE_DATABASE_URL": url, "SIMPLEQUEUE_DB_TIMEOUT_SECONDS": "2"}
    return subprocess.run(
        [*simplequeue_command(), command, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def missing_database_url() -> str:
    return _with_database(POSTGRES_URL, f"sq_no_such_db_{secrets.token_hex(4)}")


def database_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


# --- URLs no store can use: refused when the settings load -------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["migrate", "serve"])
@pytest.mark.parametrize("case", list(BAD_URLS))
def test_a_url_no_store_can_use_is_one_line_naming_the_variable(command: str, case: str) -> None:
    url, said = BAD_URLS[case]
    args = ("--port", str(free_port())) if command == "serve" else ()
    done = run(command, url, *args)
    assert done.returncode != 0
    line = one_line(done.stderr)
    assert line.startswith("Error: configuration: SIMPLEQUEUE_DATABASE_URL: "), line
    assert "Value error" not in line
    for words in said:
        assert words in line, line
    assert SECRET not in line


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///./simplequeue.db",
        "sqlite:////var/lib/sq.db",
        "sqlite:///:memory:",
        "SQLite:///x.db",
        "postgresql://postgres@127.0.0.1:5432/postgres",
        "postgres://app:p%40ss@db/jobs?sslmode=require",
        "postgresql://app@h1:5432,h2:5433/jobs",  # several servers: libpq's and asyncpg's form
        "postgresql://app@[::1]:5432/jobs",
        "postgresql:///jobs?host=/var/run/postgresql",
        "mssql+odbc://sa:pw@db:1433/jobs?driver=ODBC+Driver+18+for+SQL+Server",
        "mssql://sa:pw@db/jobs",
    ],
)
def test_the_urls_the_stores_take_load(url: str) -> None:
    assert Settings(database_url=url).database_url == url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("", "empty"),
        ("simplequeue.db", "not a URL"),
        ("sqlite:x.db", "use sqlite:///x.db"),
        ("sqlite://", "three slashes"),
        (f"sqlite://app:{SECRET}@host/x.db", "three slashes"),
        ("sqlite+aiosqlite:///x.db", "use sqlite:///path"),
        ("mssql+pyodbc://sa:pw@db/jobs", "use mssql+odbc://"),
        ("postgresql://db:99999/jobs", "malformed URL"),
    ],
)
def test_the_store_and_the_settings_refuse_the_same_urls_in_one_line(url: str, said: str) -> None:
    with pytest.raises(UnsupportedDatabaseURL) as refused:
        dialect_of(url)
    with pytest.raises(ValidationError) as invalid:
        Settings(database_url=url)
    [error] = invalid.value.errors(include_url=False)
    assert error["loc"] == ("database_url",)
    assert error["msg"] == str(refused.value)  # as the store says it: no "Value error, "
    assert said in error["msg"]
    assert "\n" not in error["msg"]
    assert SECRET not in error["msg"]


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["migrate", "serve"])
def test_a_sqlite_file_in_a_folder_that_does_not_exist_is_refused_and_no_folder_is_made(
    command: str, tmp_path: Path
) -> None:
    missing = tmp_path / "no" / "such"
    args = ("--port", str(free_port())) if command == "serve" else ()
    done = run(command, f"sqlite:///{missing}/q.db", *args)
    assert done.returncode != 0
    line = one_line(done.stderr)
    assert line.startswith("Error: configuration: SIMPLEQUEUE_DATABASE_URL: "), line
    assert f"folder {missing} does not exist" in line
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    "url", ["sqlite:///./simplequeue.db", "sqlite:///simplequeue.db", "sqlite:///here/q.db"]
)
def test_a_sqlite_file_in_the_working_directory_or_a_folder_that_exists_loads(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)
    assert Settings(database_url=url).database_url == url


async def test_the_sqlite_store_makes_no_folder_for_its_file(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "no" / "q.db"))
    with pytest.raises(DatabaseMisconfigured):
        await store.open()
    await store.close()
    assert not (tmp_path / "no").exists()


# --- a database that does not exist, a login refused -------------------------------------------


@pytest.mark.e2e
def test_migrate_names_a_database_that_does_not_exist_at_once(postgres_url: str) -> None:
    url = missing_database_url()
    started = time.monotonic()
    done = run("migrate", url)
    assert done.returncode != 0
    line = one_line(done.stderr)
    assert line.startswith("Error: cannot migrate: DatabaseMisconfigured: "), line
    assert f'database "{database_of(url)}" does not exist' in line
    assert time.monotonic() - started < 20  # once: migrate does not try again


@pytest.mark.e2e
def test_migrate_names_a_login_the_server_refuses(postgres_url: str) -> None:
    # This server trusts loopback, so no password is wrong here; a role it does not know is
    # refused the same way (SQLSTATE 28000). A wrong password (28P01) is tested below.
    role = f"sq_no_such_role_{secrets.token_hex(4)}"
    url = POSTGRES_URL.replace("postgres@", f"{role}:{SECRET}@", 1)
    assert role in url
    done = run("migrate", url)
    assert done.returncode != 0
    line = one_line(done.stderr)
    assert line.startswith("Error: cannot migrate: DatabaseMisconfigured: "), line
    assert f'role "{role}" does not exist' in line
    assert SECRET not in line


@pytest.mark.e2e
def test_serve_keeps_answering_and_logs_the_cause_in_one_line(postgres_url: str) -> None:
    url = missing_database_url()
    port = free_port()
    env = {
        **os.environ,
        "SIMPLEQUEUE_DATABASE_URL": url,
        "SIMPLEQUEUE_DB_TIMEOUT_SECONDS": "2",
        "SIMPLEQUEUE_LOG_LEVEL": "info",
        "SIMPLEQUEUE_LOG_FORMAT": "text",
    }
    process = subprocess.Popen(
        [*simplequeue_command(), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 10
        while _status(f"{base}/healthz") != 200:
            assert process.poll() is None, "serve exited"
            assert time.monotonic() < deadline, "serve did not answer /healthz within 10 s"
            time.sleep(0.1)
        answer = httpx.get(f"{base}/readyz", timeout=5)
        assert answer.status_code == 503
        assert answer.json()["error"] == "DatabaseUnavailable"
        assert database_of(url) not in answer.text  # the cause is the operator's, not the caller's
        time.sleep(2)  # a few tries in the background (after 0.5 s, 1 s, 2 s)
        assert process.poll() is None  # the same process serves throughout
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=15)
    assert "Traceback" not in stderr, stderr
    cause = f'database "{database_of(url)}" does not exist'
    named = [line for line in stderr.splitlines() if cause in line]
    # Said once, at start; the tries after it say the code only (the cause has not changed).
    assert len(named) == 1, stderr
    assert "DatabaseMisconfigured" in named[0]
    assert "still not ready (DatabaseMisconfigured)" in stderr, stderr


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=1).status_code
    except httpx.TransportError:
        return None


async def test_callers_hear_database_unavailable_and_the_log_the_cause(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = missing_database_url()
    settings = Settings(database_url=url, migrate_on_start=False, db_timeout_seconds=2, sweep=False)
    caplog.set_level(logging.WARNING, logger="simplequeue")
    async for client in app_client(settings, None):
        for response in (await client.get("/readyz"), await client.post("/push", json={"payload": 1})):
            body = assert_error(response, 503, "DatabaseUnavailable")
            assert body["detail"] == DatabaseUnavailable().detail
            assert response.headers["retry-after"] == "1"
            assert database_of(url) not in response.text
    logged = [
        r.getMessage() for r in caplog.records if "answered 503 DatabaseMisconfigured" in r.getMessage()
    ]
    assert logged
    assert all(f'database "{database_of(url)}" does not exist' in line for line in logged), logged


# --- the translation of what PostgreSQL says ----------------------------------------------------


@pytest.mark.parametrize(
    ("error", "detail"),
    [
        (
            asyncpg.InvalidPasswordError('password authentication failed for user "app"'),
            'password authentication failed for user "app"',
        ),
        (
            asyncpg.InvalidAuthorizationSpecificationError(
                'no pg_hba.conf entry for host "10.0.0.7", user "app", database "jobs", no encryption'
            ),
            'no pg_hba.conf entry for host "10.0.0.7", user "app", database "jobs", no encryption',
        ),
        (asyncpg.InvalidCatalogNameError('database "jobs" does not exist'), 'database "jobs" does not exist'),
    ],
    ids=["28P01-password", "28000-authorization", "3D000-no-database"],
)
async def test_postgresql_names_what_it_refuses(error: Exception, detail: str) -> None:
    with pytest.raises(DatabaseMisconfigured) as raised:
        async with translated_errors():
            raise error
    assert raised.value.detail == detail
    assert raised.value.__cause__ is error
    assert isinstance(raised.value, DatabaseUnavailable)  # still a 503, still tried again

    with pytest.raises(DatabaseMisconfigured) as raised:
        async with translated_errors(server_of(f"postgresql://app:{SECRET}@db.internal:6543/jobs")):
            raise error
    assert raised.value.detail == f"{detail} on db.internal:6543"
    assert SECRET not in raised.value.detail


@pytest.mark.parametrize(
    ("url", "server"),
    [
        (f"postgresql://app:{SECRET}@db/jobs", "db:5432"),
        ("postgresql://app@[::1]:6543/jobs", "[::1]:6543"),
        ("postgresql://app@%2Fvar%2Frun%2Fpostgresql/jobs", "/var/run/postgresql"),
        ("postgresql://app@h1:5432,h2:5433/jobs", None),
        ("postgresql:///jobs", None),
    ],
)
def test_the_server_a_postgresql_url_names(url: str, server: str | None) -> None:
    assert server_of(url) == server


async def test_an_outage_is_not_a_misconfiguration() -> None:
    with pytest.raises(DatabaseUnavailable) as raised:
        async with translated_errors("db:5432"):
            raise ConnectionRefusedError(111, "Connect call failed")
    assert type(raised.value) is DatabaseUnavailable


async def test_sqlite_names_a_file_it_cannot_open() -> None:
    error = sqlite3.OperationalError("unable to open database file")  # a directory; not writable
    with pytest.raises(DatabaseMisconfigured) as raised:
        async with sqlite_errors():
            raise error
    assert raised.value.detail == (
        "SQLite unable to open database file: check that the path names a file in a directory "
        "this service may write"
    )
    assert raised.value.__cause__ is error
