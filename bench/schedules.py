"""Schedules, measured: many schedules firing every minute across replicas, killed mid-firing.

A fresh PostgreSQL database, REPLICAS servers (bench/app.py under uvicorn, each running its
scheduler), SCHEDULES schedules made through them with `every_seconds: 60`, spread over QUEUES
queues, each payload naming its schedule. Nothing consumes the items: every firing stays in
sq_items. Then MINUTES whole-minute slots are watched; with --kill (the default), KILLS slots spread
over them (one: the middle slot) each see a replica, the next in turn, killed with SIGKILL 0.3 s
after the slot (while it fires) and restarted DOWN seconds later.

What the lag measures: a statement-level AFTER INSERT trigger, installed by this benchmark in its
own database (the product is not changed), copies each inserted item's id, dedup key and
created_at, with the database's clock_timestamp(), into bench_fired. A schedule's item has
created_at = its slot and dedup key `schedule:<name>:<slot>`, so lag = insert time - slot: when
the firing transaction inserted the item. That transaction commits right after the insert (the
push is its last statement), so an item is visible to a pop a commit later; lag does not include
a worker's pop. The service and PostgreSQL share one host and its clock.

- duplicates: rows of bench_fired beyond the first for one (schedule, slot), in the window;
- missed: (schedule, slot) pairs of the window with no row at all, read after the last slot plus
  GRACE seconds (a slot fired later still counts, with its lag);
- idle cost, in each minute's quiet part (20 s from when its slot has fired completely, if that
  ends 5 s before the next slot, no replica down): the scheduler's `next_schedule_slot` calls per
  second per replica (the counted store of bench/app.py), and PostgreSQL's transactions per second
  on the database (every background loop of every replica, not only the scheduler's).

- transactions per firing: PostgreSQL's transactions on the database from 3 s before a slot until
  it has fired completely, per item (claims lost to another replica show here);
- firings/s: a slot's items over the time from the slot to its last item.

The target is a bound (p99 lag <= 1 s, 0 duplicates, 0 missed). The baseline, with --baseline (the
default), in the same run after the slots: single-item POST /push with a dedup key, at the
concurrency of the scheduler's one-by-one firing (FIRING_AT_ONCE clients per replica), for
SCHEDULES items or 60 s; the fastest slot's firings/s is given as a ratio to it.

    python -m bench.schedules [--schedules 10000] [--minutes 3] [--replicas 2] [--queues 4]
                              [--no-kill] [--kills 1] [--down 5] [--no-baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from simplequeue.service.schedules import FIRING_AT_ONCE

from bench.infra import database, free_port, pg_transactions, start_server

RESULTS = Path(__file__).parent / "results"
GRACE = 30.0
"""Seconds after the last slot before the firings are read."""
QUIET = 20.0
"""Seconds of a quiet window: after a slot has fired, before the next."""
KILL_AFTER = 0.3
"""Seconds after the middle slot at which a replica is killed: while the replicas fire it."""
MAKERS = 8
"""Concurrent PUT /schedules while the schedules are made."""

RECORDER = """
CREATE TABLE bench_fired (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id uuid NOT NULL,
    queue text NOT NULL,
    dedup_key text,
    created_at timestamptz NOT NULL,
    inserted_at timestamptz NOT NULL
);
CREATE FUNCTION bench_fired_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO bench_fired (id, queue, dedup_key, created_at, inserted_at)
    SELECT id, queue, dedup_key, created_at, clock_timestamp() FROM bench_new;
    RETURN NULL;
END
$$;
CREATE TRIGGER bench_fired_record AFTER INSERT ON sq_items
    REFERENCING NEW TABLE AS bench_new FOR EACH STATEMENT EXECUTE FUNCTION bench_fired_record();
