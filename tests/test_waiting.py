"""Long-poll waiting and push coalescing, over real stores (on every engine)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import asyncpg
import pytest
from simplequeue.domain import DatabaseUnavailable, Failure, ItemExists, Pushed, QueueSettings
from simplequeue.domain.limits import FlowLimits
from simplequeue.main import store_for
from simplequeue.service.pushing import PushCoalescer
from simplequeue.service.waiting import Waiting
from simplequeue.settings import Settings
from simplequeue.store.postgres.listen import QueueTokens, parsed, token_of
from simplequeue.store.postgres.waited import LISTED_SECONDS, Waited
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.factories import new_item


class Counted:
    """A real store whose calls are counted (instrumentation, not a stand-in)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.store, name)
        if not callable(attribute):
            return attribute

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await attribute(*args, **kwargs)

        return counted


@pytest.fixture
async def real_store(settings: Settings) -> AsyncIterator[Store]:
    """The engine's own clock: the probe sleeps in real time until leases expire."""
    store = store_for(settings)
    await store.open()
    await store.migrate()
    yield store
    await store.close()


async def test_a_push_wakes_one_waiter_per_item(real_store: Store, queue: str) -> None:
    store = Counted(real_store)
    waiting = Waiting(store, recheck_seconds=1000)  # only signals can wake anyone here
    waiters = []
    for n in range(5):
        waiters.append(
            asyncio.create_task(waiting.pop(queue, max_items=1, wait_seconds=20, lease_seconds=30))
        )
        # The first pop's statements (on a fresh connection, perhaps several: a queue not yet seen
        # is looked at for flow limits) end before the others come.
        for _ in range(200 if n == 0 else 5):
            await asyncio.sleep(0.01)
            if waiting._watches[queue].known_empty():
                break
    assert store.calls["pop"] == 1  # the first found the queue empty; the later ones trusted that

    await real_store.push_batch([new_item(queue, "x")], skip_existing=False)
    waiting.notify(queue, 1)
    done, pending = await asyncio.wait(waiters, timeout=10, return_when=asyncio.FIRST_COMPLETED)

    assert [len(t.result()) for t in done] == [1]
    await asyncio.sleep(0.1)
    assert store.calls["pop"] == 2  # one waiter woke for one item, not five
    waiting.close()
    assert [await t for t in pending] == [[]] * 4  # shutting down answers the rest, empty


async def test_a_caller_that_hung_up_leases_nothing_and_passes_its_wake_up_on(
    real_store: Store, queue: str
) -> None:
    waiting = Waiting(real_store, recheck_seconds=1000)  # only signals can wake anyone here
    hung_up = asyncio.Event()

    async def gone() -> bool:
        return hung_up.is_set()

    first = asyncio.create_task(waiting.pop(queue, max_items=1, wait_seconds=20, lease_seconds=30, gone=gone))
    await asyncio.sleep(0.05)
    second = asyncio.create_task(waiting.pop(queue, max_items=1, wait_seconds=20, lease_seconds=30))
    await asyncio.sleep(0.05)
    hung_up.set()  # the first caller's client disconnects while it waits

    await real_store.push_batch([new_item(queue, "x")], skip_existing=False)
    waiting.notify(queue, 1)  # wakes the oldest waiter: the one nobody listens to any more

    assert await asyncio.wait_for(first, 10) == []
    [item] = await asyncio.wait_for(second, 10)
    assert item.payload == "x"
    waiting.close()


async def test_idle_long_polls_cost_no_statements_beyond_the_probe(real_store: Store, queue: str) -> None:
    store = Counted(real_store)
    waiting = Waiting(store, recheck_seconds=1000)
    assert await waiting.pop(queue, max_items=1, wait_seconds=0.1, lease_seconds=30) == []
    for _ in range(3):  # clients come back again and again to an idle queue
        polls = [waiting.pop(queue, max_items=1, wait_seconds=0.2, lease_seconds=30) for _ in range(30)]
        assert await asyncio.gather(*polls) == [[]] * 30
    assert store.calls["pop"] == 1
    waiting.close()


