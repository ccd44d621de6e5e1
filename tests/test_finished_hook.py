"""The store tells who counts (metrics) of items that finish inside it, with their queue: each
completion, and each lease the sweep finds expired on its last attempt. On every engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from simplequeue.domain import Completion, Outcome, QueueSettings
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.factories import new_item

Told = list[tuple[str, Outcome, int]]


@pytest.fixture
async def told_store(settings: Settings, clock: FakeClock) -> AsyncIterator[tuple[Store, Told]]:
    told: Told = []
    store = store_for(settings, clock, on_finished=lambda q, o, n: told.append((q, o, n)))
    await store.open()
    await store.migrate()
    yield store, told
    await store.close()


async def test_completions_and_sweep_deaths_are_told_with_their_queue(
    told_store: tuple[Store, Told], queue: str, clock: FakeClock
) -> None:
    store, told = told_store
    other = f"{queue}-b"
    await store.put_queue(queue, QueueSettings(max_attempts=1))
    await store.push_batch([new_item(queue, n) for n in range(3)], skip_existing=False)
    await store.push_batch([new_item(other, 9)], skip_existing=False)
    one, two, three = await store.pop(queue, 3, 30)
    [elsewhere] = await store.pop(other, 1, 30)

    await store.complete(one.id, one.lease_token)
    await store.complete_batch([Completion(two.id, two.lease_token), Completion(elsewhere.id, None)])
    completed = (queue, Outcome.COMPLETED, 1)
    assert sorted(told) == sorted([completed, completed, (other, Outcome.COMPLETED, 1)])

    told.clear()
    clock.advance(31)  # three's lease ran out on its last attempt (max_attempts 1)
    assert (
        await store.reap_expired(100, queue) == 1
    )  # this queue: earlier tests may leave leases that ran out
    assert told == [(queue, Outcome.DEAD, 1)]
    assert three.queue == queue
