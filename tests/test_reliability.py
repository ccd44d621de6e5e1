"""No 500 from any input, no driver text in answers, and bounded waits (issue 9).

In-process through the real app on every engine; the slow-client and keep-alive cases talk to a
real server over loopback sockets.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg
import httpx
import pytest
import uvicorn
from simplequeue.domain import MAX_PAYLOAD_DEPTH
from simplequeue.domain.payloads import depth_of
from simplequeue.main import create_app
from simplequeue.settings import Settings
from simplequeue.store.protocol import Store

from tests.engines import FakeClock
from tests.factories import new_item
from tests.http import Client, app_client, assert_error
from tests.test_e2e import free_port, serving

DRIVER_WORDS = ("asyncpg", "Errno", "PostgreSQL", "SQLite", "DETAIL", "Error:", "refused", "sqlite3")


def nested(depth: int) -> Any:
    value: Any = 1
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


def body_nested(depth: int, queue: str = "default") -> str:
    return f'{{"queue":"{queue}","payload":' + "[" * depth + "]" * depth + "}"


# --- payloads: what is accepted can be handed back ----------------------------------------------


def test_depth_of_counts_arrays_and_objects_without_recursion() -> None:
    assert [depth_of(v) for v in (1, "s", [], {}, [[]], {"a": [1, {"b": None}]})] == [0, 0, 1, 1, 2, 3]
    assert depth_of(nested(100_000)) == 100_000  # a recursive walk would overflow the stack


@pytest.fixture
async def roomy(tmp_path: Path) -> AsyncIterator[Client]:
    """The app on SQLite with the default size limits."""
    async for client in app_client(
        Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", sweep=False), None
    ):
        yield client


async def test_push_refuses_payloads_nested_past_the_limit(roomy: Client) -> None:
    lite = roomy
    ok = await lite.post("/push", json={"queue": "deep", "payload": nested(MAX_PAYLOAD_DEPTH)})
    assert ok.status_code == 201, ok.text
    for depth in (MAX_PAYLOAD_DEPTH + 1, 300, 900):
        body = body_nested(depth, queue="deep")
        refused = await lite.post("/push", content=body, headers={"content-type": "application/json"})
        assert_error(refused, 422, "InvalidPayload")
        assert str(MAX_PAYLOAD_DEPTH) in refused.json()["detail"]
    batch = {"queue": "deep", "items": [{"payload": 1}, {"payload": nested(MAX_PAYLOAD_DEPTH + 1)}]}
    assert_error(await lite.post("/push/batch", json=batch), 422, "InvalidPayload")
    # Deeper than Python's own parser goes: still a clear 4xx, never a 500.
    too_deep = await lite.post(
        "/push", content=body_nested(5000), headers={"content-type": "application/json"}
    )
    assert_error(too_deep, 400, "MalformedJSON")
    assert (await lite.get("/queues/deep")).json()["ready"] == 1  # nothing else went in


async def test_items_stored_deeper_than_the_limit_are_still_handed_out_whole(
    client: Client, store: Store, queue: str
) -> None:
    # As written by a bulk loader straight into the table, or before the limit existed.
    deep = nested(600)
    [pushed] = await store.push_batch([new_item(queue, deep)], skip_existing=False)
    assert pushed is not None
    await client.put(f"/queues/{queue}", json={"max_attempts": 1, "history_payload": True})

    popped = await client.post("/pop", json={"queue": queue, "max_items": 10})
    assert popped.status_code == 200, popped.text
    [item] = popped.json()["items"]
    assert item["payload"] == deep
    view = await client.get(f"/items/{item['id']}")
    assert view.json()["payload"] == deep
    failed = await client.post(
        f"/items/{item['id']}/fail", json={"error": "x", "lease_token": item["lease_token"]}
    )
    assert failed.json()["status"] == "dead"
    [dead] = (await client.get(f"/queues/{queue}/dead")).json()["items"]
    assert dead["payload"] == deep
    [record] = (await client.get(f"/queues/{queue}/history")).json()["items"]
    assert record["payload"] == deep


# --- cursors: only those the service handed out -------------------------------------------------


def cursor_of(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        cursor_of(f"2026-01-01T00:00:00+00:00|{2**64}"),  # past BIGINT
        cursor_of(f"2026-01-01T00:00:00+00:00|{2**63}"),
        cursor_of("2026-01-01T00:00:00+00:00|-5"),
        cursor_of("9999-12-31T23:59:59-14:00|1"),  # past year 9999 once in UTC
        cursor_of("0001-01-01T00:00:00+14:00|1"),  # before year 1 once in UTC
        cursor_of("2026-01-01T05:00:00+05:00|1"),  # a time this service never writes (not UTC)
        cursor_of("2026-01-01|1"),
        cursor_of("2026-01-01T00:00:00+00:00|1|2"),
        cursor_of("2026-01-01T00:00:00+00:00| 1"),
        "not base64 at all!",
    ],
)
async def test_cursors_the_service_did_not_hand_out_are_422(client: Client, queue: str, cursor: str) -> None:
    await client.put(f"/queues/{queue}", json={})  # an unknown queue would be 404 first
    pages = {
        f"/queues/{queue}/history": {},
        f"/queues/{queue}/dead": {},
        f"/queues/{queue}/items": {"state": "ready"},
    }
    for path, more in pages.items():
        response = await client.get(path, params={"cursor": cursor, **more})
        body = assert_error(response, 422, "InvalidCursor")
        assert not any(word in body["detail"] for word in DRIVER_WORDS)


async def test_a_cursor_handed_out_pages_on(client: Client, queue: str) -> None:
    await client.put(f"/queues/{queue}", json={"max_attempts": 1})
    for n in range(3):
        await client.post("/push", json={"queue": queue, "payload": n})
    for item in (await client.post("/pop", json={"queue": queue, "max_items": 3})).json()["items"]:
        await client.post(f"/items/{item['id']}/fail", json={"error": "x", "retry": False})
    first = (await client.get(f"/queues/{queue}/dead", params={"limit": 2})).json()
    second = (
        await client.get(f"/queues/{queue}/dead", params={"limit": 2, "cursor": first["next_cursor"]})
    ).json()
    assert [len(first["items"]), len(second["items"])] == [2, 1]


# --- errors: a stable code and a plain sentence; the driver's words go to the log ---------------


async def test_an_unreachable_postgresql_answers_503_without_driver_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/none"  # nobody listens there
    settings = Settings(database_url=url, migrate_on_start=False, db_timeout_seconds=2, sweep=False)
    caplog.set_level(logging.WARNING, logger="simplequeue")
    async for client in app_client(settings, None):
        for response in (
            await client.post("/push", json={"payload": 1}),
            await client.get("/queues"),
            await client.post("/pop", json={}),
            await client.get("/readyz"),
        ):
            body = assert_error(response, 503, "DatabaseUnavailable")
            assert body["detail"] == "The database cannot be reached right now; try again."
            assert response.headers["retry-after"] == "1"
            assert response.headers["x-request-id"]
    # The operator still learns what the driver said, and which request it was.
    logged = [r.getMessage() for r in caplog.records if "DatabaseUnavailable" in r.getMessage()]
    assert logged
    assert all("request " in line for line in logged)
    assert any("ConnectionRefusedError" in line or "OSError" in line for line in logged), logged


async def test_a_request_id_given_by_the_client_is_answered_back(lite: Client) -> None:
    given = await lite.get("/healthz", headers={"x-request-id": "trace-42.a:b"})
    assert given.headers["x-request-id"] == "trace-42.a:b"
    odd = await lite.get("/healthz", headers={"x-request-id": "has space\tand tab"})
    assert odd.headers["x-request-id"] not in ("has space\tand tab", "")


class Broken:
    """A store whose reads fail as a bug would: with an exception nothing maps."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list_queues(self, *args: Any) -> Any:
        raise RuntimeError("a bug")


