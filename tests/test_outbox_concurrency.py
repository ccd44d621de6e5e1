"""Many callers at once, each transaction a business insert and a push, about half rolled back,
while workers pop through the service's store: every committed order has exactly one item, and no
rolled-back order has any."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from uuid import uuid4

import asyncpg
from simplequeue import outbox
from simplequeue.domain import Completion
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

CALLERS = 8
TRANSACTIONS = 500  # per caller
WORKERS = 4


async def _run(
    store: Store, queue: str, caller: Callable[[int, set[int], set[int]], Awaitable[None]]
) -> tuple[set[int], set[int], Counter[int]]:
    """Callers and workers together; (committed orders, rolled-back orders, items popped by order)."""
    committed: set[int] = set()
    rolled_back: set[int] = set()
    popped: Counter[int] = Counter()
    done = asyncio.Event()

    async def worker() -> None:
        while True:
            # Read before the pop: an empty pop ends the worker only if it began after the last
            # commit. One that began before it may find nothing and return after done is set.
            finishing = done.is_set()
            items = await store.pop(queue, 50, 60)
            popped.update(item.payload["order"] for item in items)
            if items:
                await store.complete_batch([Completion(i.id, i.lease_token) for i in items])
            elif finishing:
                return
            else:
                await asyncio.sleep(0.01)

    workers = [asyncio.create_task(worker()) for _ in range(WORKERS)]
    try:
        await asyncio.gather(*(caller(n, committed, rolled_back) for n in range(CALLERS)))
    finally:
        done.set()
        await asyncio.gather(*workers)
    return committed, rolled_back, popped


def _check(committed: set[int], rolled_back: set[int], popped: Counter[int], stored: set[int]) -> None:
    print(  # the figures, with -s
        f"committed {len(committed)}, rolled back {len(rolled_back)}, popped {sum(popped.values())}, "
        f"orders in the table {len(stored)}"
    )
    assert len(committed) + len(rolled_back) == CALLERS * TRANSACTIONS
    assert committed
    assert rolled_back
    assert stored == committed
    assert set(popped) == committed, "every committed order has an item, and no rolled-back one has"
    assert set(popped.values()) == {1}, "exactly one"


async def test_sqlite_callers_and_workers_at_once(tmp_path: Path) -> None:
    path = tmp_path / "sq.db"
    store = store_for(Settings(database_url=f"sqlite:///{path}", db_timeout_seconds=30, sweep=False))
    await store.open()
    await store.migrate()
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    setup.close()
    queue = f"c-{uuid4().hex[:12]}"

    def transactions(n: int, committed: set[int], rolled_back: set[int]) -> None:
        conn = sqlite3.connect(path, timeout=30)
        conn.execute("PRAGMA synchronous = NORMAL")  # the test's own pace; WAL keeps commits atomic
        chance = random.Random(n)
        try:
            for i in range(TRANSACTIONS):
                order = n * TRANSACTIONS + i
                conn.execute("INSERT INTO orders (id) VALUES (?)", (order,))
                outbox.push(conn, queue, {"order": order})
                if chance.random() < 0.5:
                    conn.rollback()
                    rolled_back.add(order)
                else:
                    conn.commit()
                    committed.add(order)
        finally:
            conn.close()

    async def caller(n: int, committed: set[int], rolled_back: set[int]) -> None:
        await asyncio.to_thread(transactions, n, committed, rolled_back)

    started = time.monotonic()
    committed, rolled_back, popped = await _run(store, queue, caller)
    await store.close()
    print(f"SQLite: {time.monotonic() - started:.1f} s")
    with sqlite3.connect(path) as check:
        stored = {row[0] for row in check.execute("SELECT id FROM orders")}
    check.close()
    _check(committed, rolled_back, popped, stored)


async def test_postgresql_callers_and_workers_at_once(postgres_url: str) -> None:
    store = store_for(Settings(database_url=postgres_url, db_timeout_seconds=30, sweep=False, pool_size=8))
    await store.open()
    await store.migrate()
    table = f"orders_{uuid4().hex[:8]}"
    queue = f"c-{uuid4().hex[:12]}"
    pool = await asyncpg.create_pool(postgres_url, min_size=CALLERS, max_size=CALLERS)
    await pool.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY)")

    async def caller(n: int, committed: set[int], rolled_back: set[int]) -> None:
        chance = random.Random(n)
        async with pool.acquire() as conn:
            for i in range(TRANSACTIONS):
                order = n * TRANSACTIONS + i
                tx = conn.transaction()
                await tx.start()
                await conn.execute(f"INSERT INTO {table} (id) VALUES ($1)", order)
                await outbox.push_async(conn, queue, {"order": order})
                if chance.random() < 0.5:
                    await tx.rollback()
                    rolled_back.add(order)
                else:
                    await tx.commit()
                    committed.add(order)

    started = time.monotonic()
    try:
        committed, rolled_back, popped = await _run(store, queue, caller)
        print(f"PostgreSQL: {time.monotonic() - started:.1f} s")
        stored = {row[0] for row in await pool.fetch(f"SELECT id FROM {table}")}
        await pool.execute(f"DROP TABLE {table}")
    finally:
        await pool.close()
        await store.close()
    _check(committed, rolled_back, popped, stored)
