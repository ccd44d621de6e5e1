"""Per-key limits held across replicas while one is SIGKILLed: a queue with max_leased_per_key, one
of its keys with a cap of its own (and the most items), ten keys of items; workers on two
`simplequeue serve` replicas (one database) pop in batches and complete as fast as they can, the
keys at their caps; one replica is killed and restarted, twice. Measured from the workers' side,
the items of a key held at once (from a pop's answer to the moment its completion is sent) never
exceed that key's cap, and every item pushed is completed exactly once: none lost, none left,
none finished twice.

As in test_limits_kill.py, a held item's lease outlives its work by far, so the database's room and
the workers' agree: a lease the kill cut off (its pop's answer lost with the replica) holds its
key's room until it runs out, and its item is handed out again then.

Two replicas over one database: PostgreSQL, and SQLite (two processes on one file)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import VARIANTS, Engine, Reporter, ServiceFactory, history_ids, sizes
from tests.faults.test_limits_kill import Completed

PER_KEY = 2
OWN_KEY, OWN_CAP = "key-0", 4
KEYS = [f"key-{n}" for n in range(10)]
# The key of its own cap has three times the others' items: once theirs are done, it alone is left,
# and every pop would take its items only but for its cap.
COUNTS = {key: 240 if key == OWN_KEY else 80 for key in KEYS}
ITEMS = sum(COUNTS.values())
WORKERS_PER_REPLICA = 4
LEASE_SECONDS = 4
# Long enough that the workers would hold more of a key than its cap (8 workers asking for 4 each,
# 22 places across the caps) if the caps did not hold; far shorter than a lease.
WORK_SECONDS = (0.02, 0.06)


def cap(key: str) -> int:
    return OWN_CAP if key == OWN_KEY else PER_KEY


class HeldByKey:
    """Items of each key the workers hold now, the most each ever held at once, and any excess."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.over: list[tuple[str, int]] = []

    def take(self, keys: list[str]) -> None:
        for key in keys:
            self.now[key] += 1
            self.most[key] = max(self.most[key], self.now[key])
            if self.now[key] > cap(key):
                self.over.append((key, self.now[key]))

    def give_back(self, keys: list[str]) -> None:
        for key in keys:
            self.now[key] -= 1


async def complete(http: httpx.AsyncClient, bases: list[str], item: dict[str, str]) -> None:
    for _ in range(50):  # through whichever replica answers (bounded)
        try:
            done = await http.delete(
                f"{random.choice(bases)}/items/{item['id']}", params={"lease_token": item["lease_token"]}
            )
        except httpx.TransportError:
            await asyncio.sleep(0.05)
            continue
        if done.status_code in (204, 404, 409):
            return
        await asyncio.sleep(0.05)


async def worker(
    bases: list[str], queue: str, held: HeldByKey, completed: Completed, stop: asyncio.Event
) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        while not stop.is_set():
            try:
                answer = await http.post(
                    f"{random.choice(bases)}/pop",
                    json={"queue": queue, "max_items": 4, "wait_seconds": 1, "lease_seconds": LEASE_SECONDS},
                )
            except httpx.TransportError:
                await asyncio.sleep(0.05)  # that replica is down: the other one is there
                continue
            if answer.status_code != 200:
                await asyncio.sleep(0.05)
                continue
            items = answer.json()["items"]
            keys = [item["fairness_key"] for item in items]
            held.take(keys)
            await asyncio.sleep(random.uniform(*WORK_SECONDS))
            # Given back as the completions are sent: from here the database may free the room.
            held.give_back(keys)
            for item in items:
                await complete(http, bases, item)
                completed.add(item["id"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_per_key_limits_hold_while_a_replica_is_killed(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter
) -> None:
    kills = min(sizes(variant).service_kills, 2)
    one = services(engine.url, name=f"keys-a-{engine.name}")
    two = services(engine.url, name=f"keys-b-{engine.name}")
    queue = f"keyed-{uuid4().hex[:12]}"
    with httpx.Client(base_url=one.base, timeout=30) as http:
        assert http.put(f"/queues/{queue}", json={"max_leased_per_key": PER_KEY}).status_code == 201
        assert http.put(f"/queues/{queue}/keys/{OWN_KEY}", json={"max_leased": OWN_CAP}).status_code == 200
        # Interleaved keys, 200 a call.
        pushed = [
            {"payload": f"{key}/{n}", "fairness_key": key}
            for n in range(max(COUNTS.values()))
            for key in KEYS
            if n < COUNTS[key]
        ]
        for start in range(0, ITEMS, 200):
            batch = pushed[start : start + 200]
            assert http.post("/push/batch", json={"queue": queue, "items": batch}).status_code == 201

    held = HeldByKey()

    async def run() -> Completed:
        completed = Completed()
        stop = asyncio.Event()
        bases = [one.base, two.base]
        workers = [
            asyncio.create_task(worker(bases, queue, held, completed, stop))
            for _ in range(WORKERS_PER_REPLICA * 2)
        ]
        for n in range(kills):
            await completed.reach(ITEMS * (n + 1) // (kills + 2), 60)
            await asyncio.to_thread(two.kill)
            done = len(completed.ids)
            report.progress(f"kill {n + 1}/{kills}: {done} completed, most held {dict(held.most)}")
            await asyncio.sleep(0.5)
            await asyncio.to_thread(two.start)
        await completed.reach(ITEMS, LEASE_SECONDS + 90)
        stop.set()
        await asyncio.gather(*workers)
        return completed

    asyncio.run(asyncio.wait_for(run(), 300))
    finished = history_ids(one.base, queue, "completed")
    stats = httpx.get(f"{one.base}/queues/{queue}", timeout=10).json()
    report.figures(
        "per-key limits under kill -9",
        engine=engine.name,
        kills=kills,
        per_key=PER_KEY,
        own_cap=OWN_CAP,
        most_held_own=held.most[OWN_KEY],
        most_held_others=max(held.most[key] for key in KEYS if key != OWN_KEY),
        items=ITEMS,
        completed=len(set(finished)),
        left=stats["ready"] + stats["leased"] + stats["delayed"] + stats["retrying"] + stats["dead"],
    )
    assert not held.over, f"a key was held above its cap: {held.over[:5]}"
    assert held.most[OWN_KEY] == OWN_CAP, "the key of its own cap never reached it: it tested nothing"
    assert max(held.most[key] for key in KEYS if key != OWN_KEY) == PER_KEY, "no key reached the default cap"
    assert len(finished) == len(set(finished)), "an item was completed twice"
    assert len(set(finished)) == ITEMS, f"{ITEMS - len(set(finished))} items were not completed"
