"""What speaking SQS costs: boto3 against simplequeue's SQS door, the same work through the HTTP API,
and the same boto3 loop against moto's in-memory SQS, in one run.

    python -m bench.sqs [--engines sqlite,postgresql] [--rounds 3] [--seconds 4]

Each loop does the work of an SQS consumer that also produces: send 10, receive up to 10, delete
what it received, over and over, on one queue:

- "sqs": boto3 (its own client per thread) sending SendMessageBatch (10 entries), ReceiveMessage
  (MaxNumberOfMessages 10, long-poll WaitTimeSeconds 1) and DeleteMessageBatch to simplequeue;
- "rest": httpx (its own client per thread) doing the same through the HTTP API's batch routes:
  POST /push/batch (10 items), POST /pop (max_items 10, wait_seconds 1), POST /items/complete;
- "moto": the "sqs" loop unchanged against moto's server (`python -m moto.server`, in memory), for
  scale: what an SQS emulator that keeps nothing does on this machine.

Every figure is messages deleted (completed) per second by THREADS concurrent loops, counted in a
window after a warm-up; every loop stops at the window's end or after MAX_ITERATIONS. Each figure
is on a fresh database and a fresh server (a fresh moto server for "moto"), all on 127.0.0.1, each
stopped afterwards. Rounds alternate the order of the three, and the table shows each figure's
median with its range, then the ratios: sqs / rest (target at least 0.7x) and sqs / moto. A
second table shows where the CPU went in the window, per message deleted: the load generator (this
process: botocore or httpx, 8 threads), the server (simplequeue's or moto's process) and PostgreSQL
(every postgres process on the machine). On a small machine the clients share the cores with the
server, so a client that costs more CPU per message slows the server down too.

The machine is noisy: only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any

import boto3  # type: ignore[import-untyped]
import httpx
from botocore.config import Config  # type: ignore[import-untyped]

from bench.infra import PIDS, database, free_port, server
from bench.profile import CpuMeter

KINDS = ("sqs", "rest", "moto")
THREADS = 8
BATCH = 10
WAIT_SECONDS = 1
WARMUP = 1.0
MAX_ITERATIONS = 100_000  # per loop: a bound on count besides the window's bound on time
QUEUE = "bench-sqs"
TARGET = 0.7  # sqs / rest
SIDES = ("load generator", "server", "postgres", "total")


class Window:
    """The measuring window shared by a measurement's loops: counts what finishes inside it."""

    def __init__(self, seconds: float) -> None:
        self.start = time.monotonic() + WARMUP
        self.end = self.start + seconds
        self.seconds = seconds
        self.failed = threading.Event()
        self._lock = threading.Lock()
        self.deleted = 0

    def running(self) -> bool:
        return time.monotonic() < self.end and not self.failed.is_set()

    def count(self, deleted: int) -> None:
        if self.start <= time.monotonic() < self.end:
            with self._lock:
                self.deleted += deleted


def body(n: int) -> str:
    return f'{{"order": {n}, "lines": ["a", "b"]}}'


def sqs_client(endpoint: str) -> Any:
    return boto3.session.Session().client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(
            connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 1}, max_pool_connections=2
        ),
    )


def sqs_loop(client: Any, url: str, window: Window) -> None:
    for n in range(MAX_ITERATIONS):
        if not window.running():
            return
        entries = [{"Id": str(i), "MessageBody": body(n * BATCH + i)} for i in range(BATCH)]
        sent = client.send_message_batch(QueueUrl=url, Entries=entries)
        if sent.get("Failed"):
            raise RuntimeError(f"SendMessageBatch failed: {sent['Failed']}")
        received = client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=BATCH, WaitTimeSeconds=WAIT_SECONDS
        ).get("Messages", [])
        if not received:
            continue
        handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)]
        deleted = client.delete_message_batch(QueueUrl=url, Entries=handles)
        if deleted.get("Failed"):
            raise RuntimeError(f"DeleteMessageBatch failed: {deleted['Failed']}")
        window.count(len(deleted.get("Successful", [])))


def rest_post(http: httpx.Client, path: str, payload: dict[str, Any]) -> Any:
    response = http.post(path, json=payload)
    if response.status_code >= 300:
        raise RuntimeError(f"{path}: {response.status_code} {response.text}")
    return response.json()


def rest_loop(http: httpx.Client, window: Window) -> None:
    for n in range(MAX_ITERATIONS):
        if not window.running():
            return
        items = [{"payload": body(n * BATCH + i)} for i in range(BATCH)]
        rest_post(http, "/push/batch", {"queue": QUEUE, "items": items})
        pop = {"queue": QUEUE, "max_items": BATCH, "wait_seconds": WAIT_SECONDS}
        popped = rest_post(http, "/pop", pop)["items"]
        if not popped:
            continue
        refs = [{"id": i["id"], "lease_token": i["lease_token"]} for i in popped]
        results = rest_post(http, "/items/complete", {"items": refs})["results"]
        window.count(sum(1 for r in results if r["result"] == "completed"))


