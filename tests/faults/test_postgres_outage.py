"""The private PostgreSQL cluster stopped (pg_ctl stop -m immediate) and frozen (SIGSTOP of every
one of its processes) under a running service:

- requests answer 503 `DatabaseUnavailable` within the DB timeout plus a margin, with Retry-After
  and without the driver's words;
- requests already under way when it happens (pushes, a long-poll pop) answer within that bound too;
- once the cluster is back (started, or SIGCONT), a push answers 201 within 5 s;
- every push that was answered 201 is there afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import (
    ANSWER_BOUND,
    DB_TIMEOUT,
    RECOVERY_BOUND,
    VARIANTS,
    Answer,
    PrivatePostgres,
    Reporter,
    ServiceFactory,
    driver_text_in,
    json_or_none,
    sizes,
)

CLIENT_TIMEOUT = ANSWER_BOUND + 10  # long enough to see how late a late answer is
LONG_POLL_SECONDS = 3
IN_FLIGHT_CLIENTS = 8
POPPERS = 2  # of those; the others push
UNAVAILABLE = {"DatabaseUnavailable"}


async def ask(http: httpx.AsyncClient, what: str, method: str, path: str, body: Any = None) -> Answer:
    started = time.monotonic()
    try:
        response = await http.request(method, path, json=body, timeout=CLIENT_TIMEOUT)
    except httpx.HTTPError as exc:
        return Answer(what, None, time.monotonic() - started, error=repr(exc))
    return Answer(
        what,
        response.status_code,
        time.monotonic() - started,
        body=json_or_none(response),
        text=response.text,
        retry_after=response.headers.get("retry-after"),
    )


def outage_problems(answer: Answer, bound: float, private_words: tuple[str, ...]) -> list[str]:
    """What is wrong with an answer given while the database is down or frozen."""
    problems = []
    if answer.status is None:
        return [f"{answer.describe()} (bound {bound:.1f} s)"]
    if answer.status != 503:
        problems.append(f"status {answer.status}, not 503")
    if answer.seconds > bound:
        problems.append(f"answered after {answer.seconds:.2f} s > {bound:.1f} s")
    body = answer.body if isinstance(answer.body, dict) else {}
    if body.get("error") not in UNAVAILABLE:
        problems.append(f"error {body.get('error')!r}, not one of {sorted(UNAVAILABLE)}")
    leaked = driver_text_in(" ".join(str(v) for k, v in body.items() if k != "error"), private_words)
    if leaked:
        problems.append(f"driver text {leaked} in the body")
    if answer.status == 503 and not answer.retry_after:
        problems.append("no Retry-After")
    return [f"{answer.describe()}: {', '.join(problems)}"] if problems else []


@dataclass
class OutageCycle:
    kind: str
    in_flight: list[Answer] = field(default_factory=list)  # timed from the moment of the outage
    long_poll: Answer | None = None  # timed from its start
    probes: list[Answer] = field(default_factory=list)
    recovery: Answer | None = None  # the first 201, timed from the moment the cluster was back
    recovery_attempts: int = 0
    acked: list[str] = field(default_factory=list)
    missing_after: list[str] = field(default_factory=list)
    pids_frozen: int = 0


async def outage_cycle(
    base: str,
    queue: str,
    kind: str,
    break_db: Callable[[], int],
    mend_db: Callable[[], None],
) -> OutageCycle:
    cycle = OutageCycle(kind)
    empty_queue = f"{queue}-empty"
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=base, limits=limits) as http:
        warm = await ask(http, "push", "POST", "/push", {"queue": queue, "payload": "warm"})
        assert warm.status == 201, warm.describe()
        cycle.acked.append(warm.body["id"])

        # Under way when the outage comes: pushers and poppers in a loop (each sends until the
        # outage is in place; what it sent before and got answered after is timed from then), and
        # a long-poll pop.
        outage_at: list[float] = []

        async def looper(n: int, popper: bool) -> None:
            for seq in range(100_000):  # bounded; stops once the outage is in place
                if outage_at:
                    return
                if popper:
                    body: dict[str, Any] = {"queue": queue, "max_items": 3, "lease_seconds": 300}
                    answer = await ask(http, f"pop {n}.{seq}", "POST", "/pop", body)
                else:
                    body = {"queue": queue, "payload": seq}
                    answer = await ask(http, f"push {n}.{seq}", "POST", "/push", body)
                if outage_at:
                    answer.seconds = time.monotonic() - outage_at[0]
                    cycle.in_flight.append(answer)
                if answer.status == 201:
                    cycle.acked.append(answer.body["id"])
                elif answer.status != 200 and not outage_at:
                    # The outage is being made (pg_ctl stop, SIGSTOPs): a 503 may come before
                    # it is complete; anything else is wrong.
                    assert answer.status == 503, f"before the outage: {answer.describe()}"
                    cycle.in_flight.append(answer)
                    return

        long_poll = asyncio.create_task(
            ask(
                http,
                "long-poll pop",
                "POST",
                "/pop",
                {"queue": empty_queue, "wait_seconds": LONG_POLL_SECONDS},
            )
        )
        loopers = [asyncio.create_task(looper(n, popper=n < POPPERS)) for n in range(IN_FLIGHT_CLIENTS)]
        await asyncio.sleep(0.5)
        cycle.pids_frozen = await asyncio.to_thread(break_db)
        outage_at.append(time.monotonic())

        # New requests while it is down (concurrently: each is bounded on its own).
        item = cycle.acked[0]
        cycle.probes = list(
            await asyncio.gather(
                ask(http, "push", "POST", "/push", {"queue": queue, "payload": "during"}),
                ask(http, "push/batch", "POST", "/push/batch", {"queue": queue, "items": [{"payload": 1}]}),
                ask(http, "pop", "POST", "/pop", {"queue": queue, "max_items": 5}),
                ask(http, "GET /queues", "GET", "/queues"),
                ask(http, "GET /queues/{name}", "GET", f"/queues/{queue}"),
                ask(http, "GET /items/{id}", "GET", f"/items/{item}"),
                ask(http, "complete", "DELETE", f"/items/{item}"),
                ask(http, "GET /readyz", "GET", "/readyz"),
            )
        )
        cycle.long_poll = await long_poll
        await asyncio.gather(*loopers)

        # Back: a push answers 201 within RECOVERY_BOUND (and we keep trying a while longer to
        # report how late it is when it is not).
        await asyncio.to_thread(mend_db)
        back = time.monotonic()
        for attempt in range(10_000):
            cycle.recovery_attempts = attempt + 1
            answer = await ask(
                http, "push after recovery", "POST", "/push", {"queue": queue, "payload": "back"}
            )
            if answer.status == 201:
                answer.seconds = time.monotonic() - back
                cycle.recovery = answer
                cycle.acked.append(answer.body["id"])
                break
            if time.monotonic() - back > RECOVERY_BOUND + 15:
                answer.seconds = time.monotonic() - back
                cycle.recovery = answer
                break
            await asyncio.sleep(0.05)

        # Every push answered 201 is there.
        for item_id in cycle.acked:
            got = await ask(http, "GET /items/{id}", "GET", f"/items/{item_id}")
            if got.status != 200:
                cycle.missing_after.append(got.describe())
    return cycle


def check(cycle: OutageCycle, private_words: tuple[str, ...]) -> list[str]:
    problems: list[str] = []
    for answer in cycle.in_flight:
        if answer.status in (200, 201):
            if answer.seconds > ANSWER_BOUND:
                problems.append(f"in flight: {answer.describe()} > {ANSWER_BOUND:.1f} s after the outage")
        else:
            problems += ["in flight: " + p for p in outage_problems(answer, ANSWER_BOUND, private_words)]
    if cycle.long_poll is not None:
        lp = cycle.long_poll
        bound = LONG_POLL_SECONDS + ANSWER_BOUND
        if lp.status == 200 and lp.body == {"items": [], "completed": []}:
            if lp.seconds > bound:
                problems.append(f"{lp.describe()} > {bound:.1f} s")
        else:
            problems += outage_problems(lp, bound, private_words)
    for probe in cycle.probes:
        problems += outage_problems(probe, ANSWER_BOUND, private_words)
    recovery = cycle.recovery
    if recovery is None or recovery.status != 201:
        problems.append(f"no 201 after the cluster was back: {recovery.describe() if recovery else None}")
    elif recovery.seconds > RECOVERY_BOUND:
        problems.append(
            f"recovered only {recovery.seconds:.2f} s after the cluster was back (> {RECOVERY_BOUND} s)"
        )
    problems += [f"acknowledged push missing afterwards: {m}" for m in cycle.missing_after]
    return problems


def figures(cycles: list[OutageCycle]) -> dict[str, Any]:
    probes = [a for c in cycles for a in c.probes]
    in_flight = [a for c in cycles for a in c.in_flight]
    recoveries = [c.recovery.seconds for c in cycles if c.recovery is not None and c.recovery.status == 201]
    return {
        "cycles": len(cycles),
        "probes": len(probes),
        "probes_503": sum(a.status == 503 for a in probes),
        "probes_unanswered": sum(a.status is None for a in probes),
        "probe_max_s": max((a.seconds for a in probes), default=0.0),
        "in_flight": len(in_flight),
        "in_flight_2xx": sum(a.status in (200, 201) for a in in_flight),
        "in_flight_503": sum(a.status == 503 for a in in_flight),
        "in_flight_max_s": max((a.seconds for a in in_flight), default=0.0),
        "long_poll": ", ".join(
            f"{c.long_poll.status} in {c.long_poll.seconds:.2f} s" for c in cycles if c.long_poll
        ),
        "recovered": f"{len(recoveries)}/{len(cycles)}",
        "recovery_max_s": max(recoveries, default=0.0),
        "acked": sum(len(c.acked) for c in cycles),
        "missing": sum(len(c.missing_after) for c in cycles),
        "db_timeout_s": DB_TIMEOUT,
        "bound_s": ANSWER_BOUND,
    }


def run_outages(
    kind: str,
    variant: str,
    private_postgres: PrivatePostgres,
    services: ServiceFactory,
    report: Reporter,
) -> None:
    size = sizes(variant)
    pg = private_postgres
    service = services(pg.url, name=f"outage-{kind}")
    private_words = (f":{pg.port}", str(pg.root))
    queue = f"outage-{kind}-{uuid4().hex[:10]}"

    def break_db() -> int:
        if kind == "stopped":
            pg.stop()
            return 0
        return pg.freeze()

    def mend_db() -> None:
        if kind == "stopped":
            pg.start()
        else:
            pg.thaw()

    cycles: list[OutageCycle] = []
    problems: list[str] = []
    for n in range(size.outage_cycles):
        cycle = asyncio.run(outage_cycle(service.base, queue, kind, break_db, mend_db))
        cycles.append(cycle)
        found = check(cycle, private_words)
        problems += [f"cycle {n + 1}: {p}" for p in found]
        timings = ", ".join(f"{a.what}={a.status}/{a.seconds:.2f}s" for a in cycle.probes)
        in_flight = ", ".join(f"{a.what}={a.status}/{a.seconds:.2f}s" for a in cycle.in_flight)
        recovery = cycle.recovery
        report.progress(
            f"{kind} cycle {n + 1}/{size.outage_cycles}: {len(found)} problems; probes: {timings}; "
            f"in flight (from the outage): {in_flight}; long-poll: "
            f"{cycle.long_poll.status if cycle.long_poll else None}; recovery: "
            f"{recovery.status if recovery else None} after {recovery.seconds if recovery else 0:.2f} s"
        )
    values = figures(cycles)
    if kind == "frozen":
        values["processes_frozen"] = max(c.pids_frozen for c in cycles)
    report.figures(f"postgresql {kind}", **values)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])


@pytest.mark.parametrize("variant", VARIANTS)
def test_postgres_stopped_answers_503_at_once_and_recovers(
    variant: str, private_postgres: PrivatePostgres, services: ServiceFactory, report: Reporter
) -> None:
    run_outages("stopped", variant, private_postgres, services, report)


@pytest.mark.parametrize("variant", VARIANTS)
def test_postgres_frozen_answers_503_within_the_timeout_and_recovers(
    variant: str, private_postgres: PrivatePostgres, services: ServiceFactory, report: Reporter
) -> None:
    run_outages("frozen", variant, private_postgres, services, report)


@pytest.mark.faults
def test_a_service_started_while_postgres_is_down_becomes_ready_when_it_is_up(
    private_postgres: PrivatePostgres, services: ServiceFactory
) -> None:
    private_postgres.stop()
    service = services(private_postgres.url, start=False).start(ready_timeout=None)  # alive, not ready
    with httpx.Client(base_url=service.base, timeout=CLIENT_TIMEOUT) as http:
        for answer in (http.get("/readyz"), http.post("/push", json={"payload": 1})):
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"] == "DatabaseUnavailable"
            assert answer.headers["Retry-After"] == "1"
            assert not driver_text_in(answer.text, (f":{private_postgres.port}", str(private_postgres.root)))
    private_postgres.start()
    service.wait_ready(60)
    with httpx.Client(base_url=service.base, timeout=CLIENT_TIMEOUT) as http:
        assert http.post("/push", json={"payload": 1}).status_code == 201
    assert service.process is not None
    assert service.process.poll() is None
    assert service.starts == 1  # migrated and ready in the process that started first
