"""Databases and servers for one benchmark run: loopback only, each started and stopped here."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

POSTGRES_ADMIN_URL = os.environ.get(
    "SIMPLEQUEUE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
ROOT = Path(__file__).resolve().parent.parent
PIDS: dict[str, int] = {}
"""The process id of each running benchmark server, by its base URL (for the profiler)."""


@asynccontextmanager
async def database(engine: str) -> AsyncIterator[str]:
    """A fresh, empty database on `engine`, dropped afterwards."""
    if engine == "sqlite":
        with tempfile.TemporaryDirectory(prefix="sq-bench-") as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    name = f"sq_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(POSTGRES_ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield urlunsplit(urlsplit(POSTGRES_ADMIN_URL)._replace(path="/" + name))
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(
    database_url: str,
    port: int,
    *,
    root: Path = ROOT,
    env: dict[str, str] | None = None,
    **settings: str,
) -> subprocess.Popen[bytes]:
    """`bench.app` under uvicorn (httptools, uvloop), one process on a loopback port, ready when this
    returns. `root`: the checkout whose bench/app.py serves (another commit's, for an A/B run, with
    `env` setting its PYTHONPATH)."""
    environment = {
        **os.environ,
        **(env or {}),
        "SIMPLEQUEUE_DATABASE_URL": database_url,
        "SIMPLEQUEUE_LOG_LEVEL": "warning",
        **{f"SIMPLEQUEUE_{k.upper()}": v for k, v in settings.items()},
    }
    command = [sys.executable, "-m", "uvicorn", "bench.app:create", "--factory", "--no-access-log"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, env=environment, cwd=root)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError("the benchmark server exited during start-up")
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise RuntimeError("the benchmark server did not become ready in 30 s")
        time.sleep(0.1)


@contextmanager
def server(
    database_url: str, *, root: Path = ROOT, env: dict[str, str] | None = None, **settings: str
) -> Iterator[str]:
    """start_server's process for the block's length: its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = start_server(database_url, port, root=root, env=env, **settings)
    PIDS[base] = process.pid
    try:
        yield base
    finally:
        PIDS.pop(base, None)
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def pg_transactions(url: str) -> float:
    """Committed and rolled-back transactions of this database, as PostgreSQL counts them."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SELECT pg_stat_force_next_flush()")
        await asyncio.sleep(1.1)  # other backends flush their counts at most once a second
        return float(
            await conn.fetchval(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
            )
        )
    finally:
        await conn.close()


async def run_for(seconds: float, *workers: asyncio.Future[None] | asyncio.Task[None]) -> None:
    """Let the workers run for `seconds`, then cancel them: every load loop is bounded in time."""
    await asyncio.sleep(seconds)
    for worker in workers:
        worker.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
