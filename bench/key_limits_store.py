"""Per-key limits at the store, without HTTP: the same queues as bench/key_limits.py (1,000 active
keys, 20,000 items pushed round-robin over them), popped by 4 workers in one process through the
store itself (complete_and_pop of 50, completing each batch with the next pop), with
max_leased_per_key 2 against the same queue without limits, in the same run, in alternating rounds.

bench/key_limits.py measures what a caller sees; when the machine's cores are busy its figures
are those of the server's CPU per request. This one measures what the store's statements and locks
cost, which is what the per-key pop changes.

    python -m bench.key_limits_store [--engine postgresql|sqlite] [--rounds 3]
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

from simplequeue.domain import Completion, LeasedItem, NewItem, QueueSettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from bench.infra import database
from bench.key_limits import BATCH, ITEMS, KEYS, RESULTS, WORKERS


async def fill(store: Store, queue: str, limits: FlowLimits) -> None:
    await store.put_queue(queue, QueueSettings(limits=limits))
    now = datetime.now(UTC)
    items = [NewItem(uuid4(), queue, str(n), now, fairness_key=f"k{n % KEYS}") for n in range(ITEMS)]
    for start in range(0, ITEMS, 500):
        await store.push_batch(items[start : start + 500], skip_existing=False)


SECONDS = 120
"""How long a round may take at most: its workers stop then, whatever is left."""


async def worker(store: Store, queue: str, taken: list[int], deadline: float) -> None:
    # An empty pop is not the end: other workers' pops may hold every key there is room in for a
    # moment (and the caps may bind). Each worker goes on until the items are all taken.
    done: list[LeasedItem] = []
    while sum(taken) < ITEMS and time.monotonic() < deadline:
        finished = [Completion(item.id, item.lease_token) for item in done]
        _, done = await store.complete_and_pop(finished, queue, BATCH, 60)
        taken.append(len(done))
        if not done:
            await asyncio.sleep(0.001)


async def throughput(store: Store, queue: str) -> tuple[float, int]:
    """Items a second from the first pop until the workers took them all, and the pops that found none."""
    taken: list[int] = []
    start = time.monotonic()
    await asyncio.gather(*[worker(store, queue, taken, start + SECONDS) for _ in range(WORKERS)])
    return sum(taken) / (time.monotonic() - start), taken.count(0)


async def measure(engine: str, rounds: int) -> dict[str, Any]:
    plain: list[float] = []
    limited: list[float] = []
    empty = {"plain": 0, "limited": 0}
    async with database(engine) as url:
        store = store_for(Settings(database_url=url), None)
        await store.open()
        try:
            await store.migrate()
            for r in range(rounds):
                for kind, figures, limits in (
                    ("plain", plain, FlowLimits()),
                    ("limited", limited, FlowLimits(max_leased_per_key=2)),
                ):
                    queue = f"{kind}-{r}"
                    await fill(store, queue, limits)
                    rate, empties = await throughput(store, queue)
                    figures.append(rate)
                    empty[kind] += empties
                print(
                    f"[{engine}] round {r + 1}: plain {plain[-1]:.0f}/s, limited {limited[-1]:.0f}/s"
                    f" (pops that found nothing so far: plain {empty['plain']}, limited {empty['limited']})",
                    flush=True,
                )
        finally:
            await store.close()
    a, b = statistics.median(plain), statistics.median(limited)
    return {
        "engine": engine,
        "through": "the store, in one process (no HTTP)",
        "keys": KEYS,
        "items per round and queue": ITEMS,
        "workers": WORKERS,
        "batch": BATCH,
        "rounds": rounds,
        "no limits, items/s (median)": round(a),
        "max_leased_per_key 2, items/s (median)": round(b),
        "with / without": round(b / a, 3),
        "each round, no limits": [round(x) for x in plain],
        "pops that found nothing, no limits": empty["plain"],
        "pops that found nothing, limited": empty["limited"],
        "each round, limited": [round(x) for x in limited],
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="", help="appended to the results file's name (before, after)")
    args = parser.parse_args()
    text = json.dumps(asyncio.run(measure(args.engine, args.rounds)), indent=2)
    print(text)
    label = f"-{args.label}" if args.label else ""
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-key-limits-store-{args.engine}{label}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
