"""The Python SDK (simplequeue.client): its calls against the real app in-process (through an
injected httpx.ASGITransport), its retries against httpx.MockTransport, and a real `serve`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from asgi_lifespan import LifespanManager
from simplequeue import client as sdk
from simplequeue.client import AsyncClient, RetryPolicy, Worker
from simplequeue.client.errors import ERRORS, GatewayError, error_for
from simplequeue.main import create_app
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.test_client_worker import settled, until
from tests.test_e2e import serving

SPEC = Path(__file__).resolve().parent.parent / "openapi" / "openapi.json"


@pytest.fixture
async def sq(tmp_path: Path, clock: FakeClock) -> AsyncIterator[AsyncClient]:
    """The SDK over the real app on SQLite, in-process, on a clock the test moves."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'client.db'}", sweep=False)
    app = create_app(settings, clock=clock)
    async with (
        LifespanManager(app) as manager,
        AsyncClient("http://sq", transport=httpx.ASGITransport(app=manager.app)) as client,
    ):
        yield client


async def test_push_pop_complete_and_stats(sq: AsyncClient, queue: str) -> None:
    first = await sq.push({"n": 1}, queue=queue, priority=1)
    second = await sq.push({"n": 2}, queue=queue)
    assert first.created
    assert first.queue == queue
    assert first.created_at is not None
    stats = await sq.stats(queue)
    assert (stats.ready, stats.leased) == (2, 0)

    items = await sq.pop(queue, max_items=5, lease_seconds=60)
    assert [i.id for i in items] == [first.id, second.id]  # priority first
    assert items[0].payload == {"n": 1}
    assert items[0].attempts == 1
    assert "payload" not in repr(items[0])  # reprs (and so logs) never show payloads

    await sq.complete(items[0])
    [result] = await sq.complete_many([items[1]])
    assert result == sdk.CompleteResult(second.id, "completed")
    stats = await sq.stats(queue)
    assert (stats.ready, stats.leased, stats.completed_in_history) == (0, 0, 2)
    assert queue in [q.name for q in await sq.queues()]


async def test_push_batch_dedup_and_fields(sq: AsyncClient, queue: str) -> None:
    given = str(uuid4())
    batch = await sq.push_batch(
        [{"payload": 1, "id": given}, {"payload": 2, "dedup_key": "k"}, {"payload": 3, "dedup_key": "k"}],
        queue=queue,
    )
    assert batch.ids[0] == given
    assert batch.ids[1] == batch.ids[2]
    assert batch.created == [True, True, False]
    again = await sq.push("x", queue=queue, dedup_key="k")
    assert (again.id, again.created) == (batch.ids[1], False)
    delayed = await sq.push(None, queue=queue, delay_seconds=3600, group="g")
    info = await sq.get_item(delayed.id)
    assert (info.status, info.payload, info.group) == ("delayed", None, "g")


async def test_message_attributes_go_in_and_come_back(sq: AsyncClient, queue: str) -> None:
    attributes = {
        "trace": {"type": "String", "value": "trace-value-kept-out-of-repr"},
        "n": {"type": "Number", "value": "2.50"},
    }
    one = await sq.push("a", queue=queue, attributes=attributes)
    await sq.push_batch([{"payload": "b", "attributes": attributes}, {"payload": "c"}], queue=queue)

    assert (await sq.get_item(one.id)).attributes == attributes
    items = await sq.pop(queue, max_items=3)
    assert [i.attributes for i in items] == [attributes, attributes, None]
    assert "trace-value-kept-out-of-repr" not in repr(items[0])
    with pytest.raises(sdk.InvalidAttributes) as refused:
        await sq.push("d", queue=queue, attributes={"AWS.x": {"type": "String", "value": "v"}})
    assert refused.value.code == "InvalidAttributes"


