"""The pop must stay index-backed whatever the table holds: dead rows, or statistics that lag
behind (a queue table's size swings faster than autovacuum analyses it)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from simplequeue.store.migrations import load_migrations, load_routines
from simplequeue.store.postgres.statements import Q
from simplequeue.store.postgres.store import PLANNER_SETTINGS

from tests.explain import literal, plan_nodes


@pytest.fixture
async def schema(postgres_url: str) -> AsyncIterator[tuple[str, str]]:
    """A fresh schema whose tables were never analysed: the dangerous case."""
    name = f"plans_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(postgres_url, server_settings={"search_path": name})
    await conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        for migration in load_migrations("postgresql"):
            await conn.execute(migration.sql)
        await conn.execute(load_routines("postgresql") or "")
        yield postgres_url, name
    finally:
        await conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        await conn.close()


async def plan_of(schema: tuple[str, str], settings: dict[str, str], query: str, **values: object) -> str:
    """The plan of the store's named query, bound as the store binds it."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name, **settings})
    try:
        rows = await conn.fetch("EXPLAIN (FORMAT JSON) " + Q[query].sql, *Q[query].bind(**values))
        return json.dumps(json.loads(rows[0][0]))
    finally:
        await conn.close()


async def fill(
    schema: tuple[str, str], queue: str, status: str, count: int, *, grouped: bool = False
) -> None:
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    token = "gen_random_uuid()" if status == "leased" else "NULL"
    died = "now()" if status == "dead" else "NULL"
    group = "'g' || (n % 50)" if grouped else "NULL"
    try:
        await conn.execute(
            "INSERT INTO sq_queues (name, created_at) VALUES ($1, now()) ON CONFLICT DO NOTHING", queue
        )
        await conn.execute(
            "INSERT INTO sq_items (id, queue, payload, created_at, status, visible_at, lease_token, died_at,"
            " group_key)"
            f" SELECT gen_random_uuid(), $1, '1', now(), $2, now(), {token}, {died}, {group}"
            " FROM generate_series(1, $3) AS n",
            queue,
            status,
            count,
        )
    finally:
        await conn.close()


async def pop_plan(schema: tuple[str, str], settings: dict[str, str]) -> str:
    return await plan_of(
        schema,
        settings,
        "pop",
        queue="q",
        now=None,
        max_items=1,
        lease_token=uuid.uuid4(),
        lease_seconds=30,
        limits_checked=False,
    )


def assert_claims_by_its_indexes(plan: str) -> None:
    """The claim of pop and complete_and_pop: ready items along sq_items_ready in pop order (no sort,
    so the walk stops after the items it takes), leases that ran out from sq_items_lapsed by a range
    cut off at now, and the two merged. Sorts are allowed only over those expired leases, and over the
    merge of the two walks, each cut to :max_items by its Limit; never over a queue's items."""
    nodes = list(plan_nodes(json.loads(plan)[0]["Plan"]))
    scans = [n for n in nodes if n.get("Relation Name") == "sq_items" and "Scan" in n["Node Type"]]
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], plan
    [ready] = [n for n in scans if n.get("Index Name") == "sq_items_ready"]
    # The queue's range; the retention cutoff, when the planner takes it as an index qual, only
    # filters within that range, in order (no sort above the walk, checked below).
    assert ready["Index Cond"].startswith(("(queue = ", "((queue = ")), plan
    [lapsed] = [n for n in nodes if n.get("Index Name") == "sq_items_lapsed"]  # an index or bitmap scan
    assert "visible_at <= " in lapsed["Index Cond"], plan  # only the leases that ran out are read
    assert set(sq_items_indexes(nodes)) <= {
        "sq_items_ready",
        "sq_items_lapsed",
        "sq_items_group",  # a candidate's group probe
        "sq_items_pkey",  # the UPDATE finds its rows by key
        "sq_items_id_key",  # complete_and_pop's completion
    }, plan
    for sort in (n for n in nodes if n["Node Type"] == "Sort"):
        [below] = sort["Plans"]
        if below["Node Type"] == "Append":  # the merge: each member is one walk, cut by its Limit
            assert all(m["Plans"][0]["Node Type"] == "Limit" for m in below["Plans"]), plan
        else:  # the expired leases, and nothing else of sq_items
            assert set(sq_items_indexes(plan_nodes(sort))) <= {"sq_items_lapsed", "sq_items_group"}, plan
            assert not [n for n in plan_nodes(sort) if n["Node Type"] == "Seq Scan"], plan


def sq_items_indexes(nodes: Iterable[dict[str, Any]]) -> list[str]:
    """The indexes of sq_items that these plan nodes read (index, index-only and bitmap scans)."""
    return [str(n["Index Name"]) for n in nodes if str(n.get("Index Name")).startswith("sq_items_")]


async def test_pop_walks_its_index_in_order_even_with_stale_statistics(schema: tuple[str, str]) -> None:
    await fill(schema, "q", "dead", 1_000)
    await fill(schema, "q", "ready", 60_000)

    # The hazard these settings exist for: with v1's pop, left alone, the planner sorted every ready
    # row here. v2's pop (more filters, a priority column) happens to plan well either way on
    # PostgreSQL 15; the setting stays as the guard, and this test holds the plan we depend on.
    plan = await pop_plan(schema, PLANNER_SETTINGS)
    assert_claims_by_its_indexes(plan)  # the claim walks the ready index in order
    assert '"Node Type": "Seq Scan"' not in plan, plan  # and the update finds its rows by key


