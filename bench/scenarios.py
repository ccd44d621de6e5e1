"""The measurements. Each returns figures measured in this run, next to their baselines."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import asyncpg
import httpx
from simplequeue.main import store_for
from simplequeue.settings import Settings

from bench import profile
from bench.infra import PIDS, database, pg_transactions, run_for, server

CONCURRENCY = 32


@dataclass
class Figure:
    measure: str
    engine: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: str = ""
    met: bool | None = None

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline if self.baseline else None


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def session(base: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(base, connector=aiohttp.TCPConnector(limit=256))


async def post(http: aiohttp.ClientSession, path: str, body: Any) -> Any:
    async with http.post(path, json=body) as response:
        if response.status >= 300:
            raise RuntimeError(f"{path}: {response.status} {await response.text()}")
        return await response.json() if response.status != 204 else None


async def counted_rate(
    seconds: float,
    warmup: float,
    work: Callable[[], Awaitable[int]],
    workers: int,
    meter: profile.CpuMeter | None = None,
) -> float:
    """Operations per second over a window after a warm-up, with `workers` loops of `work`; the
    meter, if given, reads the CPU spent in the window and the operations done in it."""
    done = 0
    measuring = False

    async def loop() -> None:
        nonlocal done
        while True:
            n = await work()
            if measuring:
                done += n

    tasks = [asyncio.create_task(loop()) for _ in range(workers)]
    await asyncio.sleep(warmup)
    measuring, started = True, time.perf_counter()
    if meter is not None:
        meter.start()
    await run_for(seconds, *tasks)
    elapsed = time.perf_counter() - started
    if meter is not None:
        meter.stop()
        meter.count = done
    return done / elapsed


# --- 1. push → pop → complete with batches of 100, vs PgQueuer's continuous throughput ----------


async def throughput_batches(engine: str, seconds: float) -> float:
    """PgQueuer's shape (1 producer, 5 consumers), with batches of 100 over HTTP."""
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with session(base) as http:
                completed = 0
                measuring = False

                async def producer() -> None:
                    while True:
                        await post(
                            http,
                            "/push/batch",
                            {"queue": "tp", "items": [{"payload": {"n": n}} for n in range(100)]},
                        )

                async def consumer() -> None:
                    nonlocal completed
                    while True:
                        popped = await post(
                            http, "/pop", {"queue": "tp", "max_items": 100, "wait_seconds": 1}
                        )
                        items = [{"id": i["id"], "lease_token": i["lease_token"]} for i in popped["items"]]
                        if items:
                            await post(http, "/items/complete", {"items": items})
                            completed += len(items) if measuring else 0

                tasks = [asyncio.create_task(producer())] + [
                    asyncio.create_task(consumer()) for _ in range(5)
                ]
                await asyncio.sleep(2)
                measuring, started = True, time.perf_counter()
                await run_for(seconds, *tasks)
                return completed / (time.perf_counter() - started)


async def pgqueuer_throughput(seconds: float) -> float:
    """PgQueuer's own benchmark method (tools/benchmark.py, continuous strategy, its defaults):
    1 enqueue task with batches of 10, 5 PgQueuer consumers with batch_size 10, each on its own
    asyncpg connection, entrypoints that only count; rate = jobs processed / elapsed."""
    from pgqueuer import PgQueuer
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.models import Job
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    async with database("postgresql") as url:
        await Queries(AsyncpgDriver(await asyncpg.connect(url))).install()
        processed = 0
        measuring = False
        consumers = [PgQueuer(AsyncpgDriver(await asyncpg.connect(url))) for _ in range(5)]
        for pgq in consumers:

            @pgq.entrypoint("asyncfetch")
            async def asyncfetch(job: Job) -> None:
                nonlocal processed
                processed += 1 if measuring else 0

            @pgq.entrypoint("syncfetch")  # async too: PgQueuer 1.x refuses sync entrypoints
            async def syncfetch(job: Job) -> None:
                nonlocal processed
                processed += 1 if measuring else 0

        producer_queries = Queries(AsyncpgDriver(await asyncpg.connect(url)))
        counter = iter(range(10**12))

        async def produce() -> None:
            entrypoints = ["syncfetch", "asyncfetch"] * 10
            while True:
                await producer_queries.enqueue(
                    random.sample(entrypoints, k=10),
                    [str(next(counter)).encode() for _ in range(10)],
                    [0] * 10,
                )

        runs = [
            asyncio.create_task(p.run(batch_size=10, mode=QueueExecutionMode.continuous)) for p in consumers
        ]
        producer = asyncio.create_task(produce())
        await asyncio.sleep(2)
        measuring, started = True, time.perf_counter()
        await asyncio.sleep(seconds)
        rate = processed / (time.perf_counter() - started)
        producer.cancel()
        for pgq in consumers:
            pgq.shutdown.set()
        await asyncio.wait_for(asyncio.gather(*runs, producer, return_exceptions=True), timeout=30)
        return rate