async def test_fairness_keys_go_in_and_come_back(sq: AsyncClient, queue: str) -> None:
    one = await sq.push("a0", queue=queue, fairness_key="a")
    await sq.push("a1", queue=queue, fairness_key="a")
    await sq.push_batch([{"payload": "b0", "fairness_key": "b"}], queue=queue)

    assert (await sq.get_item(one.id)).fairness_key == "a"
    items = await sq.pop(queue, max_items=3)
    assert [(i.payload, i.fairness_key) for i in items] == [("a0", "a"), ("b0", "b"), ("a1", "a")]
    with pytest.raises(sdk.ValidationError):
        await sq.push("c", queue=queue, fairness_key="")


async def test_stats_carry_the_busiest_keys_and_the_limits_that_cut_pops_short(
    sq: AsyncClient, queue: str, clock: FakeClock
) -> None:
    await sq.put_queue(queue, max_leased_per_key=1)
    items = [{"payload": n, "fairness_key": "a" if n < 3 else "b"} for n in range(4)]
    await sq.push_batch(items, queue=queue)
    assert len(await sq.pop(queue, max_items=4)) == 2
    stats = await sq.stats(queue)
    assert stats.top_keys == (sdk.TopKey("a", 2, 1, 1, True), sdk.TopKey("b", 0, 1, 1, True))
    assert stats.limits_binding == (sdk.LimitBinding("max_leased_per_key", 1, clock.now),)


async def test_fail_extend_and_get_item(sq: AsyncClient, queue: str) -> None:
    pushed = await sq.push({"job": 1}, queue=queue)
    [item] = await sq.pop(queue, lease_seconds=10)
    extended = await sq.extend(item, 120)
    assert extended.status == "leased"
    assert extended.lease_expires_at is not None
    assert extended.lease_expires_at > item.lease_expires_at
    failed = await sq.fail(item, "smtp 451", retry_after_seconds=60)
    assert failed.status == "retrying"
    assert [e.error for e in failed.errors] == ["smtp 451"]
    info = await sq.get_item(pushed.id)
    assert info.attempts == 1
    assert info.visible_at is not None


async def test_an_admin_releases_a_lease(sq: AsyncClient, queue: str) -> None:
    pushed = await sq.push(1, queue=queue)
    [item] = await sq.pop(queue, lease_seconds=600)
    held = await sq.get_item(pushed.id)
    assert (held.status, held.lease_token_prefix) == ("leased", str(item.lease_token)[:8])
    released = await sq.release(item)
    assert (released.status, released.lease_token_prefix) == ("ready", None)
    [again] = await sq.pop(queue)
    assert (again.id, again.attempts) == (pushed.id, 2)


async def test_dead_letters_redrive_and_purge(sq: AsyncClient, queue: str) -> None:
    pushed = await sq.push(1, queue=queue)
    [item] = await sq.pop(queue)
    dead = await sq.fail(item, "no", retry=False)
    assert dead.status == "dead"
    page = await sq.dead(queue)
    assert [i.id for i in page.items] == [pushed.id]
    assert page.next_cursor is None
    died = page.items[0].died_at
    assert died is not None
    assert [i.id for i in (await sq.dead(queue, since=died)).items] == [pushed.id]
    assert (await sq.dead(queue, until=died)).items == []
    assert await sq.redrive(queue, ids=[pushed.id]) == 1
    [item] = await sq.pop(queue)
    await sq.fail(item, "no again", retry=False)
    assert await sq.purge_dead(queue) == 1


