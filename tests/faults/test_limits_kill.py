"""A queue's max_leased held across replicas while one is SIGKILLed: workers on two `simplequeue
serve` replicas (one database) pop and complete as fast as they can with the queue at its limit;
one replica is killed and restarted, twice. Measured from the workers' side, the items held at
once (from a pop's answer to the moment its completion is sent) never exceed the limit, and every
item pushed is completed: none lost, none left.

A held item's lease outlives its work by far, so the database's room and the workers' agree: a
lease the kill cut off (its pop's answer lost with the replica) holds its room until it runs out,
and its item is handed out again then.

Two replicas over one database: PostgreSQL, and SQLite (two processes on one file, which SQLite
serialises)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import VARIANTS, Engine, Reporter, ServiceFactory, history_ids, sizes

MAX_LEASED = 6
WORKERS_PER_REPLICA = 4
ITEMS = 600
LEASE_SECONDS = 4
# Long enough that the workers' holds overlap even on a loaded machine, where a pop's round trip
# can take longer than the work and the limit would otherwise be reached only by luck.
WORK_SECONDS = (0.03, 0.08)


class Held:
    """Items the workers hold now, and the most they ever held at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self.over: list[int] = []

    def take(self, count: int) -> None:
        self.now += count
        self.most = max(self.most, self.now)
        if self.now > MAX_LEASED:
            self.over.append(self.now)

    def give_back(self, count: int) -> None:
        self.now -= count


class Completed:
    """The ids completed, and an event for each one added."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.added = asyncio.Event()

    def add(self, item_id: str) -> None:
        self.ids.add(item_id)
        self.added.set()

    async def reach(self, count: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while len(self.ids) < count and time.monotonic() < deadline:
            self.added.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.added.wait(), 0.5)


async def worker(bases: list[str], queue: str, held: Held, completed: Completed, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        while not stop.is_set():
            base = random.choice(bases)
            try:
                answer = await http.post(
                    f"{base}/pop",
                    json={"queue": queue, "max_items": 3, "wait_seconds": 1, "lease_seconds": LEASE_SECONDS},
                )
            except httpx.TransportError:
                await asyncio.sleep(0.05)  # that replica is down: the other one is there
                continue
            if answer.status_code != 200:
                await asyncio.sleep(0.05)
                continue
            items = answer.json()["items"]
            held.take(len(items))
            await asyncio.sleep(random.uniform(*WORK_SECONDS))
            # Given back as the completions are sent: from here the database may free the room.
            held.give_back(len(items))
            for item in items:
                for _ in range(50):  # through whichever replica answers (bounded)
                    try:
                        done = await http.delete(
                            f"{random.choice(bases)}/items/{item['id']}",
                            params={"lease_token": item["lease_token"]},
                        )
                    except httpx.TransportError:
                        await asyncio.sleep(0.05)
                        continue
                    if done.status_code in (204, 404, 409):
                        break
                    await asyncio.sleep(0.05)
                completed.add(item["id"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_max_leased_holds_while_a_replica_is_killed(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter
) -> None:
    kills = min(sizes(variant).service_kills, 2)
    one = services(engine.url, name=f"limits-a-{engine.name}")
    two = services(engine.url, name=f"limits-b-{engine.name}")
    queue = f"limited-{uuid4().hex[:12]}"
    with httpx.Client(base_url=one.base, timeout=30) as http:
        assert http.put(f"/queues/{queue}", json={"max_leased": MAX_LEASED}).status_code == 201
        for start in range(0, ITEMS, 200):
            batch = [{"payload": n} for n in range(start, start + 200)]
            assert http.post("/push/batch", json={"queue": queue, "items": batch}).status_code == 201

    held = Held()

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
            report.progress(f"kill {n + 1}/{kills}: {len(completed.ids)} completed, {held.most} held at most")
            await asyncio.sleep(0.5)
            await asyncio.to_thread(two.start)
        await completed.reach(ITEMS, LEASE_SECONDS + 90)
        stop.set()
        await asyncio.gather(*workers)
        return completed

    asyncio.run(asyncio.wait_for(run(), 300))
    finished = set(history_ids(one.base, queue, "completed"))
    stats = httpx.get(f"{one.base}/queues/{queue}", timeout=10).json()
    report.figures(
        "max_leased under kill -9",
        engine=engine.name,
        kills=kills,
        limit=MAX_LEASED,
        most_held=held.most,
        items=ITEMS,
        completed=len(finished),
        left=stats["ready"] + stats["leased"] + stats["delayed"] + stats["retrying"] + stats["dead"],
    )
    assert not held.over, f"the workers held more than {MAX_LEASED} at once: {held.over[:5]}"
    assert held.most == MAX_LEASED, "the run never reached the limit: it tested nothing"
    assert len(finished) == ITEMS, f"{ITEMS - len(finished)} items were not completed"
