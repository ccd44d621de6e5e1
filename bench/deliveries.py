"""HTTP/S deliveries: how fast the service sends a topic's messages to its endpoints, against a
sender that does nothing else.

    python -m bench.deliveries [--engine postgresql] [--rounds 3] [--messages 300]

One server over a fresh database (bench.infra), allowed to send to 127.0.0.1, with a topic of
SUBSCRIBERS HTTP subscriptions to an endpoint this process serves on loopback (it confirms each
subscription by its SubscribeURL, then counts what it is sent and answers 200 at once):

- throughput: `--messages` publishes (8 callers), each queued for every endpoint, and the time from
  the first publish to the last notification the endpoint received: deliveries a second.
  Baselines, in the same round: this process POSTs as many bodies of the same size straight to the
  same endpoint, 32 at a time, with aiohttp (what a sender with no queue, no database, no retries
  and no signatures could do at best on this machine), and with httpx (the HTTP client the service
  sends with, 8 connections as the service keeps per origin): ratios are ours over each.
- latency: one publish at a time to a topic with one endpoint, from the publish's answer to the
  endpoint's receipt (what the deliverer's wake-up and one send cost): median and p95.

Every loop is bounded in count and in time. Figures compare only within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from aiohttp import web

from bench.infra import database, server
from bench.scenarios import post, session

SUBSCRIBERS = 10
CALLERS = 8
SENDERS = 32
RESULTS = Path(__file__).parent / "results"
DEADLINE_SECONDS = 120


class Endpoint:
    """Confirms subscriptions; counts notifications and keeps when each arrived."""

    def __init__(self) -> None:
        self.received = 0
        self.arrived: dict[str, float] = {}
        self.changed = asyncio.Event()
        self.body_bytes = 0
        self._http: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        kind = request.headers.get("x-amz-sns-message-type")
        if kind == "SubscriptionConfirmation":
            assert self._http is not None
            async with self._http.get(json.loads(body)["SubscribeURL"]) as answer:
                answer.raise_for_status()
        elif kind == "Notification":
            self.received += 1
            self.body_bytes = len(body)
            self.arrived[request.headers["x-amz-sns-message-id"]] = time.perf_counter()
            self.changed.set()
        else:  # the baseline's posts
            self.received += 1
            self.changed.set()
        return web.Response(status=200)

    async def until(self, count: int, deadline: float) -> None:
        while self.received < count:
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"the endpoint got {self.received} of {count} in time")
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=left)
            except TimeoutError:
                continue

    async def start(self) -> tuple[web.AppRunner, int]:
        self._http = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_post("/{path:.*}", self.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port: int = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return runner, port

    async def stop(self, runner: web.AppRunner) -> None:
        if self._http is not None:
            await self._http.close()
        await runner.cleanup()


async def subscribe(
    http: aiohttp.ClientSession, topic: str, url: str, count: int, endpoint: Endpoint
) -> None:
    async with http.put(f"/topics/{topic}", json={}) as answer:
        answer.raise_for_status()
    for n in range(count):
        await post(
            http, f"/topics/{topic}/subscriptions", {"protocol": "http", "endpoint": f"{url}/{topic}/{n}"}
        )
    deadline = time.monotonic() + 60
    while True:  # every subscription confirmed by the endpoint
        async with http.get(f"/topics/{topic}/subscriptions?limit=1000") as answer:
            listed = (await answer.json())["subscriptions"]
        if all(s["confirmed"] for s in listed):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the endpoint's subscriptions were not confirmed in 60 s")
        await asyncio.sleep(0.1)


async def ours(http: aiohttp.ClientSession, endpoint: Endpoint, messages: int) -> float:
    """Deliveries a second: publishes to the SUBSCRIBERS endpoints until the last is received."""
    goal = endpoint.received + messages * SUBSCRIBERS
    left = iter(range(messages))

    async def caller() -> None:
        for n in left:
            await post(http, "/topics/many/publish", {"message": {"n": n, "pad": "x" * 200}})

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CALLERS)))
    await endpoint.until(goal, time.monotonic() + DEADLINE_SECONDS)
    return messages * SUBSCRIBERS / (time.perf_counter() - started)


async def baseline(url: str, endpoint: Endpoint, count: int, client: str) -> float:
    """POSTs a second, of bodies the size of ours, straight to the endpoint, SENDERS at a time."""
    body = b"x" * max(endpoint.body_bytes, 1)
    goal = endpoint.received + count
    left = iter(range(count))
    async with (
        aiohttp.ClientSession() as direct,
        httpx.AsyncClient(limits=httpx.Limits(max_connections=8)) as x,
    ):

        async def sender() -> None:
            for n in left:
                target = f"{url}/direct/{n % SUBSCRIBERS}"
                if client == "httpx":
                    (await x.post(target, content=body)).raise_for_status()
                    continue
                async with direct.post(target, data=body) as answer:
                    answer.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(SENDERS)))
        await endpoint.until(goal, time.monotonic() + DEADLINE_SECONDS)
        return count / (time.perf_counter() - started)


async def latency(http: aiohttp.ClientSession, endpoint: Endpoint, samples: int) -> list[float]:
    found: list[float] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    for n in range(samples):
        if time.monotonic() > deadline:
            break
        answer = await post(http, "/topics/one/publish", {"message": {"n": n}})
        answered = time.perf_counter()
        await endpoint.until(endpoint.received + 1, deadline)
        found.append((endpoint.arrived[answer["message_id"]] - answered) * 1000)
    return found


async def run(engine: str, rounds: int, messages: int) -> dict[str, Any]:
    endpoint = Endpoint()
    runner, port = await endpoint.start()
    url = f"http://127.0.0.1:{port}"
    try:
        async with database(engine) as db_url:
            with server(db_url, access_log="false", sns_endpoints="127.0.0.1/32") as base:
                async with session(base) as http:
                    await subscribe(http, "many", url, SUBSCRIBERS, endpoint)
                    await subscribe(http, "one", url, 1, endpoint)
                    await ours(http, endpoint, 20)  # warm: the signing key, plans, connections
                    sent: list[float] = []
                    direct: list[float] = []
                    by_httpx: list[float] = []
                    waits: list[float] = []
                    for r in range(rounds):
                        sent.append(await ours(http, endpoint, messages))
                        direct.append(await baseline(url, endpoint, messages * SUBSCRIBERS, "aiohttp"))
                        by_httpx.append(await baseline(url, endpoint, messages * SUBSCRIBERS, "httpx"))
                        waits += await latency(http, endpoint, 50)
                        print(
                            f"[{engine}] round {r + 1}: deliveries {sent[-1]:.0f}/s, "
                            f"direct posts {direct[-1]:.0f}/s (aiohttp), {by_httpx[-1]:.0f}/s (httpx)",
                            flush=True,
                        )
    finally:
        await endpoint.stop(runner)
    waits.sort()
    rate, best, plain = statistics.median(sent), statistics.median(direct), statistics.median(by_httpx)
    return {
        "engine": engine,
        "deliveries to 10 endpoints, per second": round(rate),
        "direct posts by aiohttp, per second": round(best),
        "direct posts by httpx, per second": round(plain),
        "deliveries / aiohttp posts": round(rate / best, 2),
        "deliveries / httpx posts": round(rate / plain, 2),
        "publish answered to endpoint received, ms": {
            "median": round(statistics.median(waits), 2),
            "p95": round(waits[int(len(waits) * 0.95) - 1], 2),
            "n": len(waits),
        },
        "body bytes": endpoint.body_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=300)
    args = parser.parse_args()
    figures = asyncio.run(run(args.engine, args.rounds, args.messages))
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = json.dumps(figures, indent=2)
    print(text)
    saved = RESULTS / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-deliveries-{args.engine}.json"
    saved.write_text(text + "\n", encoding="utf-8")
    print(f"saved {saved.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
