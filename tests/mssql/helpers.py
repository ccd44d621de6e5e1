"""What the SQL Server tests share: the batches read through sqlglot's tsql dialect (`parse`,
`statements`, `hints`, `table_named`, `declared`, `placeholders`, the migrations' guarded
creates), a recording fake of aioodbc's connection that the store talks to through its
``_acquire`` seam (`FakeConnection`, `fake_store`), the fake clock's NOW and the clock line it
binds, and the rows the fake replies with, shaped as pyodbc gives them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from uuid import UUID, uuid4

import pytest
import sqlglot
from simplequeue.domain import QueueSettings
from simplequeue.store import rows
from simplequeue.store.migrations import Migration, load_migrations, split_statements
from simplequeue.store.mssql.odbc import NVARCHAR_MAX
from simplequeue.store.mssql.statements import Q
from simplequeue.store.mssql.store import MssqlStore
from sqlglot import exp
from sqlglot.errors import ErrorLevel

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
NOW_TEXT = "2026-03-01T12:00:00.123456"
# The clock line of a batch, as the server sees it with the fake clock bound.
CLOCK = f"@now DATETIME2(7) = COALESCE(CAST(NULLIF(N'{NOW_TEXT}', N'') AS DATETIME2(7)), SYSUTCDATETIME());"
URL = "mssql+odbc://sa:secret@db.example:1433/queue?TrustServerCertificate=yes"
# v1; v2: delivery semantics; v3: pause; v4: no lock escalation on sq_items; v5: remembered ids
MIGRATION, DELIVERY, ADMIN, ESCALATION, CLIENT_IDS = load_migrations("mssql")[:5]
SQLITE_DELIVERY = load_migrations("sqlite")[1]
QUEUE_WINDOWS = load_migrations("mssql")[9]  # v10: lease_seconds from 0, dedup_window_from
SQLITE_QUEUE_WINDOWS = load_migrations("sqlite")[8]  # v9: sq_queues rebuilt with both
TYPED_SETTINGS = load_migrations("mssql")[10]  # v11: dead_letter_queue, message_retention_seconds
SQLITE_TYPED_SETTINGS = load_migrations("sqlite")[9]  # v10: the same columns
OPTIONAL_SETTINGS = frozenset({"dead_letter_queue", "message_retention_seconds"})
"""Queue settings that may be NULL (none), which no release before v11 had."""

AGING = frozenset({"priority_aging_seconds"})
"""The queue setting of v17 (priority aging): test_schema.py holds its column."""

FLOW_LIMITS = frozenset(
    {
        "max_leased",
        "rate_per_second",
        "rate_burst",
        "limited",
        "max_leased_per_key",
        "rate_per_key_per_second",
    }
)
"""Queue settings of v13 (flow limits) and v16 (per-key limits): tests/mssql/test_limits.py holds
their columns."""


# --- parsing --------------------------------------------------------------------------------------


def parse(sql: str) -> list[exp.Expression]:
    trees = [
        tree for tree in sqlglot.parse(sql, read="tsql", error_level=ErrorLevel.RAISE) if tree is not None
    ]
    # sqlglot turns syntax it does not know into an opaque Command instead of failing; refuse that too.
    opaque = [node.sql() for tree in trees for node in tree.walk() if isinstance(node, exp.Command)]
    assert not opaque, f"sqlglot did not understand: {opaque}"
    return trees


def placeholders(sql: str) -> int:
    return sum(len(list(tree.find_all(exp.Placeholder))) for tree in parse(sql))


def migration_statements(migration: Migration = MIGRATION) -> list[str]:
    # One statement at a time, as MssqlStore.migrate runs them. Parsing the whole file at once would
    # not do: sqlglot nests every statement after an IF into that IF's body, where T-SQL's IF
    # governs only the next statement.
    return split_statements(migration.sql)


def all_migration_statements() -> list[str]:
    return [
        statement for migration in load_migrations("mssql") for statement in migration_statements(migration)
    ]


def code(name: str) -> list[str]:
    """A batch's lines without its comments."""
    return [line for line in Q[name].sql.splitlines() if not line.lstrip().startswith("--")]


# --- reading a batch ------------------------------------------------------------------------------


def hints(table: exp.Table) -> list[str]:
    return sorted(var.name.upper() for hint in table.args.get("hints") or [] for var in hint.expressions)


def index_hint(table: exp.Table) -> str:
    [index] = [
        hint for hint in table.args["hints"] for var in hint.expressions if var.name.upper() == "INDEX"
    ]
    return index.sql(dialect="tsql")


def live_statuses(where: exp.Expression) -> list[list[str]]:
    """The status lists of a predicate's `status IN (...)`s, each sorted."""
    found = [node for node in where.find_all(exp.In) if node.this.name == "status"]
    return [sorted(lit.name for lit in node.expressions) for node in found]


