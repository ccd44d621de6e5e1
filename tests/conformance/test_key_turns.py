"""Pops of a queue limited per key take turns on its keys, not on the queue (PostgreSQL: the keys'
rows are locked with SKIP LOCKED): a popper passes over a key another one holds, without waiting,
and takes the other keys' items; no key is ever handed out past its limit. SQLite has one writer
at a time, so these hold there trivially and only the limits are checked."""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg
import pytest
from simplequeue.domain import Completion
from simplequeue.domain.limits import FlowLimits
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.conformance.helpers import configure
from tests.conformance.test_key_limits import fill, keys_of
from tests.engines import FakeClock


async def blocked_by(holder: asyncpg.Connection) -> None:
    """Returns once some session waits on a lock `holder` holds."""
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))"
    while not await holder.fetchval(waiting, holder.get_server_pid()):  # noqa: ASYNC110 (the server says)
        await asyncio.sleep(0.01)


async def test_a_popper_passes_over_a_key_another_holds_without_waiting(
    settings: Settings, store: Store, queue: str
) -> None:
    if store.dialect != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=2))
    await fill(store, queue, {"a": 5, "b": 5, "c": 5})
    holder = await asyncpg.connect(settings.database_url)
    try:
        held = holder.transaction()
        await held.start()
        await holder.execute(
            "SELECT 1 FROM sq_fair_keys WHERE queue = $1 AND fairness_key = 'a' FOR UPDATE", queue
        )
        # Bounded only so that a pop that waited would fail rather than hang the run.
        passed_over = await asyncio.wait_for(store.pop(queue, 10, 30), 3)
        assert keys_of(passed_over) == {"b": 2, "c": 2}
        await held.rollback()
        assert keys_of(await store.pop(queue, 10, 30)) == {"a": 2}
        assert await store.pop(queue, 10, 30) == []
    finally:
        await holder.close()


async def test_a_pop_limited_per_key_takes_no_turn_on_the_queues_row(
    settings: Settings, store: Store, queue: str
) -> None:
    if store.dialect != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=1))
    await fill(store, queue, {"a": 2, "b": 2})
    holder = await asyncpg.connect(settings.database_url)
    try:
        held = holder.transaction()
        await held.start()
        # What a pop of a queue with queue-wide limits takes (sq_flow_room): its pops take turns.
        await holder.execute("SELECT 1 FROM sq_queues WHERE name = $1 FOR NO KEY UPDATE", queue)
        popped = await asyncio.wait_for(store.pop(queue, 10, 30), 3)
        assert keys_of(popped) == {"a": 1, "b": 1}
        await held.rollback()
    finally:
        await holder.close()


async def test_a_popper_that_finds_every_key_held_waits_for_one(
    settings: Settings, store: Store, queue: str
) -> None:
    if store.dialect != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    await configure(store, queue, limits=FlowLimits(max_leased_per_key=2))
    await fill(store, queue, {"a": 5})
    holder = await asyncpg.connect(settings.database_url)
    try:
        held = holder.transaction()
        await held.start()
        await holder.execute("SELECT 1 FROM sq_fair_keys WHERE queue = $1 FOR UPDATE", queue)
        popping = asyncio.create_task(store.pop(queue, 10, 30))
        # A queue of one key is still handed out: the pop waits its turn, on the holder.
        await asyncio.wait_for(blocked_by(holder), 3)
        assert not popping.done()
        await held.rollback()
        assert keys_of(await asyncio.wait_for(popping, 3)) == {"a": 2}
    finally:
        await holder.close()


async def test_concurrent_poppers_on_two_replicas_never_pass_a_keys_limit(
    settings: Settings, store: Store, queue: str, clock: FakeClock
) -> None:
    other = store_for(settings, clock)
    await other.open()
    try:
        await configure(store, queue, limits=FlowLimits(max_leased_per_key=2))
        await fill(store, queue, {f"k{n}": 12 for n in range(6)})
        held: Counter[str | None] = Counter()
        most = 0
        taken = 0

        async def worker(s: Store) -> None:
            nonlocal most, taken
            done: list[Completion] = []
            for _ in range(40):
                finished = [Completion(c.id, c.lease_token) for c in done]
                _, items = await s.complete_and_pop(finished, queue, 4, 30)
                held.subtract(keys_of(done))  # type: ignore[arg-type]
                held.update(keys_of(items))
                most = max([most, *held.values()])
                taken += len(items)
                done = items  # type: ignore[assignment]

        await asyncio.gather(*[worker(s) for s in (store, other) * 3])
        assert most <= 2
        assert taken > 0
    finally:
        await other.close()


async def test_a_pop_takes_the_items_its_keys_hold_after_it_took_their_turns(
    settings: Settings, store: Store, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk that chooses a pop's keys reads the queue before their turns are taken: a pop that
    committed in between may have leased the items it saw. What the pop takes of its keys is read
    after the turns, so it takes their next items and counts the other pop's leases; here, the
    other pop is played by a connection of the test's own, between the two steps."""
    if store.dialect != "postgresql":
        pytest.skip("statements of PostgreSQL's careful pop")
    from simplequeue.store.postgres import store as postgres_store

    await configure(store, queue, limits=FlowLimits(max_leased_per_key=3))
    await fill(store, queue, {"a": 5})
    other = await asyncpg.connect(settings.database_url)
    original = postgres_store.fetch

    async def fetch_then_lease(conn: asyncpg.Connection, name: str, /, **values: object) -> list[object]:
        found = await original(conn, name, **values)
        if name == "lock_keys":  # a1 and a2, leased and committed just before this pop's turn
            await other.execute(
                "UPDATE sq_items SET status = 'leased', attempts = 1, lease_token = gen_random_uuid(),"
                " visible_at = now() + interval '1 hour'"
                " WHERE queue = $1 AND payload::text IN ('\"a0\"', '\"a1\"')",
                queue,
            )
        return found

    monkeypatch.setattr(postgres_store, "fetch", fetch_then_lease)
    try:
        popped = await store.pop(queue, 10, 30)
    finally:
        monkeypatch.setattr(postgres_store, "fetch", original)
        await other.close()
    # Room for one more of "a" (3 less the 2 leased), and it is the next one.
    assert [item.payload for item in popped] == ["a2"]
