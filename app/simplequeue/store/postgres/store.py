"""PostgreSQL through asyncpg: FOR UPDATE SKIP LOCKED claims, the database's clock."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

import asyncpg

from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    Clock,
    CompleteOutcome,
    Completion,
    DeletedQueue,
    Failure,
    FinishedHook,
    ItemNotFound,
    ItemStatus,
    ItemView,
    LeasedItem,
    NewItem,
    Outcome,
    Pushed,
    QueueInUse,
    QueueNotFound,
    QueueSettings,
    QueueStats,
    SchemaNotReady,
    ignore_finished,
    tell,
)
from simplequeue.domain.keys import pick, walk_for
from simplequeue.domain.limits import NO_LIMITS, Bucket, KeyBucket, Room, key_bucket, key_refill, room
from simplequeue.domain.metadata import MetadataChange, QueueMetadata
from simplequeue.domain.rules import (
    complete_outcomes,
    in_pop_order,
    redrive_delay,
    why_not_extended,
    why_refused,
)
from simplequeue.store import rows
from simplequeue.store.keys import KeyStore, key_turns
from simplequeue.store.limits import FlowState, Limited
from simplequeue.store.metadata import change_params, metadata_of
from simplequeue.store.migrations import latest_version
from simplequeue.store.postgres.errors import UNAVAILABLE, domain_error, server_of
from simplequeue.store.postgres.listen import Listener
from simplequeue.store.postgres.migrate import apply_pending
from simplequeue.store.postgres.pool import Pool
from simplequeue.store.postgres.statements import execute, fetch, fetch_one, fetch_value
from simplequeue.store.postgres.waited import LISTED_SECONDS
from simplequeue.store.reads import QueueReads
from simplequeue.store.schedules import ScheduleStore, Then
from simplequeue.store.topics import Step, TopicStore

log = logging.getLogger("simplequeue.postgres")

# A queue table's size swings faster than autovacuum analyses it, so the planner often thinks a
# queue holds a handful of rows when it holds thousands. It then reads them all through a bitmap
# scan and sorts them, on every pop (seen: 22 ms instead of 0.1 ms with 60,000 ready rows).
# Pricing sorts out for our own sessions leaves pop one cheap plan: walking sq_items_ready in order
# (a bitmap scan loses the order, so it would need the sort too). A penalty, not a ban: statements
# that cannot avoid a sort (ORDER BY over unnest) still sort.
# Generic plans: each pooled connection plans a statement once and reuses the plan. Left to
# choose, PostgreSQL planned pop and complete afresh on every call, and planning cost more than
# running them (complete: ~0.5 ms of ~1.1). tests/test_query_plans.py holds the generic plans of
# the hot statements to their indexes at scale; the statements whose optional filters need a plan
# made for their values opt out (statements.CUSTOM_PLANNED).
# No JIT: a sort priced out crosses jit_above_cost, and compiling a plan (~300 ms, seen on the
# push function's statements) costs far more than any statement of ours runs.
PLANNER_SETTINGS = {"enable_sort": "off", "plan_cache_mode": "force_generic_plan", "jit": "off"}


async def keep_session(conn: asyncpg.Connection) -> None:
    """Skip asyncpg's reset on release (UNLISTEN, RESET ALL, ...: a round trip per operation).

    Pooled connections keep no session state: migrations' advisory lock is transaction-scoped and
    LISTEN has a connection of its own.
    """


_CUT_OFF = (asyncio.CancelledError, *UNAVAILABLE)  # a call's connection is not to be trusted after these


class _Call:
    """One store call's connection, in one context manager: asyncpg's errors become domain errors
    (errors.domain_error), within a deadline (asyncio.timeout), on a pooled connection. Written as
    a class: as three nested generator-based context managers, entering and leaving them was a
    measurable part of each call's CPU."""

    __slots__ = ("_conn", "_deadline", "_pool", "_server")

    def __init__(self, pool: Pool, seconds: float | None, server: str | None) -> None:
        self._pool = pool
        self._deadline = asyncio.timeout(seconds)
        self._server = server

    async def __aenter__(self) -> asyncpg.Connection:
        await self._deadline.__aenter__()
        try:
            self._conn: asyncpg.Connection = await self._pool.acquire()
        except BaseException as exc:
            await self._leave(exc)
            raise
        return self._conn

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, _CUT_OFF):
            # Cut off mid-statement, or broken: what the connection would say next is unknown, so
            # it is closed (at once, without a round trip) rather than handed to the next caller.
            self._conn.terminate()
        self._pool.release(self._conn)
        await self._leave(exc)

    async def _leave(self, exc: BaseException | None) -> None:
        """Leave the deadline (a cancellation it caused becomes TimeoutError), then translate what
        the call raised: raises the domain error, or returns to let `exc` go on as it is."""
        try:
            if exc is None:
                await self._deadline.__aexit__(None, None, None)
            else:
                await self._deadline.__aexit__(type(exc), exc, exc.__traceback__)
        except Exception as raised:
            error = domain_error(raised, self._server)
            if error is None:
                raise
            raise error from raised
        if isinstance(exc, Exception) and (error := domain_error(exc, self._server)) is not None:
            raise error from exc


