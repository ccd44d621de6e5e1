"""QueueService: the door every route calls, once per request.

It takes and returns domain values (never API schemas) and owns what is not the store's: new
ids and the clock, payload encoding and its limits, coalescing single pushes into shared
commits, long-polls, waking them after every commit that makes items poppable, and the sweep.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID, uuid4

from simplequeue.domain import (
    Clock,
    CompleteOutcome,
    Completion,
    DatabaseUnavailable,
    DeadFilter,
    DeletedQueue,
    Draft,
    Failure,
    HistoryFilter,
    HistoryRecord,
    ItemDead,
    ItemStatus,
    ItemView,
    LeasedItem,
    NewItem,
    Page,
    Pushed,
    QueueNotFound,
    QueueSettings,
    QueueStats,
    SchemaNotReady,
    check_attributes,
    encode_attributes,
    encode_payload,
)
from simplequeue.domain.activity import ActivityBucket, activity_window
from simplequeue.domain.keys import TOP_KEYS, KeySettings, KeyStats
from simplequeue.domain.metadata import MetadataChange, QueueMetadata
from simplequeue.domain.queues import QueueDetail
from simplequeue.domain.rules import repeat_rounds
from simplequeue.service import batches
from simplequeue.service.binding import Bindings
from simplequeue.service.creating import QueueLimit, check_dead_letter_queue
from simplequeue.service.events import Events, NoEvents
from simplequeue.service.pushing import PushCoalescer
from simplequeue.service.recent import Recent
from simplequeue.service.upkeep import sweep_forever
from simplequeue.service.waiting import Waiting, never_gone
from simplequeue.store.cursors import encode_name_cursor
from simplequeue.store.protocol import Store

log = logging.getLogger("simplequeue.service")

# A database that is not there at start is tried again after 0.5 s, then twice as long each time,
# up to every 10 s: soon ready after a database that starts with the service, and quiet otherwise.
START_RETRY_FIRST_SECONDS = 0.5
START_RETRY_MAX_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Limits:
    max_payload_bytes: int = 1024 * 1024
    max_queues: int = 1000


@dataclass(frozen=True, slots=True)
class Upkeep:
    """The sweep's schedule in this process (None: another process or cron sweeps)."""

    reap_every_seconds: float = 5.0
    purge_every_seconds: float = 60.0


