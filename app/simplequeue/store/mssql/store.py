"""SQL Server through pyodbc and aioodbc: READPAST/UPDLOCK claims, the server's clock.

The store methods only: the batches are in queries.sql, bound by name (statements.py); values are
encoded for pyodbc by params.py, driver errors translated by errors.py, and ODBC itself (the
connection string, running a batch, committing) is odbc.py's. aioodbc and pyodbc are imported by
``open()`` only, so that importing this package (and every deployment on another database) needs no
unixODBC.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID, uuid4

from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    Clock,
    CompleteOutcome,
    Completion,
    DeletedQueue,
    Failure,
    FinishedHook,
    ItemExists,
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
    StoreError,
    ignore_finished,
    tell,
)
from simplequeue.domain.keys import pick, walk_for
from simplequeue.domain.limits import (
    NO_LIMITS,
    Bucket,
    FlowLimits,
    KeyBucket,
    Room,
    key_bucket,
    key_refill,
    room,
)
from simplequeue.domain.metadata import MetadataChange, QueueMetadata
from simplequeue.domain.rules import (
    complete_outcomes,
    in_pop_order,
    why_not_extended,
    why_refused,
)
from simplequeue.store import rows
from simplequeue.store.keys import KeyStore, key_turns
from simplequeue.store.limits import FlowState, Limited
from simplequeue.store.metadata import change_params, metadata_of
from simplequeue.store.migrations import latest_version
from simplequeue.store.mssql import params
from simplequeue.store.mssql.errors import deadlock_unavailable, retry_deadlocks, translated_errors
from simplequeue.store.mssql.migrate import apply_pending, migration_session
from simplequeue.store.mssql.odbc import (
    Connection,
    Param,
    Row,
    committed,
    create_pool,
    odbc_connection_string,
    run_batch,
)
from simplequeue.store.mssql.statements import fetch, fetch_sets
from simplequeue.store.reads import QueueReads
from simplequeue.store.schedules import ScheduleStore, Then
from simplequeue.store.topics import Step, TopicStore


class MssqlStore(QueueReads, TopicStore, ScheduleStore, KeyStore):
    _KEYS_SET_LIMITED = True  # put_key's and reset_key's batches set the queue's `limited` themselves
    dialect = "mssql"
    reaps_at_pop = False  # the service reaps after a pop with room (service.waiting)
    notifications = None  # no notifications: the long-poll probe finds other processes' pushes

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        timeout_seconds: float = 5.0,
        clock: Clock | None = None,
        random: Callable[[], float] = random.random,
        on_finished: FinishedHook = ignore_finished,
    ) -> None:
        self._dsn = odbc_connection_string(url)
        self._server = _server_of(url)  # host:port, for errors that name the server
        self._on_finished = on_finished
        self._pool_size = pool_size
        self._timeout = timeout_seconds
        self._clock = clock
        self._random = random  # backoff jitter
        self._pool: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self.flow = FlowState()

    def _now(self) -> str:
        """'' lets the server's clock decide; a clock is injected only by tests."""
        return params.timestamp(self._clock()) if self._clock else ""

    async def open(self) -> None:
        # A thread per pooled connection (see create_pool), this store's own and shut down with it.
        self._executor = ThreadPoolExecutor(self._pool_size, thread_name_prefix="simplequeue-odbc")
        self._pool = await create_pool(
            self._dsn, size=self._pool_size, timeout_seconds=self._timeout, executor=self._executor
        )

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            await self._pool.wait_closed()
            self._pool = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    @asynccontextmanager
    async def _acquire(self) -> AsyncIterator[Connection]:
        """A pooled connection. Waiting for one, or for a new one to log in, is bounded, so that an
        outage or an exhausted pool answers DatabaseUnavailable instead of hanging the request."""
        if self._pool is None:
            raise RuntimeError("store is not open")
        async with asyncio.timeout(self._timeout):
            conn: Connection = await self._pool.acquire()
        try:
            yield conn
        finally:
            await self._pool.release(conn)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Connection]:
        async with translated_errors(self._server), self._acquire() as conn, committed(conn):
            yield conn

    @deadlock_unavailable
    async def migrate(self, *, max_payload_bytes: int | None = None) -> list[int]:
        async with (
            translated_errors(self._server),
            self._acquire() as conn,
            migration_session(conn, self._timeout),
            committed(conn),
        ):
            applied = await apply_pending(conn, self._now())
            if max_payload_bytes is not None:
                await fetch(conn, "write_setting", name="max_payload_bytes", value=str(max_payload_bytes))
            return applied

    @retry_deadlocks
    async def check_ready(self) -> None:
        latest = latest_version(self.dialect)
        async with self._transaction() as conn:
            versions = {row["version"] for row in await fetch(conn, "applied_versions")}
        if latest not in versions:
            raise SchemaNotReady()

    @retry_deadlocks
    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> list[Pushed | None]:
        """One batch, one transaction: dbo.sq_push_items, the procedure that applications push
        through too (store/mssql/procedures.sql), does the whole push: which items
        speak for the others, the dedup keys and remembered ids claimed, the inserts, and each
        item's answer. Of items that repeat a dedup key, or a remembered id of their queue, the
        first speaks for the others; an item whose key another item holds is that item's
        duplicate; an item whose remembered id an item of its queue holds is a retry of it. Any
        other item left out (its id exists, or another item of the call has it) is refused:
        ItemExists in all-or-nothing mode, which rolls everything back, and None with
        skip_existing."""
        if not items:
            return []
        async with self._transaction() as conn:  # an ItemExists raised here rolls it back
            found = await fetch(conn, "push_batch", now=self._now(), items=params.push_json(items))
            results = [_pushed(row) for row in found]
            if len(results) != len(items):
                raise StoreError(f"SQL Server answered {len(results)} of {len(items)} items pushed")
            if not skip_existing and None in results:
                raise ItemExists()
        return results

    @retry_deadlocks
    async def pop(
        self, queue: str, max_items: int, lease_seconds: int | None, *, group_runs: bool = False
    ) -> list[LeasedItem]:
        async with self._transaction() as conn:
            return await self._pop(conn, queue, max_items, lease_seconds, group_runs=group_runs)

    async def _pop(
        self,
        conn: Connection,
        queue: str,
        max_items: int,
        lease_seconds: int | None,
        *,
        group_runs: bool = False,
    ) -> list[LeasedItem]:
        asked, careful = max_items, self.flow.careful(queue)
        limits, allowed = await self._within_limits(conn, queue, max_items) if careful else (NO_LIMITS, None)
        if allowed is not None:
            max_items = allowed.items
        values: dict[str, Param] = {
            "now": self._now(),
            "queue": queue,
            "lease_seconds": params.optional(lease_seconds),
            "max_items": max_items,
            "lease_token": str(uuid4()),
        }
        refill: float | None = None
        if limits.per_key:
            group_runs = False  # a run would pass the keys' rooms
            found, bound_by, refill = (
                await self._pop_by_keys(conn, values, max_items) if max_items > 0 else ([], None, None)
            )
            if allowed is not None and len(found) < max_items and bound_by is not None:
                allowed = replace(allowed, bound_by=bound_by)
        else:
            found = await fetch(conn, "pop", **values, limits_checked=int(careful)) if max_items > 0 else []
        heads = [row["seq"] for row in found if row["group_key"] is not None]
        if group_runs and heads and len(found) < max_items:
            # The runs behind the heads, in the same transaction (see lease_runs).
            del values["max_items"]
            found += await fetch(
                conn, "lease_runs", **values, heads=json.dumps(heads), room=max_items - len(found)
            )
        if allowed is not None and allowed.tokens is not None and allowed.at is not None:
            await fetch(
                conn,
                "take_tokens",
                queue=queue,
                tokens=params.float_text(allowed.tokens - len(found)),
                at=params.timestamp(allowed.at),
            )
        if careful:
            self.flow.popped(queue, Limited(limits, allowed, len(found), asked, refill))
        return in_pop_order([(row["seq"], rows.leased_item(row)) for row in found])

    async def _within_limits(
        self, conn: Connection, queue: str, asked: int
    ) -> tuple[FlowLimits, Room | None]:
        """The queue's flow limits, its row locked to the end of the pop's transaction when they
        are queue-wide, and the room they leave (None: it has none); see store/limits.py."""
        found = await fetch(conn, "queue_limits", queue=queue, now=self._now())
        if not found or not found[0]["limited"]:
            return NO_LIMITS, None
        row = found[0]
        limits = rows.flow_limits(row)
        # Limited, yet not by the queue's settings: by its keys' own.
        if not limits.limited or row["keys_limited"]:
            limits = replace(limits, keys_limited=True)
        if limits.max_leased is not None or limits.rate_per_second is not None:
            # Queue-wide limits take the queue's turn: read again under its lock.
            row = (await fetch(conn, "lock_limits", queue=queue, now=self._now()))[0]
        leased = 0
        if limits.max_leased is not None:
            [counted] = await fetch(conn, "count_leased", queue=queue, now=self._now(), cap=limits.max_leased)
            leased = int(counted["leased"])
        bucket = Bucket(row["rate_tokens"], rows.as_utc_or_none(row["rate_at"]))
        return limits, room(limits, asked, leased, bucket, rows.as_utc(row["now"]))

    async def _pop_by_keys(
        self, conn: Connection, values: dict[str, Param], take: int
    ) -> tuple[list[Row], str | None, float | None]:
        """A pop of a queue whose keys have limits: the turns of the keys of its first items
        (lock_keys: their rows locked, passing over those other poppers hold; after the locks, their
        leases counted, their buckets read and their first items read), then up to each one's room
        of its items leased (lease_keyed) and the tokens taken (take_key_tokens). The rows it
        leased, the limit that cut it short (domain/keys.py: pick), and how long until a key's
        bucket refills (None: none ran dry)."""
        walk: dict[str, Param] = {"queue": values["queue"], "now": values["now"], "walk": walk_for(take)}
        locked = await fetch(conn, "lock_keys", **walk, max_keys=take)
        if not locked and (await fetch(conn, "add_keys", queue=values["queue"]))[0]["added"]:
            locked = await fetch(conn, "lock_keys", **walk, max_keys=take)
        if not locked and await fetch(conn, "wait_keys", queue=values["queue"], now=values["now"]):
            locked = await fetch(conn, "lock_keys", **walk, max_keys=take)
        if not locked:
            return [], None, None
        by_key: dict[str, list[Row]] = {}
        for row in locked:
            by_key.setdefault(row["key"], []).append(row)
        clock = rows.as_utc(locked[0]["now"])  # the batch's clock, as the leases were counted
        buckets = {
            key: key_bucket(
                float(found[0]["rate"]),
                Bucket(found[0]["rate_tokens"], rows.as_utc_or_none(found[0]["rate_at"])),
                clock,
            )
            for key, found in by_key.items()
            if found[0]["rate"] is not None
        }
        caps = {
            key: None if found[0]["cap"] is None else int(found[0]["cap"]) for key, found in by_key.items()
        }
        turns = key_turns(caps, locked, {key: bucket.whole for key, bucket in buckets.items()})
        seqs, bound_by = pick(turns, take)
        leased: list[Row] = []
        if seqs:
            given = {**values, "max_items": len(seqs)}
            leased = await fetch(conn, "lease_keyed", **given, seqs=json.dumps(seqs), limits_checked=1)
        return leased, bound_by, await self._take_key_tokens(conn, values["queue"], buckets, leased)

    async def _take_key_tokens(
        self, conn: Connection, queue: Param, buckets: dict[str, KeyBucket], leased: list[Row]
    ) -> float | None:
        """The keys' buckets less what the pop took of each, written to their locked rows; how long
        until the first that ran dry holds a token again (None: none did)."""
        if not buckets:
            return None
        taken = Counter(row["fairness_key"] or "" for row in leased)
        spent = [
            {"key": key, "tokens": params.float_text(b.tokens - taken[key]), "at": params.timestamp(b.at)}
            for key, b in buckets.items()
        ]
        await fetch(conn, "take_key_tokens", queue=queue, buckets=params.json_text(spent))
        return key_refill(buckets, taken)

    @retry_deadlocks
    async def extend(self, item_id: UUID, lease_token: UUID, lease_seconds: int) -> ItemView:
        """One batch: the compare-and-set, then the item as it is now."""
        values: dict[str, Param] = {
            "now": self._now(),
            "id": str(item_id),
            "lease_token": str(lease_token),
            "lease_seconds": lease_seconds,
        }
        async with self._transaction() as conn:
            extended, current = await fetch_sets(conn, "extend", **values)
        row = current[0] if current else None
        if not extended or row is None:
            raise why_not_extended(rows.found(row, row["now"] if row else None), lease_token)
        return rows.item_view(row, row["now"])

    @retry_deadlocks
    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        """complete_batch's batch for one item: its second result set says why a refusal happened."""
        items = params.complete_json([Completion(item_id, lease_token)])
        async with self._transaction() as conn:
            done, still_there = await fetch_sets(conn, "complete_batch", now=self._now(), items=items)
            if not done:
                raise why_refused(rows.found(still_there[0] if still_there else None), lease_token)
        tell(self._on_finished, Outcome.COMPLETED, [row["queue"] for row in done])

    @retry_deadlocks
    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        """One batch: the items completed (with their history, and the windows of their dedup keys
        and remembered ids), then which of the others are still there, and of those the dead."""
        if not items:
            return []
        async with self._transaction() as conn:
            outcomes, queues = await self._complete(conn, items)
        tell(self._on_finished, Outcome.COMPLETED, queues)
        return outcomes

    @retry_deadlocks
    async def complete_and_pop(
        self, completions: Sequence[Completion], queue: str, max_items: int, lease_seconds: int | None
    ) -> tuple[list[CompleteOutcome], list[LeasedItem]]:
        """complete_batch's batch, then pop's, in one transaction: the pop sees the completions (a
        completed group head lets its next go), and an item completed here is gone, so it is not
        popped again. A deadlock retries both."""
        async with self._transaction() as conn:
            outcomes, queues = await self._complete(conn, completions) if completions else ([], [])
            popped = await self._pop(conn, queue, max_items, lease_seconds)
        tell(self._on_finished, Outcome.COMPLETED, queues)
        return outcomes, popped

    async def _complete(
        self, conn: Connection, items: Sequence[Completion]
    ) -> tuple[list[CompleteOutcome], list[str]]:
        """The outcomes, and the queue of each item completed."""
        done, still_there = await fetch_sets(
            conn, "complete_batch", now=self._now(), items=params.complete_json(items)
        )
        outcomes = complete_outcomes(
            items,
            {rows.as_uuid(row["id"]) for row in done},
            {rows.as_uuid(row["id"]) for row in still_there},
            {rows.as_uuid(row["id"]) for row in still_there if row["status"] == ItemStatus.DEAD},
        )
        return outcomes, [row["queue"] for row in done]

    @retry_deadlocks
    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        """One batch: the compare-and-set (with the history record of a death), then the item as it is."""
        values: dict[str, Param] = {
            "now": self._now(),
            "id": str(item_id),
            "lease_token": params.optional(failure.lease_token),
            "retry": int(failure.retry),
            "retry_after": params.optional_float(failure.retry_after_seconds),
            "draw": params.float_text(self._random()),
            "error": failure.error,
        }
        async with self._transaction() as conn:
            failed, current = await fetch_sets(conn, "fail", **values)
            row = current[0] if current else None
            if not failed or row is None:
                raise why_refused(rows.found(row, row["now"] if row else None), failure.lease_token)
        return rows.item_view(row, row["now"])

    @retry_deadlocks
    async def get_item(self, item_id: UUID) -> ItemView:
        async with self._transaction() as conn:
            found = await fetch(conn, "get_item", now=self._now(), id=str(item_id))
        if not found:
            raise ItemNotFound()
        return rows.item_view(found[0], found[0]["now"])

    async def sequence_numbers(self, ids: Sequence[UUID]) -> dict[UUID, int]:
        async with self._transaction() as conn:
            found = await fetch(conn, "sequence_numbers", ids=params.json_text([str(i) for i in ids]))
        return {rows.as_uuid(row["id"]): int(row["seq"]) for row in found}

    @retry_deadlocks
    async def dedup_item(self, queue: str, dedup_key: str) -> ItemView:
        async with self._transaction() as conn:
            found = await fetch(conn, "dedup_item", now=self._now(), queue=queue, dedup_key=dedup_key)
        if not found:
            raise ItemNotFound()
        return rows.item_view(found[0], found[0]["now"])

    @retry_deadlocks
    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        async with self._transaction() as conn:
            [[clock], found] = await fetch_sets(
                conn, "next_visible_at", now=self._now(), queues=params.json_text(list(queues))
            )
        earliest = {
            row["queue"]: rows.as_utc(row["next_visible_at"])
            for row in found
            if row["next_visible_at"] is not None
        }
        return earliest, rows.as_utc(clock["now"])

    @retry_deadlocks
    async def _fetch_page(self, statement: str, limit: int, **values: object) -> list[Row]:
        # Every value of a page but its limit is optional, so text ('' for none).
        bound: dict[str, Param] = {
            name: params.optional_time(v) if isinstance(v, datetime) else params.optional(v)
            for name, v in values.items()
        }
        async with self._transaction() as conn:
            return await fetch(conn, statement, limit=limit, **bound)

    @retry_deadlocks
    async def _topic_run(self, steps: Sequence[Step]) -> list[list[Row]]:
        async with self._transaction() as conn:
            return [
                await fetch(conn, name, **{k: params.bound(v) for k, v in values.items()})
                for name, values in steps
            ]

    @retry_deadlocks
    async def _lock_and_push(self, lock: Step, then: Then) -> None:
        statement, values = lock
        async with self._transaction() as conn:  # an ItemExists raised here rolls the claims back
            found = await fetch(conn, statement, **{k: params.bound(v) for k, v in values.items()})
            if not found:
                return
            (name, given), items = then(found)
            await fetch(conn, name, **{k: params.bound(v) for k, v in given.items()})
            if items:
                pushed = await fetch(conn, "push_batch", now=self._now(), items=params.push_json(items))
                if None in [_pushed(row) for row in pushed]:
                    raise ItemExists()

    @retry_deadlocks
    async def _claim_and_push(self, claim: Step, items: Sequence[NewItem]) -> bool:
        statement, values = claim
        async with self._transaction() as conn:  # an ItemExists raised here rolls the claim back
            if not await fetch(conn, statement, **{k: params.bound(v) for k, v in values.items()}):
                return False
            if items:
                found = await fetch(conn, "push_batch", now=self._now(), items=params.push_json(items))
                if None in [_pushed(row) for row in found]:
                    raise ItemExists()
        return True

    @retry_deadlocks
    async def _stats(self, queue: str) -> list[QueueStats]:
        async with self._transaction() as conn:
            found = await fetch(conn, "queue_stats", now=self._now(), queue=queue)
        return [rows.queue_stats(row) for row in found]

    @retry_deadlocks
    async def put_queue(self, name: str, settings: QueueSettings) -> bool:
        given = rows.settings_params(settings)
        values: dict[str, Param] = {
            "now": self._now(),
            "queue": name,
            "max_attempts": given["max_attempts"],
            "lease_seconds": given["lease_seconds"],
            "backoff_base_seconds": params.float_text(given["backoff_base_seconds"]),
            "backoff_factor": params.float_text(given["backoff_factor"]),
            "backoff_cap_seconds": params.float_text(given["backoff_cap_seconds"]),
            "backoff_jitter": params.float_text(given["backoff_jitter"]),
            "retention_seconds": given["retention_seconds"],
            "dedup_window_seconds": given["dedup_window_seconds"],
            "dedup_window_from": given["dedup_window_from"],
            "history_payload": int(given["history_payload"]),
            "dead_letter_queue": params.optional(given["dead_letter_queue"]),
            "message_retention_seconds": params.optional(given["message_retention_seconds"]),
            "max_leased": params.optional(given["max_leased"]),
            "rate_per_second": params.optional_float(given["rate_per_second"]),
            "rate_burst": params.optional(given["rate_burst"]),
            "max_leased_per_key": params.optional(given["max_leased_per_key"]),
            "rate_per_key_per_second": params.optional_float(given["rate_per_key_per_second"]),
            "priority_aging_seconds": params.optional(given["priority_aging_seconds"]),
            "limited": int(given["limited"]),
        }
        async with self._transaction() as conn:
            [row] = await fetch(conn, "put_queue", **values)
        self.flow.forget(name)
        return bool(row["created"])

    @retry_deadlocks
    async def queue_metadata(self, name: str) -> QueueMetadata:
        async with self._transaction() as conn:
            found = await fetch(conn, "queue_metadata", queue=name)
        if not found:
            raise QueueNotFound()
        return metadata_of(found[0])

    @retry_deadlocks
    async def change_queue_metadata(self, name: str, change: MetadataChange) -> int:
        async with self._transaction() as conn:
            values = {**change_params(change), "touch": int(change.touches)}  # ODBC binds no bool
            [row] = await fetch(conn, "change_queue_metadata", queue=name, now=self._now(), **values)
        if not row["found"]:
            raise QueueNotFound()
        return int(row["tags"])

    async def queue_exists(self, name: str) -> bool:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "queue_exists", queue=name)
        return bool(row["found"])

    @retry_deadlocks
    async def count_queues(self) -> int:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "count_queues")
        return int(row["queues"])

    @retry_deadlocks
    async def set_paused(self, queue: str, paused: bool) -> None:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "set_paused", queue=queue, paused=int(paused))
        if not row["changed"]:
            raise QueueNotFound()

    @retry_deadlocks
    async def delete_queue(self, queue: str, force: bool) -> DeletedQueue:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "delete_queue", now=self._now(), queue=queue, force=int(force))
        if not row["found"]:
            raise QueueNotFound()
        if not row["deleted"]:
            raise QueueInUse()
        return DeletedQueue(items=int(row["items"]), history=int(row["history"]))

    @deadlock_unavailable
    async def redrive(
        self, queue: str, ids: Sequence[UUID] | None, rate_per_second: float | None, limit: int, offset: int
    ) -> int:
        """One transaction of up to `limit` items, oldest dead first: pick them (locked), then revive."""
        wanted = params.json_text([str(i) for i in ids]) if ids is not None else ""
        async with self._transaction() as conn:
            picked = await fetch(conn, "pick_dead", queue=queue, ids=wanted, limit=limit)
            seqs = [row["seq"] for row in picked]
            if seqs:
                plan = params.revive_json(seqs, offset, rate_per_second)
                await fetch(conn, "revive", now=self._now(), queue=queue, plan=plan)
        return len(seqs)

    @deadlock_unavailable
    async def purge_dead(self, queue: str, limit: int) -> int:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "purge_dead", now=self._now(), queue=queue, limit=limit)
        return int(row["purged"])

    @deadlock_unavailable
    async def purge_live(self, queue: str, limit: int) -> int:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "purge_live", now=self._now(), queue=queue, limit=limit)
        return int(row["purged"])

    @retry_deadlocks
    async def expire_retained(self, limit: int) -> int:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "expire_retained", now=self._now(), limit=limit)
        return int(row["purged"])

    @retry_deadlocks
    async def reap_expired(self, limit: int, queue: str | None = None) -> int:
        async with self._transaction() as conn:
            try:
                killed = await fetch(
                    conn,
                    "reap_expired",
                    now=self._now(),
                    error=LEASE_EXPIRED_ERROR,
                    limit=limit,
                    queue=params.optional(queue),
                )
            except BaseException:
                # The batch stopped before its last line, which puts the session's deadlock
                # priority back to NORMAL: do it here, or the pool lends out a LOW connection.
                with suppress(Exception):
                    await run_batch(conn, "SET DEADLOCK_PRIORITY NORMAL")
                raise
        for row in killed:
            self._on_finished(row["queue"], Outcome.DEAD, int(row["killed"]))
        return sum(int(row["killed"]) for row in killed)

    @retry_deadlocks
    async def purge_history(self, limit: int) -> int:
        async with self._transaction() as conn:
            [row] = await fetch(conn, "purge_history", now=self._now(), limit=limit)
        return max(int(row["history"]), int(row["keys"]), int(row["ids"]))


def _pushed(row: Row) -> Pushed | None:
    """One item's answer from push_batch's row: created 1 or 0, or NULL for refused (None)."""
    if row["created"] is None:
        return None
    return Pushed(rows.as_uuid(row["id"]), rows.as_utc(row["created_at"]), created=bool(row["created"]))


def _server_of(url: str) -> str | None:
    """host:port of a mssql+odbc:// URL (None for an odbc_connect string, which may name anything)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    return f"{host}:{port or 1433}" if host else None
