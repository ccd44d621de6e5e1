"""The worker loop: pop in batches, run a handler per item with bounded concurrency, keep each
lease alive while its handler runs, then complete the item or fail it with a short traceback.

Sync handlers run in a thread (asyncio.to_thread); async ones on the loop. `stop()` (or SIGTERM /
SIGINT, with handle_signals) stops popping; the handlers in flight finish and their items are
completed or failed before `run()` returns. Logs name items by id, never their payloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from simplequeue.client.core import AsyncClient
from simplequeue.client.errors import (
    Conflict,
    InternalError,
    ItemNotFound,
    SimplequeueError,
    StoreError,
    Unavailable,
)
from simplequeue.client.models import Item

log = logging.getLogger("simplequeue.client.worker")

Handler = Callable[[Item], Awaitable[Any]] | Callable[[Item], Any]

MAX_TRACEBACK_CHARS = 4000
TRACEBACK_FRAMES = 5


def short_traceback(
    exc: BaseException, *, frames: int = TRACEBACK_FRAMES, limit: int = MAX_TRACEBACK_CHARS
) -> str:
    """The exception with its last few frames, cut to `limit` characters from the front (the
    exception's own line, at the end, is kept)."""
    text = "".join(traceback.format_exception(exc, limit=-frames)).replace("\x00", "\\0").strip()
    if len(text) > limit:
        text = "…" + text[-(limit - 1) :]
    return text or type(exc).__name__


class ItemFailed(Exception):
    """Raise from a handler to fail its item with this message as the error, instead of a
    traceback (e.g. a command's exit status and the tail of its stderr)."""


def error_text(exc: BaseException) -> str:
    """What a failed item's error says: an ItemFailed's message, else a short traceback."""
    if isinstance(exc, ItemFailed) and str(exc):
        text = str(exc).replace("\x00", "\\0").strip()
        return text if len(text) <= MAX_TRACEBACK_CHARS else "…" + text[-(MAX_TRACEBACK_CHARS - 1) :]
    return short_traceback(exc)


def _reason(exc: BaseException) -> str:
    """For the log line: an ItemFailed's first line (its author wrote it to be read), else only
    the exception's type (its text may quote a payload)."""
    if isinstance(exc, ItemFailed) and str(exc).strip():
        return str(exc).strip().splitlines()[0][:200]
    return type(exc).__name__


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (an object with an async __call__)
    )


