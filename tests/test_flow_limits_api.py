"""Flow limits over REST and the SDK: set with the queue's settings, answered with them, refused
with a 422 naming the field, and obeyed by pops, long-polls included (a waiting pop is answered
when a completion frees room, or when the bucket refills)."""

from __future__ import annotations

import asyncio

import pytest

from tests.engines import FakeClock
from tests.http import Client, assert_error


async def test_limits_are_settings_that_pops_obey(client: Client, queue: str) -> None:
    answer = await client.put(
        f"/queues/{queue}", json={"max_leased": 2, "rate_per_second": 50, "rate_burst": 10}
    )
    assert answer.status_code == 201, answer.text
    settings = answer.json()["settings"]
    assert (settings["max_leased"], settings["rate_per_second"], settings["rate_burst"]) == (2, 50.0, 10)
    await client.post("/push/batch", json={"queue": queue, "items": [{"payload": n} for n in range(5)]})

    popped = (await client.post("/pop", json={"queue": queue, "max_items": 5})).json()["items"]
    assert len(popped) == 2
    assert (await client.post("/pop", json={"queue": queue, "max_items": 5})).json()["items"] == []
    done = await client.delete(f"/items/{popped[0]['id']}", params={"lease_token": popped[0]["lease_token"]})
    assert done.status_code == 204, done.text
    assert len((await client.post("/pop", json={"queue": queue, "max_items": 5})).json()["items"]) == 1
    counts = (await client.get(f"/queues/{queue}")).json()
    assert (counts["ready"], counts["leased"]) == (2, 2)

    # PUT replaces every setting: omitted, the limits are gone.
    assert (await client.put(f"/queues/{queue}", json={})).json()["settings"]["max_leased"] is None
    assert len((await client.post("/pop", json={"queue": queue, "max_items": 5})).json()["items"]) == 2


@pytest.mark.parametrize(
    ("body", "field", "said"),
    [
        ({"max_leased": 0}, "max_leased", "greater than or equal to 1"),
        ({"rate_per_second": 0}, "rate_per_second", "greater than 0"),
        ({"rate_burst": 5}, "rate_burst", "rate_burst needs rate_per_second"),
        ({"rate_per_second": 1, "rate_burst": 0}, "rate_burst", "greater than or equal to 1"),
    ],
)
async def test_a_limit_that_cannot_be_is_422_naming_the_field(
    client: Client, queue: str, body: dict[str, int], field: str, said: str
) -> None:
    answer = await client.put(f"/queues/{queue}", json=body)
    assert_error(answer, 422, "ValidationError")
    assert answer.json()["fields"][0]["loc"] == ["body", field]
    assert said in answer.json()["detail"]
    assert (await client.get(f"/queues/{queue}")).status_code == 404  # nothing was made


async def test_a_waiting_pop_at_max_leased_is_answered_when_a_completion_frees_room(
    client: Client, queue: str
) -> None:
    await client.put(f"/queues/{queue}", json={"max_leased": 1})
    await client.post("/push/batch", json={"queue": queue, "items": [{"payload": n} for n in range(3)]})
    [held] = (await client.post("/pop", json={"queue": queue})).json()["items"]

    waiting = asyncio.create_task(client.post("/pop", json={"queue": queue, "wait_seconds": 20}))
    await asyncio.sleep(0.3)  # the waiting pop found no room and waits
    assert not waiting.done()
    await client.delete(f"/items/{held['id']}", params={"lease_token": held["lease_token"]})
    [next_one] = (await waiting).json()["items"]
    assert next_one["payload"] == 1


async def test_a_waiting_pop_on_an_empty_bucket_is_answered_when_it_refills(
    client: Client, queue: str, clock: FakeClock
) -> None:
    await client.put(f"/queues/{queue}", json={"rate_per_second": 20, "rate_burst": 1})
    await client.post("/push/batch", json={"queue": queue, "items": [{"payload": n} for n in range(3)]})
    assert len((await client.post("/pop", json={"queue": queue, "max_items": 3})).json()["items"]) == 1

    waiting = asyncio.create_task(
        client.post("/pop", json={"queue": queue, "max_items": 3, "wait_seconds": 20})
    )
    await asyncio.sleep(0.2)
    assert not waiting.done()
    clock.advance(0.05)  # the database's time (injected): one token at 20/s
    assert len((await waiting).json()["items"]) == 1
