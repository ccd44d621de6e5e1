"""A fair queue's keys over REST: their weight and limits set, read, listed and reset; bad values
a 422 naming the field with nothing written; an unknown queue a 404; a weight obeyed by pops; the
busiest keys and the limits that cut pops short in the queue's stats."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.engines import FakeClock
from tests.http import Client, assert_error


async def test_a_key_is_set_read_listed_and_reset(client: Client, queue: str) -> None:
    await client.post("/push", json={"queue": queue, "payload": 1, "fairness_key": "acme"})
    fresh = await client.get(f"/queues/{queue}/keys/acme")
    assert fresh.status_code == 200, fresh.text
    assert fresh.json() == {
        "key": "acme",
        "weight": 1.0,
        "max_leased": None,
        "rate_per_second": None,
        "ready": 1,
        "leased": 0,
    }
    put = await client.put(f"/queues/{queue}/keys/acme", json={"weight": 3, "max_leased": 2})
    assert put.status_code == 200, put.text
    assert put.json() == {
        "key": "acme",
        "weight": 3.0,
        "max_leased": 2,
        "rate_per_second": None,
        "ready": 1,
        "leased": 0,
    }
    await client.put(f"/queues/{queue}/keys/globex", json={"weight": 0.5})
    await client.post("/pop", json={"queue": queue})
    listed = (await client.get(f"/queues/{queue}/keys", params={"limit": 1})).json()
    assert [k["key"] for k in listed["keys"]] == ["acme"]
    assert listed["keys"][0]["leased"] == 1
    rest = (await client.get(f"/queues/{queue}/keys", params={"cursor": listed["next_cursor"]})).json()
    assert [(k["key"], k["weight"]) for k in rest["keys"]] == [("globex", 0.5)]
    assert rest["next_cursor"] is None

    reset = await client.delete(f"/queues/{queue}/keys/acme")
    assert reset.status_code == 200, reset.text
    assert reset.json()["weight"] == 1.0
    assert reset.json()["max_leased"] is None
    assert (await client.get(f"/queues/{queue}/keys/never-seen")).json()["ready"] == 0


async def test_an_unknown_queue_is_a_404(client: Client) -> None:
    for answer in (
        await client.put("/queues/no-such-queue/keys/k", json={"weight": 2}),
        await client.get("/queues/no-such-queue/keys/k"),
        await client.get("/queues/no-such-queue/keys"),
        await client.delete("/queues/no-such-queue/keys/k"),
    ):
        assert answer.status_code == 404, answer.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"weight": 0}, "weight"),
        ({"weight": -1}, "weight"),
        ({"weight": "heavy"}, "weight"),
        ({"max_leased": 0}, "max_leased"),
        ({"rate_per_second": 0}, "rate_per_second"),
        ({"rate_per_second": -2}, "rate_per_second"),
        ({"colour": "red"}, "colour"),
    ],
)
async def test_a_bad_value_is_a_422_naming_it_and_nothing_changes(
    client: Client, queue: str, body: dict[str, Any], field: str
) -> None:
    await client.put(f"/queues/{queue}", json={})
    await client.put(f"/queues/{queue}/keys/k", json={"weight": 2})
    answer = await client.put(f"/queues/{queue}/keys/k", json=body)
    assert_error(answer, 422, "ValidationError")
    assert field in answer.text
    assert (await client.get(f"/queues/{queue}/keys/k")).json()["weight"] == 2.0


async def test_a_bad_key_in_the_path_is_a_422(client: Client, queue: str) -> None:
    await client.put(f"/queues/{queue}", json={})
    answer = await client.put(f"/queues/{queue}/keys/ends%20", json={"weight": 2})
    assert_error(answer, 422, "ValidationError")


async def test_a_heavier_key_takes_more_turns(client: Client, queue: str) -> None:
    await client.put(f"/queues/{queue}", json={})
    await client.put(f"/queues/{queue}/keys/big", json={"weight": 2})
    for key in ("big", "small"):
        items = [{"payload": f"{key}{n}", "fairness_key": key} for n in range(6)]
        answer = await client.post("/push/batch", json={"queue": queue, "items": items})
        assert answer.status_code == 201, answer.text
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 6})).json()["items"]
    assert sorted(p["fairness_key"] for p in popped) == ["big"] * 4 + ["small"] * 2


@pytest.mark.parametrize("value", [0, -1, "two", 1.5])
async def test_a_bad_max_leased_per_key_is_a_422_naming_it_and_nothing_changes(
    client: Client, queue: str, value: Any
) -> None:
    await client.put(f"/queues/{queue}", json={"max_leased_per_key": 3})
    answer = await client.put(f"/queues/{queue}", json={"max_leased_per_key": value})
    assert_error(answer, 422, "ValidationError")
    assert "max_leased_per_key" in answer.text
    assert (await client.get(f"/queues/{queue}")).json()["settings"]["max_leased_per_key"] == 3


async def test_a_queues_stats_show_its_busiest_keys_and_the_limits_that_cut_its_pops_short(
    client: Client, queue: str, clock: FakeClock
) -> None:
    await client.put(f"/queues/{queue}", json={"max_leased_per_key": 1})
    await client.put(f"/queues/{queue}/keys/gold", json={"max_leased": 2})
    items = [{"payload": n, "fairness_key": "gold" if n < 5 else "free"} for n in range(8)]
    await client.post("/push/batch", json={"queue": queue, "items": items})
    fresh = (await client.get(f"/queues/{queue}")).json()
    assert [(k["key"], k["ready"], k["at_limit"]) for k in fresh["top_keys"]] == [
        ("gold", 5, False),
        ("free", 3, False),
    ]
    assert fresh["limits_binding"] == []

    assert len((await client.post("/pop", json={"queue": queue, "max_items": 10})).json()["items"]) == 3
    clock.advance(5)
    assert (await client.post("/pop", json={"queue": queue, "max_items": 10})).json()["items"] == []
    stats = (await client.get(f"/queues/{queue}")).json()
    assert stats["top_keys"] == [
        {"key": "gold", "ready": 3, "leased": 2, "max_leased": 2, "at_limit": True},
        {"key": "free", "ready": 2, "leased": 1, "max_leased": 1, "at_limit": True},
    ]
    [binding] = stats["limits_binding"]
    assert (binding["limit"], binding["pops"]) == ("max_leased_per_key", 2)
    assert datetime.fromisoformat(binding["last_seen"]) == clock.now  # the later pop's
    # A page of queues keeps its counts only: no walk of each queue's keys.
    # (Any page shows it: the suite's processes share the database, so this queue may be on a later one.)
    listed = (await client.get("/queues", params={"limit": 5})).json()["queues"]
    assert listed
    assert all("top_keys" not in q and "limits_binding" not in q for q in listed)


async def test_a_queue_without_keys_or_limits_shows_none(client: Client, queue: str) -> None:
    await client.post("/push/batch", json={"queue": queue, "items": [{"payload": 1}, {"payload": 2}]})
    await client.post("/pop", json={"queue": queue, "max_items": 5})
    stats = (await client.get(f"/queues/{queue}")).json()
    assert (stats["top_keys"], stats["limits_binding"]) == ([], [])
