"""Queue administration on every engine: pause and resume, peeking at live items by state, deleting
a queue; and the API's answer for a queue that does not exist, the same on every route."""

from __future__ import annotations

from datetime import timedelta

import pytest
from simplequeue.domain import (
    Completion,
    DeletedQueue,
    Failure,
    ItemStatus,
    NewItem,
    QueueInUse,
    QueueNotFound,
)
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.factories import new_item
from tests.http import Client, assert_error


async def push(store: Store, *items: NewItem) -> None:
    await store.push_batch(list(items), skip_existing=False)


async def test_a_paused_queue_takes_pushes_and_hands_out_nothing(store: Store, queue: str) -> None:
    await push(store, new_item(queue, 1))
    await store.set_paused(queue, True)
    await push(store, new_item(queue, 2))
    assert await store.pop(queue, 10, 30) == []
    stats = await store.get_queue(queue)
    assert (stats.paused, stats.ready) == (True, 2)

    await store.set_paused(queue, False)
    assert [i.payload for i in await store.pop(queue, 10, 30)] == [1, 2]
    assert not (await store.get_queue(queue)).paused


async def test_pausing_an_unknown_queue_is_not_found(store: Store, queue: str) -> None:
    with pytest.raises(QueueNotFound):
        await store.set_paused(queue, True)
    assert not await store.queue_exists(queue)


async def test_peek_shows_each_state_without_leasing(store: Store, queue: str, clock: FakeClock) -> None:
    ready, leased, delayed, retrying = (
        new_item(queue, n, created_at=clock.now + timedelta(seconds=n)) for n in range(4)
    )
    await push(store, leased)
    [popped] = await store.pop(queue, 1, 60)
    await push(store, retrying)
    [failing] = await store.pop(queue, 1, 60)
    await store.fail(failing.id, Failure("later", lease_token=failing.lease_token, retry_after_seconds=300))
    await push(
        store, ready, new_item(queue, 4, created_at=clock.now + timedelta(seconds=4), delay_seconds=600)
    )
    delayed = (await store.peek(queue, ItemStatus.DELAYED, 10, None)).items[0]

    found = {state: [v.id for v in (await store.peek(queue, state, 10, None)).items] for state in (
        ItemStatus.READY, ItemStatus.LEASED, ItemStatus.DELAYED, ItemStatus.RETRYING)}  # fmt: skip
    assert found == {
        ItemStatus.READY: [ready.id],
        ItemStatus.LEASED: [popped.id],
        ItemStatus.DELAYED: [delayed.id],
        ItemStatus.RETRYING: [retrying.id],
    }
    stats = await store.get_queue(queue)
    assert (stats.ready, stats.leased, stats.delayed, stats.retrying) == (
        1,
        1,
        1,
        1,
    )  # peeking leased nothing