async def test_pop_ignores_many_dead_rows(schema: tuple[str, str]) -> None:
    await fill(schema, "q", "dead", 200_000)
    await fill(schema, "q", "ready", 100)
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    await conn.execute("ANALYZE sq_items")
    await conn.close()

    plan = await pop_plan(schema, PLANNER_SETTINGS)
    assert_claims_by_its_indexes(plan)
    assert '"Node Type": "Seq Scan"' not in plan, plan


async def test_a_fair_queues_pop_walks_the_same_index_in_rank_order(schema: tuple[str, str]) -> None:
    await fill(schema, "q", "ready", 30_000)
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    # A noisy tenant's long run of ranks, and 50 quiet tenants' few, as pushes with keys leave them.
    await conn.execute(
        "UPDATE sq_items SET fair_rank = seq % 5000,"
        " fairness_key = CASE WHEN seq % 100 = 0 THEN 'quiet-' || (seq % 50) ELSE 'noisy' END"
    )
    await conn.execute("ANALYZE sq_items")
    await conn.close()

    plan = await pop_plan(schema, PLANNER_SETTINGS)
    assert_claims_by_its_indexes(plan)  # in (rank_priority, fair_rank, created_at, seq) order: no sort
    assert '"Node Type": "Seq Scan"' not in plan, plan


async def test_an_aging_queues_pop_walks_the_same_index_in_rank_order(schema: tuple[str, str]) -> None:
    await fill(schema, "q", "ready", 30_000)
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    # Ranks as a queue with aging of a minute leaves them: priorities less the minutes to created_at.
    await conn.execute("UPDATE sq_queues SET priority_aging_seconds = 60 WHERE name = 'q'")
    await conn.execute(
        "UPDATE sq_items SET priority = seq % 4, created_at = now() - (seq % 3000) * interval '1 second'"
    )
    await conn.execute("UPDATE sq_items SET rank_priority = sq_rank_priority(priority, created_at, 60)")
    await conn.execute("ANALYZE sq_items")
    await conn.close()

    plan = await pop_plan(schema, PLANNER_SETTINGS)
    assert_claims_by_its_indexes(plan)  # in (rank_priority, fair_rank, created_at, seq) order: no sort
    assert '"Node Type": "Seq Scan"' not in plan, plan


async def test_probe_seeks_its_own_index(schema: tuple[str, str]) -> None:
    await fill(schema, "q", "leased", 5_000)
    plan = await plan_of(schema, PLANNER_SETTINGS, "next_visible_at", queues=["q"], now=None)
    assert '"Index Name": "sq_items_visible"' in plan, plan


async def test_group_probe_seeks_the_group_index(schema: tuple[str, str]) -> None:
    await fill(schema, "q", "ready", 20_000, grouped=True)
    plan = await pop_plan(schema, PLANNER_SETTINGS)
    assert_claims_by_its_indexes(plan)
    assert '"Index Name": "sq_items_group"' in plan, plan  # head-of-group: one seek per candidate
    assert '"Node Type": "Seq Scan"' not in plan, plan


async def test_sweep_and_completion_stay_on_their_indexes(schema: tuple[str, str]) -> None:
    await fill(schema, "q", "ready", 20_000)
    await fill(schema, "q", "leased", 2_000)
    reap = await plan_of(schema, PLANNER_SETTINGS, "reap", now=None, limit=1000, error="x")
    assert '"Index Name": "sq_items_leased"' in reap, reap
    complete = await plan_of(
        schema, PLANNER_SETTINGS, "complete_batch", ids=[uuid.uuid4()], lease_tokens=[None], now=None
    )
    assert '"Node Type": "Seq Scan"' not in complete.replace('"Relation Name": "sq_queues"', ""), complete


async def test_expiry_reaches_items_by_index_only(schema: tuple[str, str]) -> None:
    # Many queues' items; the one that keeps a retention period holds a few of them.
    await fill(schema, "q", "ready", 2_000)
    for n in range(20):
        await fill(schema, f"other-{n}", "ready", 5_000)
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    await conn.execute("UPDATE sq_queues SET message_retention_seconds = 60 WHERE name = 'q'")
    await conn.execute("UPDATE sq_items SET created_at = created_at - interval '1 hour' WHERE queue = 'q'")
    await conn.execute("ANALYZE")
    await conn.close()
    for text in (
        await plan_of(schema, PLANNER_SETTINGS, "expire_retained", now=None, limit=1000),
        await generic_plan_of(schema, "expire_retained", now=None, limit=1000),
    ):
        nodes = list(plan_nodes(json.loads(text)[0]["Plan"]))
        scanned = {n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}
        assert "sq_items" not in scanned, text  # only the small table of queues is read whole
        live = [n for n in nodes if n.get("Index Name") == "sq_items_visible"]
        assert any("queue = q.name" in n.get("Index Cond", "") for n in live), text  # a queue's range


# Generic plans: pooled sessions plan each hot statement once (PLANNER_SETTINGS), without the
# values, so these plans must find rows by index whatever the values turn out to be.


