"""The service SIGKILLed while its deliverer sends a topic's messages to HTTP endpoints, restarted
on the same database: every message whose publish was answered reaches every endpoint at least
once: a send cut by the kill is sent again when its lease runs out (so some arrive twice: at least
once, as SNS, the figures count them)."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import httpx
import pytest

from tests.faults.helpers import VARIANTS, Engine, Reporter, ServiceFactory, sizes
from tests.http import on_loopback

ENDPOINTS = 3
MESSAGES = 200
LEASE_SECONDS = 30  # domain.deliveries.LEASE_SECONDS: a cut send is sent again after it
SEND_SECONDS = 0.01  # each answer takes this long, so that sends are in flight at the kill


class Received:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.copies: Counter[tuple[str, str]] = Counter()  # (path, message id)

    def count(self, messages: set[str]) -> int:
        with self.lock:
            return sum(1 for (_, m) in self.copies if m in messages)


@pytest.fixture
def endpoint() -> Iterator[tuple[Received, str]]:
    received = Received()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if message["Type"] == "SubscriptionConfirmation":
                urllib.request.urlopen(message["SubscribeURL"], timeout=10).close()
            else:
                time.sleep(SEND_SECONDS)
                with received.lock:
                    received.copies[(self.path, json.loads(message["Message"])["m"])] += 1
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with on_loopback(Handler) as base:
        yield received, base


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_send_cut_by_kill_9_is_sent_again(
    variant: str,
    engine: Engine,
    services: ServiceFactory,
    report: Reporter,
    endpoint: tuple[Received, str],
) -> None:
    received, url = endpoint
    kills = min(sizes(variant).service_kills, 2)
    service = services(
        engine.url, name=f"kill-deliveries-{engine.name}", env={"SIMPLEQUEUE_SNS_ENDPOINTS": "127.0.0.1/32"}
    )
    topic = f"kill-{uuid4().hex[:12]}"
    paths = [f"/hook-{n}" for n in range(ENDPOINTS)]
    with httpx.Client(base_url=service.base, timeout=30) as http:
        assert http.put(f"/topics/{topic}", json={}).status_code == 201
        for path in paths:
            made = http.post(
                f"/topics/{topic}/subscriptions", json={"protocol": "http", "endpoint": url + path}
            )
            assert made.status_code == 201, made.text
        for _ in range(200):  # every endpoint confirms (bounded: 20 s)
            listed = http.get(f"/topics/{topic}/subscriptions").json()["subscriptions"]
            if all(s["confirmed"] for s in listed):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the endpoints did not confirm within 20 s")

    answered: set[str] = set()
    for n in range(kills):
        if n:
            service.start()
        batch = [str(uuid4()) for _ in range(MESSAGES)]
        cut_at: list[int] = []

        def killer(batch: list[str] = batch, cut_at: list[int] = cut_at) -> None:
            # While publishes go on and sends are in flight: once a quarter of the batch arrived.
            deadline = time.monotonic() + 30
            while received.count(set(batch)) < MESSAGES * ENDPOINTS // 4 and time.monotonic() < deadline:
                time.sleep(0.002)
            cut_at.append(received.count(set(batch)))
            service.kill()

        killing = threading.Thread(target=killer)
        killing.start()
        with httpx.Client(base_url=service.base, timeout=30) as http:
            for message in batch:
                try:
                    response = http.post(
                        f"/topics/{topic}/publish", json={"message": {"m": message}, "id": message}
                    )
                except httpx.TransportError:
                    break  # killed: what was not answered may or may not have been published
                assert response.status_code == 200, response.text
                assert response.json()["endpoints"] == ENDPOINTS
                answered.add(message)
        killing.join()
        report.progress(
            f"cycle {n + 1}/{kills}: killed with {cut_at[0]} sends received, "
            f"{len(answered)} publishes answered so far"
        )

    service.start()
    goal = len(answered) * ENDPOINTS
    deadline = time.monotonic() + LEASE_SECONDS + 60
    while received.count(answered) < goal and time.monotonic() < deadline:
        time.sleep(0.2)
    service.stop()

    with received.lock:
        reached = {(p, m) for (p, m) in received.copies if m in answered}
        twice = sum(1 for n in received.copies.values() if n > 1)
    missing = [(p, m) for p in paths for m in answered if (p, m) not in reached]
    report.figures(
        "delivery kill -9",
        engine=engine.name,
        kills=kills,
        endpoints=ENDPOINTS,
        answered=len(answered),
        sends=goal,
        missing=len(missing),
        sent_twice=twice,
    )
    assert not missing, f"{len(missing)} sends never arrived: {missing[:5]}"
