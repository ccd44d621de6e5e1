"""simplequeue.outbox on every driver it takes, on SQLite and PostgreSQL: a push in the caller's
own transaction exists if and only if the caller commits, and behaves as the service's push."""

from __future__ import annotations

import asyncio
import itertools
import random
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg
import pytest
from simplequeue import outbox
from simplequeue.domain import InvalidPayload, ItemExists, PayloadTooLarge, QueueSettings, SchemaNotReady
from simplequeue.domain.aging import rank_priority
from simplequeue.main import store_for
from simplequeue.service.waiting import Waiting
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.outbox_callers import DRIVERS, ORDERS, Caller, caller_on
from tests.queue_names import NAMES, decisions

_orders = itertools.count(random.randrange(10**12))


@dataclass
class Case:
    caller: Caller
    store: Store
    engine: str
    where: str  # a SQLite file's path, or a PostgreSQL URL


@pytest.fixture(params=DRIVERS, ids=[f"{d}-{e}" for d, e in DRIVERS])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """(driver, engine, where the caller connects: a SQLite file's path or PostgreSQL's URL)."""
    driver, engine = request.param
    if engine == "sqlite":
        return driver, engine, str(tmp_path / "sq.db")
    return driver, engine, request.getfixturevalue("postgres_url")


@pytest.fixture
async def case(target: tuple[str, str, str]) -> AsyncIterator[Case]:
    """A caller of one driver on one engine's migrated database, and the service's store on it."""
    driver, engine, where = target
    url = f"sqlite:///{where}" if engine == "sqlite" else where
    store = store_for(Settings(database_url=url, db_timeout_seconds=5, sweep=False))
    await store.open()
    await store.migrate()
    await plain(engine, where, ORDERS, "CREATE SCHEMA IF NOT EXISTS sq_no_schema")
    async with caller_on(driver, engine, where) as caller:
        yield Case(caller, store, engine, where)
    await store.close()


async def plain(engine: str, where: str, *statements: str) -> Any:
    """Run statements on a connection of the test's own (SQLite: those for SQLite); the last's value."""
    if engine == "sqlite":
        conn = sqlite3.connect(where)
        try:
            found = [conn.execute(s).fetchone() for s in statements if "SCHEMA" not in s]
            conn.commit()
        finally:
            conn.close()
        return found[-1][0] if found and found[-1] else None
    pg = await asyncpg.connect(where)
    try:
        value = None
        for statement in statements:
            value = await pg.fetchval(statement)
        return value
    finally:
        await pg.close()


async def hide_schema(case: Case, hidden: bool) -> None:
    """Make the schema look out of date inside the caller's transaction (PostgreSQL: gone from the
    search_path, so that reading it fails, which would abort a transaction without a savepoint)."""
    if case.engine == "sqlite":
        change = "INSERT INTO sq_schema_version (version, name, applied_at) VALUES (9999, 'later', '')"
        await case.caller.execute(change if hidden else "DELETE FROM sq_schema_version WHERE version = 9999")
    else:
        await case.caller.execute(f"SET LOCAL search_path TO {'sq_no_schema' if hidden else 'public'}")


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _queue() -> str:
    return f"o-{uuid4().hex[:12]}"


async def test_a_committed_push_is_popped_once_with_its_payload_and_options(case: Case) -> None:
    caller, store = case.caller, case.store
    queue, order = _queue(), next(_orders)
    await caller.begin()
    await caller.write(order)
    pushed = await caller.push(queue, {"order": order}, priority=5, group="customer-1", dedup_key=f"o{order}")
    assert pushed.created
    assert not await store.queue_exists(queue)  # nothing visible before the commit
    await caller.commit()

    [item] = await store.pop(queue, 10, 30)
    assert (item.id, item.payload, item.priority, item.group) == (
        pushed.id,
        {"order": order},
        5,
        "customer-1",
    )
    assert await store.pop(queue, 10, 30) == []


async def test_a_push_into_a_queue_that_ages_priorities_is_ranked_as_the_services(case: Case) -> None:
    caller, store = case.caller, case.store
    queue = _queue()
    await store.put_queue(queue, QueueSettings(priority_aging_seconds=60))
    old = datetime.now(UTC) - timedelta(minutes=30)
    await caller.begin()
    await caller.push(queue, "old", created_at=old)
    await caller.push(queue, "urgent", priority=5)
    await caller.commit()

    popped = await store.pop(queue, 10, 30)
    assert [i.payload for i in popped] == ["old", "urgent"]  # thirty periods lift 0 past 5
    assert popped[0].rank_priority == rank_priority(0, popped[0].created_at, 60)


