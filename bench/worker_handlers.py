"""The SDK's Worker with a handler that does something: a no-op against a 2 ms `asyncio.sleep`.

    python -m bench.worker_handlers [--engines sqlite,postgresql] [--rounds 3] [--seconds 5]
        [--fill 20000] [--concurrency 32] [--batch-size N] [--no-drain]

For each engine and round, on a fresh database and server of its own (bench.infra), FILL items are
pushed in batches of 1000, then the SDK's Worker (AsyncClient over httpx, this process) runs at
CONCURRENCY with one handler for a warm-up second and a window of SECONDS (or until the items run
out). Rounds alternate the handlers' order (ABBA...). A transport hook counts the requests the
worker sends (pops, pops that carry completions, POST /items/complete batches, single
DELETE /items/{id}, fails, extensions) and the table shows them per item handled in the window,
with the CPU the worker's process and the server's spent in it (a share of one core).

Then, once per engine, a drain: 500 items, `exit_when_empty=True` with the Worker's default wait,
and the seconds from the last item handled to `run()` returning.

The SDK measured is whichever `simplequeue` is imported: PYTHONPATH=<other tree>/app measures
another commit's (its server too, since the server inherits the environment). The machine is shared
and noisy: compare figures within one run; the ratio (2 ms / no-op) is what the target is about
(≥ 0.7x). A worker that pops only for free slots (`prefetch=0`) cannot pass latency / (latency +
2 ms), each slot's cycle being a pop's latency plus the handler's time (the latency is the no-op's
whole cycle, 32 / its items per second); the Worker's prefetch buffer (its default) starts the next
item as a handler returns, while the pop that refills the buffer is in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import httpx
import simplequeue
from simplequeue.client import AsyncClient, Item, Worker

from bench.infra import PIDS, database, server
from bench.profile import cpu_seconds
from bench.scenarios import post, session

HANDLERS = ("no-op", "sleep 2 ms")
KINDS = ("pop", "pop+complete", "complete batch", "delete", "fail", "extend")
WARMUP = 1.0


class Counting(httpx.AsyncBaseTransport):
    """httpx's own transport, counting the worker's requests by kind (while `on`)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.counts: Counter[str] = Counter()
        self.on = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.on:
            self.counts[kind(request)] += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def kind(request: httpx.Request) -> str:
    path = request.url.path
    if path == "/pop":
        return "pop+complete" if b'"complete"' in request.content else "pop"
    if path == "/items/complete":
        return "complete batch"
    if request.method == "DELETE" and path.startswith("/items/"):
        return "delete"
    if path.endswith("/fail"):
        return "fail"
    if path.endswith("/extend"):
        return "extend"
    return path


class Handled:
    """When each item was handled; `enough` is set once `limit` items were."""

    def __init__(self, limit: int) -> None:
        self.times: list[float] = []
        self.limit = limit
        self.enough = asyncio.Event()

    def note(self) -> None:
        self.times.append(time.perf_counter())
        if len(self.times) >= self.limit:
            self.enough.set()


def handler_for(name: str, handled: Handled) -> Callable[[Item], Awaitable[None]]:
    if name == "no-op":

        async def noop(item: Item) -> None:
            handled.note()

        return noop

    async def sleeping(item: Item) -> None:
        await asyncio.sleep(0.002)
        handled.note()

    return sleeping


async def fill(base: str, queue: str, n: int) -> None:
    async with session(base) as http:
        for start in range(0, n, 1000):
            items = [{"payload": {"n": i}} for i in range(start, min(n, start + 1000))]
            await post(http, "/push/batch", {"queue": queue, "items": items})


async def throughput(
    engine: str, name: str, seconds: float, items: int, concurrency: int, batch_size: int | None = None
) -> tuple[float, Counter[str], int, tuple[float, float]]:
    """(items/s in the window, requests by kind in it, items handled in it, the CPU share of one
    core that this process (the worker) and the server spent in it)."""
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            await fill(base, "work", items)
            transport = Counting()
            # The window ends after `seconds`, or when the items run out (with a margin: the last
            # ones trickle in as fewer slots fill).
            handled = Handled(items - 2 * concurrency)
            async with AsyncClient(base, transport=transport, timeout=30) as client:
                worker = Worker(
                    client, "work", handler_for(name, handled), concurrency=concurrency, batch_size=batch_size
                )
                running = asyncio.create_task(worker.run())
                try:
                    await asyncio.sleep(WARMUP)
                    transport.on = True
                    first, started = len(handled.times), time.perf_counter()
                    ours, theirs = time.process_time(), cpu_seconds(PIDS[base])
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(handled.enough.wait(), seconds)
                    last, ended = len(handled.times), time.perf_counter()
                    ours, theirs = time.process_time() - ours, cpu_seconds(PIDS[base]) - theirs
                    transport.on = False
                finally:
                    worker.stop()
                    await asyncio.wait_for(running, 60)
            if running.exception() is not None:
                raise RuntimeError(f"the worker failed: {running.exception()!r}")
            done, elapsed = last - first, ended - started
            return done / elapsed, transport.counts, done, (ours / elapsed, theirs / elapsed)


