"""The hot routes: what the front door serves with plain function calls, and how they read a request.

A worker's loop (pop, complete, fail, extend) and a producer's push are most of what a queue
service answers. Through FastAPI each of them passes some ten ASGI layers, a router that tries the
routes in turn, and a dependency solver that resolves every parameter anew; under load that was a
third of the server's time (see bench/). For these routes the front door (simplequeue.api.front)
looks the method and path up in a small table (`HotRoutes`) and calls the route's hot function
with a `HotCall`. The function reads what it needs itself, in plain code: the body through
`HotCall.body` (parsed and validated in one pass by pydantic-core), a query parameter through
`HotCall.query`, path parameters as the route's path template converted them, the service and the
caller by calling the functions FastAPI's routes depend on. Then it calls the same function as
the route's FastAPI declaration (simplequeue.api.items.endpoints).

The declarations stay FastAPI's: the OpenAPI spec is written from them, and FastAPI serves them
when the front door does not (`QueueApi.hot_operations`). Refusals here take FastAPI's shape (a
RequestValidationError with the error entries FastAPI's would hold, or its 400), so the envelope
(simplequeue.api.errors) answers them as it always has; tests/test_hot_routes.py holds both paths
to the same answers. `check_declared` refuses, when the app is built, a hot function served at
another method or path than its operation's declaration.

Only public APIs are used: FastAPI's exceptions and route declarations (operation id, path,
methods), Starlette's `compile_path` for the path templates, pydantic's models and TypeAdapters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.convertors import Convertor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, compile_path
from starlette.types import Scope

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

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


def _with_prefix(errors: Iterable[Any], *prefix: str | int) -> list[dict[str, Any]]:
    return [{**error, "loc": (*prefix, *error.get("loc", ()))} for error in errors]


@dataclass(slots=True)
class HotCall:
    """One request to a hot route, for its function to read: the request, its whole body (the
    front door has read it) and its path parameters, converted by the route's path template
    ({item_id:uuid} -> a UUID).

    FastAPI reports the errors of every input at once; each hot route has one input that can be
    wrong (a path parameter that does not convert is another route's path, answered by FastAPI
    as 404), so these raise at the first refusal."""

    request: Request
    raw: bytes
    path: Mapping[str, Any]

    def body(self, model: type[M]) -> M:
        """The body as `model`, or FastAPI's refusal of it."""
        if not self.raw:
            raise RequestValidationError([_MISSING_BODY])
        if not is_json(self.request.headers.get("content-type", "")):
            raise RequestValidationError([_NOT_JSON])
        try:
            return model.model_validate_json(self.raw)
        except ValidationError:
            # A body refused here is read again as FastAPI reads it (the standard library's
            # parser, then validation of its values), so that it gets the answer it always got:
            # that parser takes some text pydantic-core's refuses (an escaped lone surrogate,
            # UTF-16), and some messages differ between the two modes. Only refusals pay twice.
            return _as_fastapi_reads(model, self.raw)

    def query(self, name: str, adapter: TypeAdapter[T], default: T) -> T:
        """The query parameter `name` validated by `adapter` (`default` when it is absent), or
        FastAPI's refusal of it."""
        text = self.request.query_params.get(name)
        if text is None:
            return default
        try:
            return adapter.validate_python(text)
        except ValidationError as exc:
            raise RequestValidationError(_with_prefix(exc.errors(include_url=False), "query", name)) from None


def _as_fastapi_reads(model: type[M], raw: bytes) -> M:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        error = {"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([error]) from exc
    except Exception as exc:  # not UTF-8 (nor UTF-16/32), nested too deeply: FastAPI's 400
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc
    try:
        return model.model_validate(parsed, from_attributes=True)  # as FastAPI validates a body
    except ValidationError as exc:
        raise RequestValidationError(_with_prefix(exc.errors(include_url=False), "body")) from None


HotFunction = Callable[[HotCall], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Hot:
    """One hot operation: its operation id, the method and path template it is declared at (as
    in its FastAPI declaration), and the function that serves it."""

    operation_id: str
    method: str
    path: str
    function: HotFunction


def hot_table(operations: Iterable[str], hot: Iterable[Hot]) -> dict[str, Hot]:
    """The hot functions by operation id: one for each of `operations`, and none for another."""
    table: dict[str, Hot] = {}
    for entry in hot:
        if entry.operation_id in table:
            raise ValueError(f"{entry.operation_id}: two hot functions")
        table[entry.operation_id] = entry
    wanted = set(operations)
    if missing := wanted - table.keys():
        raise LookupError(f"hot operations without a hot function: {', '.join(sorted(missing))}")
    if extra := table.keys() - wanted:
        raise LookupError(f"hot functions of operations not declared hot: {', '.join(sorted(extra))}")
    return table


def check_declared(hot: Iterable[Hot], routes: Iterable[BaseRoute]) -> None:
    """Refuses a hot function whose operation no route declares, or declares at another method or
    path: the spec (written from the declaration) would describe another route than the one the
    front door serves."""
    declared = {r.operation_id: r for r in routes if isinstance(r, APIRoute) and r.operation_id}
    for entry in hot:
        route = declared.get(entry.operation_id)
        if route is None:
            raise LookupError(f"{entry.operation_id}: no route declares this hot operation")
        if route.path != entry.path or route.methods != {entry.method}:
            raise ValueError(
                f"{entry.operation_id}: served hot at {entry.method} {entry.path}, "
                f"declared at {', '.join(sorted(route.methods or ()))} {route.path}"
            )


@dataclass(frozen=True, slots=True)
class HotRoute:
    """A hot operation as the front door matches it."""

    hot: Hot
    template: str  # the path as the access log and the metrics name it: /items/{item_id}
    pattern: re.Pattern[str]
    convertors: Mapping[str, Convertor[Any]]


class HotRoutes:
    """The hot routes by method and path: exact paths in a dict, the others by their template,
    matched and converted as Starlette's router would (`compile_path`)."""

    def __init__(self, hot: Iterable[Hot]) -> None:
        self._exact: dict[tuple[str, str], HotRoute] = {}
        self._templated: list[HotRoute] = []
        for entry in hot:
            pattern, template, convertors = compile_path(entry.path)
            route = HotRoute(entry, template, pattern, convertors)
            if convertors:
                self._templated.append(route)
            else:
                self._exact[entry.method, entry.path] = route

    def __iter__(self) -> Iterator[HotRoute]:
        yield from self._exact.values()
        yield from self._templated

    def match(self, scope: Scope) -> tuple[HotRoute, dict[str, Any]] | None:
        method, path = scope["method"], scope["path"]
        route = self._exact.get((method, path))
        if route is not None:
            return route, {}
        for route in self._templated:
            if route.hot.method == method and (found := route.pattern.match(path)):
                convert = route.convertors
                return route, {key: convert[key].convert(value) for key, value in found.groupdict().items()}
        return None
