"""Schedules on every engine, on an injected clock: each slot fired once however many replicas
race for it, catch-up after a gap by policy, overlap skip, pause, resume and trigger, and the
zone's clock changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import asyncpg
import pytest
from simplequeue.domain import (
    DatabaseUnavailable,
    ItemExists,
    NewItem,
    QueueNotFound,
    QueueSettings,
    TooManyQueues,
)
from simplequeue.domain.schedules import MAX_CATCH_UP, Fired, Schedule, ScheduleNotFound, ScheduleSpec, Timing
from simplequeue.main import store_for
from simplequeue.service import schedules as schedules_module
from simplequeue.service.queues import QueueService
from simplequeue.service.schedules import Scheduler, ScheduleService, item_for
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.engines import FakeClock


@dataclass
class Replica:
    queues: QueueService
    schedules: ScheduleService
    scheduler: Scheduler
    made: list[str]
    store: Store

    async def stop(self) -> None:
        """Deletes the schedules it made (the engine's database outlives the test), then stops."""
        for name in self.made:
            with suppress(ScheduleNotFound):
                await self.schedules.delete(name)
        await self.queues.stop()


async def replica(settings: Settings, clock: FakeClock) -> Replica:
    store = store_for(settings, clock)  # opened and closed by the service
    queues = QueueService(store, clock)
    await queues.start(migrate=True)
    schedules = ScheduleService(store, queues, clock)
    return Replica(queues, schedules, Scheduler(schedules, store, queues, clock), [], store)


@pytest.fixture
async def one(settings: Settings, clock: FakeClock) -> AsyncIterator[Replica]:
    made = await replica(settings, clock)
    yield made
    await made.stop()


@pytest.fixture
def name() -> str:
    return f"s-{uuid4().hex[:12]}"


@pytest.fixture
def at_minute(clock: FakeClock) -> datetime:
    """Puts the clock on a whole minute, a little after noon UTC of a day without clock changes."""
    clock.now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    return clock.now


async def put(r: Replica, name: str, queue: str, **fields: object) -> Schedule:
    timing = fields.pop("timing", Timing(every_seconds=60))
    spec = ScheduleSpec(queue, '{"n":1}', timing, **fields)  # type: ignore[arg-type]
    made, _ = await r.schedules.put(name, spec)
    r.made.append(name)
    return made


async def count(r: Replica, queue: str) -> int:
    try:
        stats = await r.queues.get_queue(queue)
    except QueueNotFound:
        return 0
    return stats.ready + stats.delayed + stats.leased


async def test_put_read_list_pause_resume_delete(
    one: Replica, name: str, queue: str, at_minute: datetime
) -> None:
    made = await put(one, name, queue, priority=3, group="g", jitter_seconds=5, overlap="skip")
    assert made.next_run_at == at_minute + timedelta(minutes=1)
    assert (made.spec.priority, made.spec.group, made.spec.overlap) == (3, "g", "skip")
    again, created = await one.schedules.put(name, made.spec)
    assert not created
    assert again.modified_at is not None
    assert name in [s.name for s in (await one.schedules.page(1000, None)).items]
    paused = await one.schedules.pause(name)
    assert paused.spec.paused
    resumed = await one.schedules.resume(name)
    assert not resumed.spec.paused
    await one.schedules.delete(name)
    with pytest.raises(ScheduleNotFound):
        await one.schedules.get(name)
    with pytest.raises(ScheduleNotFound):
        await one.schedules.delete(name)


async def test_a_put_that_must_make_leaves_a_taken_name_and_one_that_must_replace_makes_none(
    one: Replica, name: str, queue: str, at_minute: datetime
) -> None:
    with pytest.raises(ScheduleNotFound):
        await one.schedules.put(name, ScheduleSpec(queue, "1", Timing(every_seconds=60)), must="existing")
    with pytest.raises(ScheduleNotFound):
        await one.schedules.get(name)
    kept_form = '{"ScheduleExpression":"rate(1 minute)"}'
    made = await put(one, name, queue, description="nightly", aws_json=kept_form)
    assert (made.spec.description, made.spec.aws_json) == ("nightly", kept_form)
    other = ScheduleSpec(queue, "2", Timing(every_seconds=120))
    kept, created = await one.schedules.put(name, other, must="new")
    assert not created
    assert kept.spec == made.spec
    assert (await one.schedules.get(name)).spec == made.spec
    replaced, created = await one.schedules.put(name, other, must="existing")
    assert not created
    assert replaced.spec == other  # the description and the kept form go with what they described


async def test_a_page_of_schedules_leads_to_the_next(one: Replica, queue: str) -> None:
    names = sorted(f"p-{uuid4().hex[:8]}" for _ in range(3))
    for n in names:
        await put(one, n, queue)
    seen: list[str] = []
    page = await one.schedules.page(2, None)
    while True:
        seen += [s.name for s in page.items]
        if page.next_cursor is None:
            break
        page = await one.schedules.page(2, page.next_cursor)
    assert set(names) <= set(seen)
    assert seen == sorted(seen)


async def test_a_slot_fires_once_and_the_next_is_kept(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    await put(one, name, queue)
    assert await one.scheduler.run_once() is not None
    assert await count(one, queue) == 0, "not due yet"
    clock.advance(60.2)
    await one.scheduler.run_once()
    await one.scheduler.run_once()
    assert await count(one, queue) == 1
    schedule = await one.schedules.get(name)
    assert schedule.last_run_at == at_minute + timedelta(minutes=1)
    assert schedule.next_run_at == at_minute + timedelta(minutes=2)
    item = await one.queues.dedup_item(queue, f"schedule:{name}:2026-06-01T12:01:00Z")
    assert item.id == schedule.last_item_id


async def test_replicas_racing_fire_each_slot_once(
    settings: Settings, clock: FakeClock, name: str, queue: str, at_minute: datetime
) -> None:
    replicas = [await replica(settings, clock) for _ in range(3)]
    try:
        await put(replicas[0], name, queue, timing=Timing(every_seconds=10), catch_up="all")
        for _ in range(6):
            clock.advance(10)
            await asyncio.gather(*(r.scheduler.run_once() for r in replicas for _ in range(2)))
        assert await count(replicas[0], queue) == 6
    finally:
        for r in replicas:
            await r.stop()


@pytest.mark.parametrize(("policy", "fired"), [("none", 0), ("latest", 1), ("all", 5)])
async def test_after_a_gap_the_catch_up_policy_decides(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime, policy: str, fired: int
) -> None:
    await put(one, name, queue, timing=Timing(cron="*/10 * * * *"), catch_up=policy)
    clock.advance(50 * 60 + 90)  # down for slots :10, :20, :30, :40, :50, back 90 s after the last
    await one.scheduler.run_once()
    assert await count(one, queue) == fired
    schedule = await one.schedules.get(name)
    assert schedule.next_run_at == at_minute + timedelta(hours=1)


async def test_catch_up_all_is_bounded(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    await put(one, name, queue, timing=Timing(every_seconds=1), catch_up="all")
    clock.advance(3 * 3600)
    await one.scheduler.run_once()
    assert await count(one, queue) == MAX_CATCH_UP


async def test_overlap_skip_waits_while_the_previous_item_lives(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    await put(one, name, queue, overlap="skip")
    clock.advance(60)
    await one.scheduler.run_once()
    assert await count(one, queue) == 1
    clock.advance(60)
    await one.scheduler.run_once()
    assert await count(one, queue) == 1, "skipped: the first is still there"
    assert (await one.schedules.get(name)).next_run_at == at_minute + timedelta(minutes=3)
    [item] = await one.queues.pop(queue, max_items=1, wait_seconds=0, lease_seconds=30)
    clock.advance(60)
    await one.scheduler.run_once()
    assert await count(one, queue) == 1, "skipped: leased is live"
    await one.queues.complete(item.id, item.lease_token)
    clock.advance(60)
    await one.scheduler.run_once()
    assert await count(one, queue) == 1, "fired: the first is done"


async def test_paused_fires_nothing_trigger_fires_anyway_and_resume_skips_the_pause(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    await put(one, name, queue)
    await one.schedules.pause(name)
    clock.advance(600)
    await one.scheduler.run_once()
    assert await count(one, queue) == 0
    triggered = await one.schedules.trigger(name)
    assert await count(one, queue) == 1
    assert triggered.last_run_at == clock.now
    resumed = await one.schedules.resume(name)
    assert resumed.next_run_at == at_minute + timedelta(minutes=11)
    await one.scheduler.run_once()
    assert await count(one, queue) == 1, "the paused slots are not caught up"
    with pytest.raises(ScheduleNotFound):
        await one.schedules.trigger(f"{name}-none")


async def test_an_at_schedule_fires_once(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    await put(one, name, queue, timing=Timing(at=at_minute + timedelta(seconds=30)))
    clock.advance(31)
    await one.scheduler.run_once()
    clock.advance(3600)
    await one.scheduler.run_once()
    assert await count(one, queue) == 1
    assert (await one.schedules.get(name)).next_run_at is None


async def test_a_slot_the_zone_skips_fires_once_at_the_gaps_end(
    one: Replica, name: str, queue: str, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 3, 8, 6, 0, tzinfo=UTC)  # 01:00 EST, the night New York skips 02:xx
    made = await put(one, name, queue, timing=Timing(cron="*/20 2-3 * * *", timezone="America/New_York"))
    assert made.next_run_at == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT stands for 02:00-03:00
    for _ in range(24):  # to 08:00 UTC, 04:00 EDT
        clock.advance(5 * 60)
        await one.scheduler.run_once()
    assert await count(one, queue) == 3  # 03:00, 03:20, 03:40 EDT
    assert (await one.schedules.get(name)).next_run_at == datetime(2026, 3, 9, 6, 0, tzinfo=UTC)


async def test_a_slot_the_zone_repeats_fires_once(
    one: Replica, name: str, queue: str, clock: FakeClock
) -> None:
    clock.now = datetime(2026, 10, 24, 23, 0, tzinfo=UTC)  # 01:00 CEST; at 03:00 CEST Berlin falls back
    made = await put(one, name, queue, timing=Timing(cron="30 2 * * *", timezone="Europe/Berlin"))
    assert made.next_run_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 02:30, CEST
    for _ in range(12):  # to 05:00 UTC: both 02:30s have passed
        clock.advance(30 * 60)
        await one.scheduler.run_once()
    assert await count(one, queue) == 1
    assert (await one.schedules.get(name)).next_run_at == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


async def test_a_firing_that_fails_claims_nothing(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    # A push refused inside the firing's transaction rolls its claim back, as a replica killed
    # before its commit would: the slot is still due, and the next look fires it.
    schedule = await put(one, name, queue)
    clock.advance(60)
    slot = at_minute + timedelta(minutes=1)
    taken = uuid4()
    await one.store.push_batch(
        [NewItem(taken, f"{queue}-other", "1", clock.now, id_given=True)], skip_existing=False
    )
    clash = NewItem(taken, queue, "1", slot, dedup_key=f"schedule:{name}:x")
    with pytest.raises(ItemExists):
        await one.store.fire_schedule(name, slot, slot + timedelta(minutes=1), [clash], slot)
    assert (await one.schedules.get(name)).next_run_at == slot
    assert await count(one, queue) == 0
    await one.scheduler.run_once()
    assert await count(one, queue) == 1
    assert not await one.store.fire_schedule(name, slot, slot, [item_for(schedule, slot)], slot), "taken"
    assert await count(one, queue) == 1


async def test_a_schedule_makes_no_queue_past_the_services_most(
    settings: Settings, clock: FakeClock, name: str, queue: str
) -> None:
    store = store_for(settings, clock)
    queues = QueueService(store, clock)
    await queues.start(migrate=True)
    try:
        full = ScheduleService(store, queues, clock, max_queues=await store.count_queues())
        spec = ScheduleSpec(queue, "1", Timing(every_seconds=60))
        with pytest.raises(TooManyQueues):
            await full.put(name, spec)
        await queues.put_queue(queue, QueueSettings())
        made, _ = await full.put(name, spec)  # an existing queue is no new one
        assert made.spec.queue == queue
        await full.delete(name)
    finally:
        await queues.stop()


async def test_an_idle_scheduler_asks_once_a_second_and_a_change_here_wakes_it_at_once(
    one: Replica, name: str, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    asked: list[float] = []
    store = one.store
    upcoming = store.next_schedule_slot

    async def counted() -> datetime | None:
        asked.append(asyncio.get_running_loop().time())
        return await upcoming()

    store.next_schedule_slot = counted  # type: ignore[method-assign]
    running = asyncio.create_task(one.scheduler.run_forever())
    try:
        await asyncio.sleep(2.5)  # nothing of this test's is due: at most one statement a second
        if store.notifications is None:
            assert 2 <= len(asked) <= 4, asked
        else:  # told of changes by the engine, it sleeps until the next slot (or a minute)
            assert 1 <= len(asked) <= 2, asked
        before = len(asked)
        changed_at = asyncio.get_running_loop().time()
        await put(one, name, queue)  # a change through this replica wakes its scheduler now
        await asyncio.sleep(0.2)
        assert len(asked) > before
        assert asked[before] - changed_at < 0.2
    finally:
        running.cancel()
        with suppress(asyncio.CancelledError):
            await running


async def test_a_slot_of_more_schedules_than_a_batch_fires_each_once(
    one: Replica, queue: str, clock: FakeClock, at_minute: datetime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schedules_module, "DUE_BATCH", 3)
    names = [f"s-{uuid4().hex[:12]}" for _ in range(7)]  # batches of 3, 3 and 1
    for each in names:
        await put(one, each, queue)
    clock.advance(60)
    assert await one.scheduler.run_once() == at_minute + timedelta(minutes=2)
    assert await count(one, queue) == 7
    for each in names:
        schedule = await one.schedules.get(each)
        assert schedule.next_run_at == at_minute + timedelta(minutes=2)
        assert schedule.last_item_id is not None
    await one.scheduler.run_once()
    assert await count(one, queue) == 7, "each slot once"


async def test_a_batch_whose_push_is_refused_claims_nothing_and_is_fired_one_by_one(
    one: Replica, queue: str, clock: FakeClock, at_minute: datetime
) -> None:
    names = [f"s-{uuid4().hex[:12]}" for _ in range(3)]
    for each in names:
        await put(one, each, queue)
    clock.advance(60)
    taken = uuid4()
    await one.store.push_batch(
        [NewItem(taken, f"{queue}-other", "1", clock.now, id_given=True)], skip_existing=False
    )

    def clashing(schedule: Schedule) -> Fired:  # every slot's item takes an id another queue holds
        return Fired(
            schedule, schedule.next_run_at, (NewItem(taken, queue, "1", clock.now, dedup_key=schedule.name),)
        )

    with pytest.raises(ItemExists):
        await one.store.fire_due_schedules(clock.now, 10, clashing)
    for each in names:  # the whole batch undone
        assert (await one.schedules.get(each)).next_run_at == at_minute + timedelta(minutes=1)
    assert await count(one, queue) == 0

    fire_due = one.store.fire_due_schedules

    async def refused(now: datetime, limit: int, plan: Callable[[Schedule], Fired]) -> list[Fired]:
        return await fire_due(now, limit, clashing)

    one.store.fire_due_schedules = refused  # type: ignore[method-assign]
    await one.scheduler.run_once()  # the batch is refused again: each schedule fires alone
    assert await count(one, queue) == 3
    for each in names:
        assert (await one.schedules.get(each)).next_run_at == at_minute + timedelta(minutes=2)


async def test_replicas_split_a_slot_skipping_the_schedules_another_is_firing(
    postgres_url: str, clock: FakeClock, queue: str, at_minute: datetime
) -> None:
    # SKIP LOCKED: a replica fires the due schedules that no other replica's firing holds, without
    # waiting for those; once they are let go (here, by a transaction that locked them and ends
    # having changed nothing, as a firing that died would) the next look fires them.
    settings = Settings(
        database_url=postgres_url, db_timeout_seconds=5, sweep=False, relay=False, schedule=False
    )
    r = await replica(settings, clock)
    holder = await asyncpg.connect(postgres_url)
    try:
        names = [f"s-{uuid4().hex[:12]}" for _ in range(4)]
        for each in names:
            await put(r, each, queue)
        clock.advance(60)
        held = names[:2]
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM sq_schedules WHERE name = ANY($1) FOR NO KEY UPDATE", held)
            wake = await asyncio.wait_for(r.scheduler.run_once(), timeout=5)
            assert wake is not None
            assert wake - clock.now <= timedelta(seconds=1), "it looks again soon"
            assert await count(r, queue) == 2
        for each in held:
            assert (await r.schedules.get(each)).next_run_at == at_minute + timedelta(minutes=1)
        await r.scheduler.run_once()
        assert await count(r, queue) == 4
    finally:
        await holder.close()
        await r.stop()


async def test_a_change_through_another_replica_wakes_a_scheduler_that_sleeps_until_its_slot(
    postgres_url: str, clock: FakeClock, queue: str, at_minute: datetime
) -> None:
    # PostgreSQL tells every replica of a schedule's change (NOTIFY): a scheduler there sleeps until
    # its next slot, a minute at most, and still sees a schedule made through another replica.
    settings = Settings(
        database_url=postgres_url, db_timeout_seconds=5, sweep=False, relay=False, schedule=False
    )
    sleeper, other = await replica(settings, clock), await replica(settings, clock)
    asked = asyncio.Event()
    upcoming = sleeper.store.next_schedule_slot

    async def counted() -> datetime | None:
        asked.set()
        return await upcoming()

    sleeper.store.next_schedule_slot = counted  # type: ignore[method-assign]
    running = asyncio.create_task(sleeper.scheduler.run_forever())
    try:
        await asyncio.wait_for(asked.wait(), timeout=10)  # its first look, then it sleeps
        await asyncio.sleep(0.5)  # let its listener's first news (at connect) go by
        asked.clear()
        await put(other, f"s-{uuid4().hex[:12]}", queue)
        await asyncio.wait_for(asked.wait(), timeout=10)  # not the minute it would sleep untold
    finally:
        running.cancel()
        with suppress(asyncio.CancelledError):
            await running
        await other.stop()
        await sleeper.stop()


async def test_a_scheduler_waits_out_a_database_that_fails_while_it_fires(
    one: Replica,
    name: str,
    queue: str,
    clock: FakeClock,
    at_minute: datetime,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The error of a batch reaches the loop as itself (DatabaseUnavailable: wait, then look again),
    # not wrapped with its sibling batches' outcomes.
    await put(one, name, queue)
    clock.advance(60)
    fire_due = one.store.fire_due_schedules

    async def unavailable(now: datetime, limit: int, plan: Callable[[Schedule], Fired]) -> list[Fired]:
        raise DatabaseUnavailable()

    one.store.fire_due_schedules = unavailable  # type: ignore[method-assign]
    with pytest.raises(DatabaseUnavailable):
        await one.scheduler.run_once()
    one.store.fire_due_schedules = fire_due  # type: ignore[method-assign]
    await one.scheduler.run_once()
    assert await count(one, queue) == 1