# --- 2. single pushes at 32 clients vs a no-op endpoint and raw driver INSERTs ------------------


async def single_push(
    engine: str, seconds: float, meters: dict[str, profile.CpuMeter]
) -> tuple[float, float, float]:
    """Pushes per second: ours, the no-op endpoint, raw INSERTs; `meters` (noop, push, raw) read
    the CPU each spent."""
    body = {"queue": "single", "payload": {"order": 42, "lines": ["a", "b"]}}
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with session(base) as http:

                async def one(path: str) -> int:
                    await post(http, path, body)
                    return 1

                meters["noop"].server_pid = meters["push"].server_pid = PIDS[base]
                noop = await counted_rate(seconds, 1, lambda: one("/bench/noop"), CONCURRENCY, meters["noop"])
                push = await counted_rate(seconds, 1, lambda: one("/push"), CONCURRENCY, meters["push"])
        raw = await raw_inserts(engine, url, seconds, json.dumps(body["payload"]), meters["raw"])
    return push, noop, raw


async def raw_inserts(
    engine: str, url: str, seconds: float, payload: str, meter: profile.CpuMeter | None = None
) -> float:
    """The same row inserted straight through the driver, one transaction each, 32 at a time."""
    if engine == "postgresql":
        pool = await baseline_pool(url)
        sql = (
            "INSERT INTO sq_items (id, queue, payload, created_at, visible_at) "
            "VALUES ($1, 'raw', $2::json, now(), now())"
        )

        async def insert() -> int:
            await pool.execute(sql, uuid.uuid4(), payload)
            return 1

        try:
            return await counted_rate(seconds, 1, insert, CONCURRENCY, meter)
        finally:
            await pool.close()
    import aiosqlite

    conn = await aiosqlite.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    await conn.execute("PRAGMA synchronous = FULL")  # the service's durability
    lock = asyncio.Lock()
    sql = (
        "INSERT INTO sq_items (id, queue, payload, created_at, visible_at) "
        "VALUES (?, 'raw', ?, strftime('%Y-%m-%dT%H:%M:%fZ'), strftime('%Y-%m-%dT%H:%M:%fZ'))"
    )

    async def insert_lite() -> int:
        async with lock:
            await conn.execute("BEGIN IMMEDIATE")
            await conn.execute(sql, (str(uuid.uuid4()), payload))
            await conn.execute("COMMIT")
        return 1

    try:
        return await counted_rate(seconds, 1, insert_lite, CONCURRENCY, meter)
    finally:
        await conn.close()


# --- 3. single pop + complete at 32 workers vs the raw driver's claim+delete loop ---------------

# The raw loops run each dialect's own pop statement: the baseline is the same SQL without HTTP,
# the framework or the store's Python, not a different (better or worse) query.
from simplequeue.store.postgres.statements import Q as PG  # noqa: E402
from simplequeue.store.postgres.store import PLANNER_SETTINGS, keep_session  # noqa: E402
from simplequeue.store.sqlite.params import add_seconds, to_text  # noqa: E402
from simplequeue.store.sqlite.statements import Q as LITE  # noqa: E402


async def baseline_pool(url: str) -> asyncpg.Pool:
    """The raw driver loops' pool: the store's size, session settings and release policy, so
    that a baseline differs from ours by what it runs, not by how its connections are kept."""
    return await asyncpg.create_pool(
        url, min_size=10, max_size=10, server_settings=PLANNER_SETTINGS, reset=keep_session
    )


