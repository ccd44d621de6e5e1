"""LISTEN/NOTIFY: pushes through other processes wake this process's long-polls at once.

A statement trigger NOTIFYs `simplequeue_ready` with {"q": queue, "n": count} at commit. One
dedicated connection per process listens, kept up (reconnecting with backoff) for the life of
the store. Our own pool's NOTIFYs are ignored: the service already woke its waiters for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import suppress

import asyncpg

from simplequeue.store.postgres.errors import UNAVAILABLE
from simplequeue.store.protocol import ReadyCallback

CHANNEL = "simplequeue_ready"
log = logging.getLogger("simplequeue.postgres")


class Listener:
    def __init__(self, url: str, timeout_seconds: float, *, ignore_pids: set[int]) -> None:
        self._url = url
        self._timeout = timeout_seconds
        self._ignore_pids = ignore_pids
        self._task: asyncio.Task[None] | None = None

    async def start(self, on_ready: ReadyCallback) -> None:
        self._task = asyncio.create_task(self._listen(on_ready), name="simplequeue-listen")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self, on_ready: ReadyCallback) -> None:
        def received(_: object, pid: int, channel: str, payload: object) -> None:
            if pid in self._ignore_pids:
                return
            message = json.loads(str(payload))
            on_ready(message["q"], int(message["n"]))

        backoff = 0.5
        while True:
            lost = asyncio.Event()
            try:
                conn = await asyncpg.connect(self._url, timeout=self._timeout)
            except (*UNAVAILABLE, asyncpg.PostgresError) as exc:
                log.warning("LISTEN connection failed (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            try:
                conn.add_termination_listener(lambda _, lost=lost: lost.set())
                await conn.add_listener(CHANNEL, received)
                backoff = 0.5
                on_ready(None, 0)  # anything pushed while we were not listening
                await lost.wait()
                log.warning("LISTEN connection lost; reconnecting")
            except (*UNAVAILABLE, asyncpg.PostgresError) as exc:
                log.warning("LISTEN failed (%s); reconnecting", exc)
            finally:
                with suppress(Exception):
                    await conn.close(timeout=1)
