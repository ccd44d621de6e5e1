"""The hot routes, served by the front door (simplequeue.api.hot) through their hot functions
(simplequeue.api.items.endpoints), answer exactly as FastAPI's own routing and dependency solving
would: the same requests go to the app as it runs and to one whose front door serves nothing
itself, and every answer must match (status and body; request ids and generated ids aside).
Valid requests are covered by the rest of the API suite, which runs through the front door; here
the point is every way a request can be wrong. Then: each hot function stands for its declaration,
and the hot path reads requests with public APIs only (no FastAPI internals)."""

from __future__ import annotations

import ast
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
import simplequeue.api
from asgi_lifespan import LifespanManager
from fastapi import Response
from simplequeue.api.dependencies import get_service
from simplequeue.api.errors import Forbidden
from simplequeue.api.hot import Hot, HotCall, HotRoutes, check_declared, hot_table, is_json
from simplequeue.api.items.endpoints import HOT
from simplequeue.api.items.routes import HOT_OPERATIONS
from simplequeue.api.items.schemas import PoppedItem
from simplequeue.api.responses import with_payload
from simplequeue.api.routes import router
from simplequeue.domain import LeasedItem
from simplequeue.main import create_app
from simplequeue.settings import Settings

from tests.engines import FakeClock

ITEM = "6f1c0b4e-8d0a-4c53-9d0e-3b1f6f0c2a11"
TOKEN = "0b7e3a52-6a0d-4d8e-b8a4-9e1f2c3d4e5f"
REF = '{"id": "' + ITEM + '", "lease_token": "' + TOKEN + '"}'
JSON = {"content-type": "application/json"}
DEEP = '{"payload": ' + "[" * 5000 + "]" * 5000 + "}"