@pytest.fixture
def broken_app(tmp_path: Path) -> Any:
    from simplequeue.main import store_for

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'b.db'}", sweep=False)
    return create_app(settings, store=Broken(store_for(settings)))  # type: ignore[arg-type]


async def test_an_unexpected_error_is_the_500_envelope_and_is_not_reraised(broken_app: Any) -> None:
    # httpx's ASGI transport raises what the app raises: answering without re-raising is what
    # keeps a real server from dropping the keep-alive connection.
    async for client in _client_of(broken_app):
        response = await client.get("/queues")
        body = assert_error(response, 500, "InternalError")
        assert "bug" not in body["detail"]
        assert (await client.get("/healthz")).status_code == 200


async def _client_of(app: Any) -> AsyncIterator[Client]:
    from asgi_lifespan import LifespanManager

    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sq") as client:
            yield client


async def test_a_real_server_keeps_the_connection_after_a_500(broken_app: Any) -> None:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(broken_app, host="127.0.0.1", port=port, log_level="critical"))
    serving_task = asyncio.create_task(server.serve())
    try:
        for _ in range(200):  # bounded: up to 10 s
            if server.started:
                break
            await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        first = await _exchange(reader, writer, b"GET /queues HTTP/1.1\r\nhost: x\r\n\r\n")
        second = await _exchange(reader, writer, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        writer.close()
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving_task, 15)
    assert first.startswith(b"HTTP/1.1 500")
    assert b"connection: close" not in first.lower()
    assert second.startswith(b"HTTP/1.1 200"), second


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes:
    writer.write(request)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(
        int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length")
    )
    return head + await asyncio.wait_for(reader.readexactly(length), 10)