async def test_items_that_cannot_be_handed_out_wake_a_waiter_once_until_the_recheck(
    real_store: Store, queue: str
) -> None:
    # A paused queue's ready items are due, and no pop takes them: the probe wakes the waiter for
    # them once, and not again for the same items until its recheck (far off here), instead of
    # waking it after every pop that found nothing.
    store = Counted(real_store)
    await real_store.push_batch([new_item(queue, "x")], skip_existing=False)
    await real_store.set_paused(queue, True)
    waiting = Waiting(store, recheck_seconds=1000)
    assert await waiting.pop(queue, max_items=1, wait_seconds=1, lease_seconds=30) == []
    assert store.calls["pop"] == 2  # the first, then the one the probe's wake brought
    await real_store.set_paused(queue, False)
    waiting.notify(queue, 1)  # a signal (here: as a resume through this process would send)
    assert len(await waiting.pop(queue, max_items=1, wait_seconds=1, lease_seconds=30)) == 1
    waiting.close()


async def test_a_waiter_on_an_empty_bucket_is_woken_when_it_refills(
    store: Store, queue: str, clock: FakeClock
) -> None:
    # No push and no recheck (far off) wakes it: only the end of the rate's hold does. Its items were
    # due all along, so this is also the one wake for items already due that comes before the recheck.
    await store.put_queue(queue, QueueSettings(limits=FlowLimits(rate_per_second=20, rate_burst=1)))
    await store.push_batch([new_item(queue, n) for n in range(3)], skip_existing=False)
    waiting = Waiting(store, recheck_seconds=1000)
    assert len(await waiting.pop(queue, max_items=3, wait_seconds=0, lease_seconds=30)) == 1
    waiter = asyncio.create_task(waiting.pop(queue, max_items=3, wait_seconds=10, lease_seconds=30))
    await asyncio.sleep(0.2)  # it found the bucket empty, and waits
    assert not waiter.done()
    clock.advance(0.05)  # one token at 20 a second, by the database's (injected) clock
    assert len(await waiter) == 1
    waiting.close()


async def test_an_expiring_lease_wakes_a_waiter_without_a_push(real_store: Store, queue: str) -> None:
    waiting = Waiting(real_store, recheck_seconds=1000)  # no recheck: only the expiry timer can wake it
    await real_store.push_batch([new_item(queue)], skip_existing=False)
    [first] = await real_store.pop(queue, 1, 1)

    [again] = await asyncio.wait_for(
        waiting.pop(queue, max_items=1, wait_seconds=15, lease_seconds=30), timeout=10
    )
    assert (again.id, again.attempts) == (first.id, 2)
    waiting.close()


@asynccontextmanager
async def waiter_in_another_replica(settings: Settings, queue: str) -> AsyncIterator[asyncio.Task[Any]]:
    """A long-poll on `queue` in another replica: its own store and waiting, no shared memory, asleep
    by the time this yields. PostgreSQL tells it of changes through LISTEN/NOTIFY (its recheck is
    too slow to matter here); SQLite and SQL Server through the probe's recheck."""
    other = store_for(settings)
    await other.open()
    waiting = Waiting(other, recheck_seconds=1000 if settings.database_url.startswith("postgresql") else 0.2)
    if other.notifications is not None:
        await other.notifications.start(waiting.notify)
    try:
        waiter = asyncio.create_task(waiting.pop(queue, max_items=1, wait_seconds=15, lease_seconds=30))
        await asyncio.sleep(0.5)  # the waiter is asleep and the listener is up
        yield waiter
    finally:
        waiting.close()
        await other.close()


async def test_a_push_through_another_process_is_found(
    settings: Settings, real_store: Store, queue: str
) -> None:
    async with waiter_in_another_replica(settings, queue) as waiter:
        await real_store.push_batch([new_item(queue, "from elsewhere")], skip_existing=False)
        [popped] = await asyncio.wait_for(waiter, timeout=10)
        assert popped.payload == "from elsewhere"


