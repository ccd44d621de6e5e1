"""LISTEN/NOTIFY: pushes through other processes wake this process's long-polls at once, and
schedule changes through them its scheduler.

A statement trigger NOTIFYs `simplequeue_ready` with {"q": token, "n": count} at commit. One
dedicated connection per process listens, kept up (reconnecting with backoff) for the life of
the store. Our own pool's NOTIFYs are ignored: the service already woke its waiters for them.

Any role that may connect may LISTEN, so the payload names no queue: its token is a keyed hash of
the queue's name (sq_ready_token, store/postgres/functions.sql), keyed by sq_settings' notify_key,
which the listening connection reads. This process maps back the tokens of the queues its
long-polls wait on (the probe asks about each of them, `QueueTokens.heard_of`), and ignores others.

A statement trigger on sq_schedules NOTIFYs `simplequeue_schedules`, with no payload, when a
schedule is made, replaced, paused, resumed or deleted (store/postgres/functions.sql).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from contextlib import suppress

import asyncpg

from simplequeue.store.postgres.errors import UNAVAILABLE
from simplequeue.store.postgres.waited import Waited
from simplequeue.store.protocol import ReadyCallback

CHANNEL = "simplequeue_ready"
SCHEDULES_CHANNEL = "simplequeue_schedules"
KEY_SQL = "SELECT value FROM sq_settings WHERE name = 'notify_key'"
log = logging.getLogger("simplequeue.postgres")


def token_of(key: str, queue: str) -> str:
    """As sq_ready_token(queue) computes it."""
    return hashlib.sha256(f"{key}:{queue}".encode()).hexdigest()[:16]


def parsed(payload: object) -> tuple[str, int] | None:
    """A NOTIFY's (token, count); None for anything else, since any role that connects may NOTIFY
    on our channel too (a traceback per such message would flood the log)."""
    try:
        message = json.loads(str(payload))
        return str(message["q"]), int(message["n"])
    except (ValueError, TypeError, KeyError, OverflowError):
        return None


class QueueTokens:
    """The queues NOTIFY's tokens stand for, of those this process has asked about."""

    MOST = 10_000  # then forgotten at once; the probe asks about the queues still waited on again

    def __init__(self) -> None:
        self._key: str | None = None
        self._names: set[str] = set()
        self._queues: dict[str, str] = {}  # token -> queue

    def use_key(self, key: str | None) -> None:
        """The key as read at (re)connect. None: a schema before 0010, whose trigger sends names."""
        self._key = key or None
        self._queues = {token_of(key, name): name for name in self._names} if key else {}

    def heard_of(self, queues: Iterable[str]) -> None:
        for queue in queues:
            if queue in self._names:
                continue
            if len(self._names) >= self.MOST:
                self._names.clear()
                self._queues.clear()
            self._names.add(queue)
            if self._key is not None:
                self._queues[token_of(self._key, queue)] = queue

    def queue_of(self, carried: str) -> str | None:
        """The queue a payload's "q" stands for; None if no long-poll of ours waits on it (a name
        sent by a replica of the release before, during a rolling upgrade, is such a token)."""
        return self._queues.get(carried) if self._key is not None else carried


class Listener:
    def __init__(self, url: str, timeout_seconds: float, *, ignore_pids: set[int]) -> None:
        self._url = url
        self._timeout = timeout_seconds
        self._ignore_pids = ignore_pids
        self._task: asyncio.Task[None] | None = None
        self.tokens = QueueTokens()
        self.waited = Waited()
        self._schedules_changed: list[Callable[[], None]] = []

    def on_schedules_changed(self, callback: Callable[[], None]) -> None:
        self._schedules_changed.append(callback)

    def _tell_schedules_changed(self) -> None:
        for callback in self._schedules_changed:
            callback()

    async def start(self, on_ready: ReadyCallback) -> None:
        self._task = asyncio.create_task(self._listen(on_ready), name="simplequeue-listen")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self, on_ready: ReadyCallback) -> None:
        def received(_: object, pid: int, channel: str, payload: object) -> None:
            if pid in self._ignore_pids or (message := parsed(payload)) is None:
                return
            if (queue := self.tokens.queue_of(message[0])) is not None:
                on_ready(queue, message[1])

        def schedules_changed(_: object, pid: int, channel: str, payload: object) -> None:
            if pid not in self._ignore_pids:  # our own changes woke our scheduler already
                self._tell_schedules_changed()

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
                self.tokens.use_key(await conn.fetchval(KEY_SQL))
                self.waited.forget()  # a lost connection may be a restarted server, which lost them
                await conn.add_listener(CHANNEL, received)
                await conn.add_listener(SCHEDULES_CHANNEL, schedules_changed)
                backoff = 0.5
                on_ready(None, 0)  # anything pushed while we were not listening
                self._tell_schedules_changed()  # and any schedule changed meanwhile
                await lost.wait()
                log.warning("LISTEN connection lost; reconnecting")
            except (*UNAVAILABLE, asyncpg.PostgresError) as exc:
                log.warning("LISTEN failed (%s); reconnecting", exc)
            finally:
                with suppress(Exception):
                    await conn.close(timeout=1)
