"""The store's push and pop on a queue without aging, before and after priority aging, without HTTP.

    python -m bench.aging_store --before PATH [--engine sqlite|postgresql] [--rounds 7]

Each side runs in a process of its own, importing its tree's simplequeue (--before: an export of
the code before aging; the other: this checkout), on a fresh database: PUSHES single pushes (one
item a call, as the service's coalescer sends a lone push), then FILL items pushed in batches and
popped POP_BATCH at a time, each pop completing the batch before it (complete_and_pop, the SDK
worker's loop). Rounds alternate which side goes first. Besides each rate, the process's CPU per
item (SQLite runs in the process, so its CPU is the store's; PostgreSQL's server work is not in it),
which a machine shared with other work disturbs less than the rates. Medians of the rounds, and the
ratios after / before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.infra import ROOT, database

RESULTS = Path(__file__).parent / "results"
PUSHES = 2_000
FILL = 10_000
POP_BATCH = 50

# Run in the side's own process: its PYTHONPATH names its tree's package.
SIDE = """
import asyncio, json, sys, time
from datetime import UTC, datetime
from uuid import uuid4
from simplequeue.domain import Completion, NewItem
from simplequeue.main import store_for
from simplequeue.settings import Settings


def item(queue, n):
    return NewItem(id=uuid4(), queue=queue, payload_json=json.dumps({"n": n}), created_at=datetime.now(UTC),
                   priority=n % 3)


async def main(url, pushes, fill, batch):
    store = store_for(Settings(database_url=url, sweep=False))
    await store.open()
    await store.migrate()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        for n in range(pushes):
            await store.push_batch([item("single", n)], skip_existing=False)
        push = (time.perf_counter() - wall, time.process_time() - cpu)
        for start in range(0, fill, 1000):
            items = [item("drained", n) for n in range(start, start + 1000)]
            await store.push_batch(items, skip_existing=False)
        cpu, wall, taken, done = time.process_time(), time.perf_counter(), 0, []
        while taken < fill:
            _, popped = await store.complete_and_pop(done, "drained", batch, 30)
            taken += len(popped)
            done = [Completion(i.id, i.lease_token) for i in popped]
        pop = (time.perf_counter() - wall, time.process_time() - cpu)
    finally:
        await store.close()
    print(json.dumps({"push": push, "pop": pop}))


asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
"""


async def side(engine: str, tree: Path) -> dict[str, Any]:
    async with database(engine) as url:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "app"), str(tree)])}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SIDE,
            url,
            str(PUSHES),
            str(FILL),
            str(POP_BATCH),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 600)
        if process.returncode != 0:
            raise RuntimeError(err.decode())
        measured = json.loads(out.decode().strip().splitlines()[-1])
    (push_wall, push_cpu), (pop_wall, pop_cpu) = measured["push"], measured["pop"]
    return {
        "pushes/s": PUSHES / push_wall,
        "push CPU us/item": 1e6 * push_cpu / PUSHES,
        "pop+complete items/s": FILL / pop_wall,
        "pop CPU us/item": 1e6 * pop_cpu / FILL,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="sqlite", choices=["sqlite", "postgresql"])
    parser.add_argument("--before", type=Path, required=True, help="an export of the code before aging")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = [("before", args.before), ("after", ROOT)]
        for kind, tree in order if r % 2 == 0 else reversed(order):
            runs[kind].append(asyncio.run(side(args.engine, tree)))
            shown = ", ".join(f"{k} {v:.0f}" for k, v in runs[kind][-1].items())
            print(f"[{args.engine}] round {r + 1} {kind}: {shown}", flush=True)
    measures = list(runs["before"][0])
    medians = {
        kind: {m: statistics.median(run[m] for run in found) for m in measures}
        for kind, found in runs.items()
    }
    figures: dict[str, Any] = {"engine": args.engine, "rounds": args.rounds, "pushes": PUSHES, "popped": FILL}
    for m in measures:
        figures[m] = {
            "before": round(medians["before"][m], 1),
            "after": round(medians["after"][m], 1),
            "after / before": round(medians["after"][m] / medians["before"][m], 3),
            "rounds' own ratios": sorted(
                round(a[m] / b[m], 3) for a, b in zip(runs["after"], runs["before"], strict=True)
            ),
        }
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = json.dumps(figures, indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-aging-store-{args.engine}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