# --- what the spec says is what the service does -------------------------------------------------


async def test_history_times_are_iso_8601_text_only(lite: Client) -> None:
    await lite.post("/push", json={"queue": "h", "payload": 1})
    for bad in ("0.5", "0", "1700000000", "2026-01-01", "yesterday", "2026-01-01T25:00:00Z"):
        assert_error(await lite.get("/queues/h/history", params={"until": bad}), 422, "ValidationError")
    for good in ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5+02:00", "2026-01-01T00:00"):
        assert (await lite.get("/queues/h/history", params={"since": good})).status_code == 200, good


async def test_405_names_every_method_served_at_the_path(lite: Client) -> None:
    item = f"/items/{uuid4()}"
    for method, path, allowed in [
        ("OPTIONS", item, "DELETE, GET"),
        ("PUT", item, "DELETE, GET"),
        ("GET", "/items/complete", "POST"),  # not an item id: the batch route's path
        ("PATCH", "/queues/q", "DELETE, GET, PUT"),
        ("PATCH", "/push", "POST"),
    ]:
        response = await lite.request(method, path)
        assert_error(response, 405, "MethodNotAllowed")
        assert response.headers["allow"] == allowed, (method, path)


async def test_delay_and_not_before_together_wait_for_the_later(
    client: Client, queue: str, clock: FakeClock
) -> None:
    later = clock.now.replace(microsecond=0).isoformat()
    pushed = await client.post(
        "/push", json={"queue": queue, "payload": 1, "delay_seconds": 60, "not_before": later}
    )
    assert pushed.status_code == 201, pushed.text
    pushed = await client.post(
        "/push",
        json={"queue": queue, "payload": 2, "delay_seconds": 1, "not_before": _after(clock, 120)},
    )
    assert (await client.get(f"/queues/{queue}")).json()["delayed"] == 2
    clock.advance(61)
    assert await popped_payloads(client, queue) == [1]
    clock.advance(60)
    assert await popped_payloads(client, queue) == [2]


async def popped_payloads(client: Client, queue: str) -> list[Any]:
    """Pop and complete what is poppable now."""
    items = (await client.post("/pop", json={"queue": queue, "max_items": 5})).json()["items"]
    for item in items:
        await client.delete(f"/items/{item['id']}")
    return [i["payload"] for i in items]


def _after(clock: FakeClock, seconds: float) -> str:
    from datetime import timedelta

    return (clock.now + timedelta(seconds=seconds)).isoformat()


async def test_a_batch_naming_one_id_twice_inserts_it_once(client: Client, queue: str) -> None:
    twice = str(uuid4())
    batch = {
        "queue": queue,
        "items": [{"payload": 1}, {"payload": 2, "id": twice}, {"payload": 3, "id": twice}],
    }
    pushed = await client.post("/push/batch", json=batch)
    assert pushed.status_code == 201, pushed.text
    assert pushed.json()["ids"][1:] == [twice, twice]
    assert pushed.json()["created"] == [True, True, False]
    assert (await client.get(f"/items/{twice}")).json()["payload"] == 2
    assert (await client.get(f"/queues/{queue}")).json()["ready"] == 2