async def test_peek_pages_oldest_first(store: Store, queue: str, clock: FakeClock) -> None:
    items = [new_item(queue, n, created_at=clock.now - timedelta(seconds=10 - n)) for n in range(5)]
    await push(store, *reversed(items))
    seen, cursor = [], None
    while True:
        page = await store.peek(queue, ItemStatus.READY, 2, cursor)
        seen += [v.payload for v in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [0, 1, 2, 3, 4]


async def test_deleting_a_queue_with_leased_items_needs_force(store: Store, queue: str) -> None:
    await push(store, new_item(queue, 1, dedup_key="k"), new_item(queue, 2))
    [leased] = await store.pop(queue, 1, 60)
    with pytest.raises(QueueInUse):
        await store.delete_queue(queue, force=False)
    assert (await store.get_queue(queue)).leased == 1  # nothing changed

    assert await store.delete_queue(queue, force=True) == DeletedQueue(items=2, history=0)
    assert not await store.queue_exists(queue)
    with pytest.raises(QueueNotFound):
        await store.get_queue(queue)
    assert await store.complete_batch([Completion(leased.id, leased.lease_token)]) != []
    # Its dedup keys went with it: the same key is new again.
    [again] = await store.push_batch([new_item(queue, 3, dedup_key="k")], skip_existing=False)
    assert again is not None
    assert again.created


async def test_deleting_a_queue_takes_its_history(store: Store, queue: str) -> None:
    await push(store, new_item(queue, 1))
    [item] = await store.pop(queue, 1, 60)
    await store.complete(item.id, item.lease_token)
    assert await store.delete_queue(queue, force=False) == DeletedQueue(items=0, history=1)
    with pytest.raises(QueueNotFound):
        await store.delete_queue(queue, force=False)


ROUTES: list[tuple[str, str, dict[str, object] | None]] = [
    ("GET", "/queues/{q}", None),
    ("GET", "/queues/{q}/dead", None),
    ("GET", "/queues/{q}/history", None),
    ("GET", "/queues/{q}/items?state=ready", None),
    ("GET", "/queues/{q}/items/by-group?group=g", None),
    ("GET", "/queues/{q}/items/by-dedup-key?dedup_key=k", None),
    ("POST", "/queues/{q}/redrive", {}),
    ("DELETE", "/queues/{q}/dead", None),
    ("POST", "/queues/{q}/pause", None),
    ("POST", "/queues/{q}/resume", None),
    ("DELETE", "/queues/{q}", None),
]


async def test_every_route_naming_an_unknown_queue_is_404_queue_not_found(client: Client, queue: str) -> None:
    for method, path, body in ROUTES:
        answer = await client.request(method, path.format(q=queue), json=body)
        assert_error(answer, 404, "QueueNotFound")


async def test_pause_peek_resume_and_delete_over_http(client: Client, queue: str) -> None:
    await client.post("/push", json={"queue": queue, "payload": {"n": 1}})
    paused = await client.post(f"/queues/{queue}/pause")
    assert (paused.status_code, paused.json()["paused"]) == (200, True)
    assert (await client.post("/pop", json={"queue": queue})).json() == {"items": [], "completed": []}
    peeked = (await client.get(f"/queues/{queue}/items", params={"state": "ready"})).json()
    assert [i["payload"] for i in peeked["items"]] == [{"n": 1}]
    assert peeked["next_cursor"] is None
    assert_error(await client.get(f"/queues/{queue}/items", params={"state": "dead"}), 422, "ValidationError")
    assert (await client.post(f"/queues/{queue}/resume")).json()["paused"] is False
    [item] = (await client.post("/pop", json={"queue": queue, "lease_seconds": 60})).json()["items"]
    assert_error(await client.delete(f"/queues/{queue}"), 409, "QueueInUse")
    deleted = await client.delete(f"/queues/{queue}", params={"force": "true"})
    assert deleted.json() == {"queue": queue, "items": 1, "history": 0}
    assert_error(
        await client.delete(f"/items/{item['id']}", params={"lease_token": item["lease_token"]}),
        404,
        "ItemNotFound",
    )


async def test_finding_items_by_group_and_by_dedup_key_over_http(client: Client, queue: str) -> None:
    # Keys are any text but NUL and a trailing space: slashes, '?', '#' and '%' travel as a query.
    group, key = "tenant/7 ?#%", "order/42?x=1#y"
    pushed = [
        (await client.post("/push", json={"queue": queue, "payload": n, "group": group})).json()["id"]
        for n in range(3)
    ]
    keyed = await client.post("/push", json={"queue": queue, "payload": "k", "dedup_key": key})
    seen, cursor = [], None
    while True:
        params = {"group": group, "limit": 2} | ({"cursor": cursor} if cursor else {})
        answer = await client.get(f"/queues/{queue}/items/by-group", params=params)
        assert answer.status_code == 200, answer.text
        seen += [(i["id"], i["payload"], i["group"]) for i in answer.json()["items"]]
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == [(pushed[n], n, group) for n in range(3)]
    empty = await client.get(f"/queues/{queue}/items/by-group", params={"group": "other"})
    assert empty.json() == {"items": [], "next_cursor": None}

    found = await client.get(f"/queues/{queue}/items/by-dedup-key", params={"dedup_key": key})
    assert found.status_code == 200, found.text
    assert (found.json()["id"], found.json()["dedup_key"], found.json()["payload"]) == (
        keyed.json()["id"],
        key,
        "k",
    )
    assert_error(
        await client.get(f"/queues/{queue}/items/by-dedup-key", params={"dedup_key": "nope"}),
        404,
        "ItemNotFound",
    )


@pytest.mark.parametrize(
    "path",
    [
        "/queues/{q}/items/by-group",
        "/queues/{q}/items/by-group?group=",
        "/queues/{q}/items/by-group?group=g%20",
        "/queues/{q}/items/by-group?group=a%00b",
        "/queues/{q}/items/by-group?group=g&limit=0",
        "/queues/{q}/items/by-group?group=g&cursor=not-a-cursor",
        "/queues/{q}/items/by-dedup-key",
        "/queues/{q}/items/by-dedup-key?dedup_key=",
        "/queues/{q}/items/by-dedup-key?dedup_key=k%20",
        "/queues/{q}/items/by-dedup-key?dedup_key=" + "x" * 129,
        "/queues/{q}/items/by-dedup-key?dedup_key=%F0%9F%98%80" + "x" * 127,
    ],
)
async def test_finding_items_with_bad_input_is_422(client: Client, queue: str, path: str) -> None:
    await client.post("/push", json={"queue": queue, "payload": 1})
    answer = await client.get(path.format(q=queue))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] in {"ValidationError", "InvalidCursor"}
