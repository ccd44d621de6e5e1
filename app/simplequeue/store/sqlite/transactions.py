"""The SQLite store's hot transactions (push, pop, complete): plain functions of the writer's
sqlite3 connection, each run whole on its thread by SqliteStore._transaction. push_on also runs
on a caller's own connection, inside the caller's transaction (simplequeue.outbox)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID, uuid4

import aiosqlite

from simplequeue.domain import (
    LEASE_EXPIRED_ERROR,
    CompleteOutcome,
    Completion,
    ItemStatus,
    LeasedItem,
    NewItem,
    Outcome,
    Pushed,
)
from simplequeue.domain.aging import rank_priority
from simplequeue.domain.keys import KeyTurn, pick, walk_for
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
from simplequeue.domain.rules import complete_outcomes, in_pop_order, why_refused
from simplequeue.store import rows
from simplequeue.store.limits import Limited
from simplequeue.store.pushes import PushPlan
from simplequeue.store.sqlite import statements
from simplequeue.store.sqlite.errors import translated_sync_errors
from simplequeue.store.sqlite.fairness import fair_ranks
from simplequeue.store.sqlite.params import insert_params, to_text

T = TypeVar("T")


def push_on(conn: sqlite3.Connection, items: Sequence[NewItem], now: datetime) -> list[Pushed]:
    """The store's push, all or nothing, run on a connection the caller holds inside its own
    transaction (simplequeue.outbox): the same statements a push through the service runs."""
    # The store reads its rows by name; the caller's connection keeps its own row factory after.
    factory, conn.row_factory = conn.row_factory, sqlite3.Row
    try:
        with translated_sync_errors():
            return pushed_only(statements.run_steps(conn, push_steps(items, False, now)))
    finally:
        conn.row_factory = factory


async def push_on_async(conn: aiosqlite.Connection, items: Sequence[NewItem], now: datetime) -> list[Pushed]:
    """push_on, on a caller's aiosqlite connection: each statement through aiosqlite's own
    execute_fetchall and executemany (a hop to the connection's thread each)."""
    factory = conn.row_factory
    conn.row_factory = sqlite3.Row
    try:
        with translated_sync_errors():
            return pushed_only(await statements.run_steps_async(conn, push_steps(items, False, now)))
    finally:
        conn.row_factory = factory


def pushed_only(results: list[Pushed | None]) -> list[Pushed]:
    return [r for r in results if r is not None]


def push_batch(
    conn: sqlite3.Connection, items: Sequence[NewItem], skip_existing: bool, now: datetime
) -> list[Pushed | None]:
    return statements.run_steps(conn, push_steps(items, skip_existing, now))


def push_steps(
    items: Sequence[NewItem], skip_existing: bool, now: datetime
) -> statements.Steps[list[Pushed | None]]:
    """The push's statements, as steps (statements.Steps) that the store's writer thread and a
    caller's connection, sync or async, run alike."""
    plan = PushPlan(items, skip_existing=skip_existing)
    keyed = plan.keyed()
    claims = [
        {"queue": i.queue, "key": i.dedup_key, "id": str(i.id), "created_at": to_text(i.created_at)}
        for i in (items[n] for n in keyed)
    ]
    winners = (yield from claim_dedup_keys(claims, to_text(now))) if claims else {}
    by_place = plan.by_place(winners)
    fresh = [items[n] for n in plan.fresh(by_place)]
    # Under BEGIN IMMEDIATE no other writer can insert between these look-ups and the insert.
    holders = yield from id_holders(fresh, to_text(now))
    new = [i for i in fresh if str(i.id) not in holders]
    yield "ensure_queue", [{"queue": q, "now": to_text(now)} for q in {i.queue for i in new}]
    if new:
        found = yield "push_queues", {"queues": json.dumps(sorted({i.queue for i in new}))}
        aging = {row["queue"]: row["aging"] for row in found}
        ranked = [rank_priority(i.priority, i.created_at, aging.get(i.queue)) for i in new]
        fair = yield from fair_ranks(
            new, ranked, {row["queue"] for row in found if row["fair"]}, to_text(now)
        )
        yield (
            "insert_item",
            [
                {**insert_params(i, now), "remember_id": i.remembers_id, "fair_rank": f, "rank_priority": r}
                for i, f, r in zip(new, fair, ranked, strict=True)
            ],
        )
    held = {rows.as_uuid(k): (row["queue"], rows.as_utc(row["created_at"])) for k, row in holders.items()}
    return plan.results(by_place, {i.id for i in new}, held)


def id_holders(items: Sequence[NewItem], now: str) -> statements.Steps[dict[str, Any]]:
    """{id: the row that holds it} for these items' ids: a live or dead item, or, for ids that are
    their items' idempotency keys, a finished item the queue still remembers (asked only when the
    call has such ids that no item holds)."""
    ids = [str(i.id) for i in items]
    holders = {row["id"]: row for row in (yield "existing_ids", {"ids": json.dumps(ids)})}
    unknown = [str(i.id) for i in items if i.remembers_id and str(i.id) not in holders]
    if unknown:
        for row in (yield "remembered_ids", {"ids": json.dumps(unknown), "now": now}):
            holders[row["id"]] = row
    return holders


def claim_dedup_keys(
    claims: list[dict[str, Any]], now: str
) -> statements.Steps[dict[tuple[str, str], Pushed | None]]:
    """{(queue, key): None where this call took the key, else the item that holds it}."""
    params = {"claims": json.dumps(claims), "now": now}
    taken = {(row["queue"], row["dedup_key"]) for row in (yield "claim_dedup_keys", params)}
    winners = yield "dedup_winners", {"claims": params["claims"]}
    return {
        (row["queue"], row["dedup_key"]): None
        if (row["queue"], row["dedup_key"]) in taken
        else Pushed(rows.as_uuid(row["item_id"]), rows.as_utc(row["created_at"]), created=False)
        for row in winners
    }


def pop(
    conn: sqlite3.Connection,
    queue: str,
    max_items: int,
    lease_seconds: int | None,
    now: str,
    group_runs: bool = False,
    reaped: list[str] | None = None,
    flow: list[Limited] | None = None,
) -> list[LeasedItem]:
    """Lease what is poppable (see Store.pop); with group_runs, the heads' runs too. A pop with
    room for more then reaps its queue's leases that ran out on their last attempt (see
    reap_queue), each one's queue appended to `reaped`. A queue with flow limits hands out no
    more than they allow; what they allowed is appended to `flow`."""
    token = str(uuid4())
    asked = max_items
    limits, allowed = within_limits(conn, queue, max_items, now)
    max_items = allowed.items if allowed is not None else max_items
    if limits.per_key:
        group_runs = False  # a run would pass the keys' rooms
    found: list[sqlite3.Row] = []
    refill: float | None = None
    if max_items > 0 and limits.per_key:
        found, bound_by, refill = pop_by_keys(conn, queue, max_items, lease_seconds, now, token)
        if len(found) < max_items and allowed is not None and bound_by is not None:
            allowed = replace(allowed, bound_by=bound_by)
    elif max_items > 0:
        found = statements.rows(
            conn,
            "pop",
            queue=queue,
            max_items=max_items,
            walk=max_items,  # each of its walks (poppable) takes as many as the pop hands out
            now=now,
            lease_token=token,
            lease_seconds=lease_seconds,
        )
    heads = [row["seq"] for row in found if row["group_key"] is not None]
    if group_runs and heads and len(found) < max_items:
        found += statements.rows(
            conn,
            "lease_runs",
            heads=json.dumps(heads),
            room=max_items - len(found),
            queue=queue,
            now=now,
            lease_token=token,
            lease_seconds=lease_seconds,
        )
    if len(found) < max_items:
        (reaped if reaped is not None else []).extend(reap_queue(conn, queue, now))
    if allowed is not None and allowed.tokens is not None and allowed.at is not None:
        statements.run(
            conn, "take_tokens", queue=queue, tokens=allowed.tokens - len(found), at=to_text(allowed.at)
        )
    if flow is not None:
        flow.append(Limited(limits, allowed, len(found), asked, refill))
    return in_pop_order([(row["seq"], rows.leased_item(row)) for row in found])


def within_limits(
    conn: sqlite3.Connection, queue: str, asked: int, now: str
) -> tuple[FlowLimits, Room | None]:
    """The queue's flow limits, and the room they leave a pop now (None: it has none). In the pop's
    own write transaction, so no other pop counts the same room."""
    row = statements.first(conn, "queue_limits", queue=queue)
    if row is None or not row["limited"]:
        return NO_LIMITS, None
    limits = rows.flow_limits(row)
    # Limited, yet not by the queue's settings: by its keys' own.
    if not limits.limited or row["keys_limited"]:
        limits = replace(limits, keys_limited=True)
    leased = 0
    if limits.max_leased is not None:
        leased = statements.first(conn, "count_leased", queue=queue, now=now, cap=limits.max_leased)["leased"]
    bucket = Bucket(row["rate_tokens"], rows.as_utc_or_none(row["rate_at"]))
    return limits, room(limits, asked, leased, bucket, rows.as_utc(now))


def pop_by_keys(
    conn: sqlite3.Connection, queue: str, take: int, lease_seconds: int | None, now: str, token: str
) -> tuple[list[sqlite3.Row], str | None, float | None]:
    """A pop of a queue whose keys have limits: its first items by key (key_walk), with the leases
    of just those keys counted and their buckets read (key_rooms), then up to each key's room of
    them leased (domain/keys.py: pick) and the tokens taken. The rows leased, the limit that cut the pop
    short, and how long until a key's bucket refills (None: none ran dry).

    The first walk reaches only as far as the pop takes: SQLite has one writer, so no other pop
    holds any key, and while no key is at its limit those items are the pop's. Only when a limit
    cut it short, and more items lay beyond, does it walk again, as far as walk_for reaches (the
    same first items, then those behind them)."""
    for walk in (take, walk_for(take)):
        walked: dict[str, tuple[list[int], list[int]]] = {}
        found = 0
        for row in statements.rows(conn, "key_walk", queue=queue, now=now, walk=walk):
            seqs, places = walked.setdefault(row["key"], ([], []))
            seqs.append(row["seq"])
            places.append(row["place"])
            found += 1
        if not walked:
            return [], None, None
        buckets: dict[str, KeyBucket] = {}
        clock = rows.as_utc(now)
        turns = []
        for row in statements.rows(conn, "key_rooms", queue=queue, now=now, keys=json.dumps(list(walked))):
            key = row["key"]
            if row["rate"] is not None:
                stored = Bucket(row["rate_tokens"], rows.as_utc_or_none(row["rate_at"]))
                buckets[key] = key_bucket(float(row["rate"]), stored, clock)
            cap = None if row["cap"] is None else int(row["cap"])
            tokens = buckets[key].whole if key in buckets else None
            turns.append(KeyTurn(key, cap, int(row["leased"]), *walked[key], tokens))
        seqs, bound_by = pick(turns, take)
        if len(seqs) >= take or bound_by is None or found < walk:
            break
    leased: list[sqlite3.Row] = []
    if seqs:
        leased = statements.rows(
            conn,
            "lease_keyed",
            queue=queue,
            now=now,
            seqs=json.dumps(seqs),
            lease_token=token,
            lease_seconds=lease_seconds,
        )
    if not buckets:
        return leased, bound_by, None
    taken = Counter(row["fairness_key"] or "" for row in leased)
    spent = [{"key": k, "tokens": b.tokens - taken[k], "at": to_text(b.at)} for k, b in buckets.items()]
    statements.run(conn, "take_key_tokens", queue=queue, buckets=json.dumps(spent))
    return leased, bound_by, key_refill(buckets, taken)


REAP_AT_POP = 100  # the most a pop reaps


def reap_queue(conn: sqlite3.Connection, queue: str, now: str) -> list[str]:
    """The queue's leases that ran out on their last attempt die, or move to its dead-letter queue:
    SQS moves such a message at the receive that finds it over its receive count, not at the
    sweep's next round. In the pop's transaction, on the writer's thread: with none to reap (the
    common case) it costs one seek of the queue's lapsed leases, the range the pop just read."""
    expired = statements.rows(conn, "expired_last_attempts_of_queue", queue=queue, now=now, limit=REAP_AT_POP)
    if not expired:
        return []
    seqs = json.dumps([row["seq"] for row in expired])
    statements.run(conn, "kill", seqs=seqs, now=now, error=LEASE_EXPIRED_ERROR)
    statements.run(conn, "write_history", seqs=seqs, now=now, outcome=Outcome.DEAD)
    statements.run(conn, "dead_letter_windows", seqs=seqs, now=now)
    statements.run(conn, "dead_letter_ids", seqs=seqs)
    statements.run(conn, "dead_letter_moves", seqs=seqs, now=now)
    return [row["queue"] for row in expired]


def finish(conn: sqlite3.Connection, matched: Sequence[Any], now: str) -> None:
    """Complete these matched rows: history, dedup windows (only for items that have a key),
    then the rows go. Nothing at all for no rows."""
    if not matched:
        return
    params = {"seqs": json.dumps([row["seq"] for row in matched]), "now": now}
    statements.run(conn, "write_history", **params, outcome=Outcome.COMPLETED)
    if any(row["dedup_key"] is not None for row in matched):
        statements.run(conn, "start_dedup_windows", **params)
    if any(row["remember_id"] for row in matched):
        statements.run(conn, "remember_ids", **params)
    statements.run(conn, "delete_items", seqs=params["seqs"])


def complete_one(conn: sqlite3.Connection, item_id: UUID, lease_token: UUID | None, now: datetime) -> Any:
    """The completed row; else the refusal (not found, stale lease, dead) is raised."""
    params = {"id": str(item_id), "lease_token": str(lease_token) if lease_token else None}
    row = statements.first(conn, "match_one", **params, now=to_text(now))
    if row is None:
        current = statements.first(conn, "get_item", id=str(item_id))
        raise why_refused(rows.found(current, now), lease_token)
    finish(conn, [row], to_text(now))
    return row


def complete(
    conn: sqlite3.Connection, items: Sequence[Completion], now: str
) -> tuple[list[CompleteOutcome], list[str]]:
    """The outcomes, and the queue of each item completed."""
    requested = json.dumps(
        [{"id": str(i.id), "token": str(i.lease_token) if i.lease_token else None} for i in items]
    )
    matched = statements.rows(conn, "match_many", items=requested, now=now)
    finish(conn, matched, now)
    completed = {rows.as_uuid(row["id"]) for row in matched}
    # What the others are (still there, dead) is asked only when some were not completed: the
    # completed rows are gone, so otherwise the answer would be empty.
    unfinished = [str(i.id) for i in items if i.id not in completed]
    left = statements.rows(conn, "item_states", ids=json.dumps(unfinished), now=now) if unfinished else []
    still_there = {rows.as_uuid(row["id"]) for row in left}
    dead = {rows.as_uuid(row["id"]) for row in left if row["status"] == ItemStatus.DEAD}
    return complete_outcomes(items, completed, still_there, dead), [row["queue"] for row in matched]


def complete_and_pop(
    conn: sqlite3.Connection,
    completions: Sequence[Completion],
    queue: str,
    max_items: int,
    lease_seconds: int | None,
    now: str,
    flow: list[Limited] | None = None,
) -> tuple[list[CompleteOutcome], list[str], list[LeasedItem], list[str]]:
    outcomes, queues = complete(conn, completions, now)
    reaped: list[str] = []
    popped = pop(conn, queue, max_items, lease_seconds, now, reaped=reaped, flow=flow)
    return outcomes, queues, popped, reaped
