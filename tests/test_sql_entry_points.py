"""PostgreSQL's SQL entry points (migrations/postgresql/0005_push_functions.sql) called directly,
as a caller in another language would: sq_push and sq_push_batch inside the caller's own
transaction, their refusals, their clock, and the rights of a role that may only EXECUTE them.

One throwaway database for the module, migrated with max_payload_bytes=1000. Roles are
cluster-wide: each test makes its own, uniquely named, and drops it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any
from uuid import uuid4

import asyncpg
import pytest
from simplequeue.main import store_for
from simplequeue.settings import Settings
from simplequeue.store.migrations import latest_version

from tests.engines import postgres_database
from tests.queue_names import NAMES, decisions

PUSH = "SELECT id, created FROM sq_push"
BATCH = "SELECT id, created FROM sq_push_batch($1::json)"
DEFINERS = (
    "sq_push(text, json, integer, double precision, text, text, uuid, timestamptz, timestamptz, text)",
    "sq_push_batch(json)",
    "sq_push_limits()",
)
TRACES = (
    "SELECT (SELECT count(*) FROM sq_items WHERE queue = $1) + (SELECT count(*) FROM sq_queues"
    " WHERE name = $1) + (SELECT count(*) FROM sq_dedup WHERE queue = $1)"
)
ROWS = (
    "SELECT (SELECT count(*) FROM sq_items) + (SELECT count(*) FROM sq_queues)"
    " + (SELECT count(*) FROM sq_dedup) + (SELECT count(*) FROM sq_client_ids)"
)


async def _migrate(url: str) -> None:
    store = store_for(Settings(database_url=url, db_timeout_seconds=5, sweep=False))
    await store.open()
    try:
        await store.migrate(max_payload_bytes=1000)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with postgres_database() as url:
        asyncio.run(_migrate(url))
        yield url


@pytest.fixture
async def conn(url: str) -> AsyncIterator[asyncpg.Connection]:
    """The caller's connection (superuser; tests that need less SET ROLE inside the transaction)."""
    c = await asyncpg.connect(url)
    await c.execute("CREATE TABLE IF NOT EXISTS ep_orders (id bigint PRIMARY KEY)")
    yield c
    await c.close()


@pytest.fixture
async def seen(url: str) -> AsyncIterator[asyncpg.Connection]:
    """Another connection, which sees only what was committed."""
    c = await asyncpg.connect(url)
    yield c
    await c.close()


@pytest.fixture
async def role(conn: asyncpg.Connection) -> AsyncIterator[str]:
    """A role with USAGE on the schema and EXECUTE on the three entry points, nothing else."""
    name = f"sq_ep_{uuid4().hex[:12]}"
    await conn.execute(f"CREATE ROLE {name} NOLOGIN; GRANT USAGE ON SCHEMA public TO {name}")
    try:
        await conn.execute(f"GRANT EXECUTE ON FUNCTION {', '.join(DEFINERS)} TO {name}")
        yield name
    finally:
        await conn.execute(f"DROP OWNED BY {name}; DROP ROLE {name}")


def _queue() -> str:
    return f"ep-{uuid4().hex[:12]}"


async def _items(seen: asyncpg.Connection, queue: str) -> list[asyncpg.Record]:
    return await seen.fetch(
        "SELECT id, payload::text AS payload, priority, group_key, dedup_key, created_at, visible_at, status"
        " FROM sq_items WHERE queue = $1 ORDER BY seq",
        queue,
    )


async def _traces(seen: asyncpg.Connection, queue: str) -> int:
    """The queue's items, its row in sq_queues and its dedup keys."""
    return int(await seen.fetchval(TRACES, queue))


async def _refused(conn: asyncpg.Connection, sql: str, *args: Any) -> asyncpg.PostgresError:
    """The error of sql, run under a savepoint that is then rolled back (the transaction goes on)."""
    await conn.execute("SAVEPOINT p")
    with pytest.raises(asyncpg.PostgresError) as info:
        await conn.fetch(sql, *args)
    await conn.execute("ROLLBACK TO SAVEPOINT p")
    return info.value


