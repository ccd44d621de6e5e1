"""Schedules: the calls the API makes (put, read, pause, resume, trigger, delete) and the
Scheduler every replica runs.

There is no leader. Each replica's Scheduler reads the earliest next slot with one statement;
when it is due, it fires the due schedules in batches, each one transaction that locks the rows
(skipping those another replica is firing, so replicas split a slot's schedules), moves their
slots and pushes their items (store/schedules.py). Then it sleeps until the next slot any replica
knows of. A change made here wakes it at once; one made through another replica too on PostgreSQL
(NOTIFY), and elsewhere within MAX_SLEEP_SECONDS, its longest sleep there. Idle, a replica
therefore costs at most one statement a second, whatever the number of schedules (on PostgreSQL,
one per slot or per change).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from contextlib import suppress
from datetime import datetime, timedelta
from uuid import uuid4

from simplequeue.domain import (
    Clock,
    DatabaseUnavailable,
    ItemExists,
    NewItem,
    Page,
    QueueError,
    SchemaNotReady,
    TooManyQueues,
)
from simplequeue.domain.names import is_queue_name, key_problem, text_problem
from simplequeue.domain.schedules import (
    Fired,
    InvalidSchedule,
    PutMode,
    Schedule,
    ScheduleNotFound,
    ScheduleSpec,
    check_name,
    dedup_key,
    first_slot,
    jitter,
    plan_firing,
)
from simplequeue.service.queues import QueueService
from simplequeue.store.protocol import Store

log = logging.getLogger("simplequeue.schedules")

MAX_SLEEP_SECONDS = 1.0
"""The longest a scheduler sleeps where the engine cannot tell it of changes made through another
replica (SQLite, SQL Server): how soon it sees them."""
TOLD_SLEEP_SECONDS = 60.0
"""The longest it sleeps where the engine tells it of changes (PostgreSQL's NOTIFY): a bound, not
a poll, should news of a change ever go astray."""
DUE_BATCH = 500
"""Due schedules fired per transaction: their rows locked by one statement, their slots moved by
one, their items pushed by one."""
BATCHES_AT_ONCE = 2
"""Batches in flight at once per replica: one's statements run while the next is planned (the
rows each locks are its own: SKIP LOCKED; on SQLite they take turns)."""
HELD_SECONDS = 0.05
"""How soon a scheduler looks again when every due schedule is held by another replica's firing."""
FIRING_AT_ONCE = 8
"""Firings in flight at once when schedules are fired one by one (after a batch's push was refused)."""
IDLE_SECONDS = 2.0
"""How long the scheduler waits after an error, or while the database is not ready."""


