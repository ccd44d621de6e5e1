"""Functions and procedures written once, beside their dialect (store/postgres/functions.sql,
store/mssql/procedures.sql), and applied by every migrate after the migrations, in their
transaction; the migrations hold tables, columns and data moves only.

The PostgreSQL upgrades start from databases as each earlier release made them:
tests/released/postgresql holds the migration files as they were released before the functions
moved out of them (frozen: never edit them), so a database at version N has version N's functions,
the signatures since dropped included. Each is upgraded by this package's migrate with items in
place, and must then have the functions, trigger, tables, indexes and constraints of a new
database, keep its items and keys, and push both through the service and through the outbox
(sq_push_batch, in the caller's transaction). SQLite has no functions, procedures or triggers: its
upgrades are tests/test_upgrades.py's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import pytest
from simplequeue import outbox
from simplequeue.domain import StoreError
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.migrations import (
    ROUTINES,
    Migration,
    latest_version,
    load_migrations,
    load_routines,
    routines_due,
    script,
)

from tests.engines import FakeClock, postgres_database
from tests.factories import new_item

RELEASED = Path(__file__).parent / "released" / "postgresql"
RELEASED_VERSIONS = [int(path.name[:4]) for path in sorted(RELEASED.glob("*.sql"))]
MIGRATE = "simplequeue.store.postgres.migrate"

_ROUTINE = re.compile(r"^\s*CREATE\s+(OR\s+(REPLACE|ALTER)\s+)?(FUNCTION|PROCEDURE|TRIGGER)\b", re.I | re.M)


def released(upto: int) -> tuple[Migration, ...]:
    """The released PostgreSQL migrations up to a version, as that release's migrate ran them."""
    found = []
    for path in sorted(RELEASED.glob("*.sql")):
        version, name = path.stem.split("_", 1)
        if int(version) <= upto:
            found.append(Migration(int(version), name, path.read_text(encoding="utf-8")))
    return tuple(found)


# --- the files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mssql"])
def test_migrations_create_no_function_procedure_or_trigger(dialect: str) -> None:
    for migration in load_migrations(dialect):
        assert not _ROUTINE.search(migration.sql), f"{dialect} {migration.name}: routines have their file"


def test_sqlite_has_no_routines_file_and_the_others_theirs() -> None:
    assert load_routines("sqlite") is None
    assert set(ROUTINES) == {"postgresql", "mssql"}
    for dialect in ROUTINES:
        assert _ROUTINE.search(load_routines(dialect) or ""), dialect


def test_the_functions_file_has_every_function_a_release_created_and_no_other() -> None:
    def names(sql: str) -> set[str]:
        return set(re.findall(r"^CREATE OR REPLACE FUNCTION (\w+)\(", sql, re.M))

    ever = set().union(*(names(m.sql) for m in released(RELEASED_VERSIONS[-1])))
    # Functions made since the functions left the migrations: each is this file's alone.
    since = {
        "sq_publish",
        "sq_flow_room",
        "sq_schedules_notify_changed",
        "sq_fair_ranks",
        "sq_rank_priority",
        "sq_keyed_queue",
    }
    assert names(load_routines("postgresql") or "") == ever | since


def test_a_database_a_newer_release_migrated_keeps_its_routines() -> None:
    latest = latest_version("postgresql")
    assert routines_due(set(), "postgresql"), "a new database"
    assert routines_due({1, 2, latest}, "postgresql")
    assert not routines_due({*range(1, latest + 2)}, "postgresql")


@pytest.mark.parametrize("dialect", ["postgresql", "mssql"])
def test_the_script_for_a_dba_is_the_migrations_then_the_routines(dialect: str) -> None:
    printed = script(dialect)
    assert printed.count("-- migration ") == len(load_migrations(dialect))
    routines_at = printed.index(f"-- routines ({ROUTINES[dialect]})")
    assert routines_at > printed.rindex("-- migration ")


# --- PostgreSQL: upgrades from every released version -------------------------------------------

