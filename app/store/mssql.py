"""SQL Server through pyodbc and aioodbc: READPAST/UPDLOCK claims, the server's clock.

aioodbc and pyodbc are imported by ``open()`` only, so that importing this module (and every
deployment on another database) needs no unixODBC.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit
from uuid import UUID, uuid4

from app.domain import (
    LEASE_EXPIRED_ERROR,
    Clock,
    CompleteOutcome,
    Completion,
    Failure,
    HistoryFilter,
    HistoryRecord,
    ItemStatus,
    ItemView,
    LeasedItem,
    NewItem,
    Page,
    Pushed,
    QueueSettings,
    QueueStats,
)
from app.errors import (
    DatabaseUnavailable,
    ItemExists,
    QueueError,
    QueueNotFound,
    SchemaNotReady,
    StoreError,
)
from app.store import rows
from app.store.migrations import latest_version, load_migrations, split_statements
from app.store.protocol import ReadyCallback
from app.store.sqlfile import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))

SCHEMES = ("mssql", "mssql+odbc", "mssql+aioodbc")
DEFAULT_DRIVER = "ODBC Driver 18 for SQL Server"
DEFAULT_PORT = 1433
MIGRATION_LOCK_TIMEOUT_MS = 300_000
# OPENJSON, which reads every batch of items, needs SQL Server 2016's compatibility level.
MIN_COMPATIBILITY_LEVEL = 130
# Idle pooled connections are replaced before load balancers and Azure's gateway drop them.
POOL_RECYCLE_SECONDS = 600
BATCH = 1000  # rows per transaction in redrive and purge_dead, so that none holds its locks long

Param = str | int
Row = dict[str, Any]


class Cursor(Protocol):
    """The part of an aioodbc cursor the store uses."""

    @property
    def description(self) -> Sequence[Sequence[Any]] | None: ...

    async def execute(self, sql: str, *params: Param) -> Any: ...

    async def fetchall(self) -> list[Sequence[Any]]: ...

    async def nextset(self) -> bool | None: ...

    async def close(self) -> None: ...


class Connection(Protocol):
    """The part of an aioodbc connection the store uses."""

    async def cursor(self) -> Cursor: ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...

    async def close(self) -> None: ...


# --- connection string --------------------------------------------------------------------------


def odbc_connection_string(url: str) -> str:
    """The ODBC connection string that an ``mssql+odbc://`` URL stands for.

    ``mssql+odbc://user:password@host:port/database?driver=...&Encrypt=yes`` with the user and
    password percent-encoded. ``driver`` picks Microsoft's ODBC driver (the default, version 18) or
    FreeTDS; every other parameter is passed on as an ODBC keyword. ``odbc_connect=<percent-encoded
    connection string>`` is used as it is.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise ValueError(f"not a SQL Server URL: scheme {parts.scheme!r}, expected one of {SCHEMES}")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    verbatim = _take(options, "odbc_connect")
    if verbatim is not None:
        return verbatim
    driver = _take(options, "driver") or DEFAULT_DRIVER
    freetds = any(name in driver.lower() for name in ("freetds", "tdsodbc"))
    host, port = parts.hostname or "localhost", str(parts.port or DEFAULT_PORT)
    # Microsoft's driver takes the port after a comma; FreeTDS has a keyword of its own.
    pairs = [("Driver", _braced(driver))]
    pairs += [("Server", host), ("Port", port)] if freetds else [("Server", f"{host},{port}")]
    if database := unquote(parts.path.lstrip("/")):
        pairs.append(("Database", _odbc_value(database)))
    if parts.username is not None:
        pairs.append(("UID", _odbc_value(unquote(parts.username))))
    if parts.password is not None:
        pairs.append(("PWD", _odbc_value(unquote(parts.password))))
    pairs += [(key, _odbc_value(value)) for key, value in options.items()]
    if freetds and not any(key.lower() == "tds_version" for key, _ in pairs):
        pairs.append(("TDS_Version", "7.4"))  # the first version that carries DATETIME2 as a time
    return ";".join(f"{key}={value}" for key, value in pairs)


