"""The hot routes, served by the front door (simplequeue.api.hot), which reads their inputs itself,
answer exactly as FastAPI's own routing and dependency solving would: the same requests go to the
app as it runs and to one whose front door serves nothing itself, and every answer must match
(status and body; request ids and generated ids aside). Valid requests are covered by the rest of
the API suite, which runs through the front door; here the point is every way a request can be
wrong. Then: the routes declared hot are the ones served hot, a hot route whose inputs the hot
path cannot read as FastAPI does is refused when the app is built, and the API uses public APIs
only (no FastAPI internals, no Starlette route's compiled path)."""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID

import httpx
import pytest
import simplequeue.api
from asgi_lifespan import LifespanManager
from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi import Path as PathParameter
from simplequeue.api.auth import Caller
from simplequeue.api.dependencies import ServiceDep, get_service
from simplequeue.api.errors import Forbidden
from simplequeue.api.hot import HotRoutes, hot, is_json
from simplequeue.api.items.schemas import PoppedItem, PushRequest
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


# Each hot operation, by its operation id, with a request it answers and the status of that answer.
EACH_HOT_ROUTE: dict[str, tuple[str, str, Any, int]] = {
    "push": ("POST", "/push", {"queue": "q", "payload": 1}, 201),
    "pushBatch": ("POST", "/push/batch", {"queue": "q", "items": [{"payload": 2}]}, 201),
    "pop": ("POST", "/pop", {"queue": "q"}, 200),
    "completeItem": ("DELETE", f"/items/{ITEM}?lease_token={TOKEN}", None, 404),
    "completeItems": ("POST", "/items/complete", {"items": [{"id": ITEM, "lease_token": TOKEN}]}, 200),
    "failItem": ("POST", f"/items/{ITEM}/fail", {"error": "boom", "lease_token": TOKEN}, 404),
    "extendLease": ("POST", f"/items/{ITEM}/extend", {"lease_token": TOKEN, "lease_seconds": 5}, 404),
    "getItem": ("GET", f"/items/{ITEM}", None, 404),
}


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
    for name, served_hot in (("hot", True), ("plain", False)):
        settings = Settings(
            database_url=f"sqlite:///{tmp_path / name}.db",
            max_payload_bytes=1024,
            max_request_bytes=200_000,
            sweep=False,
        )
        app = create_app(settings, clock=clock)
        app.serve_hot = served_hot
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
    served = HotRoutes(router.routes)
    assert sorted(route.name for route in served) == sorted(EACH_HOT_ROUTE)
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
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sq") as client:
            for method, path, body, status in EACH_HOT_ROUTE.values():
                response = await client.request(method, path, json=body)
                assert response.status_code == status, (method, path, response.text)
            assert (await client.get("/queues")).json()["detail"] == "solved by FastAPI"


async def paged(request: Request, size: int = 10) -> int:
    """A dependency of more than the request (annotations are read in the module's namespace)."""
    return size


def _refused(declare: Any) -> str:
    """Why the app refuses to build a hot route declared by `declare(router)`."""
    declared = APIRouter()
    declare(declared)
    with pytest.raises(TypeError) as refusal:
        HotRoutes(declared.routes)
    return str(refusal.value)


def test_a_hot_route_whose_inputs_the_hot_path_cannot_read_is_refused() -> None:
    def header(r: APIRouter) -> None:
        @r.get("/h")
        @hot
        async def read(tag: Annotated[str, Header()]) -> Response:
            return Response()

    def embedded_body(r: APIRouter) -> None:
        @r.post("/b")
        @hot
        async def read(body: Annotated[PushRequest, Body(embed=True)]) -> Response:
            return Response()

    def two_bodies(r: APIRouter) -> None:
        @r.post("/b")
        @hot
        async def read(one: PushRequest, two: PushRequest) -> Response:
            return Response()

    def default_style(r: APIRouter) -> None:
        @r.get("/q")
        @hot
        async def read(n: int = Query(1)) -> Response:
            return Response()

    def alias(r: APIRouter) -> None:
        @r.get("/q")
        @hot
        async def read(n: Annotated[int, Query(alias="m")] = 1) -> Response:
            return Response()

    def a_dependency_of_more(r: APIRouter) -> None:
        @r.get("/d")
        @hot
        async def read(size: Annotated[int, Depends(paged)]) -> Response:
            return Response()

    def a_list_query(r: APIRouter) -> None:
        @r.get("/q")
        @hot
        async def read(tags: Annotated[list[str] | None, Query()] = None) -> Response:
            return Response()

    def keyword_only(r: APIRouter) -> None:
        @r.get("/k")
        @hot
        async def read(*, n: Annotated[int, Query()] = 1) -> Response:
            return Response()

    def a_model_answered(r: APIRouter) -> None:
        @r.get("/m")
        @hot
        async def read(sq: ServiceDep) -> dict[str, int]:
            return {}

    assert "parameter tag: not an input the hot path reads" in _refused(header)
    assert "parameter body: not an input the hot path reads" in _refused(embedded_body)
    assert "parameter two: a hot route reads one body" in _refused(two_bodies)
    assert "parameter n: declare it with Annotated" in _refused(default_style)
    assert "parameter n: not an input the hot path reads" in _refused(alias)
    assert "parameter size: a hot route's dependency is an async function of the Request" in _refused(
        a_dependency_of_more
    )
    assert "parameter tags: not an input the hot path reads" in _refused(a_list_query)
    assert "parameter n: the hot path passes a route's parameters by position" in _refused(keyword_only)
    assert "/m: a hot route answers a Response" in _refused(a_model_answered)


async def test_a_route_added_hot_by_whoever_builds_the_app_is_served_by_the_front_door(
    tmp_path: Path,
) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'a.db'}", sweep=False), clock=FakeClock())

    @app.get("/extra/{n:int}")
    @hot
    async def extra(
        n: Annotated[int, PathParameter(ge=1)],
        request: Request,
        sq: ServiceDep,
        who: Caller,
        label: Annotated[str, Query()],
        times: Annotated[int, Query(le=10)] = 2,
    ) -> Response:
        return Response(f"{label}: {n * times} {request.url.path} {who.is_admin}")

    async def overridden() -> None:
        raise Forbidden("solved by FastAPI")

    app.dependency_overrides[get_service] = overridden
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sq") as client:
            assert (await client.get("/extra/21?label=a")).text == "a: 42 /extra/21 True"
            assert (await client.get("/extra/2?times=4&label=b")).text == "b: 8 /extra/2 True"
            # An input the hot path declines is FastAPI's to answer (its solver meets the override).
            for declined in (
                "/extra/2?times=x&label=a",
                "/extra/2",
                "/extra/0?label=a",
                "/extra/2?times=11&label=a",
            ):
                assert (await client.get(declined)).json()["detail"] == "solved by FastAPI", declined


FASTAPI_INTERNALS = (
    "fastapi.params",
    "fastapi.dependencies",
    "fastapi._compat",
    "fastapi.utils",
    "dependant",
    "solve_dependencies",
)
ROUTE_INTERNALS = ("param_convertors", "path_regex")


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
    assert found == []


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
        fairness_key="tenant-ü",
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
        fairness_key=item.fairness_key,
        payload=None,
        attributes=None,
    )
    assert PoppedItem.json_of(item) == with_payload(model, item.payload_json, attributes=item.attributes_json)