class Worker:
    """Runs `handler(item)` for the items of one queue.

    - concurrency: handlers running at once, at most; a pop never asks for more items than there
      are free slots (and at most batch_size, default: concurrency, at most 100).
    - lease_seconds: the lease each pop asks for; while a handler runs, the lease is extended by
      as much every extend_every seconds (default: half of it).
    - wait_seconds: the long-poll of each pop.
    - A handler that returns completes its item; one that raises fails it, with the exception's
      short traceback as the error (an ItemFailed's message alone), retried per the queue's
      backoff, dead on its last attempt.
    - exit_when_empty: run() returns once a pop answers with nothing while no handler runs (a
      drain, for batch jobs and tests); otherwise it runs until stop().
    - If an extension is refused (LeaseMismatch, LeaseExpired, ItemDead, ItemNotFound), the lease is
      lost: the handler still finishes, and its completion is tried once, refused with 409 if
      someone else holds the item now. Both are logged.
    """

    def __init__(
        self,
        client: AsyncClient,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 8,
        batch_size: int | None = None,
        lease_seconds: int = 30,
        extend_every: float | None = None,
        wait_seconds: float = 20,
        idle_pause_seconds: float = 1.0,
        exit_when_empty: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.batch_size = max(1, min(100, batch_size or concurrency))
        self.lease_seconds = lease_seconds
        self.extend_every = extend_every if extend_every is not None else lease_seconds / 2
        self.wait_seconds = wait_seconds
        self.idle_pause_seconds = idle_pause_seconds
        self.exit_when_empty = exit_when_empty
        self._async = _is_async(handler)
        self._stopping = asyncio.Event()
        self._changed = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        # Items handled successfully, waiting to be completed by the next pop (one request per
        # item instead of two). Only while no pop is in flight: a long-poll may wait for seconds,
        # so an item finished then is completed at once instead.
        self._finished_items: list[Item] = []
        self._popping = False

    def stop(self) -> None:
        """Stop popping; run() returns once the handlers in flight have finished."""
        self._stopping.set()
        self._changed.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def run(self, *, handle_signals: bool = False) -> None:
        """Pop and handle until stop() (or SIGTERM/SIGINT, with handle_signals)."""
        loop = asyncio.get_running_loop()
        installed: list[tuple[signal.Signals, Any]] = []
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                installed.append((sig, signal.getsignal(sig)))
                loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self._loop()
        finally:
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)
            await self._complete_leftovers()
            for sig, previous in installed:
                loop.remove_signal_handler(sig)
                signal.signal(sig, previous)

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("%s: stopping; %d handlers in flight will finish", sig.name, len(self._running))
        self.stop()

    async def _loop(self) -> None:
        while not self.stopping:
            free = self.concurrency - len(self._running)
            if free <= 0:
                self._changed.clear()
                await self._changed.wait()
                continue
            finished, self._finished_items = self._finished_items, []
            self._popping = True
            try:
                items = await self._pop(min(free, self.batch_size), finished)
            finally:
                self._popping = False
            if items is None:
                self._finished_items[:0] = finished  # no answer: completed by the next try
                continue
            if not items and self.exit_when_empty and not self._running:
                log.info("%s: nothing to pop and nothing running; done", self.queue)
                self.stop()
            for item in items:
                task = asyncio.create_task(self._handle(item), name=f"simplequeue item {item.id}")
                self._running.add(task)
                task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._changed.set()

    async def _pop(self, max_items: int, finished: list[Item]) -> list[Item] | None:
        """One pop, completing `finished` first; abandoned when stop() comes first (a waiting
        long-poll that its client leaves leases nothing; an answer lost in that instant comes back
        when its lease runs out). None: no answer (stopped, or a passing failure)."""
        pop = asyncio.create_task(self._complete_and_pop(max_items, finished))
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({pop, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pop.cancel()  # run() itself is being cancelled: leave no pop behind
            raise
        finally:
            stopping.cancel()
        if not pop.done():
            pop.cancel()
            with contextlib.suppress(asyncio.CancelledError, SimplequeueError):
                await pop
            return None
        try:
            return pop.result()
        except (Unavailable, InternalError, StoreError) as exc:
            # What may pass: pause, and pop again. Anything else (a bad queue name, a lease_seconds
            # out of range) is the caller's mistake and ends run().
            log.warning("pop from %s: %s; pausing %.1fs", self.queue, exc.code, self.idle_pause_seconds)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.idle_pause_seconds)
            return None

    async def _complete_and_pop(self, max_items: int, finished: list[Item]) -> list[Item]:
        if not finished:
            return await self.client.pop(
                self.queue,
                max_items=max_items,
                wait_seconds=self.wait_seconds,
                lease_seconds=self.lease_seconds,
            )
        results, items = await self.client.complete_and_pop(
            finished,
            self.queue,
            max_items=max_items,
            wait_seconds=self.wait_seconds,
            lease_seconds=self.lease_seconds,
        )
        for item, result in zip(finished, results, strict=True):
            if result.result != "completed":
                _discarded(item, "completion", _REFUSED.get(result.result, result.result))
        return items

    async def _complete_leftovers(self) -> None:
        """Items finished after the last pop: completed in batches before run() returns."""
        while self._finished_items:
            batch, self._finished_items = self._finished_items[:1000], self._finished_items[1000:]
            try:
                results = await self.client.complete_many(batch)
            except SimplequeueError as exc:
                log.warning(
                    "%d finished items: %s; they come back when their leases run out", len(batch), exc
                )
                continue
            for item, result in zip(batch, results, strict=True):
                if result.result != "completed":
                    _discarded(item, "completion", _REFUSED.get(result.result, result.result))

    async def _handle(self, item: Item) -> None:
        done = asyncio.Event()
        lost: list[SimplequeueError] = []
        keeper = asyncio.create_task(self._keep_lease(item, done, lost))
        failure: BaseException | None = None
        try:
            if self._async:
                await self.handler(item)
            else:
                await asyncio.to_thread(self.handler, item)
        except Exception as exc:
            failure = exc
        finally:
            done.set()
            await keeper
        try:
            if failure is None and not (self._popping or self.stopping or lost):
                self._finished_items.append(item)  # the loop pops next, and completes it then
            elif failure is None:
                await self.client.complete(item)
            else:
                log.warning("item %s (attempt %d) failed: %s", item.id, item.attempts, _reason(failure))
                await self.client.fail(item, error_text(failure))
        except (Conflict, ItemNotFound) as exc:
            action = "completion" if failure is None else "failure"
            _discarded(item, action, exc.code, f" after the lease was lost ({lost[0].code})" if lost else "")
        except SimplequeueError as exc:
            log.warning("item %s: %s; the item comes back when its lease runs out", item.id, exc)

    async def _keep_lease(self, item: Item, done: asyncio.Event, lost: list[SimplequeueError]) -> None:
        """Extend the lease every extend_every seconds until `done`. A refusal ends it (the lease
        is someone else's, or gone); a transient failure is tried again at the next beat."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self.extend_every)
                return
            try:
                await self.client.extend(item, self.lease_seconds)
            except (Conflict, ItemNotFound) as exc:
                log.warning("item %s: lease extension refused (%s); the lease is lost", item.id, exc.code)
                lost.append(exc)
                return
            except SimplequeueError as exc:
                log.warning("item %s: lease extension failed (%s); trying again", item.id, exc.code)


# A completion's result, named as the error DELETE /items/{id} would have answered with.
_REFUSED = {"not_found": "ItemNotFound", "lease_mismatch": "LeaseMismatch", "dead": "ItemDead"}


def _discarded(item: Item, action: str, why: str, after: str = "") -> None:
    log.warning(
        "item %s: %s refused (%s)%s; its lease is no longer ours, the result is discarded",
        item.id,
        action,
        why,
        after,
    )


def run_worker(
    base_url: str,
    queue: str,
    handler: Handler,
    *,
    client_options: dict[str, Any] | None = None,
    **worker_options: Any,
) -> None:
    """Run a Worker until SIGTERM or SIGINT, from synchronous code (asyncio.run). The handler may be
    sync (run in a thread) or async."""

    async def main() -> None:
        async with AsyncClient(base_url, **(client_options or {})) as client:
            await Worker(client, queue, handler, **worker_options).run(handle_signals=True)

    asyncio.run(main())