def _take(options: dict[str, str], key: str) -> str | None:
    """Remove and return a URL parameter, whatever its case."""
    for name in list(options):
        if name.lower() == key:
            return options.pop(name)
    return None


def _braced(value: str) -> str:
    return "{" + value.replace("}", "}}") + "}"


def _odbc_value(value: str) -> str:
    """Brace a value that would otherwise end the attribute or be trimmed (a password with ';')."""
    if any(char in value for char in ";{}=") or value != value.strip():
        return _braced(value)
    return value


# --- errors -------------------------------------------------------------------------------------

_ITEM_ID_INDEX = "sq_items_id_key"
_DUPLICATE_KEY = {2601, 2627}
_INVALID_OBJECT = 208
# Azure SQL's "try again later" errors: the database is moving, busy or throttled, or not yet open;
# and 1222, a lock not granted within the session's LOCK_TIMEOUT.
_TRANSIENT = {1222, 4060, 10928, 10929, 40197, 40501, 40613, 49918, 49919, 49920}
# 08: connection; HYT00/HYT01: login or query timeout; 28000: login refused; 40001: deadlock victim.
_UNAVAILABLE_STATES = ("08", "HYT", "28000", "40001")


@asynccontextmanager
async def translated_errors() -> AsyncIterator[None]:
    """The one place where pyodbc's exceptions (and timeouts) become domain errors."""
    try:
        yield
    except QueueError:
        raise
    except OSError as exc:  # TimeoutError from a bounded acquire included
        raise DatabaseUnavailable() from exc
    except Exception as exc:
        if not _is_driver_error(exc):
            raise
        raise _domain_error(exc) from exc


def _is_driver_error(exc: Exception) -> bool:
    # A pyodbc exception can only exist once open() imported pyodbc; no import is attempted here.
    pyodbc = sys.modules.get("pyodbc")
    return pyodbc is not None and isinstance(exc, pyodbc.Error)


def _domain_error(exc: Exception) -> QueueError:
    state, message = _diagnostics(exc)
    codes = {int(code) for code in re.findall(r"\((\d+)\)", message)}
    if codes & _DUPLICATE_KEY and _ITEM_ID_INDEX in message:
        return ItemExists()
    if _INVALID_OBJECT in codes or state == "42S02":
        return SchemaNotReady()
    operational = isinstance(exc, sys.modules["pyodbc"].OperationalError)
    # What the driver said stays on the chained cause, for the log; clients get a plain sentence.
    if operational or state.startswith(_UNAVAILABLE_STATES) or codes & _TRANSIENT:
        return DatabaseUnavailable()
    return StoreError()


def _diagnostics(exc: Exception) -> tuple[str, str]:
    """pyodbc's errors carry (SQLSTATE, message); the message ends in '(native error number)'."""
    if len(exc.args) >= 2 and isinstance(exc.args[0], str):
        return exc.args[0], str(exc.args[1])
    return "", str(exc)


# --- running batches ----------------------------------------------------------------------------


async def _execute_sets(conn: Connection, sql: str, *params: Param) -> list[list[Row]]:
    """Run one batch and return every result set that has columns, in order, as lists of dicts."""
    cursor = await conn.cursor()
    try:
        await cursor.execute(sql, *params)
        return await _result_sets(cursor)
    finally:
        await cursor.close()


async def _execute(conn: Connection, sql: str, *params: Param) -> list[Row]:
    """Run one batch and return its first result set (none: an empty list)."""
    sets = await _execute_sets(conn, sql, *params)
    return sets[0] if sets else []


async def _query(conn: Connection, name: str, *params: Param) -> list[Row]:
    return await _execute(conn, Q[name], *params)


async def _query_sets(conn: Connection, name: str, *params: Param) -> list[list[Row]]:
    return await _execute_sets(conn, Q[name], *params)