async def test_a_batch_completion_takes_a_repeated_id_in_order(client: Client, queue: str) -> None:
    ids = (
        await client.post("/push/batch", json={"queue": queue, "items": [{"payload": 1}, {"payload": 2}]})
    ).json()["ids"]
    popped = (await client.post("/pop", json={"queue": queue, "max_items": 2})).json()["items"]
    token = {i["id"]: i["lease_token"] for i in popped}
    stale = str(uuid4())
    requested = [
        {"id": ids[0], "lease_token": stale},  # refused...
        {"id": ids[0], "lease_token": token[ids[0]]},  # ...then completed
        {"id": ids[0]},  # gone by now
        {"id": ids[1]},
    ]
    response = await client.post("/items/complete", json={"items": requested})
    assert response.status_code == 200, response.text
    assert [r["result"] for r in response.json()["results"]] == [
        "lease_mismatch",
        "completed",
        "not_found",
        "completed",
    ]


# --- bounded waits on a database that stops answering -------------------------------------------


@pytest.fixture
def pg_settings(postgres_url: str) -> Settings:
    return Settings(database_url=postgres_url, db_timeout_seconds=1, sweep=False)


async def test_a_statement_stuck_on_a_lock_answers_503_and_leaves_the_pool_usable(
    pg_settings: Settings, postgres_url: str
) -> None:
    async for client in app_client(pg_settings, None):
        queue = f"t-{uuid4().hex[:12]}"
        assert (await client.post("/push", json={"queue": queue, "payload": 0})).status_code == 201
        holder = await asyncpg.connect(postgres_url)
        try:
            tx = holder.transaction()
            await tx.start()
            await holder.execute("LOCK TABLE sq_items IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            stuck = await asyncio.gather(
                *(client.post("/push", json={"queue": queue, "payload": n}) for n in range(12)),
                client.post("/pop", json={"queue": queue}),
            )
            waited = time.monotonic() - started
            await tx.rollback()
        finally:
            await holder.close()
        for response in stuck:
            body = assert_error(response, 503, "DatabaseUnavailable")
            assert not any(word in body["detail"] for word in DRIVER_WORDS)
        assert waited < 1 + 4, f"503 came after {waited:.1f} s; the timeout is 1 s"  # a bound, generous
        # Every connection the cut-off calls held was closed or is clean: all of them work now.
        answers = await asyncio.gather(
            *(client.post("/push", json={"queue": queue, "payload": n}) for n in range(12))
        )
        assert [a.status_code for a in answers] == [201] * 12
        assert len((await client.post("/pop", json={"queue": queue, "max_items": 20})).json()["items"]) == 13


async def test_a_store_call_cancelled_mid_statement_leaves_no_connection_behind(
    pg_settings: Settings, postgres_url: str
) -> None:
    from simplequeue.main import store_for

    store = store_for(pg_settings.model_copy(update={"db_timeout_seconds": 30, "pool_size": 1}))
    await store.open()
    await store.migrate()
    queue = f"t-{uuid4().hex[:12]}"
    holder = await asyncpg.connect(postgres_url)
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("LOCK TABLE sq_items IN ACCESS EXCLUSIVE MODE")
        pending = asyncio.create_task(store.push_batch([new_item(queue, 1)], skip_existing=True))
        await asyncio.sleep(0.3)  # inside its statement, waiting for the lock
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        await tx.rollback()
        # The pool's only connection was in an unknown state: it must not be handed out again as is.
        assert await store.push_batch([new_item(queue, 2)], skip_existing=True)
        # Whether the cancelled push committed is unknown to its caller (the server may finish a
        # statement whose client has gone, once the lock is free), as after any lost answer.
        popped = await store.pop(queue, 5, 30)
        assert 2 in [item.payload for item in popped]
    finally:
        await holder.close()
        await store.close()


