"""The Worker's prefetch: items leased ahead of its free slots wait in a local buffer, their leases
kept, and are handed back when it stops (the real app in-process, real time, as in
test_client_worker)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from simplequeue.client import AsyncClient, Worker
from simplequeue.client.worker import HANDED_BACK

from tests.test_client_worker import Gates, Recording, app_transport, settled, sq, until

__all__ = ["app_transport", "sq"]  # the fixtures, shared with test_client_worker


async def test_a_pop_leases_ahead_of_the_free_slots_and_the_buffer_starts_without_a_request(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    await sq.push_batch([{"payload": n} for n in range(6)], queue=queue)
    handle = Gates()
    worker = Worker(sq, queue, handle, concurrency=2, prefetch=4, wait_seconds=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 2)
    assert (await sq.stats(queue)).leased == 6  # two running, four waiting in the buffer
    assert app_transport.pops[0] == (6, 6)  # one pop for the slots and the buffer
    handle.all.set()
    await until(lambda: settled(sq, queue, 6))
    worker.stop()
    await asyncio.wait_for(running, 30)
    assert sorted(i.payload for i in handle.started) == list(range(6))
    assert sum(got for _, got in app_transport.pops) == 6  # the buffer's items came with the first


async def test_a_stopped_worker_hands_back_what_it_prefetched(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    pushed = await sq.push_batch([{"payload": n} for n in range(5)], queue=queue)
    handle = Gates()
    worker = Worker(sq, queue, handle, concurrency=1, prefetch=3, wait_seconds=5)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 1)
    await until(lambda: leased(sq, queue, 4))  # one running, three waiting in the buffer
    worker.stop()
    handle.all.set()
    await asyncio.wait_for(running, 30)
    assert len(handle.started) == 1  # nothing buffered was started after stop()
    stats = await sq.stats(queue)
    assert (stats.completed_in_history, stats.leased, stats.ready) == (1, 0, 4)
    # Ready again at once: no backoff, no lease to run out.
    again = await sq.pop(queue, max_items=10)
    assert sorted(i.id for i in again) == sorted(set(pushed.ids) - {handle.started[0].id})
    handed = [i for i in again if i.attempts == 2]
    assert len(handed) == 3  # the API has no hand-back that takes back the attempt a pop counted
    for item in handed:
        assert [e.error for e in (await sq.get_item(item.id)).errors] == [HANDED_BACK]


async def test_a_prefetched_item_on_its_last_attempt_is_handled_not_handed_back(
    sq: AsyncClient, queue: str
) -> None:
    # Handed back, its attempt would stay spent and it would die unhandled.
    await sq.put_queue(queue, max_attempts=1)
    await sq.push_batch([{"payload": n} for n in range(3)], queue=queue)
    handle = Gates()
    worker = Worker(sq, queue, handle, concurrency=1, prefetch=2, wait_seconds=5)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 1)
    await until(lambda: leased(sq, queue, 3))
    worker.stop()
    handle.all.set()
    await asyncio.wait_for(running, 30)
    assert sorted(i.payload for i in handle.started) == [0, 1, 2]
    stats = await sq.stats(queue)
    assert (stats.completed_in_history, stats.dead, stats.leased, stats.ready) == (3, 0, 0, 0)


async def test_a_prefetched_items_lease_is_extended_while_it_waits(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    pushed = await sq.push_batch([{"payload": n} for n in range(2)], queue=queue)
    handle = Gates()
    worker = Worker(sq, queue, handle, concurrency=1, prefetch=1, lease_seconds=1, extend_every=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 1)
    await until(lambda: leased(sq, queue, 2))
    [waiting] = set(pushed.ids) - {handle.started[0].id}
    first = (await sq.get_item(waiting)).lease_expires_at
    assert first is not None

    async def outlived() -> bool:
        # Extended to a second past a time later than its first lease's end: that lease is over.
        now = (await sq.get_item(waiting)).lease_expires_at
        return now is not None and (now - first).total_seconds() > 1

    await until(outlived)
    info = await sq.get_item(waiting)
    assert info.status == "leased"
    assert info.attempts == 1
    assert await sq.pop(queue) == []  # nobody else can have it
    handle.all.set()
    await until(lambda: settled(sq, queue, 2))
    worker.stop()
    await asyncio.wait_for(running, 30)
    assert set(app_transport.extends) == {200}
    history = await sq.history(queue, outcome="completed")
    assert sorted(h.attempts for h in history.items) == [1, 1]  # each handled on its first lease


async def test_a_prefetched_item_whose_lease_is_lost_is_not_started(
    sq: AsyncClient, app_transport: Recording, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    pushed = await sq.push_batch([{"payload": n} for n in range(2)], queue=queue)
    handle = Gates()
    caplog.set_level(logging.WARNING, logger="simplequeue.client")
    worker = Worker(sq, queue, handle, concurrency=1, prefetch=1, extend_every=0.1, wait_seconds=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 1)
    await until(lambda: leased(sq, queue, 2))
    [waiting] = set(pushed.ids) - {handle.started[0].id}
    await sq.release(waiting)  # an admin ends its lease while it waits in the buffer
    await until(lambda: "not started (its lease was lost while it waited)" in caplog.text)
    handle.all.set()
    await until(lambda: settled(sq, queue, 2))
    worker.stop()
    await asyncio.wait_for(running, 30)
    # Started once, under the lease of the pop that took it again.
    assert sorted(i.id for i in handle.started) == sorted(pushed.ids)
    assert [i.attempts for i in handle.started if i.id == waiting] == [2]
    assert "completion refused" not in caplog.text


async def leased(sq: AsyncClient, queue: str, count: int) -> bool:
    return (await sq.stats(queue)).leased == count