# (method, path, headers, body): every hot route, with bodies and parameters that are wrong in
# each way a client can get them wrong, and a few right ones.
CASES: list[tuple[str, str, dict[str, str], str | bytes | None]] = [
    # push
    ("POST", "/push", JSON, '{"payload": {"a": 1}, "queue": "hot", "id": "' + ITEM + '"}'),
    ("POST", "/push", JSON, '{"payload": {"a": 1}, "queue": "hot", "id": "' + ITEM + '"}'),  # 409
    ("POST", "/push", {}, '{"payload": 1}'),
    ("POST", "/push", {"content-type": "text/plain"}, '{"payload": 1}'),
    ("POST", "/push", {"content-type": "application/json-patch"}, '{"payload": 1}'),
    ("POST", "/push", {"content-type": "application/vnd.sq+json; charset=utf-8"}, '{"payload": 1}'),
    ("POST", "/push", JSON, ""),
    ("POST", "/push", {}, None),
    ("POST", "/push", JSON, "{"),
    ("POST", "/push", JSON, '{"payload": 1,}'),
    ("POST", "/push", JSON, "[]"),
    ("POST", "/push", JSON, "null"),
    ("POST", "/push", JSON, "{}"),
    ("POST", "/push", JSON, '{"payload": 1, "queue": "no spaces"}'),
    ("POST", "/push", JSON, '{"payload": 1, "colour": "red"}'),
    ("POST", "/push", JSON, '{"payload": 1, "priority": true, "delay_seconds": "5"}'),
    ("POST", "/push", JSON, '{"payload": 1, "priority": 1.5}'),
    ("POST", "/push", JSON, '{"payload": 1, "created_at": 0}'),
    ("POST", "/push", JSON, '{"payload": 1, "created_at": "2026-13-01T00:00:00Z"}'),
    ("POST", "/push", JSON, '{"payload": 1, "id": "not-a-uuid"}'),
    ("POST", "/push", JSON, '{"payload": 1, "group": "trailing ", "dedup_key": ""}'),
    ("POST", "/push", JSON, '{"payload": NaN}'),
    ("POST", "/push", JSON, '{"payload": 1e999}'),
    ("POST", "/push", JSON, '{"payload": "\\ud800"}'),
    ("POST", "/push", JSON, '{"payload": "\\ud800", "colour": 1}'),
    ("POST", "/push", JSON, '{"payload": "nul \\u0000 inside"}'),
    ("POST", "/push", JSON, '{"payload": 1, "payload": 2}'),
    ("POST", "/push", JSON, DEEP),
    ("POST", "/push", JSON, b'{"payload": "\xff"}'),
    ("POST", "/push", JSON, '{"payload": 1}'.encode("utf-16")),
    ("POST", "/push", JSON, '{"payload": [' + ",".join(["1"] * 100) + "]}"),
    # push/batch
    ("POST", "/push/batch", JSON, '{"items": []}'),
    ("POST", "/push/batch", JSON, '{"items": [{"payload": 1}, {"payload": 2, "x": 1}]}'),
    ("POST", "/push/batch", JSON, '{"items": [{"payload": 1, "id": "' + ITEM + '"}]}'),
    ("POST", "/push/batch", {}, '{"items": [{"payload": 1}]}'),
    # pop
    ("POST", "/pop", JSON, '{"queue": "hot", "max_items": 0}'),
    ("POST", "/pop", JSON, '{"queue": "hot", "max_items": "1", "wait_seconds": 21}'),
    ("POST", "/pop", JSON, '{"queue": "hot", "lease_seconds": 0}'),
    ("POST", "/pop", JSON, '{"queue": "hot", "complete": [{"id": "' + ITEM + '"}]}'),
    ("POST", "/pop", JSON, '{"queue": "hot", "complete": [{"id": "' + ITEM + '", "lease_token": "x"}]}'),
    (
        "POST",
        "/pop",
        JSON,
        '{"queue": "empty", "complete": [{"id": "' + ITEM + '", "lease_token": "' + TOKEN + '"}]}',
    ),
    ("POST", "/pop", JSON, '{"queue": "nothing-here"}'),
    ("POST", "/pop", {}, None),
    ("POST", "/pop", JSON, ""),
    # complete
    ("DELETE", f"/items/{ITEM}?lease_token={TOKEN}", {}, None),
    ("DELETE", f"/items/{ITEM}?lease_token=nope", {}, None),
    ("DELETE", "/items/6f1c0b4e-8d0a-4c53-9d0e-3b1f6f0c2a1", {}, None),
    ("DELETE", "/items/not-a-uuid", {}, None),
    ("DELETE", "/items/00000000-0000-0000-0000-000000000000", {}, None),
    ("POST", "/items/complete", JSON, '{"items": [{"id": "' + ITEM + '", "lease_token": "' + TOKEN + '"}]}'),
    ("POST", "/items/complete", JSON, '{"items": [{"id": "x"}], "more": 1}'),
    ("POST", "/items/complete", JSON, "[1, 2]"),
    # fail, extend, get
    ("POST", f"/items/{ITEM}/fail", JSON, '{"error": "boom", "lease_token": "' + TOKEN + '"}'),
    ("POST", f"/items/{ITEM}/fail", JSON, '{"error": "", "retry": "no", "retry_after_seconds": -1}'),
    ("POST", f"/items/{ITEM}/fail", JSON, '{"lease_token": "' + TOKEN + '"}'),
    ("POST", f"/items/{ITEM}/fail", {"content-type": "text/plain"}, "boom"),
    ("POST", "/items/not-a-uuid/fail", JSON, '{"error": "boom"}'),
    ("POST", f"/items/{ITEM}/extend", JSON, '{"lease_token": "' + TOKEN + '", "lease_seconds": 0}'),
    ("POST", f"/items/{ITEM}/extend", JSON, '{"lease_token": "' + TOKEN + '"}'),
    ("POST", f"/items/{ITEM}/extend", JSON, "{}"),
    ("GET", f"/items/{ITEM}", {}, None),
    ("GET", "/items/00000000-0000-0000-0000-000000000000", {}, None),
    ("GET", f"/items/{ITEM.upper()}", {}, None),
    ("DELETE", f"/items/{ITEM}?lease_token=", {}, None),
    ("DELETE", f"/items/{ITEM}?lease_token={TOKEN}&lease_token=nope", {}, None),
    # methods and paths near the hot ones (answered by FastAPI in both apps)
    ("GET", "/push", {}, None),
    ("PUT", f"/items/{ITEM}", JSON, "{}"),
    ("POST", "/push/", JSON, '{"payload": 1}'),
]