CATALOG = {
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid), p.proacl::text
        FROM pg_proc AS p WHERE p.pronamespace = current_schema()::regnamespace ORDER BY 1""",
    "triggers": """
        SELECT t.tgname::text, pg_get_triggerdef(t.oid), t.tgenabled::text
        FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
        WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace ORDER BY 1""",
    "types": """
        SELECT t.typname::text FROM pg_type AS t JOIN pg_class AS c ON c.oid = t.typrelid
        WHERE c.relkind = 'c' AND t.typnamespace = current_schema()::regnamespace ORDER BY 1""",
    "columns": """
        SELECT table_name::text, column_name::text, data_type::text, column_default, is_nullable::text,
               is_identity::text, identity_generation::text
        FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY 1, 2""",
    "indexes": """
        SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1""",
    "constraints": """
        SELECT conrelid::regclass::text, conname::text, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = current_schema()::regnamespace ORDER BY 1, 2""",
}


async def catalog(url: str) -> dict[str, list[tuple[Any, ...]]]:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        return {name: [tuple(row) for row in await conn.fetch(sql)] for name, sql in CATALOG.items()}
    finally:
        await conn.close()


async def migrate(url: str) -> list[int]:
    store = store_for(Settings(database_url=url), FakeClock())
    await store.open()
    try:
        return await store.migrate()
    finally:
        await store.close()


@pytest.fixture(scope="module")
def new_database() -> Iterator[tuple[str, dict[str, list[tuple[Any, ...]]]]]:
    """A database this package migrated from nothing, and its catalog."""
    with postgres_database() as url:
        assert asyncio.run(migrate(url)) == [m.version for m in load_migrations("postgresql")]
        yield url, asyncio.run(catalog(url))


def test_a_new_database_has_what_the_routines_file_declares(
    new_database: tuple[str, dict[str, list[tuple[Any, ...]]]],
) -> None:
    _, found = new_database
    functions = [row[0].split("(")[0] for row in found["functions"]]
    assert sorted(functions) == sorted(
        re.findall(r"^CREATE OR REPLACE FUNCTION (\w+)\(", load_routines("postgresql") or "", re.M)
    ), "one of each, no overload left behind"
    assert [row[0] for row in found["triggers"]] == ["sq_items_notify_ready", "sq_schedules_notify_changed"]
    assert [row[0] for row in found["types"]] == ["sq_pushed"]


async def build_release(url: str, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database as release `version` left it: its migrations, functions in them, nothing else."""
    with monkeypatch.context() as patch:
        patch.setattr(f"{MIGRATE}.load_migrations", lambda dialect: released(version))
        patch.setattr(f"{MIGRATE}.load_routines", lambda dialect: None)
        assert await migrate(url) == RELEASED_VERSIONS[:version]


PLAIN = UUID("00000000-0000-4000-8000-000000000001")
KEYED = UUID("00000000-0000-4000-8000-000000000002")
REMEMBERED = UUID("00000000-0000-4000-8000-000000000003")


async def write_release_data(url: str, version: int) -> int:
    """Items as that release wrote them (by its own sq_push from v5, by hand before); how many."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        long_ago = "now() - interval '1 minute'"
        await conn.execute(f"INSERT INTO sq_queues (name, created_at) VALUES ('kept', {long_ago})")
        await conn.execute(
            f"INSERT INTO sq_items (id, queue, payload, created_at, visible_at) "
            f"VALUES ($1, 'kept', '\"plain\"', {long_ago}, {long_ago})",
            PLAIN,
        )
        if version >= 5:
            keyed = await conn.fetchrow(
                "SELECT * FROM sq_push('kept', '\"keyed\"'::json, dedup_key => 'order-1', id => $1)", KEYED
            )
            remembered = await conn.fetchrow(
                "SELECT * FROM sq_push('kept', '\"mine\"'::json, id => $1)", REMEMBERED
            )
            assert keyed is not None
            assert remembered is not None
            assert (keyed["id"], keyed["created"], remembered["created"]) == (KEYED, True, True)
            return 3
        if version >= 2:
            await conn.execute(
                f"INSERT INTO sq_items (id, queue, payload, created_at, visible_at, dedup_key) "
                f"VALUES ($1, 'kept', '\"keyed\"', {long_ago}, {long_ago}, 'order-1')",
                KEYED,
            )
            await conn.execute(
                "INSERT INTO sq_dedup (queue, dedup_key, item_id, created_at) "
                f"VALUES ('kept', 'order-1', $1, {long_ago})",
                KEYED,
            )
            return 2
        return 1
    finally:
        await conn.close()


async def push_through_the_outbox(url: str, version: int, keyed_id: UUID) -> None:
    """sq_push_batch in the caller's transaction: a new item, then a dedup key (held by keyed_id)
    and a remembered id the release before wrote, which answer its items."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        async with conn.transaction():
            await conn.execute("CREATE TEMP TABLE orders (id int) ON COMMIT DROP")
            await conn.execute("INSERT INTO orders VALUES (42)")
            fresh = await outbox.push_async(conn, "kept", {"order": 42})
            keyed = await outbox.push_async(conn, "kept", "again", dedup_key="order-1")
            mine = await outbox.push_async(conn, "kept", "mine again", id=REMEMBERED)
        assert fresh.created
        assert (keyed.id, keyed.created) == (keyed_id, False), "the key still matches"
        if version >= 5:
            assert (mine.id, mine.created) == (REMEMBERED, False), "the old remembered id too"
    finally:
        await conn.close()