async def _result_sets(cursor: Cursor) -> list[list[Row]]:
    # Reading on to the end of the batch makes the driver raise errors of later statements too.
    # Results without columns (row counts, should a batch not SET NOCOUNT ON) are passed over.
    sets: list[list[Row]] = []
    while True:
        if cursor.description is not None:
            names = [column[0] for column in cursor.description]
            sets.append([dict(zip(names, row, strict=True)) for row in await cursor.fetchall()])
        if not await cursor.nextset():
            return sets


@asynccontextmanager
async def _committed(conn: Connection) -> AsyncIterator[None]:
    """Commit what the block did, or roll it back if it raised.

    ODBC manual-commit mode opens a transaction at the first statement that needs one.
    """
    try:
        yield
    except BaseException:
        try:
            await conn.rollback()
        except Exception:
            # A connection that cannot roll back must not go back to the pool; closed, it is dropped.
            with suppress(Exception):
                await conn.close()
        raise
    await conn.commit()


def _set_query_timeout(conn: Any, seconds: int) -> None:
    """pyodbc's query timeout (0: none), for the cursors made from now on. aioodbc's connection
    exposes it read-only, so it is set on the pyodbc connection inside."""
    conn._conn.timeout = seconds


def _whole_seconds(seconds: float) -> int:
    """ODBC timeouts are whole seconds, and 0 means none."""
    return max(1, math.ceil(seconds))


def _timestamp(moment: datetime) -> str:
    """Naive UTC ISO-8601, which CAST(... AS DATETIME2) reads the same under every language setting."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


def _optional(value: object | None) -> str:
    """An optional value as text: '' stands for none (see mssql.sql)."""
    return "" if value is None else str(value)


def _float(value: float) -> str:
    """A float as text that CAST(... AS FLOAT) reads back exactly (repr is the shortest round trip)."""
    return repr(float(value))


def _optional_float(value: float | None) -> str:
    return "" if value is None else _float(value)


def _optional_time(moment: datetime | None) -> str:
    return "" if moment is None else _timestamp(moment)


def _split_seconds(delta: timedelta) -> tuple[int, int]:
    """Whole seconds and microseconds, added by two DATEADDs: one DATEADD(MICROSECOND, ...) would
    overflow its INT for delays past about 35.8 minutes."""
    return delta.days * 86400 + delta.seconds, delta.microseconds


def _index_order(item_id: UUID) -> bytes:
    """The order in which SQL Server sorts UNIQUEIDENTIFIER, and so its index on sq_items.id: the last
    six bytes first, then the fourth group, both as written; then the third, second and first groups,
    each compared byte-reversed (little-endian)."""
    raw = item_id.bytes  # as written: groups of 4, 2, 2, 2 and 6 bytes
    return raw[10:16] + raw[8:10] + raw[6:8][::-1] + raw[4:6][::-1] + raw[0:4][::-1]


def _json_text(value: object) -> str:
    """A JSON parameter: compact, and with text as it is (pyodbc binds str as NVARCHAR anyway)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _push_json(items: Sequence[NewItem]) -> str:
    """The batch as push_batch's OPENJSON reads it: in the id index's order, for its locks, with each
    item's place in `items` as n, for the order of insertion. The payload is a JSON string holding the
    payload's text, so that the text arrives exactly (an object would come back re-serialised). The
    delay goes as whole seconds and microseconds, which the server adds to its clock."""
    numbered = sorted(enumerate(items), key=lambda pair: _index_order(pair[1].id))
    return _json_text([_push_entry(n, item) for n, item in numbered])


def _push_entry(n: int, item: NewItem) -> dict[str, object]:
    delay_seconds, delay_micros = _split_seconds(timedelta(seconds=item.delay_seconds))
    return {
        "n": n,
        "id": str(item.id),
        "queue": item.queue,
        "payload": item.payload_json,
        "created_at": _timestamp(item.created_at),
        "priority": item.priority,
        "group_key": item.group,
        "dedup_key": item.dedup_key,
        "delay_seconds": delay_seconds,
        "delay_micros": delay_micros,
        "not_before": _timestamp(item.not_before) if item.not_before else None,
    }


