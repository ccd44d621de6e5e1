"""The delivery-semantics routes over HTTP, on every reachable engine (shapes, statuses, bad
input); the behaviour behind them is covered store-side by tests/conformance/."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.http import Client, app_client, assert_error


async def put_queue(client: Client, queue: str, **settings: Any) -> dict[str, Any]:
    response = await client.put(f"/queues/{queue}", json=settings)
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


async def test_put_queue_creates_then_replaces(client: Client, queue: str) -> None:
    created = await client.put(f"/queues/{queue}", json={"max_attempts": 2, "backoff": {"jitter": 0}})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["settings"]["max_attempts"] == 2
    assert body["settings"]["backoff"] == {
        "base_seconds": 1.0,
        "factor": 2.0,
        "cap_seconds": 3600.0,
        "jitter": 0,
    }
    assert (body["ready"], body["history"]) == (0, {"completed": 0, "dead": 0})

    replaced = await client.put(f"/queues/{queue}", json={})
    assert replaced.status_code == 200
    assert replaced.json()["settings"]["max_attempts"] == 5  # PUT replaces: omitted means default
    got = (await client.get(f"/queues/{queue}")).json()
    # GET adds what it knows of the queue's keys (nothing yet) to the view a PUT answers.
    assert (got.pop("top_keys"), got.pop("limits_binding")) == ([], [])
    assert got == replaced.json()


@pytest.mark.parametrize(
    "body",
    [
        {"max_attempts": 0},
        {"max_attempts": 1001},
        {"max_attempts": "3"},
        {"lease_seconds": -1},
        {"backoff": {"factor": 0.5}},
        {"backoff": {"jitter": 1.5}},
        {"backoff": {"base": 1}},
        {"retention_seconds": -1},
        {"dedup_window_seconds": 1.5},
        {"dedup_window_from": "later"},
        {"history_payload": "yes"},
        {"max_attempt": 3},
        [],
    ],
)
async def test_put_queue_refuses_bad_settings(lite: Client, body: Any) -> None:
    assert_error(await lite.put("/queues/q", json=body), 422, "ValidationError")
    assert_error(await lite.get("/queues/q"), 404, "QueueNotFound")


async def test_dedup_push_answers_200_with_the_original(client: Client, queue: str) -> None:
    first = await client.post("/push", json={"queue": queue, "payload": 1, "dedup_key": "k"})
    assert first.status_code == 201
    again = await client.post("/push", json={"queue": queue, "payload": 2, "dedup_key": "k"})
    assert again.status_code == 200, again.text
    assert again.json() == {**first.json(), "created": False}

    batch = await client.post(
        "/push/batch",
        json={
            "queue": queue,
            "items": [{"payload": 3, "dedup_key": "k"}, {"payload": 4, "dedup_key": "new"}],
        },
    )
    assert batch.status_code == 201
    assert batch.json()["created"] == [False, True]
    assert batch.json()["ids"][0] == first.json()["id"]
    repeat = await client.post(
        "/push/batch", json={"queue": queue, "items": [{"payload": 3, "dedup_key": "k"}]}
    )
    assert (repeat.status_code, repeat.json()["created"]) == (200, [False])
    assert (await client.get(f"/queues/{queue}")).json()["ready"] == 2


async def test_retries_dead_letters_redrive_and_history(client: Client, queue: str, clock: FakeClock) -> None:
    await put_queue(client, queue, max_attempts=2, backoff={"base_seconds": 10, "jitter": 0})
    item_id = (await client.post("/push", json={"queue": queue, "payload": "p"})).json()["id"]
    for attempt, expected in ((1, "retrying"), (2, "dead")):
        [item] = (await client.post("/pop", json={"queue": queue})).json()["items"]
        assert item["attempts"] == attempt
        failed = await client.post(
            f"/items/{item_id}/fail", json={"error": f"e{attempt}", "lease_token": item["lease_token"]}
        )
        assert failed.json()["status"] == expected, failed.text
        clock.advance(10)

    dead = (await client.get(f"/queues/{queue}/dead", params={"limit": 1})).json()
    assert [(d["id"], [e["error"] for e in d["errors"]]) for d in dead["items"]] == [(item_id, ["e1", "e2"])]
    assert dead["next_cursor"] is not None
    assert (await client.get(f"/queues/{queue}/dead", params={"cursor": dead["next_cursor"]})).json() == {
        "items": [],
        "next_cursor": None,
    }
    history = (await client.get(f"/queues/{queue}/history", params={"outcome": "dead"})).json()
    assert [(h["id"], h["outcome"], h["last_error"]) for h in history["items"]] == [(item_id, "dead", "e2")]

    redriven = await client.post(f"/queues/{queue}/redrive", json={})
    assert redriven.json() == {"redriven": 1}
    [item] = (await client.post("/pop", json={"queue": queue})).json()["items"]
    assert (item["id"], item["attempts"]) == (item_id, 1)
    assert (
        await client.delete(f"/items/{item_id}", params={"lease_token": item["lease_token"]})
    ).status_code == 204
    stats = (await client.get(f"/queues/{queue}")).json()
    assert (stats["dead"], stats["history"]) == (0, {"completed": 1, "dead": 1})


async def test_purge_dead(client: Client, queue: str) -> None:
    ids = (
        await client.post("/push/batch", json={"queue": queue, "items": [{"payload": n} for n in range(3)]})
    ).json()["ids"]
    for i in ids:
        await client.post(f"/items/{i}/fail", json={"error": "x", "retry": False})
    assert (await client.delete(f"/queues/{queue}/dead")).json() == {"purged": 3}
    assert (await client.get(f"/queues/{queue}/dead")).json()["items"] == []


async def test_extend_lease(client: Client, queue: str, clock: FakeClock) -> None:
    await client.post("/push", json={"queue": queue, "payload": 1})
    [item] = (await client.post("/pop", json={"queue": queue, "lease_seconds": 10})).json()["items"]
    url = f"/items/{item['id']}/extend"
    extended = await client.post(url, json={"lease_token": item["lease_token"], "lease_seconds": 120})
    assert extended.status_code == 200, extended.text
    assert extended.json()["lease_expires_at"] == (clock.now + timedelta(seconds=120)).isoformat().replace(
        "+00:00", "Z"
    )
    assert_error(
        await client.post(url, json={"lease_token": str(uuid4()), "lease_seconds": 5}), 409, "LeaseMismatch"
    )
    clock.advance(121)
    assert_error(
        await client.post(url, json={"lease_token": item["lease_token"], "lease_seconds": 5}),
        409,
        "LeaseExpired",
    )
    assert_error(
        await client.post(f"/items/{uuid4()}/extend", json={"lease_token": str(uuid4()), "lease_seconds": 5}),
        404,
        "ItemNotFound",
    )


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("post", "/items/{id}/extend", {"json": {"lease_seconds": 5}}),
        ("post", "/items/{id}/extend", {"json": {"lease_token": "{token}", "lease_seconds": 0}}),
        ("post", "/items/{id}/extend", {"json": {"lease_token": "{token}", "lease_seconds": 43201}}),
        ("get", "/queues/q/dead", {"params": {"limit": 0}}),
        ("get", "/queues/q/dead", {"params": {"cursor": "garbage"}}),
        ("get", "/queues/bad name/dead", {}),
        ("post", "/queues/q/redrive", {"json": {"ids": []}}),
        ("post", "/queues/q/redrive", {"json": {"ids": ["nope"]}}),
        ("post", "/queues/q/redrive", {"json": {"rate_per_second": 0}}),
        ("get", "/queues/q/history", {"params": {"outcome": "maybe"}}),
        ("get", "/queues/q/history", {"params": {"since": "yesterday"}}),
        ("get", "/queues/q/history", {"params": {"limit": 1001}}),
        ("get", "/queues/q/history", {"params": {"cursor": "garbage"}}),
    ],
)
async def test_delivery_routes_refuse_bad_input(
    lite: Client, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    pushed = (await lite.post("/push", json={"queue": "q", "payload": 1})).json()
    [item] = (await lite.post("/pop", json={"queue": "q"})).json()["items"]
    filled = {
        k: {f: (v.replace("{token}", item["lease_token"]) if isinstance(v, str) else v) for f, v in d.items()}
        for k, d in kwargs.items()
    }
    response = await getattr(lite, method)(path.replace("{id}", pushed["id"]), **filled)
    assert response.status_code == 422, response.text
    assert response.json()["error"] in ("ValidationError", "InvalidCursor")
    assert (await lite.get(f"/items/{pushed['id']}")).json()["status"] == "leased"


@pytest.fixture
async def swept(settings: Settings, clock: FakeClock) -> AsyncIterator[Client]:
    """The app with its background sweep running often."""
    fast = settings.model_copy(update={"sweep": True, "reap_interval_seconds": 0.05})
    async for c in app_client(fast, clock):
        yield c


async def test_the_service_sweeps_expired_last_attempts_into_dead_letters(
    swept: Client, queue: str, clock: FakeClock
) -> None:
    await put_queue(swept, queue, max_attempts=1)
    await swept.post("/push", json={"queue": queue, "payload": 1})
    await swept.post("/pop", json={"queue": queue, "lease_seconds": 5})
    clock.advance(6)
    for _ in range(200):  # bounded: 200 x 50 ms
        dead = (await swept.get(f"/queues/{queue}/dead")).json()["items"]
        if dead:
            break
        await asyncio.sleep(0.05)
    assert [d["errors"][-1]["error"] for d in dead] == ["lease expired on the last attempt"]


async def test_a_late_worker_on_the_last_attempt_hears_item_dead_before_the_sweep(
    client: Client, queue: str, clock: FakeClock
) -> None:
    # The client's app runs no sweep: what the worker hears cannot depend on when one runs.
    await put_queue(client, queue, max_attempts=1)
    pushed = [
        (await client.post("/push", json={"queue": queue, "payload": n})).json()["id"] for n in range(4)
    ]
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 4, "lease_seconds": 5})).json()
    token = {item["id"]: item["lease_token"] for item in popped["items"]}
    completing, failing, extending, batched = pushed
    clock.advance(5)

    assert (await client.get(f"/items/{completing}")).json()["status"] == "dead"
    assert_error(
        await client.delete(f"/items/{completing}", params={"lease_token": token[completing]}),
        409,
        "ItemDead",
    )
    failed = await client.post(
        f"/items/{failing}/fail", json={"error": "late", "lease_token": token[failing]}
    )
    assert_error(failed, 409, "ItemDead")
    extended = await client.post(
        f"/items/{extending}/extend", json={"lease_token": token[extending], "lease_seconds": 60}
    )
    assert_error(extended, 409, "ItemDead")
    batch = await client.post(
        "/items/complete", json={"items": [{"id": batched, "lease_token": token[batched]}]}
    )
    assert batch.json() == {"results": [{"id": batched, "result": "dead"}]}

    stats = (await client.get(f"/queues/{queue}")).json()
    assert (stats["dead"], stats["leased"], stats["history"]) == (4, 0, {"completed": 0, "dead": 0})
    assert [e["error"] for e in (await client.get(f"/items/{failing}")).json()["errors"]] == []
    # Leave nothing for another test's sweep to find in the shared database: with attempts to spare,
    # these expired leases are merely ready again.
    await put_queue(client, queue, max_attempts=2)
    assert (await client.get(f"/queues/{queue}")).json()["ready"] == 4


async def test_an_admin_releases_a_stuck_lease(client: Client, queue: str, clock: FakeClock) -> None:
    await put_queue(client, queue, max_attempts=3)
    pushed = (await client.post("/push", json={"queue": queue, "payload": "stuck"})).json()
    [held] = (await client.post("/pop", json={"queue": queue, "lease_seconds": 600})).json()["items"]
    looked = (await client.get(f"/items/{pushed['id']}")).json()
    assert (looked["status"], looked["lease_token_prefix"]) == ("leased", held["lease_token"][:8])

    released = await client.post(f"/items/{pushed['id']}/release")
    assert released.status_code == 200, released.text
    body = released.json()
    assert (body["status"], body["attempts"], body["lease_token_prefix"]) == ("ready", 1, None)
    [again] = (await client.post("/pop", json={"queue": queue})).json()["items"]
    assert (again["id"], again["attempts"]) == (pushed["id"], 2)
    # The stuck worker's late answer is refused: its lease is gone.
    late = await client.delete(f"/items/{pushed['id']}", params={"lease_token": held["lease_token"]})
    assert_error(late, 409, "LeaseMismatch")
    # Releasing what is not leased answers it as it is; a dead item is 409; an unknown one 404.
    await client.post(f"/items/{pushed['id']}/release")
    assert (await client.post(f"/items/{pushed['id']}/release")).json()["status"] == "ready"
    [last] = (await client.post("/pop", json={"queue": queue})).json()["items"]
    await client.post(
        f"/items/{last['id']}/fail", json={"error": "no", "lease_token": last["lease_token"], "retry": False}
    )
    assert_error(await client.post(f"/items/{last['id']}/release"), 409, "ItemDead")
    assert_error(await client.post(f"/items/{uuid4()}/release"), 404, "ItemNotFound")
