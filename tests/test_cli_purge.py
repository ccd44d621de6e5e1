"""`simplequeue purge` (the sweep once, for cron): it reaps, purges and expires, and says how many
of each as one JSON line."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner
from simplequeue.cli import main
from simplequeue.domain import ItemNotFound, QueueSettings
from simplequeue.main import store_for
from simplequeue.settings import Settings

from tests.factories import new_item


def test_purge_expires_items_past_their_queues_retention_period(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sq.db'}"
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    old, fresh, kept = (
        new_item("retains", "old", created_at=an_hour_ago),
        new_item("retains", "fresh"),
        new_item("keeps", "kept", created_at=an_hour_ago),
    )

    async def prepare() -> None:
        store = store_for(Settings(database_url=url))
        await store.open()
        try:
            await store.migrate()
            await store.put_queue("retains", QueueSettings(message_retention_seconds=1800))
            await store.push_batch([old, fresh, kept], skip_existing=False)
        finally:
            await store.close()

    asyncio.run(prepare())
    run = CliRunner().invoke(main, ["purge"], env={"SIMPLEQUEUE_DATABASE_URL": url})
    assert run.exit_code == 0, run.output
    assert json.loads(run.output) == {"reaped": 0, "purged": 0, "expired": 1}

    async def left() -> list[str]:
        store = store_for(Settings(database_url=url))
        await store.open()
        try:
            found = []
            for item in (old, fresh, kept):
                with contextlib.suppress(ItemNotFound):
                    found.append((await store.get_item(item.id)).payload)
            return found
        finally:
            await store.close()

    assert asyncio.run(left()) == ["fresh", "kept"]
