"""A database made by the previous release, upgraded in place by the next `migrate`: its queues
keep their settings and their items, and their dedup keys keep matching.

Migration 9 rebuilds SQLite's sq_queues (a CHECK changed) and adds a setting on every engine, so
this holds it against a real database of each engine here: migrated to the previous release's
version (8), given settings and items as that release wrote them, then migrated to the latest
(PostgreSQL's 10, NOTIFY by token, too).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import asyncpg
import pytest
from simplequeue.domain import Backoff, QueueSettings
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store import migrations

from tests.engines import FakeClock, postgres_database
from tests.factories import new_item
from tests.test_routines import MIGRATE, released

PREVIOUS_RELEASE = 8
"""The schema version of the release before migration 9."""

# Settings no release's defaults have, written as the previous release wrote them.
KEPT = uuid4()
OLD_SETTINGS = (
    "UPDATE sq_queues SET max_attempts = 3, lease_seconds = 45, retention_seconds = 0, "
    "dedup_window_seconds = 120, backoff_factor = 3, paused = {true} WHERE name = 'kept'"
)


# SQLite's statements are the package's own, and this package's claim of a dedup key reads the
# new setting: the previous release's item and key are written as rows.
AT = "'2026-01-01T00:00:00.000000Z'"
OLD_SQLITE_ITEM = f"""
INSERT INTO sq_queues (name, created_at) VALUES ('kept', {AT});
INSERT INTO sq_items (id, queue, payload, created_at, visible_at, dedup_key)
VALUES ('{KEPT}', 'kept', '"waiting"', {AT}, {AT}, 'order-1');
INSERT INTO sq_dedup (queue, dedup_key, item_id, created_at, expires_at)
VALUES ('kept', 'order-1', '{KEPT}', {AT}, NULL);
"""


@contextmanager
def database(engine: str, tmp_path: Path) -> Iterator[str]:
    if engine == "postgresql":
        with postgres_database() as url:
            yield url
    else:
        yield f"sqlite:///{tmp_path / 'upgraded.db'}"


async def write_old_settings(engine: str, url: str) -> None:
    if engine == "postgresql":
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"), timeout=5)
        try:
            await conn.execute(OLD_SETTINGS.format(true="true"))
        finally:
            await conn.close()
    else:
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.executescript(OLD_SQLITE_ITEM)
            conn.execute(OLD_SETTINGS.format(true=1))


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_latest_migration_keeps_every_queues_settings_and_items(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    latest = migrations.load_migrations(engine)
    kept = new_item("kept", "waiting", id=KEPT, dedup_key="order-1")

    async def upgrade(url: str) -> None:
        settings = Settings(database_url=url)
        if engine == "postgresql":  # the release's own files: its functions were in its migrations
            before = list(released(PREVIOUS_RELEASE))
            monkeypatch.setattr(f"{MIGRATE}.load_migrations", lambda dialect: before)
            monkeypatch.setattr(f"{MIGRATE}.load_routines", lambda dialect: None)
        else:
            before = [m for m in latest if m.version <= PREVIOUS_RELEASE]
            monkeypatch.setattr("simplequeue.store.sqlite.store.load_migrations", lambda dialect: before)
        old = store_for(settings, FakeClock())
        await old.open()
        assert await old.migrate() == [m.version for m in before]
        if engine == "postgresql":  # its push is the database's function of the version before
            await old.push_batch([kept], skip_existing=False)
        await old.close()
        await write_old_settings(engine, url)

        monkeypatch.undo()
        new = store_for(settings, FakeClock())
        await new.open()
        try:
            assert await new.migrate() == [m.version for m in latest if m.version > PREVIOUS_RELEASE]
            if engine == "postgresql":  # 10: NOTIFY by token, keyed by a secret made once
                conn = await asyncpg.connect(url, timeout=5)
                try:
                    key = await conn.fetchval("SELECT value FROM sq_settings WHERE name = 'notify_key'")
                finally:
                    await conn.close()
                assert len(key) == 64
            stats = await new.get_queue("kept")
            assert stats.settings == QueueSettings(
                max_attempts=3,
                lease_seconds=45,
                backoff=Backoff(factor=3),
                retention_seconds=0,
                dedup_window_seconds=120,
                dedup_window_from="finish",
            )
            assert (stats.paused, stats.ready) == (True, 1)
            [again] = await new.push_batch(
                [new_item("kept", "again", dedup_key="order-1")], skip_existing=False
            )
            assert again is not None
            assert (again.id, again.created) == (kept.id, False), "the key still matches"
            # What the migration allows now: a zero lease, a window from the send.
            await new.put_queue("kept", QueueSettings(lease_seconds=0, dedup_window_from="send"))
            assert (await new.get_queue("kept")).settings.lease_seconds == 0
        finally:
            await new.close()

    with database(engine, tmp_path) as url:
        asyncio.run(upgrade(url))


# --- the typed settings (SQLite's 10, PostgreSQL's 11): SQS attributes become columns ---------------

ATTRIBUTES_AS_KEPT = """
INSERT INTO sq_queues (name, created_at, max_attempts) VALUES
    ('source', {at}, 4), ('target', {at}, 5), ('plain', {at}, 5);