class ScheduleService:
    def __init__(self, store: Store, queues: QueueService, clock: Clock, *, max_queues: int = 1000) -> None:
        self._store = store
        self._queues = queues
        self._clock = clock
        self._max_queues = max_queues
        self.changed = asyncio.Event()
        """Set when a schedule changes through this replica: its scheduler looks again at once."""

    async def put(self, name: str, spec: ScheduleSpec, must: PutMode = "any") -> tuple[Schedule, bool]:
        """Make or replace the schedule; its next slot is the first after now. Raises InvalidSchedule;
        `must` "new": a taken name's schedule is answered unchanged, with False; "existing":
        ScheduleNotFound for a free name."""
        now = self._clock()
        check_name(name)
        spec.check(now)
        if not is_queue_name(spec.queue):
            raise InvalidSchedule("queue", "1 to 128 letters, digits, '.', '_' or '-'")
        if spec.group is not None and (problem := text_problem(spec.group) or key_problem(spec.group)):
            raise InvalidSchedule("group", problem)
        self._queues.require_ready()
        await self._check_room(spec.queue)
        made = await self._store.put_schedule(name, spec, first_slot(spec.timing, now), now, must)
        self.changed.set()
        return made

    async def _check_room(self, queue: str) -> None:
        """TooManyQueues for a schedule whose firings would make a queue past the service's most
        (SIMPLEQUEUE_MAX_QUEUES), as a push would be refused."""
        if await self._store.queue_exists(queue) or await self._store.count_queues() < self._max_queues:
            return
        raise TooManyQueues(
            f"schedule's queue {queue!r} does not exist, and the service holds its most queues "
            f"({self._max_queues}, SIMPLEQUEUE_MAX_QUEUES); make the queue first, or raise the limit"
        )

    @property
    def max_payload_bytes(self) -> int:
        """The largest payload a schedule's items may carry, as a push's."""
        return self._queues.max_payload_bytes

    async def get(self, name: str) -> Schedule:
        self._queues.require_ready()
        return await self._store.get_schedule(name)

    async def page(self, limit: int, cursor: str | None) -> Page[Schedule]:
        self._queues.require_ready()
        return await self._store.list_schedules(limit, cursor)

    async def delete(self, name: str) -> None:
        """Raises ScheduleNotFound. Items it pushed stay in their queue."""
        self._queues.require_ready()
        if not await self._store.delete_schedule(name):
            raise ScheduleNotFound(f"There is no schedule named {name!r}.")
        self.changed.set()

    async def pause(self, name: str) -> Schedule:
        self._queues.require_ready()
        paused = await self._store.pause_schedule(name, self._clock())
        self.changed.set()
        return paused

    async def resume(self, name: str) -> Schedule:
        """Unpause it: its next slot is the first after now (a pause's slots are not caught up)."""
        self._queues.require_ready()
        now = self._clock()
        schedule = await self._store.get_schedule(name)
        resumed = await self._store.resume_schedule(name, first_slot(schedule.spec.timing, now), now)
        self.changed.set()
        return resumed

    async def trigger(self, name: str) -> Schedule:
        """Push one item now, paused or not; its slots are untouched."""
        self._queues.require_ready()
        now = self._clock()
        schedule = await self._store.get_schedule(name)
        item = item_for(schedule, now, keyed=False)
        await self._store.trigger_schedule(name, item, now)
        self._queues.pushed_elsewhere(schedule.spec.queue, 1)
        return await self._store.get_schedule(name)


def item_for(schedule: Schedule, slot: datetime, *, keyed: bool = True) -> NewItem:
    """The item that fires the slot: keyed by (schedule, slot), poppable from the slot plus its
    jitter (at once, for a slot caught up late)."""
    spec = schedule.spec
    return NewItem(
        id=uuid4(),
        queue=spec.queue,
        payload_json=spec.payload_json,
        created_at=slot,
        priority=spec.priority,
        group=spec.group,
        dedup_key=dedup_key(schedule.name, slot) if keyed else None,
        not_before=slot + timedelta(seconds=jitter(schedule.name, slot, spec.jitter_seconds)),
    )


