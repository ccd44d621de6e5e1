"""The HTTP API through the real app, in-process (httpx's ASGI transport, real lifespan)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from simplequeue import __version__
from simplequeue.main import create_app
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.http import Client, app_client, assert_error

# --- the whole flow, on every engine --------------------------------------------------------


async def test_push_pop_fail_complete_and_inspect(client: Client, queue: str, clock: FakeClock) -> None:
    pushed = await client.post("/push", json={"queue": queue, "payload": {"n": 1}})
    assert pushed.status_code == 201, pushed.text
    item_id = pushed.json()["id"]
    assert set(pushed.json()) == {"id", "queue", "created_at", "created"}

    popped = await client.post("/pop", json={"queue": queue, "lease_seconds": 60})
    assert popped.status_code == 200
    [item] = popped.json()["items"]
    assert set(item) == {
        "id",
        "queue",
        "payload",
        "created_at",
        "attempts",
        "lease_token",
        "lease_expires_at",
        "priority",
        "group",
        "fairness_key",
        "attributes",
    }
    assert (item["id"], item["payload"], item["attempts"], item["attributes"]) == (item_id, {"n": 1}, 1, None)

    failed = await client.post(
        f"/items/{item_id}/fail",
        json={"error": "db timeout", "lease_token": item["lease_token"], "retry_after_seconds": 0},
    )
    assert failed.status_code == 200, failed.text
    assert failed.json()["status"] == "ready"
    assert [e["error"] for e in failed.json()["errors"]] == ["db timeout"]

    [again] = (await client.post("/pop", json={"queue": queue})).json()["items"]
    assert again["attempts"] == 2

    view = (await client.get(f"/items/{item_id}")).json()
    assert set(view) == {
        "id",
        "queue",
        "payload",
        "status",
        "attempts",
        "max_attempts",
        "errors",
        "created_at",
        "lease_expires_at",
        "visible_at",
        "priority",
        "group",
        "dedup_key",
        "fairness_key",
        "first_popped_at",
        "died_at",
        "attributes",
        "lease_token_prefix",
    }
    assert (view["status"], view["attempts"]) == ("leased", 2)
    assert view["lease_token_prefix"] == again["lease_token"][:8]  # which lease, never the token

    stale = await client.delete(f"/items/{item_id}", params={"lease_token": item["lease_token"]})
    assert_error(stale, 409, "LeaseMismatch")
    done = await client.delete(f"/items/{item_id}", params={"lease_token": again["lease_token"]})
    assert done.status_code == 204
    assert done.content == b""
    assert_error(await client.get(f"/items/{item_id}"), 404, "ItemNotFound")

    stats = (await client.get(f"/queues/{queue}")).json()
    assert stats == {
        "name": queue,
        "ready": 0,
        "leased": 0,
        "delayed": 0,
        "retrying": 0,
        "dead": 0,
        "oldest_ready_age_seconds": None,
        "history": {"completed": 1, "dead": 0},
        "settings": {
            "max_attempts": 5,
            "lease_seconds": 30,
            "backoff": {"base_seconds": 1.0, "factor": 2.0, "cap_seconds": 3600.0, "jitter": 0.1},
            "retention_seconds": 604800,
            "dedup_window_seconds": 3600,
            "dedup_window_from": "finish",
            "history_payload": False,
            "dead_letter_queue": None,
            "message_retention_seconds": None,
            "max_leased": None,
            "rate_per_second": None,
            "rate_burst": None,
            "max_leased_per_key": None,
            "rate_per_key_per_second": None,
            "priority_aging_seconds": None,
        },
        "paused": False,
        "top_keys": [],
        "limits_binding": [],
    }
    # The list is paged and the database is shared with other tests: the pages up to this queue's.
    listed, params = [], {"limit": "1000"}
    for _ in range(100):  # bounded: at most 100,000 queues
        body = (await client.get("/queues", params=params)).json()
        listed += body["queues"]
        if body["next_cursor"] is None or listed[-1]["name"] >= queue:
            break
        params["cursor"] = body["next_cursor"]
    # A page of queues carries their counts and settings, not each queue's keys and limits at work.
    assert {k: v for k, v in stats.items() if k not in ("top_keys", "limits_binding")} in listed


async def test_client_supplied_id_and_created_at_are_kept(client: Client, queue: str) -> None:
    item_id = str(uuid4())
    body = {"queue": queue, "payload": "x", "id": item_id, "created_at": "2021-09-16T17:55:38.403+02:00"}
    pushed = await client.post("/push", json=body)
    assert pushed.status_code == 201
    assert pushed.json() == {
        "id": item_id,
        "queue": queue,
        "created_at": "2021-09-16T15:55:38.403000Z",
        "created": True,
    }

    # The id is the push's idempotency key: sent again, it answers the original and changes nothing.
    again = await client.post("/push", json={**body, "payload": "changed"})
    assert again.status_code == 200, again.text
    assert again.json() == {**pushed.json(), "created": False}
    assert (await client.get(f"/items/{item_id}")).json()["payload"] == "x"
    # Another queue's push cannot take it.
    elsewhere = await client.post("/push", json={**body, "queue": queue + "-other"})
    assert_error(elsewhere, 409, "ItemExists")


async def test_a_push_retried_after_its_item_was_completed_is_not_done_twice(
    client: Client, queue: str
) -> None:
    item_id = str(uuid4())
    first = await client.post("/push", json={"queue": queue, "payload": 1, "id": item_id})
    assert first.status_code == 201
    popped = (await client.post("/pop", json={"queue": queue})).json()["items"]
    assert [i["id"] for i in popped] == [item_id]
    done = await client.delete(f"/items/{item_id}", params={"lease_token": popped[0]["lease_token"]})
    assert done.status_code in (200, 204), done.text

    retry = await client.post("/push", json={"queue": queue, "payload": 1, "id": item_id})
    assert retry.status_code == 200, retry.text
    assert (retry.json()["id"], retry.json()["created"]) == (item_id, False)
    batch = await client.post("/push/batch", json={"queue": queue, "items": [{"payload": 1, "id": item_id}]})
    assert batch.status_code == 200, batch.text
    assert batch.json() == {"ids": [item_id], "created": [False]}
    assert (await client.post("/pop", json={"queue": queue})).json()["items"] == []


async def test_fail_without_retry_parks_dead(client: Client, queue: str) -> None:
    item_id = (await client.post("/push", json={"queue": queue, "payload": 1})).json()["id"]
    dead = await client.post(f"/items/{item_id}/fail", json={"error": "poison", "retry": False})
    assert dead.json()["status"] == "dead"
    assert (await client.post("/pop", json={"queue": queue})).json() == {"items": [], "completed": []}
    assert (await client.get(f"/queues/{queue}")).json()["dead"] == 1
    assert_error(await client.post(f"/items/{item_id}/fail", json={"error": "x"}), 409, "ItemDead")


async def test_long_poll_returns_when_an_item_is_pushed(client: Client, queue: str) -> None:
    waiting = asyncio.create_task(client.post("/pop", json={"queue": queue, "wait_seconds": 20}))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await client.post("/push", json={"queue": queue, "payload": "wake"})
    response = await asyncio.wait_for(waiting, timeout=10)
    assert [i["payload"] for i in response.json()["items"]] == ["wake"]


async def test_long_poll_ends_empty_after_its_wait(client: Client, queue: str) -> None:
    response = await client.post("/pop", json={"queue": queue, "wait_seconds": 0.3})
    assert response.json() == {"items": [], "completed": []}


async def test_health_and_readiness(client: Client) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok", "version": __version__}
    assert (await client.get("/readyz")).json() == {"status": "ready", "version": __version__}


async def test_batch_push_then_batch_complete(client: Client, queue: str) -> None:
    given = str(uuid4())
    body = {
        "queue": queue,
        "items": [{"payload": n} for n in range(150)] + [{"payload": "mine", "id": given}],
    }
    pushed = await client.post("/push/batch", json=body)
    assert pushed.status_code == 201, pushed.text
    ids = pushed.json()["ids"]
    assert (len(ids), ids[-1]) == (151, given)

    popped = (await client.post("/pop", json={"queue": queue, "max_items": 100})).json()["items"]
    assert [i["payload"] for i in popped] == list(range(100))
    refs = [{"id": i["id"], "lease_token": i["lease_token"]} for i in popped[:99]]
    refs += [{"id": popped[99]["id"], "lease_token": str(uuid4())}, {"id": str(uuid4())}, {"id": given}]
    done = await client.post("/items/complete", json={"items": refs})
    assert done.status_code == 200, done.text
    results = [r["result"] for r in done.json()["results"]]
    assert results == ["completed"] * 99 + ["lease_mismatch", "not_found", "completed"]
    assert (await client.get(f"/queues/{queue}")).json()["ready"] == 50


async def test_batch_push_is_all_or_nothing(client: Client, queue: str) -> None:
    taken = (await client.post("/push", json={"queue": queue + "-other", "payload": "first"})).json()["id"]
    body = {"queue": queue, "items": [{"payload": 1}, {"payload": 2, "id": taken}]}
    assert_error(await client.post("/push/batch", json=body), 409, "ItemExists")
    assert_error(await client.get(f"/queues/{queue}"), 404, "QueueNotFound")  # nothing went in


async def test_long_poll_is_woken_by_a_batch_push(client: Client, queue: str) -> None:
    waiting = asyncio.create_task(
        client.post("/pop", json={"queue": queue, "wait_seconds": 20, "max_items": 5})
    )
    await asyncio.sleep(0.2)
    await client.post("/push/batch", json={"queue": queue, "items": [{"payload": n} for n in range(3)]})
    response = await asyncio.wait_for(waiting, timeout=10)
    assert [i["payload"] for i in response.json()["items"]] == [0, 1, 2]


# --- bad input: a clear 4xx with the envelope, and nothing changes --------------------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"queue": "q"},
        {"payload": 1, "queue": ""},
        {"payload": 1, "queue": "has space"},
        {"payload": 1, "queue": "slash/name"},
        {"payload": 1, "queue": "é"},
        {"payload": 1, "queue": "x" * 129},
        {"payload": 1, "queue": 7},
        {"payload": 1, "id": "not-a-uuid"},
        {"payload": 1, "id": 12},
        {"payload": 1, "created_at": "yesterday"},
        {"payload": 1, "created_at": "2021-13-40T00:00:00Z"},
        {"payload": 1, "created_at": "9999-12-31T23:59:59-05:00"},
        {"payload": 1, "created_at": 0},
        {"payload": 1, "unknown_option": 5},
        {"payload": 1, "priority": "5"},
        {"payload": 1, "priority": 2**31},
        {"payload": 1, "priority": 1.5},
        {"payload": 1, "delay_seconds": -1},
        {"payload": 1, "not_before": "soon"},
        {"payload": 1, "group": ""},
        {"payload": 1, "group": "x" * 129},
        {"payload": 1, "group": "nul\u0000"},
        {"payload": 1, "dedup_key": 7},
        {"payload": 1, "dedup_key": ""},
        {"payload": 1, "dedup_key": "nul\u0000"},
        # SQL Server's = ignores trailing spaces, and NVARCHAR(128) counts UTF-16 code units.
        {"payload": 1, "dedup_key": "order-7 "},
        {"payload": 1, "group": "g "},
        {"payload": 1, "dedup_key": "\U0001f600" * 65},
        [1, 2],
        "just a string",
        None,
    ],
)
async def test_push_refuses_invalid_bodies(lite: Client, body: Any) -> None:
    raw = json.dumps(body)  # json=None would send no body at all; send the literal null
    response = await lite.post("/push", content=raw, headers={"content-type": "application/json"})
    result = assert_error(response, 422, "ValidationError")
    assert result["fields"]
    assert (await lite.get("/queues")).json() == {"queues": [], "next_cursor": None}


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ('{"payload": NaN}', "InvalidPayload"),
        ('{"payload": 1e999}', "InvalidPayload"),
        ('{"payload": "\\ud800"}', "InvalidPayload"),
        ('{"payload": "nul \\u0000 inside"}', "InvalidPayload"),
    ],
)
async def test_push_refuses_payloads_no_database_can_hold(lite: Client, raw: str, code: str) -> None:
    response = await lite.post("/push", content=raw, headers={"content-type": "application/json"})
    assert_error(response, 422, code)
    assert (await lite.get("/queues")).json() == {"queues": [], "next_cursor": None}


async def test_malformed_json_and_wrong_content_type(lite: Client) -> None:
    bad = await lite.post("/push", content=b'{"payload": ', headers={"content-type": "application/json"})
    assert_error(bad, 400, "MalformedJSON")
    form = await lite.post("/push", content=b'{"payload": 1}', headers={"content-type": "text/plain"})
    assert_error(form, 415, "UnsupportedMediaType")
    missing = await lite.post("/pop")
    assert_error(missing, 415, "UnsupportedMediaType")


async def test_payload_and_body_size_limits(lite: Client) -> None:
    assert (await lite.post("/push", json={"payload": "x" * 1000})).status_code == 201
    assert_error(await lite.post("/push", json={"payload": "x" * 1023}), 413, "PayloadTooLarge")
    # multi-byte characters count as their UTF-8 bytes
    assert_error(await lite.post("/push", json={"payload": "é" * 600}), 413, "PayloadTooLarge")
    assert_error(await lite.post("/push", json={"payload": "x" * 25_000}), 413, "PayloadTooLarge")

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"payload": "'
        for _ in range(10):
            yield b"x" * 3000
        yield b'"}'

    streamed = await lite.post("/push", content=chunks(), headers={"content-type": "application/json"})
    assert_error(streamed, 413, "PayloadTooLarge")
    assert (await lite.get("/queues/default")).json()["ready"] == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/push"),
        ("post", "/push/batch"),
        ("post", "/pop"),
        ("post", "/items/complete"),
        ("post", "/items/00000000-0000-4000-8000-000000000001/fail"),
        ("post", "/items/00000000-0000-4000-8000-000000000001/extend"),
        ("put", "/queues/q"),
        ("post", "/queues/q/redrive"),
    ],
)
async def test_every_body_is_held_to_the_body_limit(lite: Client, method: str, path: str) -> None:
    body = json.dumps({"padding": "x" * 25_000})
    response = await lite.request(method, path, content=body, headers={"content-type": "application/json"})
    assert_error(response, 413, "PayloadTooLarge")


async def test_a_body_that_is_not_utf8_is_malformed_json_and_says_so(lite: Client) -> None:
    latin1 = b'{"payload": "caf\xe9"}'  # café in Latin-1
    response = await lite.post("/push", content=latin1, headers={"content-type": "application/json"})
    assert "UTF-8" in assert_error(response, 400, "MalformedJSON")["detail"]
    assert (await lite.get("/queues")).json() == {"queues": [], "next_cursor": None}


@pytest.mark.parametrize(
    ("created_at", "stored"),
    [
        ("2026-11-20T09:30:00.123456789012Z", "2026-11-20T09:30:00.123456Z"),
        ("2026-11-20T09:30:00." + "9" * 40 + "+01:00", "2026-11-20T08:30:00.999999Z"),
        ("2026-11-20T09:30:00.5Z", "2026-11-20T09:30:00.500000Z"),
    ],
)
async def test_times_take_any_number_of_fraction_digits(lite: Client, created_at: str, stored: str) -> None:
    pushed = await lite.post("/push", json={"payload": 1, "created_at": created_at})
    assert pushed.status_code == 201, pushed.text
    assert pushed.json()["created_at"] == stored
    listed = await lite.get("/queues/default/history", params={"since": created_at, "until": created_at})
    assert listed.status_code == 200, listed.text


@pytest.mark.parametrize("text", ["0.5", "1763631000", "2026-11-20T09:30:60Z", "2026-11-20T09:30:00.Z"])
async def test_times_that_are_not_iso_text_are_refused(lite: Client, text: str) -> None:
    assert_error(await lite.post("/push", json={"payload": 1, "created_at": text}), 422, "ValidationError")
    assert_error(await lite.get("/queues/default/history", params={"since": text}), 422, "ValidationError")


@pytest.mark.parametrize("path", ["/queues/default/dead", "/queues/default/history"])
async def test_an_empty_cursor_is_a_validation_error(lite: Client, path: str) -> None:
    # The spec says minLength 1: "" is not a cursor this service could have handed out.
    error = assert_error(await lite.get(path, params={"cursor": ""}), 422, "ValidationError")
    assert error["fields"][0]["loc"] == ["query", "cursor"]


@pytest.mark.parametrize(
    "body",
    [
        {"max_items": 0},
        {"max_items": 101},
        {"max_items": "many"},
        {"max_items": "5"},
        {"max_items": True},
        {"wait_seconds": False},
        {"wait_seconds": -1},
        {"wait_seconds": 20.5},
        {"lease_seconds": 0},
        {"lease_seconds": 43201},
        {"lease_seconds": 1.5},
        {"queue": "bad name"},
        {"max_item": 3},
    ],
)
async def test_pop_refuses_out_of_range_options(lite: Client, body: dict[str, Any]) -> None:
    await lite.post("/push", json={"payload": 1})
    assert_error(await lite.post("/pop", json=body), 422, "ValidationError")
    assert (await lite.get("/queues/default")).json()["ready"] == 1


async def test_item_routes_refuse_bad_ids_tokens_and_errors(lite: Client) -> None:
    item_id = (await lite.post("/push", json={"payload": 1})).json()["id"]
    assert_error(await lite.delete("/items/nope"), 404, "NotFound")  # no route: ids are UUIDs
    assert_error(await lite.get("/items/123"), 404, "NotFound")
    assert_error(
        await lite.delete(f"/items/{item_id}", params={"lease_token": "zzz"}), 422, "ValidationError"
    )
    assert_error(await lite.delete(f"/items/{uuid4()}"), 404, "ItemNotFound")
    assert_error(await lite.post(f"/items/{uuid4()}/fail", json={"error": "x"}), 404, "ItemNotFound")
    for body in (
        {},
        {"error": ""},
        {"error": "x" * 16385},
        {"error": "nul\x00"},
        {"error": "x", "retry": "perhaps"},
        {"error": "x", "retry": 1},
        {"error": "x", "retry_after_seconds": "10"},
        {"error": "x", "retry_after_seconds": -1},
        {"error": "x", "retry_after_seconds": 604801},
        {"error": "x", "lease_token": "abc"},
        {"error": "x", "extra": 1},
    ):
        assert_error(await lite.post(f"/items/{item_id}/fail", json=body), 422, "ValidationError")
    view = (await lite.get(f"/items/{item_id}")).json()
    assert (view["status"], view["errors"], view["attempts"]) == ("ready", [], 0)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/push/batch", {"items": []}),
        ("/push/batch", {"items": [{"payload": 1}] * 1001}),
        ("/push/batch", {"items": [{"id": "a"}]}),
        ("/push/batch", {"items": [{"payload": 1, "queue": "x"}]}),
        ("/push/batch", {"queue": "bad name", "items": [{"payload": 1}]}),
        ("/items/complete", {"items": []}),
        ("/items/complete", {"items": [{"id": "nope"}]}),
        ("/items/complete", {"items": [{"id": "00000000-0000-4000-8000-000000000001", "token": "x"}]}),
    ],
)
async def test_batch_routes_refuse_bad_bodies(lite: Client, path: str, body: dict[str, Any]) -> None:
    assert_error(await lite.post(path, json=body), 422, "ValidationError")
    assert (await lite.get("/queues")).json() == {"queues": [], "next_cursor": None}


async def test_batch_push_refuses_one_oversized_payload_whole(lite: Client) -> None:
    body = {"items": [{"payload": "small"}, {"payload": "x" * 2000}]}
    error = assert_error(await lite.post("/push/batch", json=body), 413, "PayloadTooLarge")
    assert "items[1]" in error["detail"]
    assert (await lite.get("/queues")).json() == {"queues": [], "next_cursor": None}


async def test_queue_routes_and_unknown_paths(lite: Client) -> None:
    assert_error(await lite.get("/queues/never-pushed"), 404, "QueueNotFound")
    assert_error(await lite.get("/queues/bad name"), 422, "ValidationError")
    assert_error(await lite.get("/nowhere"), 404, "NotFound")
    assert_error(await lite.put("/push", json={}), 405, "MethodNotAllowed")


# --- the database going away ----------------------------------------------------------------


async def test_database_outage_answers_503_quickly(clock: FakeClock) -> None:
    # Port 1 on loopback refuses connections: the service must say so, not hang or crash.
    settings = Settings(
        database_url="postgresql://postgres@127.0.0.1:1/none", migrate_on_start=False, db_timeout_seconds=2
    )
    async for client in app_client(settings, clock):
        assert (await client.get("/healthz")).status_code == 200
        for call in (
            client.get("/readyz"),
            client.post("/push", json={"payload": 1}),
            client.post("/pop", json={"wait_seconds": 5}),
            client.get("/queues"),
        ):
            response = await asyncio.wait_for(call, timeout=10)
            assert_error(response, 503, "DatabaseUnavailable")
            assert response.headers["retry-after"] == "1"


async def test_readiness_fails_until_migrated(tmp_path: Path, clock: FakeClock) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}", migrate_on_start=False)
    async for client in app_client(settings, clock):
        assert_error(await client.get("/readyz"), 503, "SchemaNotReady")
        assert_error(await client.post("/push", json={"payload": 1}), 503, "SchemaNotReady")


def test_openapi_spec_is_committed_and_current() -> None:
    current = json.dumps(create_app(Settings()).openapi(), indent=2, sort_keys=True) + "\n"
    committed = (Path(__file__).parent.parent / "openapi" / "openapi.json").read_text(encoding="utf-8")
    assert committed == current, "the API changed: run `simplequeue openapi --output openapi/openapi.json`"


def test_operation_ids_are_stable() -> None:
    spec = create_app(Settings()).openapi()
    ids = {op["operationId"] for path in spec["paths"].values() for op in path.values()}
    expected = {
        "push",
        "pushBatch",
        "pop",
        "completeItem",
        "completeItems",
        "failItem",
        "getItem",
        "releaseItem",
        "listQueues",
        "getQueue",
        "pauseQueue",
        "resumeQueue",
        "peekItems",
        "listGroupItems",
        "getItemByDedupKey",
        "deleteQueue",
        "healthz",
        "readyz",
        "extendLease",
        "putQueue",
        "putKey",
        "getKey",
        "listKeys",
        "resetKey",
        "listDead",
        "redrive",
        "purgeDead",
        "listHistory",
        "getQueueActivity",
        "getActivity",
        "listTopics",
        "putTopic",
        "getTopic",
        "changeTopic",
        "deleteTopic",
        "subscribe",
        "listSubscriptions",
        "getSubscription",
        "changeSubscription",
        "unsubscribe",
        "publish",
        "publishBatch",
        "listSchedules",
        "putSchedule",
        "getSchedule",
        "deleteSchedule",
        "pauseSchedule",
        "resumeSchedule",
        "triggerSchedule",
    }
    assert ids == expected


async def test_keys_are_held_to_what_every_engine_stores_alike(lite: Client) -> None:
    spaced = await lite.post("/push", json={"payload": 1, "dedup_key": "order-7 "})
    assert "must not end with a space" in json.dumps(assert_error(spaced, 422, "ValidationError"))
    wide = await lite.post("/push", json={"payload": 1, "group": "\U0001f600" * 65})
    assert "128 UTF-16 code units" in json.dumps(assert_error(wide, 422, "ValidationError"))
    # 64 characters beyond U+FFFF are 128 code units, inner spaces are fine: both taken.
    for key in ("\U0001f600" * 64, "order 7"):
        assert (await lite.post("/push", json={"payload": 1, "dedup_key": key})).status_code == 201


async def test_pop_completes_the_items_it_is_given_first(client: Client, queue: str) -> None:
    for n in range(3):
        assert (await client.post("/push", json={"queue": queue, "payload": n})).status_code == 201
    [first] = (await client.post("/pop", json={"queue": queue})).json()["items"]
    unknown = "00000000-0000-4000-8000-000000000000"

    answer = await client.post(
        "/pop",
        json={
            "queue": queue,
            "max_items": 5,
            "complete": [
                {"id": first["id"], "lease_token": first["lease_token"]},
                {"id": unknown, "lease_token": first["lease_token"]},
            ],
        },
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["completed"] == [
        {"id": first["id"], "result": "completed"},
        {"id": unknown, "result": "not_found"},
    ]
    assert [i["payload"] for i in body["items"]] == [1, 2]
    assert (await client.get(f"/items/{first['id']}")).status_code == 404
    plain = (await client.post("/pop", json={"queue": queue})).json()
    assert plain == {"items": [], "completed": []}


@pytest.mark.parametrize(
    "complete",
    [
        [{"id": "00000000-0000-4000-8000-000000000000"}],  # a lease token is required here
        [{"id": "not-a-uuid", "lease_token": "00000000-0000-4000-8000-000000000000"}],
        [
            {
                "id": "00000000-0000-4000-8000-000000000000",
                "lease_token": "00000000-0000-4000-8000-000000000000",
            }
        ]
        * 101,
    ],
)
async def test_pop_refuses_bad_completions_and_changes_nothing(lite: Client, complete: list[Any]) -> None:
    await lite.post("/push", json={"payload": 1})
    assert_error(await lite.post("/pop", json={"complete": complete}), 422, "ValidationError")
    assert (await lite.get("/queues/default")).json()["ready"] == 1