async def test_a_committed_push_is_in_sq_items_once_with_its_options(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue = _queue()
    async with conn.transaction():
        await conn.execute("INSERT INTO ep_orders (id) SELECT coalesce(max(id), 0) + 1 FROM ep_orders")
        start = await conn.fetchval("SELECT clock_timestamp()")
        [(first, created)] = await conn.fetch(
            f"{PUSH}($1, $2::json, priority => 5, delay_seconds => 30, group_key => 'customer-1',"
            " dedup_key => 'order-1')",
            queue,
            '{"order":1}',
        )
        later = start + timedelta(hours=1)
        [(second, _)] = await conn.fetch(f"{PUSH}($1, '2'::json, not_before => $2)", queue, later)
        end = await conn.fetchval("SELECT clock_timestamp()")
        assert created
        assert await _traces(seen, queue) == 0  # nothing seen before the commit
    a, b = await _items(seen, queue)
    assert (a["id"], json.loads(a["payload"]), a["priority"], a["status"]) == (
        first,
        {"order": 1},
        5,
        "ready",
    )
    assert (a["group_key"], a["dedup_key"]) == ("customer-1", "order-1")
    assert start <= a["created_at"] <= end
    assert start + timedelta(seconds=30) <= a["visible_at"] <= end + timedelta(seconds=30)
    assert (b["id"], b["payload"], b["priority"], b["visible_at"]) == (second, "2", 0, later)


async def test_a_rollback_leaves_nothing_and_frees_the_dedup_key(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue = _queue()
    tx = conn.transaction()
    await tx.start()
    await conn.fetch(f"{PUSH}($1, '1'::json, dedup_key => 'k')", queue)
    await conn.fetch(BATCH, json.dumps([{"queue": queue, "payload": 2, "dedup_key": "j"}]))
    await tx.rollback()
    assert await _traces(seen, queue) == 0  # no item, no queue, no dedup key

    async with conn.transaction():
        [(_, created)] = await conn.fetch(f"{PUSH}($1, '3'::json, dedup_key => 'k')", queue)
    assert created
    assert [i["payload"] for i in await _items(seen, queue)] == ["3"]


async def test_a_dedup_hit_answers_created_false_and_the_transaction_commits_its_own_rows(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue, order = _queue(), uuid4().int % 10**15
    async with conn.transaction():
        [(first, _)] = await conn.fetch(f"{PUSH}($1, '1'::json, dedup_key => 'k')", queue)
    async with conn.transaction():
        await conn.execute("INSERT INTO ep_orders (id) VALUES ($1)", order)
        assert await conn.fetch(f"{PUSH}($1, '2'::json, dedup_key => 'k')", queue) == [(first, False)]
        [(_, created)] = await conn.fetch(f"{PUSH}($1, '3'::json, dedup_key => 'other')", queue)
        assert created  # the transaction went on
    assert [i["payload"] for i in await _items(seen, queue)] == ["1", "3"]
    assert await seen.fetchval("SELECT count(*) FROM ep_orders WHERE id = $1", order) == 1


async def test_a_remembered_id_pushed_twice_answers_created_false(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue, item = _queue(), uuid4()
    async with conn.transaction():
        assert await conn.fetch(f"{PUSH}($1, '1'::json, id => $2)", queue, item) == [(item, True)]
        assert await conn.fetch(f"{PUSH}($1, '2'::json, id => $2)", queue, item) == [(item, False)]
    async with conn.transaction():
        assert await conn.fetch(f"{PUSH}($1, '3'::json, id => $2)", queue, item) == [(item, False)]
    assert [i["payload"] for i in await _items(seen, queue)] == ["1"]


async def test_an_id_of_another_queue_raises_sq409_and_a_savepoint_keeps_the_transaction(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    held, queue, item, order = _queue(), _queue(), uuid4(), uuid4().int % 10**15
    async with conn.transaction():
        await conn.fetch(f"{PUSH}($1, '1'::json, id => $2)", held, item)
    async with conn.transaction():
        await conn.execute("INSERT INTO ep_orders (id) VALUES ($1)", order)
        error = await _refused(conn, f"{PUSH}($1, '2'::json, id => $2)", queue, item)
        assert error.sqlstate == "SQ409"
        assert str(error) == f"simplequeue: item id {item} is already taken by another item"
        batch = [{"queue": queue, "payload": 3}, {"queue": queue, "payload": 4, "id": str(item)}]
        assert (await _refused(conn, BATCH, json.dumps(batch))).sqlstate == "SQ409"
        await conn.fetch(f"{PUSH}($1, '5'::json)", queue)
    assert [i["payload"] for i in await _items(seen, queue)] == ["5"]  # none of the refused batch
    assert [i["payload"] for i in await _items(seen, held)] == ["1"]
    assert await seen.fetchval("SELECT count(*) FROM ep_orders WHERE id = $1", order) == 1


async def test_a_batch_answers_in_order_and_a_repeated_key_answers_the_first_items_id(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue = _queue()
    ids = [uuid4() for _ in range(4)]
    batch = [
        {"queue": queue, "payload": 1, "dedup_key": "a", "id": str(ids[0])},
        {"queue": queue, "payload": 2, "dedup_key": "b", "id": str(ids[1])},
        {"queue": queue, "payload": 3, "dedup_key": "a", "id": str(ids[2])},
        {"queue": queue, "payload": 4, "id": str(ids[3])},
    ]
    async with conn.transaction():
        answers = await conn.fetch(BATCH, json.dumps(batch))
    assert [tuple(a) for a in answers] == [(ids[0], True), (ids[1], True), (ids[0], False), (ids[3], True)]
    assert [(i["id"], i["payload"]) for i in await _items(seen, queue)] == [
        (ids[0], "1"),
        (ids[1], "2"),
        (ids[3], "4"),
    ]


def _item(**fields: Any) -> dict[str, Any]:
    return {"queue": "ep-rules", "payload": 1} | fields


@pytest.mark.parametrize(
    ("items", "sqlstate", "names"),
    [
        ([_item(payload="x" * 999)], "SQ413", "items[0].payload is 1001 bytes as JSON; the limit is 1000"),
        ([_item(), _item(payload=[[[["x" * 996]]]])], "SQ413", "items[1].payload"),
        ([_item(payload=json.loads("[" * 65 + "]" * 65))], "SQ400", "deeper than 64 levels"),
        ([_item(payload={"a": "b\x00"})], "SQ400", "items[0]"),
        ([_item(queue="")], "SQ400", "items[0].queue"),
        ([_item(queue="has space")], "SQ400", "items[0].queue"),
        ([_item(queue="q" * 129)], "SQ400", "items[0].queue"),
        ([_item(queue=None)], "SQ400", "items[0].queue"),
        ([_item(dedup_key="")], "SQ400", "items[0].dedup_key"),
        ([_item(dedup_key="trailing ")], "SQ400", "items[0].dedup_key"),
        ([_item(group_key="g" * 129)], "SQ400", "items[0].group_key"),
        ([_item(fairness_key="f" * 129)], "SQ400", "items[0].fairness_key"),
        ([_item(), _item(fairness_key="")], "SQ400", "items[1].fairness_key"),
        ([_item(dedup_key="\U0001f600" * 65)], "SQ400", "UTF-16"),
        ([_item(dedup_key=5)], "SQ400", "items[0].dedup_key"),
        ([_item(priority=2**31)], "SQ400", "items[0].priority"),
        ([_item(priority=-(2**31) - 1)], "SQ400", "items[0].priority"),
        ([_item(priority=1.5)], "SQ400", "items[0].priority"),
        ([_item(delay_seconds=-1)], "SQ400", "items[0].delay_seconds"),
        ([_item(delay_seconds=31536001)], "SQ400", "items[0].delay_seconds"),
        ([_item(delay_seconds="NaN")], "SQ400", "items[0].delay_seconds"),
        ([_item(id="not-a-uuid")], "SQ400", "items[0].id"),
        ([_item(not_before="soon")], "SQ400", "items[0].not_before"),
        ([_item(), {"queue": "ep-rules"}], "SQ400", "items[1].payload is missing"),
        ([_item(), 5], "SQ400", "items[1] must be an object"),
        ({"queue": "ep-rules", "payload": 1}, "SQ400", "JSON array"),
        ([_item()] * 1001, "SQ400", "at most 1000 items"),
    ],
)
async def test_sq_push_batch_refuses_by_the_services_rules_and_writes_nothing(
    conn: asyncpg.Connection, seen: asyncpg.Connection, items: Any, sqlstate: str, names: str
) -> None:
    before = await seen.fetchval(ROWS)
    async with conn.transaction():
        error = await _refused(conn, BATCH, json.dumps(items))
    assert error.sqlstate == sqlstate
    assert str(error).startswith("simplequeue: ")
    assert "\n" not in str(error)  # one line
    assert names in str(error)
    assert await seen.fetchval(ROWS) == before


async def test_sq_push_batch_ranks_items_by_their_fairness_keys(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue = _queue()
    big = [{"queue": queue, "payload": n, "fairness_key": "big"} for n in range(5)]
    await conn.fetch(BATCH, json.dumps(big))
    await conn.fetch(BATCH, json.dumps([{"queue": queue, "payload": "small", "fairness_key": "small"}]))
    ranked = await seen.fetch(
        "SELECT payload::text AS payload, fairness_key FROM sq_items WHERE queue = $1"
        " ORDER BY priority DESC, fair_rank, created_at, seq LIMIT 3",
        queue,
    )
    assert [(r["payload"], r["fairness_key"]) for r in ranked] == [
        ("0", "big"),
        ('"small"', "small"),
        ("1", "big"),
    ]


async def test_sq_push_pushes_a_keyed_item_that_takes_its_fair_turn(
    conn: asyncpg.Connection, seen: asyncpg.Connection, url: str
) -> None:
    queue = _queue()
    async with conn.transaction():
        for n in range(3):
            await conn.fetch(f"{PUSH}($1, $2::json, fairness_key => 'big')", queue, str(n))
        [(small, created)] = await conn.fetch(
            f"{PUSH}($1, '\"small\"'::json, fairness_key => 'small')", queue
        )
    assert created
    assert await seen.fetchval("SELECT fairness_key FROM sq_items WHERE id = $1", small) == "small"
    store = store_for(Settings(database_url=url, db_timeout_seconds=5, sweep=False))
    await store.open()
    try:
        popped = [(item.payload, item.fairness_key) for item in await store.pop(queue, 3, None)]
    finally:
        await store.close()
    assert popped == [(0, "big"), ("small", "small"), (1, "big")], "the small key's turn, not its place"


async def test_sq_push_without_a_fairness_key_is_called_as_before(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    # Every argument by place, as a call written before fairness_key was: it means the same.
    queue, item = _queue(), uuid4()
    later = await conn.fetchval("SELECT clock_timestamp() + interval '1 hour'")
    async with conn.transaction():
        [(pushed, created)] = await conn.fetch(
            f"{PUSH}($1, '1'::json, 5, 0, 'g', 'd', $2, NULL, $3)", queue, item, later
        )
    assert (pushed, created) == (item, True)
    row = await seen.fetchrow(
        "SELECT priority, group_key, dedup_key, visible_at, fairness_key FROM sq_items WHERE id = $1", item
    )
    assert tuple(row) == (5, "g", "d", later, None)


@pytest.mark.parametrize(
    "key",
    ["", "trailing ", "f" * 129, "\U0001f600" * 65],
    ids=["empty", "trailing-space", "129", "65-astral"],
)
async def test_sq_push_refuses_a_fairness_key_as_sq_push_batch_does(
    conn: asyncpg.Connection, seen: asyncpg.Connection, key: str
) -> None:
    before = await seen.fetchval(ROWS)
    async with conn.transaction():
        one = await _refused(conn, f"{PUSH}('ep-rules', '1'::json, fairness_key => $1)", key)
        batch = await _refused(conn, BATCH, json.dumps([_item(fairness_key=key)]))
    assert (one.sqlstate, str(one)) == (batch.sqlstate, str(batch))
    assert one.sqlstate == "SQ400"
    assert str(one).startswith("simplequeue: items[0].fairness_key ")
    assert await seen.fetchval(ROWS) == before


async def test_sq_push_takes_a_fairness_key_at_the_limit(conn: asyncpg.Connection) -> None:
    tx = conn.transaction()
    await tx.start()
    try:
        for key in ["f" * 128, "\U0001f600" * 64]:
            [(item, _)] = await conn.fetch(f"{PUSH}('ep-rules', '1'::json, fairness_key => $1)", key)
            assert await conn.fetchval("SELECT fairness_key FROM sq_items WHERE id = $1", item) == key
    finally:
        await tx.rollback()


async def _takes(conn: asyncpg.Connection, sql: str, *args: Any) -> bool:
    """Whether sql pushes, under a savepoint that is then rolled back."""
    await conn.execute("SAVEPOINT n")
    refused: asyncpg.PostgresError | None = None
    try:
        await conn.fetch(sql, *args)
    except asyncpg.PostgresError as exc:
        refused = exc
    await conn.execute("ROLLBACK TO SAVEPOINT n")
    # SQ400, or (for NUL, which no PostgreSQL text holds) the server's refusal of the argument.
    assert refused is None or refused.sqlstate in ("SQ400", "22021"), refused
    return refused is None


async def test_queue_names_follow_the_services_rule(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    # tests/queue_names.py's table, as every door runs it.
    before = await seen.fetchval(ROWS)
    async with conn.transaction():
        one = {name: await _takes(conn, f"{PUSH}($1, '1'::json)", name) for name in NAMES}
        batch = {
            name: await _takes(conn, BATCH, json.dumps([{"queue": name, "payload": 1}])) for name in NAMES
        }
    assert decisions(one) == {}
    assert decisions(batch) == {}
    assert await seen.fetchval(ROWS) == before


async def test_a_nul_in_the_payload_is_named_as_the_payloads(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        error = await _refused(conn, BATCH, json.dumps([_item(payload={"a": "b\x00"})]))
    assert "items[0].payload" in str(error)


async def test_sq_push_checks_its_arguments_and_postgres_refuses_invalid_json_first(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    before = await seen.fetchval(ROWS)
    nested = "[" * 64 + "]" * 64
    tx = conn.transaction()
    await tx.start()
    try:
        for sql, args, sqlstate in [
            (f"{PUSH}('ep-rules', $1::json)", ['{"a": '], "22P02"),  # the json cast, before any call
            (f"{PUSH}('ep-rules', $1::json)", ['"a\\u0000"'], "SQ400"),
            (BATCH, ['[{"queue": "ep-rules", "payload": }]'], "22P02"),
            (f"{PUSH}('ep-rules', NULL)", [], "SQ400"),
            (f"{PUSH}('bad name', '1')", [], "SQ400"),
            (f"{PUSH}('ep-rules', '1', delay_seconds => 'infinity')", [], "SQ400"),
            (f"{PUSH}('ep-rules', '1', group_key => ' ')", [], "SQ400"),
            (f"{PUSH}('ep-rules', $1::json)", ["[" * 65 + "]" * 65], "SQ400"),
            (f"{PUSH}('ep-rules', $1::json)", [json.dumps("x" * 1000)], "SQ413"),
        ]:
            assert (await _refused(conn, sql, *args)).sqlstate == sqlstate, sql
        assert await seen.fetchval(ROWS) == before
        # At the limits, not over them: 64 levels, 1000 bytes, 128 UTF-16 code units.
        await conn.fetch(f"{PUSH}('ep-rules', $1::json, dedup_key => $2)", nested, "\U0001f600" * 64)
        await conn.fetch(f"{PUSH}('ep-rules', $1::json, group_key => $2)", json.dumps("x" * 998), "g" * 128)
    finally:
        await tx.rollback()


async def test_a_late_push_in_an_old_transaction_is_not_backdated(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue = _queue()
    async with conn.transaction():
        began = await conn.fetchval("SELECT now()")
        await conn.execute("SELECT pg_sleep(0.2)")
        pushing = await conn.fetchval("SELECT clock_timestamp()")
        await conn.fetch(f"{PUSH}($1, '1'::json)", queue)
        await conn.fetch(f"{PUSH}($1, '2'::json, delay_seconds => 10)", queue)
        await conn.fetch(BATCH, json.dumps([{"queue": queue, "payload": 3}]))
    assert pushing - began >= timedelta(seconds=0.2)
    now, later, batched = await _items(seen, queue)
    for item in (now, later, batched):
        assert item["created_at"] >= pushing
    assert now["visible_at"] >= pushing
    assert batched["visible_at"] >= pushing
    assert later["visible_at"] >= pushing + timedelta(seconds=10)


async def test_the_entry_points_are_security_definers_with_a_fixed_search_path(
    conn: asyncpg.Connection,
) -> None:
    for signature in DEFINERS:
        definer, config, public = await conn.fetchrow(
            "SELECT prosecdef, proconfig, has_function_privilege('public', $1::regprocedure, 'EXECUTE')"
            " FROM pg_proc WHERE oid = $1::regprocedure",
            signature,
        )
        assert (definer, config, public) == (True, ["search_path=public, pg_temp"], False), signature
    for internal in ("sq_push_rows", "sq_checked_key"):
        assert not await conn.fetchval(
            "SELECT bool_or(has_function_privilege('public', oid, 'EXECUTE')) FROM pg_proc"
            " WHERE proname = $1",
            internal,
        )


async def test_an_execute_only_role_pushes_and_can_do_nothing_else(
    conn: asyncpg.Connection, seen: asyncpg.Connection, role: str
) -> None:
    queue = _queue()
    async with conn.transaction():
        await conn.execute(f"SET LOCAL ROLE {role}")
        assert tuple(await conn.fetchrow("SELECT * FROM sq_push_limits()")) == (
            latest_version("postgresql"),
            1000,
            64,
        )
        [(first, _)] = await conn.fetch(f"{PUSH}($1, '1'::json)", queue)
        await conn.fetch(BATCH, json.dumps([{"queue": queue, "payload": 2}]))
        for sql in [
            "SELECT * FROM sq_items",
            f"DELETE FROM sq_items WHERE id = '{first}'",
            "UPDATE sq_items SET priority = 1",
            "INSERT INTO sq_queues (name, created_at) VALUES ('mine', now())",
            "SELECT * FROM sq_settings",
            "SELECT * FROM sq_push_rows('{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', false,"
            " NULL)",
            "SELECT sq_checked_key('1', 'k')",
        ]:
            assert (await _refused(conn, sql)).sqlstate == "42501", sql
    assert [i["payload"] for i in await _items(seen, queue)] == ["1", "2"]


async def test_a_role_without_the_grant_cannot_push(conn: asyncpg.Connection) -> None:
    name = f"sq_ep_{uuid4().hex[:12]}"
    await conn.execute(f"CREATE ROLE {name} NOLOGIN; GRANT USAGE ON SCHEMA public TO {name}")
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL ROLE {name}")
            for sql in [f"{PUSH}('ep-none', '1')", f"{BATCH}", "SELECT * FROM sq_push_limits()"]:
                args = ['[{"queue": "ep-none", "payload": 1}]'] if "$1" in sql else []
                assert (await _refused(conn, sql, *args)).sqlstate == "42501", sql
    finally:
        await conn.execute(f"DROP OWNED BY {name}; DROP ROLE {name}")


async def test_a_callers_own_tables_first_in_its_search_path_are_not_used(
    conn: asyncpg.Connection, seen: asyncpg.Connection, role: str
) -> None:
    queue = _queue()
    await conn.execute(f"CREATE SCHEMA {role} AUTHORIZATION {role}")
    async with conn.transaction():
        await conn.execute(f"SET LOCAL ROLE {role}")
        await conn.execute(f"SET LOCAL search_path TO {role}, public")
        await conn.execute("CREATE TABLE sq_items (id uuid, queue text, payload json)")
        await conn.execute("CREATE TABLE sq_settings (name text PRIMARY KEY, value text NOT NULL)")
        await conn.execute("INSERT INTO sq_settings VALUES ('max_payload_bytes', '100000000')")
        # A temporary table, and a trigger on it that would run with the functions' owner's rights.
        await conn.execute("CREATE TEMP TABLE spied (who text)")
        await conn.execute("CREATE TEMP TABLE sq_queues (name text PRIMARY KEY, created_at timestamptz)")
        await conn.execute(
            "CREATE FUNCTION pg_temp.spy() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN INSERT INTO pg_temp.spied VALUES (current_user); RETURN NULL; END $$"
        )
        await conn.execute("CREATE TRIGGER spy AFTER INSERT ON sq_queues EXECUTE FUNCTION pg_temp.spy()")
        await conn.execute(f"SET LOCAL search_path TO pg_temp, {role}, public")
        [(item, _)] = await conn.fetch(f"{PUSH}($1, '1'::json)", queue)
        too_large = await _refused(conn, f"{PUSH}($1, $2::json)", queue, json.dumps("x" * 2000))
        assert too_large.sqlstate == "SQ413"  # the limit of the real sq_settings
        assert await conn.fetchval(f"SELECT count(*) FROM {role}.sq_items") == 0
        assert await conn.fetchval("SELECT count(*) FROM pg_temp.sq_queues") == 0
        assert await conn.fetchval("SELECT count(*) FROM spied") == 0
    assert [i["id"] for i in await _items(seen, queue)] == [item]
    assert await seen.fetchval("SELECT count(*) FROM sq_queues WHERE name = $1", queue) == 1


async def test_a_listener_is_notified_at_the_commit_not_before(
    conn: asyncpg.Connection, seen: asyncpg.Connection
) -> None:
    queue = _queue()
    heard: asyncio.Queue[str] = asyncio.Queue()
    await seen.add_listener("simplequeue_ready", lambda *args: heard.put_nowait(args[3]))
    # A replica's long-poll waits on the queue (its probe lists it): only such queues are notified.
    await seen.execute("INSERT INTO sq_waited VALUES ($1, now() + interval '1 minute')", queue)
    async with conn.transaction():
        await conn.fetch(f"{PUSH}($1, '1'::json)", queue)
        await conn.fetch(BATCH, json.dumps([{"queue": queue, "payload": 2}, {"queue": queue, "payload": 3}]))
        await asyncio.sleep(0.3)
        assert heard.empty()
    messages = [json.loads(await asyncio.wait_for(heard.get(), timeout=5))]
    await asyncio.sleep(0.1)
    while not heard.empty():
        messages.append(json.loads(heard.get_nowait()))
    # The queue's token, not its name (0010): what LISTEN hears names no queue.
    assert {m["q"] for m in messages} == {await seen.fetchval("SELECT sq_ready_token($1)", queue)}
    assert sum(m["n"] for m in messages) == 3


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_migrate_print_run_by_psql_fixes_the_search_path_too() -> None:
    with postgres_database() as url:
        env = os.environ | {"SIMPLEQUEUE_DATABASE_URL": url}
        migrate = [sys.executable, "-m", "simplequeue", "migrate", "--print"]
        script = subprocess.run(migrate, env=env, capture_output=True, text=True, check=True).stdout
        psql = ["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"]
        script += "SELECT proconfig FROM pg_proc WHERE proname = 'sq_push';\n"
        config = subprocess.run(psql, input=script, capture_output=True, text=True, check=True).stdout
    assert config.strip().splitlines()[-1] == '{"search_path=public, pg_temp"}'
