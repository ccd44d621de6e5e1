"""Flow limits, measured: a rate held across two replicas, and what max_leased costs.

1. Rate: two service replicas over one database; a queue limited to RATE items a second (burst 1);
   workers on both replicas pop (long-polls of up to 5 items) and complete, for SECONDS. Prints the
   rate they were handed items at, per second and overall, against the limit.
   Once with a bucket of 1 (every token is taken as it comes: what a pop's round trip loses
   shows), once with the default bucket (one second's worth).
2. Cost: batch pop/complete throughput (workers popping up to 50 and completing them with their
   next pop, until they took ITEMS) on a queue with max_leased set above what the workers hold,
   against the same queue without limits, in the same run: the careful pop's row lock and lease
   count, as a ratio.

    python -m bench.flow_limits [--engine postgresql|sqlite] [--seconds 10] [--rate 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.infra import database, run_for, server

RESULTS = Path(__file__).parent / "results"
ITEMS = 20_000  # per round and queue of the cost measure


async def push(http: httpx.AsyncClient, queue: str, count: int) -> None:
    for start in range(0, count, 500):
        items = [{"payload": n} for n in range(start, min(count, start + 500))]
        (await http.post("/push/batch", json={"queue": queue, "items": items})).raise_for_status()


async def rate_worker(http: httpx.AsyncClient, queue: str, handed: list[float]) -> None:
    done: list[dict[str, str]] = []
    while True:
        body = {"queue": queue, "max_items": 5, "wait_seconds": 2, "complete": done}
        answer = (await http.post("/pop", json=body)).json()
        now = time.monotonic()
        handed.extend(now for _ in answer["items"])
        done = [{"id": i["id"], "lease_token": i["lease_token"]} for i in answer["items"]]


async def held_rate(engine: str, seconds: float, rate: float, burst: int | None) -> dict[str, Any]:
    async with database(engine) as url:
        with server(url, access_log="false") as one, server(url, access_log="false") as two:
            clients = [httpx.AsyncClient(base_url=b, timeout=30) for b in (one, two)]
            try:
                queue = "rated"
                limits = {"rate_per_second": rate, "rate_burst": burst}
                (await clients[0].put(f"/queues/{queue}", json=limits)).raise_for_status()
                await push(clients[0], queue, int(rate * seconds * 3) + 100)
                handed: list[float] = []
                workers = [
                    asyncio.create_task(rate_worker(c, queue, handed)) for c in clients for _ in range(4)
                ]
                start = time.monotonic()
                await run_for(seconds, *workers)
            finally:
                for c in clients:
                    await c.aclose()
    per_second = [sum(1 for t in handed if s <= t - start < s + 1) for s in range(int(seconds))]
    # The first second holds the bucket's burst; the steady rate is the rest.
    steady = sum(per_second[1:]) / (len(per_second) - 1)
    return {
        "limit, items/s": rate,
        "burst": burst or "default (one second's worth)",
        "handed out, items/s (seconds 2 to the end)": round(steady, 2),
        "handed out / limit": round(steady / rate, 3),
        "per second": per_second,
        "replicas": 2,
        "workers": len(workers),
    }


async def batch_worker(
    http: httpx.AsyncClient, queue: str, counted: list[int], items: int, taken: asyncio.Event
) -> None:
    done: list[dict[str, str]] = []
    while True:
        body = {"queue": queue, "max_items": 50, "wait_seconds": 1, "complete": done}
        popped = (await http.post("/pop", json=body)).json()["items"]
        counted[0] += len(popped)
        if counted[0] >= items:
            taken.set()
        done = [{"id": i["id"], "lease_token": i["lease_token"]} for i in popped]


async def throughput(http: httpx.AsyncClient, queue: str, items: int, workers: int) -> float:
    """Items a second, from the first pop until the workers have taken all `items` (bounded: 120 s)."""
    counted = [0]
    taken = asyncio.Event()
    tasks = [asyncio.create_task(batch_worker(http, queue, counted, items, taken)) for _ in range(workers)]
    start = time.monotonic()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(taken.wait(), 120)
    took = time.monotonic() - start
    await run_for(0, *tasks)
    return counted[0] / took


async def limits_cost(engine: str, rounds: int) -> dict[str, Any]:
    workers = 4
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                plain: list[float] = []
                limited: list[float] = []
                for r in range(rounds):
                    for kind, figures, settings in (
                        ("plain", plain, {}),
                        ("limited", limited, {"max_leased": 1000}),
                    ):
                        queue = f"{kind}-{r}"  # a fresh queue each round: none holds another's leftovers
                        (await http.put(f"/queues/{queue}", json=settings)).raise_for_status()
                        await push(http, queue, ITEMS)
                        figures.append(await throughput(http, queue, ITEMS, workers))
                    print(
                        f"[{engine}] round {r + 1}: plain {plain[-1]:.0f}/s, max_leased {limited[-1]:.0f}/s",
                        flush=True,
                    )
    a, b = statistics.median(plain), statistics.median(limited)
    return {
        "no limits, items/s": round(a),
        "max_leased 1000, items/s": round(b),
        "with / without": round(b / a, 3),
        "workers": workers,
        "batch": 50,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    figures = {
        "engine": args.engine,
        "rate across 2 replicas, burst 1": asyncio.run(held_rate(args.engine, args.seconds, args.rate, 1)),
        "rate across 2 replicas, default burst": asyncio.run(
            held_rate(args.engine, args.seconds, args.rate, None)
        ),
        "cost of max_leased": asyncio.run(limits_cost(args.engine, args.rounds)),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    text = json.dumps(figures, indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-flow-limits-{args.engine}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
