"""Fairness keys over REST and the SDK: pushed singly or in a batch, answered by pops and item
views, refused with a 422 naming the field (and nothing written), and obeyed by pops."""

from __future__ import annotations

from typing import Any

import pytest

from tests.http import Client, assert_error


async def test_a_fairness_key_is_pushed_popped_and_shown(client: Client, queue: str) -> None:
    one = await client.post("/push", json={"queue": queue, "payload": 1, "fairness_key": "tenant-a"})
    assert one.status_code == 201, one.text
    item = (await client.get(f"/items/{one.json()['id']}")).json()
    assert item["fairness_key"] == "tenant-a"
    plain = (await client.post("/push", json={"queue": queue, "payload": 2})).json()
    assert (await client.get(f"/items/{plain['id']}")).json()["fairness_key"] is None

    popped = (await client.post("/pop", json={"queue": queue, "max_items": 5})).json()["items"]
    assert [(p["payload"], p["fairness_key"]) for p in popped] == [(1, "tenant-a"), (2, None)]


async def test_a_batch_of_one_noisy_and_one_quiet_tenant_alternates(client: Client, queue: str) -> None:
    noisy = [{"payload": f"a{n}", "fairness_key": "a"} for n in range(20)]
    quiet = [{"payload": f"b{n}", "fairness_key": "b"} for n in range(3)]
    for items in (noisy, quiet):
        answer = await client.post("/push/batch", json={"queue": queue, "items": items})
        assert answer.status_code == 201, answer.text
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 6})).json()["items"]
    assert [p["payload"] for p in popped] == ["a0", "b0", "a1", "b1", "a2", "b2"]


@pytest.mark.parametrize(
    "key",
    ["", "x" * 129, "ends with a space ", "nul\u0000", 7, "\U0001f600" * 65],
)
async def test_a_bad_fairness_key_is_a_422_naming_it(lite: Client, key: Any) -> None:
    single = await lite.post("/push", json={"queue": "q", "payload": 1, "fairness_key": key})
    assert assert_error(single, 422, "ValidationError")["fields"][0]["loc"] == ["body", "fairness_key"]
    batch = await lite.post(
        "/push/batch", json={"queue": "q", "items": [{"payload": 1}, {"payload": 2, "fairness_key": key}]}
    )
    assert assert_error(batch, 422, "ValidationError")["fields"][0]["loc"] == [
        "body",
        "items",
        1,
        "fairness_key",
    ]
    assert (await lite.get("/queues")).json() == {"queues": [], "next_cursor": None}


async def test_a_128_character_key_is_taken(lite: Client) -> None:
    answer = await lite.post("/push", json={"queue": "q", "payload": 1, "fairness_key": "k" * 128})
    assert answer.status_code == 201, answer.text