async def generic_plan_of(schema: tuple[str, str], query: str, **values: object) -> str:
    """The plan a pooled session reuses for the named query: prepared once, planned without values."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name, **PLANNER_SETTINGS})
    try:
        assert PLANNER_SETTINGS["plan_cache_mode"] == "force_generic_plan"
        await conn.execute(f"PREPARE hot AS {Q[query].sql}")
        arguments = ", ".join(literal(v) for v in Q[query].bind(**values))
        rows = await conn.fetch(f"EXPLAIN (FORMAT JSON) EXECUTE hot({arguments})")
        return json.dumps(json.loads(rows[0][0]))
    finally:
        await conn.close()


async def crowd(schema: tuple[str, str]) -> None:
    """Thousands of queues, a hundred thousand items, finished records, dedup keys, producers'
    remembered ids, and queue settings (as the SQS door sets them, dead-letter targets among them)."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    try:
        await conn.execute(
            "INSERT INTO sq_queues (name, created_at)"
            " SELECT 'q' || n, now() FROM generate_series(1, 2000) AS n"
        )
        await conn.execute(
            "INSERT INTO sq_items"
            " (id, queue, payload, created_at, visible_at, status, lease_token, dedup_key)"
            " SELECT gen_random_uuid(), 'q' || (n % 50), '1', now(), now() + interval '1 minute',"
            "  CASE WHEN n % 3 = 0 THEN 'leased' ELSE 'ready' END,"
            "  CASE WHEN n % 3 = 0 THEN gen_random_uuid() END, 'k' || n"
            " FROM generate_series(1, 100000) AS n"
        )
        await conn.execute(
            "INSERT INTO sq_history (id, queue, outcome, attempts, created_at, finished_at)"
            " SELECT gen_random_uuid(), 'q' || (n % 50), 'completed', 1, now(), now()"
            " FROM generate_series(1, 100000) AS n"
        )
        await conn.execute(
            "INSERT INTO sq_dedup (queue, dedup_key, item_id, created_at)"
            " SELECT 'q' || (n % 50), 'k' || n, gen_random_uuid(), now() FROM generate_series(1, 100000) AS n"
        )
        await conn.execute(  # producers' ids: half of them remembered after their items finished
            "INSERT INTO sq_client_ids (id, queue, created_at, expires_at)"
            " SELECT gen_random_uuid(), 'q' || (n % 50), now(),"
            "  CASE WHEN n % 2 = 0 THEN now() + interval '1 hour' END"
            " FROM generate_series(1, 100000) AS n"
        )
        await conn.execute(  # a retention period on every queue, a dead-letter target on every tenth
            "UPDATE sq_queues SET message_retention_seconds = 345600,"
            " dead_letter_queue = CASE WHEN substr(name, 2)::int % 10 = 0"
            "  THEN 'q' || (substr(name, 2)::int + 1) END"
        )
    finally:
        await conn.close()


async def analyze(schema: tuple[str, str]) -> None:
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    await conn.execute("ANALYZE")
    await conn.close()


HOT_STATEMENTS: dict[str, dict[str, object]] = {
    "pop": {
        "queue": "q1",
        "now": None,
        "max_items": 1,
        "lease_token": uuid.uuid4(),
        "lease_seconds": None,
        "limits_checked": False,
    },
    "complete_batch": {"ids": [uuid.uuid4()], "lease_tokens": [uuid.uuid4()], "now": None},
    "complete_and_pop": {
        "ids": [uuid.uuid4()],
        "lease_tokens": [uuid.uuid4()],
        "queue": "q1",
        "now": None,
        "max_items": 1,
        "lease_token": uuid.uuid4(),
        "lease_seconds": None,
        "limits_checked": False,
    },
    "fail": {
        "id": uuid.uuid4(),
        "lease_token": uuid.uuid4(),
        "retry": True,
        "retry_after": None,
        "now": None,
        "error": "x",
        "draw": 0.5,
    },
    "extend": {"id": uuid.uuid4(), "lease_token": uuid.uuid4(), "lease_seconds": 30, "now": None},
    "get_item": {"id": uuid.uuid4(), "now": None},
    "next_visible_at": {"queues": ["q1"], "now": None},
}