def openjson_columns(node: exp.Expression) -> dict[str, str]:
    openjson = node.find(exp.OpenJSON)
    assert openjson is not None
    return {col.name: col.args["kind"].sql("tsql") for col in openjson.expressions}


def statements(name: str) -> list[exp.Expression]:
    """A batch's statements after its SETs and DECLAREs."""
    return [tree for tree in parse(Q[name].sql) if not isinstance(tree, exp.Set | exp.Declare)]


def declared(name: str) -> str:
    return " ".join(tree.sql("tsql") for tree in parse(Q[name].sql) if isinstance(tree, exp.Declare))


def table_named(node: exp.Expression, name: str) -> exp.Table:
    [table] = [t for t in node.find_all(exp.Table) if t.name == name]
    return table


def history_insert(name: str) -> exp.Insert:
    [insert] = [s for s in statements(name) if isinstance(s, exp.Insert) and s.this.this.name == "sq_history"]
    assert isinstance(insert, exp.Insert)
    return insert


def history_values(insert: exp.Insert) -> dict[str, str]:
    """Each history column and what the batch writes into it."""
    columns = [col.name for col in insert.this.expressions]
    values = [value.sql("tsql") for value in insert.expression.expressions]
    return dict(zip(columns, values, strict=True))


HISTORY_COLUMNS = [
    "id",
    "queue",
    "outcome",
    "attempts",
    "created_at",
    "first_popped_at",
    "finished_at",
    "group_key",
    "dedup_key",
    "last_error",
    "payload",
]

ITEM_COLUMNS = [
    "id",
    "queue",
    "payload",
    "attributes",
    "status",
    "attempts",
    "errors",
    "created_at",
    "visible_at",
    "lease_token",
    "priority",
    "group_key",
    "dedup_key",
    "fairness_key",
    "first_popped_at",
    "died_at",
    "max_attempts",
    "now",
]


def next_visible_at_min() -> exp.Select:
    """The MIN(visible_at) applied to each queue of next_visible_at's second SELECT."""
    [*_, per_queue] = parse(Q["next_visible_at"].sql)
    subquery = per_queue.find(exp.Subquery)
    assert subquery is not None
    assert isinstance(subquery.this, exp.Select)
    return subquery.this


# --- reading the schema ---------------------------------------------------------------------------


def guarded(migration: Migration) -> list[tuple[exp.Expression, exp.Expression]]:
    """(guard, statement) of each guarded statement of a migration."""
    pairs = []
    for statement in migration_statements(migration):
        [tree] = parse(statement)
        if isinstance(tree, exp.IfBlock):
            [body] = tree.args["true"].expressions
            pairs.append((tree.this, body))
    return pairs


def guarded_creates(migration: Migration = MIGRATION) -> list[tuple[exp.Expression, exp.Create]]:
    if migration is MIGRATION:
        assert all(isinstance(parse(s)[0], exp.IfBlock) for s in migration_statements()), "unguarded"
    return [(guard, body) for guard, body in guarded(migration) if isinstance(body, exp.Create)]


def create_table(name: str, migration: Migration = MIGRATION) -> exp.Schema:
    for _, create in guarded_creates(migration):
        if create.args["kind"] == "TABLE" and create.this.this.name == name:
            assert isinstance(create.this, exp.Schema)
            return create.this
    raise AssertionError(f"no CREATE TABLE {name}")


def create_index(name: str, migration: Migration = MIGRATION) -> exp.Create:
    for _, create in guarded_creates(migration):
        if "INDEX" in create.args["kind"] and create.this.name == name:
            return create
    raise AssertionError(f"no CREATE INDEX {name}")


# --- a recording fake of aioodbc's connection -----------------------------------------------------


@dataclass
class Result:
    columns: list[str]
    rows: list[tuple[Any, ...]]


@dataclass
class Results:
    """The result sets of one batch of several statements that each return rows."""

    sets: list[Result]


def result(**columns: Any) -> Result:
    """One row; Result(...) for several."""
    return Result(list(columns), [tuple(columns.values())])


@dataclass
class Executed:
    name: str  # the query's name in queries.sql, or the statement itself (migrations, SETs)
    sql: str
    params: tuple[Any, ...]

    @property
    def inlined(self) -> str:
        """The batch with its parameters written in as literals, whitespace collapsed: which value
        lands on which marker, which a count of markers cannot tell."""
        code = "\n".join(line for line in self.sql.splitlines() if not line.lstrip().startswith("--"))
        pieces = code.split("?")
        assert len(pieces) == len(self.params) + 1, "a '?' that is not a parameter marker"
        literals = [str(p) if isinstance(p, int) else "N'" + p.replace("'", "''") + "'" for p in self.params]
        return " ".join("".join(a + b for a, b in zip(pieces, [*literals, ""], strict=True)).split())


