"""Schedules over the REST API: making, reading, paging, pausing, resuming, triggering and deleting
them on every engine; 422 naming the field for what cannot be; an admin key for all of it. Firing
is the conformance suite's (tests/conformance/test_schedules.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
import simplequeue.client as sdk
from asgi_lifespan import LifespanManager
from simplequeue.client import AsyncClient
from simplequeue.main import create_app
from simplequeue.settings import Settings

from tests.engines import FakeClock
from tests.http import Client, app_client, assert_error
from tests.test_auth import KEYS, bearer


@pytest.fixture
def name() -> str:
    return f"sc-{uuid4().hex[:12]}"


async def put(client: Client, name: str, **body: Any) -> dict[str, Any]:
    response = await client.put(f"/schedules/{name}", json=body)
    assert response.status_code in (200, 201), response.text
    made: dict[str, Any] = response.json()
    return made


async def test_a_schedule_is_made_read_replaced_and_deleted(
    client: Client, name: str, queue: str, clock: FakeClock
) -> None:
    body = {"queue": queue, "payload": {"report": "daily"}, "cron": "0 9 * * *", "timezone": "Europe/Berlin"}
    made = await client.put(f"/schedules/{name}", json=body)
    assert made.status_code == 201, made.text
    got = (await client.get(f"/schedules/{name}")).json()
    assert got["payload"] == {"report": "daily"}
    assert (got["cron"], got["timezone"], got["catch_up"], got["overlap"]) == (
        "0 9 * * *",
        "Europe/Berlin",
        "latest",
        "allow",
    )
    assert got["next_run_at"] is not None
    assert (got["last_run_at"], got["last_item_id"]) == (None, None)
    again = await client.put(f"/schedules/{name}", json={**body, "cron": "30 9 * * *"})
    assert again.status_code == 200
    assert again.json()["cron"] == "30 9 * * *"
    deleted = await client.delete(f"/schedules/{name}")
    assert deleted.status_code == 204
    assert_error(await client.get(f"/schedules/{name}"), 404, "ScheduleNotFound")
    assert_error(await client.delete(f"/schedules/{name}"), 404, "ScheduleNotFound")


async def test_schedules_are_listed_a_page_at_a_time(client: Client, queue: str) -> None:
    names = sorted(f"sl-{uuid4().hex[:8]}" for _ in range(3))
    for n in names:
        await put(client, n, queue=queue, payload=1, every_seconds=60)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/schedules", params=params)).json()
        seen += [s["name"] for s in page["schedules"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert set(names) <= set(seen)
    assert_error(await client.get("/schedules", params={"cursor": "nonsense"}), 422, "InvalidCursor")


async def test_pause_resume_and_trigger(client: Client, name: str, queue: str, clock: FakeClock) -> None:
    await put(client, name, queue=queue, payload={"n": 1}, every_seconds=3600)
    paused = await client.post(f"/schedules/{name}/pause")
    assert paused.json()["paused"] is True
    triggered = await client.post(f"/schedules/{name}/trigger")
    assert triggered.status_code == 200, triggered.text
    popped = await client.post("/pop", json={"queue": queue, "max_items": 10, "wait_seconds": 0})
    [item] = popped.json()["items"]
    assert item["payload"] == {"n": 1}
    assert triggered.json()["last_item_id"] == item["id"]
    clock.advance(7200)
    resumed = (await client.post(f"/schedules/{name}/resume")).json()
    assert resumed["paused"] is False
    assert resumed["next_run_at"] > clock.now.isoformat().replace("+00:00", "")
    for action in ("pause", "resume", "trigger"):
        assert_error(await client.post(f"/schedules/{name}-none/{action}"), 404, "ScheduleNotFound")


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"cron": "61 * * * *"}, "cron", "minute: 61 is out of range 0-59"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "timezone", "not an IANA time zone"),
        ({}, "every_seconds", "give one of every_seconds, cron or at"),
        ({"every_seconds": 0}, "every_seconds", "greater than or equal to 1"),
        ({"every_seconds": True}, "every_seconds", "JSON number"),
        ({"every_seconds": 60, "cron": "* * * * *"}, "cron", "not every_seconds and cron"),
        ({"at": "2020-01-01T00:00:00Z"}, "at", "in the past"),
        ({"every_seconds": 60, "overlap": "never"}, "overlap", ""),
        ({"every_seconds": 60, "catch_up": "some"}, "catch_up", ""),
        ({"every_seconds": 60, "jitter_seconds": -1}, "jitter_seconds", ""),
        ({"every_seconds": 60, "queue": "no spaces"}, "queue", ""),
    ],
)
async def test_what_cannot_be_is_422_naming_the_field(
    lite: Client, name: str, change: dict[str, Any], field: str, words: str
) -> None:
    body = {"queue": "jobs", "payload": {}, **change}
    answer = assert_error(await lite.put(f"/schedules/{name}", json=body), 422, "ValidationError")
    assert ["body", field] in [f["loc"] for f in answer["fields"]], answer
    assert words in answer["detail"]
    assert "\n" not in answer["detail"]


async def test_a_bad_name_is_422(lite: Client) -> None:
    body = {"queue": "jobs", "payload": {}, "every_seconds": 60}
    assert_error(await lite.put("/schedules/has space", json=body), 422, "ValidationError")
    assert_error(await lite.put(f"/schedules/{'n' * 81}", json=body), 422, "ValidationError")


async def test_an_at_in_the_future_is_taken(lite: Client, name: str, clock: FakeClock) -> None:
    at = (clock.now + timedelta(hours=1)).isoformat()
    made = await put(lite, name, queue="jobs", payload=None, at=at)
    assert made["next_run_at"] == made["at"]


@pytest.fixture
async def keyed(settings: Settings, clock: FakeClock) -> AsyncIterator[Client]:
    keyed = settings.model_copy(update={"api_keys": Settings(api_keys=list(KEYS.values())).api_keys})
    async for c in app_client(keyed, clock):
        yield c


async def test_only_an_admin_key_manages_schedules(keyed: Client, name: str) -> None:
    body = {"queue": "jobs.a", "payload": {}, "every_seconds": 60}
    for who in ("producer", "consumer"):
        headers = bearer(KEYS[who[:4]]["key"])
        assert_error(await keyed.put(f"/schedules/{name}", json=body, headers=headers), 403, "Forbidden")
        assert_error(await keyed.get("/schedules", headers=headers), 403, "Forbidden")
    assert_error(await keyed.get("/schedules"), 401, "Unauthorized")
    admin = bearer(KEYS["admin"]["key"])
    assert (await keyed.put(f"/schedules/{name}", json=body, headers=admin)).status_code == 201
    assert (await keyed.post(f"/schedules/{name}/trigger", headers=admin)).status_code == 200
    scoped = bearer(KEYS["adminJ"]["key"])  # an admin of jobs.* only
    assert (await keyed.get(f"/schedules/{name}", headers=scoped)).status_code == 200
    elsewhere = {**body, "queue": "mail"}
    assert_error(await keyed.put(f"/schedules/{name}", json=elsewhere, headers=scoped), 403, "Forbidden")


@pytest.fixture
async def sq(tmp_path: Path, clock: FakeClock) -> AsyncIterator[AsyncClient]:
    """The SDK over the real app on SQLite with its scheduler running, on a clock the test moves."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'sdk.db'}", sweep=False, relay=False)
    app = create_app(settings, clock=clock)
    async with (
        LifespanManager(app) as manager,
        AsyncClient("http://sq", transport=httpx.ASGITransport(app=manager.app)) as client,
    ):
        yield client


