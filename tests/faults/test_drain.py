"""N items pushed in batches, drained by 32 concurrent workers through one real service process:
0 lost, 0 leased to two workers at once, 0 answers 5xx."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import (
    VARIANTS,
    Engine,
    Pop,
    Reporter,
    ServiceFactory,
    early_redeliveries,
    parse_time,
    sizes,
)

LEASE_SECONDS = 300  # far above any processing time here: a second lease of an item is a double lease
BATCH = 500


@dataclass
class DrainRun:
    pushed: list[str] = field(default_factory=list)
    pops: list[Pop] = field(default_factory=list)
    completed: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    empty_pops: int = 0
    push_seconds: float = 0.0
    drain_seconds: float = 0.0
    timed_out: bool = False

    def saw(self, op: str, response: httpx.Response) -> None:
        self.statuses[f"{op} {response.status_code}"] += 1
        if response.status_code >= 500:
            self.server_errors.append(f"{op} -> {response.status_code} {response.text[:300]}")


async def drain(base: str, queue: str, total: int, workers: int, deadline_seconds: float) -> DrainRun:
    run = DrainRun()
    limits = httpx.Limits(max_connections=workers + 8, max_keepalive_connections=workers + 8)
    started = time.monotonic()
    deadline = started + deadline_seconds
    finished = asyncio.Event()

    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
        created = await http.put(
            f"/queues/{queue}", json={"max_attempts": 10, "lease_seconds": LEASE_SECONDS}
        )
        assert created.status_code in (200, 201), created.text

        async def push_all() -> None:
            for start in range(0, total, BATCH):
                items = [{"payload": {"n": n}} for n in range(start, min(total, start + BATCH))]
                response = await http.post("/push/batch", json={"queue": queue, "items": items})
                run.saw("push/batch", response)
                assert response.status_code == 201, response.text
                run.pushed.extend(response.json()["ids"])
            run.push_seconds = time.monotonic() - started

        async def worker(name: str, rng: random.Random) -> None:
            for _ in range(total * 4 + 1000):  # bounded in count as well as in time
                if finished.is_set() or time.monotonic() > deadline:
                    return
                body = {"queue": queue, "max_items": rng.randint(1, 10), "wait_seconds": 1}
                response = await http.post("/pop", json={**body, "lease_seconds": LEASE_SECONDS})
                run.saw("pop", response)
                if response.status_code != 200:
                    await asyncio.sleep(0.1)
                    continue
                items = response.json()["items"]
                if not items:
                    run.empty_pops += 1
                    continue
                for it in items:
                    run.pops.append(
                        Pop(it["id"], it["lease_token"], parse_time(it["lease_expires_at"]), name)
                    )
                if len(items) == 1:
                    [it] = items
                    done = await http.delete(f"/items/{it['id']}", params={"lease_token": it["lease_token"]})
                    run.saw("complete", done)
                    outcomes = {it["id"]: "completed" if done.status_code == 204 else str(done.status_code)}
                else:
                    refs = [{"id": it["id"], "lease_token": it["lease_token"]} for it in items]
                    done = await http.post("/items/complete", json={"items": refs})
                    run.saw("complete/batch", done)
                    if done.status_code != 200:
                        outcomes = {it["id"]: str(done.status_code) for it in items}
                    else:
                        outcomes = {r["id"]: r["result"] for r in done.json()["results"]}
                for item_id, outcome in outcomes.items():
                    if outcome == "completed":
                        run.completed[item_id] += 1
                    else:
                        run.refused.append(f"{item_id}: {outcome}")
                if sum(run.completed.values()) >= total:
                    finished.set()

        pushing = asyncio.create_task(push_all())
        rngs = [random.Random(n) for n in range(workers)]
        drain_started = time.monotonic()
        tasks = [asyncio.create_task(worker(f"w{n}", rngs[n])) for n in range(workers)]
        try:
            await asyncio.wait_for(asyncio.gather(pushing, *tasks), timeout=deadline_seconds + 90)
        except TimeoutError:
            run.timed_out = True
            for task in [pushing, *tasks]:
                task.cancel()
            await asyncio.gather(pushing, *tasks, return_exceptions=True)
        run.drain_seconds = time.monotonic() - drain_started
        run.timed_out = run.timed_out or not finished.is_set()
    return run


@pytest.mark.parametrize("variant", VARIANTS)
def test_drain_loses_nothing_and_leases_each_item_once(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter
) -> None:
    size = sizes(variant)
    service = services(engine.url, name=f"drain-{engine.name}")
    queue = f"drain-{uuid4().hex[:12]}"
    deadline = 60 + size.items * 0.02
    report.progress(
        f"drain: {size.items:,} items, {size.workers} workers, {engine.name}, deadline {deadline:.0f} s"
    )
    run = asyncio.run(drain(service.base, queue, size.items, size.workers, deadline))

    lost = set(run.pushed) - set(run.completed)
    twice = [i for i, n in run.completed.items() if n > 1]
    double_leased = early_redeliveries(run.pops, LEASE_SECONDS)
    counts = httpx.get(f"{service.base}/queues/{queue}", timeout=30).json()
    report.figures(
        "drain",
        engine=engine.name,
        items=len(run.pushed),
        workers=size.workers,
        pop_requests=run.statuses["pop 200"],
        items_leased=len(run.pops),
        empty_pops=run.empty_pops,
        completed=sum(run.completed.values()),
        lost=len(lost),
        double_leased=len(double_leased),
        refused=len(run.refused),
        responses_5xx=len(run.server_errors),
        push_s=run.push_seconds,
        drain_s=run.drain_seconds,
        items_per_s=len(run.pushed) / run.drain_seconds if run.drain_seconds else 0.0,
    )
    assert not run.server_errors, f"{len(run.server_errors)} answers 5xx, e.g. {run.server_errors[:5]}"
    assert len(run.pushed) == size.items
    assert not double_leased, f"{len(double_leased)} leases overlapped, e.g. {double_leased[:3]}"
    assert not twice, f"{len(twice)} items completed twice, e.g. {twice[:5]}"
    assert not lost, (
        f"{len(lost)} pushed items never completed (timed out: {run.timed_out}), e.g. {sorted(lost)[:5]}"
    )
    assert not run.refused, f"completions refused: {run.refused[:5]}"
    assert not run.timed_out
    assert {k: counts[k] for k in ("ready", "leased", "delayed", "retrying", "dead")} == dict.fromkeys(
        ("ready", "leased", "delayed", "retrying", "dead"), 0
    ), counts
    assert counts["history"]["completed"] == size.items, counts