def _stable(body: Any) -> Any:
    """An answer with what differs between two runs (ids, times, lease tokens) taken out."""
    if isinstance(body, dict):
        return {
            k: _stable(v)
            for k, v in body.items()
            if k not in {"id", "ids", "created_at", "lease_token", "lease_expires_at"}
        }
    if isinstance(body, list):
        return [_stable(v) for v in body]
    return body


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """The app as it runs, and the same app with no hot routes (FastAPI serves everything)."""
    clients = []
    managers = []
    clock = FakeClock()  # one for both: two clocks made across a second boundary answer other times
    for name, hot in (("hot", True), ("plain", False)):
        settings = Settings(
            database_url=f"sqlite:///{tmp_path / name}.db",
            max_payload_bytes=1024,
            max_request_bytes=200_000,
            sweep=False,
        )
        app = create_app(settings, clock=clock)
        if not hot:
            app.hot_operations.clear()
        manager = LifespanManager(app)
        await manager.__aenter__()
        managers.append(manager)
        transport = httpx.ASGITransport(app=manager.app)
        clients.append(httpx.AsyncClient(transport=transport, base_url="http://sq"))
    try:
        yield clients[0], clients[1]
    finally:
        for client in clients:
            await client.aclose()
        for manager in managers:
            await manager.__aexit__(None, None, None)


async def test_hot_routes_answer_as_fastapi_does(pair: tuple[httpx.AsyncClient, httpx.AsyncClient]) -> None:
    hot, plain = pair
    for method, path, headers, body in CASES:
        answers = []
        for client in (hot, plain):
            response = await client.request(method, path, headers=headers, content=body)
            parsed = response.json() if response.content else None
            answers.append((response.status_code, _stable(parsed), response.headers.get("allow")))
        assert answers[0] == answers[1], f"{method} {path} {body!r:.200}"


async def test_every_hot_route_is_served_by_the_front_door(tmp_path: Path) -> None:
    """A dependency override reaches FastAPI's dependency solver only: the hot functions call the
    service's function themselves and ignore it, which tells the two paths apart from outside."""
    served = HotRoutes(HOT)
    assert {route.hot.operation_id for route in served} == HOT_OPERATIONS
    assert served.match({"type": "http", "method": "POST", "path": "/pop"}) is not None
    matched = served.match({"type": "http", "method": "DELETE", "path": f"/items/{ITEM}"})
    assert matched is not None
    assert matched[0].template == "/items/{item_id}"
    assert matched[1] == {"item_id": UUID(ITEM)}
    assert served.match({"type": "http", "method": "DELETE", "path": "/items/not-a-uuid"}) is None
    assert served.match({"type": "http", "method": "PUT", "path": f"/items/{ITEM}"}) is None
    assert served.match({"type": "http", "method": "GET", "path": "/queues"}) is None

    async def overridden() -> None:
        raise Forbidden("solved by FastAPI")

    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'o.db'}", sweep=False), clock=FakeClock())
    app.dependency_overrides[get_service] = overridden
    ref = {"id": ITEM, "lease_token": TOKEN}
    each_hot_route = [
        ("POST", "/push", {"queue": "q", "payload": 1}, 201),
        ("POST", "/push/batch", {"queue": "q", "items": [{"payload": 2}]}, 201),
        ("POST", "/pop", {"queue": "q"}, 200),
        ("DELETE", f"/items/{ITEM}?lease_token={TOKEN}", None, 404),
        ("POST", "/items/complete", {"items": [ref]}, 200),
        ("POST", f"/items/{ITEM}/fail", {"error": "boom", "lease_token": TOKEN}, 404),
        ("POST", f"/items/{ITEM}/extend", {"lease_token": TOKEN, "lease_seconds": 5}, 404),
        ("GET", f"/items/{ITEM}", None, 404),
    ]
    assert len(each_hot_route) == len(HOT_OPERATIONS)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sq") as client:
            for method, path, body, status in each_hot_route:
                response = await client.request(method, path, json=body)
                assert response.status_code == status, (method, path, response.text)
            assert (await client.get("/queues")).json()["detail"] == "solved by FastAPI"


async def _answer(call: HotCall) -> Response:
    return Response()


def test_every_hot_operation_has_its_hot_function_at_its_declared_method_and_path() -> None:
    assert set(hot_table(HOT_OPERATIONS, HOT)) == HOT_OPERATIONS
    check_declared(HOT, router.routes)

    with pytest.raises(LookupError, match="without a hot function: getItem"):
        hot_table(HOT_OPERATIONS, [h for h in HOT if h.operation_id != "getItem"])
    with pytest.raises(LookupError, match="not declared hot: listQueues"):
        hot_table(HOT_OPERATIONS, [*HOT, Hot("listQueues", "GET", "/queues", _answer)])
    with pytest.raises(ValueError, match="two hot functions"):
        hot_table(HOT_OPERATIONS, [*HOT, HOT[0]])

    refused = [
        Hot("push", "PUT", "/push", _answer),  # another method
        Hot("getItem", "GET", "/items/{item_id}", _answer),  # another template (no :uuid)
        Hot("failItem", "POST", "/items/{item_id:uuid}/extend", _answer),  # another route's path
    ]
    for wrong in refused:
        with pytest.raises(ValueError, match=f"{wrong.operation_id}: served hot at"):
            check_declared([wrong], router.routes)
    with pytest.raises(LookupError, match="noSuchThing: no route declares"):
        check_declared([Hot("noSuchThing", "POST", "/push", _answer)], router.routes)