async def test_errors_are_typed_by_code(sq: AsyncClient, queue: str, clock: FakeClock) -> None:
    with pytest.raises(sdk.ItemNotFound) as caught:
        await sq.complete(str(uuid4()))
    assert (caught.value.code, caught.value.status) == ("ItemNotFound", 404)
    assert caught.value.detail
    assert isinstance(caught.value, sdk.NotFound)

    with pytest.raises(sdk.QueueNotFound):
        await sq.stats("never-pushed-to")

    pushed = await sq.push(1, queue=queue)
    with pytest.raises(sdk.ItemExists) as exists:
        await sq.push(2, queue=queue + "-other", id=pushed.id)
    assert isinstance(exists.value, sdk.Conflict)
    assert exists.value.status == 409

    [item] = await sq.pop(queue, lease_seconds=5)
    with pytest.raises(sdk.LeaseMismatch):
        await sq.complete(item.id, lease_token=uuid4())
    clock.advance(10)
    with pytest.raises(sdk.LeaseExpired):
        await sq.extend(item, 30)
    [item] = await sq.pop(queue)
    await sq.fail(item, "gone", retry=False)
    with pytest.raises(sdk.ItemDead):
        await sq.complete(item)

    with pytest.raises(sdk.ValidationError) as invalid:
        await sq.pop(queue, max_items=1000)
    assert invalid.value.fields
    assert invalid.value.status == 422
    deep: Any = 1
    for _ in range(70):
        deep = [deep]
    with pytest.raises(sdk.InvalidPayload):
        await sq.push(deep, queue=queue)
    with pytest.raises(sdk.PayloadTooLarge):
        await sq.push("x" * 1_100_000, queue=queue)
    with pytest.raises(sdk.InvalidCursor):
        await sq.dead(queue, cursor="not-a-cursor")


def test_every_documented_code_has_its_class() -> None:
    codes = json.loads(SPEC.read_text())["components"]["schemas"]["ErrorCode"]["enum"]
    assert sorted(codes) == sorted(ERRORS)
    for code in codes:
        error = error_for(400, {"error": code, "detail": "d"})
        assert type(error).__name__ == code
        assert error.code == code
    assert isinstance(ERRORS["DatabaseUnavailable"](""), sdk.Unavailable)
    assert isinstance(ERRORS["SchemaNotReady"](""), sdk.Unavailable)
    newer = error_for(409, {"error": "SomethingNew", "detail": "d"})
    assert type(newer) is sdk.Conflict
    assert newer.code == "SomethingNew"
    proxy = error_for(502, "<html>", reason="Bad Gateway")
    assert type(proxy) is GatewayError  # a load balancer's page: pause and try again
    assert isinstance(proxy, sdk.Unavailable)
    assert proxy.status == 502
    assert type(error_for(504, "", reason="Gateway Time-out")) is GatewayError
    assert type(error_for(500, "<html>")) is sdk.SimplequeueError


# --- retries, at the transport ---------------------------------------------------------------


Answer = Callable[[httpx.Request], httpx.Response]


