"""Topics: what a publish costs, against pushing the same items.

    python -m bench.topics [--engine postgresql] [--rounds 3] [--publishes 300] [--seconds 5]

One server per engine over a fresh database (bench.infra), with two topics:

- fan-out: a topic with 100 queue subscriptions (SNS notifications). Latency of one publish, as
  the caller sees it (POST /topics/{name}/publish to its answer, every queue holding the item),
  one at a time, `--publishes` of them per round: median and p95.
- ten: a topic with 10 raw subscriptions. Throughput of publishes (8 concurrent callers) against
  the baseline: the same 10 items (one per queue) pushed in one POST /push/batch... which our
  batch takes for one queue only, so the baseline is 10 items to one queue in one batch, the
  same rows written in one transaction. Windows alternate publish, batch, publish, batch;
  medians of the rounds, and the ratio.

Every loop is bounded in count and in time. Figures compare only within one run (the machine is
shared and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from bench.infra import database, server
from bench.scenarios import post, session

FANOUT = 100
TEN = 10
CALLERS = 8
RESULTS = Path(__file__).parent / "results"


async def _put(http: aiohttp.ClientSession, path: str, body: Any) -> None:
    async with http.put(path, json=body) as response:
        if response.status not in (200, 201):
            raise RuntimeError(f"PUT {path}: {response.status} {await response.text()}")


async def setup(http: aiohttp.ClientSession) -> None:
    await _put(http, "/topics/fanout", {})
    await _put(http, "/topics/ten", {})
    for n in range(FANOUT):
        await _put(http, f"/queues/fan-{n}", {})
        await post(http, "/topics/fanout/subscriptions", {"endpoint": f"fan-{n}"})
    for n in range(TEN):
        await _put(http, f"/queues/ten-{n}", {})
        await post(
            http,
            "/topics/ten/subscriptions",
            {"endpoint": f"ten-{n}", "attributes": {"RawMessageDelivery": "true"}},
        )
    await _put(http, "/queues/batch", {})


async def fanout_latency(http: aiohttp.ClientSession, publishes: int, deadline: float) -> list[float]:
    samples: list[float] = []
    for n in range(publishes):
        if time.monotonic() > deadline:
            break
        started = time.perf_counter()
        answer = await post(http, "/topics/fanout/publish", {"message": {"n": n}})
        samples.append((time.perf_counter() - started) * 1000)
        if len(answer["delivered_to"]) != FANOUT:
            raise RuntimeError(f"a publish reached {len(answer['delivered_to'])} queues, not {FANOUT}")
    return samples


async def rate(work: Any, seconds: float) -> float:
    """Items written per second by CALLERS loops of `work` (each call writes TEN items)."""
    done = 0
    stop = time.monotonic() + seconds

    async def loop() -> None:
        nonlocal done
        while time.monotonic() < stop:
            await work()
            done += TEN

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(CALLERS)))
    return done / (time.perf_counter() - started)


async def run(engine: str, rounds: int, publishes: int, seconds: float) -> dict[str, Any]:
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with session(base) as http:
                await setup(http)

                async def publish() -> None:
                    await post(http, "/topics/ten/publish", {"message": {"n": 1}})

                async def batch() -> None:
                    await post(
                        http, "/push/batch", {"queue": "batch", "items": [{"payload": {"n": 1}}] * TEN}
                    )

                latencies: list[float] = []
                published: list[float] = []
                batched: list[float] = []
                await fanout_latency(http, 20, time.monotonic() + 30)  # warm: the signing key, plans
                for r in range(rounds):
                    latencies += await fanout_latency(http, publishes, time.monotonic() + 60)
                    published.append(await rate(publish, seconds))
                    batched.append(await rate(batch, seconds))
                    print(
                        f"[{engine}] round {r + 1}: publish to 10 {published[-1]:.0f} items/s, "
                        f"batch of 10 {batched[-1]:.0f} items/s",
                        flush=True,
                    )
    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[int(len(latencies) * 0.95) - 1]
    ours, base_rate = statistics.median(published), statistics.median(batched)
    return {
        "engine": engine,
        "publish to 100 subscriptions, ms": {
            "median": round(p50, 2),
            "p95": round(p95, 2),
            "n": len(latencies),
        },
        "publish to 10 subscriptions, items/s": round(ours),
        "push batch of 10, items/s": round(base_rate),
        "publish / batch": round(ours / base_rate, 2),
        "targets": {"median ms": 10, "publish / batch": 0.5},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--publishes", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    figures = asyncio.run(run(args.engine, args.rounds, args.publishes, args.seconds))
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = json.dumps(figures, indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-topics-{args.engine}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