async def test_the_sdk_manages_schedules_and_the_served_scheduler_fires_them(
    sq: AsyncClient, name: str, queue: str, clock: FakeClock
) -> None:
    made = await sq.put_schedule(name, queue=queue, payload={"hello": 1}, every_seconds=60, catch_up="none")
    assert made.next_run_at is not None
    assert [s.name for s in await sq.schedules() if s.name == name] == [name]
    clock.now = made.next_run_at
    items: list[Any] = []
    for _ in range(50):  # the scheduler sleeps at most a second (it reads the clock when it wakes)
        items = await sq.pop(queue, max_items=10, wait_seconds=0)
        if items:
            break
        await asyncio.sleep(0.1)
    assert [i.payload for i in items] == [{"hello": 1}]
    fired = await sq.get_schedule(name)
    assert (fired.last_run_at, fired.last_item_id) == (made.next_run_at, str(items[0].id))
    assert (await sq.pause_schedule(name)).paused
    assert (await sq.trigger_schedule(name)).last_item_id != fired.last_item_id
    assert not (await sq.resume_schedule(name)).paused
    await sq.delete_schedule(name)
    with pytest.raises(sdk.ScheduleNotFound):
        await sq.get_schedule(name)
    with pytest.raises(sdk.ValidationError):
        await sq.put_schedule(name, queue=queue, payload=1, cron="61 * * * *")
