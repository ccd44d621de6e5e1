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


@dataclass
class Fleet:
    """The worker processes of one run, each logging to a file of its own under tmp_path."""

    base: str
    queue: str
    tmp_path: Path
    deadline_seconds: float
    workers: list[Worker] = field(default_factory=list)

    @property
    def stop_path(self) -> Path:
        return self.tmp_path / "workers.stop"

    def spawn(self) -> None:
        """Starts one more worker process."""
        name = f"worker-{len(self.workers)}"
        log_path = self.tmp_path / f"{name}.jsonl"
        config = {
            "base": self.base,
            "queue": self.queue,
            "lease_seconds": LEASE_SECONDS,
            "work_seconds": WORK_SECONDS,
            "max_items": MAX_ITEMS,
            "deadline_seconds": self.deadline_seconds,
            "stop_path": str(self.stop_path),
            "log_path": str(log_path),
            "seed": len(self.workers),
        }
        with (self.tmp_path / f"{name}.out").open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, str(WORKER_SCRIPT), json.dumps(config)], stdout=out, stderr=subprocess.STDOUT
            )
        self.workers.append(Worker(name, process, log_path))

    def alive(self) -> list[Worker]:
        return [w for w in self.workers if not w.killed and w.process.poll() is None]

    def stop(self) -> None:
        """Tells every worker to stop and waits for it to exit; kills one that does not in time."""
        self.stop_path.touch()
        for worker in self.workers:
            if worker.process.poll() is None:
                try:
                    worker.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.process.kill()
                    worker.process.wait(timeout=30)

    def kill_the_rest(self) -> None:
        """Kills every worker still running (after a failure, none is left behind)."""
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait(timeout=30)

    def logs(self) -> list[WorkerLog]:
        return [read_log(w.name, w.log_path) for w in self.workers]


def push_items(base: str, queue: str, total: int) -> list[str]:
    """Makes the queue (a lease of LEASE_SECONDS, attempts enough never to die) and pushes `total`
    items to it in batches of 1,000; returns their ids."""
    pushed: list[str] = []
    with httpx.Client(base_url=base, timeout=30) as http:
        settings = {"max_attempts": 1000, "lease_seconds": LEASE_SECONDS}
        assert http.put(f"/queues/{queue}", json=settings).status_code in (200, 201)
        for start in range(0, total, 1000):
            batch = [{"payload": {"n": n}} for n in range(start, min(total, start + 1000))]
            response = http.post("/push/batch", json={"queue": queue, "items": batch})
            assert response.status_code == 201, response.text
            pushed.extend(response.json()["ids"])
    return pushed


def kill_lease_holders(
    fleet: Fleet, wanted: int, until: float, rng: random.Random, report: Reporter
) -> tuple[list[Kill], int]:
    """SIGKILLs a worker that holds leases every 0.2-0.6 s, starting a replacement for each, until
    `wanted` of them held leases when killed or the monotonic clock reaches `until`. Returns the
    kills of workers that held leases, and how many held none by the time the signal came."""
    kills: list[Kill] = []
    idle_kills = 0
    while len(kills) < wanted and time.monotonic() < until:
        time.sleep(rng.uniform(0.2, 0.6))
        holders = [w for w in fleet.alive() if read_log(w.name, w.log_path).held()]
        if not holders:
            continue
        victim = rng.choice(holders)
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(timeout=30)
        victim.killed = True
        log = read_log(victim.name, victim.log_path)
        held = log.held()
        fleet.spawn()
        if not held:  # it finished its last item between the look and the kill
            idle_kills += 1
            continue
        kills.append(Kill(victim.name, held, {p.id for p in held if (p.id, p.token) in log.completing}))
        report.progress(f"killed {victim.name} holding {len(held)} leases ({len(kills)}/{wanted})")
    return kills, idle_kills


def wait_until_drained(base: str, queue: str, until: float) -> bool:
    """Whether the queue had nothing ready, leased, delayed or retrying before `until` (monotonic)."""
    with httpx.Client(base_url=base, timeout=30) as http:
        while time.monotonic() < until:
            counts = http.get(f"/queues/{queue}").json()
            if sum(counts[k] for k in ("ready", "leased", "delayed", "retrying")) == 0:
                return True
            time.sleep(0.5)
    return False


@dataclass
class Seen:
    """What the workers' logs and the queue's history tell after the run."""

    pops: list[Pop]
    completed_by_workers: Counter[str]  # 204s per item id
    refused: int  # 409s: completions of leases that had run out
    problems: list[str]
    history: Counter[str]  # completion records per item id
    dead: list[str]
    early: list[tuple[Pop, Pop, float]]  # leases handed out while an earlier one held

    @classmethod
    def after(cls, fleet: Fleet) -> Seen:
        logs = fleet.logs()
        pops = [p for log in logs for p in log.pops]
        return cls(
            pops=pops,
            completed_by_workers=Counter(i for log in logs for i, _, status in log.done if status == 204),
            refused=sum(1 for log in logs for _, _, status in log.done if status == 409),
            problems=[p for log in logs for p in log.problems],
            history=Counter(history_ids(fleet.base, fleet.queue, "completed")),
            dead=history_ids(fleet.base, fleet.queue, "dead"),
            early=early_redeliveries(pops, LEASE_SECONDS),
        )

    def leases_by_item(self) -> dict[str, list[Pop]]:
        later: dict[str, list[Pop]] = {}
        for pop in self.pops:
            later.setdefault(pop.id, []).append(pop)
        return later