INSERT INTO sq_queue_attributes (queue, name, value) VALUES
    ('source', 'dead_letter_queue', 'target'),
    ('source', 'RedrivePolicy', '{{"deadLetterTargetArn":"arn:target","maxReceiveCount":4}}'),
    ('source', 'MessageRetentionPeriod', '345600'),
    ('source', 'DelaySeconds', '5'),
    ('target', 'MessageRetentionPeriod', '60');
"""
"""Queues as the SQS door of the release before kept them: the target and the retention as attributes."""


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_sqs_doors_attributes_become_typed_settings_with_their_values(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    latest = migrations.load_migrations(engine)
    [typed] = [m for m in latest if m.name.endswith("typed_settings")]

    async def write_old(url: str) -> None:
        sql = ATTRIBUTES_AS_KEPT.format(at="now()" if engine == "postgresql" else AT)
        if engine == "postgresql":
            conn = await asyncpg.connect(url, timeout=5)
            try:
                await conn.execute(sql)
            finally:
                await conn.close()
        else:
            with sqlite3.connect(url.removeprefix("sqlite:///")) as lite:
                lite.executescript(sql)

    async def upgrade(url: str) -> None:
        settings = Settings(database_url=url)
        if engine == "postgresql":  # the release's own files: its functions were in its migrations
            before = list(released(typed.version - 1))
            monkeypatch.setattr(f"{MIGRATE}.load_migrations", lambda dialect: before)
            monkeypatch.setattr(f"{MIGRATE}.load_routines", lambda dialect: None)
        else:
            before = [m for m in latest if m.version < typed.version]
            monkeypatch.setattr("simplequeue.store.sqlite.store.load_migrations", lambda dialect: before)
        old = store_for(settings, FakeClock())
        await old.open()
        await old.migrate()
        await old.close()
        await write_old(url)

        monkeypatch.undo()
        new = store_for(settings, FakeClock())
        await new.open()
        try:
            assert typed.version in await new.migrate()
            source, target, plain = [(await new.get_queue(q)).settings for q in ("source", "target", "plain")]
            assert (source.dead_letter_queue, source.message_retention_seconds, source.max_attempts) == (
                "target",
                345600,
                4,
            )
            assert (target.dead_letter_queue, target.message_retention_seconds) == (None, 60)
            assert (plain.dead_letter_queue, plain.message_retention_seconds) == (None, None)
            # What the door keeps for its callers stays; what is a setting now left the attributes.
            assert dict((await new.queue_metadata("source")).attributes) == {"DelaySeconds": "5"}
            assert dict((await new.queue_metadata("target")).attributes) == {}
        finally:
            await new.close()

    with database(engine, tmp_path) as url:
        asyncio.run(upgrade(url))


# --- priority aging (SQLite's 16, PostgreSQL's 18): the items' ranks ---------------------------------

RANKED_AS_KEPT = """
INSERT INTO sq_queues (name, created_at) VALUES ('ranked', {at});
INSERT INTO sq_items (id, queue, payload, created_at, visible_at, priority) VALUES
    ('{a}', 'ranked', '"old-low"', {old}, {old}, 0),
    ('{b}', 'ranked', '"new-high"', {at}, {at}, 5),
    ('{c}', 'ranked', '"new-low"', {at}, {at}, 0),
    ('{d}', 'ranked', '"old-mid"', {old}, {old}, 2);
"""
"""Items the release before wrote, with no rank: their order was priority, then created_at."""


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_items_from_before_aging_keep_their_order(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    latest = migrations.load_migrations(engine)
    [aging] = [m for m in latest if m.name.endswith("priority_aging")]
    ids = {k: uuid4() for k in "abcd"}

    async def write_old(url: str) -> None:
        if engine == "postgresql":
            sql = RANKED_AS_KEPT.format(at="now() - interval '1 hour'", old="now() - interval '1 day'", **ids)
            conn = await asyncpg.connect(url, timeout=5)
            try:
                await conn.execute(sql)
            finally:
                await conn.close()
        else:
            sql = RANKED_AS_KEPT.format(at=AT, old="'2025-01-01T00:00:00.000000Z'", **ids)
            with sqlite3.connect(url.removeprefix("sqlite:///")) as lite:
                lite.executescript(sql)

    async def upgrade(url: str) -> None:
        settings = Settings(database_url=url)
        before = [m for m in latest if m.version < aging.version]
        if engine == "postgresql":  # tables only: the functions of this release need the new column
            monkeypatch.setattr(f"{MIGRATE}.load_migrations", lambda dialect: before)
            monkeypatch.setattr(f"{MIGRATE}.load_routines", lambda dialect: None)
        else:
            monkeypatch.setattr("simplequeue.store.sqlite.store.load_migrations", lambda dialect: before)
        old = store_for(settings, FakeClock())
        await old.open()
        await old.migrate()
        await old.close()
        await write_old(url)

        monkeypatch.undo()
        new = store_for(settings, FakeClock())
        await new.open()
        try:
            assert aging.version in await new.migrate()
            popped = await new.pop("ranked", 10, 30)
            assert [p.payload for p in popped] == ["new-high", "old-mid", "old-low", "new-low"]
            assert [p.rank_priority for p in popped] == [5, 2, 0, 0]
            assert (await new.get_queue("ranked")).settings.priority_aging_seconds is None
        finally:
            await new.close()

    with database(engine, tmp_path) as url:
        asyncio.run(upgrade(url))