"""


@dataclass
class Replica:
    """One server, which this benchmark may kill with SIGKILL and start again on the same port."""

    database_url: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = start_server(self.database_url, self.port, access_log="false")

    def kill(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    @property
    def up(self) -> bool:
        return self.process is not None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def lag_figures(lags: list[float]) -> dict[str, float | None]:
    if not lags:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    return {
        "p50": round(percentile(lags, 0.50), 3),
        "p95": round(percentile(lags, 0.95), 3),
        "p99": round(percentile(lags, 0.99), 3),
        "max": round(max(lags), 3),
    }


def next_minute(after: datetime) -> datetime:
    return after.replace(second=0, microsecond=0) + timedelta(minutes=1)


async def sleep_until(moment: datetime) -> None:
    await asyncio.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


async def make_schedules(replicas: list[Replica], count: int, queues: int) -> float:
    """PUT every schedule (through the replicas in turn); seconds it took."""
    clients = [httpx.AsyncClient(base_url=r.base, timeout=60) for r in replicas]
    try:
        for q in range(queues):
            (await clients[0].put(f"/queues/sched-{q}", json={})).raise_for_status()
        names = iter(range(count))
        made = [0]
        started = time.monotonic()

        async def maker(http: httpx.AsyncClient) -> None:
            for n in names:
                name = f"s-{n:05d}"
                body = {"queue": f"sched-{n % queues}", "payload": {"schedule": name}, "every_seconds": 60}
                (await http.put(f"/schedules/{name}", json=body)).raise_for_status()
                made[0] += 1
                if made[0] % 1000 == 0:
                    print(f"  made {made[0]:,} schedules in {time.monotonic() - started:.0f} s", flush=True)

        await asyncio.gather(*(maker(clients[m % len(clients)]) for m in range(MAKERS)))
        return time.monotonic() - started
    finally:
        for c in clients:
            await c.aclose()


async def due_calls(replicas: list[Replica]) -> list[int]:
    """Each replica's scheduler reads (`next_schedule_slot` store calls) since it started."""
    calls = []
    async with httpx.AsyncClient(timeout=10) as http:
        for r in replicas:
            counters = (await http.get(f"{r.base}/bench/counters")).json()
            calls.append(int(counters.get("next_schedule_slot", 0)))
    return calls


async def slot_report(db: asyncpg.Connection, slot: datetime) -> tuple[int, int, list[float]]:
    """(items fired for the slot, distinct schedules among them, their lags in seconds)."""
    rows = await db.fetch(
        "SELECT dedup_key, extract(epoch FROM inserted_at - created_at)::float8 AS lag"
        " FROM bench_fired WHERE created_at = $1 AND dedup_key LIKE 'schedule:%'",
        slot,
    )
    return len(rows), len({r["dedup_key"] for r in rows}), [r["lag"] for r in rows]


