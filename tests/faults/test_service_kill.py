"""The service SIGKILLed under single-push load, restarted on the same database, several times:
every push that was answered 201 is there afterwards (with its payload), and on SQLite the file
passes `PRAGMA integrity_check` after each kill."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import VARIANTS, Engine, Reporter, ServiceFactory, sizes

WARM_ACKS = 50  # the kill comes at a random moment after this many pushes were acknowledged


@dataclass
class Cycle:
    acked: dict[str, Any] = field(default_factory=dict)  # id -> payload
    in_flight: int = 0  # requests that got no answer: under way when the service died
    problems: list[str] = field(default_factory=list)
    kill_after: float = 0.0  # after the warm-up
    warm_up: float = 0.0
    seconds: float = 0.0


async def push_load(base: str, pid: int, queue: str, cycle: int, pushers: int, kill_after: float) -> Cycle:
    result = Cycle(kill_after=kill_after)
    killed = asyncio.Event()
    started = time.monotonic()
    stop_at = started + kill_after + 60

    async def pusher(n: int) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for seq in range(1_000_000):  # bounded in count and in time
                if time.monotonic() > stop_at:
                    result.problems.append(f"pusher {n} still pushing {stop_at - started:.0f} s on")
                    return
                payload = {"cycle": cycle, "pusher": n, "seq": seq}
                try:
                    response = await http.post("/push", json={"queue": queue, "payload": payload})
                except httpx.TransportError as exc:
                    if killed.is_set():
                        result.in_flight += 1
                    else:
                        result.problems.append(f"push before the kill: {exc!r}")
                    return
                if response.status_code == 201:
                    result.acked[response.json()["id"]] = payload
                else:
                    result.problems.append(f"push -> {response.status_code} {response.text[:300]}")

    async def killer() -> None:
        # Once the load runs (a freshly started service takes a moment to open its pool), then
        # at a random moment of it.
        for _ in range(300):
            if len(result.acked) >= WARM_ACKS or result.problems:
                break
            await asyncio.sleep(0.05)
        result.warm_up = time.monotonic() - started
        await asyncio.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
        killed.set()

    await asyncio.gather(killer(), *(pusher(n) for n in range(pushers)))
    result.seconds = time.monotonic() - started
    return result


def integrity_check(path: Path) -> list[str]:
    connection = sqlite3.connect(path, timeout=30)
    try:
        return [row[0] for row in connection.execute("PRAGMA integrity_check").fetchall()]
    finally:
        connection.close()


def drain_everything(base: str, queue: str) -> dict[str, Any]:
    """Pop and complete every item of the queue: id -> payload."""
    found: dict[str, Any] = {}
    with httpx.Client(base_url=base, timeout=60) as http:
        for _ in range(100_000):
            response = http.post("/pop", json={"queue": queue, "max_items": 100, "lease_seconds": 300})
            assert response.status_code == 200, response.text
            items = response.json()["items"]
            if not items:
                break
            for item in items:
                assert item["id"] not in found, f"{item['id']} popped twice while draining"
                found[item["id"]] = item["payload"]
            refs = [{"id": i["id"], "lease_token": i["lease_token"]} for i in items]
            done = http.post("/items/complete", json={"items": refs})
            assert done.status_code == 200, done.text
            assert {r["result"] for r in done.json()["results"]} == {"completed"}, done.text
    return found


@pytest.mark.parametrize("variant", VARIANTS)
def test_service_kill_9_under_push_load_loses_no_acknowledged_push(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter
) -> None:
    size = sizes(variant)
    service = services(engine.url, name=f"kill-service-{engine.name}", start=False)
    queue = f"svc-kill-{uuid4().hex[:12]}"
    rng = random.Random(11)
    cycles: list[Cycle] = []
    checks: list[list[str]] = []
    restart_seconds: list[float] = []

    for n in range(size.service_kills):
        began = time.monotonic()
        service.start()
        restart_seconds.append(time.monotonic() - began)
        kill_after = rng.uniform(0.2, 1.5)
        cycle = asyncio.run(push_load(service.base, service.pid, queue, n, size.pushers, kill_after))
        service.kill()
        cycles.append(cycle)
        if engine.sqlite_path is not None:
            checks.append(integrity_check(engine.sqlite_path))
        report.progress(
            f"cycle {n + 1}/{size.service_kills}: killed {cycle.warm_up:.2f} + {kill_after:.2f} s in, "
            f"{len(cycle.acked):,} acknowledged, {cycle.in_flight} in flight"
        )

    service.start()
    acked = {i: p for c in cycles for i, p in c.acked.items()}
    found = drain_everything(service.base, queue)
    counts = httpx.get(f"{service.base}/queues/{queue}", timeout=30).json()
    service.stop()
    if engine.sqlite_path is not None:
        checks.append(integrity_check(engine.sqlite_path))

    missing = [i for i in acked if i not in found]
    changed = [i for i in acked if i in found and found[i] != acked[i]]
    unacknowledged = len(set(found) - set(acked))
    problems = [p for c in cycles for p in c.problems]
    report.figures(
        "service kill -9",
        engine=engine.name,
        kills=len(cycles),
        pushers=size.pushers,
        acknowledged=len(acked),
        in_flight_at_kill=sum(c.in_flight for c in cycles),
        found_after_restart=len(found),
        committed_unacknowledged=unacknowledged,
        missing=len(missing),
        integrity_checks=len(checks),
        integrity_ok=all(c == ["ok"] for c in checks),
        load_s=sum(c.seconds for c in cycles),
        max_restart_s=max(restart_seconds),
    )
    assert not problems, f"{len(problems)} unexpected answers before the kills, e.g. {problems[:5]}"
    assert not missing, f"{len(missing)} acknowledged pushes lost, e.g. {missing[:5]}"
    assert not changed, f"payloads changed: {changed[:5]}"
    assert all(c == ["ok"] for c in checks), f"integrity_check: {checks}"
    assert all(c.acked for c in cycles), "a cycle got no push acknowledged before its kill"
    assert counts["history"]["completed"] == len(found), counts
