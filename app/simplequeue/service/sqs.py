"""What the Amazon SQS door (simplequeue.api.sqs) needs of the service beyond QueueService's calls."""

from __future__ import annotations

from simplequeue.service.queues import QueueService


async def queue_exists(service: QueueService, name: str) -> bool:
    """Whether the queue exists: one indexed lookup, where `get_queue` counts its items too. SQS
    sends to a queue that exists only (a push through the REST API makes one)."""
    service.require_ready()
    return await service._store.queue_exists(name)


def visible_now(service: QueueService, queue: str) -> None:
    """A lease was cut to nothing (SQS's ChangeMessageVisibility 0): long-polls waiting on the queue
    here hear of it now, not at the watcher's next probe."""
    service._waiting.notify(queue, 1)