def waits_after_expiry(kills: list[Kill], later: dict[str, list[Pop]]) -> list[float]:
    """How long each lease a killed worker held stayed unleased: from its expiry to the next lease,
    in seconds (the next lease's start is its expiry less LEASE_SECONDS)."""
    gaps = []
    for kill in kills:
        for lease in kill.held:
            after = [p for p in later[lease.id] if p.expires > lease.expires]
            if after:
                first = min(after, key=lambda p: p.expires)
                gaps.append((first.expires - lease.expires).total_seconds() - LEASE_SECONDS)
    return gaps


def assert_every_item_completed_once(seen: Seen, pushed: list[str]) -> None:
    assert not seen.early, "leases handed out while an earlier lease held: " + "; ".join(
        f"{a.id}: {a.worker}'s lease to {a.expires.isoformat()} and {b.worker}'s overlap by {s:.3f} s"
        for a, b, s in seen.early[:5]
    )
    assert not seen.problems, f"{len(seen.problems)} unexpected answers, e.g. {seen.problems[:5]}"
    assert not seen.dead, f"{len(seen.dead)} items died"
    missing = [i for i in pushed if seen.history[i] == 0]
    assert not missing, f"{len(missing)} items never completed, e.g. {missing[:5]}"
    twice = {i: n for i, n in seen.history.items() if n > 1}
    assert not twice, f"items completed more than once (history): {list(twice.items())[:5]}"
    assert set(seen.history) == set(pushed), "history holds items nobody pushed"
    twice_acked = {i: n for i, n in seen.completed_by_workers.items() if n > 1}
    assert not twice_acked, f"two workers got 204 for one item: {list(twice_acked.items())[:5]}"


def assert_every_killed_lease_resolved(kills: list[Kill], later: dict[str, list[Pop]]) -> None:
    """Every lease a killed worker held either came back (after its expiry) or had been completed
    by the DELETE it had under way."""
    assert sum(len(k.held) for k in kills) > 0
    unresolved = [
        h.id
        for k in kills
        for h in k.held
        if h.id not in k.completing and not any(p.expires > h.expires for p in later[h.id])
    ]
    assert not unresolved, f"leases of killed workers that never came back: {unresolved[:5]}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_killed_workers_leases_are_not_redelivered_early_and_every_item_completes_once(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter, tmp_path: Path
) -> None:
    size = sizes(variant)
    total = size.kill_items
    service = services(engine.url, name=f"kill-workers-{engine.name}")
    queue = f"kills-{uuid4().hex[:12]}"
    deadline_seconds = 120 + total * 0.05
    pushed = push_items(service.base, queue, total)

    fleet = Fleet(service.base, queue, tmp_path, deadline_seconds)
    started = time.monotonic()
    try:
        for _ in range(size.kill_workers):
            fleet.spawn()
        kill_deadline = started + deadline_seconds / 2
        kills, idle_kills = kill_lease_holders(
            fleet, size.worker_kills, kill_deadline, random.Random(7), report
        )
        kills_done = time.monotonic()
        # The survivors and replacements drain the rest, including what the killed ones held.
        drained = wait_until_drained(service.base, queue, started + deadline_seconds)
        drain_seconds = time.monotonic() - started
        fleet.stop()
    finally:
        fleet.kill_the_rest()

    seen = Seen.after(fleet)
    later = seen.leases_by_item()
    gaps = waits_after_expiry(kills, later)
    report.figures(
        "worker kill -9",
        engine=engine.name,
        items=total,
        workers=size.kill_workers,
        processes=len(fleet.workers),
        kills=len(kills),
        idle_kills=idle_kills,
        leases_held_by_killed=sum(len(k.held) for k in kills),
        deletes_in_flight_at_kill=sum(len(k.completing) for k in kills),
        redelivered_after_kill=len(gaps),
        min_wait_after_expiry_s=min(gaps) if gaps else 0.0,
        early_redeliveries=len(seen.early),
        leases=len(seen.pops),
        completed_in_history=sum(seen.history.values()),
        late_completions_409=seen.refused,
        problems=len(seen.problems),
        kills_s=kills_done - started,
        total_s=drain_seconds,
    )
    assert len(kills) == size.worker_kills, (
        "the queue drained before every kill (raise SIMPLEQUEUE_FAULT_KILL_ITEMS)"
    )
    assert drained, f"not drained within {deadline_seconds:.0f} s:\n{service.logs()}"
    assert_every_item_completed_once(seen, pushed)
    assert_every_killed_lease_resolved(kills, later)
    # Workers exit on their own when told to stop (their SIGKILLed peers aside).
    assert all(w.killed or w.process.returncode == 0 for w in fleet.workers), [
        (w.name, w.process.returncode) for w in fleet.workers
    ]