async def quiet_rates(url: str, replicas: list[Replica], seconds: float) -> dict[str, Any]:
    calls_before = await due_calls(replicas)
    xacts_before = await pg_transactions(url)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    calls_after = await due_calls(replicas)
    xacts_after = await pg_transactions(url)
    took = time.monotonic() - started
    return {
        "next_schedule_slot calls/s, per replica": [
            round((a - b) / took, 2) for a, b in zip(calls_after, calls_before, strict=True)
        ],
        # this measure's own connections are 2 transactions of the window
        "database transactions/s, all replicas": round(max(0.0, xacts_after - xacts_before - 2) / took, 2),
        "seconds": round(took, 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    async with database("postgresql") as url:
        replicas = [Replica(url) for _ in range(args.replicas)]
        try:
            replicas[0].start()  # migrates the database
            db = await asyncpg.connect(url)
            try:
                await db.execute(RECORDER)
                for r in replicas[1:]:
                    r.start()
                print(f"{args.replicas} replicas up; making {args.schedules:,} schedules", flush=True)
                made_in = await make_schedules(replicas, args.schedules, args.queues)
                print(f"made {args.schedules:,} schedules in {made_in:.0f} s", flush=True)
                return await watch(args, url, db, replicas, made_in, load_before)
            finally:
                await db.close()
        finally:
            for r in replicas:
                r.stop()


async def watch(
    args: argparse.Namespace,
    url: str,
    db: asyncpg.Connection,
    replicas: list[Replica],
    made_in: float,
    load_before: tuple[float, float, float],
) -> dict[str, Any]:
    # The window: the first whole minutes after every schedule exists (a slot at least 5 s away).
    first = next_minute(datetime.now(UTC) + timedelta(seconds=5))
    slots = [first + timedelta(minutes=m) for m in range(args.minutes)]
    # --kills slots spread over the window (one: the middle slot), each killing the next replica
    kills_at = (
        [slots[(2 * k + 1) * len(slots) // (2 * args.kills)] for k in range(args.kills)] if args.kill else []
    )
    victims = {slot: replicas[-1 - k % len(replicas)] for k, slot in enumerate(kills_at)}
    kills: list[dict[str, Any]] = []
    quiet: list[dict[str, Any]] = []
    progress: list[dict[str, Any]] = []
    print(f"watching {len(slots)} slots, {slots[0]:%H:%M:%S} to {slots[-1]:%H:%M:%S} UTC", flush=True)

    async def kill_and_restart(victim: Replica, slot: datetime) -> None:
        await sleep_until(slot + timedelta(seconds=KILL_AFTER))
        victim.kill()
        killed_at = datetime.now(UTC)
        print(f"  killed replica {victim.base} (SIGKILL) at {killed_at:%H:%M:%S.%f}", flush=True)
        await asyncio.sleep(args.down)
        await asyncio.to_thread(victim.start)
        back_at = datetime.now(UTC)
        print(f"  restarted it, ready at {back_at:%H:%M:%S.%f}", flush=True)
        kills.append(
            {
                "slot": slot.isoformat(),
                "killed, s after the slot": round((killed_at - slot).total_seconds(), 3),
                "ready again, s after the slot": round((back_at - slot).total_seconds(), 3),
            }
        )

    settled = True  # the slot before this one had fired completely (none before the first)
    for slot in slots:
        killing = None
        if slot in victims:
            killing = asyncio.create_task(kill_and_restart(victims[slot], slot))
        await sleep_until(slot - timedelta(seconds=3))
        xacts_before = await pg_transactions(url)
        await sleep_until(slot)
        # progress while the slot fires, until it has fired or the next slot comes
        fired_by: dict[str, int] = {}
        distinct = 0
        for after in (2, 5, 10, 20, 30, 40, 50):
            await sleep_until(slot + timedelta(seconds=after))
            fired, distinct, lags = await slot_report(db, slot)
            fired_by[f"+{after} s"] = distinct
            up = sum(r.up for r in replicas)
            figures = lag_figures(lags)
            print(
                f"[{slot:%H:%M} +{after:>2} s] fired {distinct:,}/{args.schedules:,} (rows {fired:,}),"
                f" lag so far p50 {figures['p50']} s, max {figures['max']} s;"
                f" replicas up {up}/{len(replicas)}",
                flush=True,
            )
            if distinct >= args.schedules:
                break
        per_firing = None
        if distinct == args.schedules and settled:
            # every transaction of the database while the slot fired (claims lost to the other
            # replica, the scheduler's reads, the service's other loops), per item pushed
            per_firing = round((await pg_transactions(url) - xacts_before - 2) / distinct, 2)
        settled = distinct == args.schedules
        progress.append(
            {"slot": slot.isoformat(), "fired by": fired_by, "transactions per firing": per_firing}
        )
        if killing is not None:
            await killing
        quiet_from = datetime.now(UTC) + timedelta(seconds=3)
        if (
            distinct == args.schedules
            and slot not in victims
            and all(r.up for r in replicas)
            and quiet_from + timedelta(seconds=QUIET + 5) < slot + timedelta(minutes=1)
        ):
            await sleep_until(quiet_from)
            rates = await quiet_rates(url, replicas, QUIET)
            quiet.append({"slot": slot.isoformat(), **rates})
            calls = rates["next_schedule_slot calls/s, per replica"]
            print(
                f"[{slot:%H:%M} quiet] next_schedule_slot {calls}/s"
                f" per replica, database {rates['database transactions/s, all replicas']} transactions/s",
                flush=True,
            )
    await sleep_until(slots[-1] + timedelta(seconds=GRACE))
    result = await summarise(args, db, slots, progress, kills, quiet, made_in, load_before)
    if args.baseline:
        print("baseline: single-item pushes with a dedup key, at the scheduler's concurrency", flush=True)
        result["baseline: POST /push"] = await push_rate(replicas, args.schedules)
        rate = result["baseline: POST /push"]["items/s"]
        fastest = max(s["firings/s"] or 0 for s in result["per slot"])
        result["firings/s (fastest slot) / pushes/s"] = round(fastest / rate, 3)
    return result


async def push_rate(replicas: list[Replica], count: int) -> dict[str, Any]:
    """Single-item POST /push with a dedup key (as a firing's item has), spread over the replicas
    with FIRING_AT_ONCE clients each, as many as the scheduler has firings in flight: `count`
    items, or 60 s at most. The same service's per-item transaction outside the scheduler."""
    clients = [httpx.AsyncClient(base_url=r.base, timeout=60) for r in replicas]
    numbers = iter(range(count))
    done = [0]

    async def pusher(http: httpx.AsyncClient) -> None:
        for n in numbers:
            body = {"queue": "baseline", "payload": {"push": n}, "dedup_key": f"baseline:{n}"}
            (await http.post("/push", json=body)).raise_for_status()
            done[0] += 1

    tasks = [asyncio.create_task(pusher(c)) for c in clients for _ in range(FIRING_AT_ONCE)]
    started = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    except TimeoutError:
        pass
    finally:
        took = time.monotonic() - started
        for c in clients:
            await c.aclose()
    return {"items": done[0], "items/s": round(done[0] / took, 1), "clients": len(tasks)}


async def summarise(
    args: argparse.Namespace,
    db: asyncpg.Connection,
    slots: list[datetime],
    progress: list[dict[str, Any]],
    kills: list[dict[str, Any]],
    quiet: list[dict[str, Any]],
    made_in: float,
    load_before: tuple[float, float, float],
) -> dict[str, Any]:
    rows = await db.fetch(
        "SELECT dedup_key, created_at, extract(epoch FROM inserted_at - created_at)::float8 AS lag"
        " FROM bench_fired WHERE dedup_key LIKE 'schedule:%' AND created_at BETWEEN $1 AND $2",
        slots[0],
        slots[-1],
    )
    window = set(slots)
    keys = [r["dedup_key"] for r in rows if r["created_at"] in window]
    lags = [r["lag"] for r in rows if r["created_at"] in window]
    off_slot = sum(1 for r in rows if r["created_at"] not in window)
    expected = args.schedules * len(slots)
    distinct = len(set(keys))
    items = await db.fetchval("SELECT count(*) FROM sq_items WHERE dedup_key LIKE 'schedule:%'")
    recorded = await db.fetchval("SELECT count(*) FROM bench_fired WHERE dedup_key LIKE 'schedule:%'")
    calls = [q["next_schedule_slot calls/s, per replica"] for q in quiet]
    per_slot = []
    for slot, seen in zip(slots, progress, strict=True):
        of_slot = [r for r in rows if r["created_at"] == slot]
        slot_lags = [r["lag"] for r in of_slot]
        per_slot.append(
            {
                "slot": slot.isoformat(),
                "fired": len({r["dedup_key"] for r in of_slot}),
                "rows": len(of_slot),
                "lag, s": lag_figures(slot_lags),
                # the slot's items over the time from the slot to its last item
                "firings/s": round(len(of_slot) / max(slot_lags), 1) if slot_lags else None,
                "fired by": seen["fired by"],
                "transactions per firing": seen["transactions per firing"],
                "killed": any(k["slot"] == slot.isoformat() for k in kills),
            }
        )
    return {
        "engine": "postgresql",
        "schedules": args.schedules,
        "every_seconds": 60,
        "queues": args.queues,
        "replicas": args.replicas,
        "minutes (slots watched)": len(slots),
        "kills": kills,
        "made in, s": round(made_in, 1),
        "expected firings": expected,
        "fired": distinct,
        "duplicates": len(keys) - distinct,
        "missed": expected - distinct,
        "items off the minute slots": off_slot,
        "lag, s (insert time - slot)": lag_figures(lags),
        "per slot": per_slot,
        "quiet minutes": quiet,
        "next_schedule_slot calls/s per replica, quiet (median)": (
            round(statistics.median(c for cs in calls for c in cs), 2) if calls else None
        ),
        "database transactions/s, quiet (median)": (
            round(statistics.median(q["database transactions/s, all replicas"] for q in quiet), 2)
            if quiet
            else None
        ),
        "cross-check: schedule items in sq_items / rows recorded": [items, recorded],
        "load average before / after": [list(load_before), list(os.getloadavg())],
        "cpus": os.cpu_count(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def summary(figures: dict[str, Any]) -> str:
    lag = figures["lag, s (insert time - slot)"]
    met = lag["p99"] is not None and lag["p99"] <= 1
    lines = [
        f"{figures['schedules']:,} schedules every 60 s on PostgreSQL, {figures['replicas']} replicas,"
        f" {figures['minutes (slots watched)']} slots, {len(figures['kills'])} kill(s)",
        f"  fired {figures['fired']:,} of {figures['expected firings']:,}:"
        f" duplicates {figures['duplicates']}, missed {figures['missed']}",
        f"  lag (insert - slot): p50 {lag['p50']} s, p95 {lag['p95']} s, p99 {lag['p99']} s,"
        f" max {lag['max']} s (target p99 <= 1 s: {'met' if met else 'NOT met'})",
    ]
    for s in figures["per slot"]:
        f = s["lag, s"]
        lines.append(
            f"  slot {s['slot'][11:16]}: {s['fired']:,} fired, p50 {f['p50']} s, p99 {f['p99']} s,"
            f" max {f['max']} s, {s['firings/s']} firings/s,"
            f" {s['transactions per firing']} transactions/firing"
            + ("  <- replica killed" if s["killed"] else "")
        )
    lines.append(
        f"  quiet: next_schedule_slot {figures['next_schedule_slot calls/s per replica, quiet (median)']}/s"
        f" per replica, database {figures['database transactions/s, quiet (median)']}"
        " transactions/s (all replicas)"
    )
    if "baseline: POST /push" in figures:
        b = figures["baseline: POST /push"]
        lines.append(
            f"  baseline: POST /push {b['items/s']} items/s at {b['clients']} clients;"
            f" fastest slot's firings/s / that: {figures['firings/s (fastest slot) / pushes/s']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--kill", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--down", type=float, default=5.0, help="seconds a killed replica stays down")
    parser.add_argument("--kills", type=int, default=1, help="slots with a kill, spread over the window")
    args = parser.parse_args()
    if args.minutes < 1 or args.replicas < 1 or (args.kill and args.replicas < 2):
        parser.error("at least 1 minute, and 2 replicas to kill one")
    if args.kill and not 1 <= args.kills <= args.minutes:
        parser.error("--kills: from 1 to one per minute watched")
    figures = asyncio.run(run(args))
    text = json.dumps(figures, indent=2)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-schedules-postgresql.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(summary(figures))
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
