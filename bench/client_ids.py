"""What remembering producers' ids costs: items with and without the producer's id, and this
checkout against another commit.

    python -m bench.client_ids [--against REV] [--engines sqlite,postgresql] [--rounds 3] [--seconds 4]

A producer's id is remembered after its item finishes (so that a retry never makes a second item);
the service's own ids are not. This measures what that costs, in one run:

- per engine, items with no id (the service makes one) and with the producer's id (as the SDK
  sends every push): single pushes at 32 clients, and the SDK worker's loop at 32 workers (a pop
  that completes the item popped before it, over 20,000 items pushed beforehand in batches), for
  this checkout and, with --against, for another commit (a `git worktree` of it, served from the
  same virtualenv with its package first on the path);
- rounds alternate between the trees (ABAB...), each figure on a fresh database, and the table shows
  each figure's median with its range, then the ratios: with an id against without, and this
  checkout against the other commit.

The machine is shared and noisy: only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import uuid
from collections import defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp

from bench.infra import PIDS, ROOT, database, server
from bench.profile import CpuMeter
from bench.scenarios import CONCURRENCY, counted_rate, post, session

KINDS = ("no id", "producer's id")
MEASURES = ("push", "worker")
FILL = 20_000  # items pushed before the worker loop runs (more than a window of it takes)


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A checkout of `rev` beside this one, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="sq-ab-") as folder:
        path = Path(folder) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)


@contextmanager
def package_from(tree: Path | None) -> Iterator[None]:
    """Serve the simplequeue package of `tree` (None: this checkout's, as installed)."""
    if tree is None:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree / "app"), before]))
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


async def measure(
    engine: str, seconds: float, tree: Path | None, measure: str, kind: str, meter: CpuMeter | None = None
) -> float:
    """Operations per second of one measure and kind, on a fresh database and server of their own (a
    table that a previous measurement filled would make whatever runs second look slower). `tree`:
    another checkout (its bench/app.py serves too) or a copy of the package alone; `meter`, if
    given, reads the server's CPU in the window."""
    root = tree if tree is not None and (tree / "bench").is_dir() else ROOT
    with package_from(tree):
        async with database(engine) as url:
            with server(url, root=root, access_log="false") as base:
                if meter is not None:
                    meter.server_pid = PIDS[base]
                async with session(base) as http:
                    if measure == "push":
                        return await counted_rate(
                            seconds, 1, lambda: push_one(http, kind), CONCURRENCY, meter
                        )
                    for _ in range(FILL // 1000):
                        items = [item(kind, n) for n in range(1000)]
                        await post(http, "/push/batch", {"queue": "work", "items": items})
                    finished: deque[dict[str, str]] = deque()

                    async def acknowledging() -> int:
                        done = [finished.popleft()] if finished else []
                        popped = (await post(http, "/pop", {"queue": "work", "complete": done}))["items"]
                        finished.extend({"id": i["id"], "lease_token": i["lease_token"]} for i in popped)
                        return len(popped)

                    return await counted_rate(seconds, 1, acknowledging, CONCURRENCY, meter)


def item(kind: str, n: int) -> dict[str, object]:
    entry: dict[str, object] = {"payload": {"order": n, "lines": ["a", "b"]}}
    if kind != "no id":
        entry["id"] = str(uuid.uuid4())
    return entry


async def push_one(http: aiohttp.ClientSession, kind: str) -> int:
    await post(http, "/push", {"queue": "single", **item(kind, 42)})
    return 1


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8,.0f} ({min(values):,.0f}-{max(values):,.0f})"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", help="a commit to compare this checkout with (e.g. HEAD~1)")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--measures", default=",".join(MEASURES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    engines, measures = args.engines.split(","), args.measures.split(",")

    with contextmanager(lambda: (yield None))() if not args.against else worktree(args.against) as other:
        trees: dict[str, Path | None] = {"this checkout": None}
        if other is not None:
            trees[args.against] = other
        figures: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
        total = args.rounds * len(trees) * len(engines) * len(measures) * len(KINDS)
        done = 0
        for round_ in range(args.rounds):
            for engine in engines:
                for what in measures:
                    for name, tree in trees.items():
                        for kind in KINDS if round_ % 2 == 0 else KINDS[::-1]:
                            rate = await measure(engine, args.seconds, tree, what, kind)
                            figures[(engine, what, name, kind)].append(rate)
                            done += 1
                            print(
                                f"[{done}/{total}] round {round_ + 1} {engine} {what} {name} {kind}:",
                                f"{rate:,.0f}/s",
                                flush=True,
                            )

    print(
        f"\nper second at {CONCURRENCY} clients: median (range) of {args.rounds} rounds of {args.seconds:g} s"
    )
    print("push: single pushes; worker: items through the SDK worker's loop (a pop completing the last)")
    for engine in engines:
        for what in measures:
            for name in trees:
                cells = "  ".join(f"{kind}: {spread(figures[(engine, what, name, kind)])}" for kind in KINDS)
                with_id = statistics.median(figures[(engine, what, name, KINDS[1])])
                without = statistics.median(figures[(engine, what, name, KINDS[0])])
                print(
                    f"{engine:10} {what:6} {name:14} {cells}  producer's id / no id: {with_id / without:.2f}x"
                )
            if args.against:
                for kind in KINDS:
                    ours = statistics.median(figures[(engine, what, "this checkout", kind)])
                    theirs = statistics.median(figures[(engine, what, args.against, kind)])
                    print(
                        f"{engine:10} {what:6} {kind:14} this checkout / {args.against}: {ours / theirs:.2f}x"
                    )


if __name__ == "__main__":
    asyncio.run(main())
