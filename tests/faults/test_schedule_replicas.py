"""Schedules fired by three `simplequeue serve` replicas over one PostgreSQL database, with no
leader, while one replica is kill -9'd and restarted: every slot of every schedule fires exactly
once, none twice and none missed.

Each schedule fires every second (catch_up "all", so that a slot a dying replica left is fired by
another at its next look rather than dropped); an item's created_at is its slot. Once the run is
over the schedules are paused, and each schedule's items must be one per second from its first
slot to its last_run_at, with no slot twice.

PostgreSQL only: replicas over one SQLite file are not a deployment.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import VARIANTS, Reporter, ServiceFactory, sizes
from tests.faults.test_service_kill import drain_everything

SCHEDULES = 20
REPLICAS = 3


def _slots(base: str, queue: str) -> Counter[tuple[str, datetime]]:
    """(schedule, slot) of every item of the queue, counted; drained as it is read."""
    found: Counter[tuple[str, datetime]] = Counter()
    with httpx.Client(base_url=base, timeout=60) as http:
        while True:
            popped = http.post("/pop", json={"queue": queue, "max_items": 100, "lease_seconds": 300})
            assert popped.status_code == 200, popped.text
            items = popped.json()["items"]
            if not items:
                return found
            for item in items:
                found[(item["payload"]["s"], datetime.fromisoformat(item["created_at"]))] += 1
            refs = [{"id": i["id"], "lease_token": i["lease_token"]} for i in items]
            assert http.post("/items/complete", json={"items": refs}).status_code == 200


@pytest.mark.parametrize("variant", VARIANTS)
def test_replicas_fire_each_slot_once_through_a_kill_9(
    variant: str, private_postgres_url: str, services: ServiceFactory, report: Reporter
) -> None:
    seconds = 8 if sizes(variant).variant == "quick" else 60
    replicas = [services(private_postgres_url, name=f"scheduler-{n}") for n in range(REPLICAS)]
    queue = f"ticks-{uuid4().hex[:8]}"
    names = [f"tick-{uuid4().hex[:8]}-{n}" for n in range(SCHEDULES)]
    with httpx.Client(base_url=replicas[0].base, timeout=30) as http:
        for name in names:
            body = {"queue": queue, "payload": {"s": name}, "every_seconds": 1, "catch_up": "all"}
            assert http.put(f"/schedules/{name}", json=body).status_code == 201
    time.sleep(seconds / 2)
    replicas[1].kill()  # mid-way through whatever it was firing
    time.sleep(2)
    replicas[1].start()
    time.sleep(seconds / 2)
    last: dict[str, datetime] = {}
    with httpx.Client(base_url=replicas[2].base, timeout=30) as http:
        for name in names:
            assert http.post(f"/schedules/{name}/pause").status_code == 200
        time.sleep(1.5)  # firings in flight commit or roll back
        for name in names:
            last[name] = datetime.fromisoformat(http.get(f"/schedules/{name}").json()["last_run_at"])
    fired = _slots(replicas[0].base, queue)
    twice = [key for key, n in fired.items() if n > 1]
    missed: list[tuple[str, datetime]] = []
    for name in names:
        slots = sorted(slot for s, slot in fired if s == name)
        assert slots, f"{name} never fired"
        expected = int((last[name] - slots[0]).total_seconds()) + 1
        have = set(slots)
        missed += [
            (name, slots[0] + timedelta(seconds=k))
            for k in range(expected)
            if slots[0] + timedelta(seconds=k) not in have
        ]
    report.figures(
        "schedule replicas",
        replicas=REPLICAS,
        schedules=SCHEDULES,
        seconds=seconds,
        fired=sum(fired.values()),
        twice=len(twice),
        missed=len(missed),
    )
    assert not twice, f"slots fired twice: {twice[:5]}"
    assert not missed, f"slots never fired: {missed[:5]}"
    assert drain_everything(replicas[0].base, queue) == {}
