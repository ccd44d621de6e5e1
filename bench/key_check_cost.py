"""What checking a per-key cap costs a PostgreSQL pop, whatever the design: the product's pop
statement (complete_and_pop, 1,000 keys, 20,000 items, 4 workers, batches of 50, as in
bench/key_limits_store.py) run as it is, and with a cap of 2 checked on each item it walks, two
ways that are not the product's:

- *one probe*: the key's leases counted (an index seek of sq_items_key_leased per item). The least
  any check can do, and not enough: two pops that each count one lease of a key may each take one
  more item of it, so a cap can be exceeded while pops run side by side;
- *lock-free count*: a check that holds the cap without locks, in each pop's own snapshot: the key's
  leases, plus its ready items ahead of this one in push order or in the order they became
  visible (two more seeks; two more indexes, made here only). Any pop taking the item would count
  every item another pop may be taking at the same moment. Within a key it hands items out in
  push order, whatever their priority, which the shipped pop does not;
- *lock-free sums*: the same count as three sums of disjoint sets instead of one union.

beside what ships (store.complete_and_pop on a queue with max_leased_per_key 2: the keys' rows
locked, then their leases counted and items read) and the store's own pop without limits. All in
one run, in alternating rounds; ratios are to the pop without a check, of the same path.

Neither experimental check is offered by the service: they are here to measure a floor, the cost of
the check itself against the cost of the pop it guards.

    python -m bench.key_check_cost [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any
from uuid import uuid4

import asyncpg
from simplequeue.domain import Completion, LeasedItem
from simplequeue.domain.limits import FlowLimits
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.postgres.store import PLANNER_SETTINGS
from simplequeue.store.protocol import Store
from simplequeue.store.queries import Query, parse_queries

from bench.infra import database
from bench.key_limits import BATCH, ITEMS, KEYS, RESULTS, WORKERS
from bench.key_limits_store import SECONDS, fill

CAP = 2

# Conditions on an item x the claim's walk reaches (a keyed item qualifies only if they hold).
LEASES = f"""
SELECT e.seq FROM sq_items AS e
WHERE e.queue = x.queue AND e.fairness_key = x.fairness_key AND e.status = 'leased'
  AND e.fairness_key IS NOT NULL AND e.seq <> x.seq AND e.id NOT IN (SELECT id FROM done)
LIMIT {CAP}
"""
ONE_PROBE = f"AND (x.fairness_key IS NULL OR (SELECT count(*) FROM ({LEASES}) AS b) < {CAP})"
LOCK_FREE = f"""AND (x.fairness_key IS NULL OR (SELECT count(*) FROM (
    ({LEASES})
    UNION
    (SELECT e.seq FROM sq_items AS e
     WHERE e.queue = x.queue AND e.fairness_key = x.fairness_key AND e.status = 'ready'
       AND e.fairness_key IS NOT NULL AND e.visible_at <= COALESCE(:now::timestamptz, now())
       AND (e.fair_rank, e.seq) < (x.fair_rank, x.seq)
     ORDER BY e.fair_rank, e.seq LIMIT {CAP})
    UNION
    (SELECT e.seq FROM sq_items AS e
     WHERE e.queue = x.queue AND e.fairness_key = x.fairness_key AND e.status = 'ready'
       AND e.fairness_key IS NOT NULL AND (e.visible_at, e.seq) < (x.visible_at, x.seq)
     ORDER BY e.visible_at, e.seq LIMIT {CAP})
) AS b) < {CAP})"""
# The same count as three sums instead of one union (no hashing per item): the key's leases, its
# ready items ahead in push order, and those visible earlier yet behind in push order (rarely any).
LOCK_FREE_SUMS = f"""AND (x.fairness_key IS NULL OR (SELECT count(*) FROM ({LEASES}) AS b)
    + (SELECT count(*) FROM (
        SELECT 1 FROM sq_items AS e
        WHERE e.queue = x.queue AND e.fairness_key = x.fairness_key AND e.status = 'ready'
          AND e.fairness_key IS NOT NULL AND e.visible_at <= COALESCE(:now::timestamptz, now())
          AND (e.fair_rank, e.seq) < (x.fair_rank, x.seq)
        ORDER BY e.fair_rank, e.seq LIMIT {CAP}) AS r)
    + (SELECT count(*) FROM (
        SELECT 1 FROM sq_items AS e
        WHERE e.queue = x.queue AND e.fairness_key = x.fairness_key AND e.status = 'ready'
          AND e.fairness_key IS NOT NULL AND (e.visible_at, e.seq) < (x.visible_at, x.seq)
          AND (e.fair_rank, e.seq) > (x.fair_rank, x.seq)
        ORDER BY e.visible_at, e.seq LIMIT {CAP}) AS v) < {CAP})"""
LOCK_FREE_INDEXES = (
    "CREATE INDEX bench_key_rank ON sq_items (queue, fairness_key, fair_rank, seq)"
    " WHERE status = 'ready' AND fairness_key IS NOT NULL",
    "CREATE INDEX bench_key_visible ON sq_items (queue, fairness_key, visible_at, seq)"
    " WHERE status = 'ready' AND fairness_key IS NOT NULL",
)

PLAIN = "statement, no check"
CHECKS = {
    PLAIN: "",
    "statement, one probe": ONE_PROBE,
    "statement, lock-free count": LOCK_FREE,
    "statement, lock-free sums": LOCK_FREE_SUMS,
}
"""The pop statement's variants, each with the check it adds to the items its walks reach."""
THROUGH_STORE = ("store, no limits", "store, max_leased_per_key 2 (shipped)")