@pytest.mark.parametrize("version", RELEASED_VERSIONS)
def test_a_database_of_every_release_upgrades_to_a_new_ones_schema_with_its_items(
    version: int,
    new_database: tuple[str, dict[str, list[tuple[Any, ...]]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, fresh = new_database

    async def upgrade(url: str) -> None:
        await build_release(url, version, monkeypatch)
        items = await write_release_data(url, version)

        assert await migrate(url) == [m.version for m in load_migrations("postgresql") if m.version > version]
        assert await catalog(url) == fresh

        clock = FakeClock()
        clock.advance(5)  # past the pushes made on the database's clock (sq_push, the outbox)
        store = store_for(Settings(database_url=url), clock)
        await store.open()
        try:
            assert (await store.get_queue("kept")).ready == items
            keyed = new_item("kept", "again", dedup_key="order-1")
            [again] = await store.push_batch([keyed], skip_existing=False)
            assert again is not None
            assert (again.id, again.created) == ((KEYED, False) if version >= 2 else (keyed.id, True)), (
                "a key the release before claimed still matches"
            )
            await push_through_the_outbox(url, version, again.id)
            pushed = items + again.created + 1 + (version < 5)
            assert (await store.get_queue("kept")).ready == pushed
            popped = await store.pop("kept", 100, None)
            assert len(popped) == pushed
        finally:
            await store.close()

    with postgres_database() as url:
        asyncio.run(upgrade(url))


def test_an_upgrade_keeps_the_grants_on_sq_push_through_its_new_signature(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Migration 0022 changed sq_push's arguments: an application's role granted EXECUTE on the old
    # one (docs/outbox.md) may still push after the upgrade, and may still grant it if it could.
    old = "sq_push(text, json, integer, double precision, text, text, uuid, timestamptz, timestamptz)"
    new = "sq_push(text, json, integer, double precision, text, text, uuid, timestamptz, timestamptz, text)"
    app, plain = f"sq_app_{uuid4().hex[:12]}", f"sq_app_{uuid4().hex[:12]}"

    async def run(url: str) -> None:
        await build_release(url, RELEASED_VERSIONS[-1], monkeypatch)
        conn = await asyncpg.connect(url, timeout=5)
        try:
            await conn.execute(f"CREATE ROLE {app} NOLOGIN; CREATE ROLE {plain} NOLOGIN")
            try:
                await conn.execute(f"GRANT USAGE ON SCHEMA public TO {app}, {plain}")
                await conn.execute(f"GRANT EXECUTE ON FUNCTION {old} TO {app} WITH GRANT OPTION")
                await conn.execute(f"GRANT EXECUTE ON FUNCTION {old} TO {plain}")
                assert await migrate(url) == [
                    m.version for m in load_migrations("postgresql") if m.version > RELEASED_VERSIONS[-1]
                ]
                rights = await conn.fetchrow(
                    "SELECT has_function_privilege($1, $3::regprocedure, 'EXECUTE'),"
                    " has_function_privilege($1, $3::regprocedure, 'EXECUTE WITH GRANT OPTION'),"
                    " has_function_privilege($2, $3::regprocedure, 'EXECUTE'),"
                    " has_function_privilege($2, $3::regprocedure, 'EXECUTE WITH GRANT OPTION'),"
                    " has_function_privilege('public', $3::regprocedure, 'EXECUTE')",
                    app,
                    plain,
                    new,
                )
                assert tuple(rights) == (True, True, True, False, False)
                assert (
                    await conn.fetchval("SELECT count(*) FROM pg_proc WHERE proname LIKE 'sq_push%v21'") == 0
                )
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL ROLE {plain}")
                    pushed = await conn.fetchrow(
                        "SELECT * FROM sq_push('granted', '1'::json, fairness_key => 'tenant')"
                    )
                    assert pushed is not None
                    assert pushed["created"]
                    await conn.execute("RESET ROLE")
                    assert (
                        await conn.fetchval("SELECT fairness_key FROM sq_items WHERE id = $1", pushed["id"])
                        == "tenant"
                    )
            finally:
                await conn.execute(f"DROP OWNED BY {app}, {plain}; DROP ROLE {app}, {plain}")
        finally:
            await conn.close()

    with postgres_database() as url:
        asyncio.run(run(url))


def test_every_migrate_applies_the_functions_again(
    new_database: tuple[str, dict[str, list[tuple[Any, ...]]]],
) -> None:
    url, fresh = new_database

    async def run() -> None:
        conn = await asyncpg.connect(url, timeout=5)
        try:
            await conn.execute(STALE_LIMITS)
            await conn.execute("DROP TRIGGER sq_items_notify_ready ON sq_items")
        finally:
            await conn.close()
        assert await catalog(url) != fresh
        assert await migrate(url) == [], "no migration pending"
        assert await catalog(url) == fresh

    asyncio.run(run())


STALE_LIMITS = """
CREATE OR REPLACE FUNCTION sq_push_limits()
RETURNS TABLE (schema_version integer, max_payload_bytes integer, max_payload_depth integer)
LANGUAGE sql AS $$ SELECT -1, -1, -1 $$"""


def test_a_database_a_newer_release_migrated_keeps_the_newer_functions() -> None:
    async def run(url: str) -> None:
        await migrate(url)
        conn = await asyncpg.connect(url, timeout=5)
        try:
            await conn.execute(STALE_LIMITS)  # stands for the newer release's function
            await conn.execute(
                "INSERT INTO sq_schema_version (version, name) VALUES ($1, 'newer')",
                latest_version("postgresql") + 1,
            )
            assert await migrate(url) == []
            limits = await conn.fetch("SELECT * FROM sq_push_limits()")
            assert [tuple(row) for row in limits] == [(-1, -1, -1)], "the newer release's, kept"
        finally:
            await conn.close()

    with postgres_database() as url:
        asyncio.run(run(url))


def test_the_functions_commit_with_the_migrations_or_neither_does(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run(url: str) -> None:
        await build_release(url, 8, monkeypatch)
        monkeypatch.setattr(f"{MIGRATE}.load_routines", lambda dialect: "SELECT 1 / 0")
        with pytest.raises(StoreError):
            await migrate(url)
        conn = await asyncpg.connect(url, timeout=5)
        try:
            versions = await conn.fetch("SELECT version FROM sq_schema_version ORDER BY version")
            assert [row["version"] for row in versions] == RELEASED_VERSIONS[:8], "the later ones rolled back"
        finally:
            await conn.close()
        monkeypatch.undo()
        later = [m.version for m in load_migrations("postgresql") if m.version >= 9]
        assert await migrate(url) == later

    with postgres_database() as url:
        asyncio.run(run(url))


def test_applying_the_functions_again_takes_no_lock_that_waits_for_writers_of_items(
    new_database: tuple[str, dict[str, list[tuple[Any, ...]]]],
) -> None:
    # Every start of a replica applies them: a lock on sq_items that conflicts with writers would
    # wait for every open transaction that pushed an item, and stop every push and pop meanwhile.
    url, _ = new_database

    async def run() -> list[str]:
        conn = await asyncpg.connect(url, timeout=5)
        try:
            async with conn.transaction():
                await conn.execute(load_routines("postgresql") or "")
                rows = await conn.fetch(
                    "SELECT mode FROM pg_locks "
                    "WHERE pid = pg_backend_pid() AND relation = 'sq_items'::regclass"
                )
            return [row["mode"] for row in rows]
        finally:
            await conn.close()

    assert set(asyncio.run(run())) <= {"AccessShareLock"}
