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


@contextmanager
def server(
    database_url: str, *, root: Path = ROOT, env: dict[str, str] | None = None, **settings: str
) -> Iterator[str]:
    """`bench.app` under uvicorn (httptools, uvloop), one process, on a loopback port; `root`: the
    checkout whose bench/app.py serves (another commit's, for an A/B run, with `env` setting its
    PYTHONPATH)."""
    port = free_port()
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
    PIDS[base] = process.pid
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError("the benchmark server exited during start-up")
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the benchmark server did not become ready in 30 s")
            time.sleep(0.1)
        yield base
    finally:
        PIDS.pop(base, None)
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def run_for(seconds: float, *workers: asyncio.Future[None] | asyncio.Task[None]) -> None:
    """Let the workers run for `seconds`, then cancel them: every load loop is bounded in time."""
    await asyncio.sleep(seconds)
    for worker in workers:
        worker.cancel()
    await asyncio.gather(*workers, return_exceptions=True)
