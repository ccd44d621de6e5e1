"""GET /queues a page at a time, on each engine: in name order, `limit` per page, `next_cursor` to
the next and null on the last; a key that covers some queues gets full pages of its own queues; and
the SDK's queues() follows the pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from simplequeue.client import AsyncClient
from simplequeue.main import create_app
from simplequeue.settings import ApiKeySetting, Settings
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.factories import new_item
from tests.http import Client, app_client, assert_error

ADMIN = "admin-key-0123456789"


async def keyed(settings: Settings, clock: FakeClock, pattern: str) -> AsyncIterator[Client]:
    """A client whose admin key covers the queues `pattern` matches only."""
    key = {"key": ADMIN, "role": "admin", "queues": [pattern]}
    async for c in app_client(settings.model_copy(update={"api_keys": [ApiKeySetting(**key)]}), clock):
        c.headers["Authorization"] = f"Bearer {ADMIN}"
        yield c


@pytest.fixture
async def own(settings: Settings, clock: FakeClock, queue: str) -> AsyncIterator[Client]:
    """A client whose key covers this test's queues only (`<queue>-*`): the shared database's other
    queues are not listed to it."""
    async for c in keyed(settings, clock, f"{queue}-*"):
        yield c


async def make(client: Client, *names: str) -> None:
    for name in names:
        assert (await client.post("/push", json={"queue": name, "payload": 1})).status_code == 201


async def pages(client: Client, limit: int) -> list[list[str]]:
    found: list[list[str]] = []
    params: dict[str, Any] = {"limit": limit}
    while True:
        answer = await client.get("/queues", params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        found.append([q["name"] for q in body["queues"]])
        if body["next_cursor"] is None:
            return found
        params["cursor"] = body["next_cursor"]


async def test_queues_come_a_page_at_a_time_in_name_order(own: Client, queue: str) -> None:
    await make(own, *(f"{queue}-{n}" for n in "ecadb"))
    assert await pages(own, 2) == [
        [f"{queue}-a", f"{queue}-b"],
        [f"{queue}-c", f"{queue}-d"],
        [f"{queue}-e"],
    ]
    # A last page that is full has no cursor after it when no queue follows.
    assert await pages(own, 5) == [[f"{queue}-{n}" for n in "abcde"]]
    first = (await own.get("/queues", params={"limit": 1})).json()
    assert first["queues"][0]["ready"] == 1
    assert set(first) == {"queues", "next_cursor"}


async def test_a_key_that_covers_some_queues_gets_full_pages_of_them(
    settings: Settings, clock: FakeClock, store: Store, queue: str
) -> None:
    # Queues the key does not cover (b, d) sit between its own in name order; its pages skip them.
    await store.push_batch([new_item(f"{queue}-{n}") for n in "abcde"], skip_existing=False)
    async for some in keyed(settings, clock, f"{queue}-[ace]"):
        assert await pages(some, 2) == [[f"{queue}-a", f"{queue}-c"], [f"{queue}-e"]]
        assert await pages(some, 1) == [[f"{queue}-a"], [f"{queue}-c"], [f"{queue}-e"]]


async def test_every_queue_is_listed_once_across_the_pages(client: Client, store: Store, queue: str) -> None:
    await make(client, f"{queue}-a", f"{queue}-b", f"{queue}-c")
    listed = [name for page in await pages(client, 1000) for name in page]
    assert len(listed) == len(set(listed)) == await store.count_queues()
    assert {f"{queue}-a", f"{queue}-b", f"{queue}-c"} <= set(listed)


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"cursor": ""}, {"cursor": "x" * 201}])
async def test_a_page_out_of_bounds_is_a_validation_error(lite: Client, params: dict[str, Any]) -> None:
    assert_error(await lite.get("/queues", params=params), 422, "ValidationError")


async def test_a_cursor_not_handed_out_is_refused(lite: Client) -> None:
    await make(lite, "a", "b")
    item_cursor = "MjAyNi0wMS0wMVQwMDowMDowMCswMDowMHwx"  # an item page's cursor: (time, seq)
    for cursor in ("not-a-cursor", item_cursor):
        assert_error(await lite.get("/queues", params={"cursor": cursor}), 422, "InvalidCursor")


async def test_without_a_limit_a_page_holds_a_hundred(lite: Client) -> None:
    await make(lite, *(f"q{n:03}" for n in range(101)))
    first = (await lite.get("/queues")).json()
    assert len(first["queues"]) == 100
    assert first["next_cursor"]
    rest = (await lite.get("/queues", params={"cursor": first["next_cursor"]})).json()
    assert ([q["name"] for q in rest["queues"]], rest["next_cursor"]) == (["q100"], None)


async def test_the_sdk_follows_the_pages(
    database_url: str, clock: FakeClock, store: Store, queue: str
) -> None:
    key = ApiKeySetting(key=ADMIN, role="admin", queues=[f"{queue}-*"])
    settings = Settings(database_url=database_url, sweep=False, api_keys=[key])
    names = [f"{queue}-{n:03}" for n in range(101)]  # more than a page of GET /queues holds (100)
    await store.push_batch([new_item(name) for name in reversed(names)], skip_existing=False)
    app = create_app(settings, clock=clock)
    async with (
        LifespanManager(app) as manager,
        AsyncClient("http://sq", api_key=ADMIN, transport=httpx.ASGITransport(app=manager.app)) as sq,
    ):
        assert [q.name for q in await sq.queues()] == names
        assert [q.name for q in await sq.queues(page_size=7)] == names
        page = await sq.queue_page(limit=1)
        assert [q.name for q in page.queues] == names[:1]
        after = await sq.queue_page(limit=100, cursor=page.next_cursor)
        assert ([q.name for q in after.queues], after.next_cursor) == (names[1:], None)
