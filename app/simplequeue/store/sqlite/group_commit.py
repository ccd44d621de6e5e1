"""Group commit: the SQLite store's hot transactions that wait for the writer share one commit.

With `synchronous = FULL`, each commit waits for the disk (an fsync of the WAL), and that wait,
not the statements, bounds how many pushes, pops and completions one file takes a second. So the
calls that queue up while a transaction runs are run together, in the next one: BEGIN IMMEDIATE,
each call's body under a savepoint of its own (one that raises is rolled back alone and raises to
its caller only), one COMMIT for all. Every caller is answered after that COMMIT: a 2xx still
means committed. A COMMIT that fails fails every call of its group, none of which committed.

No call waits for others to come: a group is whatever queued while the writer was busy, so one
call alone runs as it did before (a plain transaction, no savepoint). A caller that gives up
(cancelled, or its wait for the writer timed out) before its call is taken leaves nothing behind;
once taken, the call runs and commits, as a request cut off just after its commit would.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiosqlite

from simplequeue.store.sqlite.statements import on_thread

T = TypeVar("T")

MOST = 64
"""The most calls one transaction runs (a bound on how long the first of them waits for the rest)."""
SAVEPOINT = "sq_call"


@dataclass(eq=False)
class _Call:
    body: Callable[..., Any]
    args: tuple[Any, ...]
    answer: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    taken: bool = False


def run_group(conn: sqlite3.Connection, calls: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
    """On the writer's thread: the calls in one transaction, each body's result or the exception it
    raised (its writes rolled back to its savepoint), in order. Raises only for the whole group
    (BEGIN or COMMIT failed: nothing of it committed)."""
    conn.execute("BEGIN IMMEDIATE")
    results: list[Any] = []
    try:
        if len(calls) == 1:
            body, args = calls[0]
            results.append(body(conn, *args))  # alone, it raises as a plain transaction's body would
        else:
            for body, args in calls:
                conn.execute(f"SAVEPOINT {SAVEPOINT}")
                try:
                    results.append(body(conn, *args))
                except Exception as exc:
                    conn.execute(f"ROLLBACK TO {SAVEPOINT}")
                    results.append(_Raised(exc))
                finally:
                    conn.execute(f"RELEASE {SAVEPOINT}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return results


@dataclass(frozen=True, slots=True)
class _Raised:
    error: Exception


class GroupCommit:
    """The calls waiting for the store's writer, run in groups by one task at a time."""

    def __init__(
        self,
        writer_turn: Callable[[], AbstractAsyncContextManager[aiosqlite.Connection]],
        timeout_seconds: float,
    ) -> None:
        self._writer_turn = writer_turn
        self._timeout = timeout_seconds
        self._waiting: deque[_Call] = deque()
        self._runner: asyncio.Task[None] | None = None

    async def run(self, body: Callable[..., T], /, *args: Any) -> T:
        """`body(sqlite3_connection, *args)` in a write transaction, perhaps with others' calls.
        Raises what the body raised, what the group's BEGIN or COMMIT raised, or TimeoutError when
        the writer's turn did not come in time (the call then never ran)."""
        call = _Call(body, args)
        self._waiting.append(call)
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run_groups(), name="simplequeue-sqlite-commits")
        try:
            async with asyncio.timeout(self._timeout):
                result: T = await asyncio.shield(call.answer)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if not call.taken:
                self._waiting.remove(call)
                raise
            # Taken: it runs and commits whatever its caller does now. One that only timed out is
            # answered by that commit (statements are not cut off: see SqliteStore._writer_turn);
            # one that was cancelled is cancelled still, once it committed: a task told to stop
            # must stop, not go on to its next await as if nothing was asked.
            if isinstance(exc, asyncio.CancelledError):
                with contextlib.suppress(Exception):  # committed or refused: cancelled either way
                    await asyncio.shield(call.answer)
                raise
            result = await asyncio.shield(call.answer)
        return result

    async def _run_groups(self) -> None:
        while self._waiting:
            try:
                turn = self._writer_turn()
                writer = await turn.__aenter__()
            except Exception:  # no turn in time (DatabaseUnavailable): each caller's timeout answers
                await asyncio.sleep(0.01)
                continue
            calls: list[_Call] = []
            try:
                while self._waiting and len(calls) < MOST:
                    call = self._waiting.popleft()
                    call.taken = True
                    calls.append(call)
                results = await on_thread(writer, run_group, [(c.body, c.args) for c in calls])
            except Exception as exc:  # the group's BEGIN or COMMIT: each of its callers' failure
                for call in calls:
                    _settle(call.answer, exc)
                continue
            finally:
                await turn.__aexit__(None, None, None)
            for call, result in zip(calls, results, strict=True):
                _settle(call.answer, result)


def _settle(answer: asyncio.Future[Any], result: Any) -> None:
    if answer.done():
        return
    if isinstance(result, _Raised):
        answer.set_exception(result.error)
    elif isinstance(result, BaseException):
        answer.set_exception(result)
    else:
        answer.set_result(result)
