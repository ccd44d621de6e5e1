"""The store's connections: up to `size` asyncpg connections, opened when first needed.

asyncpg's own pool did more per call than a store call needs (measured: ~14 µs of CPU to acquire
and release, against ~2 here): a proxy object and a future per acquire, an inactivity timer
cancelled and set again, and a release run in a task of its own (asyncio.shield), so that every
call waited one more turn of the event loop to finish. The store uses none of what that pays
for: it resets nothing between calls (see store.keep_session), sets nothing up per acquire, and
bounds each call with a deadline of its own (store.PostgresStore._conn).

What is kept: connections are opened on demand (the service starts while the database is down)
and reused most recently released first; callers beyond `size` wait their turn in order; a
connection released broken, closed or still in a transaction is terminated, never handed out;
one left idle `idle_seconds` is closed when the pool is next used.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

import asyncpg


class Pool:
    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        size: int,
        *,
        idle_seconds: float = 300.0,
    ) -> None:
        self._connect = connect
        self._size = size
        self._idle_seconds = idle_seconds
        self._idle: list[tuple[asyncpg.Connection, float]] = []  # (connection, released at): newest last
        self._open = 0  # connections open or being opened, in use or idle
        # A waiter gets a connection, or None: a place came free, for it to open one.
        self._waiters: deque[asyncio.Future[asyncpg.Connection | None]] = deque()
        self._closed = False

    async def acquire(self) -> asyncpg.Connection:
        if self._closed:
            raise asyncpg.InterfaceError("the pool is closed")
        idle = self._idle
        while idle:
            conn, _ = idle.pop()
            if not conn.is_closed():
                if idle:
                    self._close_stale()
                return conn
            self._open -= 1  # closed while idle (the server went away)
        if self._open < self._size:
            self._open += 1
            return await self._opened()
        waiter: asyncio.Future[asyncpg.Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            handed_over = await waiter
        except BaseException:
            if not waiter.done() or waiter.cancelled():
                # A release may have passed over it already (it skips waiters that are done).
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            elif waiter.exception() is None:
                # Handed a connection or a place, then cancelled before it could run (the call's
                # deadline, or its caller): what it was handed goes to the next.
                handed = waiter.result()
                if handed is None:
                    self._free_place()
                else:
                    self.release(handed)
            raise
        return handed_over if handed_over is not None else await self._opened()

    async def _opened(self) -> asyncpg.Connection:
        """A new connection, in a place already counted in `_open`."""
        try:
            return await self._connect()
        except BaseException:
            self._free_place()
            raise

    def release(self, conn: asyncpg.Connection) -> None:
        if self._closed or conn.is_closed() or conn.is_in_transaction():
            # In a transaction: a statement was cut off inside one. What the connection would
            # say next is unknown, so it goes (at once, without a round trip).
            conn.terminate()
            self._free_place()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append((conn, asyncio.get_running_loop().time()))

    def _free_place(self) -> None:
        """A connection was closed or never opened: the first waiter may open one in its place."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._open -= 1

    def _close_stale(self) -> None:
        """Close the longest idle connection if it has been idle too long: as the load drops, the
        connections it no longer needs go, one for each call."""
        conn, since = self._idle[0]
        if asyncio.get_running_loop().time() - since > self._idle_seconds:
            del self._idle[0]
            conn.terminate()
            self._open -= 1

    async def close(self) -> None:
        """Close the idle connections; those in use are closed as they are released."""
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(asyncpg.InterfaceError("the pool is closed"))
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for conn, _ in idle:
            try:
                await asyncio.wait_for(conn.close(), 5)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                conn.terminate()
