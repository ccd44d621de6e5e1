"""The SDK's Worker against the textbook loop, draining the same N items on PostgreSQL.

    python -m bench.worker_vs_textbook [--rounds 3] [--items 20000] [--concurrency 32]
        [--baseline-tree PATH]

Per round and per drainer, a fresh PostgreSQL database (bench.infra) is filled with N items
(POST /push/batch, 1000 a request, through a server of its own), then the time is taken to drain
them:

- textbook: CONCURRENCY loops on as many asyncpg connections, each running the textbook
  claim+delete (bench.scenarios.TEXTBOOK_PG: one statement and one commit per item) until it
  finds nothing;
- worker no-op: the SDK's Worker at CONCURRENCY over HTTP to the served instance, a no-op handler;
- worker 2 ms: the same with an `asyncio.sleep(0.002)` handler.

A worker's time runs from run() starting to run() returning after stop(), which is called once
the handler has seen the N-th item: the time includes the last completions being sent. Every
drain is checked: the textbook's loops deleted N rows; the worker's handler saw N distinct items
and the queue is empty afterwards. Each drainer runs in a child process of its own (this one only
orchestrates), so none pays for another's garbage. Rounds alternate the order (ABC, CBA, ...).

--baseline-tree PATH: a checkout of another commit (e.g. `git archive main | tar -x -C PATH`); its
Worker and its server are measured too, in the same rounds (PYTHONPATH=PATH/app for both), as
"old worker ...". Figures are medians (range) of the rounds; the machine is shared and noisy, so
only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from bench.infra import PIDS, ROOT, database, server
from bench.profile import cpu_seconds, postgres_processes
from bench.scenarios import TEXTBOOK_PG, fill

QUEUE = "textbook"  # TEXTBOOK_PG's queue (bench.scenarios binds it by name)
DRAIN_TIMEOUT = 300.0
"""Seconds a drain may take before the run gives up on it (every loop here is bounded in time)."""


# --- the drains, each run in a child process (`--drain KIND`) ---------------------------------


async def drain_textbook(url: str, items: int, concurrency: int) -> dict[str, Any]:
    from simplequeue.store.postgres.store import PLANNER_SETTINGS, keep_session

    pool = await asyncpg.create_pool(
        url,
        min_size=concurrency,
        max_size=concurrency,
        server_settings=PLANNER_SETTINGS,
        reset=keep_session,
    )
    deleted = 0

    async def loop() -> None:
        nonlocal deleted
        while await pool.fetchrow(TEXTBOOK_PG, QUEUE) is not None:
            deleted += 1

    try:
        started, cpu, storing = time.perf_counter(), time.process_time(), postgres_processes()
        await asyncio.wait_for(asyncio.gather(*(loop() for _ in range(concurrency))), DRAIN_TIMEOUT)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        storing = spent(storing)  # before the pool closes: its backends' time goes with them
    finally:
        await pool.close()
    if deleted != items:
        raise RuntimeError(f"the textbook loop deleted {deleted} of {items} items")
    return {"seconds": elapsed, "handled": deleted, "cpu": cpu, "postgres": storing}


async def drain_worker(base: str, items: int, concurrency: int, sleep: float) -> dict[str, Any]:
    from simplequeue.client import AsyncClient, Item, Worker

    seen: set[str] = set()
    enough = asyncio.Event()

    async def handler(item: Item) -> None:
        if sleep:
            await asyncio.sleep(sleep)
        seen.add(item.id)
        if len(seen) >= items:
            enough.set()

    async with AsyncClient(base, timeout=30) as client:
        worker = Worker(client, QUEUE, handler, concurrency=concurrency)
        started, cpu, storing = time.perf_counter(), time.process_time(), postgres_processes()
        running = asyncio.create_task(worker.run())
        waiting = asyncio.create_task(enough.wait())
        await asyncio.wait({running, waiting}, timeout=DRAIN_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        worker.stop()
        await asyncio.wait_for(running, 60)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        storing = spent(storing)
        stats = await client.stats(QUEUE)
    if len(seen) != items:
        raise RuntimeError(f"the worker handled {len(seen)} of {items} items")
    live = {"ready": stats.ready, "leased": stats.leased, "retrying": stats.retrying, "dead": stats.dead}
    if any(live.values()) or stats.completed_in_history != items:
        raise RuntimeError(f"the queue after the drain: {live}, {stats.completed_in_history} completed")
    return {"seconds": elapsed, "handled": len(seen), "cpu": cpu, "postgres": storing}


def spent(before: dict[int, float]) -> float:
    """PostgreSQL's CPU seconds since `before` (postgres_processes()), new backends' whole time."""
    return sum(now - before.get(pid, 0.0) for pid, now in postgres_processes().items())


def child(args: argparse.Namespace) -> None:
    if args.drain == "textbook":
        result = asyncio.run(drain_textbook(args.url, args.items, args.concurrency))
    else:
        sleep = 0.002 if args.drain == "2ms" else 0.0
        result = asyncio.run(drain_worker(args.url, args.items, args.concurrency, sleep))
    print(json.dumps(result), flush=True)


# --- the orchestration -------------------------------------------------------------------------


def run_child(kind: str, url: str, items: int, concurrency: int, tree: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree / "app")
    command = [sys.executable, "-m", "bench.worker_vs_textbook", "--drain", kind, "--url", url]
    command += ["--items", str(items), "--concurrency", str(concurrency)]
    done = subprocess.run(
        command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=DRAIN_TIMEOUT + 90, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {kind} drain failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def one_drain(name: str, items: int, concurrency: int, baseline: Path | None) -> Drain:
    """A fresh database, filled with `items` through a server (the baseline tree's for an "old"
    drainer), then drained by `name`: the seconds it took, and the CPU it cost."""
    tree = baseline if name.startswith("old ") else None
    kind = {"textbook": "textbook", "no-op": "noop", "2 ms": "2ms"}[name.removeprefix("old ")]
    env = {"PYTHONPATH": str(tree / "app")} if tree is not None else {}
    async with database("postgresql") as url:
        with server(url, root=tree or ROOT, env=env) as base:
            await fill(base, QUEUE, items)
            target = url if kind == "textbook" else base
            # The server idles but for the drain while the child starts and stops.
            serving = cpu_seconds(PIDS[base])
            result = await asyncio.to_thread(run_child, kind, target, items, concurrency, tree)
            serving = cpu_seconds(PIDS[base]) - serving
    per_item = 1e6 / items
    return Drain(
        items / float(result["seconds"]),
        float(result["cpu"]) * per_item,
        0.0 if kind == "textbook" else serving * per_item,
        float(result["postgres"]) * per_item,
    )


@dataclass(frozen=True)
class Drain:
    rate: float  # items/s
    drainer: float  # CPU µs per item: the drainer's process (the loop, or the Worker's)
    server: float  # the HTTP server's (none for the textbook loop)
    postgres: float  # PostgreSQL's


def spread(values: list[float], fmt: str = ",.0f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


async def orchestrate(args: argparse.Namespace, baseline: Path | None) -> None:
    if args.items % 1000:
        raise SystemExit("--items must be a multiple of 1000 (the fill pushes batches of 1000)")
    names = ["textbook", "no-op", "2 ms"]
    if baseline is not None:
        names += ["old no-op", "old 2 ms"]
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[Drain]] = {name: [] for name in names}
    total, step = args.rounds * len(names), 0
    print(f"draining {args.items:,} items, concurrency {args.concurrency}, {args.rounds} rounds", flush=True)
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            drain = await one_drain(name, args.items, args.concurrency, baseline)
            rates[name].append(drain.rate)
            cpus[name].append(drain)
            step += 1
            print(
                f"[{step}/{total}] round {round_ + 1} {name}: {drain.rate:,.0f} items/s; CPU µs/item:"
                f" drainer {drain.drainer:.0f}, server {drain.server:.0f}, postgres {drain.postgres:.0f}",
                flush=True,
            )
    print(
        f"\ndraining {args.items:,} items at concurrency {args.concurrency}: items/s, median (range) of"
        f" {args.rounds} rounds; CPU µs per item (medians), by process"
    )
    print(f"  {'':12} {'items/s':>24} {'drainer':>8} {'server':>7} {'postgres':>8} {'all':>6}")
    for name in names:
        cells = [
            statistics.median(getattr(d, part) for d in cpus[name])
            for part in ("drainer", "server", "postgres")
        ]
        every = "".join(f" {c:>7.0f}" for c in cells)
        print(f"  {name:12} {spread(rates[name]):>24} {every} {sum(cells):>6.0f}")
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"worker no-op / textbook: {median['no-op'] / median['textbook']:.2f}x (target ≥ 1.0x)")
    print(f"worker 2 ms / no-op:     {median['2 ms'] / median['no-op']:.2f}x (target ≥ 0.7x)")
    if baseline is not None:
        print(f"old worker no-op / textbook: {median['old no-op'] / median['textbook']:.2f}x")
        print(f"old worker 2 ms / old no-op: {median['old 2 ms'] / median['old no-op']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--baseline-tree", default=None, help="another commit's checkout, measured too")
    parser.add_argument("--drain", choices=("textbook", "noop", "2ms"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drain:
        child(args)
    else:
        baseline = Path(args.baseline_tree).resolve() if args.baseline_tree else None
        asyncio.run(orchestrate(args, baseline))


if __name__ == "__main__":
    main()
