"""A service started before its database exists: it serves /healthz, answers 503 elsewhere (with
Retry-After, a stable code and no driver text), and migrates and becomes ready on its own once the
database appears. No crash loop: the same process serves throughout. (A stopped or frozen server
under a running service is tests/faults/test_postgres_outage.py.)"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import time
from collections.abc import Callable

import asyncpg
import httpx
import pytest

from tests.engines import POSTGRES_URL, _with_database
from tests.test_e2e import free_port, simplequeue_command

pytestmark = pytest.mark.e2e


def admin(sql: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(POSTGRES_URL, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def eventually(check: Callable[[], bool], what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


def test_a_database_created_after_the_service_starts(postgres_url: str) -> None:
    name = f"sq_late_{secrets.token_hex(4)}"
    url = _with_database(POSTGRES_URL, name)
    port = free_port()
    env = {
        **os.environ,
        "SIMPLEQUEUE_DATABASE_URL": url,
        "SIMPLEQUEUE_DB_TIMEOUT_SECONDS": "2",
        "SIMPLEQUEUE_LOG_LEVEL": "warning",
    }
    process = subprocess.Popen([*simplequeue_command(), "serve", "--port", str(port)], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        eventually(lambda: _answers(base, "/healthz") == 200, "the service to answer /healthz")
        with httpx.Client(base_url=base, timeout=10) as http:
            for answer in (http.get("/readyz"), http.post("/push", json={"payload": 1})):
                assert answer.status_code == 503
                assert answer.json()["error"] == "DatabaseUnavailable"
                assert answer.headers["Retry-After"] == "1"
                assert name not in answer.text
                assert "asyncpg" not in answer.text
        admin(f'CREATE DATABASE "{name}"')
        eventually(lambda: _answers(base, "/readyz") == 200, "readiness once the database exists")
        with httpx.Client(base_url=base, timeout=10) as http:
            assert http.post("/push", json={"payload": 1}).status_code == 201
        assert process.poll() is None  # the same process throughout
    finally:
        process.terminate()
        process.wait(timeout=15)
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _answers(base: str, path: str) -> int | None:
    try:
        return httpx.get(f"{base}{path}", timeout=2).status_code
    except httpx.TransportError:
        return None