class Script:
    """A MockTransport's handler answering from a list, recording requests; and a sleep that records."""

    def __init__(self, *answers: httpx.Response | Exception | Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer if isinstance(answer, httpx.Response) else answer(request)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def client(self, retry: RetryPolicy | None = None) -> AsyncClient:
        return AsyncClient(
            "http://sq", transport=httpx.MockTransport(self), sleep=self.sleep, retry=retry or RetryPolicy()
        )


def unavailable(retry_after: str | None = "1") -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(503, json={"error": "DatabaseUnavailable", "detail": "down"}, headers=headers)


def pushed(request_id: str = "") -> httpx.Response:
    return httpx.Response(
        201, json={"id": request_id, "queue": "q", "created_at": "2026-11-23T00:00:00Z", "created": True}
    )


def popped(n: int) -> httpx.Response:
    item = {
        "id": str(uuid4()),
        "queue": "q",
        "payload": {"secret": 1},
        "created_at": "2026-11-23T00:00:00Z",
        "attempts": 1,
        "lease_token": str(uuid4()),
        "lease_expires_at": "2026-11-23T00:00:30Z",
        "priority": 0,
        "group": None,
    }
    return httpx.Response(200, json={"items": [item] * n})


async def test_503_is_retried_after_its_retry_after() -> None:
    script = Script(unavailable("7"), unavailable("0"), popped(1))
    async with script.client(RetryPolicy(total_seconds=60)) as client:
        [item] = await client.pop("q")
    assert item.payload == {"secret": 1}
    assert len(script.requests) == 3
    assert 7 <= script.sleeps[0] <= 7 * 1.1
    assert script.sleeps[1] == 0


async def test_connection_errors_are_retried_with_growing_jittered_backoff() -> None:
    refused = httpx.ConnectError("refused")
    script = Script(refused, refused, httpx.ReadError("reset"), popped(2))
    policy = RetryPolicy(base_seconds=1, cap_seconds=3, jitter=0.5)
    async with script.client(policy) as client:
        assert len(await client.pop("q", max_items=2)) == 2
    assert len(script.requests) == 4
    first, second, third = script.sleeps
    assert 0.5 <= first <= 1
    assert 1 <= second <= 2
    assert 1.5 <= third <= 3


def remembered(request: httpx.Request) -> httpx.Response:
    """The service's answer to a push whose ids it remembers: nothing new, each item its own id,
    except a batch's last, which matched another item's dedup_key."""
    body = json.loads(request.content)
    if "items" in body:
        ids = [*(i["id"] for i in body["items"][:-1]), str(uuid4())]
        return httpx.Response(200, json={"ids": ids, "created": [False] * len(ids)})
    answer = {"id": body["id"], "queue": "q", "created_at": "2026-11-23T00:00:00Z", "created": False}
    return httpx.Response(200, json=answer)


async def test_a_retried_push_sends_one_id_and_takes_its_remembered_id_as_its_own() -> None:
    script = Script(httpx.ReadTimeout("lost answer"), remembered)
    async with script.client() as client:
        result = await client.push({"a": 1}, queue="q")
    first, second = (json.loads(r.content) for r in script.requests)
    assert first["id"] == second["id"] == result.id
    assert result.created  # the first attempt created it; the retry heard it remembered

    script = Script(unavailable(), httpx.ReadTimeout("lost answer"), remembered)  # batches too
    async with script.client() as client:
        batch = await client.push_batch([{"payload": 1}, {"payload": 2}, {"payload": 3}], queue="q")
    sent = [json.loads(r.content)["items"] for r in script.requests]
    assert sent[0] == sent[2]
    assert batch.ids[:2] == [i["id"] for i in sent[0]][:2]
    assert batch.created == [True, True, False]

    script = Script(remembered)  # on a first try, created false is the caller's to hear
    async with script.client() as client:
        assert (await client.push(1, queue="q")).created is False

    exists = httpx.Response(409, json={"error": "ItemExists", "detail": "exists"})
    script = Script(httpx.ReadTimeout("lost answer"), exists)  # held by another queue: a conflict
    async with script.client() as client:
        with pytest.raises(sdk.ItemExists):
            await client.push(1, queue="q", id=str(uuid4()))


async def test_retries_are_bounded_in_number_and_in_time() -> None:
    script = Script(*[unavailable("0")] * 3)
    async with script.client(RetryPolicy(attempts=3)) as client:
        with pytest.raises(sdk.DatabaseUnavailable) as caught:
            await client.stats("q")
    assert caught.value.status == 503
    assert caught.value.retry_after == 0
    assert len(script.requests) == 3

    script = Script(*[httpx.ConnectError("refused")] * 2)
    async with script.client(RetryPolicy(attempts=2)) as client:
        with pytest.raises(sdk.Unavailable) as refused:
            await client.pop("q")
    assert refused.value.status is None
    assert refused.value.code == "Unavailable"

    script = Script(unavailable("100"))  # a Retry-After past total_seconds: no retry
    async with script.client(RetryPolicy(total_seconds=30)) as client:
        with pytest.raises(sdk.DatabaseUnavailable):
            await client.pop("q")
    assert len(script.requests) == 1
    assert script.sleeps == []


async def test_complete_and_fail_are_not_repeated_once_the_request_may_have_arrived() -> None:
    item_id = str(uuid4())
    script = Script(httpx.ReadError("reset"))
    async with script.client() as client:
        with pytest.raises(sdk.Unavailable):
            await client.complete(item_id, lease_token=uuid4())
    assert len(script.requests) == 1
    # ...but a request that never left, or a 503, is repeated.
    script = Script(httpx.ConnectError("refused"), unavailable("0"), httpx.Response(204))
    async with script.client() as client:
        await client.complete(item_id, lease_token=uuid4())
    assert len(script.requests) == 3


async def test_the_pop_timeout_covers_its_long_poll() -> None:
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200, json={"items": []})

    async with AsyncClient("http://sq", transport=httpx.MockTransport(answer), timeout=5) as client:
        assert await client.pop("q", wait_seconds=20) == []
    assert seen[0]["read"] == 25