def _seq_scans(plan: str, *, but_of: set[str]) -> list[str]:
    """The tables a JSON plan reads whole, but those named: sq_waited holds a row per queue that
    long-polls wait on (a dead-letter move's NOTIFY reads it), a handful, which a scan reads best."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("Node Type") == "Seq Scan" and node.get("Relation Name") not in but_of:
                found.append(str(node.get("Relation Name")))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(plan))
    return found


@pytest.mark.parametrize("statistics", ["stale", "analysed"])
async def test_generic_plans_of_the_hot_statements_use_indexes_at_scale(
    schema: tuple[str, str], statistics: str
) -> None:
    await crowd(schema)
    if statistics == "analysed":
        await analyze(schema)
    for query, values in HOT_STATEMENTS.items():
        plan = await generic_plan_of(schema, query, **values)
        assert not _seq_scans(plan, but_of={"sq_waited"}), (query, plan)
        if query in ("pop", "complete_and_pop"):
            assert_claims_by_its_indexes(plan)  # its sorts: the expired leases and the merge only
        else:
            assert '"Node Type": "Sort"' not in plan, (query, plan)
        if query in ("fail", "extend", "get_item", "complete_batch", "complete_and_pop"):
            # one item, found by its id: not a walk over a queue's or every lease's rows
            assert '"Index Name": "sq_items_id_key"' in plan, (query, plan)
            assert '"Index Name": "sq_items_leased"' not in plan, (query, plan)


@pytest.mark.parametrize("statistics", ["stale", "analysed"])
@pytest.mark.parametrize("query", ["pop", "complete_and_pop"])
async def test_the_claim_walks_ready_items_and_reads_only_the_leases_that_ran_out(
    schema: tuple[str, str], statistics: str, query: str
) -> None:
    await crowd(schema)  # 2,000 queues, 100,000 items, a third of them leased
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    try:
        # q1 as a busy queue finds it: ready items behind many leases in flight (older, and of
        # higher priority, so ahead of them in pop order), and a few leases that ran out.
        await conn.execute(
            "UPDATE sq_items SET visible_at = now() - interval '1 minute' WHERE status = 'ready'"
        )
        await conn.execute(
            "INSERT INTO sq_items (id, queue, payload, created_at, visible_at, status, lease_token, attempts,"
            " priority)"
            " SELECT gen_random_uuid(), 'q1', '1'::json, now() - interval '1 hour',"
            "  now() + interval '1 minute',"
            "  'leased', gen_random_uuid(), 1, 5 FROM generate_series(1, 20000)"
            " UNION ALL"
            " SELECT gen_random_uuid(), 'q1', '1'::json, now() - interval '1 hour',"
            "  now() - interval '1 second',"
            "  'leased', gen_random_uuid(), 1, 0 FROM generate_series(1, 5)"
        )
    finally:
        await conn.close()
    if statistics == "analysed":
        await analyze(schema)
    values = {**HOT_STATEMENTS[query], "max_items": 10}
    assert_claims_by_its_indexes(await generic_plan_of(schema, query, **values))
    nodes = await executed_generic_plan(schema, query, **values)
    scans = {n["Index Name"]: n for n in nodes if "Index Name" in n}
    # The walk reads the ten it takes and passes over nothing (the leases in flight ahead of them
    # are in no index it reads); the five expired leases come first in pop order (older) and are
    # all read, and sorted, alone.
    assert scans["sq_items_ready"]["Actual Rows"] == 10, nodes
    assert scans["sq_items_ready"].get("Rows Removed by Filter", 0) == 0, nodes
    assert scans["sq_items_lapsed"]["Actual Rows"] == 5, nodes
    [claimed] = [
        n
        for n in nodes
        if n["Node Type"] == "ModifyTable" and n["Operation"] == "Update" and n["Relation Name"] == "sq_items"
    ]
    assert claimed["Actual Rows"] == 10, nodes  # five expired leases and the five oldest ready items


async def test_pooled_sessions_reuse_hot_plans_and_plan_filtered_reads_for_their_values(
    postgres_url: str,
) -> None:
    from simplequeue.domain import HistoryFilter
    from simplequeue.store.postgres.store import PostgresStore

    store = PostgresStore(postgres_url, pool_size=1)  # one session, so its statements are all here
    await store.open()
    try:
        await store.migrate()
        for _ in range(3):
            await store.pop("plans", 1, None)
            await store.list_history("plans", HistoryFilter(), 10, None)
        async with store._conn() as conn:
            counts = {
                ("pop" if "SKIP LOCKED" in r["statement"] else "history"): (
                    r["generic_plans"],
                    r["custom_plans"],
                )
                for r in await conn.fetch(
                    "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
                    " WHERE (statement LIKE '%FOR UPDATE SKIP LOCKED%' OR statement LIKE '%FROM sq_history%')"
                    " AND statement NOT LIKE '%pg_prepared_statements%'"
                )
            }
    finally:
        await store.close()
    assert counts["pop"] == (3, 0), counts
    assert counts["history"] == (0, 3), counts


async def executed_generic_plan(
    schema: tuple[str, str], query: str, **values: object
) -> list[dict[str, object]]:
    """Every node of the generic plan as it ran (EXPLAIN ANALYZE, rolled back afterwards)."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name, **PLANNER_SETTINGS})
    transaction = conn.transaction()
    try:
        await conn.execute(f"PREPARE hot AS {Q[query].sql}")
        arguments = ", ".join(literal(v) for v in Q[query].bind(**values))
        await transaction.start()
        rows = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE hot({arguments})")
        [plan] = json.loads(rows[0][0])
        return list(plan_nodes(plan["Plan"]))
    finally:
        await transaction.rollback()
        await conn.close()


def reads_of(nodes: list[dict[str, object]], relation: str) -> int:
    """How many times the statement looked rows up in `relation` (scans times their loops)."""
    return sum(
        int(str(n["Actual Loops"]))
        for n in nodes
        if n.get("Relation Name") == relation and "Scan" in str(n["Node Type"])
    )


