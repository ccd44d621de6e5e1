"""The hot routes, called straight from the front door: a plain function call per request.

A worker's loop (pop, complete, fail, extend) and a producer's push are most of what a queue
service answers. Through FastAPI each of them passes some ten ASGI layers, a router that tries
the routes in turn, and a dependency solver that resolves every parameter anew; under load that
was a third of the server's time (see bench/). For these routes the front door (simplequeue.api.
front) instead matches the method and path itself and calls the route's own function, binding
its parameters the way FastAPI would: the body parsed and validated in one pass by pydantic-core
(`model_validate_json`), path and query parameters validated by their declared types, the
service and the caller by calling their dependency functions. Validation errors take FastAPI's
shape, so the envelope (simplequeue.api.errors) reads them as it always has.

The routes are still declared with FastAPI, which still writes the OpenAPI spec from them, and a
route that this module cannot bind (a model as its answer, a parameter of another kind) is
refused when the app is built rather than served differently.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from fastapi import HTTPException, params
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Scope


@dataclass(slots=True)
class Incoming:
    """One request, as the binders read it; each adds what it refuses to `errors`."""

    request: Request
    body: bytes
    path: Mapping[str, Any]
    errors: list[dict[str, Any]]


Binder = Callable[[Incoming], Any]
"""Reads one parameter from the request; adds what it refuses to `Incoming.errors`."""
Dependency = Callable[[Request], Awaitable[Any]]

_MISSING_BODY = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
_NOT_JSON = {
    # What FastAPI's validation says of a body it did not parse as JSON (its Content-Type is not
    # JSON); the envelope answers 415 for it.
    "type": "model_attributes_type",
    "loc": ("body",),
    "msg": "Input should be a valid dictionary or object to extract fields from",
    "input": None,
}


def is_json(content_type: str) -> bool:
    """FastAPI's test: application/json, or application/<anything>+json, parameters ignored."""
    media = content_type.partition(";")[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _with_prefix(error: Any, *prefix: str | int) -> dict[str, Any]:
    found = dict(error)
    found["loc"] = (*prefix, *found.get("loc", ()))
    return found


def _body_binder(model: type[BaseModel]) -> Binder:
    def bind(incoming: Incoming) -> Any:
        if not incoming.body:
            incoming.errors.append(_MISSING_BODY)
            return None
        if not is_json(incoming.request.headers.get("content-type", "")):
            incoming.errors.append(_NOT_JSON)
            return None
        try:
            return model.model_validate_json(incoming.body)
        except ValidationError:
            # A body refused here is read again as FastAPI reads it (the standard library's
            # parser, then validation of its values), so that it gets the answer it always got:
            # that parser takes some text pydantic-core's refuses (an escaped lone surrogate,
            # UTF-16), and some messages differ between the two modes. Only refusals pay twice.
            return _as_fastapi_reads(model, incoming)

    return bind


def _as_fastapi_reads(model: type[BaseModel], incoming: Incoming) -> Any:
    try:
        parsed = json.loads(incoming.body)
    except json.JSONDecodeError as exc:
        error = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {}}
        incoming.errors.append(error)
        return None
    except (RecursionError, UnicodeDecodeError) as exc:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc
    try:
        return model.model_validate(parsed, from_attributes=True)  # as FastAPI validates a body
    except ValidationError as exc:
        incoming.errors.extend(_with_prefix(e, "body") for e in exc.errors(include_url=False))
        return None


def _path_binder(name: str) -> Binder:
    def bind(incoming: Incoming) -> Any:
        return incoming.path[name]  # converted by the route's own convertor ({item_id:uuid})

    return bind


def _query_binder(name: str, annotation: Any, default: Any) -> Binder:
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)

    def bind(incoming: Incoming) -> Any:
        text = incoming.request.query_params.get(name)
        if text is None:
            return default
        try:
            return adapter.validate_python(text)
        except ValidationError as exc:
            incoming.errors.extend(_with_prefix(e, "query", name) for e in exc.errors(include_url=False))
            return None

    return bind


def _request(incoming: Incoming) -> Any:
    return incoming.request