class PostgresStore(QueueReads, TopicStore, ScheduleStore, KeyStore):
    dialect = "postgresql"
    reaps_at_pop = False  # the service reaps after a pop with room (service.waiting)

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        timeout_seconds: float = 5.0,
        clock: Clock | None = None,
        random: Callable[[], float] = random.random,
        on_finished: FinishedHook = ignore_finished,
    ):
        self._url = url
        self._server = server_of(url)  # host:port, for errors that name the server
        self._on_finished = on_finished
        self._pool_size = pool_size
        self._timeout = timeout_seconds
        self._clock = clock
        self._random = random  # backoff jitter
        self._pool: Pool | None = None
        self._own_pids: set[int] = set()  # our pool's backends: their NOTIFYs were already signalled
        self.notifications = Listener(url, timeout_seconds, ignore_pids=self._own_pids)
        self.flow = FlowState()

    def _now(self) -> datetime | None:
        """None lets the database's clock decide; a clock is injected only by tests."""
        return self._clock() if self._clock else None

    async def open(self) -> None:
        # min_size=0: the service starts (and answers 503) while the database is down.
        # command_timeout bounds each statement from our side (a frozen server never answers);
        # statement_timeout and lock_timeout make the server give up too, so that a statement we
        # abandoned stops holding its locks. The server's limits are the shorter, so that it gives up
        # first and says so: a statement our timeout cut off could still commit once its lock is
        # free (the server does not notice a closed socket while it waits), and a 503 would then
        # hide a push that happened.
        limit_ms = str(round(self._timeout * 1000 * 0.8))
        settings = {
            **PLANNER_SETTINGS,
            "statement_timeout": limit_ms,
            "lock_timeout": limit_ms,
            "idle_in_transaction_session_timeout": str(round(max(60.0, 4 * self._timeout) * 1000)),
        }

        async def connect() -> asyncpg.Connection:
            conn = await asyncpg.connect(
                self._url, timeout=self._timeout, command_timeout=self._timeout, server_settings=settings
            )
            self._own_pids.add(conn.get_server_pid())
            return conn

        self._pool = Pool(connect, self._pool_size)

    async def close(self) -> None:
        await self.notifications.stop()
        if self._pool is not None:
            await self._pool.close()

    def _conn(self, *, bounded: bool = True) -> _Call:
        """A pooled connection for one store call (`async with self._conn() as conn`). The whole
        call (waiting for the pool, connecting, every statement) ends within the timeout, or raises
        DatabaseUnavailable: a request never hangs on a frozen or unreachable server.
        bounded=False: migrations only."""
        assert self._pool is not None, "store is not open"
        return _Call(self._pool, self._timeout if bounded else None, self._server)

    async def migrate(self, *, max_payload_bytes: int | None = None) -> list[int]:
        async with self._conn(bounded=False) as conn, conn.transaction():
            applied = await apply_pending(conn)
            if max_payload_bytes is not None:
                await execute(conn, "write_setting", name="max_payload_bytes", value=str(max_payload_bytes))
        return applied

    async def check_ready(self) -> None:
        latest = latest_version(self.dialect)
        async with self._conn() as conn:
            versions = [r["version"] for r in await fetch(conn, "applied_versions")]
        if latest not in versions:
            raise SchemaNotReady()

    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> list[Pushed | None]:
        """One statement: sq_push_rows, the SQL function that callers pushing in their own
        transactions reach too (sq_push, sq_push_batch). An item refused in all-or-nothing mode
        raises there (SQLSTATE SQ409: ItemExists), which undoes the whole call."""
        if not items:
            return []
        async with self._conn() as conn:
            name, values = self._push(items, skip_existing)
            found = await fetch(conn, name, **values)
        return [None if r["id"] is None else Pushed(r["id"], r["created_at"], r["created"]) for r in found]

    def _push(self, items: Sequence[NewItem], skip_existing: bool) -> tuple[str, dict[str, Any]]:
        """The push statement and its values: push_fair for a call with fairness keys, else push."""
        values = self._push_values(items, skip_existing)
        keys = [i.fairness_key for i in items]
        if any(key is not None for key in keys):
            return "push_fair", {**values, "fairness_keys": keys}
        return "push", values

    def _push_values(self, items: Sequence[NewItem], skip_existing: bool) -> dict[str, Any]:
        return {
            "ids": [i.id for i in items],
            "queues": [i.queue for i in items],
            "payloads": [i.payload_json for i in items],
            "created_ats": [i.created_at for i in items],
            "priorities": [i.priority for i in items],
            "groups": [i.group for i in items],
            "dedup_keys": [i.dedup_key for i in items],
            "delays": [i.delay_seconds for i in items],
            "not_befores": [i.not_before for i in items],
            "remember": [i.remembers_id for i in items],
            "skip_existing": skip_existing,
            "now": self._now(),
            "attributes": [i.attributes_json for i in items],
        }

    async def pop(
        self, queue: str, max_items: int, lease_seconds: int | None, *, group_runs: bool = False
    ) -> list[LeasedItem]:
        if self.flow.careful(queue):
            async with self._conn() as conn, conn.transaction():
                return await self._pop_within_limits(conn, queue, max_items, lease_seconds, group_runs)
        async with self._conn() as conn:
            found = await self._claim(conn, queue, max_items, lease_seconds, group_runs, limits_checked=False)
        return in_pop_order([(r["seq"], rows.leased_item(r)) for r in found])

    async def _claim(
        self,
        conn: asyncpg.Connection,
        queue: str,
        max_items: int,
        lease_seconds: int | None,
        group_runs: bool,
        *,
        limits_checked: bool,
    ) -> list[Any]:
        """The pop's statement (pop, or pop_runs): the rows it leased."""
        return await fetch(
            conn,
            "pop_runs" if group_runs else "pop",
            queue=queue,
            now=self._now(),
            max_items=max_items,
            lease_token=uuid4(),
            lease_seconds=lease_seconds,
            limits_checked=limits_checked,
        )

    async def _pop_within_limits(
        self,
        conn: asyncpg.Connection,
        queue: str,
        max_items: int,
        lease_seconds: int | None,
        group_runs: bool,
    ) -> list[LeasedItem]:
        """The careful pop (see store/limits.py), in the caller's transaction: the queue's row read
        (sq_flow_room: locked, and its leases counted in a snapshot taken after the lock, when it
        has queue-wide limits), then what the limits allow claimed (per key: _pop_by_keys) and
        the bucket's tokens taken, all before the locks go at commit."""
        now = self._now()
        settings = await fetch_one(conn, "flow_room", queue=queue, now=now)
        allowed: Room | None = None
        limits = NO_LIMITS
        per_key = False
        if settings is not None and settings["limited"]:
            limits = rows.flow_limits(settings)
            # Limited, yet not by the queue's settings: by its keys' own.
            per_key = limits.per_key or not limits.limited or settings["keys_limited"]
            if per_key:
                limits = replace(limits, keys_limited=True)
            bucket = Bucket(settings["rate_tokens"], settings["rate_at"])
            allowed = room(limits, max_items, settings["leased"], bucket, settings["now"])
        take = max_items if allowed is None else allowed.items
        found: list[Any] = []
        refill: float | None = None
        if take > 0 and per_key:
            assert settings is not None
            found, bound_by, refill = await self._pop_by_keys(
                conn, queue, take, lease_seconds, now, settings["now"]
            )
            if allowed is not None and len(found) < take and bound_by is not None:
                allowed = replace(allowed, bound_by=bound_by)
        elif take > 0:
            found = await self._claim(conn, queue, take, lease_seconds, group_runs, limits_checked=True)
        if allowed is not None and allowed.tokens is not None:
            await execute(conn, "take_tokens", queue=queue, tokens=allowed.tokens - len(found), at=allowed.at)
        self.flow.popped(queue, Limited(limits, allowed, len(found), max_items, refill))
        return in_pop_order([(r["seq"], rows.leased_item(r)) for r in found])

    async def _pop_by_keys(
        self,
        conn: asyncpg.Connection,
        queue: str,
        take: int,
        lease_seconds: int | None,
        now: datetime | None,
        clock: datetime,
    ) -> tuple[list[Any], str | None, float | None]:
        """A pop of a queue whose keys have limits: the turns of the keys of its first items
        (lock_keys: their rows locked, passing over those other poppers hold), then, after the
        locks, those keys' leases counted and their first items read (key_items) and their buckets
        read at `clock`, then up to each one's room of its items leased and the tokens taken. The
        rows it leased, the limit that cut it short (domain/keys.py: pick), and how long until a
        key's bucket refills (None: none cut)."""
        walk: dict[str, Any] = {"queue": queue, "now": now, "walk": walk_for(take)}
        locked = await fetch(conn, "lock_keys", **walk, max_keys=take)
        if not locked and await execute(conn, "add_keys", queue=queue):
            locked = await fetch(conn, "lock_keys", **walk, max_keys=take)
        if not locked and await fetch(conn, "wait_keys", **walk):
            locked = await fetch(conn, "lock_keys", **walk, max_keys=take)
        if not locked:
            return [], None, None
        buckets = {
            r["key"]: key_bucket(r["rate"], Bucket(r["rate_tokens"], r["rate_at"]), clock)
            for r in locked
            if r["rate"] is not None
        }
        caps = {r["key"]: r["cap"] for r in locked}
        tokens = {key: bucket.whole for key, bucket in buckets.items()}
        after = await fetch(
            conn,
            "key_items",
            queue=queue,
            now=now,
            take=take,
            keys=list(caps),
            caps=list(caps.values()),
            tokens=[tokens.get(key) for key in caps],
        )
        turns = key_turns(caps, after, tokens)
        seqs, bound_by = pick(turns, take)
        found = []
        if seqs:
            found = await fetch(
                conn,
                "lease_keyed",
                queue=queue,
                now=now,
                seqs=seqs,
                lease_token=uuid4(),
                lease_seconds=lease_seconds,
            )
        return found, bound_by, await self._take_key_tokens(conn, queue, buckets, found)

    async def _take_key_tokens(
        self, conn: asyncpg.Connection, queue: str, buckets: dict[str, KeyBucket], found: list[Any]
    ) -> float | None:
        """The keys' buckets less what the pop took of each, written to their locked rows; how long
        until the first that ran dry holds a token again (None: none did)."""
        if not buckets:
            return None
        taken = Counter(r["fairness_key"] or "" for r in found)
        keys = list(buckets)
        tokens = [buckets[k].tokens - taken[k] for k in keys]
        await execute(
            conn, "take_key_tokens", queue=queue, keys=keys, tokens=tokens, ats=[buckets[k].at for k in keys]
        )
        return key_refill(buckets, taken)

    async def extend(self, item_id: UUID, lease_token: UUID, lease_seconds: int) -> ItemView:
        async with self._conn() as conn:
            extended = await execute(
                conn,
                "extend",
                id=item_id,
                lease_token=lease_token,
                lease_seconds=lease_seconds,
                now=self._now(),
            )
            row = await fetch_one(conn, "get_item", id=item_id, now=self._now())
        if not extended or row is None:
            raise why_not_extended(rows.found(row, row["now"] if row else None), lease_token)
        return rows.item_view(row, row["now"])

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        # complete_batch's statement for one item: its row also says why a refusal happened.
        async with self._conn() as conn:
            found = await fetch(
                conn, "complete_batch", ids=[item_id], lease_tokens=[lease_token], now=self._now()
            )
        if not (found and found[0]["completed"]):
            raise why_refused(rows.found(found[0] if found else None), lease_token)
        tell(self._on_finished, Outcome.COMPLETED, [found[0]["queue"]])

    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        async with self._conn() as conn:
            found = await fetch(
                conn,
                "complete_batch",
                ids=[i.id for i in items],
                lease_tokens=[i.lease_token for i in items],
                now=self._now(),
            )
        return self._completed(items, found)

    def _completed(self, items: Sequence[Completion], found: list[Any]) -> list[CompleteOutcome]:
        """complete_batch's rows as outcomes, told to the finished hook."""
        completed = {r["id"] for r in found if r["completed"]}
        tell(self._on_finished, Outcome.COMPLETED, [r["queue"] for r in found if r["completed"]])
        still_there = {r["id"] for r in found if not r["completed"]}
        dead = {r["id"] for r in found if r["status"] == ItemStatus.DEAD}
        return complete_outcomes(items, completed, still_there, dead)

    async def complete_and_pop(
        self, completions: Sequence[Completion], queue: str, max_items: int, lease_seconds: int | None
    ) -> tuple[list[CompleteOutcome], list[LeasedItem]]:
        if self.flow.careful(queue):
            # The completions first, then the careful pop, in one transaction: the leases the
            # completions end are not counted against the pop.
            async with self._conn() as conn, conn.transaction():
                done = await fetch(
                    conn,
                    "complete_batch",
                    ids=[i.id for i in completions],
                    lease_tokens=[i.lease_token for i in completions],
                    now=self._now(),
                )
                items = await self._pop_within_limits(conn, queue, max_items, lease_seconds, False)
            return self._completed(completions, done), items
        async with self._conn() as conn:
            found = await fetch(
                conn,
                "complete_and_pop",
                ids=[c.id for c in completions],
                lease_tokens=[c.lease_token for c in completions],
                queue=queue,
                now=self._now(),
                max_items=max_items,
                lease_token=uuid4(),
                lease_seconds=lease_seconds,
                limits_checked=False,
            )
        # One pass over the rows: this runs for every item a worker finishes.
        popped: list[tuple[int, LeasedItem]] = []
        completed: set[UUID] = set()
        still_there: set[UUID] = set()
        dead: set[UUID] = set()
        queues: list[str] = []
        for r in found:
            if r["kind"] == "popped":
                popped.append((r["seq"], rows.leased_item(r)))
            elif r["completed"]:
                completed.add(r["id"])
                queues.append(r["queue"])
            else:
                still_there.add(r["id"])
                if r["status"] == ItemStatus.DEAD:
                    dead.add(r["id"])
        if queues:
            tell(self._on_finished, Outcome.COMPLETED, queues)
        outcomes = complete_outcomes(completions, completed, still_there, dead)
        return outcomes, in_pop_order(popped) if len(popped) > 1 else [item for _, item in popped]

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        async with self._conn() as conn:
            row = await fetch_one(
                conn,
                "fail",
                id=item_id,
                lease_token=failure.lease_token,
                retry=failure.retry,
                retry_after=failure.retry_after_seconds,
                now=self._now(),
                error=failure.error,
                draw=self._random(),
            )
            if row is None:
                current = await fetch_one(conn, "get_item", id=item_id, now=self._now())
                raise why_refused(
                    rows.found(current, current["now"] if current else None), failure.lease_token
                )
        return rows.item_view(row, row["now"])

    async def get_item(self, item_id: UUID) -> ItemView:
        async with self._conn() as conn:
            row = await fetch_one(conn, "get_item", id=item_id, now=self._now())
        if row is None:
            raise ItemNotFound()
        return rows.item_view(row, row["now"])

    async def sequence_numbers(self, ids: Sequence[UUID]) -> dict[UUID, int]:
        async with self._conn() as conn:
            found = await fetch(conn, "sequence_numbers", ids=list(ids))
        return {row["id"]: row["seq"] for row in found}

    async def dedup_item(self, queue: str, dedup_key: str) -> ItemView:
        async with self._conn() as conn:
            row = await fetch_one(conn, "dedup_item", queue=queue, dedup_key=dedup_key, now=self._now())
        if row is None:
            raise ItemNotFound()
        return rows.item_view(row, row["now"])

    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        # The long-poll probe asks about every queue waited on, before it looks: a push committed
        # after this is NOTIFYed with a token the listener knows; one before, this statement finds.
        self.notifications.tokens.heard_of(queues)
        now = self._now()
        waited = self.notifications.waited
        async with self._conn() as conn:
            if due := waited.due(queues):  # listed first, so that a push after it NOTIFYs
                since = waited.now()
                await execute(conn, "wait_on", queues=due, seconds=LISTED_SECONDS)
                waited.listed(due, since)
            found = await fetch(conn, "next_visible_at", queues=list(queues), now=now)
            if not found:
                return {}, now or await conn.fetchval("SELECT now()")
        return {r["queue"]: r["next"] for r in found if r["next"] is not None}, found[0]["now"]

    async def _fetch_page(self, statement: str, limit: int, **values: Any) -> list[asyncpg.Record]:
        async with self._conn() as conn:
            return await fetch(conn, statement, limit=limit, **values)

    async def _stats(self, queue: str) -> list[QueueStats]:
        async with self._conn() as conn:
            return [
                rows.queue_stats(r) for r in await fetch(conn, "queue_stats", now=self._now(), queue=queue)
            ]

    async def _topic_run(self, steps: Sequence[Step]) -> list[list[asyncpg.Record]]:
        async with self._conn() as conn:
            if len(steps) == 1:  # one statement is its own transaction: no BEGIN and COMMIT to send
                [(name, values)] = steps
                return [await fetch(conn, name, **values)]
            async with conn.transaction():
                return [await fetch(conn, name, **values) for name, values in steps]

    async def _lock_and_push(self, lock: Step, then: Then) -> None:
        statement, values = lock
        async with self._conn() as conn, conn.transaction():
            found = await fetch(conn, statement, **values)
            if not found:
                return
            (name, given), items = then(found)
            await fetch(conn, name, **_columns(given))
            if items:  # all or nothing: a refused item (SQ409) raises and rolls the claims back
                push, pushed = self._push(items, False)
                await fetch(conn, push, **pushed)

    async def _claim_and_push(self, claim: Step, items: Sequence[NewItem]) -> bool:
        statement, values = claim
        async with self._conn() as conn, conn.transaction():
            if not await fetch(conn, statement, **values):
                return False
            if items:  # all or nothing: a refused item (SQ409) raises and rolls the claim back
                push, pushed = self._push(items, False)
                await fetch(conn, push, **pushed)
        return True

    async def put_queue(self, name: str, settings: QueueSettings) -> bool:
        async with self._conn() as conn:
            created: bool = await fetch_value(
                conn, "put_queue", queue=name, now=self._now(), **rows.settings_params(settings)
            )
        self.flow.forget(name)
        return created

    async def queue_exists(self, name: str) -> bool:
        async with self._conn() as conn:
            return bool(await fetch_value(conn, "queue_exists", queue=name))

    async def count_queues(self) -> int:
        async with self._conn() as conn:
            return int(await fetch_value(conn, "count_queues"))

    async def queue_metadata(self, name: str) -> QueueMetadata:
        async with self._conn() as conn:
            row = await fetch_one(conn, "queue_metadata", queue=name)
        if row is None:
            raise QueueNotFound()
        return metadata_of(row)

    async def change_queue_metadata(self, name: str, change: MetadataChange) -> int:
        async with self._conn() as conn, conn.transaction():
            if await fetch_one(conn, "lock_queue", queue=name) is None:
                raise QueueNotFound()
            tags: int = await fetch_value(
                conn, "change_queue_metadata", queue=name, now=self._now(), **change_params(change)
            )
        return tags

    async def set_paused(self, queue: str, paused: bool) -> None:
        async with self._conn() as conn:
            if not await execute(conn, "set_paused", queue=queue, paused=paused):
                raise QueueNotFound()

    async def delete_queue(self, queue: str, force: bool) -> DeletedQueue:
        async with self._conn() as conn:
            row = await fetch_one(conn, "delete_queue", queue=queue, force=force, now=self._now())
        if not row["found"]:
            raise QueueNotFound()
        if not row["deleted"]:
            raise QueueInUse()
        return DeletedQueue(items=row["items"], history=row["history"])

    async def redrive(
        self, queue: str, ids: Sequence[UUID] | None, rate_per_second: float | None, limit: int, offset: int
    ) -> int:
        async with self._conn() as conn, conn.transaction():
            wanted = list(ids) if ids is not None else None
            picked = await fetch(conn, "pick_dead", queue=queue, ids=wanted, limit=limit)
            grouped = [r["group_key"] for r in picked if r["group_key"] is not None]
            if grouped:  # rejoining a group at the back is a push into it: take turns the same way
                await execute(conn, "lock_groups", queues=[queue] * len(grouped), groups=grouped)
            delays = [redrive_delay(offset + k, rate_per_second).total_seconds() for k in range(len(picked))]
            await execute(conn, "revive", seqs=[r["seq"] for r in picked], now=self._now(), delays=delays)
        return len(picked)

    async def purge_dead(self, queue: str, limit: int) -> int:
        return await self._purge("purge_dead", queue, limit)

    async def _purge(self, query: str, queue: str, limit: int) -> int:
        """purge_dead's and purge_live's batch: one statement, which answers how many went."""
        async with self._conn() as conn:
            done: int = await fetch_value(conn, query, queue=queue, limit=limit, now=self._now())
        return done

    async def expire_retained(self, limit: int) -> int:
        async with self._conn() as conn:
            done: int = await fetch_value(conn, "expire_retained", limit=limit, now=self._now())
        return done

    async def purge_live(self, queue: str, limit: int) -> int:
        return await self._purge("purge_live", queue, limit)

    async def reap_expired(self, limit: int, queue: str | None = None) -> int:
        async with self._conn() as conn:
            if queue is None:
                killed = await fetch(conn, "reap", now=self._now(), limit=limit, error=LEASE_EXPIRED_ERROR)
            else:
                killed = await fetch(
                    conn, "reap_queue", queue=queue, now=self._now(), limit=limit, error=LEASE_EXPIRED_ERROR
                )
        for row in killed:
            self._on_finished(row["queue"], Outcome.DEAD, row["killed"])
        return sum(row["killed"] for row in killed)

    async def purge_history(self, limit: int) -> int:
        async with self._conn() as conn:
            row = await fetch_one(conn, "purge_history", now=self._now(), limit=limit)
        assert row is not None
        return max(int(row["history"]), int(row["keys"]), int(row["ids"]))


def _columns(values: Mapping[str, Any]) -> dict[str, Any]:
    """A statement's values with a list of rows (dicts) bound as one array per field, named for
    the field: asyncpg encodes typed arrays itself, where JSON would be encoded value by value."""
    bound: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(value, list):
            bound[key] = value
        elif value:
            bound |= {field: [row[field] for row in value] for field in value[0]}
    return bound
