"""Priority aging, measured: what a queue without aging pays for it, and what aging costs a queue.

1. The plain path, before and after: single pushes a second (CONCURRENCY producers) and batch
   pop/complete items a second on a queue without aging, served by this checkout and by another
   (--before: an export of the code before priority aging), alternating, medians of --rounds, as
   ratios after / before (bench.fairness's measures).
2. Aging on: the same measures on this checkout, with the queues' priority_aging_seconds set
   against unset, alternating, as ratios aged / plain.

    python -m bench.aging --before PATH [--engine postgresql|sqlite] [--rounds 3] [--seconds 8]

The machine is shared and noisy: only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.fairness import BATCH, CONCURRENCY, RESULTS, WORKERS, pop_rate, push_rate, unkeyed_ratios
from bench.infra import database, server

AGING_SECONDS = 60
QUEUES = ("plain", "drained")  # the queues bench.fairness's measures push to and pop from


async def measured(engine: str, aged: bool, seconds: float, cap: float) -> tuple[float, float]:
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                for queue in QUEUES:
                    body = {"priority_aging_seconds": AGING_SECONDS if aged else None}
                    (await http.put(f"/queues/{queue}", json=body)).raise_for_status()
                return await push_rate(http, seconds), await pop_rate(http, cap)


def aged_ratios(engine: str, rounds: int, seconds: float, cap: float) -> dict[str, Any]:
    figures: dict[str, list[tuple[float, float]]] = {"plain": [], "aged": []}
    for r in range(rounds):
        order = [("plain", False), ("aged", True)]
        for kind, aged in order if r % 2 == 0 else reversed(order):
            figures[kind].append(asyncio.run(measured(engine, aged, seconds, cap)))
            push, pop = figures[kind][-1]
            print(f"[{engine}] round {r + 1} {kind}: push {push:.0f}/s, pop {pop:.0f}/s", flush=True)
    medians = {k: [statistics.median(v[i] for v in runs) for i in (0, 1)] for k, runs in figures.items()}
    return {
        "single pushes/s, plain": round(medians["plain"][0]),
        "single pushes/s, aged": round(medians["aged"][0]),
        "push aged / plain": round(medians["aged"][0] / medians["plain"][0], 3),
        "pop+complete items/s, plain": round(medians["plain"][1]),
        "pop+complete items/s, aged": round(medians["aged"][1]),
        "pop aged / plain": round(medians["aged"][1] / medians["plain"][1], 3),
        "priority_aging_seconds": AGING_SECONDS,
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
    parser.add_argument("--before", type=Path, required=True, help="an export of the code before aging")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8, help="each push-rate measure's length")
    parser.add_argument("--cap", type=float, default=180, help="the longest a pop-rate measure runs, s")
    args = parser.parse_args()
    figures: dict[str, Any] = {"engine": args.engine}
    figures["queue without aging, before / after"] = unkeyed_ratios(
        args.engine, args.before, args.rounds, args.seconds, args.cap
    )
    figures["aging on, this checkout"] = aged_ratios(args.engine, args.rounds, args.seconds, args.cap)
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = json.dumps(figures, indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-aging-{args.engine}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
