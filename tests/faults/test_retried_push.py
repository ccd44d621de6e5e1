"""Pushes retried with their own ids, over three `serve` replicas of one PostgreSQL database behind a
small round-robin proxy that loses a seeded fraction of the push answers; under that load one
replica is kill -9'd and restarted, and another is stopped (SIGTERM) and restarted.

Producers push items with ids of their own and re-send the SAME id on a transport error or a 5xx
(a lost answer, a replica that died with the request in hand); some also re-send pushes already
acknowledged, after a short random delay, as a client whose answer was lost after the commit
would. Workers talk to the one replica that is never signalled (so no completion of theirs can be
lost with a replica, and their leases are far longer than the run: a second delivery of an item
can only come from a second item), count each id they process, and complete it.

Once drained: no id processed twice (by the workers' counts, and by the completed records of
sq_history read from PostgreSQL), no acknowledged push lost, nothing processed that no producer
pushed, and no id answered 201 twice. Before client ids were remembered after their items
finished, a re-sent push of a completed item created it again and it was processed twice.

PostgreSQL only: replicas over one SQLite file are not a deployment.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

import asyncpg
import httpx
import pytest

from tests.faults.helpers import (
    VARIANTS,
    PrivatePostgres,
    Reporter,
    Service,
    ServiceFactory,
    json_or_none,
    sizes,
)
from tests.faults.proxy import LossyProxy

REPLICAS = 3  # replica 0 serves the workers and is never signalled; 1 and 2 take turns dying
PRODUCERS = 6
DUPLICATING = 3  # of the producers, those that also re-send acknowledged pushes
RESEND_FRACTION = 0.25  # of a duplicating producer's acknowledged items
RESEND_DELAY = (0.05, 1.5)  # seconds after the acknowledgement: mostly after the item completed
WORKERS = 12
LOSS = 0.1  # of push answers, lost by the proxy after the backend answered
SECONDS_PER_ITEM = 0.01  # producers' pacing, all together (100 pushes/s): the kills find load
MAX_ATTEMPTS = 40  # per push (with backoff to 1 s): about 35 s at most
CLIENT_TIMEOUT = 30.0  # above the proxy's backend bound (20 s), so a stuck backend is a 502
LEASE_SECONDS = 300  # far above the run: no lease of these workers expires
DRAIN_SECONDS = 90.0
DOWN_SECONDS = (0.3, 1.2)  # a signalled replica stays down this long before its restart


def is_push(method: str, path: str) -> bool:
    return method == "POST" and path == "/push"


@dataclass
class Run:
    total: int
    sent: dict[str, Any] = field(default_factory=dict)  # id -> payload, of every id pushed at all
    acked: dict[str, Any] = field(default_factory=dict)  # id -> payload, once an attempt was answered
    created: Counter[str] = field(default_factory=Counter)  # 201s per id
    attempts: int = 0  # push requests sent, all told
    retries: int = 0  # of those, re-sends of an unanswered (or 5xx) attempt
    resends: int = 0  # duplicate sends of acknowledged pushes
    resend_answers: Counter[str] = field(default_factory=Counter)
    heard_duplicate: int = 0  # answers 200 created false
    failures: Counter[str] = field(default_factory=Counter)  # transport errors and 5xx, by kind
    gave_up: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unexpected answers to pushes
    processed: Counter[str] = field(default_factory=Counter)  # by the workers
    processed_payload: dict[str, Any] = field(default_factory=dict)
    completions: Counter[str] = field(default_factory=Counter)
    uncertain: list[str] = field(default_factory=list)  # completions whose outcome stayed unknown
    worker_problems: list[str] = field(default_factory=list)
    in_hand: int = 0  # items popped and not yet completed
    chaos: list[str] = field(default_factory=list)
    kills_during_load: int = 0
    in_hand_at_kills: int = 0  # requests the proxy had forwarded to a replica as it was killed
    kills: int = 0
    terms: int = 0
    load_seconds: float = 0.0
    drain_seconds: float = 0.0
    drained: bool = False


async def push_until_answered(
    http: httpx.AsyncClient,
    run: Run,
    queue: str,
    item_id: str,
    payload: Any,
    rng: random.Random,
    until: float,
) -> bool:
    """Push, re-sending the same id until an answer says the item is there; True if one did."""
    body = {"queue": queue, "payload": payload, "id": item_id}
    for attempt in range(MAX_ATTEMPTS):
        if attempt:
            if time.monotonic() > until:
                break
            run.retries += 1
            await asyncio.sleep(min(1.0, 0.02 * 2**attempt) * rng.uniform(0.5, 1.0))
        run.attempts += 1
        try:
            response = await http.post("/push", json=body)
        except httpx.TransportError as exc:
            run.failures[type(exc).__name__] += 1
            continue
        if response.status_code >= 500:
            run.failures[str(response.status_code)] += 1
            continue
        answer = json_or_none(response)
        answer = answer if isinstance(answer, dict) else {}
        if answer.get("id") == item_id and (response.status_code, answer.get("created")) == (201, True):
            run.created[item_id] += 1
            return True
        if answer.get("id") == item_id and (response.status_code, answer.get("created")) == (200, False):
            run.heard_duplicate += 1
            return True
        run.problems.append(f"push {item_id} -> {response.status_code} {response.text[:200]}")
        return False
    run.gave_up.append(item_id)
    return False


async def producer(n: int, base: str, queue: str, count: int, run: Run, until: float) -> None:
    rng = random.Random(1000 + n)
    duplicating = n < DUPLICATING
    resends: list[asyncio.Task[None]] = []
    started = time.monotonic()

    async def resend(item_id: str, payload: Any, http: httpx.AsyncClient) -> None:
        await asyncio.sleep(rng.uniform(*RESEND_DELAY))
        run.resends += 1
        before = run.created[item_id]
        if await push_until_answered(http, run, queue, item_id, payload, rng, until):
            run.resend_answers["created again (201)" if run.created[item_id] > before else "200"] += 1
        else:
            run.resend_answers["no answer or refused"] += 1

    async with httpx.AsyncClient(base_url=base, timeout=CLIENT_TIMEOUT) as http:
        for seq in range(count):
            # Paced, so that the load lasts while replicas die; a slow push is not made up for.
            await asyncio.sleep(max(0.0, started + seq * SECONDS_PER_ITEM * PRODUCERS - time.monotonic()))
            if time.monotonic() > until:
                run.problems.append(f"producer {n} stopped at its deadline after {seq} items")
                break
            item_id = str(uuid4())
            payload = {"producer": n, "seq": seq}
            run.sent[item_id] = payload
            if await push_until_answered(http, run, queue, item_id, payload, rng, until):
                run.acked[item_id] = payload
                if duplicating and rng.random() < RESEND_FRACTION:
                    resends.append(asyncio.create_task(resend(item_id, payload, http)))
        await asyncio.gather(*resends)


async def complete(http: httpx.AsyncClient, run: Run, item: dict[str, Any]) -> None:
    """DELETE with the lease token, re-sent on a transport error or a 5xx: after such an attempt a
    404 means that attempt had completed it."""
    uncertain = False
    for attempt in range(10):
        if attempt:
            await asyncio.sleep(0.1 * attempt)
        try:
            response = await http.delete(f"/items/{item['id']}", params={"lease_token": item["lease_token"]})
        except httpx.TransportError as exc:
            run.completions[type(exc).__name__] += 1
            uncertain = True
            continue
        run.completions[str(response.status_code)] += 1
        if response.status_code >= 500:
            uncertain = True
            continue
        if response.status_code == 204 or (response.status_code == 404 and uncertain):
            return
        run.worker_problems.append(f"complete {item['id']} -> {response.status_code} {response.text[:200]}")
        return
    run.uncertain.append(item["id"])


async def worker(n: int, http: httpx.AsyncClient, queue: str, run: Run, finished: asyncio.Event) -> None:
    rng = random.Random(2000 + n)
    for _ in range(run.total * 10 + 1000):  # bounded in count; the drain bounds it in time
        if finished.is_set():
            return
        body = {
            "queue": queue,
            "max_items": rng.randint(1, 5),
            "wait_seconds": 1,
            "lease_seconds": LEASE_SECONDS,
        }
        try:
            response = await http.post("/pop", json=body)
        except httpx.TransportError as exc:
            run.worker_problems.append(f"pop: {exc!r}")
            await asyncio.sleep(0.2)
            continue
        if response.status_code != 200:
            run.worker_problems.append(f"pop -> {response.status_code} {response.text[:200]}")
            await asyncio.sleep(0.2)
            continue
        items = response.json()["items"]
        run.in_hand += len(items)
        try:
            for item in items:
                run.processed[item["id"]] += 1
                run.processed_payload[item["id"]] = item["payload"]
                await asyncio.sleep(rng.uniform(0, 0.003))  # the work
                await complete(http, run, item)
        finally:
            run.in_hand -= len(items)


async def chaos(
    replicas: list[Service],
    proxy: LossyProxy,
    run: Run,
    cycles: int,
    load_done: asyncio.Event,
    report: Reporter,
    seed: int,
) -> None:
    """Per cycle: kill -9 one of replicas 1 and 2 and restart it, then SIGTERM the other and restart
    it, each once the pushes acknowledged so far pass a share of the total; the kill comes while
    the proxy has a push in that replica's hands (if one comes within a second)."""
    rng = random.Random(seed)
    started = time.monotonic()

    async def when_acked(share: float) -> None:
        for _ in range(100_000):  # bounded; the producers end by their own deadline
            if len(run.acked) >= share * run.total or load_done.is_set():
                return
            await asyncio.sleep(0.02)

    for cycle in range(cycles):
        killed, stopped = replicas[1 + cycle % 2], replicas[1 + (cycle + 1) % 2]
        await when_acked((cycle + 0.2) / cycles)
        for _ in range(500):
            if proxy.in_flight[killed.port] > 0 or load_done.is_set():
                break
            await asyncio.sleep(0.002)
        in_hand = proxy.in_flight[killed.port]
        during = not load_done.is_set()
        await asyncio.to_thread(killed.kill)
        run.kills += 1
        run.kills_during_load += during
        run.in_hand_at_kills += in_hand
        at = f"{time.monotonic() - started:.1f} s with {in_hand} in hand, {len(run.acked):,} acknowledged"
        await asyncio.sleep(rng.uniform(*DOWN_SECONDS))
        await asyncio.to_thread(killed.start)
        run.chaos.append(f"kill -9 {killed.name} at {at}{'' if during else ' (after the load)'}, restarted")
        report.progress(run.chaos[-1])

        await when_acked((cycle + 0.6) / cycles)
        at = f"{time.monotonic() - started:.1f} s, {len(run.acked):,} acknowledged"
        await asyncio.to_thread(stopped.stop)
        run.terms += 1
        await asyncio.sleep(rng.uniform(*DOWN_SECONDS))
        await asyncio.to_thread(stopped.start)
        run.chaos.append(f"SIGTERM {stopped.name} at {at}, restarted")
        report.progress(run.chaos[-1])


