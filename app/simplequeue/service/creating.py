"""A queue's making. The most queues the service holds (SIMPLEQUEUE_MAX_QUEUES): a push or put
that would make a queue past it is refused, and makes nothing.

Only a queue's making pays for the check. Names this process has seen exist are remembered, so a
push to a known queue costs a set lookup; the first call naming a queue asks whether it exists;
only a call that would make one counts the queues. Makings in one process take turns (a lock held
from the count to the commit), so one process never makes more than the limit. Guarantee across
processes (`serve --workers N`, replicas): each counts before it makes, so makings racing in N
processes may pass the limit by at most N - 1 queues; and a queue another process deleted, that
this one still remembers, is made again by a push here without a count. Pushes that do not go
through the service (simplequeue.outbox, sq_push) make queues unchecked, as the application's
own trusted writes: they count towards the limit, which then refuses the service's makings.

And the one setting a queue's making or change checks against other queues: its dead-letter queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from simplequeue.domain import InvalidSettings, QueueNotFound, TooManyQueues
from simplequeue.store.protocol import Store

T = TypeVar("T")


class QueueLimit:
    def __init__(self, store: Store, most: int) -> None:
        self._store = store
        self.most = most
        self._known: set[str] = set()
        self._making = asyncio.Lock()

    async def making(self, queue: str, call: Callable[[], Awaitable[T]]) -> T:
        """call()'s answer; call is a push or put that makes `queue` if it does not exist. Raises
        TooManyQueues, before calling, when it would make one past the limit."""
        if queue in self._known:
            return await call()
        if await self._store.queue_exists(queue):
            self._remember(queue)
            return await call()
        async with self._making:
            if not await self._store.queue_exists(queue) and await self._store.count_queues() >= self.most:
                raise TooManyQueues(
                    f"queue {queue!r} was not made: the service holds its most queues ({self.most}, "
                    "SIMPLEQUEUE_MAX_QUEUES); delete one, or raise the limit"
                )
            answer = await call()
        self._remember(queue)
        return answer

    def forget(self, queue: str) -> None:
        """The queue was deleted here: the next call that names it is checked again."""
        self._known.discard(queue)

    def _remember(self, queue: str) -> None:
        # Names of queues deleted by other processes stay until this clears them.
        if len(self._known) >= 2 * self.most:
            self._known.clear()
        self._known.add(queue)


async def check_dead_letter_queue(store: Store, name: str, target: str | None) -> None:
    """InvalidSettings for a dead-letter queue that is the queue itself, or a new one that does not
    exist. A target deleted since it was set is kept as it is (items dying meanwhile stay dead in
    place), so that settings written back whole, as the dashboard and the SQS door write them, save."""
    if target is None:
        return
    if target == name:
        raise InvalidSettings("dead_letter_queue", "a queue cannot be its own dead-letter queue")
    if await store.queue_exists(target):
        return
    try:
        if (await store.get_queue(name)).settings.dead_letter_queue == target:
            return
    except QueueNotFound:
        pass
    raise InvalidSettings("dead_letter_queue", f"there is no queue named {target!r}")