def _claims_json(items: Sequence[NewItem], leaders: list[int]) -> str:
    """claim_dedup_keys' array: one claim per distinct key of the call (its first item's), by place."""
    return _json_text(
        [
            {
                "n": n,
                "queue": item.queue,
                "key": item.dedup_key,
                "id": str(item.id),
                "created_at": _timestamp(item.created_at),
            }
            for n, item in enumerate(items)
            if item.dedup_key is not None and leaders[n] == n
        ]
    )


def _complete_json(items: Sequence[Completion]) -> str:
    """The batch as complete_batch's OPENJSON reads it; null where no token was given."""
    return _json_text(
        [{"id": str(item.id), "token": str(item.lease_token) if item.lease_token else None} for item in items]
    )


def _revive_json(seqs: Sequence[int], first: int, rate_per_second: float | None) -> str:
    """revive's plan: each picked item's place, seq and delay from now, the k-th of the whole redrive
    (from `first` on) becoming poppable k / rate seconds from now."""
    plan = []
    for k, seq in enumerate(seqs):
        seconds, micros = _split_seconds(rows.redrive_delay(first + k, rate_per_second))
        plan.append({"n": k, "seq": seq, "seconds": seconds, "micros": micros})
    return _json_text(plan)


# --- the store ----------------------------------------------------------------------------------