# --- a real `simplequeue serve` ----------------------------------------------------------------


@pytest.mark.e2e
def test_against_a_real_serve(tmp_path: Path) -> None:
    async def scenario(base: str) -> None:
        async with AsyncClient(base) as client:
            ids = [(await client.push({"n": n}, queue="e2e")).id for n in range(6)]
            await client.put_queue("e2e", max_attempts=1)
            seen: list[int] = []

            async def handle(item: sdk.Item) -> None:
                seen.append(item.payload["n"])
                if item.payload["n"] == 5:
                    raise ValueError("five is right out")

            worker = Worker(client, "e2e", handle, concurrency=3, wait_seconds=1)
            running = asyncio.create_task(worker.run())
            await until(lambda: settled(client, "e2e", 6))
            worker.stop()
            await running
            assert sorted(seen) == list(range(6))
            stats = await client.stats("e2e")
            assert (stats.completed_in_history, stats.dead, stats.ready, stats.leased) == (5, 1, 0, 0)
            [dead] = (await client.dead("e2e")).items
            assert "ValueError: five is right out" in dead.errors[0].error
            with pytest.raises(sdk.ItemNotFound):
                await client.get_item(ids[0])

    with serving(f"sqlite:///{tmp_path / 'sdk.db'}") as base:
        asyncio.run(scenario(base))


@pytest.mark.e2e
def test_the_blocking_client_is_the_async_one_on_a_loop_of_its_own(tmp_path: Path) -> None:
    script = Script(unavailable("0"), popped(1))
    with sdk.Client("http://sq", transport=httpx.MockTransport(script), sleep=script.sleep) as client:
        [item] = client.pop("q", wait_seconds=1)
    assert item.payload == {"secret": 1}
    assert len(script.requests) == 2

    with serving(f"sqlite:///{tmp_path / 'sync.db'}") as base, sdk.Client(base) as client:
        pushed = client.push({"n": 1}, queue="blocking")
        [item] = client.pop("blocking", lease_seconds=30)
        assert item.id == pushed.id
        assert client.extend(item, 60).status == "leased"
        client.complete(item)
        with pytest.raises(sdk.ItemNotFound):
            client.complete(item)
        assert client.stats("blocking").completed_in_history == 1


async def test_queue_administration_through_the_sdk(sq: sdk.AsyncClient, queue: str) -> None:
    await sq.push({"n": 1}, queue=queue)
    assert (await sq.pause(queue)).paused
    assert await sq.pop(queue) == []
    assert [i.payload for i in (await sq.peek(queue, "ready")).items] == [{"n": 1}]
    assert not (await sq.resume(queue)).paused
    [item] = await sq.pop(queue, lease_seconds=60)
    with pytest.raises(sdk.QueueInUse):
        await sq.delete_queue(queue)
    assert await sq.delete_queue(queue, force=True) == {"queue": queue, "items": 1, "history": 0}
    with pytest.raises(sdk.QueueNotFound):
        await sq.stats(queue)
    assert item.queue == queue


async def test_finding_items_by_group_and_dedup_key_through_the_sdk(sq: sdk.AsyncClient, queue: str) -> None:
    ids = [(await sq.push({"n": n}, queue=queue, group="tenant/7")).id for n in range(3)]
    keyed = await sq.push("keyed", queue=queue, dedup_key="order?42")
    first = await sq.group_items(queue, "tenant/7", limit=2)
    assert [i.id for i in first.items] == ids[:2]
    assert first.next_cursor is not None
    rest = await sq.group_items(queue, "tenant/7", limit=2, cursor=first.next_cursor)
    assert ([i.id for i in rest.items], rest.next_cursor) == (ids[2:], None)
    found = await sq.find_by_dedup_key(queue, "order?42")
    assert (found.id, found.payload) == (keyed.id, "keyed")
    with pytest.raises(sdk.ItemNotFound):
        await sq.find_by_dedup_key(queue, "none such")
