"""A lease cut to nothing (SQS's ChangeMessageVisibility 0) ends as a failure's does: what waits on
its queue in this process hears of it at once."""

from __future__ import annotations

from simplequeue.domain import Draft, QueueSettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.service.queues import Limits, QueueService
from simplequeue.store.protocol import Store

from tests.engines import FakeClock


async def test_a_lease_cut_to_nothing_frees_the_room_its_limit_held(
    store: Store, clock: FakeClock, queue: str
) -> None:
    service = QueueService(store, clock, limits=Limits(max_queues=10**6))
    await service.put_queue(queue, QueueSettings(limits=FlowLimits(max_leased=1)))
    await service.push_batch(queue, [Draft(payload=1), Draft(payload=2)])
    [held] = await store.pop(queue, 2, 30)
    assert store.flow.held_by(queue) == "max_leased"  # long-polls here would not be woken...

    await service.extend(held.id, held.lease_token, 0)

    # ...but the room is free again, so they are: the hold ended with the lease.
    assert store.flow.held_by(queue) is None
    assert len(await store.pop(queue, 2, 30)) == 1