class SlowPop:
    """A real store whose pop holds until released, to land a signal while the statement runs."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def pop(self, *args: Any, **kwargs: Any) -> Any:
        found = await self.store.pop(*args, **kwargs)
        self.started.set()
        await self.release.wait()
        return found


async def test_a_signal_during_the_pop_statement_is_not_lost(real_store: Store, queue: str) -> None:
    slow = SlowPop(real_store)
    waiting = Waiting(slow, recheck_seconds=1000)
    waiter = asyncio.create_task(waiting.pop(queue, max_items=1, wait_seconds=15, lease_seconds=30))
    await slow.started.wait()  # its statement found nothing...
    await real_store.push_batch([new_item(queue, "late")], skip_existing=False)
    waiting.notify(queue, 1)  # ...and the signal lands before it starts to wait
    slow.release.set()
    [popped] = await asyncio.wait_for(waiter, timeout=10)
    assert popped.payload == "late"
    waiting.close()


async def test_concurrent_single_pushes_share_commits(real_store: Store, queue: str) -> None:
    store = Counted(real_store)
    pusher = PushCoalescer(store)
    items = [new_item(queue, n) for n in range(200)]

    await asyncio.gather(*(pusher.push(i) for i in items))

    assert store.calls["push_batch"] < 20
    assert (await real_store.get_queue(queue)).ready == 200


async def test_a_duplicate_fails_alone_and_its_neighbours_commit(real_store: Store, queue: str) -> None:
    taken = new_item(queue, "first")
    await real_store.push_batch([taken], skip_existing=False)
    pusher = PushCoalescer(real_store)
    twin = uuid4()
    batch = [
        new_item(queue, "a"),
        new_item(queue, "dup", id=taken.id),
        new_item(queue, "t1", id=twin),
        new_item(queue, "t2", id=twin),
    ]

    results = await asyncio.gather(*(pusher.push(i) for i in batch), return_exceptions=True)

    assert [type(r) for r in results] == [Pushed, ItemExists, Pushed, ItemExists]
    assert (await real_store.get_item(twin)).payload == "t1"
    assert (await real_store.get_queue(queue)).ready == 3


async def test_a_failed_commit_reaches_every_caller_of_its_batch(queue: str) -> None:
    down = store_for(Settings(database_url="postgresql://postgres@127.0.0.1:1/none", db_timeout_seconds=1))
    await down.open()
    pusher = PushCoalescer(down)
    try:
        results = await asyncio.gather(
            *(pusher.push(new_item(queue)) for _ in range(5)), return_exceptions=True
        )
        assert all(isinstance(r, DatabaseUnavailable) for r in results)
    finally:
        await down.close()


class Stalled:
    """A real store whose next push_batch hangs until released, then fails as a timeout would."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.release = asyncio.Event()
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def push_batch(self, items: Any, *, skip_existing: bool) -> Any:
        self.batches.append(len(items))
        await self.release.wait()
        raise DatabaseUnavailable()


async def test_pushes_queued_behind_a_timed_out_batch_fail_with_it(real_store: Store, queue: str) -> None:
    store = Stalled(real_store)
    pusher = PushCoalescer(store)  # type: ignore[arg-type]
    first = asyncio.create_task(pusher.push(new_item(queue, "in flight")))
    await asyncio.sleep(0.05)
    behind = [asyncio.create_task(pusher.push(new_item(queue, n))) for n in range(3)]
    await asyncio.sleep(0.05)

    store.release.set()  # the in-flight batch times out
    results = await asyncio.gather(first, *behind, return_exceptions=True)

    assert all(isinstance(r, DatabaseUnavailable) for r in results)
    assert store.batches == [1], "the queued pushes would have waited out a second timeout"


