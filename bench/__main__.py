"""Run every benchmark on SQLite and PostgreSQL and print figures next to same-run baselines.

    python -m bench [--quick] [--engines sqlite,postgresql] [--runs N] [--only SCENARIOS] [--update-docs]

Results go to bench/results/<timestamp>.json and .png. The machine is shared and noisy:
compare figures only within one run, which is why every target is a ratio to a baseline
measured in the same run (or a latency bound). With --runs N the whole set runs N times in
one invocation, and every figure, ratio and CPU per item is reported as the median of the N runs
with their spread (lowest to highest); targets are judged on the median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import subprocess
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from bench import profile, report
from bench.procrastinate_baseline import procrastinate_throughput
from bench.scenarios import (
    Figure,
    idle_statements,
    pgqueuer_throughput,
    pop_complete,
    pop_latency,
    single_push,
    summary,
    throughput_batches,
    wake,
)

RESULTS = Path(__file__).parent / "results"

SCENARIOS = report.SCENARIOS
ALIASES = {"1": "batches", "1b": "batches", "2": "push", "2b": "push", "3": "pop", "3b": "pop"}
ALIASES |= {"3c": "pop", "4": "wake", "5": "idle", "5b": "idle", "6": "dead"}


def scenarios(only: str | None) -> list[str]:
    """The scenarios `--only` names (their names or their measures' numbers), in run order."""
    if not only:
        return list(SCENARIOS)
    chosen = {ALIASES.get(name.strip(), name.strip()) for name in only.split(",") if name.strip()}
    unknown = chosen - set(SCENARIOS)
    if unknown:
        raise SystemExit(
            f"--only: unknown scenario(s) {', '.join(sorted(unknown))}; choose from "
            f"{', '.join(SCENARIOS)} (or 1, 1b, 2, 2b, 3, 3b, 3c, 4, 5, 5b, 6)"
        )
    return [name for name in SCENARIOS if name in chosen]


async def run(
    engines: list[str], quick: bool, only: list[str] | None = None
) -> tuple[list[Figure], dict[str, object]]:
    window = 4.0 if quick else 10.0
    chosen = set(only or SCENARIOS)
    figures: list[Figure] = []
    raw: dict[str, object] = {}

    # PgQueuer and procrastinate run on PostgreSQL, whichever engines are measured.
    batches = "batches" in chosen
    pgqueuer = await pgqueuer_throughput(window) if batches else None
    procrastinate = await procrastinate_throughput(window) if batches else None
    if procrastinate is not None:
        print(f"procrastinate (1 worker, concurrency 10): {procrastinate:.0f} jobs/s", flush=True)
    for engine in engines:
        if batches:
            await _batches(engine, window, pgqueuer, procrastinate, figures)
        if "push" in chosen:
            await _push(engine, window, figures, raw)
        if "pop" in chosen:
            await _pop(engine, window, figures, raw)
        if "wake" in chosen:
            await _wake(engine, quick, figures, raw)
        if "idle" in chosen:
            await _idle(engine, window, figures)
        if "dead" in chosen:
            await _dead(engine, quick, figures, raw)
    for figure in figures:
        figure.met = report.judge(figure)
    return figures, raw


async def _batches(
    engine: str, window: float, pgqueuer: float | None, procrastinate: float | None, figures: list[Figure]
) -> None:
    ours = await throughput_batches(engine, window)
    figures.append(
        Figure(
            "1. push→pop→complete, batches of 100 (items/s)",
            engine,
            ours,
            "items/s",
            pgqueuer,
            "PgQueuer continuous (PostgreSQL)",
            "≥ 5x",
        )
    )
    figures.append(
        Figure(
            "1b. push→pop→complete, batches of 100 vs procrastinate (items/s)",
            engine,
            ours,
            "items/s",
            procrastinate,
            "procrastinate, 1 worker, concurrency 10 (PostgreSQL)",
        )
    )
    print(
        f"[{engine}] throughput {ours:.0f} items/s (PgQueuer {pgqueuer or 0:.0f}, "
        f"procrastinate {procrastinate or 0:.0f})",
        flush=True,
    )


async def _push(engine: str, window: float, figures: list[Figure], raw: dict[str, object]) -> None:
    pg = engine == "postgresql"
    meters = {name: profile.CpuMeter(postgres=pg) for name in ("noop", "push", "raw")}
    push, noop, inserts = await single_push(engine, window / 2, meters)
    per_push = {
        "no-op endpoint over HTTP": meters["noop"].per_operation(),
        "POST /push over HTTP": meters["push"].per_operation(),
        "raw driver INSERT, one per transaction": meters["raw"].per_operation(),
    }
    raw[f"cpu {engine} push"] = per_push
    raw[f"profile {engine} push"] = profile.cpu_table(
        f"{engine}: CPU per single push, by process (same run)", per_push
    )
    figures.append(
        Figure(
            "2. single push, 32 clients (req/s)",
            engine,
            push,
            "req/s",
            noop,
            "no-op endpoint, same parsing",
            "≥ 0.8x",
        )
    )
    figures.append(
        Figure(
            "2b. single push vs raw driver INSERTs",
            engine,
            push,
            "req/s",
            inserts,
            "raw driver INSERT, 32 concurrent",
            "≥ 1x",
        )
    )
    print(f"[{engine}] push {push:.0f}/s, no-op {noop:.0f}/s, raw inserts {inserts:.0f}/s", flush=True)


async def _pop(engine: str, window: float, figures: list[Figure], raw: dict[str, object]) -> None:
    measured = await pop_complete(engine, window / 2)
    ours_pc, raw_pc, textbook_pc = measured.ours, measured.raw, measured.textbook
    raw[f"profile {engine}"] = measured.profile
    raw[f"cpu {engine} pop"] = measured.cpu
    figures.append(
        Figure(
            "3. single pop + complete, 32 workers (items/s)",
            engine,
            ours_pc,
            "items/s",
            raw_pc,
            "raw driver claim+delete loop",
            "≥ 0.5x",
        )
    )
    figures.append(
        Figure(
            "3b. single pop + complete vs the textbook claim+delete (items/s)",
            engine,
            ours_pc,
            "items/s",
            textbook_pc,
            "one DELETE … SKIP LOCKED … RETURNING per item",
            "≥ 0.5x",
        )
    )
    figures.append(
        Figure(
            "3c. pop completing the previous item (the SDK worker) vs the textbook claim+delete",
            engine,
            measured.acknowledging,
            "items/s",
            textbook_pc,
            "one DELETE … SKIP LOCKED … RETURNING per item",
            "≥ 0.5x",
        )
    )
    figures.append(
        Figure(
            "3d. 3c's loop on a queue keeping no history (retention_seconds 0) vs 3c",
            engine,
            measured.unkept,
            "items/s",
            measured.acknowledging,
            "3c: the same loop, history kept",
            "≥ 1x",
        )
    )
    print(
        f"[{engine}] pop+complete {ours_pc:.0f}/s, pop completing the previous "
        f"{measured.acknowledging:.0f}/s, raw {raw_pc:.0f}/s, textbook {textbook_pc:.0f}/s",
        flush=True,
    )


async def _wake(engine: str, quick: bool, figures: list[Figure], raw: dict[str, object]) -> None:
    latencies = await wake(engine, 60 if quick else 200)
    for where, samples in latencies.items():
        stats = summary(samples)
        raw[f"wake {engine} {where}"] = stats
        figures.append(Figure(f"4. wake latency p50, {where} (ms)", engine, stats["p50"], "ms", target="≤ 5"))
        figures.append(
            Figure(f"4. wake latency p99, {where} (ms)", engine, stats["p99"], "ms", target="≤ 25")
        )
        print(f"[{engine}] wake {where}: p50 {stats['p50']:.2f} ms, p99 {stats['p99']:.2f} ms", flush=True)


async def _idle(engine: str, window: float, figures: list[Figure]) -> None:
    calls, xacts = await idle_statements(engine, window)
    figures.append(
        Figure("5. statements/s from 100 idle long-polls (store calls)", engine, calls, "/s", target="≤ 5")
    )
    if xacts is not None:
        figures.append(
            Figure(
                "5b. transactions/s from 100 idle long-polls (pg_stat_database, minus a quiet window)",
                engine,
                xacts,
                "/s",
                target="≤ 5",
            )
        )
    print(f"[{engine}] idle: {calls:.2f} store calls/s, {xacts} transactions/s", flush=True)


async def _dead(engine: str, quick: bool, figures: list[Figure], raw: dict[str, object]) -> None:
    small = summary(await pop_latency(engine, 10_000, 300))
    big = summary(await pop_latency(engine, 100_000 if quick else 1_000_000, 300))
    raw[f"pop latency {engine}"] = {"10k dead": small, "1M dead": big}
    figures.append(
        Figure(
            "6. pop p50 with 1M dead rows vs 10k (ms)",
            engine,
            big["p50"],
            "ms",
            small["p50"],
            "pop p50 with 10k dead rows",
            "≤ 1.2x",
        )
    )
    print(
        f"[{engine}] pop p50: {small['p50']:.3f} ms (10k dead) vs {big['p50']:.3f} ms (1M dead)",
        flush=True,
    )


def machine() -> dict[str, object]:
    def output(*command: str) -> str:
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.strip()
        except OSError:
            return ""

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "memory": output("sh", "-c", "free -g | awk '/Mem:/ {print $2 \" GiB\"}'"),
        "os": output("sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "postgresql": output("psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc", "SHOW server_version"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="shorter windows (a smoke run, not for the docs)"
    )
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="run the whole set N times and report medians and spreads (lowest to highest)",
    )
    parser.add_argument(
        "--only",
        help=f"comma-separated scenarios to run ({', '.join(SCENARIOS)}, or measure numbers: 3b,3c,1,2b)",
    )
    parser.add_argument("--update-docs", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument(
        "--docs-from",
        metavar="RESULT.json,...",
        help="run nothing: write the medians of saved multi-run results (e.g. one per engine) into "
        "docs/benchmarks.md",
    )
    args = parser.parse_args()
    page = Path(__file__).parent.parent / "docs" / "benchmarks.md"
    if args.docs_from:
        paths = [Path(p) for p in args.docs_from.split(",")]
        table = report.render([json.loads(p.read_text()) for p in paths])
        print(table)
        report.update_page(page, table, *(p.with_suffix("") for p in paths))
        return
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    chosen = scenarios(args.only)
    engines = args.engines.split(",")

    about = machine()
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if args.runs == 1:
        figures, raw = asyncio.run(run(engines, args.quick, chosen))
        table = report.table(figures, about, quick=args.quick)
        print("\n" + table)
        record = {
            "machine": about,
            "quick": args.quick,
            "figures": [asdict(f) | {"ratio": f.ratio} for f in figures],
        }
        stem.with_suffix(".json").write_text(json.dumps(record | {"samples": raw}, indent=2) + "\n")
        report.plot(figures, raw, stem.with_suffix(".png"))
        profiles = [str(v) for k, v in raw.items() if k.startswith("profile ")]
    else:
        table, raw, profiles = repeated(args.runs, engines, args.quick, chosen, about, stem)
    profile_path = stem.with_name(stem.name + "-profile.md")
    profile_path.write_text("# Where the server's time goes\n\n" + "\n".join(profiles))
    print("\n" + "\n".join(profiles))
    print(f"\nsaved {stem}.json, {stem}.png and {profile_path.name}")
    if args.update_docs:
        report.update_page(page, table, stem)


def repeated(
    runs: int, engines: list[str], quick: bool, chosen: list[str], about: dict[str, object], stem: Path
) -> tuple[str, dict[str, object], list[str]]:
    """The whole set `runs` times; every run's figures are saved as they come (in stem.json), then
    the medians and spreads. Returns the table of medians, the wake medians and the profiles."""
    record: dict[str, object] = {"machine": about, "quick": quick, "runs": [], "scenarios": chosen}
    every: list[list[Figure]] = []
    samples: list[dict[str, object]] = []
    profiles: list[str] = []
    for n in range(1, runs + 1):
        started, load_before = time.monotonic(), os.getloadavg()[0]
        figures, raw = asyncio.run(run(engines, quick, chosen))
        seconds = time.monotonic() - started
        # The 1-minute load average around the run: the machine is shared with others' test runs.
        load = [round(load_before, 2), round(os.getloadavg()[0], 2)]
        every.append(figures)
        samples.append(raw)
        profiles += [f"## Run {n} of {runs}\n"] + [str(v) for k, v in raw.items() if k.startswith("profile ")]
        print(
            f"\nrun {n} of {runs} took {seconds:.0f} s (load average {load[0]} before, {load[1]} after)\n"
            + report.table(figures, about, quick=quick)
        )
        assert isinstance(record["runs"], list)
        record["runs"].append(
            {
                "ended": datetime.now(UTC).isoformat(timespec="seconds"),
                "seconds": round(seconds, 1),
                "load average (1 min) before, after": load,
                "figures": [asdict(f) | {"ratio": f.ratio} for f in figures],
                "samples": raw,
            }
        )
        stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    medians = report.medians(every)
    cpu = report.cpu_medians(samples)
    wakes = report.wake_medians(samples)
    record |= {"medians": [asdict(m) for m in medians], "cpu_medians": cpu, "wake_medians": wakes}
    stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    table = report.render([record])
    print("\n" + table)
    report.plot(medians, wakes, stem.with_suffix(".png"))
    return table, wakes, profiles


if __name__ == "__main__":
    main()
