"""/metrics as Prometheus scrapes it: item counters by queue, queue gauges read from the database,
HTTP series by route template; and the same totals whichever of several workers answers."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from prometheus_client.parser import text_string_to_metric_families
from simplequeue.api.metrics import OTHER
from simplequeue.main import create_app, store_for
from simplequeue.settings import Settings

from tests.factories import new_item
from tests.http import Client
from tests.test_e2e import free_port, simplequeue_command

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, frozenset(s.labels.items()))] = s.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def test_items_queues_and_requests_are_counted(client: Client, queue: str) -> None:
    await client.put(f"/queues/{queue}", json={"max_attempts": 1})
    for n in range(2):
        pushed = await client.post("/push", json={"queue": queue, "payload": n, "dedup_key": f"k{n}"})
        assert pushed.status_code == 201
    await client.post("/push", json={"queue": queue, "payload": "again", "dedup_key": "k1"})  # a duplicate
    await client.post("/push/batch", json={"queue": queue, "items": [{"payload": 1}, {"payload": 2}]})
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 2})).json()["items"]
    first, second = popped
    await client.delete(f"/items/{first['id']}", params={"lease_token": first["lease_token"]})
    await client.post(
        f"/items/{second['id']}/fail", json={"error": "boom", "lease_token": second["lease_token"]}
    )
    await client.get("/items/00000000-0000-0000-0000-000000000000")

    scraped = await client.get("/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    found = samples(scraped.text)
    assert value(found, "simplequeue_items_pushed_total", queue=queue) == 4  # the duplicates not
    assert value(found, "simplequeue_items_popped_total", queue=queue) == 2
    assert value(found, "simplequeue_items_completed_total", queue=queue) == 1
    assert value(found, "simplequeue_items_failed_total", queue=queue) == 1
    assert value(found, "simplequeue_items_dead_total", queue=queue) == 1  # max_attempts 1
    assert value(found, "simplequeue_queue_items", queue=queue, state="ready") == 2
    assert value(found, "simplequeue_queue_items", queue=queue, state="leased") == 0
    assert value(found, "simplequeue_queue_items", queue=queue, state="dead") == 1
    assert value(found, "simplequeue_queue_oldest_ready_age_seconds", queue=queue) >= 0
    route = {"route": "/items/{item_id}", "method": "DELETE", "status": "204"}
    assert value(found, "simplequeue_http_requests_total", **route) == 1
    assert value(found, "simplequeue_http_request_duration_seconds_count", **route) == 1
    missing = {"route": "/items/{item_id}", "method": "GET", "status": "404"}
    assert value(found, "simplequeue_http_requests_total", **missing) == 1
    assert first["id"] not in scraped.text  # ids never become labels


async def test_pops_cut_short_by_a_flow_limit_are_counted_by_limit(client: Client, queue: str) -> None:
    await client.put(f"/queues/{queue}", json={"max_leased": 1})
    await client.post("/push/batch", json={"queue": queue, "items": [{"payload": n} for n in range(3)]})
    assert len((await client.post("/pop", json={"queue": queue, "max_items": 2})).json()["items"]) == 1
    assert (await client.post("/pop", json={"queue": queue})).json()["items"] == []
    found = samples((await client.get("/metrics")).text)
    assert value(found, "simplequeue_pops_throttled_total", queue=queue, limit="max_leased") == 2
    assert value(found, "simplequeue_pops_throttled_total", queue=queue, limit="rate") == 0


async def test_pops_cut_short_by_a_keys_limit_are_counted_as_max_leased_per_key(
    client: Client, queue: str
) -> None:
    await client.put(f"/queues/{queue}", json={"max_leased_per_key": 1})
    items = [{"payload": n, "fairness_key": f"k{n % 2}"} for n in range(4)]
    await client.post("/push/batch", json={"queue": queue, "items": items})
    assert len((await client.post("/pop", json={"queue": queue, "max_items": 4})).json()["items"]) == 2
    found = samples((await client.get("/metrics")).text)
    assert value(found, "simplequeue_pops_throttled_total", queue=queue, limit="max_leased_per_key") == 1
    assert value(found, "simplequeue_pops_throttled_total", queue=queue, limit="max_leased") == 0
    assert "k0" not in (await client.get("/metrics")).text  # keys never become labels


def test_several_workers_count_together(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "SIMPLEQUEUE_DATABASE_URL": f"sqlite:///{tmp_path}/m.db",
        "SIMPLEQUEUE_LOG_LEVEL": "warning",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = subprocess.Popen(
        [*simplequeue_command(), "serve", "--port", str(port), "--workers", "2"], env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, process)
        for n in range(40):  # a connection each, so that both workers take some
            with httpx.Client(base_url=base, timeout=10) as http:
                assert http.post("/push", json={"queue": "multi", "payload": n}).status_code == 201
        totals = set()
        for _ in range(6):
            with httpx.Client(base_url=base, timeout=10) as http:
                totals.add(
                    value(samples(http.get("/metrics").text), "simplequeue_items_pushed_total", queue="multi")
                )
        assert totals == {40.0}
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_ready(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, "serve exited"
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "serve did not become ready"
        time.sleep(0.1)


async def test_per_queue_series_stay_bounded_however_many_queues_there_are(tmp_path: Path) -> None:
    # 40 queues, then 80, on a service whose limit is 10 (queues made before the limit was lowered,
    # or by the outbox, are as many as they are): 10 queues keep their own label, the rest are
    # added into OTHER, and the exposition does not grow with them.
    url = f"sqlite:///{tmp_path / 'many.db'}"
    store = store_for(Settings(database_url=url), None)
    await store.open()
    await store.migrate()
    names = [f"q{n:03}" for n in range(80)]
    try:
        await store.push_batch([new_item(name) for name in names[:40]], skip_existing=False)
        app = create_app(Settings(database_url=url, sweep=False, max_queues=10))
        async with LifespanManager(app) as manager, app_client_of(manager.app) as client:
            app.state.metrics.cache_seconds = 0  # each scrape reads the queues
            for name in names[:12]:  # pushes to queues there are: taken at the limit, and counted
                assert (await client.post("/push", json={"queue": name, "payload": 1})).status_code == 201
            few = samples((await client.get("/metrics")).text)
            await store.push_batch([new_item(name) for name in names[40:]], skip_existing=False)
            many_text = (await client.get("/metrics")).text
    finally:
        await store.close()
    many = samples(many_text)

    def queues_of(found: Samples, name: str) -> set[str]:
        return {dict(labels)["queue"] for metric, labels in found if metric == name}

    own = set(names[:10])
    assert (
        queues_of(few, "simplequeue_queue_items")
        == queues_of(many, "simplequeue_queue_items")
        == {*own, OTHER}
    )
    assert queues_of(many, "simplequeue_items_pushed_total") == {*own, OTHER}
    by_queue = [[key for key in found if "queue" in dict(key[1])] for found in (few, many)]
    # 11 labels, each with pushed_total and its _created, and the six gauges.
    assert len(by_queue[0]) == len(by_queue[1]) == 11 * (2 + 6)
    assert value(many, "simplequeue_items_pushed_total", queue=OTHER) == 2  # q010 and q011
    assert value(many, "simplequeue_queue_items", queue="q000", state="ready") == 2
    assert value(many, "simplequeue_queue_items", queue=OTHER, state="ready") == 2 + 70
    assert (
        sum(
            v
            for (m, labels), v in many.items()
            if m == "simplequeue_queue_items" and ("state", "ready") in labels
        )
        == 92
    )


def app_client_of(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sq")
