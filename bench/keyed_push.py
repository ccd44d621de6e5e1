"""What fairness keys cost a batch push, as the database fills with keys: 6 queues in turn, each
taking 20,000 items in batches of 500 (round-robin over 1,000 keys) that are then popped and
completed, so that each queue meets the keys of those before it. Each batch is pushed once with
keys and once without (to a twin queue), alternately, in the same run; the figure is the median
batch time, and keyed over unkeyed.

    python -m bench.keyed_push [--engine postgresql|sqlite] [--queues 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from simplequeue.domain import Completion, LeasedItem, NewItem
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from bench.infra import database
from bench.key_limits import ITEMS, KEYS, RESULTS

BATCH = 500


async def drain(store: Store, queue: str) -> None:
    done: list[LeasedItem] = []
    for _ in range(ITEMS):  # bounded: each round takes at least one item
        _, done = await store.complete_and_pop(
            [Completion(i.id, i.lease_token) for i in done], queue, 100, 60
        )
        if not done:
            return


async def measure(engine: str, queues: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    async with database(engine) as url:
        store = store_for(Settings(database_url=url), None)
        await store.open()
        try:
            await store.migrate()
            for n in range(queues):
                times: dict[str, list[float]] = {"keyed": [], "unkeyed": []}
                now = datetime.now(UTC)
                for start in range(0, ITEMS, BATCH):
                    for kind in ("keyed", "unkeyed") if start % (2 * BATCH) == 0 else ("unkeyed", "keyed"):
                        batch = [
                            NewItem(
                                uuid4(),
                                f"{kind}-{n}",
                                "{}",
                                now,
                                fairness_key=f"k{i % KEYS}" if kind == "keyed" else None,
                            )
                            for i in range(start, start + BATCH)
                        ]
                        began = time.perf_counter()
                        await store.push_batch(batch, skip_existing=False)
                        times[kind].append(time.perf_counter() - began)
                keyed, unkeyed = (statistics.median(times[k]) * 1000 for k in ("keyed", "unkeyed"))
                rows.append(
                    {
                        "queue": n + 1,
                        "keyed batch, ms (median)": round(keyed, 1),
                        "unkeyed batch, ms (median)": round(unkeyed, 1),
                        "keyed / unkeyed": round(keyed / unkeyed, 2),
                    }
                )
                print(f"[{engine}] queue {n + 1}: {rows[-1]}", flush=True)
                for kind in ("keyed", "unkeyed"):
                    await drain(store, f"{kind}-{n}")
        finally:
            await store.close()
    return {
        "engine": engine,
        "items per queue": ITEMS,
        "batch": BATCH,
        "keys": KEYS,
        "queues": rows,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--queues", type=int, default=6)
    parser.add_argument("--label", default="", help="appended to the results file's name (before, after)")
    args = parser.parse_args()
    text = json.dumps(asyncio.run(measure(args.engine, args.queues)), indent=2)
    print(text)
    label = f"-{args.label}" if args.label else ""
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-keyed-push-{args.engine}{label}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
