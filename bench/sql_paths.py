"""The PostgreSQL pop and completion paths, measured as raw SQL (no HTTP, no store Python).

    python -m bench.sql_paths [--rounds 3] [--window 4] [--items 100000]
        [--baseline-queries FILE] [--variant-queries FILE] [--baseline-ddl FILE] [--variant-ddl FILE]

Two sides, a baseline and a variant, each a set of statements (the store's own queries.sql unless
a file in the same `-- name:` format overrides some of them) and, optionally, DDL run after the
migrations (then each side gets a fresh database of its own; otherwise they share one). Each side:

- 32 concurrent tasks over a pool of 10 connections with the store's PLANNER_SETTINGS (generic
  plans), on a fresh database holding `--items` ready items pushed through the store (topped up
  to that count before every window, so every window starts from the same queue size);
- (a) pop, then complete_batch of the one item popped; (b) complete_and_pop of the previous item;
  items completed per second over a bounded window, rounds alternating baseline, variant,
  baseline, variant (ABAB), medians reported;
- EXPLAIN (ANALYZE, BUFFERS) of each statement's generic plan: shared buffers touched (hit + read),
  the median of several executions;
- pg_stat_user_tables on sq_items afterwards: updates, HOT updates, and index sizes.

Every loop is bounded in count and in time. Figures are comparable only within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from simplequeue.domain import NewItem
from simplequeue.store.postgres.statements import Q
from simplequeue.store.postgres.store import PLANNER_SETTINGS, PostgresStore
from simplequeue.store.queries import Query, parse_queries

from bench.infra import database
from tests.explain import literal, plan_nodes

QUEUE = "paths"
TASKS = 32
POOL = 10
PUSH_BATCH = 1000
EXPLAIN_RUNS = 7
STATEMENTS = ("pop", "complete_batch", "complete_and_pop")


def load_overrides(path: str | None) -> dict[str, Query]:
    """The store's statements, with those named in `path` (queries.sql format) replaced."""
    queries = dict(Q)
    if path:  # its fragments included, as the store's own file (a whole earlier queries.sql, say)
        queries |= parse_queries(Path(path).read_text(encoding="utf-8"), "numbered", path)
    return queries


@dataclass
class Side:
    name: str
    queries: dict[str, Query]
    ddl: str | None
    url: str = ""
    pool: asyncpg.Pool | None = None
    rates: dict[str, list[float]] = field(default_factory=dict)
    buffers: dict[str, list[int]] = field(default_factory=dict)
    millis: dict[str, list[float]] = field(default_factory=dict)
    plans: dict[str, Any] = field(default_factory=dict)
    table: dict[str, Any] = field(default_factory=dict)


async def _no_reset(conn: asyncpg.Connection) -> None:
    """As the store: no RESET ALL round trip on release."""


async def prepare_database(url: str, ddl: str | None, items: int, dedup: bool) -> None:
    store = PostgresStore(url, pool_size=2)
    await store.open()
    try:
        await store.migrate()
        if ddl:
            async with store._conn(bounded=False) as conn:
                await conn.execute(ddl)
    finally:
        await store.close()
    await top_up(url, items, dedup)


async def top_up(url: str, items: int, dedup: bool) -> int:
    """Push through the store until `items` are ready; how many were pushed."""
    conn = await asyncpg.connect(url)
    try:
        ready = await conn.fetchval(
            "SELECT count(*) FROM sq_items WHERE queue = $1 AND status = 'ready'", QUEUE
        )
    finally:
        await conn.close()
    missing = max(0, items - int(ready))
    if not missing:
        return 0
    store = PostgresStore(url, pool_size=2)
    await store.open()
    try:
        for start in range(0, missing, PUSH_BATCH):
            now = datetime.now(UTC)
            batch = [
                NewItem(
                    uuid.uuid4(),
                    QUEUE,
                    json.dumps({"n": start + k, "body": "x" * 64}),
                    now,
                    dedup_key=uuid.uuid4().hex if dedup else None,
                )
                for k in range(min(PUSH_BATCH, missing - start))
            ]
            await store.push_batch(batch, skip_existing=not dedup)
    finally:
        await store.close()
    return missing


async def pop_then_complete(side: Side, deadline: float, limit: int, done: list[int]) -> None:
    """(a): a pop of one item, then complete_batch of it: two statements, two commits."""
    assert side.pool is not None
    pop, complete = side.queries["pop"], side.queries["complete_batch"]
    for _ in range(limit):
        if time.monotonic() >= deadline or done[0] >= limit:
            return
        token = uuid.uuid4()
        async with side.pool.acquire() as conn:
            popped = await conn.fetch(
                pop.sql,
                *pop.bind(queue=QUEUE, now=None, max_items=1, lease_token=token, lease_seconds=None),
            )
        if not popped:
            return  # the queue ran dry: the window ends early for this task
        async with side.pool.acquire() as conn:
            found = await conn.fetch(
                complete.sql, *complete.bind(ids=[popped[0]["id"]], lease_tokens=[token], now=None)
            )
        assert found, popped
        assert found[0]["completed"], found
        done[0] += 1


