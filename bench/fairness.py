"""Fairness between tenants, measured: a noisy neighbour, and what the unkeyed path pays.

1. Noisy neighbour. One tenant has NOISY items ready (default 100,000); 50 quiet tenants push 100
   items each (one batch a tenant); WORKERS workers pop batches of 50, completing each batch with
   their next pop. Each quiet item's wait is from its push to the pop that hands it out. Two
   arrivals: `ready` (the quiet items are all pushed, then the workers start: everyone's items
   wait together) and `streaming` (the workers run while the tenants push, one after another: a
   quiet tenant's burst shares the workers with the noisy tenant, turn for turn). Each runs on an
   idle queue (no noisy backlog), behind the backlog with fairness keys, and behind it with no keys
   at all (as a queue without keys pops), each on a fresh database and server. Prints the quiet
   tenants' p50 and p95 waits, and the noisy runs' p95 over the idle run's.
2. The unkeyed path, before and after: single pushes a second (CONCURRENCY producers) and batch
   pop/complete items a second on a queue without keys, served by this checkout and by another
   (--before: a checkout of the code before fairness), alternating, medians of --rounds, as
   ratios after / before.

Every loop is bounded in count and in time (--cap seconds a run waits for its quiet items).

    python -m bench.fairness [--engine postgresql|sqlite] [--noisy 100000] [--before PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.infra import ROOT, database, run_for, server

RESULTS = Path(__file__).parent / "results"
QUIET_KEYS = 50
PER_KEY = 100
WORKERS = 4
BATCH = 50
CONCURRENCY = 16
FILL = 20_000  # items a pop throughput round drains


async def push_backlog(http: httpx.AsyncClient, queue: str, count: int, key: str | None) -> None:
    for start in range(0, count, 1000):
        items = [{"payload": {"k": "noisy"}} for _ in range(start, min(count, start + 1000))]
        if key is not None:
            items = [{**item, "fairness_key": key} for item in items]
        (await http.post("/push/batch", json={"queue": queue, "items": items})).raise_for_status()


async def push_quiet(http: httpx.AsyncClient, queue: str, keyed: bool) -> None:
    """Each quiet tenant's 100 items as one batch, stamped with the time of the push."""
    for n in range(QUIET_KEYS):
        key = f"quiet-{n}"
        items: list[dict[str, Any]] = [{"payload": {"k": key, "at": time.time()}} for _ in range(PER_KEY)]
        if keyed:
            items = [{**item, "fairness_key": key} for item in items]
        (await http.post("/push/batch", json={"queue": queue, "items": items})).raise_for_status()


async def worker(http: httpx.AsyncClient, queue: str, waits: list[float], all_in: asyncio.Event) -> None:
    done: list[dict[str, str]] = []
    while True:
        body = {"queue": queue, "max_items": BATCH, "wait_seconds": 1, "complete": done}
        popped = (await http.post("/pop", json=body)).json()["items"]
        now = time.time()
        waits.extend(now - i["payload"]["at"] for i in popped if i["payload"]["k"] != "noisy")
        if len(waits) >= QUIET_KEYS * PER_KEY:
            all_in.set()
        done = [{"id": i["id"], "lease_token": i["lease_token"]} for i in popped]


async def quiet_waits(
    engine: str, noisy: int, keyed: bool, arrival: str, cap: float, weight: float | None = None
) -> dict[str, Any]:
    """The quiet tenants' waits behind `noisy` ready items (0: an idle queue); `weight`: the noisy
    tenant's key's, set before its items are pushed (None: the default, 1)."""
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                queue = "tenants"
                if weight is not None:
                    (await http.put(f"/queues/{queue}", json={})).raise_for_status()
                    noisy_key = await http.put(f"/queues/{queue}/keys/noisy", json={"weight": weight})
                    noisy_key.raise_for_status()
                await push_backlog(http, queue, noisy, "noisy" if keyed else None)
                waits: list[float] = []
                if arrival == "ready":
                    await push_quiet(http, queue, keyed)
                all_in = asyncio.Event()
                workers = [asyncio.create_task(worker(http, queue, waits, all_in)) for _ in range(WORKERS)]
                if arrival == "streaming":
                    await push_quiet(http, queue, keyed)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_in.wait(), cap)
                await run_for(0, *workers)
    expected = QUIET_KEYS * PER_KEY
    ordered = sorted(waits)
    return {
        "quiet items popped": len(waits),
        "of": expected,
        "p50 wait, s": round(statistics.median(ordered), 3) if ordered else None,
        # None: not all were handed out within the cap, so the tail is longer than the run.
        "p95 wait, s": round(ordered[int(0.95 * (expected - 1))], 3) if len(ordered) == expected else None,
    }


@contextlib.contextmanager
def package_from(tree: Path | None) -> Iterator[None]:
    """Serve the simplequeue package of `tree` (None: this checkout's)."""
    if tree is None:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(tree / "app"), str(ROOT)])
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


