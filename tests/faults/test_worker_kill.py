"""Worker processes SIGKILLed while they hold leases: every item is still completed exactly once,
and no item a killed worker held is handed out again before that lease's lease_expires_at."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import (
    VARIANTS,
    WORKER_SCRIPT,
    Engine,
    Pop,
    Reporter,
    ServiceFactory,
    early_redeliveries,
    history_ids,
    parse_time,
    sizes,
)

LEASE_SECONDS = 3
WORK_SECONDS = (0.01, 0.04)  # per item; at most 5 items a pop: far below the lease
MAX_ITEMS = 5


@dataclass
class WorkerLog:
    name: str
    pops: list[Pop] = field(default_factory=list)
    done: list[tuple[str, str, int]] = field(default_factory=list)  # (id, token, status)
    completing: set[tuple[str, str]] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)  # 5xx, transport errors, unexpected statuses

    def held(self) -> list[Pop]:
        finished = {(i, t) for i, t, _ in self.done}
        return [p for p in self.pops if (p.id, p.token) not in finished]


def read_log(name: str, path: Path) -> WorkerLog:
    log = WorkerLog(name)
    if not path.exists():
        return log
    for line in path.read_text().splitlines():
        try:
            event: dict[str, Any] = json.loads(line)
        except ValueError:
            continue  # cannot happen with one write(2) a line; tolerated anyway
        kind = event["e"]
        if kind == "pop":
            log.pops.append(Pop(event["id"], event["token"], parse_time(event["exp"]), name))
        elif kind == "completing":
            log.completing.add((event["id"], event["token"]))
        elif kind == "done":
            log.done.append((event["id"], event["token"], event["status"]))
            if event["status"] not in (204, 409):
                log.problems.append(f"complete {event['id']} -> {event['status']} {event['text']}")
        elif kind in ("http", "transport"):
            log.problems.append(json.dumps(event))
    return log


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    killed: bool = False


@dataclass
class Kill:
    worker: str
    held: list[Pop]
    completing: set[str]  # of those, the ones with a DELETE under way (it may or may not have committed)


@pytest.mark.parametrize("variant", VARIANTS)
def test_killed_workers_leases_are_not_redelivered_early_and_every_item_completes_once(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter, tmp_path: Path
) -> None:
    size = sizes(variant)
    total = size.kill_items
    service = services(engine.url, name=f"kill-workers-{engine.name}")
    queue = f"kills-{uuid4().hex[:12]}"
    stop_path = tmp_path / "workers.stop"
    deadline_seconds = 120 + total * 0.05
    rng = random.Random(7)
    workers: list[Worker] = []
    kills: list[Kill] = []  # of workers that held leases
    idle_kills = 0  # of workers that held none by the time the signal came

    with httpx.Client(base_url=service.base, timeout=30) as http:
        settings = {"max_attempts": 1000, "lease_seconds": LEASE_SECONDS}
        assert http.put(f"/queues/{queue}", json=settings).status_code in (200, 201)
        pushed: list[str] = []
        for start in range(0, total, 1000):
            batch = [{"payload": {"n": n}} for n in range(start, min(total, start + 1000))]
            response = http.post("/push/batch", json={"queue": queue, "items": batch})
            assert response.status_code == 201, response.text
            pushed.extend(response.json()["ids"])

    def spawn() -> None:
        name = f"worker-{len(workers)}"
        log_path = tmp_path / f"{name}.jsonl"
        config = {
            "base": service.base,
            "queue": queue,
            "lease_seconds": LEASE_SECONDS,
            "work_seconds": WORK_SECONDS,
            "max_items": MAX_ITEMS,
            "deadline_seconds": deadline_seconds,
            "stop_path": str(stop_path),
            "log_path": str(log_path),
            "seed": len(workers),
        }
        with (tmp_path / f"{name}.out").open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, str(WORKER_SCRIPT), json.dumps(config)], stdout=out, stderr=subprocess.STDOUT
            )
        workers.append(Worker(name, process, log_path))

    started = time.monotonic()
    drained = False
    try:
        for _ in range(size.kill_workers):
            spawn()
        kill_deadline = started + deadline_seconds / 2
        while len(kills) < size.worker_kills and time.monotonic() < kill_deadline:
            time.sleep(rng.uniform(0.2, 0.6))
            alive = [w for w in workers if not w.killed and w.process.poll() is None]
            holders = [w for w in alive if read_log(w.name, w.log_path).held()]
            if not holders:
                continue
            victim = rng.choice(holders)
            victim.process.send_signal(signal.SIGKILL)
            victim.process.wait(timeout=30)
            victim.killed = True
            log = read_log(victim.name, victim.log_path)
            held = log.held()
            spawn()
            if not held:  # it finished its last item between the look and the kill
                idle_kills += 1
                continue
            kills.append(Kill(victim.name, held, {p.id for p in held if (p.id, p.token) in log.completing}))
            report.progress(
                f"killed {victim.name} holding {len(held)} leases ({len(kills)}/{size.worker_kills})"
            )
        kills_done = time.monotonic()

        # The survivors and replacements drain the rest, including what the killed ones held.
        with httpx.Client(base_url=service.base, timeout=30) as http:
            while time.monotonic() < started + deadline_seconds:
                counts = http.get(f"/queues/{queue}").json()
                if sum(counts[k] for k in ("ready", "leased", "delayed", "retrying")) == 0:
                    drained = True
                    break
                time.sleep(0.5)
        drain_seconds = time.monotonic() - started
        stop_path.touch()
        for worker in workers:
            if worker.process.poll() is None:
                try:
                    worker.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.process.kill()
                    worker.process.wait(timeout=30)
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait(timeout=30)

    logs = [read_log(w.name, w.log_path) for w in workers]
    pops = [p for log in logs for p in log.pops]
    completed_by_workers = Counter(i for log in logs for i, _, status in log.done if status == 204)
    refused = sum(1 for log in logs for _, _, status in log.done if status == 409)
    problems = [p for log in logs for p in log.problems]
    history = Counter(history_ids(service.base, queue, "completed"))
    dead = history_ids(service.base, queue, "dead")
    early = early_redeliveries(pops, LEASE_SECONDS)

    # How long each lease a killed worker held stayed unleased: from its expiry to the next lease.
    later: dict[str, list[Pop]] = {}
    for pop in pops:
        later.setdefault(pop.id, []).append(pop)
    gaps = []
    for kill in kills:
        for lease in kill.held:
            after = [p for p in later[lease.id] if p.expires > lease.expires]
            if after:
                first = min(after, key=lambda p: p.expires)
                gaps.append((first.expires - lease.expires).total_seconds() - LEASE_SECONDS)
    report.figures(
        "worker kill -9",
        engine=engine.name,
        items=total,
        workers=size.kill_workers,
        processes=len(workers),
        kills=len(kills),
        idle_kills=idle_kills,
        leases_held_by_killed=sum(len(k.held) for k in kills),
        deletes_in_flight_at_kill=sum(len(k.completing) for k in kills),
        redelivered_after_kill=len(gaps),
        min_wait_after_expiry_s=min(gaps) if gaps else 0.0,
        early_redeliveries=len(early),
        leases=len(pops),
        completed_in_history=sum(history.values()),
        late_completions_409=refused,
        problems=len(problems),
        kills_s=kills_done - started,
        total_s=drain_seconds,
    )
    assert len(kills) == size.worker_kills, (
        "the queue drained before every kill (raise SIMPLEQUEUE_FAULT_KILL_ITEMS)"
    )
    assert drained, f"not drained within {deadline_seconds:.0f} s:\n{service.logs()}"
    assert not early, "leases handed out while an earlier lease held: " + "; ".join(
        f"{a.id}: {a.worker}'s lease to {a.expires.isoformat()} and {b.worker}'s overlap by {s:.3f} s"
        for a, b, s in early[:5]
    )
    assert not problems, f"{len(problems)} unexpected answers, e.g. {problems[:5]}"
    assert not dead, f"{len(dead)} items died"
    missing = [i for i in pushed if history[i] == 0]
    assert not missing, f"{len(missing)} items never completed, e.g. {missing[:5]}"
    twice = {i: n for i, n in history.items() if n > 1}
    assert not twice, f"items completed more than once (history): {list(twice.items())[:5]}"
    assert set(history) == set(pushed), "history holds items nobody pushed"
    twice_acked = {i: n for i, n in completed_by_workers.items() if n > 1}
    assert not twice_acked, f"two workers got 204 for one item: {list(twice_acked.items())[:5]}"
    assert sum(len(k.held) for k in kills) > 0
    # Every lease a killed worker held either came back (after its expiry) or had been completed
    # by the DELETE it had under way.
    unresolved = [
        h.id
        for k in kills
        for h in k.held
        if h.id not in k.completing and not any(p.expires > h.expires for p in later[h.id])
    ]
    assert not unresolved, f"leases of killed workers that never came back: {unresolved[:5]}"
    # Workers exit on their own when told to stop (their SIGKILLed peers aside).
    assert all(w.killed or w.process.returncode == 0 for w in workers), [
        (w.name, w.process.returncode) for w in workers
    ]