@dataclass(frozen=True, slots=True)
class HotRoute:
    """One route's function, its dependencies (plain calls) and a binder per other parameter, in
    FastAPI's order: dependencies first (a service that is not ready answers 503 whatever the
    body), then path, query and body."""

    route: APIRoute
    method: str
    dependencies: tuple[tuple[str, Dependency], ...]
    binders: tuple[tuple[str, Binder], ...]

    @property
    def template(self) -> str:
        return self.route.path_format

    async def call(self, request: Request, body: bytes, path: Mapping[str, Any]) -> Response:
        kwargs = {name: await call(request) for name, call in self.dependencies}
        incoming = Incoming(request, body, path, [])
        kwargs.update((name, bind(incoming)) for name, bind in self.binders)
        if incoming.errors:
            raise RequestValidationError(incoming.errors)
        response: Response = await self.route.endpoint(**kwargs)
        return response


def hot_route(route: APIRoute) -> HotRoute:
    """The route's function, bound for plain calls; TypeError for a route this cannot bind."""
    endpoint = route.endpoint
    if not inspect.iscoroutinefunction(endpoint):
        raise TypeError(f"{route.path}: a hot route must be async")
    hints = get_type_hints(endpoint, include_extras=True)
    if hints.get("return") is not Response:
        raise TypeError(f"{route.path}: a hot route answers a Response (FastAPI would validate a model)")
    if not route.methods or len(route.methods) != 1:
        raise TypeError(f"{route.path}: a hot route serves one method")
    (method,) = route.methods
    order = {"request": 0, "path": 1, "query": 2, "body": 3}
    dependencies: list[tuple[str, Dependency]] = []
    found: list[tuple[int, str, Binder]] = []
    for name, parameter in inspect.signature(endpoint).parameters.items():
        kind, read = _reader_for(route, name, hints[name], parameter.default)
        if kind == "dependency":
            dependencies.append((name, read))
        else:
            found.append((order[kind], name, read))
    found.sort(key=lambda entry: entry[0])  # stable: declaration order within a kind
    return HotRoute(route, method, tuple(dependencies), tuple((name, bind) for _, name, bind in found))


def _reader_for(route: APIRoute, name: str, annotation: Any, default: Any) -> tuple[str, Any]:
    """What the parameter is (a dependency, the request, path, query or body) and how to read it."""
    if annotation is Request:
        return "request", _request
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
        for extra in extras:
            if isinstance(extra, params.Depends) and extra.dependency is not None:
                if not inspect.iscoroutinefunction(extra.dependency):
                    raise TypeError(f"{route.path}: {name}'s dependency must be an async function")
                return "dependency", extra.dependency
            if isinstance(extra, params.Path) and name in route.param_convertors:
                return "path", _path_binder(name)
            if isinstance(extra, params.Query):
                if default is inspect.Parameter.empty:
                    raise TypeError(f"{route.path}: hot routes take optional query parameters only")
                return "query", _query_binder(name, base, default)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "body", _body_binder(annotation)
    raise TypeError(f"{route.path}: cannot bind parameter {name!r} of a hot route")


class HotRoutes:
    """The hot routes by method and path: exact paths in a dict, the others by their pattern."""

    def __init__(self, routes: list[BaseRoute], operation_ids: frozenset[str]) -> None:
        self._exact: dict[tuple[str, str], HotRoute] = {}
        self._patterns: list[tuple[str, re.Pattern[str], HotRoute]] = []
        for route in routes:
            if isinstance(route, APIRoute) and route.operation_id in operation_ids:
                hot = hot_route(route)
                if route.param_convertors:
                    self._patterns.append((hot.method, route.path_regex, hot))
                else:
                    self._exact[hot.method, route.path] = hot
        missing = operation_ids - {h.route.operation_id for h in self}
        if missing:
            raise LookupError(f"no such routes to serve hot: {', '.join(sorted(missing))}")

    def __iter__(self) -> Iterator[HotRoute]:
        yield from self._exact.values()
        yield from (hot for _, _, hot in self._patterns)

    def match(self, scope: Scope) -> tuple[HotRoute, dict[str, Any]] | None:
        method, path = scope["method"], scope["path"]
        hot = self._exact.get((method, path))
        if hot is not None:
            return hot, {}
        for wanted, pattern, hot in self._patterns:
            if wanted == method and (found := pattern.match(path)):
                # Converted as Starlette's router converts them ({item_id:uuid} -> UUID).
                convertors = hot.route.param_convertors
                return hot, {key: convertors[key].convert(value) for key, value in found.groupdict().items()}
        return None
