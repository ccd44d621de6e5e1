"""What every dialect reads the same way once its one statement has run."""

from __future__ import annotations

from simplequeue.domain import QueueNotFound, QueueStats


class QueueReads:
    """Listing queues and reading one, from a dialect's `_stats`: every queue's counts and settings
    in one statement (or one queue's, when named)."""

    async def _stats(self, queue: str | None) -> list[QueueStats]:
        raise NotImplementedError

    async def list_queues(self) -> list[QueueStats]:
        return await self._stats(None)

    async def get_queue(self, name: str) -> QueueStats:
        found = await self._stats(name)
        if not found:
            raise QueueNotFound()
        return found[0]