async def fill(base: str, queue: str, count: int) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for _ in range(count // 1000):
            items = [{"payload": {"n": n}} for n in range(1000)]
            response = await http.post("/push/batch", json={"queue": queue, "items": items})
            response.raise_for_status()


async def pop_complete(engine: str, seconds: float) -> PopComplete:
    """Ours over HTTP; the raw driver running our own pop SQL and a DELETE; the textbook
    claim+delete, one statement and one commit per item; and where the server's time goes under
    ours (a second window, sampled by py-spy, so that sampling does not slow the counted one)."""
    pg = engine == "postgresql"
    meters = {
        name: profile.CpuMeter(postgres=pg)
        for name in ("pop + DELETE", "pop completing", "no history", "textbook")
    }
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            await fill(base, "work", 60_000)
            for name in ("pop + DELETE", "pop completing", "no history"):
                meters[name].server_pid = PIDS[base]
            async with session(base) as http:

                async def one() -> int:
                    popped = (await post(http, "/pop", {"queue": "work"}))["items"]
                    for item in popped:
                        async with http.delete(
                            f"/items/{item['id']}", params={"lease_token": item["lease_token"]}
                        ):
                            pass
                    return len(popped)

                ours = await counted_rate(seconds, 1, one, CONCURRENCY, meters["pop + DELETE"])

                # The SDK worker's loop: each pop completes the item handled before it, one
                # request per item (the finished items are shared out, one per request).
                finished: deque[dict[str, str]] = deque()
                queue = "work"

                async def acknowledging() -> int:
                    done = [finished.popleft()] if finished else []
                    body = {"queue": queue, "complete": done}
                    popped = (await post(http, "/pop", body))["items"]
                    finished.extend({"id": i["id"], "lease_token": i["lease_token"]} for i in popped)
                    return len(popped)

                acked = await counted_rate(seconds, 1, acknowledging, CONCURRENCY, meters["pop completing"])
                # The same loop on a queue that keeps no history (retention_seconds 0): what the
                # history record costs each item, measured beside it.
                async with http.put("/queues/unkept", json={"retention_seconds": 0}) as made:
                    made.raise_for_status()
                await fill(base, "unkept", 60_000)
                finished.clear()
                queue = "unkept"
                unkept = await counted_rate(seconds, 1, acknowledging, CONCURRENCY, meters["no history"])
                queue = "work"
                finished.clear()
                sampling = asyncio.ensure_future(profile.record(PIDS[base], seconds))
                await counted_rate(seconds, 1, acknowledging, CONCURRENCY)
                stacks = await sampling
            await fill(base, "raw", 60_000)
            await fill(base, "textbook", 60_000)
        raw = await raw_claim_delete(engine, url, seconds)
        textbook = await textbook_claim_delete(engine, url, seconds, meters["textbook"])
    title = f"{engine}: single pop completing the previous item, over HTTP, {CONCURRENCY} workers"
    per_item = {
        "pop + DELETE over HTTP (3, 3b)": meters["pop + DELETE"].per_operation(),
        "pop completing the previous item over HTTP (3c)": meters["pop completing"].per_operation(),
        "3c on a queue keeping no history (3d)": meters["no history"].per_operation(),
        "textbook claim+delete, raw driver": meters["textbook"].per_operation(),
    }
    cpu = profile.cpu_table(f"{engine}: CPU per item, by process (same run)", per_item)
    return PopComplete(
        ours, acked, raw, textbook, profile.summary(stacks, title) + "\n" + cpu, per_item, unkept
    )


@dataclass(frozen=True)
class PopComplete:
    """Items/s: pop + DELETE over HTTP; a pop that completes the previous item; the raw driver
    running our pop SQL and a DELETE; the textbook claim+delete. And the server's profile."""

    ours: float
    acknowledging: float
    raw: float
    textbook: float
    profile: str
    cpu: dict[str, dict[str, float]]
    """Microseconds of CPU per item, by loop and by process (profile.CpuMeter.per_operation)."""
    unkept: float
    """Items/s of 3c's loop on a queue whose retention_seconds is 0 (no history records)."""


# The textbook queue loop: claim the first ready row, skipping those others hold, and delete it,
# in one statement and one commit. It keeps no lease, no history and no attempts: the floor that
# issue 15's targets are set against. It gets the plan ours gets: the store's session settings on
# PostgreSQL (freshly filled, the table's statistics would have the planner sort a scan for every
# claim), and on SQLite the ready index, whose partial predicate the status term matches.
TEXTBOOK_PG = """
DELETE FROM sq_items WHERE id = (
    SELECT id FROM sq_items
    WHERE queue = $1 AND status = 'ready' AND visible_at <= now()
    ORDER BY priority DESC, created_at, seq
    FOR UPDATE SKIP LOCKED
    LIMIT 1
) RETURNING id, payload
"""
TEXTBOOK_LITE = """
DELETE FROM sq_items WHERE seq = (
    SELECT seq FROM sq_items INDEXED BY sq_items_ready
    WHERE queue = ? AND status = 'ready' AND visible_at <= ?
    ORDER BY priority DESC, created_at, seq
    LIMIT 1
) RETURNING id, payload
"""


async def textbook_claim_delete(
    engine: str, url: str, seconds: float, meter: profile.CpuMeter | None = None
) -> float:
    if engine == "postgresql":
        pool = await baseline_pool(url)

        async def one() -> int:
            return 1 if await pool.fetchrow(TEXTBOOK_PG, "textbook") else 0

        try:
            return await counted_rate(seconds, 1, one, CONCURRENCY, meter)
        finally:
            await pool.close()
    import aiosqlite

    conn = await aiosqlite.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    await conn.execute("PRAGMA synchronous = FULL")
    lock = asyncio.Lock()

    async def one_lite() -> int:
        async with lock:  # SQLite has one writer: SKIP LOCKED has nothing to skip
            await conn.execute("BEGIN IMMEDIATE")
            async with conn.execute(TEXTBOOK_LITE, ("textbook", to_text(datetime.now(UTC)))) as cursor:
                found = await cursor.fetchone()
            await conn.execute("COMMIT")
        return 1 if found else 0

    try:
        return await counted_rate(seconds, 1, one_lite, CONCURRENCY, meter)
    finally:
        await conn.close()


async def raw_claim_delete(engine: str, url: str, seconds: float) -> float:
    if engine == "postgresql":
        # The store's own session settings too: the same SQL, planned the same way.
        pool = await baseline_pool(url)

        async def one() -> int:
            token = uuid.uuid4()
            pop = PG["pop"]
            found = await pool.fetchrow(
                pop.sql, *pop.bind(queue="raw", now=None, max_items=1, lease_token=token, lease_seconds=30)
            )
            if found is not None:
                await pool.execute(
                    "DELETE FROM sq_items WHERE id = $1 AND lease_token = $2", found["id"], token
                )
            return 1 if found else 0

        try:
            return await counted_rate(seconds, 1, one, CONCURRENCY)
        finally:
            await pool.close()
    import aiosqlite

    conn = await aiosqlite.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    await conn.execute("PRAGMA synchronous = FULL")
    await conn.create_function("sq_add_seconds", 2, add_seconds, deterministic=True)  # as the store does
    lock = asyncio.Lock()

    async def one_lite() -> int:
        token = str(uuid.uuid4())
        now = datetime.now(UTC)
        params = {
            "queue": "raw",
            "max_items": 1,
            "now": to_text(now),
            "lease_token": token,
            "lease_seconds": 30,
        }
        async with lock:
            await conn.execute("BEGIN IMMEDIATE")
            async with conn.execute(LITE["pop"].sql, LITE["pop"].bind(**params)) as cursor:
                found = await cursor.fetchone()
            await conn.execute("COMMIT")
            if found is None:
                return 0
            await conn.execute("BEGIN IMMEDIATE")
            await conn.execute("DELETE FROM sq_items WHERE id = ? AND lease_token = ?", (found[1], token))
            await conn.execute("COMMIT")
        return 1

    try:
        return await counted_rate(seconds, 1, one_lite, CONCURRENCY)
    finally:
        await conn.close()


# --- 4. wake latency: push → a waiting long-poll -------------------------------------------------


async def wake_latency(push_base: str, wait_base: str, rounds: int) -> list[float]:
    """Milliseconds from sending a push to the waiting pop's answer arriving."""
    samples = []
    async with session(push_base) as pusher, session(wait_base) as waiter:
        for n in range(rounds):
            queue = f"wake-{n % 4}"
            waiting = asyncio.create_task(post(waiter, "/pop", {"queue": queue, "wait_seconds": 10}))
            await asyncio.sleep(0.02)  # the pop is asleep on the server
            started = time.perf_counter()
            await post(pusher, "/push", {"queue": queue, "payload": n})
            answer = await asyncio.wait_for(waiting, timeout=15)
            samples.append((time.perf_counter() - started) * 1000)
            item = answer["items"][0]
            async with waiter.delete(f"/items/{item['id']}"):
                pass
    return samples


async def wake(engine: str, rounds: int) -> dict[str, list[float]]:
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            found = {"same process": await wake_latency(base, base, rounds)}
            if engine == "postgresql":  # another replica: LISTEN/NOTIFY carries the wake-up
                with server(url, access_log="false", migrate_on_start="false") as other:
                    found["other replica"] = await wake_latency(other, base, rounds)
    return found


# --- 5. statements per second caused by 100 idle long-polls -------------------------------------


async def idle_statements(engine: str, seconds: float) -> tuple[float, float | None]:
    """(store calls/s, database transactions/s) caused by 100 idle long-polls.

    Store calls are counted in the server: on the idle path each is one statement. PostgreSQL's
    own count is a cross-check with two caveats handled here: backends report their counts up
    to ~10 s late, so both windows start after a settling pause and last 2x `seconds`; and it
    includes autovacuum and this measurement's own queries, so a window with the service up
    but no polls is measured first, in the same run, and subtracted.
    """
    settle, window = 11.0, 2 * seconds
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with session(base) as http:
                quiet = None
                if engine == "postgresql":
                    await asyncio.sleep(settle)
                    quiet = await _pg_transaction_rate(url, window)

                async def poll() -> int:
                    await post(http, "/pop", {"queue": "idle", "wait_seconds": 5})
                    return 1

                tasks = [asyncio.create_task(_forever(poll)) for _ in range(100)]
                await asyncio.sleep(settle)
                calls_before = await _counters(http)
                started = time.perf_counter()
                busy = await _pg_transaction_rate(url, window) if quiet is not None else None
                if busy is None:
                    await asyncio.sleep(window)
                calls = (await _counters(http) - calls_before) / (time.perf_counter() - started)
                await run_for(0, *tasks)
    return calls, (max(0.0, busy - quiet) if busy is not None and quiet is not None else None)


async def _pg_transaction_rate(url: str, seconds: float) -> float:
    before = await pg_transactions(url)
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    return (await pg_transactions(url) - before) / (time.perf_counter() - started)


async def _forever(work: Callable[[], Awaitable[int]]) -> None:
    while True:
        await work()


async def _counters(http: aiohttp.ClientSession) -> int:
    async with http.get("/bench/counters") as response:
        return sum((await response.json()).values())


# --- 6. pop latency with 1M dead rows vs 10k -----------------------------------------------------

PG_DEAD_ROWS = """
INSERT INTO sq_items (id, queue, payload, created_at, status, attempts, visible_at, errors, died_at)
SELECT gen_random_uuid(), 'lat', '{"dead": true}', now() - interval '1 day', 'dead', 5, now(),
       '[{"at": "2026-01-01T00:00:00Z", "error": "gave up"}]', now()
FROM generate_series(1, $1)
"""
LITE_DEAD_ROWS = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
INSERT INTO sq_items (id, queue, payload, created_at, status, attempts, visible_at, errors, died_at)
SELECT printf('%08x-0000-4000-8000-%012x', i, i), 'lat', '{"dead": true}', '2026-01-01T00:00:00.000000Z',
       'dead', 5, '2026-01-01T00:00:00.000000Z', '[{"at": "2026-01-01T00:00:00Z", "error": "gave up"}]',
       '2026-01-01T00:00:00.000000Z'
FROM n
"""


async def pop_latency(engine: str, dead_rows: int, samples: int) -> list[float]:
    """Milliseconds per store pop (one item) with `dead_rows` dead items in the same queue."""
    async with database(engine) as url:
        store = store_for(Settings(database_url=url))
        await store.open()
        try:
            await store.migrate()
            await _insert_dead(engine, url, dead_rows)
            await _fill_store(store, samples + 100)
            latencies = []
            for _ in range(samples):
                started = time.perf_counter()
                assert await store.pop("lat", 1, 300)
                latencies.append((time.perf_counter() - started) * 1000)
            return latencies
        finally:
            await store.close()


async def _insert_dead(engine: str, url: str, count: int) -> None:
    if engine == "postgresql":
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(PG_DEAD_ROWS, count)
            await conn.execute("ANALYZE sq_items")
        finally:
            await conn.close()
        return
    import aiosqlite

    async with aiosqlite.connect(url.removeprefix("sqlite:///")) as conn:
        await conn.execute(LITE_DEAD_ROWS, (count,))
        await conn.commit()
        await conn.execute("ANALYZE")


async def _fill_store(store: Any, count: int) -> None:
    from simplequeue.domain import NewItem

    now = datetime.now(UTC)
    for start in range(0, count, 1000):
        items = [
            NewItem(uuid.uuid4(), "lat", '{"ready": true}', now) for _ in range(min(1000, count - start))
        ]
        await store.push_batch(items, skip_existing=False)


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(samples, 50),
        "p99": percentile(samples, 99),
        "mean": statistics.fmean(samples),
        "n": len(samples),
    }