async def drain(engine: str, concurrency: int, items: int = 500) -> float:
    """Seconds from the last item handled to run() returning, exit_when_empty with default wait."""
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            await fill(base, "drain", items)
            handled = Handled(items)
            async with AsyncClient(base, timeout=30) as client:
                worker = Worker(
                    client,
                    "drain",
                    handler_for("sleep 2 ms", handled),
                    concurrency=concurrency,
                    exit_when_empty=True,
                )
                await asyncio.wait_for(worker.run(), 60)
                returned = time.perf_counter()
            if len(handled.times) != items:
                raise RuntimeError(f"the drain handled {len(handled.times)} of {items} items")
            return returned - max(handled.times)


def spread(values: list[float], fmt: str = ",.0f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--fill", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=None, help="the Worker's (default: its own)")
    parser.add_argument("--no-drain", action="store_true", help="skip the exit_when_empty drain")
    args = parser.parse_args()
    engines: list[str] = args.engines.split(",")
    print(f"SDK under test: {simplequeue.__file__}", flush=True)

    rates: dict[tuple[str, str], list[float]] = {}
    counts: dict[tuple[str, str], Counter[str]] = {}
    handled: dict[tuple[str, str], int] = {}
    cpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
    total = args.rounds * len(engines) * len(HANDLERS)
    step = 0
    for round_ in range(args.rounds):
        for engine in engines:
            for name in HANDLERS if round_ % 2 == 0 else HANDLERS[::-1]:
                rate, seen, done, shares = await throughput(
                    engine, name, args.seconds, args.fill, args.concurrency, args.batch_size
                )
                key = (engine, name)
                cpu.setdefault(key, []).append(shares)
                rates.setdefault(key, []).append(rate)
                counts.setdefault(key, Counter()).update(seen)
                handled[key] = handled.get(key, 0) + done
                step += 1
                per = sum(seen.values()) / max(1, done)
                print(
                    f"[{step}/{total}] round {round_ + 1} {engine} {name}: {rate:,.0f} items/s,"
                    f" {per:.3f} requests/item, CPU worker {shares[0]:.0%} server {shares[1]:.0%}",
                    flush=True,
                )
    drains: dict[str, float] = {}
    if not args.no_drain:
        for engine in engines:
            drains[engine] = await drain(engine, args.concurrency)
            print(f"{engine} drain: run() returned {drains[engine]:.2f}s after the last item", flush=True)

    print(
        f"\nSDK Worker at concurrency {args.concurrency}: items/s, median (range) of {args.rounds}"
        f" rounds of {args.seconds:g} s; requests per item handled in the windows; CPU: median"
        " share of one core, the worker's process and the server's"
    )
    header = f"{'engine':10} {'handler':11} {'items/s':>24} " + " ".join(f"{k:>14}" for k in KINDS)
    print(header + f" {'all':>7} {'CPU worker':>10} {'server':>7}")
    for engine in engines:
        for name in HANDLERS:
            key = (engine, name)
            n = max(1, handled[key])
            cells = " ".join(f"{counts[key][k] / n:14.3f}" for k in KINDS)
            every = sum(counts[key].values()) / n
            worker = statistics.median(c[0] for c in cpu[key])
            serving = statistics.median(c[1] for c in cpu[key])
            print(
                f"{engine:10} {name:11} {spread(rates[key]):>24} {cells} {every:7.3f}"
                f" {worker:10.0%} {serving:7.0%}"
            )
        ratio = statistics.median(rates[(engine, HANDLERS[1])]) / statistics.median(
            rates[(engine, HANDLERS[0])]
        )
        print(f"{engine:10} sleep 2 ms / no-op: {ratio:.2f}x (target ≥ 0.7x)")
    for engine, seconds in drains.items():
        print(f"{engine:10} exit_when_empty (default wait): returned {seconds:.2f}s after the last item")


if __name__ == "__main__":
    asyncio.run(main())