@pytest.mark.parametrize("how", ["failed", "reaped"])
async def test_a_move_to_a_dead_letter_queue_through_another_process_is_found(
    settings: Settings, real_store: Store, queue: str, how: str
) -> None:
    # A worker's last failure, or the sweep's reap of an expired last lease, moves the item to its
    # queue's dead-letter target; a long-poll on the target in another replica hears of it as of a
    # push (PostgreSQL: NOTIFY from the moving statement; elsewhere: the probe's recheck).
    target = f"{queue}-dlq"
    await real_store.put_queue(target, QueueSettings())
    await real_store.put_queue(queue, QueueSettings(max_attempts=1, dead_letter_queue=target))
    await real_store.push_batch([new_item(queue, "doomed")], skip_existing=False)
    [popped] = await real_store.pop(queue, 1, 0 if how == "reaped" else 30)
    async with waiter_in_another_replica(settings, target) as waiter:
        if how == "failed":
            await real_store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))
        else:
            assert await real_store.reap_expired(10, queue) == 1
        [moved] = await asyncio.wait_for(waiter, timeout=10)
        assert (moved.id, moved.queue, moved.payload) == (popped.id, target, "doomed")


async def test_a_role_that_may_only_connect_hears_no_queue_name_from_a_push_or_a_dead_letter_move(
    postgres_url: str,
) -> None:
    # LISTEN needs no right at all: any role that may connect hears every NOTIFY of the database.
    store = store_for(Settings(database_url=postgres_url, db_timeout_seconds=5, sweep=False))
    await store.open()
    await store.migrate()
    queue = f"secret-{uuid4().hex[:12]}"
    target = f"{queue}-dlq"
    spy_role = f"sq_spy_{uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_url)
    await admin.execute(f"CREATE ROLE {spy_role} LOGIN")
    spy = await asyncpg.connect(postgres_url, user=spy_role)
    heard: asyncio.Queue[str] = asyncio.Queue()
    try:
        await spy.add_listener("simplequeue_ready", lambda *args: heard.put_nowait(args[3]))
        await store.put_queue(target, QueueSettings())
        await store.put_queue(queue, QueueSettings(max_attempts=1, dead_letter_queue=target))
        await store.next_visible_at([queue, target])  # a long-poll's probe: both are waited on
        await store.push_batch([new_item(queue, "doomed")], skip_existing=False)
        [popped] = await store.pop(queue, 1, 30)
        await store.fail(popped.id, Failure("fatal", popped.lease_token, retry=False))
        payloads = [await asyncio.wait_for(heard.get(), timeout=5) for _ in range(2)]
        assert not [p for p in payloads if "secret" in p], payloads
        # Nor can it compute the tokens of the names it guesses: the key is the owner's.
        for guess in ("SELECT sq_ready_token('orders')", "SELECT value FROM sq_settings"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await spy.fetchval(guess)
        key = await admin.fetchval("SELECT value FROM sq_settings WHERE name = 'notify_key'")
    finally:
        await spy.close()
        await admin.execute(f"DROP ROLE {spy_role}")
        await admin.close()
        await store.close()
    # The push, then the move: each the token this service maps back to its queue.
    assert [json.loads(p) for p in payloads] == [
        {"q": token_of(key, queue), "n": 1},
        {"q": token_of(key, target), "n": 1},
    ]


async def test_a_push_notifies_only_the_queues_a_long_poll_waits_on(postgres_url: str) -> None:
    # Each notifying commit takes a cluster-wide lock: a push nobody waits for sends no NOTIFY.
    # NOTIFYs arrive in commit order, so the waited queue's push, committed last, is heard first
    # exactly when the pushes before it sent nothing.
    store = store_for(Settings(database_url=postgres_url, db_timeout_seconds=5, sweep=False))
    await store.open()
    await store.migrate()
    waited, unwaited, lapsed = (f"{name}-{uuid4().hex[:8]}" for name in ("waited", "unwaited", "lapsed"))
    admin = await asyncpg.connect(postgres_url)
    heard: asyncio.Queue[str] = asyncio.Queue()
    try:
        key = await admin.fetchval("SELECT value FROM sq_settings WHERE name = 'notify_key'")
        await admin.add_listener("simplequeue_ready", lambda *args: heard.put_nowait(args[3]))
        await store.next_visible_at([waited, lapsed])  # the probe lists the queues waited on
        listed = await admin.fetch(
            "SELECT queue FROM sq_waited WHERE queue = ANY($1::text[])", [waited, lapsed]
        )
        assert {r["queue"] for r in listed} == {waited, lapsed}
        # A listing that ran out (its replica stopped waiting, or died) wakes nobody.
        await admin.execute(
            "UPDATE sq_waited SET expires_at = now() - interval '1 second' WHERE queue = $1", lapsed
        )
        for queue in (unwaited, lapsed, waited):
            await store.push_batch([new_item(queue, "x")], skip_existing=False)
        first = json.loads(await asyncio.wait_for(heard.get(), timeout=5))
        assert first == {"q": token_of(key, waited), "n": 1}
        assert heard.empty()
    finally:
        await admin.close()
        await store.close()


def test_a_replica_lists_a_queue_again_only_when_half_its_listing_is_spent_or_it_reconnected() -> None:
    now = [100.0]
    waited = Waited(clock=lambda: now[0])
    assert waited.due(["b", "a"]) == ["a", "b"]  # sorted: replicas lock the rows in one order
    waited.listed(["a", "b"], since=now[0])
    assert waited.due(["a", "b", "c"]) == ["c"]
    now[0] += LISTED_SECONDS / 2 - 1
    assert waited.due(["a"]) == []
    now[0] += 2
    assert waited.due(["a"]) == ["a"]
    waited.listed(["a"], since=now[0])
    waited.forget()  # the listener reconnected: the server may have lost the unlogged table
    assert waited.due(["a"]) == ["a"]


def test_tokens_map_back_only_the_queues_asked_about_and_a_name_is_no_token() -> None:
    tokens = QueueTokens()
    tokens.heard_of(["orders"])  # asked before the key is read: mapped once it is
    tokens.use_key("k")
    tokens.heard_of(["emails", "orders"])
    assert tokens.queue_of(token_of("k", "orders")) == "orders"
    assert tokens.queue_of(token_of("k", "emails")) == "emails"
    assert tokens.queue_of(token_of("k", "other")) is None  # no long-poll here waits on it
    # A replica of the release before NOTIFYs its dead-letter moves by name during a rolling
    # upgrade: ignored (its waiters here hear at their recheck), never taken for a queue.
    assert tokens.queue_of("orders") is None
    # A schema before 0010 has no key, and its trigger sends names.
    tokens.use_key(None)
    assert tokens.queue_of("orders") == "orders"


def test_tokens_forget_everything_past_their_bound_and_learn_again() -> None:
    tokens = QueueTokens()
    tokens.use_key("k")
    tokens.heard_of(f"q{n}" for n in range(QueueTokens.MOST))
    tokens.heard_of(["one-more"])
    assert tokens.queue_of(token_of("k", "q0")) is None
    assert tokens.queue_of(token_of("k", "one-more")) == "one-more"
    tokens.heard_of(["q0"])  # the probe asks again about the queues still waited on
    assert tokens.queue_of(token_of("k", "q0")) == "q0"


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "not json",
        "5",
        '"q"',
        "[1]",
        '{"q": "a"}',
        '{"n": 1}',
        '{"q": "a", "n": "x"}',
        '{"q": "a", "n": 1e400}',
    ],
)
def test_a_notify_of_another_shape_is_ignored(payload: str) -> None:
    # Any role that connects may NOTIFY on the channel: what is not ours wakes nobody and raises
    # nothing (asyncpg would log each raise with its traceback).
    assert parsed(payload) is None


def test_a_notify_of_ours_is_read() -> None:
    assert parsed('{"q" : "0123456789abcdef", "n" : 3}') == ("0123456789abcdef", 3)