async def push_rate(http: httpx.AsyncClient, seconds: float) -> float:
    counted = [0]

    async def producer() -> None:
        while True:
            (await http.post("/push", json={"queue": "plain", "payload": {"n": 1}})).raise_for_status()
            counted[0] += 1

    await run_for(seconds, *[asyncio.create_task(producer()) for _ in range(CONCURRENCY)])
    return counted[0] / seconds


async def pop_rate(http: httpx.AsyncClient, cap: float) -> float:
    """Items a second, from the first pop until the workers took FILL items (bounded by `cap`)."""
    for start in range(0, FILL, 1000):
        items = [{"payload": {"n": n}} for n in range(start, start + 1000)]
        (await http.post("/push/batch", json={"queue": "drained", "items": items})).raise_for_status()
    counted = [0]
    taken = asyncio.Event()

    async def popper() -> None:
        done: list[dict[str, str]] = []
        while True:
            body = {"queue": "drained", "max_items": BATCH, "wait_seconds": 1, "complete": done}
            popped = (await http.post("/pop", json=body)).json()["items"]
            counted[0] += len(popped)
            if counted[0] >= FILL:
                taken.set()
            done = [{"id": i["id"], "lease_token": i["lease_token"]} for i in popped]

    tasks = [asyncio.create_task(popper()) for _ in range(WORKERS)]
    start = time.monotonic()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(taken.wait(), cap)
    took = time.monotonic() - start
    await run_for(0, *tasks)
    return counted[0] / took


async def unkeyed(engine: str, tree: Path | None, seconds: float, cap: float) -> tuple[float, float]:
    with package_from(tree):
        async with database(engine) as url:
            root = tree if tree is not None and (tree / "bench").is_dir() else ROOT
            with server(url, root=root, access_log="false") as base:
                async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                    return await push_rate(http, seconds), await pop_rate(http, cap)


def unkeyed_ratios(engine: str, before: Path, rounds: int, seconds: float, cap: float) -> dict[str, Any]:
    figures: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for r in range(rounds):
        order = [("before", before), ("after", None)]
        for kind, tree in order if r % 2 == 0 else reversed(order):
            figures[kind].append(asyncio.run(unkeyed(engine, tree, seconds, cap)))
            push, pop = figures[kind][-1]
            print(f"[{engine}] round {r + 1} {kind}: push {push:.0f}/s, pop {pop:.0f}/s", flush=True)
    medians = {k: [statistics.median(v[i] for v in runs) for i in (0, 1)] for k, runs in figures.items()}
    return {
        "single pushes/s, before": round(medians["before"][0]),
        "single pushes/s, after": round(medians["after"][0]),
        "push after / before": round(medians["after"][0] / medians["before"][0], 3),
        "pop+complete items/s, before": round(medians["before"][1]),
        "pop+complete items/s, after": round(medians["after"][1]),
        "pop after / before": round(medians["after"][1] / medians["before"][1], 3),
        "rounds": rounds,
        "producers": CONCURRENCY,
        "pop workers": WORKERS,
        "batch": BATCH,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--noisy", type=int, default=100_000, help="the noisy tenant's ready items")
    parser.add_argument("--cap", type=float, default=180, help="the longest a run waits for its items, s")
    parser.add_argument("--before", type=Path, default=None, help="a checkout of the code before this")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8, help="each push-rate measure's length")
    parser.add_argument("--arrivals", default="ready,streaming", help="ready, streaming, both or none ('')")
    parser.add_argument(
        "--noisy-weight", type=float, default=None, help="also run with the noisy tenant's key at this weight"
    )
    args = parser.parse_args()
    figures: dict[str, Any] = {
        "engine": args.engine,
        "noisy tenant's ready items": args.noisy,
        "quiet tenants": f"{QUIET_KEYS} x {PER_KEY} items",
        "workers": f"{WORKERS}, batches of {BATCH}",
    }
    for arrival in filter(None, args.arrivals.split(",")):
        runs = {}
        weighted = f"fair, noisy weight {args.noisy_weight:g}"
        plan: list[tuple[str, int, bool, float | None]] = [
            ("idle", 0, True, None),
            ("fair", args.noisy, True, None),
            ("no keys", args.noisy, False, None),
        ]
        if args.noisy_weight is not None:
            plan.append((weighted, args.noisy, True, args.noisy_weight))
        for name, noisy, keyed, weight in plan:
            runs[name] = asyncio.run(quiet_waits(args.engine, noisy, keyed, arrival, args.cap, weight))
            print(f"[{args.engine}] {arrival}, {name}: {runs[name]}", flush=True)
        p95 = {name: run["p95 wait, s"] for name, run in runs.items()}
        figures[f"{arrival}: quiet waits"] = runs
        for name in [n for n, *_ in plan if n != "idle"]:
            ratio = p95[name] / p95["idle"] if p95[name] and p95["idle"] else None
            figures[f"{arrival}: quiet p95, {name} / idle"] = None if ratio is None else round(ratio, 3)
    if args.before is not None:
        figures["unkeyed path"] = unkeyed_ratios(
            args.engine, args.before, args.rounds, args.seconds, args.cap
        )
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = json.dumps(figures, indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-fairness-{args.engine}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
