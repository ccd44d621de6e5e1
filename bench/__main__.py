"""Run every benchmark on SQLite and PostgreSQL and print figures next to same-run baselines.

    python -m bench [--quick] [--engines sqlite,postgresql] [--update-docs]

Results go to bench/results/<timestamp>.json and .png. The machine is shared and noisy:
compare figures only within one run, which is why every target is a ratio to a baseline
measured in the same run (or a latency bound).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import subprocess
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


async def run(engines: list[str], quick: bool) -> tuple[list[Figure], dict[str, object]]:
    window = 4.0 if quick else 10.0
    figures: list[Figure] = []
    raw: dict[str, object] = {}

    pgqueuer = await pgqueuer_throughput(window) if "postgresql" in engines else None
    procrastinate = await procrastinate_throughput(window) if "postgresql" in engines else None
    if procrastinate is not None:
        print(f"procrastinate (1 worker, concurrency 10): {procrastinate:.0f} jobs/s", flush=True)
    for engine in engines:
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

        pg = engine == "postgresql"
        meters = {name: profile.CpuMeter(postgres=pg) for name in ("noop", "push", "raw")}
        push, noop, inserts = await single_push(engine, window / 2, meters)
        raw[f"profile {engine} push"] = profile.cpu_table(
            f"{engine}: CPU per single push, by process (same run)",
            {
                "no-op endpoint over HTTP": meters["noop"].per_operation(),
                "POST /push over HTTP": meters["push"].per_operation(),
                "raw driver INSERT, one per transaction": meters["raw"].per_operation(),
            },
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

        measured = await pop_complete(engine, window / 2)
        ours_pc, raw_pc, textbook_pc = measured.ours, measured.raw, measured.textbook
        raw[f"profile {engine}"] = measured.profile
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
        print(
            f"[{engine}] pop+complete {ours_pc:.0f}/s, pop completing the previous "
            f"{measured.acknowledging:.0f}/s, raw {raw_pc:.0f}/s, textbook {textbook_pc:.0f}/s",
            flush=True,
        )

        latencies = await wake(engine, 60 if quick else 200)
        for where, samples in latencies.items():
            stats = summary(samples)
            raw[f"wake {engine} {where}"] = stats
            figures.append(
                Figure(f"4. wake latency p50, {where} (ms)", engine, stats["p50"], "ms", target="≤ 5")
            )
            figures.append(
                Figure(f"4. wake latency p99, {where} (ms)", engine, stats["p99"], "ms", target="≤ 25")
            )
            print(
                f"[{engine}] wake {where}: p50 {stats['p50']:.2f} ms, p99 {stats['p99']:.2f} ms", flush=True
            )

        calls, xacts = await idle_statements(engine, window)
        figures.append(
            Figure(
                "5. statements/s from 100 idle long-polls (store calls)", engine, calls, "/s", target="≤ 5"
            )
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
    for figure in figures:
        figure.met = report.judge(figure)
    return figures, raw


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
    parser.add_argument("--update-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()

    about = machine()
    figures, raw = asyncio.run(run(args.engines.split(","), args.quick))
    table = report.table(figures, about, quick=args.quick)
    print("\n" + table)

    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    record = {
        "machine": about,
        "quick": args.quick,
        "figures": [asdict(f) | {"ratio": f.ratio} for f in figures],
    }
    stem.with_suffix(".json").write_text(json.dumps(record | {"samples": raw}, indent=2) + "\n")
    report.plot(figures, raw, stem.with_suffix(".png"))
    profiles = [str(v) for k, v in raw.items() if k.startswith("profile ")]
    profile_path = stem.with_name(stem.name + "-profile.md")
    profile_path.write_text("# Where the server's time goes\n\n" + "\n".join(profiles))
    print("\n" + "\n".join(profiles))
    print(f"\nsaved {stem}.json, {stem}.png and {profile_path.name}")
    if args.update_docs:
        report.update_page(Path(__file__).parent.parent / "docs" / "benchmarks.md", table, stem)


if __name__ == "__main__":
    main()
