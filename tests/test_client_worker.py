"""The SDK's worker loop against the real app in-process (real time: leases run out for real)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from uuid import uuid4

import httpx
import pytest
from asgi_lifespan import LifespanManager
from simplequeue.client import AsyncClient, Item, ItemFailed, RetryPolicy, ValidationError, Worker
from simplequeue.main import create_app
from simplequeue.settings import Settings

from tests.test_e2e import serving


class Recording(httpx.AsyncBaseTransport):
    """The app's transport, noting each pop's size, each extension's answer and each completion
    request; while `hold_pops` is set, pops wait for it before they reach the app."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.pops: list[tuple[int, int]] = []  # (max_items asked, items got)
        self.extends: list[int] = []  # statuses
        self.completed_by_pop = 0
        self.requests: list[str] = []  # "METHOD path", in order
        self.completions: list[tuple[str, list[str]]] = []  # ("pop"/"batch"/"delete", ids), as sent
        self.hold_pops: asyncio.Event | None = None
        self.held = 0  # pops that waited for hold_pops

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/pop":
            self.completions.append(
                ("pop", [r["id"] for r in json.loads(request.content).get("complete", [])])
            )
            if self.hold_pops is not None:
                self.held += 1
                await self.hold_pops.wait()
        elif path == "/items/complete":
            self.completions.append(("batch", [r["id"] for r in json.loads(request.content)["items"]]))
        elif request.method == "DELETE" and path.startswith("/items/"):
            self.completions.append(("delete", [path.rsplit("/", 1)[1]]))
        response = await self.inner.handle_async_request(request)
        self.requests.append(f"{request.method} {path}")
        if path == "/pop" and response.status_code == 200:
            body = await response.aread()
            asked = json.loads(request.content)["max_items"]
            self.pops.append((asked, len(json.loads(body)["items"])))
            self.completed_by_pop += sum(r["result"] == "completed" for r in json.loads(body)["completed"])
        elif path.endswith("/extend"):
            self.extends.append(response.status_code)
        return response

    def sent(self, route: str) -> list[list[str]]:
        """The ids of each completion request of one route ("pop": only pops that carried some)."""
        return [ids for kind, ids in self.completions if kind == route and ids]


@pytest.fixture
async def app_transport(tmp_path: Path) -> AsyncIterator[Recording]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'worker.db'}", sweep=False)
    async with LifespanManager(create_app(settings)) as manager:
        yield Recording(httpx.ASGITransport(app=manager.app))


@pytest.fixture
async def sq(app_transport: Recording) -> AsyncIterator[AsyncClient]:
    async with AsyncClient("http://sq", transport=app_transport) as client:
        yield client


async def until(condition: Callable[[], Awaitable[bool]] | Callable[[], bool]) -> None:
    """Wait for a condition; the test's own timeout bounds it, not a duration asserted here."""
    async with asyncio.timeout(30):
        while True:
            result = condition()
            if result if isinstance(result, bool) else await result:
                return
            await asyncio.sleep(0.01)


async def settled(sq: AsyncClient, queue: str, finished: int) -> bool:
    stats = await sq.stats(queue)
    return stats.completed_in_history + stats.dead == finished and stats.leased == 0


