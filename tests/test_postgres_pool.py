"""The PostgreSQL store's connection pool (simplequeue.store.postgres.pool), on stand-in
connections: who gets which connection, and that none is lost or handed out broken, however
callers give up. The store's behaviour on a real server (outages, frozen servers, timeouts) is
tests/faults' and the conformance suite's."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import asyncpg
import pytest
from simplequeue.store.postgres.pool import Pool


class FakeConnection:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False
        self.terminated = False
        self.in_transaction = False

    def is_closed(self) -> bool:
        return self.closed or self.terminated

    def is_in_transaction(self) -> bool:
        return self.in_transaction

    def terminate(self) -> None:
        self.terminated = True

    async def close(self) -> None:
        self.closed = True


class Opener:
    def __init__(self) -> None:
        self.opened: list[FakeConnection] = []
        self.failures = 0  # how many of the next connects fail

    async def __call__(self) -> asyncpg.Connection:
        await asyncio.sleep(0)  # a connect takes a turn of the loop
        if self.failures:
            self.failures -= 1
            raise OSError("connection refused")
        conn = FakeConnection(len(self.opened))
        self.opened.append(conn)
        return cast(asyncpg.Connection, conn)


def number(conn: Any) -> int:
    return cast(FakeConnection, conn).number


async def test_connections_are_opened_when_needed_and_the_last_released_is_reused() -> None:
    opener = Opener()
    pool = Pool(opener, 3)
    a, b = await pool.acquire(), await pool.acquire()
    assert len(opener.opened) == 2
    pool.release(a)
    pool.release(b)
    assert number(await pool.acquire()) == number(b)
    assert len(opener.opened) == 2


async def test_callers_beyond_the_size_wait_in_order() -> None:
    opener = Opener()
    pool = Pool(opener, 1)
    held = await pool.acquire()
    first = asyncio.ensure_future(pool.acquire())
    second = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    assert not first.done()
    assert not second.done()
    pool.release(held)
    assert number(await first) == number(held)
    assert not second.done()
    pool.release(await first)
    assert number(await second) == number(held)
    assert len(opener.opened) == 1


async def test_a_waiter_that_gives_up_loses_no_connection() -> None:
    pool = Pool(Opener(), 1)
    held = await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    pool.release(held)
    assert number(await asyncio.wait_for(pool.acquire(), 1)) == number(held)


async def test_a_connection_handed_to_a_waiter_cancelled_before_it_ran_goes_to_the_next() -> None:
    pool = Pool(Opener(), 1)
    held = await pool.acquire()
    first = asyncio.ensure_future(pool.acquire())
    second = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    pool.release(held)  # handed to the first waiter, which is cancelled before it resumes
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert number(await asyncio.wait_for(second, 1)) == number(held)


@pytest.mark.parametrize("how", ["closed", "in a transaction"])
async def test_a_connection_released_unusable_is_terminated_and_its_place_reopened(how: str) -> None:
    opener = Opener()
    pool = Pool(opener, 1)
    held = await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    broken = cast(FakeConnection, held)
    if how == "closed":
        broken.closed = True
    else:
        broken.in_transaction = True
    pool.release(held)
    fresh = await asyncio.wait_for(waiting, 1)
    assert broken.is_closed()
    assert number(fresh) == 1
    pool.release(fresh)
    assert number(await pool.acquire()) == 1


async def test_a_failed_connect_frees_its_place() -> None:
    opener = Opener()
    pool = Pool(opener, 1)
    opener.failures = 1
    with pytest.raises(OSError, match="connection refused"):
        await pool.acquire()
    assert number(await asyncio.wait_for(pool.acquire(), 1)) == 0


async def test_a_waiter_given_a_place_connects_and_a_failure_passes_the_place_on() -> None:
    opener = Opener()
    pool = Pool(opener, 1)
    held = await pool.acquire()
    first = asyncio.ensure_future(pool.acquire())
    second = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    cast(FakeConnection, held).closed = True
    opener.failures = 1
    pool.release(held)  # the first waiter gets the place, and fails to connect
    with pytest.raises(OSError, match="connection refused"):
        await first
    assert number(await asyncio.wait_for(second, 1)) == 1


async def test_a_connection_idle_too_long_is_closed_when_the_pool_is_next_used() -> None:
    opener = Opener()
    pool = Pool(opener, 3, idle_seconds=0.01)
    a, b = await pool.acquire(), await pool.acquire()
    pool.release(a)
    await asyncio.sleep(0.05)
    pool.release(b)
    again = await pool.acquire()
    assert number(again) == number(b)
    assert cast(FakeConnection, a).terminated
    c, d = await pool.acquire(), await pool.acquire()  # a's place is free again: two more fit
    assert {number(c), number(d)} == {2, 3}


async def test_closing_closes_the_idle_connections_and_those_in_use_when_released() -> None:
    pool = Pool(Opener(), 2)
    a, b = await pool.acquire(), await pool.acquire()
    pool.release(a)
    await pool.close()
    assert cast(FakeConnection, a).closed
    pool.release(b)
    assert cast(FakeConnection, b).terminated
    with pytest.raises(asyncpg.InterfaceError):
        await pool.acquire()


async def test_a_waiter_cancelled_and_passed_over_by_a_release_is_not_looked_for_again() -> None:
    pool = Pool(Opener(), 1)
    held = await pool.acquire()
    first = asyncio.ensure_future(pool.acquire())
    second = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    first.cancel()  # its waiter is cancelled at once; the task learns of it on its next turn
    pool.release(held)  # passes over the first waiter, to the second
    with pytest.raises(asyncio.CancelledError):
        await first
    assert number(await asyncio.wait_for(second, 1)) == number(held)


async def test_closing_refuses_the_callers_waiting() -> None:
    pool = Pool(Opener(), 1)
    await pool.acquire()
    waiting = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0)
    await pool.close()
    with pytest.raises(asyncpg.InterfaceError, match="closed"):
        await waiting