QUERY_NAMES = {query.sql: name for name, query in Q.items()}
LIFT, BOUND = "SET LOCK_TIMEOUT -1", "SET LOCK_TIMEOUT 5000"  # around a migration (timeout 5 s)


class FakeCursor:
    def __init__(self, conn: FakeConnection) -> None:
        self._conn = conn
        self._sets: list[Result | None] = []
        self._sizes: list[Any] | None = None

    async def setinputsizes(self, sizes: list[Any]) -> None:
        self._sizes = list(sizes)

    @property
    def description(self) -> Sequence[tuple[Any, ...]] | None:
        current = self._sets[0] if self._sets else None
        if current is None:
            return None
        return [(name, str, None, None, None, None, True) for name in current.columns]

    async def execute(self, sql: str, *params: Any) -> FakeCursor:
        # What pyodbc refuses at once, or binds only after asking the server to describe the batch.
        markers = placeholders(sql)
        assert markers == len(params), f"{markers} markers, {len(params)} parameters: {params}"
        assert all(type(p) in (str, int) for p in params), f"bind str and int only: {params}"
        # pyodbc binds a str longer than the driver's limit as NTEXT unless told NVARCHAR(MAX): that
        # fails in OPENJSON (8116) and in comparisons (402). The store declares every str so.
        declared = self._sizes or [None] * len(params)
        assert len(declared) == len(params), f"{len(declared)} input sizes for {len(params)} parameters"
        for param, size in zip(params, declared, strict=True):
            assert not isinstance(param, str) or size == NVARCHAR_MAX, (
                f"str not bound as NVARCHAR(MAX): {size}"
            )
        name = QUERY_NAMES.get(sql, sql)
        self._conn.executed.append(Executed(name, sql, params))
        if name in self._conn.errors:
            raise self._conn.errors[name]
        replies = self._conn.replies.get(name, [])
        reply = replies.pop(0) if replies else Results([])
        # Like a batch of several statements: a result without columns ahead of each set of rows.
        sets = reply.sets if isinstance(reply, Results) else [reply]
        self._sets = [part for found in sets for part in (None, found)] or [None]
        return self

    async def fetchall(self) -> list[tuple[Any, ...]]:
        current = self._sets[0]
        assert current is not None, "fetchall() on a result without columns"
        return list(current.rows)

    async def nextset(self) -> bool:
        self._sets.pop(0)
        return bool(self._sets)

    async def close(self) -> None:
        self._conn.cursors_closed += 1


@dataclass
class FakeConnection:
    replies: dict[str, list[Result | Results]] = field(default_factory=dict)
    errors: dict[str, Exception] = field(default_factory=dict)
    executed: list[Executed] = field(default_factory=list)
    commits: int = 0
    rollbacks: int = 0
    closed: bool = False
    cursors_closed: int = 0
    _conn: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(timeout=0))  # pyodbc's

    def reply(self, name: str, *results: Result | Results) -> None:
        self.replies.setdefault(name, []).extend(results)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.executed]

    def params(self, name: str) -> tuple[Any, ...]:
        [found] = [e.params for e in self.executed if e.name == name]
        return found

    def all_params(self, name: str) -> list[tuple[Any, ...]]:
        return [e.params for e in self.executed if e.name == name]

    def inlined(self, name: str) -> str:
        [found] = [e.inlined for e in self.executed if e.name == name]
        return found

    async def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    async def commit(self) -> None:
        self.commits += 1

    async def rollback(self) -> None:
        self.rollbacks += 1

    async def close(self) -> None:
        self.closed = True


DRAW = 0.25  # the fake store's backoff jitter draw


def fake_store(monkeypatch: pytest.MonkeyPatch, *, clock: bool = True) -> tuple[MssqlStore, FakeConnection]:
    store = MssqlStore(URL, clock=(lambda: NOW) if clock else None, random=lambda: DRAW)
    conn = FakeConnection()

    @asynccontextmanager
    async def acquire() -> AsyncIterator[FakeConnection]:
        yield conn

    monkeypatch.setattr(store, "_acquire", acquire)
    # Queues seen without flow limits pop the one-batch way; tests of the careful pop (with its
    # queue_limits and lock_limits batches) undo this (test_limits.py).
    monkeypatch.setattr(store.flow, "careful", lambda queue: False)
    return store, conn


# --- the fake's replies, as pyodbc gives rows -----------------------------------------------------


def completed_ids(*item_ids: UUID, queue: str = "orders") -> Result:
    """complete_batch's first result set: the ids completed, with their queue."""
    return Result(["id", "queue"], [(str(item_id).upper(), queue) for item_id in item_ids])