class Scheduler:
    """Fires due slots, once each across every replica; see the module's docstring."""

    def __init__(
        self,
        schedules: ScheduleService,
        store: Store,
        queues: QueueService,
        clock: Clock,
        shuffle: random.Random | None = None,
    ) -> None:
        self._schedules = schedules
        self._store = store
        self._queues = queues
        self._clock = clock
        self._random = shuffle or random.Random()
        self._longest_sleep = MAX_SLEEP_SECONDS

    async def run_forever(self) -> None:
        notifications = self._store.notifications
        if notifications is not None:
            notifications.on_schedules_changed(self._schedules.changed.set)
            self._longest_sleep = TOLD_SLEEP_SECONDS
        said: str | None = None
        while True:
            if not self._queues.ready:
                await asyncio.sleep(IDLE_SECONDS)
                continue
            try:
                wake_at = await self.run_once()
                said = None
            except (DatabaseUnavailable, SchemaNotReady) as exc:
                log.debug("the scheduler waits for the database (%s)", exc.code)
                await asyncio.sleep(IDLE_SECONDS)
                continue
            except QueueError as exc:
                if exc.code != said:  # one line per cause, not one per try
                    log.warning("the scheduler could not fire (%s: %s)", exc.code, exc.detail)
                    said = exc.code
                await asyncio.sleep(IDLE_SECONDS)
                continue
            await self._sleep_until(wake_at)

    async def _sleep_until(self, wake_at: datetime | None) -> None:
        seconds = self._longest_sleep
        if wake_at is not None:
            seconds = min(seconds, max(0.0, (wake_at - self._clock()).total_seconds()))
        changed = self._schedules.changed
        with suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=seconds)
        changed.clear()

    async def run_once(self) -> datetime | None:
        """Fire every due slot, a batch per transaction; the next slot after them, or None (no
        schedule has one). With nothing due this is one statement."""
        while True:
            now = self._clock()
            upcoming = await self._store.next_schedule_slot()
            if upcoming is None or upcoming > now:
                return upcoming
            if not await self._fire_batches(now):
                # What is due is being fired by another replica (its rows are locked): look again
                # soon, in case that replica dies mid-way.
                return now + timedelta(seconds=HELD_SECONDS)

    async def _fire_batches(self, now: datetime) -> int:
        """Fire the schedules due at `now`, DUE_BATCH to a transaction, BATCHES_AT_ONCE
        transactions at a time; how many were fired."""
        lanes = [asyncio.create_task(self._fire_lane(now)) for _ in range(BATCHES_AT_ONCE)]
        try:
            return sum(await asyncio.gather(*lanes))
        except BaseException:  # the first error as it is (a TaskGroup would wrap it in a group)
            for lane in lanes:
                lane.cancel()
            await asyncio.gather(*lanes, return_exceptions=True)
            raise

    async def _fire_lane(self, now: datetime) -> int:
        """Fire batches one after another while they come full; how many were fired. A batch
        undone by a refused push (an item's id taken: none of ours should be) is fired again one
        by one, so that the others fire."""
        total = 0
        while True:
            try:
                fired = await self._store.fire_due_schedules(now, DUE_BATCH, lambda s: self._plan(s, now))
            except ItemExists as exc:  # one item refused undoes the batch: fire each alone
                log.warning(
                    "a batch of schedules could not fire (%s: %s); firing them one by one",
                    exc.code,
                    exc.detail,
                )
                return total + await self._fire_one_by_one(now)
            pushed = Counter(item.queue for f in fired for item in f.items)
            for queue, count in pushed.items():
                self._queues.pushed_elsewhere(queue, count)
            total += len(fired)
            if len(fired) < DUE_BATCH:
                return total

    def _plan(self, schedule: Schedule, now: datetime) -> Fired:
        """What firing the due schedule at `now` does: its next slot, and the items of its due slots
        (none for a slot skipped, or missed under catch_up 'none')."""
        try:
            firing = plan_firing(schedule, now)
        except OverflowError:  # a slot past the year 9999: the schedule has no more slots
            log.warning("schedule %s has no slot the calendar holds after %s", schedule.name, now)
            return Fired(schedule, None)
        if firing is None:  # not due after all: left as it is
            return Fired(schedule, schedule.next_run_at)
        slots = firing.slots
        if slots and schedule.spec.overlap == "skip" and schedule.previous_live:
            slots = ()  # the previous slot's item is still live: this one is skipped, not queued
        return Fired(schedule, firing.following, tuple(item_for(schedule, slot) for slot in slots))

    async def _fire_one_by_one(self, now: datetime) -> int:
        """Fire the due schedules each in a transaction of its own, so that one whose push is
        refused does not hold back the others; how many were fired."""
        fired = 0
        while True:
            due, _ = await self._store.schedules_due(now, DUE_BATCH)
            # Replicas may read the same due schedules: each fires them in an order of its own, so
            # that they mostly claim different ones rather than queue on the same rows' locks.
            self._random.shuffle(due)
            gate = asyncio.Semaphore(FIRING_AT_ONCE)
            outcomes = await asyncio.gather(*(self._fire_alone(s, now, gate) for s in due))
            fired += sum(outcomes)
            if len(due) < DUE_BATCH or not all(outcomes):
                return fired

    async def _fire_alone(self, schedule: Schedule, now: datetime, gate: asyncio.Semaphore) -> bool:
        """Fire the schedule's due slots; False when it could not (logged: the others still fire).
        The database's being out of reach is raised, for the loop to wait."""
        async with gate:
            fired = self._plan(schedule, now)
            assert schedule.next_run_at is not None, "a due schedule has a next slot"
            try:
                await self._store.fire_schedule(
                    schedule.name,
                    schedule.next_run_at,
                    fired.following,
                    fired.items,
                    fired.items[-1].created_at if fired.items else None,
                )
            except (DatabaseUnavailable, SchemaNotReady):
                raise
            except QueueError as exc:
                log.warning("schedule %s could not fire (%s: %s)", schedule.name, exc.code, exc.detail)
                return False
        for queue, count in Counter(item.queue for item in fired.items).items():
            self._queues.pushed_elsewhere(queue, count)
        return True