async def test_a_rollback_leaves_no_trace_and_frees_the_dedup_key(case: Case) -> None:
    caller, store = case.caller, case.store
    queue, order = _queue(), next(_orders)
    await caller.begin()
    await caller.write(order)
    await caller.push(queue, {"order": order}, dedup_key="k")
    await caller.rollback()
    assert not await store.queue_exists(queue)

    await caller.begin()
    await caller.write(order)
    assert (await caller.push(queue, {"order": order}, dedup_key="k")).created  # the key is free
    await caller.commit()
    assert len(await store.pop(queue, 10, 30)) == 1


async def test_a_duplicate_answers_created_false_and_the_callers_row_commits(case: Case) -> None:
    caller, store = case.caller, case.store
    queue, first_order, order = _queue(), next(_orders), next(_orders)
    await caller.begin()
    await caller.write(first_order)
    first = await caller.push(queue, 1, dedup_key="k")
    await caller.commit()

    await caller.begin()
    await caller.write(order)
    again = await caller.push(queue, 2, dedup_key="k")
    item_id = uuid4()
    assert (await caller.push(queue, 3, id=item_id)).created
    assert await caller.push(queue, 3, id=item_id) == outbox.Pushed(item_id, created=False)  # a retry
    await caller.commit()

    assert (again.id, again.created) == (first.id, False)
    assert await store.queue_exists(queue)
    assert sorted(i.payload for i in await store.pop(queue, 10, 30)) == [1, 3]


async def test_a_savepoint_rolled_back_takes_its_push_with_it(case: Case) -> None:
    caller, store = case.caller, case.store
    queue = _queue()
    await caller.begin()
    await caller.write(next(_orders))
    await caller.savepoint()
    await caller.push(queue, "undone", dedup_key="k")
    await caller.rollback_to_savepoint()
    kept = await caller.push(queue, "kept", dedup_key="k")
    await caller.commit()

    assert kept.created
    assert [i.payload for i in await store.pop(queue, 10, 30)] == ["kept"]


async def test_a_refused_push_leaves_the_callers_transaction_usable(case: Case) -> None:
    caller, store = case.caller, case.store
    taken_queue, queue, before, after = _queue(), _queue(), next(_orders), next(_orders)
    await caller.begin()
    taken = await caller.push(taken_queue, 1, id=uuid4())
    await caller.commit()

    await caller.begin()
    await caller.write(before)
    with pytest.raises(ItemExists):  # another queue's item holds the id: nothing of this batch goes in
        await caller.push_many(queue, [{"payload": 1}, {"payload": 2, "id": taken.id}])
    with pytest.raises(PayloadTooLarge):
        await caller.push(queue, "x" * 1_100_000)
    await caller.write(after)  # the transaction goes on (on PostgreSQL, rolled back to the savepoint)
    await caller.commit()

    assert not await store.queue_exists(queue)
    assert len(await store.pop(taken_queue, 10, 30)) == 1
    committed = f"SELECT count(*) FROM outbox_orders WHERE id IN ({before}, {after})"
    assert await plain(case.engine, case.where, committed) == 2


async def test_a_push_outside_a_transaction_is_refused(case: Case) -> None:
    caller, store = case.caller, case.store
    queue = _queue()
    with pytest.raises(outbox.NotInTransaction):
        await caller.push(queue, 1)
    assert not await store.queue_exists(queue)


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (float("nan"), InvalidPayload),
        ({"a": "b\x00"}, InvalidPayload),
        ("x" * 1_048_575, PayloadTooLarge),  # migrate's limit: the service's default, 1 MiB (quotes too)
        (_nested(65), InvalidPayload),
    ],
    ids=["nan", "nul", "too-large", "too-deep"],
)
async def test_payloads_follow_the_services_rules(case: Case, payload: Any, error: type[Exception]) -> None:
    caller, store = case.caller, case.store
    queue = _queue()
    await caller.begin()
    with pytest.raises(error):
        await caller.push(queue, payload)
    with pytest.raises(outbox.InvalidInput):
        await caller.push("has space", 1)
    await caller.push(queue, "x" * 262_000)  # just under the limit: the transaction is usable
    await caller.commit()
    assert len(await store.pop(queue, 10, 30)) == 1


async def test_queue_names_follow_the_services_rule(case: Case) -> None:
    # tests/queue_names.py's table, as every door runs it; in one transaction, rolled back, so that
    # the names (shared by every test) leave nothing behind.
    taken = {}
    await case.caller.begin()
    for name in NAMES:
        try:
            await case.caller.push(name, 1)
        except outbox.InvalidInput:
            taken[name] = False
        else:
            taken[name] = True
    await case.caller.rollback()
    assert decisions(taken) == {}
    assert not [name for name in NAMES if NAMES[name] and await case.store.queue_exists(name)]