async def test_concurrency_is_bounded_and_pops_come_in_batches(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    await sq.push_batch([{"payload": n} for n in range(10)], queue=queue)
    active = 0
    most = 0
    gate = asyncio.Event()

    async def handle(item: Item) -> None:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await gate.wait()
        active -= 1

    # prefetch=0: a pop asks for the free slots alone (prefetching: see the tests below).
    worker = Worker(sq, queue, handle, concurrency=3, prefetch=0, wait_seconds=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: active == 3)
    assert (await sq.stats(queue)).leased == 3  # never popped more than it had room for
    gate.set()
    await until(lambda: settled(sq, queue, 10))
    worker.stop()
    await running
    assert most == 3
    assert app_transport.pops[0] == (3, 3)  # one pop for the three free slots
    assert all(asked <= 3 for asked, _ in app_transport.pops)
    assert (await sq.stats(queue)).completed_in_history == 10


async def test_the_lease_is_extended_while_the_handler_runs(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    pushed = await sq.push({"slow": True}, queue=queue)

    async def handle(item: Item) -> None:
        # Run past the 2-second lease: ten extensions every 0.3 s take longer than the lease.
        await until(lambda: len(app_transport.extends) >= 10)
        assert await sq.pop(queue) == []  # nobody else can have it
        assert (await sq.get_item(item.id)).status == "leased"

    worker = Worker(sq, queue, handle, lease_seconds=2, extend_every=0.3, wait_seconds=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: settled(sq, queue, 1))
    worker.stop()
    await running
    assert set(app_transport.extends) == {200}
    stats = await sq.stats(queue)
    assert stats.completed_in_history == 1
    assert stats.ready == 0
    history = await sq.history(queue, outcome="completed")
    assert [(h.id, h.attempts) for h in history.items] == [(pushed.id, 1)]  # one attempt only


async def test_a_handler_exception_fails_the_item_with_a_short_traceback(sq: AsyncClient, queue: str) -> None:
    await sq.put_queue(queue, max_attempts=1)
    pushed = await sq.push({"to": "secret@example.com"}, queue=queue)

    async def handle(item: Item) -> None:
        raise ValueError("smtp 451 " + "x" * 10_000)

    worker = Worker(sq, queue, handle, wait_seconds=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: settled(sq, queue, 1))
    worker.stop()
    await running
    info = await sq.get_item(pushed.id)
    assert info.status == "dead"
    [error] = info.errors
    assert error.error.startswith("…")
    assert len(error.error) <= 4000
    assert error.error.endswith("x")
    assert "ValueError: smtp 451" not in error.error[:100]


async def test_the_traceback_names_the_frames_and_the_exception(sq: AsyncClient, queue: str) -> None:
    await sq.put_queue(queue, max_attempts=1)
    pushed = await sq.push(1, queue=queue)

    def deep_inside(n: int) -> None:
        raise KeyError(f"missing {n}")

    def handle(item: Item) -> None:
        deep_inside(item.payload)

    worker = Worker(sq, queue, handle, wait_seconds=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: settled(sq, queue, 1))
    worker.stop()
    await running
    [error] = (await sq.get_item(pushed.id)).errors
    assert "Traceback" in error.error
    assert "deep_inside" in error.error
    assert error.error.endswith("KeyError: 'missing 1'")


async def test_item_failed_fails_with_its_message_alone(sq: AsyncClient, queue: str) -> None:
    await sq.put_queue(queue, max_attempts=1)
    pushed = await sq.push(1, queue=queue)

    def handle(item: Item) -> None:
        raise ItemFailed("upstream said 451: try later")

    await Worker(sq, queue, handle, wait_seconds=0.2, exit_when_empty=True).run()
    [error] = (await sq.get_item(pushed.id)).errors
    assert error.error == "upstream said 451: try later"


async def test_exit_when_empty_drains_then_returns(sq: AsyncClient, queue: str) -> None:
    await sq.push_batch([{"payload": n} for n in range(7)], queue=queue)
    handled: list[int] = []

    async def handle(item: Item) -> None:
        await asyncio.sleep(0.01)
        handled.append(item.payload)

    await Worker(sq, queue, handle, concurrency=3, wait_seconds=0.1, exit_when_empty=True).run()
    assert sorted(handled) == list(range(7))
    assert await settled(sq, queue, 7)


async def test_exit_when_empty_waits_out_a_passing_outage() -> None:
    # A 503 is no answer, not an empty queue: the worker pauses and pops again.
    answers = [
        httpx.Response(503, json={"error": "DatabaseUnavailable", "detail": "down"}),
        httpx.Response(200, json={"items": []}),
    ]
    asked = 0

    def answer(request: httpx.Request) -> httpx.Response:
        nonlocal asked
        asked += 1
        return answers[asked - 1]

    async with AsyncClient(
        "http://sq", transport=httpx.MockTransport(answer), retry=RetryPolicy(attempts=1)
    ) as client:
        await Worker(client, "q", lambda i: None, idle_pause_seconds=0, exit_when_empty=True).run()
    assert asked == 2


async def test_stop_lets_the_handlers_in_flight_finish_and_pops_no_more(sq: AsyncClient, queue: str) -> None:
    await sq.push_batch([{"payload": n} for n in range(5)], queue=queue)
    started: list[int] = []
    finished: list[int] = []
    gate = asyncio.Event()

    async def handle(item: Item) -> None:
        started.append(item.payload)
        await gate.wait()
        finished.append(item.payload)

    worker = Worker(sq, queue, handle, concurrency=2, wait_seconds=5)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(started) == 2)
    worker.stop()
    await asyncio.sleep(0.05)
    assert not running.done()  # waiting for its handlers
    gate.set()
    await running
    assert sorted(finished) == sorted(started)
    assert len(started) == 2
    stats = await sq.stats(queue)
    assert (stats.completed_in_history, stats.leased, stats.ready) == (2, 0, 3)


async def test_sync_handlers_run_in_a_thread(sq: AsyncClient, queue: str) -> None:
    await sq.push_batch([{"payload": n} for n in range(4)], queue=queue)
    threads: set[int] = set()
    lock = threading.Lock()

    def handle(item: Item) -> None:
        with lock:
            threads.add(threading.get_ident())

    worker = Worker(sq, queue, handle, concurrency=2, wait_seconds=0.2)
    running = asyncio.create_task(worker.run())
    await until(lambda: settled(sq, queue, 4))
    worker.stop()
    await running
    assert threads
    assert threading.get_ident() not in threads


async def test_sigterm_stops_the_worker_after_its_handlers(sq: AsyncClient, queue: str) -> None:
    await sq.push_batch([{"payload": n} for n in range(3)], queue=queue)
    before = signal.getsignal(signal.SIGTERM)
    started: list[int] = []
    gate = asyncio.Event()

    async def handle(item: Item) -> None:
        started.append(item.payload)
        await gate.wait()

    worker = Worker(sq, queue, handle, concurrency=1, wait_seconds=5)
    running = asyncio.create_task(worker.run(handle_signals=True))
    await until(lambda: len(started) == 1)
    os.kill(os.getpid(), signal.SIGTERM)
    await until(lambda: worker.stopping)
    gate.set()
    await running
    assert signal.getsignal(signal.SIGTERM) == before
    stats = await sq.stats(queue)
    assert (stats.completed_in_history, stats.leased, stats.ready) == (1, 0, 2)


async def test_a_lost_lease_is_logged_and_its_result_discarded(
    sq: AsyncClient, app_transport: Recording, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    await sq.push({"secret": "s3cr3t"}, queue=queue)
    taken: list[Item] = []

    async def handle(item: Item) -> None:
        # Someone else gets the item meanwhile: fail it under our token, pop it again.
        await sq.fail(item, "handed over", retry_after_seconds=0)
        taken.extend(await sq.pop(queue, lease_seconds=600))
        await until(lambda: 409 in app_transport.extends)

    # prefetch=0: no pop of the worker's own is in flight to take the item back meanwhile.
    worker = Worker(
        sq, queue, handle, concurrency=1, prefetch=0, lease_seconds=5, extend_every=0.05, wait_seconds=0.2
    )
    caplog.set_level(logging.WARNING, logger="simplequeue.client")
    running = asyncio.create_task(worker.run())
    await until(lambda: bool(taken) and any("discarded" in r.message for r in caplog.records))
    worker.stop()
    await running
    messages = " ".join(r.message for r in caplog.records)
    assert "lease extension refused (LeaseMismatch)" in messages
    assert "completion refused (LeaseMismatch) after the lease was lost" in messages
    assert "s3cr3t" not in caplog.text  # logs name items by id, never their payloads
    info = await sq.get_item(taken[0].id)
    assert info.status == "leased"
    assert info.attempts == 2


async def test_a_pop_that_fails_for_a_while_pauses_and_pops_again() -> None:
    item = {
        "id": str(uuid4()),
        "queue": "q",
        "payload": 1,
        "created_at": "2026-11-23T00:00:00Z",
        "attempts": 1,
        "lease_token": str(uuid4()),
        "lease_expires_at": "2026-11-23T00:00:30Z",
        "priority": 0,
        "group": None,
    }
    pops = [
        httpx.Response(503, json={"error": "DatabaseUnavailable", "detail": "down"}),
        httpx.Response(500, json={"error": "StoreError", "detail": "refused"}),
        # A load balancer's pages while a replica restarts: not the service's answer at all.
        httpx.Response(502, text="<html>502 Bad Gateway</html>"),
        httpx.Response(504, text="<html>504 Gateway Time-out</html>"),
        httpx.Response(200, json={"items": [item]}),
    ]
    completed = asyncio.Event()

    def answer(request: httpx.Request) -> httpx.Response:
        # The item's completion comes on a pop (its `complete`), by POST /items/complete, or alone.
        body = json.loads(request.content) if request.content else {}
        if request.method == "DELETE":
            completed.set()
            return httpx.Response(204)
        if request.url.path == "/items/complete":
            completed.set()
            return httpx.Response(200, json={"results": [_done(r) for r in body["items"]]})
        if body.get("complete"):
            completed.set()
        if pops:
            return pops.pop(0)
        return httpx.Response(
            200, json={"items": [], "completed": [_done(r) for r in body.get("complete", [])]}
        )

    handled: list[int] = []
    async with AsyncClient(
        "http://sq", transport=httpx.MockTransport(answer), retry=RetryPolicy(attempts=1)
    ) as client:
        worker = Worker(client, "q", lambda i: handled.append(i.payload), idle_pause_seconds=0)
        running = asyncio.create_task(worker.run())
        await completed.wait()
        worker.stop()
        await running
    assert handled == [1]


async def test_a_mistaken_pop_ends_run(sq: AsyncClient) -> None:
    worker = Worker(sq, "not a queue name!", lambda i: None)
    with pytest.raises(ValidationError):
        await worker.run()


HANDLER_SCRIPT = """
import pathlib, sys
from simplequeue.client import run_worker

out = pathlib.Path(sys.argv[2])

def handle(item):
    with out.open("a") as f:
        f.write(f"{item.payload}\\n")

run_worker(sys.argv[1], "sync", handle, concurrency=2, wait_seconds=1)
"""


@pytest.mark.e2e
def test_run_worker_drains_a_real_serve_and_stops_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(HANDLER_SCRIPT)
    out = tmp_path / "handled.txt"
    with (
        serving(f"sqlite:///{tmp_path / 'sync.db'}") as base,
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        for n in range(5):
            assert http.post("/push", json={"queue": "sync", "payload": n}).status_code == 201
        process = subprocess.Popen([sys.executable, str(script), base, str(out)])
        try:
            deadline = time.monotonic() + 30
            while http.get("/queues/sync").json()["history"]["completed"] < 5:
                assert process.poll() is None, "the worker exited early"
                assert time.monotonic() < deadline, "the worker did not drain the queue"
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert sorted(out.read_text().split()) == ["0", "1", "2", "3", "4"]


async def test_a_busy_worker_completes_each_item_with_its_next_pop(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    await sq.push_batch([{"payload": {"n": n}} for n in range(20)], queue=queue)
    handled: list[int] = []

    async def handle(item: Item) -> None:
        handled.append(item.payload["n"])

    # No completion may wait for long enough to go alone (so that nothing depends on timing).
    worker = Worker(
        sq,
        queue,
        handle,
        concurrency=1,
        prefetch=0,
        wait_seconds=0,
        exit_when_empty=True,
        complete_delay_seconds=30,
    )
    await asyncio.wait_for(worker.run(), 30)
    requests = app_transport.requests[1:]  # after the push

    assert sorted(handled) == list(range(20))
    assert (await sq.stats(queue)).ready == 0
    assert [e.outcome for e in (await sq.history(queue, limit=100)).items].count("completed") == 20
    # Every completion rode on the next pop (the last one on the pop that found the queue empty):
    # one request per item.
    assert app_transport.completed_by_pop == 20
    assert requests == ["POST /pop"] * 21


# --- how completions are sent: in batches, never one request per item under load ----------------


def _done(ref: dict[str, str]) -> dict[str, str]:
    return {"id": ref["id"], "result": "completed"}


def handling(*items: Item) -> bool:
    """Whether any of these items' tasks is still running (a task ends once its item's completion
    is waiting to be sent, or its failure was answered)."""
    names = {task.get_name() for task in asyncio.all_tasks()}
    return any(f"simplequeue item {item.id}" in names for item in items)


class Gates:
    """A handler that waits until the test opens its item's gate (or all of them)."""

    def __init__(self) -> None:
        self.started: list[Item] = []
        self.returned: list[Item] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.all = asyncio.Event()

    def open(self, *items: Item) -> None:
        for item in items:
            self.gates.setdefault(item.id, asyncio.Event()).set()

    async def __call__(self, item: Item) -> None:
        self.started.append(item)
        gate = self.gates.setdefault(item.id, asyncio.Event())
        waits = [asyncio.create_task(gate.wait()), asyncio.create_task(self.all.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        self.returned.append(item)


async def test_items_finishing_during_a_long_poll_are_completed_by_one_request(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    await sq.push_batch([{"payload": n} for n in range(5)], queue=queue)
    handle = Gates()
    # Six slots for five items: once they run, a long-poll for the sixth is in flight.
    worker = Worker(sq, queue, handle, concurrency=6, wait_seconds=10, complete_delay_seconds=0.5)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 5 and app_transport.requests.count("POST /pop") == 1)
    handle.all.set()
    await until(lambda: settled(sq, queue, 5))
    worker.stop()
    await asyncio.wait_for(running, 30)
    assert app_transport.sent("batch") == [[i.id for i in handle.returned]]  # one request, in order
    assert app_transport.sent("pop") == []
    assert app_transport.sent("delete") == []


async def test_items_finishing_while_a_pop_carries_completions_ride_on_the_next_pop(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    await sq.push_batch([{"payload": n} for n in range(8)], queue=queue)
    handle = Gates()
    # A completion never waits long enough to go alone here: each rides on a pop.
    worker = Worker(sq, queue, handle, concurrency=4, prefetch=0, wait_seconds=10, complete_delay_seconds=30)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 4)
    a, b, c, d = handle.started
    app_transport.hold_pops = asyncio.Event()
    handle.open(a)  # its slot is free: a pop for one item, completing it, is sent (and held)
    await until(lambda: app_transport.held == 1)
    handle.open(b, c, d)  # they finish while that pop is in flight
    await until(lambda: not handling(b, c, d))
    app_transport.hold_pops.set()
    app_transport.hold_pops = None
    await until(lambda: len(handle.started) == 8)
    handle.all.set()
    await until(lambda: settled(sq, queue, 8))
    worker.stop()
    await asyncio.wait_for(running, 30)

    carried = app_transport.sent("pop")
    assert carried[:2] == [[a.id], [b.id, c.id, d.id]]  # the three together, on the next pop
    assert app_transport.pops[1:3] == [(1, 1), (3, 3)]  # each asked for every free slot
    assert sorted(i for ids in carried for i in ids) == sorted(i.id for i in handle.started)
    assert app_transport.sent("batch") == []
    assert app_transport.sent("delete") == []
    assert app_transport.completed_by_pop == 8


async def test_run_completes_every_finished_item_before_it_returns(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    await sq.push_batch([{"payload": n} for n in range(3)], queue=queue)
    handle = Gates()
    # A long-poll is in flight while they finish, and they would wait 30 s to go alone: stop()
    # abandons the long-poll, and run() sends them before it returns.
    worker = Worker(sq, queue, handle, concurrency=4, wait_seconds=10, complete_delay_seconds=30)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 3 and app_transport.requests.count("POST /pop") == 1)
    handle.all.set()
    await until(lambda: len(handle.returned) == 3 and not handling(*handle.started))
    assert (await sq.stats(queue)).completed_in_history == 0
    worker.stop()
    await asyncio.wait_for(running, 30)
    assert app_transport.sent("batch") == [[i.id for i in handle.returned]]
    stats = await sq.stats(queue)
    assert (stats.completed_in_history, stats.leased, stats.ready) == (3, 0, 0)


async def test_stop_waits_for_a_pop_that_carries_completions(
    sq: AsyncClient, app_transport: Recording, queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Abandoned, it would leave unknown whether its completions were done (sending them again would
    # hear not_found). It answers at once (it does not long-poll); what it leased is handed back.
    await sq.push_batch([{"payload": n} for n in range(4)], queue=queue)
    handle = Gates()
    caplog.set_level(logging.WARNING, logger="simplequeue.client")
    worker = Worker(sq, queue, handle, concurrency=2, prefetch=0, wait_seconds=10, complete_delay_seconds=30)
    running = asyncio.create_task(worker.run())
    await until(lambda: len(handle.started) == 2)
    app_transport.hold_pops = asyncio.Event()
    handle.open(handle.started[0])
    await until(lambda: app_transport.held == 1)
    worker.stop()
    handle.all.set()
    app_transport.hold_pops.set()
    await asyncio.wait_for(running, 30)
    assert len(handle.started) == 2  # the two in flight; the one the last pop leased is handed back
    stats = await sq.stats(queue)
    assert (stats.completed_in_history, stats.leased, stats.ready) == (2, 0, 2)
    sent = [i for route in ("pop", "batch", "delete") for ids in app_transport.sent(route) for i in ids]
    assert sorted(sent) == sorted(i.id for i in handle.started)  # each once
    assert "refused" not in caplog.text


async def test_exit_when_empty_long_polls_a_second_by_default(sq: AsyncClient, queue: str) -> None:
    assert Worker(sq, queue, lambda i: None).wait_seconds == 20
    await sq.push_batch([{"payload": n} for n in range(10)], queue=queue)
    handled: list[int] = []

    async def handle(item: Item) -> None:
        await asyncio.sleep(0.002)
        handled.append(item.payload)

    worker = Worker(sq, queue, handle, concurrency=4, exit_when_empty=True)
    assert worker.wait_seconds == 1  # the last long-poll, after the drain, ends within a second
    await asyncio.wait_for(worker.run(), 15)  # not the 20 s long-poll
    assert sorted(handled) == list(range(10))
    assert await settled(sq, queue, 10)


async def test_failures_are_sent_one_by_one_and_completions_in_batches(
    sq: AsyncClient, app_transport: Recording, queue: str
) -> None:
    await sq.put_queue(queue, max_attempts=1)
    await sq.push_batch([{"payload": n} for n in range(20)], queue=queue)

    async def handle(item: Item) -> None:
        if item.payload % 2:
            raise ItemFailed(f"odd: {item.payload}")

    worker = Worker(sq, queue, handle, concurrency=5, wait_seconds=0.1, exit_when_empty=True)
    await asyncio.wait_for(worker.run(), 30)
    stats = await sq.stats(queue)
    assert (stats.completed_in_history, stats.dead, stats.leased, stats.ready) == (10, 10, 0, 0)
    assert sum(r.endswith("/fail") for r in app_transport.requests) == 10
    assert app_transport.sent("delete") == []
    completed = sorted(i for route in ("pop", "batch") for ids in app_transport.sent(route) for i in ids)
    assert len(completed) == len(set(completed)) == 10
    dead = (await sq.dead(queue)).items
    assert sorted(e.errors[0].error for e in dead) == sorted(f"odd: {n}" for n in range(1, 20, 2))


def _leased(n: int) -> dict[str, object]:
    return {
        "id": str(uuid4()),
        "queue": "q",
        "payload": n,
        "created_at": "2026-11-23T00:00:00Z",
        "attempts": 1,
        "lease_token": str(uuid4()),
        "lease_expires_at": "2026-11-23T00:00:30Z",
        "priority": 0,
        "group": None,
    }


async def nothing(item: Item) -> None:
    """An async handler: items popped together finish together (no threads in between)."""


class Scripted:
    """A service for httpx.MockTransport: pops hand out `items`, then wait like a long-poll until
    `wake` is set; a request of a kind ("pop", "pop+complete", "complete", "delete") listed in
    `faults` meets the first fault left (an exception raised, or an answer given)."""

    def __init__(self, items: int, faults: dict[str, list[Exception | httpx.Response]]) -> None:
        self.ready = [_leased(n) for n in range(items)]
        self.faults = faults
        self.sent: list[tuple[str, list[str]]] = []  # (kind, ids completed)
        self.wake = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        if request.url.path == "/pop":
            kind, ids = ("pop+complete" if body.get("complete") else "pop"), body.get("complete", [])
        elif request.url.path == "/items/complete":
            kind, ids = "complete", body["items"]
        else:
            kind, ids = "delete", [{"id": request.url.path.rsplit("/", 1)[1]}]
        self.sent.append((kind, [r["id"] for r in ids]))
        if self.faults.get(kind):
            fault = self.faults[kind].pop(0)
            if isinstance(fault, Exception):
                raise fault
            return fault
        if kind == "complete":
            return httpx.Response(200, json={"results": [_done(r) for r in ids]})
        if kind == "delete":
            return httpx.Response(204)
        popped, self.ready = self.ready[: body["max_items"]], self.ready[body["max_items"] :]
        if not popped and not ids and body["wait_seconds"] > 0:
            await self.wake.wait()
        return httpx.Response(200, json={"items": popped, "completed": [_done(r) for r in ids]})


async def test_completions_a_failed_pop_may_have_done_are_not_sent_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No answer after the request left (a reset): the completions may have been done. They are not
    # sent again (the lease decides), as the client never repeats a completion.
    service = Scripted(2, {"pop+complete": [httpx.ReadError("reset by peer")]})
    caplog.set_level(logging.WARNING, logger="simplequeue.client")
    async with AsyncClient(
        "http://sq", transport=httpx.MockTransport(service), retry=RetryPolicy(attempts=1)
    ) as client:
        worker = Worker(
            client,
            "q",
            nothing,
            concurrency=2,
            prefetch=0,
            idle_pause_seconds=0,
            wait_seconds=0,
            exit_when_empty=True,
        )
        await asyncio.wait_for(worker.run(), 30)
    carried = [ids for kind, ids in service.sent if kind != "pop"]
    assert len(carried) == 1  # the pop that failed, and nothing after it
    assert "not sent again" in caplog.text


async def test_completions_a_refused_pop_did_not_do_are_sent_once_more() -> None:
    # A 503 answer: nothing was done; they go again (here on the next pop).
    unavailable = httpx.Response(503, json={"error": "DatabaseUnavailable", "detail": "down"})
    service = Scripted(2, {"pop+complete": [unavailable]})
    async with AsyncClient(
        "http://sq", transport=httpx.MockTransport(service), retry=RetryPolicy(attempts=1)
    ) as client:
        worker = Worker(
            client,
            "q",
            nothing,
            concurrency=2,
            prefetch=0,
            idle_pause_seconds=0,
            wait_seconds=0,
            exit_when_empty=True,
        )
        await asyncio.wait_for(worker.run(), 30)
    carried = [sorted(ids) for kind, ids in service.sent if kind != "pop"]
    assert len(carried) == 2
    assert carried[0] == carried[1]
    assert len(carried[0]) == 2


async def test_a_completion_batch_that_fails_without_an_answer_is_not_sent_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = Scripted(3, {"complete": [httpx.ReadError("reset by peer")]})
    caplog.set_level(logging.WARNING, logger="simplequeue.client")
    async with AsyncClient(
        "http://sq", transport=httpx.MockTransport(service), retry=RetryPolicy(attempts=1)
    ) as client:
        # Four slots for three items: a long-poll waits while they finish, so they go together.
        worker = Worker(client, "q", nothing, concurrency=4, prefetch=0, wait_seconds=10)
        running = asyncio.create_task(worker.run())
        await until(lambda: any(kind == "complete" for kind, _ in service.sent))
        worker.stop()
        await asyncio.wait_for(running, 30)
    assert [(kind, len(ids)) for kind, ids in service.sent] == [("pop", 0), ("pop", 0), ("complete", 3)]
    assert "3 finished items: Unavailable" in caplog.text
