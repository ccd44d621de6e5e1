"""Long-polling pops that hold no database connection while they wait.

Waiting pops sleep on futures, grouped per queue. They are woken by:
- a push through this process (the route signals the count of items it committed);
- the store's notifications of pushes through other processes (PostgreSQL LISTEN/NOTIFY);
- the probe: ONE task per process that asks the database, in one statement for every queue
  with waiters, when each queue's next item becomes poppable. It sleeps until then (a lease
  expiring, a retry falling due) or for ``recheck_seconds`` at most, which is how pushes
  through other processes are found on engines without notifications.

A queue whose last pop found nothing is "known empty" until a signal arrives, so waiting
requests that come and go on an idle queue cost no statements at all: the probe is the only
load they cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from simplequeue.domain import CompleteOutcome, Completion, LeasedItem, QueueError
from simplequeue.store.protocol import Store

log = logging.getLogger("simplequeue.waiting")

REAP_AT_POP = 100
"""The most of its queue's leases that ran out on their last attempt one pop reaps."""


async def never_gone() -> bool:
    return False


@dataclass(eq=False)
class QueueWatch:
    """The waiting pops of one queue in this process."""

    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    # Pops using this watch, waiting or not: a watch in use is never forgotten, or a pop between
    # its statement and its wait would sleep on a watch that no signal reaches.
    users: int = 0
    # Bumped by every signal. A pop that found nothing marks the queue empty *as of* the generation
    # it started in, so a signal that lands while its statement runs is never lost.
    generation: int = 0
    empty_as_of: int = -1
    # The probe's last wake for items already due: the earliest visible_at it woke for, and when
    # (monotonic). A pop woken for them that found nothing (a paused queue, one at its flow limits,
    # items behind a group's head in flight) is not woken for the same items again before the
    # recheck: only a signal, or items falling due later, wake it sooner.
    woken_for: datetime | None = None
    woken_at: float = 0.0
    held: bool = False  # the probe found a flow limit's hold on the queue since it last woke it

    def known_empty(self) -> bool:
        return self.empty_as_of == self.generation

    def wake(self, count: int | None) -> None:
        """Wake `count` waiters, oldest first (None: all of them)."""
        self.generation += 1
        woken = 0
        while self.waiters and (count is None or woken < count):
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                woken += 1