async def scenario(
    replicas: list[Service], queue: str, total: int, cycles: int, report: Reporter
) -> tuple[Run, LossyProxy]:
    run = Run(total)
    started = time.monotonic()
    until = started + total * SECONDS_PER_ITEM * 3 + 120  # the producers' deadline
    load_done = asyncio.Event()
    finished = asyncio.Event()
    direct = replicas[0].base
    limits = httpx.Limits(max_connections=WORKERS + 4, max_keepalive_connections=WORKERS + 4)

    async with (
        LossyProxy([r.port for r in replicas], lossy=is_push, loss=LOSS, seed=17) as proxy,
        httpx.AsyncClient(base_url=direct, timeout=CLIENT_TIMEOUT, limits=limits) as http,
    ):
        settings = {"max_attempts": 1000, "lease_seconds": LEASE_SECONDS, "dedup_window_seconds": 3600}
        answer = await http.put(f"/queues/{queue}", json=settings)
        assert answer.status_code in (200, 201), answer.text

        async def produce() -> None:
            shares = [total // PRODUCERS + (n < total % PRODUCERS) for n in range(PRODUCERS)]
            try:
                await asyncio.gather(
                    *(
                        producer(n, f"http://127.0.0.1:{proxy.port}", queue, c, run, until)
                        for n, c in enumerate(shares)
                    )
                )
            finally:
                run.load_seconds = time.monotonic() - started
                load_done.set()

        async def drain() -> None:
            await load_done.wait()
            await chaos_task  # every replica is back before the drain is judged
            await proxy.close()  # nothing is forwarded any more
            report.progress(f"pushed in {run.load_seconds:.1f} s; draining")
            deadline = time.monotonic() + DRAIN_SECONDS
            try:
                while time.monotonic() < deadline:
                    counts = (await http.get(f"/queues/{queue}")).json()
                    live = sum(counts[k] for k in ("ready", "leased", "delayed", "retrying"))
                    if live == 0 and run.in_hand == 0:
                        run.drained = True
                        return
                    await asyncio.sleep(0.25)
            finally:
                run.drain_seconds = time.monotonic() - started - run.load_seconds
                finished.set()

        chaos_task = asyncio.create_task(chaos(replicas, proxy, run, cycles, load_done, report, seed=23))
        try:
            await asyncio.gather(
                produce(), drain(), *(worker(n, http, queue, run, finished) for n in range(WORKERS))
            )
        finally:
            finished.set()
            if not chaos_task.done():
                chaos_task.cancel()
    return run, proxy


async def history_counts(url: str, queue: str) -> tuple[Counter[str], Counter[str], int]:
    """From PostgreSQL itself: completed records per id, records per outcome, items left."""
    connection = await asyncpg.connect(url, timeout=30)
    try:
        completed = await connection.fetch(
            "SELECT id::text AS id, count(*) AS n FROM sq_history"
            " WHERE queue = $1 AND outcome = 'completed' GROUP BY id",
            queue,
        )
        outcomes = await connection.fetch(
            "SELECT outcome, count(*) AS n FROM sq_history WHERE queue = $1 GROUP BY outcome", queue
        )
        left = await connection.fetchval("SELECT count(*) FROM sq_items WHERE queue = $1", queue)
    finally:
        await connection.close()
    return (
        Counter({r["id"]: r["n"] for r in completed}),
        Counter({r["outcome"]: r["n"] for r in outcomes}),
        int(left),
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_retried_pushes_through_replicas_dying_are_processed_once(
    variant: str, private_postgres: PrivatePostgres, services: ServiceFactory, report: Reporter
) -> None:
    size = sizes(variant)
    queue = f"retried-{uuid4().hex[:12]}"
    began = time.monotonic()
    replicas = [services(private_postgres.url, name=f"replica{n}") for n in range(REPLICAS)]
    report.progress(f"{REPLICAS} replicas ready in {time.monotonic() - began:.1f} s")

    run, proxy = asyncio.run(scenario(replicas, queue, size.retry_items, size.retry_kills, report))
    history, outcomes, left = asyncio.run(history_counts(private_postgres.url, queue))

    twice = {i: n for i, n in run.processed.items() if n > 1}
    history_twice = {i: n for i, n in history.items() if n > 1}
    created_twice = {i: n for i, n in run.created.items() if n > 1}
    lost = [i for i in run.acked if i not in run.processed]
    lost_history = [i for i in run.acked if i not in history]
    strangers = [i for i in run.processed if i not in run.sent]
    changed = [i for i, p in run.processed_payload.items() if i in run.sent and p != run.sent[i]]
    report.figures(
        "retried pushes over replicas",
        items=size.retry_items,
        replicas=REPLICAS,
        producers=PRODUCERS,
        workers=WORKERS,
        acked=len(run.acked),
        push_requests=run.attempts,
        retries_sent=run.retries,
        answers_lost_by_proxy=proxy.stats.lost,
        bad_gateway=proxy.stats.bad_gateway,
        refused_skipped=proxy.stats.refused,
        push_failures=sum(run.failures.values()),
        duplicates_sent=run.resends,
        heard_created=sum(run.created.values()),
        heard_created_false=run.heard_duplicate,
        created_twice=len(created_twice),
        processed=len(run.processed),
        processed_twice=len(twice),
        completed_twice_in_history=len(history_twice),
        lost=len(lost),
        gave_up=len(run.gave_up),
        kills=run.kills,
        kills_during_load=run.kills_during_load,
        in_hand_at_kills=run.in_hand_at_kills,
        sigterms=run.terms,
        load_s=run.load_seconds,
        drain_s=run.drain_seconds,
        total_s=time.monotonic() - began,
    )
    report.progress(f"push failures {dict(run.failures)}; re-sends answered {dict(run.resend_answers)}")
    report.progress(f"completions {dict(run.completions)}; history {dict(outcomes)}; items left {left}")

    # The bug under test first: an item made twice by a re-sent push is processed twice.
    assert not twice, f"{len(twice)} ids processed more than once, e.g. {list(twice.items())[:5]}"
    assert not history_twice, (
        f"{len(history_twice)} ids completed twice (sq_history): {list(history_twice.items())[:5]}"
    )
    assert not created_twice, (
        f"{len(created_twice)} ids answered 201 more than once: {list(created_twice.items())[:5]}"
    )
    assert not lost, f"{len(lost)} acknowledged pushes never processed, e.g. {lost[:5]}"
    assert not lost_history, (
        f"{len(lost_history)} acknowledged pushes not completed (sq_history): {lost_history[:5]}"
    )
    assert not strangers, f"processed ids that no producer pushed: {strangers[:5]}"
    assert not changed, f"payloads changed: {changed[:5]}"
    assert run.drained, f"not drained within {DRAIN_SECONDS:.0f} s:\n{replicas[0].logs()}"
    assert left == 0, f"{left} items left in the queue"
    assert outcomes["dead"] == 0, f"{outcomes['dead']} items died"
    assert set(history) == set(run.processed), "sq_history and the workers disagree on what was completed"
    assert not run.problems, f"{len(run.problems)} unexpected push answers, e.g. {run.problems[:5]}"
    assert not run.gave_up, f"{len(run.gave_up)} pushes never answered in {MAX_ATTEMPTS} attempts"
    assert not run.worker_problems, (
        f"{len(run.worker_problems)} worker problems, e.g. {run.worker_problems[:5]}"
    )
    assert not run.uncertain, f"completions never answered: {run.uncertain[:5]}"
    # The scenario did what it says.
    assert run.kills == size.retry_kills, run.chaos
    assert run.terms == size.retry_kills, run.chaos
    assert run.kills_during_load >= 1, f"no kill -9 during the push load: {run.chaos}"
    assert proxy.stats.lost > 0, proxy.stats
    assert run.retries > 0, run.failures
    assert run.resend_answers["200"] > 0, dict(run.resend_answers)
