"""SQLite's group commit (store/sqlite/group_commit.py): the calls that wait for the writer share
one transaction, each under its own savepoint, and are answered after its one COMMIT."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest
from simplequeue.domain import DatabaseUnavailable, ItemExists
from simplequeue.store.sqlite.group_commit import run_group
from simplequeue.store.sqlite.statements import on_thread
from simplequeue.store.sqlite.store import SqliteStore

from tests.factories import new_item


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "sq.db"), timeout_seconds=2)
    await store.open()
    await store.migrate()
    yield store
    await store.close()


def _commits(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)")
    return conn


def test_a_body_that_raises_is_rolled_back_alone_and_the_others_commit(tmp_path: Path) -> None:
    conn = _commits(tmp_path / "g.db")

    def insert(c: sqlite3.Connection, n: int) -> int:
        c.execute("INSERT INTO t VALUES (?)", (n,))
        return n

    def insert_then_fail(c: sqlite3.Connection, n: int) -> int:
        c.execute("INSERT INTO t VALUES (?)", (n,))
        raise ValueError("refused")

    results = run_group(conn, [(insert, (1,)), (insert_then_fail, (2,)), (insert, (3,))])
    assert (results[0], results[2]) == (1, 3)
    assert isinstance(results[1].error, ValueError)  # handed to its own caller only
    assert [r[0] for r in conn.execute("SELECT n FROM t ORDER BY n")] == [1, 3]
    assert not conn.in_transaction


def test_a_group_whose_commit_cannot_begin_commits_nothing(tmp_path: Path) -> None:
    conn = _commits(tmp_path / "g.db")
    conn.execute("BEGIN")  # a transaction already open: BEGIN IMMEDIATE fails for the whole group
    with pytest.raises(sqlite3.OperationalError):
        run_group(conn, [(lambda c: c.execute("INSERT INTO t VALUES (1)"), ())])
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0


async def test_concurrent_pushes_share_commits_and_a_refused_one_leaves_the_others_in(
    store: SqliteStore,
) -> None:
    taken = uuid4()
    await store.push_batch([new_item("other", 0, id=taken)], skip_existing=False)
    commits = 0
    writer = store._writer
    assert writer is not None

    def count(statement: str) -> None:
        nonlocal commits
        commits += statement.strip().upper() == "COMMIT"

    await on_thread(writer, lambda conn: conn.set_trace_callback(count))
    # Held writer: the pushes queue up meanwhile, and then run as one group.
    async with store._writer_turn():
        pushes = [
            asyncio.create_task(store.push_batch([new_item("q", n)], skip_existing=False)) for n in range(20)
        ]
        refused = asyncio.create_task(store.push_batch([new_item("q", "x", id=taken)], skip_existing=False))
        await asyncio.sleep(0.05)
    done = await asyncio.gather(*pushes)
    with pytest.raises(ItemExists):
        await refused
    await on_thread(writer, lambda conn: conn.set_trace_callback(None))
    assert all(p[0] is not None and p[0].created for p in done)
    assert commits == 1  # 21 calls, one commit
    popped = await store.pop("q", 100, 30)
    assert sorted(i.payload for i in popped) == list(range(20))  # the refused one left nothing


async def test_a_call_whose_turn_does_not_come_in_time_never_runs(store: SqliteStore) -> None:
    async with store._writer_turn():  # another write holds the writer past the call's timeout
        with pytest.raises(DatabaseUnavailable):
            await store.push_batch([new_item("late", 1)], skip_existing=False)
    assert await store.pop("late", 10, 30) == []


async def test_a_call_cancelled_once_taken_commits_and_is_still_cancelled(tmp_path: Path) -> None:
    # A task cancelled while its statements run must end cancelled (after they commit): a relay or
    # a request told to stop must not go on to its next wait as if nothing was asked.
    store = SqliteStore(str(tmp_path / "cancel.db"))
    await store.open()
    await store.migrate()
    try:
        await store.push_batch([new_item("c", {"n": 1})], skip_existing=False)
        for _ in range(20):
            popping = asyncio.create_task(store.pop("c", 1, 30))
            await asyncio.sleep(0)  # its call is queued; the group's runner takes it next
            await asyncio.sleep(0)
            popping.cancel()
            with pytest.raises(asyncio.CancelledError):
                await popping
    finally:
        await store.close()


async def test_a_call_cancelled_once_taken_stays_cancelled_when_its_statements_fail(tmp_path: Path) -> None:
    # The body's own error (here: no schema) must not stand in for the cancellation.
    store = SqliteStore(str(tmp_path / "unmigrated.db"))
    await store.open()
    try:
        for _ in range(20):
            popping = asyncio.create_task(store.pop("c", 1, 30))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            popping.cancel()
            with pytest.raises(asyncio.CancelledError):
                await popping
    finally:
        await store.close()