@pytest.mark.parametrize("query", ["complete_batch", "complete_and_pop"])
async def test_a_completion_reads_its_queue_once_and_sq_dedup_or_sq_client_ids_only_when_it_must(
    schema: tuple[str, str], query: str
) -> None:
    await crowd(schema)  # 2,000 queues, 100,000 items (a third leased, each with a dedup key)
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    try:
        plain, keyed, given = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        await conn.execute(
            "INSERT INTO sq_items (id, queue, payload, created_at, visible_at, dedup_key, remember_id)"
            " VALUES ($1, 'q7', '1', now(), now(), NULL, false),"
            " ($2, 'q7', '1', now(), now(), 'mine', false), ($3, 'q7', '1', now(), now(), NULL, true)",
            plain,
            keyed,
            given,
        )
        await conn.execute(
            "INSERT INTO sq_dedup (queue, dedup_key, item_id, created_at) VALUES ('q7', 'mine', $1, now())",
            keyed,
        )
        await conn.execute(
            "INSERT INTO sq_client_ids (id, queue, created_at) VALUES ($1, 'q7', now())", given
        )
    finally:
        await conn.close()
    extra = {
        "queue": "q1",
        "max_items": 1,
        "lease_token": uuid.uuid4(),
        "lease_seconds": None,
        "limits_checked": False,
    }
    for item, has_key, remembered in ((plain, False, False), (keyed, True, False), (given, False, True)):
        values = {
            "ids": [item],
            "lease_tokens": [None],
            "now": None,
            **(extra if query == "complete_and_pop" else {}),
        }
        nodes = await executed_generic_plan(schema, query, **values)
        [done] = [n for n in nodes if n.get("Subplan Name") == "CTE done"]
        assert done["Actual Rows"] == 1, nodes  # completed
        # The queue's row once for the completion (complete_and_pop's pop reads its own queue's in its
        # walks: whether it is paused, and its retention cutoff, each a key lookup computed once).
        assert reads_of(nodes, "sq_queues") == (1 if query == "complete_batch" else 4), nodes
        [windows] = [n for n in nodes if n.get("Subplan Name") == "CTE windows"]
        probes = [
            n
            for n in plan_nodes(windows)
            if n.get("Relation Name") == "sq_dedup" and "Scan" in str(n["Node Type"])
        ]
        assert sum(int(str(n["Actual Loops"])) for n in probes) == (1 if has_key else 0), windows
        # A producer's id: its claim is sought (its window starts) only for an item that has one.
        [ids] = [n for n in nodes if n.get("Subplan Name") == "CTE ids"]
        claims = [
            n
            for n in plan_nodes(ids)
            if n.get("Relation Name") == "sq_client_ids" and "Scan" in str(n["Node Type"])
        ]
        assert all(n["Node Type"] == "Index Scan" for n in claims), ids
        assert sum(int(str(n["Actual Loops"])) for n in claims) == (1 if remembered else 0), ids