def pushed(conn: FakeConnection) -> list[dict[str, Any]]:
    """The items push_batch sent, as its OPENJSON reads them."""
    _, items_json = conn.params("push_batch")
    assert isinstance(items_json, str)
    items = json.loads(items_json)
    assert isinstance(items, list)
    return items


def item_row(item_id: UUID, *, status: str, lease_token: UUID | None = None, **overrides: Any) -> Result:
    row = {
        "id": str(item_id).upper(),
        "queue": "orders",
        "payload": '{"n": 1}',
        "attributes": None,
        "status": status,
        "attempts": 1,
        "errors": "[]",
        "created_at": datetime(2026, 2, 1, 8, 0),
        "visible_at": datetime(2026, 3, 1, 12, 0, 30),
        "lease_token": str(lease_token).upper() if lease_token else None,
        "priority": 0,
        "group_key": None,
        "dedup_key": None,
        "fairness_key": None,
        "first_popped_at": datetime(2026, 2, 1, 8, 0, 1),
        "died_at": NOW.replace(tzinfo=None) if status == "dead" else None,
        "max_attempts": 5,
        "now": NOW.replace(tzinfo=None),
    }
    return result(**(row | overrides))


def still_there(*found: tuple[UUID, str, UUID | None]) -> Result:
    return Result(
        ["id", "status", "lease_token"],
        [(str(i).upper(), status, str(token).upper() if token else None) for i, status, token in found],
    )


def visible_rows(*rows_: tuple[str, datetime | None]) -> Result:
    return Result(["queue", "next_visible_at"], list(rows_))


STATS_COLUMNS = [
    "name",
    *rows.settings_params(QueueSettings()),
    "paused",
    "ready",
    "leased",
    "delayed",
    "retrying",
    "dead",
    "oldest_ready",
    "completed_in_history",
    "dead_in_history",
    "now",
]


def stats_row(name: str, oldest: datetime | None) -> tuple[Any, ...]:
    settings = (
        5,
        30,
        1.0,
        2.0,
        3600.0,
        0.1,
        604800,
        3600,
        "finish",
        False,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        False,
    )
    return (name, *settings, False, 2, 1, 3, None, 4, oldest, 7, 8, NOW.replace(tzinfo=None))


def limits_row(
    *,
    max_leased: int | None = None,
    rate_per_second: float | None = None,
    rate_burst: int | None = None,
    rate_tokens: float | None = None,
    rate_at: datetime | None = None,
    max_leased_per_key: int | None = None,
    rate_per_key_per_second: float | None = None,
) -> Result:
    """queue_limits' and lock_limits' row, as pyodbc gives it (naive UTC times; BIT as bool)."""
    return result(
        limited=max_leased is not None
        or rate_per_second is not None
        or max_leased_per_key is not None
        or rate_per_key_per_second is not None,
        max_leased=max_leased,
        rate_per_second=rate_per_second,
        rate_burst=rate_burst,
        max_leased_per_key=max_leased_per_key,
        rate_per_key_per_second=rate_per_key_per_second,
        rate_tokens=rate_tokens,
        rate_at=rate_at,
        now=NOW.replace(tzinfo=None),
        keys_limited=False,
    )


LOCKED_COLUMNS = ["key", "seq", "place", "cap", "leased", "rate", "rate_tokens", "rate_at", "now"]
"""lock_keys' columns: a walked item of a locked key, with the key's cap, leases, rate and bucket."""


def locked_keys(*walked: tuple[Any, ...]) -> Result:
    """lock_keys' rows, each (key, seq, place, cap, leased), or with (rate, rate_tokens, rate_at)
    after them for a key with a rate; the batch's clock is NOW."""
    padded = [(*row, None, None, None)[:8] for row in walked]
    return Result(LOCKED_COLUMNS, [(*row, NOW.replace(tzinfo=None)) for row in padded])


def dead_rows(*found: tuple[int, UUID, datetime]) -> Result:
    """list_dead's rows: seq, then an item row's columns."""
    page = [item_row(item_id, status="dead", died_at=died) for _, item_id, died in found]
    columns = ["seq", *item_row(uuid4(), status="dead").columns]
    return Result(columns, [(seq, *r.rows[0]) for (seq, _, _), r in zip(found, page, strict=True)])


def picked(*seqs: int) -> Result:
    return Result(["seq"], [(seq,) for seq in seqs])


def history_rows(*found: tuple[int, UUID, str, datetime]) -> Result:
    columns = ["seq", *HISTORY_COLUMNS]
    created = datetime(2026, 2, 1, 8, 0)
    return Result(
        columns,
        [
            (seq, str(i).upper(), "orders", outcome, 2, created, None, at, None, "k", "boom", '{"p": 1}')
            for seq, i, outcome, at in found
        ],
    )
