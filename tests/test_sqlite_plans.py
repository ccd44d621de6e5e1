"""SQLite's pop reads only what it hands out: ready items along sq_items_ready (no lease in flight
is in it) and the queue's leases that ran out along sq_items_lapsed, never a scan of sq_items."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from simplequeue.store.migrations import load_migrations, split_statements
from simplequeue.store.sqlite.params import add_seconds
from simplequeue.store.sqlite.statements import Q

NOW = "2026-01-01T00:10:00.000000Z"
PAST = "2026-01-01T00:00:00.000000Z"
LATER = "2026-01-01T01:00:00.000000Z"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path / "plans.db", isolation_level=None)
    conn.create_function("sq_add_seconds", 2, add_seconds, deterministic=True)
    for migration in load_migrations("sqlite"):
        for statement in split_statements(migration.sql):
            conn.execute(statement)
    try:
        yield conn
    finally:
        conn.close()


def fill(
    conn: sqlite3.Connection, queue: str, status: str, count: int, visible_at: str, *, priority: int = 0
) -> set[str]:
    """`count` items of `queue`, created at PAST (a lease: its first attempt); their ids."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    leased = status == "leased"
    conn.execute(
        "INSERT INTO sq_queues (name, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING", (queue, PAST)
    )
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO sq_items"
        " (id, queue, payload, created_at, status, visible_at, lease_token, priority, attempts)"
        " VALUES (?, ?, '1', ?, ?, ?, ?, ?, ?)",
        (
            (i, queue, PAST, status, visible_at, str(uuid.uuid4()) if leased else None, priority, int(leased))
            for i in ids
        ),
    )
    conn.execute("COMMIT")
    return set(ids)


def plan_of(conn: sqlite3.Connection, query: str, **values: object) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + Q[query].sql, Q[query].bind(**values))]


def test_pop_walks_ready_items_and_the_leases_that_ran_out_by_their_indexes(db: sqlite3.Connection) -> None:
    # Many queues; q's leases in flight come first in pop order, ahead of its ready items.
    for n in range(20):
        fill(db, f"other-{n}", "ready", 200, PAST)
        fill(db, f"other-{n}", "leased", 100, PAST)
    fill(db, "q", "leased", 2_000, LATER, priority=5)
    expired = fill(db, "q", "leased", 3, PAST)  # inserted before the ready items: first in pop order
    fill(db, "q", "ready", 2_000, PAST)
    db.execute("ANALYZE")

    values = {
        "queue": "q",
        "now": NOW,
        "max_items": 10,
        "walk": 10,
        "lease_token": str(uuid.uuid4()),
        "lease_seconds": 30,
    }
    plan = plan_of(db, "pop", **values)
    searches = [step for step in plan if "sq_items" in step and ("SEARCH" in step or "SCAN" in step)]
    assert any(s.startswith("SEARCH x USING INDEX sq_items_ready (queue=?)") for s in searches), plan
    assert any(
        s.startswith("SEARCH x USING INDEX sq_items_lapsed (queue=? AND visible_at<?)") for s in searches
    ), plan
    assert not [s for s in plan if s.startswith("SCAN sq_items") or s.startswith("SCAN x")], plan
    # The ready walk is in index order (no sort: it stops after :max_items); only the expired
    # leases, and the merge of both walks, are sorted.
    ready_walk = plan[: plan.index("UNION ALL")]
    assert "USE TEMP B-TREE FOR ORDER BY" not in ready_walk, plan
    assert plan.count("USE TEMP B-TREE FOR ORDER BY") == 2, plan

    # Run: the three expired leases (pushed before every ready item) and seven ready items, none
    # of the leases in flight.
    popped = db.execute(Q["pop"].sql, Q["pop"].bind(**values)).fetchall()
    attempts = {str(row[1]): row[5] for row in popped}
    assert len(attempts) == 10
    assert {i: attempts.get(i) for i in expired} == dict.fromkeys(expired, 2)
    assert sorted(attempts.values()) == [1] * 7 + [2] * 3


def test_a_page_of_queues_seeks_the_name_key_from_its_cursor_or_prefix(db: sqlite3.Connection) -> None:
    # A page's cost is its own queues: the walk of the primary key starts at the cursor (or at the
    # prefix, when that is later) and stops after :limit rows; no sort of every queue.
    db.executemany(
        "INSERT INTO sq_queues (name, created_at) VALUES (?, ?)", [(f"q{n:04}", PAST) for n in range(2_000)]
    )
    db.execute("ANALYZE")
    for after, prefix in ((None, None), ("q1500", None), (None, "q19"), ("q1950", "q19")):
        plan = plan_of(db, "queue_page", now=NOW, after=after, prefix=prefix, limit=10)
        assert plan[0] == "SEARCH q USING PRIMARY KEY (name>?)", plan
        assert not [step for step in plan if "TEMP B-TREE" in step or step.startswith("SCAN q")], plan
    found = db.execute(
        Q["queue_page"].sql, Q["queue_page"].bind(now=NOW, after="q1950", prefix="q19", limit=3)
    ).fetchall()
    assert [row[0] for row in found] == ["q1951", "q1952", "q1953"]