_WALK_END = (
    "          -- include: group_head\n"
    "        ORDER BY x.rank_priority DESC, x.fair_rank, x.created_at, x.seq\n"
)


def statement(check: str) -> Query:
    """complete_and_pop, with `check` added to both of its walks (ready items, lapsed leases)."""
    text = (files("simplequeue.store.postgres") / "queries.sql").read_text(encoding="utf-8")
    if text.count(_WALK_END) != 2:
        raise SystemExit("queries.sql's claim changed shape: this bench's check has nowhere to go")
    checked = "\n".join("          " + line for line in check.strip().splitlines())
    text = text.replace(_WALK_END, _WALK_END.replace("\n        ORDER", f"\n{checked}\n        ORDER"))
    return parse_queries(text, "numbered")["complete_and_pop"]


Pop = Callable[[list[Any]], Awaitable[list[Any]]]
"""One worker's call: complete these (rows or items it popped), pop the next batch."""


async def throughput(pop: Pop, key_of: Callable[[Any], str]) -> tuple[float, int]:
    """Items a second until the workers took them all; and the most items of one key that the
    workers held at once (from their side: a cap of 2 held means at most 2)."""
    held: dict[str, int] = {}
    taken, most = [0], [0]
    start = time.monotonic()

    async def worker() -> None:
        done: list[Any] = []
        while taken[0] < ITEMS and time.monotonic() < start + SECONDS:
            for item in done:
                held[key_of(item)] -= 1
            done = await pop(done)
            for item in done:
                key = key_of(item)
                held[key] = held.get(key, 0) + 1
                most[0] = max(most[0], held[key])
            taken[0] += len(done)
            if not done:
                await asyncio.sleep(0.001)

    await asyncio.gather(*[worker() for _ in range(WORKERS)])
    return taken[0] / (time.monotonic() - start), most[0]


deadlocks = [0]


def direct(pool: asyncpg.Pool, query: Query, queue: str, checked: bool) -> Pop:
    async def pop(done: list[Any]) -> list[Any]:
        for _ in range(10):
            try:
                return await attempt(done)
            except asyncpg.DeadlockDetectedError:
                # (Rare: a lock on a row's newer version waits, SKIP LOCKED or not. The service retries
                # these too: store/postgres/errors.py.)
                deadlocks[0] += 1
        raise SystemExit("10 deadlocks in a row")

    async def attempt(done: list[Any]) -> list[Any]:
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                query.sql,
                *query.bind(
                    ids=[r["id"] for r in done],
                    lease_tokens=[r["lease_token"] for r in done],
                    queue=queue,
                    now=None,
                    max_items=BATCH,
                    lease_token=uuid4(),
                    lease_seconds=60,
                    limits_checked=checked,
                ),
            )
        return [r for r in rows if r["kind"] == "popped"]

    return pop


def through_store(store: Store, queue: str) -> Pop:
    async def pop(done: list[LeasedItem]) -> list[LeasedItem]:
        _, items = await store.complete_and_pop(
            [Completion(i.id, i.lease_token) for i in done], queue, BATCH, 60
        )
        return items

    return pop


async def measure(rounds: int) -> dict[str, Any]:
    kinds = (*CHECKS, *THROUGH_STORE)
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    most: dict[str, int] = dict.fromkeys(kinds, 0)
    async with database("postgresql") as url:
        store = store_for(Settings(database_url=url), None)
        await store.open()
        # (Without incremental sorts, the generic plan seeks the lock-free check's indexes, as intended.)
        pool = await asyncpg.create_pool(
            url,
            min_size=WORKERS,
            max_size=WORKERS,
            server_settings={**PLANNER_SETTINGS, "enable_incremental_sort": "off"},
        )
        try:
            await store.migrate()
            async with pool.acquire() as conn:
                for index in LOCK_FREE_INDEXES:
                    await conn.execute(index)
            checks = {kind: statement(check) for kind, check in CHECKS.items()}
            for r in range(rounds):
                for kind in kinds:
                    queue = f"r{r}-{kinds.index(kind)}"
                    shipped = kind == THROUGH_STORE[1]
                    await fill(store, queue, FlowLimits(max_leased_per_key=CAP) if shipped else FlowLimits())
                    async with pool.acquire() as conn:
                        await conn.execute("ANALYZE sq_items")
                    if kind in checks:
                        rate, peak = await throughput(
                            direct(pool, checks[kind], queue, False), lambda r: r["fairness_key"]
                        )
                    else:
                        rate, peak = await throughput(through_store(store, queue), lambda i: i.fairness_key)
                    rates[kind].append(rate)
                    most[kind] = max(most[kind], peak)
                print(
                    f"round {r + 1}: " + ", ".join(f"{kind} {rates[kind][-1]:.0f}/s" for kind in kinds),
                    flush=True,
                )
        finally:
            await pool.close()
            await store.close()
    median = {kind: statistics.median(rates[kind]) for kind in kinds}
    return {
        "engine": "postgresql",
        "keys": KEYS,
        "items per round and queue": ITEMS,
        "workers": WORKERS,
        "batch": BATCH,
        "cap": CAP,
        "rounds": rounds,
        "items/s (median)": {kind: round(median[kind]) for kind in kinds},
        **{f"{kind} / no check": round(median[kind] / median[PLAIN], 3) for kind in CHECKS if kind != PLAIN},
        "shipped / store without limits": round(median[THROUGH_STORE[1]] / median[THROUGH_STORE[0]], 3),
        "most items of one key held at once": most,
        "deadlocks retried": deadlocks[0],
        "each round": {kind: [round(x) for x in rates[kind]] for kind in kinds},
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    text = json.dumps(asyncio.run(measure(args.rounds)), indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-key-check-cost-postgresql.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
