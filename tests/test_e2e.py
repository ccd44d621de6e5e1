"""`simplequeue serve` as real processes, spoken to over HTTP on loopback."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.e2e


_processes: dict[str, subprocess.Popen[bytes]] = {}


def _serving_process(base: str) -> subprocess.Popen[bytes]:
    return _processes[base]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def simplequeue_command() -> list[str]:
    script = shutil.which("simplequeue", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "simplequeue.cli"]


@contextmanager
def serving(
    database_url: str,
    *,
    migrate: bool = True,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
    base_env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[str]:
    """A `serve` on a free loopback port until it is ready; its base URL. command: the
    `simplequeue` to run (default: this environment's); base_env: the environment it starts from
    (default: this process's)."""
    port = free_port()
    env = {
        **(os.environ if base_env is None else base_env),
        "SIMPLEQUEUE_DATABASE_URL": database_url,
        "SIMPLEQUEUE_MIGRATE_ON_START": str(migrate).lower(),
        "SIMPLEQUEUE_LOG_LEVEL": "warning",
        **(env or {}),
    }
    process = subprocess.Popen(
        [*(command or simplequeue_command()), "serve", "--port", str(port)], env=env, cwd=cwd
    )
    base = f"http://127.0.0.1:{port}"
    _processes[base] = process
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "simplequeue serve exited early"
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "simplequeue serve did not become ready"
            time.sleep(0.1)
        yield base
    finally:
        del _processes[base]
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_serve_push_pop_fail_complete_over_http(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path / 'e2e.db'}") as base, httpx.Client(base_url=base, timeout=10) as http:
        item_id = http.post("/push", json={"queue": "mail", "payload": {"to": "a@b.c"}}).json()["id"]
        [item] = http.post("/pop", json={"queue": "mail"}).json()["items"]
        assert item["id"] == item_id
        failed = http.post(
            f"/items/{item_id}/fail", json={"error": "smtp 451", "lease_token": item["lease_token"]}
        )
        assert failed.json()["status"] == "retrying"  # the default backoff: about a second
        # A long-poll is answered when the retry falls due (the probe sleeps until visible_at).
        [item] = http.post("/pop", json={"queue": "mail", "wait_seconds": 10}).json()["items"]
        assert (
            http.delete(f"/items/{item_id}", params={"lease_token": item["lease_token"]}).status_code == 204
        )
        assert http.get("/queues/mail").json()["ready"] == 0


def test_stopping_answers_waiting_pops_at_once(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path / 'stop.db'}") as base:
        process = _serving_process(base)
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(httpx.post, f"{base}/pop", json={"wait_seconds": 20}, timeout=30)
            time.sleep(0.5)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            response = waiting.result(timeout=30)
            process.wait(timeout=30)
            stopped_after = time.monotonic() - started
    assert response.status_code == 200
    assert response.json() == {"items": [], "completed": []}
    assert stopped_after < 15, "the stop waited out the long-poll"  # bound, not a benchmark: 20 s vs ~0


def test_two_processes_on_one_sqlite_file_deliver_each_item_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    subprocess.run(
        [*simplequeue_command(), "migrate"], env={**os.environ, "SIMPLEQUEUE_DATABASE_URL": url}, check=True
    )
    total = 400
    with serving(url, migrate=False) as first, serving(url, migrate=False) as second:
        pushed = asyncio.run(_push_and_drain([first, second], total))
    assert sorted(pushed.values()) == [1] * total


async def _push_and_drain(bases: list[str], total: int) -> dict[str, int]:
    clients = [httpx.AsyncClient(base_url=b, timeout=30) for b in bases]
    try:
        ids = [
            (await clients[n % 2].post("/push", json={"queue": "shared", "payload": n})).json()["id"]
            for n in range(total)
        ]
        delivered = dict.fromkeys(ids, 0)

        async def worker(client: httpx.AsyncClient) -> None:
            for _ in range(total):  # bounded
                items = (await client.post("/pop", json={"queue": "shared", "max_items": 3})).json()["items"]
                if not items:
                    return
                for item in items:
                    delivered[item["id"]] += 1
                    response = await client.delete(
                        f"/items/{item['id']}", params={"lease_token": item["lease_token"]}
                    )
                    assert response.status_code == 204, response.text

        await asyncio.wait_for(asyncio.gather(*(worker(clients[n % 2]) for n in range(8))), timeout=120)
        return delivered
    finally:
        for client in clients:
            await client.aclose()