def test_an_app_whose_hot_function_disagrees_with_its_declaration_is_refused(tmp_path: Path) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'r.db'}", sweep=False), clock=FakeClock())
    app.hot_functions["push"] = Hot("push", "POST", "/push/", _answer)
    with pytest.raises(ValueError, match="push: served hot at POST /push/, declared at POST /push"):
        app.build_middleware_stack()


def test_an_operation_asked_to_be_hot_without_a_hot_function_is_served_by_fastapi(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'w.db'}", sweep=False), clock=FakeClock())
    app.hot_operations.add("listQueues")
    with caplog.at_level(logging.WARNING, logger="simplequeue"):
        app.build_middleware_stack()
    assert "operation listQueues has no hot function: FastAPI serves it" in caplog.text


FASTAPI_INTERNALS = (
    "fastapi.params",
    "fastapi.dependencies",
    "fastapi._compat",
    "fastapi.utils",
    "dependant",
    "solve_dependencies",
)
ROUTE_INTERNALS = ("param_convertors", "path_regex")
KNOWN = {
    # The 405 answer's Allow header (every method served at the path), not the hot path: it reads
    # Starlette's compiled route pattern; out of this module's reach for now.
    ("errors.py", "path_regex"),
}


def test_the_api_uses_no_fastapi_internals() -> None:
    """No module of simplequeue.api imports from FastAPI's internals (parameter declarations,
    the dependency solver, its compatibility layer) or reads a route's compiled path: what the hot
    path needs it reads from the request itself, with public APIs."""
    folder = Path(simplequeue.api.__file__).parent
    modules = sorted(folder.rglob("*.py"))
    assert len(modules) > 10
    found = []
    for module in modules:
        text = module.read_text()
        name = str(module.relative_to(folder))
        found += [(name, word) for word in (*FASTAPI_INTERNALS, *ROUTE_INTERNALS) if word in text]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            found += [(name, m) for m in imported if m.startswith("fastapi.") and _internal(m)]
    assert set(found) - KNOWN == set()
    assert set(found) >= KNOWN, "a known use is gone: take it off KNOWN"


def _internal(module: str) -> bool:
    """fastapi.params, fastapi.dependencies(.*), and anything private (fastapi._compat)."""
    parts = module.split(".")
    return parts[1] in {"params", "dependencies"} or any(part.startswith("_") for part in parts)


@pytest.mark.parametrize(
    ("content_type", "json_"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/problem+json", True),
        ("application/json-patch", False),
        ("text/json", False),
        ("", False),
    ],
)
def test_which_content_types_are_json(content_type: str, json_: bool) -> None:
    assert is_json(content_type) is json_


@pytest.mark.parametrize("group", [None, 'é\n"\x7f\u2028'])
@pytest.mark.parametrize("microsecond", [0, 120_000, 987_654])
def test_a_popped_item_is_written_as_its_model_serializes_it(group: str | None, microsecond: int) -> None:
    # PoppedItem.json_of writes the answer without building the model: it must be the model's text.
    at = datetime(2026, 1, 2, 3, 4, 5, microsecond, tzinfo=UTC)
    item = LeasedItem(
        id=UUID(ITEM),
        queue="wörk",
        payload_json='{"n": [1, "two"]}',
        created_at=at,
        attempts=3,
        lease_token=UUID(TOKEN),
        lease_expires_at=at + timedelta(seconds=30),
        priority=-2,
        group=group,
        attributes_json='{"a":{"data_type":"String","string_value":"x"}}',
        seq=7,
    )
    model = PoppedItem.model_construct(
        id=item.id,
        queue=item.queue,
        created_at=item.created_at,
        attempts=item.attempts,
        lease_token=item.lease_token,
        lease_expires_at=item.lease_expires_at,
        priority=item.priority,
        group=item.group,
        payload=None,
        attributes=None,
    )
    assert PoppedItem.json_of(item) == with_payload(model, item.payload_json, attributes=item.attributes_json)
