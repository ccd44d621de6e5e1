"""PurgeQueue's rule: one purge of a queue per window (SQS's: 60 seconds), counted by the process
that purges. A replica that did not purge the queue does not know of the purge, and a restart
forgets it."""

from __future__ import annotations

from simplequeue.domain import QueueNotFound
from simplequeue.service.queues import QueueService
from simplequeue.service.recent import Recent

ONCE_IN_SECONDS = 60
"""SQS allows one PurgeQueue of a queue in 60 seconds; another is PurgeQueueInProgress."""


class Purges:
    def __init__(self, service: QueueService, once_in_seconds: int = ONCE_IN_SECONDS) -> None:
        self._service = service
        self.once_in_seconds = once_in_seconds
        self._purged = Recent(service.now)

    async def purge_live(self, queue: str) -> int | None:
        """QueueService.purge_live, unless this process purged the queue less than the window ago:
        then None, deleting nothing. Raises QueueNotFound, before the window is asked (a queue gone
        is not a purge in progress)."""
        if not await self._service.queue_exists(queue):
            raise QueueNotFound()
        if self._purged.within(queue, self.once_in_seconds):
            return None
        at = self._purged.note(queue)  # before the await: a purge that overlaps this one is refused
        try:
            return await self._service.purge_live(queue)
        except BaseException:
            self._purged.unnote(queue, at)  # it did not happen: the next one may try
            raise