# --- slow clients: cut off within seconds ---------------------------------------------------------


@pytest.fixture
def slow_limits_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    env = {"SIMPLEQUEUE_HEADER_TIMEOUT_SECONDS": "1", "SIMPLEQUEUE_BODY_TIMEOUT_SECONDS": "1"}
    with serving(f"sqlite:///{tmp_path / 'slow.db'}", env=env) as base:
        host, port = base.removeprefix("http://").split(":")
        yield host, int(port)


def _trickle(address: tuple[str, int], chunks: list[bytes], gap: float) -> tuple[bytes, float]:
    """Send chunks `gap` seconds apart, then read whatever comes back until the server closes."""
    started = time.monotonic()
    with socket.create_connection(address, timeout=10) as sock:
        received = b""
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except OSError:
                break  # closed on us: that is the point
            time.sleep(gap)
        while True:
            try:
                data = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not data:
                break
            received += data
    return received, time.monotonic() - started


@pytest.mark.e2e
def test_headers_trickled_in_are_cut_off_with_408(slow_limits_server: tuple[str, int]) -> None:
    request = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"
    answer, took = _trickle(slow_limits_server, [request[i : i + 2] for i in range(0, len(request), 2)], 0.3)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b'"RequestTimeout"' in answer
    assert took < 8  # 1 s allowed; 18 chunks 0.3 s apart would take 5.4 s to send


@pytest.mark.e2e
def test_a_connection_that_sends_nothing_is_closed(slow_limits_server: tuple[str, int]) -> None:
    answer, took = _trickle(slow_limits_server, [], 0)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert took < 8


@pytest.mark.e2e
def test_a_body_trickled_in_is_cut_off_with_408_and_nothing_is_pushed(
    slow_limits_server: tuple[str, int],
) -> None:
    body = b'{"queue": "slow", "payload": "abcdefghijklmnopqrstuvwxyz"}'
    head = (
        b"POST /push HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        % len(body)
    )
    answer, took = _trickle(
        slow_limits_server, [head, *[body[i : i + 4] for i in range(0, len(body), 4)]], 0.3
    )
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"connection: close" in answer.lower()
    assert took < 8

    host, port = slow_limits_server
    assert httpx.get(f"http://{host}:{port}/queues/slow").status_code == 404  # nothing went in


@pytest.mark.e2e
@pytest.mark.parametrize("json_wire", [True, False], ids=["json", "query"])
def test_an_sqs_body_trickled_in_is_cut_off_with_sqs_s_408(
    slow_limits_server: tuple[str, int], json_wire: bool
) -> None:
    # SQS's clients parse SQS's error shapes only: the door's 408 speaks the caller's protocol.
    if json_wire:
        body = b'{"QueueName": "slow-sqs"}'
        kind = b"content-type: application/x-amz-json-1.0\r\nx-amz-target: AmazonSQS.CreateQueue\r\n"
    else:
        body = b"Action=CreateQueue&QueueName=slow-sqs&Version=2012-11-05"
        kind = b"content-type: application/x-www-form-urlencoded\r\n"
    head = b"POST / HTTP/1.1\r\nhost: x\r\n%scontent-length: %d\r\n\r\n" % (kind, len(body))
    answer, _ = _trickle(slow_limits_server, [head, *[body[i : i + 4] for i in range(0, len(body), 4)]], 0.3)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    head_part, _, payload = answer.partition(b"\r\n\r\n")
    if json_wire:
        assert b"x-amzn-query-error: requesttimeout;sender" in head_part.lower()
        assert json.loads(payload)["__type"].endswith("#RequestTimeout")
    else:
        assert b"<Code>RequestTimeout</Code>" in payload
    host, port = slow_limits_server
    assert httpx.get(f"http://{host}:{port}/queues/slow-sqs").status_code == 404  # nothing made


async def test_a_path_nothing_serves_is_404_naming_it(lite: Client) -> None:
    body = assert_error(await lite.get("/nowhere"), 404, "NotFound")
    assert body["detail"] == "nothing is served at /nowhere"
    body = assert_error(await lite.get("/items/not-a-uuid"), 404, "NotFound")
    assert "UUID" in body["detail"]