async def nested_plans_of(schema: tuple[str, str], query: str, **values: object) -> list[dict[str, Any]]:
    """The plans of the statements a function runs, as a pooled session runs them (generic plans
    reused): auto_explain, told to explain nested statements, hands each one to the client."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name, **PLANNER_SETTINGS})
    found: list[dict[str, Any]] = []
    # Each message reads "duration: 0.052 ms  plan:" and the plan's JSON.
    conn.add_log_listener(lambda _, message: found.append(json.loads(message.message.split("plan:", 1)[1])))
    try:
        await conn.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;"
            " SET auto_explain.log_nested_statements = on; SET auto_explain.log_format = json;"
            " SET auto_explain.log_level = notice; SET client_min_messages = notice"
        )
        await conn.fetch(Q[query].sql, *Q[query].bind(**values))
        return [plan for plan in found if plan["Query Text"] != Q[query].sql]
    finally:
        await conn.close()


@pytest.mark.parametrize("statistics", ["stale", "analysed"])
async def test_a_push_claims_producers_ids_by_seeks_not_scans(
    schema: tuple[str, str], statistics: str
) -> None:
    """The push (sq_push_rows) claims producers' ids and, for a retry, finds what holds them, by key
    in sq_items and sq_client_ids, however many items and remembered ids there are."""
    await crowd(schema)
    if statistics == "analysed":
        await analyze(schema)
    ids = [uuid.uuid4(), uuid.uuid4()]
    push = {
        "ids": ids,
        "queues": ["q1", "q1"],
        "payloads": ["1", "2"],
        "created_ats": [datetime.now(UTC)] * 2,
        "now": None,
        "priorities": [0, 0],
        "groups": [None, None],
        "dedup_keys": [None, None],
        "delays": [0.0, 0.0],
        "not_befores": [None, None],
        "remember": [True, True],
        "skip_existing": False,
        "attributes": [None, None],
    }
    await nested_plans_of(schema, "push", **push)
    # The retry: nothing goes in, and each answer comes from what holds the id.
    plans = await nested_plans_of(schema, "push", **push)
    claim = [p for p in plans if "INSERT INTO sq_client_ids" in p["Query Text"]]
    answers = [p for p in plans if "FROM sq_client_ids AS k" in p["Query Text"]]
    assert len(claim) == 1, [p["Query Text"][:60] for p in plans]
    assert len(answers) == 1, [p["Query Text"][:60] for p in plans]
    for plan, relations in ((claim[0], ("sq_items",)), (answers[0], ("sq_items", "sq_client_ids"))):
        nodes = list(plan_nodes(plan["Plan"]))
        scans = [n for n in nodes if "Scan" in str(n["Node Type"])]
        for relation in relations:
            looked_up = [n for n in scans if n.get("Relation Name") == relation]
            assert looked_up, (relation, plan)
            assert all(n["Node Type"] != "Seq Scan" for n in looked_up), (relation, plan)
    # The claims go through sq_client_ids' primary key (ON CONFLICT's arbiter).
    [claims] = [n for n in plan_nodes(claim[0]["Plan"]) if n.get("Subplan Name") == "CTE claimed"]
    assert claims["Conflict Arbiter Indexes"] == ["sq_client_ids_pkey"], claims


async def test_activity_reads_index_ranges_from_its_window_at_a_million_history_rows(
    schema: tuple[str, str],
) -> None:
    """The dashboard's activity counts: a week of history (a million records over 20 queues), a
    hundred thousand live and dead items; the last hour's counts read ranges of sq_history_queue,
    sq_items_visible and sq_items_dead from the window's start, in the plan a pooled session reuses,
    for one queue and for every queue, and touch only the window's rows."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    try:
        await conn.execute(
            "INSERT INTO sq_queues (name, created_at) SELECT 'q' || n, now() FROM generate_series(0, 19) AS n"
        )
        await conn.execute(  # one record every 0.6 s over the week before now
            "INSERT INTO sq_history (id, queue, outcome, attempts, created_at, finished_at)"
            " SELECT gen_random_uuid(), 'q' || (n % 20),"
            "  CASE WHEN n % 100 = 0 THEN 'dead' ELSE 'completed' END, 1,"
            "  now() - n * interval '600 milliseconds' - interval '2 seconds',"
            "  now() - n * interval '600 milliseconds'"
            " FROM generate_series(1, 1000000) AS n"
        )
        await conn.execute(
            "INSERT INTO sq_items"
            " (id, queue, payload, created_at, visible_at, status, died_at, attempts, errors)"
            " SELECT gen_random_uuid(), 'q' || (n % 20), '1', now() - n * interval '1 second',"
            "  now() - n * interval '1 second', CASE WHEN n % 10 = 0 THEN 'dead' ELSE 'ready' END,"
            "  CASE WHEN n % 10 = 0 THEN now() - n * interval '1 second' END, n % 2,"
            "  CASE WHEN n % 2 = 1 THEN jsonb_build_array(jsonb_build_object('at', now(), 'error', 'x'))"
            "   ELSE '[]' END"
            " FROM generate_series(1, 100000) AS n"
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()

    now = datetime.now(UTC)
    since = now.replace(second=0, microsecond=0) - timedelta(hours=1)
    for queue in ("q7", None):
        values = {
            "queue": queue,
            "since": since,
            "until": now + timedelta(minutes=1),
            "bucket": 60,
            "limit": 61,
        }
        nodes = await executed_generic_plan(schema, "activity", **values)
        tables = [n for n in nodes if n.get("Relation Name") in ("sq_history", "sq_items")]
        assert tables
        assert all("Seq Scan" not in str(n["Node Type"]) for n in tables), tables
        ranges = [n for n in nodes if "Index Name" in n]
        assert {n["Index Name"] for n in ranges} >= {"sq_history_queue", "sq_items_visible", "sq_items_dead"}
        for scan in ranges:
            # A range from the window's start, for the named queues (one range per queue).
            assert "queue = ANY" in str(scan["Index Cond"]), scan
            assert ">= $" in str(scan["Index Cond"]), scan
        # An hour of a week's history is 6,000 records of every queue: the index ranges hand out that
        # many rows, not a million.
        read = sum(int(str(n["Actual Rows"])) * int(str(n["Actual Loops"])) for n in ranges)
        assert read < 25_000, ranges


@pytest.mark.parametrize("statistics", ["stale", "analysed"])
async def test_finding_a_groups_items_or_a_dedup_keys_item_seeks_their_indexes(
    schema: tuple[str, str], statistics: str
) -> None:
    # The dashboard's search, as a pooled session plans it (generic: planned without the values):
    # a group's page is a range of sq_items_group in its order, the first page and the next alike;
    # a dedup key is one seek of sq_dedup's key, then its item by id. Never a walk of the queue.
    await crowd(schema)  # 100,000 items, each with a dedup key
    await fill(schema, "q1", "ready", 20_000, grouped=True)  # 50 groups of 400
    await fill(schema, "q1", "dead", 20_000, grouped=True)
    if statistics == "analysed":
        await analyze(schema)
    for after_seq in (None, 5_000):
        values = {"queue": "q1", "group": "g7", "after_seq": after_seq, "now": None, "limit": 100}
        plan = await generic_plan_of(schema, "group_items", **values)
        assert '"Index Name": "sq_items_group"' in plan, plan
        assert '"Node Type": "Sort"' not in plan, plan
        assert '"Node Type": "Seq Scan"' not in plan.replace('"Relation Name": "sq_queues"', ""), plan
        [walk] = [
            n for n in plan_nodes(json.loads(plan)[0]["Plan"]) if n.get("Index Name") == "sq_items_group"
        ]
        assert "seq >" in str(walk["Index Cond"]), (
            plan
        )  # the cursor bounds the range: no filter over the group
    found = await generic_plan_of(schema, "dedup_item", queue="q7", dedup_key="k7", now=None)
    assert '"Index Name": "sq_dedup_pkey"' in found, found
    assert '"Index Name": "sq_items_id_key"' in found, found
    assert '"Node Type": "Seq Scan"' not in found.replace('"Relation Name": "sq_queues"', ""), found


async def test_a_page_of_queues_walks_the_name_key_from_its_cursor(schema: tuple[str, str]) -> None:
    # As the store runs it (custom-planned for its values, sorts off): the cursor bounds a walk of
    # sq_queues_pkey in name order, cut by the page's Limit; no sort of every queue, so a page
    # costs its own queues' counts whatever sq_queues holds.
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    try:
        await conn.execute(
            "INSERT INTO sq_queues (name, created_at)"
            " SELECT 'q' || lpad(n::text, 5, '0'), now() FROM generate_series(1, 20000) AS n"
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    settings = {**PLANNER_SETTINGS, "plan_cache_mode": "force_custom_plan"}
    for after in (None, "q10000"):
        plan = await plan_of(schema, settings, "queue_page", now=None, after=after, prefix=None, limit=10)
        nodes = list(plan_nodes(json.loads(plan)[0]["Plan"]))
        assert nodes[0]["Node Type"] == "Limit", plan
        [walk] = [n for n in nodes if n.get("Relation Name") == "sq_queues"]
        assert (walk["Node Type"], walk["Index Name"]) == ("Index Scan", "sq_queues_pkey"), plan
        assert walk["Index Cond"].startswith("(name > "), plan
        assert "Sort" not in [n["Node Type"] for n in nodes], plan


async def fill_schedules(schema: tuple[str, str], count: int, at: datetime) -> None:
    """`count` schedules, every one due at `at` (a minute's slot that 10,000 schedules share)."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    try:
        await conn.execute(
            "INSERT INTO sq_schedules (name, queue, payload, every_seconds, overlap, created_at, "
            "next_run_at, last_item_id) SELECT 's' || n, 'q', '1', 60, 'skip', $1, $1, gen_random_uuid() "
            "FROM generate_series(1, $2) AS n",
            at,
            count,
        )
    finally:
        await conn.close()


@pytest.mark.parametrize("statistics", ["stale", "analysed"])
async def test_a_schedulers_wake_and_a_firings_claims_seek_their_index(
    schema: tuple[str, str], statistics: str
) -> None:
    at = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    await fill(schema, "q", "ready", 20_000)
    await fill_schedules(schema, 10_000, at)
    if statistics == "analysed":
        await analyze(schema)
    due = await plan_of(schema, PLANNER_SETTINGS, "schedules_due", now=at, limit=100)
    assert '"Index Name": "sq_schedules_due"' in due, due
    assert '"Node Type": "Seq Scan"' not in due, due  # the previous items: by id, never a scan
    claim = await plan_of(
        schema,
        PLANNER_SETTINGS,
        "schedule_claim",
        name="s7",
        claimed=at,
        following=at + timedelta(minutes=1),
        last_run_at=at,
        last_item_id=uuid.uuid4(),
    )
    assert '"Node Type": "Seq Scan"' not in claim, claim
    nodes = plan_nodes(json.loads(claim)[0]["Plan"])
    [scan] = [n for n in nodes if n.get("Relation Name") == "sq_schedules" and "Scan" in n["Node Type"]]
    assert "name" in scan.get("Index Cond", ""), claim  # one row, not the 10,000 that share the slot
    nearest = await plan_of(schema, PLANNER_SETTINGS, "schedules_next")
    assert '"Index Name": "sq_schedules_due"' in nearest, nearest  # the index's first entry
    locked = await plan_of(schema, PLANNER_SETTINGS, "schedules_due_locked", now=at, limit=500)
    assert '"Index Name": "sq_schedules_due"' in locked, locked
    assert '"Node Type": "Seq Scan"' not in locked, locked


KEYED_STATEMENTS: dict[str, dict[str, object]] = {
    "lock_keys": {"queue": "q1", "now": None, "walk": 200, "max_keys": 50},
    "key_items": {
        "queue": "q1",
        "now": None,
        "take": 50,
        "keys": ["a", ""],
        "caps": [2, None],
        "tokens": [None, 3],
    },
    "lease_keyed": {
        "queue": "q1",
        "now": None,
        "seqs": [1, 2],
        "lease_token": uuid.uuid4(),
        "lease_seconds": None,
    },
}


@pytest.mark.parametrize("statistics", ["stale", "analysed"])
async def test_the_keyed_pops_statements_read_items_by_index_at_scale(
    schema: tuple[str, str], statistics: str
) -> None:
    """A queue limited per key: its walk, its keys' leases and items, and its lease read sq_items by
    index, never a scan of the table, whatever it holds."""
    await crowd(schema)
    if statistics == "analysed":
        await analyze(schema)
    for query, values in KEYED_STATEMENTS.items():
        plan = await generic_plan_of(schema, query, **values)
        assert "sq_items" not in _seq_scans(plan, but_of=set()), (query, plan)
    walk = await generic_plan_of(schema, "lock_keys", **KEYED_STATEMENTS["lock_keys"])
    assert '"Index Name": "sq_items_ready"' in walk
    assert '"Index Name": "sq_items_lapsed"' in walk
    # The keys' rows are looked up in walk order and the lookups stop at :max_keys locked: no sort
    # between the lock and the lookups, which would look every walked key up first.
    top = json.loads(walk)[0]["Plan"]
    lookups = next(p for p in top["Plans"] if p.get("Parent Relationship") == "Outer")
    assert (top["Node Type"], lookups["Node Type"]) == ("Limit", "Nested Loop"), walk
    [each] = [p for p in lookups["Plans"] if p.get("Parent Relationship") == "Inner"]
    assert '"Node Type": "LockRows"' in json.dumps(each), walk  # locked key by key, in the loop
    after = await generic_plan_of(schema, "key_items", **KEYED_STATEMENTS["key_items"])
    assert '"Index Name": "sq_items_key_leased"' in after  # the leases, and lapsed leases
    assert '"Index Name": "sq_items_key_ready"' in after  # a key's ready items, from its first


@pytest.mark.parametrize("statistics", ["stale", "analysed"])
async def test_top_keys_read_their_queues_live_items_only_and_a_queue_without_keys_none(
    schema: tuple[str, str], statistics: str
) -> None:
    await crowd(schema)  # 100,000 items of 50 other queues
    await fill(schema, "fair", "ready", 100_000)
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name})
    try:  # one key's 100,000 items but a hundred, which seven quiet keys share
        await conn.execute(
            "UPDATE sq_items SET fairness_key = CASE WHEN seq % 1000 = 0 THEN 'quiet-' || (seq % 7)"
            " ELSE 'noisy' END WHERE queue = 'fair'"
        )
        await conn.execute(
            "INSERT INTO sq_fair_keys (queue, fairness_key, last_rank)"
            " SELECT DISTINCT 'fair', fairness_key, 0 FROM sq_items WHERE queue = 'fair'"
        )
    finally:
        await conn.close()
    if statistics == "analysed":
        await analyze(schema)

    nodes = await executed_generic_plan(schema, "top_keys", queue="fair", now=None, limit=10)
    scans = [n for n in nodes if n.get("Relation Name") == "sq_items" and "Scan" in str(n["Node Type"])]
    assert scans, nodes
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], nodes
    # The queue's own live items, each once: none of the other queues' 100,000.
    assert sum(int(str(n["Actual Rows"])) * int(str(n["Actual Loops"])) for n in scans) == 100_000, nodes

    none = await executed_generic_plan(schema, "top_keys", queue="q7", now=None, limit=10)
    assert reads_of(none, "sq_items") == 0, none  # no key: its 2,000 items are never walked


async def plans_of_a_push_beside_a_crowded_queue(
    schema: tuple[str, str], keys: list[str | None], *, analysed: bool = False
) -> list[dict[str, Any]]:
    """The plans (auto_explain's, of every statement the push's functions ran, with their actual
    rows) of a push of one item per entry of `keys` (None: no key) into queue q, in a database
    where another queue has 3,000 keys, in a session with the service's planner settings."""
    url, name = schema
    conn = await asyncpg.connect(url, server_settings={"search_path": name, **PLANNER_SETTINGS})
    plans: list[dict[str, Any]] = []
    conn.add_log_listener(lambda _, message: plans.append(json.loads(message.message.split("\n", 1)[1])))
    try:
        await conn.execute("INSERT INTO sq_queues (name, created_at) VALUES ('crowded', now()), ('q', now())")
        await conn.execute(
            "INSERT INTO sq_fair_keys (queue, fairness_key, last_rank)"
            " SELECT 'crowded', 'k' || n, 0 FROM generate_series(1, 3000) AS n"
        )
        if analysed:
            await conn.execute("ANALYZE sq_fair_keys")
        await conn.execute(
            "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;"
            " SET auto_explain.log_nested_statements = on; SET auto_explain.log_format = json;"
            " SET auto_explain.log_level = notice"
        )
        count = len(keys)
        values: dict[str, object] = {
            "ids": [uuid.uuid4() for _ in range(count)],
            "queues": ["q"] * count,
            "payloads": ["1"] * count,
            "created_ats": [datetime.now(UTC)] * count,
            "priorities": [0] * count,
            "groups": [None] * count,
            "dedup_keys": [None] * count,
            "delays": [0.0] * count,
            "not_befores": [None] * count,
            "remember": [False] * count,
            "skip_existing": False,
            "now": None,
            "attributes": [None] * count,
        }
        query = "push"
        if any(key is not None for key in keys):
            query, values["fairness_keys"] = "push_fair", keys
        await conn.fetch(Q[query].sql, *Q[query].bind(**values))
    finally:
        await conn.close()
    return plans


async def test_a_keyed_push_locks_its_keys_rows_one_by_one_whatever_other_queues_hold(
    schema: tuple[str, str],
) -> None:
    """sq_fair_ranks locks the rows of a push's keys in order. It reads those rows and no others:
    joined to every queue's keys and sorted, with sorts discouraged as the service's sessions
    discourage them, it read every key of every queue once per key of the push (a batch of 500
    keyed items took 250 ms in a fresh database, and 900 ms once it held 6,000 keys)."""
    plans = await plans_of_a_push_beside_a_crowded_queue(schema, [f"k{n % 20}" for n in range(40)])
    [lock] = [p for p in plans if "FOR UPDATE" in p["Query Text"] and "sq_fair_keys AS f" in p["Query Text"]]
    reads = [n for n in plan_nodes(lock["Plan"]) if n.get("Relation Name") == "sq_fair_keys"]
    assert reads, lock
    # 20 keys, each looked up by its primary key (once per loop), none of the crowded queue's 3,000.
    assert all(n["Node Type"] == "Index Scan" for n in reads), lock
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in reads) == 20, lock
    assert "Rows Removed by Join Filter" not in json.dumps(lock), lock


async def test_a_push_without_keys_probes_its_queues_for_keys_by_index(schema: tuple[str, str]) -> None:
    """A push without keys asks whether its queues have keys (then its items are ranked): one index
    probe per queue, never a read of every key of every queue, which a batch of 500 items into one
    queue was planned as (`f.queue = ANY (p_queues)`: 80 ms a push once keyed pushes had left many
    row versions of their keys behind)."""
    plans = await plans_of_a_push_beside_a_crowded_queue(schema, [None] * 500, analysed=True)
    reads = [
        node
        for plan in plans
        for node in plan_nodes(plan["Plan"])
        if node.get("Relation Name") == "sq_fair_keys"
    ]
    assert reads, plans
    assert all(node["Node Type"] in ("Index Scan", "Index Only Scan") for node in reads), [
        p for p in plans if "sq_fair_keys" in json.dumps(p)
    ]
    assert sum(node["Actual Loops"] for node in reads) <= 2, reads  # the one queue, once or twice
