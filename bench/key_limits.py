"""Per-key limits, measured: batch pop/complete throughput of a queue of 1,000 active fairness keys
with max_leased_per_key on, against the same queue without limits, in the same run; and, from the
workers' side, the most items of one key they held at once (never above the limit).

Workers pop up to 50 and complete them with their next pop, until they took ITEMS (bounded: 120 s
a queue). A worker's items of a key count as held from the answer that handed them out to the
answer that confirmed their completion.

    python -m bench.key_limits [--engine postgresql|sqlite] [--rounds 3] [--limit 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.infra import database, run_for, server

RESULTS = Path(__file__).parent / "results"
ITEMS = 20_000  # per round and queue
KEYS = 1_000
WORKERS = 4
BATCH = 50


async def push(http: httpx.AsyncClient, queue: str, count: int) -> None:
    for start in range(0, count, 500):
        numbers = range(start, min(count, start + 500))
        items = [{"payload": n, "fairness_key": f"k{n % KEYS}"} for n in numbers]
        (await http.post("/push/batch", json={"queue": queue, "items": items})).raise_for_status()


class Held:
    """Items of each key the workers hold, and the most of one key they held at once."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()
        self.most = 0
        self.taken = 0


async def worker(http: httpx.AsyncClient, queue: str, held: Held, items: int, taken: asyncio.Event) -> None:
    done: list[dict[str, Any]] = []
    while True:
        body = {
            "queue": queue,
            "max_items": BATCH,
            "wait_seconds": 1,
            "complete": [{"id": i["id"], "lease_token": i["lease_token"]} for i in done],
        }
        popped = (await http.post("/pop", json=body)).json()["items"]
        held.now.subtract(i["fairness_key"] for i in done)
        held.now.update(i["fairness_key"] for i in popped)
        held.most = max([held.most, *(held.now[i["fairness_key"]] for i in popped)])
        held.taken += len(popped)
        if held.taken >= items:
            taken.set()
        done = popped


async def throughput(http: httpx.AsyncClient, queue: str) -> tuple[float, int]:
    """Items a second from the first pop until the workers took ITEMS, and the most of a key held."""
    held = Held()
    taken = asyncio.Event()
    tasks = [asyncio.create_task(worker(http, queue, held, ITEMS, taken)) for _ in range(WORKERS)]
    start = time.monotonic()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(taken.wait(), 120)
    took = time.monotonic() - start
    await run_for(0, *tasks)
    return held.taken / took, held.most


async def measure(engine: str, rounds: int, limit: int) -> dict[str, Any]:
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                plain: list[float] = []
                limited: list[float] = []
                most = {"plain": 0, "limited": 0}
                for r in range(rounds):
                    for kind, figures, settings in (
                        ("plain", plain, {}),
                        ("limited", limited, {"max_leased_per_key": limit}),
                    ):
                        queue = f"{kind}-{r}"  # a fresh queue each round: none holds another's leftovers
                        (await http.put(f"/queues/{queue}", json=settings)).raise_for_status()
                        await push(http, queue, ITEMS)
                        rate, held = await throughput(http, queue)
                        figures.append(rate)
                        most[kind] = max(most[kind], held)
                    print(
                        f"[{engine}] round {r + 1}: plain {plain[-1]:.0f}/s, "
                        f"max_leased_per_key {limit} {limited[-1]:.0f}/s",
                        flush=True,
                    )
    a, b = statistics.median(plain), statistics.median(limited)
    return {
        "engine": engine,
        "keys": KEYS,
        "items per round and queue": ITEMS,
        "workers": WORKERS,
        "batch": BATCH,
        "rounds": rounds,
        "no limits, items/s (median)": round(a),
        f"max_leased_per_key {limit}, items/s (median)": round(b),
        "with / without": round(b / a, 3),
        "each round, no limits": [round(x) for x in plain],
        "each round, limited": [round(x) for x in limited],
        "most of one key held at once, limited": most["limited"],
        "most of one key held at once, no limits": most["plain"],
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=2)
    args = parser.parse_args()
    text = json.dumps(asyncio.run(measure(args.engine, args.rounds, args.limit)), indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-key-limits-{args.engine}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