class Waiting:
    """Every long-polling pop of this process, and the probe that serves them."""

    def __init__(self, store: Store, *, recheck_seconds: float) -> None:
        self._store = store
        self._recheck = recheck_seconds
        self._watches: dict[str, QueueWatch] = {}
        self._probe: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()  # a queue got its first waiter: probe now
        self.closed = False

    def notify(self, queue: str | None, count: int) -> None:
        """Items became poppable: `count` of them on `queue`; (None, 0) when any queue may have some."""
        if queue is None:
            for watch in self._watches.values():
                watch.wake(None)
        elif (one := self._watches.get(queue)) is not None:
            one.wake(count)

    def room_freed(self, count: int) -> None:
        """`count` leases ended through this process (completed, failed): waiters on queues held at
        their max_leased may find room now, whichever queue the leases were of."""
        if count > 0:
            for queue in self._store.flow.room_freed():
                self.notify(queue, count)

    def close(self) -> None:
        """Answer every waiting pop now, with what it has (nothing): the service is stopping."""
        self.closed = True
        for watch in self._watches.values():
            watch.wake(None)
        if self._probe is not None:
            self._probe.cancel()

    async def pop(
        self,
        queue: str,
        *,
        max_items: int,
        wait_seconds: float,
        lease_seconds: int | None,
        gone: Callable[[], Awaitable[bool]] = never_gone,
        group_runs: bool = False,
    ) -> list[LeasedItem]:
        """Lease what is poppable, waiting up to wait_seconds for something to be. `gone` says
        whether the caller has hung up: after each wait it is asked before leasing, so that items
        are not leased to nobody until their leases run out. group_runs: see Store.pop."""
        if wait_seconds <= 0:
            return await self._pop_once(queue, max_items, lease_seconds, group_runs)
        deadline = time.monotonic() + wait_seconds
        watch = self._watch(queue)
        watch.users += 1
        waited = False
        try:
            while True:
                generation = watch.generation
                if not watch.known_empty():
                    if waited and await gone():
                        watch.wake(1)  # the signal that woke this pop is another waiter's now
                        return []
                    items = await self._pop_once(queue, max_items, lease_seconds, group_runs)
                    if items:
                        return items
                    if watch.generation == generation:
                        watch.empty_as_of = generation
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    return []
                await self._wait(watch, remaining)
                waited = True
        finally:
            watch.users -= 1

    async def complete_and_pop(
        self,
        completions: Sequence[Completion],
        queue: str,
        *,
        max_items: int,
        wait_seconds: float,
        lease_seconds: int | None,
        gone: Callable[[], Awaitable[bool]] = never_gone,
    ) -> tuple[list[CompleteOutcome], list[LeasedItem]]:
        """The completions are committed before any wait, with the first pop where the queue may
        have something (one transaction), alone where it is known empty; then pop as pop() does."""
        watch = self._watches.get(queue)
        items: list[LeasedItem] = []
        if watch is not None and watch.known_empty():
            outcomes = await self._store.complete_batch(completions)
        else:
            outcomes, items = await self._store.complete_and_pop(completions, queue, max_items, lease_seconds)
            if len(items) < max_items and not self._store.reaps_at_pop:
                await self._reap(queue)
        self.room_freed(sum(1 for outcome in outcomes if outcome == CompleteOutcome.COMPLETED))
        if not items and wait_seconds > 0:
            items = await self.pop(
                queue, max_items=max_items, wait_seconds=wait_seconds, lease_seconds=lease_seconds, gone=gone
            )
        return outcomes, items

    async def _pop_once(
        self, queue: str, max_items: int, lease_seconds: int | None, group_runs: bool
    ) -> list[LeasedItem]:
        items = await self._store.pop(queue, max_items, lease_seconds, group_runs=group_runs)
        if len(items) < max_items and not self._store.reaps_at_pop:
            await self._reap(queue)
        return items

    async def _reap(self, queue: str) -> None:
        """A pop that had room for more reaps its queue's leases that ran out on their last attempt:
        a message over its receive count moves to its dead-letter queue at the receive that finds
        it, as SQS moves it, not at the sweep's next round. A pop that filled up pays nothing; one
        with room pays one more statement, a seek of the queue's expired leases (the range its own
        walk of them read). The move wakes the target's waiters here (other replicas: PostgreSQL's
        NOTIFY, or their probe). Its failure is logged, not raised: the pop's items are leased.
        A store that reaps in its pop's own transaction (SQLite: no round trip to save) says so
        (reaps_at_pop); its moves are found by the target's waiters at their probe's recheck."""
        try:
            moved = await self._store.reap_expired(REAP_AT_POP, queue)
            if moved:
                target = (await self._store.get_queue(queue)).settings.dead_letter_queue
                if target is not None:
                    self.notify(target, moved)
        except QueueError as exc:
            log.warning("a pop's reap of %s failed: %s", queue, exc)

    def _watch(self, queue: str) -> QueueWatch:
        watch = self._watches.get(queue)
        if watch is None:
            watch = self._watches[queue] = QueueWatch()
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(self._run_probe(), name="simplequeue-probe")
        return watch

    async def _wait(self, watch: QueueWatch, seconds: float) -> None:
        waiter = asyncio.get_running_loop().create_future()
        watch.waiters.append(waiter)
        if len(watch.waiters) == 1:
            self._kick.set()  # the probe learns when this queue's next lease expires
        try:
            await asyncio.wait_for(waiter, seconds)
        except TimeoutError:
            pass
        finally:
            with contextlib.suppress(ValueError):
                watch.waiters.remove(waiter)

    async def _run_probe(self) -> None:
        while not self.closed:
            self._forget_unused_queues()
            if not self._watches:
                return  # no pops left; the next one starts the probe again
            queues = [name for name, watch in self._watches.items() if watch.waiters]
            self._kick.clear()
            delay = await self._probe_once(queues) if queues else self._recheck
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), delay)

    async def _probe_once(self, queues: list[str]) -> float:
        """Wake the queues that have poppable items; return how long to sleep before looking again."""
        try:
            next_at, now = await self._store.next_visible_at(queues)
        except QueueError as exc:
            log.warning("long-poll probe failed: %s", exc.detail)
            return self._recheck
        delay = self._recheck
        for queue, moment in next_at.items():
            watch = self._watches[queue]
            # A queue at its flow limits has items there that it may not hand out yet: its waiters
            # are woken when the limit's hold ends (store/limits.py), or by room_freed.
            hold = self._store.flow.hold_seconds(queue)
            if hold > 0:
                watch.held = True
                delay = min(delay, hold)
                continue
            wait = (moment - now).total_seconds()
            if wait > 0:
                delay = min(delay, wait)
                continue
            since = time.monotonic() - watch.woken_at
            in_vain = watch.known_empty() and watch.woken_for == moment and since < self._recheck
            if in_vain and not watch.held:
                delay = min(delay, self._recheck - since)  # woken for these already, and nothing changed
                continue
            watch.held = False  # a hold that ended: room again, for the same items
            watch.woken_for, watch.woken_at = moment, time.monotonic()
            self.notify(queue, len(watch.waiters))
        return max(delay, 0.001)

    def _forget_unused_queues(self) -> None:
        for name in [name for name, watch in self._watches.items() if watch.users == 0]:
            del self._watches[name]
