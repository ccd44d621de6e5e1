"""MssqlStore.migrate and check_ready through the fake connection: the schemas applied once
under an application lock, then the procedures (procedures.sql) every time, in the same
transaction; the lock released whatever happens, with the statement bounds lifted while it waits."""

from __future__ import annotations

import types
from typing import Any

import pytest
from simplequeue.domain import DatabaseUnavailable, SchemaNotReady, StoreError
from simplequeue.store.migrations import load_migrations, load_routines, split_statements
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore

from tests.mssql.helpers import (
    BOUND,
    LIFT,
    NOW_TEXT,
    FakeConnection,
    FakeCursor,
    Result,
    fake_store,
    migration_statements,
    result,
)
from tests.mssql.test_push_procedures import procedures_sent_as_written

MIGRATIONS = load_migrations("mssql")
VERSIONS = [m.version for m in MIGRATIONS]
PROCEDURES = split_statements(load_routines("mssql") or "")


async def test_migrate_from_zero_applies_both_schemas_under_the_lock(
    fake: tuple[MssqlStore, FakeConnection], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, conn = fake
    procedures_sent_as_written(monkeypatch)
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply("applied_versions", Result(["version"], []))

    assert await store.migrate() == VERSIONS

    assert conn.names == [
        LIFT,
        "lock_migrations",
        "compatibility_level",
        "create_version_table",
        "applied_versions",
        *[name for m in MIGRATIONS for name in [*migration_statements(m), "record_version"]],
        *PROCEDURES,
        "unlock_migrations",
        BOUND,
    ]
    assert conn.all_params("record_version") == [(m.version, m.name, NOW_TEXT) for m in MIGRATIONS]
    assert [(m.version, m.name) for m in MIGRATIONS][:6] == [
        (1, "init"),
        (2, "delivery"),
        (3, "admin"),
        (4, "lock_escalation"),
        (5, "client_ids"),
        (6, "push_procedures"),
    ]
    [v1, *_] = [e.inlined for e in conn.executed if e.name == "record_version"]
    assert f"VALUES (1, N'init', COALESCE(CAST(NULLIF(N'{NOW_TEXT}', N'')" in v1
    assert "@LockOwner = N'Session', @LockTimeout = 300000;" in conn.inlined("lock_migrations")
    assert conn.commits == 2, "the migration, then after the lock is released"
    assert not conn.closed


async def test_migrate_again_applies_no_migration_and_the_procedures_again(
    fake: tuple[MssqlStore, FakeConnection], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, conn = fake
    procedures_sent_as_written(monkeypatch)
    conn.reply("lock_migrations", result(result=1))  # granted after waiting for another replica
    conn.reply("compatibility_level", result(compatibility_level=160))
    conn.reply("applied_versions", Result(["version"], [(v,) for v in VERSIONS]))

    assert await store.migrate() == []

    assert conn.names == [
        LIFT,
        "lock_migrations",
        "compatibility_level",
        "create_version_table",
        "applied_versions",
        *PROCEDURES,
        "unlock_migrations",
        BOUND,
    ]
    assert conn.commits == 2


async def test_a_database_a_newer_release_migrated_keeps_its_procedures(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    # A replica of the release before, restarting during a rolling upgrade, must not put its older
    # procedures over the newer release's.
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=160))
    conn.reply("applied_versions", Result(["version"], [(v,) for v in [*VERSIONS, VERSIONS[-1] + 1]]))

    assert await store.migrate() == []

    assert conn.names == [
        LIFT,
        "lock_migrations",
        "compatibility_level",
        "create_version_table",
        "applied_versions",
        "unlock_migrations",
        BOUND,
    ]


async def test_a_failed_procedure_rolls_the_migrations_back_with_it(
    fake: tuple[MssqlStore, FakeConnection], fake_pyodbc: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, conn = fake
    procedures_sent_as_written(monkeypatch)
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply("applied_versions", Result(["version"], [(v,) for v in VERSIONS[:-1]]))
    conn.errors[PROCEDURES[1]] = fake_pyodbc.ProgrammingError("42000", "Invalid column name (207)")

    with pytest.raises(StoreError):
        await store.migrate()

    assert conn.names.count("record_version") == 1, "the last migration was recorded, then rolled back"
    assert conn.names[-2:] == ["unlock_migrations", BOUND]
    assert (conn.commits, conn.rollbacks) == (1, 1), "only the lock's release commits"


async def test_migrate_refuses_a_database_too_old_for_openjson(
    fake: tuple[MssqlStore, FakeConnection],
) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=120))

    with pytest.raises(StoreError, match=r"compatibility level 120\b.*\b130 or later"):
        await store.migrate()

    assert conn.names == [LIFT, "lock_migrations", "compatibility_level", "unlock_migrations", BOUND]
    assert conn.rollbacks == 1


async def test_migrate_gives_up_when_the_lock_is_not_granted(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=-1))

    with pytest.raises(DatabaseUnavailable, match="migration lock"):
        await store.migrate()

    assert conn.names == [LIFT, "lock_migrations", "unlock_migrations", BOUND]


async def test_a_failed_migration_rolls_back_and_still_releases_the_lock(
    fake: tuple[MssqlStore, FakeConnection], fake_pyodbc: types.ModuleType
) -> None:
    store, conn = fake
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=130))
    conn.reply("applied_versions", Result(["version"], []))
    conn.errors[migration_statements()[1]] = fake_pyodbc.ProgrammingError("42000", "Incorrect syntax (102)")

    with pytest.raises(StoreError):
        await store.migrate()

    assert conn.names[-2:] == ["unlock_migrations", BOUND]
    assert "record_version" not in conn.names
    assert conn.rollbacks == 1


async def test_check_ready_wants_the_latest_version(fake: tuple[MssqlStore, FakeConnection]) -> None:
    store, conn = fake
    # Every version short of the latest is not ready, then the latest is.
    conn.reply(
        "applied_versions",
        *(Result(["version"], [(v,) for v in VERSIONS[:n]]) for n in range(len(VERSIONS) + 1)),
    )

    for _ in VERSIONS:
        with pytest.raises(SchemaNotReady):
            await store.check_ready()
    await store.check_ready()


async def test_migrations_lift_the_bounds_and_put_them_back(monkeypatch: pytest.MonkeyPatch) -> None:
    store, conn = fake_store(monkeypatch)
    procedures_sent_as_written(monkeypatch)
    seen: list[int] = []
    original = Q["lock_migrations"].sql
    conn.reply("lock_migrations", result(result=0))
    conn.reply("compatibility_level", result(compatibility_level=150))
    conn.reply("applied_versions", Result(["version"], []))

    class Watching(FakeCursor):
        async def execute(self, sql: str, *params: Any) -> FakeCursor:
            if sql == original:
                seen.append(conn._conn.timeout)
            return await super().execute(sql, *params)

    monkeypatch.setattr(conn, "cursor", lambda: _async(Watching(conn)))
    await store.migrate()

    assert seen == [0]  # waiting for another replica's migration is not cut off
    assert conn.executed[0].sql == "SET LOCK_TIMEOUT -1"
    assert conn.executed[-1].sql == "SET LOCK_TIMEOUT 5000"
    assert conn._conn.timeout == 5


async def _async(value: Any) -> Any:
    return value
