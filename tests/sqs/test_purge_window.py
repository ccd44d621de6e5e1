"""PurgeQueue's one purge of a queue per 60 seconds (simplequeue.service.local.purges), with the
clock in the test's hands, on every engine: the window runs out, each queue has its own, a queue
gone is gone before it is in progress, and a purge that failed does not count."""

from __future__ import annotations

from collections.abc import AsyncIterator
from uuid import uuid4

import pytest
from simplequeue.domain import DatabaseUnavailable, Draft, QueueNotFound
from simplequeue.main import store_for
from simplequeue.service.local.purges import ONCE_IN_SECONDS, Purges
from simplequeue.service.queues import QueueService
from simplequeue.settings import Settings

from tests.engines import FakeClock


class FailingOnce(QueueService):
    """The service, whose next purge fails as a database that stopped answering would."""

    fail_next = False

    async def purge_live(self, queue: str) -> int:
        if self.fail_next:
            self.fail_next = False
            raise DatabaseUnavailable("the test's database went away")
        return await super().purge_live(queue)


@pytest.fixture
async def service(database_url: str, clock: FakeClock) -> AsyncIterator[FailingOnce]:
    settings = Settings(database_url=database_url, db_timeout_seconds=5, sweep=False)
    service = FailingOnce(store_for(settings, clock), clock)
    await service.start(migrate=True)
    yield service
    await service.stop()


async def queue_of(service: QueueService, messages: int) -> str:
    name = f"q-{uuid4().hex[:12]}"
    await service.push_batch(name, [Draft(payload=f"m{k}") for k in range(messages)])
    return name


async def test_a_queue_is_purged_again_after_its_window(service: FailingOnce, clock: FakeClock) -> None:
    purges = Purges(service)
    queue = await queue_of(service, 2)
    assert await purges.purge_live(queue) == 2
    await service.push_batch(queue, [Draft(payload="after")])

    clock.advance(ONCE_IN_SECONDS - 1)
    assert await purges.purge_live(queue) is None  # in progress: nothing deleted
    assert (await service.get_queue(queue)).ready == 1
    clock.advance(1)
    assert await purges.purge_live(queue) == 1


async def test_each_queue_has_its_own_window(service: FailingOnce) -> None:
    purges = Purges(service)
    one, other = await queue_of(service, 1), await queue_of(service, 1)
    assert await purges.purge_live(one) == 1
    assert await purges.purge_live(other) == 1
    assert await purges.purge_live(one) is None


async def test_a_queue_gone_is_not_found_within_its_window(service: FailingOnce) -> None:
    purges = Purges(service)
    queue = await queue_of(service, 1)
    assert await purges.purge_live(queue) == 1
    await service.delete_queue(queue, force=True)
    with pytest.raises(QueueNotFound):
        await purges.purge_live(queue)


async def test_a_purge_that_failed_does_not_hold_the_window(service: FailingOnce) -> None:
    purges = Purges(service)
    queue = await queue_of(service, 3)
    service.fail_next = True
    with pytest.raises(DatabaseUnavailable):
        await purges.purge_live(queue)
    assert await purges.purge_live(queue) == 3  # tried again at once, and done
    assert await purges.purge_live(queue) is None
