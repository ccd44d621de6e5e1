"""SIMPLEQUEUE_MAX_QUEUES: a push, batch or put that would make a queue past the limit is refused
(409 TooManyQueues) and makes nothing; queues that exist keep taking pushes; only a queue's making
counts the queues. On each engine: the limit is set a few queues above what the shared database
holds already."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from simplequeue.domain import Draft, TooManyQueues
from simplequeue.service.queues import Limits, QueueService
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.http import Client, app_client, assert_error


async def limited(settings: Settings, clock: FakeClock, store: Store, room: int) -> AsyncIterator[Client]:
    """A client of the app whose limit leaves room for `room` more queues."""
    most = await store.count_queues() + room
    async for c in app_client(settings.model_copy(update={"max_queues": most}), clock):
        yield c


@pytest.fixture
async def room_for_two(settings: Settings, clock: FakeClock, store: Store) -> AsyncIterator[Client]:
    async for c in limited(settings, clock, store, 2):
        yield c


async def test_a_call_that_would_make_a_queue_past_the_limit_is_refused_and_makes_nothing(
    room_for_two: Client, store: Store, queue: str
) -> None:
    client = room_for_two
    for name in (f"{queue}-a", f"{queue}-b"):
        assert (await client.post("/push", json={"queue": name, "payload": 1})).status_code == 201
    full = await store.count_queues()

    refused = [
        await client.post("/push", json={"queue": f"{queue}-c", "payload": 1}),
        await client.post("/push/batch", json={"queue": f"{queue}-c", "items": [{"payload": 1}]}),
        await client.put(f"/queues/{queue}-c", json={"max_attempts": 2}),
    ]
    for answer in refused:
        body = assert_error(answer, 409, "TooManyQueues")
        assert f"{queue}-c" in body["detail"]
        assert "SIMPLEQUEUE_MAX_QUEUES" in body["detail"]
    assert_error(await client.get(f"/queues/{queue}-c"), 404, "QueueNotFound")
    assert await store.count_queues() == full

    # At the limit, the queues there are keep taking pushes and settings.
    assert (await client.post("/push", json={"queue": f"{queue}-a", "payload": 2})).status_code == 201
    assert (await client.put(f"/queues/{queue}-b", json={"max_attempts": 2})).status_code == 200
    assert (await client.get(f"/queues/{queue}-a")).json()["ready"] == 2


async def test_a_deleted_queue_makes_room_for_another(room_for_two: Client, queue: str) -> None:
    client = room_for_two
    for name in (f"{queue}-a", f"{queue}-b"):
        assert (await client.put(f"/queues/{name}", json={})).status_code == 201
    assert_error(await client.post("/push", json={"queue": f"{queue}-c", "payload": 1}), 409, "TooManyQueues")
    assert (await client.delete(f"/queues/{queue}-a")).status_code == 200
    assert (await client.post("/push", json={"queue": f"{queue}-c", "payload": 1})).status_code == 201


async def test_makings_at_once_in_one_process_do_not_pass_the_limit(
    settings: Settings, clock: FakeClock, store: Store, queue: str
) -> None:
    before = await store.count_queues()
    async for client in limited(settings, clock, store, 3):
        answers = await asyncio.gather(
            *(client.post("/push", json={"queue": f"{queue}-{n}", "payload": n}) for n in range(10))
        )
        assert sorted(a.status_code for a in answers) == [201] * 3 + [409] * 7
    assert await store.count_queues() == before + 3


class Counted:
    """The real store, counting the calls the limit makes."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def count_queues(self) -> int:
        self.calls.append("count_queues")
        return await self._store.count_queues()

    async def queue_exists(self, name: str) -> bool:
        self.calls.append("queue_exists")
        return await self._store.queue_exists(name)


async def test_only_a_queues_making_counts_the_queues(store: Store, clock: FakeClock, queue: str) -> None:
    counted = Counted(store)
    service = QueueService(counted, clock, limits=Limits(max_queues=10**6))  # type: ignore[arg-type]
    for n in range(5):
        await service.push(queue, Draft(payload=n))
    await service.push_batch(queue, [Draft(payload=5), Draft(payload=6)])
    # The first push asks, finds no queue, counts and makes it; the rest ask nothing.
    assert counted.calls == ["queue_exists", "queue_exists", "count_queues"]

    counted.calls.clear()
    other = QueueService(counted, clock, limits=Limits(max_queues=10**6))  # type: ignore[arg-type]
    for n in range(3):
        await other.push(queue, Draft(payload=n))
    # A process that did not make the queue asks once whether it exists, and never counts.
    assert counted.calls == ["queue_exists"]


async def test_the_service_refuses_before_the_store_is_asked_to_make_the_queue(
    store: Store, clock: FakeClock, queue: str
) -> None:
    service = QueueService(store, clock, limits=Limits(max_queues=await store.count_queues()))
    with pytest.raises(TooManyQueues):
        await service.push(queue, Draft(payload=1))
    assert not await store.queue_exists(queue)


def test_the_limit_is_a_setting_of_a_thousand_queues_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIMPLEQUEUE_MAX_QUEUES")
    assert Settings(_env_file=None).max_queues == 1000  # type: ignore[call-arg]
    monkeypatch.setenv("SIMPLEQUEUE_MAX_QUEUES", "25")
    assert Settings(_env_file=None).max_queues == 25  # type: ignore[call-arg]
    monkeypatch.setenv("SIMPLEQUEUE_MAX_QUEUES", "0")
    with pytest.raises(ValueError, match="max_queues"):
        Settings(_env_file=None)  # type: ignore[call-arg]
