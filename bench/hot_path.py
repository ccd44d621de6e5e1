"""The hot path as plain code against another commit's: single pushes and the SDK worker's loop, A/B.

    python -m bench.hot_path [--against HEAD] [--engines sqlite,postgresql] [--rounds 5] [--seconds 4]

Both sides serve a frozen copy of this checkout's package, taken when the run starts; on the other
side `simplequeue.api` is replaced by --against's, and so is the app the benchmark serves
(bench/app.py, which declares a route of its own the way its `simplequeue.api` has it). The only
difference served is the HTTP layer: whatever else is in progress in the tree is on both sides,
and edits made during the run reach neither. Each figure is bench.client_ids' (single pushes at 32
clients, each with a producer's id as the SDK sends it; the SDK worker's loop at 32 workers, a pop
completing the item popped before it), on a fresh database and server of its own; rounds
alternate which side goes first (AB, BA, ...).
Besides the rate, the server process's CPU per operation in the same window (what the HTTP layer
costs shows there first, and it is less at the mercy of what else the machine runs).

The machine is shared and noisy: only ratios within one run mean anything; the table gives each
figure's median (range), the ratio of medians and the median of each round's own ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import client_ids, profile
from bench.client_ids import MEASURES, spread
from bench.infra import ROOT
from bench.scenarios import CONCURRENCY

KIND = "producer's id"  # as the SDK pushes
PACKAGE = Path("app/simplequeue")
API = PACKAGE / "api"
SERVED = Path("bench/app.py")  # the benchmark's app, served from each side's copy


@contextmanager
def trees(against: str) -> Iterator[dict[str, Path]]:
    """Two copies of this checkout's package and benchmark app: as they are, and with --against's
    simplequeue.api and bench/app.py."""
    with tempfile.TemporaryDirectory(prefix="sq-hot-ab-") as folder:
        ignore = shutil.ignore_patterns("__pycache__")
        found = {"this checkout": Path(folder) / "this", against: Path(folder) / "other"}
        for tree in found.values():
            shutil.copytree(ROOT / PACKAGE, tree / PACKAGE, ignore=ignore)  # follows migrations' link
            (tree / SERVED.parent).mkdir()
            for name in ("__init__.py", SERVED.name):
                shutil.copy(ROOT / SERVED.parent / name, tree / SERVED.parent / name)
        other = found[against]
        shutil.rmtree(other / API)
        (other / SERVED).unlink()
        archive = subprocess.run(
            ["git", "archive", "--format=tar", against, str(API), str(SERVED)],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        archive_path = Path(folder) / "api.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(other, filter="data")
        for name, tree in found.items():
            print(f"{name}: {served_from(tree)}", flush=True)
        yield found


def served_from(tree: Path) -> str:
    """Where the server will import simplequeue.api from, with the tree first on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tree / "app"), os.environ.get("PYTHONPATH")])),
    }
    code = "import simplequeue.api.hot as h; print(h.__file__)"
    found = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, capture_output=True)
    where = found.stdout.decode().strip()
    if not where.startswith(str(tree)):
        raise RuntimeError(f"{tree}: the package would come from {where}")
    return where


async def measure(engine: str, seconds: float, tree: Path, what: str) -> tuple[float, float]:
    """Operations per second, and the server's CPU microseconds per operation, of one measure on
    a fresh database and server (bench.client_ids.measure, with the server's CPU read)."""
    meter = profile.CpuMeter(postgres=False)
    rate = await client_ids.measure(engine, seconds, tree, what, KIND, meter)
    return rate, meter.per_operation()["server"]


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", default="HEAD", help="the commit whose simplequeue.api to compare with")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--measures", default=",".join(MEASURES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    engines, measures = args.engines.split(","), args.measures.split(",")

    figures: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    cpu: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with trees(args.against) as sides:
        names = list(sides)
        total = args.rounds * len(engines) * len(measures) * len(names)
        done = 0
        for round_ in range(args.rounds):
            for engine in engines:
                for what in measures:
                    for name in names if round_ % 2 == 0 else names[::-1]:
                        rate, server_us = await measure(engine, args.seconds, sides[name], what)
                        figures[(engine, what, name)].append(rate)
                        cpu[(engine, what, name)].append(server_us)
                        done += 1
                        print(
                            f"[{done}/{total}] round {round_ + 1} {engine} {what} {name}: {rate:,.0f}/s,",
                            f"server {server_us:,.0f} µs CPU each",
                            flush=True,
                        )

    print(f"\nat {CONCURRENCY} clients: median (range) of {args.rounds} rounds of {args.seconds:g} s")
    print("push: single pushes; worker: items through the SDK worker's loop (a pop completing the last)")
    for title, table, unit in (("per second", figures, "/s"), ("server CPU µs per operation", cpu, " µs")):
        print(f"\n{title}")
        for engine in engines:
            for what in measures:
                ours, theirs = (table[(engine, what, name)] for name in names)
                cells = "  ".join(f"{name}: {spread(table[(engine, what, name)])}{unit}" for name in names)
                of_medians = statistics.median(ours) / statistics.median(theirs)
                paired = statistics.median(a / b for a, b in zip(ours, theirs, strict=True))
                print(
                    f"{engine:10} {what:6} {cells}  this checkout / {args.against}: {of_medians:.3f}x",
                    f"(paired by round: {paired:.3f}x)",
                )


if __name__ == "__main__":
    asyncio.run(main())
