"""What a push inside the caller's own transaction costs: an application's transaction (one business
INSERT) with and without a push in it, 32 connections at a time, on PostgreSQL.

    python -m bench.outbox [--rounds 3] [--seconds 4]

Four loops, each on a fresh migrated database, rounds alternating their order:

- the business INSERT alone, one transaction each (the baseline);
- the same transaction with `SELECT * FROM sq_push(...)` before its COMMIT (what any language does);
- the same with simplequeue.outbox.push_async (what a Python application does: its checks, the
  schema version and limits read, a savepoint);
- the same with a bare INSERT INTO sq_items instead of a push: the floor of any push.

The machine is shared and noisy: only ratios within one run mean anything. The issue's target is a
transaction with a push at ≥ 0.6x the business INSERT alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections import defaultdict
from collections.abc import Awaitable, Callable

import asyncpg

from bench.infra import database
from bench.scenarios import CONCURRENCY, counted_rate

ORDERS = """CREATE TABLE orders (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer integer NOT NULL,
    total numeric(12, 2) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)"""
ORDER = "INSERT INTO orders (customer, total) VALUES ($1, $2) RETURNING id"
PAYLOAD = {"event": "order.created", "lines": ["a", "b"]}
LOOPS = ("business INSERT alone", "+ sq_push (SQL)", "+ outbox.push_async", "+ a bare INSERT INTO sq_items")
# The last is no push (no queue, no checks, no answer) but the floor of any: one more row in the
# queue's table, its indexes, and the trigger whose NOTIFY wakes waiting pops at commit.
BARE = (
    "INSERT INTO sq_items (id, queue, payload, created_at, visible_at)"
    " VALUES (gen_random_uuid(), 'emails', $1::json, clock_timestamp(), clock_timestamp())"
)


async def migrated(url: str) -> None:
    from simplequeue.main import store_for
    from simplequeue.settings import Settings

    store = store_for(Settings(database_url=url, sweep=False))
    await store.open()
    try:
        await store.migrate()
    finally:
        await store.close()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(ORDERS)
    finally:
        await conn.close()


def transaction(pool: asyncpg.Pool, loop: str) -> Callable[[], Awaitable[int]]:
    from simplequeue import outbox

    async def one() -> int:
        async with pool.acquire() as conn, conn.transaction():
            order = await conn.fetchval(ORDER, 7, 19.5)
            if loop == LOOPS[1]:
                await conn.fetch(
                    "SELECT * FROM sq_push('emails', $1::json)", json.dumps({**PAYLOAD, "order": order})
                )
            elif loop == LOOPS[2]:
                await outbox.push_async(conn, "emails", {**PAYLOAD, "order": order})
            elif loop == LOOPS[3]:
                await conn.execute(BARE, json.dumps({**PAYLOAD, "order": order}))
        return 1

    return one


async def measure(loop: str, seconds: float) -> float:
    """Transactions per second of one loop, on a fresh database of its own."""
    async with database("postgresql") as url:
        await migrated(url)
        pool = await asyncpg.create_pool(url, min_size=CONCURRENCY, max_size=CONCURRENCY)
        try:
            return await counted_rate(seconds, 1, transaction(pool, loop), CONCURRENCY)
        finally:
            await pool.close()


async def rates(rounds: int, seconds: float, progress: bool = True) -> dict[str, list[float]]:
    found: dict[str, list[float]] = defaultdict(list)
    for round_ in range(rounds):
        for loop in LOOPS if round_ % 2 == 0 else LOOPS[::-1]:
            found[loop].append(await measure(loop, seconds))
            if progress:
                print(
                    f"round {round_ + 1}/{rounds} {loop}: {found[loop][-1]:,.0f} transactions/s", flush=True
                )
    return found


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    found = await rates(args.rounds, args.seconds)
    base = statistics.median(found[LOOPS[0]])
    print(
        f"\nPostgreSQL, {CONCURRENCY} connections:",
        f"median (range) of {args.rounds} rounds of {args.seconds:g} s",
    )
    for loop in LOOPS:
        median = statistics.median(found[loop])
        paired = statistics.median(a / b for a, b in zip(found[loop], found[LOOPS[0]], strict=True))
        print(
            f"{loop:24} {median:8,.0f}/s ({min(found[loop]):,.0f}-{max(found[loop]):,.0f})"
            f"  vs the INSERT alone: {median / base:.2f}x (paired by round: {paired:.2f}x)"
        )


if __name__ == "__main__":
    asyncio.run(main())