class MssqlStore:
    dialect = "mssql"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        timeout_seconds: float = 5.0,
        clock: Clock | None = None,
        random: Callable[[], float] = random.random,
    ) -> None:
        self._dsn = odbc_connection_string(url)
        self._pool_size = pool_size
        self._timeout = timeout_seconds
        self._clock = clock
        self._random = random  # backoff jitter
        self._pool: Any = None

    def _now(self) -> str:
        """'' lets the server's clock decide; a clock is injected only by tests."""
        return _timestamp(self._clock()) if self._clock else ""

    async def open(self) -> None:
        try:
            import aioodbc
        except ImportError as exc:
            raise ImportError(
                "SQL Server needs aioodbc (pip install 'simplequeue[mssql]') and unixODBC with "
                "Microsoft's ODBC Driver 18 or FreeTDS on the host"
            ) from exc
        # minsize=0: nothing connects here, so the service starts (and answers 503) while SQL Server
        # is down. timeout is pyodbc's login timeout, in whole seconds.
        self._pool = await aioodbc.create_pool(
            dsn=self._dsn,
            minsize=0,
            maxsize=self._pool_size,
            autocommit=False,
            timeout=max(1, round(self._timeout)),
            pool_recycle=POOL_RECYCLE_SECONDS,
            after_created=self._bound_statements,
        )

    async def _bound_statements(self, conn: Any) -> None:
        """Every statement of a new connection ends within the timeout: the driver cancels it past
        its query timeout (HYT00, and the server rolls the batch back under XACT_ABORT), and a lock
        wait ends at LOCK_TIMEOUT (1222). Both become DatabaseUnavailable. Migrations lift them."""
        _set_query_timeout(conn, _whole_seconds(self._timeout))
        await _execute(conn, f"SET LOCK_TIMEOUT {round(self._timeout * 1000)}")

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            await self._pool.wait_closed()
            self._pool = None

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
        async with translated_errors(), self._acquire() as conn, _committed(conn):
            yield conn

    async def migrate(self) -> list[int]:
        async with translated_errors(), self._acquire() as conn, self._unbounded(conn):
            try:
                await _take_migration_lock(conn)
                async with _committed(conn):
                    return await self._apply_pending(conn)
            finally:
                # After the commit: a replica that waited must find the versions recorded.
                await _release_migration_lock(conn)

    @asynccontextmanager
    async def _unbounded(self, conn: Any) -> AsyncIterator[None]:
        """Lift the statement bounds for a migration (DDL on a big table, or waiting for another
        replica's migration), and put them back before the connection returns to the pool."""
        _set_query_timeout(conn, 0)
        await _execute(conn, "SET LOCK_TIMEOUT -1")
        try:
            yield
        finally:
            with suppress(Exception):  # a broken connection is closed by _release_migration_lock
                await self._bound_statements(conn)

    async def _apply_pending(self, conn: Connection) -> list[int]:
        await _check_compatibility_level(conn)
        await _query(conn, "create_version_table")
        done = {row["version"] for row in await _query(conn, "applied_versions")}
        applied: list[int] = []
        for migration in load_migrations(self.dialect):
            if migration.version in done:
                continue
            for statement in split_statements(migration.sql):
                await _execute(conn, statement)
            await _query(conn, "record_version", migration.version, migration.name, self._now())
            applied.append(migration.version)
        return applied

    async def check_ready(self) -> None:
        latest = latest_version(self.dialect)
        async with self._transaction() as conn:
            versions = {row["version"] for row in await _query(conn, "applied_versions")}
        if latest not in versions:
            raise SchemaNotReady()

    async def push_batch(self, items: Sequence[NewItem], *, skip_existing: bool) -> list[Pushed | None]:
        """One transaction: the call's dedup keys are claimed first (one batch, only if it has any),
        then the items to insert go in one batch and one round trip, whatever their number.

        Of items that repeat a dedup key, the first speaks for the others; an item whose key another
        item holds is that item's duplicate. An id that appears twice among the rest fails the call
        (all or nothing) or keeps its first occurrence (skip_existing). push_batch inserts, in the
        order given, only ids it does not find (see mssql.sql for why that is race-free); in
        all-or-nothing mode a shortfall is ItemExists and rolls everything back.
        """
        assert not (skip_existing and any(i.dedup_key for i in items)), "dedup keys need skip_existing=False"
        if not items:
            return []
        leaders = rows.dedup_leaders(items)
        results: list[Pushed | None] = [None] * len(items)
        async with self._transaction() as conn:
            winners = await self._claim_dedup_keys(conn, items, leaders)
            fresh: dict[UUID, int] = {}  # id: its place in items
            for n, item in enumerate(items):
                if leaders[n] != n:
                    continue
                if item.dedup_key is not None and (winner := winners[n]):
                    results[n] = winner
                elif item.id not in fresh:
                    fresh[item.id] = n
                elif not skip_existing:
                    raise ItemExists()
            if fresh:
                found = await _query(
                    conn, "push_batch", self._now(), _push_json([items[n] for n in fresh.values()])
                )
                inserted = {rows.as_uuid(row["id"]) for row in found}
                if len(inserted) < len(fresh) and not skip_existing:
                    raise ItemExists()
                for item_id, n in fresh.items():
                    if item_id in inserted:
                        results[n] = Pushed(item_id, items[n].created_at, created=True)
        return rows.follow_leaders(results, leaders)

    async def _claim_dedup_keys(
        self, conn: Connection, items: Sequence[NewItem], leaders: list[int]
    ) -> dict[int, Pushed | None]:
        """{place of a key's first item: None where this call took the key, else the item holding it}."""
        if not any(item.dedup_key is not None for item in items):
            return {}
        found = await _query(conn, "claim_dedup_keys", self._now(), _claims_json(items, leaders))
        return {
            row["n"]: None
            if row["taken"]
            else Pushed(rows.as_uuid(row["item_id"]), rows.as_utc(row["created_at"]), created=False)
            for row in found
        }

    async def pop(self, queue: str, max_items: int, lease_seconds: int | None) -> list[LeasedItem]:
        params = (self._now(), queue, _optional(lease_seconds), max_items, str(uuid4()))
        async with self._transaction() as conn:
            found = await _query(conn, "pop", *params)
        return rows.sorted_leases([(row["seq"], rows.leased_item(row)) for row in found])

    async def extend(self, item_id: UUID, lease_token: UUID, lease_seconds: int) -> ItemView:
        """One batch: the compare-and-set, then the item as it is now."""
        params = (self._now(), str(item_id), str(lease_token), lease_seconds)
        async with self._transaction() as conn:
            extended, current = await _query_sets(conn, "extend", *params)
        row = current[0] if current else None
        if not extended or row is None:
            raise rows.extension_refused(row, lease_token, row["now"] if row else None)
        return rows.item_view(row, row["now"])

    async def complete(self, item_id: UUID, lease_token: UUID | None) -> None:
        """complete_batch's batch for one item: its second result set says why a refusal happened."""
        async with self._transaction() as conn:
            done, still_there = await _query_sets(
                conn, "complete_batch", self._now(), _complete_json([Completion(item_id, lease_token)])
            )
            if not done:
                raise rows.transition_refused(still_there[0] if still_there else None, lease_token)

    async def complete_batch(self, items: Sequence[Completion]) -> list[CompleteOutcome]:
        """One batch: the items completed (with their history and dedup windows), then which of the
        others are still there, and of those the dead."""
        if not items:
            return []
        async with self._transaction() as conn:
            done, still_there = await _query_sets(conn, "complete_batch", self._now(), _complete_json(items))
        return rows.complete_outcomes(
            items,
            {rows.as_uuid(row["id"]) for row in done},
            {rows.as_uuid(row["id"]) for row in still_there},
            {rows.as_uuid(row["id"]) for row in still_there if row["status"] == ItemStatus.DEAD},
        )

    async def fail(self, item_id: UUID, failure: Failure) -> ItemView:
        """One batch: the compare-and-set (with the history record of a death), then the item as it is."""
        params = (
            self._now(),
            str(item_id),
            _optional(failure.lease_token),
            int(failure.retry),
            _optional_float(failure.retry_after_seconds),
            _float(self._random()),
            failure.error,
        )
        async with self._transaction() as conn:
            failed, current = await _query_sets(conn, "fail", *params)
            row = current[0] if current else None
            if not failed or row is None:
                raise rows.transition_refused(row, failure.lease_token, row["now"] if row else None)
        return rows.item_view(row, row["now"])

    async def get_item(self, item_id: UUID) -> ItemView:
        async with self._transaction() as conn:
            found = await _query(conn, "get_item", self._now(), str(item_id))
        if not found:
            raise rows.transition_refused(None, None)
        return rows.item_view(found[0], found[0]["now"])

    async def next_visible_at(self, queues: Sequence[str]) -> tuple[dict[str, datetime], datetime]:
        async with self._transaction() as conn:
            [[clock], found] = await _query_sets(
                conn,
                "next_visible_at",
                self._now(),
                _json_text(list(queues)),
            )
        earliest = {
            row["queue"]: rows.as_utc(row["next_visible_at"])
            for row in found
            if row["next_visible_at"] is not None
        }
        return earliest, rows.as_utc(clock["now"])

    async def subscribe(self, on_ready: ReadyCallback) -> None:
        """Does nothing: SQL Server has no notification channel that suits a pooled service. Service
        Broker's WAITFOR (RECEIVE ...) would hold a pooled connection for as long as it waits, and
        change data capture needs SQL Server Agent, which Azure SQL Database does not have. The
        long-poll watcher finds other processes' items with next_visible_at instead."""

    async def _stats(self, queue: str | None) -> list[QueueStats]:
        async with self._transaction() as conn:
            found = await _query(conn, "queue_stats", self._now(), queue or "")
        return [rows.queue_stats(row) for row in found]

    async def list_queues(self) -> list[QueueStats]:
        return await self._stats(None)

    async def get_queue(self, name: str) -> QueueStats:
        found = await self._stats(name)
        if not found:
            raise QueueNotFound()
        return found[0]

    async def put_queue(self, name: str, settings: QueueSettings) -> bool:
        given = rows.settings_params(settings)
        params = (
            self._now(),
            name,
            given["max_attempts"],
            given["lease_seconds"],
            _float(given["backoff_base_seconds"]),
            _float(given["backoff_factor"]),
            _float(given["backoff_cap_seconds"]),
            _float(given["backoff_jitter"]),
            given["retention_seconds"],
            given["dedup_window_seconds"],
            int(given["history_payload"]),
        )
        async with self._transaction() as conn:
            [row] = await _query(conn, "put_queue", *params)
        return bool(row["created"])

    async def list_dead(self, queue: str, limit: int, cursor: str | None) -> Page[ItemView]:
        after_at, after_seq = rows.decode_cursor(cursor)
        params = (self._now(), queue, _optional_time(after_at), _optional(after_seq), limit)
        async with self._transaction() as conn:
            page = await _query(conn, "list_dead", *params)
        last = page[-1] if len(page) == limit else None
        return Page(
            [rows.item_view(row, row["now"]) for row in page],
            rows.encode_cursor(last["died_at"], last["seq"]) if last else None,
        )

    async def redrive(self, queue: str, ids: Sequence[UUID] | None, rate_per_second: float | None) -> int:
        """In transactions of up to BATCH items, oldest dead first: pick them (locked), then revive."""
        wanted = _json_text([str(i) for i in ids]) if ids is not None else ""
        revived = 0
        while True:
            async with self._transaction() as conn:
                seqs = [row["seq"] for row in await _query(conn, "pick_dead", queue, wanted, BATCH)]
                if seqs:
                    plan = _revive_json(seqs, revived, rate_per_second)
                    await _query(conn, "revive", self._now(), queue, plan)
            revived += len(seqs)
            if len(seqs) < BATCH:
                return revived

    async def purge_dead(self, queue: str) -> int:
        purged = 0
        while True:
            async with self._transaction() as conn:
                [row] = await _query(conn, "purge_dead", self._now(), queue, BATCH)
            done = int(row["purged"])
            purged += done
            if done < BATCH:
                return purged

    async def list_history(
        self, queue: str, where: HistoryFilter, limit: int, cursor: str | None
    ) -> Page[HistoryRecord]:
        after_at, after_seq = rows.decode_cursor(cursor)
        params = (
            queue,
            where.outcome.value if where.outcome else "",
            _optional_time(where.since),
            _optional_time(where.until),
            _optional_time(after_at),
            _optional(after_seq),
            limit,
        )
        async with self._transaction() as conn:
            page = await _query(conn, "list_history", *params)
        last = page[-1] if len(page) == limit else None
        return Page(
            [rows.history_record(row) for row in page],
            rows.encode_cursor(last["finished_at"], last["seq"]) if last else None,
        )

    async def reap_expired(self, limit: int) -> int:
        async with self._transaction() as conn:
            [row] = await _query(conn, "reap_expired", self._now(), LEASE_EXPIRED_ERROR, limit)
        return int(row["killed"])

    async def purge_history(self, limit: int) -> int:
        async with self._transaction() as conn:
            [row] = await _query(conn, "purge_history", self._now(), limit)
        return max(int(row["history"]), int(row["keys"]))


