"""The service SIGKILLed while publishers publish to a topic with many queue subscriptions,
restarted on the same database: every message is in all of its subscriptions' queues or in none
(a publish is one transaction), every publish that was answered is in all of them, and none is
delivered twice to one queue."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import VARIANTS, Engine, Reporter, ServiceFactory, sizes
from tests.faults.test_service_kill import drain_everything

SUBSCRIPTIONS = 20
PUBLISHERS = 8
WARM_ACKS = 20


@dataclass
class Cycle:
    acked: set[str] = field(default_factory=set)
    sent: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


async def publish_load(base: str, pid: int, topic: str, kill_after: float) -> Cycle:
    result = Cycle()
    killed = asyncio.Event()
    stop_at = time.monotonic() + kill_after + 60

    async def publisher() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for _ in range(100_000):  # bounded in count and in time
                if time.monotonic() > stop_at:
                    result.problems.append("a publisher was still publishing a minute after the kill")
                    return
                message_id = str(uuid4())
                result.sent.add(message_id)
                try:
                    response = await http.post(
                        f"/topics/{topic}/publish", json={"message": {"m": message_id}, "id": message_id}
                    )
                except httpx.TransportError as exc:
                    if not killed.is_set():
                        result.problems.append(f"publish before the kill: {exc!r}")
                    return
                if response.status_code != 200 or len(response.json()["delivered_to"]) != SUBSCRIPTIONS:
                    result.problems.append(f"publish -> {response.status_code} {response.text[:300]}")
                    return
                result.acked.add(message_id)

    async def killer() -> None:
        for _ in range(300):
            if len(result.acked) >= WARM_ACKS or result.problems:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
        killed.set()

    await asyncio.gather(killer(), *(publisher() for _ in range(PUBLISHERS)))
    return result


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_publish_cut_by_kill_9_is_in_every_queue_or_in_none(
    variant: str, engine: Engine, services: ServiceFactory, report: Reporter
) -> None:
    kills = min(sizes(variant).service_kills, 3)
    service = services(engine.url, name=f"kill-publish-{engine.name}", start=False)
    topic = f"kill-{uuid4().hex[:12]}"
    queues = [f"{topic}-{n}" for n in range(SUBSCRIPTIONS)]
    rng = random.Random(17)
    service.start()
    with httpx.Client(base_url=service.base, timeout=30) as http:
        assert http.put(f"/topics/{topic}", json={}).status_code == 201
        for queue in queues:
            assert http.put(f"/queues/{queue}", json={}).status_code == 201
            made = http.post(
                f"/topics/{topic}/subscriptions",
                json={"endpoint": queue, "attributes": {"RawMessageDelivery": "true"}},
            )
            assert made.status_code == 201, made.text
    service.stop()

    cycles: list[Cycle] = []
    for n in range(kills):
        service.start()
        kill_after = rng.uniform(0.2, 1.2)
        cycles.append(asyncio.run(publish_load(service.base, service.pid, topic, kill_after)))
        service.kill()
        report.progress(
            f"cycle {n + 1}/{kills}: {len(cycles[-1].acked):,} publishes answered before the kill"
        )

    service.start()
    copies: Counter[str] = Counter()
    for queue in queues:
        found = drain_everything(service.base, queue)
        per_queue = Counter(payload["m"] for payload in found.values())
        assert max(per_queue.values(), default=1) == 1, f"{queue} got a message twice"
        copies.update(per_queue)
    service.stop()

    acked = {m for c in cycles for m in c.acked}
    sent = {m for c in cycles for m in c.sent}
    partial = {m: n for m, n in copies.items() if n != SUBSCRIPTIONS}
    missing = acked - set(copies)
    report.figures(
        "publish kill -9",
        engine=engine.name,
        kills=kills,
        subscriptions=SUBSCRIPTIONS,
        answered=len(acked),
        sent=len(sent),
        delivered=len(copies),
        committed_unanswered=len(set(copies) - acked),
        partial=len(partial),
        missing=len(missing),
    )
    problems = [p for c in cycles for p in c.problems]
    assert not problems, problems[:5]
    assert not partial, f"messages in some queues only: {list(partial.items())[:5]}"
    assert not missing, f"answered publishes lost: {sorted(missing)[:5]}"
    assert set(copies) <= sent
    assert all(c.acked for c in cycles), "a cycle got no publish answered before its kill"