async def test_a_schema_of_another_version_is_named_pushes_nothing_and_the_transaction_goes_on(
    case: Case,
) -> None:
    # The functions are there, but a later release migrated (PostgreSQL: the push's own statement
    # reads the version, and hands sq_push_batch no items when it is not this code's).
    caller, store = case.caller, case.store
    queue = _queue()
    later = "INSERT INTO sq_schema_version (version, name, applied_at) VALUES (9999, 'later', {})"
    await caller.begin()
    await caller.execute(later.format("''" if case.engine == "sqlite" else "now()"))
    with pytest.raises(SchemaNotReady, match="at version 9999, this code needs"):
        await caller.push(queue, 1)
    await caller.execute("DELETE FROM sq_schema_version WHERE version = 9999")
    await caller.push(queue, 2)
    await caller.commit()
    assert [i.payload for i in await store.pop(queue, 10, 30)] == [2]


async def test_a_schema_out_of_date_is_named_and_the_transaction_goes_on(case: Case) -> None:
    caller, store = case.caller, case.store
    queue = _queue()
    await caller.begin()
    await hide_schema(case, True)
    with pytest.raises(SchemaNotReady, match="simplequeue migrate"):
        await caller.push(queue, 1)
    await hide_schema(case, False)
    await caller.push(queue, 2)
    await caller.commit()
    assert [i.payload for i in await store.pop(queue, 10, 30)] == [2]


@pytest.mark.parametrize(
    "target", [("asyncpg", "postgresql"), ("psycopg", "postgresql"), ("sqlite3", "sqlite")], indirect=True
)
async def test_a_long_poll_waiting_before_the_commit_is_woken_by_it(case: Case) -> None:
    # PostgreSQL: only the NOTIFY at commit can wake the waiter (no recheck); SQLite: the recheck.
    on_postgres = case.engine == "postgresql"
    waiting = Waiting(case.store, recheck_seconds=1000 if on_postgres else 0.2)
    if case.store.notifications is not None:
        await case.store.notifications.start(waiting.notify)
    queue = _queue()
    try:
        waiter = asyncio.create_task(waiting.pop(queue, max_items=1, wait_seconds=15, lease_seconds=30))
        await asyncio.sleep(0.3)
        await case.caller.begin()
        await case.caller.push(queue, "after the commit")
        await asyncio.sleep(0.5)
        assert not waiter.done()  # nothing before the commit
        await case.caller.commit()
        [item] = await asyncio.wait_for(waiter, timeout=10)
        assert item.payload == "after the commit"
    finally:
        waiting.close()


@pytest.mark.parametrize(
    "target",
    [t for t in DRIVERS if t[1] == "postgresql"],
    ids=[d for d, e in DRIVERS if e == "postgresql"],
    indirect=True,
)
async def test_a_role_that_may_only_execute_the_entry_points_pushes(case: Case) -> None:
    # docs/outbox.md's grants, nothing else: the helpers read the schema's version and limits
    # through sq_push_limits(), never from the tables.
    role, queue = f"sq_outbox_{uuid4().hex[:12]}", _queue()
    functions = [
        "sq_push(text, json, integer, double precision, text, text, uuid, timestamptz, timestamptz, text)",
        "sq_push_batch(json)",
        "sq_push_limits()",
    ]
    await plain(
        case.engine,
        case.where,
        f"CREATE ROLE {role} NOLOGIN",
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT EXECUTE ON FUNCTION {', '.join(functions)} TO {role}",
    )
    try:
        await case.caller.begin()
        await case.caller.execute(f"SET LOCAL ROLE {role}")
        first = await case.caller.push(queue, {"n": 1}, dedup_key="k")
        again = await case.caller.push(queue, {"n": 2}, dedup_key="k")
        assert again == outbox.Pushed(first.id, created=False)
        with pytest.raises(PayloadTooLarge):  # the limit, read by the role
            await case.caller.push(queue, "x" * 1_100_000)
        [_, second] = await case.caller.push_many(queue, [{"payload": 3, "dedup_key": "k"}, {"payload": 4}])
        await case.caller.commit()
    finally:
        await plain(case.engine, case.where, f"DROP OWNED BY {role}", f"DROP ROLE {role}")
    assert second.created
    assert sorted(str(i.payload) for i in await case.store.pop(queue, 10, 30)) == ["4", "{'n': 1}"]
