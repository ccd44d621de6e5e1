"""Scale-out: three `simplequeue serve` replicas over one PostgreSQL database behind a small
round-robin proxy (tests/faults/proxy.py, losing nothing on purpose: an HTTP load balancer), with
8 producers and 16 workers of the Python SDK going through it. Under that load one replica is
kill -9'd and restarted, then another is stopped gracefully (SIGTERM: it drains) and restarted.

Producers push with ids of their own through `AsyncClient.push` (the SDK retries transport
failures and 503s with the same id); a push that still fails (the proxy's 502 when a replica dies
with the request in hand, or the SDK's retries ran out) is sent again with the same id, so that a
retried push never makes a second item. Workers are the SDK's `Worker` (pop, handle, complete in
batches on the next pop); each lease a handler receives is recorded with the lease token and its
expiry as the database set it.

Every replica's long-poll re-check (SIMPLEQUEUE_WAIT_RECHECK_SECONDS) is set far beyond the run, so
that a waiter is woken by a push through another replica only by PostgreSQL's NOTIFY. A dedicated
check long-polls one replica (wait 20 s, on a queue of its own) and pushes through another: the
item must come back in that pop. It runs for every pair before the faults, after the restart of
the kill -9'd replica (its LISTEN connection is new) and while a replica is down.

Asserted once drained: every acknowledged push completed exactly once (sq_history, read from
PostgreSQL) or still in sq_items; no lease handed out while an earlier lease of the same item
held (by the database's lease expiries); nothing processed that no producer pushed; every NOTIFY
check answered with its item. Figures: pushes, pops, retries, 5xx and transport errors seen by the
clients, the proxy's counts, and how long each signalled replica took to serve again.

PostgreSQL only: replicas over one SQLite file are not a deployment.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

import asyncpg
import httpx
import pytest
from simplequeue.client import NO_RETRY, AsyncClient, Item, SimplequeueError, Unavailable, Worker

from tests.faults.helpers import (
    VARIANTS,
    Pop,
    PrivatePostgres,
    Reporter,
    Service,
    ServiceFactory,
    early_redeliveries,
    sizes,
)
from tests.faults.proxy import LossyProxy

REPLICAS = 3
PRODUCERS = 8
WORKERS = 16
WORKER_CONCURRENCY = 2  # handlers of one worker at a time (so pops of 1 or 2 items)
LEASE_SECONDS = 5  # short: a lease whose pop answer was lost comes back within the drain
WAIT_SECONDS = 2  # the workers' long-poll (below the proxy's 20 s bound on a backend's answer)
SECONDS_PER_ITEM = 1 / 250  # producers' pacing, all together: the faults find load
MIN_PUSH_RATE = 10  # pushes a second, all together, below which the producers' deadline passes
MAX_PUSH_CALLS = 20  # per item, each with the SDK's own retries inside
CLIENT_TIMEOUT = 25.0  # above the proxy's bound on a backend's answer, so a stuck one is a 502
DOWN_SECONDS = (0.3, 1.2)  # a signalled replica stays down at least this long before its restart
RECHECK_SECONDS = 3600  # no long-poll re-check during the run: only NOTIFY wakes across replicas
NOTIFY_WAIT = 20  # the dedicated check's long-poll
NOTIFY_SETTLE = 1.0  # after sending that pop, before the push: it is waiting by then
DRAIN_SECONDS = 60.0
WORKER_RUNS = 200  # a worker's run() ended by an error is started again, this many times at most


def no_answer_lost(method: str, path: str) -> bool:
    return False


# -- what the clients saw ------------------------------------------------------------------------


@dataclass
class Tally:
    """Every request the clients sent (the SDK's retries included), by what it did, and what came
    back that was not an answer of the service's making."""

    requests: Counter[str] = field(default_factory=Counter)
    server_errors: Counter[str] = field(default_factory=Counter)  # "502 POST /pop": 1
    transport_errors: Counter[str] = field(default_factory=Counter)  # "ReadError POST /push": 1

    def errors(self) -> int:
        return sum(self.server_errors.values()) + sum(self.transport_errors.values())


def route(request: httpx.Request) -> str:
    path = request.url.path
    if path.startswith("/items/") and path != "/items/complete":
        path = "/items/{id}" + ("/" + path.split("/", 3)[3] if path.count("/") > 2 else "")
    return f"{request.method} {path}"


class CountingTransport(httpx.AsyncBaseTransport):
    """httpx's transport, counting as it goes: given to the SDK's AsyncClient."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=8))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        what = route(request)
        self.tally.requests[what] += 1
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TransportError as exc:
            self.tally.transport_errors[f"{type(exc).__name__} {what}"] += 1
            raise
        if response.status_code >= 500:
            self.tally.server_errors[f"{response.status_code} {what}"] += 1
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Notified:
    """One NOTIFY check: a pop waiting on `waiter`, a push through `pusher`."""

    phase: str
    waiter: str
    pusher: str
    got: bool = False
    problem: str = ""
    seconds: float = 0.0  # from the push's answer to the pop's (a figure, never asserted)


@dataclass
class Outage:
    replica: str
    how: str  # "kill -9" or "SIGTERM"
    during_load: bool
    in_hand: int  # requests the proxy had in that replica's hands as the signal went
    stop_seconds: float = 0.0  # SIGTERM: until the process exited (it drains first)
    exit_code: int | None = None
    ready_seconds: float = 0.0  # from the signal until it answered /readyz again
    serving_seconds: float = 0.0  # from the signal until the proxy relayed an answer of its again
    errors_seen: int = 0  # 5xx and transport errors the clients saw from the signal to serving again


@dataclass
class Run:
    total: int
    tally: Tally = field(default_factory=Tally)
    sent: dict[str, Any] = field(default_factory=dict)  # id -> payload, every id pushed at all
    acked: dict[str, Any] = field(default_factory=dict)  # id -> payload, pushes answered 2xx
    push_calls: int = 0  # AsyncClient.push calls (each may send several requests)
    push_recalls: int = 0  # of those, calls again with the same id after a failed call
    push_failures: Counter[str] = field(default_factory=Counter)  # failed calls, by code
    heard_not_created: int = 0  # answered created: false (an earlier attempt had committed)
    gave_up: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    pops: list[Pop] = field(default_factory=list)  # every lease a handler received
    handled: Counter[str] = field(default_factory=Counter)
    handled_payload: dict[str, Any] = field(default_factory=dict)
    worker_restarts: Counter[str] = field(default_factory=Counter)  # run() ended by an error, by code
    worker_warnings: Counter[str] = field(default_factory=Counter)  # the SDK worker's warnings
    notified: list[Notified] = field(default_factory=list)
    outages: list[Outage] = field(default_factory=list)
    load_seconds: float = 0.0
    drain_seconds: float = 0.0
    drained: bool = False


class WarningCount(logging.Handler):
    """Counts the SDK worker's warnings (a failed pop, completions left to their leases), by kind."""

    def __init__(self, run: Run) -> None:
        super().__init__(logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.worker_warnings[re.sub(r"[0-9a-f-]{36}|\d+", "N", record.getMessage())[:70]] += 1


@contextmanager
def counting_worker_warnings(run: Run) -> Iterator[None]:
    logger = logging.getLogger("simplequeue.client.worker")
    handler = WarningCount(run)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def sdk_client(base: str, run: Run) -> AsyncClient:
    return AsyncClient(base, transport=CountingTransport(run.tally), timeout=CLIENT_TIMEOUT)


# -- load ----------------------------------------------------------------------------------------


async def producer(n: int, base: str, queue: str, count: int, run: Run, until: float) -> None:
    rng = random.Random(1000 + n)
    started = time.monotonic()
    async with sdk_client(base, run) as client:
        for seq in range(count):
            # Paced, so that the load lasts while replicas die; a slow push is not made up for.
            await asyncio.sleep(max(0.0, started + seq * SECONDS_PER_ITEM * PRODUCERS - time.monotonic()))
            if time.monotonic() > until:
                run.problems.append(f"producer {n} stopped at its deadline after {seq} items")
                return
            item_id = str(uuid4())
            payload = {"producer": n, "seq": seq}
            run.sent[item_id] = payload
            for call in range(MAX_PUSH_CALLS):
                if call:
                    run.push_recalls += 1
                    await asyncio.sleep(min(1.0, 0.05 * 2**call) * rng.uniform(0.5, 1.0))
                run.push_calls += 1
                try:
                    result = await client.push(payload, queue=queue, id=item_id)
                except SimplequeueError as exc:
                    # No answer after the SDK's retries, a 503, or a 5xx of the proxy's (502: the
                    # replica died with the push in hand, so it may have committed): the same id again.
                    if isinstance(exc, Unavailable) or (exc.status or 0) >= 500:
                        run.push_failures[exc.code] += 1
                        continue
                    run.problems.append(f"push {item_id}: {exc}")
                    break
                if result.id != item_id:
                    run.problems.append(f"push {item_id} answered with id {result.id}")
                    break
                run.acked[item_id] = payload
                run.heard_not_created += not result.created
                break
            else:
                run.gave_up.append(item_id)


async def worker(
    n: int, base: str, queue: str, run: Run, current: dict[int, Worker], stop: asyncio.Event
) -> None:
    """The SDK's Worker; started again when its run() ends with an error (a supervisor would)."""
    rng = random.Random(2000 + n)

    async def handle(item: Item) -> None:
        run.pops.append(Pop(item.id, item.lease_token, item.lease_expires_at, f"worker{n}"))
        run.handled[item.id] += 1
        run.handled_payload[item.id] = item.payload
        await asyncio.sleep(rng.uniform(0, 0.004))  # the work

    async with sdk_client(base, run) as client:
        for _ in range(WORKER_RUNS):
            if stop.is_set():
                return
            loop = Worker(
                client,
                queue,
                handle,
                concurrency=WORKER_CONCURRENCY,
                lease_seconds=LEASE_SECONDS,
                wait_seconds=WAIT_SECONDS,
                idle_pause_seconds=0.2,
            )
            current[n] = loop
            try:
                await loop.run()
                return  # stopped
            except SimplequeueError as exc:
                run.worker_restarts[f"{exc.status} {exc.code}"] += 1
                await asyncio.sleep(0.1)


# -- NOTIFY across replicas ----------------------------------------------------------------------


async def notify_check(waiter: Service, pusher: Service, phase: str, run: Run) -> None:
    """A pop waits NOTIFY_WAIT seconds on `waiter`, on a queue of its own; an item is pushed through
    `pusher`. Only NOTIFY can wake that pop (no re-check runs meanwhile): it must return the item."""
    check = Notified(phase, waiter.name, pusher.name)
    run.notified.append(check)
    queue = f"notify-{uuid4().hex[:12]}"
    async with (
        AsyncClient(waiter.base, timeout=10, retry=NO_RETRY) as waiting,
        AsyncClient(pusher.base, timeout=10, retry=NO_RETRY) as pushing,
    ):
        await pushing.put_queue(queue, lease_seconds=60)
        pop = asyncio.create_task(waiting.pop(queue, max_items=1, wait_seconds=NOTIFY_WAIT, lease_seconds=60))
        try:
            await asyncio.sleep(NOTIFY_SETTLE)
            if pop.done():
                failure = pop.exception()
                check.problem = f"the pop answered before the push: {failure or pop.result()!r}"
                return
            item_id = str(uuid4())
            await pushing.push({"check": phase}, queue=queue, id=item_id)
            pushed = time.monotonic()
            items = await asyncio.wait_for(pop, NOTIFY_WAIT + 15)  # bounded even if the wait is not
            check.seconds = time.monotonic() - pushed
            if [i.id for i in items] != [item_id]:
                check.problem = f"the pop answered {[i.id for i in items]} after {check.seconds:.1f} s"
                return
            check.got = True
            await waiting.complete(items[0])
            await pushing.delete_queue(queue)
        except (SimplequeueError, TimeoutError) as exc:
            check.problem = check.problem or repr(exc)
        finally:
            if not pop.done():
                pop.cancel()
            await asyncio.gather(pop, return_exceptions=True)


async def notify_checks(pairs: list[tuple[Service, Service]], phase: str, run: Run) -> None:
    await asyncio.gather(*(notify_check(w, p, phase, run) for w, p in pairs))


# -- faults --------------------------------------------------------------------------------------


async def back_in_service(
    replica: Service, proxy: LossyProxy, run: Run, outage: Outage, signalled: float, errors_before: int
) -> None:
    """Start it again; time until ready and until the proxy relays an answer of its."""
    answered = proxy.answered[replica.port]
    await asyncio.to_thread(replica.start)
    outage.ready_seconds = time.monotonic() - signalled
    for _ in range(3000):  # 30 s at most; the load (or the drain's pops) goes through it
        if proxy.answered[replica.port] > answered:
            break
        await asyncio.sleep(0.01)
    outage.serving_seconds = time.monotonic() - signalled
    outage.errors_seen = run.tally.errors() - errors_before


async def chaos(
    replicas: list[Service],
    proxy: LossyProxy,
    run: Run,
    cycles: int,
    load_done: asyncio.Event,
    report: Reporter,
    seed: int,
) -> None:
    """Before the faults, a NOTIFY check per ordered pair of replicas. Per cycle: once a share of
    the pushes was acknowledged, kill -9 one replica (while the proxy has a request in its hands,
    if one comes within a second); NOTIFY between the other two while it is down; restart it, and
    NOTIFY both ways between it and another. Later, SIGTERM another replica (it drains), NOTIFY
    between the two left, restart it."""
    rng = random.Random(seed)
    started = time.monotonic()
    await notify_checks([(a, b) for a in replicas for b in replicas if a is not b], "before the faults", run)
    report.progress(f"NOTIFY checks before the faults: {sum(c.got for c in run.notified)} of 6 woken")

    async def when_acked(share: float) -> None:
        for _ in range(100_000):  # bounded; the producers end by their own deadline
            if len(run.acked) >= share * run.total or load_done.is_set():
                return
            await asyncio.sleep(0.02)

    for cycle in range(cycles):
        killed = replicas[cycle % REPLICAS]
        stopped = replicas[(cycle + 1) % REPLICAS]
        third = replicas[(cycle + 2) % REPLICAS]

        await when_acked((cycle + 0.25) / cycles)
        for _ in range(500):
            if proxy.in_flight[killed.port] > 0 or load_done.is_set():
                break
            await asyncio.sleep(0.002)
        outage = Outage(killed.name, "kill -9", not load_done.is_set(), proxy.in_flight[killed.port])
        errors_before = run.tally.errors()
        signalled = time.monotonic()
        await asyncio.to_thread(killed.kill)
        run.outages.append(outage)
        at = f"{signalled - started:.1f} s, {outage.in_hand} in hand, {len(run.acked):,} acknowledged"
        await asyncio.gather(
            asyncio.sleep(rng.uniform(*DOWN_SECONDS)),
            notify_checks([(stopped, third), (third, stopped)], f"{killed.name} killed", run),
        )
        await back_in_service(killed, proxy, run, outage, signalled, errors_before)
        report.progress(
            f"kill -9 {killed.name} at {at}: ready after {outage.ready_seconds:.1f} s,"
            f" serving after {outage.serving_seconds:.1f} s, {outage.errors_seen} errors seen"
        )
        await notify_checks([(killed, third), (third, killed)], f"{killed.name} restarted", run)

        await when_acked((cycle + 0.6) / cycles)
        outage = Outage(stopped.name, "SIGTERM", not load_done.is_set(), proxy.in_flight[stopped.port])
        errors_before = run.tally.errors()
        signalled = time.monotonic()
        await asyncio.to_thread(stopped.stop)
        outage.stop_seconds = time.monotonic() - signalled
        assert stopped.process is not None
        outage.exit_code = stopped.process.returncode
        run.outages.append(outage)
        at = f"{signalled - started:.1f} s, {outage.in_hand} in hand, {len(run.acked):,} acknowledged"
        await asyncio.gather(
            asyncio.sleep(rng.uniform(*DOWN_SECONDS)),
            notify_checks([(killed, third), (third, killed)], f"{stopped.name} stopped", run),
        )
        await back_in_service(stopped, proxy, run, outage, signalled, errors_before)
        report.progress(
            f"SIGTERM {stopped.name} at {at}: exited {outage.exit_code} after {outage.stop_seconds:.1f} s,"
            f" serving after {outage.serving_seconds:.1f} s, {outage.errors_seen} errors seen"
        )


async def scenario(
    replicas: list[Service], queue: str, total: int, cycles: int, report: Reporter
) -> tuple[Run, LossyProxy]:
    run = Run(total)
    started = time.monotonic()
    until = started + total / MIN_PUSH_RATE + 120  # the producers' deadline
    load_done = asyncio.Event()
    stop_workers = asyncio.Event()
    current: dict[int, Worker] = {}

    async with (
        LossyProxy([r.port for r in replicas], lossy=no_answer_lost, loss=0.0, seed=5) as proxy,
        AsyncClient(replicas[-1].base, timeout=10) as admin,
    ):
        base = f"http://127.0.0.1:{proxy.port}"
        await admin.put_queue(
            queue,
            max_attempts=1000,
            lease_seconds=LEASE_SECONDS,
            retention_seconds=86400,  # history is what proves exactly once
            dedup_window_seconds=3600,
        )

        async def produce() -> None:
            shares = [total // PRODUCERS + (n < total % PRODUCERS) for n in range(PRODUCERS)]
            try:
                await asyncio.gather(*(producer(n, base, queue, c, run, until) for n, c in enumerate(shares)))
            finally:
                run.load_seconds = time.monotonic() - started
                load_done.set()

        async def drain() -> None:
            await load_done.wait()
            await chaos_task  # every replica is back before the drain is judged
            report.progress(f"pushed in {run.load_seconds:.1f} s; draining")
            deadline = time.monotonic() + DRAIN_SECONDS
            try:
                while time.monotonic() < deadline:
                    stats = await admin.stats(queue)
                    if stats.ready + stats.leased + stats.delayed + stats.retrying == 0:
                        run.drained = True
                        return
                    await asyncio.sleep(0.25)
            finally:
                run.drain_seconds = time.monotonic() - started - run.load_seconds
                stop_workers.set()
                for loop in current.values():
                    loop.stop()

        async def work() -> None:
            tasks = [
                asyncio.create_task(worker(n, base, queue, run, current, stop_workers))
                for n in range(WORKERS)
            ]
            await stop_workers.wait()
            for loop in current.values():
                loop.stop()
            _, late = await asyncio.wait(tasks, timeout=WAIT_SECONDS + CLIENT_TIMEOUT + 10)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if late:
                run.problems.append(f"{len(late)} workers did not stop")

        chaos_task = asyncio.create_task(chaos(replicas, proxy, run, cycles, load_done, report, seed=29))
        try:
            with counting_worker_warnings(run):
                await asyncio.gather(produce(), drain(), work())
        finally:
            stop_workers.set()
            for loop in current.values():
                loop.stop()
            if not chaos_task.done():
                chaos_task.cancel()
                await asyncio.gather(chaos_task, return_exceptions=True)
    return run, proxy


async def database_counts(url: str, queue: str) -> tuple[Counter[str], set[str], Counter[str]]:
    """From PostgreSQL itself: completed records per id, ids still in sq_items, records per outcome."""
    connection = await asyncpg.connect(url, timeout=30)
    try:
        completed = await connection.fetch(
            "SELECT id::text AS id, count(*) AS n FROM sq_history"
            " WHERE queue = $1 AND outcome = 'completed' GROUP BY id",
            queue,
        )
        present = await connection.fetch("SELECT id::text AS id FROM sq_items WHERE queue = $1", queue)
        outcomes = await connection.fetch(
            "SELECT outcome, count(*) AS n FROM sq_history WHERE queue = $1 GROUP BY outcome", queue
        )
    finally:
        await connection.close()
    return (
        Counter({r["id"]: r["n"] for r in completed}),
        {r["id"] for r in present},
        Counter({r["outcome"]: r["n"] for r in outcomes}),
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_replicas_behind_a_proxy_lose_nothing_and_wake_each_others_waiters(
    variant: str, private_postgres: PrivatePostgres, services: ServiceFactory, report: Reporter
) -> None:
    size = sizes(variant)
    queue = f"replicas-{uuid4().hex[:12]}"
    began = time.monotonic()
    env = {"SIMPLEQUEUE_WAIT_RECHECK_SECONDS": str(RECHECK_SECONDS)}
    replicas = [
        services(private_postgres.url, name=f"replica{n}", env=env, start=False) for n in range(REPLICAS)
    ]
    with ThreadPoolExecutor(REPLICAS) as starting:  # together: they race to migrate, one does
        list(starting.map(Service.start, replicas))
    report.progress(f"{REPLICAS} replicas ready in {time.monotonic() - began:.1f} s")

    run, proxy = asyncio.run(scenario(replicas, queue, size.replica_items, size.replica_cycles, report))
    completed, present, outcomes = asyncio.run(database_counts(private_postgres.url, queue))

    lost = [i for i in run.acked if completed[i] == 0 and i not in present]
    twice = {i: n for i, n in completed.items() if n > 1}
    early = early_redeliveries(run.pops, LEASE_SECONDS)
    strangers = [i for i in run.handled if i not in run.sent]
    changed = [i for i, p in run.handled_payload.items() if i in run.sent and p != run.sent[i]]
    unwoken = [c for c in run.notified if not c.got]
    kills = [o for o in run.outages if o.how == "kill -9"]
    terms = [o for o in run.outages if o.how == "SIGTERM"]
    report.figures(
        "replicas behind a proxy",
        items=size.replica_items,
        replicas=REPLICAS,
        producers=PRODUCERS,
        workers=WORKERS,
        acked=len(run.acked),
        push_calls=run.push_calls,
        push_requests=run.tally.requests["POST /push"],
        push_sdk_retries=run.tally.requests["POST /push"] - run.push_calls,
        push_calls_again=run.push_recalls,
        heard_created_false=run.heard_not_created,
        requests=sum(run.tally.requests.values()),
        client_5xx=sum(run.tally.server_errors.values()),
        client_transport_errors=sum(run.tally.transport_errors.values()),
        proxy_requests=proxy.stats.requests,
        proxy_bad_gateway=proxy.stats.bad_gateway,
        proxy_refused_skipped=proxy.stats.refused,
        leases=len(run.pops),
        handled_again=sum(n - 1 for n in run.handled.values()),
        leases_overlapping=len(early),
        completed=sum(completed.values()),
        completed_twice=len(twice),
        lost=len(lost),
        left=len(present),
        worker_restarts=sum(run.worker_restarts.values()),
        notify_checks=len(run.notified),
        notify_woken=len(run.notified) - len(unwoken),
        notify_slowest_s=max((c.seconds for c in run.notified if c.got), default=0.0),
        kills=len(kills),
        kill_in_hand=sum(o.in_hand for o in kills),
        kill_ready_s=max((o.ready_seconds for o in kills), default=0.0),
        kill_serving_s=max((o.serving_seconds for o in kills), default=0.0),
        kill_errors_seen=sum(o.errors_seen for o in kills),
        sigterms=len(terms),
        sigterm_stop_s=max((o.stop_seconds for o in terms), default=0.0),
        sigterm_serving_s=max((o.serving_seconds for o in terms), default=0.0),
        sigterm_errors_seen=sum(o.errors_seen for o in terms),
        load_s=run.load_seconds,
        drain_s=run.drain_seconds,
        total_s=time.monotonic() - began,
    )
    report.progress(f"5xx seen by clients {dict(run.tally.server_errors)}")
    report.progress(f"transport errors seen by clients {dict(run.tally.transport_errors)}")
    report.progress(
        f"push calls failed {dict(run.push_failures)}; worker restarts {dict(run.worker_restarts)}"
    )
    report.progress(f"SDK worker warnings {dict(run.worker_warnings)}; history {dict(outcomes)}")
    names = {r.port: r.name for r in replicas}
    report.progress(
        f"proxy answers per replica { {names[p]: n for p, n in proxy.answered.items()} };"
        f" died with a request in hand { {names[p]: n for p, n in proxy.failed.items()} }"
    )

    assert not lost, f"{len(lost)} acknowledged pushes neither completed nor present, e.g. {lost[:5]}"
    assert not twice, f"{len(twice)} ids completed more than once: {list(twice.items())[:5]}"
    assert not early, "leases handed out while an earlier one held: " + "; ".join(
        f"{a.id}: {a.worker} until {a.expires.isoformat()}, {b.worker} {s:.3f} s early"
        for a, b, s in early[:5]
    )
    assert not unwoken, "long-polls not woken by a push through another replica: " + "; ".join(
        f"{c.phase}: waiting on {c.waiter}, pushed through {c.pusher}: {c.problem}" for c in unwoken
    )
    assert not strangers, f"handled ids that no producer pushed: {strangers[:5]}"
    assert not changed, f"payloads changed: {changed[:5]}"
    assert not run.gave_up, f"{len(run.gave_up)} pushes never acknowledged in {MAX_PUSH_CALLS} calls"
    assert not run.problems, f"{len(run.problems)} problems, e.g. {run.problems[:5]}"
    assert run.drained, f"not drained within {DRAIN_SECONDS:.0f} s:\n{replicas[-1].logs()}"
    assert not present, f"{len(present)} items left after the drain"
    assert outcomes["dead"] == 0, f"{outcomes['dead']} items died"
    assert set(completed) == set(run.acked), "completed ids are not the acknowledged ones"
    # The scenario did what it says.
    assert len(kills) == size.replica_cycles, run.outages
    assert len(terms) == size.replica_cycles, run.outages
    assert kills[0].during_load, f"the kill -9 came after the load: {run.outages}"
    assert terms[0].during_load, f"the SIGTERM came after the load: {run.outages}"
    # uvicorn re-raises the SIGTERM once it has shut down: 0 or -15, never the -9 of Service.stop's
    # fallback when a process does not stop.
    assert all(o.exit_code in (0, -signal.SIGTERM) for o in terms), f"a graceful stop did not end: {terms}"
    assert len(run.notified) == 6 + 6 * size.replica_cycles, len(run.notified)
