"""The worker loop: pop in batches, ahead of the free slots (a local buffer of prefetched items),
run a handler per item with bounded concurrency, keep every held lease alive (one lease keeper for
them all), then complete the item or fail it with a short traceback.

Sync handlers run in a thread (asyncio.to_thread); async ones on the loop. `stop()` (or SIGTERM /
SIGINT, with handle_signals) stops popping and starting; the handlers in flight finish and their
items are completed or failed, and the buffered items are handed back, before `run()` returns.
Completions go in batches: on the next pop (its `complete`), or together by POST /items/complete
when no pop is coming within a few milliseconds (see Worker). Logs name items by id, never their
payloads."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
from simplequeue.client.failures import error_text, log_reason
from simplequeue.client.models import CompleteResult, Item
from simplequeue.client.retries import UNSENT

log = logging.getLogger("simplequeue.client.worker")

Handler = Callable[[Item], Awaitable[Any]] | Callable[[Item], Any]


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (an object with an async __call__)
    )


POP_COMPLETES = 100
"""The most completions one pop carries (POST /pop's `complete` takes up to 100)."""
BATCH_COMPLETES = 1000
"""The most completions one POST /items/complete sends (it takes up to 1000)."""
POP_ITEMS = 100
"""The most items one pop leases (POST /pop's max_items)."""
HOLD_SECONDS = 0.25
"""How long, at most, finished items wait for the answer of a pop that carries completions (it
answers at once) to ride on the pop after it, instead of being sent alone."""
BEATS = 4
"""The lease keeper looks at the leases held this many times per extend_every."""
HANDED_BACK = "handed back unhandled: prefetched by a worker that stopped before starting it"
"""The error a handed-back item's record shows (a failure with no delay is the API's hand-back)."""


@dataclass(slots=True, eq=False)
class _Held:
    """A leased item this worker holds: waiting in the buffer, or its handler running."""

    item: Item
    renewed: float  # the loop's time when its lease was last set (the request's sending: earlier)
    buffered: bool = True
    lost: str = ""  # the code of the refused extension if the lease was lost, else ""


@dataclass(slots=True)
class _Finished:
    """An item whose handler returned, waiting for its completion to be sent."""

    item: Item
    lost: str  # the code of the refused extension if the lease was lost meanwhile, else ""
    at: float  # the loop's time when it finished


class Worker:
    """Runs `handler(item)` for the items of one queue.

    - concurrency: handlers running at once, at most.
    - prefetch: items leased ahead of the free slots, waiting in a local buffer (default: as many as
      concurrency; 0: a pop asks only for free slots). A handler that returns starts the next
      buffered item at once, without a request, and the pop that refills the buffer is in flight
      while the handlers run. A pop asks for what the slots and the buffer have room for (at most
      batch_size, default and most 100).
    - pops_in_flight (default 2): while a pop that carries completions is in flight, another may
      go, if it carries completions too and asks for a quarter of the room or more: the server
      runs their statements side by side. A long-poll (a pop carrying nothing) goes alone.
    - lease_seconds: the lease each pop asks for. One lease keeper extends every held item's lease
      (buffered or running) by as much every extend_every seconds (default: half of it), so a
      buffered item's lease never runs out unnoticed. An item whose extension is refused while
      buffered is dropped unstarted (logged): it is someone else's now.
    - wait_seconds: the long-poll of a pop that carries no completions (default 20 s; 1 s with
      exit_when_empty, so that a drain ends about a second after the queue is empty).
    - A handler that returns completes its item; one that raises fails it, with the exception's
      short traceback as the error (an ItemFailed's message alone), retried per the queue's
      backoff, dead on its last attempt.
    - exit_when_empty: run() returns once a pop that waited wait_seconds answers with nothing while
      no handler runs and nothing is buffered (a drain, for batch jobs and tests); otherwise it runs
      until stop().
    - stop() (or SIGTERM / SIGINT): no more pops and no more starts. The handlers in flight finish.
      The buffered items are handed back: failed with no delay (POST /items/{id}/fail,
      retry_after_seconds 0, error HANDED_BACK), so they are ready again at once. The API has no
      hand-back that takes back the attempt their pop counted: the attempt stays spent, so an item
      on its last attempt (per the queue's max_attempts, read then) would die; those are handled
      instead, before run() returns, as are all of them if the queue's settings cannot be read.
    - If an extension is refused (LeaseMismatch, LeaseExpired, ItemDead, ItemNotFound), the lease is
      lost: a running handler still finishes, and its completion is tried once, refused if someone
      else holds the item now. Both are logged.

    How completions are sent (never one request per item while the worker is busy): a handler that
    returns frees its slot and leaves its item with the others finished, to be completed in a
    batch.

    - The next pop carries up to 100 of them (POST /pop's `complete`: one request, one statement on
      the server, completes them and leases the next items). A pop that carries completions does
      not long-poll (wait 0), so it answers at once; the items that finish while it is in flight
      wait for its answer and ride on the pop after it (or, if none follows, or after
      HOLD_SECONDS, go as below).
    - Items that finish while no such pop is coming (a long-poll is waiting, the loop pauses after a
      failed pop, slots and buffer are full, or stop() came) are sent together by POST
      /items/complete (up to 1000 a request) once the oldest has waited complete_delay_seconds
      (default 5 ms).
    - run() sends every item still waiting before it returns; a pop that carries completions is
      waited for even after stop() (it answers at once; what it leased is handed back).
    - A completion is sent again only when its request certainly did nothing (answered with a
      503, a refusal or a store error, or it never left): one that failed without an answer may
      have arrived and is not sent again (client.retries' rule); its item comes back when its
      lease runs out if it was not completed. Each refused completion is logged, and its result
      discarded.
    - Failures are one POST /items/{id}/fail each (the API has no batch of them), sent by the
      item's own task: its slot stays busy until the answer, the pop loop does not wait for it.
    """

    def __init__(
        self,
        client: AsyncClient,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 8,
        prefetch: int | None = None,
        batch_size: int | None = None,
        pops_in_flight: int = 2,
        lease_seconds: int = 30,
        extend_every: float | None = None,
        wait_seconds: float | None = None,
        idle_pause_seconds: float = 1.0,
        exit_when_empty: bool = False,
        complete_delay_seconds: float = 0.005,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must be at least 0")
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.prefetch = concurrency if prefetch is None else prefetch
        self.batch_size = max(1, min(POP_ITEMS, batch_size or POP_ITEMS))
        self.pops_in_flight = max(1, pops_in_flight)
        self.lease_seconds = lease_seconds
        self.extend_every = extend_every if extend_every is not None else lease_seconds / 2
        self.wait_seconds = wait_seconds if wait_seconds is not None else 1.0 if exit_when_empty else 20.0
        self.idle_pause_seconds = idle_pause_seconds
        self.exit_when_empty = exit_when_empty
        self.complete_delay_seconds = complete_delay_seconds
        # A finished item waits at most this long for a pop in flight that carries completions
        # (within its lease: what is left of it after the last extension is at least half of it).
        self._hold = max(complete_delay_seconds, min(HOLD_SECONDS, lease_seconds / 8))
        self._async = _is_async(handler)
        self._stopping = asyncio.Event()
        self._changed = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._buffer: deque[_Held] = deque()  # prefetched, not started; oldest first
        # Every leased item whose handler has not returned, by (id, lease token): one item may be held
        # twice, its lease lost while its handler ran and leased again by this worker's next pop.
        self._held: dict[tuple[str, str], _Held] = {}
        self._draining = False  # stopped, and the buffer's last attempts are being handled
        self._finished: list[_Finished] = []  # oldest first
        self._carrying = 0  # pops in flight that carry completions
        self._closing = False  # run() is returning: send everything now
        self._wake = asyncio.Event()  # for the sender: something it waits on changed

    def stop(self) -> None:
        """Stop popping and starting items; run() returns once the handlers in flight have
        finished, the buffered items were handed back and every finished item's completion was
        sent."""
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
        self._closing = False
        sender = asyncio.create_task(self._send_completions(), name=f"simplequeue completions {self.queue}")
        keeper = asyncio.create_task(self._keep_leases(), name=f"simplequeue leases {self.queue}")
        try:
            await self._loop()
        finally:
            self._stopping.set()  # also when the loop ended with an error: start nothing more
            try:
                if self._buffer:
                    await self._hand_back()
                while self._running:
                    await asyncio.gather(*self._running, return_exceptions=True)
            finally:
                keeper.cancel()
                self._closing = True
                self._wake.set()
                await sender  # it returns once every finished item's completion was sent
                for sig, previous in installed:
                    loop.remove_signal_handler(sig)
                    signal.signal(sig, previous)

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("%s: stopping; %d handlers in flight will finish", sig.name, len(self._running))
        self.stop()

    async def _loop(self) -> None:
        """Pop while the slots and the buffer have room: one pop at a time, or up to pops_in_flight
        when the later ones carry completions (they answer at once) and ask for enough items to be
        worth a request. A pop's answer fills the buffer; stop() ends the loop once the pops in
        flight are answered (or abandoned, for a long-poll)."""
        loop = asyncio.get_running_loop()
        room_for = self.concurrency + self.prefetch
        worth = max(1, min(self.batch_size, room_for // 4))
        pops: dict[asyncio.Task[list[Item] | None], tuple[int, bool, float]] = {}  # asked, carried, sent
        mistake: BaseException | None = None
        while pops or not self.stopping:
            self._changed.clear()
            room = room_for - len(self._running) - len(self._buffer) - sum(p[0] for p in pops.values())
            if (
                not self.stopping
                and mistake is None
                and room > 0
                and (not pops or self._another_pop(pops, room >= worth))
            ):
                done = self._take(POP_COMPLETES)
                asked = min(room, self.batch_size)
                task = asyncio.create_task(self._pop(asked, done))
                task.add_done_callback(lambda _: self._changed.set())
                pops[task] = (asked, bool(done), loop.time())
                continue
            try:
                await self._changed.wait()
            except asyncio.CancelledError:
                for task in pops:
                    task.cancel()  # run() itself is being cancelled: leave no pop behind
                raise
            for task in [t for t in pops if t.done()]:
                _, carried, sent = pops.pop(task)
                try:
                    items = task.result()
                except BaseException as exc:  # the caller's mistake: run() ends with it
                    mistake = mistake or exc
                    self.stop()
                    continue
                if items is None:
                    continue
                # A drain ends on an empty answer after a wait of wait_seconds (a pop that carries
                # completions waits 0).
                waited = not carried or self.wait_seconds == 0
                idle = not self._running and not self._buffer and not pops
                if not items and self.exit_when_empty and waited and idle:
                    log.info("%s: nothing to pop and nothing running; done", self.queue)
                    self.stop()
                for item in items:
                    held = _Held(item, sent)
                    self._held[item.id, item.lease_token] = held
                    self._buffer.append(held)
                self._start()
        if mistake is not None:
            raise mistake

    def _another_pop(self, pops: dict[Any, tuple[int, bool, float]], worth_it: bool) -> bool:
        """Whether a pop may go while `pops` are in flight: it carries completions (it answers at
        once), asks for enough, and none in flight is a long-poll (that one found the queue empty:
        the completions go by POST /items/complete, as they would without it)."""
        return (
            len(pops) < self.pops_in_flight
            and bool(self._finished)
            and worth_it
            and all(carried for _, carried, _ in pops.values())
        )

    def _start(self) -> None:
        """Start buffered items in the free slots (after stop(), only the last attempts that
        _hand_back leaves)."""
        while (
            self._buffer and len(self._running) < self.concurrency and (not self.stopping or self._draining)
        ):
            held = self._buffer.popleft()
            held.buffered = False
            task = asyncio.create_task(self._handle(held), name=f"simplequeue item {held.item.id}")
            self._running.add(task)
            task.add_done_callback(self._finished_task)

    def _finished_task(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._start()
        self._changed.set()

    async def _hand_back(self) -> None:
        """The buffered items, after stop(): failed with no delay (ready again at once), except
        those on their last attempt, which that would kill: those are handled."""
        try:
            most: int | None = int((await self.client.stats(self.queue)).settings["max_attempts"])
        except Exception as exc:  # any failure: handling them all loses none
            log.warning("%s: queue settings unreadable (%s); handling the buffered items", self.queue, exc)
            most = None
        back = [h for h in self._buffer if most is not None and h.item.attempts < most]
        self._buffer = deque(h for h in self._buffer if h not in back)
        for held in back:
            del self._held[held.item.id, held.item.lease_token]
        if self._buffer:
            log.info(
                "%s: %d buffered items are on their last attempt; handling them",
                self.queue,
                len(self._buffer),
            )
            self._draining = True
            self._start()
        if back:
            log.info("%s: handing back %d buffered items", self.queue, len(back))
            await asyncio.gather(*(self._give_back(h.item) for h in back))

    async def _give_back(self, item: Item) -> None:
        try:
            await self.client.fail(item, HANDED_BACK, retry_after_seconds=0)
        except (Conflict, ItemNotFound) as exc:
            log.warning("item %s: hand-back refused (%s); its lease is no longer ours", item.id, exc.code)
        except SimplequeueError as exc:
            log.warning("item %s: hand-back failed (%s); it comes back when its lease runs out", item.id, exc)

    def _take(self, most: int) -> list[_Finished]:
        taken, self._finished = self._finished[:most], self._finished[most:]
        return taken

    def _put_back(self, finished: list[_Finished]) -> None:
        """Completions whose request was answered without doing them: first in line again."""
        self._finished[:0] = finished
        self._wake.set()

    async def _pop(self, max_items: int, done: list[_Finished]) -> list[Item] | None:
        """One pop, completing `done` first. With completions it does not long-poll, and it is
        waited for even when stop() comes first (abandoned, it would leave unknown whether they were
        done). Without, it long-polls, and it is abandoned when stop() comes first (a waiting
        long-poll that its client leaves leases nothing; an answer lost in that instant comes back
        when its lease runs out). None: no answer (stopped, or a passing failure)."""
        self._carrying += bool(done)
        pop = asyncio.create_task(self._complete_and_pop(max_items, done))
        waits: set[asyncio.Task[Any]] = {pop}
        if not done:
            waits.add(asyncio.create_task(self._stopping.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pop.cancel()  # run() itself is being cancelled: leave no pop behind
            raise
        finally:
            for task in waits - {pop}:
                task.cancel()
            self._carrying -= bool(done)
            if self._finished:
                self._wake.set()  # no pop is coming for them if this loop does not pop next
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
            self._unsent(done, exc)
            log.warning("pop from %s: %s; pausing %.1fs", self.queue, exc.code, self.idle_pause_seconds)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.idle_pause_seconds)
            return None
        except BaseException as exc:
            self._unsent(done, exc)  # sent by run() before it returns, if they were not done
            raise

    def _unsent(self, done: list[_Finished], exc: BaseException) -> None:
        """A pop that carried `done` failed: they are sent again if it did nothing, else left."""
        if not done:
            return
        if _not_done(exc):
            self._put_back(done)
        else:
            log.warning(
                "%d finished items: %s; not sent again (it may have arrived): those not completed"
                " come back when their leases run out",
                len(done),
                exc,
            )

    async def _complete_and_pop(self, max_items: int, done: list[_Finished]) -> list[Item]:
        if not done:
            return await self.client.pop(
                self.queue,
                max_items=max_items,
                wait_seconds=self.wait_seconds,
                lease_seconds=self.lease_seconds,
            )
        results, items = await self.client.complete_and_pop(
            [f.item for f in done],
            self.queue,
            max_items=max_items,
            wait_seconds=0,  # answer at once: the items finishing meanwhile wait for it
            lease_seconds=self.lease_seconds,
        )
        _settle(done, results)
        return items

    async def _send_completions(self) -> None:
        """The finished items no pop is about to carry, by POST /items/complete: once the oldest
        has waited complete_delay_seconds (or HOLD_SECONDS while a pop that carries completions
        is in flight: the next pop takes them), and all at once when run() is returning."""
        loop = asyncio.get_running_loop()
        while True:
            timeout: float | None
            if not self._finished:
                if self._closing:
                    return
                timeout = None
            elif self._closing:
                timeout = 0.0
            else:
                held = self._hold if self._carrying else self.complete_delay_seconds
                timeout = self._finished[0].at + held - loop.time()
            if timeout is None or timeout > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                continue
            batch = self._take(BATCH_COMPLETES)
            try:
                results = await self.client.complete_many([f.item for f in batch])
            except Exception as exc:  # this task must outlive any one request
                log.warning(
                    "%d finished items: %s; they come back when their leases run out",
                    len(batch),
                    exc if isinstance(exc, SimplequeueError) else type(exc).__name__,
                )
                continue
            _settle(batch, results)

    async def _handle(self, held: _Held) -> None:
        item = held.item
        failure: BaseException | None = None
        try:
            if self._async:
                await self.handler(item)
            else:
                await asyncio.to_thread(self.handler, item)
        except Exception as exc:
            failure = exc
        finally:
            self._held.pop((item.id, item.lease_token), None)  # the lease keeper lets it go
        if failure is None:
            # Completed with others (see the class's docstring); a lost lease's completion too:
            # tried once, its refusal logged.
            self._finished.append(_Finished(item, held.lost, asyncio.get_running_loop().time()))
            if len(self._finished) == 1:
                self._wake.set()
            return
        try:
            log.warning("item %s (attempt %d) failed: %s", item.id, item.attempts, log_reason(failure))
            await self.client.fail(item, error_text(failure))
        except (Conflict, ItemNotFound) as exc:
            after = f" after the lease was lost ({held.lost})" if held.lost else ""
            _discarded(item, "failure", exc.code, after)
        except SimplequeueError as exc:
            log.warning("item %s: %s; the item comes back when its lease runs out", item.id, exc)

    async def _keep_leases(self) -> None:
        """One task for every held item's lease (one per item would cost a task and a timer each):
        BEATS times per extend_every, extend those last set at least extend_every ago, less a beat.
        A refusal ends an item's lease (someone else's, or gone); a transient failure is tried
        again at the next beat. Cancelled by run() when it returns."""
        loop = asyncio.get_running_loop()
        beat = self.extend_every / BEATS
        while True:
            await asyncio.sleep(beat)
            due_before = loop.time() - (self.extend_every - beat)
            due = [h for h in self._held.values() if not h.lost and h.renewed <= due_before]
            if due:
                await asyncio.gather(*(self._extend(h) for h in due))

    async def _extend(self, held: _Held) -> None:
        item = held.item
        sent = asyncio.get_running_loop().time()
        try:
            await self.client.extend(item, self.lease_seconds)
        except (Conflict, ItemNotFound) as exc:
            if self._held.get((item.id, item.lease_token)) is not held:
                return  # its handler returned meanwhile: its completion settles it
            log.warning("item %s: lease extension refused (%s); the lease is lost", item.id, exc.code)
            held.lost = exc.code
            if held.buffered:
                log.warning("item %s: not started (its lease was lost while it waited)", item.id)
                self._buffer.remove(held)
                del self._held[item.id, item.lease_token]
                self._changed.set()
            return
        except SimplequeueError as exc:
            log.warning("item %s: lease extension failed (%s); trying again", item.id, exc.code)
            return
        held.renewed = sent


def _not_done(exc: BaseException) -> bool:
    """Whether a request that failed with `exc` certainly did nothing: the service answered with a
    503, a refusal (4xx) or a store error (its transaction rolled back), or the request never left.
    No answer after it left, or an unexpected error (500), may have come after the work."""
    if not isinstance(exc, SimplequeueError):
        return False
    if exc.status is None:
        return isinstance(exc.__cause__, UNSENT)
    return exc.status != 500 or isinstance(exc, StoreError)


def _settle(finished: list[_Finished], results: list[CompleteResult]) -> None:
    for entry, result in zip(finished, results, strict=True):
        if result.result != "completed":
            after = f" after the lease was lost ({entry.lost})" if entry.lost else ""
            _discarded(entry.item, "completion", _REFUSED.get(result.result, result.result), after)


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