async def _check_compatibility_level(conn: Connection) -> None:
    [row] = await _query(conn, "compatibility_level")
    level = row["compatibility_level"]
    if level < MIN_COMPATIBILITY_LEVEL:
        raise StoreError(
            f"SQL Server: the database is at compatibility level {level}; simplequeue needs "
            f"{MIN_COMPATIBILITY_LEVEL} or later (OPENJSON): ALTER DATABASE CURRENT SET "
            f"COMPATIBILITY_LEVEL = {MIN_COMPATIBILITY_LEVEL}"
        )


async def _take_migration_lock(conn: Connection) -> None:
    found = await _query(conn, "lock_migrations", MIGRATION_LOCK_TIMEOUT_MS)
    result = found[0]["result"] if found else None
    if result is None or result < 0:
        # -1: another process has been migrating for the whole timeout; lower: refused outright.
        error = DatabaseUnavailable if result == -1 else StoreError
        raise error(f"SQL Server: could not take the migration lock (sp_getapplock returned {result})")


async def _release_migration_lock(conn: Connection) -> None:
    """Release the session's lock. A connection that cannot is closed instead, which releases the lock
    too, rather than going back to the pool still holding it."""
    try:
        await _query(conn, "unlock_migrations")
        await conn.commit()  # in case the procedure opened an implicit transaction
    except Exception:
        with suppress(Exception):
            await conn.close()