async def complete_and_pop(side: Side, deadline: float, limit: int, done: list[int]) -> None:
    """(b): one statement per item: complete the previous item and pop the next."""
    assert side.pool is not None
    query = side.queries["complete_and_pop"]
    held: tuple[uuid.UUID, uuid.UUID] | None = None
    try:
        for _ in range(limit + 1):
            if time.monotonic() >= deadline or done[0] >= limit:
                return
            token = uuid.uuid4()
            async with side.pool.acquire() as conn:
                found = await conn.fetch(
                    query.sql,
                    *query.bind(
                        ids=[held[0]] if held else [],
                        lease_tokens=[held[1]] if held else [],
                        queue=QUEUE,
                        now=None,
                        max_items=1,
                        lease_token=token,
                        lease_seconds=None,
                    ),
                )
            completed = [r for r in found if r["kind"] == "completion"]
            assert all(r["completed"] for r in completed), completed
            done[0] += len(completed)
            popped = [r for r in found if r["kind"] == "popped"]
            held = (popped[0]["id"], token) if popped else None
            if held is None:
                return
    finally:
        if held is not None:  # not counted: the window is over
            async with side.pool.acquire() as conn:
                complete = side.queries["complete_batch"]
                values = complete.bind(ids=[held[0]], lease_tokens=[held[1]], now=None)
                await conn.fetch(complete.sql, *values)


LOOPS = {"pop+complete": pop_then_complete, "complete_and_pop": complete_and_pop}


async def window(side: Side, loop: str, seconds: float) -> float:
    """Items completed per second by TASKS tasks within `seconds` (bounded: at most 1M items)."""
    done = [0]
    started = time.monotonic()
    deadline = started + seconds
    tasks = [asyncio.create_task(LOOPS[loop](side, deadline, 1_000_000, done)) for _ in range(TASKS)]
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=seconds + 30)
    finally:
        for task in tasks:
            task.cancel()
    return done[0] / (time.monotonic() - started)


