"""The typed queue settings beside max_attempts: dead_letter_queue (where an item that dies moves)
and message_retention_seconds (how long a live item may wait), set over REST and the Python SDK,
checked against the queues that exist (a clear 422, never a 500), and acted on by the store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from simplequeue.client import AsyncClient, ValidationError
from simplequeue.main import create_app
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.http import Client, assert_error


async def test_a_dead_letter_queue_set_over_rest_takes_the_items_that_die(client: Client, queue: str) -> None:
    target = f"{queue}-dlq"
    assert (await client.put(f"/queues/{target}", json={})).status_code == 201
    answer = await client.put(f"/queues/{queue}", json={"max_attempts": 1, "dead_letter_queue": target})
    assert answer.status_code == 201, answer.text
    assert answer.json()["settings"]["dead_letter_queue"] == target
    assert answer.json()["settings"]["message_retention_seconds"] is None
    await client.post("/push", json={"queue": queue, "payload": "doomed"})
    [item] = (await client.post("/pop", json={"queue": queue})).json()["items"]
    failure = {"lease_token": item["lease_token"], "error": "x"}
    failed = await client.post(f"/items/{item['id']}/fail", json=failure)
    assert failed.status_code == 200, failed.text
    assert (failed.json()["queue"], failed.json()["status"]) == (target, "ready")
    assert (await client.get(f"/queues/{queue}")).json()["dead"] == 0
    # Omitted, it is none again (PUT replaces every setting): the next item dies in place.
    unset = await client.put(f"/queues/{queue}", json={"max_attempts": 1})
    assert unset.json()["settings"]["dead_letter_queue"] is None


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("{queue}-missing", "there is no queue named"),
        ("{queue}", "a queue cannot be its own dead-letter queue"),
        ("no spaces", "must be 1 to 128 of the characters"),
    ],
)
async def test_a_dead_letter_queue_that_cannot_be_is_422_naming_the_field(
    client: Client, queue: str, given: str, said: str
) -> None:
    await client.put(f"/queues/{queue}", json={})
    answer = await client.put(f"/queues/{queue}", json={"dead_letter_queue": given.format(queue=queue)})
    body = assert_error(answer, 422, "ValidationError")
    [field] = body["fields"]
    assert field["loc"][:2] == ["body", "dead_letter_queue"]
    assert said in field["msg"]
    assert (await client.get(f"/queues/{queue}")).json()["settings"]["dead_letter_queue"] is None


async def test_a_dead_letter_queue_deleted_since_does_not_stop_the_settings_being_saved(
    client: Client, queue: str
) -> None:
    # The dashboard and the SQS door write the settings back whole, the target with them.
    target = f"{queue}-dlq"
    await client.put(f"/queues/{target}", json={})
    await client.put(f"/queues/{queue}", json={"dead_letter_queue": target})
    assert (await client.delete(f"/queues/{target}")).status_code == 200
    saved = await client.put(f"/queues/{queue}", json={"dead_letter_queue": target, "max_attempts": 2})
    assert saved.status_code == 200, saved.text
    assert saved.json()["settings"]["dead_letter_queue"] == target


@pytest.mark.parametrize("seconds", [59, 1_209_601, "60", 60.5])
async def test_a_retention_outside_sqss_range_is_422(client: Client, queue: str, seconds: object) -> None:
    answer = await client.put(f"/queues/{queue}", json={"message_retention_seconds": seconds})
    assert_error(answer, 422, "ValidationError")


async def test_a_retention_set_over_rest_is_answered(client: Client, queue: str) -> None:
    answer = await client.put(f"/queues/{queue}", json={"message_retention_seconds": 60})
    assert answer.json()["settings"]["message_retention_seconds"] == 60


@pytest.fixture
async def sq(tmp_path: Path, clock: FakeClock) -> AsyncIterator[AsyncClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'client.db'}", sweep=False)
    app = create_app(settings, clock=clock)
    async with (
        LifespanManager(app) as manager,
        AsyncClient("http://sq", transport=httpx.ASGITransport(app=manager.app)) as client,
    ):
        yield client


async def test_the_sdk_sets_and_reads_both(sq: AsyncClient, queue: str) -> None:
    target = f"{queue}-dlq"
    await sq.put_queue(target)
    stats = await sq.put_queue(queue, dead_letter_queue=target, message_retention_seconds=3600)
    assert stats.settings["dead_letter_queue"] == target
    assert stats.settings["message_retention_seconds"] == 3600
    with pytest.raises(ValidationError):
        await sq.put_queue(queue, dead_letter_queue=f"{queue}-missing")


async def test_a_pop_never_hands_out_an_item_past_the_retention(
    client: Client, clock: FakeClock, queue: str
) -> None:
    await client.put(f"/queues/{queue}", json={"message_retention_seconds": 60})
    await client.post("/push", json={"queue": queue, "payload": "old"})
    clock.advance(30)
    await client.post("/push", json={"queue": queue, "payload": "young"})
    clock.advance(31)
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 10})).json()["items"]
    assert [i["payload"] for i in popped] == ["young"]


async def test_an_item_over_its_attempts_moves_at_the_pop_that_finds_it(
    client: Client, clock: FakeClock, queue: str
) -> None:
    target = f"{queue}-dlq"
    await client.put(f"/queues/{target}", json={})
    await client.put(f"/queues/{queue}", json={"max_attempts": 1, "dead_letter_queue": target})
    await client.post("/push", json={"queue": queue, "payload": "poison"})
    [item] = (await client.post("/pop", json={"queue": queue, "lease_seconds": 5})).json()["items"]
    clock.advance(6)  # its lease ran out on its last attempt; no sweep runs here
    assert (await client.post("/pop", json={"queue": queue})).json()["items"] == []
    [moved] = (await client.post("/pop", json={"queue": target})).json()["items"]
    assert (moved["id"], moved["payload"]) == (item["id"], "poison")


async def test_the_sdk_sets_and_reads_flow_limits(sq: AsyncClient, queue: str) -> None:
    stats = await sq.put_queue(queue, max_leased=3, rate_per_second=2.5)
    assert (stats.settings["max_leased"], stats.settings["rate_per_second"]) == (3, 2.5)
    assert stats.settings["rate_burst"] is None
    with pytest.raises(ValidationError):
        await sq.put_queue(queue, rate_burst=4)


@pytest.mark.parametrize("seconds", [0, -5, 1.5, "60", True, 2**31])
async def test_a_priority_aging_that_is_not_a_whole_positive_number_of_seconds_is_422_naming_it(
    client: Client, queue: str, seconds: object
) -> None:
    await client.put(f"/queues/{queue}", json={"priority_aging_seconds": 60})
    answer = await client.put(f"/queues/{queue}", json={"priority_aging_seconds": seconds})
    body = assert_error(answer, 422, "ValidationError")
    assert [f["loc"][:2] for f in body["fields"]] == [["body", "priority_aging_seconds"]]
    assert (await client.get(f"/queues/{queue}")).json()["settings"]["priority_aging_seconds"] == 60


async def test_priority_aging_set_over_rest_orders_the_pops(
    client: Client, queue: str, clock: FakeClock
) -> None:
    answer = await client.put(f"/queues/{queue}", json={"priority_aging_seconds": 60})
    assert answer.json()["settings"]["priority_aging_seconds"] == 60
    old = (clock.now - timedelta(minutes=10)).isoformat()
    await client.post("/push", json={"queue": queue, "payload": "old", "priority": 0, "created_at": old})
    await client.post("/push", json={"queue": queue, "payload": "urgent", "priority": 5})
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 2})).json()["items"]
    assert [(p["payload"], p["priority"]) for p in popped] == [("old", 0), ("urgent", 5)]
    unset = await client.put(f"/queues/{queue}", json={"priority_aging_seconds": None})
    assert unset.json()["settings"]["priority_aging_seconds"] is None


async def test_the_sdk_sets_and_reads_priority_aging(sq: AsyncClient, queue: str) -> None:
    stats = await sq.put_queue(queue, priority_aging_seconds=300)
    assert stats.settings["priority_aging_seconds"] == 300
    with pytest.raises(ValidationError):
        await sq.put_queue(queue, priority_aging_seconds=0)