class QueueService:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        limits: Limits = Limits(),
        recheck_seconds: float = 1.0,
        upkeep: Upkeep | None = None,
        events: Events | None = None,
    ) -> None:
        self._store = store
        self._events: Events = events or NoEvents()
        self._clock = clock
        self._limits = limits
        self._upkeep = upkeep
        self._waiting = Waiting(store, recheck_seconds=recheck_seconds)
        self._bindings = Bindings(clock)
        self._pusher = PushCoalescer(store)
        self._queue_limit = QueueLimit(store, limits.max_queues)
        self._sweeper: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._opened = False
        self._listening = False
        self._ready = False
        self._deleted = Recent(clock)  # delete_queue's deletions, here (deleted_within)

    # --- life cycle ------------------------------------------------------------------------------

    async def start(self, *, migrate: bool) -> None:
        """Open the store (migrating it if asked), listen for other processes' pushes where the
        engine can say so, and start the sweep. A database that does not answer yet (down, not
        created, not migrated) does not stop the start: until it does, and this has been done in
        the background, every call raises DatabaseUnavailable (readiness says 503)."""
        try:
            await self._get_ready(migrate)
        except (DatabaseUnavailable, SchemaNotReady) as exc:
            log.warning(
                "the database is not ready (%s: %s); trying again in the background", exc.code, exc.detail
            )
            self._starting = asyncio.create_task(
                self._keep_trying(migrate, (exc.code, exc.detail)), name="simplequeue-start"
            )

    async def _get_ready(self, migrate: bool) -> None:
        if not self._opened:
            await self._store.open()
            self._opened = True
        if migrate:
            await self._store.migrate(max_payload_bytes=self._limits.max_payload_bytes)
        if self._store.notifications is not None and not self._listening:
            await self._store.notifications.start(self._waiting.notify)
            self._listening = True
        if self._upkeep is not None:
            self._sweeper = asyncio.create_task(
                sweep_forever(
                    self._store,
                    reap_every=self._upkeep.reap_every_seconds,
                    purge_every=self._upkeep.purge_every_seconds,
                ),
                name="simplequeue-sweep",
            )
        self._ready = True

    async def _keep_trying(self, migrate: bool, said: tuple[str, str]) -> None:
        """Until the database is ready, quietly: each try's failure is a line at info, with its cause
        at warning again only when the cause changed (`said`: the last one told)."""
        delay = START_RETRY_FIRST_SECONDS
        while True:
            await asyncio.sleep(delay)
            try:
                await self._get_ready(migrate)
            except (DatabaseUnavailable, SchemaNotReady) as exc:
                delay = min(delay * 2, START_RETRY_MAX_SECONDS)
                if (exc.code, exc.detail) != said:
                    said = (exc.code, exc.detail)
                    log.warning("the database is still not ready (%s: %s); next try in %.0fs", *said, delay)
                else:
                    log.info("the database is still not ready (%s); next try in %.0fs", exc.code, delay)
                continue
            log.info("the database is ready; serving")
            return

    @property
    def ready(self) -> bool:
        """Started: the store is open (and migrated, when asked)."""
        return self._ready

    def require_ready(self) -> None:
        if not self._ready:
            raise DatabaseUnavailable("the service has not reached its database yet")

    def stop_waiting(self) -> None:
        """Answer every waiting pop now, with nothing: the service is stopping. Safe to call
        from a signal's callback; no lease is lost."""
        self._waiting.close()

    async def stop(self) -> None:
        self.stop_waiting()
        if self._starting is not None:
            self._starting.cancel()
            with suppress(asyncio.CancelledError):
                await self._starting
        if self._sweeper is not None:
            self._sweeper.cancel()
            with suppress(asyncio.CancelledError):
                await self._sweeper
        await self._store.close()

    async def check_ready(self) -> None:
        self.require_ready()
        await self._store.check_ready()

    # --- producers ------------------------------------------------------------------------------

    async def push(self, queue: str, draft: Draft) -> Pushed:
        """Committed when this returns. A duplicate dedup_key, or a producer's id that its queue
        still remembers, answers the original, uninserted."""
        item = self._new_item(queue, draft, self._clock(), "payload")
        pushed = await self._queue_limit.making(queue, lambda: self._pusher.push(item))
        if pushed.created:
            self._waiting.notify(queue, 1)
            self._events.pushed(queue, 1)
        return pushed

    async def push_batch(self, queue: str, drafts: Sequence[Draft]) -> list[Pushed]:
        """All or nothing, in one transaction."""
        now = self._clock()
        items = [self._new_item(queue, d, now, f"items[{n}].payload") for n, d in enumerate(drafts)]
        pushed = await self._queue_limit.making(
            queue, lambda: self._store.push_batch(items, skip_existing=False)
        )
        results = [r for r in pushed if r is not None]
        if created := sum(r.created for r in results):
            self._waiting.notify(queue, created)
            self._events.pushed(queue, created)
        return results

    async def push_across(self, drafts: Sequence[tuple[str, Draft]], where: str) -> list[Pushed]:
        """Items of several existing queues (a topic's deliveries), all or nothing, in one
        transaction. A producer's id its queue remembers answers the original, uninserted."""
        now = self._clock()
        items = [self._new_item(queue, d, now, where) for queue, d in drafts]
        pushed = [r for r in await self._store.push_batch(items, skip_existing=False) if r is not None]
        for item, result in zip(items, pushed, strict=True):
            if result.created:
                self._waiting.notify(item.queue, 1)
                self._events.pushed(item.queue, 1)
        return pushed

    def _new_item(self, queue: str, draft: Draft, now: datetime, where: str) -> NewItem:
        """The producer's id and timestamp where given, else new ones. The payload and the
        attributes share the payload's limit."""
        attributes_size = check_attributes(draft.attributes) if draft.attributes else 0
        limit = self._limits.max_payload_bytes
        return NewItem(
            id=draft.id or uuid4(),
            queue=queue,
            payload_json=encode_payload(draft.payload, limit - attributes_size, where, attributes_size),
            created_at=draft.created_at or now,
            priority=draft.priority,
            group=draft.group,
            dedup_key=draft.dedup_key,
            delay_seconds=draft.delay_seconds,
            not_before=draft.not_before,
            id_given=draft.id is not None,
            attributes_json=encode_attributes(draft.attributes, draft.system_attributes),
            fairness_key=draft.fairness_key,
        )

    # --- workers --------------------------------------------------------------------------------

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
        """Lease up to max_items, waiting up to wait_seconds for one; nothing once `gone` says
        the caller hung up while it waited. group_runs: see Store.pop."""
        items = await self._waiting.pop(
            queue,
            max_items=max_items,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            gone=gone,
            group_runs=group_runs,
        )
        if items:
            self._events.popped(queue, len(items))
        self._count_throttled(queue, len(items), max_items)
        return items

    def _count_throttled(self, queue: str, got: int, asked: int) -> None:
        if got < asked and (limit := self._store.flow.held_by(queue)) is not None:
            self._events.throttled(queue, limit)
            self._bindings.seen(queue, limit)

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
        """A worker's finished items, completed (one outcome each, in order, as complete_many
        gives them), then a pop: one round trip and, on the first try, one transaction."""
        if len({c.id for c in completions}) < len(completions) or not completions:
            # An id given twice is taken in rounds, as complete_many takes it.
            outcomes: list[CompleteOutcome] = await self.complete_many(completions) if completions else []
            items = await self._waiting.pop(
                queue, max_items=max_items, wait_seconds=wait_seconds, lease_seconds=lease_seconds, gone=gone
            )
        else:
            outcomes, items = await self._waiting.complete_and_pop(
                completions,
                queue,
                max_items=max_items,
                wait_seconds=wait_seconds,
                lease_seconds=lease_seconds,
                gone=gone,
            )
        if items:
            self._events.popped(queue, len(items))
        self._count_throttled(queue, len(items), max_items)
        return outcomes, items

    async def extend(self, item_id: UUID, lease_token: UUID, lease_seconds: int) -> ItemView:
        view = await self._store.extend(item_id, lease_token, lease_seconds)
        if lease_seconds == 0:
            # Cut to nothing (SQS's ChangeMessageVisibility 0), the lease ends as a failure's does:
            # its item is poppable now and the room it held under the queue's limits is free, so
            # long-polls here hear of both now, not at the watcher's next probe or a hold's end.
            self._waiting.room_freed(1)
            self._waiting.notify(view.queue, 1)
        return view

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        await self._store.complete(item_id, lease_token)
        self._waiting.room_freed(1)

    async def complete_many(self, requested: Sequence[Completion]) -> list[CompleteOutcome]:
        """One outcome per entry, in order; an id given twice is taken as that many requests in
        order would be (the store completes distinct ids at once, so repeats go in later rounds)."""
        outcomes: list[CompleteOutcome] = [CompleteOutcome.NOT_FOUND] * len(requested)
        for places in repeat_rounds([c.id for c in requested]):
            done = await self._store.complete_batch([requested[n] for n in places])
            for n, outcome in zip(places, done, strict=True):
                outcomes[n] = outcome
        self._waiting.room_freed(sum(1 for outcome in outcomes if outcome == CompleteOutcome.COMPLETED))
        return outcomes

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        view = await self._store.fail(item_id, failure)
        self._waiting.room_freed(1)
        if view.status == ItemStatus.READY:
            self._waiting.notify(view.queue, 1)
        self._events.failed(view.queue, 1)
        if view.status == ItemStatus.DEAD:
            self._events.dead(view.queue, 1)
        return view

    # --- reading --------------------------------------------------------------------------------

    async def get_item(self, item_id: UUID) -> ItemView:
        return await self._store.get_item(item_id)

    async def sequence_numbers(self, ids: Sequence[UUID]) -> dict[UUID, int]:
        """The insertion order of the items among `ids` that are still there (live or dead)."""
        return await self._store.sequence_numbers(ids) if ids else {}

    async def release(self, item_id: UUID) -> ItemView:
        """End the item's lease now (an administrator frees an item a stuck worker holds): it is
        ready at once with that attempt counted, or dead if it was the last. An item that is not
        leased is answered as it is. Raises ItemNotFound, ItemDead, or LeaseMismatch when another
        pop took it meanwhile."""
        view = await self._store.get_item(item_id)
        if view.status == ItemStatus.DEAD:
            raise ItemDead()
        if view.lease_token is None:
            return view
        released = await self._store.extend(item_id, view.lease_token, 0)
        self._waiting.notify(view.queue, 1)  # long-polls here hear of it now
        return released

    async def list_queues(
        self,
        limit: int,
        cursor: str | None,
        *,
        prefix: str | None = None,
        wanted: Callable[[str], bool] = lambda name: True,
    ) -> Page[QueueStats]:
        """Up to `limit` queues in name order after the cursor's, of those whose names start with
        `prefix` and that `wanted` takes (an API key's queues): the store's pages, read until
        `limit` are found or none is left. The next cursor is None when no wanted queue follows."""
        found: list[QueueStats] = []
        while True:
            page = await self._store.list_queues(limit + 1, cursor, prefix)
            found += [q for q in page.items if wanted(q.name)]
            if len(found) > limit:
                return Page(found[:limit], encode_name_cursor(found[limit - 1].name))
            if page.next_cursor is None:
                return Page(found, None)
            cursor = page.next_cursor

    async def every_queue(self, page_size: int = 1000) -> AsyncIterator[QueueStats]:
        """Every queue in name order, read a page at a time."""
        cursor: str | None = None
        while True:
            page = await self._store.list_queues(page_size, cursor)
            for stats in page.items:
                yield stats
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_queue(self, name: str) -> QueueStats:
        return await self._store.get_queue(name)

    async def queue_detail(self, name: str) -> QueueDetail:
        """The queue's counts, its busiest keys, and the limits that cut its pops short here."""
        stats = await self._store.get_queue(name)
        top = await self._store.top_keys(name, TOP_KEYS)
        return QueueDetail(stats, top, self._bindings.of(name))

    async def list_dead(
        self, queue: str, where: DeadFilter, limit: int, cursor: str | None
    ) -> Page[ItemView]:
        await self._known(queue)
        return await self._store.list_dead(queue, where, limit, cursor)

    async def list_history(
        self, queue: str, where: HistoryFilter, limit: int, cursor: str | None
    ) -> Page[HistoryRecord]:
        await self._known(queue)
        return await self._store.list_history(queue, where, limit, cursor)

    async def peek(self, queue: str, state: ItemStatus, limit: int, cursor: str | None) -> Page[ItemView]:
        await self._known(queue)
        return await self._store.peek(queue, state, limit, cursor)

    async def activity(
        self, queue: str | None, since: datetime | None, bucket_seconds: int
    ) -> list[ActivityBucket]:
        """Counts per bucket from the one holding `since` (default: an hour ago) to now, of one queue
        or (None) every queue. Raises InvalidWindow (domain.activity) for a window out of bounds."""
        window = activity_window(self._clock(), since, bucket_seconds)
        if queue is not None:
            await self._known(queue)
        return await self._store.activity(queue, window)

    async def queue_exists(self, name: str) -> bool:
        """Whether the queue exists: one indexed lookup, where `get_queue` counts its items too.
        (SQS sends only to a queue that exists; a push through the REST API makes one.)"""
        self.require_ready()
        return await self._store.queue_exists(name)

    async def queue_metadata(self, name: str) -> QueueMetadata:
        """When the queue was made and last changed, its attributes and tags (SQS's
        CreatedTimestamp, LastModifiedTimestamp, stored attributes, tags). Raises QueueNotFound."""
        self.require_ready()
        return await self._store.queue_metadata(name)

    async def change_queue_metadata(self, name: str, change: MetadataChange) -> int:
        """Write and remove attributes and tags in one transaction; the answer is the queue's tag
        count after it, and nothing changed if that is over change.max_tags. Raises QueueNotFound."""
        self.require_ready()
        return await self._store.change_queue_metadata(name, change)

    def now(self) -> datetime:
        """The service's clock: what leases and windows are measured against."""
        return self._clock()

    @property
    def max_payload_bytes(self) -> int:
        """The largest payload a push may carry (SIMPLEQUEUE_MAX_PAYLOAD_BYTES)."""
        return self._limits.max_payload_bytes

    async def group_items(self, queue: str, group: str, limit: int, cursor: str | None) -> Page[ItemView]:
        await self._known(queue)
        return await self._store.group_items(queue, group, limit, cursor)

    async def dedup_item(self, queue: str, dedup_key: str) -> ItemView:
        await self._known(queue)
        return await self._store.dedup_item(queue, dedup_key)

    def pushed_elsewhere(self, queue: str, count: int) -> None:
        """Items were pushed to the queue by a store call of another service (a schedule's firing):
        counted, and long-polls waiting on the queue here hear of them now."""
        self._waiting.notify(queue, count)
        self._events.pushed(queue, count)

    async def _known(self, queue: str) -> None:
        """Every call that names a queue answers an unknown one alike: QueueNotFound."""
        if not await self._store.queue_exists(queue):
            raise QueueNotFound()

    # --- administration -------------------------------------------------------------------------

    async def put_queue(self, name: str, settings: QueueSettings) -> tuple[bool, QueueStats]:
        """(whether the queue was created, its settings and counts now). InvalidSettings for a
        dead-letter queue that is the queue itself, or a new one that does not exist."""
        await check_dead_letter_queue(self._store, name, settings.dead_letter_queue)
        created = await self._queue_limit.making(name, lambda: self._store.put_queue(name, settings))
        return created, await self._store.get_queue(name)

    async def put_key(self, queue: str, key: str, settings: KeySettings) -> KeyStats:
        """Set a key's own weight and limits; its settings and counts now. QueueNotFound."""
        await self._store.put_key(queue, key, settings)
        return await self._store.get_key(queue, key)

    async def reset_key(self, queue: str, key: str) -> KeyStats:
        """A key back to the queue's defaults; its settings and counts now. QueueNotFound."""
        await self._known(queue)
        await self._store.reset_key(queue, key)
        return await self._store.get_key(queue, key)

    async def get_key(self, queue: str, key: str) -> KeyStats:
        await self._known(queue)
        return await self._store.get_key(queue, key)

    async def list_keys(self, queue: str, limit: int, cursor: str | None) -> Page[KeyStats]:
        await self._known(queue)
        return await self._store.list_keys(queue, limit, cursor)

    async def redrive(self, queue: str, ids: Sequence[UUID] | None, rate_per_second: float | None) -> int:
        await self._known(queue)
        count = await batches.redrive(self._store, queue, ids, rate_per_second)
        if count:
            self._waiting.notify(queue, count)
        return count

    async def purge_dead(self, queue: str) -> int:
        await self._known(queue)
        return await batches.purge_dead(self._store, queue)

    async def purge_live(self, queue: str) -> int:
        """Delete the queue's live items (SQS's PurgeQueue; dead ones and history stay) and answer
        how many. Raises QueueNotFound. SQS's one purge per 60 seconds is
        simplequeue.service.local.purges's."""
        await self._known(queue)
        return await batches.purge_live(self._store, queue)

    async def pause(self, queue: str) -> QueueStats:
        await self._store.set_paused(queue, True)
        return await self._store.get_queue(queue)

    async def resume(self, queue: str) -> QueueStats:
        await self._store.set_paused(queue, False)
        stats = await self._store.get_queue(queue)
        if stats.ready:
            self._waiting.notify(queue, stats.ready)  # long-polls waiting on it here
        return stats

    async def delete_queue(self, queue: str, force: bool) -> DeletedQueue:
        deleted = await self._store.delete_queue(queue, force)
        self._queue_limit.forget(queue)
        self._bindings.forget(queue)
        self._deleted.note(queue)
        return deleted

    def deleted_within(self, queue: str, seconds: float) -> bool:
        """Whether this process deleted the queue less than `seconds` ago (SQS refuses to make a
        queue again within 60 seconds of its deletion). A replica knows its own deletions only."""
        return self._deleted.within(queue, seconds)