def touched(node: dict[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def buffers_of(plan: dict[str, Any]) -> int:
    """Shared buffers the statement touched. A node's figure includes its children's, except for
    data-modifying CTEs that nothing reads: they run after the main plan, so they are added."""
    top = plan["Plan"]
    read = {n["CTE Name"] for n in plan_nodes(top) if n.get("Node Type") == "CTE Scan"}
    total = touched(top)
    for n in plan_nodes(top):
        name = n.get("Subplan Name", "")
        if name.startswith("CTE ") and name[4:] not in read:
            total += touched(n)
    return total


async def explain(side: Side, label: str) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of the generic plans: pop; complete_batch of the item popped;
    complete_and_pop of an item popped before. Each statement runs for real (EXPLAIN_RUNS times)."""
    conn = await asyncpg.connect(side.url, server_settings=PLANNER_SETTINGS)
    try:
        if label == "vacuumed":
            await conn.execute("VACUUM sq_items")
        for name in STATEMENTS:
            await conn.execute(f"PREPARE {name} AS {side.queries[name].sql}")

        async def run(name: str, **values: object) -> None:
            arguments = ", ".join(literal(v) for v in side.queries[name].bind(**values))
            [row] = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE {name}({arguments})")
            [plan] = json.loads(row[0])
            side.buffers.setdefault(f"{name}, {label}", []).append(buffers_of(plan))
            side.millis.setdefault(f"{name}, {label}", []).append(float(plan["Execution Time"]))
            side.plans[f"{name}, {label}"] = plan

        async def pop() -> tuple[uuid.UUID, uuid.UUID]:
            token = uuid.uuid4()
            await run("pop", queue=QUEUE, now=None, max_items=1, lease_token=token, lease_seconds=None)
            item = await conn.fetchval("SELECT id FROM sq_items WHERE lease_token = $1", token)
            assert item is not None
            return item, token

        for _ in range(EXPLAIN_RUNS):
            item, token = await pop()
            await run("complete_batch", ids=[item], lease_tokens=[token], now=None)
            item, token = await pop()
            await run(
                "complete_and_pop",
                ids=[item],
                lease_tokens=[token],
                queue=QUEUE,
                now=None,
                max_items=1,
                lease_token=uuid.uuid4(),
                lease_seconds=None,
            )
            await conn.execute(  # what complete_and_pop leased: let it go, uncounted
                "DELETE FROM sq_items WHERE queue = $1 AND status = 'leased'", QUEUE
            )
    finally:
        await conn.close()


async def table_figures(url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        await asyncio.sleep(1.0)  # closed backends' statistics reach the shared counters
        row = await conn.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd, n_tup_del, pg_relation_size(relid) AS heap"
            " FROM pg_stat_user_tables WHERE relname = 'sq_items'"
        )
        indexes = await conn.fetch(
            "SELECT indexrelname, pg_relation_size(indexrelid) AS size FROM pg_stat_user_indexes"
            " WHERE relname = 'sq_items' ORDER BY indexrelname"
        )
        assert row is not None
        figures: dict[str, Any] = dict(row)
        figures["hot_ratio"] = round(row["n_tup_hot_upd"] / row["n_tup_upd"], 3) if row["n_tup_upd"] else None
        figures["indexes"] = {r["indexrelname"]: r["size"] for r in indexes}
        return figures
    finally:
        await conn.close()


@asynccontextmanager
async def databases(separate: bool) -> AsyncIterator[tuple[str, str]]:
    async with database("postgresql") as first:
        if not separate:
            yield first, first
            return
        async with database("postgresql") as second:
            yield first, second


async def main(args: argparse.Namespace) -> dict[str, Any]:
    sides = [
        Side("baseline", load_overrides(args.baseline_queries), _read(args.baseline_ddl)),
        Side("variant", load_overrides(args.variant_queries), _read(args.variant_ddl)),
    ]
    separate = any(s.ddl for s in sides)
    async with databases(separate) as urls:
        for side, url in zip(sides, urls, strict=True):
            side.url = url
        for side in sides if separate else sides[:1]:
            await prepare_database(side.url, side.ddl, args.items, args.dedup_keys)
        try:
            for side in sides:
                side.pool = await asyncpg.create_pool(
                    side.url, min_size=POOL, max_size=POOL, server_settings=PLANNER_SETTINGS, reset=_no_reset
                )
            for loop in args.loops:
                for side in sides:  # warm-up: every connection prepares its statements
                    await window(side, loop, 1.0)
                for n in range(args.rounds):
                    for side in sides:  # ABAB
                        await top_up(side.url, args.items, args.dedup_keys)
                        rate = await window(side, loop, args.window)
                        side.rates.setdefault(loop, []).append(rate)
                        print(f"  {loop:17s} round {n + 1} {side.name:8s} {rate:8.0f} items/s", flush=True)
            for label in ("after the load", "vacuumed"):  # every side's first: VACUUM may be shared
                for side in sides:
                    await top_up(side.url, args.items, args.dedup_keys)
                    await explain(side, label)
        finally:
            for side in sides:
                if side.pool is not None:
                    await side.pool.close()
        for side in sides if separate else sides[:1]:
            side.table = await table_figures(side.url)
    if args.plans:
        for side in sides:
            for name, plan in side.plans.items():
                print(f"--- {side.name} {name}\n{outline(plan)}")
    return report(sides, separate)


def report(sides: list[Side], separate: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for side in sides:
        figures: dict[str, Any] = {
            f"{loop} items/s": {"median": round(statistics.median(r)), "rounds": [round(x) for x in r]}
            for loop, r in side.rates.items()
        }
        for name, counts in side.buffers.items():
            figures[f"{name}: buffers"] = statistics.median(counts)
            figures[f"{name}: ms"] = round(statistics.median(side.millis[name]), 3)
        if side.table:
            figures["sq_items"] = side.table
        result[side.name] = figures
    base, variant = (result[s.name] for s in sides)
    for key, value in base.items():
        if key.endswith("items/s"):
            ratio = variant[key]["median"] / value["median"] if value["median"] else 0.0
            result.setdefault("variant / baseline", {})[key] = round(ratio, 3)
    if not separate:
        result["note"] = "one database for both sides: the sq_items figures are theirs together"
    return result


def outline(plan: dict[str, Any]) -> str:
    """One line per plan node: what it is, rows, loops, buffers touched (its children's included)."""
    lines = []

    def walk(node: dict[str, Any], depth: int) -> None:
        what = " ".join(
            str(node[k]) for k in ("Node Type", "Subplan Name", "Index Name", "Relation Name") if k in node
        )
        lines.append(
            f"{'  ' * depth}{what}: rows {node.get('Actual Rows')} loops {node.get('Actual Loops')}"
            f" buffers {touched(node)}"
        )
        for child in node.get("Plans", []):
            walk(child, depth + 1)

    walk(plan["Plan"], 0)
    return "\n".join(lines)


def _read(path: str | None) -> str | None:
    return Path(path).read_text(encoding="utf-8") if path else None


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=4.0, help="seconds per measured window")
    parser.add_argument("--items", type=int, default=100_000, help="ready items at the start of each window")
    parser.add_argument("--loops", nargs="+", default=list(LOOPS), choices=list(LOOPS))
    parser.add_argument("--dedup-keys", action="store_true", help="every item pushed with a dedup_key")
    parser.add_argument("--baseline-queries")
    parser.add_argument("--variant-queries")
    parser.add_argument("--baseline-ddl")
    parser.add_argument("--variant-ddl")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--plans", action="store_true", help="print each side's last plans, node by node")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 50 or not 0 < args.window <= 120:
        parser.error("rounds in 1..50, window in (0, 120] seconds")
    return args


if __name__ == "__main__":
    arguments = parse()
    figures = asyncio.run(main(arguments))
    print(json.dumps(figures, indent=2, default=str))
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(figures, indent=2, default=str), encoding="utf-8")