def run_loops(seconds: float, loops: list[Callable[[Window], None]], meter: CpuMeter) -> float:
    """Messages deleted per second in the window by the loops, each in a thread of its own; the
    meter reads the CPU spent in the window."""
    window = Window(seconds)

    def guarded(loop: Callable[[Window], None]) -> None:
        try:
            loop(window)
        except BaseException:
            window.failed.set()  # the others stop too
            raise

    with ThreadPoolExecutor(max_workers=len(loops)) as pool:
        futures = [pool.submit(guarded, loop) for loop in loops]
        time.sleep(max(0.0, window.start - time.monotonic()))
        meter.start()
        time.sleep(max(0.0, window.end - time.monotonic()))
        meter.stop()
        for future in futures:
            future.result()
    meter.count = window.deleted
    return window.deleted / window.seconds


def boto3_rate(endpoint: str, seconds: float, meter: CpuMeter) -> float:
    clients = [sqs_client(endpoint) for _ in range(THREADS)]  # made here: making clients is not thread-safe
    url = clients[0].create_queue(QueueName=QUEUE)["QueueUrl"]
    try:
        return run_loops(seconds, [partial(sqs_loop, c, url) for c in clients], meter)
    finally:
        for client in clients:
            client.close()


def httpx_rate(base: str, seconds: float, meter: CpuMeter) -> float:
    clients = [httpx.Client(base_url=base, timeout=10) for _ in range(THREADS)]
    try:
        return run_loops(seconds, [partial(rest_loop, h) for h in clients], meter)
    finally:
        for client in clients:
            client.close()


@contextmanager
def moto_server() -> Iterator[tuple[str, int]]:
    """moto's server (every AWS service in memory, SQS among them) on a loopback port, stopped afterwards."""
    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError("moto's server exited during start-up")
            try:
                httpx.get(f"{base}/moto-api/", timeout=1)
                break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("moto's server did not answer in 30 s")
            time.sleep(0.1)
        yield base, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def measure(engine: str, kind: str, seconds: float) -> tuple[float, dict[str, float]]:
    """Messages deleted per second of one kind, on a fresh database and server of their own, and
    the CPU microseconds per message by side."""
    if kind == "moto":
        with moto_server() as (base, pid):
            meter = CpuMeter(pid, postgres=False)
            rate = await asyncio.to_thread(boto3_rate, base, seconds, meter)
            return rate, meter.per_operation()
    async with database(engine) as url:
        with server(url, access_log="false") as base:
            meter = CpuMeter(PIDS[base], postgres=engine == "postgresql")
            rate = await asyncio.to_thread(boto3_rate if kind == "sqs" else httpx_rate, base, seconds, meter)
            return rate, meter.per_operation()


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7,.0f} ({min(values):,.0f}-{max(values):,.0f})"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    engines = args.engines.split(",")

    figures: dict[tuple[str, str], list[float]] = defaultdict(list)
    cpu: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    total = args.rounds * len(engines) * len(KINDS)
    done = 0
    for round_ in range(args.rounds):
        for engine in engines:
            for kind in KINDS if round_ % 2 == 0 else KINDS[::-1]:
                rate, per_message = await measure(engine, kind, args.seconds)
                figures[(engine, kind)].append(rate)
                for side, micros in per_message.items():
                    cpu[(engine, kind, side)].append(micros)
                done += 1
                print(f"[{done}/{total}] round {round_ + 1} {engine} {kind}: {rate:,.0f}/s", flush=True)

    print(
        f"\nmessages deleted per second, {THREADS} loops (send {BATCH}, receive {BATCH}, delete): "
        f"median (range) of {args.rounds} rounds of {args.seconds:g} s"
    )
    print("sqs: boto3 to simplequeue; rest: httpx to the HTTP API's batch routes; moto: boto3 to moto")
    print("the machine is noisy: only ratios within one run mean anything")
    for engine in engines:
        cells = "  ".join(f"{kind}: {spread(figures[(engine, kind)])}" for kind in KINDS)
        sqs, rest, moto = (statistics.median(figures[(engine, kind)]) for kind in KINDS)
        print(
            f"{engine:10} {cells}  sqs / rest: {sqs / rest:.2f}x (target >= {TARGET}x)  "
            f"sqs / moto: {sqs / moto:.2f}x"
        )
    print("\nCPU per message deleted, in the window (median of the rounds, microseconds)")
    for engine in engines:
        for kind in KINDS:
            cells = "  ".join(
                f"{side}: {statistics.median(cpu[(engine, kind, side)]):6,.0f}"
                for side in SIDES
                if (engine, kind, side) in cpu
            )
            print(f"{engine:10} {kind:4}  {cells}")


if __name__ == "__main__":
    asyncio.run(main())
